//! GET_CONTEXT, QUERY_DEVICE (legacy and extended) and the async event fd.

use std::os::fd::OwnedFd;

use crate::ioctl::Ioctl;
use crate::sys::ids::{async_event, device, object, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use crate::sys::verbs::{ExQueryDevice, ExQueryDeviceResp, GetContext, GetContextResp, QueryDevice, QueryDeviceResp};
use crate::sys::write::{CMD_GET_CONTEXT, CMD_QUERY_DEVICE, EX_CMD_QUERY_DEVICE};
use crate::write::{extended, legacy};
use crate::{Device, Result};

/// What the ioctl GET_CONTEXT returns besides driver data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ContextInfo {
    pub num_comp_vectors: u32,
    /// `enum ib_uverbs_core_support` bits; 0 when the device did not say.
    pub core_support: u64,
}

/// `UVERBS_METHOD_GET_CONTEXT`: creates the per-file context. The async event fd is
/// allocated separately ([`alloc_async_fd`]).
pub fn get_context_ioctl(dev: &Device, uhw_in: &[u8], uhw_out: &mut [u8]) -> Result<ContextInfo> {
    let mut ncv = 0u32;
    let mut core = 0u64;
    let mut c = Ioctl::new(object::DEVICE, device::GET_CONTEXT);
    let a = c.out_struct(device::ATTR_GET_CONTEXT_NUM_COMP_VECTORS, &mut ncv);
    let b = c.out_struct(device::ATTR_GET_CONTEXT_CORE_SUPPORT, &mut core);
    c.optional(b);
    if !uhw_in.is_empty() {
        c.in_bytes(UVERBS_ATTR_UHW_IN, uhw_in);
    }
    if !uhw_out.is_empty() {
        c.out_bytes(UVERBS_ATTR_UHW_OUT, uhw_out);
    }
    c.run(dev)?;
    let _ = a;
    Ok(ContextInfo { num_comp_vectors: ncv, core_support: core })
}

/// Legacy GET_CONTEXT (write command 0): also returns the async event fd.
pub fn get_context_write(dev: &Device, drv_in: &[u8], drv_out: &mut [u8]) -> Result<(GetContextResp, OwnedFd)> {
    let r: GetContextResp = legacy(dev, CMD_GET_CONTEXT, &GetContext::default(), drv_in, drv_out)?;
    let fd = super::owned_fd(r.async_fd as i32)?;
    Ok((r, fd))
}

/// `UVERBS_METHOD_ASYNC_EVENT_ALLOC`: the fd that carries async events.
pub fn alloc_async_fd(dev: &Device) -> Result<OwnedFd> {
    let mut c = Ioctl::new(object::ASYNC_EVENT, async_event::ALLOC);
    let i = c.new_fd(async_event::ATTR_ALLOC_FD_HANDLE);
    c.run(dev)?;
    super::owned_fd(c.fd_out(i))
}

/// Legacy QUERY_DEVICE (write command 1).
pub fn query_device(dev: &Device) -> Result<QueryDeviceResp> {
    legacy(dev, CMD_QUERY_DEVICE, &QueryDevice::default(), &[], &mut [])
}

/// Extended QUERY_DEVICE: the kernel fills a prefix of the response and says how
/// much in `response_length`; `drv_out` receives the driver's part.
pub fn query_device_ex(dev: &Device, drv_out: &mut [u8]) -> Result<ExQueryDeviceResp> {
    extended(dev, EX_CMD_QUERY_DEVICE, &ExQueryDevice::default(), &[], drv_out)
}
