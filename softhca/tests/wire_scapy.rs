//! Cross-checks softhca's RoCEv2 emitter and ICRC against scapy (`scapy.contrib.roce`), an
//! independent implementation: the same field values go to `tests/wire_scapy.py`, which
//! builds each packet with scapy, and the two byte strings (ICRC included) must be equal.
//! scapy's packets must also parse here with the ICRC check on.
//!
//! The UDP source ports softhca's QPs send from are checked the same way: the script
//! computes each from Linux's formula (include/rdma/ib_verbs.h), and packets that real
//! softhca QPs put on the wire must come from those ports.
//!
//! Skips, saying so, when python3 or scapy is missing (`pip install scapy`).
//!
//! Addresses: 127.1.14.x (hints, see common::bind_free).

mod common;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};

use softhca::wire::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Endpoints, IethRepr, ImmDtRepr,
    Opcode, RethRepr, RocePacket, Syndrome,
};

/// One packet, described by field values only.
struct Case {
    name: &'static str,
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    /// Variant IP fields scapy sets and softhca does not know: IPv4 TOS/TTL, IPv6 traffic
    /// class/flow label/hop limit. They must not change the ICRC.
    tos_or_tc: u8,
    ttl: u8,
    flow_label: u32,
    pkt: RocePacket<'static>,
}

fn bth(opcode: Opcode, dqpn: u32, psn: u32) -> BthRepr {
    BthRepr::new(opcode, dqpn, psn)
}

