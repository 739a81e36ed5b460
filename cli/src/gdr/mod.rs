//! `doorbell gdr ...`: GPUDirect RDMA on this node.
//!
//! Files: `verify` (the command: capabilities, two passes, the exit status), `steps`
//! (what each pass does, from both ends), `link` (device, CQ, QPs, connecting), `mem`
//! (GPU memory behind a dma-buf MR, or host memory).

mod link;
mod mem;
mod steps;
mod verify;

use anyhow::Result;

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Check GPUDirect RDMA end to end: NCCL's capability checks, then RDMA WRITE, READ,
    /// SEND, inline data, atomics and refused accesses on GPU memory registered as a
    /// dma-buf MR, with a second process as the peer (one side, then both sides).
    #[command(after_help = verify::EXIT_HELP)]
    Verify(verify::Args),
}

/// Runs a `gdr` subcommand; exits with its status when that is not 0.
pub fn run(a: &Args) -> Result<()> {
    match &a.cmd {
        Sub::Verify(v) => {
            let code = verify::run(v);
            if code != 0 {
                use std::io::Write as _;
                let _ = std::io::stdout().flush();
                std::process::exit(code);
            }
            Ok(())
        }
    }
}
