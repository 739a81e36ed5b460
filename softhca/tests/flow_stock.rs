//! Flow steering end to end with stock libibverbs + libmlx5 (`preload/tests/c/flow_qp.c`
//! under libdoorbell_preload.so): a RAW_PACKET QP in one network namespace, softhca's
//! port on a veth there (`DOORBELL_ETH_IF`, the test-only fan-out off), the Linux stack
//! sending UDP datagrams from the other namespace:
//! - (a) `ibv_create_flow` for a UDP destination port with a flow tag: the QP receives
//!   exactly the datagrams to that port (the ones to the next port reach no QP), each
//!   CQE with the tag; the QP's destroy is EBUSY while the flow lives; destroying the
//!   flow, then the QP, succeeds.
//! - (b) `mlx5dv_create_flow_matcher` + `mlx5dv_create_flow` to the QP with a DevX flow
//!   counter (`preload/tests/c/flow_dv.c`): the QP gets exactly that port's
//!   datagrams, the counter counts them, packets and bytes (the sum of the
//!   completions' byte_len); the matcher's destroy is EBUSY while the flow lives.
//! - (c) a DevX flow table with one drop entry counting into a DevX counter, a matcher
//!   flow forwarding the port there at priority 0 while `ibv_create_flow` flows send
//!   it and the next port to the QP at priority 1: the port's datagrams are dropped
//!   (counted: packets, and bytes from the RFC 791/768 header sizes), the next port's
//!   arrive.
//!
//! SKIP when not root, or when ip, cc, the rdma-core headers or python3 are missing.

#[path = "../preload/tests/common/mod.rs"]
mod pcommon;
mod netns;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use netns::{is_root, sh, wait_output, Link};
use testkit::Need;

/// Root, ip, python3 and the test program; None (with a SKIP line) otherwise.
fn prerequisites() -> Option<PathBuf> {
    program("flow_qp")
}

/// Root, ip, python3 and test program `name` (preload/tests/c/NAME.c), built.
fn program(name: &str) -> Option<PathBuf> {
    if !is_root() {
        testkit::skip(Need::Root, "network namespaces and RAW_PACKET QPs need root");
        return None;
    }
    if !sh("command -v ip >/dev/null") {
        testkit::skip(Need::Tool, "ip missing (apt-get install iproute2)");
        return None;
    }
    if !sh("command -v python3 >/dev/null") {
        testkit::skip(Need::Tool, "python3 missing");
        return None;
    }
    if !Path::new("/usr/include/infiniband/mlx5dv.h").exists() {
        testkit::skip(Need::Tool, "infiniband/mlx5dv.h missing (apt-get install libibverbs-dev)");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("preload/tests/c/{name}.c"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("flow_stock_{name}"));
    testkit::cc(&src, [
        std::ffi::OsStr::new("-Wall"), "-Wextra".as_ref(), "-Werror".as_ref(), "-Wno-unused-function".as_ref(),
        "-O1".as_ref(), "-o".as_ref(), exe.as_os_str(), src.as_os_str(), "-libverbs".as_ref(), "-lmlx5".as_ref(),
    ])?;
    Some(exe)
}

/// From namespace b through the Linux stack: `hit-i` to argv[2] and `miss-i` to
/// argv[2]+1, interleaved, three each, then `...end` to argv[2].
const SENDERS: &str = r#"
import socket, sys
ip, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3):
    s.sendto(b"hit-%d" % i, (ip, port))
    s.sendto(b"miss-%d" % i, (ip, port + 1))
s.sendto(b"marker-end", (ip, port))
"#;

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn ibv_create_flow_steers_one_udp_port_into_the_raw_qp() {
    let Some(exe) = prerequisites() else { return };
    let l = Link::new("fs", 79, 1);
    let (port, tag) = (4242u16, 0xabcdeu32);
    let rx = pcommon::spawn(l.softhca(&exe, &["udp", &port.to_string(), &tag.to_string()], false), "flow_qp udp");
    wait_output(&rx, "receiver READY", |o| o.contains("READY") || o.contains("FAIL"));
    let senders = pcommon::spawn(l.python(SENDERS, &[&l.ip_a, &port.to_string()]), "senders")
        .wait_until(Instant::now() + Duration::from_secs(60));
    assert!(senders.ok(), "{}", senders.report());
    let done = rx.wait_until(Instant::now() + Duration::from_secs(60));
    assert!(done.ok(), "{}", done.report());
    assert!(done.stdout.contains("CHECK destroy_qp_with_flow_busy PASS"), "{}", done.report());
    let frames: Vec<(String, u32, String)> = done.stdout.lines().filter_map(|l| l.strip_prefix("FRAME ")).map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f[0].to_string(), u32::from_str_radix(f[2], 16).unwrap(), f.get(3).unwrap_or(&"").to_string())
    }).collect();
    let payloads = ["hit-0", "hit-1", "hit-2", "marker-end"];
    assert_eq!(frames.len(), payloads.len(), "exactly the datagrams to port {port}: {frames:?}");
    for ((status, t, bytes), p) in frames.iter().zip(payloads) {
        assert_eq!((status.as_str(), *t), ("success", tag), "{frames:?}");
        // UDP destination port after the 14-byte Ethernet and 20-byte IPv4 headers.
        assert_eq!(&bytes[(14 + 20 + 2) * 2..(14 + 20 + 4) * 2], format!("{port:04x}"), "{bytes}");
        assert!(bytes.ends_with(&hex(p)), "{p}: {bytes}");
    }
}

