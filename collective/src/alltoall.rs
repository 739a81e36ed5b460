//! All-to-all all-reduce, for 4 or 8 ranks: a reduce-scatter in one step (every rank
//! writes its part of block `b` straight to rank `b`), one combining pass at each owner,
//! and the direct all-gather ([`crate::direct`]) in one more step.
//!
//! Each round of the data is cut into `n` blocks; block `b` is owned by rank `b`. In a
//! round rank `r`:
//!
//! 1. sends its contribution to every block `b != r` to rank `b` (`n - 1` messages at
//!    once, each on the stream to that rank; from the send buffer where the transport
//!    can send from it);
//! 2. when the `n - 1` messages for its own block are in, combines them with its own
//!    contribution in one pass (piece by piece, so each input is read once and the
//!    result written once: `engine::reduce_fused`), into the receive buffer, and sends
//!    the result to every other rank, straight into their receive buffers;
//! 3. takes every other rank's finished block (already in place, or copied from the
//!    slot where the receiver could not take direct writes).
//!
//! Why: on one host the data path is a copy by the receiving process (softhca's
//! same-host path), and two ranks share each CPU here. Halving-doubling needs `2 log2 n`
//! hand-offs per round (4 with four ranks), each waiting for a partner that may be
//! descheduled, and its reductions pass over memory 1.75 times the call's bytes (its
//! first step's partial sums are written out and read back); this one needs 2, and
//! passes over 1.25 times (`n / n` read and `1 / n` written, per block, four ranks). It
//! moves the same bytes: `2 (n - 1) / n · S` per rank. What it loses: two thirds of each
//! rank's traffic (with four ranks pinned in blocks, [`crate::affinity`]) is with ranks
//! on the other CPU, against one third in halving-doubling; and it needs `n - 1` links,
//! which four and eight ranks have anyway (ring, tree and doubling partners), apart from
//! the channels below. Measured: docs/collectives.md, "All-to-all all-reduce".
//!
//! Ordering. One lane. Every stream carries, per round, the sender's contribution to the
//! receiver's block and then the sender's finished block; the lane runs round `k`'s
//! sends, its combine, round `k + 1`'s sends and then round `k`'s gathers, so the sends
//! of the next round overlap the finished blocks of this one. Each message is consumed
//! in the order it was sent on its stream, and every message is produced at an earlier
//! position of the lane than the one that consumes it, at a position after the
//! consumption of the message two places before it on its stream: two slots per stream
//! suffice ([`applies`]).
//!
//! Each block is reduced once, at its owner (in the order `own, then the other ranks by
//! increasing XOR distance`), and copied everywhere else, so every rank gets the same
//! bits.

use crate::doubling;
use crate::engine::Engine;
use crate::plan::{split, Action, Plan};
use crate::stream::{Channel, StreamList};

/// Whether the algorithm runs on `n` ranks with `nslots` slots per stream: 4 or 8 (a
/// power of two, so that partners pair up by XOR distance, and at most seven partners,
/// what an action's inputs and outputs hold and the doubling channels number).
pub fn applies(n: usize, nslots: usize) -> bool {
    doubling::applies(n) && (4..=8).contains(&n) && nslots >= 2
}

/// The channel of the exchange between two ranks whose XOR distance is `d` (`1 <= d <
/// n`): recursive doubling's step channel for a power of two (the streams exist
/// already), the channels after the steps for the other distances, in increasing order.
/// The same at both ends (the distance is).
pub fn channel(d: usize, n: usize) -> Channel {
    debug_assert!(d >= 1 && d < n);
    if d.is_power_of_two() {
        Channel::doubling(d.trailing_zeros() as usize)
    } else {
        // Of the d - 1 numbers below d, floor(log2 d) + 1 are powers of two (d is not).
        let others_below = d - 1 - (d.ilog2() as usize + 1);
        Channel::doubling(doubling::steps(n) + others_below)
    }
}

/// Streams the algorithm needs beyond recursive doubling's (those at a distance that is
/// not a power of two), one each way per such partner; none where it does not apply.
pub fn streams(rank: usize, n: usize) -> (StreamList, StreamList) {
    if !applies(n, 2) {
        return (vec![], vec![]);
    }
    let s: StreamList = (1..n).filter(|d| !d.is_power_of_two()).map(|d| (rank ^ d, channel(d, n))).collect();
    (s.clone(), s)
}

/// The all-reduce plan over `count` elements, blocks of at most `chunk` elements.
pub fn all_reduce_plan(e: &Engine, rank: usize, n: usize, count: usize, chunk: usize) -> Plan {
    let mut plan = Plan::with_lanes(1);
    if count == 0 || !applies(n, 2) {
        return plan;
    }
    // Peers by XOR distance; the streams to and from each.
    let dists: Vec<usize> = (1..n).collect();
    let out: Vec<u32> = dists.iter().map(|&d| e.out_id(rank ^ d, channel(d, n))).collect();
    let inp: Vec<u32> = dists.iter().map(|&d| e.in_id(rank ^ d, channel(d, n))).collect();
    let rounds = count.div_ceil(n * chunk.max(1)).max(1);
    let round = |rd: usize| split(count, rounds, rd);
    let block = |rd: usize, b: usize| {
        let (base, len) = round(rd);
        let (o, l) = split(len, n, b);
        (base + o, l)
    };
    let sends = |plan: &mut Plan, rd: usize| {
        for (i, &d) in dists.iter().enumerate() {
            let (o, l) = block(rd, rank ^ d);
            plan.push(0, Action::new(l).local(o).output(out[i]));
        }
    };
    let gathers = |plan: &mut Plan, rd: usize| {
        for (i, &d) in dists.iter().enumerate() {
            let (o, l) = block(rd, rank ^ d);
            plan.push(0, Action::new(l).input(inp[i]).store(o).direct_in());
        }
    };
    sends(&mut plan, 0);
    for rd in 0..rounds {
        let (o, l) = block(rd, rank);
        let a = inp.iter().fold(Action::new(l).local(o).store(o).finalize(true), |a, &s| a.input(s));
        let a = out.iter().fold(a, |a, &s| a.output(s));
        plan.push(0, a.direct_out());
        if rd + 1 < rounds {
            sends(&mut plan, rd + 1);
        }
        gathers(&mut plan, rd);
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_it_applies() {
        assert!(applies(4, 4) && applies(8, 4) && applies(8, 2));
        assert!(!applies(2, 4) && !applies(6, 4) && !applies(16, 4));
    }

    #[test]
    fn channels_are_distinct_and_match_doubling() {
        for n in [4usize, 8] {
            let chans: Vec<Channel> = (1..n).map(|d| channel(d, n)).collect();
            let mut sorted = chans.clone();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), n - 1, "n={n}: one channel per distance");
            for j in 0..doubling::steps(n) {
                assert_eq!(channel(1 << j, n), Channel::doubling(j));
            }
            // Inside the doubling range of channels (16 in all).
            assert!(chans.iter().all(|c| c.0 >= Channel::doubling(0).0 && (c.0 as usize) < crate::stream::MAX_CHANNELS));
        }
        assert_eq!(channel(3, 4), Channel::doubling(2));
        assert_eq!(channel(3, 8), Channel::doubling(3));
        assert_eq!(channel(7, 8), Channel::doubling(6));
    }
}
