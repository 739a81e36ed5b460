//! The requester: fetching send WQEs, cutting them into RoCEv2 packets, and turning
//! ACKs, NAKs and responses into completions.
//!
//! Each fetched WQE gets its PSN range at fetch time (`npsn` PSNs: one per packet of a
//! SEND/WRITE, one per response packet of a READ, one for an atomic), so any PSN maps
//! back to a WQE and a packet. A transmit cursor (`tx_idx`, `tx_pkt`) walks the list;
//! go-back-N retransmission moves it back. The window is counted in PSNs between the
//! oldest unacknowledged PSN (`una`) and the cursor; it grows with ACKs and halves on loss
//! (a NAK or timeout), so heavy loss does not make every round trip resend a huge window.
//!
//! Completions are written in WQE order: a WQE is retired when it and every WQE before it
//! are done; only signaled ones (CQ_UPDATE or `sq_sig_all`) produce a CQE, and the
//! consumer's wqe_counter jump covers the unsignaled ones before it. A WQE that fails
//! (locally at fetch, by a NAK, or by retries running out) reports its error CQE when it
//! reaches the head; then the QP goes to ERR and everything after it is flushed.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use crate::hca::Access;
use crate::objects::{QpAttrs, QpState, QpType};
use crate::wire::{AethRepr, AtomicEthRepr, BthRepr, ImmDtRepr, NakCode, Opcode, RethRepr, RnrTimer, RocePacket, Syndrome};

use super::counters::step_add;
use super::cqe::{opcode as cqe_op, syndrome, Cqe};
use super::mkey;
use super::psn;
use super::qp::{staging, Env, QpCtx};
use super::stage::{self, InStage, OutStage};
use super::timers;
use super::tx::MemRef;
use super::wqe::{self, Data, Op, WqeError, MAX_WQE_BYTES};

/// Packets one QP may send per engine step (fairness between QPs).
pub const BUDGET: usize = 32;
const CWND_INIT: u32 = 64;
const CWND_MIN: u32 = 2;
const CWND_MAX: u32 = 256;
/// AckReq on every this many packets of a long message (as well as on its last).
const ACK_EVERY: u32 = 16;
/// Tail probes per silence, and the shortest probe delay.
const PROBES: u8 = 4;
const PROBE_MIN: Duration = Duration::from_micros(200);

/// A send WQE the device has fetched and not retired.
#[derive(Debug, Clone)]
pub struct SqWqe {
    /// The WQE index (SQ counter at its first WQEBB): the CQE's wqe_counter.
    pub index: u16,
    pub wqebbs: u16,
    /// The WQE opcode, echoed in the CQE.
    pub opcode: u8,
    pub op: Op,
    pub data: Data,
    pub len: u64,
    pub signaled: bool,
    pub solicited: bool,
    pub fence: bool,
    /// Some gather/scatter entry is in peer memory: the data moves through the QP's
    /// staging buffers ([`super::stage`]) instead of packet by packet.
    pub peer: bool,
    /// Fetch order on this QP (never repeats, unlike the index and PSN): names the WQE's
    /// staged payload.
    pub serial: u64,
    pub first_psn: u32,
    /// PSNs the WQE uses (0 for NOPs and WQEs that failed at fetch).
    pub npsn: u32,
    /// PSNs acknowledged (SEND/WRITE) or responses received (READ).
    pub acked: u32,
    pub done: bool,
    /// The error syndrome this WQE completes with when it reaches the head.
    pub error: Option<u8>,
    /// UD sends: where to.
    pub ud: Option<wqe::UdAv>,
    /// An XRC initiator's WQE: the remote XRC SRQ its XRC segment names (the XRCETH of
    /// every request packet).
    pub xrc_srqn: Option<u32>,
}

/// The requester half of a QP.
#[derive(Debug, Default)]
pub struct Requester {
    pub wqes: VecDeque<SqWqe>,
    /// The PSN the next fetched WQE starts at.
    pub next_psn: u32,
    /// Transmit cursor: WQE position in `wqes` and packet within it.
    pub tx_idx: usize,
    pub tx_pkt: u32,
    /// One past the highest PSN ever sent.
    pub snd_max: u32,
    /// Local ACK timer deadline.
    pub timer: Option<Instant>,
    pub timeout: Option<Duration>,
    pub retry_cnt: u8,
    pub retry_left: u8,
    pub rnr_retry: u8,
    pub rnr_left: u8,
    /// Paused by an RNR NAK until then.
    pub rnr_until: Option<Instant>,
    pub cwnd: u32,
    /// A gap in responses already caused a rewind (cleared on progress).
    pub gap_rewound: bool,
    /// Smoothed round-trip time, from ACKs of packets sent once.
    pub srtt: Option<Duration>,
    /// The packet being timed: its PSN and when it left.
    pub rtt_sample: Option<(u32, Instant)>,
    /// Tail probe: when the last request packet is sent again if nothing was heard.
    pub probe: Option<Instant>,
    pub probes_left: u8,
    /// SEND/WRITE payload read from peer memory, a segment at a time.
    pub out_stage: OutStage,
    /// The next WQE's `serial`.
    pub next_serial: u64,
    /// READ responses on their way into peer memory.
    pub in_stage: InStage,
}

impl Requester {
    /// RTR -> RTS: the first PSN.
    pub fn start(&mut self, sq_psn: u32, attrs: &QpAttrs) {
        self.next_psn = sq_psn & psn::MASK;
        self.snd_max = self.next_psn;
        self.retune(attrs);
    }

    /// Timeout and retry counts from the attributes.
    pub fn retune(&mut self, attrs: &QpAttrs) {
        self.timeout = timers::ack_timeout(attrs.timeout);
        self.retry_cnt = attrs.retry_cnt;
        self.retry_left = attrs.retry_cnt;
        self.rnr_retry = attrs.rnr_retry;
        self.rnr_left = attrs.rnr_retry;
        if self.cwnd == 0 {
            self.cwnd = CWND_INIT;
        }
    }

