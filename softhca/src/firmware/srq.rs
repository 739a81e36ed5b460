//! CREATE_SRQ / DESTROY_SRQ / QUERY_SRQ / ARM_RQ: basic shared receive queues.
//!
//! The context gives the geometry (`log_srq_size`, `log_rq_stride`), the PD, the
//! doorbell record and the buffer's page list; the SRQ made is the
//! [`crate::objects::Srq`] the device half takes receive WQEs from for every QP whose
//! context names it (`rq_type` SRQ, `srqn_rmpn_xrqn`). `xrcd` and `cqn` matter only to
//! XRC SRQs, which this firmware does not make (mlx5_ib puts its own XRC domain 0 and
//! CQ 0 there for a basic SRQ; they are not checked). ARM_RQ sets the limit (`lwm`) at
//! which the device raises the SRQ's limit event once. A destroy of an SRQ a QP still
//! names is RES_BUSY.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use prm::bits::ViewMut;
use prm::cmd::header::MboxIn;
use prm::cmd::srq::{self as s, ArmRqIn, CreateSrqIn, CreateSrqOut, DestroySrqIn, QuerySrqIn, QuerySrqOut, Srqc};

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, internal, remove, target, umem, use_named, Cmd, Obj, R};
use crate::kernel::mlx5::caps;
use crate::objects::{self, Kind, Live};

#[derive(Debug)]
pub(super) struct SrqObj {
    pd: u32,
    umems: Vec<u32>,
    /// The context as created, with the armed limit written in.
    srqc: Vec<u8>,
    /// The SRQ the device half runs.
    pub(super) srq: Arc<objects::Srq>,
}

/// What the kernel half keeps of a verbs SRQ besides its context (`mlx5_ib_srq` around
/// the `mlx5_core_srq`; see [`super::Host`]).
#[derive(Debug)]
pub(crate) struct SrqHost {
    pub user_handle: u64,
    pub event_file: Option<Arc<objects::AsyncEventFile>>,
    /// Scatter entries per WQE (`msrq.max_gs`) and the caps the verbs answer with.
    pub max_gs: u32,
    pub max_wr: u32,
    pub max_sge: u32,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateSrqIn>()?;
    let ctx = inp.sub(CreateSrqIn::srq_context_entry);
    let log_size = ctx.get(Srqc::log_srq_size) as u32;
    let shift = 4 + ctx.get(Srqc::log_rq_stride) as u32;
    if log_size > caps::LOG_MAX_SRQ_SZ || 1u32 << shift > caps::MAX_WQE_SZ_RQ {
        return Err(bad_param(syndrome::SRQ_SIZE));
    }
    let pd = ctx.get(Srqc::pd);
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    let ring_len = (1u64 << log_size) << shift;
    let mut umems = Vec::new();
    let (buf_addr, db_addr) = umem::place_queue(c, &umem::QueueMemory {
        ring_umem: None,
        pas: inp.tail(),
        log_page_size: ctx.get(Srqc::log_page_size),
        page_offset: ctx.get(Srqc::page_offset) as u64,
        ring_len,
        ring_written: false,
        dbr_umem: None,
        dbr_addr: ctx.get(Srqc::dbr_addr),
    }, &mut umems)?;
    let pd_obj = c.objs.pds.get(&pd).map(|o| o.v.clone()).ok_or_else(internal)?;
    let srqn = c.hca.alloc_srqn().ok_or_else(exhausted)?;
    let wq_sig = ctx.get(Srqc::wq_signature);
    let host = match c.host.take() {
        Some(super::Host::Srq(h)) => h,
        _ => {
            let gs = (1u32 << shift) / 16 - 1;
            SrqHost { user_handle: 0, event_file: None, max_gs: gs, max_wr: (1 << log_size) - 1, max_sge: gs }
        }
    };
    let mut stored = ctx.as_bytes()[..Srqc::BYTES].to_vec();
    ViewMut::<Srqc>::new(&mut stored).map_err(|_| internal())?.set(Srqc::state, s::state::GOOD);
    let lwm = ctx.get(Srqc::lwm) as u32;
    let srq = Arc::new(objects::Srq {
        srqn,
        pd: pd_obj,
        buf_addr,
        db_addr,
        log_size,
        wqe_shift: shift,
        max_gs: host.max_gs,
        wq_sig,
        max_wr: host.max_wr,
        max_sge: host.max_sge,
        user_handle: host.user_handle,
        event_file: host.event_file,
        events_reported: AtomicU32::new(0),
        usecnt: AtomicU32::new(0),
        dev: Mutex::new(objects::srq::SrqDev { limit: lwm, ..Default::default() }),
        _live: Live::new(c.hca.live_counts(), Kind::Srq),
    });
    use_named(&mut c.objs.pds, pd, 1);
    c.objs.srqs.insert(srqn, Obj { uid: c.uid, users: 0, v: SrqObj { pd, umems, srqc: stored, srq } });
    c.output::<CreateSrqOut>()?.set(CreateSrqOut::srqn, srqn);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let srqn = c.input::<DestroySrqIn>()?.get(DestroySrqIn::srqn);
    let o = remove(&mut c.objs.srqs, srqn, c.uid)?.v;
    use_named(&mut c.objs.pds, o.pd, -1);
    for &u in &o.umems {
        use_named(&mut c.objs.umems, u, -1);
    }
    // No QP names it any more, so no engine step can be taking its WQEs.
    c.hca.free_srqn(srqn);
    Ok(())
}

