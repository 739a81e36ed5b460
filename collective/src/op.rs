//! Reduction operations: the five that NCCL offers (sum, prod, max, min, avg).
//!
//! `Avg` reduces like `Sum` and divides by the number of ranks once, at the end
//! (integer types use truncating integer division, as NCCL does).

use std::fmt;
use std::str::FromStr;

/// A reduction operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// Sum, then divide by the number of ranks.
    Avg,
}

impl ReduceOp {
    /// Every operation, in NCCL's order.
    pub const ALL: [ReduceOp; 5] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::Avg];

    /// The name nccl-tests prints in its `redop` column.
    pub const fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }

    /// The operation applied between two partial results (`Avg` combines as `Sum`).
    pub const fn combining(self) -> ReduceOp {
        match self {
            ReduceOp::Avg => ReduceOp::Sum,
            o => o,
        }
    }
}

impl fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ReduceOp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "sum" => ReduceOp::Sum,
            "prod" | "product" => ReduceOp::Prod,
            "max" => ReduceOp::Max,
            "min" => ReduceOp::Min,
            "avg" | "mean" => ReduceOp::Avg,
            _ => return Err(format!("unknown reduction {s:?} (sum, prod, max, min, avg)")),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for op in ReduceOp::ALL {
            assert_eq!(op.name().parse::<ReduceOp>(), Ok(op));
        }
        assert!("xor".parse::<ReduceOp>().is_err());
        assert_eq!(ReduceOp::Avg.combining(), ReduceOp::Sum);
    }
}
