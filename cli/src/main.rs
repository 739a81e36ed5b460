//! `doorbell`: the command-line front end. It parses arguments and calls the
//! libraries; every subcommand lives in its own module.

mod devinfo;

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
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Devinfo(a) => devinfo::run(&a),
    };
    if let Err(e) = r {
        eprintln!("doorbell: {e:#}");
        std::process::exit(1);
    }
}
