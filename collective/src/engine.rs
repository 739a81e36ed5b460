//! The engine: streams over a [`Transport`], staging memory, and the loop that runs a
//! [`Plan`] until every lane is done.
//!
//! One pass of the loop runs every lane as far as it can (an action runs when its
//! inputs have arrived and its outputs have credit), then polls the transport for
//! arrivals (data, credits) and failures. When nothing moves it returns at once the
//! credits a sender may be stuck without (see `flush_credits`), checks the liveness
//! watch (a rank whose bootstrap connection dropped) and the no-progress timeout,
//! polls on while yielding the CPU for [`SPIN_FOR`], and then returns every
//! outstanding credit and sleeps on the transport.
//!
//! Why poll-and-yield rather than sleep at once: with four ranks (and, on softhca,
//! their devices) on two cores, a rank that sleeps needs a wake-up for every message,
//! and a wake-up costs more (15 to 150 us on a small VM) than a whole message;
//! `sched_yield` between polls leaves the CPU to whichever rank has work, the way Open
//! MPI's progress loop does when it is oversubscribed. After [`SPIN_FOR`] without
//! anything happening the rank is probably waiting for a slow peer (or computing
//! ranks), and it sleeps so as not to burn a core.
//!
//! User buffers. From [`BufferUse::user_min`] up, where the transport can
//! send from application memory ([`Transport::reg_user`], a registration for the
//! call), an action whose result is
//! stored builds it in the receive buffer and sends it from there, and an action that
//! forwards its contribution unchanged sends it straight from the send buffer
//! ([`crate::plan::Source`]): in a ring all-reduce that leaves 3 of the 7 block copies
//! per round. The sends are then from memory the application owns, so the call waits
//! for them to complete ([`Transport::settle`]) before it returns. Below that size the
//! wait for the last acknowledgement would cost more than the copies it saves.
//!
//! Direct all-gather ([`crate::direct`]). A plan whose actions are marked
//! [`Action::direct_in`] announces the receive buffer to the senders at the start of
//! the call, and their [`Action::direct_out`] messages land in it at their final place;
//! the mailboxes for those announcements sit after the slots in the staging memory.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bootstrap::Watch;
use crate::direct::{self, Announced, Announcement, Target};
use crate::dtype::{self, Element};
use crate::error::{Error, Result};
use crate::op::ReduceOp;
use crate::plan::{Action, Plan, Source, MAX_IO};
use crate::staging::Staging;
use crate::stream::{imm, Channel, InStream, OutStream, Region, MAX_CHANNELS, MAX_SLOTS};
use crate::transport::{Event, Transport, UserMem, UserMr};

/// How long the loop polls, yielding the CPU between polls, before it sleeps on the
/// transport (`DOORBELL_SPIN_US` overrides, in microseconds).
pub const SPIN_FOR: Duration = Duration::from_millis(1);
/// Longest sleep on the transport between checks of the watch and the deadline.
const WAIT_SLICE: Duration = Duration::from_millis(2);

/// Idle passes of the run loop per clock reading (for [`SPIN_FOR`] and the no-progress
/// timeout, both far longer than this many passes).
const CLOCK_EVERY: u32 = 8;

/// Bytes of the result per pass of [`reduce_fused`]: with the matching pieces of four
/// inputs this stays in the first-level cache between the passes.
const FUSE_BYTES: usize = 8 << 10;

/// `dst = ((first op in[0]) op in[1]) op ...`, where `first` is `local` (then the first
/// pass is `in[0] op local`, as a single-input action computes it) or, without it, `dst`
/// itself. Several messages are combined piece by piece ([`FUSE_BYTES`]) rather than
/// one whole pass per message, so that the result is written to memory once and each
/// input read once: the all-to-all's owner combines a message from every other rank
/// ([`crate::alltoall`]).
fn reduce_fused<T: Element>(dst: &mut [T], local: Option<&[T]>, ins: &[&[T]], op: ReduceOp) {
    let step = (FUSE_BYTES / std::mem::size_of::<T>()).max(1);
    let n = dst.len();
    for at in (0..n).step_by(step) {
        let end = (at + step).min(n);
        let d = &mut dst[at..end];
        let rest = match local {
            Some(l) => {
                T::reduce(d, &ins[0][at..end], &l[at..end], op);
                &ins[1..]
            }
            None => ins,
        };
        for s in rest {
            T::reduce_acc(d, &s[at..end], op);
        }
    }
}

/// [`SPIN_FOR`], or `DOORBELL_SPIN_US`.
fn spin_for() -> Duration {
    static V: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *V.get_or_init(|| std::env::var("DOORBELL_SPIN_US").ok().and_then(|v| v.trim().parse().ok()).map_or(SPIN_FOR, Duration::from_micros))
}

