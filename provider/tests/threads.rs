//! Posting from many threads: one RC QP per thread, each connected to itself, every QP's
//! send completions on one CQ that the main thread polls, while the threads post RDMA
//! WRITEs as fast as the queue lets them (the "one QP per thread, shared CQ" pattern of
//! verbs programs). What it checks, with the device as the judge: every posted WRITE
//! completes exactly once, successfully, on the QP that posted it and in that QP's
//! posting order (the CQE's QPN and the wr_id's sequence), and every byte written landed
//! where the thread asked (each thread writes its own stripe of a shared MR).
//!
//! The Send/Sync rules this relies on (docs/provider.md): a `Qp` is `Send` (moved into the
//! thread that posts on it; posting takes `&mut Qp`, so one thread posts at a time), a
//! `Cq` is `Send` and polled through `&mut Cq` (a shared CQ has one poller, or a lock),
//! a `MemoryRegion` is `Sync` (SGEs and keys are read from any thread; the device writes
//! its bytes). QPs on one context share UAR pages; with dynamic UARs (softhca has them)
//! each QP rings a BlueFlame register of its own.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use provider::cqe::WcStatus;
use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, ConnectOptions, Context, Mtu, QpInit, QpType, Wc};

const THREADS: usize = 4;
const PER_THREAD: usize = 2000;
const STRIPE: usize = 8 * PER_THREAD;

fn assert_send<T: Send>() {}
fn assert_sync<T: Sync>() {}

#[test]
fn types_are_send_and_sync_as_documented() {
    assert_send::<provider::Qp>();
    assert_send::<provider::Cq>();
    assert_send::<provider::MemoryRegion>();
    assert_sync::<provider::MemoryRegion>();
    assert_send::<provider::Pd>();
}

#[test]
fn one_qp_per_thread_sharing_a_cq() {
    let ctx = Context::open(None).expect("embedded softhca");
    let pd = ctx.alloc_pd().unwrap();
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    // Sources at the front (each thread's 8-byte words), destinations behind them.
    let mut mr = pd.alloc_mr(2 * THREADS * STRIPE, access).unwrap();
    // Source word j of thread t holds (t << 32 | j) + 1: what must land at its destination.
    for t in 0..THREADS {
        for j in 0..PER_THREAD {
            let at = t * STRIPE + 8 * j;
            mr[at..at + 8].copy_from_slice(&(((t as u64) << 32 | j as u64) + 1).to_le_bytes());
        }
    }
    let mr = Arc::new(mr);
    let mut cq = ctx.create_cq(1024, None).unwrap();
    let gid = ctx.default_gid(1).unwrap();
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qps = Vec::new();
    for _ in 0..THREADS {
        let qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None }).unwrap();
        qp.to_init(1, access).unwrap();
        qp.connect(&Remote { qpn: qp.qpn(), psn: 0, gid: gid.raw() }, &ConnectOptions { mtu: Mtu::M1024, ..Default::default() }).unwrap();
        qps.push(qp);
    }
    let base = mr.addr();
    let qpn_of: Vec<u32> = qps.iter().map(|q| q.qpn()).collect();
    // Completions the poller has seen per thread: a thread posts its next WRITE only
    // while fewer than 32 of its own are outstanding (the queue holds 64).
    let done: Arc<Vec<AtomicUsize>> = Arc::new((0..THREADS).map(|_| AtomicUsize::new(0)).collect());
    let mut handles = Vec::new();
    for (t, mut qp) in qps.into_iter().enumerate() {
        let (mr, done) = (Arc::clone(&mr), Arc::clone(&done));
        handles.push(std::thread::spawn(move || {
            let src = base + (t * STRIPE) as u64;
            let dst = base + ((THREADS + t) * STRIPE) as u64;
            for j in 0..PER_THREAD {
                while j - done[t].load(Ordering::Acquire) >= 32 {
                    std::thread::yield_now();
                }
                let sge = [Sge::new(src + 8 * j as u64, 8, mr.lkey())];
                let wr = SendWr::new(SendOp::RdmaWrite { raddr: dst + 8 * j as u64, rkey: mr.rkey() }, Payload::Sgl(&sge)).signaled();
                qp.post_send(((t as u64) << 32) | j as u64, &wr).unwrap();
            }
            qp // the QP outlives the poll below
        }));
    }
    let mut next = vec![0u64; THREADS];
    let mut wc = [Wc::default(); 32];
    let deadline = Instant::now() + common::WAIT;
    let mut total = 0;
    while total < THREADS * PER_THREAD {
        assert!(Instant::now() < deadline, "only {total} completions; per thread {next:?}");
        let n = cq.poll_wait(&mut wc, std::time::Duration::from_millis(100));
        for w in &wc[..n] {
            assert_eq!(w.status, WcStatus::Success, "{w:?}");
            let (t, j) = ((w.wr_id >> 32) as usize, w.wr_id & 0xffff_ffff);
            assert_eq!(w.qp_num, qpn_of[t], "the CQE names the QP that posted {w:?}");
            assert_eq!(j, next[t], "thread {t}'s completions in its posting order");
            next[t] += 1;
            done[t].fetch_add(1, Ordering::Release);
        }
        total += n;
    }
    let qps: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(next, vec![PER_THREAD as u64; THREADS]);
    let mut more = [Wc::default(); 4];
    assert_eq!(cq.poll(&mut more), 0, "no completion twice");
    // Every WRITE landed where its thread aimed it, with the word it named.
    for t in 0..THREADS {
        for j in 0..PER_THREAD {
            let at = (THREADS + t) * STRIPE + 8 * j;
            let got = u64::from_le_bytes(mr[at..at + 8].try_into().unwrap());
            assert_eq!(got, ((t as u64) << 32 | j as u64) + 1, "thread {t} write {j}");
        }
    }
    drop(qps);
}
