//! `doorbell trace [-o FILE] [--text] [--svg FILE] -- CMD [ARGS]`: runs CMD with
//! `DOORBELL_TRACE_DIR` set, so that it and every process it starts (perftest's server and
//! client, `doorbell allreduce`'s ranks, mpirun's children: the variable is inherited)
//! record their driver path, then merges the per-process files into one Chrome Trace
//! Event timeline (see the doorbell-trace crate and docs/trace.md).
//!
//! A stock rdma-core program runs on softhca through the preload library, with the
//! environment `doorbell softhca` gives it; doorbell's own programs need none.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};

use crate::softhca::{find_preload, ld_preload_value};

#[derive(clap::Args)]
pub struct Args {
    /// The Chrome Trace Event JSON file (open it in ui.perfetto.dev or chrome://tracing).
    #[arg(short = 'o', long, default_value = "trace.json", value_name = "FILE")]
    output: PathBuf,
    /// Also print each thread's call tree with durations to stdout.
    #[arg(long)]
    text: bool,
    /// Also draw a timeline picture (tracks per process and thread) as SVG.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Keep the per-process record files in this directory instead of a temporary one.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Never add the preload library (a program on a real device, or one that loads it
    /// itself). By default it is added unless CMD is doorbell or names doorbell among its
    /// arguments (a launcher: `mpirun -np 4 doorbell allreduce`).
    #[arg(long)]
    no_preload: bool,
    /// Run CMD on the machine's real uverbs device (the rxe guest of tests/vm/rxe-vm.sh,
    /// a host with an HCA) with the preload library only recording: every ioctl, write()
    /// and mmap stock libibverbs makes on /dev/infiniband/uverbsN is decoded with the
    /// kernel's answer (DOORBELL_PRELOAD_PASSTHROUGH=1).
    #[arg(long, conflicts_with = "no_preload")]
    passthrough: bool,
    /// The preload library to use (default: next to this executable).
    #[arg(long, value_name = "PATH")]
    preload: Option<PathBuf>,
    /// The program to run and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    cmd: Vec<OsString>,
}

/// Whether `prog` is doorbell itself (which has softhca inside and needs no preload).
fn is_doorbell(prog: &Path) -> bool {
    if prog.file_name().is_some_and(|n| n == "doorbell") {
        return true;
    }
    let me = std::env::current_exe().ok().and_then(|p| p.canonicalize().ok());
    me.is_some() && prog.canonicalize().ok() == me
}

pub fn run(a: &Args) -> Result<()> {
    let (prog, rest) = a.cmd.split_first().context("no command given")?;
    let dir = match &a.keep {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("doorbell-trace.{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let dir = dir.canonicalize().unwrap_or(dir);
    let mut cmd = Command::new(prog);
    cmd.args(rest).env(doorbell_trace::DIR_ENV, &dir);
    // `mpirun ... doorbell allreduce`: a launcher of doorbell programs needs no preload
    // either (the ranks would inherit it).
    let runs_doorbell = a.cmd.iter().any(|c| is_doorbell(Path::new(c)));
    if a.passthrough || (!a.no_preload && !runs_doorbell) {
        let lib = find_preload(a.preload.as_deref())?;
        cmd.env("LD_PRELOAD", ld_preload_value(std::env::var_os("LD_PRELOAD").as_deref(), &lib));
    }
    if a.passthrough {
        cmd.env("DOORBELL_PRELOAD_PASSTHROUGH", "1");
    }
    // Ctrl-C is for CMD: this process lives on to merge what was recorded. A handler
    // (not SIG_IGN, which exec would pass on to CMD) that does nothing.
    extern "C" fn on_sigint(_: libc::c_int) {}
    // SAFETY: the handler is async-signal-safe (it does nothing); signal() has no other
    // preconditions.
    unsafe { libc::signal(libc::SIGINT, on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t) };
    let status = cmd.status().with_context(|| format!("cannot run {}", Path::new(prog).display()))?;
    let procs = doorbell_trace::jsonl::read_dir(&dir).with_context(|| format!("read {}", dir.display()))?;
    if a.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let n = std::fs::File::create(&a.output)
        .map(std::io::BufWriter::new)
        .and_then(|mut w| {
            let n = doorbell_trace::chrome::write(&procs, &mut w)?;
            std::io::Write::flush(&mut w)?;
            Ok(n)
        })
        .with_context(|| format!("write {}", a.output.display()))?;
    eprintln!("doorbell trace: {} processes, {n} trace events -> {}", procs.len(), a.output.display());
    if a.text {
        print!("{}", doorbell_trace::text::render(&procs));
    }
    if let Some(svg) = &a.svg {
        doorbell_trace::svg::write(&procs, svg).map_err(|e| anyhow::anyhow!("write {}: {e}", svg.display()))?;
    }
    if !status.success() {
        bail!("{} exited with {status}", Path::new(prog).display());
    }
    Ok(())
}
