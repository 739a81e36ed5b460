//! XRC through stock libibverbs + libmlx5: rdma-core's `ibv_xsrq_pingpong`, server and
//! client each in its own process under libdoorbell_preload.so (as `stock_traffic.rs`
//! runs ibv_srq_pingpong). Each end opens an XRC domain on `/tmp/xrc_domain`
//! (OPEN_XRCD with the file's fd and O_CREAT), makes an XRC SRQ on it, an XRC_RECV
//! (target) and an XRC_SEND (initiator) QP, and the sends name the peer's SRQ number
//! (the WQE's XRC segment, the packets' XRCETH). Both ends must print `success` and
//! exit 0; a hang is killed at the deadline and fails with both outputs. A missing
//! program prints SKIP.
//!
//! Ignored for now: softhca has XRC domains and XRC SRQs (kernel half and firmware)
//! but not yet XRC QPs (QP_CREATE of XRC_TGT / XRC_INI is refused) nor XRC traffic in
//! the device half; run it with `--ignored` to see how far it gets.

mod common;

use std::time::Duration;

use common::{free_port, run_pair, stock, tool};

const LIMIT: Duration = Duration::from_secs(120);

fn xsrq_pair(args: &[&str]) -> Option<common::Pair> {
    let p = tool("ibv_xsrq_pingpong")?;
    let port = free_port().to_string();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["-p", &port]);
    let server = (stock(&p, &a), format!("ibv_xsrq_pingpong {} (server)", a.join(" ")));
    let mut ca = a.clone();
    ca.push("127.0.0.1");
    let client = (stock(&p, &ca), format!("ibv_xsrq_pingpong {}", ca.join(" ")));
    let pair = run_pair(server, client, port.parse().unwrap_or(0), LIMIT);
    eprintln!("ibv_xsrq_pingpong {}: {:.2} s", args.join(" "), pair.elapsed.as_secs_f64());
    Some(pair)
}

fn check(pair: &common::Pair) {
    let report = pair.report();
    pair.assert_ok();
    for d in [&pair.server, &pair.client] {
        assert!(d.stdout.lines().any(|l| l.trim() == "success"), "{report}");
    }
}

/// The defaults (one client, 5 tests of 4096 bytes), RoCE v2 GID index 1, polling.
#[test]
#[ignore = "XRC QPs are not implemented yet (QP_CREATE XRC_TGT/XRC_INI refused)"]
fn xsrq_pingpong_both_roles() {
    let Some(pair) = xsrq_pair(&["-d", "softhca0", "-g", "1"]) else { return };
    check(&pair);
}

/// `-e`: both ends sleep on the receive CQ's completion channel.
#[test]
#[ignore = "XRC QPs are not implemented yet (QP_CREATE XRC_TGT/XRC_INI refused)"]
fn xsrq_pingpong_events() {
    let Some(pair) = xsrq_pair(&["-d", "softhca0", "-g", "1", "-e", "-n", "20"]) else { return };
    check(&pair);
}