/// What an idle pass of the run loop does before it polls again, during [`SPIN_FOR`].
///
/// `Yield` gives the CPU to whichever rank has work (`sched_yield`): what a rank must do
/// when ranks outnumber CPUs, or its partner may not run until the scheduler's tick.
/// `Spin` polls again at once (with the CPU's spin-wait hint): with a CPU per rank
/// nobody else wants ours, and a `sched_yield` per pass only delays seeing the message
/// that arrives meanwhile (2.5 yields per call in the 2-rank 8 B all-reduce, see
/// docs/collectives.md, "Small-message latency"). Open MPI makes the same choice
/// (`mpi_yield_when_idle` when oversubscribed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Idle {
    #[default]
    Yield,
    Spin,
}

/// `t.reg_user(mem)` where wanted and there is something to register: the first byte
/// (from the registration when there is one, else from the borrow given back) and the
/// registration.
fn reg_if<'a>(t: &mut dyn Transport, mem: UserMem<'a>, want: bool) -> (*mut u8, Option<UserMr<'a>>) {
    let tried = if want && !mem.is_empty() { t.reg_user(mem) } else { Err(mem) };
    match tried {
        Ok(m) => (m.ptr, Some(m)),
        Err(back) => (back.ptr(), None),
    }
}

/// The buffers of one collective.
pub enum Bufs<'a, T> {
    /// Distinct send and receive buffers.
    OutOfPlace(&'a [T], &'a mut [T]),
    /// One buffer, read as the contribution and overwritten with the result.
    InPlace(&'a mut [T]),
}

/// What one link publishes to its peer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkInfo {
    pub peer: usize,
    pub conn: Vec<u8>,
    /// The regions the peer writes into, by channel.
    pub regions: Vec<(Channel, Region)>,
}

/// Streams, staging and the transport of one rank.
pub struct Engine {
    /// Owns the staging mappings (registered with it: [`Transport::register`]).
    transport: Box<dyn Transport>,
    pub(crate) outs: Vec<OutStream>,
    pub(crate) ins: Vec<InStream>,
    out_of: Vec<[u32; MAX_CHANNELS]>,
    in_of: Vec<[u32; MAX_CHANNELS]>,
    /// For each output stream, the input stream whose credits its messages carry
    /// (same link, [`Channel::reverse`]), or `NONE`.
    pair: Vec<u32>,
    peers: Vec<usize>,
    events: Vec<Event>,
    slot_bytes: usize,
    watch: Arc<Watch>,
    timeout: Duration,
    rank: usize,
    nranks: usize,
    /// Set after a failure: the engine refuses further work.
    broken: Option<String>,
    /// Our mailboxes (peers write them) and the sources of our announcements, each
    /// [`direct::PER_PEER`] bytes per link, at the end of the stagings.
    mail_in: u64,
    mail_out: u64,
    mail_lkey: u32,
    mail_rkey: u32,
    /// Each peer's mailbox for us.
    peer_mail: Vec<Option<Region>>,
    announced: Announced,
    /// Calls that announced so far (the current one, during a call).
    calls: u64,
    /// Messages sent straight into a receiver's buffer, and received in ours.
    direct_sent: u64,
    direct_received: u64,
    idle: Idle,
}

/// How a call may use the application's buffers (the communicator's tuning, passed to
/// every [`Engine::run`] so that it is kept in one place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferUse {
    /// Smallest call (bytes) sent straight from the application's buffers (see the
    /// module doc, "User buffers"); `None`: always through staging.
    pub user_min: Option<usize>,
    /// Take direct writes into the receive buffer where the plan has them
    /// ([`crate::direct`]). Peers follow what each call announces, so ranks may differ.
    pub direct: bool,
}

/// The application's buffers for one call, with the local keys of those the transport
/// can send from.
struct UserBufs<T> {
    send: *const T,
    recv: *mut T,
    send_lkey: Option<u32>,
    recv_lkey: Option<u32>,
    /// This call announced the receive buffer to the senders: the inputs of
    /// [`Action::direct_in`] actions are in it already ([`crate::direct`]).
    placed: bool,
}

const NONE: u32 = u32::MAX;

