//! The device thread: one per HCA instance, the "ConnectX" that runs the data path.
//!
//! Each step, under the engine lock:
//! 1. receive one `recvmmsg` batch and hand each packet to its QP (responder for requests,
//!    requester for responses); ICRC-failing and malformed packets are counted and dropped;
//! 2. per QP: queue the coalesced ACK, read the SQ doorbell record and fetch new WQEs
//!    (RTS), run the ACK/RNR timers, send request packets inside the window, drain the
//!    response queue; in ERR, flush whatever was posted;
//! 3. per CQ: look for arm doorbells and deliver completion events;
//! 4. send everything built in `sendmmsg` batches (fault injection and capture on the way);
//! 5. refresh the clock page every [`super::timers::CLOCK_PERIOD`].
//!
//! Between steps, the idle backoff: after a step that did work the engine steps again at
//! once; when idle it yields the CPU between steps ([`super::timers::SPIN`] is 0) for
//! [`super::timers::YIELD`] — on a small machine the application's polling thread and the peer's
//! engine need the core — then sleeps in `ppoll` on the UDP socket and the wake eventfd
//! with a timeout doubling from [`super::timers::SLEEP_MIN`] to [`super::timers::SLEEP_MAX`] (2 ms once
//! idle for 100 ms), bounded by the earliest transport timer. A packet or a control-path
//! change (the wake fd) ends the sleep at once; new doorbells are noticed within one sleep
//! period. Time the thread loses to the scheduler beyond that postpones the transport
//! timers (a starved host must not look like a dead peer).
//!
//! The engine holds only a `Weak<Hca>`; it stops when the HCA is dropped or
//! [`super::Device`] asks it to.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::hca::Hca;
use crate::wire::{Endpoints, Error as WireError, RocePacket, Transport};

use super::fault::Injector;
use super::qp::{Env, QpCtx};
use super::requester::BUDGET;
use super::rx::Rx;
use super::timers::{CLOCK_PERIOD, DEEP_IDLE_AFTER, SLEEP_DEEP, SLEEP_MAX, SLEEP_MIN, SPIN, YIELD};
use super::trace::{capture_path, Capture};
use super::tx::Tx;
use super::{events, Shared, State};
use crate::objects::QpState;

/// Socket buffer sizes asked for (the receive side forced past rmem_max when allowed).
const RCVBUF: libc::c_int = 8 << 20;
const SNDBUF: libc::c_int = 4 << 20;

fn setsockopt_int(fd: RawFd, name: libc::c_int, v: libc::c_int) -> bool {
    // SAFETY: setsockopt on a live socket with a pointer to a c_int and its size.
    unsafe {
        libc::setsockopt(fd, libc::SOL_SOCKET, name, (&v as *const libc::c_int).cast(),
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t) == 0
    }
}

struct Engine {
    shared: Arc<Shared>,
    hca: Weak<Hca>,
    sock: UdpSocket,
    local: SocketAddr,
    rx: Rx,
    tx: Tx,
    capture: Option<Capture>,
    scratch: Vec<u8>,
    last_work: Instant,
    sleep: Duration,
    last_clock: Instant,
    /// End of the last step that did work (for the scheduling-gap counter).
    last_end: Option<Instant>,
    /// Start of the previous iteration, and how long its idle phase meant to sleep.
    prev_top: Option<Instant>,
    intended: Duration,
    /// The last sleep timed out: the socket had nothing.
    rx_idle: bool,
}

/// A step plus scheduling noise this long is normal; anything longer is a stall.
const STALL_SLACK: Duration = Duration::from_millis(2);

/// Starts the engine thread of `hca`.
pub(crate) fn spawn(shared: Arc<Shared>, hca: &Arc<Hca>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let sock = hca.socket().try_clone()?;
    let fd = sock.as_raw_fd();
    if !setsockopt_int(fd, libc::SO_RCVBUFFORCE, RCVBUF) {
        setsockopt_int(fd, libc::SO_RCVBUF, RCVBUF);
    }
    setsockopt_int(fd, libc::SO_SNDBUF, SNDBUF);
    let local = sock.local_addr()?;
    let cfg = hca.config();
    let fault = cfg.fault.filter(|f| f.is_active()).map(Injector::new);
    if let Some(f) = &cfg.fault {
        tracing::info!(target: "softhca::fault", addr = %cfg.addr, ?f, "fault injection");
    }
    let pcap = cfg.pcap.as_ref().map(|p| capture_path(p, cfg.addr));
    let weak = Arc::downgrade(hca);
    let name = format!("shca-{}", cfg.addr);
    std::thread::Builder::new().name(name).spawn(move || {
        let now = Instant::now();
        let mut e = Engine {
            shared,
            hca: weak,
            sock,
            local,
            rx: Rx::new(),
            tx: Tx::new(local, fault),
            capture: pcap.and_then(Capture::open),
            scratch: Vec::with_capacity(4096),
            last_work: now,
            sleep: SLEEP_MIN,
            last_clock: now,
            last_end: None,
            prev_top: None,
            intended: Duration::ZERO,
            rx_idle: false,
        };
        e.run();
    })
}

