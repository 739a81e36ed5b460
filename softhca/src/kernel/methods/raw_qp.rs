//! mlx5_ib's RAW_PACKET QP (`create_raw_packet_qp`, `modify_raw_packet_qp`,
//! `destroy_raw_packet_qp` in drivers/infiniband/hw/mlx5/qp.c): no CREATE_QP, but a
//! TIS and an SQ sending through it (when the QP has a send queue), an RQ and a direct
//! TIR naming it (when it has a receive queue), their contexts taken from the QP
//! context `create_user_qp` would have built. libmlx5 gives the SQ a buffer of its own
//! (`sq_buf_addr`); the doorbell record is shared (RQ counter at +0, SQ at +4).
//!
//! The QP's number is the SQ's (the RQ's without an SQ); the create response reports
//! the four object numbers with their `comp_mask` bits. The verbs' states map onto the
//! queues' as mlx5_ib maps them: RESET->INIT moves both to RDY, ERR and RESET move both
//! there, and INIT->RTR->RTS change nothing in the firmware (the QP's state is the
//! kernel's own bookkeeping, and the device half's).
//!
//! Not modelled: the context's transport domain (mlx5_ib allocates one per user
//! context; softhca's TIS and TIR carry 0), rate limits (EINVAL), TIR hashing (RSS QPs),
//! CVLAN stripping and FCS scatter (EOPNOTSUPP at create).

use std::sync::Arc;

use nix::errno::Errno;

use prm::bits::{View, ViewMut};
use prm::cmd::opcode as op;
use prm::cmd::{rq, sq, tir, tis, wq};
use uverbs::sys::mlx5::CreateQpResp as Mlx5CreateQpResp;

use super::qp::UserQp;
use crate::firmware::QpHost;
use crate::hca::Hca;
use crate::kernel::Result;
use crate::objects::{Qp, QpAttrs, QpState, RawQueues};

/// `enum mlx5_ib_create_qp_resp_mask`.
pub(crate) mod resp_mask {
    pub const TIRN: u32 = 1 << 0;
    pub const TISN: u32 = 1 << 1;
    pub const RQN: u32 = 1 << 2;
    pub const SQN: u32 = 1 << 3;
}

const PAGE: u64 = 4096;

/// A WQ's page list of 4 KiB pages covering `[buf, buf + len)` (softhca's DMA
/// addresses are the process's virtual addresses), and the offset in the first page
/// in 64-byte units.
fn pages(buf: u64, len: u64) -> (Vec<u8>, u8) {
    let first = buf & !(PAGE - 1);
    let n = if len == 0 { 0 } else { (buf + len - first).div_ceil(PAGE) };
    let mut b = Vec::with_capacity(n as usize * 8);
    for i in 0..n {
        b.extend_from_slice(&(first + i * PAGE).to_be_bytes());
    }
    (b, ((buf - first) / 64) as u8)
}

fn number(out: &[u8], f: impl FnOnce(&[u8]) -> Option<u32>) -> Result<u32> {
    f(out).ok_or(Errno::EIO)
}

/// The common header of the inboxes built here.
fn header(b: &mut [u8], opcode: u16, uid: u16) {
    if let Ok(mut v) = ViewMut::<prm::cmd::header::MboxIn>::new(b) {
        v.set(prm::cmd::header::MboxIn::opcode, opcode).set(prm::cmd::header::MboxIn::uid, uid);
    }
}

/// Sets a WQ context as `create_raw_packet_qp_{sq,rq}` copy it from the QP context.
fn set_wq(w: &mut ViewMut<'_, wq::Wq>, g: &UserQp, stride_log: u8, size_log: u8, page_offset: u8, uar: bool) {
    w.set(wq::Wq::wq_type, wq::wq_type::CYCLIC)
        .set(wq::Wq::pd, g.pdn)
        .set(wq::Wq::dbr_addr, g.db)
        .set(wq::Wq::log_wq_stride, stride_log)
        .set(wq::Wq::log_wq_sz, size_log)
        .set(wq::Wq::log_wq_pg_sz, 0)
        .set(wq::Wq::page_offset, page_offset);
    if uar {
        w.set(wq::Wq::uar_page, g.uar_page);
    }
}

fn destroy_cmd(hca: &Hca, opcode: u16, uid: u16, n: u32) -> Result<()> {
    // Every DESTROY_{SQ,RQ,TIS,TIR} names its object at the same place.
    let mut b = vec![0u8; sq::DestroySqIn::BYTES];
    header(&mut b, opcode, uid);
    if let Ok(mut v) = ViewMut::<sq::DestroySqIn>::new(&mut b) {
        v.set(sq::DestroySqIn::sqn, n);
    }
    hca.firmware().kernel_cmd(&b, prm::cmd::header::MboxOut::BYTES, None).map(|_| ())
}

