//! The communicator: one rank's connections to the others and the collective API.
//!
//! ```no_run
//! use collective::{Communicator, ReduceOp};
//! // Under torchrun, `doorbell launch` or mpirun:
//! let mut comm = Communicator::from_env()?;
//! let send = vec![comm.rank() as f32 + 1.0; 1 << 20];
//! let mut recv = vec![0f32; send.len()];
//! comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
//! # Ok::<(), collective::Error>(())
//! ```
//!
//! Setting up (`init`): the ranks' streams follow from the topology (ring
//! neighbours and the two trees), one RC QP per distinct peer carries them all;
//! staging slots are registered; the connection table is exchanged through the
//! bootstrap; QPs go to RTS; a bootstrap barrier makes sure every QP is ready before
//! anyone writes; then the bootstrap connections become the liveness monitor.

use std::sync::Arc;
use std::time::Duration;

use crate::affinity::{self, Bind};
use crate::algo::{Algo, AlgoChoice};
use crate::alltoall;
use crate::bootstrap::{Exchange, Monitor, TcpBootstrap, Watch};
use crate::doubling;
use crate::dtype::Element;
use crate::engine::{BufferUse, Bufs, Engine, Idle, LinkInfo};
use crate::error::{Error, Result};
use crate::halving;
use crate::launch::LaunchEnv;
use crate::op::ReduceOp;
use crate::plan::Plan;
use crate::ring::{self, RingShape};
use crate::stream::{Channel, Region, StreamList, MAX_SLOTS, RING_LANES_MAX};
use crate::transport::mem::MemFabric;
use crate::transport::rdma::RdmaTransport;
use crate::transport::Transport;
use crate::tree;

/// Staging and pipelining parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuning {
    /// Bytes per staging slot: the largest message (`DOORBELL_CHUNK_BYTES`). The
    /// default, 311 232 (76 packets of a 4096-byte MTU, the last 64 bytes short), is
    /// sized for softhca's segmentation offload: a datagram carries up to 15 packets of
    /// one length, the last may be shorter, and a WRITE's first packet (RETH) and a full
    /// last one (immediate) are longer than the middles and go alone. A message of
    /// 1 + 5 x 15 packets with a short last one takes 6 datagrams (128 KiB took 4 for
    /// 70 % of the bytes: docs/benchmarks-history.md, "Message size"). 76 packets rather
    /// than the earlier 46 (188 352): the all-to-all all-reduce cuts each round into
    /// blocks of a slot, and on the same-host path fewer, larger rounds were 1 to 7 %
    /// faster from 2 to 16 MiB, level on the UDP path (docs/benchmarks-history.md,
    /// "Larger slots for the all-to-all").
    pub slot_bytes: usize,
    /// Slots per stream: messages in flight before the sender needs a credit
    /// (`DOORBELL_SLOTS`); the ring lanes have [`Tuning::ring_slots`].
    pub nslots: usize,
    /// Slots per ring-lane stream (`DOORBELL_RING_SLOTS`). Fewer than the others:
    /// two full slots per lane keep a ring step fed, and the two ranks that share a core
    /// on this project's machines then keep half the bytes in flight in their share of
    /// its L2 (measured: docs/benchmarks-history.md, "Two slots per ring lane"). The tree and
    /// recursive doubling want more: with two slots every message needs a credit of
    /// its own, which small calls pay for in latency.
    pub ring_slots: usize,
    /// Parallel rings (`DOORBELL_RING_LANES`, 1 to 4).
    pub ring_lanes: usize,
    /// Smallest ring block worth a round of its own (to feed every lane), in bytes.
    pub ring_min_chunk_bytes: usize,
    /// Tree pipeline chunk in bytes (`DOORBELL_TREE_CHUNK_BYTES`, at most a slot).
    pub tree_chunk_bytes: usize,
    /// Ring or tree.
    pub algo: AlgoChoice,
    /// Smallest call, in bytes, whose messages go straight from the application's
    /// buffers where the transport allows it (`None`: always through staging; see
    /// [`crate::engine`], "User buffers"). `DOORBELL_USER_BUFFERS`: `off` (or `0`),
    /// or a size in bytes.
    pub user_buffer_min_bytes: Option<usize>,
    /// Take direct all-gather writes into the receive buffer where the algorithm has
    /// them (halving-doubling, out of place; see [`crate::direct`]).
    /// `DOORBELL_DIRECT=off` (or `0`) turns it off for this rank; its peers then write
    /// to its slots.
    pub direct: bool,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            slot_bytes: 311_232,
            nslots: 4,
            ring_slots: 2,
            ring_lanes: 2,
            ring_min_chunk_bytes: 8 << 10,
            tree_chunk_bytes: 32 << 10,
            algo: AlgoChoice::default(),
            user_buffer_min_bytes: Some(256 << 10),
            direct: true,
        }
    }
}

