//! Shared receive queues: CREATE_SRQ, MODIFY_SRQ, QUERY_SRQ, DESTROY_SRQ (write) and
//! SRQ_DESTROY (ioctl).
//!
//! Creation follows the core (`__uverbs_create_xsrq`, `ib_create_srq_user`) and then
//! `mlx5_ib_create_srq` for a user SRQ: the size checks (`max_wr` below
//! `1 << log_max_srq_sz`, `max_sge` at most `max_wqe_sz_rq / 16`), the geometry (WQE
//! count `roundup_pow_of_two(max_wr + 1)`, WQE size `16 + 16 * max_sge` rounded up to a
//! power of two and at least 32), the driver data (`create_srq_user`), then the
//! firmware's CREATE_SRQ; the answer's `max_wr` is the WQE count less one. MODIFY_SRQ
//! arms the limit (ARM_RQ) and refuses a resize (EINVAL), as mlx5 does; QUERY_SRQ
//! reads the limit back from the firmware's context.
//!
//! libibverbs (cmd_srq.c) tries UVERBS_METHOD_SRQ_CREATE first and falls back to
//! CREATE_SRQ only where the kernel lacks the method; both share [`create_srq`]. An XRC
//! SRQ (CREATE_XSRQ, type XRC) names an XRC domain handle (EINVAL when it does not
//! resolve, as `__uverbs_create_xsrq` answers) and a CQ; mlx5_ib makes it with
//! CREATE_XRC_SRQ (domain, CQ, and the user index `get_srq_user_index` checks) and the
//! answer carries its number. UVERBS_METHOD_SRQ_CREATE (what libibverbs v44 sends for ibv_xsrq_pingpong's SRQ) answers
//! the number in RESP_SRQ_NUM. A
//! tag-matching SRQ is EINVAL (mlx5_ib's check of the tag list size against
//! `log_tag_matching_list_sz`, 0 on this device).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::mlx5::{CreateSrq as Mlx5CreateSrq, CreateSrqResp as Mlx5CreateSrqResp, SRQ_FLAG_SIGNATURE};
use uverbs::sys::verbs::{CreateSrq, CreateSrqResp, CreateXsrq, DestroySrq, DestroySrqResp, ModifySrq, QuerySrq, QuerySrqResp};

use prm::bits::{View, ViewMut};
use prm::cmd::header::MboxOut;
use prm::cmd::opcode as op;
use prm::cmd::srq::{ArmRqIn, CreateSrqIn, CreateSrqOut, DestroySrqIn, QuerySrqIn, QuerySrqOut, Srqc, ARM_RQ_OP_MOD_SRQ};
use prm::cmd::xrc_srq::{CreateXrcSrqIn, CreateXrcSrqOut, DestroyXrcSrqIn, XrcSrqc};