pub(super) fn query(c: &mut Cmd<'_>) -> R<()> {
    let srqn = c.input::<QuerySrqIn>()?.get(QuerySrqIn::srqn);
    let o = &target(&mut c.objs.srqs, srqn, c.uid)?.v;
    let mut srqc = o.srqc.clone();
    // The limit as it is now: the device disarms it when the event fires.
    ViewMut::<Srqc>::new(&mut srqc).map_err(|_| internal())?.set(Srqc::lwm, o.srq.limit().min(0xffff) as u16);
    c.output::<QuerySrqOut>()?;
    let off = QuerySrqOut::srq_context_entry.off() / 8;
    c.outbox.get_mut(off..off + Srqc::BYTES).ok_or_else(internal)?.copy_from_slice(&srqc);
    Ok(())
}

/// ARM_RQ of an SRQ (op_mod 1): the limit event fires once when fewer than `lwm` WQEs
/// are left; `lwm` 0 disarms.
pub(super) fn arm(c: &mut Cmd<'_>) -> R<()> {
    if c.input::<MboxIn>()?.get(MboxIn::op_mod) != s::ARM_RQ_OP_MOD_SRQ {
        return Err(bad_param(syndrome::BAD_OP_MOD));
    }
    let inp = c.input::<ArmRqIn>()?;
    let (srqn, lwm) = (inp.get(ArmRqIn::srq_number), inp.get(ArmRqIn::lwm));
    let o = &mut target(&mut c.objs.srqs, srqn, c.uid)?.v;
    ViewMut::<Srqc>::new(&mut o.srqc).map_err(|_| internal())?.set(Srqc::lwm, lwm);
    o.srq.dev.lock().unwrap_or_else(|p| p.into_inner()).limit = lwm as u32;
    Ok(())
}

/// Checks the SRQ a QP context names (BAD_PARAM otherwise) and counts the QP's use.
pub(super) fn attach(c: &mut Cmd<'_>, srqn: u32) -> R<Arc<objects::Srq>> {
    check_named(&c.objs.srqs, srqn, c.uid, syndrome::BAD_SRQ)?;
    let srq = c.objs.srqs.get(&srqn).map(|o| o.v.srq.clone()).ok_or_else(internal)?;
    use_named(&mut c.objs.srqs, srqn, 1);
    Ok(srq)
}

/// Drops a destroyed QP's use of its SRQ.
pub(super) fn detach(c: &mut Cmd<'_>, srqn: u32) {
    use_named(&mut c.objs.srqs, srqn, -1);
}

