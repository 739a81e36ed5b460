//! Device behaviour at the edges: garbage on the wire, packet capture, CQ overrun,
//! malformed WQEs written behind the provider's back, and the legacy (static) UAR mode.
//!
//! Addresses: 127.1.5.x.

mod common;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use common::*;
use provider::cqe::{WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp};
use softhca::objects::QpState as HcaQpState;
use softhca::wire::{BthRepr, Endpoints, Opcode, RethRepr, RocePacket};
use softhca::Config;

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn garbage_on_the_wire_is_counted_and_dropped() {
    let a = Host::new([127, 1, 5, 1]);
    let b = Host::new([127, 1, 5, 2]);
    let (mut ea, eb) = connect(&a, &b, &Opts::default());
    let target = b.mem(4096, all_access());
    let before = target.buf.read();
    // A stranger at 127.1.5.3 sends to b's port.
    let s = UdpSocket::bind("127.1.5.3:4791").unwrap();
    let to = "127.1.5.2:4791";
    let ep = Endpoints::new("127.1.5.3:4791".parse().unwrap(), to.parse().unwrap());
    // A valid WRITE to b's QP with the right rkey: from the wrong host, so dropped.
    let mut w = RocePacket::new(BthRepr::new(Opcode::RcRdmaWriteOnly, eb.qp.qpn(), 0), &[1, 2, 3, 4]);
    w.reth = Some(RethRepr { va: target.addr(), rkey: target.mr.rkey(), dma_len: 4 });
    let good = w.to_vec(&ep).unwrap();
    s.send_to(&good, to).unwrap();
    // The same with a broken ICRC, a truncated one, random bytes, an unknown QPN.
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    s.send_to(&bad_crc, to).unwrap();
    s.send_to(&good[..10], to).unwrap();
    s.send_to(&[0xff; 100], to).unwrap();
    let mut x = 12345u32;
    let noise: Vec<u8> = (0..3000).map(|_| { x = x.wrapping_mul(1103515245).wrapping_add(12345); (x >> 16) as u8 }).collect();
    s.send_to(&noise, to).unwrap();
    let unknown = RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 0xabcdef, 0), &[9; 8]).to_vec(&ep).unwrap();
    s.send_to(&unknown, to).unwrap();
    wait_until("6 datagrams counted", || b.hca.device().counters().rx_packets >= 6);
    let c = b.hca.device().counters();
    assert_eq!(c.rx_wrong_peer, 1, "{c:?}");
    // The ICRC is checked first: corrupted and random datagrams fail it; one too short
    // to hold a BTH and an ICRC is malformed.
    assert_eq!(c.rx_bad_icrc, 3, "{c:?}");
    assert_eq!(c.rx_malformed, 1, "{c:?}");
    assert_eq!(c.rx_no_qp, 1, "{c:?}");
    assert_eq!(c.engine_panics, 0);
    assert_eq!(target.buf.read(), before);
    // The device still works.
    let src = a.mem(64, all_access());
    src.buf.write(0, b"still alive");
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: target.addr(), rkey: target.mr.rkey() }, Payload::Sgl(&[src.sge(0, 11)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(&target.buf.read()[..11], b"still alive");
}

#[test]
fn pcap_capture_of_every_packet() {
    let dir = std::env::temp_dir().join(format!("softhca-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cap-{addr}.pcap");
    let mk = |ip: [u8; 4]| {
        let mut c = Config::for_addr(std::net::IpAddr::from(ip));
        c.pcap = Some(path.clone());
        Host::with_config(c)
    };
    let a = mk([127, 1, 5, 4]);
    let b = mk([127, 1, 5, 5]);
    let o = Opts { mtu: 1, ..Default::default() };
    let (mut ea, _eb) = connect(&a, &b, &o);
    let src = a.mem(1000, all_access());
    let dst = b.mem(1000, all_access());
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, 1000)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    drop((ea, _eb, src, dst));
    drop(a);
    drop(b);
    // A's capture: 4 WRITE packets (256-byte MTU) sent, 1 ACK received.
    let file = dir.join("cap-127.1.5.4.pcap");
    let mut r = pcap_file::pcap::PcapReader::new(std::fs::File::open(&file).unwrap()).unwrap();
    let mut ops = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.unwrap();
        let frame = &p.data;
        // Ethernet 14 + IPv4 20 + UDP 8.
        let ip = &frame[14..34];
        let src = std::net::SocketAddr::from(([ip[12], ip[13], ip[14], ip[15]], u16::from_be_bytes([frame[34], frame[35]])));
        let dst = std::net::SocketAddr::from(([ip[16], ip[17], ip[18], ip[19]], u16::from_be_bytes([frame[36], frame[37]])));
        let pkt = RocePacket::parse(&frame[42..], &Endpoints::new(src, dst)).expect("captured packet with a valid ICRC");
        ops.push(pkt.bth.opcode);
    }
    assert_eq!(ops, vec![Opcode::RcRdmaWriteFirst, Opcode::RcRdmaWriteMiddle, Opcode::RcRdmaWriteMiddle,
                         Opcode::RcRdmaWriteLast, Opcode::RcAcknowledge]);
    assert_eq!((ca.tx_packets, ca.rx_packets, cb.rx_packets), (4, 1, 4));
    assert!(dir.join("cap-127.1.5.5.pcap").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cq_overrun_puts_cq_and_qp_in_error() {
    let a = Host::new([127, 1, 5, 6]);
    let b = Host::new([127, 1, 5, 7]);
    let o = Opts { cq: 1, ..Default::default() }; // 2 entries
    let (mut ea, _eb) = connect(&a, &b, &o);
    let src = a.mem(64, all_access());
    let dst = b.mem(64, all_access());
    for i in 0..4 {
        ea.qp.post_send(i, &signaled(SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, 8)]))).unwrap();
    }
    wait_until("an overrun", || a.hca.device().counters().cq_overruns > 0);
    wait_until("the QP in ERR", || a.hca.qp(ea.qp.qpn()).unwrap().state() == HcaQpState::Err);
    // The two CQEs that fit are intact; nothing overwrote them.
    let wcs = wait(&mut ea.scq, 2);
    assert_eq!(wcs.iter().map(|w| (w.status, w.wr_id)).collect::<Vec<_>>(), vec![(WcStatus::Success, 0), (WcStatus::Success, 1)]);
    quiet(&mut ea.scq, Duration::from_millis(20));
    // One async event each: CQ_ERR (0) for the CQ and QP_FATAL (1) for the QP.
    let mut got = Vec::new();
    let fd = a.ctx.async_fd();
    for _ in 0..2 {
        let mut rec = [0u8; 16];
        // SAFETY: reading into a local buffer from the context's async fd.
        let n = unsafe { libc::read(fd, rec.as_mut_ptr().cast(), 16) };
        assert_eq!(n, 16);
        got.push(u32::from_ne_bytes(rec[8..12].try_into().unwrap()));
    }
    got.sort();
    assert_eq!(got, vec![0, 1]);
}

