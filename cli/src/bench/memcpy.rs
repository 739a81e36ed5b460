//! `doorbell bench memcpy`: single-core memcpy bandwidth, the reference that RDMA
//! bandwidth on the software HCA is compared with (every byte softhca moves is copied
//! by a CPU, several times).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::report;

/// The working set of the memcpy reference that `write-bw --vs-memcpy` compares with:
/// larger than any cache, so the reference is the core's memory bandwidth. Data an
/// RDMA device moves comes from and goes to memory, and a 64 KiB copy loop measured
/// in L2 (about 5x faster here) would compare the wire with a cache hit, not with
/// the memory system.
pub const REFERENCE_BYTES: usize = 64 << 20;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Bytes per copy.
    #[arg(short = 's', long = "size", default_value_t = 65536)]
    pub size: usize,
    /// Every size from 2 B to 8 MiB (powers of two).
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Seconds of copying per size.
    #[arg(long = "secs", default_value_t = 1.0)]
    pub secs: f64,
    /// Report Gbit/sec instead of MB/sec.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
}

/// One timed trial: copies `size` bytes from `src` to `dst` for about `dur`; bytes/s.
fn trial(src: &[u8], dst: &mut [u8], dur: Duration) -> (f64, u64) {
    let size = src.len();
    // Look at the clock about every 256 KiB copied.
    let batch = (256 * 1024 / size).max(1) as u64;
    let start = Instant::now();
    let mut copies = 0u64;
    loop {
        for _ in 0..batch {
            dst.copy_from_slice(std::hint::black_box(src));
            std::hint::black_box(&mut *dst);
        }
        copies += batch;
        let t = start.elapsed();
        if t >= dur {
            return (copies as f64 * size as f64 / t.as_secs_f64(), copies);
        }
    }
}

/// Single-core memcpy bandwidth (bytes/s) at `size`: the median of five trials
/// sharing `dur`, after a warm-up.
pub fn measure(size: usize, dur: Duration) -> f64 {
    measure_all(size, dur).1
}

/// (best, median, copies) over five trials.
fn measure_all(size: usize, dur: Duration) -> (f64, f64, u64) {
    let size = size.max(1);
    let src: Vec<u8> = (0..size).map(|i| i as u8).collect();
    let mut dst = vec![0u8; size];
    let _ = trial(&src, &mut dst, dur / 10);
    let mut rates = Vec::with_capacity(5);
    let mut copies = 0;
    for _ in 0..5 {
        let (r, c) = trial(&src, &mut dst, dur / 5);
        rates.push(r);
        copies += c;
    }
    rates.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (rates[4], rates[2], copies)
}

pub fn run(a: &Args) -> Result<()> {
    if a.size == 0 && !a.all {
        bail!("size must be at least 1");
    }
    if !(0.01..=600.0).contains(&a.secs) {
        bail!("--secs must be 0.01..600");
    }
    let sizes: Vec<usize> = if a.all { (1..=23).map(|k| 1usize << k).collect() } else { vec![a.size] };
    println!("{}", report::DASHES);
    println!("{:>20}memcpy BW Test (one core; peak = best of 5 trials, average = median)", "");
    println!("{}", report::DASHES);
    let u = if a.report_gbits { "Gb/sec" } else { "MB/sec" };
    println!(" #bytes     #iterations    BW peak[{u}]    BW average[{u}]   MsgRate[Mpps]");
    for s in sizes {
        let (best, median, copies) = measure_all(s, Duration::from_secs_f64(a.secs));
        println!("{}", report::bw_row(s as u64, copies, best, median, median / s as f64, a.report_gbits));
    }
    println!("{}", report::DASHES);
    Ok(())
}
