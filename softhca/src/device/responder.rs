//! The responder: requests arriving for a QP, checked and executed in PSN order.
//!
//! - PSN equal to the expected one: executed. Every remote key, bound and access right is
//!   checked *before* memory is touched; a failure NAKs (remote access error, invalid
//!   request) and moves this QP to ERR with an async event (QP_ACCESS_ERR /
//!   QP_REQ_ERR), as a ConnectX responder does; no byte is written.
//! - PSN ahead: one sequence-error NAK carrying the expected PSN, then silence until the
//!   expected PSN arrives (the requester goes back N).
//! - PSN behind: a duplicate. SEND/WRITE are acknowledged again, READs re-executed from
//!   their RETH, atomics answered from the saved original value (never re-executed).
//!
//! READs and atomics hold one of the QP's `max_dest_rd_atomic` responder resources
//! ([`RdSlot`]), as on a ConnectX: a ring of the most recent ones, each remembering its
//! PSN range, whether its response has gone out completely, and an atomic's original
//! value. A new READ/atomic takes a slot; when the ring is full the oldest slot is
//! recycled, which is safe because a requester keeps at most `max_rd_atomic` of them
//! outstanding, so the new request tells that it has the oldest one's response. Only
//! when that response has never gone out completely has the requester exceeded the limit
//! (invalid request NAK). A duplicate READ or atomic takes no slot: it is served from
//! the slot its PSN falls in (a READ re-executed from the requested PSN, replacing the
//! response streams from there on; an atomic answered with the saved value), and one
//! older than every slot is ignored (IBA: a duplicate for a resource the responder no
//! longer holds is silently dropped; the requester has finished with it).
//!
//! SEND and WRITE_WITH_IMM consume a receive WQE; with none posted the responder sends an
//! RNR NAK with the QP's `min_rnr_timer` and leaves the expected PSN where it was.
//! Acknowledges are coalesced: a request with AckReq marks the QP, and one ACK for the
//! newest PSN goes out after the received batch. Responses leave in PSN order through one
//! queue per QP (ACKs, NAKs, atomic ACKs and READ response streams, the latter paced a
//! few packets per engine step).

use std::collections::VecDeque;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use uverbs::sys::verbs::{event, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};

use crate::hca::Access;
use crate::objects::{Loc, QpState};
use crate::wire::{AethRepr, AtomicAckEthRepr, BthRepr, CreditCode, NakCode, Opcode, RnrTimer, RocePacket, Syndrome};

use super::counters::step_add;
use super::cqe::{opcode as cqe_op, recv_flags_rqpn, syndrome, Cqe};
use super::mkey;
use super::psn;
use super::qp::{Env, QpCtx};
use super::requester::packets;
use super::stage::{self, InStage, OutStage};
use super::tx::MemRef;
use super::wqe::Sge;

/// How long a PSN gap may last before the sequence NAK is repeated.
pub const RENAK: Duration = Duration::from_micros(500);

/// A message being received.
#[derive(Debug)]
pub enum InMsg {
    Send { sges: Vec<Sge>, offset: u64 },
    Write { rkey: u32, va: u64, remaining: u64, total: u64 },
}

/// What an acknowledge says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    Ack,
    Rnr(RnrTimer),
    Nak(NakCode),
}

/// An RDMA READ being answered.
#[derive(Debug, Clone, Copy)]
pub struct ReadStream {
    pub psn: u32,
    pub va: u64,
    pub rkey: u32,
    pub len: u64,
    /// Next packet, and packets in all.
    pub k: u32,
    pub n: u32,
    pub msn: u32,
    /// Order of creation on this QP (never repeats): names the stream's staged data, so
    /// a READ executed again (a duplicate) reads memory afresh.
    pub serial: u64,
}

/// One responder resource: a READ or atomic accepted at the expected PSN (see the module
/// docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdSlot {
    /// First PSN, and PSNs covered (a READ's response packets; 1 for an atomic).
    pub psn: u32,
    pub n: u32,
    /// The whole response has been sent at least once (a READ's last response packet, or
    /// the atomic ACK).
    pub served: bool,
    /// An atomic's original value, the answer to its duplicates.
    pub orig: Option<u64>,
}