/// Writes a raw WQE at the QP's SQ producer index behind the provider's back and rings
/// the doorbell record: the device must answer a bad opcode or size with LOCAL_QP_OP_ERR.
fn raw_wqe(ip: u8, opcode: u8, ds: u8) {
    let a = Host::new([127, 1, 5, ip]);
    let b = Host::new([127, 1, 5, ip + 1]);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let src = a.mem(64, all_access());
    let dst = b.mem(64, all_access());
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, 8)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let pi = ea.qp.sq_producer_index() as u32;
    assert_eq!(pi, 1, "one WQEBB used so far");
    let mut wqe = [0u8; 64];
    wqe[0..4].copy_from_slice(&((pi << 8) | opcode as u32).to_be_bytes());
    wqe[4..8].copy_from_slice(&((ea.qp.qpn() << 8) | ds as u32).to_be_bytes());
    wqe[11] = 0x08; // CQ_UPDATE
    // Written and rung as the provider would (doorbell record, then the UAR store): a
    // doorbell record alone is not noticed by an engine asleep on its doorbell trap.
    ea.qp.post_send_raw(2, &[wqe]).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.vendor_err != 0), (WcStatus::LocQpOpErr, true), "opcode {opcode:#x} ds {ds}: {wc:?}");
    assert_eq!(a.hca.device().counters().tx_packets, 1);
}

#[test]
fn bad_wqe_opcode_or_size_gives_local_qp_operation_error() {
    raw_wqe(8, 0x2a, 1); // no such opcode
    raw_wqe(10, 0x08, 0); // ds 0
    raw_wqe(12, 0x08, 1); // an RDMA WRITE without its remote address segment
    raw_wqe(14, 0x11, 2); // an atomic without its atomic segment
}

