//! The device's context for one QP: what the kernel half's modify tells it, the send and
//! receive queue positions it keeps, and the move to ERR with its flush.
//!
//! States as the hardware acts on them: RESET and INIT do nothing; RTR answers requests
//! (responder); RTS also fetches and executes send WQEs (requester); ERR completes every
//! posted WQE, now and later, with a flush error. The device moves a QP to ERR by itself
//! on fatal errors (it writes `Qp::attrs.state`, like a QP error event from firmware).

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Instant;

use crate::config::ROCE_V2_PORT;
use crate::hca::Hca;
use crate::objects::{AddressVector, Qp, QpAttrs, QpState};

use super::counters::{step_add, Counters};
use super::link::copy::{Copies, Payload, RemoteRef};
use crate::wire::RocePacket;
use super::cqe::{opcode as cqe_op, syndrome, CqCtx, Cqe};
use super::mem;
use super::mkey::KeyCache;
use super::requester::Requester;
use super::responder::Responder;
use super::tx::Tx;
use super::wqe::{Ctrl, Sge};
use std::collections::HashMap;

/// Everything one engine step needs besides the QP itself.
pub(crate) struct Env<'a> {
    pub hca: &'a Hca,
    pub cqs: &'a mut HashMap<u32, CqCtx>,
    pub tx: &'a mut Tx,
    pub counters: &'a Counters,
    /// Recently resolved memory keys (every key check of the step goes through it).
    pub keys: &'a mut KeyCache,
    pub now: Instant,
    /// This step's number (from 1): packets queued in it may refer to buffers that must
    /// not change before its flush (see [`super::stage::OutStage`]).
    pub step: u64,
    /// Payload staging buffer.
    pub scratch: &'a mut Vec<u8>,
    /// Set by anything that did work (the engine then keeps spinning).
    pub work: bool,
    /// Copies from same-host senders queued by this step ([`super::link::copy`]).
    pub copies: &'a mut Copies,
    /// The packet being handled came from a same-host peer with its payload left in the
    /// sender's memory: here it is (its `payload` field is empty).
    pub remote: Option<RemoteRef>,
}

impl Env<'_> {
    /// The payload of `pkt`, the packet being handled: its bytes, or where they are.
    pub fn payload<'p>(&self, pkt: &RocePacket<'p>) -> Payload<'p> {
        match self.remote {
            Some(r) => Payload::Remote(r),
            None => Payload::Bytes(pkt.payload),
        }
    }
}

/// Sets `v` to `n` bytes of unspecified content (the caller overwrites all of them),
/// without the byte-by-byte zeroing `resize` costs in debug builds when shrinking and
/// regrowing a reused buffer.
pub fn staging(v: &mut Vec<u8>, n: usize) -> &mut [u8] {
    if v.len() < n {
        v.resize(n, 0);
    }
    &mut v[..n]
}

impl Env<'_> {
    /// The device clock for CQE timestamps.
    pub fn timestamp(&self) -> u64 {
        self.hca.clock_cycles()
    }
}

/// The device's context for one QP.
#[derive(Debug)]
pub(crate) struct QpCtx {
    pub qp: Arc<Qp>,
    /// The attributes as of the last modify.
    pub attrs: QpAttrs,
    /// The state the device acts on (the kernel's, or ERR after a device-detected error).
    pub state: QpState,
    /// Where the remote QP lives (from the address vector's GID).
    pub peer: Option<SocketAddr>,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// SQ producer counter last read from the doorbell record, and the consumer counter
    /// (next WQEBB to fetch), both in WQEBBs modulo 2^16.
    pub sq_pi: u16,
    pub sq_ci: u16,
    /// RQ consumer counter: receive WQEs completed (modulo 2^16).
    pub rq_ci: u16,
    /// On an SRQ: the WQE taken for the message in progress (its SRQ index and scatter
    /// list), held until the message completes (see `super::srq`).
    pub srq_wqe: Option<(u16, Vec<Sge>)>,
    /// An XRC target: the XRC SRQ the message in progress (or the last one) is for.
    pub xrc_srq: Option<Arc<crate::objects::Srq>>,
    /// On an SRQ: IBV_EVENT_QP_LAST_WQE_REACHED was raised for this stay in ERR.
    pub last_wqe_reached: bool,
    pub req: Requester,
    pub resp: Responder,
    /// What `Qp::dev` last showed.
    pub published: (u16, u16),
}

