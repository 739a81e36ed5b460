//! `Qp::connect` with named options on the embedded softhca: what the defaults are (the
//! values rdma-core's `ibv_rc_pingpong` passes in `pp_connect_ctx`), that the device
//! holds what was asked (read back with QUERY_QP), and the MTU codes (checked against
//! the installed `<infiniband/verbs.h>`).

mod common;

use common::Loop;
use provider::qp::QpCap;
use provider::{Access, ConnectOptions, Mtu, QpInit, QpType, Remote};

fn cap() -> QpCap {
    QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
}

/// rdma-core libibverbs/examples/rc_pingpong.c: RTR max_dest_rd_atomic 1,
/// min_rnr_timer 12; RTS timeout 14, retry_cnt 7, rnr_retry 7, max_rd_atomic 1; the
/// default MTU IBV_MTU_1024, port 1, sl 0, PSN from the caller.
#[test]
fn defaults_are_ibv_rc_pingpongs() {
    let d = ConnectOptions::default();
    assert_eq!((d.port, d.mtu, d.sl), (1, Mtu::M1024, 0));
    assert_eq!((d.max_dest_rd_atomic, d.min_rnr_timer), (1, 12));
    assert_eq!((d.timeout, d.retry_cnt, d.rnr_retry, d.max_rd_atomic), (14, 7, 7, 1));
    assert_eq!(d.sgid_index, None);
}

#[test]
fn the_device_holds_what_connect_asked() {
    // The helper connected its QP to itself with the defaults.
    let l = Loop::new(QpType::Rc, cap());
    let q = l.qp.query().unwrap();
    assert_eq!(q.qp_state, 3, "RTS (IBV_QPS_RTS)");
    assert_eq!((q.path_mtu, q.dest_qp_num, q.rq_psn, q.sq_psn), (3, l.qp.qpn(), 0, 0));
    assert_eq!((q.max_dest_rd_atomic, q.min_rnr_timer), (1, 12));
    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry, q.max_rd_atomic), (14, 7, 7, 1));

    // Another QP with every option changed.
    let qp = l.pd.create_qp(&QpInit { send_cq: &l.cq, recv_cq: &l.cq, cap: cap(), qp_type: QpType::Rc, sq_sig_all: false, send_ops: None }).unwrap();
    qp.to_init(1, Access::REMOTE_WRITE).unwrap();
    let gid = l.ctx.default_gid(1).unwrap();
    let opts = ConnectOptions {
        mtu: Mtu::M4096,
        psn: 0x1234,
        timeout: 10,
        retry_cnt: 3,
        rnr_retry: 2,
        min_rnr_timer: 5,
        max_rd_atomic: 4,
        max_dest_rd_atomic: 8,
        sgid_index: Some(gid.gid_index as u8),
        ..Default::default()
    };
    qp.connect(&Remote { qpn: l.qp.qpn(), psn: 0x77, gid: gid.raw() }, &opts).unwrap();
    let q = qp.query().unwrap();
    assert_eq!(q.qp_state, 3);
    assert_eq!((q.path_mtu, q.dest_qp_num, q.rq_psn, q.sq_psn), (5, l.qp.qpn(), 0x77, 0x1234));
    assert_eq!((q.max_dest_rd_atomic, q.min_rnr_timer), (8, 5));
    assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry, q.max_rd_atomic), (10, 3, 2, 4));
}

#[test]
fn ud_is_not_connected() {
    let l = Loop::new(QpType::Rc, cap());
    let ud = l.pd.create_qp(&QpInit { send_cq: &l.cq, recv_cq: &l.cq, cap: cap(), qp_type: QpType::Ud, sq_sig_all: false, send_ops: None }).unwrap();
    let e = ud.connect(&Remote { qpn: 1, psn: 0, gid: [0; 16] }, &ConnectOptions::default()).unwrap_err();
    assert_eq!(e.errno(), nix::errno::Errno::EINVAL);
}

#[test]
fn mtu_codes_are_ibv_mtu() {
    let all = [Mtu::M256, Mtu::M512, Mtu::M1024, Mtu::M2048, Mtu::M4096];
    for m in all {
        assert_eq!(Mtu::from_code(m.code()), Some(m));
        assert_eq!(Mtu::from_bytes(m.bytes()), Some(m));
    }
    assert_eq!(all.map(Mtu::bytes), [256, 512, 1024, 2048, 4096]);
    assert_eq!((Mtu::from_code(0), Mtu::from_code(6), Mtu::from_bytes(1500)), (None, None, None));
    let path = "/usr/include/infiniband/verbs.h";
    let Ok(h) = std::fs::read_to_string(path) else {
        testkit::skip(testkit::Need::Tool, format!("{path} not found (apt-get install libibverbs-dev)"));
        return;
    };
    for m in all {
        let name = format!("IBV_MTU_{}", m.bytes());
        // `IBV_MTU_1024 = 3,` in `enum ibv_mtu`
        let value = h
            .lines()
            .find_map(|l| l.trim().strip_prefix(&name)?.trim_start().strip_prefix('=').map(|v| v.trim().trim_end_matches(',').to_string()))
            .unwrap_or_else(|| panic!("{name} not in {path}"));
        assert_eq!(value.parse::<u8>().unwrap(), m.code(), "{name}");
    }
}