impl Tuning {
    /// Defaults overridden by the `DOORBELL_*` variables.
    pub fn from_env() -> Result<Tuning> {
        let mut t = Tuning::default();
        let num = |k: &str, d: usize| -> Result<usize> {
            match std::env::var(k) {
                Ok(v) if !v.is_empty() => v.parse().map_err(|_| Error::Invalid(format!("{k}={v:?} is not a number"))),
                _ => Ok(d),
            }
        };
        t.slot_bytes = num("DOORBELL_CHUNK_BYTES", t.slot_bytes)?;
        t.nslots = num("DOORBELL_SLOTS", t.nslots)?;
        t.ring_slots = num("DOORBELL_RING_SLOTS", t.ring_slots)?;
        t.ring_lanes = num("DOORBELL_RING_LANES", t.ring_lanes)?;
        t.tree_chunk_bytes = num("DOORBELL_TREE_CHUNK_BYTES", t.tree_chunk_bytes)?;
        t.algo = AlgoChoice::from_env().map_err(Error::Invalid)?;
        match std::env::var("DOORBELL_USER_BUFFERS") {
            Ok(v) if crate::is_off(&v) => t.user_buffer_min_bytes = None,
            Ok(v) if !v.trim().is_empty() => {
                let min = v.trim().parse().map_err(|_| Error::Invalid(format!("DOORBELL_USER_BUFFERS={v:?}: off, or a size in bytes")))?;
                t.user_buffer_min_bytes = Some(min);
            }
            _ => {}
        }
        t.direct = !crate::switched_off("DOORBELL_DIRECT");
        t.validate()?;
        Ok(t)
    }

    /// Slots per stream on `ch`.
    pub fn slots(&self, ch: Channel) -> usize {
        if ch.is_ring() {
            self.ring_slots
        } else {
            self.nslots
        }
    }

    fn validate(&self) -> Result<()> {
        if self.slot_bytes < 64 || self.slot_bytes % 64 != 0 || self.slot_bytes > 1 << 30 {
            return Err(Error::Invalid(format!("chunk size {} must be a multiple of 64 up to 1 GiB", self.slot_bytes)));
        }
        if [self.nslots, self.ring_slots].iter().any(|&n| !(2..=MAX_SLOTS).contains(&n)) {
            return Err(Error::Invalid(format!("2 to {MAX_SLOTS} slots per stream")));
        }
        if self.ring_lanes == 0 || self.ring_lanes > RING_LANES_MAX {
            return Err(Error::Invalid(format!("ring lanes must be 1..={RING_LANES_MAX}")));
        }
        Ok(())
    }
}

/// How to create a communicator.
#[derive(Debug, Clone)]
pub struct InitOpts {
    pub rank: usize,
    pub size: usize,
    pub local_rank: usize,
    /// Ranks on this node, when the launcher says (for [`crate::affinity`]).
    pub local_size: Option<usize>,
    /// Where to run (`DOORBELL_BIND`, see [`crate::affinity`]).
    pub bind: Bind,
    /// Rank 0's bootstrap address and port.
    pub master_addr: String,
    pub master_port: u16,
    /// RDMA device (`None`: the embedded softhca; `DOORBELL_DEVICE`).
    pub device: Option<String>,
    /// Deadline for the bootstrap, and for any wait without progress
    /// (`DOORBELL_TIMEOUT` seconds, default 60).
    pub timeout: Duration,
    pub tuning: Tuning,
}