/// The UDP destination a GID names literally: an IPv4-mapped GID is that IPv4 address,
/// any other GID that IPv6 address. A link-local GID needs the local link to resolve (see
/// [`crate::Config::peer_addr`], which the kernel half applies when the address vector
/// is set, and [`peer_of_av`]).
pub fn peer_of(dgid: &[u8; 16]) -> Option<SocketAddr> {
    let v6 = std::net::Ipv6Addr::from(*dgid);
    let ip = match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None if v6.is_unspecified() => return None,
        None => IpAddr::V6(v6),
    };
    Some(SocketAddr::new(ip, ROCE_V2_PORT))
}

/// Where a connected QP's packets go: the host its address vector resolved to when it was
/// set. A GID that names no softhca host (a link-local GID of a foreign MAC) keeps its
/// literal address, which no datagram reaches (the send fails and is counted in
/// `tx_errors`): like packets to a MAC nobody has, requests are retried until the QP's
/// retry count runs out and the WQE completes with RETRY_EXC_ERR.
pub fn peer_of_av(av: &AddressVector) -> Option<SocketAddr> {
    destination(av.dest_ip, &av.dgid)
}

/// The RoCEv2 port of the host that address resolution found for `dgid` (`resolved`),
/// or else of the address the GID names literally ([`peer_of`]).
pub fn destination(resolved: Option<std::net::IpAddr>, dgid: &[u8; 16]) -> Option<SocketAddr> {
    match resolved {
        Some(ip) => Some(SocketAddr::new(ip, ROCE_V2_PORT)),
        None => peer_of(dgid),
    }
}

impl QpCtx {
    pub fn new(qp: Arc<Qp>) -> QpCtx {
        let attrs = qp.attrs();
        QpCtx {
            qp,
            attrs,
            state: attrs.state,
            peer: None,
            mtu: 256,
            sq_pi: 0,
            sq_ci: 0,
            rq_ci: 0,
            srq_wqe: None,
            xrc_srq: None,
            last_wqe_reached: false,
            req: Requester::default(),
            resp: Responder::default(),
            published: (0, 0),
        }
    }

    /// Mirrors the consumer counters into `Qp::dev` when they changed (for inspection).
    pub fn publish(&mut self) {
        let now = (self.sq_ci, self.rq_ci);
        if now != self.published {
            self.published = now;
            let mut d = self.qp.dev.lock().unwrap_or_else(|p| p.into_inner());
            d.sq_consumer = now.0 as u32;
            d.rq_consumer = now.1 as u32;
        }
    }

    pub fn qpn(&self) -> u32 {
        self.qp.qpn
    }

    /// The SRQ receives come from: the QP's, or an XRC target's current XRC SRQ.
    pub fn srq(&self) -> Option<&Arc<crate::objects::Srq>> {
        self.qp.srq.as_ref().or(self.xrc_srq.as_ref())
    }

    /// The UDP source port of this connected QP's packets, requests and responses alike
    /// (`ads.udp_sport`; the transmitter falls back to 4791 for 0 or a port it cannot
    /// bind, see `super::sport`).
    pub fn sport(&self) -> u16 {
        self.attrs.av.udp_sport
    }

