//! Staging memory: page-aligned anonymous mappings the transport registers, carved
//! into per-stream slot rings.

use std::io;

use memmap2::MmapMut;

/// One anonymous, page-aligned, zero-filled mapping.
pub struct Staging {
    map: MmapMut,
}

impl Staging {
    /// Maps at least `bytes` (at least one page).
    pub fn new(bytes: usize) -> io::Result<Staging> {
        Ok(Staging { map: MmapMut::map_anon(bytes.max(4096))? })
    }

    /// Start address (page aligned).
    pub fn addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }

    /// Start pointer.
    pub fn ptr(&mut self) -> *mut u8 {
        self.map.as_mut_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty (never: at least a page is mapped).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl std::fmt::Debug for Staging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Staging({:#x}+{})", self.addr(), self.len())
    }
}
