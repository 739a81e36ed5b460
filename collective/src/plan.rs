//! Plans: what one rank does in one collective, as independent *lanes* of *actions*.
//!
//! An action takes up to [`MAX_IO`] incoming messages (the oldest unconsumed message of
//! each input stream), optionally its own contribution from the send buffer (or, for
//! recursive doubling, the partial result it stored earlier), reduces or
//! copies them into a result, optionally stores the result in the receive buffer,
//! and sends it on up to [`MAX_IO`] output streams. Every algorithm (ring reduce-scatter
//! and all-gather steps, tree reduce and broadcast steps, recursive doubling's
//! exchanges, chain broadcast) is a
//! sequence of such actions. Actions of a lane run in order; lanes run
//! independently, so parallel rings and the two trees overlap. An action runs when
//! all its inputs have arrived and all its outputs have a free slot (credit).

/// Most inputs and most outputs of one action: the all-to-all reduce-scatter's owner of a
/// block takes one message from every other rank and sends the result to each of them
/// ([`crate::alltoall`], up to eight ranks).
pub const MAX_IO: usize = 7;

/// One step of a plan. Offsets and `len` are in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    inputs: [u32; MAX_IO],
    n_in: u8,
    outputs: [u32; MAX_IO],
    n_out: u8,
    /// Our contribution: `send[local .. local + len]`.
    pub local: Option<usize>,
    /// Where the result lands: `recv[store .. store + len]`.
    pub store: Option<usize>,
    pub len: usize,
    /// Apply the final step of the operation (Avg: divide by the rank count).
    pub finalize: bool,
    /// The contribution is the partial result already at `recv[store ..]` (stored by
    /// an earlier action of the same lane) instead of `local`.
    pub acc: bool,
    /// Its messages may be written straight into each receiver's receive buffer at
    /// `store`, where the receiver announced it ([`crate::direct`]).
    pub direct_out: bool,
    /// Its one input may have been written straight to `recv[store ..]` by the sender
    /// (an action of the sender marked `direct_out`), in calls where we announce our
    /// receive buffer.
    pub direct_in: bool,
}

impl Action {
    /// An action over `len` elements.
    pub fn new(len: usize) -> Action {
        Action {
            inputs: [0; MAX_IO],
            n_in: 0,
            outputs: [0; MAX_IO],
            n_out: 0,
            local: None,
            store: None,
            len,
            finalize: false,
            acc: false,
            direct_out: false,
            direct_in: false,
        }
    }

    /// Adds an input stream (at most [`MAX_IO`]).
    pub fn input(mut self, stream: u32) -> Action {
        assert!((self.n_in as usize) < MAX_IO, "at most {MAX_IO} inputs");
        self.inputs[self.n_in as usize] = stream;
        self.n_in += 1;
        self
    }

    /// Adds an output stream (at most [`MAX_IO`]: halving-doubling's owner of a block
    /// sends it to one partner per step, the all-to-all's to every other rank).
    pub fn output(mut self, stream: u32) -> Action {
        assert!((self.n_out as usize) < MAX_IO, "at most {MAX_IO} outputs");
        self.outputs[self.n_out as usize] = stream;
        self.n_out += 1;
        self
    }

    pub fn local(mut self, off: usize) -> Action {
        self.local = Some(off);
        self
    }

    pub fn store(mut self, off: usize) -> Action {
        self.store = Some(off);
        self
    }

    /// Combines the input with the partial result at `recv[off ..]` and stores the
    /// result there again (one input, no `local`).
    pub fn accumulate(mut self, off: usize) -> Action {
        self.store = Some(off);
        self.acc = true;
        self
    }

    pub fn finalize(mut self, yes: bool) -> Action {
        self.finalize = yes;
        self
    }

    /// Marks the outputs as direct ([`Action::direct_out`]): the result is stored, and
    /// every receiver's action for it stores it at the same offset.
    pub fn direct_out(mut self) -> Action {
        assert!(self.store.is_some() && self.n_out > 0, "a direct sender stores what it sends");
        self.direct_out = true;
        self
    }

