//! `doorbell devinfo` against stock `ibv_devinfo` running on the same softhca through
//! the preload shim: the two outputs must be identical, line for line.

#[path = "../../softhca/preload/tests/common/mod.rs"]
mod stock;

use std::net::{Ipv4Addr, UdpSocket};
use std::process::Command;

/// Runs `cmd`: its stdout, or None when its softhca address was taken meanwhile.
fn run(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().expect("spawn");
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("Address already in use") || err.contains("os error 98") {
            return None;
        }
        panic!("{cmd:?} failed: {err}");
    }
    Some(String::from_utf8(out.stdout).unwrap())
}

/// An address whose RoCEv2 port nobody holds now: `127.231.x.y`, away from the
/// `127.0.0.N` range softhca hands out by default, with `x.y` varying per process and
/// per `attempt`, so two runs of this test at once pick different ones.
fn free_addr(attempt: u32) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let mut x = std::process::id().wrapping_mul(0x9e37_79b9) ^ nanos ^ attempt.wrapping_mul(0x85eb_ca6b);
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let ip = Ipv4Addr::new(127, 231, (x >> 8) as u8, (x as u8).clamp(1, 254));
        if UdpSocket::bind((ip, 4791)).is_ok() {
            return ip.to_string();
        }
    }
    panic!("no free 127.231.x.y address");
}

#[test]
fn devinfo_matches_stock_ibv_devinfo() {
    if Command::new("ibv_devinfo").arg("--help").output().is_err() {
        testkit::skip(testkit::Need::Tool, "ibv_devinfo not installed (apt-get install ibverbs-utils)");
        return;
    }
    let exe = env!("CARGO_BIN_EXE_doorbell");
    let lib = stock::preload();
    // One pinned address for both processes, so they describe the same host (GUID and
    // GIDs derive from it) whatever other tests hold meanwhile; a free one, and another
    // one should a concurrent run take it between our check and a process's bind.
    let mut attempt = 0;
    let mut addr = free_addr(attempt);
    for verbose in [false, true] {
        let (a, b) = loop {
            let mut ours = Command::new(exe);
            ours.arg("devinfo").env("DOORBELL_SOFTHCA_ADDR", &addr);
            let mut theirs = Command::new(exe);
            theirs.arg("softhca").arg("--preload").arg(&lib).args(["--", "ibv_devinfo"]).env("DOORBELL_SOFTHCA_ADDR", &addr);
            if verbose {
                ours.arg("-v");
                theirs.arg("-v");
            }
            if let (Some(a), Some(b)) = (run(&mut ours), run(&mut theirs)) {
                break (a, b);
            }
            attempt += 1;
            assert!(attempt < 5, "{addr} and the addresses tried before it were taken");
            addr = free_addr(attempt);
        };
        assert!(a.contains("hca_id:\tsofthca0") && a.contains("PORT_ACTIVE"), "unexpected output:\n{a}");
        for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
            assert_eq!(x, y, "line {} differs (verbose={verbose})", i + 1);
        }
        assert_eq!(a.lines().count(), b.lines().count(), "line counts differ (verbose={verbose})");
    }
}
