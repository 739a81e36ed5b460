//! The provider's pingpong examples (provider/examples) on the wire, each as two
//! processes (two embedded softhca hosts on 127.0.0.N sharing only RoCEv2 packets and
//! the TCP address exchange): example against example, and example against the stock
//! rdma-core program (libibverbs + libmlx5 under libdoorbell_preload.so) in both roles.
//!
//! What must hold is what the stock program prints and checks: both ends exit 0, print
//! one local and one remote address line per QP with the IPv4-mapped GIDs, the byte and
//! iteration counts (`size * iters * 2` bytes), and with `-c` find no page whose first
//! byte is wrong. A hang is killed at the deadline and fails. SKIP when the stock
//! program is not installed.

#[path = "../../softhca/preload/tests/common/mod.rs"]
mod stock;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use stock::{free_port, run_pair, tool, Pair};

const LIMIT: Duration = Duration::from_secs(120);

/// The example binary of this build, built here (a no-op when up to date): `cargo test
/// --test` does not build examples.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|d| d.parent()).unwrap().to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") => "dev".to_string(),
        Some(p) => p.to_string(),
        None => panic!("no profile directory above {}", exe.display()),
    };
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "-q", "-p", "provider", "--example", name, "--profile", &profile])
        .env("CARGO_TARGET_DIR", profile_dir.parent().unwrap())
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .unwrap();
    assert!(st.success(), "building example {name}: {st}");
    profile_dir.join("examples").join(name)
}

fn ours(name: &str, args: &[&str]) -> (Command, String) {
    let mut c = Command::new(example(name));
    c.args(args).env_remove("DOORBELL_SOFTHCA_ADDR").env_remove("DOORBELL_DEVICE").env_remove("LD_PRELOAD").env_remove("RUST_LOG");
    (c, format!("example {name} {}", args.join(" ")))
}

fn theirs(prog: &str, args: &[&str]) -> Option<(Command, String)> {
    let p = tool(prog)?;
    let mut a = vec!["-d", "softhca0"];
    a.extend_from_slice(args);
    Some((stock::stock(&p, &a), format!("{prog} {}", a.join(" "))))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Who {
    Ours,
    Stock,
}

/// Runs `example` / `prog` as server and client with `args` (+ port, + host for the
/// client); None when the stock program is missing.
fn pair(example: &str, prog: &str, server: Who, client: Who, args: &[&str]) -> Option<Pair> {
    pair_ours(example, prog, server, client, args, &[], &[])
}

/// [`pair`] with `extra` added to the example's arguments only.
/// and `env` set in both processes.
fn pair_ours(example: &str, prog: &str, server: Who, client: Who, args: &[&str], extra: &[&str], env: &[(&str, &str)]) -> Option<Pair> {
    let port = free_port().to_string();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["-p", &port]);
    let mut ca = a.clone();
    ca.push("127.0.0.1");
    let make = |w: Who, a: &[&str]| match w {
        Who::Ours => Some(ours(example, &[extra, a].concat())),
        Who::Stock => theirs(prog, a),
    };
    let (mut s, mut c) = (make(server, &a)?, make(client, &ca)?);
    s.0.envs(env.iter().copied());
    c.0.envs(env.iter().copied());
    let p = run_pair(s, c, port.parse().unwrap(), LIMIT);
    eprintln!("{} <- {}: {:.2} s", p.server.what, p.client.what, p.elapsed.as_secs_f64());
    Some(p)
}

/// Both ended well with `qps` address pairs and the counts of `size * iters * 2` bytes.
fn check(p: &Pair, qps: usize, size: u64, iters: u64) {
    let report = p.report();
    p.assert_ok();
    for d in [&p.server, &p.client] {
        let out = &d.stdout;
        assert_eq!(out.matches("  local address:  LID 0x0000, QPN 0x").count(), qps, "{report}");
        assert_eq!(out.matches("  remote address: LID 0x0000, QPN 0x").count(), qps, "{report}");
        assert_eq!(out.matches(", GID ::ffff:127.0.0.").count(), 2 * qps, "{report}");
        assert!(out.contains(&format!("{} bytes in ", size * iters * 2)), "{report}");
        assert!(out.contains(&format!("{iters} iters in ")), "{report}");
        assert!(!out.contains("invalid data"), "{report}");
    }
}

