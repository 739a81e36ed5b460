//! libmlx5's `mlx5dv_modify_qp_udp_sport` on softhca, and the UDP source ports stock
//! rdma-core QPs send from: `tests/c/udp_sport.c` (built here with `cc ... -libverbs
//! -lmlx5`) runs under libdoorbell_preload.so with a packet capture on, and the
//! capture is read back here.
//!
//! Expected ports from outside softhca: before the call, RC QP "a" sends (and "b"
//! answers) from the port Linux gives a connection without a flow label,
//! `rdma_get_udp_sport(0, a, b)` (include/rdma/ib_verbs.h; softhca's copy is checked
//! against an independent one in softhca/tests/wire_scapy.rs); after it, "a" sends from
//! the port it asked for while "b" keeps its own. libmlx5 itself decides whether the
//! call may go ahead (it reads `rts2rts_qp_udp_sport` from the HCA capabilities, and
//! refuses UD QPs).
//!
//! Skips, saying so, when cc or the rdma-core headers are missing.

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use softhca::wire::{Endpoints, RocePacket};

fn build() -> Option<PathBuf> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/udp_sport.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("udp_sport");
    let mut args: Vec<std::ffi::OsString> = ["-Wall", "-Wextra", "-Werror", "-Wno-unused-function", "-O1", "-o"].map(Into::into).to_vec();
    args.extend([exe.clone().into_os_string(), src.clone().into_os_string(), "-libverbs".into(), "-lmlx5".into()]);
    testkit::cc(&src, args)?;
    Some(exe)
}

/// (source port, destination QPN) of every RoCEv2 packet in a pcap file (Ethernet, IPv4,
/// UDP), each checked to parse with a valid ICRC for the ports it carries.
fn read_pcap(path: &Path) -> Vec<(u16, u32)> {
    let b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(b.len() >= 24, "pcap too short");
    let mut at = 24;
    let mut out = Vec::new();
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let f = &b[at + 16..at + 16 + incl];
        at += 16 + incl;
        let ip = &f[14..34];
        let sport = u16::from_be_bytes([f[34], f[35]]);
        let src = SocketAddr::from(([ip[12], ip[13], ip[14], ip[15]], sport));
        let dst = SocketAddr::from(([ip[16], ip[17], ip[18], ip[19]], u16::from_be_bytes([f[36], f[37]])));
        let p = RocePacket::parse(&f[42..], &Endpoints::new(src, dst)).expect("a captured packet with a valid ICRC");
        out.push((sport, p.bth.dest_qpn));
    }
    out
}

#[test]
fn mlx5dv_modify_qp_udp_sport_moves_the_qps_packets() {
    let Some(exe) = build() else { return };
    let pcap = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("udp_sport-{}.pcap", std::process::id()));
    let _ = std::fs::remove_file(&pcap);
    let mut cmd = common::stock(&exe, &[]);
    cmd.env(softhca::device::trace::PCAP_ENV, &pcap).env_remove("DOORBELL_UDP_SPORT");
    let done = common::spawn(cmd, "udp_sport").wait_until(Instant::now() + Duration::from_secs(60));
    let report = done.report();
    for name in ["write_before", "modify_udp_sport", "write_after", "ud_refused"] {
        assert!(done.stdout.contains(&format!("CHECK {name} PASS")), "{name}:\n{report}");
    }
    assert!(done.ok(), "{report}");
    let qpns: Vec<u32> = done.stdout.lines().find_map(|l| l.strip_prefix("QPN a "))
        .map(|l| l.split(" b ").map(|n| n.trim().parse().unwrap()).collect()).expect("the QPN line");
    let (a, b) = (qpns[0], qpns[1]);
    let first = softhca::wire::udp_sport::udp_sport(0, a, b);
    let pkts = read_pcap(&pcap);
    let _ = std::fs::remove_file(&pcap);
    let to_b: Vec<u16> = pkts.iter().filter(|p| p.1 == b).map(|p| p.0).collect();
    let to_a: BTreeSet<u16> = pkts.iter().filter(|p| p.1 == a).map(|p| p.0).collect();
    assert!(!to_b.is_empty() && !to_a.is_empty(), "{pkts:?}");
    assert_eq!((to_b[0], *to_b.last().unwrap()), (first, 0xd00d), "a's packets: {to_b:?}");
    assert_eq!(to_b.iter().copied().collect::<BTreeSet<_>>(), [first, 0xd00d].into(), "{to_b:?}");
    assert_eq!(to_a, [first].into(), "b answers from its own port throughout");
}
