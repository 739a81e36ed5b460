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

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, internal, remove, target, use_named, Cmd, Obj, Outcome, R};
use crate::kernel::mlx5::caps;
use crate::kernel::qp_state;
use crate::objects::{QpState, QpType};

#[derive(Debug)]
pub(super) struct QpObj {
    ty: QpType,
    state: QpState,
    pd: u32,
    cqn_snd: u32,
    cqn_rcv: u32,
    uar: u32,
    /// The context: as created, with every transition's fields merged in.
    qpc: Vec<u8>,
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

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let qpc = c.input::<CreateQpIn>()?.sub(CreateQpIn::qpc);
    let ty = qp_type(qpc.get(Qpc::st)).ok_or(bad_param(syndrome::QP_TYPE))?;
    // RQ WQE stride is 16 << log_rq_stride bytes, at most max_wqe_sz_rq.
    if 16u32 << qpc.get(Qpc::log_rq_stride) > caps::MAX_WQE_SZ_RQ {
        return Err(bad_param(syndrome::RQ_STRIDE));
    }
    let (pd, snd, rcv, uar) = (qpc.get(Qpc::pd), qpc.get(Qpc::cqn_snd), qpc.get(Qpc::cqn_rcv), qpc.get(Qpc::uar_page));
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    check_named(&c.objs.cqs, snd, c.uid, syndrome::BAD_CQ)?;
    check_named(&c.objs.cqs, rcv, c.uid, syndrome::BAD_CQ)?;
    check_named(&c.objs.uars, uar, c.uid, syndrome::BAD_UAR)?;
    let qpn = c.hca.alloc_qpn().ok_or_else(exhausted)?;
    use_named(&mut c.objs.pds, pd, 1);
    use_named(&mut c.objs.cqs, snd, 1);
    use_named(&mut c.objs.cqs, rcv, 1);
    use_named(&mut c.objs.uars, uar, 1);
    let mut stored = qpc.as_bytes()[..Qpc::BYTES].to_vec();
    ViewMut::<Qpc>::new(&mut stored).map_err(|_| internal())?.set(Qpc::state, q::state::RST);
    let v = QpObj { ty, state: QpState::Reset, pd, cqn_snd: snd, cqn_rcv: rcv, uar, qpc: stored };
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
    c.hca.free_qpn(qpn);
    Ok(())
}

pub(super) fn query(c: &mut Cmd<'_>) -> R<()> {
    let qpn = c.input::<QueryQpIn>()?.get(QueryQpIn::qpn);
    let qp = &target(&mut c.objs.qps, qpn, c.uid)?.v;
    let (qpc, state) = (qp.qpc.clone(), qp.state);
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
fn merge(opcode: u16, ty: QpType, src: &View<'_, Qpc>, stored: &mut [u8]) -> R<()> {
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
            copy(dst, src, Qpc::q_key);
        }
        op::RTR2RTS_QP | op::RTS2RTS_QP | op::SQERR2RTS_QP => {
            copy_ads(dst, src, Ads::ack_timeout);
            for f in [Qpc::retry_count, Qpc::rnr_retry, Qpc::log_sra_max, Qpc::min_rnr_nak] {
                copy(dst, src, f);
            }
            if opcode == op::RTR2RTS_QP {
                copy(dst, src, Qpc::next_send_psn);
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
    let qp = &mut target(&mut c.objs.qps, qpn, c.uid)?.v;
    let cur = qp.state;
    // The firmware's own table (mlx5_ib's optab), not the core's ib_modify_qp_is_ok:
    // RESET->ERR has a command (2ERR) although the verbs refuse it before it gets here.
    let legal = from.contains(&cur) && qp_state::mlx5_has_command(cur, to);
    if !legal {
        return Err(Outcome::err(BAD_RES_STATE_ERR, syndrome::QP_STATE));
    }
    if !matches!(opcode, op::QP_2ERR | op::QP_2RST) {
        let src = View::<q::Rst2initQpIn>::new(inbox)
            .map_err(|_| Outcome::err(prm::cmd::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN))?
            .sub(q::Rst2initQpIn::qpc);
        merge(opcode, qp.ty, &src, &mut qp.qpc)?;
    }
    qp.state = to;
    Ok(())
}
