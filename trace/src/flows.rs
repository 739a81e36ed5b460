//! The arrows: which record caused which, from the identifying fields the layers log.
//!
//! One RDMA operation leaves, in order (the fields matched are in brackets; PSNs are
//! 24-bit and start at random values, so a (QPN, PSN) pair names one packet of a run):
//!
//! | from                                   | to                                          | matched on |
//! |----------------------------------------|---------------------------------------------|------------|
//! | `provider::post` (qpn, pi)             | `provider::doorbell`, same thread           | qpn, first after |
//! | `provider::doorbell` (qpn, pi)         | `softhca::doorbell` `sq doorbell`           | qpn, pi |
//! | `softhca::doorbell` `sq doorbell`      | `softhca::wqe` (qpn, index)                 | qpn, the last doorbell before |
//! | `softhca::wqe` (psn, npsn)             | `softhca::tx` of each request packet        | psn in [psn, psn + npsn) |
//! | `softhca::tx` (qpn = dest QPN, psn)    | `softhca::rx` in another process            | qpn, psn, opcode |
//! | `softhca::rx` (qpn, psn)               | `softhca::responder` (qpn, psn)             | same process, qpn, psn |
//! | `softhca::responder` (qpn, psn)        | `softhca::ack` `ack sent` (qpn, psn)        | qpn, the ACK's psn at or after |
//! | `softhca::ack` `ack sent` (psn)        | `softhca::tx` of the Acknowledge            | psn |
//! | `softhca::rx` of the ACK (qpn, psn)    | `softhca::ack` `ack received` (qpn, psn)    | qpn, psn |
//! | `softhca::ack` `ack received` (qpn)    | `softhca::cqe` (qpn, wqe_counter)           | qpn, the last ACK after the WQE |
//! | `softhca::cqe` (qpn, wqe_counter)      | `provider::poll` (qpn, wqe_counter)         | qpn, wqe_counter |

use crate::jsonl::{Kind, Rec};

/// An arrow from record `from` to record `to` (indices into the merged, time-ordered
/// list).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Flow {
    pub from: usize,
    pub to: usize,
}

use std::collections::HashMap;
use std::hash::Hash;

const PSN_MASK: u64 = 0xff_ffff;

/// How far past a responder action the ACK that covers it is looked for (coalesced ACKs
/// cover a window of PSNs; the first ACK at or after the PSN is the one).
const ACK_LOOKAHEAD: usize = 64;

fn psn_in(p: u64, start: u64, n: u64) -> bool {
    (p.wrapping_sub(start) & PSN_MASK) < n.max(1)
}

fn is_ack_opcode(r: &Rec) -> bool {
    r.str("opcode").is_some_and(|o| o.contains("Acknowledge"))
}

/// Record indices by key, ascending (the records are sorted by time), so that "the first
/// one after i" and "the last one before i" are binary searches: a long run's records
/// link in O(n log n).
struct Index<K>(HashMap<K, Vec<usize>>);

impl<K: Hash + Eq> Index<K> {
    fn new() -> Self {
        Index(HashMap::new())
    }
    fn add(&mut self, k: K, i: usize) {
        self.0.entry(k).or_default().push(i);
    }
    /// The candidates after `i`, in order.
    fn after(&self, k: &K, i: usize) -> &[usize] {
        self.0.get(k).map_or(&[], |v| &v[v.partition_point(|&j| j <= i)..])
    }
    fn first_after(&self, k: &K, i: usize) -> Option<usize> {
        self.after(k, i).first().copied()
    }
    fn last_before(&self, k: &K, i: usize) -> Option<usize> {
        let v = self.0.get(k)?;
        v[..v.partition_point(|&j| j < i)].last().copied()
    }
}