impl InitOpts {
    /// From the launcher's variables (see [`crate::launch`]) and `DOORBELL_*`.
    pub fn from_env() -> Result<InitOpts> {
        let env = LaunchEnv::from_env()?.ok_or_else(|| {
            Error::Invalid("no launcher variables: set RANK/WORLD_SIZE (torchrun, doorbell launch) or run under mpirun".into())
        })?;
        let timeout = match std::env::var("DOORBELL_TIMEOUT") {
            Ok(v) if !v.is_empty() => {
                Duration::from_secs_f64(v.parse().map_err(|_| Error::Invalid(format!("DOORBELL_TIMEOUT={v:?} is not a number")))?)
            }
            _ => Duration::from_secs(60),
        };
        Ok(InitOpts {
            rank: env.rank,
            size: env.world_size,
            local_rank: env.local_rank,
            local_size: env.local_world_size,
            bind: Bind::from_env()?,
            master_addr: env.master_addr,
            master_port: env.master_port,
            device: std::env::var("DOORBELL_DEVICE").ok().filter(|s| !s.is_empty()),
            timeout,
            tuning: Tuning::from_env()?,
        })
    }
}

/// The idle policy (`DOORBELL_IDLE`: `yield`, `spin`, or `auto`, the default): spin
/// where the node has a CPU for each of its `local_size` ranks, else yield
/// ([`Idle`]). Decided before the rank is pinned (which narrows its CPUs to one).
fn idle_policy(local_size: Option<usize>) -> Result<Idle> {
    match std::env::var("DOORBELL_IDLE").ok().as_deref().map(str::trim) {
        Some("yield") => Ok(Idle::Yield),
        Some("spin") => Ok(Idle::Spin),
        None | Some("") | Some("auto") => {
            let spare = local_size.zip(affinity::allowed_cpus()).is_some_and(|(n, cpus)| n <= cpus);
            Ok(if spare { Idle::Spin } else { Idle::Yield })
        }
        Some(v) => Err(Error::Invalid(format!("DOORBELL_IDLE={v:?}: auto, yield or spin"))),
    }
}

/// What a kept plan was built for: the collective (0 all-reduce, 1 barrier), element
/// count and size, in place, and the algorithm.
type PlanKey = (u8, usize, usize, bool, Algo);

/// Plans kept for repeated calls (a training loop's few shapes).
const KEPT_PLANS: usize = 16;

/// One rank of a group that runs collectives together.
pub struct Communicator {
    rank: usize,
    size: usize,
    local_rank: usize,
    tuning: Tuning,
    engine: Engine,
    monitor: Option<Monitor>,
    /// The CPU this rank was pinned to ([`crate::affinity`]), if it was.
    cpu: Option<usize>,
    /// Plans of earlier calls, newest last: building one per call cost 3 % of an 8 B
    /// all-reduce (allocations, the algorithm's stream lookups). A plan depends only
    /// on its key and the tuning, and the tuning's algorithm choice clears them.
    plans: Vec<(PlanKey, Plan)>,
}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator").field("rank", &self.rank).field("size", &self.size).field("transport", &self.engine.describe()).finish()
    }
}

