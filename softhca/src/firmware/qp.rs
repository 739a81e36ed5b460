//! CREATE_QP / DESTROY_QP / QUERY_QP and the state transition commands.
//!
//! Each transition command names its source and target state; the firmware refuses
//! it (BAD_RES_STATE) unless the QP is in the source state and the transition is one
//! the kernel's state machine has ([`crate::kernel::qp_state`]: `transition` and
//! `mlx5_has_command`, the rules the verbs' MODIFY_QP applies). The context fields a
//! transition carries are merged into the QP's stored context, which QUERY_QP
//! answers with the current state.

use prm::bits::{Field, Value, View, ViewMut};
use prm::cmd::opcode as op;
use prm::cmd::qp::{self as q, Ads, CreateQpIn, CreateQpOut, DestroyQpIn, QueryQpIn, QueryQpOut, Qpc, Qp2errIn};
use prm::cmd::status::BAD_RES_STATE_ERR;

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use uverbs::sys::verbs::QpCap;

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, internal, qpc, remove, target, uar, umem, use_named, Cmd, Obj, Outcome, R};
use crate::kernel::mlx5::caps;
use crate::kernel::qp_state;
use crate::objects::{self, Kind, Live, QpAttrs, QpState, QpType};

#[derive(Debug)]
pub(super) struct QpObj {
    ty: QpType,
    state: QpState,
    pd: u32,
    cqn_snd: u32,
    cqn_rcv: u32,
    uar: u32,
    /// The UMEMs of the WQ buffer and of the doorbell record, if any.
    umems: Vec<u32>,
    /// The SRQ the QP receives from instead of an RQ of its own.
    srqn: Option<u32>,
    /// An XRC target QP's domain (0 otherwise).
    xrcd: u32,
    /// The context: as created, with every transition's fields merged in.
    qpc: Vec<u8>,
    /// The QP the device half runs.
    pub(super) qp: Arc<objects::Qp>,
    /// Made by the verbs: their MODIFY_QP still sets the device half's attributes
    /// itself, so the context's transition fields are the QP's live attributes, not a
    /// merged `qpc`.
    verbs: bool,
}

/// What the kernel half keeps of a verbs QP besides its context (`mlx5_ib_qp` around
/// the `mlx5_core_qp`; see [`super::Host`]).
#[derive(Debug)]
pub(crate) struct QpHost {
    pub user_handle: u64,
    pub sq_sig_all: bool,
    pub create_flags: u32,
    pub mlx5_flags: u32,
    /// The capabilities the verbs answered with.
    pub cap: QpCap,
    /// Scatter entries per receive WQE (less the signature entry).
    pub rq_max_gs: u32,
    pub bfregn: Option<u32>,
    pub event_file: Option<Arc<objects::AsyncEventFile>>,
}

/// The PRM's state number (`qpc.state`) of a state; softhca numbers SQD and SQE the
/// other way round (as `ib_qp_state` does).
fn prm_state(s: QpState) -> u8 {
    match s {
        QpState::Reset => q::state::RST,
        QpState::Init => q::state::INIT,
        QpState::Rtr => q::state::RTR,
        QpState::Rts => q::state::RTS,
        QpState::Sqd => q::state::SQD,
        QpState::Sqe => q::state::SQER,
        QpState::Err => q::state::ERR,
    }
}

fn qp_type(st: u8) -> Option<QpType> {
    match st {
        q::st::RC => Some(QpType::Rc),
        q::st::UC => Some(QpType::Uc),
        q::st::UD => Some(QpType::Ud),
        _ => None,
    }
}

