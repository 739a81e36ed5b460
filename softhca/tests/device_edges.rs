//! Device behaviour at the edges: garbage on the wire, packet capture, CQ overrun,
//! malformed WQEs written behind the provider's back, and the legacy (static) UAR mode.
//!
//! Addresses: 127.1.5.x (hints, see common::bind_free).

mod common;

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use common::*;
use provider::cqe::{WcFlags, WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp};
use softhca::objects::QpState as HcaQpState;
use softhca::wire::{AtomicEthRepr, BthRepr, Endpoints, NakCode, Opcode, RethRepr, RocePacket, Syndrome};

#[test]
fn garbage_on_the_wire_is_counted_and_dropped() {
    let a = Host::new([127, 1, 5, 1]);
    let b = Host::new([127, 1, 5, 2]);
    let (mut ea, eb) = connect(&a, &b, &Opts::default());
    let target = b.mem(4096, all_access());
    let before = target.buf.read();
    // A stranger (near 127.1.5.3) sends to b's port.
    let (_, s) = bind_free([127, 1, 5, 3]);
    let to = std::net::SocketAddr::new(b.addr(), 4791);
    let ep = Endpoints::new(s.local_addr().unwrap(), to);
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
    let mk = |ip: [u8; 4]| Host::at(ip, |c| c.pcap = Some(path.clone()));
    let a = mk([127, 1, 5, 4]);
    let b = mk([127, 1, 5, 5]);
    let o = Opts { mtu: 1, ..Default::default() };
    let (mut ea, _eb) = connect(&a, &b, &o);
    let src = a.mem(1000, all_access());
    let dst = b.mem(1000, all_access());
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, 1000)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    let (file_a, file_b) = (dir.join(format!("cap-{}.pcap", a.addr())), dir.join(format!("cap-{}.pcap", b.addr())));
    drop((ea, _eb, src, dst));
    drop(a);
    drop(b);
    // A's capture: 4 WRITE packets (256-byte MTU) sent, 1 ACK received; on a busy
    // machine also tail probes (the last packet again) and their ACKs, which the counters
    // account for.
    let ops = captured(&file_a);
    let (requests, acks): (Vec<_>, Vec<_>) = ops.iter().partition(|(op, _)| *op != Opcode::RcAcknowledge);
    let first: Vec<_> = requests.iter().take(4).map(|(op, _)| *op).collect();
    assert_eq!(first, [Opcode::RcRdmaWriteFirst, Opcode::RcRdmaWriteMiddle, Opcode::RcRdmaWriteMiddle, Opcode::RcRdmaWriteLast],
               "{ops:?}");
    let psns: Vec<u32> = requests.iter().map(|(_, p)| *p).collect();
    assert!(psns[..4].windows(2).all(|w| w[1] == (w[0] + 1) & 0xff_ffff), "{ops:?}");
    assert!(psns[4..].iter().all(|p| psns[..4].contains(p)), "only repeats after the four: {ops:?}");
    let again = ca.tail_probes + ca.retransmits;
    assert_eq!((requests.len() as u64, ca.tx_packets), (4 + again, 4 + again), "{ops:?} {ca:?}");
    // B answers each request packet with AckReq (the last, and every probe) with at most
    // one ACK; an answer to the last probe may still have been on its way.
    assert!((1..=1 + again as usize).contains(&acks.len()), "{ops:?} {ca:?}");
    assert!((4..=4 + again).contains(&cb.rx_packets), "{cb:?}");
    assert!(file_b.exists());
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
/// the doorbell record: the device must answer a bad opcode or size, or a control
/// segment whose index is not the SQ position (`skew` WQEBBs off), with LOCAL_QP_OP_ERR.
fn raw_wqe(ip: u8, opcode: u8, ds: u8, skew: u32) -> u8 {
    let a = Host::new([127, 1, 5, ip]);
    let b = Host::new([127, 1, 5, ip + 1]);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let src = a.mem(64, all_access());
    let dst = b.mem(64, all_access());
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, 8)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let pi = ea.qp.sq_producer_index() as u32;
    assert_eq!(pi, 1, "one WQEBB used so far");
    // Sent so far: the good WRITE, and a retransmission of it if its ACK was slow.
    let sent = a.hca.device().counters().tx_packets;
    let mut wqe = [0u8; 64];
    wqe[0..4].copy_from_slice(&((((pi + skew) & 0xffff) << 8) | opcode as u32).to_be_bytes());
    wqe[4..8].copy_from_slice(&((ea.qp.qpn() << 8) | ds as u32).to_be_bytes());
    wqe[11] = 0x08; // CQ_UPDATE
    // Written and rung as the provider would (doorbell record, then the UAR store): a
    // doorbell record alone is not noticed by an engine asleep on its doorbell trap.
    ea.qp.post_send_raw(2, &[wqe]).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.vendor_err != 0), (WcStatus::LocQpOpErr, true), "opcode {opcode:#x} ds {ds}: {wc:?}");
    assert_eq!(a.hca.device().counters().tx_packets, sent, "a malformed WQE puts nothing on the wire");
    wc.vendor_err
}

