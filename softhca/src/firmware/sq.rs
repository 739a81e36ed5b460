//! CREATE_SQ / MODIFY_SQ / DESTROY_SQ: an Ethernet send queue (cyclic, 64-byte
//! WQEBBs), the send half of a raw packet QP, sending through the TIS it names.
//!
//! The doorbell record's word 1 is the SQ's producer counter, as on a QP. States and
//! MODIFY_SQ's rules are the RQ's ([`super::rq::legal`]).

use std::sync::Arc;

use prm::cmd::sq::{self as s, CreateSqIn, CreateSqOut, DestroySqIn, ModifySqIn, Sqc};
use prm::cmd::status::BAD_RES_STATE_ERR;
use prm::cmd::wq::{self, Wq};

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, remove, target, uar, umem, use_named, Cmd, Obj, Outcome, R};
use crate::kernel::mlx5::caps;
use crate::objects;

#[derive(Debug)]
pub(super) struct SqObj {
    pub state: u8,
    pub cqn: u32,
    pub pd: u32,
    pub tisn: u32,
    pub uar: u32,
    pub user_index: u32,
    pub buf: u64,
    pub db: u64,
    /// 64-byte WQEBBs in the ring.
    pub count: u32,
    umems: Vec<u32>,
    /// The verbs QP this SQ is the send half of ([`super::raw_qp`]).
    pub qp: Option<Arc<objects::Qp>>,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateSqIn>()?;
    let ctx = inp.sub(CreateSqIn::ctx);
    let w = ctx.sub(Sqc::wq);
    if w.get(Wq::wq_type) != wq::wq_type::CYCLIC {
        return Err(bad_param(syndrome::WQ_TYPE));
    }
    if ctx.get(Sqc::state) != s::state::RST {
        return Err(bad_param(syndrome::WQ_STATE));
    }
    // Send WQEBBs are 64 bytes.
    if w.get(Wq::log_wq_stride) != 6 {
        return Err(bad_param(syndrome::QP_SIZE));
    }
    if w.get(Wq::log_wq_sz) as u32 > caps::LOG_MAX_QP_SZ {
        return Err(bad_param(syndrome::QP_SIZE));
    }
    let (cqn, pd, tisn, uar_page) = (ctx.get(Sqc::cqn), w.get(Wq::pd), ctx.get(Sqc::tis_num_0), w.get(Wq::uar_page));
    check_named(&c.objs.cqs, cqn, c.uid, syndrome::BAD_CQ)?;
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    if ctx.get(Sqc::tis_lst_sz) != 1 {
        return Err(bad_param(syndrome::BAD_TIS));
    }
    check_named(&c.objs.tiss, tisn, c.uid, syndrome::BAD_TIS)?;
    if !uar::valid(c, uar_page) {
        return Err(bad_param(syndrome::BAD_UAR));
    }
    let count = 1u32 << w.get(Wq::log_wq_sz);
    let mut umems = Vec::new();
    let (buf, db) = umem::place_queue(c, &umem::QueueMemory {
        ring_umem: w.get(Wq::wq_umem_valid).then(|| (w.get(Wq::wq_umem_id), w.get(Wq::wq_umem_offset))),
        pas: inp.tail(),
        log_page_size: w.get(Wq::log_wq_pg_sz),
        page_offset: w.get(Wq::page_offset) as u64,
        ring_len: (count as u64) << 6,
        ring_written: false,
        dbr_umem: w.get(Wq::dbr_umem_valid).then(|| w.get(Wq::dbr_umem_id)),
        dbr_addr: w.get(Wq::dbr_addr),
    }, &mut umems)?;
    let sqn = c.hca.alloc_qpn().ok_or_else(exhausted)?;
    use_named(&mut c.objs.cqs, cqn, 1);
    use_named(&mut c.objs.pds, pd, 1);
    use_named(&mut c.objs.tiss, tisn, 1);
    use_named(&mut c.objs.uars, uar_page, 1);
    for &u in &umems {
        use_named(&mut c.objs.umems, u, 1);
    }
    let v = SqObj { state: s::state::RST, cqn, pd, tisn, uar: uar_page, user_index: ctx.get(Sqc::user_index), buf, db,
                    count, umems, qp: None };
    c.objs.sqs.insert(sqn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateSqOut>()?.set(CreateSqOut::sqn, sqn);
    Ok(())
}

pub(super) fn modify(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<ModifySqIn>()?;
    let (sqn, from, to) = (inp.get(ModifySqIn::sqn), inp.get(ModifySqIn::sq_state), inp.sub(ModifySqIn::ctx).get(Sqc::state));
    let o = &mut target(&mut c.objs.sqs, sqn, c.uid)?.v;
    if from != o.state || !super::rq::legal(from, to) {
        return Err(Outcome::err(BAD_RES_STATE_ERR, syndrome::WQ_STATE));
    }
    o.state = to;
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let sqn = c.input::<DestroySqIn>()?.get(DestroySqIn::sqn);
    let o = remove(&mut c.objs.sqs, sqn, c.uid)?.v;
    use_named(&mut c.objs.cqs, o.cqn, -1);
    use_named(&mut c.objs.pds, o.pd, -1);
    use_named(&mut c.objs.tiss, o.tisn, -1);
    use_named(&mut c.objs.uars, o.uar, -1);
    for &u in &o.umems {
        use_named(&mut c.objs.umems, u, -1);
    }
    super::raw_qp::queue_gone(c, sqn, o.qp.as_ref());
    Ok(())
}
