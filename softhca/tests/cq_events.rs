//! Completion events as a ConnectX delivers them: every arm store seen, whatever the
//! number of CQs arming through one UAR register and of threads storing, and the arm
//! rules software relies on (see `softhca/src/device/events.rs`).
//!
//! Expected values come from outside softhca: one event per arm that a CQE satisfies
//! (`ibv_req_notify_cq(3)`), and perftest's `-e` loops (re-arm after taking an event,
//! before polling the CQE that caused it, then poll once), which run on ConnectX
//! adapters and need that re-arm not to fire again for the same CQE.
//!
//! Addresses: 127.1.7.x hints (see common::bind_free).

mod common;

use std::sync::Barrier;
use std::time::Duration;

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp, SendWr};

/// How long an expected event may take (a lost one fails the test after this).
const EVENT_WAIT: Duration = Duration::from_secs(20);

fn write_wr<'a>(sge: &'a [provider::wqe::Sge], raddr: u64, rkey: u32) -> SendWr<'a> {
    SendWr::new(SendOp::RdmaWrite { raddr, rkey }, Payload::Sgl(sge))
}

/// Waits until `h`'s device has taken `n` arm commands in all (each arm store is taken
/// once: see `device/events.rs`).
fn arms_taken(h: &Host, n: u64) {
    wait_until("the arm command taken", || h.hca.device().counters().cq_arms >= n);
    assert_eq!(h.hca.device().counters().cq_arms, n, "more arm commands than arm stores");
}

/// N CQs of one context, all arming through the context's one CQ-arm UAR page, armed
/// back to back by several threads at once, M times: exactly N x M events, each CQ's
/// handle once per round.
fn many_cqs_one_uar_armed_from_threads() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 3;
    const N: usize = THREADS * PER_THREAD;
    const M: usize = 40;
    let a = Host::new([127, 1, 7, 1]);
    let b = Host::new([127, 1, 7, 2]);
    let o = Opts::default();
    let ch = a.ctx.create_comp_channel().unwrap();
    // a's QPs send; their send CQs are the armed ones.
    let mut ends: Vec<(End, End)> = (0..N)
        .map(|_| {
            let scq = a.ctx.create_cq(o.cq, Some(&ch)).expect("cq with channel");
            let rcq = a.ctx.create_cq(o.cq, None).expect("cq");
            let qp = a.pd.create_qp(&provider::qp::QpInit {
                send_cq: &scq,
                recv_cq: &rcq,
                cap: o.cap,
                qp_type: provider::qp::QpType::Rc,
                sq_sig_all: true,
                send_ops: None,
            }).expect("qp");
            let ea = End { qp, scq, rcq };
            let eb = End::new(&b, &o);
            ea.connect(&o, eb.qp.qpn(), b.gid(), 10, 20);
            eb.connect(&o, ea.qp.qpn(), a.gid(), 20, 10);
            (ea, eb)
        })
        .collect();
    // One UAR register for all of them: the condition the test is about.
    let pages: std::collections::BTreeSet<u32> =
        ends.iter().map(|(e, _)| a.hca.cq(e.scq.cqn()).expect("cq in the table").uar_page).collect();
    assert_eq!(pages.len(), 1, "the CQs arm through one UAR page");
    let src = a.mem(64, all_access());
    let dst = b.mem(64 * N, all_access());
    let handles: Vec<u64> = ends.iter().map(|(e, _)| e.scq.user_handle()).collect();
    let events_before = a.hca.device().counters().comp_events;
    // A lost event is reported by the main thread after the round's barrier, so the
    // workers stop instead of waiting for a round that never comes.
    let failed = std::sync::atomic::AtomicBool::new(false);
    let mut failure = None;
    let armed = Barrier::new(THREADS + 1);
    let round_done = Barrier::new(THREADS + 1);
    std::thread::scope(|s| {
        for (t, chunk) in ends.chunks_mut(PER_THREAD).enumerate() {
            let (armed, round_done, failed) = (&armed, &round_done, &failed);
            let (sge, daddr, rkey) = (src.sge(0, 8), dst.addr(), dst.mr.rkey());
            s.spawn(move || {
                for round in 0..M {
                    // Back to back: every CQ of this thread, while the others do the same.
                    for (e, _) in chunk.iter_mut() {
                        e.scq.req_notify(false);
                    }
                    armed.wait();
                    for (i, (e, _)) in chunk.iter_mut().enumerate() {
                        let k = t * PER_THREAD + i;
                        let sge = [sge];
                        e.qp.post_send((round * N + k) as u64, &write_wr(&sge, daddr + 64 * k as u64, rkey)).unwrap();
                    }
                    for (e, _) in chunk.iter_mut() {
                        let wc = wait(&mut e.scq, 1);
                        assert_eq!(wc[0].status, WcStatus::Success);
                    }
                    // The main thread has taken this round's N events: acknowledge ours
                    // (the next arm carries the next sequence number).
                    round_done.wait();
                    if failed.load(std::sync::atomic::Ordering::SeqCst) {
                        return;
                    }
                    for (e, _) in chunk.iter_mut() {
                        e.scq.ack_event();
                    }
                }
            });
        }
        for round in 0..M {
            armed.wait();
            let mut seen = vec![0usize; N];
            for _ in 0..N {
                match ch.get_event(Some(EVENT_WAIT)) {
                    Ok(h) => match handles.iter().position(|&x| x == h) {
                        Some(k) => seen[k] += 1,
                        None => failure = Some(format!("round {round}: event for an unknown CQ handle {h:#x}")),
                    },
                    Err(e) => failure = Some(format!("round {round}: an event was lost ({e:?}); seen per CQ: {seen:?}")),
                }
                if failure.is_some() {
                    break;
                }
            }
            if failure.is_none() && !seen.iter().all(|&n| n == 1) {
                failure = Some(format!("round {round}: one event per CQ, got {seen:?}"));
            }
            failed.store(failure.is_some(), std::sync::atomic::Ordering::SeqCst);
            round_done.wait();
            if failure.is_some() {
                break;
            }
        }
    });
    if let Some(f) = failure {
        panic!("{f}");
    }
    // Every arm store taken once; nothing is armed now and no CQE will come: the
    // device's event count is final.
    arms_taken(&a, (N * M) as u64);
    assert_eq!(a.hca.device().counters().comp_events - events_before, (N * M) as u64, "exactly N x M events");
    drop(ends);
}