#[test]
fn bad_wqe_opcode_or_size_gives_local_qp_operation_error() {
    raw_wqe(8, 0x2a, 1, 0); // no such opcode
    raw_wqe(10, 0x08, 0, 0); // ds 0
    raw_wqe(12, 0x08, 1, 0); // an RDMA WRITE without its remote address segment
    raw_wqe(14, 0x11, 2, 0); // an atomic without its atomic segment
}

/// A well-formed NOP whose control segment names the wrong WQE index: a ConnectX
/// refuses it with LOCAL_QP_OP_ERR and vendor syndrome 0x68 (the error copyrpc's mlx5
/// crate hit on a real device with its first DevX WQE; docs/devx.md).
#[test]
fn control_segment_with_the_wrong_index_is_refused() {
    assert_eq!(raw_wqe(40, 0x00, 1, 1), 0x68, "index one ahead");
    assert_eq!(raw_wqe(42, 0x00, 1, 0x8000), 0x68, "index half the counter off");
}

#[test]
fn legacy_static_uars() {
    let mk = |ip: [u8; 4]| Host::at(ip, |c| c.dynamic_uars = false);
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
        // RC scatters no GRH (no IBV_WC_GRH); the packet type nibble is there on every
        // RoCE receive (mlx5_ib's handle_responder reads it for any QP type): 2 = IPv4.
        assert!(!rc.flags.contains(WcFlags::GRH) && rc.sl == 2, "{rc:?}");
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
        DatagramSeg::from_raw(0, 0, 1, 0, 0, 0xc000, [0; 6], 0, 64, (1 << 30) | (1 << 20), gid)
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
            // As libmlx5 returns them from a ConnectX (providers/mlx5/cq.c,
            // handle_responder): IBV_WC_GRH for a UD receive on RoCE, and `sl` = the
            // CQE's RoCE packet type, 2 = RoCE v2 over IPv4
            // (MLX5_CQE_ROCE_L3_HEADER_TYPE_IPV4, include/linux/mlx5/device.h).
            assert!(rc.flags.contains(WcFlags::GRH), "{rc:?}");
            assert_eq!(rc.sl, 2, "{rc:?}");
            if let Some(imm) = imm {
                assert_eq!(rc.imm, imm);
            }
            let got = dst.buf.read();
            assert_eq!(got[20], 0x45, "IPv4 header in the GRH area");
            assert_eq!(got[32..36], a.hca.config().ip_gid()[12..], "the sender's IPv4 address");
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

/// A requester played by hand on a UDP socket: it sends crafted requests to one softhca
/// QP and reads the responses, so a test produces exactly the retransmission patterns a
/// lossy wire makes only by chance.
struct FakeRequester {
    sock: UdpSocket,
    to: SocketAddr,
    /// The softhca QP the requests go to.
    qpn: u32,
}

/// One response packet, owned.
#[derive(Debug)]
struct Resp {
    opcode: Opcode,
    psn: u32,
    syndrome: Option<Syndrome>,
    orig: Option<u64>,
    payload: Vec<u8>,
}

impl Resp {
    fn is_nak(&self) -> bool {
        matches!(self.syndrome, Some(Syndrome::Nak(_) | Syndrome::RnrNak { .. }))
    }
}

impl FakeRequester {
    /// A new QP of `b`, connected (PSNs from 0 both ways) to a requester at a free address
    /// near `hint`.
    fn new(b: &Host, o: &Opts, hint: [u8; 4]) -> (FakeRequester, End) {
        let (ip, sock) = bind_free(hint);
        // Room for a burst of responses while the test thread is not reading (root may
        // exceed rmem_max; otherwise the default ceiling applies).
        let size: libc::c_int = 16 << 20;
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: setsockopt on a live socket with a pointer to a c_int and its size.
            let r = unsafe {
                libc::setsockopt(sock.as_raw_fd(), libc::SOL_SOCKET, opt, (&size as *const libc::c_int).cast(),
                                 std::mem::size_of::<libc::c_int>() as libc::socklen_t)
            };
            if r == 0 {
                break;
            }
        }
        sock.set_read_timeout(Some(WAIT)).unwrap();
        let e = End::new(b, o);
        let IpAddr::V4(v4) = ip else { unreachable!() };
        e.connect(o, 0x4321, v4.to_ipv6_mapped().octets(), 0x55, 0);
        (FakeRequester { sock, to: SocketAddr::new(b.addr(), 4791), qpn: e.qp.qpn() }, e)
    }

    fn bytes(&self, pkt: &RocePacket<'_>) -> Vec<u8> {
        pkt.to_vec(&Endpoints::new(self.sock.local_addr().unwrap(), self.to)).unwrap()
    }

    /// Sends the datagrams so that the responder takes them in one engine step: as one
    /// UDP GSO send (`UDP_SEGMENT`; all but the last of equal size, the last not longer),
    /// which reaches softhca's GRO socket as one message or, split by the kernel, as
    /// datagrams queued together. (Separate sends, even one `sendmmsg`, can be hours
    /// apart in engine steps when the sending thread loses its core to the engine.)
    fn send_all(&self, dgrams: &[Vec<u8>]) {
        let seg = dgrams[0].len();
        assert!(dgrams.iter().all(|d| d.len() <= seg) && dgrams[..dgrams.len() - 1].iter().all(|d| d.len() == seg));
        let IpAddr::V4(ip) = self.to.ip() else { unreachable!() };
        let data: Vec<u8> = dgrams.concat();
        // SAFETY: sockaddr_in and msghdr are plain old data; zero is a valid start.
        let mut to: libc::sockaddr_in = unsafe { std::mem::zeroed() };
        to.sin_family = libc::AF_INET as libc::sa_family_t;
        to.sin_port = self.to.port().to_be();
        to.sin_addr.s_addr = u32::from_ne_bytes(ip.octets());
        let mut iov = libc::iovec { iov_base: data.as_ptr() as *mut libc::c_void, iov_len: data.len() };
        let mut cmsg = [0u64; 4];
        // SAFETY: as above.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_name = std::ptr::addr_of_mut!(to).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        h.msg_iov = &mut iov;
        h.msg_iovlen = 1;
        if dgrams.len() > 1 {
            h.msg_control = cmsg.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE only computes a size.
            h.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as usize;
            // SAFETY: `cmsg` is 32 bytes, 8-aligned, at least CMSG_SPACE(2); the header
            // and its data lie inside it.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&h);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(2) as usize;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg as u16);
            }
        }
        // SAFETY: `h` points at `to`, `iov` (over `data`) and `cmsg`, all outliving the call.
        let n = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &h, 0) };
        assert_eq!(n, data.len() as isize, "sendmsg: {}", std::io::Error::last_os_error());
    }

    fn read_packet(&self, psn: u32, va: u64, rkey: u32, len: u32) -> Vec<u8> {
        let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcRdmaReadRequest, self.qpn, psn), &[]);
        pkt.reth = Some(RethRepr { va, rkey, dma_len: len });
        self.bytes(&pkt)
    }

    fn fetch_add_packet(&self, psn: u32, va: u64, rkey: u32, add: u64) -> Vec<u8> {
        let mut pkt = RocePacket::new(BthRepr::new(Opcode::RcFetchAdd, self.qpn, psn), &[]);
        pkt.atomic_eth = Some(AtomicEthRepr { va, rkey, swap_add: add, compare: 0 });
        self.bytes(&pkt)
    }

    fn fetch_add(&self, psn: u32, va: u64, rkey: u32, add: u64) {
        self.send_all(&[self.fetch_add_packet(psn, va, rkey, add)]);
    }

    /// The next response (fails the test after [`WAIT`] of silence).
    fn recv(&self) -> Resp {
        let mut buf = vec![0u8; 65536];
        let (n, src) = self.sock.recv_from(&mut buf).expect("a response from the responder");
        let ep = Endpoints::new(src, self.sock.local_addr().unwrap());
        let p = RocePacket::parse(&buf[..n], &ep).expect("a valid response packet");
        Resp {
            opcode: p.bth.opcode,
            psn: p.bth.psn,
            syndrome: p.aeth.map(|a| a.syndrome),
            orig: p.atomic_ack_eth.map(|a| a.orig_data),
            payload: p.payload.to_vec(),
        }
    }

    /// Receives until `done` says so.
    fn recv_until(&self, mut done: impl FnMut(&Resp) -> bool) {
        while !done(&self.recv()) {}
    }
}

