//! REG_MR, REG_DMABUF_MR, ADVISE_MR, DEREG_MR.

use zerocopy::IntoBytes;

use crate::ioctl::Ioctl;
use crate::sys::ids::{mr, object};
use crate::sys::verbs::{DeregMr, RegMr, RegMrResp, Sge};
use crate::sys::write::{CMD_DEREG_MR, CMD_REG_MR};
use crate::write::{legacy, legacy_no_resp};
use crate::{Device, Result};

/// REG_MR (write command 9): registers `[start, start + length)` of this process,
/// addressed by the device as `hca_va`.
pub fn reg_mr(dev: &Device, pd: u32, start: u64, length: u64, hca_va: u64, access: u32) -> Result<RegMrResp> {
    let cmd = RegMr { start, length, hca_va, pd_handle: pd, access_flags: access, ..Default::default() };
    legacy(dev, CMD_REG_MR, &cmd, &[], &mut [])
}

/// What `UVERBS_METHOD_REG_DMABUF_MR` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DmabufMr {
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `UVERBS_METHOD_REG_DMABUF_MR`: registers `length` bytes at `offset` of a dma-buf
/// fd (GPU memory exported by its driver), addressed by the device as `iova`.
pub fn reg_dmabuf_mr(dev: &Device, pd: u32, offset: u64, length: u64, iova: u64, fd: i32, access: u32) -> Result<DmabufMr> {
    let (mut lkey, mut rkey) = (0u32, 0u32);
    let mut c = Ioctl::new(object::MR, mr::REG_DMABUF_MR);
    let h = c.new_handle(mr::ATTR_REG_DMABUF_HANDLE);
    c.handle(mr::ATTR_REG_DMABUF_PD_HANDLE, pd);
    c.in_value(mr::ATTR_REG_DMABUF_OFFSET, offset);
    c.in_value(mr::ATTR_REG_DMABUF_LENGTH, length);
    c.in_value(mr::ATTR_REG_DMABUF_IOVA, iova);
    c.in_value(mr::ATTR_REG_DMABUF_FD, fd);
    c.in_value(mr::ATTR_REG_DMABUF_ACCESS_FLAGS, access);
    c.out_struct(mr::ATTR_REG_DMABUF_RESP_LKEY, &mut lkey);
    c.out_struct(mr::ATTR_REG_DMABUF_RESP_RKEY, &mut rkey);
    c.run(dev)?;
    let handle = c.handle_out(h);
    Ok(DmabufMr { handle, lkey, rkey })
}

/// `UVERBS_METHOD_ADVISE_MR` (`ibv_advise_mr`): asks the device to prefetch the pages
/// of `sges` (on-demand-paging MRs of `pd`); `flags` may hold
/// `ADVISE_MR_FLAG_FLUSH` (wait for the prefetch).
pub fn advise_mr(dev: &Device, pd: u32, advice: u32, flags: u32, sges: &[Sge]) -> Result<()> {
    let mut c = Ioctl::new(object::MR, mr::ADVISE);
    c.handle(mr::ATTR_ADVISE_PD_HANDLE, pd);
    c.in_const(mr::ATTR_ADVISE_ADVICE, advice as u64);
    c.in_value(mr::ATTR_ADVISE_FLAGS, flags);
    c.in_bytes(mr::ATTR_ADVISE_SGE_LIST, sges.as_bytes());
    c.run(dev)
}

/// DEREG_MR (write command 13).
pub fn dereg_mr_write(dev: &Device, handle: u32) -> Result<()> {
    legacy_no_resp(dev, CMD_DEREG_MR, &DeregMr { mr_handle: handle })
}

/// `UVERBS_METHOD_MR_DESTROY`.
pub fn destroy_mr_ioctl(dev: &Device, handle: u32) -> Result<()> {
    let mut c = Ioctl::new(object::MR, mr::DESTROY);
    c.handle(mr::ATTR_DESTROY_HANDLE, handle);
    c.run(dev)
}
