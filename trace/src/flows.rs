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

const PSN_MASK: u64 = 0xff_ffff;

fn psn_in(p: u64, start: u64, n: u64) -> bool {
    (p.wrapping_sub(start) & PSN_MASK) < n.max(1)
}

fn is(r: &Rec, target: &str, msg: &str) -> bool {
    r.kind == Kind::Event && r.target == target && (msg.is_empty() || r.msg == msg)
}

fn is_ack_opcode(r: &Rec) -> bool {
    r.str("opcode").is_some_and(|o| o.contains("Acknowledge"))
}

/// Every arrow among `recs` (sorted by time).
pub fn link(recs: &[Rec]) -> Vec<Flow> {
    let mut flows = Vec::new();
    // The first record at or after `i` that `pred` accepts.
    let next = |i: usize, pred: &dyn Fn(&Rec) -> bool| (i + 1..recs.len()).find(|&j| pred(&recs[j]));
    let prev = |i: usize, pred: &dyn Fn(&Rec) -> bool| (0..i).rev().find(|&j| pred(&recs[j]));
    for (i, r) in recs.iter().enumerate() {
        if r.kind != Kind::Event {
            continue;
        }
        let (pid, qpn, psn) = (r.pid, r.u64("qpn"), r.u64("psn"));
        let to = match (r.target.as_str(), r.msg.as_str()) {
            ("provider::post", _) => next(i, &|s| is(s, "provider::doorbell", "") && s.pid == pid && s.tid == r.tid && s.u64("qpn") == qpn),
            ("provider::doorbell", _) => next(i, &|s| is(s, "softhca::doorbell", "sq doorbell") && s.pid == pid
                && s.u64("qpn") == qpn && s.u64("pi") == r.u64("pi")),
            ("softhca::tx", _) => next(i, &|s| is(s, "softhca::rx", "rx") && s.pid != pid && s.u64("qpn") == qpn
                && s.u64("psn") == psn && s.str("opcode") == r.str("opcode")),
            ("softhca::rx", _) if is_ack_opcode(r) => next(i, &|s| s.pid == pid && s.u64("qpn") == qpn && s.u64("psn") == psn
                && (is(s, "softhca::ack", "ack received") || (s.target == "softhca::ack" && s.msg.contains("received")))),
            ("softhca::rx", _) => next(i, &|s| s.kind == Kind::Event && s.target == "softhca::responder" && s.pid == pid
                && s.u64("qpn") == qpn && s.u64("psn") == psn),
            ("softhca::responder", _) => next(i, &|s| is(s, "softhca::ack", "ack sent") && s.pid == pid && s.u64("qpn") == qpn
                && psn.zip(s.u64("psn")).is_some_and(|(p, a)| psn_in(a, p, 1 << 16))),
            ("softhca::ack", "ack sent") => next(i, &|s| is(s, "softhca::tx", "tx") && s.pid == pid && s.u64("psn") == psn && is_ack_opcode(s)),
            ("softhca::cqe", "cqe") => next(i, &|s| is(s, "provider::poll", "") && s.pid == pid && s.u64("qpn") == qpn
                && s.u64("wqe_counter") == r.u64("wqe_counter")),
            _ => None,
        };
        if let Some(to) = to {
            flows.push(Flow { from: i, to });
        }
        // Arrows found from the receiving end.
        match (r.target.as_str(), r.msg.as_str()) {
            ("softhca::wqe", "wqe") => {
                if let Some(from) = prev(i, &|s| is(s, "softhca::doorbell", "sq doorbell") && s.pid == pid && s.u64("qpn") == qpn) {
                    flows.push(Flow { from, to: i });
                }
                let (Some(start), n) = (psn, r.u64("npsn").unwrap_or(1)) else { continue };
                // Each request packet of the WQE: the first tx of each PSN after it.
                for k in 0..n.max(1) {
                    let p = (start + k) & PSN_MASK;
                    if let Some(t) = next(i, &|s| is(s, "softhca::tx", "tx") && s.pid == pid && s.u64("psn") == Some(p) && !is_ack_opcode(s)) {
                        flows.push(Flow { from: i, to: t });
                    }
                }
            }
            ("softhca::cqe", "cqe") => {
                let counter = r.u64("wqe_counter");
                let Some(w) = prev(i, &|s| is(s, "softhca::wqe", "wqe") && s.pid == pid && s.u64("qpn") == qpn && s.u64("index") == counter) else { continue };
                if let Some(a) = prev(i, &|s| is(s, "softhca::ack", "ack received") && s.pid == pid && s.u64("qpn") == qpn) {
                    if a > w {
                        flows.push(Flow { from: a, to: i });
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
