//! Page-aligned, zeroed memory that the device reads and writes: WQE rings, CQE rings
//! and doorbell records.
//!
//! libmlx5 allocates these with posix_memalign and the kernel pins them; here they are
//! anonymous mappings, which are page-aligned and zero-filled by construction and never
//! move, so their addresses can be handed to the device for the buffer's lifetime.

use std::ptr::NonNull;

use nix::errno::Errno;

/// A page-aligned buffer shared with the device.
#[derive(Debug)]
pub struct DmaBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer is plain memory; concurrent access with the device goes through
// raw pointers with explicit volatile/atomic operations and fences at each use.
unsafe impl Send for DmaBuf {}
// SAFETY: as above.
unsafe impl Sync for DmaBuf {}

impl DmaBuf {
    /// Allocates `len` bytes (rounded up to whole pages), zeroed.
    pub fn new(len: usize) -> Result<DmaBuf, Errno> {
        let page = page_size();
        let len = len.max(1).div_ceil(page) * page;
        // SAFETY: an anonymous private mapping at an address the kernel chooses
        // aliases nothing.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE,
                       libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        Ok(DmaBuf { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
    }

    /// Start address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Start address as the device sees it (the process's virtual address).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true; present for clippy's len_without_is_empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DmaBuf {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe the mapping created in `new`, owned by self.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}
