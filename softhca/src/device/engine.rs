//! The device thread: one per HCA instance, the "ConnectX" that runs the data path.
//!
//! Each iteration runs one step under the engine lock (`datapath::step`: receive,
//! per-QP work, CQ events, transmit) and refreshes the clock page every
//! [`super::timers::CLOCK_PERIOD`].
//!
//! Between steps, the idle policy (`Engine::idle`): after a step that did work the
//! engine steps again at once. When idle, one of two modes:
//! - with the doorbell trap (the default where userfaultfd can write-protect shmem, see
//!   [`super::trap`]): keep stepping, yielding in between, for [`super::timers::GRACE`];
//!   then write-protect the application's UAR pages and sleep in `ppoll` on the socket,
//!   the wake eventfd and the userfaultfd, with no timeout but the earliest transport
//!   timer. A doorbell store faults and wakes the engine within microseconds, like an
//!   MMIO write reaching a ConnectX; an idle instance costs no CPU at all.
//! - without it (`DOORBELL_DOORBELL_TRAP=0`, older kernels): yield between steps for
//!   [`super::timers::YIELD`], then sleep in `ppoll` on the socket and the wake eventfd
//!   with a timeout doubling from [`super::timers::SLEEP_MIN`] to
//!   [`super::timers::SLEEP_MAX`] ([`super::timers::SLEEP_DEEP`] once idle for
//!   [`super::timers::DEEP_IDLE_AFTER`]), bounded by the earliest transport timer; new
//!   doorbells are then noticed within one sleep period.
//!
//! In both modes a packet or a control-path change (the wake fd) ends the sleep at once.
//! While an application thread drives the data path itself (polled mode, see
//! [`super::polled`]), the engine lifts the trap and sleeps on the wake fd alone until
//! the polled window ends or a transport timer is due.
//! Time the thread loses to the scheduler beyond what it asked for postpones the
//! transport timers (a starved host must not look like a dead peer).
//!
//! The engine holds only a `Weak<Hca>`; it stops when the HCA is dropped or
//! [`super::Device`] asks it to.

use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::hca::Hca;

use super::datapath::{self, Datapath};
use super::fault::Injector;
use super::timers::{self, CLOCK_PERIOD, DEEP_IDLE_AFTER, SLEEP_DEEP, SLEEP_MAX, SLEEP_MIN, SPIN, YIELD};
use super::trace::{capture_path, Capture};
use super::trap::Trap;
use super::link::{Inbox, Peers, Wire};
use super::tx::Tx;
use super::Shared;
use crate::pages::DevicePages;

/// Socket buffer sizes asked for (the receive side forced past rmem_max when allowed).
const RCVBUF: libc::c_int = 8 << 20;
const SNDBUF: libc::c_int = 4 << 20;

/// Asks the scheduler for a short time slice for the calling thread (`sched_setattr`,
/// SCHED_OTHER with `sched_runtime`, Linux 6.12+): under EEVDF a waking task only
/// preempts the running one before that one's slice ends if its own slice is shorter.
/// The engine runs briefly after each wake-up (a packet, a trapped doorbell), so with the
/// shortest slice it gets the CPU from an application thread that busy-polls without ever
/// yielding (perftest) within microseconds instead of at the end of that thread's slice.
/// Its weight (nice value) is unchanged. Best effort: older kernels ignore the slice.
fn request_short_slice() {
    #[repr(C)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }
    // SAFETY: getpriority has no memory preconditions (errno is cleared first to tell
    // -1 from an error, which we treat as nice 0).
    let nice = unsafe {
        *libc::__errno_location() = 0;
        libc::getpriority(libc::PRIO_PROCESS, 0)
    };
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        policy: libc::SCHED_OTHER as u32,
        flags: 0,
        nice,
        priority: 0,
        runtime: std::env::var("DOORBELL_ENGINE_SLICE_US").ok().and_then(|v| v.parse::<u64>().ok())
            .map_or(timers::ENGINE_SLICE, Duration::from_micros).as_nanos() as u64,
        deadline: 0,
        period: 0,
    };
    // SAFETY: sched_setattr(0 = this thread, a live sched_attr of the size it states, 0).
    let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
    if r != 0 {
        tracing::debug!(target: "softhca::engine", "sched_setattr (short slice): {}", std::io::Error::last_os_error());
    }
}

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
    /// The socket's descriptor (the socket itself is in the data path, under the lock).
    sock: RawFd,
    local: SocketAddr,
    /// Packets are captured: flush the file before sleeping.
    capturing: bool,
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
    /// The doorbell trap, when in use.
    trap: Option<Trap>,
    /// How long the engine keeps stepping after the last work before it arms the trap.
    grace: Duration,
    /// The last sleep ended with a message on the trap's userfaultfd.
    trap_woken: bool,
    /// A yield took the core away for long (a thread that never yields shares it): no
    /// grace-period polling before then. The window doubles while stalls keep coming back
    /// soon after it ends (`timers::CONTENDED_MIN` to `CONTENDED_MAX`).
    contended_until: Option<Instant>,
    contended_for: Duration,
    last_stall: Option<Instant>,
}

