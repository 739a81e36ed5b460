//! `doorbell allreduce`: the seed's NCCL example and an nccl-tests style sweep.
//!
//! With no launcher variables it starts itself with `--nranks` (4) ranks on this
//! machine (`cargo run --release -- allreduce`); under `doorbell launch`, torchrun or
//! `mpirun -np N` each process is one rank. Every rank fills its buffer with
//! `rank + 1`, all-reduces it (float sum) and checks the result:
//!
//! ```text
//! Rank 0 PASS: count=1048576 expected=10.0 first=10.0 last=10.0
//! ```
//!
//! then rank 0 prints the table of the sweep from `-b` to `-e` bytes (`-f` apart):
//! time per call (us, slowest rank), `algbw = size / time`, `busbw = algbw * 2(n-1)/n`,
//! and the number of wrong elements after a checked call, for out-of-place and
//! in-place calls. With `DOORBELL_COUNTERS` set, each rank prints its softhca
//! counters to stderr at the end.

use std::io::Write;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use collective::{dispatch_dtype, Algo, AlgoChoice, Communicator, DataType, Element, LaunchEnv, ReduceOp};

/// nccl-tests' flags.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Smallest message in bytes (K, M, G suffixes).
    #[arg(short = 'b', long = "minbytes", default_value = "8", value_parser = parse_size)]
    pub minbytes: usize,
    /// Largest message in bytes.
    #[arg(short = 'e', long = "maxbytes", default_value = "1M", value_parser = parse_size)]
    pub maxbytes: usize,
    /// Multiply the size by this from one row to the next.
    #[arg(short = 'f', long = "stepfactor", default_value_t = 2)]
    pub stepfactor: usize,
    /// Timed iterations per size.
    #[arg(short = 'n', long = "iters", default_value_t = 20)]
    pub iters: usize,
    /// Untimed warm-up iterations per size.
    #[arg(short = 'w', long = "warmup_iters", default_value_t = 5)]
    pub warmup: usize,
    /// Element type (int8 uint8 int32 uint32 int64 uint64 half float double bfloat16, or all).
    #[arg(short = 'd', long = "datatype", default_value = "float")]
    pub dtype: String,
    /// Reduction (sum prod max min avg, or all).
    #[arg(short = 'o', long = "op", default_value = "sum")]
    pub op: String,
    /// Check results after timing (1) or not (0).
    #[arg(short = 'c', long = "check", default_value_t = 1)]
    pub check: u8,
    /// Force the algorithm (the same as DOORBELL_ALGO); by size when absent.
    #[arg(long)]
    pub algo: Option<Algo>,
    /// Elements in the PASS/FAIL example (rank r contributes r + 1); 0 skips it.
    #[arg(long, default_value_t = 1 << 20)]
    pub count: usize,
    /// Skip the table (only the example).
    #[arg(long)]
    pub no_table: bool,
    /// Ranks to start when no launcher variables are set.
    #[arg(long, default_value_t = 4)]
    pub nranks: usize,
}

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (num, mul) = match s.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&s[..s.len() - 1], 1usize << 10),
        Some('M') => (&s[..s.len() - 1], 1 << 20),
        Some('G') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    num.parse::<usize>().map(|n| n * mul).map_err(|_| format!("bad size {s:?}"))
}

fn list<T: std::str::FromStr<Err = String> + Copy>(s: &str, all: &[T]) -> Result<Vec<T>> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(all.to_vec());
    }
    s.split(',').map(|x| x.parse::<T>().map_err(anyhow::Error::msg)).collect()
}

pub fn run(a: &Args) -> Result<()> {
    let Some(env) = LaunchEnv::from_env()? else {
        return self_launch(a);
    };
    run_rank(a).with_context(|| format!("rank {} of {}", env.rank, env.world_size))
}

