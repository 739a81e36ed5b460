//! Recursive halving-doubling all-reduce (Rabenseifner's algorithm), for 4 or 8 ranks.
//!
//! A reduce-scatter by recursive halving, then an all-gather by recursive doubling, on
//! recursive doubling's channels (step `j`: the exchange with rank `r ^ 2^j`). Each
//! round of the data is cut into `n` blocks, and block `b` ends up owned (fully reduced)
//! by rank `b`:
//!
//! * reduce-scatter step `j = 0 .. log2 n`: of the blocks it still reduces (those
//!   `b ≡ r mod 2^j`), rank `r` sends its partner the half whose bit `j` differs from
//!   its own, and combines what the partner sends into the other half;
//! * all-gather step `j = log2 n - 1 .. 0`: rank `r` sends its partner every block it
//!   holds complete and stores the ones the partner sends.
//!
//! Why: it moves the ring's bytes (`2 (n-1)/n · S` per rank) in `2 log2 n` steps (4 with
//! four ranks) instead of `2 (n - 1)` (6), and half of them go in step 0, to rank
//! `r ^ 1`, which shares `r`'s CPU when ranks are pinned in blocks
//! ([`crate::affinity`]): two thirds of the bytes stay in one CPU's cache, against half
//! in the ring. On this project's 2-CPU machine it beat the ring from 256 KiB up, and
//! with its steps in the other order it lost by a fifth (docs/collectives.md,
//! "Halving-doubling all-reduce").
//!
//! Each block is reduced once, at its owner, and copied everywhere else, so every rank
//! gets the same bits.
//!
//! Ordering. The plan is one lane, its rounds one after the other (a second lane, on
//! channels of its own, measured no faster), and a stream's messages must be consumed
//! in the order they were sent. Reduce-scatter blocks go in increasing block order (with
//! four ranks, the receiver's own block last: `scatter_order`). In the
//! all-gather a rank forwards each block it receives to all its lower steps' partners
//! at once, so it sends a step's blocks in the order `gather_order` gives (its own
//! block, then what it received step by step), and its partner receives them in that
//! order. Flow control: a step sends at most `n / 2` messages per round before its
//! partner consumes any, so it needs `n / 2` slots per stream ([`applies`]), and it
//! needs `log2 n` outputs on one action (the owner's block), at most three.

use crate::doubling::{self, steps};
use crate::engine::Engine;
use crate::plan::{split, Action, Plan};

/// Whether the algorithm runs on `n` ranks with `nslots` slots per doubling stream: 4 or
/// 8 ranks (a power of two of at most three steps; two ranks are a plain exchange,
/// which recursive doubling does), and a step's `n / 2` messages fit in the slots.
pub fn applies(n: usize, nslots: usize) -> bool {
    doubling::applies(n) && (4..=8).contains(&n) && n / 2 <= nslots
}

/// The blocks rank `q` receives in reduce-scatter step `j` (those it still reduces
/// after the step, `b ≡ q mod 2^(j+1)`), in the order its partner sends them:
/// increasing, except that with four ranks its own block comes last (it is combined
/// with both steps' messages at once: see [`all_reduce_plan`]).
fn scatter_order(q: usize, n: usize, j: usize) -> Vec<usize> {
    let mask = (2 << j) - 1;
    let mut v: Vec<usize> = (0..n).filter(|b| b & mask == q & mask).collect();
    if steps(n) == 2 {
        v.sort_by_key(|&b| b == q); // stable: the rest stay increasing
    }
    v
}

/// The blocks rank `q` holds complete at all-gather step `j` (`b ≡ q mod 2^(j+1)`), in
/// the order it sends them to its step-`j` partner: its own block, then the blocks it
/// received in its all-gather steps `log2 n - 1` down to `j + 1`, each step's in the
/// order that step's partner sent them.
fn gather_order(q: usize, n: usize, j: usize) -> Vec<usize> {
    let mut v = vec![q];
    for i in (j + 1..steps(n)).rev() {
        v.extend(gather_order(q ^ (1 << i), n, i));
    }
    v
}