/// A step plus scheduling noise this long is normal; anything longer is a stall.
const STALL_SLACK: Duration = Duration::from_millis(2);

/// Starts the engine thread of `hca`.
pub(crate) fn spawn(shared: Arc<Shared>, pages: Arc<DevicePages>, hca: &Arc<Hca>) -> std::io::Result<std::thread::JoinHandle<()>> {
    let sock = hca.socket().try_clone()?;
    let fd = sock.as_raw_fd();
    if !setsockopt_int(fd, libc::SO_RCVBUFFORCE, RCVBUF) {
        setsockopt_int(fd, libc::SO_RCVBUF, RCVBUF);
    }
    setsockopt_int(fd, libc::SO_SNDBUF, SNDBUF);
    // Coalesced runs from loopback peers (see super::tx): the receive side must take them
    // unsplit before the send side may produce them.
    let gso = super::tx::gso_allowed() && super::rx::enable_gro(&sock);
    let local = sock.local_addr()?;
    let cfg = hca.config();
    let fault = cfg.fault.filter(|f| f.is_active()).map(Injector::new);
    if let Some(f) = &cfg.fault {
        tracing::info!(target: "softhca::fault", addr = %cfg.addr, ?f, "fault injection");
    }
    let pcap = cfg.pcap.as_ref().map(|p| capture_path(p, cfg.addr));
    // Capture and faults are about the wire: an instance that asks for either keeps its
    // packets on it.
    let wire = if fault.is_some() || pcap.is_some() {
        if cfg.wire == Wire::Local {
            tracing::warn!(target: "softhca::link", "{}=local ignored: capture or fault injection keeps packets on UDP", super::link::WIRE_ENV);
        }
        Wire::Udp
    } else {
        cfg.wire
    };
    // Before the instance is returned: a peer's first packet must find the inbox.
    let (inbox, peers) = same_host_path(wire, local);
    if let Some(i) = &inbox {
        let _ = shared.awake.set(i.awake());
    }
    let (eth_if, eth_fanout) = (cfg.eth_if.clone(), cfg.eth_test_fanout);
    let weak = Arc::downgrade(hca);
    let name = format!("shca-{}", cfg.addr);
    let grace = timers::grace();
    std::thread::Builder::new().name(name).spawn(move || {
        let now = Instant::now();
        request_short_slice();
        // Short sleeps (the hold-off, transport timers) end on time, not 50 us late.
        // SAFETY: prctl(PR_SET_TIMERSLACK, ns) takes integers only.
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong, 0, 0, 0) };
        let trap = Trap::new(shared.clone(), pages);
        tracing::debug!(target: "softhca::engine", trap = trap.is_some(), grace_us = grace.as_micros() as u64, "idle mode");
        let capture = pcap.and_then(Capture::open);
        let capturing = capture.is_some();
        let fd = sock.as_raw_fd();
        let mut dp = Datapath::new(sock, local, Tx::new(local, fault, gso, peers), capture, inbox);
        if let Some(ifname) = &eth_if {
            // The flow tables (taken with no engine lock held: the firmware's lock comes first).
            let steering = weak.upgrade().map(|h| h.firmware().steering());
            match super::port::Port::open(ifname, local.ip(), steering, eth_fanout, Arc::downgrade(&shared)) {
                Ok(p) => dp.port = Some(p),
                Err(e) => tracing::warn!(target: "softhca::port", ifname = %ifname, "no ethernet port: {e}"),
            }
        }
        shared.lock().dp = Some(dp);
        let mut e = Engine {
            shared,
            hca: weak,
            sock: fd,
            local,
            capturing,
            last_work: now,
            sleep: SLEEP_MIN,
            last_clock: now,
            last_end: None,
            prev_top: None,
            intended: Duration::ZERO,
            rx_idle: false,
            trap,
            grace,
            trap_woken: false,
            contended_until: None,
            contended_for: timers::CONTENDED_MIN,
            last_stall: None,
        };
        e.run();
    })
}

