//! Choosing the all-reduce algorithm.
//!
//! Recursive doubling takes `log2 n` sequential messages, the tree `2 log2 n` (up and
//! down), halving-doubling `2 log2 n`, the ring `2 (n - 1)`; but recursive doubling
//! sends the whole buffer `log2 n` times and the tree sends the whole (half) buffer
//! through each inner node, while halving-doubling and the ring move the minimum
//! `2 (n - 1) / n` of the data per rank. So small messages take recursive doubling
//! (when the rank count is a power of two), larger ones halving-doubling where it runs
//! (4 or 8 ranks), and elsewhere the tree, then the ring. Between recursive doubling and
//! halving-doubling sits the tree: its messages carry the whole buffer too, but no rank
//! sends it more than twice, where recursive doubling sends it `log2 n` times. Two ranks
//! are the exception: recursive doubling is then one exchange, which nothing beats until
//! the ring's halved bytes do. The crossovers ([`DEFAULT_DOUBLING_MAX_BYTES`],
//! [`DEFAULT_PAIR_DOUBLING_MAX_BYTES`], [`DEFAULT_HALVING_MIN_BYTES`],
//! [`DEFAULT_TREE_MAX_BYTES`], [`DEFAULT_ALLTOALL_MIN_BYTES`]) were measured with
//! `doorbell allreduce` on softhca (docs/benchmarks-history.md, docs/collectives.md);
//! `DOORBELL_DOUBLING_MAX_BYTES`, `DOORBELL_PAIR_DOUBLING_MAX_BYTES`,
//! `DOORBELL_HALVING_MIN_BYTES`, `DOORBELL_TREE_MAX_BYTES` and
//! `DOORBELL_ALLTOALL_MIN_BYTES` override them and
//! `DOORBELL_ALGO=ring|tree|doubling|halving|alltoall` (or `--algo`) forces one.

use std::fmt;
use std::str::FromStr;

/// Messages up to this many bytes use the tree (when not forced and recursive doubling
/// does not apply): with 3 ranks on softhca (polled mode) the tree led up to 64 KiB and
/// the ring from 256 KiB.
pub const DEFAULT_TREE_MAX_BYTES: usize = 128 << 10;

/// Messages up to this many bytes use recursive doubling when the rank count is a
/// power of two above 2 (when not forced); larger ones the tree until another policy
/// takes over. With 4 ranks on softhca's same-host path the tree took 0.80 times
/// recursive doubling's time at 64 KiB and 0.99 at 32 KiB (8 interleaved pairs), and it
/// was ahead at 64 KiB in each of five `collective/bench/run.sh` runs; with 8 ranks
/// 0.66 at 32 and 64 KiB (docs/benchmarks-history.md, "Recursive doubling hands over to
/// the tree at 32 KiB").
pub const DEFAULT_DOUBLING_MAX_BYTES: usize = 32 << 10;

/// Messages up to this many bytes use recursive doubling with two ranks (one exchange of
/// the whole buffer), the ring above: on softhca's same-host path the ring took 1.14
/// times recursive doubling's time at 128 KiB and 0.41 times at 256 KiB (4 interleaved
/// pairs).
pub const DEFAULT_PAIR_DOUBLING_MAX_BYTES: usize = 128 << 10;

/// Messages above this many bytes use halving-doubling on 4 or 8 ranks (when not
/// forced): with 4 ranks on softhca, in interleaved pairs, recursive doubling was 1.2
/// times faster at 64 KiB, halving-doubling 1.05 times at 128 KiB, and it beat the tree
/// there (1.3 times) and the ring from 256 KiB to 64 MiB (1.04 to 1.4 times).
pub const DEFAULT_HALVING_MIN_BYTES: usize = 64 << 10;

/// Messages above this many bytes use the all-to-all on 4 or 8 ranks (when not forced):
/// with 4 ranks on softhca's same-host path it took 0.91 to 0.98 times halving-doubling's
/// time from 512 KiB to 32 MiB in a `collective/bench/run.sh` run (level at 64 MiB),
/// 0.88 to 0.92 in interleaved pairs at 1 to 4 MiB, and 0.88 to 0.97 with 8 ranks at
/// 1 and 4 MiB; at 256 KiB the ring was faster than both (docs/collectives.md).
pub const DEFAULT_ALLTOALL_MIN_BYTES: usize = 256 << 10;

/// An all-reduce algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algo {
    Ring,
    Tree,
    /// Recursive doubling (power-of-two rank counts; others fall back to the tree).
    Doubling,
    /// Recursive halving-doubling (4 or 8 ranks; others fall back to the ring).
    Halving,
    /// One-step reduce-scatter and all-gather ([`crate::alltoall`]; 4 or 8 ranks, others
    /// fall back as a forced halving-doubling does).
    AllToAll,
}