    /// How long after the last news from the responder the tail probe goes out: a few
    /// round trips (1 ms before the first sample), never more than half the ACK timeout.
    pub fn probe_delay(&self) -> Duration {
        let d = self.srtt.map_or(Duration::from_millis(1), |r| (r * 3).max(PROBE_MIN));
        match self.timeout {
            Some(t) => d.min(t / 2),
            None => d,
        }
    }

    /// (Re)starts the tail probe after sending or progress.
    fn arm_probe(&mut self, now: Instant) {
        self.probe = Some(now + self.probe_delay());
        self.probes_left = PROBES;
    }

    /// Moves the timers `by` later (the engine was not scheduled for that long).
    pub fn postpone(&mut self, by: Duration) {
        if let Some(t) = self.probe.as_mut() {
            *t += by;
        }
        if let Some(t) = self.timer.as_mut() {
            *t += by;
        }
        if let Some(t) = self.rnr_until.as_mut() {
            *t += by;
        }
    }

    /// The oldest PSN not yet acknowledged.
    pub fn una(&self) -> u32 {
        for w in &self.wqes {
            if w.npsn > 0 && !w.done {
                return psn::add(w.first_psn, w.acked);
            }
        }
        self.next_psn
    }

    /// The PSN the cursor sends next.
    pub fn cursor_psn(&self) -> u32 {
        match self.wqes.get(self.tx_idx) {
            Some(w) => psn::add(w.first_psn, self.tx_pkt),
            None => self.next_psn,
        }
    }

    /// Moves the cursor back (or forward) to PSN `p`, never before the oldest
    /// unacknowledged PSN.
    pub fn rewind(&mut self, p: u32) {
        let una = self.una();
        let p = if psn::diff(p, una) < 0 { una } else { p };
        for (i, w) in self.wqes.iter().enumerate() {
            if w.npsn == 0 || w.done {
                continue;
            }
            let d = psn::diff(p, w.first_psn);
            if d < 0 {
                self.tx_idx = i;
                self.tx_pkt = 0;
                return;
            }
            if (d as u32) < w.npsn {
                self.tx_idx = i;
                self.tx_pkt = d as u32;
                return;
            }
        }
        self.tx_idx = self.wqes.len();
        self.tx_pkt = 0;
    }

    /// Marks WQE `i` failed and keeps the cursor from passing it.
    fn fail(&mut self, i: usize, synd: u8) {
        if let Some(w) = self.wqes.get_mut(i) {
            w.error.get_or_insert(synd);
            if self.tx_idx > i {
                self.tx_idx = i;
                self.tx_pkt = 0;
            }
        }
    }

    /// The WQE whose PSN range holds `p`.
    fn find(&self, p: u32) -> Option<usize> {
        self.wqes.iter().position(|w| {
            let d = psn::diff(p, w.first_psn);
            w.npsn > 0 && d >= 0 && (d as u32) < w.npsn
        })
    }

    /// The first READ/atomic not yet done.
    fn first_pending_read(&self) -> Option<usize> {
        self.wqes.iter().position(|w| !w.done && w.npsn > 0 && w.op.is_read_or_atomic())
    }
}

/// Packets of a message of `len` bytes at path MTU `mtu` (at least one).
pub fn packets(len: u64, mtu: u32) -> u32 {
    (len.div_ceil(mtu as u64)).max(1).min(psn::MASK as u64 / 2) as u32
}

fn send_opcode(n: u32, k: u32, imm: bool, write: bool) -> Opcode {
    use Opcode::*;
    let only = n == 1;
    let last = k + 1 == n;
    match (write, only, k == 0, last, imm) {
        (false, true, _, _, false) => RcSendOnly,
        (false, true, _, _, true) => RcSendOnlyWithImm,
        (false, false, true, _, _) => RcSendFirst,
        (false, false, false, true, false) => RcSendLast,
        (false, false, false, true, true) => RcSendLastWithImm,
        (false, false, false, false, _) => RcSendMiddle,
        (true, true, _, _, false) => RcRdmaWriteOnly,
        (true, true, _, _, true) => RcRdmaWriteOnlyWithImm,
        (true, false, true, _, _) => RcRdmaWriteFirst,
        (true, false, false, true, false) => RcRdmaWriteLast,
        (true, false, false, true, true) => RcRdmaWriteLastWithImm,
        (true, false, false, false, _) => RcRdmaWriteMiddle,
    }
}

impl QpCtx {
    // ---- fetching ---------------------------------------------------------------------

    /// Reads the SQ doorbell record and fetches every WQE it publishes.
    pub fn fetch_sq(&mut self, env: &mut Env<'_>) {
        if self.qp.sq_wqe_count == 0 {
            return;
        }
        let pi = self.load_sq_pi();
        if pi != self.sq_pi {
            tracing::trace!(target: "softhca::doorbell", qpn = self.qpn(), pi, ci = self.sq_ci, "sq doorbell");
            env.counters.sq_doorbells.fetch_add(1, Relaxed);
            self.sq_pi = pi;
            env.work = true;
        }
        while self.sq_ci != self.sq_pi {
            let avail = self.sq_pi.wrapping_sub(self.sq_ci);
            let w = self.fetch_one(env, avail);
            self.sq_ci = self.sq_ci.wrapping_add(w.wqebbs);
            self.req.next_psn = psn::add(self.req.next_psn, w.npsn);
            self.req.wqes.push_back(w);
        }
        self.retire(env);
    }

