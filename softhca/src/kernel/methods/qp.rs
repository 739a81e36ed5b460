//! Queue pairs: QP_CREATE (ioctl), CREATE_QP (write, legacy and extended), MODIFY_QP
//! (legacy and extended), QUERY_QP, QP_DESTROY / DESTROY_QP.
//!
//! Creation follows the core (`create_qp` / the QP_CREATE handler) and then
//! `mlx5_ib_create_qp` for a user QP: the driver data names the WQ buffer, its geometry
//! and the doorbell record, which go into the firmware's CREATE_QP ([`create_qp_inbox`]);
//! the firmware's QP is the verbs QP. Modification runs the core's checks, the state
//! table, mlx5's range checks and its firmware command table, builds the attributes the
//! way the QP context holds them (so QUERY_QP reads back what a ConnectX would: e.g.
//! `max_rd_atomic` rounded up to a power of two, the retry counters truncated to 3
//! bits), and sends the transition command, which moves the QP. Destroy is 2RST and
//! DESTROY_QP.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::qp as ids;
use uverbs::sys::mlx5::{
    CreateQp as Mlx5CreateQp, CreateQpResp as Mlx5CreateQpResp, ModifyQp as Mlx5ModifyQp, QP_FLAG_ALLOW_SCATTER_CQE,
    QP_FLAG_BFREG_INDEX, QP_FLAG_SCATTER_CQE, QP_FLAG_SIGNATURE, QP_FLAG_TIR_ALLOW_SELF_LB_MC,
    QP_FLAG_TIR_ALLOW_SELF_LB_UC, QP_FLAG_TYPE_DCI, QP_FLAG_TYPE_DCT, QP_FLAG_UAR_PAGE_INDEX,
};
use uverbs::sys::verbs::qp_attr::*;
use uverbs::sys::verbs::{
    CreateQp, CreateQpResp, DestroyQp, DestroyQpResp, ExCreateQp, ExCreateQpResp, ExModifyQp, ExModifyQpResp,
    ModifyQp, QpCap, QpDest, QueryQp, QueryQpResp, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
    QP_CREATE_BLOCK_MULTICAST_LOOPBACK, QP_CREATE_CVLAN_STRIPPING, QP_CREATE_PCI_WRITE_END_PADDING,
    QP_CREATE_SCATTER_FCS, QP_CREATE_SQ_SIG_ALL,
};

use prm::bits::{View, ViewMut};
use prm::cmd::header::MboxOut;
use prm::cmd::opcode as op;
use prm::cmd::qp::{self as q, CreateQpIn, CreateQpOut, DestroyQpIn, Qp2rstIn, Qpc};

