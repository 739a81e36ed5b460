//! Queue pairs: create, modify, query, destroy.

use crate::ioctl::Ioctl;
use crate::sys::ids::{object, qp, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use crate::sys::verbs::{
    CreateQp, CreateQpResp, DestroyQp, DestroyQpResp, ExCreateQp, ExCreateQpResp, ExModifyQp, ExModifyQpResp,
    ModifyQp, QpCap, QueryQp, QueryQpResp,
};
use crate::sys::write::{CMD_CREATE_QP, CMD_DESTROY_QP, CMD_MODIFY_QP, CMD_QUERY_QP, EX_CMD_CREATE_QP, EX_CMD_MODIFY_QP};
use crate::write::{extended, legacy, legacy_no_resp};
use crate::{Device, Result};

/// The core arguments of QP creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpArgs {
    pub pd: u32,
    pub send_cq: u32,
    pub recv_cq: u32,
    pub srq: Option<u32>,
    pub cap: QpCap,
    /// `IB_UVERBS_QPT_*`.
    pub qp_type: u8,
    pub sq_sig_all: bool,
    pub user_handle: u64,
    /// `ib_uverbs_qp_create_flags`.
    pub create_flags: u32,
    /// The async event fd that receives this QP's events (ioctl path only).
    pub event_fd: Option<i32>,
}

/// What QP creation returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpCreated {
    pub handle: u32,
    pub qpn: u32,
    /// The capabilities actually granted.
    pub cap: QpCap,
}

/// `UVERBS_METHOD_QP_CREATE`.
pub fn create_qp_ioctl(dev: &Device, a: &QpArgs, uhw_in: &[u8], uhw_out: &mut [u8]) -> Result<QpCreated> {
    let mut cap_out = QpCap::default();
    let mut qpn = 0u32;
    let mut flags = a.create_flags;
    if a.sq_sig_all {
        flags |= 1 << 12; // IB_UVERBS_QP_CREATE_SQ_SIG_ALL
    }
    let mut c = Ioctl::new(object::QP, qp::CREATE);
    let h = c.new_handle(qp::ATTR_CREATE_HANDLE);
    c.handle(qp::ATTR_CREATE_PD_HANDLE, a.pd);
    c.handle(qp::ATTR_CREATE_SEND_CQ_HANDLE, a.send_cq);
    c.handle(qp::ATTR_CREATE_RECV_CQ_HANDLE, a.recv_cq);
    if let Some(srq) = a.srq {
        c.handle(qp::ATTR_CREATE_SRQ_HANDLE, srq);
    }
    c.in_value(qp::ATTR_CREATE_USER_HANDLE, a.user_handle);
    c.in_struct(qp::ATTR_CREATE_CAP, &a.cap);
    c.in_const(qp::ATTR_CREATE_TYPE, a.qp_type as u64);
    if flags != 0 {
        c.in_value(qp::ATTR_CREATE_FLAGS, flags);
    }
    if let Some(fd) = a.event_fd {
        c.fd(qp::ATTR_CREATE_EVENT_FD, fd);
    }
    c.out_struct(qp::ATTR_CREATE_RESP_CAP, &mut cap_out);
    c.out_struct(qp::ATTR_CREATE_RESP_QP_NUM, &mut qpn);
    if !uhw_in.is_empty() {
        c.in_bytes(UVERBS_ATTR_UHW_IN, uhw_in);
    }
    if !uhw_out.is_empty() {
        c.out_bytes(UVERBS_ATTR_UHW_OUT, uhw_out);
    }
    c.run(dev)?;
    let handle = c.handle_out(h);
    Ok(QpCreated { handle, qpn, cap: cap_out })
}

fn created(r: &CreateQpResp) -> QpCreated {
    QpCreated {
        handle: r.qp_handle,
        qpn: r.qpn,
        cap: QpCap {
            max_send_wr: r.max_send_wr,
            max_recv_wr: r.max_recv_wr,
            max_send_sge: r.max_send_sge,
            max_recv_sge: r.max_recv_sge,
            max_inline_data: r.max_inline_data,
        },
    }
}

/// CREATE_QP (write command 24).
pub fn create_qp_write(dev: &Device, a: &QpArgs, drv_in: &[u8], drv_out: &mut [u8]) -> Result<QpCreated> {
    let cmd = CreateQp {
        user_handle: a.user_handle,
        pd_handle: a.pd,
        send_cq_handle: a.send_cq,
        recv_cq_handle: a.recv_cq,
        srq_handle: a.srq.unwrap_or(0),
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
        sq_sig_all: a.sq_sig_all as u8,
        qp_type: a.qp_type,
        is_srq: a.srq.is_some() as u8,
        ..Default::default()
    };
    let r: CreateQpResp = legacy(dev, CMD_CREATE_QP, &cmd, drv_in, drv_out)?;
    Ok(created(&r))
}

/// Extended CREATE_QP.
pub fn create_qp_ex(dev: &Device, a: &QpArgs, drv_in: &[u8], drv_out: &mut [u8]) -> Result<QpCreated> {
    let cmd = ExCreateQp {
        user_handle: a.user_handle,
        pd_handle: a.pd,
        send_cq_handle: a.send_cq,
        recv_cq_handle: a.recv_cq,
        srq_handle: a.srq.unwrap_or(0),
        max_send_wr: a.cap.max_send_wr,
        max_recv_wr: a.cap.max_recv_wr,
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge,
        max_inline_data: a.cap.max_inline_data,
        sq_sig_all: a.sq_sig_all as u8,
        qp_type: a.qp_type,
        is_srq: a.srq.is_some() as u8,
        create_flags: a.create_flags,
        ..Default::default()
    };
    let r: ExCreateQpResp = extended(dev, EX_CMD_CREATE_QP, &cmd, drv_in, drv_out)?;
    Ok(created(&r.base))
}

/// MODIFY_QP (write command 26). The legacy command has no response.
pub fn modify_qp(dev: &Device, m: &ModifyQp) -> Result<()> {
    legacy_no_resp(dev, CMD_MODIFY_QP, m)
}

/// Extended MODIFY_QP, with driver data (mlx5 ECE options) in and out.
pub fn modify_qp_ex(dev: &Device, m: &ExModifyQp, drv_in: &[u8], drv_out: &mut [u8]) -> Result<ExModifyQpResp> {
    extended(dev, EX_CMD_MODIFY_QP, m, drv_in, drv_out)
}

/// QUERY_QP (write command 25).
pub fn query_qp(dev: &Device, handle: u32, attr_mask: u32) -> Result<QueryQpResp> {
    let cmd = QueryQp { qp_handle: handle, attr_mask, ..Default::default() };
    legacy(dev, CMD_QUERY_QP, &cmd, &[], &mut [])
}

/// `UVERBS_METHOD_QP_DESTROY`: returns the async events reported on this QP.
pub fn destroy_qp_ioctl(dev: &Device, handle: u32) -> Result<u32> {
    let mut resp = DestroyQpResp::default();
    let mut c = Ioctl::new(object::QP, qp::DESTROY);
    c.handle(qp::ATTR_DESTROY_HANDLE, handle);
    c.out_struct(qp::ATTR_DESTROY_RESP, &mut resp);
    c.run(dev)?;
    Ok(resp.events_reported)
}

/// DESTROY_QP (write command 27).
pub fn destroy_qp_write(dev: &Device, handle: u32) -> Result<u32> {
    let r: DestroyQpResp = legacy(dev, CMD_DESTROY_QP, &DestroyQp { qp_handle: handle, ..Default::default() }, &[], &mut [])?;
    Ok(r.events_reported)
}
