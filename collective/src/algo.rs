//! Choosing the all-reduce algorithm.
//!
//! The tree's latency grows with `log2 n` hops, the ring's with `2 (n - 1)` steps,
//! but the ring moves the minimum `2 (n - 1) / n` of the data per rank with every
//! link busy, while the tree sends the whole (half) buffer through each inner node.
//! So small messages take the tree and large ones the ring. The crossover
//! ([`DEFAULT_TREE_MAX_BYTES`]) was measured with `doorbell allreduce` on softhca, 4
//! ranks (docs/BENCHMARKS.md, docs/collectives.md); `DOORBELL_TREE_MAX_BYTES`
//! overrides it and `DOORBELL_ALGO=ring|tree` (or `--algo`) forces one.

use std::fmt;
use std::str::FromStr;

/// Messages up to this many bytes use the tree (when not forced): the crossover
/// measured with 4 ranks on softhca lay between 512 KiB and 2 MiB over two runs.
pub const DEFAULT_TREE_MAX_BYTES: usize = 512 << 10;

/// An all-reduce algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algo {
    Ring,
    Tree,
}

impl Algo {
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
            Algo::Tree => "tree",
        }
    }
}

impl fmt::Display for Algo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algo {
    type Err = String;
    fn from_str(s: &str) -> Result<Algo, String> {
        match s.to_ascii_lowercase().as_str() {
            "ring" => Ok(Algo::Ring),
            "tree" => Ok(Algo::Tree),
            _ => Err(format!("unknown algorithm {s:?} (ring, tree)")),
        }
    }
}

/// The selection policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlgoChoice {
    /// Forced algorithm, or `None` for by-size.
    pub forced: Option<Algo>,
    /// Largest message (bytes) for the tree when not forced.
    pub tree_max_bytes: usize,
}

impl Default for AlgoChoice {
    fn default() -> Self {
        AlgoChoice { forced: None, tree_max_bytes: DEFAULT_TREE_MAX_BYTES }
    }
}

impl AlgoChoice {
    /// From `DOORBELL_ALGO` and `DOORBELL_TREE_MAX_BYTES`.
    pub fn from_env() -> Result<AlgoChoice, String> {
        let mut c = AlgoChoice::default();
        if let Ok(v) = std::env::var("DOORBELL_ALGO") {
            if !v.is_empty() && !v.eq_ignore_ascii_case("auto") {
                c.forced = Some(v.parse().map_err(|e| format!("DOORBELL_ALGO: {e}"))?);
            }
        }
        if let Ok(v) = std::env::var("DOORBELL_TREE_MAX_BYTES") {
            c.tree_max_bytes = v.parse().map_err(|_| format!("DOORBELL_TREE_MAX_BYTES={v:?} is not a number"))?;
        }
        Ok(c)
    }

    /// The algorithm for a message of `bytes` among `nranks`.
    pub fn pick(&self, bytes: usize, nranks: usize) -> Algo {
        if let Some(a) = self.forced {
            return a;
        }
        if nranks <= 2 || bytes > self.tree_max_bytes {
            Algo::Ring
        } else {
            Algo::Tree
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_size_and_forced() {
        let c = AlgoChoice::default();
        assert_eq!(c.pick(8, 4), Algo::Tree);
        assert_eq!(c.pick(64 << 20, 4), Algo::Ring);
        assert_eq!(c.pick(8, 2), Algo::Ring, "two ranks: the ring is one exchange");
        let f = AlgoChoice { forced: Some(Algo::Tree), ..c };
        assert_eq!(f.pick(64 << 20, 4), Algo::Tree);
        assert_eq!("Ring".parse::<Algo>(), Ok(Algo::Ring));
    }
}
