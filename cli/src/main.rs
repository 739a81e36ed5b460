//! `doorbell`: the command-line front end. It parses arguments and calls the
//! libraries; every subcommand lives in its own module.

mod allreduce;
mod bench;
mod devinfo;
mod devx;
mod flow;
mod gdr;
mod launch;
mod pingpong;
mod softhca;
mod topo;
mod trace;

use clap::{Parser, Subcommand};

/// Rust RDMA driver layer: see a verb all the way down to the doorbell.
#[derive(Parser)]
#[command(name = "doorbell", version, about)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Show RDMA devices and their attributes, like ibv_devinfo.
    Devinfo(devinfo::Args),
    /// DevX: the firmware's capability pages (`caps`) and raw PRM commands (`cmd`).
    Devx(devx::Args),
    /// Flow steering rules (match/action) in a session `flow serve` owns: add, del,
    /// list, live counters.
    Flow(flow::Args),
    /// Start N local ranks with torchrun's variables (RANK, WORLD_SIZE, ...), like torchrun.
    Launch(launch::Args),
    /// All-reduce check and nccl-tests style sweep (starts 4 local ranks when not launched).
    Allreduce(allreduce::Args),
    /// Run an unmodified rdma-core program (ibv_devinfo, ibv_rc_pingpong, perftest) on
    /// softhca, through the LD_PRELOAD library libdoorbell_preload.so.
    Softhca(softhca::Args),
    /// RC ping-pong of SENDs, like ibv_rc_pingpong (server without host, client with).
    Pingpong(pingpong::Args),
    /// perftest-style benchmarks (write/read/send/atomic BW and latency), memcpy, idle CPU.
    Bench(bench::Args),
    /// GPUDirect RDMA: `verify` checks GPU memory behind dma-buf MRs end to end.
    Gdr(crate::gdr::Args),
    /// GPU/NIC topology: `nvidia-smi topo -m`'s matrix (-m) or NCCL's tree, and NCCL's
    /// path type and GPUDirect RDMA decision for every GPU-NIC pair.
    Topo(topo::Args),
    /// Record the driver path of CMD and every process it starts (any layer, both ends of
    /// a connection) and write a Chrome Trace Event timeline with flow arrows.
    Trace(trace::Args),
}

/// The subscriber: RUST_LOG's lines on stderr and, under `doorbell trace`
/// (DOORBELL_TRACE_DIR set), the recording layer beside them. Without the variable the
/// subscriber is exactly the plain fmt one, so the callsites' interest and the level
/// filter stay what RUST_LOG makes them.
fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    match doorbell_trace::layer_from_env() {
        None => tracing_subscriber::fmt().with_env_filter(EnvFilter::from_default_env()).with_writer(std::io::stderr).init(),
        Some(rec) => tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(EnvFilter::from_default_env()))
            .with(rec.with_filter(doorbell_trace::record::targets()))
            .init(),
    }
}

fn main() {
    init_tracing();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Devinfo(a) => devinfo::run(&a),
        Cmd::Devx(a) => devx::run(&a),
        Cmd::Flow(a) => flow::run(&a),
        Cmd::Launch(a) => launch::run(&a),
        Cmd::Allreduce(a) => allreduce::run(&a),
        Cmd::Softhca(a) => softhca::run(&a),
        Cmd::Pingpong(a) => pingpong::run(&a),
        Cmd::Bench(a) => bench::run(&a),
        Cmd::Gdr(a) => crate::gdr::run(&a),
        Cmd::Topo(a) => topo::run(&a),
        Cmd::Trace(a) => trace::run(&a),
    };
    if let Err(e) = r {
        eprintln!("doorbell: {e:#}");
        std::process::exit(1);
    }
}
