//! Placing ranks on CPUs when a node runs more ranks than it has CPUs.
//!
//! Why: with four ranks on two CPUs and the scheduler free to move them, a rank and its
//! softhca engine thread keep landing on the other CPU, away from their staging slots
//! and receive buffers in that CPU's cache. Pinning the ranks in blocks (ranks 0 and 1 on
//! the first CPU, 2 and 3 on the second) made 4-rank all-reduces faster in interleaved
//! runs on the 2-CPU machine: recursive doubling by 6 to 8 % at 8 B to 4 KiB, the ring by
//! 0 to 18 % from 1 to 16 MiB depending on the hour (docs/benchmarks-history.md). Blocks keep
//! ring neighbours (and recursive doubling's first partners) together on one CPU, where
//! a message needs no cross-CPU cache traffic; placing ranks round-robin instead was
//! slower in half of the runs.
//!
//! When: only when the node is oversubscribed (more local ranks than CPUs this process
//! may use) and nobody has placed the process already (its allowed set is every online
//! CPU). With a CPU per rank the scheduler does well by itself and pinning would only
//! fight other work on the machine; torchrun does not pin either, and NCCL only keeps
//! its threads on the GPU's NUMA node. `DOORBELL_BIND=none` never pins, `=core` always
//! does (in blocks), `=auto` (the default) decides as above.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

use crate::error::{Error, Result};

/// The placement policy (`DOORBELL_BIND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bind {
    /// Pin in blocks when oversubscribed and not placed already.
    #[default]
    Auto,
    /// Leave placement to the scheduler.
    None,
    /// Pin in blocks whenever the launcher says how many ranks share the node.
    Core,
}

impl Bind {
    /// From `DOORBELL_BIND` (`auto`, `none` or `0`, `core` or `1`).
    pub fn from_env() -> Result<Bind> {
        match std::env::var("DOORBELL_BIND").ok().as_deref().map(str::trim) {
            None | Some("") | Some("auto") => Ok(Bind::Auto),
            Some("none") | Some("0") => Ok(Bind::None),
            Some("core") | Some("1") => Ok(Bind::Core),
            Some(v) => Err(Error::Invalid(format!("DOORBELL_BIND={v:?}: auto, none or core"))),
        }
    }
}

/// The CPU for local rank `local_rank` of `local_size` among the `allowed` CPUs (in
/// order), in blocks of `local_size / allowed.len()` consecutive ranks; `None` where the
/// policy leaves the rank alone. `all_online`: the allowed set is every online CPU
/// (nobody has placed the process).
pub fn choose(bind: Bind, local_rank: usize, local_size: usize, allowed: &[usize], all_online: bool) -> Option<usize> {
    if allowed.is_empty() || local_size == 0 || local_rank >= local_size {
        return None;
    }
    let pin = match bind {
        Bind::None => false,
        Bind::Core => true,
        Bind::Auto => all_online && local_size > allowed.len(),
    };
    pin.then(|| allowed[local_rank * allowed.len() / local_size])
}

/// How many CPUs this process may run on now (its affinity mask), if the system says.
pub fn allowed_cpus() -> Option<usize> {
    let mask = sched_getaffinity(Pid::from_raw(0)).ok()?;
    Some((0..CpuSet::count()).filter(|&c| mask.is_set(c).unwrap_or(false)).count())
}

/// Applies [`choose`] to this process: every thread it has now, and (by inheritance)
/// every thread it starts later, runs only on the chosen CPU. Returns that CPU.
pub fn place(bind: Bind, local_rank: usize, local_size: Option<usize>) -> Result<Option<usize>> {
    let Some(local_size) = local_size else { return Ok(None) };
    let os = |what: &str, e: nix::Error| Error::Invalid(format!("CPU affinity: {what}: {e}"));
    let mask = sched_getaffinity(Pid::from_raw(0)).map_err(|e| os("sched_getaffinity", e))?;
    let allowed: Vec<usize> = (0..CpuSet::count()).filter(|&c| mask.is_set(c).unwrap_or(false)).collect();
    // (Not available_parallelism: it counts the allowed set, not the machine.)
    // SAFETY: sysconf reads a system value; it has no preconditions.
    let online = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(allowed.len());
    let Some(cpu) = choose(bind, local_rank, local_size, &allowed, allowed.len() >= online) else { return Ok(None) };
    let mut set = CpuSet::new();
    set.set(cpu).map_err(|e| os("CpuSet::set", e))?;
    // sched_setaffinity changes one thread; the ones already running (the launcher's
    // helpers, a logging thread, and this one) are listed in /proc/self/task. Without
    // /proc, at least this thread (tid 0: the caller) and those it starts later.
    let tids: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .map(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
        .unwrap_or_else(|_| vec![0]);
    for tid in tids {
        // A thread that exited meanwhile (ESRCH) needs no placing.
        match sched_setaffinity(Pid::from_raw(tid), &set) {
            Ok(()) | Err(nix::Error::ESRCH) => {}
            Err(e) => return Err(os("sched_setaffinity", e)),
        }
    }
    tracing::debug!(target: "collective", local_rank, local_size, cpu, "pinned");
    Ok(Some(cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_when_oversubscribed() {
        let two = [0, 1];
        let got: Vec<_> = (0..4).map(|r| choose(Bind::Auto, r, 4, &two, true)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(1), Some(1)], "ring neighbours share a CPU");
        let got: Vec<_> = (0..3).map(|r| choose(Bind::Auto, r, 3, &two, true)).collect();
        assert_eq!(got, [Some(0), Some(0), Some(1)]);
        // The allowed set's own CPU numbers are used.
        assert_eq!(choose(Bind::Auto, 5, 6, &[2, 5, 7], true), Some(7));
    }

    #[test]
    fn left_alone_otherwise() {
        assert_eq!(choose(Bind::Auto, 0, 2, &[0, 1], true), None, "a CPU per rank");
        assert_eq!(choose(Bind::Auto, 0, 4, &[0, 1], false), None, "already placed by someone");
        assert_eq!(choose(Bind::None, 0, 4, &[0, 1], true), None);
        assert_eq!(choose(Bind::Core, 1, 2, &[0, 1], true), Some(1), "forced");
        assert_eq!(choose(Bind::Core, 4, 4, &[0, 1], true), None, "rank outside the node");
    }
}