/// `rq_type` of a QP without a receive queue (`MLX5_ZERO_LEN_RQ`).
const RQ_TYPE_ZERO_LEN: u8 = 0x3;
/// `rq_type` of a QP receiving from the SRQ `srqn_rmpn_xrqn` names (`MLX5_SRQ_RQ`).
pub(crate) const RQ_TYPE_SRQ: u8 = 0x1;

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateQpIn>()?;
    let qpc = inp.sub(CreateQpIn::qpc);
    if qpc.get(Qpc::st) == q::st::XRC && qpc.get(Qpc::no_sq) {
        return create_xrc_tgt(c);
    }
    let ty = if qpc.get(Qpc::st) == q::st::XRC {
        QpType::XrcIni
    } else {
        qp_type(qpc.get(Qpc::st)).ok_or(bad_param(syndrome::QP_TYPE))?
    };
    // RQ WQE stride is 16 << log_rq_stride bytes, at most max_wqe_sz_rq.
    if 16u32 << qpc.get(Qpc::log_rq_stride) > caps::MAX_WQE_SZ_RQ {
        return Err(bad_param(syndrome::RQ_STRIDE));
    }
    if qpc.get(Qpc::log_rq_size) as u32 > caps::LOG_MAX_QP_SZ || qpc.get(Qpc::log_sq_size) as u32 > caps::LOG_MAX_QP_SZ {
        return Err(bad_param(syndrome::QP_SIZE));
    }
    let (pd, snd, rcv, uar) = (qpc.get(Qpc::pd), qpc.get(Qpc::cqn_snd), qpc.get(Qpc::cqn_rcv), qpc.get(Qpc::uar_page));
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    check_named(&c.objs.cqs, snd, c.uid, syndrome::BAD_CQ)?;
    check_named(&c.objs.cqs, rcv, c.uid, syndrome::BAD_CQ)?;
    if !uar::valid(c, uar) {
        return Err(bad_param(syndrome::BAD_UAR));
    }
    let srqn = (qpc.get(Qpc::rq_type) == RQ_TYPE_SRQ).then(|| qpc.get(Qpc::srqn_rmpn_xrqn));
    if let Some(n) = srqn {
        check_named(&c.objs.srqs, n, c.uid, syndrome::BAD_SRQ)?;
    }
    // Geometry: the RQ at offset 0 of the WQ buffer, the SQ after it; none with an SRQ.
    let has_rq = qpc.get(Qpc::rq_type) != RQ_TYPE_ZERO_LEN && srqn.is_none();
    let rq_count = if has_rq { 1u32 << qpc.get(Qpc::log_rq_size) } else { 0 };
    let rq_shift = 4 + qpc.get(Qpc::log_rq_stride) as u32;
    let sq_count = if qpc.get(Qpc::no_sq) { 0 } else { 1u32 << qpc.get(Qpc::log_sq_size) };
    let sq_offset = (rq_count as u64) << rq_shift;
    let wq_len = sq_offset + ((sq_count as u64) << 6);
    let mut umems = Vec::new();
    let (buf_addr, db_addr) = umem::place_queue(c, &umem::QueueMemory {
        ring_umem: inp.get(CreateQpIn::wq_umem_valid)
            .then(|| (inp.get(CreateQpIn::wq_umem_id), inp.get(CreateQpIn::wq_umem_offset))),
        pas: inp.tail(),
        log_page_size: qpc.get(Qpc::log_page_size),
        page_offset: qpc.get(Qpc::page_offset) as u64,
        ring_len: wq_len,
        ring_written: false,
        dbr_umem: qpc.get(Qpc::dbr_umem_valid).then(|| qpc.get(Qpc::dbr_umem_id)),
        dbr_addr: qpc.get(Qpc::dbr_addr),
    }, &mut umems)?;
    let (Some(pd_obj), Some(send_cq), Some(recv_cq)) =
        (c.objs.pds.get(&pd).map(|o| o.v.clone()), c.objs.cqs.get(&snd).map(|o| o.v.cq.clone()), c.objs.cqs.get(&rcv).map(|o| o.v.cq.clone()))
    else {
        return Err(internal());
    };
    let qpn = c.hca.alloc_qpn().ok_or_else(exhausted)?;
    let srq = match srqn {
        Some(n) => Some(super::srq::attach(c, n)?),
        None => None,
    };
    let host = match c.host.take() {
        Some(super::Host::Qp(h)) => Some(h),
        _ => None,
    };
    use_named(&mut c.objs.pds, pd, 1);
    use_named(&mut c.objs.cqs, snd, 1);
    use_named(&mut c.objs.cqs, rcv, 1);
    use_named(&mut c.objs.uars, uar, 1);
    for &u in &umems {
        use_named(&mut c.objs.umems, u, 1);
    }
    let mut stored = qpc.as_bytes()[..Qpc::BYTES].to_vec();
    ViewMut::<Qpc>::new(&mut stored).map_err(|_| internal())?.set(Qpc::state, q::state::RST);
    let rq_max_gs = match &host {
        Some(h) => h.rq_max_gs,
        None if has_rq => (1u32 << rq_shift) / 16,
        None => 0,
    };
    let verbs = host.is_some();
    let host = host.unwrap_or(QpHost {
        user_handle: 0,
        sq_sig_all: false,
        create_flags: 0,
        mlx5_flags: 0,
        cap: QpCap { max_send_wr: sq_count, max_recv_wr: rq_count, max_send_sge: 0, max_recv_sge: rq_max_gs,
                     max_inline_data: 0 },
        rq_max_gs,
        bfregn: None,
        event_file: None,
    });
    let qp = Arc::new(objects::Qp {
        qpn,
        qp_type: ty,
        pd: pd_obj,
        send_cq: Some(send_cq),
        recv_cq: Some(recv_cq),
        xrcd: 0,
        user_handle: host.user_handle,
        sq_sig_all: host.sq_sig_all,
        create_flags: host.create_flags,
        mlx5_flags: host.mlx5_flags,
        cap: host.cap,
        buf_addr,
        sq_offset,
        sq_buf_addr: 0,
        raw: None,
        db_addr,
        rq_wqe_count: rq_count,
        rq_wqe_shift: if has_rq { rq_shift } else { 0 },
        rq_max_gs,
        sq_wqe_count: sq_count,
        uidx: qpc.get(Qpc::user_index),
        uar_page: uar,
        bfregn: host.bfregn,
        srq,
        event_file: host.event_file,
        events_reported: AtomicU32::new(0),
        attrs: Mutex::new(QpAttrs::default()),
        dev: Mutex::new(Default::default()),
        _live: Live::new(c.hca.live_counts(), Kind::Qp),
    });
    c.hca.insert_qp(&qp);
    let v = QpObj { ty, state: QpState::Reset, pd, cqn_snd: snd, cqn_rcv: rcv, uar, umems, srqn, xrcd: 0, qpc: stored, qp,
                    verbs };
    c.objs.qps.insert(qpn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateQpOut>()?.set(CreateQpOut::qpn, qpn);
    Ok(())
}