#[test]
fn legacy_static_uars() {
    let mk = |ip: [u8; 4]| {
        let mut c = Config::for_addr(std::net::IpAddr::from(ip));
        c.dynamic_uars = false;
        Host::with_config(c)
    };
    let a = mk([127, 1, 5, 16]);
    let b = mk([127, 1, 5, 17]);
    assert!(a.ctx.ucontext().tot_bfregs > 0, "static UARs");
    let o = Opts::default();
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let (_e2a, _e2b) = connect(&a, &b, &o);
    let src = a.mem(1 << 16, all_access());
    src.buf.fill_pattern(4);
    let dst = b.mem(1 << 16, all_access());
    for i in 0..50u64 {
        eb.qp.post_recv(i, &[dst.sge(0, 1 << 16)]).unwrap();
        let len = 1 + (i as usize * 997) % 5000;
        ea.qp.post_send(i, &signaled(SendOp::Send, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        let rc = wait(&mut eb.rcq, 1)[0];
        assert_eq!((rc.status, rc.opcode, rc.byte_len as usize), (WcStatus::Success, WcOpcode::Recv, len));
        assert!(dst.buf.read()[..len] == src.buf.read()[..len]);
    }
}

mod ud {
    use super::*;
    use provider::wqe::{DatagramSeg, UdDest};
    use provider::{QpAttr, QpInit, QpState, QpType};

    fn ud_end(h: &Host, qkey: u32) -> End {
        let scq = h.ctx.create_cq(64, None).unwrap();
        let rcq = h.ctx.create_cq(64, None).unwrap();
        let o = Opts::default();
        let qp = h.pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &rcq, cap: o.cap, qp_type: QpType::Ud, sq_sig_all: false, send_ops: None }).unwrap();
        qp.modify(&QpAttr { state: Some(QpState::Init), pkey_index: Some(0), port: Some(1), qkey: Some(qkey), ..Default::default() }).unwrap();
        qp.modify(&QpAttr { state: Some(QpState::Rtr), ..Default::default() }).unwrap();
        qp.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(77), ..Default::default() }).unwrap();
        End { qp, scq, rcq }
    }

    fn av(gid: [u8; 16]) -> DatagramSeg {
        DatagramSeg::from_raw(0, 0, 1, 0, 0, 0xc000, [0; 6], 0, 64, (1 << 30) | (3 << 20), gid)
    }

    #[test]
    fn ud_send_and_receive() {
        let a = Host::new([127, 1, 5, 18]);
        let b = Host::new([127, 1, 5, 19]);
        let mut ea = ud_end(&a, 0x1111);
        let mut eb = ud_end(&b, 0x2222);
        let src = a.mem(8192, all_access());
        src.buf.fill_pattern(8);
        let dst = b.mem(8192, all_access());
        let to_b = av(b.gid());
        for (i, len) in [0usize, 1, 100, 4096].into_iter().enumerate() {
            eb.qp.post_recv(i as u64, &[dst.sge(0, 40 + len)]).unwrap();
            let imm = (i % 2 == 1).then_some(0xabc0 + i as u32);
            let op = imm.map_or(SendOp::Send, |imm| SendOp::SendImm { imm });
            let sgl = [src.sge(0, len)];
            let wr = signaled(op, Payload::Sgl(if len == 0 { &[] } else { &sgl }))
                .to_ud(UdDest { av: &to_b, remote_qpn: eb.qp.qpn(), qkey: 0x2222 });
            ea.qp.post_send(i as u64, &wr).unwrap();
            let wc = wait(&mut ea.scq, 1)[0];
            assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, i as u64), "{wc:?}");
            let rc = wait(&mut eb.rcq, 1)[0];
            assert_eq!((rc.status, rc.byte_len as usize, rc.src_qp), (WcStatus::Success, 40 + len, ea.qp.qpn()), "{rc:?}");
            if let Some(imm) = imm {
                assert_eq!(rc.imm, imm);
            }
            let got = dst.buf.read();
            assert_eq!(got[20], 0x45, "IPv4 header in the GRH area");
            assert_eq!(&got[32..36], &[127, 1, 5, 18]);
            assert!(got[40..40 + len] == src.buf.read()[..len]);
        }
        // Wrong Q_Key, and no receive posted: both silently dropped.
        let eight = [src.sge(0, 8)];
        let wr = signaled(SendOp::Send, Payload::Sgl(&eight)).to_ud(UdDest { av: &to_b, remote_qpn: eb.qp.qpn(), qkey: 0x3333 });
        ea.qp.post_send(10, &wr).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        let wr = signaled(SendOp::Send, Payload::Sgl(&eight)).to_ud(UdDest { av: &to_b, remote_qpn: eb.qp.qpn(), qkey: 0x2222 });
        ea.qp.post_send(11, &wr).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        wait_until("two UD drops", || { let c = b.hca.device().counters(); c.rx_bad_qkey == 1 && c.rx_no_recv == 1 });
        quiet(&mut eb.rcq, Duration::from_millis(10));
        // Longer than the MTU: a local length error.
        let long = [src.sge(0, 4097)];
        let wr = signaled(SendOp::Send, Payload::Sgl(&long)).to_ud(UdDest { av: &to_b, remote_qpn: eb.qp.qpn(), qkey: 0x2222 });
        ea.qp.post_send(12, &wr).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::LocLenErr);
    }
}