    /// Marks the input as possibly in place already ([`Action::direct_in`]): only for
    /// an action that takes one message as it is and stores it.
    pub fn direct_in(mut self) -> Action {
        assert!(self.n_in == 1 && self.local.is_none() && self.store.is_some() && !self.acc && !self.finalize, "a direct receiver only stores one message");
        self.direct_in = true;
        self
    }

    pub fn inputs(&self) -> &[u32] {
        &self.inputs[..self.n_in as usize]
    }

    pub fn outputs(&self) -> &[u32] {
        &self.outputs[..self.n_out as usize]
    }
}

/// An ordered list of actions.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    pub actions: Vec<Action>,
    pub next: usize,
}

impl Lane {
    pub fn is_done(&self) -> bool {
        self.next >= self.actions.len()
    }
}

/// All lanes of one rank for one collective.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub lanes: Vec<Lane>,
    /// Every stream this plan consumes from is answered in lock step by a message on
    /// its paired stream ([`crate::stream`], "Piggybacked credits") later in the same
    /// call or in the next call that uses it (recursive doubling: one message each way
    /// per step and chunk). The engine then sends no credit when half the slots are
    /// consumed: it rides on that message; the engine's idle flush still returns any
    /// credit a sender is stuck without.
    pub credits_ride: bool,
}

impl Plan {
    pub fn with_lanes(n: usize) -> Plan {
        Plan { lanes: vec![Lane::default(); n], credits_ride: false }
    }

    /// Back to the first action of every lane, to run the same plan again (the
    /// communicator keeps plans for repeated calls of one shape).
    pub fn rewind(&mut self) {
        self.lanes.iter_mut().for_each(|l| l.next = 0);
    }

    pub fn push(&mut self, lane: usize, a: Action) {
        if a.len > 0 {
            self.lanes[lane].actions.push(a);
        }
    }

