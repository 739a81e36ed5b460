//! The data path of one instance: its socket, receive and transmit batches, capture, and
//! the step that moves everything one notch.
//!
//! It lives in the device state (`State`), behind the engine lock, so that a step
//! can run in whichever thread holds the lock: normally the engine thread
//! ([`super::engine`]), and in polled mode also an application thread that calls
//! [`super::Device::progress`] while it waits for completions ([`super::polled`]).
//!
//! One step:
//! 1. receive one `recvmmsg` batch and hand each packet to its QP (responder for requests,
//!    requester for responses); ICRC-failing and malformed packets are counted and dropped;
//! 2. per QP: queue the coalesced ACK, read the SQ doorbell record and fetch new WQEs
//!    (RTS), run the ACK/RNR timers, send request packets inside the window, drain the
//!    response queue; in ERR, flush whatever was posted;
//! 3. per CQ: look for arm doorbells and deliver completion events;
//! 4. send everything built in `sendmmsg` batches (fault injection and capture on the way).
//!
//! Packets from same-host peers ([`super::link`]) are taken from the instance's inbox
//! after the socket's batch in step 1 and handled the same way.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::hca::Hca;
use crate::objects::QpState;
use crate::wire::{Endpoints, Error as WireError, RocePacket, Transport};

use super::counters::{step_add, Counters};
use super::link::copy::{Copies, RemoteRef};
use super::link::{self, Inbox};
use super::mkey::KeyCache;
use super::qp::{Env, QpCtx};
use super::requester::BUDGET;
use super::rx::Rx;
use super::trace::Capture;
use super::tx::Tx;
use super::{events, State};

/// How soon a step comes back for packets waiting for room in a same-host peer's lane.
const BACKLOG_RETRY: std::time::Duration = std::time::Duration::from_micros(20);

/// Polled steps that find the socket empty read it every 2^k-th step, k growing by one per
/// empty read up to this, while every peer is on the same-host path ([`Datapath::polled_rx`]).
const RX_BACKOFF_MAX: u32 = 4;

/// The socket and the buffers a step works with.
pub(crate) struct Datapath {
    pub sock: UdpSocket,
    pub local: SocketAddr,
    pub rx: Rx,
    pub tx: Tx,
    pub capture: Option<Capture>,
    /// Where same-host peers leave packets (None: the same-host path is off).
    pub inbox: Option<Inbox>,
    /// The Ethernet port of raw packet QPs (None: no `DOORBELL_ETH_IF`).
    pub port: Option<super::port::Port>,
    copies: Copies,
    scratch: Vec<u8>,
    keys: KeyCache,
    /// Steps run so far (`Env::step`).
    steps: u64,
    /// Polled steps' socket back-off: empty reads in a row (capped at
    /// [`RX_BACKOFF_MAX`]) and the steps left before the next read.
    rx_empty: u32,
    rx_skip: u32,
}

impl std::fmt::Debug for Datapath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datapath").field("local", &self.local).field("capture", &self.capture).finish_non_exhaustive()
    }
}

impl Datapath {
    /// Whether a polled step should read the socket. An application thread that steps
    /// the device while it waits steps it every microsecond or so, and with every peer
    /// on the same-host path its `recvmmsg` finds nothing nearly every time: one system
    /// call per step, which on a few shared cores lengthens every rank's turn (4 ranks on
    /// 2 vCPUs, an 8 B all-reduce). So while reads come back empty and every peer is on
    /// the inbox, the reads thin out to one in 2^[`RX_BACKOFF_MAX`] steps; the first
    /// datagram (a new peer's packet, a UDP peer's) brings back a read per step. The
    /// engine thread's steps are not affected: it reads the socket whenever it wakes.
    pub fn polled_rx(&mut self) -> bool {
        if self.rx_skip > 0 && self.tx.all_same_host() {
            self.rx_skip -= 1;
            return false;
        }
        true
    }

    /// Records what a polled step's socket read found ([`Datapath::polled_rx`]).
    fn note_polled_rx(&mut self, n: usize) {
        if n > 0 {
            self.rx_empty = 0;
            self.rx_skip = 0;
        } else {
            self.rx_empty = (self.rx_empty + 1).min(RX_BACKOFF_MAX);
            self.rx_skip = (1 << self.rx_empty) - 1;
        }
    }

    pub fn new(sock: UdpSocket, local: SocketAddr, tx: Tx, capture: Option<Capture>, inbox: Option<Inbox>) -> Datapath {
        Datapath { sock, local, rx: Rx::new(), tx, capture, inbox, port: None, copies: Copies::new(), scratch: Vec::with_capacity(4096), keys: KeyCache::default(),
                   steps: 0, rx_empty: 0, rx_skip: 0 }
    }
}