use crate::firmware::{Host, SrqHost};
use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::mlx5::caps;
use crate::kernel::pin::pin;
use crate::kernel::udata::Udata;
use crate::kernel::uobject::{FdObj, ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::{FileState, Result};
use crate::objects::{AsyncEventFile, Cq, Pd, Srq};

use super::xrcd::UXrcd;

/// `enum ib_srq_attr_mask`.
pub(crate) const SRQ_MAX_WR: u32 = 1 << 0;
pub(crate) const SRQ_LIMIT: u32 = 1 << 1;

/// `sizeof(struct mlx5_wqe_srq_next_seg)` and of a scatter entry.
const NEXT_SEG: u32 = 16;
const DATA_SEG: u32 = 16;

/// What the core hands the driver to create a basic SRQ.
pub(crate) struct SrqArgs {
    pub pd: Arc<Pd>,
    pub max_wr: u32,
    pub max_sge: u32,
    pub user_handle: u64,
    pub event_file: Option<Arc<AsyncEventFile>>,
    /// An XRC SRQ's domain (the handle object it was made through) and CQ.
    pub xrc: Option<(Arc<UXrcd>, Arc<Cq>)>,
}

/// `MLX5_IB_DEFAULT_UIDX`.
const DEFAULT_UIDX: u32 = 0xff_ffff;

/// The geometry `mlx5_ib_create_srq` derives from the request: (WQE count, log2 of the
/// WQE size, scatter entries a WQE has room for), or EINVAL.
pub(crate) fn geometry(max_wr: u32, max_sge: u32) -> Result<(u32, u32, u32)> {
    let max_srq_wqes = 1u32 << caps::LOG_MAX_SRQ_SZ;
    let max_sge_sz = caps::MAX_WQE_SZ_RQ / DATA_SEG;
    if max_wr >= max_srq_wqes || max_sge > max_sge_sz {
        return Err(Errno::EINVAL);
    }
    let max = (max_wr + 1).next_power_of_two();
    let desc = (NEXT_SEG + max_sge * DATA_SEG).next_power_of_two().max(32);
    Ok((max, desc.ilog2(), (desc - NEXT_SEG) / DATA_SEG))
}

/// `ib_create_srq_user` + `mlx5_ib_create_srq` for a user SRQ: returns the SRQ (its
/// `max_wr`/`max_sge` are the answer) with the PD's use counted.
pub(crate) fn create_srq(hca: &Hca, st: &mut FileState, a: SrqArgs, udata: &Udata) -> Result<Arc<Srq>> {
    let ctx = st.ctx()?;
    let (max, wqe_shift, avail_gs) = geometry(a.max_wr, a.max_sge)?;
    let buf_size = (max as u64) << wqe_shift;
    // create_srq_user
    let mut ucmd = Mlx5CreateSrq::default();
    let size = std::mem::size_of::<Mlx5CreateSrq>();
    let n = udata.inp.len().min(size);
    udata.inp.read(0, &mut ucmd.as_mut_bytes()[..n])?;
    if ucmd.reserved0 != 0 || ucmd.reserved1 != 0 {
        return Err(Errno::EINVAL);
    }
    if udata.inp.len() > size && !udata.inp.is_cleared(size) {
        return Err(Errno::EINVAL);
    }
    // get_srq_user_index: a user index exactly when the context has CQE version 1
    // (CQE version 0 may pass the default one), 24 bits.
    let has_uidx = n >= 28;
    let uidx = if has_uidx && ctx.cqe_version == 0 && ucmd.uidx == DEFAULT_UIDX {
        DEFAULT_UIDX
    } else if has_uidx != (ctx.cqe_version != 0) || ucmd.uidx > DEFAULT_UIDX {
        return Err(Errno::EINVAL);
    } else {
        ucmd.uidx
    };
    let wq_sig = ucmd.flags & SRQ_FLAG_SIGNATURE != 0;
    // ib_umem_get of the buffer, mlx5_ib_db_map_user of the record's page.
    pin(ucmd.buf_addr, buf_size, false)?;
    pin(ucmd.db_addr & !0xfff, 4096, false)?;
    let mut inbox = create_srq_inbox(ctx.devx_uid, a.pd.pdn, max, wqe_shift, wq_sig, ucmd.buf_addr, buf_size, ucmd.db_addr);
    let mut outlen = CreateSrqOut::BYTES;
    if let Some((x, cq)) = &a.xrc {
        // create_srq_split: an XRC SRQ is CREATE_XRC_SRQ (mlx5_core's create_xrc_srq_cmd),
        // the same context fields in xrc_srqc's places plus domain, CQ and user index.
        inbox = create_xrc_srq_inbox(&inbox, x.xrcd.xrcdn, cq.cqn, uidx);
        outlen = CreateXrcSrqOut::BYTES;
    }
    let host = SrqHost {
        user_handle: a.user_handle,
        event_file: a.event_file,
        max_gs: avail_gs - u32::from(wq_sig),
        max_wr: max - 1,
        max_sge: a.max_sge,
    };
    let fw = hca.firmware();
    let out = fw.kernel_cmd(&inbox, outlen, Some(Host::Srq(host)))?;
    // Both outboxes name the SRQ in the same bits.
    let srqn = View::<CreateSrqOut>::new(&out).map_err(|_| Errno::EIO)?.get(CreateSrqOut::srqn);
    let srq = fw.srq(srqn).ok_or(Errno::EIO)?;
    let resp = Mlx5CreateSrqResp { srqn, reserved: 0 };
    let outlen = udata.out.len.min(std::mem::size_of::<Mlx5CreateSrqResp>());
    if let Err(e) = udata.copy_to(&resp.as_bytes()[..outlen]) {
        let _ = destroy_srq_cmd(hca, &srq, ctx.devx_uid);
        return Err(e);
    }
    srq.pd.usecnt.fetch_add(1, Ordering::SeqCst);
    if let Some((x, cq)) = a.xrc {
        x.refcnt.fetch_add(1, Ordering::SeqCst);
        cq.usecnt.fetch_add(1, Ordering::SeqCst);
        st.xrc_srqs.insert(srqn, (x, cq));
    }
    Ok(srq)
}

/// The CREATE_SRQ inbox as `create_srq_cmd` builds it for a basic SRQ: log size and
/// stride, the signature bit, the PD, the doorbell record, and the buffer as a list of
/// 4 KiB pages (softhca's DMA addresses are the process's virtual addresses). mlx5_ib's
/// own XRC domain and CQ, which it names for a basic SRQ, do not exist here: 0.
#[allow(clippy::too_many_arguments)]
pub(crate) fn create_srq_inbox(uid: u16, pdn: u32, max: u32, wqe_shift: u32, wq_sig: bool, buf: u64, buf_size: u64,
                               db: u64) -> Vec<u8> {
    const PAGE: u64 = 4096;
    let first = buf & !(PAGE - 1);
    let npages = (buf + buf_size - first).div_ceil(PAGE) as usize;
    let mut b = vec![0u8; CreateSrqIn::BYTES + npages * 8];
    if let Ok(mut v) = ViewMut::<CreateSrqIn>::new(&mut b) {
        v.set(CreateSrqIn::opcode, op::CREATE_SRQ).set(CreateSrqIn::uid, uid);
        v.sub_mut(CreateSrqIn::srq_context_entry)
            .set(Srqc::wq_signature, wq_sig)
            .set(Srqc::log_page_size, 0)
            .set(Srqc::log_rq_stride, (wqe_shift - 4) as u8)
            .set(Srqc::log_srq_size, max.ilog2() as u8)
            .set(Srqc::page_offset, ((buf - first) / 64) as u8)
            .set(Srqc::pd, pdn)
            .set(Srqc::dbr_addr, db);
    }
    for (i, e) in b[CreateSrqIn::BYTES..].chunks_exact_mut(8).enumerate() {
        e.copy_from_slice(&(first + i as u64 * PAGE).to_be_bytes());
    }
    b
}

/// CREATE_XRC_SRQ's inbox from a CREATE_SRQ one (`create_xrc_srq_cmd`: the same
/// context values, the page list after the same 0x110-byte command).
fn create_xrc_srq_inbox(basic: &[u8], xrcd: u32, cqn: u32, uidx: u32) -> Vec<u8> {
    let mut b = vec![0u8; basic.len()];
    b[CreateXrcSrqIn::BYTES..].copy_from_slice(&basic[CreateSrqIn::BYTES..]);
    let (Ok(src), Ok(mut v)) = (View::<CreateSrqIn>::new(basic), ViewMut::<CreateXrcSrqIn>::new(&mut b)) else { return b };
    let s = src.sub(CreateSrqIn::srq_context_entry);
    v.set(CreateXrcSrqIn::opcode, op::CREATE_XRC_SRQ).set(CreateXrcSrqIn::uid, src.get(CreateSrqIn::uid));
    v.sub_mut(CreateXrcSrqIn::xrc_srq_context_entry)
        .set(XrcSrqc::wq_signature, s.get(Srqc::wq_signature))
        .set(XrcSrqc::log_page_size, s.get(Srqc::log_page_size))
        .set(XrcSrqc::log_rq_stride, s.get(Srqc::log_rq_stride))
        .set(XrcSrqc::log_xrc_srq_size, s.get(Srqc::log_srq_size))
        .set(XrcSrqc::page_offset, s.get(Srqc::page_offset))
        .set(XrcSrqc::pd, s.get(Srqc::pd))
        .set(XrcSrqc::db_record_addr, s.get(Srqc::dbr_addr))
        .set(XrcSrqc::xrcd, xrcd)
        .set(XrcSrqc::cqn, cqn)
        .set(XrcSrqc::user_index, uidx);
    b
}

/// `mlx5_cmd_destroy_srq`: DESTROY_XRC_SRQ for an XRC SRQ, DESTROY_SRQ otherwise.
pub(crate) fn destroy_srq_cmd(hca: &Hca, srq: &Srq, uid: u16) -> Result<()> {
    let srqn = srq.srqn;
    if srq.xrc.is_some() {
        let mut b = vec![0u8; DestroyXrcSrqIn::BYTES];
        if let Ok(mut v) = ViewMut::<DestroyXrcSrqIn>::new(&mut b) {
            v.set(DestroyXrcSrqIn::opcode, op::DESTROY_XRC_SRQ).set(DestroyXrcSrqIn::uid, uid)
                .set(DestroyXrcSrqIn::xrc_srqn, srqn);
        }
        return hca.firmware().kernel_cmd(&b, MboxOut::BYTES, None).map(|_| ());
    }
    let mut b = vec![0u8; DestroySrqIn::BYTES];
    if let Ok(mut v) = ViewMut::<DestroySrqIn>::new(&mut b) {
        v.set(DestroySrqIn::opcode, op::DESTROY_SRQ).set(DestroySrqIn::uid, uid).set(DestroySrqIn::srqn, srqn);
    }
    hca.firmware().kernel_cmd(&b, MboxOut::BYTES, None).map(|_| ())
}

/// `uobj_get_obj_read` of an SRQ: the lookup's errno (ENOENT for a missing handle,
/// EINVAL for another type's), as the reference kernel propagates it ("RDMA/uverbs:
/// Propagate errors from rdma_lookup_get_uobject()", in the Debian 6.1 kernel whose
/// answers conformance/ records: a missing CQ or PD there is ENOENT too).
pub(crate) fn srq_of(st: &FileState, handle: u32) -> Result<Arc<Srq>> {
    match st.table.lookup(handle as i64, ObjType::Srq)? {
        Uobj::Srq(s) => Ok(s),
        _ => Err(Errno::EINVAL),
    }
}

/// CREATE_SRQ (write 32): `ib_uverbs_create_srq` as a basic `create_xsrq`.
pub(crate) fn create_srq_write(c: &mut WCall<'_>) -> Result<()> {
    let cmd: CreateSrq = c.request()?;
    let x = CreateXsrq {
        response: cmd.response,
        user_handle: cmd.user_handle,
        srq_type: uverbs::sys::ids::srq::SRQT_BASIC,
        pd_handle: cmd.pd_handle,
        max_wr: cmd.max_wr,
        max_sge: cmd.max_sge,
        srq_limit: cmd.srq_limit,
        ..Default::default()
    };
    create_xsrq_common(c, &x)
}

/// CREATE_XSRQ (write 39).
pub(crate) fn create_xsrq(c: &mut WCall<'_>) -> Result<()> {
    let cmd: CreateXsrq = c.request()?;
    create_xsrq_common(c, &cmd)
}

/// `__uverbs_create_xsrq`: a CQ or PD handle that does not resolve gives the lookup's
/// errno (see [`srq_of`]); an XRC domain handle that does not, EINVAL; a tag-matching SRQ is mlx5_ib's EINVAL (no tag list on this
/// device) and an unknown type its EOPNOTSUPP, both once the PD resolved.
fn create_xsrq_common(c: &mut WCall<'_>, cmd: &CreateXsrq) -> Result<()> {
    use uverbs::sys::ids::srq::{SRQT_BASIC, SRQT_TM, SRQT_XRC};
    let h = c.alloc(ObjType::Srq)?;
    let mut xrcd = None;
    if cmd.srq_type == SRQT_XRC {
        match c.st.table.lookup(cmd.xrcd_handle as i64, ObjType::Xrcd) {
            Ok(Uobj::Xrcd(x)) => xrcd = Some(x),
            _ => return Err(Errno::EINVAL),
        }
    }
    let mut cq = None;
    if matches!(cmd.srq_type, SRQT_XRC | SRQT_TM) {
        match c.st.table.lookup(cmd.cq_handle as i64, ObjType::Cq)? {
            Uobj::Cq(q) => cq = Some(q),
            _ => return Err(Errno::EINVAL),
        }
    }
    let Uobj::Pd(pd) = c.st.table.lookup(cmd.pd_handle as i64, ObjType::Pd)? else { return Err(Errno::EINVAL) };
    match cmd.srq_type {
        SRQT_BASIC | SRQT_XRC => {}
        SRQT_TM => return Err(Errno::EINVAL),
        _ => return Err(Errno::EOPNOTSUPP),
    }
    let args = SrqArgs {
        pd,
        max_wr: cmd.max_wr,
        max_sge: cmd.max_sge,
        user_handle: cmd.user_handle,
        event_file: c.st.default_async.clone(),
        xrc: xrcd.zip(cq),
    };
    let srq = create_srq(c.hca, c.st, args, &c.udata)?;
    c.st.table.fill(h, Uobj::Srq(srq.clone()));
    // The SRQ number is the answer's for an XRC SRQ only (the sender names it).
    let srqn = if srq.xrc.is_some() { srq.srqn } else { 0 };
    let resp = CreateSrqResp { srq_handle: h, max_wr: srq.max_wr, max_sge: srq.max_sge, srqn };
    c.response(resp.as_bytes())
}

/// `UVERBS_METHOD_SRQ_CREATE` (uverbs_std_types_srq.c), in its order: the inputs, the
/// type's own attributes, then the create and the two answers.
pub(crate) fn create_srq_ioctl(c: &mut Call<'_>) -> Result<()> {
    use uverbs::sys::ids::srq as ids;
    let max_sge: u32 = c.b.copy_from(ids::ATTR_CREATE_MAX_SGE)?;
    let max_wr: u32 = c.b.copy_from(ids::ATTR_CREATE_MAX_WR)?;
    let _limit: u32 = c.b.copy_from(ids::ATTR_CREATE_LIMIT)?;
    let user_handle: u64 = c.b.copy_from(ids::ATTR_CREATE_USER_HANDLE)?;
    let ty = c.b.get_const(ids::ATTR_CREATE_TYPE, u32::MAX as u64)? as u32;
    if matches!(ty, ids::SRQT_XRC | ids::SRQT_TM) && c.b.obj(ids::ATTR_CREATE_CQ_HANDLE).is_none() {
        return Err(Errno::ENOENT);
    }
    let mut xrc = None;
    match ty {
        ids::SRQT_BASIC => {}
        // uverbs_attr_get_uobject of an absent optional attribute: ENOENT.
        ids::SRQT_XRC => {
            let Some(Uobj::Xrcd(x)) = c.b.obj(ids::ATTR_CREATE_XRCD_HANDLE).cloned() else { return Err(Errno::ENOENT) };
            let Some(Uobj::Cq(cq)) = c.b.obj(ids::ATTR_CREATE_CQ_HANDLE).cloned() else { return Err(Errno::EINVAL) };
            xrc = Some((x, cq));
        }
        ids::SRQT_TM => {
            let _tags: u32 = c.b.copy_from(ids::ATTR_CREATE_MAX_NUM_TAGS)?;
            return Err(Errno::EINVAL);
        }
        _ => return Err(Errno::EINVAL),
    }
    let Some(Uobj::Pd(pd)) = c.b.obj(ids::ATTR_CREATE_PD_HANDLE).cloned() else { return Err(Errno::EINVAL) };
    let event_file = match c.b.fd_obj(ids::ATTR_CREATE_EVENT_FD) {
        Some(FdObj::Async(a)) => Some(a.clone()),
        _ => c.st.default_async.clone(),
    };
    let args = SrqArgs { pd, max_wr, max_sge, user_handle, event_file, xrc };
    let srq = create_srq(c.hca, c.st, args, &c.udata)?;
    let (wr, sge, srqn, is_xrc) = (srq.max_wr, srq.max_sge, srq.srqn, srq.xrc.is_some());
    c.fill_new(ids::ATTR_CREATE_HANDLE, Uobj::Srq(srq))?;
    c.b.copy_to(ids::ATTR_CREATE_RESP_MAX_WR, wr.as_bytes())?;
    c.b.copy_to(ids::ATTR_CREATE_RESP_MAX_SGE, sge.as_bytes())?;
    if is_xrc {
        c.b.copy_to(ids::ATTR_CREATE_RESP_SRQ_NUM, srqn.as_bytes())?;
    }
    Ok(())
}

/// MODIFY_SRQ (write 33): `mlx5_ib_modify_srq`: no resize; a limit below the WQE count
/// arms the limit event (ARM_RQ).
pub(crate) fn modify_srq(c: &mut WCall<'_>) -> Result<()> {
    let cmd: ModifySrq = c.request()?;
    let srq = srq_of(c.st, cmd.srq_handle)?;
    if cmd.attr_mask & SRQ_MAX_WR != 0 {
        return Err(Errno::EINVAL);
    }
    if cmd.attr_mask & SRQ_LIMIT != 0 {
        if cmd.srq_limit >= srq.wqe_count() {
            return Err(Errno::EINVAL);
        }
        let uid = c.st.ctx()?.devx_uid;
        let mut b = vec![0u8; ArmRqIn::BYTES];
        if let Ok(mut v) = ViewMut::<ArmRqIn>::new(&mut b) {
            v.set(ArmRqIn::opcode, op::ARM_RQ).set(ArmRqIn::uid, uid).set(ArmRqIn::op_mod, ARM_RQ_OP_MOD_SRQ)
                .set(ArmRqIn::srq_number, srq.srqn).set(ArmRqIn::lwm, cmd.srq_limit as u16);
        }
        c.hca.firmware().kernel_cmd(&b, MboxOut::BYTES, None)?;
    }
    Ok(())
}

/// QUERY_SRQ (write 34): `mlx5_ib_query_srq`: the limit from the firmware's context,
/// `max_wr` the WQE count less one, `max_sge` as created.
pub(crate) fn query_srq(c: &mut WCall<'_>) -> Result<()> {
    let cmd: QuerySrq = c.request()?;
    let srq = srq_of(c.st, cmd.srq_handle)?;
    let uid = c.st.ctx()?.devx_uid;
    let mut b = vec![0u8; QuerySrqIn::BYTES];
    if let Ok(mut v) = ViewMut::<QuerySrqIn>::new(&mut b) {
        v.set(QuerySrqIn::opcode, op::QUERY_SRQ).set(QuerySrqIn::uid, uid).set(QuerySrqIn::srqn, srq.srqn);
    }
    let out = c.hca.firmware().kernel_cmd(&b, QuerySrqOut::BYTES, None)?;
    let lwm = View::<QuerySrqOut>::new(&out).map_err(|_| Errno::EIO)?.sub(QuerySrqOut::srq_context_entry).get(Srqc::lwm);
    let resp = QuerySrqResp { max_wr: srq.wqe_count() - 1, max_sge: srq.max_sge, srq_limit: lwm as u32, reserved: 0 };
    c.response(resp.as_bytes())
}

/// The async events of a destroyed SRQ the application read (as for a QP: unread ones
/// are taken back out of the async file and not reported).
fn destroy_resp(srq: &Srq) -> DestroySrqResp {
    let unread = srq.event_file.as_ref().map_or(0, |f| f.discard(srq.user_handle));
    DestroySrqResp { events_reported: srq.events_reported.load(Ordering::SeqCst).saturating_sub(unread) }
}

/// DESTROY_SRQ (write 35): EBUSY while a QP is attached.
pub(crate) fn destroy_srq_write(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DestroySrq = c.request()?;
    let Uobj::Srq(srq) = c.st.destroy(c.hca, cmd.srq_handle as i64, ObjType::Srq)? else { return Err(Errno::EINVAL) };
    c.response(destroy_resp(&srq).as_bytes())
}

/// `UVERBS_METHOD_SRQ_DESTROY`: the SRQ is already gone; report its event count.
pub(crate) fn destroy_srq_ioctl(c: &mut Call<'_>) -> Result<()> {
    let Some(Uobj::Srq(srq)) = c.destroyed.as_ref() else { return Err(Errno::EINVAL) };
    let resp = destroy_resp(srq);
    c.b.copy_to(uverbs::sys::ids::destroy::ATTR_SRQ_RESP, resp.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values worked out from mlx5_ib_create_srq's formulas by hand, for what
    /// libmlx5 sends (`srq->max - 1` as max_wr: ibv_srq_pingpong's 500 WQEs with a wait
    /// queue become 1023, its one SGE a 32-byte WQE).
    #[test]
    fn geometry_is_mlx5_ibs() {
        assert_eq!(geometry(1023, 1), Ok((1024, 5, 1)));
        assert_eq!(geometry(0, 0), Ok((1, 5, 1)));
        assert_eq!(geometry(1024, 2), Ok((2048, 6, 3)));
        assert_eq!(geometry(7, 4), Ok((8, 7, 7)));
        assert_eq!(geometry((1 << 15) - 1, 31), Ok((1 << 15, 9, 31)));
        assert_eq!(geometry(1 << 15, 1), Err(Errno::EINVAL), "max_wr >= 1 << log_max_srq_sz");
        assert_eq!(geometry(16, 33), Err(Errno::EINVAL), "max_sge > max_wqe_sz_rq / 16");
    }
}