    /// Fetches and decodes the WQE at the SQ consumer counter; `avail` WQEBBs are published.
    fn fetch_one(&mut self, env: &mut Env<'_>, avail: u16) -> SqWqe {
        let index = self.sq_ci;
        let ctrl = self.read_ctrl(index);
        let serial = self.req.next_serial;
        self.req.next_serial += 1;
        env.counters.wqes_fetched.fetch_add(1, Relaxed);
        let mut w = SqWqe {
            index,
            wqebbs: ctrl.wqebbs(),
            opcode: ctrl.opcode,
            op: Op::Nop,
            data: Data::Sgl(Vec::new()),
            len: 0,
            signaled: ctrl.signaled() || self.qp.sq_sig_all,
            solicited: ctrl.solicited(),
            fence: ctrl.fence(),
            peer: false,
            serial,
            first_psn: self.req.next_psn,
            npsn: 0,
            acked: 0,
            done: false,
            error: None,
            ud: None,
            xrc_srqn: None,
        };
        let bad = |w: &mut SqWqe, s: u8, why: &str| {
            tracing::debug!(target: "softhca::wqe", qpn = self.qp.qpn, index, opcode = ctrl.opcode, ds = ctrl.ds, why, "bad WQE");
            w.error = Some(s);
        };
        if avail as u32 > self.qp.sq_wqe_count || w.wqebbs > avail {
            // The doorbell publishes less than the WQE claims, or more than the ring holds.
            w.wqebbs = avail.min(self.qp.sq_wqe_count as u16).max(1);
            bad(&mut w, syndrome::LOCAL_QP_OP, "WQE size beyond the doorbell");
            return w;
        }
        if ctrl.wqe_index != index {
            // A ConnectX checks that the control segment it fetched carries the index it
            // expected there (vendor syndrome 0x68, "bad control WQE index": what a QP
            // context placing the SQ elsewhere than the program wrote it produces; see
            // docs/devx.md). The WQE is not executed.
            bad(&mut w, syndrome::LOCAL_QP_OP, "control segment index is not the SQ position");
            return w;
        }
        let ud = match self.qp.qp_type {
            QpType::Rc | QpType::Uc | QpType::XrcIni => false,
            QpType::Ud => true,
            _ => {
                bad(&mut w, syndrome::LOCAL_QP_OP, "only RC, UC and UD QPs execute send WQEs");
                return w;
            }
        };
        let n = ctrl.ds as usize * 16;
        let mut buf = [0u8; MAX_WQE_BYTES];
        self.read_sq(index, &mut buf[..n]);
        let parsed = if ud {
            wqe::parse_ud(&ctrl, &buf[..n]).map(|(op, data, av)| {
                w.ud = Some(av);
                (op, data)
            })
        } else if self.qp.qp_type == QpType::XrcIni {
            // mlx5_post_send: the 16-byte XRC segment right after the control segment;
            // the rest is an RC WQE's.
            const SEG: usize = std::mem::size_of::<prm::wqe::xrc::XrcSeg>();
            if ctrl.ds < 2 || n < 16 + SEG {
                Err(WqeError::Layout("no XRC segment"))
            } else {
                let mut seg = [0u8; SEG];
                seg.copy_from_slice(&buf[16..16 + SEG]);
                w.xrc_srqn = Some(prm::wqe::xrc::XrcSeg::view(&seg).srqn());
                buf.copy_within(16 + SEG..n, 16);
                let rc = wqe::Ctrl { ds: ctrl.ds - 1, ..ctrl };
                wqe::parse(&rc, &buf[..n - SEG])
            }
        } else {
            wqe::parse(&ctrl, &buf[..n])
        };
        match parsed {
            Err(WqeError::Length(why)) => bad(&mut w, syndrome::LOCAL_LENGTH, why),
            Err(WqeError::Opcode(_)) => bad(&mut w, syndrome::LOCAL_QP_OP, "unsupported opcode"),
            Err(WqeError::Layout(why)) => bad(&mut w, syndrome::LOCAL_QP_OP, why),
            Ok((op, _)) if self.qp.qp_type == QpType::Uc && op.is_read_or_atomic() => {
                bad(&mut w, syndrome::LOCAL_QP_OP, "UC has no RDMA READ or atomics");
            }
            Ok((op, data)) => {
                let access = if op.is_read_or_atomic() { Access::LocalWrite } else { Access::LocalRead };
                // Inline and pointer segments together: the pointers' bytes are gathered
                // now, with their keys checked, and the payload kept whole.
                let data = match data {
                    Data::Mixed(pieces) => match gather_mixed(env, &self.qp.pd, &pieces) {
                        Ok(b) => Data::Inline(b),
                        Err(e) => {
                            let why = format!("{e:?}");
                            bad(&mut w, syndrome::LOCAL_PROT, &why);
                            Data::Inline(Vec::new())
                        }
                    },
                    d => d,
                };
                if let Data::Sgl(s) = &data {
                    match mkey::validate(env.hca, env.keys, &self.qp.pd, s, access) {
                        Ok(peer) => w.peer = peer,
                        Err(e) => {
                            let why = format!("{e:?}");
                            bad(&mut w, syndrome::LOCAL_PROT, &why);
                        }
                    }
                }
                w.len = data.len();
                if ud && w.len > self.mtu as u64 {
                    bad(&mut w, syndrome::LOCAL_LENGTH, "UD message longer than the MTU");
                }
                w.npsn = match op {
                    Op::Nop => 0,
                    Op::Send { .. } | Op::Write { .. } | Op::Read { .. } => packets(w.len, self.mtu),
                    Op::CmpSwap { .. } | Op::FetchAdd { .. } => 1,
                };
                w.op = op;
                w.data = data;
                if w.error.is_some() {
                    w.npsn = 0;
                }
            }
        }
        tracing::trace!(target: "softhca::wqe", qpn = self.qp.qpn, index, opcode = ctrl.opcode, ds = ctrl.ds,
                        len = w.len, psn = w.first_psn, npsn = w.npsn, signaled = w.signaled, "wqe");
        w
    }

    // ---- transmitting -----------------------------------------------------------------