fn v4(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

fn cases() -> Vec<Case> {
    static BIG: [u8; 256] = {
        let mut a = [0u8; 256];
        let mut i = 0;
        while i < 256 {
            a[i] = i as u8;
            i += 1;
        }
        a
    };
    let mut out = Vec::new();
    let mut add = |name, src, dst, sport, tos_or_tc, ttl, flow_label, pkt| {
        out.push(Case {
            name,
            src,
            dst,
            sport,
            tos_or_tc,
            ttl,
            flow_label,
            pkt,
        })
    };

    let p = RocePacket::new(bth(Opcode::RcSendFirst, 0x11, 0), &BIG);
    add("send_first", v4(2), v4(3), 49152, 0, 64, 0, p);

    let mut b = bth(Opcode::RcSendOnlyWithImm, 0x000abc, 0xff_fffe);
    b.solicited = true;
    b.ack_req = true;
    let mut p = RocePacket::new(b, b"abc");
    p.immdt = Some(ImmDtRepr { imm: 0xdead_beef });
    // DSCP 46 / ECN 0 and a small TTL: both masked out of the ICRC.
    add("send_only_imm_tos", v4(2), v4(3), 49153, 0xb8, 3, 0, p);

    let mut p = RocePacket::new(
        bth(Opcode::RcRdmaWriteFirst, 0x123456, 0x654321),
        &BIG[..64],
    );
    p.reth = Some(RethRepr {
        va: 0x0000_7f00_dead_0000,
        rkey: 0x0001_2345,
        dma_len: 4096,
    });
    add("write_first", v4(2), v4(3), 50000, 0, 64, 0, p);

    let mut b = bth(Opcode::RcRdmaWriteMiddle, 0x123456, 0x654322);
    b.mig_req = true;
    b.pkey = 0x8001;
    add(
        "write_middle",
        v4(2),
        v4(3),
        50000,
        0,
        64,
        0,
        RocePacket::new(b, &BIG[64..128]),
    );

    let mut p = RocePacket::new(bth(Opcode::RcRdmaWriteOnlyWithImm, 7, 8), &BIG[..7]);
    p.reth = Some(RethRepr {
        va: 1,
        rkey: 2,
        dma_len: 7,
    });
    p.immdt = Some(ImmDtRepr { imm: 0x0102_0304 });
    add("write_only_imm", v4(9), v4(10), 65535, 0, 64, 0, p);

    let mut b = bth(Opcode::RcRdmaReadRequest, 0x42, 0x100);
    b.ack_req = true;
    let mut p = RocePacket::new(b, &[]);
    p.reth = Some(RethRepr {
        va: 0xffff_ffff_ffff_f000,
        rkey: 0xffff_ffff,
        dma_len: 1 << 20,
    });
    add("read_request", v4(2), v4(3), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(
        bth(Opcode::RcRdmaReadResponseFirst, 0x43, 0x100),
        &BIG[..32],
    );
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack {
            credits: softhca::wire::CreditCode::from_credits(100),
        },
        msn: 9,
    });
    add("read_response_first", v4(3), v4(2), 49152, 0, 64, 0, p);

    let p = RocePacket::new(
        bth(Opcode::RcRdmaReadResponseMiddle, 0x43, 0x101),
        &BIG[32..64],
    );
    add("read_response_middle", v4(3), v4(2), 49152, 0, 64, 0, p);

    // A NAK that crossed a congested switch: FECN and BECN set (variant bits).
    let mut b = bth(Opcode::RcAcknowledge, 0x43, 0x102);
    b.fecn = true;
    b.becn = true;
    let mut p = RocePacket::new(b, &[]);
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(softhca::wire::NakCode::RemoteAccessError),
        msn: 0xff_ffff,
    });
    add("nak_remote_access_ecn", v4(3), v4(2), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(bth(Opcode::RcAcknowledge, 0x43, 0x103), &[]);
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::RnrNak {
            timer: softhca::wire::RnrTimer::from_micros(1000),
        },
        msn: 1,
    });
    add("rnr_nak", v4(3), v4(2), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(bth(Opcode::RcCompareSwap, 0x44, 0x200), &[]);
    p.atomic_eth = Some(AtomicEthRepr {
        va: 0x1000,
        rkey: 0xabc,
        swap_add: 0x0123_4567_89ab_cdef,
        compare: 0xfedc_ba98_7654_3210,
    });
    add("compare_swap", v4(2), v4(3), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(bth(Opcode::RcFetchAdd, 0x44, 0x201), &[]);
    p.atomic_eth = Some(AtomicEthRepr {
        va: 0x1008,
        rkey: 0xabc,
        swap_add: 1,
        compare: 0,
    });
    add("fetch_add", v4(2), v4(3), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(bth(Opcode::RcAtomicAcknowledge, 0x45, 0x201), &[]);
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::ACK_UNLIMITED,
        msn: 0x20,
    });
    p.atomic_ack_eth = Some(AtomicAckEthRepr { orig_data: 41 });
    add("atomic_ack", v4(3), v4(2), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(bth(Opcode::RcSendOnlyWithInvalidate, 0x46, 5), &BIG[..10]);
    p.ieth = Some(IethRepr { rkey: 0x0000_1234 });
    add("send_only_inv", v4(2), v4(3), 49152, 0, 64, 0, p);

    let mut p = RocePacket::new(bth(Opcode::UdSendOnly, 0x47, 6), &BIG[..100]);
    p.deth = Some(DethRepr {
        qkey: 0x1111_1111,
        src_qpn: 0xab_cdef,
    });
    add("ud_send_only", v4(2), v4(3), 49152, 0, 64, 0, p);

    // IPv4 carried by IPv4-mapped GIDs (how softhca addresses its hosts).
    let mapped = |n| IpAddr::V6(Ipv4Addr::new(127, 0, 0, n).to_ipv6_mapped());
    let mut p = RocePacket::new(bth(Opcode::RcRdmaWriteOnly, 0x48, 7), &BIG[..5]);
    p.reth = Some(RethRepr {
        va: 0x10,
        rkey: 0x20,
        dma_len: 5,
    });
    add(
        "write_only_mapped_gid",
        mapped(4),
        mapped(5),
        49152,
        0,
        64,
        0,
        p,
    );

    // IPv6 with a traffic class, a flow label and a hop limit (all masked).
    let v6 = |s: &str| IpAddr::V6(s.parse().unwrap());
    let mut p = RocePacket::new(bth(Opcode::UdSendOnlyWithImm, 0x49, 8), &BIG[..13]);
    p.deth = Some(DethRepr {
        qkey: 0x8000_0000,
        src_qpn: 1,
    });
    p.immdt = Some(ImmDtRepr { imm: 7 });
    add(
        "ud_imm_ipv6",
        v6("fd00::1"),
        v6("fd00::2"),
        40000,
        0x12,
        7,
        0xabcde,
        p,
    );

    let mut p = RocePacket::new(bth(Opcode::RcRdmaWriteOnly, 0x4a, 9), &BIG[..64]);
    p.reth = Some(RethRepr {
        va: 0x2000,
        rkey: 0x30,
        dma_len: 64,
    });
    add(
        "write_only_ipv6",
        v6("::1"),
        v6("::1"),
        40001,
        0,
        64,
        0x13287,
        p,
    );

    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn opt<T>(o: Option<T>, f: impl Fn(T) -> String) -> String {
    o.map_or_else(|| "null".to_string(), f)
}

/// The field values as JSON, by hand (the crate has no JSON dependency).
fn to_json(c: &Case) -> String {
    let p = &c.pkt;
    let b = &p.bth;
    let unmapped = |ip: IpAddr| match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4),
        v4 => v4,
    };
    let (src, dst) = (unmapped(c.src), unmapped(c.dst));
    let ipv = if src.is_ipv4() { 4 } else { 6 };
    format!(
        concat!(
            r#"{{"name":"{}","ipv":{},"src":"{}","dst":"{}","sport":{},"dport":4791,"#,
            r#""tos":{},"tc":{},"ttl":{},"fl":{},"#,
            r#""bth":{{"opcode":{},"se":{},"m":{},"pkey":{},"fecn":{},"becn":{},"dqpn":{},"ackreq":{},"psn":{}}},"#,
            r#""deth":{},"reth":{},"atomic_eth":{},"aeth":{},"atomic_ack_eth":{},"immdt":{},"ieth":{},"payload":"{}"}}"#
        ),
        c.name,
        ipv,
        src,
        dst,
        c.sport,
        c.tos_or_tc,
        c.tos_or_tc,
        c.ttl,
        c.flow_label,
        b.opcode.to_byte(),
        u8::from(b.solicited),
        u8::from(b.mig_req),
        b.pkey,
        u8::from(b.fecn),
        u8::from(b.becn),
        b.dest_qpn,
        u8::from(b.ack_req),
        b.psn,
        opt(p.deth, |d| format!("[{},{}]", d.qkey, d.src_qpn)),
        opt(p.reth, |r| format!("[{},{},{}]", r.va, r.rkey, r.dma_len)),
        opt(p.atomic_eth, |a| format!(
            "[{},{},{},{}]",
            a.va, a.rkey, a.swap_add, a.compare
        )),
        opt(p.aeth, |a| format!("[{},{}]", a.syndrome.to_byte(), a.msn)),
        opt(p.atomic_ack_eth, |a| format!("[{}]", a.orig_data)),
        opt(p.immdt, |i| i.imm.to_string()),
        opt(p.ieth, |i| i.rkey.to_string()),
        hex(p.payload),
    )
}

