//! The same-host path: how two softhca instances on one host exchange packets without the
//! kernel's UDP stack, as a ConnectX loops traffic between two of its QPs back inside the
//! adapter instead of putting it on the wire.
//!
//! What still happens: the whole RC/UC/UD protocol. Requester and responder build and
//! parse the same packets (BTH, RETH, AETH, PSNs, ACKs, NAKs, RNR, retries, timeouts), so
//! every promise of the transport and every error path is the one the RoCEv2 path has.
//! What goes away:
//! - the socket: packets go into the peer's [`inbox`] (shared memory, one lane per
//!   sending instance), with no system call when the peer's data path is running;
//! - the ICRC (nothing corrupts shared memory; a ConnectX does not compute it for
//!   loopback either);
//! - all but one copy of the payload: a packet whose payload lies in the sender's
//!   registered memory carries a reference to it, and the receiver copies it straight
//!   into the destination MR after its key checks ([`copy`], `process_vm_readv`). Small
//!   payloads (at most [`INLINE_MAX`] bytes), UD payloads and staged (peer memory)
//!   payloads travel inline in the record;
//! - most of the per-packet bookkeeping: a run of packets of one long SEND or WRITE goes
//!   as one record ([`burst`]), which the receiver hands to the QP as the packets it
//!   stands for.
//!
//! When: `DOORBELL_WIRE` (or [`crate::Config::wire`]): `udp` never, `local` for every
//! peer (a packet to a peer without an inbox is dropped and counted: forced means
//! forced, which tests rely on), `auto` (the default) for every peer that has an inbox:
//! another softhca instance of this host, in the same network namespace (the inbox is
//! named after it, so instances in different namespaces talk RoCEv2 over their veths),
//! running with the same user. Capture (`DOORBELL_PCAP`) or fault injection
//! (`DOORBELL_FAULT`) on an instance turn its same-host path off: both are about the wire.
//!
//! Wake-ups: the receiver's engine sets its inbox's `awake` word while it runs and clears
//! it just before it sleeps on its socket, then looks at its lanes once more; a sender
//! publishes its records, then reads `awake`, and when it is clear sends one zero-length
//! datagram to the peer's socket, which ends the sleep. Both sides use sequentially
//! consistent accesses for that pair of store and load, so at least one of them sees the
//! other (no record slept through). In polled mode the application, not the engine,
//! sleeps on the socket; the word stays clear then, and every flush wakes.

pub mod burst;
pub mod copy;
pub mod inbox;

use std::fs::{File, OpenOptions};
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use copy::RemoteRef;
use inbox::{kind, Mapped, Producer, RecordHead};

/// Payloads up to this size travel inline (a reference costs the receiver a system call).
pub const INLINE_MAX: usize = 512;
/// The environment variable that picks the path.
pub const WIRE_ENV: &str = "DOORBELL_WIRE";
/// How long a peer lookup's answer is trusted before it is checked again (a `stat` and a
/// `kill(pid, 0)`): well inside an RC retry budget, so a peer process replaced by a new
/// one at the same address is found before its QPs' retries run out.
const RECHECK: Duration = Duration::from_millis(10);
/// Records taken from one lane per step (bounds a step's length).
pub const LANE_BUDGET: usize = 256;
/// The longest a deregistration waits for peers to take records that refer to our
/// memory ([`wait_consumed`]): a live peer's engine takes them within a step; a peer
/// stepped only by a thread that is itself waiting here never does.
pub const DEREG_WAIT: Duration = Duration::from_millis(200);

/// Which path packets take to same-host peers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Wire {
    /// RoCEv2 over UDP only.
    Udp,
    /// The same-host path for every peer.
    Local,
    /// The same-host path where the peer has an inbox, RoCEv2 otherwise.
    #[default]
    Auto,
}