    /// Applies a MODIFY_QP the kernel half finished.
    pub fn modified(&mut self, attrs: QpAttrs, from: QpState) {
        let to = attrs.state;
        self.attrs = attrs;
        self.mtu = attrs.mtu_bytes().unwrap_or(256);
        self.peer = peer_of_av(&attrs.av);
        if to == QpState::Reset || (from == QpState::Reset && to == QpState::Init) {
            // Back to the start: libmlx5 zeroes the doorbell record after RESET.
            self.sq_pi = 0;
            self.sq_ci = 0;
            self.rq_ci = 0;
            self.srq_wqe = None;
            self.last_wqe_reached = false;
            self.req = Requester::default();
            self.resp = Responder::default();
        } else if to == QpState::Rtr && from == QpState::Init {
            self.resp = Responder::default();
            self.resp.epsn = attrs.rq_psn & super::psn::MASK;
        } else if to == QpState::Rts && from == QpState::Rtr {
            self.req.start(attrs.sq_psn, &attrs);
        }
        if to == QpState::Rts {
            self.req.retune(&attrs);
        }
        self.state = to;
        tracing::debug!(target: "softhca::qp", qpn = self.qpn(), ?from, ?to, mtu = self.mtu, peer = ?self.peer,
                        sq_psn = attrs.sq_psn, rq_psn = attrs.rq_psn, "modify");
    }

    /// Reads the SQ producer counter from the doorbell record (word 1).
    pub fn load_sq_pi(&self) -> u16 {
        // SAFETY: the doorbell record was checked mapped at CREATE_QP and stays until the
        // destroy hook, which waits for the engine lock held by every caller.
        unsafe { mem::load_be32_acquire(self.qp.db_addr + 4 * prm::dbrec::SND_DBR as u64) as u16 }
    }

    /// Reads the RQ producer counter (word 0).
    pub fn load_rq_pi(&self) -> u16 {
        // SAFETY: as in `load_sq_pi`.
        unsafe { mem::load_be32_acquire(self.qp.db_addr + 4 * prm::dbrec::RCV_DBR as u64) as u16 }
    }

    /// Bytes of the SQ ring.
    fn sq_bytes(&self) -> u64 {
        self.qp.sq_wqe_count as u64 * super::wqe::WQEBB as u64
    }

    /// Copies `out.len()` bytes of the SQ starting at WQEBB counter `at`, wrapping.
    pub fn read_sq(&self, at: u16, out: &mut [u8]) {
        let ring = self.sq_bytes();
        if ring == 0 {
            out.fill(0);
            return;
        }
        // A raw packet QP's SQ is a buffer of its own.
        let base = if self.qp.sq_buf_addr != 0 { self.qp.sq_buf_addr } else { self.qp.buf_addr + self.qp.sq_offset };
        let mut off = (at as u64 % self.qp.sq_wqe_count as u64) * super::wqe::WQEBB as u64;
        let mut done = 0;
        while done < out.len() {
            let n = ((ring - off) as usize).min(out.len() - done);
            // SAFETY: [base + off, base + off + n) is inside the SQ of the QP buffer given
            // at CREATE_QP (off < ring, off + n <= ring), live until the destroy hook.
            // The WQE was published by the producer counter read with acquire.
            unsafe { mem::read(base + off, &mut out[done..done + n]) };
            done += n;
            off = 0;
        }
    }

    /// The control segment of the WQE at WQEBB counter `at`.
    pub fn read_ctrl(&self, at: u16) -> Ctrl {
        let mut b = [0u8; 16];
        self.read_sq(at, &mut b);
        Ctrl::parse(&b)
    }

    /// Receive WQEs posted and not yet consumed.
    pub fn rq_posted(&self) -> u16 {
        if self.qp.rq_wqe_count == 0 {
            return 0;
        }
        self.load_rq_pi().wrapping_sub(self.rq_ci)
    }

    /// The scatter list of the receive WQE the next receive completion is for: the one at
    /// the RQ consumer counter, if one is posted; on an SRQ the one taken for the message
    /// in progress, or else the SRQ's next (taken now).
    pub fn peek_recv(&mut self) -> Option<Vec<Sge>> {
        if !self.has_recv() {
            return None;
        }
        if let Some(w) = &self.srq_wqe {
            return Some(w.1.clone());
        }
        let q = &self.qp;
        let size = 1usize << q.rq_wqe_shift;
        let slot = q.buf_addr + ((self.rq_ci as u64 & (q.rq_wqe_count as u64 - 1)) << q.rq_wqe_shift);
        // Receive WQEs are a few data segments: read into the stack when they fit.
        let mut small = [0u8; 512];
        let mut big = Vec::new();
        let b: &mut [u8] = if size <= small.len() {
            &mut small[..size]
        } else {
            big.resize(size, 0);
            &mut big
        };
        // SAFETY: the slot lies inside the RQ at the start of the QP buffer given at
        // CREATE_QP; the WQE was published by the RQ counter read with acquire.
        unsafe { mem::read(slot, b) };
        let max = (q.rq_max_gs as usize).max(1).min(size / 16);
        Some(super::wqe::parse_recv(b, max))
    }

