//! Every refusal of a post verb on the embedded softhca: the requests before the
//! refused one are handed to the device (the doorbell record covers exactly them, and
//! they execute and complete), the refused one and those after it are not, and the
//! error names the refused request's index and the reason, never a device errno.
//!
//! Each test uses a QP connected to itself. After the error it posts one more signaled
//! "marker" request: the completions that arrive up to and including the marker must be
//! exactly the posted requests, in order, then the marker; a request the provider
//! wrongly wrote (the refused one or a later one) would complete before the marker.
//!
//! The expected errnos are libmlx5's (`_mlx5_post_send`, `mlx5_post_recv`): ENOMEM for a
//! full queue, EINVAL for a malformed request.

mod common;

use common::{Loop, BUF};
use nix::errno::Errno;
use provider::opcode::WqeOpcode;
use provider::qp::{PostError, PostErrorKind, QpCap};
use provider::wqe::{DatagramSeg, Payload, SendOp, SendWr, Sge, UdDest};
use provider::{Error, QpType};

fn post_error(r: provider::Result<()>) -> PostError {
    match r {
        Err(Error::Post(p)) => {
            assert_eq!(Error::Post(p).errno(), p.errno());
            p
        }
        other => panic!("expected a post error, got {other:?}"),
    }
}

fn rc_cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 32 }
}

#[test]
fn send_queue_full_posts_what_fits() {
    let mut l = Loop::new(QpType::Rc, rc_cap());
    let cnt = l.qp.geometry().sq_wqe_cnt as usize;
    let sge = [l.sge(0, 8)];
    // One more one-WQEBB request than the ring has WQEBBs, nothing completed meanwhile
    // (the doorbell rings once, at the end of the list).
    let wrs: Vec<(u64, SendWr)> = (0..=cnt as u64).map(|k| (k, l.write(&sge, k))).collect();
    let e = post_error(l.qp.post_send_list(&wrs));
    assert_eq!(e.index, cnt);
    assert_eq!(e.kind, PostErrorKind::SendQueueFull { need: 1, free: 0 });
    assert_eq!(e.errno(), Errno::ENOMEM);
    assert!(e.kind.is_queue_full());
    assert_eq!(l.qp.doorbell_record()[1], cnt as u32, "the record covers the WQEs that fit");
    // The single-request verb on the still-full ring: the fast lane declines, the
    // generic path reports the same refusal, for index 0.
    let e = post_error(l.qp.post_send(99, &wrs[0].1));
    assert_eq!((e.index, e.kind), (0, PostErrorKind::SendQueueFull { need: 1, free: 0 }));
    assert_eq!(l.qp.doorbell_record()[1], cnt as u32);
    let ids: Vec<u64> = (0..cnt as u64).collect();
    assert_eq!(l.completions(cnt), ids);
    l.expect_completed(&[], 0);
}

#[test]
fn too_many_sges() {
    let mut l = Loop::new(QpType::Rc, rc_cap());
    let max = l.qp.cap().max_send_sge;
    let sge = [l.sge(0, 8)];
    let many: Vec<Sge> = (0..=max as u64).map(|k| l.sge(8 * k, 8)).collect();
    let over = SendWr::new(SendOp::Send, Payload::Sgl(&many)).signaled();
    let wrs = [(0, l.write(&sge, 0)), (1, l.write(&sge, 1)), (2, over), (3, l.write(&sge, 3))];
    let e = post_error(l.qp.post_send_list(&wrs));
    assert_eq!((e.index, e.kind), (2, PostErrorKind::TooManySges { sges: max as usize + 1, max }));
    assert_eq!(e.errno(), Errno::EINVAL);
    assert_eq!(l.qp.doorbell_record()[1], 2);
    l.expect_completed(&[0, 1], 2);
}

