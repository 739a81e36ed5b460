//! UC QPs between two softhca instances through doorbell's provider: SEND and RDMA WRITE
//! arrive byte for byte; a lost packet loses its whole message and nothing else (IBTA's
//! UC responder: no acknowledgement, no retransmission, the next first/only packet starts
//! over); the requester completes every WQE successfully whatever the wire lost; UC has no
//! READ (the provider refuses it; posted raw, LOCAL_QP_OP_ERR, as for any opcode the
//! transport lacks).
//!
//! Addresses: 127.1.8.x hints (see common::bind_free).

mod common;

use common::*;
use provider::cqe::WcStatus;
use provider::qp::{Ah, PostErrorKind, QpAttr, QpInit, QpState, QpType};
use provider::wqe::{write_small_send_wqe, Payload, SendOp, SendWr};
use softhca::device::FaultSpec;

/// A UC QP of `h` moved to RTS towards `remote` (QPN, GID): UC's RTR takes the path and
/// the receive PSN only, RTS the send PSN only (the kernel refuses RC's attributes).
fn uc_end(h: &Host, o: &Opts) -> End {
    let scq = h.ctx.create_cq(o.cq, None).unwrap();
    let rcq = h.ctx.create_cq(o.cq, None).unwrap();
    let qp = h.pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &rcq, cap: o.cap, qp_type: QpType::Uc, sq_sig_all: true, send_ops: None })
        .expect("create UC qp");
    End { qp, scq, rcq }
}

fn uc_connect(e: &End, o: &Opts, remote_qpn: u32, remote_gid: [u8; 16], my_psn: u32, their_psn: u32) {
    e.qp.to_init(1, o.access).expect("INIT");
    e.qp.modify(&QpAttr {
        state: Some(QpState::Rtr),
        ah: Some(Ah { dgid: remote_gid, sgid_index: softhca::config::IP_GID_INDEX, hop_limit: 64, port: 1, ..Default::default() }),
        path_mtu: Some(o.mtu),
        dest_qpn: Some(remote_qpn),
        rq_psn: Some(their_psn),
        ..Default::default()
    }).expect("UC RTR");
    e.qp.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(my_psn), ..Default::default() }).expect("UC RTS");
}

fn pair(a: &Host, b: &Host, o: &Opts) -> (End, End) {
    let (ea, eb) = (uc_end(a, o), uc_end(b, o));
    uc_connect(&ea, o, eb.qp.qpn(), b.gid(), 0xff_fff0, 7);
    uc_connect(&eb, o, ea.qp.qpn(), a.gid(), 7, 0xff_fff0);
    (ea, eb)
}

/// The pattern of message `i` (so a message made of another's packets shows): each
/// 4-byte word is `i` and the word's index.
fn pattern(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| ((i as u32) << 16 | (k / 4) as u32).to_le_bytes()[k % 4]).collect()
}

fn send_and_write_arrive_intact() {
    let a = Host::new([127, 1, 8, 1]);
    let b = Host::new([127, 1, 8, 2]);
    // MTU 1024 (`mtu: 3`): a 5000-byte message is five packets, and the PSNs wrap.
    let o = Opts { mtu: 3, ..Default::default() };
    let (mut ea, mut eb) = pair(&a, &b, &o);
    let src = a.mem(1 << 16, all_access());
    let dst = b.mem(1 << 16, all_access());
    let sizes = [0usize, 1, 1024, 1025, 5000];
    for (i, &n) in sizes.iter().enumerate() {
        src.buf.write(0, &pattern(i, n));
        eb.qp.post_recv(i as u64, &[dst.sge(0, 8192)]).unwrap();
        ea.qp.post_send(i as u64, &SendWr::new(SendOp::Send, Payload::Sgl(&[src.sge(0, n)]))).unwrap();
        let s = wait(&mut ea.scq, 1);
        assert_eq!((s[0].wr_id, s[0].status), (i as u64, WcStatus::Success));
        let r = wait(&mut eb.rcq, 1);
        assert_eq!((r[0].wr_id, r[0].status, r[0].byte_len as usize), (i as u64, WcStatus::Success, n));
        assert_eq!(&dst.buf.read()[..n], &pattern(i, n)[..], "SEND of {n} bytes");
    }
    // RDMA WRITE: no receive WQE consumed; WRITE with immediate consumes one.
    let n = 4000;
    src.buf.write(0, &pattern(9, n));
    let sge = [src.sge(0, n)];
    let w = SendWr::new(SendOp::RdmaWrite { raddr: dst.addr() + 100, rkey: dst.mr.rkey() }, Payload::Sgl(&sge));
    ea.qp.post_send(20, &w).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    wait_until("the WRITE placed", || dst.buf.read()[100..100 + n] == pattern(9, n)[..]);
    eb.qp.post_recv(21, &[dst.sge(0, 16)]).unwrap();
    let sge = [src.sge(0, 2048)];
    let w = SendWr::new(SendOp::RdmaWriteImm { raddr: dst.addr() + 8000, rkey: dst.mr.rkey(), imm: 0x1234_5678 }, Payload::Sgl(&sge));
    ea.qp.post_send(22, &w).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let r = wait(&mut eb.rcq, 1);
    assert_eq!((r[0].wr_id, r[0].status, r[0].byte_len, r[0].imm), (21, WcStatus::Success, 2048, 0x1234_5678));
    assert_eq!(&dst.buf.read()[8000..8000 + 2048], &pattern(9, 2048)[..]);
    // No acknowledgement of any kind went back.
    let cb = b.hca.device().counters();
    assert_eq!((cb.acks_sent, cb.seq_naks_sent, cb.err_naks_sent, cb.rnr_naks_sent), (0, 0, 0, 0));
    assert_eq!(a.hca.device().counters().retransmits, 0);
}

