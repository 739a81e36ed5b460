//! CREATE_RQ / MODIFY_RQ / DESTROY_RQ: an Ethernet receive queue (cyclic, WQEs in its
//! own buffer), the receive half of a raw packet QP.
//!
//! The RQ's WQEs are the same scatter lists a QP's RQ holds (`log_wq_stride` bytes
//! each, ended by the 0x100 lkey); its doorbell record's word 0 counts the WQEs
//! posted. States are the PRM's RST, RDY and ERR; MODIFY_RQ names the state it
//! believes the RQ is in (`rq_state`) and is refused (BAD_RES_STATE) when that is
//! wrong or the move is not one the PRM has (RST->RDY, RDY->RDY, RDY->ERR, and any
//! state back to RST).

use std::sync::Arc;

use prm::cmd::rq::{self as r, CreateRqIn, CreateRqOut, DestroyRqIn, ModifyRqIn, Rqc};
use prm::cmd::status::BAD_RES_STATE_ERR;
use prm::cmd::wq::{self, Wq};

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, remove, target, umem, use_named, Cmd, Obj, Outcome, R};
use crate::kernel::mlx5::caps;
use crate::objects;

#[derive(Debug)]
pub(super) struct RqObj {
    pub state: u8,
    pub cqn: u32,
    pub pd: u32,
    pub user_index: u32,
    pub buf: u64,
    pub db: u64,
    /// log2 of the WQE size in bytes.
    pub stride_shift: u32,
    pub count: u32,
    umems: Vec<u32>,
    /// The verbs QP this RQ is the receive half of ([`super::raw_qp`]).
    pub qp: Option<Arc<objects::Qp>>,
}

/// Whether the PRM has a move from `from` to `to` (see the module doc).
pub(super) fn legal(from: u8, to: u8) -> bool {
    use r::state::*;
    matches!((from, to), (_, RST) | (RST, RDY) | (RDY, RDY) | (RDY, ERR) | (ERR, ERR))
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateRqIn>()?;
    let ctx = inp.sub(CreateRqIn::ctx);
    let w = ctx.sub(Rqc::wq);
    if ctx.get(Rqc::mem_rq_type) != r::MEM_RQ_TYPE_INLINE || w.get(Wq::wq_type) != wq::wq_type::CYCLIC {
        return Err(bad_param(syndrome::WQ_TYPE));
    }
    if ctx.get(Rqc::state) != r::state::RST {
        return Err(bad_param(syndrome::WQ_STATE));
    }
    let stride_shift = w.get(Wq::log_wq_stride) as u32;
    if !(4..=caps::MAX_WQE_SZ_RQ.ilog2()).contains(&stride_shift) {
        return Err(bad_param(syndrome::RQ_STRIDE));
    }
    if w.get(Wq::log_wq_sz) as u32 > caps::LOG_MAX_QP_SZ {
        return Err(bad_param(syndrome::QP_SIZE));
    }
    let (cqn, pd) = (ctx.get(Rqc::cqn), w.get(Wq::pd));
    check_named(&c.objs.cqs, cqn, c.uid, syndrome::BAD_CQ)?;
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    let count = 1u32 << w.get(Wq::log_wq_sz);
    let mut umems = Vec::new();
    let (buf, db) = umem::place_queue(c, &umem::QueueMemory {
        ring_umem: w.get(Wq::wq_umem_valid).then(|| (w.get(Wq::wq_umem_id), w.get(Wq::wq_umem_offset))),
        pas: inp.tail(),
        log_page_size: w.get(Wq::log_wq_pg_sz),
        page_offset: w.get(Wq::page_offset) as u64,
        ring_len: (count as u64) << stride_shift,
        ring_written: false,
        dbr_umem: w.get(Wq::dbr_umem_valid).then(|| w.get(Wq::dbr_umem_id)),
        dbr_addr: w.get(Wq::dbr_addr),
    }, &mut umems)?;
    // RQs, SQs and QPs share one number space on a ConnectX.
    let rqn = c.hca.alloc_qpn().ok_or_else(exhausted)?;
    use_named(&mut c.objs.cqs, cqn, 1);
    use_named(&mut c.objs.pds, pd, 1);
    for &u in &umems {
        use_named(&mut c.objs.umems, u, 1);
    }
    let v = RqObj { state: r::state::RST, cqn, pd, user_index: ctx.get(Rqc::user_index), buf, db, stride_shift, count,
                    umems, qp: None };
    c.objs.rqs.insert(rqn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateRqOut>()?.set(CreateRqOut::rqn, rqn);
    Ok(())
}

pub(super) fn modify(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<ModifyRqIn>()?;
    let (rqn, from, to) = (inp.get(ModifyRqIn::rqn), inp.get(ModifyRqIn::rq_state), inp.sub(ModifyRqIn::ctx).get(Rqc::state));
    let o = &mut target(&mut c.objs.rqs, rqn, c.uid)?.v;
    if from != o.state || !legal(from, to) {
        return Err(Outcome::err(BAD_RES_STATE_ERR, syndrome::WQ_STATE));
    }
    o.state = to;
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let rqn = c.input::<DestroyRqIn>()?.get(DestroyRqIn::rqn);
    let o = remove(&mut c.objs.rqs, rqn, c.uid)?.v;
    use_named(&mut c.objs.cqs, o.cqn, -1);
    use_named(&mut c.objs.pds, o.pd, -1);
    for &u in &o.umems {
        use_named(&mut c.objs.umems, u, -1);
    }
    super::raw_qp::queue_gone(c, rqn, o.qp.as_ref());
    Ok(())
}