/// An XRC target QP (`st` XRC with `no_sq`, as mlx5_ib's `create_xrc_tgt_qp` makes
/// it): no work queues, no doorbell record, no PD or CQ of its own (mlx5_ib names its
/// device-wide PD and CQ there; they are not looked at); what it has is the XRC domain
/// (`xrcd`, which must exist and be the caller's: BAD_PARAM otherwise). Each request it
/// receives names the XRC SRQ in its XRCETH; the SRQ's domain must be this one.
fn create_xrc_tgt(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateQpIn>()?;
    let qpc = inp.sub(CreateQpIn::qpc);
    let xrcd = qpc.get(Qpc::xrcd);
    check_named(&c.objs.xrcds, xrcd, c.uid, syndrome::BAD_XRCD)?;
    let qpn = c.hca.alloc_qpn().ok_or_else(exhausted)?;
    let host = match c.host.take() {
        Some(super::Host::Qp(h)) => Some(h),
        _ => None,
    };
    let verbs = host.is_some();
    let host = host.unwrap_or(QpHost {
        user_handle: 0,
        sq_sig_all: false,
        create_flags: 0,
        mlx5_flags: 0,
        cap: QpCap { max_send_wr: 0, max_recv_wr: 0, max_send_sge: 0, max_recv_sge: 0, max_inline_data: 0 },
        rq_max_gs: 0,
        bfregn: None,
        event_file: None,
    });
    let mut stored = qpc.as_bytes()[..Qpc::BYTES].to_vec();
    ViewMut::<Qpc>::new(&mut stored).map_err(|_| internal())?.set(Qpc::state, q::state::RST);
    let qp = Arc::new(objects::Qp {
        qpn,
        qp_type: QpType::XrcTgt,
        pd: Arc::new(objects::Pd::new(0, Live::new(c.hca.live_counts(), Kind::Pd))),
        send_cq: None,
        recv_cq: None,
        xrcd,
        user_handle: host.user_handle,
        sq_sig_all: false,
        create_flags: host.create_flags,
        mlx5_flags: host.mlx5_flags,
        cap: host.cap,
        buf_addr: 0,
        sq_offset: 0,
        sq_buf_addr: 0,
        raw: None,
        db_addr: 0,
        rq_wqe_count: 0,
        rq_wqe_shift: 0,
        rq_max_gs: 0,
        sq_wqe_count: 0,
        uidx: qpc.get(Qpc::user_index),
        uar_page: 0,
        bfregn: None,
        srq: None,
        event_file: host.event_file,
        events_reported: AtomicU32::new(0),
        attrs: Mutex::new(QpAttrs::default()),
        dev: Mutex::new(Default::default()),
        _live: Live::new(c.hca.live_counts(), Kind::Qp),
    });
    c.hca.insert_qp(&qp);
    use_named(&mut c.objs.xrcds, xrcd, 1);
    // No PD, CQ or UAR is named (numbers none of them ever has).
    let v = QpObj { ty: QpType::XrcTgt, state: QpState::Reset, pd: 0, cqn_snd: 0, cqn_rcv: 0, uar: u32::MAX,
                    umems: Vec::new(), srqn: None, xrcd, qpc: stored, qp, verbs };
    c.objs.qps.insert(qpn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateQpOut>()?.set(CreateQpOut::qpn, qpn);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let qpn = c.input::<DestroyQpIn>()?.get(DestroyQpIn::qpn);
    let qp = remove(&mut c.objs.qps, qpn, c.uid)?.v;
    use_named(&mut c.objs.pds, qp.pd, -1);
    use_named(&mut c.objs.cqs, qp.cqn_snd, -1);
    use_named(&mut c.objs.cqs, qp.cqn_rcv, -1);
    use_named(&mut c.objs.uars, qp.uar, -1);
    for &u in &qp.umems {
        use_named(&mut c.objs.umems, u, -1);
    }
    if let Some(n) = qp.srqn {
        super::srq::detach(c, n);
    }
    use_named(&mut c.objs.xrcds, qp.xrcd, -1);
    // Out of the HCA's table and the device half; frees the QP number.
    c.hca.remove_qp(&qp.qp);
    Ok(())
}

pub(super) fn query(c: &mut Cmd<'_>) -> R<()> {
    let qpn = c.input::<QueryQpIn>()?.get(QueryQpIn::qpn);
    let o = &target(&mut c.objs.qps, qpn, c.uid)?.v;
    let mut qpc = o.qpc.clone();
    // The live state: the device half moves a QP to ERR by itself.
    let state = o.qp.state();
    if o.verbs {
        qpc::write_attrs(&o.qp.attrs(), &mut ViewMut::<Qpc>::new(&mut qpc).map_err(|_| internal())?);
    }
    c.output::<QueryQpOut>()?;
    let off = QueryQpOut::qpc.off() / 8;
    c.outbox.get_mut(off..off + Qpc::BYTES).ok_or_else(internal)?.copy_from_slice(&qpc);
    c.output::<QueryQpOut>()?.sub_mut(QueryQpOut::qpc).set(Qpc::state, prm_state(state));
    Ok(())
}

/// Source states and the target of each transition command.
fn transition_of(opcode: u16) -> Option<(&'static [QpState], QpState)> {
    use QpState::*;
    const ANY: &[QpState] = &QpState::ALL;
    Some(match opcode {
        op::RST2INIT_QP => (&[Reset], Init),
        op::INIT2INIT_QP => (&[Init], Init),
        op::INIT2RTR_QP => (&[Init], Rtr),
        op::RTR2RTS_QP => (&[Rtr], Rts),
        op::RTS2RTS_QP => (&[Rts], Rts),
        op::SQERR2RTS_QP => (&[Sqe], Rts),
        op::QP_2ERR => (ANY, Err),
        op::QP_2RST => (ANY, Reset),
        _ => return None,
    })
}

fn copy<T: Value>(dst: &mut ViewMut<'_, Qpc>, src: &View<'_, Qpc>, f: Field<Qpc, T>) {
    dst.set(f, src.get(f));
}

fn copy_ads<T: Value>(dst: &mut ViewMut<'_, Qpc>, src: &View<'_, Qpc>, f: Field<Ads, T>) {
    let v = src.sub(Qpc::primary_address_path).get(f);
    dst.sub_mut(Qpc::primary_address_path).set(f, v);
}

/// Checks and merges the context fields `opcode` carries (those mlx5_ib's
/// `__mlx5_ib_modify_qp` fills for the transition) into `dst`.
fn merge(opcode: u16, ty: QpType, opt: u32, opt_95_32: u64, src: &View<'_, Qpc>, stored: &mut [u8]) -> R<()> {
    let path = src.sub(Qpc::primary_address_path);
    let init2rtr = opcode == op::INIT2RTR_QP;
    if init2rtr && ty != QpType::Ud && !(q::mtu::MTU_256..=q::mtu::MTU_4096).contains(&src.get(Qpc::mtu)) {
        return Err(bad_param(syndrome::MTU));
    }
    if matches!(opcode, op::RST2INIT_QP | op::INIT2INIT_QP | op::INIT2RTR_QP)
        && (path.get(Ads::vhca_port_num) > 1 || path.get(Ads::pkey_index) as u32 >= caps::PKEY_TABLE_LEN)
    {
        return Err(bad_param(syndrome::PORT_OR_PKEY));
    }
    if init2rtr {
        // The whole primary path: GID, MAC, hop limit, traffic class, port.
        let p = Qpc::primary_address_path.off() / 8;
        stored.get_mut(p..p + Ads::BYTES).ok_or_else(internal)?.copy_from_slice(&path.as_bytes()[..Ads::BYTES]);
    }
    let dst = &mut ViewMut::<Qpc>::new(stored).map_err(|_| internal())?;
    match opcode {
        op::RST2INIT_QP | op::INIT2INIT_QP => {
            copy_ads(dst, src, Ads::pkey_index);
            copy_ads(dst, src, Ads::vhca_port_num);
            copy(dst, src, Qpc::rre);
            copy(dst, src, Qpc::rwe);
            copy(dst, src, Qpc::rae);
            copy(dst, src, Qpc::atomic_mode);
            copy(dst, src, Qpc::q_key);
        }
        op::INIT2RTR_QP => {
            for f in [Qpc::mtu, Qpc::log_msg_max, Qpc::log_rra_max, Qpc::min_rnr_nak] {
                copy(dst, src, f);
            }
            copy(dst, src, Qpc::remote_qpn);
            copy(dst, src, Qpc::next_rcv_psn);
            // INIT2RTR's Q_Key is optional (RST2INIT's is required): taken only when
            // flagged, as mlx5_ib flags it for IB_QP_QKEY.
            if opt & q::optpar::Q_KEY != 0 {
                copy(dst, src, Qpc::q_key);
            }
        }
        op::RTR2RTS_QP => {
            copy_ads(dst, src, Ads::ack_timeout);
            for f in [Qpc::retry_count, Qpc::rnr_retry, Qpc::log_sra_max, Qpc::min_rnr_nak] {
                copy(dst, src, f);
            }
            copy(dst, src, Qpc::next_send_psn);
        }
        op::RTS2RTS_QP | op::SQERR2RTS_QP => {
            // Everything is optional here (mlx5_ib's optab for RTS->RTS and SQER->RTS):
            // a field is taken only when its bit is set, so a command that changes one
            // (mlx5dv_modify_qp_udp_sport's) leaves the rest of the context alone.
            use q::optpar::*;
            if opt & ACK_TIMEOUT != 0 {
                copy_ads(dst, src, Ads::ack_timeout);
            }
            for (bit, f) in [(RETRY_COUNT, Qpc::retry_count), (RNR_RETRY, Qpc::rnr_retry), (SRA_MAX, Qpc::log_sra_max),
                             (RNR_TIMEOUT, Qpc::min_rnr_nak)] {
                if opt & bit != 0 {
                    copy(dst, src, f);
                }
            }
            if opcode == op::RTS2RTS_QP && opt_95_32 & UDP_SPORT_95_32 != 0 {
                copy_ads(dst, src, Ads::udp_sport);
            }
        }
        _ => {}
    }
    Ok(())
}

/// A transition command: every one of them starts with the header and `qpn` at the
/// same place ([`Qp2errIn`] is the shortest), and all but 2ERR/2RST carry a `qpc`
/// where RST2INIT's is.
pub(super) fn modify(c: &mut Cmd<'_>) -> R<()> {
    let opcode = c.input::<prm::cmd::header::MboxIn>()?.get(prm::cmd::header::MboxIn::opcode);
    let qpn = c.input::<Qp2errIn>()?.get(Qp2errIn::qpn);
    let (from, to) = transition_of(opcode).ok_or(Outcome::err(prm::cmd::status::BAD_OP_ERR, syndrome::UNKNOWN_OPCODE))?;
    let inbox = c.inbox;
    let cfg = c.hca.config().clone();
    let host = match c.host.take() {
        Some(super::Host::QpAttrs(a)) => Some(*a),
        _ => None,
    };
    let verbs_modify = host.is_some();
    let qp = &mut target(&mut c.objs.qps, qpn, c.uid)?.v;
    let old = qp.qp.attrs();
    if qp.verbs {
        // A verbs QP's context is its live attributes (the verbs' MODIFY_QP changes
        // them): start from those, as the firmware would from its own context.
        qpc::write_attrs(&old, &mut ViewMut::<Qpc>::new(&mut qp.qpc).map_err(|_| internal())?);
    }
    let cur = old.state;
    // The firmware's own table (mlx5_ib's optab), not the core's ib_modify_qp_is_ok:
    // RESET->ERR has a command (2ERR) although the verbs refuse it before it gets here.
    let legal = from.contains(&cur) && qp_state::mlx5_has_command(cur, to);
    if !legal {
        return Err(Outcome::err(BAD_RES_STATE_ERR, syndrome::QP_STATE));
    }
    if !matches!(opcode, op::QP_2ERR | op::QP_2RST) {
        let cmd = View::<q::Rst2initQpIn>::new(inbox)
            .map_err(|_| Outcome::err(prm::cmd::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN))?;
        let opt = cmd.get(q::Rst2initQpIn::opt_param_mask);
        // RTS2RTS's second mask, past the context (absent from a short inbox).
        let opt_95_32 = match opcode {
            op::RTS2RTS_QP => View::<q::Rts2rtsQpIn>::new(inbox).map_or(0, |v| v.get(q::Rts2rtsQpIn::opt_param_mask_95_32)),
            _ => 0,
        };
        merge(opcode, qp.ty, opt, opt_95_32, &cmd.sub(q::Rst2initQpIn::qpc), &mut qp.qpc)?;
    }
    qp.state = to;
    let view = View::<Qpc>::new(&qp.qpc).map_err(|_| internal())?;
    let mut attrs = match host {
        Some(a) => QpAttrs { state: to, ..a },
        None if to == QpState::Reset => QpAttrs::default(),
        None => qpc::attrs_of(&cfg, &view, to),
    };
    if to != QpState::Reset && !verbs_modify {
        // What the context does not hold stays as the verbs set it.
        attrs.path_mig_state = old.path_mig_state;
        attrs.en_sqd_async_notify = old.en_sqd_async_notify;
        attrs.rate_limit = old.rate_limit;
        attrs.av.static_rate = old.av.static_rate;
    }
    let dev = qp.qp.clone();
    *dev.attrs.lock().unwrap_or_else(|p| p.into_inner()) = attrs;
    c.hca.device().qp_modified(&dev, cur, to);
    Ok(())
}