use crate::firmware::{Host, QpHost};
use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::mlx5::{adjust_bfregn, caps, DEFAULT_UIDX, INVALID_BFREG};
use crate::kernel::pin::pin;
use crate::kernel::qp_state::{mlx5_has_command, modify_qp_is_ok, STANDARD_BITS};
use crate::kernel::udata::Udata;
use crate::kernel::uobject::{FdObj, ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::{FileState, Result};
use crate::objects::{AddressVector, AsyncEventFile, Cq, Pd, Qp, QpAttrs, QpState, QpType, Srq};

use super::port::port_valid;

/// Kernel-internal create flags the extended command may carry (`enum ib_qp_create_flags`).
const CREATE_CROSS_CHANNEL: u32 = 1 << 2;
const CREATE_MANAGED_SEND: u32 = 1 << 3;
const CREATE_MANAGED_RECV: u32 = 1 << 4;
const CREATE_SOURCE_QPN: u32 = 1 << 10;
/// `IB_UVERBS_CREATE_QP_MASK_IND_TABLE`.
const CREATE_QP_MASK_IND_TABLE: u32 = 1;

/// A source GID row for an address vector: EINVAL past the table, ENODATA when empty.
pub(crate) fn check_sgid(hca: &Hca, index: u8) -> Result<()> {
    hca.config().gid(index as u32).map_err(|_| Errno::EINVAL)?.ok_or(Errno::ENODATA).map(|_| ())
}

/// What the core hands the driver to create a QP.
pub(crate) struct QpArgs {
    pub ty: QpType,
    pub pd: Arc<Pd>,
    pub send_cq: Arc<Cq>,
    pub recv_cq: Arc<Cq>,
    /// The SRQ the QP receives from (it gets no RQ of its own).
    pub srq: Option<Arc<Srq>>,
    pub cap: QpCap,
    pub sq_sig_all: bool,
    pub create_flags: u32,
    pub user_handle: u64,
    pub event_file: Option<Arc<AsyncEventFile>>,
}

/// `mlx5_ib_create_qp` for a user QP plus the core's bookkeeping: validates the driver
/// data (docs/notes/kernel-6.1-uverbs.md §5.4), writes the driver response, has the
/// firmware make the QP (CREATE_QP) and counts the PD and CQ uses. Returns the QP and the capabilities to report.
pub(crate) fn create_qp(hca: &Hca, st: &mut FileState, mut a: QpArgs, udata: &Udata) -> Result<(Arc<Qp>, QpCap)> {
    let ctx = st.ctx_mut()?;
    // check_qp_type: no DC on this device.
    let raw = a.ty == QpType::RawPacket;
    match a.ty {
        QpType::Rc | QpType::Uc | QpType::Ud | QpType::XrcIni | QpType::RawPacket => {}
        // An XRC target QP is the kernel's (create_xrc_tgt_qp).
        QpType::XrcTgt | QpType::Driver => return Err(Errno::EOPNOTSUPP),
    }
    // process_udata_size / check_ucmd_data / copy
    let ucmd_size = std::mem::size_of::<Mlx5CreateQp>();
    let inlen = udata.inp.len();
    let min_inlen = 48; // offsetof(ece_options)
    if inlen < min_inlen {
        return Err(Errno::EINVAL);
    }
    let last = 54; // offsetof(reserved)
    if inlen > last && !udata.inp.is_cleared(last) {
        return Err(Errno::EINVAL);
    }
    let mut ucmd = Mlx5CreateQp::default();
    let n = inlen.min(ucmd_size);
    udata.inp.read(0, &mut ucmd.as_mut_bytes()[..n])?;
    // process_vendor_flags
    let mut flags = ucmd.flags;
    if flags & (QP_FLAG_TYPE_DCT | QP_FLAG_TYPE_DCI) != 0 {
        // DC transport is not supported here.
        return Err(Errno::EINVAL);
    }
    let mut flags_en = 0;
    let always = QP_FLAG_SIGNATURE | QP_FLAG_SCATTER_CQE | QP_FLAG_ALLOW_SCATTER_CQE | QP_FLAG_BFREG_INDEX
        | QP_FLAG_UAR_PAGE_INDEX;
    flags_en |= flags & always;
    flags &= !always;
    if a.ty == QpType::RawPacket {
        flags_en |= flags & (QP_FLAG_TIR_ALLOW_SELF_LB_UC | QP_FLAG_TIR_ALLOW_SELF_LB_MC);
        flags &= !(QP_FLAG_TIR_ALLOW_SELF_LB_UC | QP_FLAG_TIR_ALLOW_SELF_LB_MC);
    }
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    // get_qp_uidx
    let uidx = if ctx.cqe_version == 0 {
        if ucmd.uidx != DEFAULT_UIDX {
            return Err(Errno::EINVAL);
        }
        DEFAULT_UIDX
    } else {
        if ucmd.uidx >= DEFAULT_UIDX {
            return Err(Errno::EINVAL);
        }
        ucmd.uidx
    };
    // process_create_flags
    let mut cf = a.create_flags;
    let supported = QP_CREATE_BLOCK_MULTICAST_LOOPBACK | QP_CREATE_PCI_WRITE_END_PADDING;
    cf &= !supported;
    if cf & (CREATE_CROSS_CHANNEL | CREATE_MANAGED_SEND | CREATE_MANAGED_RECV | CREATE_SOURCE_QPN
             | QP_CREATE_SCATTER_FCS | QP_CREATE_CVLAN_STRIPPING) != 0 || cf != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    // create_user_qp: receive queue geometry
    let wq_sig = u32::from(flags_en & QP_FLAG_SIGNATURE != 0);
    if a.cap.max_recv_wr > 1 << caps::LOG_MAX_QP_SZ {
        return Err(Errno::EINVAL);
    }
    // qp_has_rq: none with an SRQ.
    let has_rq = a.cap.max_recv_wr != 0 && a.srq.is_none();
    let (rq_cnt, rq_shift, rq_max_gs) = if has_rq {
        if ucmd.rq_wqe_shift >= 31 {
            return Err(Errno::EINVAL);
        }
        let wqe_size = 1u32 << ucmd.rq_wqe_shift;
        if wqe_size / 16 < wq_sig {
            return Err(Errno::EINVAL);
        }
        (ucmd.rq_wqe_count, ucmd.rq_wqe_shift, wqe_size / 16 - wq_sig)
    } else {
        a.cap.max_recv_wr = 0;
        a.cap.max_recv_sge = 0;
        (0, 0, 0)
    };
    if ucmd.rq_wqe_shift != rq_shift || ucmd.rq_wqe_count != rq_cnt {
        return Err(Errno::EINVAL);
    }
    if ucmd.sq_wqe_count > 1 << caps::LOG_MAX_QP_SZ {
        return Err(Errno::EINVAL);
    }
    // _create_user_qp: which UAR the doorbells go to
    let dyn_uar = ctx.dyn_uar;
    let mut bfregn = None;
    let uar_page = match flags_en & (QP_FLAG_UAR_PAGE_INDEX | QP_FLAG_BFREG_INDEX) {
        QP_FLAG_UAR_PAGE_INDEX => ucmd.bfreg_index,
        QP_FLAG_BFREG_INDEX => {
            let b = ctx.bfregs.as_ref().ok_or(Errno::EINVAL)?;
            b.dyn_bfreg_page(ucmd.bfreg_index)?
        }
        0 => {
            if dyn_uar {
                return Err(Errno::EINVAL);
            }
            let b = ctx.bfregs.as_mut().ok_or(Errno::EINVAL)?;
            let n = b.alloc_bfreg();
            bfregn = Some(n);
            b.bfreg_page(n).unwrap_or(0)
        }
        _ => return Err(Errno::EINVAL),
    };
    let release = |ctx: &mut crate::kernel::mlx5::Ucontext| {
        if let Some(n) = bfregn {
            ctx.free_bfreg(n);
        }
    };
    // set_user_buf_size: 32-bit sizes as the driver computes them
    let sizes = (|| {
        let rq_size = (rq_cnt as u64) << rq_shift;
        if rq_size > i32::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        if ucmd.sq_wqe_count != 0 && !ucmd.sq_wqe_count.is_power_of_two() {
            return Err(Errno::EINVAL);
        }
        let sq_size = (ucmd.sq_wqe_count as u64) << 6;
        let total = rq_size + sq_size;
        if sq_size > i32::MAX as u64 || total > i32::MAX as u64 {
            return Err(Errno::EINVAL);
        }
        // A raw packet QP's SQ is a buffer of its own (`sq_buf_addr`): the main
        // buffer holds the RQ only.
        Ok((rq_size, if raw { rq_size } else { total }))
    })();
    // The SQ's offset (the RQ's size) is the firmware's to derive from the context.
    let (_sq_offset, buf_size) = match sizes {
        Ok(v) => v,
        Err(e) => {
            release(ctx);
            return Err(e);
        }
    };
    let pins = (|| {
        if ucmd.buf_addr != 0 && buf_size != 0 {
            pin(ucmd.buf_addr, buf_size, false)?;
            if ucmd.buf_addr % 64 != 0 {
                return Err(Errno::EINVAL);
            }
        }
        if raw && ucmd.sq_wqe_count != 0 {
            if ucmd.sq_buf_addr == 0 || ucmd.sq_buf_addr % 64 != 0 {
                return Err(Errno::EINVAL);
            }
            pin(ucmd.sq_buf_addr, (ucmd.sq_wqe_count as u64) << 6, false)?;
        }
        pin(ucmd.db_addr & !0xfff, 4096, false)
    })();
    if let Err(e) = pins {
        release(ctx);
        return Err(e);
    }
    let mut resp = Mlx5CreateQpResp {
        bfreg_index: bfregn.map(adjust_bfregn).unwrap_or(INVALID_BFREG),
        ..Default::default()
    };
    let outlen = udata.out.len.min(std::mem::size_of::<Mlx5CreateQpResp>());
    // A raw packet QP's response carries the numbers of the objects it is made of, so
    // it is written once they exist (as create_raw_packet_qp does).
    if !raw {
        if let Err(e) = udata.copy_to(&resp.as_bytes()[..outlen]) {
            release(ctx);
            return Err(e);
        }
    }
    // create_qp_common: CREATE_QP under the context's uid; the firmware's QP is the
    // verbs QP.
    let geo = UserQp {
        ty: a.ty,
        pdn: a.pd.pdn,
        cqn_snd: a.send_cq.cqn,
        cqn_rcv: a.recv_cq.cqn,
        uar_page,
        uidx,
        cqe_version: ctx.cqe_version,
        signature: wq_sig != 0,
        block_mc_lb: a.create_flags & QP_CREATE_BLOCK_MULTICAST_LOOPBACK != 0,
        rq_cnt,
        rq_shift,
        srqn: a.srq.as_ref().map(|s| s.srqn),
        sq_cnt: ucmd.sq_wqe_count,
        buf: ucmd.buf_addr,
        buf_size,
        db: ucmd.db_addr,
    };
    let inbox = create_qp_inbox(ctx.devx_uid, &geo);
    let host = QpHost {
        user_handle: a.user_handle,
        sq_sig_all: a.sq_sig_all,
        create_flags: a.create_flags & !QP_CREATE_SQ_SIG_ALL,
        mlx5_flags: flags_en,
        cap: a.cap,
        rq_max_gs,
        bfregn,
        event_file: a.event_file.clone(),
    };
    let fw = hca.firmware();
    let made = if raw {
        super::raw_qp::create(hca, ctx.devx_uid, &geo, ucmd.sq_buf_addr, host, &mut resp).and_then(|qp| {
            match udata.copy_to(&resp.as_bytes()[..outlen]) {
                Ok(()) => Ok(qp),
                Err(e) => {
                    let _ = super::raw_qp::destroy(hca, &qp, ctx.devx_uid);
                    Err(e)
                }
            }
        })
    } else {
        fw.kernel_cmd(&inbox, CreateQpOut::BYTES, Some(Host::Qp(host))).and_then(|out| {
            let qpn = View::<CreateQpOut>::new(&out).map_err(|_| Errno::EIO)?.get(CreateQpOut::qpn);
            fw.qp(qpn).ok_or(Errno::EIO)
        })
    };
    let qp = match made {
        Ok(qp) => qp,
        Err(e) => {
            release(ctx);
            return Err(e);
        }
    };
    qp.pd.usecnt.fetch_add(1, Ordering::SeqCst);
    for cq in [&qp.send_cq, &qp.recv_cq].into_iter().flatten() {
        cq.usecnt.fetch_add(1, Ordering::SeqCst);
    }
    if let Some(srq) = &qp.srq {
        srq.usecnt.fetch_add(1, Ordering::SeqCst);
    }
    Ok((qp, a.cap))
}

/// What `create_user_qp` / `create_qp_common` put into a user QP's CREATE_QP.
pub(crate) struct UserQp {
    pub ty: QpType,
    pub pdn: u32,
    pub cqn_snd: u32,
    pub cqn_rcv: u32,
    pub uar_page: u32,
    pub uidx: u32,
    pub cqe_version: u8,
    pub signature: bool,
    pub block_mc_lb: bool,
    pub rq_cnt: u32,
    pub rq_shift: u32,
    /// The SRQ the QP receives from (`rq_type` SRQ), instead of an RQ.
    pub srqn: Option<u32>,
    pub sq_cnt: u32,
    pub buf: u64,
    pub buf_size: u64,
    pub db: u64,
}

/// The CREATE_QP inbox of a user QP as mlx5_ib builds it: `st` of the type
/// (`to_mlx5_st`), `pm_state` MIGRATED, the PD, the UAR page, `user_index` with CQE
/// version 1, the WQ signature and multicast-loopback block bits, the RQ's
/// `log_rq_stride` (`wqe_shift - 4`, in the field's 3 bits as MLX5_SET truncates it)
/// and `log_rq_size` or a zero-length RQ, `log_sq_size` or `no_sq`, the CQs, the
/// doorbell record and the WQ buffer as a page list of 4 KiB pages (softhca's DMA
/// addresses are the process's virtual addresses).
pub(crate) fn create_qp_inbox(uid: u16, g: &UserQp) -> Vec<u8> {
    const PAGE: u64 = 4096;
    let first = g.buf & !(PAGE - 1);
    let npages = if g.buf_size == 0 { 0 } else { (g.buf + g.buf_size - first).div_ceil(PAGE) as usize };
    let mut b = vec![0u8; CreateQpIn::BYTES + npages * 8];
    if let Ok(mut v) = ViewMut::<CreateQpIn>::new(&mut b) {
        v.set(CreateQpIn::opcode, op::CREATE_QP).set(CreateQpIn::uid, uid);
        let mut c = v.sub_mut(CreateQpIn::qpc);
        let st = st_of(g.ty);
        c.set(Qpc::st, st)
            .set(Qpc::pm_state, q::pm_state::MIGRATED)
            .set(Qpc::pd, g.pdn)
            .set(Qpc::uar_page, g.uar_page)
            .set(Qpc::wq_signature, g.signature)
            .set(Qpc::block_lb_mc, g.block_mc_lb)
            .set(Qpc::log_page_size, 0)
            .set(Qpc::page_offset, ((g.buf - first) / 64) as u8)
            .set(Qpc::cqn_snd, g.cqn_snd)
            .set(Qpc::cqn_rcv, g.cqn_rcv)
            .set(Qpc::dbr_addr, g.db);
        if g.cqe_version == 1 {
            c.set(Qpc::user_index, g.uidx);
        }
        if let Some(srqn) = g.srqn {
            c.set(Qpc::rq_type, crate::firmware::RQ_TYPE_SRQ).set(Qpc::srqn_rmpn_xrqn, srqn);
        } else if g.rq_cnt != 0 {
            c.set(Qpc::log_rq_stride, (g.rq_shift.wrapping_sub(4) & 7) as u8)
                .set(Qpc::log_rq_size, (g.rq_cnt.ilog2() & 0xf) as u8);
        } else {
            c.set(Qpc::rq_type, RQ_TYPE_ZERO_LEN);
        }
        if g.sq_cnt != 0 {
            c.set(Qpc::log_sq_size, (g.sq_cnt.ilog2() & 0xf) as u8);
        } else {
            c.set(Qpc::no_sq, true);
        }
    }
    for (i, e) in b[CreateQpIn::BYTES..].chunks_exact_mut(8).enumerate() {
        e.copy_from_slice(&(first + i as u64 * PAGE).to_be_bytes());
    }
    b
}

/// `to_mlx5_st`.
fn st_of(ty: QpType) -> u8 {
    match ty {
        QpType::Rc => q::st::RC,
        QpType::Uc => q::st::UC,
        QpType::XrcIni | QpType::XrcTgt => q::st::XRC,
        _ => q::st::UD,
    }
}

/// `create_xrc_tgt_qp` (mlx5_ib) for a user's XRC_TGT QP: the driver data's size rule
/// and user index as for any user QP, then a CREATE_QP of `st` XRC with no SQ, receiving
/// from SRQs (`rq_type` SRQ; the XRCETH names which), in domain `xrcd`, with no buffer
/// or doorbell record of the user's. The domain's handle counts the QP.
pub(crate) fn create_xrc_tgt(hca: &Hca, st: &mut FileState, uxrcd: Arc<super::xrcd::UXrcd>, user_handle: u64,
                             event_file: Option<Arc<AsyncEventFile>>, udata: &Udata) -> Result<Arc<Qp>> {
    let ctx = st.ctx()?;
    let inlen = udata.inp.len();
    if inlen < 48 {
        return Err(Errno::EINVAL);
    }
    let mut ucmd = Mlx5CreateQp::default();
    let n = inlen.min(std::mem::size_of::<Mlx5CreateQp>());
    udata.inp.read(0, &mut ucmd.as_mut_bytes()[..n])?;
    let uidx = if ctx.cqe_version == 0 {
        DEFAULT_UIDX
    } else if ucmd.uidx >= DEFAULT_UIDX {
        return Err(Errno::EINVAL);
    } else {
        ucmd.uidx
    };
    let resp = Mlx5CreateQpResp { bfreg_index: INVALID_BFREG, ..Default::default() };
    let outlen = udata.out.len.min(std::mem::size_of::<Mlx5CreateQpResp>());
    udata.copy_to(&resp.as_bytes()[..outlen])?;
    let mut b = vec![0u8; CreateQpIn::BYTES];
    if let Ok(mut v) = ViewMut::<CreateQpIn>::new(&mut b) {
        v.set(CreateQpIn::opcode, op::CREATE_QP).set(CreateQpIn::uid, ctx.devx_uid);
        let mut c = v.sub_mut(CreateQpIn::qpc);
        c.set(Qpc::st, q::st::XRC)
            .set(Qpc::pm_state, q::pm_state::MIGRATED)
            .set(Qpc::rq_type, crate::firmware::RQ_TYPE_SRQ)
            .set(Qpc::no_sq, true)
            .set(Qpc::xrcd, uxrcd.xrcd.xrcdn);
        if ctx.cqe_version == 1 {
            c.set(Qpc::user_index, uidx);
        }
    }
    let host = QpHost {
        user_handle,
        sq_sig_all: false,
        create_flags: 0,
        mlx5_flags: 0,
        cap: QpCap::default(),
        rq_max_gs: 0,
        bfregn: None,
        event_file,
    };
    let fw = hca.firmware();
    let out = fw.kernel_cmd(&b, CreateQpOut::BYTES, Some(Host::Qp(host)))?;
    let qpn = View::<CreateQpOut>::new(&out).map_err(|_| Errno::EIO)?.get(CreateQpOut::qpn);
    let qp = fw.qp(qpn).ok_or(Errno::EIO)?;
    qp.pd.usecnt.fetch_add(1, Ordering::SeqCst);
    uxrcd.refcnt.fetch_add(1, Ordering::SeqCst);
    st.xrc_tgts.insert(qpn, uxrcd);
    Ok(qp)
}

/// `MLX5_ZERO_LEN_RQ`.
const RQ_TYPE_ZERO_LEN: u8 = 0x3;

/// `destroy_qp_common`: 2RST unless the QP is in RESET already, then DESTROY_QP, under
/// the context's uid.
pub(crate) fn destroy_qp_cmds(hca: &Hca, qp: &Arc<Qp>, uid: u16) -> Result<()> {
    if qp.qp_type == QpType::RawPacket {
        return super::raw_qp::destroy(hca, qp, uid);
    }
    let fw = hca.firmware();
    if qp.state() != QpState::Reset {
        let mut b = vec![0u8; Qp2rstIn::BYTES];
        if let Ok(mut v) = ViewMut::<Qp2rstIn>::new(&mut b) {
            v.set(Qp2rstIn::opcode, op::QP_2RST).set(Qp2rstIn::uid, uid).set(Qp2rstIn::qpn, qp.qpn);
        }
        fw.kernel_cmd(&b, MboxOut::BYTES, None)?;
    }
    let mut b = vec![0u8; DestroyQpIn::BYTES];
    if let Ok(mut v) = ViewMut::<DestroyQpIn>::new(&mut b) {
        v.set(DestroyQpIn::opcode, op::DESTROY_QP).set(DestroyQpIn::uid, uid).set(DestroyQpIn::qpn, qp.qpn);
    }
    fw.kernel_cmd(&b, MboxOut::BYTES, None).map(|_| ())
}

fn as_pd(o: Uobj) -> Result<Arc<Pd>> {
    match o {
        Uobj::Pd(p) => Ok(p),
        _ => Err(Errno::EINVAL),
    }
}

fn as_cq(o: Uobj) -> Result<Arc<Cq>> {
    match o {
        Uobj::Cq(c) => Ok(c),
        _ => Err(Errno::EINVAL),
    }
}

/// `UVERBS_METHOD_QP_CREATE`.
pub(crate) fn create_qp_ioctl(c: &mut Call<'_>) -> Result<()> {
    let cap: QpCap = c.b.copy_from_or_zero(ids::ATTR_CREATE_CAP)?;
    let user_handle: u64 = c.b.copy_from(ids::ATTR_CREATE_USER_HANDLE)?;
    let ty_num = c.b.get_const(ids::ATTR_CREATE_TYPE, u32::MAX as u64)? as u32;
    let ty = match QpType::from_u32(ty_num) {
        Some(QpType::XrcTgt) => {
            for id in [ids::ATTR_CREATE_RECV_CQ_HANDLE, ids::ATTR_CREATE_SEND_CQ_HANDLE, ids::ATTR_CREATE_PD_HANDLE,
                       ids::ATTR_CREATE_IND_TABLE_HANDLE] {
                if c.b.is_valid(id) {
                    return Err(Errno::EINVAL);
                }
            }
            let Some(Uobj::Xrcd(x)) = c.b.obj(ids::ATTR_CREATE_XRCD_HANDLE).cloned() else { return Err(Errno::ENOENT) };
            let user_handle: u64 = c.b.copy_from(ids::ATTR_CREATE_USER_HANDLE)?;
            let event_file = match c.b.fd_obj(ids::ATTR_CREATE_EVENT_FD) {
                Some(FdObj::Async(a)) => Some(a.clone()),
                _ => c.st.default_async.clone(),
            };
            let qp = create_xrc_tgt(c.hca, c.st, x, user_handle, event_file, &c.udata)?;
            let qpn = qp.qpn;
            c.fill_new(ids::ATTR_CREATE_HANDLE, Uobj::Qp(qp))?;
            c.b.copy_to_struct_or_zero(ids::ATTR_CREATE_RESP_CAP, QpCap::default().as_bytes())?;
            return c.b.copy_to(ids::ATTR_CREATE_RESP_QP_NUM, qpn.as_bytes());
        }
        Some(t) => t,
        None => return Err(Errno::EINVAL),
    };
    if ty == QpType::RawPacket && !c.hca.cap_net_raw() {
        return Err(Errno::EPERM);
    }
    if c.b.is_valid(ids::ATTR_CREATE_XRCD_HANDLE)
        || (c.b.is_valid(ids::ATTR_CREATE_SRQ_HANDLE) && ty == QpType::XrcIni) {
        return Err(Errno::EINVAL);
    }
    let pd = as_pd(c.b.obj(ids::ATTR_CREATE_PD_HANDLE).cloned().ok_or(Errno::ENOENT)?)?;
    // No RWQ indirection table can exist, so the IND_TABLE attribute never resolves.
    let send_cq = as_cq(c.b.obj(ids::ATTR_CREATE_SEND_CQ_HANDLE).cloned().ok_or(Errno::ENOENT)?)?;
    let recv_cq = if ty != QpType::XrcIni {
        as_cq(c.b.obj(ids::ATTR_CREATE_RECV_CQ_HANDLE).cloned().ok_or(Errno::ENOENT)?)?
    } else {
        send_cq.clone()
    };
    let allowed = QP_CREATE_BLOCK_MULTICAST_LOOPBACK | QP_CREATE_SCATTER_FCS | QP_CREATE_CVLAN_STRIPPING
        | QP_CREATE_PCI_WRITE_END_PADDING | QP_CREATE_SQ_SIG_ALL;
    let mut flags = c.b.get_flags32(ids::ATTR_CREATE_FLAGS, allowed as u64)?;
    // check_creation_flags
    let extra = flags & !QP_CREATE_SQ_SIG_ALL;
    if extra != 0 && ty != QpType::Driver {
        if ty != QpType::RawPacket && ty != QpType::Ud {
            return Err(Errno::EINVAL);
        }
        if extra & (QP_CREATE_SCATTER_FCS | QP_CREATE_CVLAN_STRIPPING) != 0 && ty != QpType::RawPacket {
            return Err(Errno::EINVAL);
        }
    }
    if c.b.is_valid(ids::ATTR_CREATE_SOURCE_QPN) {
        let _qpn: u32 = c.b.copy_from(ids::ATTR_CREATE_SOURCE_QPN)?;
        flags |= CREATE_SOURCE_QPN;
    }
    let srq = match c.b.obj(ids::ATTR_CREATE_SRQ_HANDLE) {
        Some(Uobj::Srq(s)) => Some(s.clone()),
        Some(_) => return Err(Errno::EINVAL),
        None => None,
    };
    let event_file = match c.b.fd_obj(ids::ATTR_CREATE_EVENT_FD) {
        Some(FdObj::Async(a)) => Some(a.clone()),
        _ => c.st.default_async.clone(),
    };
    let sq_sig_all = flags & QP_CREATE_SQ_SIG_ALL != 0;
    let args = QpArgs { ty, pd, send_cq, recv_cq, srq, cap, sq_sig_all, create_flags: flags & !QP_CREATE_SQ_SIG_ALL,
                        user_handle, event_file };
    let (qp, cap) = create_qp(c.hca, c.st, args, &c.udata)?;
    let qpn = qp.qpn;
    c.fill_new(ids::ATTR_CREATE_HANDLE, Uobj::Qp(qp))?;
    c.b.copy_to_struct_or_zero(ids::ATTR_CREATE_RESP_CAP, cap.as_bytes())?;
    c.b.copy_to(ids::ATTR_CREATE_RESP_QP_NUM, qpn.as_bytes())
}

/// The write path's `create_qp`.
fn create_qp_common(c: &mut WCall<'_>, cmd: ExCreateQp) -> Result<(Arc<Qp>, QpCap)> {
    let ty = match QpType::from_u32(cmd.qp_type as u32) {
        Some(QpType::RawPacket) => {
            if !c.hca.cap_net_raw() {
                return Err(Errno::EPERM);
            }
            QpType::RawPacket
        }
        Some(t) => t,
        None => return Err(Errno::EINVAL),
    };
    c.alloc(ObjType::Qp)?;
    if cmd.comp_mask & CREATE_QP_MASK_IND_TABLE != 0 {
        c.st.table.lookup(cmd.rwq_ind_tbl_handle as i64, ObjType::RwqIndTbl)?;
    }
    let mut cap = QpCap {
        max_send_wr: cmd.max_send_wr,
        max_recv_wr: cmd.max_recv_wr,
        max_send_sge: cmd.max_send_sge,
        max_recv_sge: cmd.max_recv_sge,
        max_inline_data: cmd.max_inline_data,
    };
    if ty == QpType::XrcTgt {
        // create_qp: pd_handle names the XRC domain (EINVAL when it does not resolve).
        let Ok(Uobj::Xrcd(x)) = c.st.table.lookup(cmd.pd_handle as i64, ObjType::Xrcd) else { return Err(Errno::EINVAL) };
        let qp = create_xrc_tgt(c.hca, c.st, x, cmd.user_handle, c.st.default_async.clone(), &c.udata)?;
        if let Some(h) = c.new {
            c.st.table.fill(h, Uobj::Qp(qp.clone()));
        }
        return Ok((qp, QpCap::default()));
    }
    let mut rcq = None;
    let mut srq = None;
    if ty == QpType::XrcIni {
        cap.max_recv_wr = 0;
        cap.max_recv_sge = 0;
    } else {
        if cmd.is_srq != 0 {
            // uobj_get_obj_read: the lookup's errno.
            srq = Some(super::srq::srq_of(c.st, cmd.srq_handle)?);
        }
        if cmd.recv_cq_handle != cmd.send_cq_handle {
            rcq = Some(as_cq(c.st.table.lookup(cmd.recv_cq_handle as i64, ObjType::Cq)?)?);
        }
    }
    let scq = as_cq(c.st.table.lookup(cmd.send_cq_handle as i64, ObjType::Cq)?)?;
    let rcq = rcq.unwrap_or_else(|| scq.clone());
    let pd = as_pd(c.st.table.lookup(cmd.pd_handle as i64, ObjType::Pd)?)?;
    let core_flags = QP_CREATE_BLOCK_MULTICAST_LOOPBACK | CREATE_CROSS_CHANNEL | CREATE_MANAGED_SEND
        | CREATE_MANAGED_RECV | QP_CREATE_SCATTER_FCS | QP_CREATE_CVLAN_STRIPPING | CREATE_SOURCE_QPN
        | QP_CREATE_PCI_WRITE_END_PADDING;
    if cmd.create_flags & !core_flags != 0 {
        return Err(Errno::EINVAL);
    }
    if cmd.create_flags & CREATE_SOURCE_QPN != 0 && !c.hca.cap_net_raw() {
        return Err(Errno::EPERM);
    }
    let args = QpArgs { ty, pd, send_cq: scq, recv_cq: rcq, srq, cap, sq_sig_all: cmd.sq_sig_all != 0,
                        create_flags: cmd.create_flags, user_handle: cmd.user_handle,
                        event_file: c.st.default_async.clone() };
    let (qp, cap) = create_qp(c.hca, c.st, args, &c.udata)?;
    if let Some(h) = c.new {
        c.st.table.fill(h, Uobj::Qp(qp.clone()));
    }
    Ok((qp, cap))
}

fn create_resp(handle: u32, qpn: u32, cap: QpCap) -> CreateQpResp {
    CreateQpResp {
        qp_handle: handle,
        qpn,
        max_send_wr: cap.max_send_wr,
        max_recv_wr: cap.max_recv_wr,
        max_send_sge: cap.max_send_sge,
        max_recv_sge: cap.max_recv_sge,
        max_inline_data: cap.max_inline_data,
        reserved: 0,
    }
}

/// CREATE_QP (write 24).
pub(crate) fn create_qp_write(c: &mut WCall<'_>) -> Result<()> {
    let cmd: CreateQp = c.request()?;
    let ex = ExCreateQp {
        user_handle: cmd.user_handle,
        pd_handle: cmd.pd_handle,
        send_cq_handle: cmd.send_cq_handle,
        recv_cq_handle: cmd.recv_cq_handle,
        srq_handle: cmd.srq_handle,
        max_send_wr: cmd.max_send_wr,
        max_recv_wr: cmd.max_recv_wr,
        max_send_sge: cmd.max_send_sge,
        max_recv_sge: cmd.max_recv_sge,
        max_inline_data: cmd.max_inline_data,
        sq_sig_all: cmd.sq_sig_all,
        qp_type: cmd.qp_type,
        is_srq: cmd.is_srq,
        ..Default::default()
    };
    let (qp, cap) = create_qp_common(c, ex)?;
    let h = c.new.unwrap_or(0);
    c.response(create_resp(h, qp.qpn, cap).as_bytes())
}

/// EX_CREATE_QP.
pub(crate) fn create_qp_ex(c: &mut WCall<'_>) -> Result<()> {
    let cmd: ExCreateQp = c.request()?;
    if cmd.comp_mask & !CREATE_QP_MASK_IND_TABLE != 0 || cmd.reserved != 0 {
        return Err(Errno::EINVAL);
    }
    let (qp, cap) = create_qp_common(c, cmd)?;
    let h = c.new.unwrap_or(0);
    let mut resp = ExCreateQpResp { base: create_resp(h, qp.qpn, cap), ..Default::default() };
    resp.response_length = c.response_length(std::mem::size_of_val(&resp));
    c.response(resp.as_bytes())
}

/// `ceil(log2(n))` as the firmware stores outstanding-read depths (`fls(n - 1)`).
fn log2_ceil(n: u8) -> u8 {
    if n <= 1 { 0 } else { (8 - (n - 1).leading_zeros()) as u8 }
}

/// The core's and mlx5's modify_qp (docs/notes/kernel-6.1-uverbs.md §4.3, §4.4).
fn modify_qp(hca: &Hca, st: &mut FileState, cmd: &ExModifyQp, udata: &Udata) -> Result<()> {
    let b = &cmd.base;
    let mut mask = b.attr_mask;
    let qp = match st.table.lookup(b.qp_handle as i64, ObjType::Qp)? {
        Uobj::Qp(q) => q,
        _ => return Err(Errno::EINVAL),
    };
    let mut port_num = b.port_num;
    if mask & PORT != 0 && !port_valid(b.port_num as u64) {
        return Err(Errno::EINVAL);
    }
    let core_port = qp.attrs().port;
    if mask & AV != 0 {
        if !port_valid(b.dest.port_num as u64) {
            return Err(Errno::EINVAL);
        }
        if mask & STATE != 0 && b.qp_state == QpState::Rtr as u8 {
            if b.dest.port_num != core_port {
                return Err(Errno::EINVAL);
            }
        } else {
            if mask & (AV | PORT) == AV | PORT && b.port_num != b.dest.port_num {
                return Err(Errno::EINVAL);
            }
            if mask & (AV | PORT) == AV {
                mask |= PORT;
                port_num = b.dest.port_num;
            }
        }
    }
    if mask & ALT_PATH != 0
        && (!port_valid(b.alt_port_num as u64) || !port_valid(b.alt_dest.port_num as u64)
            || b.alt_port_num != b.alt_dest.port_num) {
        return Err(Errno::EINVAL);
    }
    if (mask & CUR_STATE != 0 && b.cur_qp_state > QpState::Err as u8)
        || (mask & STATE != 0 && b.qp_state > QpState::Err as u8) {
        return Err(Errno::EINVAL);
    }
    if mask & QKEY != 0 && b.qkey & 0x8000_0000 != 0 && !hca.cap_net_raw() {
        return Err(Errno::EPERM);
    }
    // _ib_modify_qp: address vector on RoCE needs a GRH and a filled source GID row.
    if mask & AV != 0 {
        if b.dest.is_global == 0 {
            return Err(Errno::EINVAL);
        }
        check_sgid(hca, b.dest.sgid_index)?;
    }
    if mask & ALT_PATH != 0 {
        if b.alt_dest.is_global == 0 {
            return Err(Errno::EINVAL);
        }
        check_sgid(hca, b.alt_dest.sgid_index)?;
        // No alternate paths on RoCE.
        return Err(Errno::EINVAL);
    }
    let rq_psn = b.rq_psn & 0xff_ffff;
    let sq_psn = b.sq_psn & 0xff_ffff;

    // mlx5_ib_modify_qp
    if mask & !(STANDARD_BITS | RATE_LIMIT) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    if udata.inp.len() != 0 {
        let inlen = udata.inp.len();
        if inlen < 12 {
            return Err(Errno::EINVAL);
        }
        let size = std::mem::size_of::<Mlx5ModifyQp>();
        if inlen > size && !udata.inp.is_cleared(size) {
            return Err(Errno::EOPNOTSUPP);
        }
        let ucmd: Mlx5ModifyQp = udata.inp.read_prefix()?;
        if ucmd.comp_mask != 0 || ucmd.burst_reserved != 0 {
            return Err(Errno::EOPNOTSUPP);
        }
    }
    let attrs = qp.attrs.lock().unwrap_or_else(|p| p.into_inner());
    let real = attrs.state;
    let cur = if mask & CUR_STATE != 0 { QpState::from_u8(b.cur_qp_state).ok_or(Errno::EINVAL)? } else { real };
    let new = if mask & STATE != 0 { QpState::from_u8(b.qp_state).ok_or(Errno::EINVAL)? } else { cur };
    if !modify_qp_is_ok(cur, new, qp.qp_type, mask) {
        return Err(Errno::EINVAL);
    }
    if mask & PORT != 0 && !port_valid(port_num as u64) {
        return Err(Errno::EINVAL);
    }
    if mask & PKEY_INDEX != 0 && b.pkey_index as u32 >= caps::PKEY_TABLE_LEN {
        return Err(Errno::EINVAL);
    }
    if mask & MAX_QP_RD_ATOMIC != 0 && b.max_rd_atomic as u32 > 1 << caps::LOG_MAX_RA_RES_QP {
        return Err(Errno::EINVAL);
    }
    if mask & MAX_DEST_RD_ATOMIC != 0 && b.max_dest_rd_atomic as u32 > 1 << caps::LOG_MAX_RA_REQ_QP {
        return Err(Errno::EINVAL);
    }
    if cur == QpState::Reset && new == QpState::Reset {
        return Ok(());
    }
    // __mlx5_ib_modify_qp: build the new context, then the firmware command.
    let mut n = *attrs;
    n.path_mig_state = if mask & PATH_MIG_STATE != 0 { b.path_mig_state.min(2) } else { 0 };
    if qp.qp_type == QpType::Ud {
        n.path_mtu = uverbs::sys::verbs::mtu::MTU_4096;
    } else if mask & PATH_MTU != 0 {
        if !(1..=5).contains(&b.path_mtu) {
            return Err(Errno::EINVAL);
        }
        n.path_mtu = b.path_mtu;
    }
    if mask & DEST_QPN != 0 {
        n.dest_qpn = b.dest_qp_num & 0xff_ffff;
    }
    if mask & PKEY_INDEX != 0 {
        n.pkey_index = b.pkey_index;
    }
    if mask & PORT != 0 {
        n.port = port_num;
    }
    if mask & AV != 0 {
        let d: &QpDest = &b.dest;
        if !(d.static_rate == 0 || (2..=22).contains(&d.static_rate)) {
            return Err(Errno::EINVAL);
        }
        // ib_resolve_eth_dmac: where the GID leads (a link-local GID on softhca's link,
        // see config::Config::peer_addr).
        let (dmac, dest_ip) = hca.config().resolve(&d.dgid);
        // mlx5_set_path: a connected QP's RoCEv2 source port, from the flow label or the
        // QPN pair, when the modify names the destination QP (INIT->RTR); otherwise the
        // context keeps the one it has.
        let udp_sport = if qp.qp_type.is_connected() && mask & DEST_QPN != 0 {
            crate::wire::udp_sport::udp_sport(d.flow_label, qp.qpn, n.dest_qpn)
        } else {
            attrs.av.udp_sport
        };
        n.av = AddressVector {
            dgid: d.dgid,
            flow_label: d.flow_label & 0xf_ffff,
            udp_sport,
            sgid_index: d.sgid_index,
            hop_limit: d.hop_limit,
            traffic_class: d.traffic_class,
            sl: d.sl & 7,
            static_rate: d.static_rate,
            dlid: 0,
            src_path_bits: 0,
            dmac,
            dest_ip,
        };
        n.port = if mask & PORT != 0 { port_num } else { core_port };
    }
    if mask & TIMEOUT != 0 {
        n.timeout = b.timeout & 0x1f;
    }
    if mask & RNR_RETRY != 0 {
        n.rnr_retry = b.rnr_retry & 7;
    }
    if mask & RETRY_CNT != 0 {
        n.retry_cnt = b.retry_cnt & 7;
    }
    if mask & MAX_QP_RD_ATOMIC != 0 && b.max_rd_atomic != 0 {
        n.log_sra_max = log2_ceil(b.max_rd_atomic);
    }
    if mask & SQ_PSN != 0 {
        n.sq_psn = sq_psn;
    }
    if mask & MAX_DEST_RD_ATOMIC != 0 && b.max_dest_rd_atomic != 0 {
        n.log_rra_max = log2_ceil(b.max_dest_rd_atomic);
    }
    if mask & (ACCESS_FLAGS | MAX_DEST_RD_ATOMIC) != 0 {
        let depth = if mask & MAX_DEST_RD_ATOMIC != 0 { b.max_dest_rd_atomic } else { attrs.resp_depth };
        let mut access = if mask & ACCESS_FLAGS != 0 { b.qp_access_flags } else { attrs.access_requested };
        if depth == 0 {
            access &= ACCESS_REMOTE_WRITE;
        }
        n.access = access & (ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC);
    }
    if mask & MIN_RNR_TIMER != 0 {
        n.min_rnr_timer = b.min_rnr_timer & 0x1f;
    }
    if mask & RQ_PSN != 0 {
        n.rq_psn = rq_psn;
    }
    if mask & QKEY != 0 {
        n.qkey = b.qkey;
    }
    if mask & EN_SQD_ASYNC_NOTIFY != 0 {
        n.en_sqd_async_notify = b.en_sqd_async_notify != 0;
    }
    if mask & RATE_LIMIT != 0 {
        n.rate_limit = cmd.rate_limit;
    }
    if !mlx5_has_command(cur, new) {
        return Err(Errno::EINVAL);
    }
    // The firmware checks the claimed current state against the real one.
    if cur != real {
        return Err(Errno::EINVAL);
    }
    n.state = new;
    n.sq_draining = false;
    if mask & ACCESS_FLAGS != 0 {
        n.access_requested = b.qp_access_flags;
    }
    if mask & MAX_DEST_RD_ATOMIC != 0 {
        n.resp_depth = b.max_dest_rd_atomic;
    }
    // The firmware takes the QP's attributes lock itself (and rechecks the state the
    // QP is in: the device half may have moved it to ERR meanwhile: EINVAL then).
    drop(attrs);
    let uid = st.ctx()?.devx_uid;
    if qp.qp_type == QpType::RawPacket {
        return super::raw_qp::modify(hca, &qp, uid, cur, new, mask & RATE_LIMIT != 0, n);
    }
    let inbox = transition_inbox(uid, &qp, cur, new, &n).ok_or(Errno::EINVAL)?;
    hca.firmware().kernel_cmd(&inbox, TRANSITION_OUTLEN, Some(Host::QpAttrs(Box::new(n)))).map(|_| ())
}

/// The longest answer of a transition command (the others are the 16-byte header).
const TRANSITION_OUTLEN: usize = q::Rst2initQpOut::BYTES;

/// `__mlx5_ib_modify_qp`'s firmware command for `cur -> new` (its `optab`), with the
/// QP context built from the new attributes `n` (`to_mlx5_st`, the primary address
/// path, MTU, PSNs, keys, retry counts, RDMA limits, access bits). None where mlx5 has
/// no command (SQD -> RTS is unreachable here: softhca never enters SQD).
/// The context carries every attribute, so of the optional parameters only INIT2RTR's
/// Q_Key (the one softhca's firmware reads the mask for) is flagged; the rest of
/// `__mlx5_ib_modify_qp`'s optional-parameter table is not modelled.
fn transition_inbox(uid: u16, qp: &Qp, cur: QpState, new: QpState, n: &QpAttrs) -> Option<Vec<u8>> {
    use QpState::*;
    let opcode = match (cur, new) {
        (_, Reset) => op::QP_2RST,
        (_, Err) => op::QP_2ERR,
        (Reset, Init) => op::RST2INIT_QP,
        (Init, Init) => op::INIT2INIT_QP,
        (Init, Rtr) => op::INIT2RTR_QP,
        (Rtr, Rts) => op::RTR2RTS_QP,
        (Rts, Rts) => op::RTS2RTS_QP,
        (Sqe, Rts) => op::SQERR2RTS_QP,
        _ => return None,
    };
    // Every transition inbox starts as RST2INIT's; the longest of them is enough for
    // all (a longer inbox is accepted, its tail ignored).
    let len = [q::Rst2initQpIn::BYTES, q::Init2rtrQpIn::BYTES, q::Rtr2rtsQpIn::BYTES, q::Rts2rtsQpIn::BYTES]
        .into_iter()
        .max()
        .unwrap_or(q::Rst2initQpIn::BYTES);
    let mut b = vec![0u8; len];
    let mut v = ViewMut::<q::Rst2initQpIn>::new(&mut b).ok()?;
    v.set(q::Rst2initQpIn::opcode, opcode).set(q::Rst2initQpIn::uid, uid).set(q::Rst2initQpIn::qpn, qp.qpn);
    if opcode == op::INIT2RTR_QP {
        v.set(q::Rst2initQpIn::opt_param_mask, q::optpar::Q_KEY);
    }
    if !matches!(opcode, op::QP_2RST | op::QP_2ERR) {
        let mut c = v.sub_mut(q::Rst2initQpIn::qpc);
        let st = st_of(qp.qp_type);
        c.set(Qpc::st, st).set(Qpc::pm_state, n.path_mig_state);
        crate::firmware::write_qp_attrs(n, &mut c);
    }
    Some(b)
}

/// MODIFY_QP (write 26): no driver data, no response.
pub(crate) fn modify_qp_write(c: &mut WCall<'_>) -> Result<()> {
    let base: ModifyQp = c.request()?;
    if base.attr_mask & !STANDARD_BITS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let cmd = ExModifyQp { base, ..Default::default() };
    modify_qp(c.hca, c.st, &cmd, &Udata::default())
}

/// EX_MODIFY_QP: driver data allowed, `{comp_mask, response_length}` back.
pub(crate) fn modify_qp_ex(c: &mut WCall<'_>) -> Result<()> {
    let cmd: ExModifyQp = c.request()?;
    if cmd.base.attr_mask & !(STANDARD_BITS | RATE_LIMIT) != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let resp = ExModifyQpResp { comp_mask: 0, response_length: c.response_length(8) };
    modify_qp(c.hca, c.st, &cmd, &c.udata)?;
    c.response(resp.as_bytes())
}

/// The QP context as QUERY_QP reports it (`mlx5_ib_query_qp`).
pub(crate) fn query_resp(qp: &Qp) -> QueryQpResp {
    let a = qp.attrs();
    let mut r = QueryQpResp {
        max_recv_wr: qp.rq_wqe_count,
        max_recv_sge: qp.rq_max_gs,
        qkey: a.qkey,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qp_num: a.dest_qpn,
        qp_access_flags: a.access,
        pkey_index: a.pkey_index,
        qp_state: a.state as u8,
        cur_qp_state: a.state as u8,
        path_mtu: a.path_mtu,
        path_mig_state: a.path_mig_state,
        sq_draining: a.sq_draining as u8,
        max_rd_atomic: a.max_rd_atomic() as u8,
        max_dest_rd_atomic: a.max_dest_rd_atomic() as u8,
        min_rnr_timer: a.min_rnr_timer,
        port_num: a.port,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        sq_sig_all: qp.sq_sig_all as u8,
        ..Default::default()
    };
    if qp.qp_type.is_connected() && a.port != 0 {
        r.dest = QpDest {
            dgid: a.av.dgid,
            flow_label: a.av.flow_label,
            sgid_index: a.av.sgid_index,
            hop_limit: a.av.hop_limit,
            traffic_class: a.av.traffic_class,
            static_rate: a.av.static_rate,
            is_global: 1,
            port_num: a.port,
            ..Default::default()
        };
    }
    r
}

/// QUERY_QP (write 25). The attribute mask is not looked at.
pub(crate) fn query_qp(c: &mut WCall<'_>) -> Result<()> {
    let cmd: QueryQp = c.request()?;
    let qp = match c.st.table.lookup(cmd.qp_handle as i64, ObjType::Qp)? {
        Uobj::Qp(q) => q,
        _ => return Err(Errno::EINVAL),
    };
    c.response(query_resp(&qp).as_bytes())
}

/// `UVERBS_METHOD_QP_DESTROY`: the QP is already gone; report its event count.
pub(crate) fn destroy_qp_ioctl(c: &mut Call<'_>) -> Result<()> {
    let Some(Uobj::Qp(qp)) = c.destroyed.as_ref() else { return Err(Errno::EINVAL) };
    let resp = destroy_resp(qp);
    c.b.copy_to(ids::ATTR_DESTROY_RESP, resp.as_bytes())
}

/// The async events of a destroyed QP the application read (see the CQ's `destroy_resp`):
/// unread ones are taken back out of the async file and not reported.
fn destroy_resp(qp: &Qp) -> DestroyQpResp {
    let unread = qp.event_file.as_ref().map_or(0, |f| f.discard(qp.user_handle));
    DestroyQpResp { events_reported: qp.events_reported.load(Ordering::SeqCst).saturating_sub(unread) }
}

/// DESTROY_QP (write 27).
pub(crate) fn destroy_qp_write(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DestroyQp = c.request()?;
    let Uobj::Qp(qp) = c.st.destroy(c.hca, cmd.qp_handle as i64, ObjType::Qp)? else { return Err(Errno::EINVAL) };
    c.response(destroy_resp(&qp).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_rounding() {
        assert_eq!((log2_ceil(1), log2_ceil(2), log2_ceil(3), log2_ceil(16), log2_ceil(255)), (0, 1, 2, 4, 8));
    }
}
