//! Memory whose address does not change while its owner lives: what a registration of
//! memory someone else allocated needs.
//!
//! `ibv_reg_mr` hands the device an address range; the device (and, with remote
//! access, every peer) may read or write it until the registration is dropped. A type
//! that owns such a range can promise that once, in an `unsafe impl` of
//! [`StableMemory`], and every registration of it ([`crate::Pd::reg_owned`],
//! [`crate::OwnedMr`]) is then safe: the registration owns the value, so the memory
//! lives at least as long as the registration, and is deregistered before the value is
//! dropped or handed back. This is the promise tokio-uring's `IoBuf` and the
//! `stable_deref_trait` crate's `StableDeref` ask of buffers handed to a kernel.

use memmap2::MmapMut;

/// A value that owns `stable_len()` initialised bytes at `stable_ptr()`, at an address
/// that does not depend on where the value itself is.
///
/// # Safety
/// An implementation promises, for as long as the value lives:
/// * the first call of `stable_ptr` returns a pointer to `stable_len()` initialised,
///   readable and writable bytes, and later calls return the same pointer and length,
///   also after the value has been moved;
/// * the bytes stay mapped and are used for nothing else (no other value owns them, and
///   the value's own code does not free or reallocate them) until the value is
///   dropped; shared references to the value (`&Self`, which [`crate::OwnedMr`] hands
///   out) must not change that either (no interior mutability that reallocates).
pub unsafe trait StableMemory {
    /// The first byte of the memory.
    fn stable_ptr(&mut self) -> *mut u8;

    /// How many bytes the memory has from [`StableMemory::stable_ptr`].
    fn stable_len(&self) -> usize;
}

// SAFETY: a Vec's buffer is a heap allocation that moves with the Vec only as a pointer;
// it is reallocated or freed only by `&mut self` methods (push, reserve...) or drop,
// and an OwnedMr never gives out `&mut Vec`. Its first `len()` bytes are initialised.
unsafe impl StableMemory for Vec<u8> {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn stable_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: as for Vec<u8>; a boxed slice cannot even grow.
unsafe impl StableMemory for Box<[u8]> {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn stable_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: the mapping is unmapped only when the MmapMut is dropped and never moves;
// anonymous and file mappings are initialised (zero-filled or the file's bytes).
unsafe impl StableMemory for MmapMut {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn stable_len(&self) -> usize {
        self.len()
    }
}

// SAFETY: a `&'static mut` borrow is never given back: the bytes are the value's
// forever (leaked allocations, statics).
unsafe impl StableMemory for &'static mut [u8] {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.as_mut_ptr()
    }
    fn stable_len(&self) -> usize {
        self.len()
    }
}
