//! `doorbell launch`: torchrun's local launcher. Starts `--nproc-per-node` copies of
//! a command with `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`,
//! `MASTER_ADDR` and `MASTER_PORT` set, waits for them, and when one fails stops the
//! others and exits non-zero naming the failed rank.
//!
//! ```text
//! doorbell launch --nproc-per-node 4 -- doorbell allreduce
//! # two hosts (run on each, node rank 0 and 1):
//! doorbell launch --nnodes 2 --node-rank 0 --nproc-per-node 1 --master-addr 10.0.0.1 -- CMD
//! ```

use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// torchrun's flags (with its underscore spellings as aliases).
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Processes to start on this node.
    #[arg(long = "nproc-per-node", alias = "nproc_per_node", default_value_t = 1)]
    pub nproc_per_node: usize,
    /// Nodes in the job.
    #[arg(long, default_value_t = 1)]
    pub nnodes: usize,
    /// This node's index (0 .. nnodes-1).
    #[arg(long = "node-rank", alias = "node_rank", default_value_t = 0)]
    pub node_rank: usize,
    /// Address of the node that runs rank 0 (the bootstrap listens there).
    #[arg(long = "master-addr", alias = "master_addr", default_value = "127.0.0.1")]
    pub master_addr: String,
    /// Bootstrap port on the master node.
    #[arg(long = "master-port", alias = "master_port", default_value_t = 29500)]
    pub master_port: u16,
    /// Seconds to wait after the first failure before SIGKILL replaces SIGTERM.
    #[arg(long, default_value_t = 3.0)]
    pub grace: f64,
    /// The command and its arguments (after `--`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true, num_args = 1..)]
    pub cmd: Vec<OsString>,
}

/// What to start.
#[derive(Debug, Clone)]
pub struct Job {
    pub nproc: usize,
    pub nnodes: usize,
    pub node_rank: usize,
    pub master_addr: String,
    pub master_port: u16,
    pub program: OsString,
    pub args: Vec<OsString>,
    pub grace: Duration,
}

pub fn run(a: &Args) -> Result<()> {
    let (program, args) = a.cmd.split_first().context("no command to launch")?;
    run_job(&Job {
        nproc: a.nproc_per_node,
        nnodes: a.nnodes,
        node_rank: a.node_rank,
        master_addr: a.master_addr.clone(),
        master_port: a.master_port,
        program: program.clone(),
        args: args.to_vec(),
        grace: Duration::from_secs_f64(a.grace.max(0.0)),
    })
}

struct Rank {
    rank: usize,
    local: usize,
    child: Child,
    status: Option<ExitStatus>,
}

fn describe(s: ExitStatus) -> String {
    match (s.code(), s.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(sig)) => format!("signal {sig} ({})", nix::sys::signal::Signal::try_from(sig).map(|s| s.as_str()).unwrap_or("?")),
        _ => "an unknown status".into(),
    }
}

/// Starts the job's local ranks and waits for them.
pub fn run_job(job: &Job) -> Result<()> {
    if job.nproc == 0 || job.nnodes == 0 || job.node_rank >= job.nnodes {
        bail!("need --nproc-per-node >= 1 and --node-rank < --nnodes");
    }
    let world = job.nproc * job.nnodes;
    let mut ranks = Vec::with_capacity(job.nproc);
    for local in 0..job.nproc {
        let rank = job.node_rank * job.nproc + local;
        let mut cmd = Command::new(&job.program);
        cmd.args(&job.args)
            .env("RANK", rank.to_string())
            .env("WORLD_SIZE", world.to_string())
            .env("LOCAL_RANK", local.to_string())
            .env("LOCAL_WORLD_SIZE", job.nproc.to_string())
            .env("GROUP_RANK", job.node_rank.to_string())
            .env("MASTER_ADDR", &job.master_addr)
            .env("MASTER_PORT", job.master_port.to_string());
        // A launch inside mpirun must not look like an mpirun rank to the children.
        for k in ["OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"] {
            cmd.env_remove(k);
        }
        // SAFETY: the closure runs in the child between fork and exec and only calls
        // prctl, which is async-signal-safe; it allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                // Die with the launcher, so no rank outlives a killed launch.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            })
        };
        match cmd.spawn() {
            Ok(child) => ranks.push(Rank { rank, local, child, status: None }),
            Err(e) => {
                stop_all(&mut ranks, job.grace);
                return Err(e).with_context(|| format!("starting rank {rank}: {:?}", job.program));
            }
        }
    }
    loop {
        let mut failed = None;
        for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
            if let Some(s) = r.child.try_wait().context("waiting for a rank")? {
                r.status = Some(s);
                if !s.success() && failed.is_none() {
                    failed = Some((r.rank, r.local, r.child.id(), s));
                }
            }
        }
        if let Some((rank, local, pid, s)) = failed {
            let running = ranks.iter().filter(|r| r.status.is_none()).count();
            stop_all(&mut ranks, job.grace);
            bail!("rank {rank} (local rank {local}, pid {pid}) failed with {}; stopped the {running} other running rank(s)", describe(s));
        }
        if ranks.iter().all(|r| r.status.is_some()) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGTERM to every running rank, then SIGKILL after `grace`.
fn stop_all(ranks: &mut [Rank], grace: Duration) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    for r in ranks.iter().filter(|r| r.status.is_none()) {
        let _ = kill(Pid::from_raw(r.child.id() as i32), Signal::SIGTERM);
    }
    let deadline = Instant::now() + grace;
    loop {
        for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
            if let Ok(Some(s)) = r.child.try_wait() {
                r.status = Some(s);
            }
        }
        if ranks.iter().all(|r| r.status.is_some()) {
            return;
        }
        if Instant::now() >= deadline {
            for r in ranks.iter_mut().filter(|r| r.status.is_none()) {
                let _ = r.child.kill();
                r.status = r.child.wait().ok();
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A TCP port that was free a moment ago (for a bootstrap on this machine).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
