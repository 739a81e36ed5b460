//! Writes a capture of softhca-emitted RoCEv2 packets and checks that tshark (Wireshark's
//! dissectors, an independent decoder) reads back every field: opcode, destination QP, PSN,
//! RETH (VA, R_Key, DMA length), AETH, AtomicETH, ImmDt, DETH, an XRC opcode (and the
//! XRCETH's bytes, which Wireshark 4.0 does not dissect), the ICRC trailer, and the IP
//! and UDP checksums of the reconstructed framing.
//!
//! Wireshark 4.0 displays the ICRC but does not verify it (scapy does, in wire_scapy.rs);
//! this test checks that it shows the value softhca appended. The expected strings are the
//! labels of Wireshark 4.0 (Debian 12's tshark); another release may word them differently.
//!
//! Skips, saying so, when tshark is not installed.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use softhca::wire::pcap::PcapWriter;
use softhca::wire::{
    AethRepr, AtomicEthRepr, BthRepr, CreditCode, DethRepr, Endpoints, ImmDtRepr, NakCode, Opcode,
    RethRepr, RocePacket, Syndrome,
};

fn tshark() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/tshark");
    if fixed.exists() {
        return Some(fixed);
    }
    Command::new("tshark")
        .arg("-v")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| PathBuf::from("tshark"))
}

fn ep(a: u8, b: u8, sport: u16) -> Endpoints {
    Endpoints::new(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, a)), sport),
        SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, b)), 4791),
    )
}

/// (flow, packet, strings tshark -V must print for it)
fn packets() -> Vec<(Endpoints, Vec<u8>, Vec<String>)> {
    let payload: Vec<u8> = (0..64u8).collect();
    let mut out = Vec::new();

    let mut b = BthRepr::new(Opcode::RcRdmaWriteFirst, 0x12_3456, 0x65_4321);
    b.pkey = 0xffff;
    let mut p = RocePacket::new(b, &payload);
    p.reth = Some(RethRepr {
        va: 0x0000_7f00_dead_0000,
        rkey: 0x0001_2345,
        dma_len: 8192,
    });
    let e = ep(2, 3, 49152);
    out.push((
        e,
        p.to_vec(&e).unwrap(),
        vec![
            "Opcode: Reliable Connection (RC) - RDMA WRITE First (6)".into(),
            "Destination Queue Pair: 0x123456".into(),
            format!("Packet Sequence Number: {}", 0x65_4321),
            "Virtual Address: 0x00007f00dead0000".into(),
            "Remote Key: 0x00012345".into(),
            "DMA Length: 8192".into(),
        ],
    ));

    let mut b = BthRepr::new(Opcode::RcRdmaWriteOnly, 0x00_0abc, 7);
    b.ack_req = true;
    let mut p = RocePacket::new(b, &payload[..5]);
    p.reth = Some(RethRepr {
        va: 0x1000,
        rkey: 0xdead_beef,
        dma_len: 5,
    });
    out.push((
        e,
        p.to_vec(&e).unwrap(),
        vec![
            "Opcode: Reliable Connection (RC) - RDMA WRITE Only (10)".into(),
            "Destination Queue Pair: 0x000abc".into(),
            "Packet Sequence Number: 7".into(),
            "Acknowledge Request: True".into(),
            "Pad Count: 3".into(),
            "Virtual Address: 0x0000000000001000".into(),
            "Remote Key: 0xdeadbeef".into(),
            "DMA Length: 5".into(),
        ],
    ));

    let mut p = RocePacket::new(BthRepr::new(Opcode::RcAcknowledge, 0x00_0def, 7), &[]);
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::Ack {
            credits: CreditCode::from_credits(16),
        },
        msn: 42,
    });
    // Replies also go to UDP port 4791, from the responder QP's source port: without a
    // flow label the same as the requester's (the flow label made from the QPN pair is
    // symmetric, see softhca::wire::udp_sport).
    let r = ep(3, 2, 49152);
    out.push((
        r,
        p.to_vec(&r).unwrap(),
        vec![
            "Opcode: Reliable Connection (RC) - Acknowledge (17)".into(),
            "Destination Queue Pair: 0x000def".into(),
            "OpCode: Ack (0)".into(),
            "Credit Count: 8".into(), // code 8 = 16 credits
            "Message Sequence Number: 42".into(),
        ],
    ));

    let mut p = RocePacket::new(BthRepr::new(Opcode::RcAcknowledge, 0x00_0def, 8), &[]);
    p.aeth = Some(AethRepr {
        syndrome: Syndrome::Nak(NakCode::RemoteAccessError),
        msn: 43,
    });
    out.push((
        r,
        p.to_vec(&r).unwrap(),
        vec![
            "Opcode: Reliable Connection (RC) - Acknowledge (17)".into(),
            "OpCode: Nak (3)".into(),
            "Error Code: Remote Access Error (2)".into(),
            "Message Sequence Number: 43".into(),
        ],
    ));

    let mut p = RocePacket::new(BthRepr::new(Opcode::RcCompareSwap, 0x00_0abc, 9), &[]);
    p.atomic_eth = Some(AtomicEthRepr {
        va: 0x0000_5555_0000_1008,
        rkey: 0x0000_4321,
        swap_add: 0x0123_4567_89ab_cdef,
        compare: 0x0000_0000_0000_0011,
    });
    out.push((
        e,
        p.to_vec(&e).unwrap(),
        vec![
            "Opcode: Reliable Connection (RC) - CmpSwap (19)".into(),
            "Destination Queue Pair: 0x000abc".into(),
            "Packet Sequence Number: 9".into(),
            "Virtual Address: 0x0000555500001008".into(),
            "Remote Key: 0x00004321".into(),
            format!("Swap (Or Add) Data: {}", 0x0123_4567_89ab_cdefu64),
            "Compare Data: 17".into(),
        ],
    ));

    let mut b = BthRepr::new(Opcode::RcSendOnlyWithImm, 0x00_0abc, 10);
    b.solicited = true;
    let mut p = RocePacket::new(b, b"hi");
    p.immdt = Some(ImmDtRepr { imm: 0xcafe_f00d });
    out.push((
        e,
        p.to_vec(&e).unwrap(),
        vec![
            "Opcode: Reliable Connection (RC) - SEND Only with Immediate (5)".into(),
            "Solicited Event: True".into(),
            "Packet Sequence Number: 10".into(),
            "Immediate Data: cafef00d".into(),
            "Pad Count: 2".into(),
        ],
    ));

    let mut p = RocePacket::new(BthRepr::new(Opcode::UdSendOnly, 0x00_0077, 11), b"dgram");
    p.deth = Some(DethRepr {
        qkey: 0x1111_1111,
        src_qpn: 0x00_0099,
    });
    out.push((
        e,
        p.to_vec(&e).unwrap(),
        vec![
            "Opcode: Unreliable Datagram (UD) - SEND only (100)".into(),
            "Destination Queue Pair: 0x000077".into(),
            "Queue Key: 0x0000000011111111".into(),
            "Source Queue Pair: 0x00000099".into(),
        ],
    ));

    // XRC SEND ONLY: the XRCETH right after the BTH names the XRC SRQ. Wireshark 4.0
    // names the opcode but has no XRCETH dissector: it shows what follows the BTH as
    // "vendor specific" bytes, which must be the XRCETH (reserved byte, SRQ 0x002a17)
    // and then the payload.
    let mut p = RocePacket::new(BthRepr::new(Opcode::XrcSendOnly, 0x00_0123, 12), b"xrc!");
    p.xrceth = Some(softhca::wire::XrcEthRepr { xrc_srqn: 0x00_2a17 });
    out.push((
        e,
        p.to_vec(&e).unwrap(),
        vec![
            "Opcode: Extended Reliable Connection (XRC) - SEND Only (164)".into(),
            "Destination Queue Pair: 0x000123".into(),
            "Unknown/Vendor Specific Data: 00002a1778726321".into(),
        ],
    ));
    out
}