impl Wire {
    /// `DOORBELL_WIRE`; unset is `auto`, anything unknown is `auto` with a warning.
    pub fn from_env() -> Wire {
        match std::env::var(WIRE_ENV) {
            Err(_) => Wire::Auto,
            Ok(v) => Wire::parse(&v).unwrap_or_else(|| {
                tracing::warn!(target: "softhca::link", "{WIRE_ENV}={v}: expected udp, local or auto; using auto");
                Wire::Auto
            }),
        }
    }

    pub fn parse(v: &str) -> Option<Wire> {
        match v.trim().to_ascii_lowercase().as_str() {
            "udp" => Some(Wire::Udp),
            "local" => Some(Wire::Local),
            "auto" | "" => Some(Wire::Auto),
            _ => None,
        }
    }
}

/// The network namespace this process is in (its inode), which inbox names carry.
fn netns() -> u64 {
    std::fs::metadata("/proc/self/ns/net").map(|m| m.ino()).unwrap_or(0)
}

/// Where the inbox of the instance at `addr` is.
pub fn inbox_path(netns: u64, addr: SocketAddr) -> PathBuf {
    PathBuf::from(format!("/dev/shm/doorbell-link-{netns}-{}-{}", addr.ip(), addr.port()))
}

fn alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    pid != 0 && (unsafe { libc::kill(pid as libc::pid_t, 0) } == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// Removes the inboxes of processes that died without removing them (killed ranks): their
/// touched pages would otherwise stay in /dev/shm. Files younger than a few seconds are
/// left alone (one may be in the middle of its creation, its owner not yet written).
fn sweep() {
    use std::os::unix::fs::FileExt;
    let Ok(dir) = std::fs::read_dir("/dev/shm") else { return };
    for e in dir.flatten() {
        if !e.file_name().to_string_lossy().starts_with("doorbell-link-") {
            continue;
        }
        let Ok(meta) = e.metadata() else { continue };
        if meta.modified().ok().and_then(|m| m.elapsed().ok()).is_none_or(|age| age < Duration::from_secs(5)) {
            continue;
        }
        let Ok(f) = File::open(e.path()) else { continue };
        let mut w = [0u8; 16];
        if f.read_exact_at(&mut w, 0).is_err() || u64::from_ne_bytes(w[..8].try_into().unwrap()) != inbox::MAGIC {
            continue;
        }
        let pid = u32::from_ne_bytes(w[12..16].try_into().unwrap());
        if !alive(pid) {
            tracing::debug!(target: "softhca::link", path = %e.path().display(), pid, "stale inbox removed");
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// This instance's inbox: created when the data path starts, removed when it stops.
pub struct Inbox {
    path: PathBuf,
    map: Arc<Mapped>,
    file: File,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox").field("path", &self.path).finish()
    }
}

impl Inbox {
    /// Creates the inbox of the instance at `local` (replacing one a dead process left).
    pub fn create(local: SocketAddr) -> io::Result<Inbox> {
        sweep();
        let path = inbox_path(netns(), local);
        let _ = std::fs::remove_file(&path);
        let file = OpenOptions::new().read(true).write(true).create_new(true).mode(0o600).open(&path)?;
        file.set_len(inbox::FILE_LEN as u64)?;
        let map = Mapped::new(&file)?;
        let h = map.header();
        h.version.store(inbox::VERSION, Ordering::Relaxed);
        h.owner_pid.store(std::process::id(), Ordering::Relaxed);
        h.self_addr.store(map.base(), Ordering::Relaxed);
        h.awake.store(1, Ordering::Relaxed);
        // Last: a peer that sees the magic sees the rest.
        h.magic.store(inbox::MAGIC, Ordering::Release);
        tracing::debug!(target: "softhca::link", path = %path.display(), "inbox up");
        Ok(Inbox { path, map: Arc::new(map), file })
    }

    /// The inbox's `awake` word, for whoever steps the data path or sleeps on the socket
    /// (the engine thread, or the application in polled mode).
    pub fn awake(&self) -> Awake {
        Awake(self.map.clone())
    }

    /// Hands every record waiting in the lanes to `f(Some((source, record)))`, at most
    /// [`LANE_BUDGET`] per lane, and `f(None)` after each lane's batch, before its space
    /// is released. Returns how many records there were.
    pub fn drain(&mut self, mut f: impl FnMut(Option<(SocketAddr, &inbox::Record<'_>)>)) -> usize {
        let claimed = self.map.header().claimed.load(Ordering::Acquire);
        let mut n = 0;
        for i in claimed_lanes(claimed) {
            let lane = self.map.lane(i);
            // Pairs with the producer's release: the records up to `tail` are visible.
            let tail = lane.tail.load(Ordering::Acquire);
            // Only this consumer moves `head`.
            let mut pos = lane.head.load(Ordering::Relaxed);
            if pos == tail {
                continue;
            }
            let src = inbox::source::unpack([0, 1, 2].map(|k| lane.src[k].load(Ordering::Relaxed)));
            let mut taken = 0;
            while pos < tail && taken < LANE_BUDGET {
                match inbox::read(&self.map, i, pos, tail) {
                    Some((rec, next)) => {
                        if let (Some(r), Some(src)) = (rec, src) {
                            f(Some((src, &r)));
                            taken += 1;
                        }
                        pos = next;
                    }
                    None => {
                        tracing::warn!(target: "softhca::link", lane = i, pos, tail, "malformed record: lane dropped");
                        pos = tail;
                    }
                }
            }
            f(None);
            n += taken;
            // The records' bytes are no longer read (the end of the batch wrote out its
            // copies): the producer may reuse the space.
            lane.head.store(pos, Ordering::Release);
        }
        n
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.map.header().owner_pid.store(0, Ordering::SeqCst);
        // Only our own file: a new instance at the same address (its socket bound once
        // ours closed) may already have put its inbox there.
        let ours = self.file.metadata().map(|m| m.ino()).ok();
        if std::fs::metadata(&self.path).ok().map(|m| m.ino()) == ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The lanes a `claimed` mask names, lowest first: only the set bits are visited (an
/// instance with one peer looks at one lane per step, not at [`inbox::LANES`]).
fn claimed_lanes(claimed: u64) -> impl Iterator<Item = usize> {
    let mut m = claimed & (u64::MAX >> (64 - inbox::LANES));
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let i = m.trailing_zeros() as usize;
            m &= m - 1;
            i
        })
    })
}

/// The `awake` word of an inbox and the look at its lanes that goes with clearing it.
#[derive(Clone)]
pub struct Awake(Arc<Mapped>);

impl std::fmt::Debug for Awake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Awake")
    }
}

impl Awake {
    /// Says the data path will look at the lanes again without a wake-up (`true`).
    pub fn set(&self, on: bool) {
        let w = &self.0.header().awake;
        if (w.load(Ordering::Relaxed) != 0) != on {
            w.store(on as u32, Ordering::SeqCst);
        }
    }

    /// Clears the word, then says whether any lane holds records (then do not sleep: a
    /// sender may have read the word before it was cleared). Sequentially consistent
    /// store, then loads (see the module docs).
    pub fn sleep_check(&self) -> bool {
        self.0.header().awake.store(0, Ordering::SeqCst);
        let claimed = self.0.header().claimed.load(Ordering::SeqCst);
        claimed_lanes(claimed).any(|i| {
            let l = self.0.lane(i);
            l.tail.load(Ordering::SeqCst) != l.head.load(Ordering::SeqCst)
        })
    }
}

/// A peer's inbox, as a sender sees it.
struct Peer {
    /// Shared with [`RefMark`]s, which outlive the engine lock.
    map: Arc<Mapped>,
    ino: u64,
    lane: Option<Producer>,
    /// Large payloads may go as references (the peer can read our memory).
    refs: bool,
    /// Records pushed since the last wake check.
    pushed: bool,
    /// The lane's tail just after the last record that refers to our memory (REMOTE or
    /// BURST): the peer has copied every such payload once its head is there.
    ref_tail: u64,
}

/// Where a peer's consumption must reach before memory our records referred to may go
/// ([`Peers::ref_marks`], [`wait_consumed`]).
#[derive(Debug, Clone)]
pub struct RefMark {
    map: Arc<Mapped>,
    lane: usize,
    upto: u64,
}

/// Waits (at most `limit`) until every peer of `marks` has taken the records up to its
/// mark, or is gone. Why: a record that refers to a payload is copied by the receiver
/// when it takes it, which may be after the sending WQE was flushed (its QP destroyed)
/// and the application deregistered and freed the buffer; a ConnectX never reads a
/// flushed WQE's memory again, so neither may a peer. Deregistration waits here
/// (`Device::mr_deregistered`); a peer that does not take its records in time (asleep
/// in the same thread, or stuck) is logged and not waited for longer.
pub fn wait_consumed(marks: &[RefMark], limit: Duration) {
    if marks.is_empty() {
        return;
    }
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let pending = marks.iter().filter(|m| {
            let h = m.map.header();
            let owner = h.owner_pid.load(Ordering::Acquire);
            alive(owner) && m.map.lane(m.lane).head.load(Ordering::Acquire) < m.upto
        }).count();
        if pending == 0 {
            return;
        }
        if start.elapsed() >= limit {
            tracing::debug!(target: "softhca::link", pending, "peers did not take records that refer to memory being deregistered");
            return;
        }
        spins += 1;
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// What a push did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushed {
    Done,
    /// The lane is full: the packet is dropped (the transport retransmits).
    Full,
    /// No same-host path to that peer: send it over UDP (or drop, when forced).
    NoPath,
}

/// A map keyed by peer address, as a vector: an instance talks to a handful of peers, and
/// the transmit path looks one up per packet (a linear scan of a few entries costs less
/// than hashing the address).
#[derive(Debug)]
struct ByPeer<V>(Vec<(SocketAddr, V)>);

impl<V> Default for ByPeer<V> {
    fn default() -> Self {
        ByPeer(Vec::new())
    }
}

impl<V> ByPeer<V> {
    fn get(&self, k: SocketAddr) -> Option<&V> {
        self.0.iter().find(|(a, _)| *a == k).map(|(_, v)| v)
    }

    fn get_mut(&mut self, k: SocketAddr) -> Option<&mut V> {
        self.0.iter_mut().find(|(a, _)| *a == k).map(|(_, v)| v)
    }

    fn insert(&mut self, k: SocketAddr, v: V) {
        match self.get_mut(k) {
            Some(old) => *old = v,
            None => self.0.push((k, v)),
        }
    }

    fn remove(&mut self, k: SocketAddr) -> Option<V> {
        let i = self.0.iter().position(|(a, _)| *a == k)?;
        Some(self.0.swap_remove(i).1)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (&SocketAddr, &mut V)> {
        self.0.iter_mut().map(|(a, v)| (&*a, v))
    }

    fn keys(&self) -> impl Iterator<Item = &SocketAddr> {
        self.0.iter().map(|(a, _)| a)
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// The transmit side's view of same-host peers.
pub struct Peers {
    wire: Wire,
    netns: u64,
    local: SocketAddr,
    /// `pid << 32 | serial`: this instance as a lane owner.
    me: u64,
    peers: ByPeer<Lookup>,
    pid: u32,
}

/// The last lookup of a peer's inbox: when, and what it found (None: no same-host path).
struct Lookup {
    checked: Instant,
    peer: Option<Peer>,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peers").field("wire", &self.wire).field("peers", &self.peers.len()).finish()
    }
}

static SERIAL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);

impl Peers {
    pub fn new(wire: Wire, local: SocketAddr) -> Peers {
        let pid = std::process::id();
        let me = (pid as u64) << 32 | SERIAL.fetch_add(1, Ordering::Relaxed) as u64;
        Peers { wire, netns: netns(), local, me, peers: ByPeer::default(), pid }
    }

    pub fn wire(&self) -> Wire {
        self.wire
    }

    /// Whether every peer this instance has sent to is reached through its inbox (and at
    /// least one is known): then the socket carries only wake-ups and the first packets of
    /// peers not yet sent to, and polled steps may read it less often.
    pub fn all_same_host(&self) -> bool {
        self.wire != Wire::Udp && !self.peers.0.is_empty() && self.peers.0.iter().all(|(_, l)| l.peer.is_some())
    }

    /// This process's id (read once: `getpid` is a system call in glibc, and the
    /// transmit path names the process in every by-reference record).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Whether `dst` was found to have a same-host path (no lookup: the transmit path asks
    /// per packet, before the flush that routes it).
    pub fn known(&self, dst: SocketAddr) -> bool {
        self.peers.get(dst).is_some_and(|l| l.peer.is_some())
    }

    /// Whether `dst` was found to have a same-host path on which payloads go by reference
    /// (no lookup, as [`Peers::known`]): where runs of packets may go as bursts.
    pub fn known_by_ref(&self, dst: SocketAddr) -> bool {
        self.peers.get(dst).and_then(|l| l.peer.as_ref()).is_some_and(|p| p.refs)
    }

    /// Whether packets to `dst` take the same-host path, and if so whether large
    /// payloads may go as references.
    pub fn route(&mut self, dst: SocketAddr, now: Instant) -> Option<bool> {
        if self.wire == Wire::Udp {
            return None;
        }
        let stale = self.peers.get(dst).is_none_or(|l| {
            // An owner that closed its inbox cleared its pid: no need to wait.
            now.duration_since(l.checked) >= RECHECK || l.peer.as_ref().is_some_and(|p| p.map.header().owner_pid.load(Ordering::Relaxed) == 0)
        });
        if stale {
            self.refresh(dst, now);
        }
        self.peers.get(dst).and_then(|l| l.peer.as_ref()).map(|p| p.refs)
    }

    /// Looks `dst`'s inbox up again: a new one (the peer restarted), a dead owner (gone),
    /// or none.
    fn refresh(&mut self, dst: SocketAddr, now: Instant) {
        let path = inbox_path(self.netns, dst);
        let meta = std::fs::metadata(&path).ok();
        if let Some(l) = self.peers.get_mut(dst) {
            let same = l.peer.as_ref().is_some_and(|p| meta.as_ref().is_some_and(|m| m.ino() == p.ino)
                && alive(p.map.header().owner_pid.load(Ordering::Relaxed)));
            if same {
                l.checked = now;
                return;
            }
        }
        self.forget(dst);
        let peer = meta.and_then(|m| self.open(&path, m.ino()).ok().flatten());
        self.peers.insert(dst, Lookup { checked: now, peer });
    }

    fn open(&self, path: &std::path::Path, ino: u64) -> io::Result<Option<Peer>> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        if file.metadata()?.len() < inbox::FILE_LEN as u64 {
            return Ok(None);
        }
        let map = Arc::new(Mapped::new(&file)?);
        let h = map.header();
        if h.magic.load(Ordering::Acquire) != inbox::MAGIC || h.version.load(Ordering::Relaxed) != inbox::VERSION {
            return Ok(None);
        }
        let pid = h.owner_pid.load(Ordering::Relaxed);
        if !alive(pid) {
            return Ok(None);
        }
        // Can the two processes read each other's memory? Tried on the peer's mapping of
        // its own inbox header (same user and no ptrace restriction: yes).
        let refs = pid == self.pid || {
            let mut word = 0u64;
            let mut c = copy::Copies::new();
            c.read_now(RemoteRef { pid, addr: h.self_addr.load(Ordering::Relaxed), len: 8 }, zerocopy::IntoBytes::as_mut_bytes(&mut word))
                && word == inbox::MAGIC
        };
        tracing::debug!(target: "softhca::link", path = %path.display(), pid, refs, "same-host peer");
        Ok(Some(Peer { map, ino, lane: None, refs, pushed: false, ref_tail: 0 }))
    }

    /// Gives up our lane in `dst`'s inbox.
    fn forget(&mut self, dst: SocketAddr) {
        if let Some(Lookup { peer: Some(p), .. }) = self.peers.remove(dst) {
            if let Some(l) = p.lane {
                let _ = p.map.lane(l.lane).owner.compare_exchange(self.me, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
        }
    }

    /// Puts one packet into `dst`'s inbox: `bytes` (the whole UDP payload, or only the
    /// headers when `remote` carries the payload).
    pub fn push(&mut self, dst: SocketAddr, parts: &[&[u8]], remote: Option<RemoteRef>) -> Pushed {
        let head = match remote {
            Some(r) => RecordHead { kind: kind::REMOTE, pid: r.pid, addr: r.addr, remote_len: r.len as u64, ..Default::default() },
            None => RecordHead { kind: kind::INLINE, ..Default::default() },
        };
        self.push_record(dst, head, parts)
    }

    /// Puts a run of `count` packets into `dst`'s inbox as one burst record ([`burst`]):
    /// `headers` holds the first packet's headers (`split` bytes) and the last's, every
    /// packet but the last carries `seg` bytes of `payload`.
    pub fn push_burst(&mut self, dst: SocketAddr, headers: &[u8], split: u16, count: u16, seg: u32, payload: RemoteRef) -> Pushed {
        let head = RecordHead { kind: kind::BURST, pid: payload.pid, addr: payload.addr, remote_len: payload.len as u64, seg, split, count,
                                ..Default::default() };
        self.push_record(dst, head, &[headers])
    }

    fn push_record(&mut self, dst: SocketAddr, head: RecordHead, parts: &[&[u8]]) -> Pushed {
        let me = self.me;
        let local = self.local;
        let Some(p) = self.peers.get_mut(dst).and_then(|l| l.peer.as_mut()) else { return Pushed::NoPath };
        if p.lane.is_none() {
            p.lane = claim(&p.map, me, local);
            if p.lane.is_none() {
                tracing::debug!(target: "softhca::link", %dst, "no free lane: UDP");
                return Pushed::NoPath;
            }
        }
        let lane = p.lane.as_mut().expect("claimed");
        let by_ref = head.kind == kind::REMOTE || head.kind == kind::BURST;
        if lane.push(&p.map, head, parts) {
            p.pushed = true;
            if by_ref {
                // Only we move the tail.
                p.ref_tail = p.map.lane(lane.lane).tail.load(Ordering::Relaxed);
            }
            Pushed::Done
        } else {
            Pushed::Full
        }
    }

    /// The peers that have not yet taken every record of ours that refers to our memory,
    /// and how far they must get ([`wait_consumed`]).
    pub fn ref_marks(&self) -> Vec<RefMark> {
        self.peers.0.iter().filter_map(|(_, l)| {
            let p = l.peer.as_ref()?;
            let lane = p.lane.as_ref()?.lane;
            (p.map.lane(lane).head.load(Ordering::Acquire) < p.ref_tail).then(|| RefMark { map: p.map.clone(), lane, upto: p.ref_tail })
        }).collect()
    }

    /// After a batch of pushes: the peers that were sent records and may be asleep.
    pub fn to_wake(&mut self) -> Vec<SocketAddr> {
        let mut v = Vec::new();
        // Orders the release stores of the lanes' tails before the loads of `awake`
        // (a release store followed by a load may otherwise be reordered: x86's store
        // buffer does it); pairs with the receiver's `Awake::sleep_check`.
        std::sync::atomic::fence(Ordering::SeqCst);
        for (dst, p) in self.peers.iter_mut() {
            if let Some(p) = p.peer.as_mut().filter(|p| p.pushed) {
                p.pushed = false;
                // After the records' release stores; pairs with the receiver's store of
                // `awake` before its last look at the lanes.
                if p.map.header().awake.load(Ordering::SeqCst) == 0 {
                    v.push(*dst);
                }
            }
        }
        v
    }
}

impl Drop for Peers {
    fn drop(&mut self) {
        let dsts: Vec<SocketAddr> = self.peers.keys().copied().collect();
        for d in dsts {
            self.forget(d);
        }
    }
}

/// Claims a free lane of `map` (or one whose owner died) for `me`, writing our address
/// before the lane is marked as claimed.
fn claim(map: &Mapped, me: u64, local: SocketAddr) -> Option<Producer> {
    for i in 0..inbox::LANES {
        let lane = map.lane(i);
        let cur = lane.owner.load(Ordering::Acquire);
        let free = cur == 0 || !alive((cur >> 32) as u32);
        if free && lane.owner.compare_exchange(cur, me, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            for (k, w) in inbox::source::pack(local).into_iter().enumerate() {
                lane.src[k].store(w, Ordering::Relaxed);
            }
            // Publishes `src` with the lane: the consumer reads it after its acquire load
            // of `claimed`... and of `tail`, which our first record's release follows.
            map.header().claimed.fetch_or(1 << i, Ordering::AcqRel);
            return Some(Producer::new(i));
        }
    }
    None
}


#[cfg(test)]
mod tests {
    use std::net::UdpSocket;

    use super::*;
    use crate::device::counters::Counters;
    use crate::device::tx::Tx;
    use crate::wire::{BthRepr, Opcode, RocePacket};

    /// More than a lane holds in one flush: what does not fit waits in the sender's
    /// backlog (nothing dropped), later flushes deliver it as the receiver makes room,
    /// and the receiver sees every packet once, in the order it was sent.
    #[test]
    fn a_full_lane_backlogs_in_order() {
        let src = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = dst_sock.local_addr().unwrap();
        let mut inbox = Inbox::create(dst).unwrap();
        let local = src.local_addr().unwrap();
        let mut tx = Tx::new(local, None, false, Some(Peers::new(Wire::Local, local)));
        let counters = Counters::default();
        const N: u32 = 2000;
        const LEN: usize = 4000; // inline records: N * LEN is twice a lane's ring
        for psn in 0..N {
            let payload = vec![psn as u8; LEN];
            tx.send(&RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0x11, psn), &payload), dst, local.port(), &counters);
        }
        tx.flush(&src, &counters, None);
        let c = counters.snapshot();
        assert!(tx.backlogged(), "the lane cannot take {N} x {LEN} B at once");
        assert!(c.local_tx_packets > 0 && c.local_tx_packets < N as u64, "{c:?}");
        let mut got = Vec::new();
        for _ in 0..100 {
            inbox.drain(|r| {
                if let Some((from, rec)) = r {
                    assert_eq!(from, local);
                    let p = RocePacket::parse_without_icrc(rec.bytes).expect("a whole packet");
                    assert!(p.payload.len() == LEN && p.payload.iter().all(|&b| b == p.bth.psn as u8));
                    got.push(p.bth.psn);
                }
            });
            tx.flush(&src, &counters, None);
            if got.len() == N as usize && !tx.backlogged() {
                break;
            }
        }
        assert_eq!(got, (0..N).collect::<Vec<_>>(), "every packet once, in order");
        let c = counters.snapshot();
        assert_eq!((c.local_tx_packets, c.local_tx_full, c.tx_packets, c.tx_errors), (N as u64, 0, 0, 0), "{c:?}");
    }

    /// A packet built for a known same-host peer skips its ICRC; when the peer's inbox
    /// is gone by the flush (auto), it goes over UDP sealed: the receiver's ICRC check
    /// passes.
    #[test]
    fn unsealed_packet_falling_back_to_udp_gets_its_icrc() {
        let src = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst_sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = dst_sock.local_addr().unwrap();
        let local = src.local_addr().unwrap();
        let inbox = Inbox::create(dst).unwrap();
        let mut tx = Tx::new(local, None, false, Some(Peers::new(Wire::Auto, local)));
        let counters = Counters::default();
        tx.send(&RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0x11, 1), b"first"), dst, local.port(), &counters);
        tx.flush(&src, &counters, None);
        assert_eq!(counters.snapshot().local_tx_packets, 1);
        drop(inbox);
        tx.send(&RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0x11, 2), b"second!"), dst, local.port(), &counters);
        tx.flush(&src, &counters, None);
        let c = counters.snapshot();
        assert_eq!((c.local_tx_packets, c.tx_packets), (1, 1), "{c:?}");
        let mut b = [0u8; 256];
        dst_sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let (n, from) = dst_sock.recv_from(&mut b).unwrap();
        let p = RocePacket::parse(&b[..n], &crate::wire::Endpoints::new(from, dst)).expect("a valid ICRC");
        assert_eq!((p.bth.psn, p.payload), (2, &b"second!"[..]));
    }

    /// A record that refers to our memory leaves a mark until the peer has taken it; an
    /// inline one none. `wait_consumed` returns at once when the peer is past the mark,
    /// and gives up after its limit when the peer never takes the record.
    #[test]
    fn records_by_reference_leave_marks_until_taken() {
        let src = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let local = src.local_addr().unwrap();
        let mut inbox = Inbox::create(dst).unwrap();
        let mut tx = Tx::new(local, None, false, Some(Peers::new(Wire::Local, local)));
        let counters = Counters::default();
        // A first packet makes the peer known (and claims the lane): inline, no mark.
        tx.send(&RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0x11, 1), b"hello"), dst, local.port(), &counters);
        tx.flush(&src, &counters, None);
        assert!(tx.deregistering(&counters).is_empty(), "an inline record refers to nothing");
        let payload = vec![0x5au8; 4096];
        let pkt = RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0x11, 2), &[]);
        let mem = crate::device::tx::MemRef { addr: payload.as_ptr() as u64, len: payload.len(), app: true };
        // SAFETY: `payload` outlives the flush below and the peer's copy of it (this test
        // never copies: it only takes the record).
        unsafe { tx.send_mem(&pkt, mem, dst, local.port(), &counters) };
        tx.flush(&src, &counters, None);
        assert_eq!(counters.snapshot().local_tx_ref_bytes, 4096);
        let marks = tx.deregistering(&counters);
        assert_eq!(marks.len(), 1, "the by-reference record is not taken yet");
        let t0 = Instant::now();
        wait_consumed(&marks, Duration::from_millis(50));
        assert!(t0.elapsed() >= Duration::from_millis(50), "nobody took it: waited the whole limit");
        let mut kinds = Vec::new();
        inbox.drain(|r| {
            if let Some((_, rec)) = r {
                kinds.push(rec.head.kind);
            }
        });
        assert_eq!(kinds, [inbox::kind::INLINE, inbox::kind::REMOTE]);
        assert!(tx.deregistering(&counters).is_empty(), "taken: no mark left");
        let t0 = Instant::now();
        wait_consumed(&marks, Duration::from_secs(10));
        assert!(t0.elapsed() < Duration::from_secs(5), "the old mark is passed: no wait");
    }

    /// The set bits of a mask, lowest first, only those below `LANES`.
    #[test]
    fn claimed_lanes_visits_set_bits() {
        assert_eq!(claimed_lanes(0).count(), 0);
        assert_eq!(claimed_lanes(0b1010_0001).collect::<Vec<_>>(), vec![0, 5, 7]);
        assert_eq!(claimed_lanes(u64::MAX).collect::<Vec<_>>(), (0..inbox::LANES).collect::<Vec<_>>());
    }

    /// Forced local and no inbox at the destination: the packet is dropped and counted,
    /// never sent over UDP; auto sends it over UDP.
    #[test]
    fn no_inbox_forced_drops_auto_falls_back() {
        let src = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let local = src.local_addr().unwrap();
        for (wire, want) in [(Wire::Local, (0, 1)), (Wire::Auto, (1, 0))] {
            let mut tx = Tx::new(local, None, false, Some(Peers::new(wire, local)));
            let counters = Counters::default();
            tx.send(&RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0x11, 7), b"x"), dst, local.port(), &counters);
            tx.flush(&src, &counters, None);
            let c = counters.snapshot();
            assert_eq!((c.tx_packets, c.tx_errors), want, "{wire:?}: {c:?}");
            assert_eq!(c.local_tx_packets, 0);
        }
    }
}