/// The responder took `duplicates` duplicate requests, NAKed nothing, and its QP is
/// still in RTS.
fn assert_duplicates_served(b: &Host, eb: &End, duplicates: u64) {
    let c = b.hca.device().counters();
    assert_eq!((c.err_naks_sent, c.duplicates_received), (0, duplicates), "{c:?}");
    assert_eq!(b.hca.qp(eb.qp.qpn()).unwrap().state(), HcaQpState::Rts);
}

/// READ requests sent again after a loss (go-back-N) are duplicates: they are served
/// again from the requested PSN but hold no new responder resource. Here every resource
/// is in use and served, the requester sends all its READs again and then, having the
/// first one's response, one new READ: a ConnectX serves it. (softhca used to count the
/// queued duplicates as outstanding READs and answered the new one with a fatal
/// invalid-request NAK, which `bench read-bw -t 16` on a lossy wire hit now and then.)
#[test]
fn duplicate_reads_take_no_responder_resource() {
    const N: u32 = 4; // max_dest_rd_atomic
    const MTU: usize = 256;
    const PKTS: u32 = 1024; // response packets per READ: the duplicates stay queued a while
    const READ: usize = PKTS as usize * MTU;
    let b = Host::new([127, 1, 5, 20]);
    let o = Opts { rd_atomic: N as u8, mtu: 1, ..Default::default() };
    let (f, eb) = FakeRequester::new(&b, &o, [127, 1, 5, 21]);
    let mem = b.mem((N as usize + 1) * READ, all_access());
    mem.buf.fill_pattern(20);
    let want = mem.buf.read();
    let read = |k: u32| f.read_packet(k * PKTS, mem.addr() + (k as usize * READ) as u64, mem.mr.rkey(), READ as u32);
    // Every response packet carries the bytes its PSN stands for; no NAK ever.
    let check = |r: &Resp| {
        assert!(!r.is_nak(), "the responder NAKed: {r:?} ({:?})", b.hca.device().counters());
        let at = r.psn as usize * MTU;
        assert!(r.payload == want[at..at + MTU], "response PSN {} carries the wrong bytes", r.psn);
    };
    // N READs, all answered: every resource in use, every response sent.
    f.send_all(&(0..N).map(read).collect::<Vec<_>>());
    f.recv_until(|r| {
        check(r);
        r.psn == N * PKTS - 1
    });
    // All N again, then one more.
    f.send_all(&(0..=N).map(read).collect::<Vec<_>>());
    let mut got = HashSet::new();
    f.recv_until(|r| {
        check(r);
        if r.psn >= N * PKTS {
            got.insert(r.psn);
        }
        got.len() == PKTS as usize
    });
    assert_duplicates_served(&b, &eb, N as u64);
}