/// Undoes what a failed create made, newest first (errors are the kernel's to ignore).
fn unwind(hca: &Hca, uid: u16, made: &[(u16, u32)]) {
    for &(opcode, n) in made.iter().rev() {
        let _ = destroy_cmd(hca, opcode, uid, n);
    }
}

/// `create_raw_packet_qp`: the firmware objects, then the device half's QP and the
/// response's raw fields.
pub(crate) fn create(hca: &Hca, uid: u16, g: &UserQp, sq_buf: u64, host: QpHost, resp: &mut Mlx5CreateQpResp)
    -> Result<Arc<Qp>> {
    let fw = hca.firmware();
    let mut made: Vec<(u16, u32)> = Vec::new();
    let mut raw = RawQueues::default();
    let r = (|| {
        if g.sq_cnt != 0 {
            // create_raw_packet_qp_tis
            let mut b = vec![0u8; tis::CreateTisIn::BYTES];
            header(&mut b, op::CREATE_TIS, uid);
            let out = fw.kernel_cmd(&b, tis::CreateTisOut::BYTES, None)?;
            let tisn = number(&out, |o| View::<tis::CreateTisOut>::new(o).ok().map(|v| v.get(tis::CreateTisOut::tisn)))?;
            made.push((op::DESTROY_TIS, tisn));
            // create_raw_packet_qp_sq
            let (pas, off) = pages(sq_buf, (g.sq_cnt as u64) << 6);
            let mut b = vec![0u8; sq::CreateSqIn::BYTES];
            header(&mut b, op::CREATE_SQ, uid);
            if let Ok(mut v) = ViewMut::<sq::CreateSqIn>::new(&mut b) {
                let mut c = v.sub_mut(sq::CreateSqIn::ctx);
                c.set(sq::Sqc::flush_in_error_en, true)
                    .set(sq::Sqc::state, sq::state::RST)
                    .set(sq::Sqc::cqn, g.cqn_snd)
                    .set(sq::Sqc::tis_lst_sz, 1u16)
                    .set(sq::Sqc::tis_num_0, tisn);
                if g.cqe_version == 1 {
                    c.set(sq::Sqc::user_index, g.uidx);
                }
                set_wq(&mut c.sub_mut(sq::Sqc::wq), g, 6, (g.sq_cnt.ilog2() & 0x1f) as u8, off, true);
            }
            b.extend_from_slice(&pas);
            let out = fw.kernel_cmd(&b, sq::CreateSqOut::BYTES, None)?;
            let sqn = number(&out, |o| View::<sq::CreateSqOut>::new(o).ok().map(|v| v.get(sq::CreateSqOut::sqn)))?;
            made.push((op::DESTROY_SQ, sqn));
            raw.tisn = Some(tisn);
            raw.sqn = Some(sqn);
            resp.tisn = tisn;
            resp.sqn = sqn;
            resp.comp_mask |= resp_mask::TISN | resp_mask::SQN;
        }
        if g.rq_cnt != 0 {
            // create_raw_packet_qp_rq
            let (pas, off) = pages(g.buf, (g.rq_cnt as u64) << g.rq_shift);
            let mut b = vec![0u8; rq::CreateRqIn::BYTES];
            header(&mut b, op::CREATE_RQ, uid);
            if let Ok(mut v) = ViewMut::<rq::CreateRqIn>::new(&mut b) {
                let mut c = v.sub_mut(rq::CreateRqIn::ctx);
                c.set(rq::Rqc::mem_rq_type, rq::MEM_RQ_TYPE_INLINE)
                    .set(rq::Rqc::state, rq::state::RST)
                    .set(rq::Rqc::flush_in_error_en, true)
                    .set(rq::Rqc::cqn, g.cqn_rcv);
                if g.cqe_version == 1 {
                    c.set(rq::Rqc::user_index, g.uidx);
                }
                let mut w = c.sub_mut(rq::Rqc::wq);
                set_wq(&mut w, g, (g.rq_shift & 0xf) as u8, (g.rq_cnt.ilog2() & 0x1f) as u8, off, false);
                w.set(wq::Wq::wq_signature, g.signature);
            }
            b.extend_from_slice(&pas);
            let out = fw.kernel_cmd(&b, rq::CreateRqOut::BYTES, None)?;
            let rqn = number(&out, |o| View::<rq::CreateRqOut>::new(o).ok().map(|v| v.get(rq::CreateRqOut::rqn)))?;
            made.push((op::DESTROY_RQ, rqn));
            // create_raw_packet_qp_tir
            let mut b = vec![0u8; tir::CreateTirIn::BYTES];
            header(&mut b, op::CREATE_TIR, uid);
            if let Ok(mut v) = ViewMut::<tir::CreateTirIn>::new(&mut b) {
                let mut c = v.sub_mut(tir::CreateTirIn::ctx);
                c.set(tir::Tirc::disp_type, tir::disp_type::DIRECT).set(tir::Tirc::inline_rqn, rqn);
                // Multicast loopback blocked at create: the TIR drops this function's
                // own multicast (mlx5_ib sets the bit unless the context allows it).
                if g.block_mc_lb {
                    c.set(tir::Tirc::self_lb_block, tir::self_lb_block::MULTICAST);
                }
            }
            let out = fw.kernel_cmd(&b, tir::CreateTirOut::BYTES, None)?;
            let tirn = number(&out, |o| View::<tir::CreateTirOut>::new(o).ok().map(|v| v.get(tir::CreateTirOut::tirn)))?;
            made.push((op::DESTROY_TIR, tirn));
            raw.rqn = Some(rqn);
            raw.tirn = Some(tirn);
            resp.rqn = rqn;
            resp.tirn = tirn;
            resp.comp_mask |= resp_mask::RQN | resp_mask::TIRN;
        }
        fw.raw_qp(uid, raw, host)
    })();
    if r.is_err() {
        unwind(hca, uid, &made);
    }
    r
}