    /// Whether a receive WQE is there for the next receive completion ([`QpCtx::peek_recv`]
    /// without reading its scatter list: a WRITE with immediate only consumes one). On an
    /// SRQ the WQE is taken for the message now, as `peek_recv` does.
    pub fn has_recv(&mut self) -> bool {
        if let Some(srq) = self.srq() {
            if self.srq_wqe.is_none() {
                match super::srq::take(srq) {
                    Some(w) => self.srq_wqe = Some(w),
                    None => return false,
                }
            }
            return true;
        }
        self.rq_posted() > 0
    }

    /// Writes a CQE to the QP's send (`send` true) or receive CQ. A full CQ is an overrun:
    /// the CQ is put in error (one CQ_ERR async event) and the QP moved to ERR.
    pub fn complete(&mut self, env: &mut Env<'_>, send: bool, mut cqe: Cqe) {
        // The data a completion reports must be in memory first.
        env.copies.flush();
        let cq = if send { &self.qp.send_cq } else { &self.qp.recv_cq };
        // An XRC SRQ's receives complete on its own CQ with its own user index.
        // With CQE version 0 (no user index: the default 0xffffff) the field is the SRQ
        // number, which libmlx5 then looks the SRQ up by (the target QP is in no table).
        let xrc = if send { None } else { self.srq().and_then(|s| s.xrc.map(|x| (x, s.srqn))) };
        let Some(cqn) = xrc.map(|x| x.0.cqn).or(cq.as_ref().map(|c| c.cqn)) else { return };
        cqe.qpn = self.qpn();
        cqe.uidx = match xrc {
            Some((x, srqn)) if x.user_index == 0xff_ffff => srqn,
            Some((x, _)) => x.user_index,
            None => self.qp.uidx,
        };
        if cqe.timestamp == 0 && !cqe.is_error() {
            cqe.timestamp = env.timestamp();
        }
        let Some(cq) = env.cqs.get_mut(&cqn) else { return };
        let was_overrun = cq.overrun;
        match cq.write(&cqe) {
            Ok(_) => {
                step_add(&env.counters.cqes, 1);
                if cqe.is_error() {
                    env.counters.error_cqes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                env.work = true;
            }
            Err(_) => {
                env.counters.cq_overruns.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if !was_overrun {
                    tracing::warn!(target: "softhca::cqe", cqn, qpn = self.qpn(), "CQ overrun: CQ in error");
                    super::events::cq_event(&cq.cq, uverbs::sys::verbs::event::CQ_ERR);
                }
                if self.state != QpState::Err {
                    self.enter_error(env, Some(uverbs::sys::verbs::event::QP_FATAL));
                }
            }
        }
    }

    /// A flush or error CQE for the send WQE with this index and opcode.
    pub fn complete_send_error(&mut self, env: &mut Env<'_>, index: u16, wqe_opcode: u8, synd: u8) {
        let cqe = Cqe { opcode: cqe_op::REQ_ERR, wqe_opcode, wqe_counter: index, syndrome: synd, ..Default::default() };
        tracing::debug!(target: "softhca::cqe", qpn = self.qpn(), index, wqe_opcode, syndrome = synd, "send error completion");
        self.complete(env, true, cqe);
    }

    /// The `wqe_counter` of the receive WQE in use: the RQ consumer counter, or on an
    /// SRQ the taken WQE's index.
    pub fn recv_index(&self) -> u16 {
        match &self.srq_wqe {
            Some((index, _)) => *index,
            None => self.rq_ci,
        }
    }

    /// Consumes the receive WQE in use (after its CQE).
    pub fn consume_recv(&mut self) {
        if self.srq().is_some() {
            self.srq_wqe = None;
        } else {
            self.rq_ci = self.rq_ci.wrapping_add(1);
        }
    }

    /// A flush or error CQE for the receive WQE in use, consuming it (on an SRQ, nothing
    /// when no WQE is taken: the SRQ's others are no QP's to flush).
    pub fn complete_recv_error(&mut self, env: &mut Env<'_>, synd: u8) {
        if self.srq().is_some() && self.srq_wqe.is_none() {
            return;
        }
        let cqe = Cqe { opcode: cqe_op::RESP_ERR, wqe_counter: self.recv_index(), syndrome: synd, ..Default::default() };
        self.consume_recv();
        self.complete(env, false, cqe);
    }

    /// Moves the QP to ERR (device-detected): optional async event, then flush.
    pub fn enter_error(&mut self, env: &mut Env<'_>, event: Option<u32>) {
        if self.state == QpState::Err {
            return;
        }
        tracing::debug!(target: "softhca::qp", qpn = self.qpn(), from = ?self.state, ?event, "device moves QP to ERR");
        self.state = QpState::Err;
        {
            let mut a = self.qp.attrs.lock().unwrap_or_else(|p| p.into_inner());
            a.state = QpState::Err;
            self.attrs.state = QpState::Err;
        }
        if let Some(ev) = event {
            super::events::qp_event(&self.qp, ev);
        }
        self.resp.on_error();
        self.flush(env);
    }

    /// In ERR: completes every outstanding and newly posted WQE with WR_FLUSH_ERR.
    pub fn flush(&mut self, env: &mut Env<'_>) {
        if self.state != QpState::Err {
            return;
        }
        // What was staged for peer memory is written, not dropped, whether the device or
        // the application moved the QP to ERR: some of it may have been acknowledged
        // (see `super::stage`). A failure changes nothing now.
        let _ = self.resp.in_stage.flush(env.hca, env.keys, &self.qp.pd);
        let _ = self.req.in_stage.flush(env.hca, env.keys, &self.qp.pd);
        let pending: VecDeque<_> = std::mem::take(&mut self.req.wqes);
        self.req.tx_idx = 0;
        self.req.tx_pkt = 0;
        self.req.timer = None;
        for w in pending {
            self.complete_send_error(env, w.index, w.opcode, syndrome::WR_FLUSH);
        }
        if self.qp.sq_wqe_count != 0 {
            self.sq_pi = self.load_sq_pi();
            let mut guard = self.qp.sq_wqe_count;
            while self.sq_ci != self.sq_pi && guard > 0 {
                let c = self.read_ctrl(self.sq_ci);
                let n = c.wqebbs().min(self.sq_pi.wrapping_sub(self.sq_ci));
                let index = self.sq_ci;
                self.sq_ci = self.sq_ci.wrapping_add(n);
                guard = guard.saturating_sub(n as u32);
                self.complete_send_error(env, index, c.opcode, syndrome::WR_FLUSH);
            }
            if guard == 0 {
                self.sq_ci = self.sq_pi;
            }
        }
        if self.srq_wqe.is_some() {
            self.complete_recv_error(env, syndrome::WR_FLUSH);
        }
        // IB spec (o11-5.2.6, "Last WQE Reached"): a QP on an SRQ in ERR will take no
        // more of the SRQ's WQEs once the one it held is completed; the event tells
        // software it may now destroy the QP without losing receives.
        if self.qp.srq.is_some() && !self.last_wqe_reached {
            self.last_wqe_reached = true;
            super::events::qp_event(&self.qp, uverbs::sys::verbs::event::QP_LAST_WQE_REACHED);
        }
        let mut n = self.rq_posted().min(self.qp.rq_wqe_count as u16);
        while n > 0 {
            self.complete_recv_error(env, syndrome::WR_FLUSH);
            n -= 1;
        }
    }

    /// Timers and backoff: the earliest moment this QP needs the engine again.
    pub fn deadline(&self) -> Option<Instant> {
        [self.req.timer, self.req.rnr_until, self.req.probe].into_iter().flatten().min()
    }
}