#[test]
fn tshark_decodes_emitted_packets() {
    let Some(tshark) = tshark() else {
        testkit::skip(
            testkit::Need::Tool,
            "tshark not installed (apt-get install tshark); RoCEv2 dissection not checked",
        );
        return;
    };
    let pkts = packets();
    let path = std::env::temp_dir().join(format!("softhca-wire-{}.pcap", std::process::id()));
    {
        let file = std::fs::File::create(&path).unwrap();
        let mut w = PcapWriter::new(std::io::BufWriter::new(file)).unwrap();
        for (i, (e, bytes, _)) in pkts.iter().enumerate() {
            let ts = Duration::new(1_700_000_000, i as u32 * 1000);
            w.write_roce(ts, e, bytes).unwrap();
        }
        w.into_inner().flush().unwrap();
    }
    let out = Command::new(&tshark)
        .arg("-r")
        .arg(&path)
        .arg("-V")
        .args([
            "-o",
            "ip.check_checksum:TRUE",
            "-o",
            "udp.check_checksum:TRUE",
        ])
        .output()
        .expect("run tshark");
    let _ = std::fs::remove_file(&path);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "tshark failed: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let frames: Vec<&str> = text.split("\nFrame ").collect();
    assert_eq!(
        frames.len(),
        pkts.len(),
        "one tshark frame per packet:\n{text}"
    );

    for (i, ((e, bytes, expect), frame)) in pkts.iter().zip(&frames).enumerate() {
        let n = bytes.len();
        // Wireshark prints the trailer's four bytes as a big-endian number.
        let icrc = u32::from_be_bytes(bytes[n - 4..].try_into().unwrap());
        let mut want = expect.clone();
        // Without an XRCETH dissector the ICRC is the end of the raw bytes after the BTH.
        let icrc_row = if bytes[0] >> 5 == 5 {
            let raw: String = bytes[12..].iter().map(|b| format!("{b:02x}")).collect();
            format!("Unknown/Vendor Specific Data: {raw}")
        } else {
            format!("Invariant CRC: {icrc:#010x}")
        };
        want.extend([
            "InfiniBand".to_string(),
            "Base Transport Header".to_string(),
            icrc_row,
            "Destination Port: 4791".to_string(),
            format!("Source Port: {}", e.src.port()),
        ]);
        for w in &want {
            assert!(
                frame.contains(w.as_str()),
                "frame {}: missing {w:?} in:\n{frame}",
                i + 1
            );
        }
        // The reconstructed IPv4 and UDP headers have correct checksums.
        assert!(
            frame.matches("[Header checksum status: Good]").count() == 1,
            "frame {}: IPv4 checksum not good:\n{frame}",
            i + 1
        );
        assert!(
            frame.contains("[Checksum Status: Good]"),
            "frame {}: UDP checksum not good:\n{frame}",
            i + 1
        );
        assert!(
            !frame.contains("Malformed"),
            "frame {}: malformed:\n{frame}",
            i + 1
        );
    }
}
