//! CREATE_CQ / DESTROY_CQ: a completion queue's context, checked against the
//! capabilities [`super::caps`] advertises.

use prm::bits::View;
use prm::cmd::cq::{cqe_sz, CreateCqIn, CreateCqOut, Cqc, DestroyCqIn};

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, remove, use_named, Cmd, Obj, R};
use crate::kernel::mlx5::caps;

#[derive(Debug)]
pub(super) struct CqObj {
    uar: u32,
    /// The context as created (what QUERY_CQ will answer).
    #[allow(dead_code)]
    cqc: Vec<u8>,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let cqc: View<'_, Cqc> = c.input::<CreateCqIn>()?.sub(CreateCqIn::cq_context);
    if cqc.get(Cqc::log_cq_size) as u32 > caps::LOG_MAX_CQ_SZ {
        return Err(bad_param(syndrome::CQ_SIZE));
    }
    if !matches!(cqc.get(Cqc::cqe_sz), cqe_sz::BYTES_64 | cqe_sz::BYTES_128) {
        return Err(bad_param(syndrome::CQE_SIZE));
    }
    // cqe_compression, cq_oi and the collapsed CQE are zero in the capabilities.
    if cqc.get(Cqc::cqe_comp_en) || cqc.get(Cqc::oi) || cqc.get(Cqc::cc) {
        return Err(bad_param(syndrome::CQ_FEATURE));
    }
    let uar = cqc.get(Cqc::uar_page);
    check_named(&c.objs.uars, uar, c.uid, syndrome::BAD_UAR)?;
    let cqn = c.hca.alloc_cqn().ok_or_else(exhausted)?;
    use_named(&mut c.objs.uars, uar, 1);
    let v = CqObj { uar, cqc: cqc.as_bytes()[..Cqc::BYTES].to_vec() };
    c.objs.cqs.insert(cqn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateCqOut>()?.set(CreateCqOut::cqn, cqn);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let cqn = c.input::<DestroyCqIn>()?.get(DestroyCqIn::cqn);
    let cq = remove(&mut c.objs.cqs, cqn, c.uid)?;
    use_named(&mut c.objs.uars, cq.v.uar, -1);
    c.hca.free_cqn(cqn);
    Ok(())
}
