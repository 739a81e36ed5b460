//! Plans: what one rank does in one collective, as independent *lanes* of *actions*.
//!
//! An action takes up to two incoming messages (the oldest unconsumed message of each
//! input stream), optionally its own contribution from the send buffer (or, for
//! recursive doubling, the partial result it stored earlier), reduces or
//! copies them into a result, optionally stores the result in the receive buffer,
//! and sends it on up to two output streams. Every algorithm (ring reduce-scatter
//! and all-gather steps, tree reduce and broadcast steps, recursive doubling's
//! exchanges, chain broadcast) is a
//! sequence of such actions. Actions of a lane run in order; lanes run
//! independently, so parallel rings and the two trees overlap. An action runs when
//! all its inputs have arrived and all its outputs have a free slot (credit).

/// One step of a plan. Offsets and `len` are in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Action {
    inputs: [u32; 2],
    n_in: u8,
    outputs: [u32; 2],
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
}

impl Action {
    /// An action over `len` elements.
    pub fn new(len: usize) -> Action {
        Action { inputs: [0; 2], n_in: 0, outputs: [0; 2], n_out: 0, local: None, store: None, len, finalize: false, acc: false }
    }

    /// Adds an input stream (at most two).
    pub fn input(mut self, stream: u32) -> Action {
        assert!(self.n_in < 2, "at most two inputs");
        self.inputs[self.n_in as usize] = stream;
        self.n_in += 1;
        self
    }

    /// Adds an output stream (at most two).
    pub fn output(mut self, stream: u32) -> Action {
        assert!(self.n_out < 2, "at most two outputs");
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
}

impl Plan {
    pub fn with_lanes(n: usize) -> Plan {
        Plan { lanes: vec![Lane::default(); n] }
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
