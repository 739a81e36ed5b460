//! Doorbell's DevX RC QP (`devx::rc::RcQp`: UMEM queues and doorbell records, a DevX
//! UAR, PRM transitions) against a verbs RC QP of the provider on another softhca
//! instance: SEND/RECV and RDMA WRITE in both directions, every byte checked, and
//! QUERY_QP's view of the DevX QP after the PRM transitions.

#[path = "../../softhca/tests/common/mod.rs"]
mod common;

use std::time::Duration;

use common::{all_access, wait, End, Host, Opts};
use devx::rc::{ConnectParams, Peer, RcConfig, RcQp};
use devx::DevxContext;
use prm::cmd::qp::state;
use provider::cqe::{WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp, SendWr};

const LEN: usize = 3000;

fn pattern(seed: u8) -> Vec<u8> {
    (0..LEN).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

#[test]
fn devx_rc_qp_with_a_verbs_qp() {
    traffic(&Host::new([127, 62, 0, 1]), &Host::new([127, 62, 0, 2]));
}

/// The same on a context with static UARs: the DevX UAR is then a dynamic bfreg page
/// (mmap ALLOC_WC + DEVX_QUERY_UAR) and the doorbells go there.
#[test]
fn devx_rc_qp_on_a_static_uar_context() {
    let a = Host::at([127, 62, 0, 3], |c| c.dynamic_uars = false);
    assert!(a.ctx.ucontext().tot_bfregs > 0);
    traffic(&a, &Host::new([127, 62, 0, 4]));
}

fn traffic(a: &Host, b: &Host) {
    let o = Opts::default();
    let d = DevxContext::new(a.ctx.clone()).expect("DevX granted");
    let mut rc = RcQp::new(&d, &a.pd, RcConfig::default()).expect("DevX RC QP");
    let eb = End::new(b, &o);
    let (pa, pb) = (0x1234, 0x5678);
    rc.connect(&Peer { qpn: eb.qp.qpn(), psn: pb, gid: b.gid() }, &ConnectParams { psn: pa, ..Default::default() })
        .expect("RST2INIT, INIT2RTR, RTR2RTS");
    assert_eq!(rc.state().unwrap(), state::RTS);
    eb.connect(&o, rc.qpn(), a.gid(), pb, pa);

    let ma = a.mem(2 * LEN, all_access());
    let mb = b.mem(2 * LEN, all_access());
    let limit = Duration::from_secs(30);

    // DevX SEND -> verbs RECV.
    mb.buf.write(0, &[0u8; LEN]);
    let mut eb = eb;
    eb.qp.post_recv(11, &[mb.sge(0, LEN)]).unwrap();
    ma.buf.write(0, &pattern(1));
    rc.post_send(21, &SendWr::new(SendOp::Send, Payload::Sgl(&[ma.sge(0, LEN)]))).unwrap();
    let wc = rc.poll_wait(limit).expect("send completion");
    assert_eq!((wc.status, wc.opcode, wc.wr_id), (WcStatus::Success, WcOpcode::Send, 21), "{wc:?}");
    let wcs = wait(&mut eb.rcq, 1);
    assert_eq!((wcs[0].status, wcs[0].wr_id, wcs[0].byte_len as usize), (WcStatus::Success, 11, LEN));
    assert_eq!(&mb.buf.read()[..LEN], &pattern(1)[..]);

    // verbs SEND -> DevX RECV (two scatter entries).
    rc.post_recv(31, &[ma.sge(LEN, 1000), ma.sge(LEN + 1000, LEN - 1000)]).unwrap();
    mb.buf.write(LEN, &pattern(2));
    eb.qp.post_send(41, &SendWr::new(SendOp::Send, Payload::Sgl(&[mb.sge(LEN, LEN)])).signaled()).unwrap();
    let wc = rc.poll_wait(limit).expect("recv completion");
    assert_eq!((wc.status, wc.opcode, wc.wr_id, wc.byte_len as usize), (WcStatus::Success, WcOpcode::Recv, 31, LEN), "{wc:?}");
    assert_eq!(wc.qp_num, rc.qpn());
    assert_eq!(&ma.buf.read()[LEN..2 * LEN], &pattern(2)[..]);
    assert_eq!(wait(&mut eb.scq, 1)[0].status, WcStatus::Success);

    // DevX RDMA WRITE -> verbs memory.
    ma.buf.write(0, &pattern(3));
    rc.post_send(22, &SendWr::new(SendOp::RdmaWrite { raddr: mb.addr() + LEN as u64, rkey: mb.mr.rkey() },
                                  Payload::Sgl(&[ma.sge(0, LEN)]))).unwrap();
    let wc = rc.poll_wait(limit).expect("write completion");
    assert_eq!((wc.status, wc.opcode, wc.wr_id), (WcStatus::Success, WcOpcode::RdmaWrite, 22), "{wc:?}");
    assert_eq!(&mb.buf.read()[LEN..2 * LEN], &pattern(3)[..]);

    // verbs RDMA WRITE -> DevX side's memory (its MR is on the PD the DevX QP uses).
    mb.buf.write(0, &pattern(4));
    eb.qp.post_send(42, &SendWr::new(SendOp::RdmaWrite { raddr: ma.addr() + LEN as u64, rkey: ma.mr.rkey() },
                                     Payload::Sgl(&[mb.sge(0, LEN)])).signaled()).unwrap();
    assert_eq!(wait(&mut eb.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(&ma.buf.read()[LEN..2 * LEN], &pattern(4)[..]);

    // Many more SENDs than queue slots: the ring wraps and completions free slots.
    for i in 0..200u64 {
        eb.qp.post_recv(1000 + i, &[mb.sge(0, 64)]).unwrap();
        rc.post_send(2000 + i, &SendWr::new(SendOp::Send, Payload::Inline(&[&i.to_le_bytes()]))).unwrap();
        let wc = rc.poll_wait(limit).expect("send completion");
        assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, 2000 + i));
        let r = wait(&mut eb.rcq, 1);
        assert_eq!((r[0].wr_id, r[0].byte_len), (1000 + i, 8));
        assert_eq!(mb.buf.read_u64(0), i);
    }
}

/// The DevX QP as UD (CREATE_QP with st UD, RST2INIT with the Q_Key, INIT2RTR, RTR2RTS)
/// against a verbs UD QP: datagrams both ways, the 40-byte GRH area in front of the
/// payload, the sender's QPN in the receive completion, the payload checked.
#[test]
fn devx_ud_qp_with_a_verbs_ud_qp() {
    use provider::wqe::{DatagramSeg, UdDest};
    use provider::{QpAttr, QpInit, QpState, QpType};
    let (a, b) = (Host::new([127, 62, 0, 5]), Host::new([127, 62, 0, 6]));
    let d = DevxContext::new(a.ctx.clone()).expect("DevX granted");
    let mut ud = RcQp::new_ud(&d, &a.pd, RcConfig::default()).expect("DevX UD QP");
    ud.activate_ud(0x1111, 5).expect("UD to RTS");
    assert_eq!(ud.state().unwrap(), state::RTS);

    let o = Opts::default();
    let mut scq = b.ctx.create_cq(64, None).unwrap();
    let mut rcq = b.ctx.create_cq(64, None).unwrap();
    let vqp = b.pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &rcq, cap: o.cap, qp_type: QpType::Ud, sq_sig_all: false,
                                        send_ops: None }).unwrap();
    vqp.modify(&QpAttr { state: Some(QpState::Init), pkey_index: Some(0), port: Some(1), qkey: Some(0x2222), ..Default::default() }).unwrap();
    vqp.modify(&QpAttr { state: Some(QpState::Rtr), ..Default::default() }).unwrap();
    vqp.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(7), ..Default::default() }).unwrap();
    let mut vqp = vqp;
    // An address vector to a RoCEv2 IPv4-mapped GID (source GID index 1, hop limit 64).
    let av = |gid: [u8; 16]| DatagramSeg::from_raw(0, 0, 1, 0, 0, 0xc000, [0; 6], 1, 64, (1 << 30) | (1 << 20), gid);
    let limit = Duration::from_secs(30);
    let ma = a.mem(8192, all_access());
    let mb = b.mem(8192, all_access());

    // DevX UD -> verbs UD.
    let to_b = av(b.gid());
    ma.buf.write(0, &pattern(5)[..1000]);
    vqp.post_recv(1, &[mb.sge(0, 40 + 1000)]).unwrap();
    let sgl = [ma.sge(0, 1000)];
    ud.post_send(9, &SendWr::new(SendOp::Send, Payload::Sgl(&sgl)).to_ud(UdDest { av: &to_b, remote_qpn: vqp.qpn(), qkey: 0x2222 }))
        .unwrap();
    let wc = ud.poll_wait(limit).expect("send completion");
    assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, 9), "{wc:?}");
    let r = wait(&mut rcq, 1)[0];
    assert_eq!((r.status, r.byte_len, r.src_qp), (WcStatus::Success, 1040, ud.qpn()), "{r:?}");
    assert_eq!(&mb.buf.read()[40..1040], &pattern(5)[..1000]);

    // verbs UD -> DevX UD.
    let to_a = av(a.gid());
    mb.buf.write(4096, &pattern(6)[..700]);
    ud.post_recv(3, &[ma.sge(4096, 40 + 700)]).unwrap();
    let sgl = [mb.sge(4096, 700)];
    vqp.post_send(4, &SendWr::new(SendOp::Send, Payload::Sgl(&sgl)).signaled()
        .to_ud(UdDest { av: &to_a, remote_qpn: ud.qpn(), qkey: 0x1111 })).unwrap();
    let wc = ud.poll_wait(limit).expect("recv completion");
    assert_eq!((wc.status, wc.opcode, wc.wr_id, wc.byte_len, wc.src_qp), (WcStatus::Success, WcOpcode::Recv, 3, 740, vqp.qpn()), "{wc:?}");
    assert_eq!(&ma.buf.read()[4096 + 40..4096 + 740], &pattern(6)[..700]);
    assert_eq!(wait(&mut scq, 1)[0].status, WcStatus::Success);
}