impl Algo {
    pub const fn name(self) -> &'static str {
        match self {
            Algo::Ring => "ring",
            Algo::Tree => "tree",
            Algo::Doubling => "doubling",
            Algo::Halving => "halving",
            Algo::AllToAll => "alltoall",
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
            "doubling" | "rd" => Ok(Algo::Doubling),
            "halving" | "rabenseifner" => Ok(Algo::Halving),
            "alltoall" | "all-to-all" | "a2a" => Ok(Algo::AllToAll),
            _ => Err(format!("unknown algorithm {s:?} (ring, tree, doubling, halving, alltoall)")),
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
    /// Largest message (bytes) for recursive doubling when not forced, above 2 ranks.
    pub doubling_max_bytes: usize,
    /// Largest message (bytes) for recursive doubling when not forced, with 2 ranks.
    pub pair_doubling_max_bytes: usize,
    /// Messages above this (bytes) take halving-doubling where it runs, when not forced.
    pub halving_min_bytes: usize,
    /// Messages above this (bytes) take the all-to-all where it runs, when not forced.
    pub alltoall_min_bytes: usize,
}

impl Default for AlgoChoice {
    fn default() -> Self {
        AlgoChoice {
            forced: None,
            tree_max_bytes: DEFAULT_TREE_MAX_BYTES,
            doubling_max_bytes: DEFAULT_DOUBLING_MAX_BYTES,
            pair_doubling_max_bytes: DEFAULT_PAIR_DOUBLING_MAX_BYTES,
            halving_min_bytes: DEFAULT_HALVING_MIN_BYTES,
            alltoall_min_bytes: DEFAULT_ALLTOALL_MIN_BYTES,
        }
    }
}

impl AlgoChoice {
    /// From `DOORBELL_ALGO` and the threshold variables (`DOORBELL_TREE_MAX_BYTES`,
    /// `DOORBELL_DOUBLING_MAX_BYTES`, `DOORBELL_PAIR_DOUBLING_MAX_BYTES`,
    /// `DOORBELL_HALVING_MIN_BYTES`, `DOORBELL_ALLTOALL_MIN_BYTES`).
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
        if let Ok(v) = std::env::var("DOORBELL_DOUBLING_MAX_BYTES") {
            c.doubling_max_bytes = v.parse().map_err(|_| format!("DOORBELL_DOUBLING_MAX_BYTES={v:?} is not a number"))?;
        }
        if let Ok(v) = std::env::var("DOORBELL_PAIR_DOUBLING_MAX_BYTES") {
            c.pair_doubling_max_bytes = v.parse().map_err(|_| format!("DOORBELL_PAIR_DOUBLING_MAX_BYTES={v:?} is not a number"))?;
        }
        if let Ok(v) = std::env::var("DOORBELL_HALVING_MIN_BYTES") {
            c.halving_min_bytes = v.parse().map_err(|_| format!("DOORBELL_HALVING_MIN_BYTES={v:?} is not a number"))?;
        }
        if let Ok(v) = std::env::var("DOORBELL_ALLTOALL_MIN_BYTES") {
            c.alltoall_min_bytes = v.parse().map_err(|_| format!("DOORBELL_ALLTOALL_MIN_BYTES={v:?} is not a number"))?;
        }
        Ok(c)
    }