/// From namespace b through the Linux stack: `dv-i` to argv[2] and `other-i` to
/// argv[2]+1, interleaved, three each, then `...end` to argv[3].
const DV_SENDERS: &str = r#"
import socket, sys
ip, port, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(3):
    s.sendto(b"dv-%d" % i, (ip, port))
    s.sendto(b"other-%d" % i, (ip, port + 1))
s.sendto(b"marker-end", (ip, last))
"#;

/// Runs flow_dv `mode` on `port`, the senders ending on `last`: (frames, counter).
fn run_dv(n: u8, mode: &str, port: u16, last: u16) -> Option<(Vec<(String, u32, String)>, (u64, u64))> {
    let exe = program("flow_dv")?;
    let l = Link::new("fs", 79, n);
    let rx = pcommon::spawn(l.softhca(&exe, &[mode, &port.to_string()], false), "flow_dv");
    wait_output(&rx, "receiver READY", |o| o.contains("READY") || o.contains("FAIL"));
    let senders = pcommon::spawn(l.python(DV_SENDERS, &[&l.ip_a, &port.to_string(), &last.to_string()]), "senders")
        .wait_until(Instant::now() + Duration::from_secs(60));
    assert!(senders.ok(), "{}", senders.report());
    let done = rx.wait_until(Instant::now() + Duration::from_secs(60));
    assert!(done.ok(), "{}", done.report());
    let frames = done.stdout.lines().filter_map(|l| l.strip_prefix("FRAME ")).map(|l| {
        let f: Vec<&str> = l.split(' ').collect();
        (f[0].to_string(), f[1].parse().unwrap(), f.get(2).unwrap_or(&"").to_string())
    }).collect();
    let c = done.stdout.lines().find_map(|l| l.strip_prefix("COUNTER ")).unwrap_or_else(|| panic!("{}", done.report()));
    let c: Vec<u64> = c.split(' ').map(|v| v.parse().unwrap()).collect();
    Some((frames, (c[0], c[1])))
}

#[test]
fn mlx5dv_flow_to_the_qp_counts_into_a_devx_counter() {
    let port = 4300u16;
    let Some((frames, counter)) = run_dv(2, "counter", port, port) else { return };
    let payloads = ["dv-0", "dv-1", "dv-2", "marker-end"];
    assert_eq!(frames.len(), payloads.len(), "exactly the datagrams to port {port}: {frames:?}");
    for ((status, _, bytes), p) in frames.iter().zip(payloads) {
        assert_eq!(status, "success");
        assert_eq!(&bytes[(14 + 20 + 2) * 2..(14 + 20 + 4) * 2], format!("{port:04x}"), "{bytes}");
        assert!(bytes.ends_with(&hex(p)), "{p}: {bytes}");
    }
    let bytes: u64 = frames.iter().map(|f| f.1 as u64).sum();
    assert_eq!(counter, (4, bytes), "packets and bytes of what the entry matched");
}

#[test]
fn a_devx_flow_table_drops_what_a_matcher_forwards_to_it() {
    let port = 4400u16;
    let Some((frames, counter)) = run_dv(3, "drop", port, port + 1) else { return };
    let payloads = ["other-0", "other-1", "other-2", "marker-end"];
    assert_eq!(frames.len(), payloads.len(), "only port {}: {frames:?}", port + 1);
    for ((status, _, bytes), p) in frames.iter().zip(payloads) {
        assert_eq!(status, "success");
        assert_eq!(&bytes[(14 + 20 + 2) * 2..(14 + 20 + 4) * 2], format!("{:04x}", port + 1), "{bytes}");
        assert!(bytes.ends_with(&hex(p)), "{p}: {bytes}");
    }
    // Three frames of Ethernet (14) + IPv4 (20) + UDP (8) + 4 payload bytes.
    assert_eq!(counter, (3, 3 * (14 + 20 + 8 + 4)), "the drop entry's counter");
}