/// Runs the scapy builder, or returns why it could not.
fn run_scapy(json: &str) -> Result<String, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/wire_scapy.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    child
        .stdin
        .take()
        .expect("stdin is piped")
        .write_all(json.as_bytes())
        .map_err(|e| format!("writing to python3: {e}"))?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => Ok(String::from_utf8(out.stdout).expect("hex output")),
        Some(3) => Err(format!("scapy not importable: {}", stderr.trim())),
        _ => panic!("wire_scapy.py failed ({}):\n{stderr}", out.status),
    }
}

#[test]
fn emitted_packets_match_scapy_byte_for_byte() {
    let cases = cases();
    let json = format!(
        "[{}]",
        cases.iter().map(to_json).collect::<Vec<_>>().join(",")
    );
    let stdout = match run_scapy(&json) {
        Ok(s) => s,
        Err(why) => {
            testkit::skip(
                testkit::Need::Tool,
                format!("scapy cross-check not run: {why} (pip install scapy)"),
            );
            return;
        }
    };
    let lines: Vec<(&str, &str)> = stdout
        .lines()
        .map(|l| l.split_once(' ').expect("'name hex' lines"))
        .collect();
    assert_eq!(lines.len(), cases.len(), "scapy output:\n{stdout}");

    let mut checked = 0;
    for (case, (name, scapy_hex)) in cases.iter().zip(lines) {
        assert_eq!(case.name, name);
        let ep = Endpoints::new(
            SocketAddr::new(case.src, case.sport),
            SocketAddr::new(case.dst, 4791),
        );
        let ours = case
            .pkt
            .to_vec(&ep)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(hex(&ours), scapy_hex, "{name}: softhca vs scapy bytes");

        // scapy's bytes parse here, ICRC checked, into the same packet.
        let theirs: Vec<u8> = (0..scapy_hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&scapy_hex[i..i + 2], 16).unwrap())
            .collect();
        let parsed = RocePacket::parse(&theirs, &ep).unwrap_or_else(|e| panic!("{name}: {e}"));
        let pad = (4 - case.pkt.payload.len() % 4) % 4;
        let expect = RocePacket {
            bth: BthRepr {
                pad_count: pad as u8,
                ..case.pkt.bth
            },
            ..case.pkt
        };
        assert_eq!(parsed, expect, "{name}: parsed scapy packet");
        checked += 1;
    }
    eprintln!("scapy cross-check: {checked} packets identical, ICRC included");
}

