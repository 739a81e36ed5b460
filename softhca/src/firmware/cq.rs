//! CREATE_CQ / DESTROY_CQ / QUERY_CQ / MODIFY_CQ: a completion queue's context,
//! checked against the capabilities [`super::caps`] advertises, and the CQ the device
//! half runs.
//!
//! CREATE_CQ finds the CQE ring (`cq_umem_id` + `cq_umem_offset` when `cq_umem_valid`,
//! else the first entry of the page list after the inbox plus `page_offset`) and the
//! doorbell record (`dbr_umem_id` + `dbr_addr` as an offset when `dbr_umem_valid`,
//! else `dbr_addr` itself), then builds the [`objects::Cq`] the device half writes
//! CQEs into and enters it in the HCA ([`Hca::insert_cq`], which tells the device).
//! A UMEM a CQ uses counts it as a user until the CQ is destroyed.
//!
//! Completion events of a firmware CQ go nowhere: DevX event channels
//! (DEVX_SUBSCRIBE_EVENT) are not implemented, so a DevX CQ is polled.
//!
//! [`Hca::insert_cq`]: crate::hca::Hca::insert_cq

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use prm::bits::View;
use prm::cmd::cq::{cqe_sz, modify_op, CreateCqIn, CreateCqOut, Cqc, DestroyCqIn, ModifyCqIn, QueryCqIn, QueryCqOut};

use super::status::syndrome;
use super::{bad_param, exhausted, internal, remove, target, uar, umem, use_named, Cmd, Obj, R};
use crate::kernel::mlx5::caps;
use crate::objects::{self, Kind, Live};

#[derive(Debug)]
pub(super) struct CqObj {
    uar: u32,
    /// The UMEMs of the ring and of the doorbell record, if any.
    umems: Vec<u32>,
    /// The context as created (what QUERY_CQ answers, with the live counters).
    cqc: Vec<u8>,
    pub(super) cq: Arc<objects::Cq>,
}

