//! Transport timers: the local ACK timeout and the engine's sleep backoff.
//!
//! - Local ACK timeout: 4.096 µs × 2^`timeout` (the QP attribute, 5 bits); 0 means
//!   infinite. The timer runs while anything sent is unacknowledged and restarts on
//!   progress; each expiry spends one of `retry_cnt` retries (go-back-N from the oldest
//!   unacknowledged PSN), and the expiry after the last retry fails the oldest WQE with
//!   RETRY_EXC_ERR, so a dead peer is detected after `timeout × (retry_cnt + 1)`.
//! - RNR: the responder's NAK carries the delay (from its `min_rnr_timer`); the requester
//!   waits that long, spending one of `rnr_retry` (7 = infinite).
//! - Backoff (see `engine`): after work the engine spins, then yields, then sleeps in
//!   `ppoll` on its socket with a timeout growing from [`SLEEP_MIN`] to [`SLEEP_MAX`]
//!   ([`SLEEP_DEEP`] after [`DEEP_IDLE_AFTER`] of idleness), never past the earliest
//!   transport timer.

use std::time::Duration;

/// Keep iterating without yielding this long after the last work. Zero: on a 2-core
/// machine the application's polling thread (or the peer's engine) often shares the core,
/// and a spinning engine delays exactly the thread that would consume its work (a 50 µs
/// spin cost ~45 µs of ping-pong latency); `sched_yield` costs well under 1 µs when
/// nobody else wants the core.
pub const SPIN: Duration = Duration::from_micros(0);
/// Then iterate with `sched_yield` between steps this long after the last work.
pub const YIELD: Duration = Duration::from_millis(2);
/// First and longest sleep in `ppoll`.
pub const SLEEP_MIN: Duration = Duration::from_micros(50);
pub const SLEEP_MAX: Duration = Duration::from_millis(1);
/// After this long without any work the instance counts as deeply idle and sleeps up to
/// [`SLEEP_DEEP`]: each wake-up costs ~15-20 µs of kernel time on a small VM, so 1 ms
/// periods alone would use about 2 % of a core. Packets and control-path changes still
/// wake it at once; only a doorbell on a long-idle QP waits up to 2 ms to be seen.
pub const DEEP_IDLE_AFTER: Duration = Duration::from_millis(100);
pub const SLEEP_DEEP: Duration = Duration::from_millis(2);
/// How often the clock page is refreshed.
pub const CLOCK_PERIOD: Duration = Duration::from_micros(100);

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