/// The source ports the script computes for `(flow label, local QPN, remote QPN)`.
fn kernel_sports(tuples: &[(u32, u32, u32)]) -> Result<Vec<u16>, String> {
    let list: Vec<String> = tuples.iter().map(|(f, l, r)| format!("[{f},{l},{r}]")).collect();
    let out = run_scapy(&format!("{{\"sports\": [{}]}}", list.join(",")))?;
    Ok(out.lines().map(|l| l.trim().parse().expect("a port per line")).collect())
}

/// softhca's formula (`wire::udp_sport`) against the script's, over edge cases: QPN
/// products that reach the fold at bit 20 and bit 40, flow labels with their top six bits
/// set, and a flow label wider than 20 bits (masked).
#[test]
fn udp_sport_formula_matches_the_kernel() {
    use softhca::wire::udp_sport::udp_sport;
    let tuples = [(0, 2, 3), (0, 0x10_0000, 1), (0, 0xff_ffff, 0xff_ffff), (0, 0x12_3456, 0xab_cdef), (0, 0x108, 0x109),
                  (0xf_c001, 7, 9), (0x1_2345, 0, 0), (1, 0xff_ffff, 1), (0xf_ffff, 0, 0)];
    let want = match kernel_sports(&tuples) {
        Ok(w) => w,
        Err(why) => return testkit::skip(testkit::Need::Tool, format!("source-port cross-check not run: {why}")),
    };
    for (&(fl, l, r), want) in tuples.iter().zip(want) {
        assert_eq!(udp_sport(fl, l, r), want, "flow label {fl:#x}, QPNs {l:#x} {r:#x}");
    }
}

