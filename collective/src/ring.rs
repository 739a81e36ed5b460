//! Ring algorithms: all-reduce as reduce-scatter then all-gather, plus the two halves
//! alone and a pipelined chain broadcast.
//!
//! Rank `r` sends to `r + 1` and receives from `r - 1` (mod n). The data is cut into
//! *rounds* of at most `n * chunk` elements; each round is cut into `n` balanced
//! blocks (sizes differ by at most one element, so any count works, including
//! counts below `n` where some blocks are empty and their messages are skipped by
//! both sides). Rounds are dealt to `lanes` parallel rings, each with its own
//! channel and slots, so several rounds are on the wire at once.
//!
//! In one round, with `b(x) = x mod n`:
//! * reduce-scatter step `s` (0..n-1): rank `r` sends block `b(r - s - 1)`; at step 0
//!   that is its own data, later it is the block just received from the left reduced
//!   with its own copy. After `n - 1` steps rank `r` holds block `r` fully reduced
//!   (for avg: divided by `n`).
//! * all-gather step `s` (0..n-1): rank `r` sends block `b(r - s)`, starting with the
//!   block it owns, then forwarding what arrived; it stores every block it receives.
//!
//! Every block's partial result travels from rank `b + 1` around to rank `b`, so the
//! reduction order of block `b` is `((x[b+1] op x[b+2]) op ...) op x[b]` (ranks mod n),
//! the same on every rank, and every rank ends with bit-identical results.

use crate::engine::Engine;
use crate::plan::{split, Action, Plan};
use crate::stream::{Channel, StreamList};

/// The ring neighbours of `rank`: (left, right).
pub fn neighbours(rank: usize, n: usize) -> (usize, usize) {
    ((rank + n - 1) % n, (rank + 1) % n)
}

/// Ring geometry for one call.
#[derive(Debug, Clone, Copy)]
pub struct RingShape {
    pub rank: usize,
    pub n: usize,
    /// Parallel rings.
    pub lanes: usize,
    /// Largest block per message, in elements.
    pub chunk: usize,
    /// Smallest block worth splitting rounds for (to feed all lanes), in elements.
    pub min_chunk: usize,
}

impl RingShape {
    /// Rounds for `per_block_total` elements per block position (count / n for
    /// all-reduce, the block size for reduce-scatter/all-gather).
    fn rounds(&self, per_block_total: usize) -> usize {
        let by_chunk = per_block_total.div_ceil(self.chunk.max(1));
        let by_lanes = self.lanes.min(per_block_total / self.min_chunk.max(1));
        by_chunk.max(by_lanes).max(1)
    }
}

fn m(x: isize, n: usize) -> usize {
    x.rem_euclid(n as isize) as usize
}

/// One pipelined round of a ring plan: the lane it runs on, the streams from the left
/// neighbour and to the right one on that lane, and its slice of the elements.
struct Round {
    lane: usize,
    inp: u32,
    out: u32,
    off: usize,
    len: usize,
}

/// The `rounds` rounds over `total` elements, dealt to the lanes in turn.
fn ring_rounds(e: &Engine, s: RingShape, total: usize, rounds: usize) -> impl Iterator<Item = Round> + '_ {
    let (left, right) = neighbours(s.rank, s.n);
    (0..rounds).map(move |k| {
        let lane = k % s.lanes;
        let ch = Channel::ring(lane);
        let (off, len) = split(total, rounds, k);
        Round { lane, inp: e.in_id(left, ch), out: e.out_id(right, ch), off, len }
    })
}

/// The all-reduce plan over `count` elements.
pub fn all_reduce_plan(e: &Engine, s: RingShape, count: usize) -> Plan {
    let (n, r) = (s.n, s.rank);
    let mut plan = Plan::with_lanes(s.lanes);
    if n == 1 || count == 0 {
        return plan;
    }
    for Round { lane, inp, out, off: base, len } in ring_rounds(e, s, count, s.rounds(count.div_ceil(n))) {
        let block = |b: usize| {
            let (o, l) = split(len, n, b);
            (base + o, l)
        };
        let ri = r as isize;
        // Reduce-scatter.
        let (o, l) = block(m(ri - 1, n));
        plan.push(lane, Action::new(l).local(o).output(out));
        for st in 0..n - 1 {
            let (o, l) = block(m(ri - st as isize - 2, n));
            let a = Action::new(l).input(inp).local(o).output(out);
            if st + 2 < n {
                plan.push(lane, a);
            } else {
                // Block r is complete: keep it and start the all-gather with it.
                plan.push(lane, a.store(o).finalize(true));
            }
        }
        // All-gather.
        for st in 0..n - 1 {
            let (o, l) = block(m(ri - st as isize - 1, n));
            let a = Action::new(l).input(inp).store(o);
            plan.push(lane, if st + 2 < n { a.output(out) } else { a });
        }
    }
    plan
}