/// A duplicate atomic is answered with the original's saved result, never executed
/// again, and holds no new resource; one whose resource has since been recycled (the
/// requester has its answer) is ignored.
#[test]
fn duplicate_atomics_are_answered_from_the_saved_result() {
    let b = Host::new([127, 1, 5, 22]);
    let o = Opts { rd_atomic: 2, ..Default::default() };
    let (f, eb) = FakeRequester::new(&b, &o, [127, 1, 5, 23]);
    let counter = b.mem(64, all_access());
    let add = |psn: u32, v: u64| f.fetch_add(psn, counter.addr(), counter.mr.rkey(), v);
    let answers = |n: usize| -> Vec<(u32, u64)> {
        (0..n).map(|_| {
            let r = f.recv();
            assert!(!r.is_nak() && r.opcode == Opcode::RcAtomicAcknowledge, "{r:?}");
            (r.psn, r.orig.unwrap())
        }).collect()
    };
    add(0, 1);
    add(1, 2);
    assert_eq!(answers(2), [(0, 0), (1, 1)]);
    // Both again, twice (their answers were lost), then a new one (the first answer
    // arrived after all): max_dest_rd_atomic 2 is enough.
    for psn in [0, 1, 0, 1] {
        add(psn, 1 + psn as u64);
    }
    add(2, 4);
    assert_eq!(answers(5), [(0, 0), (1, 1), (0, 0), (1, 1), (2, 3)]);
    assert_eq!(counter.buf.read_u64(0), 7, "every atomic ran once");
    // A late copy of the first: its resource went to the third, so no answer; the next
    // answer is the one for the second's duplicate.
    add(0, 1);
    add(1, 2);
    assert_eq!(answers(1), [(1, 1)]);
    assert_eq!(counter.buf.read_u64(0), 7);
    assert_duplicates_served(&b, &eb, 6);
}