/// Every arrow among `recs` (sorted by time).
pub fn link(recs: &[Rec]) -> Vec<Flow> {
    type Q = Option<u64>;
    let mut doorbell: Index<(u32, u64, Q)> = Index::new(); // provider::doorbell by pid, tid, qpn
    let mut sq_db: Index<(u32, Q, Q)> = Index::new(); // sq doorbell by pid, qpn, pi
    let mut sq_db_q: Index<(u32, Q)> = Index::new(); // sq doorbell by pid, qpn
    let mut tx_req: Index<(u32, Q)> = Index::new(); // request tx by pid, psn
    let mut tx_ack: Index<(u32, Q)> = Index::new(); // Acknowledge tx by pid, psn
    let mut rx: Index<(Q, Q, Option<String>)> = Index::new(); // rx by qpn, psn, opcode
    let mut responder: Index<(u32, Q, Q)> = Index::new();
    let mut ack_sent: Index<(u32, Q)> = Index::new();
    let mut ack_recv: Index<(u32, Q, Q)> = Index::new();
    let mut ack_recv_q: Index<(u32, Q)> = Index::new();
    let mut wqe: Index<(u32, Q, Q)> = Index::new();
    let mut poll: Index<(u32, Q, Q)> = Index::new();
    for (i, r) in recs.iter().enumerate() {
        if r.kind != Kind::Event {
            continue;
        }
        let (pid, qpn, psn) = (r.pid, r.u64("qpn"), r.u64("psn"));
        match (r.target.as_str(), r.msg.as_str()) {
            ("provider::doorbell", _) => doorbell.add((pid, r.tid, qpn), i),
            ("softhca::doorbell", "sq doorbell") => {
                sq_db.add((pid, qpn, r.u64("pi")), i);
                sq_db_q.add((pid, qpn), i);
            }
            ("softhca::tx", "tx") if is_ack_opcode(r) => tx_ack.add((pid, psn), i),
            ("softhca::tx", "tx") => tx_req.add((pid, psn), i),
            ("softhca::rx", "rx") => rx.add((qpn, psn, r.str("opcode").map(str::to_owned)), i),
            ("softhca::responder", _) => responder.add((pid, qpn, psn), i),
            ("softhca::ack", "ack sent") => ack_sent.add((pid, qpn), i),
            ("softhca::ack", "ack received") => {
                ack_recv.add((pid, qpn, psn), i);
                ack_recv_q.add((pid, qpn), i);
            }
            ("softhca::wqe", "wqe") => wqe.add((pid, qpn, r.u64("index")), i),
            ("provider::poll", _) => poll.add((pid, qpn, r.u64("wqe_counter")), i),
            _ => {}
        }
    }
    let mut flows = Vec::new();
    let mut push = |from: usize, to: Option<usize>| {
        if let Some(to) = to {
            flows.push(Flow { from, to });
        }
    };
    for (i, r) in recs.iter().enumerate() {
        if r.kind != Kind::Event {
            continue;
        }
        let (pid, qpn, psn) = (r.pid, r.u64("qpn"), r.u64("psn"));
        match (r.target.as_str(), r.msg.as_str()) {
            ("provider::post", _) => push(i, doorbell.first_after(&(pid, r.tid, qpn), i)),
            ("provider::doorbell", _) => push(i, sq_db.first_after(&(pid, qpn, r.u64("pi")), i)),
            ("softhca::wqe", "wqe") => {
                if let Some(from) = sq_db_q.last_before(&(pid, qpn), i) {
                    push(from, Some(i));
                }
                let Some(start) = psn else { continue };
                // Each request packet of the WQE: the first tx of each PSN after it.
                for k in 0..r.u64("npsn").unwrap_or(1).max(1) {
                    push(i, tx_req.first_after(&(pid, Some((start + k) & PSN_MASK)), i));
                }
            }
            ("softhca::tx", "tx") => {
                let k = (qpn, psn, r.str("opcode").map(str::to_owned));
                push(i, rx.after(&k, i).iter().copied().find(|&j| recs[j].pid != pid));
            }
            ("softhca::rx", "rx") if is_ack_opcode(r) => push(i, ack_recv.first_after(&(pid, qpn, psn), i)),
            ("softhca::rx", "rx") => push(i, responder.first_after(&(pid, qpn, psn), i)),
            ("softhca::responder", _) => {
                let Some(p) = psn else { continue };
                let to = ack_sent.after(&(pid, qpn), i).iter().take(ACK_LOOKAHEAD).copied()
                    .find(|&j| recs[j].u64("psn").is_some_and(|a| psn_in(a, p, 1 << 16)));
                push(i, to);
            }
            ("softhca::ack", "ack sent") => push(i, tx_ack.first_after(&(pid, psn), i)),
            ("softhca::cqe", "cqe") => {
                let counter = r.u64("wqe_counter");
                push(i, poll.first_after(&(pid, qpn, counter), i));
                let Some(w) = wqe.last_before(&(pid, qpn, counter), i) else { continue };
                if let Some(a) = ack_recv_q.last_before(&(pid, qpn), i) {
                    if a > w {
                        push(a, Some(i));
                    }
                }
            }
            _ => {}
        }
    }
    flows.sort_by_key(|f| (f.from, f.to));
    flows.dedup();
    flows
}