/// What the kernel half keeps of a verbs CQ besides its context (mlx5_ib's
/// `struct mlx5_ib_cq` around the `mlx5_core_cq`): the firmware's CQ object carries it
/// so that the object the device half runs is the one the uverbs handle names. A
/// CREATE_CQ from DevX has none of it.
#[derive(Debug, Default)]
pub(crate) struct CqHost {
    pub user_handle: u64,
    /// `ib_uverbs_create_cq_flags`.
    pub flags: u32,
    /// `mlx5_ib_create_cq.flags`.
    pub mlx5_flags: u16,
    pub comp_channel: Option<Arc<objects::CompChannel>>,
    pub event_file: Option<Arc<objects::AsyncEventFile>>,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateCqIn>()?;
    let cqc: View<'_, Cqc> = inp.sub(CreateCqIn::cq_context);
    let log_size = cqc.get(Cqc::log_cq_size) as u32;
    if log_size > caps::LOG_MAX_CQ_SZ {
        return Err(bad_param(syndrome::CQ_SIZE));
    }
    let cqe_size = match cqc.get(Cqc::cqe_sz) {
        cqe_sz::BYTES_64 => 64u32,
        cqe_sz::BYTES_128 => 128,
        _ => return Err(bad_param(syndrome::CQE_SIZE)),
    };
    // cqe_compression, cq_oi and the collapsed CQE are zero in the capabilities.
    if cqc.get(Cqc::cqe_comp_en) || cqc.get(Cqc::oi) || cqc.get(Cqc::cc) {
        return Err(bad_param(syndrome::CQ_FEATURE));
    }
    let uar = cqc.get(Cqc::uar_page);
    if !uar::valid(c, uar) {
        return Err(bad_param(syndrome::BAD_UAR));
    }
    let entries = 1u32 << log_size;
    let ring_len = entries as u64 * cqe_size as u64;
    let mut umems = Vec::new();
    let (buf_addr, db_addr) = umem::place_queue(c, &umem::QueueMemory {
        ring_umem: inp.get(CreateCqIn::cq_umem_valid)
            .then(|| (inp.get(CreateCqIn::cq_umem_id), inp.get(CreateCqIn::cq_umem_offset))),
        pas: inp.tail(),
        log_page_size: cqc.get(Cqc::log_page_size),
        page_offset: cqc.get(Cqc::page_offset) as u64,
        ring_len,
        ring_written: true,
        dbr_umem: cqc.get(Cqc::dbr_umem_valid).then(|| cqc.get(Cqc::dbr_umem_id)),
        dbr_addr: cqc.get(Cqc::dbr_addr),
    }, &mut umems)?;
    let cqn = c.hca.alloc_cqn().ok_or_else(exhausted)?;
    let host = match c.host.take() {
        Some(super::Host::Cq(h)) => h,
        _ => CqHost::default(),
    };
    use_named(&mut c.objs.uars, uar, 1);
    for &u in &umems {
        use_named(&mut c.objs.umems, u, 1);
    }
    let cq = Arc::new(objects::Cq {
        cqn,
        entries,
        cqe: entries - 1,
        cqe_size,
        buf_addr,
        db_addr,
        uar_page: uar,
        user_handle: host.user_handle,
        // The completion EQs are the vectors (`mlx5_vector2eqn`); any other EQ
        // number is taken as vector 0 (DevX CQs get no events: see the module doc).
        comp_vector: (cqc.get(Cqc::c_eqn) as u32).checked_sub(super::FIRST_COMP_EQN)
            .filter(|&v| v < c.hca.config().num_comp_vectors).unwrap_or(0),
        flags: host.flags,
        mlx5_flags: host.mlx5_flags,
        cqe_comp: None,
        comp_channel: host.comp_channel,
        event_file: host.event_file,
        comp_events_reported: AtomicU32::new(0),
        async_events_reported: AtomicU32::new(0),
        usecnt: AtomicU32::new(0),
        dev: Mutex::new(Default::default()),
        _live: Live::new(c.hca.live_counts(), Kind::Cq),
    });
    c.hca.insert_cq(&cq);
    let v = CqObj { uar, umems, cqc: cqc.as_bytes()[..Cqc::BYTES].to_vec(), cq };
    c.objs.cqs.insert(cqn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateCqOut>()?.set(CreateCqOut::cqn, cqn);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let cqn = c.input::<DestroyCqIn>()?.get(DestroyCqIn::cqn);
    let cq = remove(&mut c.objs.cqs, cqn, c.uid)?.v;
    use_named(&mut c.objs.uars, cq.uar, -1);
    for &u in &cq.umems {
        use_named(&mut c.objs.umems, u, -1);
    }
    // Out of the HCA's table and the device half; frees the CQ number.
    c.hca.remove_cq(&cq.cq);
    Ok(())
}

/// QUERY_CQ: the context as created, with the producer counter the device half keeps.
pub(super) fn query(c: &mut Cmd<'_>) -> R<()> {
    let cqn = c.input::<QueryCqIn>()?.get(QueryCqIn::cqn);
    let o = &target(&mut c.objs.cqs, cqn, c.uid)?.v;
    let (cqc, cq) = (o.cqc.clone(), o.cq.clone());
    c.output::<QueryCqOut>()?;
    let off = QueryCqOut::cq_context.off() / 8;
    c.outbox.get_mut(off..off + Cqc::BYTES).ok_or_else(internal)?.copy_from_slice(&cqc);
    let producer = cq.dev.lock().unwrap_or_else(|p| p.into_inner()).producer_index;
    c.output::<QueryCqOut>()?.sub_mut(QueryCqOut::cq_context).set(Cqc::producer_counter, producer & 0xff_ffff);
    Ok(())
}

/// MODIFY_CQ: softhca has neither CQ moderation nor resize (`cq_moderation` and
/// `cq_resize` are 0 in the capabilities), so only a modify that selects nothing
/// succeeds.
pub(super) fn modify(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<ModifyCqIn>()?;
    let (op_mod, cqn, select) = (inp.get(ModifyCqIn::op_mod), inp.get(ModifyCqIn::cqn), inp.get(ModifyCqIn::modify_field_select));
    target(&mut c.objs.cqs, cqn, c.uid)?;
    match op_mod {
        modify_op::MODIFY if select == 0 => Ok(()),
        modify_op::MODIFY | modify_op::RESIZE => Err(bad_param(syndrome::CQ_FEATURE)),
        _ => Err(bad_param(syndrome::BAD_OP_MOD)),
    }
}
