//! Staging memory: page-aligned anonymous mappings the transport registers, carved
//! into per-stream slot rings.
//!
//! The transport takes the mapping ([`crate::transport::Transport::register`]) and
//! keeps it until it is dropped, after its registrations: the engine, which owns the
//! transport, reaches the slots through the address it read before handing it over
//! (the mapping never moves).

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

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty (never: at least a page is mapped).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

// SAFETY: the anonymous mapping is unmapped only when the MmapMut inside is dropped, with
// the Staging; it never moves, and Staging hands out no way to remap or shrink it.
unsafe impl provider::StableMemory for Staging {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.map.as_mut_ptr()
    }
    fn stable_len(&self) -> usize {
        self.map.len()
    }
}

impl std::fmt::Debug for Staging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Staging({:#x}+{})", self.addr(), self.len())
    }
}