/// A requester that really has more READs/atomics outstanding than max_dest_rd_atomic
/// (the oldest response has not even gone out yet) gets an invalid-request NAK and the
/// QP goes to ERR; the request over the limit is not executed. Atomics hold resources
/// as READs do.
#[test]
fn more_reads_and_atomics_than_max_dest_rd_atomic_are_refused() {
    let b = Host::new([127, 1, 5, 24]);
    let o = Opts { rd_atomic: 2, ..Default::default() };
    let (f, eb) = FakeRequester::new(&b, &o, [127, 1, 5, 25]);
    let mem = b.mem(4096, all_access());
    // Two atomics and a READ, taken in one step: the atomics' answers are still queued
    // when the READ arrives.
    f.send_all(&[
        f.fetch_add_packet(0, mem.addr(), mem.mr.rkey(), 1),
        f.fetch_add_packet(1, mem.addr(), mem.mr.rkey(), 2),
        f.read_packet(2, mem.addr() + 8, mem.mr.rkey(), 8),
    ]);
    let nak = loop {
        let r = f.recv();
        assert_ne!(r.opcode, Opcode::RcRdmaReadResponseOnly, "the READ over the limit was executed");
        if r.is_nak() {
            break r;
        }
    };
    assert_eq!((nak.psn, nak.syndrome), (2, Some(Syndrome::Nak(NakCode::InvalidRequest))));
    wait_until("the QP in ERR", || b.hca.qp(eb.qp.qpn()).unwrap().state() == HcaQpState::Err);
    assert_eq!(mem.buf.read_u64(0), 3, "the two atomics within the limit ran");
}

/// One crafted WRITE packet: opcode, payload length, RETH DMA length (first/only).
type WritePkt = (Opcode, usize, Option<u32>);

/// WRITEs whose packets break the length rules each get a NAK invalid request at the
/// offending PSN, write nothing, and put the QP in ERR. The rules are IBA C9-92 as rxe
/// checks them (rxe_resp.c: `check_length`, then `check_rkey`'s RETH comparison; both
/// RESPST_ERR_LENGTH, a class C error: NAK invalid request), and a middle or last packet
/// with no first before it (RESPST_ERR_MISSING_OPCODE_FIRST, class C as well).
#[test]
fn malformed_writes_get_nak_invalid_request() {
    let mtu = 1024;
    let data = vec![0x5au8; 2 * mtu];
    let b = Host::new([127, 1, 5, 60]);
    // (what, packets as (opcode, payload length, RETH length), PSN of the NAK)
    let cases: [(&str, &[WritePkt], u32); 5] = [
        ("only, payload shorter than its RETH", &[(Opcode::RcRdmaWriteOnly, 100, Some(200))], 0),
        ("only, payload longer than its RETH", &[(Opcode::RcRdmaWriteOnly, 300, Some(200))], 0),
        ("first packet shorter than the MTU", &[(Opcode::RcRdmaWriteFirst, 100, Some(3000))], 0),
        ("middle with no first", &[(Opcode::RcRdmaWriteMiddle, mtu, None)], 0),
        ("last longer than the RETH's rest", &[(Opcode::RcRdmaWriteFirst, mtu, Some(1500)), (Opcode::RcRdmaWriteLast, 600, None)], 1),
    ];
    for (i, (what, pkts, nak_psn)) in cases.into_iter().enumerate() {
        let (f, eb) = FakeRequester::new(&b, &Opts::default(), [127, 1, 5, 61 + i as u8]);
        let mem = b.mem(4096, all_access());
        let before = mem.buf.read();
        let dgrams: Vec<Vec<u8>> = pkts.iter().enumerate().map(|(psn, &(op, len, reth))| {
            let mut pkt = RocePacket::new(BthRepr::new(op, f.qpn, psn as u32), &data[..len]);
            pkt.reth = reth.map(|dma_len| RethRepr { va: mem.addr(), rkey: mem.mr.rkey(), dma_len });
            f.bytes(&pkt)
        }).collect();
        for d in &dgrams {
            f.send_all(std::slice::from_ref(d));
        }
        let nak = loop {
            let r = f.recv();
            if r.is_nak() {
                break r;
            }
        };
        assert_eq!((nak.psn, nak.syndrome), (nak_psn, Some(Syndrome::Nak(NakCode::InvalidRequest))), "{what}");
        wait_until("the QP in ERR", || b.hca.qp(eb.qp.qpn()).unwrap().state() == HcaQpState::Err);
        // Packets before the NAKed one were executed as they came (as a NIC and rxe do: after
        // an error the range holds undefined bytes); nothing from the NAKed
        // packet on may land.
        let done: usize = pkts[..nak_psn as usize].iter().map(|p| p.1).sum();
        assert!(mem.buf.read()[done..] == before[done..], "{what}: responder memory changed past byte {done}");
    }
}
