//! Polled mode: an application thread drives the data path while it waits.
//!
//! By default the engine thread alone runs the data path: an application's doorbell
//! wakes it (through the trap or its polling), it sends the packets, and on the other
//! side the peer's engine thread wakes for the packet and writes the CQE that wakes the
//! peer's application. That is three thread hand-offs per message, each a wake-up that
//! costs 15 to 150 us on a small VM, more when eight threads share two cores.
//!
//! An application that waits for completions anyway can instead call
//! [`super::Device::progress`] (through `uverbs::Endpoint::progress` and the provider's
//! `Context::progress`): it runs one step (`datapath::step`) in the calling
//! thread when the engine lock is free (never waiting for it), so its posted WQEs leave
//! at once and arriving packets become CQEs in the thread that wants them. Between
//! calls it blocks on the instance's socket (`Endpoint::progress_fd`) and its
//! completion channel, so one wake-up per message remains.
//!
//! Each call opens a window of [`WINDOW`] during which the engine thread stays out of
//! the way: it lifts the doorbell trap (a trapped doorbell would block the application
//! until the engine thread runs, exactly the hand-off polled mode avoids) and sleeps on
//! its wake eventfd alone, not on the socket (it would wake with the application for
//! every packet), until the window ends or a transport timer is due. Then it steps
//! once, and when the window has not been renewed it goes back to its normal idle
//! policy (grace period, trap). So an application that stops calling `progress` with
//! a doorbell rung and nobody stepping has it served within [`WINDOW`], and everything
//! that never calls `progress` (libmlx5 through the preload, perftest, the benchmarks)
//! runs exactly as before. The clock page is refreshed by the engine thread only, so in
//! polled mode it may be up to [`WINDOW`] stale (doorbell's provider never reads it).
//! A step that wrote completions may keep the ACKs it built for the next step
//! (`datapath::Flush::DeferAcks`): the caller handles those completions and
//! calls again, and the ACKs leave with what it posts in one system call.
//!
//! The one race: the engine arms the trap just as a `progress` call opens a window.
//! Both sides use sequentially consistent accesses (the engine stores "armed", then
//! loads the window; `progress` stores the window, then loads "armed"), so at least one
//! sees the other: the engine disarms before it sleeps, or `progress` wakes it so that
//! it does. Either way a doorbell stored meanwhile is merely trapped and served.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

/// How long one `progress` call keeps the engine thread in the background.
pub const WINDOW: Duration = Duration::from_millis(10);

/// The polled-mode state the application's `progress` and the engine thread share.
#[derive(Debug)]
pub(crate) struct Polled {
    epoch: Instant,
    /// End of the current window, in nanoseconds after `epoch` (0: none yet).
    until: AtomicU64,
    /// The engine thread has the doorbell trap armed.
    armed: AtomicBool,
}

impl Default for Polled {
    fn default() -> Polled {
        Polled { epoch: Instant::now(), until: AtomicU64::new(0), armed: AtomicBool::new(false) }
    }
}

impl Polled {
    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.epoch).as_nanos() as u64
    }

    /// A `progress` call at `now` opens (or extends) the window. Returns whether the
    /// engine thread must be woken to lift its trap.
    pub fn enter(&self, now: Instant) -> bool {
        self.until.fetch_max(self.ns(now + WINDOW), SeqCst);
        self.armed.load(SeqCst)
    }

    /// The end of the window, if one is open at `now`.
    pub fn until(&self, now: Instant) -> Option<Instant> {
        let u = self.until.load(SeqCst);
        (u > self.ns(now)).then(|| self.epoch + Duration::from_nanos(u))
    }

    /// The engine thread armed (true) or disarmed (false) the trap.
    pub fn set_armed(&self, armed: bool) {
        self.armed.store(armed, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_opens_and_closes() {
        let p = Polled::default();
        let t0 = Instant::now();
        assert_eq!(p.until(t0), None);
        assert!(!p.enter(t0));
        let u = p.until(t0).expect("open");
        assert!(u >= t0 + WINDOW - Duration::from_micros(1));
        assert_eq!(p.until(u + Duration::from_micros(1)), None);
        // An earlier call never shortens the window.
        p.enter(t0 - Duration::from_millis(5));
        assert_eq!(p.until(t0), Some(u));
        p.set_armed(true);
        assert!(p.enter(t0));
    }
}