impl RdSlot {
    fn holds(&self, p: u32) -> bool {
        let d = psn::diff(p, self.psn);
        d >= 0 && (d as u32) < self.n
    }
}

/// A response waiting to be sent.
#[derive(Debug, Clone, Copy)]
pub enum Out {
    Ack { psn: u32, msn: u32, kind: AckKind },
    AtomicAck { psn: u32, msn: u32, orig: u64 },
    Read(ReadStream),
}

/// The responder half of a QP.
#[derive(Debug, Default)]
pub struct Responder {
    /// Expected PSN.
    pub epsn: u32,
    /// Message sequence number: messages completed (24 bits).
    pub msn: u32,
    /// A sequence or RNR NAK was sent and the expected PSN has not arrived since.
    pub nak_sent: bool,
    /// When the last sequence NAK went out.
    pub nak_at: Option<Instant>,
    pub cur: Option<InMsg>,
    pub out: VecDeque<Out>,
    pub ack_pending: bool,
    /// The READ/atomic resources in use, oldest first (at most `max_dest_rd_atomic`).
    pub slots: VecDeque<RdSlot>,
    /// SEND/WRITE payloads on their way into peer memory (see [`super::stage`]).
    pub in_stage: InStage,
    /// READ response data read from peer memory, a segment at a time.
    pub read_stage: OutStage,
    /// The next READ stream's `serial`.
    pub next_serial: u64,
}

impl Responder {
    /// Entering ERR: drop partial state; already queued ACKs/NAKs still go out.
    pub fn on_error(&mut self) {
        self.cur = None;
        self.ack_pending = false;
        self.out.retain(|o| matches!(o, Out::Ack { .. }));
    }

    /// Turns a pending (coalesced) acknowledge into a queued ACK.
    pub fn flush_ack(&mut self) {
        if !self.ack_pending {
            return;
        }
        self.ack_pending = false;
        let p = psn::add(self.epsn, psn::MASK);
        if let Some(Out::Ack { psn, msn, kind: AckKind::Ack }) = self.out.back_mut() {
            *psn = p;
            *msn = self.msn;
            return;
        }
        self.out.push_back(Out::Ack { psn: p, msn: self.msn, kind: AckKind::Ack });
    }

    fn push(&mut self, o: Out) {
        self.flush_ack();
        self.out.push_back(o);
    }

    /// A new READ stream's serial.
    fn stream_serial(&mut self) -> u64 {
        self.next_serial += 1;
        self.next_serial
    }

    /// The slot whose PSN range holds `p`.
    fn slot(&mut self, p: u32) -> Option<&mut RdSlot> {
        self.slots.iter_mut().find(|s| s.holds(p))
    }

    /// Makes room for a new READ/atomic among `max` slots by recycling the oldest one,
    /// whose queued (duplicate) responses are dropped: the requester has it complete.
    /// Fails when the oldest response never went out: the requester has more than `max`
    /// outstanding.
    fn make_room(&mut self, max: u32) -> Result<(), ()> {
        while self.slots.len() >= max.max(1) as usize {
            let old = self.slots.front().copied().expect("slots is not empty");
            if !old.served {
                return Err(());
            }
            self.slots.pop_front();
            self.out.retain(|o| !matches!(o, Out::Read(s) if old.holds(s.psn)));
        }
        Ok(())
    }

    /// The response of the slot holding `p` has gone out completely.
    fn served(&mut self, p: u32) {
        if let Some(s) = self.slot(p) {
            s.served = true;
        }
    }
}

/// Payload sizes a packet may carry at its position in a message.
fn length_ok(op: Opcode, n: usize, mtu: usize) -> bool {
    if op.is_only() {
        n <= mtu
    } else if op.is_last() {
        (1..=mtu).contains(&n)
    } else {
        n == mtu
    }
}

