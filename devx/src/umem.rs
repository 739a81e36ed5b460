//! UMEM: user memory registered for the firmware to use by id.
//!
//! DevX objects do not take page lists from userspace: a CQ, QP or doorbell record
//! names a UMEM (`cq_umem_id`, `wq_umem_id`, `dbr_umem_id`) and an offset in it. The
//! kernel pins the pages at registration and gives the firmware their list, so the
//! memory must stay where it is while any object uses it: [`Umem`] owns its buffer
//! (page-aligned, zeroed), and the kernel refuses to deregister a UMEM an object still
//! names (`EBUSY`).

use provider::buf::DmaBuf;
use uverbs::cmd::devx::{self as devxcmd, UmemArgs, UMEM_PGSZ_ANY};

use crate::context::DevxContext;
use crate::error::{Error, Result};

/// `ib_access_flags` a UMEM may be registered with (the kernel accepts only these).
pub mod access {
    pub const LOCAL_WRITE: u32 = 1;
    pub const REMOTE_WRITE: u32 = 2;
    pub const REMOTE_READ: u32 = 4;
}

/// A registered buffer.
#[derive(Debug)]
pub struct Umem {
    devx: DevxContext,
    buf: Option<DmaBuf>,
    handle: u32,
    id: u32,
}

impl DevxContext {
    /// `mlx5dv_devx_umem_reg` of a fresh zeroed buffer of `len` bytes (whole pages),
    /// with libmlx5's default page-size bitmap (every size from 4 KiB).
    pub fn reg_umem(&self, len: usize, access: u32) -> Result<Umem> {
        let buf = DmaBuf::new(len).map_err(|errno| Error::Os { op: "allocate UMEM buffer", errno })?;
        let a = UmemArgs { addr: buf.addr(), len: buf.len() as u64, access, pgsz_bitmap: UMEM_PGSZ_ANY };
        let (handle, id) = devxcmd::umem_reg(self.device(), &a).map_err(|errno| Error::Os { op: "devx umem_reg", errno })?;
        tracing::debug!(target: "devx", handle, id, addr = format_args!("{:#x}", a.addr), len = a.len, "UMEM registered");
        Ok(Umem { devx: self.clone(), buf: Some(buf), handle, id })
    }
}

impl Umem {
    /// The firmware's UMEM id, for `*_umem_id` fields.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The uverbs handle.
    pub fn handle(&self) -> u32 {
        self.handle
    }

    fn buf(&self) -> &DmaBuf {
        self.buf.as_ref().expect("a live UMEM has its buffer")
    }

    /// Start of the buffer. The device reads and writes it behind the program's
    /// back: access it through raw pointers with the fences the protocol needs.
    pub fn as_ptr(&self) -> *mut u8 {
        self.buf().as_ptr()
    }

    /// The buffer's address (what the kernel pinned).
    pub fn addr(&self) -> u64 {
        self.buf().addr()
    }

    /// Length in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.buf().len()
    }

    /// Never true (a UMEM has at least one page).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Deregisters now: `EBUSY` (and the UMEM back, still registered) while an
    /// object uses it.
    pub fn dereg(mut self) -> std::result::Result<(), (Umem, Error)> {
        match devxcmd::umem_dereg(self.devx.device(), self.handle) {
            Ok(()) => {
                self.buf.take();
                Ok(())
            }
            Err(errno) => Err((self, Error::Os { op: "devx umem_dereg", errno })),
        }
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        let Some(buf) = self.buf.take() else { return };
        if let Err(errno) = devxcmd::umem_dereg(self.devx.device(), self.handle) {
            // Still registered: the device may still write there, so the memory must
            // not go back to the allocator. Leak it rather than free pinned pages.
            tracing::warn!(target: "devx", handle = self.handle, id = self.id, %errno,
                           "UMEM deregistration failed; its buffer is leaked");
            std::mem::forget(buf);
        }
    }
}