/// How a step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flush {
    /// Everything built leaves now.
    All,
    /// If the step began with nothing queued, wrote completions, and built only
    /// acknowledgements, these wait for the next step. Polled mode: the caller handles
    /// the completions and steps again (it has work: a message arrived), and the ACK
    /// leaves in the same `sendmmsg` as whatever the completions made it post, one
    /// system call and a few microseconds earlier for the message that matters.
    DeferAcks,
}

/// One pass over the wire, the QPs and the CQs, under the engine lock (`st`). `skip_rx`:
/// the caller knows the socket is empty (its sleep ended without it becoming readable),
/// so the receive syscall is skipped. Returns whether anything happened and the earliest
/// transport timer.
pub(crate) fn step(hca: &Hca, st: &mut State, counters: &Counters, now: Instant, skip_rx: bool, flush: Flush) -> (bool, Option<Instant>) {
    let State { qps, cqs, tirs, dp } = st;
    let Some(dp) = dp.as_mut() else { return (false, None) };
    let queued = dp.tx.pending() > 0;
    let cqes = counters.cqes.load(Ordering::Relaxed);
    let n = if skip_rx { 0 } else { dp.rx.recv(&dp.sock) };
    // Only polled steps defer ACKs: they are the ones whose reads back off.
    if flush == Flush::DeferAcks && !skip_rx {
        dp.note_polled_rx(n);
    }
    dp.steps += 1;
    let mut env = Env { hca, cqs, tx: &mut dp.tx, counters, keys: &mut dp.keys, now, step: dp.steps, scratch: &mut dp.scratch, work: n > 0,
                        copies: &mut dp.copies, remote: None };
    for i in 0..n {
        let Some((msg, seg, src)) = dp.rx.get(i) else {
            counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let ep = Endpoints::new(src, dp.local);
        step_add(&counters.rx_datagrams, 1);
        // One packet, or a coalesced run of them (UDP_GRO).
        for bytes in msg.chunks(seg) {
            step_add(&counters.rx_packets, 1);
            step_add(&counters.rx_bytes, bytes.len() as u64);
            if let Some(c) = dp.capture.as_mut() {
                c.packet(&ep, bytes);
            }
            dispatch(qps, &mut env, bytes, &ep);
        }
    }
    if let Some(inbox) = dp.inbox.as_mut() {
        let local = dp.local;
        let env = &mut env;
        let got = inbox.drain(|rec| {
            let Some((src, rec)) = rec else {
                // The lane's records are released next: nothing may still refer to them.
                env.copies.flush();
                return;
            };
            if rec.head.kind == link::inbox::kind::BURST {
                // A run of packets: handed over one by one, as they would have come.
                match link::burst::Run::parse(&rec.head, rec.bytes) {
                    Ok(run) => {
                        step_add(&counters.local_rx_packets, run.count() as u64);
                        let ep = Endpoints::new(src, local);
                        for i in 0..run.count() {
                            let (pkt, payload) = run.packet(i);
                            env.remote = Some(payload);
                            deliver(qps, env, &pkt, &ep, pkt.header_len() + payload.len);
                            env.remote = None;
                        }
                    }
                    Err(e) => {
                        counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(target: "softhca::link", src = %src, "malformed: {e}");
                    }
                }
                return;
            }
            step_add(&counters.local_rx_packets, 1);
            let remote = (rec.head.kind == link::inbox::kind::REMOTE)
                .then(|| RemoteRef { pid: rec.head.pid, addr: rec.head.addr, len: rec.head.remote_len as usize });
            let parsed = match remote {
                // Headers only: the payload stays in the sender until it is copied.
                Some(_) => RocePacket::parse_headers(rec.bytes),
                None => {
                    // Whatever a whole packet does may read memory that queued copies write.
                    env.copies.flush();
                    RocePacket::parse_without_icrc(rec.bytes)
                }
            };
            match parsed {
                Ok(pkt) => {
                    env.remote = remote;
                    deliver(qps, env, &pkt, &Endpoints::new(src, local), rec.bytes.len() + remote.map_or(0, |r| r.len));
                    env.remote = None;
                }
                Err(e) => {
                    counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(target: "softhca::link", src = %src, "malformed: {e}");
                }
            }
        });
        env.copies.report(counters);
        env.work |= got > 0;
    }
    if let Some(port) = dp.port.as_mut() {
        super::port::receive(port, qps, tirs, &mut env);
    }
    let mut deadline: Option<Instant> = None;
    for q in qps.values_mut() {
        if q.qp.qp_type == crate::objects::QpType::RawPacket {
            super::port::step_qp(q, dp.port.as_ref(), &mut env);
            q.publish();
            continue;
        }
        q.resp.flush_ack();
        match q.state {
            QpState::Rts => {
                q.fetch_sq(&mut env);
                q.check_timers(&mut env);
                q.pump(&mut env, BUDGET);
            }
            QpState::Err => q.flush(&mut env),
            _ => {}
        }
        q.drain_out(&mut env, BUDGET);
        q.publish();
        if let Some(d) = q.deadline() {
            deadline = Some(deadline.map_or(d, |x| x.min(d)));
        }
    }
    let mut work = env.work;
    for cq in env.cqs.values_mut() {
        work |= events::check(cq, hca.pages(), counters);
        cq.publish();
    }
    // (`env`'s borrow of the transmit queue ends here.)
    let completed = counters.cqes.load(Ordering::Relaxed) != cqes;
    if flush == Flush::DeferAcks && !queued && completed && dp.tx.only_acks() {
        return (true, deadline);
    }
    work |= dp.tx.flush_at(&dp.sock, counters, dp.capture.as_mut(), now) > 0;
    if dp.tx.backlogged() {
        // Back soon for what a same-host peer had no room for (not at once: its
        // receiver needs the CPU to make room).
        let d = now + BACKLOG_RETRY;
        deadline = Some(deadline.map_or(d, |x| x.min(d)));
    }
    (work, deadline)
}

/// [`step`], with a panic contained: counted, logged, and the step's queued packets
/// dropped (they may refer to application memory that is only valid under the lock the
/// caller holds). A bug must not silently kill the device, nor unwind into the
/// application that called [`super::Device::progress`].
pub(crate) fn step_guarded(hca: &Hca, st: &mut State, counters: &Counters, now: Instant, skip_rx: bool, flush: Flush) -> (bool, Option<Instant>) {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| step(hca, st, counters, now, skip_rx, flush)));
    r.unwrap_or_else(|_| {
        counters.engine_panics.fetch_add(1, Ordering::Relaxed);
        tracing::error!(target: "softhca::engine", "engine step panicked");
        if let Some(dp) = st.dp.as_mut() {
            dp.tx.abandon();
        }
        (true, None)
    })
}