    /// The algorithm for a message of `bytes` among `nranks` with `nslots` slots per
    /// doubling stream. Where halving-doubling cannot run (the rank count, or too few
    /// slots for a step's messages) the rest of the policy decides, as if its threshold
    /// were infinite: doubling, tree or ring by size, not the ring for everything.
    pub fn pick(&self, bytes: usize, nranks: usize, nslots: usize) -> Algo {
        let doubling = crate::doubling::applies(nranks);
        let halving = crate::halving::applies(nranks, nslots);
        let alltoall = crate::alltoall::applies(nranks, nslots);
        match self.forced {
            Some(Algo::Doubling) if !doubling => return Algo::Tree,
            Some(Algo::Halving) if !halving => return Algo::Ring,
            Some(Algo::AllToAll) if !alltoall => return if halving { Algo::Halving } else { Algo::Ring },
            Some(a) => return a,
            None => {}
        }
        if alltoall && bytes > self.alltoall_min_bytes {
            Algo::AllToAll
        } else if halving && bytes > self.halving_min_bytes {
            Algo::Halving
        } else if doubling && bytes <= if nranks == 2 { self.pair_doubling_max_bytes } else { self.doubling_max_bytes } {
            Algo::Doubling
        } else if nranks <= 2 || bytes > self.tree_max_bytes {
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
        assert_eq!(c.pick(8, 4, 4), Algo::Doubling);
        assert_eq!(c.pick(32 << 10, 4, 4), Algo::Doubling);
        assert_eq!(c.pick((32 << 10) + 1, 4, 4), Algo::Tree, "between doubling and halving-doubling");
        assert_eq!(c.pick(64 << 10, 4, 4), Algo::Tree);
        assert_eq!(c.pick((64 << 10) + 1, 4, 4), Algo::Halving);
        assert_eq!(c.pick(256 << 10, 4, 4), Algo::Halving);
        assert_eq!(c.pick((256 << 10) + 1, 4, 4), Algo::AllToAll);
        assert_eq!(c.pick(64 << 20, 8, 4), Algo::AllToAll);
        assert_eq!(c.pick(8, 6, 4), Algo::Tree, "not a power of two");
        assert_eq!(c.pick(64 << 20, 6, 4), Algo::Ring);
        assert_eq!(c.pick(64 << 20, 16, 4), Algo::Ring, "sixteen ranks: no halving-doubling");
        let wide = AlgoChoice { tree_max_bytes: 512 << 10, doubling_max_bytes: 64 << 10, halving_min_bytes: usize::MAX, alltoall_min_bytes: usize::MAX, ..c };
        assert_eq!(wide.pick(64 << 10, 4, 4), Algo::Doubling);
        assert_eq!(wide.pick((64 << 10) + 1, 4, 4), Algo::Tree, "between the thresholds");
        assert_eq!(wide.pick((512 << 10) + 1, 4, 4), Algo::Ring);
        assert_eq!(c.pick(8, 2, 4), Algo::Doubling, "two ranks: one exchange");
        assert_eq!(c.pick(128 << 10, 2, 4), Algo::Doubling, "two ranks: one exchange, not the tree");
        assert_eq!(c.pick((128 << 10) + 1, 2, 4), Algo::Ring, "two ranks: the ring halves the bytes");
        assert_eq!(c.pick(64 << 10, 16, 4), Algo::Tree, "sixteen ranks: the tree above doubling's limit");
        assert_eq!(c.pick(256 << 10, 16, 4), Algo::Ring);
        let f = AlgoChoice { forced: Some(Algo::Tree), ..c };
        assert_eq!(f.pick(64 << 20, 4, 4), Algo::Tree);
        let d = AlgoChoice { forced: Some(Algo::Doubling), ..c };
        assert_eq!(d.pick(64 << 20, 4, 4), Algo::Doubling);
        assert_eq!(d.pick(8, 3, 4), Algo::Tree, "forced doubling falls back where it cannot run");
        let h = AlgoChoice { forced: Some(Algo::Halving), ..c };
        assert_eq!(h.pick(8, 4, 4), Algo::Halving);
        assert_eq!(h.pick(8, 6, 4), Algo::Ring, "forced halving-doubling falls back to the ring");
        assert_eq!(h.pick(8, 8, 2), Algo::Ring, "forced, without the slots for a step");
        assert_eq!(c.pick(64 << 10, 8, 2), Algo::Tree, "too few slots: the plain policy");
        assert_eq!(c.pick(256 << 10, 8, 2), Algo::Ring, "too few slots, above the tree's limit");
        assert_eq!(c.pick(64 << 20, 8, 2), Algo::AllToAll, "two slots are enough for the all-to-all");
        let no_a2a = AlgoChoice { alltoall_min_bytes: usize::MAX, ..c };
        assert_eq!(no_a2a.pick(64 << 20, 8, 2), Algo::Ring, "nor halving-doubling: the ring");
        assert_eq!("Rabenseifner".parse::<Algo>(), Ok(Algo::Halving));
        assert_eq!("Ring".parse::<Algo>(), Ok(Algo::Ring));
        assert_eq!("rd".parse::<Algo>(), Ok(Algo::Doubling));
        assert_eq!("All-To-All".parse::<Algo>(), Ok(Algo::AllToAll));
        let a = AlgoChoice { forced: Some(Algo::AllToAll), ..c };
        assert_eq!(a.pick(8, 8, 2), Algo::AllToAll, "two slots are enough");
        assert_eq!(a.pick(8, 6, 4), Algo::Ring, "forced all-to-all falls back like halving-doubling");
        assert_eq!(a.pick(8, 16, 4), Algo::Ring);
        let t = AlgoChoice { alltoall_min_bytes: 1 << 20, ..c };
        assert_eq!(t.pick(1 << 20, 4, 4), Algo::Halving);
        assert_eq!(t.pick((1 << 20) + 1, 4, 4), Algo::AllToAll);
        assert_eq!(t.pick((1 << 20) + 1, 6, 4), Algo::Ring, "six ranks: neither");
    }
}
