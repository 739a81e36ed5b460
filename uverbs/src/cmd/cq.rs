//! Completion queues and completion channels.

use std::os::fd::OwnedFd;

use crate::ioctl::Ioctl;
use crate::sys::ids::{cq, object, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use crate::sys::verbs::{CreateCompChannel, CreateCompChannelResp, CreateCq, CreateCqResp, DestroyCq, DestroyCqResp};
use crate::sys::write::{CMD_CREATE_COMP_CHANNEL, CMD_CREATE_CQ, CMD_DESTROY_CQ};
use crate::write::legacy;
use crate::{Device, Result};

/// The core arguments of CQ creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CqArgs {
    /// Minimum number of entries requested.
    pub cqe: u32,
    /// Returned in completion events so the library can find its CQ.
    pub user_handle: u64,
    pub comp_vector: u32,
    /// Completion channel fd, if events are wanted.
    pub comp_channel: Option<i32>,
    /// `ib_uverbs_ex_create_cq_flags`.
    pub flags: u32,
    /// The async event fd that receives this CQ's error events (ioctl path only).
    pub event_fd: Option<i32>,
}

/// `UVERBS_METHOD_CQ_CREATE`: returns (handle, actual number of entries).
pub fn create_cq_ioctl(dev: &Device, a: &CqArgs, uhw_in: &[u8], uhw_out: &mut [u8]) -> Result<(u32, u32)> {
    let mut resp_cqe = 0u32;
    let mut c = Ioctl::new(object::CQ, cq::CREATE);
    let h = c.new_handle(cq::ATTR_CREATE_HANDLE);
    c.in_value(cq::ATTR_CREATE_CQE, a.cqe);
    c.in_value(cq::ATTR_CREATE_USER_HANDLE, a.user_handle);
    if let Some(fd) = a.comp_channel {
        c.fd(cq::ATTR_CREATE_COMP_CHANNEL, fd);
    }
    c.in_value(cq::ATTR_CREATE_COMP_VECTOR, a.comp_vector);
    if a.flags != 0 {
        c.in_value(cq::ATTR_CREATE_FLAGS, a.flags);
    }
    c.out_struct(cq::ATTR_CREATE_RESP_CQE, &mut resp_cqe);
    if let Some(fd) = a.event_fd {
        // rdma-core sends it optional: older kernels may not know the attribute.
        let i = c.fd(cq::ATTR_CREATE_EVENT_FD, fd);
        c.optional(i);
    }
    if !uhw_in.is_empty() {
        c.in_bytes(UVERBS_ATTR_UHW_IN, uhw_in);
    }
    if !uhw_out.is_empty() {
        c.out_bytes(UVERBS_ATTR_UHW_OUT, uhw_out);
    }
    c.run(dev)?;
    let handle = c.handle_out(h);
    Ok((handle, resp_cqe))
}

/// CREATE_CQ (write command 18).
pub fn create_cq_write(dev: &Device, a: &CqArgs, drv_in: &[u8], drv_out: &mut [u8]) -> Result<CreateCqResp> {
    let cmd = CreateCq {
        user_handle: a.user_handle,
        cqe: a.cqe,
        comp_vector: a.comp_vector,
        comp_channel: a.comp_channel.unwrap_or(-1),
        ..Default::default()
    };
    legacy(dev, CMD_CREATE_CQ, &cmd, drv_in, drv_out)
}

/// `UVERBS_METHOD_CQ_DESTROY`: returns the events the device reported on this CQ.
pub fn destroy_cq_ioctl(dev: &Device, handle: u32) -> Result<DestroyCqResp> {
    let mut resp = DestroyCqResp::default();
    let mut c = Ioctl::new(object::CQ, cq::DESTROY);
    c.handle(cq::ATTR_DESTROY_HANDLE, handle);
    c.out_struct(cq::ATTR_DESTROY_RESP, &mut resp);
    c.run(dev)?;
    Ok(resp)
}

/// DESTROY_CQ (write command 20).
pub fn destroy_cq_write(dev: &Device, handle: u32) -> Result<DestroyCqResp> {
    legacy(dev, CMD_DESTROY_CQ, &DestroyCq { cq_handle: handle, ..Default::default() }, &[], &mut [])
}

/// CREATE_COMP_CHANNEL (write command 17): an fd that becomes readable when an armed
/// CQ gets a completion; each read() yields one `ib_uverbs_comp_event_desc`.
pub fn create_comp_channel(dev: &Device) -> Result<OwnedFd> {
    let r: CreateCompChannelResp = legacy(dev, CMD_CREATE_COMP_CHANNEL, &CreateCompChannel::default(), &[], &mut [])?;
    super::owned_fd(r.fd as i32)
}