/// Packets of real QPs leave from the port the kernel's formula gives. RC QPs connected
/// to a bare UDP socket (a peer that never answers: their first request is enough), with
/// and without a flow label: mlx5_ib's `mlx5_set_path` takes the port from the flow
/// label, or from the QPN pair when there is none. A UD QP sends from the port in its
/// address vector's `rlid` field, which libmlx5 fills with the flow label's port
/// (`mlx5_ah_set_udp_sport`); one whose `rlid` is 0 (no RoCEv2 port) sends from 4791.
#[test]
fn qps_send_from_their_udp_source_ports() {
    use common::*;
    use provider::wqe::{DatagramSeg, Payload, SendOp, UdDest};
    use provider::{QpAttr, QpInit, QpState, QpType};

    let peers = [(0u32, 0x4321u32), (0, 0xab_cdef), (0x5_4321, 0x77)];
    let ud_fl = 0x1_2345;
    let b = Host::new([127, 1, 14, 1]);
    let (fake_ip, fake) = bind_free([127, 1, 14, 2]);
    fake.set_read_timeout(Some(WAIT)).unwrap();
    let IpAddr::V4(fake_v4) = fake_ip else { unreachable!() };
    let fake_gid = fake_v4.to_ipv6_mapped().octets();
    let o = Opts::default();
    let mem = b.mem(4096, all_access());

    let mut ends = Vec::new();
    for &(fl, dqpn) in &peers {
        let mut e = End::new(&b, &o);
        e.qp.to_init(1, o.access).expect("INIT");
        let ah = provider::qp::Ah { dgid: fake_gid, sgid_index: softhca::config::IP_GID_INDEX, hop_limit: 64, flow_label: fl,
                                    port: 1, ..Default::default() };
        e.qp.modify(&QpAttr { state: Some(QpState::Rtr), ah: Some(ah), path_mtu: Some(o.mtu), dest_qpn: Some(dqpn),
                              rq_psn: Some(0), max_dest_rd_atomic: Some(o.rd_atomic), min_rnr_timer: Some(o.min_rnr_timer),
                              ..Default::default() }).expect("RTR");
        e.qp.to_rts(0, o.timeout, o.retry_cnt, o.rnr_retry, o.rd_atomic).expect("RTS");
        e.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: 0x1000, rkey: 0x77 }, Payload::Sgl(&[mem.sge(0, 16)]))).unwrap();
        ends.push(e);
    }
    let mut tuples: Vec<(u32, u32, u32)> = peers.iter().zip(&ends).map(|(&(fl, dqpn), e)| (fl, e.qp.qpn(), dqpn)).collect();
    // The UD AV's port, as libmlx5 computes it for an AH with flow label `ud_fl` (the
    // QPNs do not enter: rdma_get_udp_sport with a non-zero label uses the label only).
    tuples.push((ud_fl, 0, 0));
    let want = match kernel_sports(&tuples) {
        Ok(w) => w,
        Err(why) => return testkit::skip(testkit::Need::Tool, format!("source-port check not run: {why}")),
    };

    let scq = b.ctx.create_cq(16, None).unwrap();
    let rcq = b.ctx.create_cq(16, None).unwrap();
    let mut ud = b.pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &rcq, cap: o.cap, qp_type: QpType::Ud, sq_sig_all: false,
                                      send_ops: None }).unwrap();
    ud.modify(&QpAttr { state: Some(QpState::Init), pkey_index: Some(0), port: Some(1), qkey: Some(0x11), ..Default::default() }).unwrap();
    ud.modify(&QpAttr { state: Some(QpState::Rtr), ..Default::default() }).unwrap();
    ud.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(0), ..Default::default() }).unwrap();
    let grh = (1 << 30) | ((softhca::config::IP_GID_INDEX as u32) << 20);
    let ud_sport = want[peers.len()];
    for (qpn, rlid) in [(0x900u32, ud_sport), (0x901, 0)] {
        let av = DatagramSeg::from_raw(0, 0, 1, 0, 0, rlid, [0; 6], 0, 64, grh, fake_gid);
        let sgl = [mem.sge(0, 8)];
        let wr = signaled(SendOp::Send, Payload::Sgl(&sgl)).to_ud(UdDest { av: &av, remote_qpn: qpn, qkey: 0x11 });
        ud.post_send(qpn as u64, &wr).unwrap();
    }

    // The first packet to each destination QP, and where it came from.
    let mut expect: std::collections::HashMap<u32, u16> =
        ends.iter().zip(&peers).zip(&want).map(|((_, &(_, dqpn)), &w)| (dqpn, w)).collect();
    expect.insert(0x900, ud_sport);
    expect.insert(0x901, 4791);
    let mut seen = std::collections::HashMap::new();
    let mut buf = vec![0u8; 65536];
    while seen.len() < expect.len() {
        let (n, src) = fake.recv_from(&mut buf).expect("a packet from every QP");
        assert_eq!(src.ip(), b.addr());
        let p = RocePacket::parse(&buf[..n], &Endpoints::new(src, fake.local_addr().unwrap()))
            .expect("a valid packet, its ICRC computed for the port it came from");
        seen.entry(p.bth.dest_qpn).or_insert(src.port());
    }
    for (dqpn, port) in &expect {
        assert_eq!(seen.get(dqpn), Some(port), "packets to QP {dqpn:#x}: {seen:?}");
    }
    assert!(want[..peers.len()].iter().all(|&p| p >= 0xc000));
}