impl Engine {
    /// Sets up streams for `ins` and `outs` (peer rank, channel) on links to `peers`,
    /// each with `slots(channel)` slots of `slot_bytes`, and registers their staging
    /// memory. Every rank must use the same `slots` ([`Engine::connect`] checks).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mut transport: Box<dyn Transport>,
        rank: usize,
        nranks: usize,
        peers: Vec<usize>,
        ins: &[(usize, Channel)],
        outs: &[(usize, Channel)],
        slots: impl Fn(Channel) -> usize,
        slot_bytes: usize,
        watch: Arc<Watch>,
        timeout: Duration,
    ) -> Result<Engine> {
        let bad = ins.iter().chain(outs).map(|&(_, ch)| slots(ch)).find(|&n| n == 0 || n > MAX_SLOTS);
        if bad.is_some() || slot_bytes == 0 || slot_bytes % 64 != 0 || slot_bytes > u32::MAX as usize {
            return Err(Error::Invalid(format!("bad staging geometry: {bad:?} slots of {slot_bytes} B (a multiple of 64)")));
        }
        // Each stream's slots, one stream after the other: (offset, slots) per stream.
        let lay = |streams: &[(usize, Channel)]| -> (Vec<(usize, usize)>, usize) {
            let mut at = 0;
            let v = streams.iter().map(|&(_, ch)| {
                let n = slots(ch);
                at += n * slot_bytes;
                (at - n * slot_bytes, n)
            });
            (v.collect(), at)
        };
        let (in_lay, in_bytes) = lay(ins);
        let (out_lay, out_bytes) = lay(outs);
        // The mailboxes follow the slots (which end 64-byte aligned).
        let mail = peers.len() * direct::PER_PEER;
        let recv_stage = Staging::new(in_bytes + mail).map_err(|e| Error::io("map receive staging", e))?;
        let send_stage = Staging::new(out_bytes + mail).map_err(|e| Error::io("map send staging", e))?;
        // The transport keeps both mappings (registered) as long as it lives, and the
        // engine owns it: the addresses below stay valid for the engine's life.
        let (recv_at, send_at) = (recv_stage.addr(), send_stage.addr());
        let rk = transport.register(recv_stage)?;
        let sk = transport.register(send_stage)?;
        let link_of = |peer: usize| peers.iter().position(|&p| p == peer).expect("stream to a peer without a link");
        let mut in_of = vec![[NONE; MAX_CHANNELS]; peers.len()];
        let mut out_of = vec![[NONE; MAX_CHANNELS]; peers.len()];
        let mut in_streams = Vec::new();
        for (i, &(peer, ch)) in ins.iter().enumerate() {
            let link = link_of(peer);
            assert_eq!(in_of[link][ch.index()], NONE, "duplicate stream");
            in_of[link][ch.index()] = i as u32;
            let region = Region {
                addr: recv_at + in_lay[i].0 as u64,
                rkey: rk.rkey,
                nslots: in_lay[i].1 as u32,
                slot_bytes: slot_bytes as u32,
            };
            in_streams.push(InStream::new(link, peer, ch, region));
        }
        let mut out_streams = Vec::new();
        for (i, &(peer, ch)) in outs.iter().enumerate() {
            let link = link_of(peer);
            assert_eq!(out_of[link][ch.index()], NONE, "duplicate stream");
            out_of[link][ch.index()] = i as u32;
            out_streams.push(OutStream {
                link,
                peer,
                ch,
                remote: Region { nslots: out_lay[i].1 as u32, ..Region::default() },
                local_addr: send_at + out_lay[i].0 as u64,
                lkey: sk.lkey,
                sent: 0,
                credited: 0,
            });
        }
        let pair = out_streams.iter().map(|o: &OutStream| in_of[o.link][o.ch.reverse().index()]).collect();
        let (mail_in, mail_out) = (recv_at + in_bytes as u64, send_at + out_bytes as u64);
        let links = peers.len();
        Ok(Engine {
            transport,
            outs: out_streams,
            ins: in_streams,
            out_of,
            in_of,
            pair,
            peers,
            events: Vec::with_capacity(256),
            slot_bytes,
            watch,
            timeout,
            rank,
            nranks,
            broken: None,
            mail_in,
            mail_out,
            mail_lkey: sk.lkey,
            mail_rkey: rk.rkey,
            peer_mail: vec![None; links],
            announced: Announced::new(links),
            calls: 0,
            direct_sent: 0,
            direct_received: 0,
            idle: Idle::default(),
        })
    }

    /// Messages sent straight into a receiver's buffer and received straight into
    /// ours, so far ([`crate::direct`]).
    pub fn direct_messages(&self) -> (u64, u64) {
        (self.direct_sent, self.direct_received)
    }

    /// What idle passes do ([`Idle`]).
    pub fn set_idle(&mut self, idle: Idle) {
        self.idle = idle;
    }

    /// One idle pass's pause ([`Idle`]).
    fn relax(&self) {
        match self.idle {
            Idle::Yield => std::thread::yield_now(),
            Idle::Spin => std::hint::spin_loop(),
        }
    }

    /// Bytes per slot: the largest message.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// The transport's description.
    pub fn describe(&self) -> String {
        self.transport.describe()
    }

    /// What each link publishes to its peer.
    pub fn publish(&self) -> Vec<LinkInfo> {
        (0..self.peers.len())
            .map(|link| LinkInfo {
                peer: self.peers[link],
                conn: self.transport.conn_info(link),
                regions: self
                    .ins
                    .iter()
                    .filter(|s| s.link == link)
                    .map(|s| (s.ch, s.region))
                    .chain([(direct::MAILBOX, self.mailbox(link))])
                    .collect(),
            })
            .collect()
    }

    /// Connects the link to `info.peer` with what that peer published for us.
    pub fn connect(&mut self, info: &LinkInfo) -> Result<()> {
        let link = self.peers.iter().position(|&p| p == info.peer).ok_or_else(|| Error::Protocol {
            rank: info.peer,
            why: "published a link to us that we do not have".into(),
        })?;
        for s in self.outs.iter_mut().filter(|s| s.link == link) {
            let r = info.regions.iter().find(|(c, _)| *c == s.ch).map(|(_, r)| *r).ok_or_else(|| Error::Protocol {
                rank: info.peer,
                why: format!("no receive region for channel {}", s.ch.0),
            })?;
            // Our send staging holds the slots we expect the peer to have (set in new):
            // a peer with more would have us write past it.
            if r.slot_bytes as usize != self.slot_bytes || r.nslots != s.remote.nslots {
                return Err(Error::Protocol {
                    rank: info.peer,
                    why: format!("slot geometry {}x{} B on channel {} differs from ours ({}x{} B)", r.nslots, r.slot_bytes, s.ch.0, s.remote.nslots, self.slot_bytes),
                });
            }
            s.remote = r;
        }
        let mail = info.regions.iter().find(|(c, _)| *c == direct::MAILBOX).map(|(_, r)| *r);
        if mail.is_none_or(|m| m.nslots as usize != direct::ENTRIES || m.slot_bytes as usize != direct::ENTRY) {
            return Err(Error::Protocol { rank: info.peer, why: format!("no announcement mailbox of {}x{} B", direct::ENTRIES, direct::ENTRY) });
        }
        self.peer_mail[link] = mail;
        self.transport.connect(link, &info.conn)
    }

    /// Our mailbox for the peer of `link`, as published.
    fn mailbox(&self, link: usize) -> Region {
        Region { addr: self.mail_in + (link * direct::PER_PEER) as u64, rkey: self.mail_rkey, nslots: direct::ENTRIES as u32, slot_bytes: direct::ENTRY as u32 }
    }

    /// Index of the output stream to `peer` on `ch`.
    pub fn out_id(&self, peer: usize, ch: Channel) -> u32 {
        let link = self.peers.iter().position(|&p| p == peer).expect("no link to peer");
        let id = self.out_of[link][ch.index()];
        assert_ne!(id, NONE, "no output stream to rank {peer} on channel {}", ch.0);
        id
    }

    /// Index of the input stream from `peer` on `ch`.
    pub fn in_id(&self, peer: usize, ch: Channel) -> u32 {
        let link = self.peers.iter().position(|&p| p == peer).expect("no link to peer");
        let id = self.in_of[link][ch.index()];
        assert_ne!(id, NONE, "no input stream from rank {peer} on channel {}", ch.0);
        id
    }

    /// Runs `plan` to completion.
    pub fn run<T: Element>(&mut self, plan: &mut Plan, bufs: Bufs<'_, T>, op: ReduceOp, used: BufferUse) -> Result<()> {
        if let Some(why) = &self.broken {
            return Err(Error::Invalid(format!("communicator unusable after an earlier failure: {why}")));
        }
        let (slen, rlen, aliased) = match &bufs {
            Bufs::OutOfPlace(s, r) => (s.len(), r.len(), false),
            Bufs::InPlace(b) => (b.len(), b.len(), true),
        };
        let (smax, rmax) = plan.extents();
        assert!(smax <= slen && rmax <= rlen, "plan exceeds the buffers ({smax} > {slen} or {rmax} > {rlen})");
        for a in plan.lanes.iter().flat_map(|l| &l.actions) {
            assert!(a.len * std::mem::size_of::<T>() <= self.slot_bytes, "action larger than a slot");
            assert!(!(aliased && a.local.is_some() && a.store.is_some() && a.outputs().is_empty()), "in-place action without staging");
        }
        let sz = std::mem::size_of::<T>();
        // A direct plan announces whether peers may write our receive buffer: not in
        // place (the range still holds contributions not yet sent; crate::direct).
        let direct = plan.has_direct();
        let remote = direct && used.direct && !aliased && rlen > 0;
        let local = used.user_min.is_some_and(|m| slen.max(rlen) * sz >= m);
        // The call's registrations of the application's buffers: they hold the borrows
        // until the end of this function, after the writes from them are settled (or
        // abandoned), and every access to the buffers meanwhile goes through them.
        let mut regs: Vec<UserMr<'_>> = Vec::new();
        let t = &mut *self.transport;
        let mut reg = |mem, want| reg_if(t, mem, want);
        let (send, recv, send_lkey, recv_lkey, target) = match bufs {
            Bufs::OutOfPlace(s, r) => {
                let (recv, rreg) = reg(UserMem::Write(dtype::as_bytes_mut(r), remote), remote || local);
                let (send, sreg) = reg(UserMem::Read(dtype::as_bytes(s)), local);
                let target = rreg.as_ref().filter(|_| remote).map(|m| Target { addr: m.ptr as u64, len: m.len as u64, rkey: m.keys.rkey });
                let recv_lkey = rreg.as_ref().filter(|_| local).map(|m| m.keys.lkey);
                let send_lkey = sreg.as_ref().map(|m| m.keys.lkey);
                regs.extend(rreg);
                regs.extend(sreg);
                (send.cast_const().cast::<T>(), recv.cast::<T>(), send_lkey, recv_lkey, target)
            }
            Bufs::InPlace(b) => {
                let (p, r) = reg(UserMem::Write(dtype::as_bytes_mut(b), false), local);
                let lkey = r.as_ref().map(|m| m.keys.lkey);
                regs.extend(r);
                (p.cast_const().cast::<T>(), p.cast::<T>(), lkey, lkey, None)
            }
        };
        let mut bufs = UserBufs { send, recv, send_lkey, recv_lkey, placed: false };
        // Small calls (and transports without user buffers) skip the analysis.
        let sources = (bufs.send_lkey.is_some() || bufs.recv_lkey.is_some())
            .then(|| plan.sources(aliased, bufs.send_lkey.is_some(), bufs.recv_lkey.is_some(), op == ReduceOp::Avg));
        bufs.placed = direct && target.is_some();
        let r = if direct { self.announce(plan, target) } else { Ok(()) };
        let r = r.and_then(|()| self.run_inner(plan, sources.as_deref(), &bufs, op)).and_then(|()| self.settle());
        if let Err(e) = &r {
            // The buffers go back to the caller with the error: no write may read them later.
            self.transport.abandon();
            self.broken = Some(e.to_string());
        }
        // Deregistered only now: after settle (nothing reads them, every peer's write
        // into them arrived) or abandon (nothing posted reads them any more).
        drop(regs);
        r
    }

    /// Starts a direct call: numbers it and tells every peer that sends us direct
    /// messages in it ([`Action::direct_in`]'s input links) where our receive buffer
    /// is, or (`target` None) that it is not open to them this time.
    fn announce(&mut self, plan: &Plan, target: Option<Target>) -> Result<()> {
        self.calls += 1;
        let entry = Announcement::encode(target);
        let mut links: Vec<usize> = plan.lanes.iter().flat_map(|l| &l.actions).filter(|a| a.direct_in).map(|a| self.ins[a.inputs()[0] as usize].link).collect();
        links.sort_unstable();
        links.dedup();
        for link in links {
            let at = direct::entry_offset(self.calls);
            let src = self.mail_out + (link * direct::PER_PEER) as u64 + at;
            // SAFETY: our announcement source for this link and call parity, inside the
            // send staging; the previous write from it (two calls ago) has arrived,
            // because the peer read it to send us that call's direct messages, all of
            // which we received (crate::direct, "two entries").
            unsafe { std::ptr::copy_nonoverlapping(entry.as_ptr(), src as *mut u8, direct::ENTRY) };
            let mail = self.peer_mail[link].expect("connect checked the mailbox");
            let im = imm::announce(self.calls);
            self.transport.write_imm(link, src, self.mail_lkey, direct::ENTRY as u32, mail.addr + at, mail.rkey, im, false)?;
        }
        Ok(())
    }

    fn run_inner<T: Element>(&mut self, plan: &mut Plan, sources: Option<&[Vec<Source>]>, bufs: &UserBufs<T>, op: ReduceOp) -> Result<()> {
        let mut idle: u32 = 0;
        // Set by the first timed pass of an idle spell: a call whose messages are there
        // in time reads no clock at all.
        let mut idle_since: Option<Instant> = None;
        let mut flushed = false;
        let ride = plan.credits_ride;
        loop {
            let mut progressed = false;
            let mut done = true;
            for (li, lane) in plan.lanes.iter_mut().enumerate() {
                while let Some(a) = lane.actions.get(lane.next) {
                    let via = sources.map_or(Source::Slot, |s| s[li][lane.next]);
                    // SAFETY: run() checked the plan's extents against the buffers and
                    // the no-alias rule; send/recv outlive this call; the sources come
                    // from Plan::sources for these buffers.
                    if unsafe { self.exec(a, via, bufs, op, ride)? } {
                        lane.next += 1;
                        progressed = true;
                    } else {
                        break;
                    }
                }
                done &= lane.is_done();
            }
            if done {
                return Ok(());
            }
            if self.pump()? {
                progressed = true;
            }
            if progressed {
                idle = 0;
                flushed = false;
                continue;
            }
            // (Saturates at a multiple of CLOCK_EVERY: a long wait keeps reading the clock.)
            idle = (idle + 1).min(u32::MAX - u32::MAX % CLOCK_EVERY);
            if let Some((rank, why)) = self.watch.failed() {
                return Err(Error::PeerFailed { rank, why });
            }
            // The clock is read on every CLOCK_EVERY-th idle pass only (from the first
            // such pass the idle time counts): a small message's wait is over within a
            // few passes, and a clock read per pass showed as several percent of a
            // rank's time in a profile of the 8 B all-reduce.
            if idle % CLOCK_EVERY != 0 {
                if !flushed {
                    self.flush_credits(false)?;
                    flushed = true;
                }
                self.relax();
                continue;
            }
            let now = Instant::now();
            if idle == CLOCK_EVERY {
                idle_since = Some(now);
            }
            let waited = now.saturating_duration_since(*idle_since.get_or_insert(now));
            if waited >= self.timeout {
                return Err(self.stall_error(plan, waited));
            }
            if waited < spin_for() {
                // Only credits a sender may be stuck without (see flush_credits): the
                // others ride on data or go with the threshold, saving a message each.
                if !flushed {
                    self.flush_credits(false)?;
                    flushed = true;
                }
                self.relax();
                continue;
            }
            // About to sleep: nobody must wait for a credit of ours meanwhile.
            self.flush_credits(true)?;
            self.transport.wait(WAIT_SLICE)?;
        }
    }

    /// Waits for the writes sent from the application's buffers
    /// ([`Transport::settle`]). A broken link is reported as the bootstrap watch
    /// knows it, when it does (the peer died), as in [`Engine::pump`].
    fn settle(&mut self) -> Result<()> {
        self.transport.settle(self.timeout).map_err(|e| match (self.watch.failed(), e) {
            (Some((rank, why)), Error::PeerFailed { .. } | Error::Timeout { .. }) => Error::PeerFailed { rank, why },
            (_, e) => e,
        })
    }

    /// Who a stalled plan is waiting for.
    fn stall_error(&self, plan: &Plan, after: Duration) -> Error {
        for lane in &plan.lanes {
            let Some(a) = lane.actions.get(lane.next) else { continue };
            for &i in a.inputs() {
                let s = &self.ins[i as usize];
                if s.arrived.is_empty() {
                    return Error::Timeout { rank: s.peer, after, what: format!("message {} on channel {}", s.received, s.ch.0) };
                }
            }
            for &o in a.outputs() {
                let s = &self.outs[o as usize];
                if !s.has_credit() {
                    return Error::Timeout { rank: s.peer, after, what: format!("a free slot on channel {}", s.ch.0) };
                }
                if a.direct_out && self.announced.get(s.link, self.calls).is_none() {
                    return Error::Timeout { rank: s.peer, after, what: format!("the announcement of its receive buffer for direct call {}", self.calls) };
                }
            }
        }
        Error::Timeout { rank: self.rank, after, what: "nothing (internal stall)".into() }
    }

    /// Polls the transport; true if anything arrived.
    fn pump(&mut self) -> Result<bool> {
        let mut ev = std::mem::take(&mut self.events);
        ev.clear();
        self.transport.poll(&mut ev)?;
        let any = !ev.is_empty();
        for e in ev.drain(..) {
            match e {
                Event::Recv { link, imm, len } => match imm::decode(imm) {
                    imm::Imm::Data { ch, seq, credit } => {
                        let id = self.in_of[link][ch.index()];
                        let peer = self.peers[link];
                        if id == NONE {
                            return Err(Error::Protocol { rank: peer, why: format!("data on unexpected channel {}", ch.0) });
                        }
                        self.ins[id as usize].arrive(seq, len).map_err(|why| Error::Protocol { rank: peer, why })?;
                        if let Some(count) = credit {
                            self.credit(link, ch.reverse(), count, imm::PIGGY_BITS)?;
                        }
                    }
                    imm::Imm::Credit { ch, count } => self.credit(link, ch, count, imm::COUNT_BITS)?,
                    imm::Imm::Announce { call } => {
                        if len as usize != direct::ENTRY {
                            return Err(Error::Protocol { rank: self.peers[link], why: format!("announcement of {len} B") });
                        }
                        let at = self.mailbox(link).addr + direct::entry_offset(call as u64);
                        // SAFETY: our mailbox entry for this link, inside the receive
                        // staging; the peer's write into it completed before this
                        // completion (acquire fence in the poller), and the peer writes
                        // this entry again only two calls later (crate::direct).
                        let entry: [u8; direct::ENTRY] = unsafe { std::ptr::read(at as *const [u8; direct::ENTRY]) };
                        self.announced.put(link, Announcement::decode(call, &entry));
                    }
                },
                Event::Failed { link, why } => {
                    // The bootstrap watch may know better (the peer died): prefer it.
                    if let Some((rank, w)) = self.watch.failed() {
                        return Err(Error::PeerFailed { rank, why: w });
                    }
                    return Err(Error::PeerFailed { rank: self.peers[link], why });
                }
            }
        }
        self.events = ev;
        Ok(any)
    }

    /// Applies a credit for our stream on `link`, `ch`.
    fn credit(&mut self, link: usize, ch: Channel, count: u32, bits: u32) -> Result<()> {
        let id = self.out_of[link][ch.index()];
        let peer = self.peers[link];
        if id == NONE {
            return Err(Error::Protocol { rank: peer, why: format!("credit on unexpected channel {}", ch.0) });
        }
        self.outs[id as usize].credit(count, bits).map_err(|why| Error::Protocol { rank: peer, why })
    }

    /// Sends the credits not reported yet: all of them, or (`all` false) only those of
    /// streams whose sender may be out of slots for good: it is stuck exactly when
    /// every slot holds a message we received and have not reported (`received -
    /// reported >= nslots`); with fewer, either more messages are on the way (and
    /// their consumption crosses the threshold), or a credit of ours is.
    fn flush_credits(&mut self, all: bool) -> Result<()> {
        for s in &mut self.ins {
            let starved = s.received - s.reported >= s.region.nslots as u64;
            if s.consumed > s.reported && (all || starved) {
                self.transport.notify(s.link, imm::credit(s.ch, s.consumed))?;
                s.reported = s.consumed;
            }
        }
        Ok(())
    }

    /// Runs `a` if it is ready, sending its message from `via`. Returns whether it ran.
    ///
    /// # Safety
    /// `bufs.send` and `bufs.recv` must be valid for the plan's extents; when they
    /// alias, no action may have both a local contribution and a store without an
    /// output; `via` must be what [`Plan::sources`] gave this action for these buffers
    /// and keys.
    /// `ride`: the plan's [`Plan::credits_ride`]; a consumed message of a stream with a
    /// paired output stream then leaves its credit to that stream's next message.
    unsafe fn exec<T: Element>(&mut self, a: &Action, via: Source, bufs: &UserBufs<T>, op: ReduceOp, ride: bool) -> Result<bool> {
        let (send, recv) = (bufs.send, bufs.recv);
        let sz = std::mem::size_of::<T>();
        let bytes = a.len * sz;
        for &i in a.inputs() {
            let s = &self.ins[i as usize];
            match s.arrived.front() {
                None => return Ok(false),
                Some(&l) if l as usize != bytes => {
                    return Err(Error::Protocol { rank: s.peer, why: format!("message of {l} B on channel {}, expected {bytes}", s.ch.0) })
                }
                Some(_) => {}
            }
        }
        if a.outputs().iter().any(|&o| !self.outs[o as usize].has_credit()) {
            return Ok(false);
        }
        // A direct message needs its receiver's word on this call.
        if a.direct_out && a.outputs().iter().any(|&o| self.announced.get(self.outs[o as usize].link, self.calls).is_none()) {
            return Ok(false);
        }
        // The input is in the receive buffer already (the sender wrote it there).
        let placed = a.direct_in && bufs.placed;
        let n = a.len;
        let ins = a.inputs();
        let outs = a.outputs();
        // SAFETY (all slot views below): a slot is only viewed between the arrival of
        // its message (completion seen, acquire fence in the poller) and its credit,
        // or, for send slots, between a credit freeing it and the post that hands it
        // to the device; during those windows nothing else touches it. Slots are
        // 64-byte aligned inside page-aligned mappings, so any element type fits.
        let in_slot = |e: &Engine, k: usize| -> &[T] {
            // SAFETY: a slot view: see "SAFETY (all slot views below)" above.
            unsafe { std::slice::from_raw_parts(e.ins[ins[k] as usize].head_addr() as *const T, n) }
        };
        // Every input's slot, for the combining passes of several messages.
        let in_slots = |e: &Engine| -> [&[T]; MAX_IO] {
            let mut v: [&[T]; MAX_IO] = [&[]; MAX_IO];
            for (k, s) in v.iter_mut().enumerate().take(ins.len()) {
                *s = in_slot(e, k);
            }
            v
        };
        if via != Source::Send {
            // The result: the receive buffer (no outputs, or Source::Recv), else the
            // first output's send slot.
            let dst: &mut [T] = match outs.first() {
                // SAFETY: the first output's send slot, free between its credit and its post (above).
                Some(&o) if via == Source::Slot => unsafe { std::slice::from_raw_parts_mut(self.outs[o as usize].next_local() as *mut T, n) },
                _ => {
                    let off = a.store.expect("an action without outputs stores its result");
                    // SAFETY: `off` is inside the receive buffer (plan extents, checked by run()), which nothing else views now.
                    unsafe { std::slice::from_raw_parts_mut(recv.add(off), n) }
                }
            };
            // In place, an action may build its result where its contribution is
            // (Plan::sources allows it only with inputs and the very same range): the
            // contribution is then dst itself, combined as `dst op input`, and never
            // viewed separately (that would alias dst). A slot never lies in the send
            // buffer, nor, out of place, does the receive buffer.
            let in_dst = a.local.is_some_and(|off| std::ptr::eq(send.wrapping_add(off), dst.as_ptr()));
            // SAFETY: `off` is inside the send buffer (plan extents); in_dst is false, so it does not alias dst.
            let local: Option<&[T]> = if in_dst { None } else { a.local.map(|off| unsafe { std::slice::from_raw_parts(send.add(off), n) }) };
            if in_dst {
                reduce_fused(dst, None, &in_slots(self)[..ins.len()], op);
            } else if a.acc {
                // The partial result stored earlier at recv[store]: combined into the
                // send slot, or, without outputs, in place (dst is that very range).
                assert!(ins.len() == 1 && local.is_none(), "an accumulating action has one input and no local part");
                debug_assert!(via == Source::Slot, "Plan::sources keeps accumulating actions on their slot");
                if outs.is_empty() {
                    T::reduce_acc(dst, in_slot(self, 0), op);
                } else {
                    let off = a.store.expect("an accumulating action stores its result");
                    // SAFETY: inside the plan's receive extent (run() checked it), and
                    // dst is a send slot here, so this shared view aliases nothing
                    // mutable.
                    let partial = unsafe { std::slice::from_raw_parts(recv.add(off) as *const T, n) };
                    T::reduce(dst, in_slot(self, 0), partial, op);
                }
            } else {
                match (ins.len(), local) {
                    (0, Some(l)) => dst.copy_from_slice(l),
                    (1, Some(l)) => T::reduce(dst, in_slot(self, 0), l, op),
                    (k, Some(l)) if k >= 2 => {
                        reduce_fused(dst, Some(l), &in_slots(self)[..k], op);
                    }
                    (1, None) if placed => {
                        // The message is at recv[store]: nothing to do if that is dst,
                        // else (dst a send slot) it is copied from there. No partial
                        // overlap: a slot never lies in the receive buffer.
                        // SAFETY: the store offset is inside the receive buffer (plan extents).
                        let at = unsafe { recv.add(a.store.expect("a direct receiver stores")) };
                        if !std::ptr::eq(at, dst.as_ptr()) {
                            // SAFETY: `at` is the direct message's place in the receive buffer, complete (its arrival was seen).
                            dst.copy_from_slice(unsafe { std::slice::from_raw_parts(at as *const T, n) });
                        }
                    }
                    (1, None) => dst.copy_from_slice(in_slot(self, 0)),
                    (2, None) => T::reduce(dst, in_slot(self, 0), in_slot(self, 1), op),
                    _ => unreachable!("action with no data"),
                }
            }
            if a.finalize && op == ReduceOp::Avg {
                T::div_all(dst, self.nranks);
            }
        }
        // Where the message is read from: application memory (with its key), or the
        // first output's slot, from which the result is also stored and copied to the
        // other outputs' slots.
        // SAFETY (the two adds): offsets inside the plan's extents, checked by run().
        let user = match via {
            // SAFETY: see "SAFETY (the two adds)" above.
            Source::Recv => Some((unsafe { recv.add(a.store.expect("a Recv source stores")) } as u64, bufs.recv_lkey.expect("a Recv source has a key"))),
            // SAFETY: see "SAFETY (the two adds)" above.
            Source::Send => Some((unsafe { send.add(a.local.expect("a Send source is local")) } as u64, bufs.send_lkey.expect("a Send source has a key"))),
            Source::Slot => {
                if let Some(&o0) = outs.first() {
                    let src = self.outs[o0 as usize].next_local() as *const T;
                    // (A placed input is there already: the slot was copied from it.)
                    if let Some(off) = a.store.filter(|_| !placed) {
                        // SAFETY: `n` elements from our send slot into the receive buffer at a store offset inside it; a slot never lies in the receive buffer.
                        unsafe { std::ptr::copy_nonoverlapping(src, recv.add(off), n) };
                    }
                    for &o in &outs[1..] {
                        // SAFETY: `n` elements between two distinct send slots, both free until their posts.
                        unsafe { std::ptr::copy_nonoverlapping(src, self.outs[o as usize].next_local() as *mut T, n) };
                    }
                }
                None
            }
        };
        for &o in outs {
            // The paired stream's credit rides along (see crate::stream).
            let piggy = match self.pair[o as usize] {
                NONE => None,
                i => {
                    let p = &mut self.ins[i as usize];
                    p.reported = p.consumed;
                    Some(p.consumed)
                }
            };
            let s = &mut self.outs[o as usize];
            let (src, lkey) = user.unwrap_or((s.next_local(), s.lkey));
            let (link, mut dst, mut rkey, im) = (s.link, s.next_remote(), s.remote.rkey, imm::data(s.ch, s.sent, piggy));
            // Direct: into the receiver's buffer at the offset we store it at (its
            // action for this message stores it there too); the slot stays unused
            // but the message still takes its place and credit in the stream.
            if let Some(t) = a.direct_out.then(|| self.announced.get(link, self.calls)).flatten().and_then(|w| w.target) {
                let off = (a.store.expect("a direct sender stores") * sz) as u64;
                dst = t.place(off, bytes as u64).map_err(|why| Error::Protocol { rank: s.peer, why })?;
                rkey = t.rkey;
                self.direct_sent += 1;
            }
            s.sent += 1;
            self.transport.write_imm(link, src, lkey, bytes as u32, dst, rkey, im, user.is_some())?;
        }
        if placed {
            self.direct_received += 1;
        }
        for &i in ins {
            let s = &mut self.ins[i as usize];
            let rides = ride && self.out_of[s.link][s.ch.reverse().index()] != NONE;
            if s.consume() && !rides {
                let (link, im) = (s.link, imm::credit(s.ch, s.consumed));
                s.reported = s.consumed;
                self.transport.notify(link, im)?;
            }
        }
        Ok(true)
    }
}
