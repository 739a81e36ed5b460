//! Shared receive queues on the embedded softhca: two RC QPs receive from one SRQ while
//! a sender thread drives their peers; every receive CQE must name a receive that was
//! posted to the SRQ and not yet completed, its buffer must hold the message the peer
//! sent, and the free list must survive many laps. Also the SRQ verbs' other halves:
//! the limit event (IBV_EVENT_SRQ_LIMIT_REACHED, once, then disarmed), QUERY_SRQ, and
//! the refusals of `ibv_post_srq_recv` with libmlx5's errnos.
//!
//! Expected values come from the verbs semantics and from what stock libmlx5 reports:
//! for `max_wr` 16 and one SGE libmlx5 grants 31 receives (`roundup_pow2(17) - 1`) in a
//! 64-WQE buffer (wait queue included), so the kernel reports `max_wr` 63 from QUERY_SRQ
//! (mlx5_ib: WQE count - 1); a full SRQ is ENOMEM and too many SGEs EINVAL.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use provider::qp::attr::Remote;
use provider::qp::{PostErrorKind, QpCap};
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, Context, Cq, Error, Pd, Qp, QpInit, QpType, Srq, SrqAttr, Wc};

const WAIT: Duration = Duration::from_secs(30);
const MSG: usize = 64;

fn cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
}

fn connect(ctx: &Context, a: &Qp, b: &Qp) {
    let gid = ctx.default_gid(1).unwrap();
    for (q, peer) in [(a, b.qpn()), (b, a.qpn())] {
        q.to_init(1, Access::LOCAL_WRITE).unwrap();
        q.to_rtr(&Remote { qpn: peer, psn: 0, gid: gid.raw() }, 1, gid.gid_index as u8, 3, 1).unwrap();
        q.to_rts(0, 14, 7, 7, 1).unwrap();
    }
}

fn poll_n(cq: &mut Cq, n: usize) -> Vec<Wc> {
    let mut out = Vec::new();
    let mut wc = [Wc::default(); 16];
    while out.len() < n {
        let want = (n - out.len()).min(wc.len());
        let got = cq.poll_wait(&mut wc[..want], WAIT);
        assert!(got > 0, "only {} of {n} completions arrived", out.len());
        out.extend_from_slice(&wc[..got]);
    }
    out
}

struct Setup {
    ctx: Arc<Context>,
    pd: Pd,
    srq: Srq,
    rcq: Cq,
    receivers: Vec<Qp>,
    senders: Vec<Qp>,
    scq: Cq,
}

fn setup(nqp: usize, max_wr: u32) -> Setup {
    let ctx = Context::open(None).expect("embedded softhca");
    let pd = ctx.alloc_pd().unwrap();
    let srq = pd.create_srq(&SrqAttr { max_wr, max_sge: 1, srq_limit: 0 }).unwrap();
    let rcq = ctx.create_cq(256, None).unwrap();
    let scq = ctx.create_cq(256, None).unwrap();
    let mut receivers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..nqp {
        let init = QpInit { send_cq: &rcq, recv_cq: &rcq, cap: cap(), qp_type: QpType::Rc, sq_sig_all: false, send_ops: None };
        let r = pd.create_qp_with_srq(&init, &srq).unwrap();
        assert_eq!(r.geometry().rq_wqe_cnt, 0, "a QP on an SRQ has no RQ");
        let s = pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &scq, ..init }).unwrap();
        connect(&ctx, &r, &s);
        receivers.push(r);
        senders.push(s);
    }
    Setup { ctx, pd, srq, rcq, receivers, senders, scq }
}

/// Message `k` of sender `q`: its bytes say who sent it and which it is.
fn message(q: usize, k: u32) -> [u8; MSG] {
    let mut m = [0u8; MSG];
    for (i, b) in m.iter_mut().enumerate() {
        *b = (q as u8).wrapping_mul(101).wrapping_add(k as u8).wrapping_add(i as u8);
    }
    m[0] = q as u8;
    m[1..5].copy_from_slice(&k.to_le_bytes());
    m
}

