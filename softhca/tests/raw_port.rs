//! Raw Ethernet through softhca's port, end to end, with stock libibverbs + libmlx5
//! (`preload/tests/c/raw_qp.c` under libdoorbell_preload.so) driving a RAW_PACKET QP
//! in one network namespace and the Linux stack, scapy and a packet socket in another,
//! joined by a veth pair (softhca's port is `DOORBELL_ETH_IF`, an AF_PACKET socket on
//! its end):
//! - frames the QP sends are seen byte-exact by a packet socket on the far end (a
//!   frame shorter than 60 bytes padded with zeros to 60, as a MAC pads it);
//! - frames sent there by scapy arrive in the QP's receive buffers byte-exact, and
//!   frames the Linux stack sends (a UDP datagram, an ICMP echo request) arrive with
//!   their headers and payload as sent and checksums that scapy verifies; the CQEs
//!   carry what mlx5dv.h / the kernel's en.h define: L2|L3|L4 OK (7) and
//!   l4_hdr_type_etc 0x28 (UDP over IPv4) for UDP, L2|L3 OK and 0x08 for ICMP;
//! - a RoCEv2 datagram (UDP 4791) to the instance's address is the RDMA transport's,
//!   not the raw QP's;
//! - malformed send WQEs (written by hand through mlx5dv) complete with
//!   IBV_WC_LOC_QP_OP_ERR (no Ethernet segment) and IBV_WC_LOC_LEN_ERR (a frame
//!   shorter than an Ethernet header), `enum ibv_wc_status` 2 and 1.
//! Until flow steering is connected, received frames reach the QP through the
//! test-only fan-out (`DOORBELL_ETH_TEST_FANOUT=1`).
//!
//! SKIP when not root, or when ip, cc, the rdma-core headers, python3 or scapy are
//! missing.

#[path = "../preload/tests/common/mod.rs"]
mod pcommon;
mod netns;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use netns::{is_root, sh, wait_output, Link};
use testkit::Need;

fn build() -> Option<PathBuf> {
    if !Path::new("/usr/include/infiniband/mlx5dv.h").exists() {
        testkit::skip(Need::Tool, "infiniband/mlx5dv.h missing (apt-get install libibverbs-dev)");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("preload/tests/c/raw_qp.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("raw_port_qp");
    testkit::cc(&src, [
        std::ffi::OsStr::new("-Wall"), "-Wextra".as_ref(), "-Werror".as_ref(), "-Wno-unused-function".as_ref(),
        "-O1".as_ref(), "-o".as_ref(), exe.as_os_str(), src.as_os_str(), "-libverbs".as_ref(), "-lmlx5".as_ref(),
    ])?;
    Some(exe)
}

/// Root, ip, python3 with scapy, and the test program; None (with a SKIP line) otherwise.
fn prerequisites() -> Option<PathBuf> {
    if !is_root() {
        testkit::skip(Need::Root, "network namespaces and RAW_PACKET QPs need root");
        return None;
    }
    if !sh("command -v ip >/dev/null") {
        testkit::skip(Need::Tool, "ip missing (apt-get install iproute2)");
        return None;
    }
    if !sh("python3 -c 'import scapy' 2>/dev/null") {
        testkit::skip(Need::Tool, "python3 with scapy missing (apt-get install python3-scapy)");
        return None;
    }
    build()
}

/// Prints READY once bound, then `FRAME <hex>` for each frame of ethertype argv[2]
/// received on interface argv[1].
const SNIFF: &str = r#"
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(int(sys.argv[2], 16)))
s.bind((sys.argv[1], 0))
print("READY", flush=True)
while True:
    b, addr = s.recvfrom(65535)
    if addr[2] != socket.PACKET_OUTGOING:
        print("FRAME", b.hex(), flush=True)
"#;

#[test]
fn frames_sent_by_a_raw_qp_arrive_byte_exact() {
    let Some(exe) = prerequisites() else { return };
    let l = Link::new("rp", 78, 1);
    let sniff = pcommon::spawn(l.python(SNIFF, &[&l.if_b, "88b5"]), "sniffer");
    wait_output(&sniff, "sniffer READY", |o| o.contains("READY"));
    let head = format!("{}{}88b5", Link::mac_hex(&l.mac_b), Link::mac_hex(&l.mac_a));
    let body = |n: usize| (0..n).map(|i| format!("{:02x}", (i * 7 + 3) % 256)).collect::<String>();
    // 14 + 28 = 42 bytes (padded to 60 on the wire), 60, 100 and a full 1514.
    let frames: Vec<String> = [28, 46, 86, 1500].iter().map(|&n| format!("{head}{}", body(n))).collect();
    let args: Vec<&str> = std::iter::once("send").chain(frames.iter().map(String::as_str)).collect();
    let done = pcommon::spawn(l.softhca(&exe, &args, false), "raw_qp send").wait_until(Instant::now() + Duration::from_secs(120));
    let report = done.report();
    for i in 0..frames.len() {
        assert!(done.stdout.contains(&format!("CHECK sent_{i} PASS")), "{report}");
    }
    assert!(done.ok(), "{report}");
    let out = wait_output(&sniff, "every frame at the far end", |o| o.matches("FRAME ").count() >= frames.len());
    let seen: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("FRAME ")).collect();
    let mut want = frames.clone();
    want[0].push_str(&"00".repeat(60 - 42));
    assert_eq!(seen, want.iter().map(String::as_str).collect::<Vec<_>>(), "frames as sent (the short one padded to 60)");
}

