//! Transport timers: the local ACK timeout and the engine's sleep backoff.
//!
//! - Local ACK timeout: 4.096 µs × 2^`timeout` (the QP attribute, 5 bits); 0 means
//!   infinite. The timer runs while anything sent is unacknowledged and restarts on
//!   progress; each expiry spends one of `retry_cnt` retries (go-back-N from the oldest
//!   unacknowledged PSN), and the expiry after the last retry fails the oldest WQE with
//!   RETRY_EXC_ERR, so a dead peer is detected after `timeout × (retry_cnt + 1)`.
//! - RNR: the responder's NAK carries the delay (from its `min_rnr_timer`); the requester
//!   waits that long, spending one of `rnr_retry` (7 = infinite).
//! - Idling (see `engine`): after work the engine yields between steps for a grace period
//!   ([`GRACE`] with the doorbell trap, [`YIELD`] without), then sleeps: on the armed trap
//!   with no timeout but the earliest transport timer, or, without the trap, in `ppoll` on
//!   its socket with a timeout growing from [`SLEEP_MIN`] to [`SLEEP_MAX`] ([`SLEEP_DEEP`]
//!   after [`DEEP_IDLE_AFTER`] of idleness), never past the earliest transport timer.

use std::time::Duration;

/// Keep iterating without yielding this long after the last work. Zero: on a 2-core
/// machine the application's polling thread (or the peer's engine) often shares the core,
/// and a spinning engine delays exactly the thread that would consume its work (a 50 µs
/// spin cost ~45 µs of ping-pong latency); `sched_yield` costs well under 1 µs when
/// nobody else wants the core.
pub const SPIN: Duration = Duration::from_micros(0);
/// Without the doorbell trap: iterate with `sched_yield` between steps this long after
/// the last work (a doorbell is only seen by a step).
pub const YIELD: Duration = Duration::from_millis(2);
/// With the doorbell trap: how long the engine keeps stepping (yielding in between)
/// after the last work before it arms the trap and sleeps (see
/// `engine::Engine::idle_trapped`). Measurements in docs/benchmarks-history.md.
pub const GRACE: Duration = Duration::from_micros(200);
/// A `sched_yield` that keeps the engine off the core longer than this means a thread
/// that does not yield shares it; the grace period is then skipped for
/// [`CONTENDED_MIN`], doubling up to [`CONTENDED_MAX`] while such stalls recur.
pub const YIELD_SLOW: Duration = Duration::from_micros(200);
pub const CONTENDED_MIN: Duration = Duration::from_millis(100);
pub const CONTENDED_MAX: Duration = Duration::from_secs(10);
/// With the doorbell trap: after a trapped store, the engine does not arm again until
/// the store has landed in the page (the page differs from its copy taken at the fault)
/// or this long has passed, so the woken thread gets to complete its store (arming at
/// once would trap the same store again, and again, on a busy core).
pub const HOLDOFF: Duration = Duration::from_micros(500);
/// Overrides [`GRACE`] (microseconds), for tuning.
pub const GRACE_ENV: &str = "DOORBELL_ENGINE_GRACE_US";
/// First and longest sleep in `ppoll`.
pub const SLEEP_MIN: Duration = Duration::from_micros(50);
pub const SLEEP_MAX: Duration = Duration::from_millis(1);
/// After this long without any work the instance counts as deeply idle and sleeps up to
/// [`SLEEP_DEEP`]: each wake-up costs ~15-20 µs of kernel time on a small VM, so 1 ms
/// periods alone would use about 2 % of a core. Packets and control-path changes still
/// wake it at once; only a doorbell on a long-idle QP waits up to 2 ms to be seen.
pub const DEEP_IDLE_AFTER: Duration = Duration::from_millis(100);
pub const SLEEP_DEEP: Duration = Duration::from_millis(2);
/// The scheduler time slice the engine thread asks for (the shortest EEVDF allows; see
/// `engine::request_short_slice`).
pub const ENGINE_SLICE: Duration = Duration::from_micros(100);
/// How often the clock page is refreshed.
pub const CLOCK_PERIOD: Duration = Duration::from_micros(100);

/// The grace period: [`GRACE`], or `DOORBELL_ENGINE_GRACE_US`.
pub fn grace() -> Duration {
    std::env::var(GRACE_ENV).ok().and_then(|v| v.trim().parse::<u64>().ok()).map_or(GRACE, Duration::from_micros)
}

/// The local ACK timeout for a QP's `timeout` attribute (None = infinite).
pub fn ack_timeout(code: u8) -> Option<Duration> {
    match code & 0x1f {
        0 => None,
        c => Some(Duration::from_nanos(4096u64 << c)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts() {
        assert_eq!(ack_timeout(0), None);
        assert_eq!(ack_timeout(1), Some(Duration::from_nanos(8192)));
        assert_eq!(ack_timeout(14), Some(Duration::from_nanos(67_108_864)));
        assert_eq!(ack_timeout(31).unwrap().as_secs(), 8796);
    }
}