#[test]
fn two_qps_share_one_srq_over_many_laps() {
    const PER_QP: u32 = 200;
    let Setup { ctx, pd, srq, mut rcq, receivers, senders, mut scq } = setup(2, 16);
    assert_eq!(srq.max_wr(), 31);
    assert_eq!(srq.max_sge(), 1);
    let slots = srq.max_wr() as usize;
    let rmr = pd.alloc_mr(slots * MSG, Access::LOCAL_WRITE).unwrap();
    let slot_sge = |i: usize| rmr.sge(i * MSG..(i + 1) * MSG);
    // wr_id = 1000 + slot: which buffer the receive scatters into.
    for i in 0..slots {
        srq.post_recv(1000 + i as u64, &[slot_sge(i)]).unwrap();
    }
    assert_eq!(srq.doorbell_record(), slots as u32);

    // The sender thread: each sender QP sends PER_QP messages, paced by a credit the
    // receiver hands back (so the SRQ never runs dry and no RNR retry is needed).
    let (credit_tx, credit_rx) = std::sync::mpsc::channel::<()>();
    let sender = std::thread::spawn(move || {
        let mut senders = senders;
        let mr = pd.alloc_mr(2 * PER_QP as usize * MSG, Access::LOCAL_WRITE).unwrap();
        let mut inflight = 0usize;
        let mut credits = slots;
        for k in 0..PER_QP {
            for (q, s) in senders.iter_mut().enumerate() {
                while credits == 0 {
                    credit_rx.recv().unwrap();
                    credits += 1;
                }
                while let Ok(()) = credit_rx.try_recv() {
                    credits += 1;
                }
                credits -= 1;
                let off = (k as usize * 2 + q) * MSG;
                // SAFETY: the range is inside the MR's buffer, which no WQE reads yet.
                unsafe { std::ptr::copy_nonoverlapping(message(q, k).as_ptr(), mr.ptr().add(off), MSG) };
                let sgl = [mr.sge(off..off + MSG)];
                while inflight >= 8 {
                    for w in poll_n(&mut scq, 1) {
                        assert_eq!(w.status, provider::cqe::WcStatus::Success, "{w:?}");
                        inflight -= 1;
                    }
                }
                s.post_send(k as u64, &SendWr::new(SendOp::Send, Payload::Sgl(&sgl)).signaled()).unwrap();
                inflight += 1;
            }
        }
        for w in poll_n(&mut scq, inflight) {
            assert_eq!(w.status, provider::cqe::WcStatus::Success, "{w:?}");
        }
        senders
    });

    let qpn_index: HashMap<u32, usize> = receivers.iter().enumerate().map(|(i, r)| (r.qpn(), i)).collect();
    let mut posted: Vec<bool> = vec![true; slots];
    let mut next_k = [0u32; 2];
    for _ in 0..2 * PER_QP {
        let w = poll_n(&mut rcq, 1)[0];
        assert_eq!(w.status, provider::cqe::WcStatus::Success, "{w:?}");
        assert_eq!(w.opcode, provider::cqe::WcOpcode::Recv);
        assert_eq!(w.byte_len, MSG as u32);
        let slot = (w.wr_id - 1000) as usize;
        assert!(slot < slots && posted[slot], "wr_id {} was not an outstanding SRQ receive", w.wr_id);
        posted[slot] = false;
        let q = qpn_index[&w.qp_num];
        // SAFETY: the slot's receive completed; nothing writes it until it is reposted.
        let got = unsafe { std::slice::from_raw_parts(rmr.ptr().add(slot * MSG), MSG) };
        assert_eq!(got, message(q, next_k[q]), "QP {q}'s message {} (RC keeps each QP's order)", next_k[q]);
        next_k[q] += 1;
        srq.post_recv(w.wr_id, &[slot_sge(slot)]).unwrap();
        posted[slot] = true;
        let _ = credit_tx.send(());
    }
    assert_eq!(next_k, [PER_QP, PER_QP]);
    assert_eq!(srq.outstanding(), slots as u32);
    let senders = sender.join().unwrap();
    drop((senders, receivers, ctx));
}