/// One FRAME line of `raw_qp recv`: status, byte_len, hds_ip_ext, l4_hdr_type_etc,
/// flow tag, bytes.
#[derive(Debug)]
struct Rx {
    status: String,
    len: usize,
    hds: u8,
    l4l3: u8,
    flow_tag: u32,
    hex: String,
}

fn received(out: &str) -> Vec<Rx> {
    out.lines()
        .filter_map(|l| l.strip_prefix("FRAME "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            Rx {
                status: f[0].to_string(),
                len: f[1].parse().unwrap(),
                hds: u8::from_str_radix(f[2], 16).unwrap(),
                l4l3: u8::from_str_radix(f[3], 16).unwrap(),
                flow_tag: u32::from_str_radix(f[4], 16).unwrap(),
                hex: f.get(5).unwrap_or(&"").to_string(),
            }
        })
        .collect()
}

/// Sends, from namespace b: a RoCEv2 probe through the Linux stack (UDP to 4791), a
/// frame built by scapy (its bytes printed), a UDP datagram and an ICMP echo request
/// through the Linux stack, and a last scapy frame as the end marker.
const SENDERS: &str = r#"
import socket, sys
from scapy.all import Ether, IP, UDP, Raw, sendp
mac_a, mac_b, ip_a, ip_b, ifn, tag = sys.argv[1:7]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(b"roce-probe-" + tag.encode(), (ip_a, 4791))
p = Ether(dst=mac_a, src=mac_b)/IP(src=ip_b, dst=ip_a)/UDP(sport=1234, dport=4321)/Raw(b"scapy-" + tag.encode())
sendp(p, iface=ifn, verbose=False)
print("SCAPY", bytes(p).hex(), flush=True)
s.sendto(b"linux-udp-" + tag.encode(), (ip_a, 9999))
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
r.sendto(bytes.fromhex("0800f7fe00010000") , (ip_a, 0))
m = Ether(dst=mac_a, src=mac_b, type=0x88b5)/Raw(b"end-" + tag.encode() + b"." * 40)
sendp(m, iface=ifn, verbose=False)
print("MARKER", bytes(m).hex(), flush=True)
"#;

/// Prints "<ip checksum ok> <udp checksum ok>" for the frame in argv[1], recomputed by
/// scapy.
const CHECKSUMS: &str = r#"
import sys
from scapy.all import Ether, IP, UDP
p = Ether(bytes.fromhex(sys.argv[1]))
c = p.copy()
del c[IP].chksum
del c[UDP].chksum
c = Ether(bytes(c))
print(c[IP].chksum == p[IP].chksum, c[UDP].chksum == p[UDP].chksum)
"#;