    /// Sends up to `budget` request packets from the cursor, inside the window.
    pub fn pump(&mut self, env: &mut Env<'_>, budget: usize) {
        if self.state != QpState::Rts {
            return;
        }
        if self.qp.qp_type == QpType::Ud {
            return self.pump_ud(env, budget);
        }
        let Some(peer) = self.peer else { return };
        if let Some(t) = self.req.rnr_until {
            if env.now < t {
                return;
            }
            self.req.rnr_until = None;
        }
        let uc = self.qp.qp_type == QpType::Uc;
        // The payload staging buffer is taken out for the loop, as `emit_request` borrows
        // the WQE from the QP (a move of three words, not a copy).
        let mut out_stage = std::mem::take(&mut self.req.out_stage);
        let mut sent = 0;
        while sent < budget {
            let r = &self.req;
            let Some(w) = r.wqes.get(r.tx_idx) else { break };
            if w.error.is_some() {
                break;
            }
            if w.npsn == 0 || w.done || r.tx_pkt >= w.npsn {
                self.req.tx_idx += 1;
                self.req.tx_pkt = 0;
                continue;
            }
            if w.op.is_read_or_atomic() || w.fence {
                let rd = r.wqes.iter().take(r.tx_idx).filter(|x| !x.done && x.npsn > 0 && x.op.is_read_or_atomic()).count() as u32;
                if w.fence && rd > 0 {
                    break;
                }
                if w.op.is_read_or_atomic() && rd >= self.attrs.max_rd_atomic() {
                    break;
                }
            }
            let p = psn::add(w.first_psn, r.tx_pkt);
            let inflight = psn::diff(p, r.una());
            if inflight < 0 {
                // Acknowledged already (the cursor fell behind): skip ahead.
                let una = r.una();
                self.req.rewind(una);
                continue;
            }
            if inflight as u32 >= r.cwnd {
                break;
            }
            let room = r.cwnd - inflight as u32;
            let k = r.tx_pkt;
            let idx = r.tx_idx;
            match emit_request(w, k, p, room, self, peer, env, &mut out_stage) {
                Ok(adv) => {
                    let r = &mut self.req;
                    let next = psn::add(p, adv);
                    if psn::diff(p, r.snd_max) < 0 {
                        env.counters.retransmits.fetch_add(1, Relaxed);
                        // Karn: never time a retransmitted packet.
                        if r.rtt_sample.is_some_and(|(q, _)| psn::diff(q, p) >= 0) {
                            r.rtt_sample = None;
                        }
                    }
                    if psn::diff(next, r.snd_max) > 0 {
                        r.snd_max = next;
                    }
                    r.tx_pkt += adv;
                    if r.tx_pkt >= r.wqes[idx].npsn {
                        r.tx_idx += 1;
                        r.tx_pkt = 0;
                    }
                    // The timer measures silence since the last request sent (or the last
                    // progress): a long queue at a slow responder is not a loss.
                    r.timer = r.timeout.map(|t| env.now + t);
                    if r.rtt_sample.is_none() && psn::diff(next, r.snd_max) >= 0 {
                        r.rtt_sample = Some((p, env.now));
                    }
                    r.arm_probe(env.now);
                    sent += 1;
                    env.work = true;
                    if uc {
                        // No acknowledgement comes: a packet sent is a packet done (and the
                        // WQE complete once its last packet left), with nothing to time
                        // or retransmit.
                        self.ack_upto(env, psn::add(p, adv - 1));
                        let r = &mut self.req;
                        (r.timer, r.probe, r.rtt_sample) = (None, None, None);
                    }
                }
                Err(Emit::Fail(s)) => {
                    self.req.fail(idx, s);
                    self.retire(env);
                    break;
                }
                Err(Emit::Later) => break,
            }
        }
        self.req.out_stage = out_stage;
        if uc {
            self.retire(env);
        }
    }

    // ---- completing -------------------------------------------------------------------

    /// Retires WQEs at the head that are done (CQE if signaled), or fails the QP at a WQE
    /// that carries an error.
    pub fn retire(&mut self, env: &mut Env<'_>) {
        while let Some(w) = self.req.wqes.front() {
            if let Some(s) = w.error {
                let w = self.req.wqes.pop_front().expect("front exists");
                self.req.tx_idx = 0;
                self.req.tx_pkt = 0;
                self.complete_send_error(env, w.index, w.opcode, s);
                self.enter_error(env, None);
                return;
            }
            if !(w.done || w.npsn == 0) {
                break;
            }
            let w = self.req.wqes.pop_front().expect("front exists");
            if w.peer {
                self.req.out_stage.forget(stage_id(&w));
            }
            if self.req.tx_idx > 0 {
                self.req.tx_idx -= 1;
            } else {
                self.req.tx_pkt = 0;
            }
            if w.signaled {
                let byte_cnt = match w.op {
                    Op::CmpSwap { .. } | Op::FetchAdd { .. } => 8,
                    _ => w.len.min(u32::MAX as u64) as u32,
                };
                let cqe = Cqe { opcode: cqe_op::REQ, wqe_opcode: w.opcode, wqe_counter: w.index, byte_cnt, ..Default::default() };
                self.complete(env, true, cqe);
            }
        }
    }

    /// Forward progress: retry counters reset, timer restarted, window grown.
    fn progress(&mut self, env: &mut Env<'_>, packets: u32) {
        let r = &mut self.req;
        r.retry_left = r.retry_cnt;
        r.rnr_left = r.rnr_retry;
        r.gap_rewound = false;
        r.cwnd = (r.cwnd + packets.min(8)).min(CWND_MAX);
        let una = r.una();
        if psn::diff(r.cursor_psn(), una) < 0 {
            r.rewind(una);
        }
        if let Some((q, t)) = r.rtt_sample {
            if psn::diff(una, q) > 0 {
                let sample = env.now.duration_since(t);
                r.srtt = Some(match r.srtt {
                    Some(s) => (s * 7 + sample) / 8,
                    None => sample,
                });
                r.rtt_sample = None;
            }
        }
        if psn::diff(r.snd_max, una) > 0 {
            r.timer = r.timeout.map(|t| env.now + t);
            r.arm_probe(env.now);
        } else {
            r.timer = None;
            r.probe = None;
        }
        env.work = true;
    }