/// A SEND with no receive WQE is dropped silently (no RNR on UC) and the QP carries on;
/// a READ on a UC QP completes with LOCAL_QP_OP_ERR.
fn no_receive_wqe_drops_and_read_is_refused() {
    let a = Host::new([127, 1, 8, 3]);
    let b = Host::new([127, 1, 8, 4]);
    let o = Opts::default();
    let (mut ea, mut eb) = pair(&a, &b, &o);
    let src = a.mem(4096, all_access());
    let dst = b.mem(4096, all_access());
    ea.qp.post_send(1, &SendWr::new(SendOp::Send, Payload::Sgl(&[src.sge(0, 64)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success, "UC completes what it sent");
    wait_until("the SEND dropped", || b.hca.device().counters().uc_dropped == 1);
    eb.qp.post_recv(2, &[dst.sge(0, 4096)]).unwrap();
    src.buf.write(0, &pattern(3, 64));
    ea.qp.post_send(3, &SendWr::new(SendOp::Send, Payload::Sgl(&[src.sge(0, 64)]))).unwrap();
    wait(&mut ea.scq, 1);
    let r = wait(&mut eb.rcq, 1);
    assert_eq!((r[0].wr_id, r[0].status, r[0].byte_len), (2, WcStatus::Success, 64));
    assert_eq!(&dst.buf.read()[..64], &pattern(3, 64)[..]);
    assert_eq!(b.hca.device().counters().rnr_naks_sent, 0);
    let sge = [src.sge(0, 8)];
    let rd = SendWr::new(SendOp::RdmaRead { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&sge));
    // doorbell's provider refuses it before the device sees it; libmlx5 writes the WQE
    // anyway, so the device's answer is checked with the same bytes posted raw.
    let refused = ea.qp.post_send(4, &rd).unwrap_err();
    assert!(matches!(refused.post_error().map(|e| e.kind), Some(PostErrorKind::BadOpcode { .. })), "{refused}");
    let mut wqe = [0u8; 64];
    write_small_send_wqe(&mut wqe, ea.qp.sq_producer_index(), ea.qp.qpn(), &rd).expect("a one-WQEBB READ");
    ea.qp.post_send_raw(4, &[wqe]).unwrap();
    let c = wait(&mut ea.scq, 1);
    assert_eq!((c[0].wr_id, c[0].status), (4, WcStatus::LocQpOpErr));
}

/// 1% of a's packets dropped (seeded): every SEND completes at a, and b receives, in
/// order, exactly the messages none of whose packets was lost, each intact.
#[test]
fn lost_packets_lose_only_their_messages() {
    const K: usize = 400;
    const LEN: usize = 4096;
    let a = Host::at([127, 1, 8, 5], |c| c.fault = Some(FaultSpec::new(0.01, 0.0, 0.0, 14)));
    let b = Host::new([127, 1, 8, 6]);
    let mut o = Opts { mtu: 3, cq: 1024, ..Default::default() };
    o.cap.max_recv_wr = K as u32;
    let (mut ea, mut eb) = pair(&a, &b, &o);
    let src = a.mem(K * LEN, all_access());
    let dst = b.mem(K * LEN, all_access());
    for i in 0..K {
        src.buf.write(i * LEN, &pattern(i, LEN));
    }
    // One receive WQE per message; a dropped message leaves its WQE to the next one.
    for i in 0..K {
        eb.qp.post_recv(i as u64, &[dst.sge(i * LEN, LEN)]).unwrap();
    }
    // A few at a time, so the send queue never overflows.
    let mut done = 0;
    for chunk in (0..K).collect::<Vec<_>>().chunks(16) {
        for &i in chunk {
            // The pattern tells which message arrived: send i's bytes from slot i.
            ea.qp.post_send(i as u64, &SendWr::new(SendOp::Send, Payload::Sgl(&[src.sge(i * LEN, LEN)]))).unwrap();
        }
        for w in wait(&mut ea.scq, chunk.len()) {
            assert_eq!(w.status, WcStatus::Success);
            done += 1;
        }
    }
    assert_eq!(done, K);
    until_idle(&b);
    let ca = a.hca.device().counters();
    let cb = b.hca.device().counters();
    // b is idle: every receive CQE it will write is there.
    let mut got = Vec::new();
    let mut wcs = [provider::cq::poll::Wc::default(); 16];
    loop {
        let k = eb.rcq.poll(&mut wcs);
        if k == 0 {
            break;
        }
        got.extend_from_slice(&wcs[..k]);
    }
    assert!(ca.fault_dropped > 0, "the seed drops packets");
    let lost = K - got.len();
    assert!(lost >= 1 && lost as u64 <= ca.fault_dropped, "{lost} messages lost for {} packets dropped", ca.fault_dropped);
    assert!(cb.uc_dropped >= lost as u64);
    let mem = dst.buf.read();
    let mut last = None;
    for (j, w) in got.iter().enumerate() {
        assert_eq!((w.status, w.byte_len as usize, w.wr_id), (WcStatus::Success, LEN, j as u64), "receive WQEs in order");
        // Which message landed in receive buffer j: it must be one whole message, and
        // later than the one before.
        let slot = &mem[j * LEN..(j + 1) * LEN];
        let i = (0..K).find(|&i| slot == &pattern(i, LEN)[..]).unwrap_or_else(|| panic!("buffer {j} holds no whole message"));
        assert!(last.is_none_or(|l| i > l), "messages out of order");
        last = Some(i);
    }
    assert_eq!((cb.acks_sent, cb.seq_naks_sent), (0, 0));
}

// Every test above runs on both wires: RoCEv2 over UDP and the same-host path.
on_both_wires!(
    send_and_write_arrive_intact,
    no_receive_wqe_drops_and_read_is_refused,
);
