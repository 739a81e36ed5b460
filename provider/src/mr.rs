//! Memory regions: registered memory the device may read and write, named by keys.

use std::ops::{Bound, RangeBounds};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

use uverbs::cmd::mr as mrcmd;

use crate::error::{invalid, Op, Result};
use crate::pd::{Pd, PdInner};
use crate::wqe::Sge;

bitflags::bitflags! {
    /// `ibv_access_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Access: u32 {
        /// The device may write the memory (receives, READ responses); needed with
        /// remote write or atomic access.
        const LOCAL_WRITE = 1 << 0;
        /// Peers may RDMA WRITE into it.
        const REMOTE_WRITE = 1 << 1;
        /// Peers may RDMA READ it.
        const REMOTE_READ = 1 << 2;
        /// Peers may run atomics on it.
        const REMOTE_ATOMIC = 1 << 3;
        /// The device may reorder its writes to the memory (PCIe relaxed ordering).
        const RELAXED_ORDERING = 1 << 20;
    }
}

/// A registration: keys, address and length of memory the device may access,
/// deregistered on drop. It does not own the memory; the safe ways to get one keep the
/// memory alive for it: [`Pd::alloc_mr`] ([`crate::MemoryRegion`], memory and
/// registration together), [`Pd::reg_owned`] ([`crate::OwnedMr`], memory the caller
/// allocated, owned by the registration), [`Pd::reg_mr`] ([`crate::BorrowedMr`], an
/// exclusive borrow) and [`Pd::reg_mr_shared`] ([`crate::SharedMr`], a shared borrow,
/// read-only). [`Pd::reg_dmabuf_mr`] (GPU and other dma-buf memory) returns it bare:
/// the kernel holds the dma-buf for it.
pub struct Mr {
    pd: Arc<PdInner>,
    handle: u32,
    lkey: u32,
    rkey: u32,
    addr: u64,
    len: usize,
}

impl Pd {
    /// `ibv_reg_mr` of `len` bytes at `addr`: what the safe registrations are built on.
    /// Private to the provider: callers elsewhere say what keeps their memory alive
    /// with a [`crate::StableMemory`] impl, or lend it by borrow.
    ///
    /// # Safety
    /// `[addr, addr + len)` must stay mapped, and not be freed or reused for other
    /// data the program reads, until the returned [`Mr`] is dropped: the device may
    /// access it at any time while registered (remote peers too, as `access` allows).
    pub(crate) unsafe fn reg_mr_raw(&self, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        let _span = tracing::debug_span!("provider::reg_mr", len).entered();
        check_access("reg_mr", access)?;
        let a = addr as u64;
        let r = mrcmd::reg_mr(&self.inner.ctx.dev, self.inner.handle, a, len as u64, a, access.bits()).op("reg_mr")?;
        tracing::debug!(target: "provider::mr", lkey = format_args!("{:#x}", r.lkey), addr = format_args!("{a:#x}"), len, "reg_mr");
        Ok(Mr { pd: self.inner.clone(), handle: r.mr_handle, lkey: r.lkey, rkey: r.rkey, addr: a, len })
    }

    /// `ibv_reg_dmabuf_mr`: registers `len` bytes at `offset` of the dma-buf `fd` (GPU
    /// memory exported by its driver, or any other exporter's buffer), addressed by work
    /// requests and peers as `iova`.
    ///
    /// No `unsafe`: the kernel (and softhca) takes its own reference on the dma-buf, so
    /// the caller may close `fd` at once; the memory stays the exporter's, pinned or
    /// moved under the NIC's feet by the exporter's rules, never freed while registered.
    /// perftest and NCCL pass the buffer's device address as `iova`, so that work
    /// requests name GPU memory by its CUDA pointer; softhca relies on that convention
    /// for memory it cannot map (docs/gdr.md).
    pub fn reg_dmabuf_mr(&self, fd: BorrowedFd<'_>, offset: u64, len: usize, iova: u64, access: Access) -> Result<Mr> {
        check_access("reg_dmabuf_mr", access)?;
        let r = mrcmd::reg_dmabuf_mr(&self.inner.ctx.dev, self.inner.handle, offset, len as u64, iova, fd.as_raw_fd(), access.bits())
            .op("reg_dmabuf_mr")?;
        tracing::debug!(target: "provider::mr", lkey = format_args!("{:#x}", r.lkey), iova = format_args!("{iova:#x}"), offset, len, "reg_dmabuf_mr");
        Ok(Mr { pd: self.inner.clone(), handle: r.handle, lkey: r.lkey, rkey: r.rkey, addr: iova, len })
    }

}