    /// Tail loss probe: after a few round trips of silence with requests outstanding,
    /// sends the last request packet again with AckReq. Whatever was lost (the tail
    /// packet, its ACK, or a retransmission after a NAK), the responder answers it: an
    /// ACK (duplicate or new) or a sequence NAK. Costs one packet; spends no retry.
    fn tail_probe(&mut self, env: &mut Env<'_>) {
        let r = &mut self.req;
        let Some(t) = r.probe else { return };
        if env.now < t || r.rnr_until.is_some() {
            return;
        }
        if r.probes_left == 0 || psn::diff(r.snd_max, r.una()) <= 0 {
            r.probe = None;
            return;
        }
        r.probes_left -= 1;
        r.probe = Some(env.now + r.probe_delay() * 2);
        let last = psn::add(r.snd_max, psn::MASK);
        let Some(i) = r.find(last) else { return };
        let w = &self.req.wqes[i];
        if w.op.is_read_or_atomic() || w.error.is_some() || w.done {
            return;
        }
        let Some(peer) = self.peer else { return };
        let k = psn::diff(last, w.first_psn) as u32;
        tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, psn = last, "tail probe");
        let mut out_stage = std::mem::take(&mut self.req.out_stage);
        if emit_request(w, k, last, 1, self, peer, env, &mut out_stage).is_ok() {
            env.counters.tail_probes.fetch_add(1, Relaxed);
            env.work = true;
        }
        self.req.out_stage = out_stage;
    }

    fn loss(&mut self) {
        self.req.cwnd = (self.req.cwnd / 2).max(CWND_MIN);
    }

    /// Everything up to and including PSN `p` was received by the responder. Returns
    /// whether that revealed lost READ/atomic responses (and rewound to them).
    fn ack_upto(&mut self, env: &mut Env<'_>, p: u32) -> bool {
        let r = &mut self.req;
        let mut acked = 0u32;
        let mut rewind_to = None;
        for w in r.wqes.iter_mut() {
            if w.done || w.npsn == 0 {
                continue;
            }
            if w.error.is_some() {
                break;
            }
            if w.op.is_read_or_atomic() {
                if psn::diff(p, w.first_psn) >= 0 {
                    rewind_to = Some(psn::add(w.first_psn, w.acked));
                }
                break;
            }
            let last = psn::add(w.first_psn, w.npsn - 1);
            if psn::diff(p, last) >= 0 {
                acked += w.npsn - w.acked;
                w.acked = w.npsn;
                w.done = true;
            } else {
                let a = psn::diff(p, w.first_psn) + 1;
                if a > w.acked as i32 {
                    acked += a as u32 - w.acked;
                    w.acked = a as u32;
                }
                break;
            }
        }
        let mut rewound = false;
        if let Some(x) = rewind_to {
            if !r.gap_rewound {
                tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, psn = x, "responses lost: re-request");
                r.rewind(x);
                r.gap_rewound = true;
                rewound = true;
            }
        }
        if acked > 0 {
            self.progress(env, acked);
        }
        rewound
    }

    /// A response packet (ACK, NAK, READ response, atomic ACK) for this QP.
    pub fn on_response(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        if self.state != QpState::Rts {
            return;
        }
        let p = pkt.bth.psn;
        let r = &self.req;
        // Only PSNs we have sent, and not older than the oldest outstanding one.
        if psn::diff(p, r.snd_max) >= 0 || psn::diff(p, r.una()) < -1 {
            tracing::trace!(target: "softhca::ack", qpn = self.qp.qpn, psn = p, una = r.una(), "stale response");
            return;
        }
        match pkt.bth.opcode {
            Opcode::RcAcknowledge => {
                let Some(aeth) = pkt.aeth else { return };
                self.on_aeth(env, p, aeth);
            }
            Opcode::RcAtomicAcknowledge => self.on_atomic_ack(env, pkt),
            Opcode::RcRdmaReadResponseFirst
            | Opcode::RcRdmaReadResponseMiddle
            | Opcode::RcRdmaReadResponseLast
            | Opcode::RcRdmaReadResponseOnly => self.on_read_response(env, pkt),
            _ => {}
        }
        self.retire(env);
    }

    fn on_aeth(&mut self, env: &mut Env<'_>, p: u32, aeth: AethRepr) {
        let qpn = self.qp.qpn;
        if !matches!(aeth.syndrome, Syndrome::Ack { .. }) && psn::diff(p, self.req.una()) < 0 {
            // A NAK for a PSN already acknowledged: a stale or duplicated packet.
            tracing::trace!(target: "softhca::ack", qpn, psn = p, "stale NAK");
            return;
        }
        match aeth.syndrome {
            Syndrome::Ack { .. } => {
                tracing::trace!(target: "softhca::ack", qpn, psn = p, msn = aeth.msn, "ack received");
                self.ack_upto(env, p);
            }
            Syndrome::RnrNak { timer } => {
                if self.req.rnr_until.is_some() {
                    // Already waiting: a second NAK for the same attempt (a duplicate, or
                    // the answer to a tail probe) is not another retry.
                    return;
                }
                env.counters.rnr_naks_received.fetch_add(1, Relaxed);
                tracing::debug!(target: "softhca::ack", qpn, psn = p, timer_us = timer.micros(), left = self.req.rnr_left, "RNR NAK received");
                self.ack_upto(env, psn::add(p, psn::MASK));
                self.on_rnr(env, p, timer);
            }
            Syndrome::Nak(NakCode::PsnSequenceError) => {
                env.counters.seq_naks_received.fetch_add(1, Relaxed);
                tracing::debug!(target: "softhca::ack", qpn, psn = p, "sequence NAK received");
                if !self.ack_upto(env, psn::add(p, psn::MASK)) {
                    self.req.rewind(p);
                }
                self.loss();
                env.work = true;
            }
            Syndrome::Nak(code) => {
                env.counters.err_naks_received.fetch_add(1, Relaxed);
                tracing::debug!(target: "softhca::ack", qpn, psn = p, ?code, "error NAK received");
                self.ack_upto(env, psn::add(p, psn::MASK));
                let synd = match code {
                    NakCode::RemoteAccessError => syndrome::REMOTE_ACCESS,
                    NakCode::RemoteOperationalError => syndrome::REMOTE_OP,
                    _ => syndrome::REMOTE_INVAL_REQ,
                };
                if let Some(i) = self.req.find(p) {
                    self.req.fail(i, synd);
                }
            }
        }
    }

    fn on_rnr(&mut self, env: &mut Env<'_>, p: u32, timer: RnrTimer) {
        if self.req.rnr_retry != 7 {
            if self.req.rnr_left == 0 {
                if let Some(i) = self.req.find(p) {
                    self.req.fail(i, syndrome::RNR_RETRY_EXC);
                }
                return;
            }
            self.req.rnr_left -= 1;
        }
        self.req.rewind(p);
        self.req.rnr_until = Some(env.now + timer.duration());
        self.req.timer = None;
        self.req.probe = None;
        env.work = true;
    }

    fn on_read_response(&mut self, env: &mut Env<'_>, pkt: &RocePacket<'_>) {
        let p = pkt.bth.psn;
        let Some(i) = self.req.first_pending_read() else { return };
        let w = &self.req.wqes[i];
        if !matches!(w.op, Op::Read { .. }) {
            return;
        }
        let expected = psn::add(w.first_psn, w.acked);
        let d = psn::diff(p, expected);
        if d < 0 {
            return;
        }
        if d > 0 {
            if !self.req.gap_rewound {
                tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, psn = p, expected, "READ response gap: re-request");
                self.req.rewind(expected);
                self.req.gap_rewound = true;
                self.loss();
                env.work = true;
            }
            return;
        }
        let first = w.first_psn;
        self.ack_upto(env, psn::add(first, psn::MASK));
        let w = &self.req.wqes[i];
        let off = w.acked as u64 * self.mtu as u64;
        let want = w.len.saturating_sub(off).min(self.mtu as u64) as usize;
        let data = env.payload(pkt);
        if data.len() != want {
            self.req.fail(i, syndrome::BAD_RESP);
            return;
        }
        if let Data::Sgl(s) = &w.data {
            let done = w.acked + 1 >= w.npsn;
            // Host pieces are written at once (or queued, from a same-host peer); peer
            // pieces go through the staging buffer, written out when the last response is
            // in (before the WQE can complete) or the run breaks.
            let r = stage::scatter(env.hca, env.keys, &self.qp.pd, s, off, data, &mut self.req.in_stage, env.copies);
            let r = if r.is_ok() && w.peer && done { self.req.in_stage.flush(env.hca, env.keys, &self.qp.pd) } else { r };
            if r.is_err() {
                self.req.fail(i, syndrome::LOCAL_PROT);
                return;
            }
        }
        step_add(&env.counters.dma_write_bytes, want as u64);
        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, psn = p, offset = off, len = want, "read response into memory");
        let w = &mut self.req.wqes[i];
        w.acked += 1;
        if w.acked >= w.npsn {
            w.done = true;
        }
        self.progress(env, 1);
    }

    fn on_atomic_ack(&mut self, env: &mut Env<'_>, pkt: &RocePacket<'_>) {
        let p = pkt.bth.psn;
        let (Some(i), Some(ack)) = (self.req.first_pending_read(), pkt.atomic_ack_eth) else { return };
        let w = &self.req.wqes[i];
        let d = psn::diff(p, w.first_psn);
        if d < 0 {
            return;
        }
        if d > 0 || !w.op.is_atomic() {
            if !self.req.gap_rewound {
                let x = psn::add(w.first_psn, w.acked);
                self.req.rewind(x);
                self.req.gap_rewound = true;
                env.work = true;
            }
            return;
        }
        let first = w.first_psn;
        self.ack_upto(env, psn::add(first, psn::MASK));
        let w = &self.req.wqes[i];
        if let Data::Sgl(s) = &w.data {
            if mkey::scatter(env.hca, env.keys, &self.qp.pd, s, 0, &ack.orig_data.to_ne_bytes()).is_err() {
                self.req.fail(i, syndrome::LOCAL_PROT);
                return;
            }
        }
        tracing::trace!(target: "softhca::ack", qpn = self.qp.qpn, psn = p, orig = ack.orig_data, "atomic ack received");
        let w = &mut self.req.wqes[i];
        w.acked = 1;
        w.done = true;
        self.progress(env, 1);
    }

    // ---- timers -----------------------------------------------------------------------

    /// The local ACK timer: retry from the oldest unacknowledged PSN, or fail.
    pub fn check_timers(&mut self, env: &mut Env<'_>) {
        if self.state != QpState::Rts {
            return;
        }
        if let Some(t) = self.req.rnr_until {
            if env.now >= t {
                self.req.rnr_until = None;
                env.work = true;
            }
        }
        self.tail_probe(env);
        let Some(t) = self.req.timer else { return };
        if env.now < t {
            return;
        }
        let una = self.req.una();
        if psn::diff(self.req.snd_max, una) <= 0 {
            self.req.timer = None;
            return;
        }
        if self.req.retry_left == 0 {
            tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, una, "retries exhausted");
            self.req.timer = None;
            if let Some(i) = self.req.wqes.iter().position(|w| !w.done && w.npsn > 0) {
                self.req.fail(i, syndrome::TRANSPORT_RETRY_EXC);
            }
            self.retire(env);
            return;
        }
        self.req.retry_left -= 1;
        env.counters.ack_timeouts.fetch_add(1, Relaxed);
        tracing::debug!(target: "softhca::ack", qpn = self.qp.qpn, una, left = self.req.retry_left, "ack timeout: retransmit");
        self.req.rewind(una);
        self.req.cwnd = CWND_MIN.max(self.req.cwnd / 4);
        self.req.gap_rewound = false;
        self.req.timer = self.req.timeout.map(|d| env.now + d);
        env.work = true;
    }
}