impl QpCtx {
    /// A request packet (SEND, WRITE, READ request, atomic) for this QP.
    pub fn on_request(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            env.counters.rx_no_qp.fetch_add(1, Relaxed);
            return;
        }
        if self.qp.qp_type == crate::objects::QpType::Uc {
            return self.on_uc_request(pkt, env);
        }
        let p = pkt.bth.psn;
        let d = psn::diff(p, self.resp.epsn);
        if d > 0 {
            // One NAK per gap; again only if the gap persists for RENAK (the requester's
            // retransmission of the missing PSN was lost too), instead of waiting for the
            // requester's ACK timeout.
            let again = self.resp.nak_at.is_some_and(|t| env.now.duration_since(t) >= RENAK);
            if !self.resp.nak_sent || again {
                self.resp.nak_sent = true;
                self.resp.nak_at = Some(env.now);
                env.counters.seq_naks_sent.fetch_add(1, Relaxed);
                tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, psn = p, expected = self.resp.epsn, "sequence NAK");
                let (epsn, msn) = (self.resp.epsn, self.resp.msn);
                self.resp.push(Out::Ack { psn: epsn, msn, kind: AckKind::Nak(NakCode::PsnSequenceError) });
            }
            return;
        }
        if d < 0 {
            env.counters.duplicates_received.fetch_add(1, Relaxed);
            self.on_duplicate(pkt, env);
            return;
        }
        self.resp.nak_sent = false;
        if self.qp.qp_type == crate::objects::QpType::XrcTgt && pkt.bth.opcode.starts_message() {
            // The XRCETH names the SRQ, which must be of this QP's XRC domain (IBA
            // 9.3.6: otherwise the request is NAKed as invalid).
            let srq = pkt.xrceth.and_then(|x| env.hca.xrc_srq(x.xrc_srqn));
            match srq {
                Some(s) if s.xrc.is_some_and(|x| x.xrcd == self.qp.xrcd) => {
                    if self.xrc_srq.as_ref().is_none_or(|o| o.srqn != s.srqn) {
                        self.srq_wqe = None;
                    }
                    self.xrc_srq = Some(s);
                }
                _ => return self.nak_fatal(env, NakCode::InvalidRequest, "XRCETH names no XRC SRQ of this domain"),
            }
        }
        use Opcode::*;
        match pkt.bth.opcode {
            RcSendFirst | RcSendMiddle | RcSendLast | RcSendLastWithImm | RcSendOnly | RcSendOnlyWithImm => self.recv_send(pkt, env),
            RcRdmaWriteFirst | RcRdmaWriteMiddle | RcRdmaWriteLast | RcRdmaWriteLastWithImm | RcRdmaWriteOnly
            | RcRdmaWriteOnlyWithImm => self.recv_write(pkt, env),
            RcRdmaReadRequest => self.recv_read(pkt, env),
            RcCompareSwap | RcFetchAdd => self.recv_atomic(pkt, env),
            _ => self.nak_fatal(env, NakCode::InvalidRequest, "unsupported request"),
        }
    }

    /// NAKs the request at the expected PSN and moves the QP to ERR.
    fn nak_fatal(&mut self, env: &mut Env<'_>, code: NakCode, why: &str) {
        self.nak_fatal_at(env, self.resp.epsn, code, why)
    }

    /// NAKs PSN `p` (a READ response that could not be served) and moves the QP to ERR.
    fn nak_fatal_at(&mut self, env: &mut Env<'_>, p: u32, code: NakCode, why: &str) {
        if self.qp.qp_type == crate::objects::QpType::Uc {
            // UC answers nothing: the message is dropped (see `super::uc`).
            return self.uc_drop(env, why);
        }
        env.counters.err_naks_sent.fetch_add(1, Relaxed);
        tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, psn = p, ?code, why, "NAK");
        let msn = self.resp.msn;
        self.resp.push(Out::Ack { psn: p, msn, kind: AckKind::Nak(code) });
        let ev = if code == NakCode::RemoteAccessError { event::QP_ACCESS_ERR } else { event::QP_REQ_ERR };
        self.enter_error(env, Some(ev));
    }

    /// A receive WQE completed in error (a local error of this QP): RC NAKs the request
    /// and both go to ERR; UC sends nothing but the QP goes to ERR all the same.
    fn recv_wqe_failed(&mut self, env: &mut Env<'_>, code: NakCode, why: &str) {
        if self.qp.qp_type == crate::objects::QpType::Uc {
            tracing::debug!(target: "softhca::responder", qpn = self.qp.qpn, why, "UC receive WQE failed");
            return self.enter_error(env, Some(event::QP_FATAL));
        }
        self.nak_fatal(env, code, why)
    }

    fn rnr(&mut self, env: &mut Env<'_>) {
        if self.qp.qp_type == crate::objects::QpType::Uc {
            return self.uc_drop(env, "no receive WQE");
        }
        // The RNR NAK acknowledges every PSN before it: what is staged of them is written
        // now (a WRITE_WITH_IMM waiting for a receive WQE at its last packet).
        if self.resp.in_stage.flush(env.hca, env.keys, &self.qp.pd).is_err() {
            return self.nak_fatal(env, NakCode::RemoteAccessError, "staged WRITE into peer memory failed");
        }
        env.counters.rnr_naks_sent.fetch_add(1, Relaxed);
        let timer = RnrTimer::new(self.attrs.min_rnr_timer).unwrap_or(RnrTimer::from_micros(10));
        tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, psn = self.resp.epsn, timer_us = timer.micros(), "RNR NAK");
        let (epsn, msn) = (self.resp.epsn, self.resp.msn);
        self.resp.push(Out::Ack { psn: epsn, msn, kind: AckKind::Rnr(timer) });
        self.resp.nak_sent = true;
        self.resp.nak_at = None;
    }

    fn message_done(&mut self, ack_req: bool) {
        self.resp.epsn = psn::add(self.resp.epsn, 1);
        if ack_req && self.qp.qp_type != crate::objects::QpType::Uc {
            self.resp.ack_pending = true;
        }
    }

    fn recv_cqe(&mut self, env: &mut Env<'_>, opcode: u8, byte_cnt: u64, imm: Option<u32>, solicited: bool) {
        let cqe = Cqe {
            opcode,
            wqe_counter: self.recv_index(),
            byte_cnt: byte_cnt.min(u32::MAX as u64) as u32,
            imm: imm.unwrap_or(0),
            flags_rqpn: recv_flags_rqpn(false, self.peer.map(|p| p.ip()), self.attrs.dest_qpn),
            solicited,
            ..Default::default()
        };
        self.consume_recv();
        self.resp.msn = psn::add(self.resp.msn, 1);
        self.complete(env, false, cqe);
    }

    pub(super) fn recv_send(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        let op = pkt.bth.opcode;
        let data = env.payload(pkt);
        if !length_ok(op, data.len(), self.mtu as usize) {
            return self.nak_fatal(env, NakCode::InvalidRequest, "SEND payload length");
        }
        if op.starts_message() {
            if self.resp.cur.is_some() {
                return self.nak_fatal(env, NakCode::InvalidRequest, "SEND starts inside a message");
            }
            let Some(sges) = self.peek_recv() else { return self.rnr(env) };
            self.resp.cur = Some(super::responder::InMsg::Send { sges, offset: 0 });
        }
        let Some(InMsg::Send { sges, offset }) = &mut self.resp.cur else {
            return self.nak_fatal(env, NakCode::InvalidRequest, "SEND continues no message");
        };
        let at = *offset;
        if at + data.len() as u64 > mkey::capacity(sges) {
            self.resp.cur = None;
            self.complete_recv_error(env, syndrome::LOCAL_LENGTH);
            return self.recv_wqe_failed(env, NakCode::InvalidRequest, "SEND longer than the receive buffer");
        }
        let last = op.ends_message();
        // A receive WQE's keys are the SRQ's PD's when it came from an SRQ (which may
        // have a PD other than the QP's).
        let pd = match self.qp.srq.as_ref().or(self.xrc_srq.as_ref()) {
            Some(s) => &s.pd,
            None => &self.qp.pd,
        };
        let mut r = stage::scatter(env.hca, env.keys, pd, sges, at, data, &mut self.resp.in_stage, env.copies);
        if r.is_ok() && last {
            // Into peer memory before the CQE and the ACK of the last packet.
            r = self.resp.in_stage.flush(env.hca, env.keys, pd);
        }
        if r.is_err() {
            self.resp.cur = None;
            self.complete_recv_error(env, syndrome::LOCAL_PROT);
            return self.recv_wqe_failed(env, NakCode::RemoteOperationalError, "receive buffer key or memory");
        }
        let Some(InMsg::Send { offset, .. }) = &mut self.resp.cur else { return };
        *offset += data.len() as u64;
        let total = *offset;
        step_add(&env.counters.dma_write_bytes, data.len() as u64);
        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = pkt.bth.psn, offset = at, len = data.len(), "send into receive buffer");
        if op.ends_message() {
            self.resp.cur = None;
            let imm = pkt.immdt.map(|i| i.imm);
            let opc = if imm.is_some() { cqe_op::RESP_SEND_IMM } else { cqe_op::RESP_SEND };
            self.recv_cqe(env, opc, total, imm, pkt.bth.solicited);
        }
        self.message_done(pkt.bth.ack_req);
    }

    pub(super) fn recv_write(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        let op = pkt.bth.opcode;
        let data = env.payload(pkt);
        if !length_ok(op, data.len(), self.mtu as usize) {
            return self.nak_fatal(env, NakCode::InvalidRequest, "WRITE payload length");
        }
        let imm = pkt.immdt.map(|i| i.imm);
        if op.starts_message() {
            if self.resp.cur.is_some() {
                return self.nak_fatal(env, NakCode::InvalidRequest, "WRITE starts inside a message");
            }
            if self.attrs.access & ACCESS_REMOTE_WRITE == 0 {
                return self.nak_fatal(env, NakCode::InvalidRequest, "QP lacks REMOTE_WRITE");
            }
            let Some(reth) = pkt.reth else { return self.nak_fatal(env, NakCode::InvalidRequest, "no RETH") };
            let total = reth.dma_len as u64;
            if (op.is_only() && total != data.len() as u64) || (!op.is_only() && total <= self.mtu as u64) {
                return self.nak_fatal(env, NakCode::InvalidRequest, "WRITE length disagrees with RETH");
            }
            if total > 0 {
                if let Err(e) = env.keys.check(env.hca, reth.rkey, &self.qp.pd, reth.va, total, Access::RemoteWrite) {
                    let why = format!("rkey {:#x} va {:#x} len {total}: {e:?}", reth.rkey, reth.va);
                    return self.nak_fatal(env, NakCode::RemoteAccessError, &why);
                }
            }
            if op.is_only() && imm.is_some() && !self.has_recv() {
                return self.rnr(env);
            }
            self.resp.cur = Some(InMsg::Write { rkey: reth.rkey, va: reth.va, remaining: total, total });
        } else if op.ends_message() && imm.is_some() && !self.has_recv() {
            return self.rnr(env);
        }
        let Some(InMsg::Write { rkey, va, remaining, total }) = &mut self.resp.cur else {
            return self.nak_fatal(env, NakCode::InvalidRequest, "WRITE continues no message");
        };
        let n = data.len() as u64;
        if n > *remaining || (op.ends_message() && n != *remaining) {
            return self.nak_fatal(env, NakCode::InvalidRequest, "WRITE longer or shorter than its RETH");
        }
        let (rkey, at, total) = (*rkey, *va, *total);
        if n > 0 && mkey::write_remote(env.hca, env.keys, &self.qp.pd, rkey, at, data, &mut self.resp.in_stage, env.copies).is_err() {
            return self.nak_fatal(env, NakCode::RemoteAccessError, "MR gone during WRITE");
        }
        // Into peer memory before the CQE and the ACK of the last packet.
        if op.ends_message() && self.resp.in_stage.flush(env.hca, env.keys, &self.qp.pd).is_err() {
            return self.nak_fatal(env, NakCode::RemoteAccessError, "WRITE into peer memory failed");
        }
        if let Some(InMsg::Write { va, remaining, .. }) = &mut self.resp.cur {
            *va += n;
            *remaining -= n;
        }
        step_add(&env.counters.dma_write_bytes, n);
        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = pkt.bth.psn, va = %format_args!("{at:#x}"), len = n, rkey = %format_args!("{rkey:#x}"), "write into memory");
        if op.ends_message() {
            self.resp.cur = None;
            if imm.is_some() {
                self.recv_cqe(env, cqe_op::RESP_WR_IMM, total, imm, pkt.bth.solicited);
            } else {
                self.resp.msn = psn::add(self.resp.msn, 1);
            }
        }
        self.message_done(pkt.bth.ack_req);
    }

    /// Checks a READ request (`Ok((va, rkey, len))`) or names the NAK it gets.
    fn check_read(&self, pkt: &RocePacket<'_>, env: &mut Env<'_>) -> Result<(u64, u32, u64), (NakCode, String)> {
        if self.attrs.access & ACCESS_REMOTE_READ == 0 {
            return Err((NakCode::InvalidRequest, "QP lacks REMOTE_READ".into()));
        }
        let Some(reth) = pkt.reth else { return Err((NakCode::InvalidRequest, "no RETH".into())) };
        let len = reth.dma_len as u64;
        if len > 0 {
            if let Err(e) = env.keys.check(env.hca, reth.rkey, &self.qp.pd, reth.va, len, Access::RemoteRead) {
                return Err((NakCode::RemoteAccessError, format!("rkey {:#x} va {:#x} len {len}: {e:?}", reth.rkey, reth.va)));
            }
        }
        Ok((reth.va, reth.rkey, len))
    }

    fn recv_read(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        if self.resp.cur.is_some() {
            return self.nak_fatal(env, NakCode::InvalidRequest, "READ inside a message");
        }
        let (va, rkey, len) = match self.check_read(pkt, env) {
            Ok(v) => v,
            Err((code, why)) => return self.nak_fatal(env, code, &why),
        };
        if self.resp.make_room(self.attrs.max_dest_rd_atomic()).is_err() {
            return self.nak_fatal(env, NakCode::InvalidRequest, "more READs/atomics than max_dest_rd_atomic");
        }
        let n = packets(len, self.mtu);
        self.resp.slots.push_back(RdSlot { psn: pkt.bth.psn, n, served: false, orig: None });
        self.resp.msn = psn::add(self.resp.msn, 1);
        let serial = self.resp.stream_serial();
        let s = ReadStream { psn: pkt.bth.psn, va, rkey, len, k: 0, n, msn: self.resp.msn, serial };
        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = s.psn, va = %format_args!("{va:#x}"), len, rkey = %format_args!("{rkey:#x}"), packets = n, "read request");
        self.resp.push(Out::Read(s));
        self.resp.epsn = psn::add(self.resp.epsn, n);
    }

    fn recv_atomic(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        if self.resp.cur.is_some() {
            return self.nak_fatal(env, NakCode::InvalidRequest, "atomic inside a message");
        }
        if self.attrs.access & ACCESS_REMOTE_ATOMIC == 0 {
            return self.nak_fatal(env, NakCode::InvalidRequest, "QP lacks REMOTE_ATOMIC");
        }
        let Some(a) = pkt.atomic_eth else { return self.nak_fatal(env, NakCode::InvalidRequest, "no AtomicETH") };
        if a.va % 8 != 0 {
            return self.nak_fatal(env, NakCode::InvalidRequest, "misaligned atomic");
        }
        if self.resp.make_room(self.attrs.max_dest_rd_atomic()).is_err() {
            return self.nak_fatal(env, NakCode::InvalidRequest, "more READs/atomics than max_dest_rd_atomic");
        }
        let compare = (pkt.bth.opcode == Opcode::RcCompareSwap).then_some(a.compare);
        let orig = match mkey::atomic_remote(env.hca, env.keys, &self.qp.pd, a.rkey, a.va, compare, a.swap_add) {
            Ok(v) => v,
            Err(e) => return self.nak_fatal(env, NakCode::RemoteAccessError, &format!("atomic rkey {:#x}: {e:?}", a.rkey)),
        };
        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = pkt.bth.psn, va = %format_args!("{:#x}", a.va), orig, "atomic");
        let p = pkt.bth.psn;
        self.resp.slots.push_back(RdSlot { psn: p, n: 1, served: false, orig: Some(orig) });
        self.resp.msn = psn::add(self.resp.msn, 1);
        let msn = self.resp.msn;
        self.resp.push(Out::AtomicAck { psn: p, msn, orig });
        self.resp.epsn = psn::add(self.resp.epsn, 1);
    }

    fn on_duplicate(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        let p = pkt.bth.psn;
        match pkt.bth.opcode {
            Opcode::RcRdmaReadRequest => {
                // Executed again from the (possibly advanced) RETH of the re-request, in
                // the slot of the original: no new resource. One older than every slot is
                // for a READ the requester has finished (a delayed copy): ignored.
                if self.resp.slot(p).is_none() {
                    tracing::debug!(target: "softhca::responder", qpn = self.qp.qpn, psn = p, "duplicate read of no held resource: ignored");
                    return;
                }
                let Ok((va, rkey, len)) = self.check_read(pkt, env) else { return };
                let n = packets(len, self.mtu);
                self.resp.out.retain(|o| match o {
                    Out::Read(s) => psn::diff(psn::add(s.psn, s.k), p) < 0 && psn::diff(psn::add(s.psn, s.n), p) <= 0,
                    _ => true,
                });
                let serial = self.resp.stream_serial();
                let s = ReadStream { psn: p, va, rkey, len, k: 0, n, msn: self.resp.msn, serial };
                tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = p, va = %format_args!("{va:#x}"), len, "duplicate read: executed again");
                self.resp.push(Out::Read(s));
            }
            Opcode::RcCompareSwap | Opcode::RcFetchAdd => {
                // Answered from the saved original value, never executed again.
                match self.resp.slot(p).and_then(|s| s.orig) {
                    Some(orig) => {
                        let msn = self.resp.msn;
                        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = p, orig, "duplicate atomic: saved result");
                        self.resp.push(Out::AtomicAck { psn: p, msn, orig });
                    }
                    None => {
                        tracing::debug!(target: "softhca::responder", qpn = self.qp.qpn, psn = p, "duplicate atomic of no held resource: ignored");
                    }
                }
            }
            _ => self.resp.ack_pending = true,
        }
    }

    /// Sends up to `budget` queued responses.
    pub fn drain_out(&mut self, env: &mut Env<'_>, budget: usize) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts | QpState::Err) || self.resp.out.is_empty() {
            return;
        }
        let Some(peer) = self.peer else {
            self.resp.out.clear();
            return;
        };
        let sport = self.sport();
        let dqpn = self.attrs.dest_qpn;
        let tgt = self.qp.qp_type == crate::objects::QpType::XrcTgt;
        let mut sent = 0;
        while sent < budget {
            let Some(&o) = self.resp.out.front() else { break };
            match o {
                Out::Ack { psn: p, msn, kind } => {
                    let syndrome = match kind {
                        AckKind::Ack => {
                            let credits = if self.qp.rq_wqe_count == 0 {
                                CreditCode::UNLIMITED
                            } else {
                                CreditCode::from_credits(self.rq_posted() as u32)
                            };
                            step_add(&env.counters.acks_sent, 1);
                            Syndrome::Ack { credits }
                        }
                        AckKind::Rnr(timer) => Syndrome::RnrNak { timer },
                        AckKind::Nak(code) => Syndrome::Nak(code),
                    };
                    let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcAcknowledge, dqpn, p), &[]);
                    xrc_response(&mut pkt, tgt);
                    pkt.aeth = Some(AethRepr { syndrome, msn: msn & psn::MASK });
                    tracing::trace!(target: "softhca::ack", qpn = self.qp.qpn, psn = p, ?syndrome, "ack sent");
                    env.tx.send(&pkt, peer, sport, env.counters);
                    self.resp.out.pop_front();
                }
                Out::AtomicAck { psn: p, msn, orig } => {
                    let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcAtomicAcknowledge, dqpn, p), &[]);
                    xrc_response(&mut pkt, tgt);
                    pkt.aeth = Some(AethRepr { syndrome: Syndrome::ACK_UNLIMITED, msn: msn & psn::MASK });
                    pkt.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: orig });
                    env.tx.send(&pkt, peer, sport, env.counters);
                    self.resp.out.pop_front();
                    self.resp.served(p);
                }
                Out::Read(s) => {
                    if self.state == QpState::Err {
                        self.resp.out.pop_front();
                        continue;
                    }
                    let mtu = self.mtu as u64;
                    let off = s.k as u64 * mtu;
                    let len = s.len.saturating_sub(off).min(mtu) as usize;
                    let loc = if len == 0 {
                        Loc::Host(0)
                    } else {
                        match mkey::locate_remote_read(env.hca, env.keys, &self.qp.pd, s.rkey, s.va + off, len) {
                            Ok(a) => a,
                            Err(_) => {
                                // The MR went away under an accepted READ: stop answering it.
                                self.resp.out.pop_front();
                                continue;
                            }
                        }
                    };
                    use Opcode::*;
                    let opcode = match (s.n == 1, s.k == 0, s.k + 1 == s.n) {
                        (true, _, _) => RcRdmaReadResponseOnly,
                        (false, true, _) => RcRdmaReadResponseFirst,
                        (false, false, true) => RcRdmaReadResponseLast,
                        (false, false, false) => RcRdmaReadResponseMiddle,
                    };
                    let p = psn::add(s.psn, s.k);
                    let mut pkt = RocePacket::new(BthRepr::new(opcode, dqpn, p), &[]);
                    xrc_response(&mut pkt, tgt);
                    if opcode.has_aeth() {
                        pkt.aeth = Some(AethRepr { syndrome: Syndrome::ACK_UNLIMITED, msn: s.msn & psn::MASK });
                    }
                    match loc {
                        _ if len == 0 => env.tx.send(&pkt, peer, sport, env.counters),
                        // SAFETY: `locate_remote_read` checked the range inside a live MR of
                        // this QP's PD under the engine lock, which the engine step holds
                        // until its flush has sent the packet.
                        // A same-host peer may copy it later when it is ordinary memory.
                        Loc::Host(addr) => unsafe { env.tx.send_mem(&pkt, MemRef { addr, len, app: env.keys.by_ref(s.rkey) }, peer, sport, env.counters) },
                        Loc::Peer(_) => {
                            // From the stream's staged segment, read once for its packets,
                            // sent in place like host memory.
                            let (hca, keys, pd) = (env.hca, &mut *env.keys, &self.qp.pd);
                            let got = self.resp.read_stage.bytes(env.step, (s.serial, 0), off, len, s.len,
                                || mkey::peer_memory_of(hca, s.rkey),
                                |start, buf| mkey::read_remote(hca, keys, pd, s.rkey, s.va + start, buf));
                            match got {
                                // SAFETY: a range of the QP's staging buffer, which is
                                // neither refilled in this step (`OutStage`) nor dropped
                                // before its flush (the QP context goes only under the
                                // engine lock, which the step holds).
                                Ok(Some(m)) => unsafe { env.tx.send_mem(&pkt, m, peer, sport, env.counters) },
                                // The buffer holds this step's packets of another segment.
                                Ok(None) => break,
                                Err(e) => {
                                    self.resp.out.pop_front();
                                    self.nak_fatal_at(env, p, NakCode::RemoteAccessError, &format!("READ from peer memory: {e:?}"));
                                    continue;
                                }
                            }
                        }
                    }
                    step_add(&env.counters.dma_read_bytes, len as u64);
                    if let Some(Out::Read(f)) = self.resp.out.front_mut() {
                        f.k += 1;
                        if f.k >= f.n {
                            let (first, serial) = (f.psn, f.serial);
                            self.resp.out.pop_front();
                            self.resp.served(first);
                            self.resp.read_stage.forget((serial, 0));
                        }
                    }
                }
            }
            sent += 1;
            env.work = true;
        }
    }
}

/// An XRC target's responses use the XRC opcodes (no XRCETH: IBA 9.3.6).
fn xrc_response(pkt: &mut RocePacket<'_>, tgt: bool) {
    if tgt {
        pkt.bth.opcode = pkt.bth.opcode.to_xrc().unwrap_or(pkt.bth.opcode);
    }
}