    /// Total actions.
    pub fn len(&self) -> usize {
        self.lanes.iter().map(|l| l.actions.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether any action is direct ([`Action::direct_in`] or [`Action::direct_out`]):
    /// the call is numbered and announces the receive buffer ([`crate::direct`]). Both
    /// kinds count, so that every rank of a call agrees: with a single non-empty block,
    /// its owner only sends it and the others only receive it.
    pub fn has_direct(&self) -> bool {
        self.lanes.iter().flat_map(|l| &l.actions).any(|a| a.direct_in || a.direct_out)
    }

    /// Highest element touched in the send and receive buffers (for bounds checks).
    pub fn extents(&self) -> (usize, usize) {
        let mut s = 0;
        let mut r = 0;
        for a in self.lanes.iter().flat_map(|l| &l.actions) {
            if let Some(o) = a.local {
                s = s.max(o + a.len);
            }
            if let Some(o) = a.store {
                r = r.max(o + a.len);
            }
        }
        (s, r)
    }
}

/// Where an action's outgoing message is read from.
///
/// By default the result is built in the output stream's send slot (staging memory
/// the transport registered once) and, if the action stores it, copied from there
/// into the receive buffer. When the application's buffers are registered too (see
/// [`crate::engine`], "User buffers"), the copy can go: the result is built in the
/// receive buffer and sent from there, and a contribution forwarded as it is is sent
/// straight from the send buffer. That is only safe while nothing writes the source
/// before the device has read it, which [`Plan::sources`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The first output's send slot.
    Slot,
    /// `send[local ..]`, unchanged (an action that only forwards its contribution).
    Send,
    /// `recv[store ..]`, where the action builds its result.
    Recv,
}

impl Plan {
    /// The [`Source`] of every action (by lane and index), given whether the send and
    /// receive buffers are one (`aliased`), which of them the transport can send from
    /// (`user_send`, `user_recv`), and whether the operation changes a result after
    /// the reduction (`finalizes`: avg's division).
    ///
    /// An action may send from application memory only if no other action of the plan
    /// can write that memory while the write may still be in flight: another lane at any
    /// point, or a later action of the same lane. (The engine waits for every such write
    /// to complete before the call returns, so the caller's next writes are safe.)
    /// Accumulating actions keep their slot (their operand order is `input op
    /// partial`, which has no in-place kernel), and so do actions whose contribution
    /// overlaps their own result in an in-place call, unless it is exactly that range
    /// and the action has inputs: the engine then combines the inputs into it, in the
    /// order `contribution op input` (the same bits for every operation but `max`/`min`
    /// of signed zeros or NaN payloads, and the result is computed at one rank and
    /// copied to the others in every plan that does this).
    pub fn sources(&self, aliased: bool, user_send: bool, user_recv: bool, finalizes: bool) -> Vec<Vec<Source>> {
        // Every store, sorted by start, and the longest one: the stores that overlap
        // [lo, hi) are among those starting in (lo - longest, hi).
        let mut stores: Vec<(usize, usize, usize, usize)> = Vec::new();
        for (li, lane) in self.lanes.iter().enumerate() {
            for (ai, a) in lane.actions.iter().enumerate() {
                if let Some(o) = a.store {
                    stores.push((o, o + a.len, li, ai));
                }
            }
        }
        stores.sort_unstable();
        let longest = stores.iter().map(|s| s.1 - s.0).max().unwrap_or(0);
        let written_after = |lo: usize, hi: usize, li: usize, ai: usize| {
            let end = stores.partition_point(|s| s.0 < hi);
            stores[..end].iter().rev().take_while(|s| s.0 + longest > lo).any(|&(_, e, l, i)| e > lo && (l != li || i > ai))
        };
        let overlaps = |a: (usize, usize), b: (usize, usize)| a.0 < b.1 && b.0 < a.1;
        self.lanes
            .iter()
            .enumerate()
            .map(|(li, lane)| {
                lane.actions
                    .iter()
                    .enumerate()
                    .map(|(ai, a)| {
                        if a.outputs().is_empty() || a.acc {
                            return Source::Slot;
                        }
                        let n = a.len;
                        if let Some(o) = a.store {
                            // In place, a contribution that is exactly the result's
                            // range is combined into it (`result op inputs`; the engine
                            // never views it separately); one that overlaps it otherwise
                            // keeps the slot.
                            let own = a.local.is_some_and(|l| aliased && overlaps((l, l + n), (o, o + n)) && (l != o || a.inputs().is_empty()));
                            if user_recv && !own && !written_after(o, o + n, li, ai) {
                                return Source::Recv;
                            }
                            return Source::Slot;
                        }
                        match a.local {
                            Some(l)
                                if a.inputs().is_empty()
                                    && !(a.finalize && finalizes)
                                    && if aliased { user_recv && !written_after(l, l + n, li, ai) } else { user_send } =>
                            {
                                Source::Send
                            }
                            _ => Source::Slot,
                        }
                    })
                    .collect()
            })
            .collect()
    }
}

/// `[k * total / parts, (k + 1) * total / parts)`: a balanced split (sizes differ by
/// at most one).
#[inline]
pub fn split(total: usize, parts: usize, k: usize) -> (usize, usize) {
    let a = (k as u128 * total as u128 / parts as u128) as usize;
    let b = ((k as u128 + 1) * total as u128 / parts as u128) as usize;
    (a, b - a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_covers_everything() {
        for total in [0usize, 1, 3, 7, 100, 1001] {
            for parts in 1..9 {
                let mut next = 0;
                for k in 0..parts {
                    let (o, l) = split(total, parts, k);
                    assert_eq!(o, next);
                    assert!(l <= total / parts + 1);
                    next = o + l;
                }
                assert_eq!(next, total);
            }
        }
    }

    /// One lane of a 2-rank ring all-reduce over 8 elements, rank 0: send block 1,
    /// receive block 0 and reduce it with ours (stored, sent on), receive block 1.
    fn ring_like() -> Plan {
        let mut p = Plan::with_lanes(1);
        p.push(0, Action::new(4).local(4).output(0));
        p.push(0, Action::new(4).input(0).local(0).store(0).finalize(true).output(0));
        p.push(0, Action::new(4).input(0).store(4));
        p
    }

    #[test]
    fn out_of_place_sends_from_the_buffers() {
        let p = ring_like();
        assert_eq!(p.sources(false, true, true, false), vec![vec![Source::Send, Source::Recv, Source::Slot]]);
        // Without the keys everything goes through the slots.
        assert_eq!(p.sources(false, false, false, false), vec![vec![Source::Slot; 3]]);
        assert_eq!(p.sources(false, false, true, false), vec![vec![Source::Slot, Source::Recv, Source::Slot]]);
        // Avg's division changes a finalized contribution: it is built in the slot.
        let mut q = Plan::with_lanes(1);
        q.push(0, Action::new(4).local(0).finalize(true).output(0));
        assert_eq!(q.sources(false, true, true, true), vec![vec![Source::Slot]]);
        assert_eq!(q.sources(false, true, true, false), vec![vec![Source::Send]]);
    }

    #[test]
    fn in_place_keeps_a_slot_where_the_source_is_written_later_or_overlaps_in_part() {
        let p = ring_like();
        // Block 1 is sent first and received into the same place at the end. The
        // reduction's contribution is exactly its own result: combined into it there.
        assert_eq!(p.sources(true, true, true, false), vec![vec![Source::Slot, Source::Recv, Source::Slot]]);
        // A contribution that overlaps the result only in part keeps the slot, and so
        // does a plain copy of it (no input to combine).
        let mut o = Plan::with_lanes(1);
        o.push(0, Action::new(4).input(0).local(2).store(0).output(0));
        o.push(0, Action::new(4).local(8).store(8).output(0));
        assert_eq!(o.sources(true, true, true, false), vec![vec![Source::Slot, Source::Slot]]);
        assert_eq!(o.sources(false, true, true, false), vec![vec![Source::Recv, Source::Recv]]);
        // A store in another lane counts whatever its position.
        let mut q = Plan::with_lanes(2);
        q.push(0, Action::new(4).input(0).store(2));
        q.push(1, Action::new(4).local(0).output(1));
        q.push(1, Action::new(2).input(1).store(8).output(1));
        assert_eq!(q.sources(true, true, true, false), vec![vec![Source::Slot], vec![Source::Slot, Source::Recv]]);
        assert_eq!(q.sources(false, true, true, false), vec![vec![Source::Slot], vec![Source::Send, Source::Recv]]);
        // An earlier store of the same lane is finished before the send.
        let mut r = Plan::with_lanes(1);
        r.push(0, Action::new(4).input(0).store(0));
        r.push(0, Action::new(4).input(0).store(0).output(0));
        assert_eq!(r.sources(false, true, true, false), vec![vec![Source::Slot, Source::Recv]]);
        r.push(0, Action::new(1).input(0).store(3));
        assert_eq!(r.sources(false, true, true, false), vec![vec![Source::Slot; 3]], "a later store overlaps the sent range");
    }

    #[test]
    fn accumulating_actions_keep_their_slot() {
        let mut p = Plan::with_lanes(1);
        p.push(0, Action::new(4).input(0).local(0).store(0));
        p.push(0, Action::new(4).input(0).accumulate(0).output(0));
        assert_eq!(p.sources(false, true, true, false), vec![vec![Source::Slot, Source::Slot]]);
    }

    #[test]
    fn empty_actions_are_dropped() {
        let mut p = Plan::with_lanes(1);
        p.push(0, Action::new(0).local(0));
        p.push(0, Action::new(3).local(2).store(5).input(1).output(2));
        assert_eq!(p.len(), 1);
        assert_eq!(p.extents(), (5, 8));
        assert_eq!(p.lanes[0].actions[0].inputs(), &[1]);
    }
}