/// Hands one received datagram to the QP it names.
fn dispatch(qps: &mut BTreeMap<u32, QpCtx>, env: &mut Env<'_>, bytes: &[u8], ep: &Endpoints) {
    let pkt = match RocePacket::parse(bytes, ep) {
        Ok(p) => p,
        Err(WireError::BadIcrc { received, computed }) => {
            env.counters.rx_bad_icrc.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(target: "softhca::rx", src = %ep.src, received, computed, "bad ICRC: dropped");
            return;
        }
        Err(e) => {
            env.counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(target: "softhca::rx", src = %ep.src, "malformed: {e}");
            return;
        }
    };
    deliver(qps, env, &pkt, ep, bytes.len());
}

/// Hands one parsed packet (`len` bytes on the wire) to the QP it names.
fn deliver(qps: &mut BTreeMap<u32, QpCtx>, env: &mut Env<'_>, pkt: &RocePacket<'_>, ep: &Endpoints, len: usize) {
    let bth = &pkt.bth;
    tracing::trace!(target: "softhca::rx", opcode = ?bth.opcode, qpn = bth.dest_qpn, psn = bth.psn, len = pkt.payload.len(),
                    ack_req = bth.ack_req, src = %ep.src, "rx");
    let ud = match bth.opcode.transport() {
        Transport::Rc | Transport::Uc | Transport::Xrc => false,
        Transport::Ud => true,
        _ => {
            env.counters.rx_no_qp.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let Some(q) = qps.get_mut(&bth.dest_qpn) else {
        env.counters.rx_no_qp.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let uc = bth.opcode.transport() == Transport::Uc;
    let xrc = bth.opcode.transport() == Transport::Xrc;
    use crate::objects::QpType;
    let ty = q.qp.qp_type;
    if ud != (ty == QpType::Ud) || uc != (ty == QpType::Uc) || xrc != matches!(ty, QpType::XrcIni | QpType::XrcTgt)
        || (xrc && bth.opcode.is_request() != (ty == QpType::XrcTgt)) {
        env.counters.rx_no_qp.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // XRC runs as RC from here on: requests to the target (their XRCETH stays in the
    // packet for the responder), responses to the initiator.
    let rc;
    let pkt = if xrc {
        rc = RocePacket { bth: crate::wire::BthRepr { opcode: bth.opcode.rc_equivalent(), ..*bth }, ..*pkt };
        &rc
    } else {
        pkt
    };
    let bth = &pkt.bth;
    if ud {
        q.on_ud(pkt, env, ep.src, ep.dst, len);
        return;
    }
    if q.peer.map(|p| p.ip()) != Some(ep.src.ip()) {
        env.counters.rx_wrong_peer.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if bth.opcode.is_request() {
        q.on_request(pkt, env);
    } else {
        q.on_response(pkt, env);
    }
}