const SRQ_ARGS: [&str; 9] = ["-g", "1", "-q", "4", "-r", "16", "-n", "50", "-c"];

#[test]
fn srq_pingpong_example_against_itself() {
    let p = pair("srq_pingpong", "ibv_srq_pingpong", Who::Ours, Who::Ours, &SRQ_ARGS).unwrap();
    check(&p, 4, 4096, 50);
}

#[test]
fn srq_pingpong_example_server_stock_client() {
    let Some(p) = pair("srq_pingpong", "ibv_srq_pingpong", Who::Ours, Who::Stock, &SRQ_ARGS) else { return };
    check(&p, 4, 4096, 50);
}

#[test]
fn srq_pingpong_stock_server_example_client() {
    let Some(p) = pair("srq_pingpong", "ibv_srq_pingpong", Who::Stock, Who::Ours, &SRQ_ARGS) else { return };
    check(&p, 4, 4096, 50);
}

/// Completion events on both ends, an odd size and the stock defaults' 16 QPs.
#[test]
fn srq_pingpong_events_odd_size_16_qps() {
    let args = ["-g", "1", "-q", "16", "-r", "64", "-n", "40", "-s", "3000", "-e", "-c"];
    let Some(p) = pair("srq_pingpong", "ibv_srq_pingpong", Who::Stock, Who::Ours, &args) else { return };
    check(&p, 16, 3000, 40);
    let Some(p) = pair("srq_pingpong", "ibv_srq_pingpong", Who::Ours, Who::Stock, &args) else { return };
    check(&p, 16, 3000, 40);
}

/// ibv_ud_pingpong's output: its local line has ": GID" where the others have ", GID".
fn check_ud(p: &Pair, size: u64, iters: u64) {
    let report = p.report();
    p.assert_ok();
    for d in [&p.server, &p.client] {
        let out = &d.stdout;
        assert_eq!(out.matches("  local address:  LID 0x0000, QPN 0x").count(), 1, "{report}");
        assert_eq!(out.matches(": GID ::ffff:127.0.0.").count(), 1, "{report}");
        assert_eq!(out.matches("  remote address: LID 0x0000, QPN 0x").count(), 1, "{report}");
        assert!(out.contains(&format!("{} bytes in ", size * iters * 2)), "{report}");
        assert!(out.contains(&format!("{iters} iters in ")), "{report}");
    }
}

#[test]
fn ud_pingpong_example_against_itself_and_stock() {
    let args = ["-g", "1", "-n", "50"];
    check_ud(&pair("ud_pingpong", "ibv_ud_pingpong", Who::Ours, Who::Ours, &args).unwrap(), 1024, 50);
    let Some(p) = pair("ud_pingpong", "ibv_ud_pingpong", Who::Ours, Who::Stock, &args) else { return };
    check_ud(&p, 1024, 50);
    let Some(p) = pair("ud_pingpong", "ibv_ud_pingpong", Who::Stock, Who::Ours, &args) else { return };
    check_ud(&p, 1024, 50);
}

/// Events, and 2048-byte datagrams (the GRH makes the receive 2088 bytes).
#[test]
fn ud_pingpong_events_2048() {
    let args = ["-g", "1", "-n", "40", "-s", "2048", "-e"];
    let Some(p) = pair("ud_pingpong", "ibv_ud_pingpong", Who::Stock, Who::Ours, &args) else { return };
    check_ud(&p, 2048, 40);
    let Some(p) = pair("ud_pingpong", "ibv_ud_pingpong", Who::Ours, Who::Stock, &args) else { return };
    check_ud(&p, 2048, 40);
}

const RC_ARGS: [&str; 5] = ["-g", "1", "-n", "50", "-c"];