/// Streams of `rank` for every algorithm, and its distinct peers.
fn topology(rank: usize, size: usize, lanes: usize) -> (Vec<usize>, StreamList, StreamList) {
    let (mut ins, mut outs) = ring::streams(rank, size, lanes);
    let (ti, to) = tree::streams(rank, size);
    ins.extend(ti);
    outs.extend(to);
    let (di, dout) = doubling::streams(rank, size);
    ins.extend(di);
    outs.extend(dout);
    let (ai, aout) = alltoall::streams(rank, size);
    ins.extend(ai);
    outs.extend(aout);
    let mut peers: Vec<usize> = ins.iter().chain(&outs).map(|&(p, _)| p).collect();
    peers.sort_unstable();
    peers.dedup();
    (peers, ins, outs)
}

fn encode_links(rank: usize, links: &[LinkInfo]) -> Vec<u8> {
    let mut v = Vec::new();
    let w32 = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_le_bytes());
    w32(&mut v, rank as u32);
    w32(&mut v, links.len() as u32);
    for l in links {
        w32(&mut v, l.peer as u32);
        w32(&mut v, l.conn.len() as u32);
        v.extend_from_slice(&l.conn);
        w32(&mut v, l.regions.len() as u32);
        for (ch, r) in &l.regions {
            v.push(ch.0);
            v.extend_from_slice(&r.addr.to_le_bytes());
            w32(&mut v, r.rkey);
            w32(&mut v, r.nslots);
            w32(&mut v, r.slot_bytes);
        }
    }
    v
}

fn decode_links(from: usize, b: &[u8]) -> Result<(usize, Vec<LinkInfo>)> {
    let bad = || Error::Protocol { rank: from, why: "malformed connection info".into() };
    let mut p = b;
    let mut take = |n: usize| -> Result<&[u8]> {
        if p.len() < n {
            return Err(bad());
        }
        let (a, rest) = p.split_at(n);
        p = rest;
        Ok(a)
    };
    macro_rules! u32_ {
        () => {
            u32::from_le_bytes(take(4)?.try_into().unwrap())
        };
    }
    let rank = u32_!() as usize;
    let n = u32_!() as usize;
    let mut links = Vec::with_capacity(n.min(1024));
    for _ in 0..n {
        let peer = u32_!() as usize;
        let cl = u32_!() as usize;
        let conn = take(cl)?.to_vec();
        let nr = u32_!() as usize;
        let mut regions = Vec::with_capacity(nr.min(64));
        for _ in 0..nr {
            let ch = Channel(take(1)?[0]);
            let addr = u64::from_le_bytes(take(8)?.try_into().unwrap());
            let rkey = u32_!();
            let nslots = u32_!();
            let slot_bytes = u32_!();
            regions.push((ch, Region { addr, rkey, nslots, slot_bytes }));
        }
        links.push(LinkInfo { peer, conn, regions });
    }
    Ok((rank, links))
}

impl Communicator {
    /// Creates rank `opts.rank` of `opts.size` over RDMA, meeting the others at
    /// `master_addr:master_port`.
    pub fn init(opts: InitOpts) -> Result<Communicator> {
        opts.tuning.validate()?;
        let idle = idle_policy(opts.local_size)?;
        // Before the device's threads start, so that they inherit the placement.
        let cpu = affinity::place(opts.bind, opts.local_rank, opts.local_size)?;
        let mut boot = TcpBootstrap::connect(opts.rank, opts.size, &opts.master_addr, opts.master_port, opts.timeout)?;
        let watch = Watch::new();
        let device = opts.device.clone();
        let rank = opts.rank;
        let mut comm = Communicator::setup(opts.rank, opts.size, opts.local_rank, opts.tuning, opts.timeout, watch.clone(), &mut boot, |peers| {
            Ok(Box::new(RdmaTransport::new(device.as_deref(), rank, peers)?) as Box<dyn Transport>)
        })?;
        comm.monitor = Some(boot.into_monitor(watch)?);
        comm.cpu = cpu;
        comm.engine.set_idle(idle);
        tracing::info!(target: "collective", rank = comm.rank, size = comm.size, transport = %comm.engine.describe(), "communicator ready");
        Ok(comm)
    }

    /// [`Communicator::init`] with [`InitOpts::from_env`].
    pub fn from_env() -> Result<Communicator> {
        Communicator::init(InitOpts::from_env()?)
    }