fn run_rank(a: &Args) -> Result<()> {
    let dtypes = list(&a.dtype, &DataType::ALL)?;
    let ops = list(&a.op, &ReduceOp::ALL)?;
    if a.stepfactor < 2 && a.minbytes != a.maxbytes {
        bail!("-f must be at least 2");
    }
    let mut comm = Communicator::from_env().context("communicator")?;
    if let Some(algo) = a.algo {
        comm.set_algo(AlgoChoice { forced: Some(algo), ..comm.tuning().algo });
    }
    let mut ok = true;
    if a.count > 0 {
        ok &= example(&mut comm, a.count)?;
    }
    if !a.no_table {
        ok &= sweep(&mut comm, a, &dtypes, &ops)?;
    }
    if std::env::var_os("DOORBELL_COUNTERS").is_some() {
        // What the device did for this rank (packets, ACKs, retransmits): the first
        // thing to look at when a sweep is slower than it should be.
        if let Some(c) = crate::bench::softhca_counters(&provider::device::soft_name()) {
            // One write for the whole line: the ranks share the launcher's stderr, and
            // a line shorter than PIPE_BUF written at once is not interleaved.
            let line = format!("rank {} softhca counters: {c}\n", comm.rank());
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }
    if !ok {
        bail!("wrong results");
    }
    Ok(())
}

/// Starts `nranks` copies of this very command under the launcher.
fn self_launch(a: &Args) -> Result<()> {
    let exe = std::env::current_exe().context("locating the doorbell binary")?;
    crate::launch::run_job(&crate::launch::Job {
        nproc: a.nranks,
        nnodes: 1,
        node_rank: 0,
        master_addr: "127.0.0.1".into(),
        master_port: crate::launch::free_port()?,
        program: exe.into_os_string(),
        args: std::env::args_os().skip(1).collect(),
        grace: std::time::Duration::from_secs(3),
    })
}

/// Prints `line` from every rank in rank order.
fn in_rank_order(comm: &mut Communicator, line: &str) -> Result<()> {
    for r in 0..comm.size() {
        if r == comm.rank() {
            let mut o = std::io::stdout().lock();
            writeln!(o, "{line}")?;
            o.flush()?;
        }
        comm.barrier()?;
    }
    Ok(())
}

/// The seed's example: rank r contributes r + 1; everyone should hold n(n+1)/2.
fn example(comm: &mut Communicator, count: usize) -> Result<bool> {
    let n = comm.size();
    let send = vec![(comm.rank() + 1) as f32; count];
    let mut recv = vec![0f32; count];
    comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
    let expected = (n * (n + 1) / 2) as f32;
    let wrong = recv.iter().filter(|&&x| x != expected).count();
    let verdict = if wrong == 0 { "PASS" } else { "FAIL" };
    let mut line = format!("Rank {} {verdict}: count={count} expected={expected:.1} first={:.1} last={:.1}", comm.rank(), recv[0], recv[count - 1]);
    if wrong > 0 {
        line += &format!(" wrong={wrong}");
    }
    in_rank_order(comm, &line)?;
    Ok(wrong == 0)
}

/// Test values every partial result of which is exact in every type, so checks can
/// compare bit for bit whatever the reduction order.
fn value(op: ReduceOp, rank: usize, i: usize) -> f64 {
    match op {
        ReduceOp::Prod => 1.0 + matches!((rank * 5 + i) % 3, 0) as u8 as f64,
        _ => 1.0 + ((rank * 7 + i * 3) % 4) as f64,
    }
}

struct Row {
    time_us: f64,
    wrong: usize,
}

fn measure<T: Element>(comm: &mut Communicator, a: &Args, op: ReduceOp, count: usize, in_place: bool) -> Result<Row> {
    let (n, r) = (comm.size(), comm.rank());
    let fill = |v: &mut Vec<T>| {
        v.clear();
        v.extend((0..count).map(|i| T::from_f64(value(op, r, i))));
    };
    let mut send = Vec::with_capacity(count);
    fill(&mut send);
    let mut recv = vec![T::default(); count];
    let call = |comm: &mut Communicator, send: &mut Vec<T>, recv: &mut Vec<T>| -> collective::Result<()> {
        if in_place {
            comm.all_reduce_in_place(send, op)
        } else {
            comm.all_reduce(send, recv, op)
        }
    };
    for _ in 0..a.warmup {
        call(comm, &mut send, &mut recv)?;
        if in_place {
            fill(&mut send);
        }
    }
    comm.barrier()?;
    let t0 = Instant::now();
    for _ in 0..a.iters {
        call(comm, &mut send, &mut recv)?;
    }
    let mut time_us = [t0.elapsed().as_secs_f64() * 1e6 / a.iters.max(1) as f64];
    comm.all_reduce_in_place(&mut time_us, ReduceOp::Max)?;
    let mut wrong = [0u64];
    if a.check != 0 {
        fill(&mut send);
        call(comm, &mut send, &mut recv)?;
        let got = if in_place { &send } else { &recv };
        for (i, g) in got.iter().enumerate() {
            let mut acc = T::from_f64(value(op, 0, i));
            for q in 1..n {
                acc = T::combine(acc, T::from_f64(value(op, q, i)), op);
            }
            if op == ReduceOp::Avg {
                acc = T::div_n(acc, n);
            }
            wrong[0] += (*g != acc) as u64;
        }
        comm.all_reduce_in_place(&mut wrong, ReduceOp::Sum)?;
    }
    Ok(Row { time_us: time_us[0], wrong: wrong[0] as usize })
}

/// The by-size policy as the communicator applies it, e.g. "doubling up to 65536 B,
/// halving above": each change of algorithm between two powers of two is located
/// exactly by bisection (the policy is a few size ranges).
fn policy(comm: &Communicator) -> String {
    let mut parts = vec![];
    let mut cur = comm.algo_for(1);
    let mut p = 1usize;
    while p < 1 << 40 {
        let q = 2 * p;
        let next = comm.algo_for(q);
        if next != cur {
            let (mut last, mut first_other) = (p, q);
            while first_other - last > 1 {
                let m = last + (first_other - last) / 2;
                if comm.algo_for(m) == cur {
                    last = m;
                } else {
                    first_other = m;
                }
            }
            parts.push(format!("{cur} up to {last} B"));
            cur = comm.algo_for(first_other);
        }
        p = q;
    }
    parts.push(if parts.is_empty() { cur.to_string() } else { format!("{cur} above") });
    parts.join(", ")
}

fn sweep(comm: &mut Communicator, a: &Args, dtypes: &[DataType], ops: &[ReduceOp]) -> Result<bool> {
    let n = comm.size();
    let root = comm.rank() == 0;
    let mut sizes = vec![];
    let mut s = a.minbytes.max(1);
    loop {
        sizes.push(s);
        if s >= a.maxbytes || a.stepfactor < 2 {
            break;
        }
        s = (s * a.stepfactor).min(a.maxbytes);
    }
    if root {
        let algo = match comm.tuning().algo.forced {
            Some(f) => f.name().to_string(),
            None => format!("auto ({})", policy(comm)),
        };
        println!("# doorbell allreduce: {n} ranks, algo {algo}, transport {}", comm.transport());
        println!("# minbytes {} maxbytes {} stepfactor {} iters {} warmup {} check {}", a.minbytes, a.maxbytes, a.stepfactor, a.iters, a.warmup, a.check);
        if let Some(cpu) = comm.cpu() {
            println!("# placement: more ranks than CPUs, ranks pinned in blocks (rank 0 on CPU {cpu}); DOORBELL_BIND=none leaves them to the scheduler");
        }
        println!("#");
        println!("#{:>62}   {:>30}", "out-of-place", "in-place");
        println!("# {:>10} {:>12} {:>8} {:>6} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}", "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
        println!("# {:>10} {:>12} {:>8} {:>6} {:>9} {:>7} {:>7} {:>6} {:>9} {:>7} {:>7} {:>6}", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
    }
    let bar = if root {
        let pb = indicatif::ProgressBar::with_draw_target(Some((sizes.len() * dtypes.len() * ops.len()) as u64), indicatif::ProgressDrawTarget::stderr());
        pb.set_style(indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} [{elapsed}]").unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()));
        Some(pb)
    } else {
        None
    };
    let mut ok = true;
    let mut busbw_sum = 0.0;
    let mut rows = 0usize;
    for &dt in dtypes {
        for &op in ops {
            for &size in &sizes {
                let count = size / dt.size();
                let bytes = count * dt.size();
                if let Some(b) = &bar {
                    b.set_message(format!("{bytes} B {dt} {op}"));
                }
                let (oop, ip) = dispatch_dtype!(dt, T => (measure::<T>(comm, a, op, count, false)?, measure::<T>(comm, a, op, count, true)?));
                let bw = |t: f64| {
                    let algbw = if t > 0.0 { bytes as f64 / (t * 1e-6) / 1e9 } else { 0.0 };
                    (algbw, algbw * 2.0 * (n as f64 - 1.0) / n as f64)
                };
                let (a1, b1) = bw(oop.time_us);
                let (a2, b2) = bw(ip.time_us);
                busbw_sum += (b1 + b2) / 2.0;
                rows += 1;
                ok &= oop.wrong == 0 && ip.wrong == 0;
                if root {
                    let line = format!(
                        "  {:>10} {:>12} {:>8} {:>6} {:>9.2} {:>7.3} {:>7.3} {:>6} {:>9.2} {:>7.3} {:>7.3} {:>6}",
                        bytes, count, dt.name(), op.name(), oop.time_us, a1, b1, wrong_col(a, oop.wrong), ip.time_us, a2, b2, wrong_col(a, ip.wrong)
                    );
                    match &bar {
                        Some(b) => b.suspend(|| println!("{line}")),
                        None => println!("{line}"),
                    }
                }
                if let Some(b) = &bar {
                    b.inc(1);
                }
            }
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    if root {
        println!("# Wrong elements       : {}", if ok { "0 OK" } else { "see #wrong above" });
        println!("# Avg bus bandwidth    : {:.4}", busbw_sum / rows.max(1) as f64);
        println!("#");
    }
    Ok(ok)
}

fn wrong_col(a: &Args, w: usize) -> String {
    if a.check == 0 {
        "N/A".into()
    } else {
        w.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1k"), Ok(1024));
        assert!(parse_size("x").is_err());
    }
}
