//! The reference of a GPU-memory run: cudaMemcpy bandwidth host-to-device and
//! device-to-host at the run's own sizes, on the same GPU and buffer, measured by the
//! client right after its RDMA sizes, and the ratio of the RDMA bandwidth to each.
//!
//! Why this reference: a NIC reaching GPU memory moves the bytes over the same PCIe link
//! a cudaMemcpy uses, so the copy engine's bandwidth is the ceiling GPUDirect RDMA is
//! judged against on real hardware; on softhca every byte of a GPU MR *is* a CUDA copy
//! (the device half's peer reads and writes), so the ratio says how much of the copy
//! engine's bandwidth the emulation keeps. The copies are what `cudaMemcpy` does from
//! pinned memory (`gdr::pinned`): synchronous `cuMemcpyHtoD`/`cuMemcpyDtoH` of one
//! message each, as many as the run's iterations (`-n`), after a few untimed ones.
//!
//! With `--local` both ends' buffers are on the one GPU, so every byte a WRITE or READ
//! moves crosses that GPU's link twice, out of the sender's buffer (D2H) and into the
//! receiver's (H2D), both ways at once; the two ratios are given for that reason.

use std::time::Instant;

use anyhow::Result;

use super::gpu::GpuMem;
use super::report::{bw_unit, DASHES};

/// Copy bandwidth at one size, bytes per second.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CopyBw {
    pub size: u64,
    pub h2d: f64,
    pub d2h: f64,
}

/// Untimed copies before each timed loop (the first copies of a size pay for the
/// driver's setup of the transfer).
const WARMUP: u64 = 10;

/// Measures both directions at every size: `iters` copies of `size` bytes between the
/// staging buffer and the start of the GPU buffer (no transfer may be in flight).
pub fn measure(g: &GpuMem, sizes: &[u64], iters: u64) -> Result<Vec<CopyBw>> {
    let mut st = g.staging();
    let dst = g.addr();
    let mut out = Vec::with_capacity(sizes.len());
    for &size in sizes {
        let n = size as usize;
        anyhow::ensure!(n <= st.len() && n <= g.len(), "cudaMemcpy reference of {n} bytes: larger than the buffers");
        if n == 0 {
            out.push(CopyBw { size, h2d: 0.0, d2h: 0.0 });
            continue;
        }
        let mut time = |h2d: bool| -> Result<f64> {
            let once = |st: &mut gdr::pinned::PinnedHost| -> Result<()> {
                // SAFETY: `n` bytes at the start of our GPU allocation, idle between runs.
                unsafe {
                    if h2d {
                        st.copy_to_device(dst, n)?;
                    } else {
                        st.copy_from_device(dst, n)?;
                    }
                }
                Ok(())
            };
            for _ in 0..WARMUP.min(iters) {
                once(&mut st)?;
            }
            let t0 = Instant::now();
            for _ in 0..iters {
                once(&mut st)?;
            }
            let secs = t0.elapsed().as_secs_f64();
            Ok(if secs > 0.0 { size as f64 * iters as f64 / secs } else { 0.0 })
        };
        let h2d = time(true)?;
        let d2h = time(false)?;
        out.push(CopyBw { size, h2d, d2h });
    }
    Ok(out)
}

/// `a / b` with 4 decimals, `-` where `b` is 0.
fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.4}", a / b)
    } else {
        "-".into()
    }
}

/// The block printed after the perftest table: one line per size with the RDMA
/// bandwidth (`rdma`, bytes/s, in the sizes' order), the copy bandwidths and the ratios.
pub fn table(what: &str, iters: u64, copies: &[CopyBw], rdma: &[f64], gbits: bool) -> String {
    let u = if gbits { "Gb/sec" } else { "MB/sec" };
    let mut o = String::new();
    o.push_str(&format!(" cudaMemcpy reference: {what}, pinned host memory, {iters} copies per size and direction\n"));
    o.push_str(&format!(" #bytes     BW(GPU MR)[{u}]   cudaMemcpy H2D[{u}]   ratio     D2H[{u}]   ratio\n"));
    for (c, &bw) in copies.iter().zip(rdma) {
        o.push_str(&format!(
            " {:<10} {:<20.2} {:<24.2} {:<9} {:<15.2} {}\n",
            c.size,
            bw_unit(bw, gbits),
            bw_unit(c.h2d, gbits),
            ratio(bw, c.h2d),
            bw_unit(c.d2h, gbits),
            ratio(bw, c.d2h)
        ));
    }
    o.push_str(DASHES);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ratios are RDMA over copy bandwidth, in the table's unit (MB = 2^20 bytes,
    /// perftest's), and a size whose copy bandwidth is 0 (size 0) prints `-`. Expected
    /// values by hand: 1 GiB/s is 1024.00 MB/sec; 1 GiB/s over 4 GiB/s is 0.25 and over
    /// 2 GiB/s is 0.5.
    #[test]
    fn rows_and_ratios() {
        let gib = (1u64 << 30) as f64;
        let copies = [CopyBw { size: 1 << 20, h2d: 4.0 * gib, d2h: 2.0 * gib }, CopyBw { size: 0, h2d: 0.0, d2h: 0.0 }];
        let t = table("GPU 0 (X, 0000:00:06.0)", 100, &copies, &[gib, 0.0], false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], " cudaMemcpy reference: GPU 0 (X, 0000:00:06.0), pinned host memory, 100 copies per size and direction");
        assert_eq!(lines[1].split_whitespace().collect::<Vec<_>>(), ["#bytes", "BW(GPU", "MR)[MB/sec]", "cudaMemcpy", "H2D[MB/sec]", "ratio", "D2H[MB/sec]", "ratio"]);
        assert_eq!(lines[2].split_whitespace().collect::<Vec<_>>(), ["1048576", "1024.00", "4096.00", "0.2500", "2048.00", "0.5000"]);
        assert_eq!(lines[3].split_whitespace().collect::<Vec<_>>(), ["0", "0.00", "0.00", "-", "0.00", "-"]);
        assert_eq!(lines[4], DASHES);
        // Gbit/s: 1 GiB/s is 8.589934592 Gb/s.
        let g = table("x", 1, &copies[..1], &[gib], true);
        assert!(g.lines().nth(2).unwrap().split_whitespace().nth(1) == Some("8.59"), "{g}");
    }
}