#[test]
fn inline_too_big() {
    let mut l = Loop::new(QpType::Rc, rc_cap());
    let max = l.qp.cap().max_inline_data;
    let big = vec![0x5a; max as usize + 1];
    let chunks: [&[u8]; 2] = [&big[..1], &big[1..]];
    let sge = [l.sge(0, 8)];
    let over = SendWr::new(SendOp::RdmaWrite { raddr: l.base + 4096, rkey: l.mr.rkey() }, Payload::Inline(&chunks)).signaled();
    let wrs = [(0, l.write(&sge, 0)), (1, over)];
    let e = post_error(l.qp.post_send_list(&wrs));
    assert_eq!((e.index, e.kind), (1, PostErrorKind::InlineTooBig { len: max as usize + 1, max }));
    assert_eq!(l.qp.doorbell_record()[1], 1);
    l.expect_completed(&[0], 1);
    // The single verb (whose fast lane refuses the size too) reports the same.
    let e = post_error(l.qp.post_send(7, &over));
    assert_eq!((e.index, e.kind), (0, PostErrorKind::InlineTooBig { len: max as usize + 1, max }));
}

#[test]
fn inline_on_read() {
    let mut l = Loop::new(QpType::Rc, rc_cap());
    let data = [1u8; 8];
    let chunks: [&[u8]; 1] = [&data];
    let sge = [l.sge(0, 8)];
    let read = SendWr::new(SendOp::RdmaRead { raddr: l.base + 4096, rkey: l.mr.rkey() }, Payload::Inline(&chunks)).signaled();
    let wrs = [(0, l.write(&sge, 0)), (1, l.write(&sge, 1)), (2, l.write(&sge, 2)), (3, read)];
    let e = post_error(l.qp.post_send_list(&wrs));
    assert_eq!((e.index, e.kind), (3, PostErrorKind::InlineNotAllowed { op: WqeOpcode::RdmaRead }));
    assert_eq!(l.qp.doorbell_record()[1], 3);
    l.expect_completed(&[0, 1, 2], 3);
}

#[test]
fn read_on_uc() {
    let mut l = Loop::new(QpType::Uc, rc_cap());
    let sge = [l.sge(0, 8)];
    let read = SendWr::new(SendOp::RdmaRead { raddr: l.base + 4096, rkey: l.mr.rkey() }, Payload::Sgl(&sge)).signaled();
    let bad = PostErrorKind::BadOpcode { op: WqeOpcode::RdmaRead, qp_type: QpType::Uc };
    // The fast lane handles a one-SGE READ on RC; on UC it must not write it.
    let e = post_error(l.qp.post_send(5, &read));
    assert_eq!((e.index, e.kind), (0, bad));
    assert_eq!(l.qp.doorbell_record()[1], 0, "nothing posted");
    let wrs = [(0, l.write(&sge, 0)), (1, l.write(&sge, 1)), (2, read)];
    let e = post_error(l.qp.post_send_list(&wrs));
    assert_eq!((e.index, e.kind), (2, bad));
    assert_eq!(e.errno(), Errno::EINVAL);
    assert_eq!(l.qp.doorbell_record()[1], 2);
    l.expect_completed(&[0, 1], 2);
}

#[test]
fn ud_destination_on_rc() {
    let mut l = Loop::new(QpType::Rc, rc_cap());
    let sge = [l.sge(0, 8)];
    let av = DatagramSeg::default();
    let ud = SendWr::new(SendOp::Send, Payload::Sgl(&sge)).signaled().to_ud(UdDest { av: &av, remote_qpn: 1, qkey: 0x1111 });
    let wrs = [(0, l.write(&sge, 0)), (1, ud), (2, l.write(&sge, 2))];
    let e = post_error(l.qp.post_send_list(&wrs));
    assert_eq!((e.index, e.kind), (1, PostErrorKind::DestinationOnConnected { qp_type: QpType::Rc }));
    assert_eq!(l.qp.doorbell_record()[1], 1);
    l.expect_completed(&[0], 1);
}