#[test]
fn limit_event_fires_once_then_disarms() {
    let Setup { ctx, pd, srq, mut rcq, receivers, mut senders, mut scq } = setup(1, 16);
    let mr = pd.alloc_mr(16 * MSG, Access::LOCAL_WRITE).unwrap();
    for i in 0..8 {
        srq.post_recv(i, &[mr.sge(i as usize * MSG..(i as usize + 1) * MSG)]).unwrap();
    }
    let q = srq.query().unwrap();
    assert_eq!((q.max_wr, q.max_sge, q.srq_limit), (63, 1, 0), "QUERY_SRQ before arming");
    srq.arm_limit(4).unwrap();
    assert_eq!(srq.query().unwrap().srq_limit, 4, "the armed limit reads back");
    let send = |senders: &mut Vec<Qp>, scq: &mut Cq, n: u64| {
        let sgl = [mr.sge(15 * MSG..16 * MSG)];
        for k in 0..n {
            senders[0].post_send(k, &SendWr::new(SendOp::Send, Payload::Sgl(&sgl)).signaled()).unwrap();
            poll_n(scq, 1);
        }
    };
    // 8 posted; taking 4 leaves 4 (not fewer than 4): no event yet.
    send(&mut senders, &mut scq, 4);
    let ids: Vec<u64> = poll_n(&mut rcq, 4).iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [0, 1, 2, 3], "the device takes SRQ WQEs in the order posted");
    assert!(ctx.get_async_event(Some(Duration::from_millis(200))).is_err(), "no event with 4 left");
    // The fifth leaves 3 < 4: one SRQ_LIMIT_REACHED naming the SRQ.
    send(&mut senders, &mut scq, 1);
    assert_eq!(poll_n(&mut rcq, 1)[0].wr_id, 4);
    let ev = ctx.get_async_event(Some(WAIT)).unwrap();
    assert_eq!((ev.element, ev.event_type), (srq.user_handle(), uverbs::sys::verbs::event::SRQ_LIMIT_REACHED));
    assert_eq!(srq.query().unwrap().srq_limit, 0, "the limit disarms when it fires");
    send(&mut senders, &mut scq, 2);
    poll_n(&mut rcq, 2);
    assert!(ctx.get_async_event(Some(Duration::from_millis(200))).is_err(), "fires once");
    drop((receivers, senders));
}

#[test]
fn post_srq_recv_refusals() {
    let s = setup(1, 16);
    let mr = s.pd.alloc_mr(4096, Access::LOCAL_WRITE).unwrap();
    let sge = [mr.sge(0..64)];
    let two = [mr.sge(0..32), mr.sge(32..64)];
    let e = s.srq.post_recv(7, &two).unwrap_err();
    match e {
        Error::Post(p) => {
            assert_eq!((p.index, p.kind), (0, PostErrorKind::TooManySges { sges: 2, max: 1 }));
            assert_eq!(p.errno(), Errno::EINVAL);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.srq.doorbell_record(), 0, "nothing posted");
    // 31 fit; a list of 33 posts 31 and names the 32nd.
    let list: Vec<(u64, &[Sge])> = (0..33).map(|k| (k, &sge[..])).collect();
    match s.srq.post_recv_list(&list).unwrap_err() {
        Error::Post(p) => {
            assert_eq!((p.index, p.kind), (31, PostErrorKind::RecvQueueFull { capacity: 31 }));
            assert_eq!(p.errno(), Errno::ENOMEM);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(s.srq.doorbell_record(), 31);
    let _ = s.ctx;
}
