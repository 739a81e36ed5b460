//! The device half: the ConnectX.
//!
//! One engine thread per HCA ([`engine`]) watches the doorbell records of every live QP
//! and the arm words of every CQ, fetches send WQEs from the application's queue buffers
//! ([`wqe`], [`requester`]), speaks RoCEv2 over the instance's UDP socket ([`tx`], [`rx`],
//! [`crate::wire`]), executes incoming requests against registered memory ([`responder`],
//! [`mkey`]), and writes CQEs ([`cqe`]) and completion events ([`events`]) exactly as a
//! ConnectX would, so an unmodified mlx5 provider cannot tell the difference.
//!
//! Module map:
//! - [`engine`]: the device thread and how it idles; [`datapath`]: the socket and the
//!   step it runs; [`trap`]: the doorbell trap (write-protected UAR pages,
//!   userfaultfd) that wakes it; [`polled`]: polled mode, where an application thread
//!   that waits for completions runs the step itself ([`Device::progress`]);
//! - [`qp`]: per-QP device context (state as the hardware acts on it, ERR and flush);
//! - [`requester`]: WQE fetch (SQ doorbell), packetization, ACK/NAK/response handling,
//!   go-back-N, ACK and RNR timers; [`responder`]: request execution, duplicates,
//!   coalesced ACKs, READ response streams, atomics;
//! - [`ud`]: Unreliable Datagram SEND/SEND_WITH_IMM (one packet, no ACKs);
//! - [`wqe`]: softhca's own decoder of mlx5 send/receive WQEs; [`mkey`]: key checks and
//!   gather/scatter; `mem`: the only raw accesses to application memory; [`stage`]: the
//!   host staging buffers through which the data path batches accesses to peer memory
//!   (GPU memory, [`crate::peer`]);
//! - [`cqe`]: the CQE writer; [`events`]: CQ arming, completion and async events;
//! - [`link`]: the same-host path (another instance of this host: shared-memory inbox,
//!   one `process_vm_readv` per batch of payload instead of the UDP stack);
//! - [`tx`]/[`rx`]: `sendmmsg`/`recvmmsg` batching; [`fault`]: fault injection
//!   (`DOORBELL_FAULT`); [`trace`]: pcap capture (`DOORBELL_PCAP`) and the tracing targets
//!   (`RUST_LOG=provider=trace,softhca=trace` follows one RDMA WRITE through every layer);
//! - [`timers`]: ACK timeout formula and backoff constants; [`psn`]: 24-bit arithmetic;
//!   [`counters`]: what [`Device::counters`] reports.
//!
//! What the device half can rely on when a hook runs (the kernel half's promises):
//! - The object is already in the HCA's tables ([`crate::Hca::qp`], [`crate::Hca::cq`],
//!   [`crate::Hca::mr_by_key`]) on creation and removed before the destroy hook.
//! - `qp_modified` runs after the new attributes are stored in `Qp::attrs`, with the
//!   kernel half's per-file lock held (no concurrent modify of the same QP).
//! - Destroy hooks run before the CQ/QP memory may be freed by the application: after
//!   they return, the device half must not touch the object's buffers again.
//!
//! And what the device half promises in return: every hook takes the engine lock, which
//! the engine holds for a whole step, so when a destroy or deregistration hook returns no
//! access to that object's memory is in flight and none will start (the engine forgets
//! the QP/CQ, and resolves memory keys afresh under the lock for every access).
//!
//! CQ overrun (a CQE due while the ring is full, judged by the consumer index in the CQ
//! doorbell record): the CQE is not written, the CQ goes to error (one CQ_ERR async
//! event, no further CQEs), and the QP whose completion overran moves to ERR with a
//! QP_FATAL event. UC QPs carry SEND and RDMA WRITE (`uc.rs`: no acknowledgements, a
//! lost packet loses its message). A QP on a shared receive queue takes each message's
//! receive WQE from the SRQ (`srq.rs`). Unsupported here: other QP types (their send WQEs
//! complete with LOCAL_QP_OP_ERR), SEND_WITH_INVALIDATE, memory windows.