/// What identifies a WQE's staged payload in [`OutStage`].
fn stage_id(w: &SqWqe) -> (u64, u64) {
    (w.serial, 0)
}

/// Why a request packet was not sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emit {
    /// The WQE fails with this syndrome.
    Fail(u8),
    /// Not in this step: its payload needs the staging buffer refilled, and packets of
    /// this step still refer to it.
    Later,
}

/// The payload of a [`Data::Mixed`] WQE: its inline bytes and the bytes its pointers name
/// (checked for local read), in order.
fn gather_mixed(env: &mut Env<'_>, pd: &crate::objects::Pd, pieces: &[wqe::Piece]) -> Result<Vec<u8>, crate::hca::KeyError> {
    let mut out = Vec::new();
    for p in pieces {
        match p {
            wqe::Piece::Inline(b) => out.extend_from_slice(b),
            wqe::Piece::Sge(s) => {
                let at = out.len();
                out.resize(at + s.len as usize, 0);
                mkey::gather(env.hca, env.keys, pd, std::slice::from_ref(s), 0, &mut out[at..])?;
            }
        }
    }
    Ok(out)
}

/// Builds and queues request packet `k` of `w` at PSN `p`, with `room` PSNs left in the
/// window (at least 1); returns the PSNs it covers: 1, or for a run sent as one burst to
/// a same-host peer ([`burst_len`]), the run's packets. A payload in peer memory comes
/// from `out_stage` (see [`super::stage`]).
#[allow(clippy::too_many_arguments)]
fn emit_request(w: &SqWqe, k: u32, p: u32, room: u32, q: &QpCtx, peer: SocketAddr, env: &mut Env<'_>,
                out_stage: &mut OutStage) -> Result<u32, Emit> {
    let mtu = q.mtu as u64;
    let dqpn = q.attrs.dest_qpn;
    let sport = q.sport();
    match w.op {
        Op::Send { .. } | Op::Write { .. } => {
            let n = w.npsn;
            let off = k as u64 * mtu;
            let len = w.len.saturating_sub(off).min(mtu) as usize;
            let uc = q.qp.qp_type == QpType::Uc;
            // The payload stays where it is when it lies in one registered entry (the
            // usual case): the packet refers to it until this step's flush, and a
            // same-host peer may copy it later still. Not for UC: its WQE completes as its
            // last packet is emitted, before the flush (no acknowledgement comes), and the
            // application may then reuse the buffer, so its bytes are copied now.
            let mut in_place = None;
            match &w.data {
                // Peer memory: the segment holding this packet, read once (one call per
                // gather entry) for every packet in it and for retransmissions, and sent
                // from the staging buffer in place.
                Data::Sgl(s) if w.peer && len > 0 => {
                    let (hca, keys, pd) = (env.hca, &mut *env.keys, &q.qp.pd);
                    let m = out_stage.bytes(env.step, stage_id(w), off, len, w.len, || mkey::first_peer_memory(hca, s),
                                            |start, buf| mkey::gather(hca, keys, pd, s, start, buf))
                        .map_err(|_| Emit::Fail(syndrome::LOCAL_PROT))?;
                    in_place = Some((m.ok_or(Emit::Later)?.addr, false));
                }
                Data::Sgl(s) => match mkey::contiguous(env.hca, env.keys, &q.qp.pd, s, off, len) {
                    Ok(Some((addr, by_ref))) if len > 0 && !uc => in_place = Some((addr, by_ref)),
                    Ok(_) => {
                        let buf = staging(env.scratch, len);
                        mkey::gather(env.hca, env.keys, &q.qp.pd, s, off, buf).map_err(|_| Emit::Fail(syndrome::LOCAL_PROT))?
                    }
                    Err(_) => return Err(Emit::Fail(syndrome::LOCAL_PROT)),
                },
                Data::Inline(b) => staging(env.scratch, len).copy_from_slice(&b[off as usize..off as usize + len]),
                // Gathered into `Inline` when the WQE was fetched.
                Data::Mixed(_) => return Err(Emit::Fail(syndrome::LOCAL_QP_OP)),
            }
            if let Some((addr, true)) = in_place.filter(|_| !uc && !w.peer) {
                if let Some((m, total)) = burst_len(w, k, room, q, peer, env) {
                    return emit_burst(w, k, p, m, total, room, addr, q, peer, env);
                }
            }
            step_add(&env.counters.dma_read_bytes, len as u64);
            let last = k + 1 == n;
            let window_full = room <= 1;
            let mut pkt = request_packet(w, k, p, dqpn, uc);
            // UC is never acknowledged (its AckReq bit is sent as 0).
            pkt.bth.ack_req = !uc && (last || window_full || p % ACK_EVERY == ACK_EVERY - 1);
            pkt.payload = if in_place.is_some() { &[] } else { &env.scratch[..len] };
            match in_place {
                // SAFETY: `contiguous` checked the range inside a live MR of this QP's PD
                // under the engine lock, which our caller (the engine step) holds until
                // the step's flush has sent the packet; or the range is in the QP's
                // staging buffer, which is neither refilled in this step (`OutStage`) nor
                // dropped before its flush (the QP context goes only under the lock).
                // The staging buffer is refilled in later steps, and a dma-buf mapping is
                // closed to other processes: a same-host peer gets those bytes inline
                // (`app: false`), ordinary memory by reference.
                Some((addr, by_ref)) => unsafe { env.tx.send_mem(&pkt, MemRef { addr, len, app: by_ref }, peer, sport, env.counters) },
                None => env.tx.send(&pkt, peer, sport, env.counters),
            }
            Ok(1)
        }
        Op::Read { raddr, rkey } => {
            let off = k as u64 * mtu;
            let bth = BthRepr::new(Opcode::RcRdmaReadRequest, dqpn, p);
            let mut pkt = RocePacket::new(bth, &[]);
            pkt.reth = Some(RethRepr { va: raddr.wrapping_add(off), rkey, dma_len: w.len.saturating_sub(off) as u32 });
            xrc(&mut pkt, w.xrc_srqn);
            env.tx.send(&pkt, peer, sport, env.counters);
            Ok(w.npsn - k)
        }
        Op::CmpSwap { raddr, rkey, swap, compare } => {
            let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcCompareSwap, dqpn, p), &[]);
            pkt.atomic_eth = Some(AtomicEthRepr { va: raddr, rkey, swap_add: swap, compare });
            xrc(&mut pkt, w.xrc_srqn);
            env.tx.send(&pkt, peer, sport, env.counters);
            Ok(1)
        }
        Op::FetchAdd { raddr, rkey, add } => {
            let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcFetchAdd, dqpn, p), &[]);
            pkt.atomic_eth = Some(AtomicEthRepr { va: raddr, rkey, swap_add: add, compare: 0 });
            xrc(&mut pkt, w.xrc_srqn);
            env.tx.send(&pkt, peer, sport, env.counters);
            Ok(1)
        }
        Op::Nop => Ok(0),
    }
}