impl Engine {
    fn run(&mut self) {
        tracing::debug!(target: "softhca::engine", local = %self.local, "engine up");
        loop {
            if self.shared.stop.load(Ordering::Acquire) {
                break;
            }
            let Some(hca) = self.hca.upgrade() else { break };
            let now = Instant::now();
            // Time this thread lost to the scheduler (beyond the sleep it asked for and a
            // normal step) does not count against transport timers: a starved host must not
            // look like a dead peer.
            let stall = self.prev_top.map_or(Duration::ZERO, |p| {
                now.duration_since(p).saturating_sub(self.intended + STALL_SLACK)
            });
            self.prev_top = Some(now);
            self.intended = Duration::ZERO;
            if let Some(end) = self.last_end {
                let gap = now.duration_since(end).as_micros() as u64;
                self.shared.counters.gap_max_us.fetch_max(gap, Ordering::Relaxed);
            }
            let shared = self.shared.clone();
            let stepped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut st = shared.lock();
                if !stall.is_zero() {
                    for q in st.qps.values_mut() {
                        q.req.postpone(stall);
                    }
                }
                self.step(&hca, &mut st, now)
            }));
            // A bug must not silently kill the device: count it, log it, keep going.
            let (work, deadline) = stepped.unwrap_or_else(|_| {
                shared.counters.engine_panics.fetch_add(1, Ordering::Relaxed);
                tracing::error!(target: "softhca::engine", "engine step panicked");
                (true, None)
            });
            if now.duration_since(self.last_clock) >= CLOCK_PERIOD {
                hca.update_clock();
                self.last_clock = now;
            }
            drop(hca);
            let end = Instant::now();
            self.shared.counters.step_max_us.fetch_max(end.duration_since(now).as_micros() as u64, Ordering::Relaxed);
            // Only gaps right after productive steps say something about scheduling.
            self.last_end = work.then_some(end);
            self.idle(work, deadline);
        }
        if let Some(c) = self.capture.as_mut() {
            c.flush();
        }
        tracing::debug!(target: "softhca::engine", local = %self.local, "engine down");
    }

    /// One pass over the wire, the QPs and the CQs. Returns whether anything happened and
    /// the earliest transport timer.
    fn step(&mut self, hca: &Hca, st: &mut State, now: Instant) -> (bool, Option<Instant>) {
        let counters = &self.shared.counters;
        let State { qps, cqs } = st;
        // After a sleep that ended without the socket becoming readable there is nothing to
        // receive: skip the syscall (it is most of an idle wake-up's cost).
        let n = if std::mem::replace(&mut self.rx_idle, false) { 0 } else { self.rx.recv(&self.sock) };
        let mut env = Env { hca, cqs, tx: &mut self.tx, counters, now, scratch: &mut self.scratch, work: n > 0 };
        for i in 0..n {
            let Some((bytes, src)) = self.rx.get(i) else {
                counters.rx_malformed.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            counters.rx_packets.fetch_add(1, Ordering::Relaxed);
            counters.rx_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            let ep = Endpoints::new(src, self.local);
            if let Some(c) = self.capture.as_mut() {
                c.packet(&ep, bytes);
            }
            dispatch(qps, &mut env, bytes, &ep);
        }
        let mut deadline: Option<Instant> = None;
        for q in qps.values_mut() {
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
        work |= self.tx.flush(&self.sock, counters, self.capture.as_mut()) > 0;
        (work, deadline)
    }

    /// The backoff between steps.
    fn idle(&mut self, work: bool, deadline: Option<Instant>) {
        let now = Instant::now();
        if work {
            self.last_work = now;
            self.sleep = SLEEP_MIN;
            return;
        }
        let idle = now.duration_since(self.last_work);
        if idle < SPIN {
            std::hint::spin_loop();
            return;
        }
        if idle < YIELD {
            std::thread::yield_now();
            return;
        }
        let mut t = self.sleep;
        if let Some(d) = deadline {
            t = t.min(d.saturating_duration_since(now));
        }
        if let Some(c) = self.capture.as_mut() {
            c.flush();
        }
        self.intended = t;
        self.shared.counters.sleeps.fetch_add(1, Ordering::Relaxed);
        let woke = self.shared.sleep(self.sock.as_raw_fd(), t);
        self.rx_idle = !woke;
        if woke {
            self.last_work = Instant::now();
            self.sleep = SLEEP_MIN;
        } else {
            let cap = if idle >= DEEP_IDLE_AFTER { SLEEP_DEEP } else { SLEEP_MAX };
            self.sleep = (self.sleep * 2).min(cap);
        }
    }
}

/// Hands one received datagram to the QP it names.
fn dispatch(qps: &mut std::collections::BTreeMap<u32, QpCtx>, env: &mut Env<'_>, bytes: &[u8], ep: &Endpoints) {
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
    let bth = &pkt.bth;
    tracing::trace!(target: "softhca::rx", opcode = ?bth.opcode, qpn = bth.dest_qpn, psn = bth.psn, len = pkt.payload.len(),
                    ack_req = bth.ack_req, src = %ep.src, "rx");
    let ud = match bth.opcode.transport() {
        Transport::Rc => false,
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
    if ud != (q.qp.qp_type == crate::objects::QpType::Ud) {
        env.counters.rx_no_qp.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if ud {
        q.on_ud(&pkt, env, ep.src, ep.dst, bytes.len());
        return;
    }
    if q.peer.map(|p| p.ip()) != Some(ep.src.ip()) {
        env.counters.rx_wrong_peer.fetch_add(1, Ordering::Relaxed);
        return;
    }
    if bth.opcode.is_request() {
        q.on_request(&pkt, env);
    } else {
        q.on_response(&pkt, env);
    }
}
