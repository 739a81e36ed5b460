//! UD QPs with address handles on the embedded softhca: a sender thread's UD QP sends
//! through an AH to a receiver's UD QP; each receive must hold the GRH in its first 40
//! bytes (on RoCE v2 over IPv4 the last 20 of them are the IPv4 header, RFC 791:
//! version 4, IHL 5, protocol UDP 17, the two addresses of the GIDs' IPv4 parts), the
//! payload after it, a byte count of 40 + the payload, and the sender's QPN; a send
//! with the wrong Q_Key must be dropped by the receiver (IBTA: Q_Key violation) and the
//! next good one still arrive.

use std::time::Duration;

use provider::qp::ud::GRH_BYTES;
use provider::qp::{Ah, QpCap};
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, Context, Cq, QpInit, QpType, Wc};

const QKEY: u32 = 0x1111_1111;
const WAIT: Duration = Duration::from_secs(30);

fn poll1(cq: &mut Cq) -> Wc {
    let mut wc = [Wc::default()];
    assert_eq!(cq.poll_wait(&mut wc, WAIT), 1, "no completion");
    wc[0]
}

#[test]
fn ud_send_through_an_address_handle() {
    let ctx = Context::open(None).expect("embedded softhca");
    let pd = ctx.alloc_pd().unwrap();
    let gid = ctx.default_gid(1).unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut rcq = ctx.create_cq(16, None).unwrap();
    let scq = ctx.create_cq(16, None).unwrap();
    let mut rx = pd.create_qp(&QpInit { send_cq: &rcq, recv_cq: &rcq, cap, qp_type: QpType::Ud, sq_sig_all: false, send_ops: None }).unwrap();
    let tx = pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &scq, cap, qp_type: QpType::Ud, sq_sig_all: false, send_ops: None }).unwrap();
    rx.ud_to_rts(1, QKEY, 0).unwrap();
    tx.ud_to_rts(1, QKEY, 0x123).unwrap();
    let (rqpn, tqpn) = (rx.qpn(), tx.qpn());
    let ah = pd.create_ah(&Ah { dgid: gid.raw(), sgid_index: gid.gid_index as u8, hop_limit: 1, port: 1, ..Default::default() }).unwrap();
    assert_eq!(ah.av().rgid, gid.raw());
    assert_eq!(ah.av().rlid.get() & 0xc000, 0xc000, "a RoCE v2 UDP source port");

    const LEN: usize = 300;
    let rmr = pd.alloc_mr(4 * (GRH_BYTES + LEN), Access::LOCAL_WRITE).unwrap();
    for i in 0..4 {
        let o = i * (GRH_BYTES + LEN);
        rx.post_recv(i as u64, &[rmr.sge(o..o + GRH_BYTES + LEN)]).unwrap();
    }
    // The sender: message k is LEN bytes of k, the second one with a wrong Q_Key.
    let sender = std::thread::spawn(move || {
        let (mut tx, mut scq) = (tx, scq);
        let smr = pd.alloc_mr(3 * LEN, Access::LOCAL_WRITE).unwrap();
        for k in 0..3usize {
            // SAFETY: the range is inside the MR's buffer; no WQE reads it yet.
            unsafe { std::ptr::write_bytes(smr.ptr().add(k * LEN), 0xa0 + k as u8, LEN) };
            let sgl = [smr.sge(k * LEN..(k + 1) * LEN)];
            let qkey = if k == 1 { QKEY ^ 1 } else { QKEY };
            tx.post_send(k as u64, &SendWr::new(SendOp::Send, Payload::Sgl(&sgl)).signaled().to_ud(ah.dest(rqpn, qkey))).unwrap();
            let w = poll1(&mut scq);
            assert_eq!((w.status, w.wr_id), (provider::cqe::WcStatus::Success, k as u64), "UD sends complete locally");
        }
        drop((tx, ah));
    });
    let mut got = Vec::new();
    for _ in 0..2 {
        let w = poll1(&mut rcq);
        assert_eq!(w.status, provider::cqe::WcStatus::Success, "{w:?}");
        assert_eq!(w.byte_len as usize, GRH_BYTES + LEN, "the byte count includes the GRH");
        assert_eq!(w.src_qp, tqpn);
        let o = w.wr_id as usize * (GRH_BYTES + LEN);
        // SAFETY: the receive completed; nothing writes the slot any more.
        let b = unsafe { std::slice::from_raw_parts(rmr.ptr().add(o), GRH_BYTES + LEN) };
        let ip = &b[20..40];
        assert_eq!((ip[0], ip[9]), (0x45, 17), "IPv4, IHL 5, UDP");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, 20 + 8 + 12 + 8 + LEN + 4, "IPv4 total length: IP 20 + UDP 8 + BTH 12 + DETH 8 + payload + ICRC 4");
        assert_eq!(&ip[12..16], &gid.raw()[12..], "source address");
        assert_eq!(&ip[16..20], &gid.raw()[12..], "destination address");
        got.push(b[GRH_BYTES]);
        assert!(b[GRH_BYTES..].iter().all(|&x| x == b[GRH_BYTES]), "payload");
    }
    assert_eq!(got, [0xa0, 0xa2], "the wrong-Q_Key datagram is dropped");
    sender.join().unwrap();
    let mut wc = [Wc::default()];
    assert_eq!(rcq.poll(&mut wc), 0);
    drop(rx);
}

