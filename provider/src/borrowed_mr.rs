//! Registration of memory the caller owns, for as long as it is borrowed.
//!
//! [`Pd::reg_mr`] takes `&'a mut [u8]` and returns a [`BorrowedMr<'a>`]: the borrow
//! checker then keeps the buffer alive, unmoved and untouched by other code until the
//! registration is dropped (deregistered), which is exactly `ibv_reg_mr`'s contract.
//! The buffer is reached through the registration meanwhile (it derefs to the bytes).

use std::ops::{Deref, DerefMut};

use crate::error::Result;
use crate::mr::{Access, Mr};
use crate::pd::Pd;

/// A registration of a borrowed buffer; derefs to it. Reading it while the device may
/// write it gives the bytes there at that moment (see [`crate::MemoryRegion`]).
pub struct BorrowedMr<'a> {
    // Dropped (deregistered) before the borrow ends.
    mr: Mr,
    buf: &'a mut [u8],
}

impl Pd {
    /// `ibv_reg_mr` of `buf`, registered until the returned value is dropped; the
    /// borrow keeps `buf` alive and reserved for the device meanwhile.
    pub fn reg_mr<'a>(&self, buf: &'a mut [u8], access: Access) -> Result<BorrowedMr<'a>> {
        // SAFETY: `buf` is exclusively borrowed for 'a, and the result holds the
        // borrow: the memory cannot be freed, moved or reused by other code before the
        // result (and with it the registration) is dropped.
        let mr = unsafe { self.reg_mr_raw(buf.as_mut_ptr(), buf.len(), access)? };
        Ok(BorrowedMr { mr, buf })
    }
}

impl BorrowedMr<'_> {
    crate::mr::forward_mr!();

    /// The first byte, for raw reads while the device may be writing (volatile
    /// polls); valid for `len()` bytes while `self` is. Write through
    /// `DerefMut`.
    pub fn ptr(&self) -> *const u8 {
        self.buf.as_ptr()
    }
}

impl Deref for BorrowedMr<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf
    }
}

impl DerefMut for BorrowedMr<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        self.buf
    }
}

impl std::fmt::Debug for BorrowedMr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BorrowedMr").field("addr", &format_args!("{:#x}", self.addr())).field("len", &self.buf.len())
            .field("lkey", &format_args!("{:#x}", self.lkey())).field("rkey", &format_args!("{:#x}", self.rkey())).finish()
    }
}
