//! Recursive doubling all-reduce, for small messages on a power-of-two number of ranks.
//!
//! In step `j` (`0 <= j < log2 n`) rank `r` exchanges its partial result with rank
//! `r ^ 2^j` and combines the two; after `log2 n` steps every rank holds the result.
//! That is `log2 n` sequential messages (2 with 4 ranks), against the tree's
//! `2 log2 n` (4: up and down) and the ring's `2 (n - 1)` (6), each carrying the whole
//! buffer. Message latency dominates small all-reduces, so they take this; the whole
//! buffer in every step (`log2 n · S` per rank against the ring's `2 (n-1)/n · S`)
//! makes it lose once bandwidth matters (see [`crate::algo`]).
//!
//! Results are bit-identical on every rank: both partners of a step combine the same
//! two values (`a op b` on one side, `b op a` on the other), and every operation is
//! commutative, bit for bit, in IEEE arithmetic and in wrapping integers (the only
//! exception: `max`/`min` of `+0.0` and `-0.0`, or of two NaNs with different
//! payloads, may keep either one).
//!
//! Plan, per chunk of at most one slot (a single lane, chunks in order, since each
//! step's stream carries the chunks in sequence):
//! 1. own data to partner 0, and a copy into the receive buffer (the partial result);
//! 2. for `j = 1 .. log2 n`: partner `j-1`'s message combined with the partial result,
//!    sent to partner `j` and stored as the new partial result;
//! 3. the last partner's message combined into the partial result, finalized.

use crate::engine::Engine;
use crate::plan::{split, Action, Plan};
use crate::stream::{Channel, StreamList, DOUBLING_STEPS_MAX};

/// Whether recursive doubling works for `n` ranks (a power of two, 2 to 256).
pub fn applies(n: usize) -> bool {
    n >= 2 && n.is_power_of_two() && n.trailing_zeros() as usize <= DOUBLING_STEPS_MAX
}

/// Steps (`log2 n`).
pub(crate) fn steps(n: usize) -> usize {
    n.trailing_zeros() as usize
}

/// Streams: one each way per step, to and from rank `rank ^ 2^j`; none when the
/// algorithm does not apply.
pub fn streams(rank: usize, n: usize) -> (StreamList, StreamList) {
    if !applies(n) {
        return (vec![], vec![]);
    }
    let s: StreamList = (0..steps(n)).map(|j| (rank ^ (1 << j), Channel::doubling(j))).collect();
    (s.clone(), s)
}

/// The engine's (output, input) stream ids of each step, to and from rank `rank ^ 2^j`
/// (recursive doubling's, which halving-doubling uses too).
pub(crate) fn step_streams(e: &Engine, rank: usize, n: usize) -> (Vec<u32>, Vec<u32>) {
    let (partners, _) = streams(rank, n);
    (partners.iter().map(|&(p, ch)| e.out_id(p, ch)).collect(), partners.iter().map(|&(p, ch)| e.in_id(p, ch)).collect())
}

/// The all-reduce plan over `count` elements in chunks of at most `chunk` elements.
pub fn all_reduce_plan(e: &Engine, rank: usize, n: usize, count: usize, chunk: usize) -> Plan {
    let mut plan = Plan::with_lanes(1);
    if !applies(n) || count == 0 {
        return plan;
    }
    // Each step's stream carries one message each way per chunk, in the same order on
    // both partners: a consumed message is always answered by our next one.
    plan.credits_ride = true;
    let k = steps(n);
    let (out, inp) = step_streams(e, rank, n);
    let chunks = count.div_ceil(chunk.max(1)).max(1);
    for c in 0..chunks {
        let (off, l) = split(count, chunks, c);
        plan.push(0, Action::new(l).local(off).store(off).output(out[0]));
        for j in 1..k {
            plan.push(0, Action::new(l).input(inp[j - 1]).accumulate(off).output(out[j]));
        }
        plan.push(0, Action::new(l).input(inp[k - 1]).accumulate(off).finalize(true));
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_counts() {
        assert!(!applies(1));
        assert!(applies(2) && applies(4) && applies(256));
        assert!(!applies(3) && !applies(6) && !applies(512));
    }

    #[test]
    fn partners_pair_up() {
        for n in [2usize, 4, 8, 16] {
            for r in 0..n {
                let (ins, outs) = streams(r, n);
                assert_eq!(ins, outs);
                for &(p, ch) in &outs {
                    // The partner sends back on the same channel.
                    assert!(streams(p, n).0.contains(&(r, ch)));
                }
            }
        }
        assert_eq!(streams(0, 6), (vec![], vec![]));
    }
}