/// A UD QP on an SRQ: the datagram lands in the SRQ receive the device takes next
/// (posted order), GRH first, and the CQE names the sender.
#[test]
fn ud_receives_from_an_srq() {
    let ctx = Context::open(None).expect("embedded softhca");
    let pd = ctx.alloc_pd().unwrap();
    let gid = ctx.default_gid(1).unwrap();
    let cap = QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let srq = pd.create_srq(&provider::SrqAttr { max_wr: 8, max_sge: 1, srq_limit: 0 }).unwrap();
    let mut cq = ctx.create_cq(16, None).unwrap();
    let init = QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Ud, sq_sig_all: false, send_ops: None };
    let rx = pd.create_qp_with_srq(&init, &srq).unwrap();
    let mut tx = pd.create_qp(&init).unwrap();
    rx.ud_to_rts(1, QKEY, 0).unwrap();
    tx.ud_to_rts(1, QKEY, 0).unwrap();
    let ah = pd.create_ah(&Ah { dgid: gid.raw(), sgid_index: gid.gid_index as u8, hop_limit: 1, port: 1, ..Default::default() }).unwrap();
    const LEN: usize = 100;
    let mr = pd.alloc_mr(4096, Access::LOCAL_WRITE).unwrap();
    for i in 0..3u64 {
        let o = 1024 + i as usize * 1024;
        srq.post_recv(100 + i, &[mr.sge(o..o + GRH_BYTES + LEN)]).unwrap();
    }
    for k in 0..2u8 {
        // SAFETY: inside the MR; no WQE reads it yet.
        unsafe { std::ptr::write_bytes(mr.ptr(), 0x50 + k, LEN) };
        let sgl = [mr.sge(0..LEN)];
        tx.post_send(7, &SendWr::new(SendOp::Send, Payload::Sgl(&sgl)).signaled().to_ud(ah.dest(rx.qpn(), QKEY))).unwrap();
        let mut seen = Vec::new();
        while seen.len() < 2 {
            seen.push(poll1(&mut cq));
        }
        let r = seen.iter().find(|w| w.opcode == provider::cqe::WcOpcode::Recv).expect("a receive");
        assert_eq!((r.status, r.wr_id, r.byte_len as usize, r.src_qp, r.qp_num),
                   (provider::cqe::WcStatus::Success, 100 + k as u64, GRH_BYTES + LEN, tx.qpn(), rx.qpn()));
        let o = 1024 + k as usize * 1024;
        assert_eq!(mr[o + 20], 0x45, "GRH (IPv4 header) first");
        assert!(mr[o + GRH_BYTES..o + GRH_BYTES + LEN].iter().all(|&b| b == 0x50 + k));
    }
    assert_eq!(srq.outstanding(), 1);
}
