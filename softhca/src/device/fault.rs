//! Fault injection on the wire, for tests: drop, duplicate or reorder transmitted packets.
//!
//! Set per instance through [`crate::Config::fault`], or for every instance of a process
//! with `DOORBELL_FAULT=drop=0.01,dup=0.01,reorder=0.01,seed=42` (any subset; probabilities
//! in `0..=1`). Faults apply to every packet the instance transmits (requests, ACKs, NAKs,
//! READ responses), after it was built and before `sendmmsg`:
//! - *drop*: the packet is not sent;
//! - *dup*: it is sent twice;
//! - *reorder*: it is held back and sent after the next packet (or at the next flush).
//!
//! The RNG is seeded, so a run is reproducible as far as the thread interleaving allows.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Environment variable read by [`crate::Config::for_addr`].
pub const FAULT_ENV: &str = "DOORBELL_FAULT";

const PPM: u32 = 1_000_000;

/// Fault probabilities in parts per million, and the RNG seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultSpec {
    pub drop_ppm: u32,
    pub dup_ppm: u32,
    pub reorder_ppm: u32,
    pub seed: u64,
}

fn ppm(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * PPM as f64).round() as u32
}

impl FaultSpec {
    /// Probabilities as fractions (0.01 = 1 %).
    pub fn new(drop: f64, dup: f64, reorder: f64, seed: u64) -> FaultSpec {
        FaultSpec { drop_ppm: ppm(drop), dup_ppm: ppm(dup), reorder_ppm: ppm(reorder), seed }
    }

    /// Parses `drop=0.01,dup=0.01,reorder=0.01,seed=42`.
    pub fn parse(s: &str) -> Result<FaultSpec, String> {
        let mut f = FaultSpec { seed: 1, ..Default::default() };
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| format!("{item}: expected key=value"))?;
            let prob = || -> Result<u32, String> {
                let p: f64 = v.trim().parse().map_err(|e| format!("{item}: {e}"))?;
                if !(0.0..=1.0).contains(&p) {
                    return Err(format!("{item}: probability outside 0..=1"));
                }
                Ok(ppm(p))
            };
            match k.trim() {
                "drop" => f.drop_ppm = prob()?,
                "dup" => f.dup_ppm = prob()?,
                "reorder" => f.reorder_ppm = prob()?,
                "seed" => f.seed = v.trim().parse().map_err(|e| format!("{item}: {e}"))?,
                other => return Err(format!("unknown fault key {other:?}")),
            }
        }
        Ok(f)
    }

    /// The spec `DOORBELL_FAULT` gives, if set and valid (an invalid value is logged and
    /// ignored).
    pub fn from_env() -> Option<FaultSpec> {
        let s = std::env::var(FAULT_ENV).ok()?;
        match FaultSpec::parse(&s) {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::warn!(target: "softhca::fault", "{FAULT_ENV}={s}: {e}; no faults injected");
                None
            }
        }
    }

    /// Whether any fault has a non-zero probability.
    pub fn is_active(&self) -> bool {
        self.drop_ppm | self.dup_ppm | self.reorder_ppm != 0
    }
}

/// What to do with one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Send,
    Drop,
    Duplicate,
    Reorder,
}

/// The per-instance decision maker.
#[derive(Debug)]
pub struct Injector {
    spec: FaultSpec,
    rng: SmallRng,
}

impl Injector {
    pub fn new(spec: FaultSpec) -> Injector {
        Injector { spec, rng: SmallRng::seed_from_u64(spec.seed) }
    }

    /// Draws the fate of the next packet.
    pub fn verdict(&mut self) -> Verdict {
        let r = self.rng.gen_range(0..PPM);
        let s = &self.spec;
        if r < s.drop_ppm {
            Verdict::Drop
        } else if r < s.drop_ppm.saturating_add(s.dup_ppm) {
            Verdict::Duplicate
        } else if r < s.drop_ppm.saturating_add(s.dup_ppm).saturating_add(s.reorder_ppm) {
            Verdict::Reorder
        } else {
            Verdict::Send
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_draw() {
        let f = FaultSpec::parse("drop=0.01, dup=0.02,reorder=0.5,seed=42").unwrap();
        assert_eq!(f, FaultSpec { drop_ppm: 10_000, dup_ppm: 20_000, reorder_ppm: 500_000, seed: 42 });
        assert!(FaultSpec::parse("drop=2").is_err());
        assert!(FaultSpec::parse("loss=0.1").is_err());
        assert!(!FaultSpec::parse("").unwrap().is_active());
        let mut i = Injector::new(FaultSpec::new(0.1, 0.1, 0.1, 7));
        let n = 100_000;
        let mut c = [0u32; 4];
        for _ in 0..n {
            c[i.verdict() as usize] += 1;
        }
        for k in 1..4 {
            assert!((9_000..11_000).contains(&c[k]), "{c:?}");
        }
    }
}