/// Request packet `k` of the SEND or WRITE `w` at PSN `p`, without payload: its opcode
/// (UC's when `uc`), the RETH on a WRITE's first packet, the immediate and Solicited (as
/// the WQE asks) on the last, the XRCETH of an XRC initiator; AckReq clear.
fn request_packet(w: &SqWqe, k: u32, p: u32, dqpn: u32, uc: bool) -> RocePacket<'static> {
    let (Op::Send { imm } | Op::Write { imm, .. }) = w.op else { unreachable!("request_packet is for SEND and WRITE") };
    let write = matches!(w.op, Op::Write { .. });
    let last = k + 1 == w.npsn;
    let rc_op = send_opcode(w.npsn, k, imm.is_some(), write);
    let op = if uc { rc_op.to_uc().unwrap_or(rc_op) } else { rc_op };
    let mut pkt = RocePacket::new(BthRepr::new(op, dqpn, p), &[]);
    pkt.bth.solicited = last && w.solicited;
    if let (Op::Write { raddr, rkey, .. }, 0) = (w.op, k) {
        pkt.reth = Some(RethRepr { va: raddr, rkey, dma_len: w.len as u32 });
    }
    if last {
        pkt.immdt = imm.map(|imm| ImmDtRepr { imm });
    }
    xrc(&mut pkt, w.xrc_srqn);
    pkt
}