pub mod counters;
pub mod cqe;
pub mod datapath;
pub mod engine;
pub mod events;
pub mod fault;
pub mod link;
mod mem;
pub mod mkey;
pub mod polled;
pub mod port;
pub mod psn;
pub mod qp;
pub mod requester;
pub mod responder;
pub mod rx;
pub mod sport;
mod srq;
pub mod steer;
pub mod stage;
pub mod timers;
pub mod trace;
pub mod trap;
pub mod trap_owners;
pub mod trap_scan;
pub mod tx;
mod uc;
pub mod ud;
pub mod wqe;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::hca::Hca;
use crate::objects::{Cq, Mr, Qp, QpState};
use crate::pages::DevicePages;

pub use counters::Snapshot as CounterSnapshot;
pub use fault::FaultSpec;
pub use trap::MapKind;

use cqe::CqCtx;
use qp::QpCtx;

/// The device's view of every live QP and CQ, and the data path that steps them.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub qps: BTreeMap<u32, QpCtx>,
    pub cqs: HashMap<u32, CqCtx>,
    /// The raw packet QP behind each TIR ([`port::deliver_to_tir`]).
    pub tirs: port::Tirs,
    /// Set when the engine starts.
    pub dp: Option<datapath::Datapath>,
}

/// What the hooks and the engine thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    pub counters: counters::Counters,
    /// An eventfd that ends the engine's sleep.
    wake: OwnedFd,
    pub stop: AtomicBool,
    /// The doorbell trap's registrations (see [`trap`]).
    pub trap: trap::TrapShared,
    /// Polled mode's window and the trap's state (see [`polled`]).
    pub polled: polled::Polled,
    /// The same-host inbox's `awake` word, once the engine made the inbox ([`link`]).
    pub awake: std::sync::OnceLock<link::Awake>,
}

/// Which descriptors ended a [`Shared::sleep`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Woken {
    pub sock: bool,
    pub wake: bool,
    pub trap: bool,
}

impl Woken {
    pub fn any(&self) -> bool {
        self.sock || self.wake || self.trap
    }
}

impl Shared {
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes the engine if it sleeps.
    pub fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writing 8 bytes from a live buffer to our eventfd.
        unsafe { libc::write(self.wake.as_raw_fd(), one.as_ptr().cast(), 8) };
    }

    /// Sleeps until `sock` is readable, the wake fd fires, the trap's userfaultfd has a
    /// message (`trap`), or `timeout` passes (None: no timeout). Returns what woke it.
    /// A negative `sock` is not watched (`ppoll` skips negative descriptors).
    pub fn sleep(&self, sock: RawFd, trap: Option<RawFd>, timeout: Option<Duration>) -> Woken {
        let mut fds = [
            libc::pollfd { fd: sock, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: trap.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        let nfds = if trap.is_some() { 3 } else { 2 };
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `nfds` initialised pollfds and a timespec (or null: no timeout), alive
        // for the call.
        let n = unsafe { libc::ppoll(fds.as_mut_ptr(), nfds, tsp, std::ptr::null()) };
        if n <= 0 {
            return Woken::default();
        }
        let w = Woken { sock: fds[0].revents != 0, wake: fds[1].revents != 0, trap: fds[2].revents != 0 };
        if w.wake {
            let mut b = [0u8; 8];
            // SAFETY: reading 8 bytes into a live buffer from our non-blocking eventfd.
            unsafe { libc::read(self.wake.as_raw_fd(), b.as_mut_ptr().cast(), 8) };
        }
        w
    }
}

/// The device half of one HCA.
pub struct Device {
    shared: Arc<Shared>,
    pages: Arc<DevicePages>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device").field("counters", &self.shared.counters.snapshot()).finish_non_exhaustive()
    }
}