/// perftest's `-e` pattern: an event fires, the program takes it and re-arms before it
/// polls the CQE that fired (the arm word's consumer index is still before that CQE).
/// The re-arm must not fire again for it; the next CQE fires. A CQE that arrived while
/// the CQ was disarmed, at or after the armed consumer index, fires at once on the arm
/// (what `ib_req_notify_cq(IB_CQ_REPORT_MISSED_EVENTS)` on mlx5 relies on). An arm
/// command carrying the sequence number of an event already delivered is stale.
fn rearm_before_poll_fires_only_for_new_cqes() {
    let a = Host::new([127, 1, 7, 3]);
    let b = Host::new([127, 1, 7, 4]);
    let o = Opts::default();
    let ch = a.ctx.create_comp_channel().unwrap();
    let scq = a.ctx.create_cq(o.cq, Some(&ch)).unwrap();
    let rcq = a.ctx.create_cq(o.cq, None).unwrap();
    let qp = a.pd.create_qp(&provider::qp::QpInit {
        send_cq: &scq, recv_cq: &rcq, cap: o.cap, qp_type: provider::qp::QpType::Rc, sq_sig_all: true, send_ops: None,
    }).unwrap();
    let mut ea = End { qp, scq, rcq };
    let eb = End::new(&b, &o);
    ea.connect(&o, eb.qp.qpn(), b.gid(), 1, 2);
    eb.connect(&o, ea.qp.qpn(), a.gid(), 2, 1);
    let src = a.mem(64, all_access());
    let dst = b.mem(64, all_access());
    let sge = [src.sge(0, 8)];
    let events = |h: &Host| h.hca.device().counters().comp_events;
    let cqes = |h: &Host| h.hca.device().counters().cqes;
    let base = events(&a);

    // Arm, one WRITE: one event.
    ea.scq.req_notify(false);
    ea.qp.post_send(1, &write_wr(&sge, dst.addr(), dst.mr.rkey())).unwrap();
    assert_eq!(ch.get_event(Some(EVENT_WAIT)).unwrap(), ea.scq.user_handle());
    ea.scq.ack_event();
    // Re-arm before polling: the CQE at the armed index is covered by the event taken.
    ea.scq.req_notify(false);
    arms_taken(&a, 2);
    assert_eq!(events(&a) - base, 1, "a re-arm fired again for the CQE that caused the last event");
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    // The next CQE fires.
    ea.qp.post_send(2, &write_wr(&sge, dst.addr(), dst.mr.rkey())).unwrap();
    assert_eq!(ch.get_event(Some(EVENT_WAIT)).unwrap(), ea.scq.user_handle());
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(events(&a) - base, 2);
    // Not acknowledged yet (same sequence number): an arm now is stale, and a new CQE
    // gives no event.
    ea.scq.req_notify(false);
    arms_taken(&a, 3);
    assert_eq!(a.hca.device().counters().cq_arms_stale, 1);
    let before = cqes(&a);
    ea.qp.post_send(3, &write_wr(&sge, dst.addr(), dst.mr.rkey())).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(cqes(&a), before + 1);
    assert_eq!(events(&a) - base, 2, "an arm with the last event's sequence number fired");
    // Acknowledged: a CQE written while disarmed (unpolled, at the consumer index) fires
    // at once when the CQ is armed.
    ea.scq.ack_event();
    let before = cqes(&a);
    ea.qp.post_send(4, &write_wr(&sge, dst.addr(), dst.mr.rkey())).unwrap();
    wait_until("the CQE written", || cqes(&a) == before + 1);
    ea.scq.req_notify(false);
    assert_eq!(ch.get_event(Some(EVENT_WAIT)).unwrap(), ea.scq.user_handle());
    ea.scq.ack_event();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(events(&a) - base, 3);
    drop(eb);
}

// Every test above runs on both wires: RoCEv2 over UDP and the same-host path.
on_both_wires!(
    many_cqs_one_uar_armed_from_threads,
    rearm_before_poll_fires_only_for_new_cqes,
);