/// Whether packets of `w` from packet `k` on go as one burst to a same-host peer
/// ([`super::link::burst`]), and if so how many and their payload bytes: all that the
/// window has room for (at least 2), up to the end of the message, when the peer takes
/// bursts and the run's payload is one contiguous piece of ordinary registered memory
/// (checked for local read as one range). None otherwise: an ordinary packet, as for a
/// run whose range check fails, which then fails at the packet where it would have.
fn burst_len(w: &SqWqe, k: u32, room: u32, q: &QpCtx, peer: SocketAddr, env: &mut Env<'_>) -> Option<(u32, usize)> {
    let m = (w.npsn - k).min(room).min(super::link::burst::MAX_PACKETS);
    if m < 2 || !env.tx.bursts_to(peer) {
        return None;
    }
    let Data::Sgl(s) = &w.data else { return None };
    let off = k as u64 * q.mtu as u64;
    let total = (w.len - off).min(m as u64 * q.mtu as u64) as usize;
    match mkey::contiguous(env.hca, env.keys, &q.qp.pd, s, off, total) {
        Ok(Some((_, true))) => Some((m, total)),
        _ => None,
    }
}

/// Queues packets `k .. k + m` of `w` (PSNs from `p`) as one burst whose `total` payload
/// bytes are at `addr` (ordinary registered memory, checked by [`burst_len`]). The run's
/// last packet asks for an ACK where any packet of the run would have (ACKs are
/// cumulative).
#[allow(clippy::too_many_arguments)]
fn emit_burst(w: &SqWqe, k: u32, p: u32, m: u32, total: usize, room: u32, addr: u64, q: &QpCtx, peer: SocketAddr,
              env: &mut Env<'_>) -> Result<u32, Emit> {
    step_add(&env.counters.dma_read_bytes, total as u64);
    let dqpn = q.attrs.dest_qpn;
    let first = request_packet(w, k, p, dqpn, false);
    let lk = k + m - 1;
    let mut last = request_packet(w, lk, psn::add(p, m - 1), dqpn, false);
    // A PSN ≡ ACK_EVERY - 1 inside the run (offsets from p: the first such one).
    let asks = (ACK_EVERY - 1 + ACK_EVERY - p % ACK_EVERY) % ACK_EVERY < m;
    last.bth.ack_req = lk + 1 == w.npsn || room <= m || asks;
    // SAFETY: `burst_len` checked [addr, addr + total) inside one live MR of this QP's PD
    // (ordinary memory) for local read, under the engine lock our caller holds; the
    // application keeps it until the WQE completes, which needs the run acknowledged.
    unsafe { env.tx.send_burst(&first, &last, m, q.mtu as usize, MemRef { addr, len: total, app: true }, peer, q.sport(), env.counters) };
    Ok(m)
}

/// An XRC initiator's request: the XRC opcode of the RC one and the XRCETH naming the
/// remote XRC SRQ (IBA 9.3.6); other QPs' packets are left as they are.
fn xrc(pkt: &mut RocePacket<'_>, srqn: Option<u32>) {
    if let (Some(n), Some(op)) = (srqn, pkt.bth.opcode.to_xrc()) {
        pkt.bth.opcode = op;
        pkt.xrceth = Some(crate::wire::XrcEthRepr { xrc_srqn: n });
    }
}
