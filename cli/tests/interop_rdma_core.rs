//! Interop on the wire: `doorbell pingpong` (the doorbell provider on its embedded
//! softhca) against the stock `ibv_rc_pingpong` (libibverbs + libmlx5 under
//! libdoorbell_preload.so, on its own softhca instance), in both roles. The two
//! processes are two hosts on 127.0.0.N that share nothing but RoCEv2 packets over UDP
//! and ibv_rc_pingpong's 52-byte TCP address exchange.
//!
//! Both ends run with `-c`: the stock end checks the first byte of every received page,
//! ours as client checks every echoed byte (as server, every page's first byte). Both
//! must exit 0 and report the same byte and iteration counts. A hang is killed at the
//! deadline and fails the test. SKIP when ibv_rc_pingpong is not installed.

#[path = "../../softhca/preload/tests/common/mod.rs"]
mod stock;

use std::process::Command;
use std::time::Duration;

use stock::{free_port, run_pair, tool};

const LIMIT: Duration = Duration::from_secs(120);

fn doorbell(args: &[&str]) -> (Command, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_doorbell"));
    c.args(args).env_remove("DOORBELL_SOFTHCA_ADDR").env_remove("DOORBELL_DEVICE").env_remove("LD_PRELOAD");
    (c, format!("doorbell {}", args.join(" ")))
}

fn ibv_rc_pingpong(args: &[&str]) -> Option<(Command, String)> {
    let p = tool("ibv_rc_pingpong")?;
    Some((stock::stock(&p, args), format!("ibv_rc_pingpong {}", args.join(" "))))
}

/// Runs `server` (doorbell or stock) and `client` with the common flags.
fn interop(doorbell_is_server: bool, flags: &[&str], size: u64, iters: u64) {
    interop_ours(doorbell_is_server, flags, &[], size, iters)
}

/// [`interop`] with `ours` added to doorbell's flags only.
fn interop_ours(doorbell_is_server: bool, flags: &[&str], ours_only: &[&str], size: u64, iters: u64) {
    let port = free_port();
    let ps = port.to_string();
    let n = iters.to_string();
    let s = size.to_string();
    let mut common = vec!["-g", "1", "-c", "-n", n.as_str(), "-s", s.as_str(), "-p", ps.as_str()];
    common.extend_from_slice(flags);
    let mut ours = vec!["pingpong", "--timeout", "60"];
    ours.extend_from_slice(&common);
    ours.extend_from_slice(ours_only);
    let mut theirs = vec!["-d", "softhca0"];
    theirs.extend_from_slice(&common);
    let (server, client) = if doorbell_is_server {
        let Some(c) = ibv_rc_pingpong(&[theirs.as_slice(), &["127.0.0.1"]].concat()) else { return };
        (doorbell(&ours), c)
    } else {
        let Some(srv) = ibv_rc_pingpong(&theirs) else { return };
        (srv, doorbell(&[ours.as_slice(), &["127.0.0.1"]].concat()))
    };
    let pair = run_pair(server, client, port, LIMIT);
    eprintln!("{} <- {}: {:.2} s", pair.server.what, pair.client.what, pair.elapsed.as_secs_f64());
    stock::check_pingpong(&pair, size, iters, "::ffff:127.0.0.");
}

#[test]
fn doorbell_server_stock_client() {
    interop(true, &[], 4096, 100);
}

#[test]
fn stock_server_doorbell_client() {
    interop(false, &[], 4096, 100);
}

/// Completion events on both ends, and a message that is not a whole page.
#[test]
fn doorbell_server_stock_client_events() {
    interop(true, &["-e"], 3000, 50);
}

#[test]
fn stock_server_doorbell_client_events() {
    interop(false, &["-e"], 3000, 50);
}

/// Doorbell's DevX RC QP (`pingpong --devx`: rings and doorbell records in UMEMs, a
/// DevX UAR, PRM transitions) against stock ibv_rc_pingpong's verbs QP, both roles.
#[test]
fn doorbell_devx_server_stock_client() {
    interop_ours(true, &[], &["--devx"], 4096, 100);
}

#[test]
fn stock_server_doorbell_devx_client() {
    interop_ours(false, &[], &["--devx"], 3000, 100);
}
