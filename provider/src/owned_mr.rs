//! Registration of memory the caller allocated, owned by the registration.
//!
//! [`Pd::reg_owned`] takes a [`StableMemory`] value (a `Vec<u8>`, a `Box<[u8]>`, an
//! `MmapMut`, or a type of the caller's with its own `unsafe impl`) by value and
//! returns an [`OwnedMr`] holding both: the registration is dropped (deregistered)
//! before the memory, and [`OwnedMr::into_inner`] deregisters and gives the memory back.
//! A refused registration gives the memory back too, in the [`RegError`].
//! [`Pd::reg_owned_range`] registers only part of the memory (guard bytes around an
//! MR, a header the device must not touch).

use std::ops::{Deref, DerefMut, RangeBounds};

use crate::error::Error;
use crate::mr::{bounds, Access, Mr};
use crate::pd::Pd;
use crate::stable_memory::StableMemory;

/// Registered memory of type `M`, owned; derefs to the registered bytes. Reading them
/// while the device may write them gives the bytes there at that moment (see
/// [`crate::MemoryRegion`]).
pub struct OwnedMr<M: StableMemory> {
    // Field order is drop order: deregister first, then drop the memory.
    mr: Mr,
    mem: M,
    /// The first registered byte (inside `mem`'s stable memory).
    ptr: *mut u8,
    len: usize,
}

// The impls below add nothing to what the registration itself allows.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Mr>();
};

// SAFETY: `ptr` points into the memory `mem` owns, which stays at its address when the
// value moves (StableMemory), so sending an OwnedMr sends nothing but `mem` and the
// registration: Send when `M` is.
unsafe impl<M: StableMemory + Send> Send for OwnedMr<M> {}
// SAFETY: `&OwnedMr` gives `&[u8]` of the memory and `&M`; both are shareable when `M`
// is Sync (the device's writes are the RDMA contract of every registered buffer).
unsafe impl<M: StableMemory + Sync> Sync for OwnedMr<M> {}

/// A refused registration: the error, and the memory back unchanged.
pub struct RegError<M> {
    /// Why the registration was refused.
    pub error: Error,
    /// The memory, unchanged and no longer registered.
    pub mem: M,
}

impl<M> std::fmt::Debug for RegError<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegError").field("error", &self.error).finish_non_exhaustive()
    }
}

impl<M> std::fmt::Display for RegError<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl<M> std::error::Error for RegError<M> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// `?` on a registration in a function returning [`crate::Result`] drops the memory.
impl<M> From<RegError<M>> for Error {
    fn from(e: RegError<M>) -> Error {
        e.error
    }
}

impl Pd {
    /// `ibv_reg_mr` of all of `mem`, which the returned region owns until
    /// [`OwnedMr::into_inner`] or drop.
    pub fn reg_owned<M: StableMemory>(&self, mem: M, access: Access) -> std::result::Result<OwnedMr<M>, RegError<M>> {
        self.reg_owned_range(mem, .., access)
    }

    /// `ibv_reg_mr` of bytes `range` of `mem` (offsets from its first byte); the region
    /// owns all of `mem`, derefs to the registered bytes, and [`OwnedMr::get_ref`] reaches
    /// the rest. A range outside the memory is refused (EINVAL) before the device sees it.
    pub fn reg_owned_range<M: StableMemory>(
        &self,
        mut mem: M,
        range: impl RangeBounds<usize>,
        access: Access,
    ) -> std::result::Result<OwnedMr<M>, RegError<M>> {
        let base = mem.stable_ptr();
        let total = mem.stable_len();
        let (start, end) = bounds(&range, total);
        if start > end || end > total {
            let error = Error::Invalid { op: "reg_mr", why: format!("range {start}..{end} outside memory of {total} bytes") };
            return Err(RegError { error, mem });
        }
        // SAFETY: start <= end <= total: inside the memory.
        let ptr = unsafe { base.add(start) };
        let len = end - start;
        // SAFETY: `[ptr, ptr + len)` lies in memory that `mem` owns and keeps mapped and
        // unused by others at this address while it lives (StableMemory); the region
        // owns `mem` and drops the registration first (field order, into_inner), so the
        // memory outlives the registration.
        match unsafe { self.reg_mr_raw(ptr, len, access) } {
            Ok(mr) => Ok(OwnedMr { mr, mem, ptr, len }),
            Err(error) => Err(RegError { error, mem }),
        }
    }
}

impl<M: StableMemory> OwnedMr<M> {
    crate::mr::forward_mr!();

    /// Deregisters and gives the memory back.
    pub fn into_inner(self) -> M {
        let OwnedMr { mr, mem, .. } = self;
        drop(mr);
        mem
    }

    /// The memory (all of it, also outside a [`Pd::reg_owned_range`] range). Read the
    /// registered part only where the device is not writing it, as with the bytes.
    pub fn get_ref(&self) -> &M {
        &self.mem
    }

    /// The first registered byte, for raw access while the device may be writing
    /// (volatile polls); valid for `len()` bytes while `self` is.
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }
}

impl<M: StableMemory> Deref for OwnedMr<M> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes at `ptr`, inside the memory `mem` owns for as
        // long as self (StableMemory); the device's concurrent writes are the RDMA
        // contract documented on the type.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<M: StableMemory> DerefMut for OwnedMr<M> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`; `&mut self` excludes other program references (`get_ref`
        // included).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<M: StableMemory> std::fmt::Debug for OwnedMr<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OwnedMr").field("addr", &format_args!("{:#x}", self.addr())).field("len", &self.len)
            .field("lkey", &format_args!("{:#x}", self.lkey())).field("rkey", &format_args!("{:#x}", self.rkey())).finish()
    }
}