/// The PRM state of both queues while the verbs QP is in `s`.
fn queue_state(s: QpState) -> u8 {
    match s {
        QpState::Reset => rq::state::RST,
        QpState::Err => rq::state::ERR,
        _ => rq::state::RDY,
    }
}

fn modify_queues(hca: &Hca, qp: &Qp, uid: u16, from: u8, to: u8) -> Result<()> {
    let Some(raw) = qp.raw else { return Err(Errno::EINVAL) };
    let fw = hca.firmware();
    if let Some(rqn) = raw.rqn {
        let mut b = vec![0u8; rq::ModifyRqIn::BYTES];
        header(&mut b, op::MODIFY_RQ, uid);
        if let Ok(mut v) = ViewMut::<rq::ModifyRqIn>::new(&mut b) {
            v.set(rq::ModifyRqIn::rq_state, from).set(rq::ModifyRqIn::rqn, rqn);
            v.sub_mut(rq::ModifyRqIn::ctx).set(rq::Rqc::state, to);
        }
        fw.kernel_cmd(&b, prm::cmd::header::MboxOut::BYTES, None)?;
    }
    if let Some(sqn) = raw.sqn {
        let mut b = vec![0u8; sq::ModifySqIn::BYTES];
        header(&mut b, op::MODIFY_SQ, uid);
        if let Ok(mut v) = ViewMut::<sq::ModifySqIn>::new(&mut b) {
            v.set(sq::ModifySqIn::sq_state, from).set(sq::ModifySqIn::sqn, sqn);
            v.sub_mut(sq::ModifySqIn::ctx).set(sq::Sqc::state, to);
        }
        fw.kernel_cmd(&b, prm::cmd::header::MboxOut::BYTES, None)?;
    }
    Ok(())
}

/// `modify_raw_packet_qp` for the verbs' `cur -> new` with the new attributes `n`
/// (checked by the core already), then the device half.
pub(crate) fn modify(hca: &Hca, qp: &Arc<Qp>, uid: u16, cur: QpState, new: QpState, rate_limit: bool, n: QpAttrs)
    -> Result<()> {
    use QpState::{Init, Reset, Rtr, Rts};
    match (cur, new) {
        (Reset, Init) | (_, QpState::Err) | (_, Reset) => modify_queues(hca, qp, uid, queue_state(cur), queue_state(new))?,
        (Init, Init) | (Init, Rtr) | (Rtr, Rts) | (Rts, Rts) => {
            // No packet pacing here (`MLX5_RAW_QP_RATE_LIMIT` needs it).
            if rate_limit {
                return Err(Errno::EINVAL);
            }
        }
        _ => return Err(Errno::EINVAL),
    }
    *qp.attrs.lock().unwrap_or_else(|p| p.into_inner()) = QpAttrs { state: new, ..n };
    hca.device().qp_modified(qp, cur, new);
    Ok(())
}

/// `destroy_qp_common` for a raw packet QP: both queues to RST, then TIR, RQ, SQ, TIS.
pub(crate) fn destroy(hca: &Hca, qp: &Arc<Qp>, uid: u16) -> Result<()> {
    let Some(raw) = qp.raw else { return Err(Errno::EINVAL) };
    let cur = qp.state();
    if cur != QpState::Reset {
        modify_queues(hca, qp, uid, queue_state(cur), rq::state::RST)?;
        *qp.attrs.lock().unwrap_or_else(|p| p.into_inner()) = QpAttrs::default();
        hca.device().qp_modified(qp, cur, QpState::Reset);
    }
    if let Some(n) = raw.tirn {
        destroy_cmd(hca, op::DESTROY_TIR, uid, n)?;
    }
    if let Some(n) = raw.rqn {
        destroy_cmd(hca, op::DESTROY_RQ, uid, n)?;
    }
    if let Some(n) = raw.sqn {
        destroy_cmd(hca, op::DESTROY_SQ, uid, n)?;
    }
    if let Some(n) = raw.tisn {
        destroy_cmd(hca, op::DESTROY_TIS, uid, n)?;
    }
    Ok(())
}
