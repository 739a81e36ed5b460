//! Waiting for completions or memory: busy polling that backs off to `yield` (the
//! software device's threads share the CPU with the poller), or sleeping on the
//! completion channel (`-e`); and a watchdog so a lost completion ends the run with an
//! error instead of a hang.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use provider::cqe::WcStatus;
use provider::{CompChannel, Context, Cq, Wc};

use super::resources::Res;

/// Busy polls before each `yield` while idle: `DOORBELL_BENCH_SPINS` (default 64). On
/// a machine with fewer cores than spinning threads (application pollers plus softhca
/// engines) the yield is what lets the engines run.
fn spins_before_yield() -> u32 {
    static S: std::sync::OnceLock<u32> = std::sync::OnceLock::new();
    *S.get_or_init(|| std::env::var("DOORBELL_BENCH_SPINS").ok().and_then(|v| v.parse().ok()).unwrap_or(64))
}

/// Fails a run that makes no progress for `limit`.
pub struct Watchdog {
    limit: Duration,
    since: Instant,
    spins: u32,
    spin_limit: u32,
    /// Polled mode: the device [`Watchdog::idle`] steps.
    device: Option<Arc<Context>>,
}

impl Watchdog {
    pub fn new(limit_secs: u64) -> Watchdog {
        Watchdog { limit: Duration::from_secs(limit_secs.max(1)), since: Instant::now(), spins: 0, spin_limit: spins_before_yield(), device: None }
    }

    /// A watchdog for one end's run: in polled mode (`--polled`) its idle rounds step
    /// that end's device.
    pub fn for_res(res: &Res, limit_secs: u64) -> Watchdog {
        let mut wd = Watchdog::new(limit_secs);
        if res.polled {
            wd.device = Some(res.ctx.clone());
        }
        wd
    }

    /// Something completed.
    #[inline]
    pub fn progress(&mut self) {
        self.spins = 0;
        self.since = Instant::now();
    }

    /// Nothing happened this round: in polled mode step the device (work done there
    /// restarts the spin count: the awaited completion or byte may be next), then spin,
    /// then yield; error out after the limit.
    #[inline]
    pub fn idle(&mut self, what: &str) -> Result<()> {
        if let Some(dev) = &self.device {
            if dev.progress() {
                self.spins = 0;
                // Device work is not the awaited event: a device busy retransmitting
                // to a dead peer must still end the run.
                if self.since.elapsed() > self.limit {
                    bail!("no progress for {:?} while waiting for {what}", self.limit);
                }
                return Ok(());
            }
        }
        self.spins = self.spins.wrapping_add(1);
        if self.spins < self.spin_limit {
            std::hint::spin_loop();
            if self.spins % 1024 == 0 && self.since.elapsed() > self.limit {
                bail!("no progress for {:?} while waiting for {what}", self.limit);
            }
            return Ok(());
        }
        std::thread::yield_now();
        if self.spins % 256 == 0 && self.since.elapsed() > self.limit {
            bail!("no progress for {:?} while waiting for {what}", self.limit);
        }
        Ok(())
    }

    /// Whether about a millisecond of idling passed since the last call (for checking
    /// the out-of-band connection now and then).
    #[inline]
    pub fn every_ms(&self) -> bool {
        self.spins % 256 == 0
    }
}

/// Fails on an error completion, naming it as ibverbs would.
#[inline]
pub fn check_wc(wc: &Wc) -> Result<()> {
    if wc.status != WcStatus::Success {
        bail!(
            "completion with error: {} ({}), vendor err {:#x}, opcode {:?}, wr_id {:#x}, QP {:#x}",
            wc.status.as_str(),
            wc.status as u32,
            wc.vendor_err,
            wc.opcode,
            wc.wr_id,
            wc.qp_num
        );
    }
    Ok(())
}

/// Blocks until `cq` yields at least one completion: busy polling, or (with a channel)
/// arming the CQ and sleeping on the channel. With `tick`, also returns 0 now and then
/// (about every millisecond of idling, or every 20 ms asleep) so the caller can look at
/// the out-of-band connection.
pub fn wait_cq(cq: &mut Cq, chan: Option<&CompChannel>, wcs: &mut [Wc], wd: &mut Watchdog, what: &str, tick: bool) -> Result<usize> {
    loop {
        let n = cq.poll(wcs);
        if n > 0 {
            wd.progress();
            return Ok(n);
        }
        match chan {
            None => {
                wd.idle(what)?;
                if tick && wd.every_ms() {
                    return Ok(0);
                }
            }
            Some(ch) => {
                cq.req_notify(false);
                // A CQE that arrived before the arm raises no event: look again.
                let n = cq.poll(wcs);
                if n > 0 {
                    wd.progress();
                    return Ok(n);
                }
                let t = if tick { 20 } else { 200 };
                match ch.get_event(Some(Duration::from_millis(t))) {
                    Ok(_) => cq.ack_event(),
                    Err(e) if e.errno() == nix::errno::Errno::ETIMEDOUT => {
                        if wd.since.elapsed() > wd.limit {
                            bail!("no completion event for {:?} while waiting for {what}", wd.limit);
                        }
                        if tick {
                            return Ok(0);
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
    }
}