/// The all-reduce plan over `count` elements, blocks of at most `chunk` elements;
/// `in_place`: the send and receive buffers are one.
pub fn all_reduce_plan(e: &Engine, rank: usize, n: usize, count: usize, chunk: usize, in_place: bool) -> Plan {
    let mut plan = Plan::with_lanes(1);
    if count == 0 {
        return plan;
    }
    let k = steps(n);
    let (out, inp) = doubling::step_streams(e, rank, n);
    let rounds = count.div_ceil(n * chunk.max(1)).max(1);
    for rd in 0..rounds {
        let (base, len) = split(count, rounds, rd);
        let block = |b: usize| {
            let (o, l) = split(len, n, b);
            (base + o, l)
        };
        // Reduce-scatter, step 0: our contribution to the partner's half.
        for b in scatter_order(rank ^ 1, n, 0) {
            let (o, l) = block(b);
            plan.push(0, Action::new(l).local(o).output(out[0]));
        }
        for j in 0..k {
            for b in scatter_order(rank, n, j) {
                let (o, l) = block(b);
                // The step that sends this block on: its lowest bit above j that
                // differs from ours; none for our own block.
                let next = (j + 1..k).find(|&i| (b ^ rank) >> i & 1 == 1);
                let a = Action::new(l).input(inp[j]);
                let a = match (j, next) {
                    // Four ranks: our own block waits for step 1, which brings the rest
                    // of it, and is built from both messages and our contribution in
                    // the receive buffer, and sent from there (no partial result to
                    // keep, nothing to copy). Our block comes last in both steps.
                    (0, None) if k == 2 => continue,
                    (1, None) if k == 2 => Action::new(l).input(inp[0]).input(inp[1]).local(o).store(o),
                    // With our contribution, sent on at once.
                    (0, Some(1)) => a.local(o).output(out[1]),
                    // With our contribution, kept as the partial result: in place it
                    // already is one.
                    (0, _) if in_place => a.accumulate(o),
                    (0, _) => a.local(o).store(o),
                    // Into the partial result, which goes on now or stays.
                    (_, Some(i)) if i == j + 1 => a.accumulate(o).output(out[i]),
                    _ => a.accumulate(o),
                };
                let a = if next.is_none() && j + 1 == k {
                    // Our block is complete: the all-gather starts with it, to every
                    // partner, straight into their receive buffers where they can.
                    (0..k).rev().fold(a.finalize(true), |a, i| a.output(out[i])).direct_out()
                } else {
                    a
                };
                plan.push(0, a);
            }
        }
        // All-gather: each partner's holdings, stored (or written in place by the
        // partner, crate::direct) and sent to the partners of the steps still to come.
        for j in (0..k).rev() {
            for b in gather_order(rank ^ (1 << j), n, j) {
                let (o, l) = block(b);
                let a = (0..j).rev().fold(Action::new(l).input(inp[j]).store(o).direct_in(), |a, i| a.output(out[i]));
                plan.push(0, if j > 0 { a.direct_out() } else { a });
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_it_applies() {
        assert!(applies(4, 4) && applies(8, 4));
        assert!(!applies(2, 4), "two ranks: recursive doubling");
        assert!(!applies(16, 8), "four steps: more outputs than an action has");
        assert!(!applies(6, 4) && !applies(8, 2));
    }

    #[test]
    fn scatter_halves_down_to_the_owner() {
        // Rank 5 of 8 keeps the odd blocks, then 1 and 5 of them, then its own.
        assert_eq!(scatter_order(5, 8, 0), [1, 3, 5, 7]);
        assert_eq!(scatter_order(5, 8, 1), [1, 5]);
        assert_eq!(scatter_order(5, 8, 2), [5]);
        // Four ranks: the own block last.
        assert_eq!(scatter_order(0, 4, 0), [2, 0]);
        assert_eq!(scatter_order(3, 4, 0), [1, 3]);
        for n in [4, 8] {
            for r in 0..n {
                let mut kept: Vec<usize> = (0..n).collect();
                for j in 0..steps(n) {
                    // We send what the partner keeps, of what we hold.
                    let sent = scatter_order(r ^ (1 << j), n, j);
                    assert!(sent.iter().all(|b| kept.contains(b)), "rank {r} step {j} sends what it holds");
                    kept.retain(|b| !sent.contains(b));
                    let mut mine = scatter_order(r, n, j);
                    mine.sort();
                    assert_eq!(mine, kept, "we keep the other half");
                }
                assert_eq!(kept, [r]);
            }
        }
    }

    #[test]
    fn gather_sends_in_the_order_the_partner_expects() {
        assert_eq!(gather_order(5, 8, 2), [5]);
        assert_eq!(gather_order(5, 8, 1), [5, 1]);
        assert_eq!(gather_order(5, 8, 0), [5, 1, 7, 3]);
        for r in 0..8 {
            // At step j a rank holds b ≡ r mod 2^(j+1), each once.
            for j in 0..3 {
                let mut v = gather_order(r, 8, j);
                v.sort();
                assert_eq!(v, (0..8).filter(|b| b % (2 << j) == r % (2 << j)).collect::<Vec<_>>());
            }
        }
    }
}
