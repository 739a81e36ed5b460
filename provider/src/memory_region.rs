//! Owned registered memory: a buffer and its registration, made and freed together.
//!
//! `ibv_reg_mr` needs memory that stays mapped for as long as the registration lives,
//! because the device (and, with remote access, every peer) may read or write it at any
//! time. [`Pd::alloc_mr`] gives the one shape for which that is automatic: the provider
//! allocates the memory (page-aligned, zeroed anonymous memory, like the rings), owns
//! it, and deregisters before it frees it. It is the `ibverbs` crate's
//! `MemoryRegion<T>` for bytes.

use std::ops::{Deref, DerefMut};

use crate::buf::DmaBuf;
use crate::error::{Error, Result};
use crate::mr::{check_access, Access, Mr};
use crate::pd::Pd;

/// Registered memory the region owns; derefs to its bytes.
///
/// Reading it while the device may still write it (a receive or READ not yet
/// completed, or a peer with remote write access) gives whatever bytes are there at
/// that moment, as with any RDMA buffer: read after the completion that covers the
/// transfer (the poller's acquire fence orders the device's writes before it), or
/// through [`MemoryRegion::ptr`] with volatile reads where the program polls memory.
pub struct MemoryRegion {
    // Field order is drop order: deregister first, then unmap.
    mr: Mr,
    mem: DmaBuf,
    len: usize,
}

impl Pd {
    /// Allocates `len` bytes of zeroed, page-aligned memory and registers exactly them
    /// with `access` (`ibv_reg_mr` over memory the region owns).
    pub fn alloc_mr(&self, len: usize, access: Access) -> Result<MemoryRegion> {
        check_access("alloc_mr", access)?;
        let mem = DmaBuf::new(len).map_err(|errno| Error::Device { op: "alloc_mr", errno })?;
        // SAFETY: `mem` is a fresh mapping of at least `len` bytes that the returned
        // region owns and unmaps only after dropping `mr` (field order), so the memory
        // stays mapped and is used for nothing else while registered.
        let mr = unsafe { self.reg_mr_raw(mem.as_ptr(), len, access)? };
        Ok(MemoryRegion { mr, mem, len })
    }
}

impl MemoryRegion {
    crate::mr::forward_mr!();

    /// The first byte, for raw access while the device may be writing (volatile polls,
    /// code that takes pointers); valid for `len()` bytes while `self` is.
    pub fn ptr(&self) -> *mut u8 {
        self.mem.as_ptr()
    }
}

impl Deref for MemoryRegion {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `mem` maps at least `len` bytes, initialised (zero-filled), for as
        // long as self; the device's concurrent writes are the RDMA contract the type
        // documents (bytes of unspecified value, never invalid for u8).
        unsafe { std::slice::from_raw_parts(self.mem.as_ptr(), self.len) }
    }
}

impl DerefMut for MemoryRegion {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` excludes other program references.
        unsafe { std::slice::from_raw_parts_mut(self.mem.as_ptr(), self.len) }
    }
}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion").field("addr", &format_args!("{:#x}", self.addr())).field("len", &self.len)
            .field("lkey", &format_args!("{:#x}", self.lkey())).field("rkey", &format_args!("{:#x}", self.rkey())).finish()
    }
}