#[test]
fn frames_from_scapy_and_the_linux_stack_reach_the_raw_qp() {
    let Some(exe) = prerequisites() else { return };
    let l = Link::new("rp", 78, 2);
    let rx = pcommon::spawn(l.softhca(&exe, &["recv", "0"], true), "raw_qp recv");
    wait_output(&rx, "receiver READY", |o| o.contains("READY"));
    let tag = format!("{}", std::process::id());
    let senders = pcommon::spawn(
        l.python(SENDERS, &[&l.mac_a, &l.mac_b, &l.ip_a, &l.ip_b, &l.if_b, &tag]),
        "senders",
    )
    .wait_until(Instant::now() + Duration::from_secs(120));
    assert!(senders.ok(), "{}", senders.report());
    let line = |k: &str| senders.stdout.lines().find_map(|l| l.strip_prefix(k)).map(str::to_string).unwrap();
    let (scapy, marker) = (line("SCAPY "), line("MARKER "));
    let out = wait_output(&rx, "the end marker", |o| o.contains(&marker));
    let frames = received(&out);
    let hex_of = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
    // The probe went before the marker on the same wire: had it been delivered, it
    // would be here.
    assert!(!frames.iter().any(|f| f.hex.contains(&hex_of("roce-probe-"))), "RoCEv2 reached the raw QP: {frames:?}");
    for f in &frames {
        assert_eq!((f.status.as_str(), f.len * 2, f.flow_tag), ("success", f.hex.len(), 0), "{f:?}");
    }
    let s = frames.iter().find(|f| f.hex == scapy).unwrap_or_else(|| panic!("scapy frame missing: {frames:?}"));
    assert_eq!((s.hds, s.l4l3), (7, 0x28), "UDP over IPv4, all OK");
    let ether = format!("{}{}0800", Link::mac_hex(&l.mac_a), Link::mac_hex(&l.mac_b));
    let u = frames.iter().find(|f| f.hex.ends_with(&hex_of(&format!("linux-udp-{tag}"))))
        .unwrap_or_else(|| panic!("Linux UDP datagram missing: {frames:?}"));
    assert!(u.hex.starts_with(&ether), "{u:?}");
    // UDP destination port 9999 after a 20-byte IPv4 header.
    assert_eq!(&u.hex[(14 + 20 + 2) * 2..(14 + 20 + 4) * 2], "270f", "{u:?}");
    assert_eq!((u.hds, u.l4l3), (7, 0x28), "{u:?}");
    let ck = pcommon::spawn(l.python(CHECKSUMS, &[&u.hex]), "scapy checksums").wait_until(Instant::now() + Duration::from_secs(60));
    assert_eq!(ck.stdout.trim(), "True True", "{}", ck.report());
    let icmp = frames.iter().find(|f| f.hex.starts_with(&ether) && f.hex.ends_with("0800f7fe00010000"))
        .unwrap_or_else(|| panic!("ICMP echo request missing: {frames:?}"));
    assert_eq!((icmp.hds, icmp.l4l3), (3, 0x08), "IPv4, no TCP/UDP: {icmp:?}");
    let m = frames.iter().find(|f| f.hex == marker).unwrap();
    assert_eq!((m.hds, m.l4l3), (1, 0), "not IP: {m:?}");
}

#[test]
fn malformed_raw_send_wqes_complete_with_the_mlx5_syndromes() {
    let Some(exe) = prerequisites() else { return };
    let l = Link::new("rp", 78, 3);
    for (kind, status) in [("noeth", "2"), ("short", "1")] {
        let done = pcommon::spawn(l.softhca(&exe, &["bad", kind], false), format!("raw_qp bad {kind}"))
            .wait_until(Instant::now() + Duration::from_secs(120));
        let report = done.report();
        let line = done.stdout.lines().find_map(|l| l.strip_prefix(&format!("BAD {kind} "))).unwrap_or_else(|| panic!("{report}"));
        let fields: Vec<&str> = line.rsplit(' ').collect();
        assert_eq!(fields[1], status, "ibv_wc_status of {kind}: {report}");
        assert!(done.ok(), "{report}");
    }
}
