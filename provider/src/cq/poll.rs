//! Polling: turning CQEs the device wrote into work completions.
//!
//! The CQE at the consumer index belongs to software when its opcode is not
//! INVALID and its owner bit matches the lap parity of the index. After that check an
//! acquire fence orders the reads of the rest of the CQE; after consuming, the new
//! consumer index goes to the doorbell record so the device knows the slots are free.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use super::Cq;
use crate::barrier;
use crate::cqe::{is_sw_owned, Completion, CqeOpcode, Cqe64, ErrStatus, WcFlags, WcOpcode, WcStatus, CQE_SIZE};
use crate::doorbell;
use crate::qp::QpShared;

/// A work completion (`struct ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wc {
    /// The work request's id, as posted.
    pub wr_id: u64,
    /// Success, or why the work request failed.
    pub status: WcStatus,
    /// What completed (for a failed completion only `status`, `wr_id` and `qp_num` are meaningful, as in libibverbs).
    pub opcode: WcOpcode,
    /// The CQE syndrome's vendor byte, for failed completions.
    pub vendor_err: u8,
    /// Bytes received (receive completions) or transferred (READ, atomics).
    pub byte_len: u32,
    /// Immediate data (host order) when `flags` has WITH_IMM.
    pub imm: u32,
    /// The local QP the work request belonged to.
    pub qp_num: u32,
    /// The sender's QP number (UD receives).
    pub src_qp: u32,
    /// `flags_rqpn[27:24]`, which libmlx5 hands out as `ibv_wc.sl` as it is: on a RoCE
    /// port the packet type (`prm::cqe::RocePacketType`: 2 for RoCE v2 over IPv4).
    pub sl: u8,
    /// GRH present, immediate data present, and the like.
    pub flags: WcFlags,
}

impl Default for Wc {
    fn default() -> Self {
        Wc {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            vendor_err: 0,
            byte_len: 0,
            imm: 0,
            qp_num: 0,
            src_qp: 0,
            sl: 0,
            flags: WcFlags::empty(),
        }
    }
}

impl Cq {
    /// `ibv_poll_cq`: fills up to `wcs.len()` completions, returns how many.
    pub fn poll(&mut self, wcs: &mut [Wc]) -> usize {
        let ncqe = self.inner.ncqe;
        let mut n = 0;
        while n < wcs.len() {
            let idx = (self.ci & (ncqe - 1)) as usize;
            // SAFETY: entry idx is inside the CQ buffer owned by self.inner.
            let entry = unsafe { self.inner.buf.as_ptr().add(idx * CQE_SIZE) };
            // SAFETY: the owner byte is the last byte of the entry; the device writes
            // it concurrently, hence an atomic load.
            let op_own = unsafe { AtomicU8::from_ptr(entry.add(CQE_SIZE - 1)) }.load(Ordering::Relaxed);
            if !is_sw_owned(op_own, self.ci, ncqe) {
                break;
            }
            barrier::from_device();
            // SAFETY: the device has finished this entry (owner bit checked, fence
            // taken) and will not write it again until the consumer index passes it.
            let cqe = Cqe64::view(unsafe { &*(entry as *const [u8; CQE_SIZE]) });
            wcs[n] = self.complete(cqe);
            tracing::trace!(target: "provider::poll", cqn = self.inner.cqn, ci = self.ci, opcode = cqe.opcode_raw(),
                            wqe_counter = cqe.wqe_counter(), status = ?wcs[n].status, wr_id = wcs[n].wr_id,
                            qpn = wcs[n].qp_num, byte_len = wcs[n].byte_len, "wc");
            self.ci = self.ci.wrapping_add(1);
            n += 1;
        }
        if n > 0 {
            // SAFETY: word 0 of the CQ's doorbell record is live while the CQ is.
            unsafe { doorbell::publish(self.inner.dbrec.word(prm::dbrec::CQ_SET_CI), self.ci & prm::dbrec::CQ_CI_MASK) };
        }
        n
    }

