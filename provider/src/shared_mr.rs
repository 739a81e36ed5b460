//! Registration of memory the caller lends read-only, for as long as it is borrowed.
//!
//! [`Pd::reg_mr_shared`] takes `&'a [u8]`: other code may read the bytes meanwhile, so
//! the device may only read them too. Access that lets the device write
//! (`LOCAL_WRITE`, `REMOTE_WRITE`, `REMOTE_ATOMIC`) is refused (EINVAL) before the
//! device sees the request; `REMOTE_READ` is allowed. It is the registration of a
//! buffer that is only sent from (the send buffer of a collective).

use std::ops::Deref;

use crate::error::{invalid, Result};
use crate::mr::{Access, Mr};
use crate::pd::Pd;

/// A read-only registration of a shared borrow; derefs to the bytes.
pub struct SharedMr<'a> {
    // Dropped (deregistered) before the borrow ends.
    mr: Mr,
    buf: &'a [u8],
}

impl Pd {
    /// `ibv_reg_mr` of `buf` for the device to read (gathers, peers' RDMA READ with
    /// `REMOTE_READ`), registered until the returned value is dropped.
    pub fn reg_mr_shared<'a>(&self, buf: &'a [u8], access: Access) -> Result<SharedMr<'a>> {
        if access.intersects(Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_ATOMIC) {
            return invalid("reg_mr_shared", "a shared borrow cannot be registered for writing");
        }
        // SAFETY: `buf` is borrowed for 'a and the result holds the borrow, so the
        // memory stays mapped and unfreed until the registration is dropped; the
        // access allows the device only to read it, which shared borrowers may do.
        let mr = unsafe { self.reg_mr_raw(buf.as_ptr().cast_mut(), buf.len(), access)? };
        Ok(SharedMr { mr, buf })
    }
}

impl SharedMr<'_> {
    crate::mr::forward_mr!();
}

impl Deref for SharedMr<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.buf
    }
}

impl std::fmt::Debug for SharedMr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMr").field("addr", &format_args!("{:#x}", self.addr())).field("len", &self.buf.len())
            .field("lkey", &format_args!("{:#x}", self.lkey())).field("rkey", &format_args!("{:#x}", self.rkey())).finish()
    }
}
