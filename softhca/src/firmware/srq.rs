//! CREATE_SRQ / DESTROY_SRQ / QUERY_SRQ / ARM_RQ: basic shared receive queues.
//!
//! The context gives the geometry (`log_srq_size`, `log_rq_stride`), the PD, the
//! doorbell record and the buffer's page list; the SRQ made is the
//! [`crate::objects::Srq`] the device half takes receive WQEs from for every QP whose
//! context names it (`rq_type` SRQ, `srqn_rmpn_xrqn`). A basic SRQ's `xrcd` and `cqn`
//! are not checked (mlx5_ib puts its own XRC domain 0 and CQ 0 there). CREATE_XRC_SRQ
//! makes the same SRQ from an `xrc_srqc`, with the XRC domain, the CQ its receives
//! complete on and the CQE's user index, all kept in [`objects::srq::XrcSrq`]; each kind
//! is destroyed by its own command. ARM_RQ sets the limit (`lwm`) at
//! which the device raises the SRQ's limit event once. A destroy of an SRQ a QP still
//! names is RES_BUSY.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use prm::bits::ViewMut;
use prm::cmd::header::MboxIn;
use prm::cmd::srq::{self as s, ArmRqIn, CreateSrqIn, CreateSrqOut, DestroySrqIn, QuerySrqIn, QuerySrqOut, Srqc};
use prm::cmd::xrc_srq::{CreateXrcSrqIn, CreateXrcSrqOut, DestroyXrcSrqIn, XrcSrqc};

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

/// Everything CREATE_SRQ and CREATE_XRC_SRQ read from their contexts.
struct Geometry<'a> {
    log_size: u32,
    shift: u32,
    pd: u32,
    wq_sig: bool,
    lwm: u32,
    log_page_size: u8,
    page_offset: u64,
    dbr_addr: u64,
    pas: &'a [u8],
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
    let g = Geometry {
        log_size: ctx.get(Srqc::log_srq_size) as u32,
        shift: 4 + ctx.get(Srqc::log_rq_stride) as u32,
        pd: ctx.get(Srqc::pd),
        wq_sig: ctx.get(Srqc::wq_signature),
        lwm: ctx.get(Srqc::lwm) as u32,
        log_page_size: ctx.get(Srqc::log_page_size),
        page_offset: ctx.get(Srqc::page_offset) as u64,
        dbr_addr: ctx.get(Srqc::dbr_addr),
        pas: inp.tail(),
    };
    let mut stored = ctx.as_bytes()[..Srqc::BYTES].to_vec();
    ViewMut::<Srqc>::new(&mut stored).map_err(|_| internal())?.set(Srqc::state, s::state::GOOD);
    let srqn = make(c, &g, stored, None)?;
    c.output::<CreateSrqOut>()?.set(CreateSrqOut::srqn, srqn);
    Ok(())
}

/// CREATE_XRC_SRQ: an SRQ of an XRC domain, completing on its own CQ (both must exist
/// and be the caller's: BAD_PARAM otherwise). The number comes from the SRQ pool.
pub(super) fn create_xrc(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateXrcSrqIn>()?;
    let ctx = inp.sub(CreateXrcSrqIn::xrc_srq_context_entry);
    if inp.get(CreateXrcSrqIn::xrc_srq_umem_valid) || ctx.get(XrcSrqc::dbr_umem_valid) {
        // UMEM-backed XRC SRQs (DevX) are not modelled.
        return Err(bad_param(syndrome::BAD_UMEM));
    }
    let (xrcd, cqn) = (ctx.get(XrcSrqc::xrcd), ctx.get(XrcSrqc::cqn));
    check_named(&c.objs.xrcds, xrcd, c.uid, syndrome::BAD_XRCD)?;
    check_named(&c.objs.cqs, cqn, c.uid, syndrome::BAD_CQ)?;
    let g = Geometry {
        log_size: ctx.get(XrcSrqc::log_xrc_srq_size) as u32,
        shift: 4 + ctx.get(XrcSrqc::log_rq_stride) as u32,
        pd: ctx.get(XrcSrqc::pd),
        wq_sig: ctx.get(XrcSrqc::wq_signature),
        lwm: ctx.get(XrcSrqc::lwm) as u32,
        log_page_size: ctx.get(XrcSrqc::log_page_size),
        page_offset: ctx.get(XrcSrqc::page_offset) as u64,
        dbr_addr: ctx.get(XrcSrqc::db_record_addr) & !3,
        pas: inp.tail(),
    };
    let mut stored = ctx.as_bytes()[..XrcSrqc::BYTES].to_vec();
    ViewMut::<XrcSrqc>::new(&mut stored).map_err(|_| internal())?.set(XrcSrqc::state, s::state::GOOD);
    let xrc = objects::srq::XrcSrq { xrcd, cqn, user_index: ctx.get(XrcSrqc::user_index) };
    let srqn = make(c, &g, stored, Some(xrc))?;
    if let Some(o) = c.objs.srqs.get(&srqn) {
        c.hca.insert_xrc_srq(&o.v.srq);
    }
    use_named(&mut c.objs.xrcds, xrcd, 1);
    use_named(&mut c.objs.cqs, cqn, 1);
    c.output::<CreateXrcSrqOut>()?.set(CreateXrcSrqOut::xrc_srqn, srqn);
    Ok(())
}