/// The inbox and the peer table of the same-host path, unless `wire` turns it off or the
/// inbox cannot be made (then UDP only, said once).
fn same_host_path(wire: Wire, local: SocketAddr) -> (Option<Inbox>, Option<Peers>) {
    if wire == Wire::Udp {
        return (None, None);
    }
    match Inbox::create(local) {
        Ok(i) => (Some(i), Some(Peers::new(wire, local))),
        Err(e) => {
            tracing::warn!(target: "softhca::link", %local, "no same-host path (inbox: {e}); RoCEv2 over UDP only");
            (None, None)
        }
    }
}

/// `t`, or less if the transport `deadline` comes sooner.
fn capped(t: Duration, now: Instant, deadline: Option<Instant>) -> Duration {
    deadline.map_or(t, |d| t.min(d.saturating_duration_since(now)))
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
            let trapped = std::mem::take(&mut self.trap_woken) && self.serve_trap(now);
            if let Some(end) = self.last_end {
                let gap = now.duration_since(end).as_micros() as u64;
                self.shared.counters.gap_max_us.fetch_max(gap, Ordering::Relaxed);
            }
            let (work, deadline) = {
                let mut st = self.shared.lock();
                // Running: same-host senders need not wake us. (In polled mode the
                // application says so itself while it steps, see `Device::progress`.)
                if self.shared.polled.until(now).is_none() {
                    if let Some(a) = self.shared.awake.get() {
                        a.set(true);
                    }
                }
                if !stall.is_zero() {
                    for q in st.qps.values_mut() {
                        q.req.postpone(stall);
                    }
                }
                let skip_rx = std::mem::replace(&mut self.rx_idle, false);
                datapath::step_guarded(&hca, &mut st, &self.shared.counters, now, skip_rx, datapath::Flush::All)
            };
            if work || trapped {
                if let Some(t) = self.trap.as_mut().filter(|t| t.armed()) {
                    // A trapped store (served by the step just run), or work found by the
                    // re-check after arming or on a packet or timer while asleep: busy
                    // again, doorbells must not fault. A fresh timer goes into the clock
                    // page before it is readable again (and before a trapped clock reader
                    // is woken).
                    hca.update_clock();
                    self.last_clock = now;
                    t.disarm();
                }
            }
            // While the trap holds the clock page punched, a read brings the timer in.
            let clock_held = self.trap.as_ref().is_some_and(|t| t.armed() && t.clock_punched());
            if !clock_held && now.duration_since(self.last_clock) >= CLOCK_PERIOD {
                hca.update_clock();
                self.last_clock = now;
                if let Some(t) = self.trap.as_mut().filter(|t| !t.armed()) {
                    // A clock reader that found the page missing just before it came back
                    // queues its message after the disarm; it waits for an explicit wake.
                    t.drain();
                }
            }
            drop(hca);
            let end = Instant::now();
            self.shared.counters.step_max_us.fetch_max(end.duration_since(now).as_micros() as u64, Ordering::Relaxed);
            // Only gaps right after productive steps say something about scheduling.
            self.last_end = work.then_some(end);
            self.idle(work, deadline);
        }
        self.flush_capture();
        tracing::debug!(target: "softhca::engine", local = %self.local, "engine down");
    }

    /// Pushes captured packets to the file (before a sleep, and at exit).
    fn flush_capture(&self) {
        if self.capturing {
            if let Some(c) = self.shared.lock().dp.as_mut().and_then(|d| d.capture.as_mut()) {
                c.flush();
            }
        }
    }

    /// The trap's userfaultfd woke the engine: an application store hit a protected UAR
    /// page, or a read hit the punched clock page. Reads the messages (copying the
    /// trapped pages, see [`Trap::held`]) and returns whether there were any: the caller
    /// then runs a step (the doorbell record is already written) and only then lifts the
    /// protection. That order matters on a shared core: the disarm wakes the trapped
    /// thread, which may take the core from the engine for a whole time slice if it
    /// busy-polls; by then the doorbell has been served.
    fn serve_trap(&mut self, now: Instant) -> bool {
        let Some(t) = self.trap.as_mut() else { return false };
        if t.drain() == 0 {
            return false;
        }
        self.last_work = now;
        self.sleep = SLEEP_MIN;
        true
    }

    /// Between steps: step again at once after work; then, with the doorbell trap, poll
    /// for the grace period and arm the trap ([`Engine::idle_trapped`]); without it, yield
    /// for [`YIELD`] and then sleep in the timed backoff.
    fn idle(&mut self, work: bool, deadline: Option<Instant>) {
        let now = Instant::now();
        if work {
            self.last_work = now;
            self.sleep = SLEEP_MIN;
            return;
        }
        if let Some(until) = self.shared.polled.until(now) {
            return self.idle_polled(now, until, deadline);
        }
        let idle = now.duration_since(self.last_work);
        if idle < SPIN {
            std::hint::spin_loop();
            return;
        }
        let trapped = self.trap.as_ref().is_some_and(|t| t.usable());
        if trapped {
            return self.idle_trapped(now, idle, deadline);
        }
        if idle < YIELD {
            std::thread::yield_now();
            return;
        }
        let woke = self.nap(self.sock, None, Some(capped(self.sleep, now, deadline))).any();
        self.rx_idle = !woke;
        if woke {
            self.last_work = Instant::now();
            self.sleep = SLEEP_MIN;
        } else {
            let cap = if idle >= DEEP_IDLE_AFTER { SLEEP_DEEP } else { SLEEP_MAX };
            self.sleep = (self.sleep * 2).min(cap);
        }
    }

    /// Every sleep of the engine: the capture file brought up to date first, the time it
    /// means to sleep noted (what it loses beyond that is a stall; an unbounded sleep is
    /// none), and counted. See [`Shared::sleep`] for `sock`, `trap` and `timeout`.
    fn nap(&mut self, sock: RawFd, trap: Option<RawFd>, timeout: Option<Duration>) -> super::Woken {
        self.flush_capture();
        // Same-host senders wake us from now on; a record that came before they could
        // know ends the nap before it starts.
        if self.shared.awake.get().is_some_and(|a| a.sleep_check()) {
            return super::Woken { sock: true, ..Default::default() };
        }
        self.intended = timeout.unwrap_or(Duration::from_secs(1 << 20));
        self.shared.counters.sleeps.fetch_add(1, Ordering::Relaxed);
        self.shared.sleep(sock, trap, timeout)
    }

    /// Polled mode (see [`super::polled`]): an application thread steps the data path
    /// while it waits. Lift the trap (its doorbells must not fault) and sleep on the wake
    /// fd alone (not the socket: the application wakes for packets) until the window
    /// ends or a transport timer is due; then step once, as a safety net, and decide
    /// again.
    fn idle_polled(&mut self, now: Instant, until: Instant, deadline: Option<Instant>) {
        if let Some(t) = self.trap.as_mut().filter(|t| t.armed()) {
            t.disarm();
        }
        self.nap(-1, None, Some(capped(until.saturating_duration_since(now), now, deadline)));
        // The socket was not watched: whatever arrived is for the next step.
        self.rx_idle = false;
    }

    /// Idling with the doorbell trap:
    /// 1. the grace period: keep stepping, yielding in between, for [`timers::GRACE`]
    ///    after the last work. A doorbell rung then is seen by the next step without a
    ///    trap or a wake-up (on a small VM waking a thread on another core costs 15 to
    ///    150 us). Skipped for a while (100 ms, doubling up to 10 s while it keeps
    ///    happening) after a yield did not return within [`timers::YIELD_SLOW`]: an
    ///    application thread that busy-polls without ever yielding (perftest, a spin on a
    ///    CQ) then shares the core and keeps it for a whole time slice (milliseconds) each
    ///    time the engine yields.
    /// 2. while a trapped store may not have completed yet (the hold-off, see
    ///    [`Trap::held`]), sleep unarmed until a packet, a control-path change or the end
    ///    of the hold-off;
    /// 3. arm the trap and sleep until something happens. No timed polling here: an
    ///    engine that wakes every few microseconds runs ahead of its fair share, and the
    ///    scheduler stops letting its wake-ups preempt a busy-polling thread; one that
    ///    sleeps until an event is woken, and preempts, within microseconds (see
    ///    `request_short_slice`).
    fn idle_trapped(&mut self, now: Instant, idle: Duration, deadline: Option<Instant>) {
        let contended = self.contended_until.is_some_and(|c| now < c);
        if idle < self.grace && !contended {
            std::thread::yield_now();
            let back = Instant::now();
            if back.duration_since(now) > timers::YIELD_SLOW {
                // Another thread ran for a whole slice before this one got the core back:
                // polling by yielding only delays the work that thread waits for.
                let again = self.last_stall.is_some_and(|l| back.duration_since(l) < self.contended_for * 4);
                self.contended_for = if again {
                    (self.contended_for * 2).min(timers::CONTENDED_MAX)
                } else {
                    timers::CONTENDED_MIN
                };
                self.last_stall = Some(back);
                self.contended_until = Some(back + self.contended_for);
                self.shared.counters.yield_stalls.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        let Some(t) = self.trap.as_mut() else { return };
        let Some(left) = t.held(now) else { return self.sleep_on_trap(now, deadline) };
        // The thread whose store trapped was woken by the disarm but may not have run yet:
        // arming now would trap the same store again (and again, when the engine outruns
        // it on a busy core). Sleep unarmed, blocking, so it gets the CPU.
        let fd = t.fd();
        let w = self.nap(self.sock, Some(fd), Some(capped(left, now, deadline)));
        self.rx_idle = !w.sock;
        self.trap_woken = w.trap;
    }

    /// Arms the trap and returns for the re-check step, or (armed, re-checked) sleeps.
    ///
    /// The race this closes: an application writes a doorbell record, then stores to its
    /// UAR page. If that store traps, the engine wakes. If it completed before the
    /// protection took effect, it was made through a writable translation that
    /// `UFFDIO_WRITEPROTECT` removed: the ioctl changes the page table entries under the
    /// page-table lock and flushes the TLB of every CPU running the application before it
    /// returns, which completes that store; the doorbell record store came before it in
    /// program order (the providers order them with a release fence, and x86 keeps stores
    /// in order), so it is visible too. The step after arming reads every doorbell record
    /// and CQ arm word with acquire loads and therefore sees it. Either way no doorbell is
    /// slept through; a store between the arm and the re-check is seen twice (harmless).
    fn sleep_on_trap(&mut self, now: Instant, deadline: Option<Instant>) {
        let Some(t) = self.trap.as_mut() else { return };
        if !t.armed() || t.has_new(now) {
            t.arm();
            return;
        }
        let mut timeout = deadline.map(|d| d.saturating_duration_since(now));
        if t.clock_needs_tick() {
            timeout = Some(timeout.map_or(SLEEP_DEEP, |x| x.min(SLEEP_DEEP)));
        }
        if let Some(due) = t.sweep_due() {
            // Mappings are expected that may bypass the kernel half (see
            // `super::trap_scan`): look again then.
            let d = due.saturating_duration_since(now);
            timeout = Some(timeout.map_or(d, |x| x.min(d)));
        }
        let fd = t.fd();
        tracing::trace!(target: "softhca::engine", ?timeout, "sleep (armed)");
        let w = self.nap(self.sock, Some(fd), timeout);
        tracing::trace!(target: "softhca::engine", ?w, "woken");
        self.rx_idle = !w.sock;
        self.trap_woken = w.trap;
    }
}