#[test]
fn rc_pingpong_example_against_itself_and_stock() {
    check(&pair("rc_pingpong", "ibv_rc_pingpong", Who::Ours, Who::Ours, &RC_ARGS).unwrap(), 1, 4096, 50);
    let Some(p) = pair("rc_pingpong", "ibv_rc_pingpong", Who::Ours, Who::Stock, &RC_ARGS) else { return };
    check(&p, 1, 4096, 50);
    let Some(p) = pair("rc_pingpong", "ibv_rc_pingpong", Who::Stock, Who::Ours, &RC_ARGS) else { return };
    check(&p, 1, 4096, 50);
}

/// Events, a message of several pages that is not a whole number of them, 4096 MTU.
#[test]
fn rc_pingpong_events_odd_size() {
    let args = ["-g", "1", "-n", "40", "-s", "10000", "-m", "4096", "-e", "-c"];
    let Some(p) = pair("rc_pingpong", "ibv_rc_pingpong", Who::Stock, Who::Ours, &args) else { return };
    check(&p, 1, 10000, 40);
    let Some(p) = pair("rc_pingpong", "ibv_rc_pingpong", Who::Ours, Who::Stock, &args) else { return };
    check(&p, 1, 10000, 40);
}

/// `--uc` against ibv_uc_pingpong (UC: no ACKs, RTR/RTS without the RC attributes), on
/// both of softhca's wires. On the same-host path this once delivered garbage: a UC send
/// completes as its last packet is emitted, and its payload went by reference, copied by
/// the receiver later, after a stock sender had exited (seen: "invalid data" on the last
/// message, 2 runs in 8); softhca now copies a UC payload when it emits it.
#[test]
fn uc_pingpong_example_against_stock() {
    let uc = ["--uc"];
    for wire in ["local", "udp"] {
        let env = [("DOORBELL_WIRE", wire)];
        check(&pair_ours("rc_pingpong", "ibv_uc_pingpong", Who::Ours, Who::Ours, &RC_ARGS, &uc, &env).unwrap(), 1, 4096, 50);
        let Some(p) = pair_ours("rc_pingpong", "ibv_uc_pingpong", Who::Ours, Who::Stock, &RC_ARGS, &uc, &env) else { return };
        check(&p, 1, 4096, 50);
        let Some(p) = pair_ours("rc_pingpong", "ibv_uc_pingpong", Who::Stock, Who::Ours, &RC_ARGS, &uc, &env) else { return };
        check(&p, 1, 4096, 50);
        let ev = ["-g", "1", "-n", "40", "-e", "-c"];
        let Some(p) = pair_ours("rc_pingpong", "ibv_uc_pingpong", Who::Stock, Who::Ours, &ev, &uc, &env) else { return };
        check(&p, 1, 4096, 40);
    }
}

/// write_bw against itself (its own exchange; no stock counterpart): both exit 0, the
/// server having checked the written bytes, and both print the result row.
#[test]
fn write_bw_example_against_itself() {
    let args = ["-g", "1", "-n", "300", "-s", "10000", "-r", "32"];
    let p = pair("write_bw", "ib_write_bw", Who::Ours, Who::Ours, &args).unwrap();
    p.assert_ok();
    for d in [&p.server, &p.client] {
        let row = stock::table_row(&d.stdout, "#bytes").unwrap_or_else(|| panic!("no result row\n{}", p.report()));
        assert_eq!((row[0].as_str(), row[1].as_str()), ("10000", "300"), "{}", p.report());
        assert!(row[2].parse::<f64>().unwrap() > 0.0);
    }
}

/// srq_pingpong over RoCEv2 datagrams rather than the same-host path (ACKs, RNR NAKs
/// and retransmits around receives taken from the SRQ), both roles against stock.
#[test]
fn srq_pingpong_over_udp() {
    let udp = [("DOORBELL_WIRE", "udp")];
    let Some(p) = pair_ours("srq_pingpong", "ibv_srq_pingpong", Who::Ours, Who::Stock, &SRQ_ARGS, &[], &udp) else { return };
    check(&p, 4, 4096, 50);
    let Some(p) = pair_ours("srq_pingpong", "ibv_srq_pingpong", Who::Stock, Who::Ours, &SRQ_ARGS, &[], &udp) else { return };
    check(&p, 4, 4096, 50);
}