    /// Rank `rank` of an in-process group of threads on `fabric` (shared-memory
    /// transport with RDMA semantics): for tests and single-process use.
    pub fn in_process(fabric: &MemFabric, rank: usize, tuning: Tuning) -> Result<Communicator> {
        let mut ex = fabric.exchange(rank);
        let f = fabric.clone();
        Communicator::setup(rank, fabric.nranks(), rank, tuning, Duration::from_secs(60), Watch::new(), &mut ex, move |peers| {
            Ok(Box::new(f.transport(rank, peers)) as Box<dyn Transport>)
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn setup(
        rank: usize,
        size: usize,
        local_rank: usize,
        tuning: Tuning,
        timeout: Duration,
        watch: Arc<Watch>,
        ex: &mut dyn Exchange,
        make: impl FnOnce(&[usize]) -> Result<Box<dyn Transport>>,
    ) -> Result<Communicator> {
        tuning.validate()?;
        let (peers, ins, outs) = topology(rank, size, tuning.ring_lanes);
        let transport = make(&peers)?;
        let mut engine = Engine::new(transport, rank, size, peers.clone(), &ins, &outs, |ch| tuning.slots(ch), tuning.slot_bytes, watch, timeout)?;
        let table = ex.all_gather(&encode_links(rank, &engine.publish()))?;
        for &p in &peers {
            let (r, links) = decode_links(p, &table[p])?;
            if r != p {
                return Err(Error::Protocol { rank: p, why: format!("table entry {p} is rank {r}'s") });
            }
            let mine = links.into_iter().find(|l| l.peer == rank).ok_or_else(|| Error::Protocol {
                rank: p,
                why: format!("rank {p} has no link to rank {rank}: do the ranks run the same version and settings?"),
            })?;
            engine.connect(&LinkInfo { peer: p, ..mine })?;
        }
        ex.barrier()?;
        Ok(Communicator { rank, size, local_rank, tuning, engine, monitor: None, cpu: None, plans: Vec::new() })
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Ranks in the group.
    pub fn size(&self) -> usize {
        self.size
    }

    /// This rank's index on its node.
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// The CPU this rank was pinned to at creation (see [`crate::affinity`]), if any.
    pub fn cpu(&self) -> Option<usize> {
        self.cpu
    }

    /// Sends straight from the application's buffers in calls of at least `min` bytes,
    /// or never (`None`); see [`Tuning::user_buffer_min_bytes`].
    pub fn set_user_buffers(&mut self, min: Option<usize>) {
        self.tuning.user_buffer_min_bytes = min;
    }

    /// Takes direct all-gather writes into the receive buffer, or not; see
    /// [`Tuning::direct`].
    pub fn set_direct(&mut self, on: bool) {
        self.tuning.direct = on;
    }

    /// Messages this rank has sent straight into a peer's receive buffer, and
    /// received straight into its own, so far ([`crate::direct`]).
    pub fn direct_messages(&self) -> (u64, u64) {
        self.engine.direct_messages()
    }

    /// What the engine may do with the application's buffers, from the tuning.
    fn buffer_use(&self) -> BufferUse {
        BufferUse { user_min: self.tuning.user_buffer_min_bytes, direct: self.tuning.direct }
    }

    /// The tuning in force.
    pub fn tuning(&self) -> &Tuning {
        &self.tuning
    }

    /// Changes the algorithm policy (e.g. to force the ring or the tree).
    pub fn set_algo(&mut self, choice: AlgoChoice) {
        self.tuning.algo = choice;
        self.plans.clear();
    }

    /// The kept plan for `key`, rewound, or a new one from `build`; hand it back with
    /// [`Communicator::keep_plan`] after the call.
    fn take_plan(&mut self, key: PlanKey, build: impl FnOnce(&Self) -> Plan) -> Plan {
        match self.plans.iter().position(|(k, _)| *k == key) {
            Some(i) => {
                let mut p = self.plans.swap_remove(i).1;
                p.rewind();
                p
            }
            None => build(self),
        }
    }

    /// Keeps `plan` for the next call with `key` (the oldest goes beyond
    /// [`KEPT_PLANS`]).
    fn keep_plan(&mut self, key: PlanKey, plan: Plan) {
        if self.plans.len() >= KEPT_PLANS {
            self.plans.remove(0);
        }
        self.plans.push((key, plan));
    }

    /// The algorithm an all-reduce of `bytes` would use.
    pub fn algo_for(&self, bytes: usize) -> Algo {
        self.tuning.algo.pick(bytes, self.size, self.tuning.nslots)
    }

    /// What carries the data ("rdma softhca0 127.0.0.2", "mem rank 1 of 4").
    pub fn transport(&self) -> String {
        self.engine.describe()
    }

    fn ring_shape<T: Element>(&self) -> RingShape {
        let sz = std::mem::size_of::<T>();
        RingShape {
            rank: self.rank,
            n: self.size,
            lanes: self.tuning.ring_lanes,
            chunk: (self.tuning.slot_bytes / sz).max(1),
            min_chunk: (self.tuning.ring_min_chunk_bytes / sz).max(1),
        }
    }

    fn all_reduce_plan<T: Element>(&self, count: usize, in_place: bool) -> Plan {
        let bytes = count * std::mem::size_of::<T>();
        match self.algo_for(bytes) {
            Algo::Ring => ring::all_reduce_plan(&self.engine, self.ring_shape::<T>(), count),
            Algo::Tree => {
                let chunk = (self.tuning.tree_chunk_bytes.min(self.tuning.slot_bytes) / std::mem::size_of::<T>()).max(1);
                tree::all_reduce_plan(&self.engine, self.rank, self.size, count, chunk)
            }
            Algo::Doubling => {
                let chunk = (self.tuning.slot_bytes / std::mem::size_of::<T>()).max(1);
                doubling::all_reduce_plan(&self.engine, self.rank, self.size, count, chunk)
            }
            Algo::Halving => {
                let chunk = (self.tuning.slot_bytes / std::mem::size_of::<T>()).max(1);
                halving::all_reduce_plan(&self.engine, self.rank, self.size, count, chunk, in_place)
            }
            Algo::AllToAll => {
                let chunk = (self.tuning.slot_bytes / std::mem::size_of::<T>()).max(1);
                alltoall::all_reduce_plan(&self.engine, self.rank, self.size, count, chunk)
            }
        }
    }

    /// Every rank gets `recv[i] = send_0[i] op send_1[i] op ... op send_{n-1}[i]`
    /// (`Avg` divides the sum by `n`). `send` and `recv` must have the same length on
    /// every rank.
    pub fn all_reduce<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        if send.len() != recv.len() {
            return Err(Error::Invalid(format!("all_reduce: send has {} elements, recv {}", send.len(), recv.len())));
        }
        if self.size == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let key = (0, send.len(), std::mem::size_of::<T>(), false, self.algo_for(std::mem::size_of_val(send)));
        let mut plan = self.take_plan(key, |c| c.all_reduce_plan::<T>(send.len(), false));
        let r = self.engine.run(&mut plan, Bufs::OutOfPlace(send, recv), op, self.buffer_use());
        self.keep_plan(key, plan);
        r
    }

    /// [`Communicator::all_reduce`] with one buffer as both contribution and result.
    pub fn all_reduce_in_place<T: Element>(&mut self, buf: &mut [T], op: ReduceOp) -> Result<()> {
        if self.size == 1 {
            return Ok(());
        }
        let key = (0, buf.len(), std::mem::size_of::<T>(), true, self.algo_for(std::mem::size_of_val(buf)));
        let mut plan = self.take_plan(key, |c| c.all_reduce_plan::<T>(buf.len(), true));
        let r = self.engine.run(&mut plan, Bufs::InPlace(buf), op, self.buffer_use());
        self.keep_plan(key, plan);
        r
    }

    /// Copies `root`'s `buf` into every other rank's `buf` (same length everywhere).
    pub fn broadcast<T: Element>(&mut self, buf: &mut [T], root: usize) -> Result<()> {
        if root >= self.size {
            return Err(Error::Invalid(format!("broadcast root {root} outside {} ranks", self.size)));
        }
        if self.size == 1 {
            return Ok(());
        }
        let mut plan = ring::broadcast_plan(&self.engine, self.ring_shape::<T>(), buf.len(), root);
        self.engine.run(&mut plan, Bufs::InPlace(buf), ReduceOp::Sum, self.buffer_use())
    }

    /// `send` holds `size` blocks of `recv.len()` elements; rank `r` receives block
    /// `r` reduced over all ranks.
    pub fn reduce_scatter<T: Element>(&mut self, send: &[T], recv: &mut [T], op: ReduceOp) -> Result<()> {
        if send.len() != recv.len() * self.size {
            return Err(Error::Invalid(format!("reduce_scatter: send has {} elements, needs {} x {}", send.len(), self.size, recv.len())));
        }
        if self.size == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let mut plan = ring::reduce_scatter_plan(&self.engine, self.ring_shape::<T>(), recv.len());
        self.engine.run(&mut plan, Bufs::OutOfPlace(send, recv), op, self.buffer_use())
    }

    /// Every rank receives every rank's `send` at `recv[r * send.len() ..]`.
    pub fn all_gather<T: Element>(&mut self, send: &[T], recv: &mut [T]) -> Result<()> {
        if recv.len() != send.len() * self.size {
            return Err(Error::Invalid(format!("all_gather: recv has {} elements, needs {} x {}", recv.len(), self.size, send.len())));
        }
        if self.size == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let mut plan = ring::all_gather_plan(&self.engine, self.ring_shape::<T>(), send.len());
        self.engine.run(&mut plan, Bufs::OutOfPlace(send, recv), ReduceOp::Sum, self.buffer_use())
    }

    /// Returns once every rank has entered the barrier.
    pub fn barrier(&mut self) -> Result<()> {
        if self.size == 1 {
            return Ok(());
        }
        let mut x = [1u8];
        // The fewest sequential messages: recursive doubling where it applies.
        let algo = if doubling::applies(self.size) { Algo::Doubling } else { Algo::Tree };
        let key = (1, 1, 1, true, algo);
        let mut plan = self.take_plan(key, |c| match algo {
            Algo::Doubling => doubling::all_reduce_plan(&c.engine, c.rank, c.size, 1, 1),
            _ => tree::all_reduce_plan(&c.engine, c.rank, c.size, 1, 1),
        });
        let r = self.engine.run(&mut plan, Bufs::InPlace(&mut x), ReduceOp::Max, self.buffer_use());
        self.keep_plan(key, plan);
        r
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        // The shutdown handshake first: no peer may still need our QPs.
        if let Some(mut m) = self.monitor.take() {
            m.finish();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_info_round_trips() {
        let links = vec![
            LinkInfo { peer: 3, conn: vec![1, 2, 3], regions: vec![(Channel(5), Region { addr: 0xdead_0000, rkey: 7, nslots: 4, slot_bytes: 4096 })] },
            LinkInfo { peer: 1, conn: vec![], regions: vec![] },
        ];
        let b = encode_links(2, &links);
        assert_eq!(decode_links(2, &b).unwrap(), (2, links));
        assert!(decode_links(2, &b[..b.len() - 1]).is_err());
    }

    #[test]
    fn topology_links_each_peer_once() {
        for n in 1..=9 {
            for r in 0..n {
                let (peers, ins, outs) = topology(r, n, 2);
                assert!(!peers.contains(&r), "n={n} r={r} links to itself");
                assert_eq!(ins.len(), outs.len());
                assert!(peers.len() <= 8);
            }
        }
    }
}