impl Device {
    /// A device half whose engine is not running yet (`Hca::new` starts it).
    pub fn new(pages: Arc<DevicePages>) -> io::Result<Device> {
        // SAFETY: eventfd has no memory preconditions.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a new descriptor nothing else owns.
        let wake = unsafe { OwnedFd::from_raw_fd(fd) };
        let shared = Shared {
            state: Mutex::new(State::default()),
            counters: Default::default(),
            wake,
            stop: AtomicBool::new(false),
            trap: Default::default(),
            polled: Default::default(),
            awake: Default::default(),
        };
        Ok(Device { shared: Arc::new(shared), pages, thread: Mutex::new(None) })
    }

    /// Starts the engine thread for `hca` (once), with the doorbell trap if the
    /// configuration asks for it and the kernel has it.
    pub(crate) fn start(&self, hca: &Arc<Hca>) -> io::Result<()> {
        let mut t = self.thread.lock().unwrap_or_else(|p| p.into_inner());
        if t.is_none() {
            // Before the thread starts, so the engine finds the trap; before any mmap, so
            // every mapping is registered.
            self.shared.trap.open(hca.config().doorbell_trap);
            *t = Some(engine::spawn(self.shared.clone(), self.pages.clone(), hca)?);
        }
        Ok(())
    }

    /// Whether the engine sleeps on the doorbell trap (false: timed backoff).
    pub fn doorbell_trap(&self) -> bool {
        self.shared.trap.active()
    }

    /// The kernel half mapped device page `page` into the application at
    /// `[addr, addr + len)` (mmap of the uverbs fd): registers the mapping with the
    /// doorbell trap, and wakes the engine so it protects it before sleeping again.
    pub fn user_mapped(&self, kind: MapKind, page: u32, addr: u64, len: usize) {
        if self.shared.trap.register(kind, page, addr, len as u64) {
            self.shared.wake();
        }
    }

    /// The kernel half handed out device pages a program will map: UAR pages `uars`, and
    /// (`clock`) a new context that maps the clock page. The doorbell trap then looks for
    /// their mappings even if they never reach [`Device::user_mapped`] (see
    /// [`trap_scan`]).
    pub fn expect_mappings(&self, uars: &[u32], clock: bool) {
        if self.shared.trap.expect(uars, clock) {
            self.shared.wake();
        }
    }