#[test]
fn no_send_or_recv_queue() {
    let cap = QpCap { max_send_wr: 0, ..rc_cap() };
    let mut l = Loop::new(QpType::Rc, cap);
    assert_eq!(l.qp.geometry().sq_wqe_cnt, 0);
    let sge = [l.sge(0, 8)];
    let w = l.write(&sge, 0);
    for r in [l.qp.post_send(0, &w), l.qp.post_send_list(&[(0, w)])] {
        let e = post_error(r);
        assert_eq!((e.index, e.kind), (0, PostErrorKind::NoSendQueue));
    }
    assert_eq!(l.qp.doorbell_record()[1], 0);
    // And the receive side.
    let cap = QpCap { max_recv_wr: 0, ..rc_cap() };
    let mut l = Loop::new(QpType::Rc, cap);
    assert_eq!(l.qp.geometry().rq_wqe_cnt, 0);
    let one = [l.sge(0, 8)];
    let e = post_error(l.qp.post_recv(0, &one));
    assert_eq!((e.index, e.kind), (0, PostErrorKind::NoRecvQueue));
    assert_eq!(l.qp.doorbell_record()[0], 0);
}

#[test]
fn recv_queue_full_and_too_many_sges() {
    let mut l = Loop::new(QpType::Rc, rc_cap());
    let cnt = l.qp.geometry().rq_wqe_cnt as usize;
    let max = l.qp.cap().max_recv_sge as usize;
    let one = [l.sge(BUF as u64 / 2, 64)];
    let many: Vec<Sge> = (0..=max as u64).map(|k| l.sge(BUF as u64 / 2 + 64 * k, 64)).collect();
    // Too many scatter entries at index 1: receive 0 is posted.
    let e = post_error(l.qp.post_recv_list(&[(100, &one[..]), (101, &many[..]), (102, &one[..])]));
    assert_eq!((e.index, e.kind), (1, PostErrorKind::TooManySges { sges: max + 1, max: max as u32 }));
    assert_eq!(l.qp.doorbell_record()[0], 1);
    // Filling the rest and one more: refused at the first that does not fit.
    let list: Vec<(u64, &[Sge])> = (1..=cnt as u64).map(|k| (100 + k, &one[..])).collect();
    let e = post_error(l.qp.post_recv_list(&list));
    assert_eq!((e.index, e.kind), (cnt - 1, PostErrorKind::RecvQueueFull { capacity: cnt as u32 }));
    assert_eq!(e.errno(), Errno::ENOMEM);
    assert_eq!(l.qp.doorbell_record()[0], cnt as u32);
    // Every posted receive takes one SEND, in order: receives 100 .. 100 + cnt - 1.
    let sge = [l.sge(0, 8)];
    let mut want = Vec::new();
    for k in 0..cnt as u64 {
        let send = SendWr::new(SendOp::Send, Payload::Sgl(&sge)).signaled();
        l.qp.post_send(k, &send).unwrap();
        // send completion k and receive completion 100 + k, in either order
        let mut got = l.completions(2);
        got.sort();
        want.push(got.clone());
        assert_eq!(got, vec![k, 100 + k]);
    }
    assert_eq!(want.len(), cnt);
}

#[test]
fn ud_send_without_destination() {
    // A UD QP (never connected: the refusal comes before anything reaches the device).
    let l = Loop::new(QpType::Rc, rc_cap());
    let mut ud = l.pd.create_qp(&provider::QpInit { send_cq: &l.cq, recv_cq: &l.cq, cap: rc_cap(), qp_type: QpType::Ud, sq_sig_all: false, send_ops: None }).unwrap();
    let sge = [l.sge(0, 8)];
    let send = SendWr::new(SendOp::Send, Payload::Sgl(&sge)).signaled();
    // The fast lane takes a one-SGE SEND on a connected QP; on UD it must not.
    let e = post_error(ud.post_send(1, &send));
    assert_eq!((e.index, e.kind), (0, PostErrorKind::NoDestination));
    let read = SendWr::new(SendOp::RdmaRead { raddr: l.base, rkey: l.mr.rkey() }, Payload::Sgl(&sge));
    let e = post_error(ud.post_send_list(&[(2, read)]));
    assert_eq!((e.index, e.kind), (0, PostErrorKind::BadOpcode { op: WqeOpcode::RdmaRead, qp_type: QpType::Ud }));
    assert_eq!(ud.doorbell_record()[1], 0, "nothing posted");
}
