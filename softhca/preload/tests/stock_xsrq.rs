//! XRC through stock libibverbs + libmlx5: rdma-core's `ibv_xsrq_pingpong`, server and
//! client each in its own process under libdoorbell_preload.so (as `stock_traffic.rs`
//! runs ibv_srq_pingpong). Each end opens an XRC domain on `/tmp/xrc_domain`
//! (OPEN_XRCD with the file's fd and O_CREAT), makes an XRC SRQ on it, an XRC_RECV
//! (target) and an XRC_SEND (initiator) QP, and the sends name the peer's SRQ number
//! (the WQE's XRC segment, the packets' XRCETH). Both ends must print `success` and
//! exit 0; a hang is killed at the deadline and fails with both outputs. A missing
//! program prints SKIP.
//!
//! Run over the same-host path (the default between two instances on one host) and over
//! UDP (`DOORBELL_WIRE=udp`): the XRCETH is one more header on both.

mod common;

use std::time::Duration;

use common::{free_port, run_pair, stock, tool};

const LIMIT: Duration = Duration::from_secs(120);

fn xsrq_pair(args: &[&str]) -> Option<common::Pair> {
    xsrq_pair_env(args, &[])
}

fn xsrq_pair_env(args: &[&str], env: &[(&str, &str)]) -> Option<common::Pair> {
    let p = tool("ibv_xsrq_pingpong")?;
    let port = free_port().to_string();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["-p", &port]);
    let with_env = |mut c: std::process::Command| {
        c.envs(env.iter().copied());
        c
    };
    let server = (with_env(stock(&p, &a)), format!("ibv_xsrq_pingpong {} (server)", a.join(" ")));
    let mut ca = a.clone();
    ca.push("127.0.0.1");
    let client = (with_env(stock(&p, &ca)), format!("ibv_xsrq_pingpong {}", ca.join(" ")));
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
fn xsrq_pingpong_both_roles() {
    let Some(pair) = xsrq_pair(&["-d", "softhca0", "-g", "1"]) else { return };
    check(&pair);
}

/// `-e`: both ends sleep on the receive CQ's completion channel.
#[test]
fn xsrq_pingpong_events() {
    let Some(pair) = xsrq_pair(&["-d", "softhca0", "-g", "1", "-e", "-n", "20"]) else { return };
    check(&pair);
}

/// Over UDP: the XRCETH travels in the RoCEv2 datagram.
#[test]
fn xsrq_pingpong_udp() {
    let Some(pair) = xsrq_pair_env(&["-d", "softhca0", "-g", "1", "-n", "20"], &[("DOORBELL_WIRE", "udp")]) else { return };
    check(&pair);
}