    /// Polled mode (see [`polled`]): runs one data-path step in the calling thread unless
    /// another thread is stepping (it never waits for the engine lock), and keeps the
    /// engine thread in the background for [`polled::WINDOW`]. Returns whether the step
    /// did anything. When the step wrote completions, the acknowledgements it built may
    /// wait for the next step (`datapath::Flush::DeferAcks`): the caller is expected to
    /// handle the completions and call again (the engine thread sends them otherwise,
    /// within the window).
    pub fn progress(&self, hca: &Hca) -> bool {
        let now = Instant::now();
        if self.shared.polled.enter(now) {
            self.shared.wake();
        }
        let mut st = match self.shared.state.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return false,
        };
        // The caller steps: same-host senders need not wake it (until `before_wait`).
        if let Some(a) = self.shared.awake.get() {
            a.set(true);
        }
        let skip_rx = st.dp.as_mut().is_some_and(|dp| !dp.polled_rx());
        let (work, _) = datapath::step_guarded(hca, &mut st, &self.shared.counters, now, skip_rx, datapath::Flush::DeferAcks);
        if work {
            self.shared.counters.progress_steps.fetch_add(1, Ordering::Relaxed);
        }
        work
    }

    /// Polled mode: the caller is about to block on the socket until something arrives.
    /// Returns false when something already has (a same-host record that came while
    /// senders took the caller for awake): step instead of sleeping.
    pub fn before_wait(&self) -> bool {
        self.shared.awake.get().is_none_or(|a| !a.sleep_check())
    }

    /// The device counters now.
    pub fn counters(&self) -> CounterSnapshot {
        self.shared.counters.snapshot()
    }

    /// The live counters, for code that has the HCA but no engine step's environment
    /// (the peer memory accesses in [`mkey`]).
    pub(crate) fn live_counters(&self) -> &counters::Counters {
        &self.shared.counters
    }

    /// A CQ was created (its CQC is complete).
    pub fn cq_created(&self, cq: &Arc<Cq>) {
        tracing::trace!(target: "softhca::device", cqn = cq.cqn, "cq created");
        // The arm register's current value, so an earlier arm on a reused page is not
        // taken for one of this CQ's.
        let reg = self.pages.read_u64(cq.uar_page, events::ARM_REG);
        let mut st = self.shared.lock();
        st.cqs.insert(cq.cqn, CqCtx::new(cq.clone(), reg));
    }

    /// A CQ is being destroyed: stop writing CQEs to it.
    pub fn cq_destroyed(&self, cq: &Arc<Cq>) {
        tracing::trace!(target: "softhca::device", cqn = cq.cqn, "cq destroyed");
        self.shared.lock().cqs.remove(&cq.cqn);
    }

    /// A QP was created (state RESET).
    pub fn qp_created(&self, qp: &Arc<Qp>) {
        tracing::trace!(target: "softhca::device", qpn = qp.qpn, "qp created");
        let mut st = self.shared.lock();
        if let Some(tirn) = qp.raw.and_then(|r| r.tirn) {
            st.tirs.insert(tirn, qp.qpn);
        }
        st.qps.insert(qp.qpn, QpCtx::new(qp.clone()));
    }

    /// MODIFY_QP moved a QP from `from` to `to` (possibly the same state, when only
    /// attributes changed). Entering RTR starts receive processing, RTS send processing;
    /// RESET and ERR stop them (ERR flushes outstanding WQEs with error CQEs).
    pub fn qp_modified(&self, qp: &Arc<Qp>, from: QpState, to: QpState) {
        tracing::trace!(target: "softhca::device", qpn = qp.qpn, ?from, ?to, "qp modified");
        {
            let mut st = self.shared.lock();
            if let Some(q) = st.qps.get_mut(&qp.qpn) {
                let attrs = qp.attrs();
                q.modified(attrs, from);
            }
        }
        self.shared.wake();
    }

    /// A QP is being destroyed: stop processing its queues and forget its connection.
    pub fn qp_destroyed(&self, qp: &Arc<Qp>) {
        tracing::trace!(target: "softhca::device", qpn = qp.qpn, "qp destroyed");
        let mut st = self.shared.lock();
        if let Some(tirn) = qp.raw.and_then(|r| r.tirn) {
            st.tirs.remove(&tirn);
        }
        st.qps.remove(&qp.qpn);
    }

    /// An MR was registered or is being deregistered. In-flight operations that already
    /// resolved the key may finish; new lookups fail once it is gone.
    pub fn mr_registered(&self, mr: &Arc<Mr>) {
        tracing::trace!(target: "softhca::device", lkey = %format_args!("{:#x}", mr.span.lkey), "mr registered");
    }

    /// See [`Device::mr_registered`]. Returns once no engine step that might still use
    /// the MR's memory is running (the MR is already out of the key table), and once
    /// every same-host peer has taken the records that refer to our memory, which it
    /// copies when it takes them (at most [`link::DEREG_WAIT`]; see
    /// [`link::wait_consumed`]).
    pub fn mr_deregistered(&self, mr: &Arc<Mr>) {
        tracing::trace!(target: "softhca::device", lkey = %format_args!("{:#x}", mr.span.lkey), "mr deregistered");
        let marks = {
            let mut st = self.shared.lock();
            st.dp.as_mut().map(|dp| dp.tx.deregistering(&self.shared.counters)).unwrap_or_default()
        };
        link::wait_consumed(&marks, link::DEREG_WAIT);
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake();
        let t = self.thread.get_mut().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = t {
            // The last reference to the HCA may be dropped by the engine itself.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}