/// The reduce-scatter plan: `send` has `n * count` elements, block `b` is
/// `send[b * count ..]`; rank `r` receives block `r` reduced into `recv[..count]`.
pub fn reduce_scatter_plan(e: &Engine, s: RingShape, count: usize) -> Plan {
    let (n, r) = (s.n, s.rank);
    let mut plan = Plan::with_lanes(s.lanes);
    if n == 1 || count == 0 {
        return plan;
    }
    for Round { lane, inp, out, off: sub, len } in ring_rounds(e, s, count, s.rounds(count)) {
        let ri = r as isize;
        let b0 = m(ri - 1, n);
        plan.push(lane, Action::new(len).local(b0 * count + sub).output(out));
        for st in 0..n - 1 {
            let b = m(ri - st as isize - 2, n);
            let a = Action::new(len).input(inp).local(b * count + sub);
            plan.push(lane, if st + 2 < n { a.output(out) } else { a.store(sub).finalize(true) });
        }
    }
    plan
}

/// The all-gather plan: rank `r` contributes `send[..count]`, which lands at
/// `recv[r * count ..]` on every rank.
pub fn all_gather_plan(e: &Engine, s: RingShape, count: usize) -> Plan {
    let (n, r) = (s.n, s.rank);
    let mut plan = Plan::with_lanes(s.lanes);
    if n == 1 || count == 0 {
        return plan;
    }
    for Round { lane, inp, out, off: sub, len } in ring_rounds(e, s, count, s.rounds(count)) {
        let ri = r as isize;
        plan.push(lane, Action::new(len).local(sub).store(r * count + sub).output(out));
        for st in 0..n - 1 {
            let b = m(ri - st as isize - 1, n);
            let a = Action::new(len).input(inp).store(b * count + sub);
            plan.push(lane, if st + 2 < n { a.output(out) } else { a });
        }
    }
    plan
}

/// The broadcast plan (in place): a chain from `root` along the ring, pipelined in
/// chunks dealt to the lanes.
pub fn broadcast_plan(e: &Engine, s: RingShape, count: usize, root: usize) -> Plan {
    let (n, r) = (s.n, s.rank);
    let mut plan = Plan::with_lanes(s.lanes);
    if n == 1 || count == 0 {
        return plan;
    }
    let (left, right) = neighbours(r, n);
    let pos = (r + n - root) % n;
    let chunks = s.rounds(count);
    for k in 0..chunks {
        let lane = k % s.lanes;
        let ch = Channel::ring(lane);
        let (off, len) = split(count, chunks, k);
        let a = Action::new(len);
        let a = if pos == 0 {
            a.local(off).output(e.out_id(right, ch))
        } else if pos + 1 < n {
            a.input(e.in_id(left, ch)).store(off).output(e.out_id(right, ch))
        } else {
            a.input(e.in_id(left, ch)).store(off)
        };
        plan.push(lane, a);
    }
    plan
}

/// Streams the ring uses: (inputs, outputs) as (peer, channel).
pub fn streams(rank: usize, n: usize, lanes: usize) -> (StreamList, StreamList) {
    if n < 2 {
        return (vec![], vec![]);
    }
    let (left, right) = neighbours(rank, n);
    ((0..lanes).map(|l| (left, Channel::ring(l))).collect(), (0..lanes).map(|l| (right, Channel::ring(l))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_wrap() {
        assert_eq!(neighbours(0, 4), (3, 1));
        assert_eq!(neighbours(3, 4), (2, 0));
        assert_eq!(neighbours(0, 1), (0, 0));
    }

    #[test]
    fn rounds_feed_lanes_and_respect_chunks() {
        let s = RingShape { rank: 0, n: 4, lanes: 2, chunk: 1000, min_chunk: 10 };
        assert_eq!(s.rounds(0), 1);
        assert_eq!(s.rounds(5), 1);
        assert_eq!(s.rounds(50), 2, "enough data for both lanes");
        assert_eq!(s.rounds(2500), 3);
    }
}