    fn qp_for(&mut self, key: u32) -> Option<Arc<QpShared>> {
        if let Some((k, q)) = &self.last_qp {
            if *k == key {
                return Some(q.clone());
            }
        }
        let q = self.inner.ctx.lookup_qp(key)?;
        self.last_qp = Some((key, q.clone()));
        Some(q)
    }

    fn complete(&mut self, cqe: &Cqe64) -> Wc {
        let key = if self.inner.ctx.cqe_v1() { cqe.srqn_uidx() & 0xff_ffff } else { cqe.qpn() };
        let qp = self.qp_for(key);
        let mut wc = Wc { qp_num: cqe.qpn(), ..Default::default() };
        let Some(qp) = qp else {
            // A CQE for a QP this process no longer has (destroyed with work in flight).
            wc.status = WcStatus::GeneralErr;
            return wc;
        };
        match cqe.opcode() {
            Some(CqeOpcode::Req) => {
                let c = cqe.wqe_counter() as usize & (qp.sq_ent.len() - 1);
                wc.wr_id = qp.sq_ent[c].wr_id.load(Ordering::Relaxed);
                qp.sq_tail.store(qp.sq_ent[c].next.load(Ordering::Relaxed), Ordering::Release);
                if let Some((op, flags)) = cqe.req_completion() {
                    wc.opcode = op;
                    wc.flags = flags;
                }
                wc.byte_len = match wc.opcode {
                    WcOpcode::RdmaRead => cqe.byte_cnt(),
                    WcOpcode::CompSwap | WcOpcode::FetchAdd => 8,
                    _ => 0,
                };
            }
            Some(CqeOpcode::ReqErr) | Some(CqeOpcode::RespErr) => {
                let e = cqe.as_err();
                wc.status = e.status();
                wc.vendor_err = e.vendor_err();
                if cqe.opcode() == Some(CqeOpcode::ReqErr) {
                    let c = e.wqe_counter() as usize & (qp.sq_ent.len() - 1);
                    wc.wr_id = qp.sq_ent[c].wr_id.load(Ordering::Relaxed);
                    qp.sq_tail.store(qp.sq_ent[c].next.load(Ordering::Relaxed), Ordering::Release);
                } else {
                    wc.opcode = WcOpcode::Recv;
                    wc.wr_id = self.take_recv(&qp, e.wqe_counter());
                }
            }
            Some(_) => {
                let (op, flags) = cqe.resp_completion().unwrap_or((WcOpcode::Recv, WcFlags::empty()));
                wc.opcode = op;
                wc.flags = flags;
                wc.byte_len = cqe.byte_cnt();
                wc.imm = u32::from_be(cqe.imm_inval_pkey().to_be());
                wc.src_qp = cqe.src_qp();
                wc.sl = cqe.sl();
                wc.wr_id = self.take_recv(&qp, cqe.wqe_counter());
            }
            None => wc.status = WcStatus::GeneralErr,
        }
        wc
    }

    /// The wr_id of the receive a responder CQE completes: the RQ's oldest, or on a
    /// QP with an SRQ the SRQ WQE the CQE names (`wqe_counter`), which goes back to
    /// the SRQ's free list.
    fn take_recv(&self, qp: &QpShared, wqe_counter: u16) -> u64 {
        if let Some(srq) = &qp.srq {
            return srq.complete(wqe_counter);
        }
        let n = qp.rq_wrid.len();
        if n == 0 {
            return 0;
        }
        let t = qp.rq_tail.load(Ordering::Relaxed);
        let id = qp.rq_wrid[t as usize & (n - 1)].load(Ordering::Relaxed);
        qp.rq_tail.store(t.wrapping_add(1), Ordering::Release);
        id
    }

    /// Polls until `wcs` has at least one completion or `timeout` passes, spinning
    /// briefly and then yielding the CPU (a device thread may need it).
    pub fn poll_wait(&mut self, wcs: &mut [Wc], timeout: std::time::Duration) -> usize {
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        loop {
            let n = self.poll(wcs);
            if n > 0 {
                return n;
            }
            if start.elapsed() >= timeout {
                return 0;
            }
            spins += 1;
            if spins < 200 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}
