//! ALLOC_PD / DEALLOC_PD.

use crate::ioctl::Ioctl;
use crate::sys::ids::{object, pd};
use crate::sys::verbs::{AllocPd, AllocPdResp, DeallocPd};
use crate::sys::write::{CMD_ALLOC_PD, CMD_DEALLOC_PD};
use crate::write::{legacy, legacy_no_resp};
use crate::{Device, Result};

/// ALLOC_PD (write command 3); `drv_out` receives e.g. mlx5's PD number.
pub fn alloc_pd(dev: &Device, drv_out: &mut [u8]) -> Result<u32> {
    let r: AllocPdResp = legacy(dev, CMD_ALLOC_PD, &AllocPd::default(), &[], drv_out)?;
    Ok(r.pd_handle)
}

/// DEALLOC_PD (write command 4).
pub fn dealloc_pd_write(dev: &Device, handle: u32) -> Result<()> {
    legacy_no_resp(dev, CMD_DEALLOC_PD, &DeallocPd { pd_handle: handle })
}

/// `UVERBS_METHOD_PD_DESTROY`.
pub fn destroy_pd_ioctl(dev: &Device, handle: u32) -> Result<()> {
    let mut c = Ioctl::new(object::PD, pd::DESTROY);
    c.handle(pd::ATTR_DESTROY_HANDLE, handle);
    c.run(dev)
}
