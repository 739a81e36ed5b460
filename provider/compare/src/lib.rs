//! doorbell's provider side by side with rdma-core reached through the Rust crates
//! `rdma-sys` (bindgen bindings plus Rust copies of verbs.h's inline functions) and
//! `sideway` (a safe wrapper), on the same softhca. Issue 19.
//!
//! Three programs do the same work, each with its own verbs stack:
//!
//! | program           | stack                                              | feature    |
//! |:--                |:--                                                 |:--         |
//! | `compare-doorbell`| `provider` on the embedded softhca                 | (none)     |
//! | `compare-rdma-sys`| libibverbs + libmlx5 via rdma-sys, under the preload| `rdma-sys` |
//! | `compare-sideway` | libibverbs + libmlx5 via sideway, under the preload | `sideway`  |
//!
//! `PROGRAM VARIANT N`, VARIANT one of
//! - `inline`, `sge`: N unsignaled 8-byte RDMA WRITEs (8 B inline, or one 8-byte gather
//!   entry) through `ibv_post_send` (doorbell: `Qp::post_send`), each from the function
//!   `cmp_post`, then one signaled WRITE whose completion must be a success;
//! - `wr-inline`, `wr-sge` (rdma-core programs only): the same through `ibv_wr_start ..
//!   ibv_wr_complete`, from `cmp_wr`;
//! - `poll`: N + 1 signaled WRITEs are posted and all executed (the last one writes
//!   [`MARK`] into the buffer, which the program waits for without touching the CQ, then
//!   [`settle`]s), then N completions are taken one at a time by `cmp_poll` (one
//!   `ibv_poll_cq` for one CQE); empty polls are counted and printed (`poll misses: M`);
//! - `lat`: N iterations of post one signaled 8-byte inline WRITE and poll until its
//!   completion, timed each (self-loop, one process: post -> device -> CQE; not perftest's
//!   two-process ping-pong); prints `lat: t_typical_usec T t_avg_usec A`.
//!
//! `provider/benches/compare.sh` counts the instructions of one call of `cmp_post`,
//! `cmp_wr` and `cmp_poll` with callgrind (`--toggle-collect`, runs with N and 2N) and
//! prints the table. The QP is connected to itself and sized to hold every WQE (and the
//! CQ every CQE), so no measured call waits.

use std::time::Duration;

/// Size of the registered buffer; WRITEs go to its second half.
pub const BUF: usize = 8192;
/// Offset of the WRITE target in the buffer.
pub const RADDR_OFF: usize = 4096;
/// Offset of the byte the `poll` variant's last WRITE sets to [`MARK`].
pub const MARK_OFF: usize = 4096 + 64;
/// What the buffer is filled with before any WRITE.
pub const FILL: u8 = 7;
/// The `poll` variant's last WRITE's payload.
pub const MARK: u8 = 0xa5;
/// The normal payload.
pub const DATA: [u8; 8] = [0x5a; 8];
/// RoCE GID index used by the rdma-core programs (softhca's IPv4-mapped RoCE v2 entry, as
/// provider/benches/c/post_cost.c).
pub const GID_INDEX: u8 = 1;

/// What one run measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Inline,
    Sge,
    WrInline,
    WrSge,
    Poll,
    Lat,
}

impl Variant {
    /// Whether the payload is inline (the `poll` and `lat` variants post inline WRITEs).
    pub fn inline(self) -> bool {
        !matches!(self, Variant::Sge | Variant::WrSge)
    }
}

/// `PROGRAM VARIANT N` from the command line; `wr` says whether the program has the
/// `wr-*` variants.
pub fn args(program: &str, wr: bool) -> Result<(Variant, u32), String> {
    let a: Vec<String> = std::env::args().collect();
    let usage = if wr {
        format!("usage: {program} inline|sge|wr-inline|wr-sge|poll|lat N")
    } else {
        format!("usage: {program} inline|sge|poll|lat N")
    };
    let v = match a.get(1).map(String::as_str) {
        Some("inline") => Variant::Inline,
        Some("sge") => Variant::Sge,
        Some("wr-inline") if wr => Variant::WrInline,
        Some("wr-sge") if wr => Variant::WrSge,
        Some("poll") => Variant::Poll,
        Some("lat") => Variant::Lat,
        _ => return Err(usage),
    };
    let n = a.get(2).and_then(|s| s.parse().ok()).filter(|&n| n > 0).ok_or(usage)?;
    Ok((v, n))
}

/// One step of a wait loop: spin briefly, then give the CPU away (softhca's engine thread
/// needs it; under valgrind, which runs one thread at a time, it runs only then).
pub fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 200 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// Waits until the device has written `v` at `p` (the `poll` variant's last WRITE).
///
/// # Safety
/// `p` must point into a live buffer for the whole wait.
pub unsafe fn wait_byte(p: *const u8, v: u8) {
    let mut spins = 0;
    // SAFETY: the caller keeps p valid; the device writes it concurrently, hence volatile.
    while unsafe { std::ptr::read_volatile(p) } != v {
        backoff(&mut spins);
    }
}

/// After the `poll` variant's last WRITE has landed: its data lands before the CQEs of the
/// WRITEs before it are written (an RC completion waits for the responder's ACK, which
/// softhca's engine handles afterwards), so the program sleeps a little longer, letting
/// the engine thread run (under valgrind it runs only while this thread blocks). A CQ
/// still short of entries after that is a *miss*: the program waits for the entry, counts
/// it and prints `poll misses: M`; compare.sh takes only runs without misses (an empty
/// poll costs other instructions than a full one).
pub fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}

/// Prints the `lat` variant's result line from per-iteration times.
pub fn report_lat(mut t: Vec<Duration>) {
    t.sort_unstable();
    let typical = t[t.len() / 2];
    let avg = t.iter().sum::<Duration>() / t.len() as u32;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    println!("lat: t_typical_usec {:.2} t_avg_usec {:.2} iterations {}", us(typical), us(avg), t.len());
}

/// Checks that the WRITEs landed: after any variant the 8 bytes at [`RADDR_OFF`] are
/// [`DATA`] (the buffer was [`FILL`] elsewhere; the gather entry's source, the buffer's
/// first 8 bytes, is set to [`DATA`] too).
///
/// # Safety
/// `buf` must point to the live registered buffer of [`BUF`] bytes, with no WRITE in flight.
pub unsafe fn check_target(buf: *const u8) -> Result<(), String> {
    let mut got = [0u8; 8];
    for (i, b) in got.iter_mut().enumerate() {
        // SAFETY: (the caller's contract) in bounds; volatile as the device wrote it.
        *b = unsafe { std::ptr::read_volatile(buf.add(RADDR_OFF + i)) };
    }
    if got == DATA {
        Ok(())
    } else {
        Err(format!("target bytes {got:02x?}, expected {DATA:02x?}: the WRITEs did not land"))
    }
}
