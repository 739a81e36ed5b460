//! `doorbell bench ...`: perftest-style RDMA benchmarks between two processes (each
//! its own softhca host), plus the references they are judged against: single-core
//! memcpy bandwidth and the CPU an idle device burns.
//!
//! Files: `opts` (flags, resolved parameters), `oob` (the TCP exchange and its line
//! protocol), `resources` (device, buffer, CQ, QPs, connecting), `wait` (polling,
//! events, watchdog), `pattern` (`--check` data), `bw` and `lat` (the test loops),
//! `session` (one run from either end), `report` (perftest's header and tables),
//! `local` (`--local`: the server as a child process), `memcpy`, `idle`; `gpu`
//! (`--use-cuda`: buffers in GPU memory), `memory` (host or GPU memory behind the MR),
//! `cuda_memcpy` (the cudaMemcpy reference of GPU runs).

mod bw;
mod cuda_memcpy;
mod gpu;
mod idle;
mod lat;
mod local;
mod memcpy;
mod memory;
pub(crate) mod oob;
mod opts;
pub(crate) mod pattern;
mod report;
mod resources;
mod session;
mod steer;
mod wait;

use anyhow::Result;

pub use opts::Opts;
use opts::Test;
pub(crate) use resources::softhca_counters;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    kind: Kind,
}

#[derive(clap::Subcommand)]
enum Kind {
    /// RDMA WRITE bandwidth (like ib_write_bw).
    WriteBw(Opts),
    /// RDMA WRITE ping-pong latency (like ib_write_lat).
    WriteLat(Opts),
    /// RDMA READ bandwidth (like ib_read_bw).
    ReadBw(Opts),
    /// RDMA READ latency (like ib_read_lat).
    ReadLat(Opts),
    /// SEND bandwidth (like ib_send_bw).
    SendBw(Opts),
    /// SEND ping-pong latency (like ib_send_lat).
    SendLat(Opts),
    /// Atomic fetch-and-add / compare-and-swap rate (like ib_atomic_bw).
    AtomicBw(Opts),
    /// Single-core memcpy bandwidth (the reference for RDMA bandwidth).
    Memcpy(memcpy::Args),
    /// CPU used by an idle softhca instance, as % of one core.
    Idle(idle::Args),
    /// Steering benchmark, sending end: UDP frames as fast as possible on an
    /// interface (AF_PACKET sendmmsg), over a range of ports (cli/bench/steer.sh).
    SteerSend(steer::SendArgs),
    /// Steering benchmark, the kernel reference: AF_PACKET receive of the same frames.
    SteerSniff(steer::SniffArgs),
    /// Steering engine alone: ns per classified frame with 1/100/10,000 exact-match rules.
    SteerClassify(steer::ClassifyArgs),
}

pub fn run(a: &Args) -> Result<()> {
    let (test, o) = match &a.kind {
        Kind::Memcpy(m) => return memcpy::run(m),
        Kind::Idle(i) => return idle::run(i),
        Kind::SteerSend(s) => return steer::send(s),
        Kind::SteerSniff(s) => return steer::sniff(s),
        Kind::SteerClassify(s) => return steer::classify(s),
        Kind::WriteBw(o) => (Test::WriteBw, o),
        Kind::WriteLat(o) => (Test::WriteLat, o),
        Kind::ReadBw(o) => (Test::ReadBw, o),
        Kind::ReadLat(o) => (Test::ReadLat, o),
        Kind::SendBw(o) => (Test::SendBw, o),
        Kind::SendLat(o) => (Test::SendLat, o),
        Kind::AtomicBw(o) => (Test::AtomicBw, o),
    };
    gpu::check_flags(test, o)?;
    gpu::require_driver(o);
    let by_bus = gpu::resolve_bus_id(o)?;
    let o = by_bus.as_ref().unwrap_or(o);
    if o.vs_memcpy && test != Test::WriteBw {
        anyhow::bail!("--vs-memcpy is for write-bw");
    }
    if o.local {
        if o.host.is_some() {
            anyhow::bail!("--local runs both ends; give no host");
        }
        return local::run(test, o);
    }
    match &o.host {
        Some(h) => session::client(test, o, h),
        None => session::server(test, o),
    }
}