/// The SRQ both creates make: geometry and PD checks, the queue's memory, the number.
fn make(c: &mut Cmd<'_>, g: &Geometry<'_>, stored: Vec<u8>, xrc: Option<objects::srq::XrcSrq>) -> R<u32> {
    let (log_size, shift, pd) = (g.log_size, g.shift, g.pd);
    if log_size > caps::LOG_MAX_SRQ_SZ || 1u32 << shift > caps::MAX_WQE_SZ_RQ {
        return Err(bad_param(syndrome::SRQ_SIZE));
    }
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    let ring_len = (1u64 << log_size) << shift;
    let mut umems = Vec::new();
    let (buf_addr, db_addr) = umem::place_queue(c, &umem::QueueMemory {
        ring_umem: None,
        pas: g.pas,
        log_page_size: g.log_page_size,
        page_offset: g.page_offset,
        ring_len,
        ring_written: false,
        dbr_umem: None,
        dbr_addr: g.dbr_addr,
    }, &mut umems)?;
    let pd_obj = c.objs.pds.get(&pd).map(|o| o.v.clone()).ok_or_else(internal)?;
    let srqn = c.hca.alloc_srqn().ok_or_else(exhausted)?;
    let host = match c.host.take() {
        Some(super::Host::Srq(h)) => h,
        _ => {
            let gs = (1u32 << shift) / 16 - 1;
            SrqHost { user_handle: 0, event_file: None, max_gs: gs, max_wr: (1 << log_size) - 1, max_sge: gs }
        }
    };
    let srq = Arc::new(objects::Srq {
        srqn,
        pd: pd_obj,
        buf_addr,
        db_addr,
        log_size,
        wqe_shift: shift,
        max_gs: host.max_gs,
        wq_sig: g.wq_sig,
        max_wr: host.max_wr,
        max_sge: host.max_sge,
        user_handle: host.user_handle,
        event_file: host.event_file,
        events_reported: AtomicU32::new(0),
        usecnt: AtomicU32::new(0),
        dev: Mutex::new(objects::srq::SrqDev { limit: g.lwm, ..Default::default() }),
        xrc,
        _live: Live::new(c.hca.live_counts(), Kind::Srq),
    });
    use_named(&mut c.objs.pds, pd, 1);
    c.objs.srqs.insert(srqn, Obj { uid: c.uid, users: 0, v: SrqObj { pd, umems, srqc: stored, srq } });
    Ok(srqn)
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let srqn = c.input::<DestroySrqIn>()?.get(DestroySrqIn::srqn);
    unmake(c, srqn, false)
}

/// DESTROY_XRC_SRQ: also releases the domain and the CQ.
pub(super) fn destroy_xrc(c: &mut Cmd<'_>) -> R<()> {
    let srqn = c.input::<DestroyXrcSrqIn>()?.get(DestroyXrcSrqIn::xrc_srqn);
    unmake(c, srqn, true)
}

/// Removes SRQ `srqn`, which must be of the kind the destroy command names (an XRC SRQ
/// through DESTROY_XRC_SRQ, a basic one through DESTROY_SRQ; BAD_RES otherwise).
fn unmake(c: &mut Cmd<'_>, srqn: u32, xrc: bool) -> R<()> {
    if c.objs.srqs.get(&srqn).is_some_and(|o| o.v.srq.xrc.is_some() != xrc) {
        return Err(super::status::Outcome::err(prm::cmd::status::BAD_RES_ERR, syndrome::NO_OBJECT));
    }
    let o = remove(&mut c.objs.srqs, srqn, c.uid)?.v;
    if let Some(x) = o.srq.xrc {
        c.hca.remove_xrc_srq(srqn);
        use_named(&mut c.objs.xrcds, x.xrcd, -1);
        use_named(&mut c.objs.cqs, x.cqn, -1);
    }
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