/// Registration errors checked before the kernel sees the request.
pub(crate) fn check_access(op: &'static str, access: Access) -> Result<()> {
    if access.intersects(Access::REMOTE_WRITE | Access::REMOTE_ATOMIC) && !access.contains(Access::LOCAL_WRITE) {
        return invalid(op, "remote write/atomic access requires LOCAL_WRITE");
    }
    Ok(())
}

impl Mr {
    /// Local key (for scatter/gather entries).
    pub fn lkey(&self) -> u32 {
        self.lkey
    }

    /// Remote key (for peers' RDMA).
    pub fn rkey(&self) -> u32 {
        self.rkey
    }

    /// Start address: the process address for `reg_mr`, the iova for `reg_dmabuf_mr`
    /// (the address work requests name).
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The gather/scatter entry for bytes `range` of the region (offsets from
    /// [`Mr::addr`]), with this region's lkey.
    ///
    /// # Panics
    /// Like slice indexing, when the range is not inside the region (or is longer than
    /// an SGE's 32-bit length); [`Mr::get_sge`] returns `None` instead.
    pub fn sge(&self, range: impl RangeBounds<usize>) -> Sge {
        let (start, end) = bounds(&range, self.len);
        self.get_sge(start..end).unwrap_or_else(|| panic!("SGE {start}..{end} outside an MR of {} bytes", self.len))
    }

    /// [`Mr::sge`], `None` for a range outside the region or over 4 GiB - 1.
    pub fn get_sge(&self, range: impl RangeBounds<usize>) -> Option<Sge> {
        let (start, end) = bounds(&range, self.len);
        if start > end || end > self.len {
            return None;
        }
        let len = u32::try_from(end - start).ok()?;
        Some(Sge::new(self.addr + start as u64, len, self.lkey))
    }
}

/// A range's `[start, end)` with `len` for an open end (unchecked; saturating).
pub(crate) fn bounds(range: &impl RangeBounds<usize>, len: usize) -> (usize, usize) {
    let start = match range.start_bound() {
        Bound::Included(&s) => s,
        Bound::Excluded(&s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&e) => e.saturating_add(1),
        Bound::Excluded(&e) => e,
        Bound::Unbounded => len,
    };
    (start, end)
}

impl Drop for Mr {
    fn drop(&mut self) {
        if let Err(e) = mrcmd::destroy_mr_ioctl(&self.pd.ctx.dev, self.handle) {
            tracing::warn!(handle = self.handle, errno = %e, "dereg_mr failed");
        }
    }
}

/// The accessors of every registration type that keeps its [`Mr`] in a field `mr`
/// (`MemoryRegion`, `OwnedMr`, `BorrowedMr`, `SharedMr`): the keys, the address and
/// SGEs, forwarded to it; written once here.
macro_rules! forward_mr {
    () => {
        /// The registration (keys, address, length).
        pub fn mr(&self) -> &$crate::mr::Mr {
            &self.mr
        }

        /// Local key, for SGEs.
        pub fn lkey(&self) -> u32 {
            self.mr.lkey()
        }

        /// Remote key, for peers' RDMA.
        pub fn rkey(&self) -> u32 {
            self.mr.rkey()
        }

        /// The first registered byte's address, as work requests and peers name it.
        pub fn addr(&self) -> u64 {
            self.mr.addr()
        }

        /// The SGE for bytes `range` of the registration; panics outside it
        /// ([`Mr::sge`](crate::Mr::sge)).
        pub fn sge(&self, range: impl std::ops::RangeBounds<usize>) -> $crate::wqe::Sge {
            self.mr.sge(range)
        }

        /// Like `sge`, `None` outside the registration or over 4 GiB - 1.
        pub fn get_sge(&self, range: impl std::ops::RangeBounds<usize>) -> Option<$crate::wqe::Sge> {
            self.mr.get_sge(range)
        }
    };
}
pub(crate) use forward_mr;
