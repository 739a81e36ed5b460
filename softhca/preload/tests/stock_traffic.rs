//! Data traffic between two stock rdma-core programs on softhca: `ibv_rc_pingpong` in
//! its modes, `ibv_ud_pingpong`, and perftest's bandwidth and latency tests, each as a server and a client
//! process under libdoorbell_preload.so (libibverbs + libmlx5 on two softhca instances,
//! 127.0.0.N and 127.0.0.M, RoCEv2 over UDP between them).
//!
//! Each run must end with both processes exiting 0 and printing their results;
//! ibv_rc_pingpong runs with `-c`, which makes it check the first byte of every
//! received page (perftest has no data check, so its result-table rows are checked:
//! message size, iteration count, positive bandwidth or latency). A process that hangs
//! is killed at a generous deadline and the test fails with both outputs. Nothing is
//! asserted about speed. A missing program prints SKIP.
//!
//! Iteration counts are small: stock perftest latency tests busy-poll without yielding,
//! and on a 2-core machine the softhca engines of both processes compete with them for
//! the CPU, so a round trip takes milliseconds there. Each test prints its run time.

mod common;

use std::time::Duration;

use common::{check_pingpong, free_port, run_pair, stock, table_row, tool, Pair};

/// Deadline of one server/client pair (from the client's start).
const LIMIT: Duration = Duration::from_secs(120);

/// `prog` as server and client with the same arguments (plus the server's address for
/// the client), both under the preload library.
fn stock_pair(prog: &str, args: &[&str]) -> Option<Pair> {
    stock_pair_env(prog, args, &[])
}

/// [`stock_pair`] with `env` set in both processes.
fn stock_pair_env(prog: &str, args: &[&str], env: &[(&str, &str)]) -> Option<Pair> {
    let p = tool(prog)?;
    let port = free_port();
    let ps = port.to_string();
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["-p", &ps]);
    let with_env = |mut c: std::process::Command| {
        c.envs(env.iter().copied());
        c
    };
    let server = (with_env(stock(&p, &a)), format!("{prog} {} (server)", a.join(" ")));
    let mut ca = a.clone();
    ca.push("127.0.0.1");
    let client = (with_env(stock(&p, &ca)), format!("{prog} {}", ca.join(" ")));
    let pair = run_pair(server, client, port, LIMIT);
    eprintln!("{prog} {}: {:.2} s", args.join(" "), pair.elapsed.as_secs_f64());
    Some(pair)
}

// ---------------------------------------------------------------------------------------
// ibv_rc_pingpong

/// The usual run on RoCE: the IPv4-mapped RoCE v2 GID (index 1, as on rxe), busy polling,
/// 4 KiB.
#[test]
fn rc_pingpong_plain() {
    let Some(pair) = stock_pair("ibv_rc_pingpong", &["-d", "softhca0", "-g", "1", "-n", "50", "-c"]) else { return };
    check_pingpong(&pair, 4096, 50, "::ffff:127.0.0.");
}

/// `-e`: each end sleeps on its completion channel (ibv_req_notify_cq arms the CQ
/// through the UAR, softhca's device half writes an event record, ibv_get_cq_event reads
/// it). At exit ibv_destroy_cq waits until the application acknowledged every event the
/// kernel reports as read; an armed CQ's last event, never read, must not be counted.
#[test]
fn rc_pingpong_events() {
    let Some(pair) = stock_pair("ibv_rc_pingpong", &["-d", "softhca0", "-g", "1", "-n", "50", "-c", "-e"]) else { return };
    check_pingpong(&pair, 4096, 50, "::ffff:127.0.0.");
}

/// Odd message size, 4096-byte MTU. (The GID table has RoCE v2 rows only, as rxe's: no
/// RoCE v1 row to pick, and `-g 2` is past the filled rows.)
#[test]
fn rc_pingpong_odd_size_mtu_4096() {
    let Some(pair) =
        stock_pair("ibv_rc_pingpong", &["-d", "softhca0", "-g", "1", "-n", "50", "-s", "5000", "-m", "4096", "-c"])
    else {
        return;
    };
    check_pingpong(&pair, 5000, 50, "::ffff:127.0.0.");
}

/// `-g 0`: the link-local GID (`fe80::` + the EUI-64 of the port's MAC, RoCE v2 type),
/// which real RoCE resolves to the peer's MAC on the link; softhca resolves it to the
/// instance that owns the MAC (see softhca::config).
#[test]
fn rc_pingpong_link_local_gid() {
    let Some(pair) = stock_pair("ibv_rc_pingpong", &["-d", "softhca0", "-g", "0", "-n", "50", "-c"]) else { return };
    check_pingpong(&pair, 4096, 50, "fe80::202:c9ff:fe");
}

/// Without `-g` the address vector has no GRH, which a RoCE port refuses (as mlx5 on
/// Ethernet does): the server reports the failed RTR transition and both ends exit
/// non-zero (and neither hangs).
#[test]
fn rc_pingpong_without_gid_is_refused_on_roce() {
    let Some(pair) = stock_pair("ibv_rc_pingpong", &["-d", "softhca0", "-n", "5"]) else { return };
    let report = pair.report();
    assert!(pair.server.status.is_some() && pair.client.status.is_some(), "{report}");
    assert!(!pair.server.ok() && !pair.client.ok(), "{report}");
    assert!(pair.server.stderr.contains("Failed to modify QP to RTR"), "{report}");
}

// ---------------------------------------------------------------------------------------
// ibv_ud_pingpong

/// UD: libmlx5 makes an address handle with CREATE_AH (softhca answers with the
/// destination MAC it resolved, as mlx5_ib does, and libmlx5 copies it into the address
/// vector), builds UD send WQEs with that datagram segment, and receives into buffers
/// that start with the 40-byte GRH. Both directions, 2048-byte messages (under the MTU,
/// as UD requires), `-c` checking the received bytes.
#[test]
fn ud_pingpong() {
    let Some(pair) = stock_pair("ibv_ud_pingpong", &["-d", "softhca0", "-g", "1", "-n", "50", "-c"]) else { return };
    let report = pair.report();
    pair.assert_ok();
    for d in [&pair.server, &pair.client] {
        let out = &d.stdout;
        assert_eq!(out.matches("GID ::ffff:127.0.0.").count(), 2, "local and remote GID\n{report}");
        assert!(out.contains(&format!("{} bytes in ", 2048 * 50)), "{report}");
        assert!(out.contains("50 iters in "), "{report}");
        assert!(!out.contains("invalid data"), "ibv_ud_pingpong -c found bad data\n{report}");
    }
}

// ---------------------------------------------------------------------------------------
// UC: ibv_uc_pingpong (SENDs of 4096 bytes in four 1024-byte packets, no ACKs), stock
// server and stock client, with busy polling and with events; perftest over UC.

#[test]
fn uc_pingpong() {
    let Some(pair) = stock_pair("ibv_uc_pingpong", &["-d", "softhca0", "-g", "1", "-n", "50", "-c"]) else { return };
    check_pingpong(&pair, 4096, 50, "::ffff:127.0.0.");
}

#[test]
fn uc_pingpong_events() {
    let Some(pair) = stock_pair("ibv_uc_pingpong", &["-d", "softhca0", "-g", "1", "-n", "50", "-c", "-e"]) else { return };
    check_pingpong(&pair, 4096, 50, "::ffff:127.0.0.");
}

// ---------------------------------------------------------------------------------------
// SRQ: ibv_srq_pingpong (several RC QPs on one shared receive queue per end)

/// Both ends exited 0, each showed one local and one remote address per QP, and the
/// byte and iteration counts (srq_pingpong counts `size * iters * 2` bytes, per QP) with
/// no data check failing.
fn check_srq_pingpong(pair: &Pair, qps: usize, size: u64, iters: u64) {
    let report = pair.report();
    pair.assert_ok();
    for d in [&pair.server, &pair.client] {
        let out = &d.stdout;
        assert_eq!(out.matches("  local address:  LID 0x0000, QPN 0x").count(), qps, "{report}");
        assert_eq!(out.matches("  remote address: LID 0x0000, QPN 0x").count(), qps, "{report}");
        assert_eq!(out.matches(", GID ::ffff:127.0.0.").count(), 2 * qps, "{report}");
        assert!(out.contains(&format!("{} bytes in ", size * iters * 2)), "{report}");
        assert!(out.contains(&format!("{iters} iters in ")), "{report}");
        assert!(!out.contains("invalid data"), "ibv_srq_pingpong -c found bad data\n{report}");
    }
}

/// libmlx5 makes the SRQ with UVERBS_METHOD_SRQ_CREATE, the QPs on it with rq_type
/// SRQ (no RQ of their own); the device takes each SEND's receive
/// WQE from the SRQ's list and names it in the CQE, which libmlx5 frees back to the
/// list. 4 QPs, a receive depth of 16 so the list wraps many times, `-c` checking data.
#[test]
fn srq_pingpong() {
    let Some(pair) =
        stock_pair("ibv_srq_pingpong", &["-d", "softhca0", "-g", "1", "-q", "4", "-r", "16", "-n", "50", "-c"])
    else {
        return;
    };
    check_srq_pingpong(&pair, 4, 4096, 50);
}

/// The same with every ioctl refused (ENOTTY): libibverbs uses the write commands,
/// CREATE_SRQ (32) and CREATE_QP with `is_srq`.
#[test]
fn srq_pingpong_write_only() {
    let args = ["-d", "softhca0", "-g", "1", "-q", "4", "-r", "16", "-n", "50", "-c"];
    let Some(pair) = stock_pair_env("ibv_srq_pingpong", &args, &[("DOORBELL_PRELOAD_NO_IOCTL", "1")]) else {
        return;
    };
    check_srq_pingpong(&pair, 4, 4096, 50);
}

/// The same over RoCEv2 datagrams (`DOORBELL_WIRE=udp`) rather than the same-host
/// path: ACKs, RNR NAKs and retransmits around receives taken from the SRQ.
#[test]
fn srq_pingpong_udp() {
    let args = ["-d", "softhca0", "-g", "1", "-q", "4", "-r", "16", "-n", "50", "-c"];
    let Some(pair) = stock_pair_env("ibv_srq_pingpong", &args, &[("DOORBELL_WIRE", "udp")]) else {
        return;
    };
    check_srq_pingpong(&pair, 4, 4096, 50);
}

/// The defaults (16 QPs, 500 receives posted), with completion events.
#[test]
fn srq_pingpong_defaults_events() {
    let Some(pair) = stock_pair("ibv_srq_pingpong", &["-d", "softhca0", "-g", "1", "-n", "20", "-c", "-e"]) else {
        return;
    };
    check_srq_pingpong(&pair, 16, 4096, 20);
}

// ---------------------------------------------------------------------------------------
// perftest

/// Both ends exited 0; the client (and the server, where perftest prints one) shows a
/// result row for `size` bytes and `iters` iterations whose numbers are positive.
fn check_perftest(pair: &Pair, header: &str, size: u64, iters: u64, server_prints: bool, numbers: &[usize]) {
    let report = pair.report();
    pair.assert_ok();
    let sides: &[&common::Done] = if server_prints { &[&pair.client, &pair.server] } else { &[&pair.client] };
    for d in sides {
        let row = table_row(&d.stdout, header).unwrap_or_else(|| panic!("no result table in {}\n{report}", d.what));
        assert!(row.len() >= 2 + numbers.len(), "short row {row:?}\n{report}");
        assert_eq!(row[0], size.to_string(), "#bytes\n{report}");
        assert_eq!(row[1], iters.to_string(), "#iterations\n{report}");
        for &i in numbers {
            let v: f64 = row[i].parse().unwrap_or_else(|_| panic!("column {i} of {row:?}\n{report}"));
            assert!(v.is_finite() && v > 0.0, "column {i} of {row:?} must be positive\n{report}");
        }
    }
}

const BW_HEADER: &str = "#bytes     #iterations    BW peak";
const LAT_HEADER: &str = "#bytes #iterations    t_min";

/// Columns of a BW row that must be positive: BW average and MsgRate (BW peak may read
/// 0.00 on a SEND server, which measures no peak).
const BW_COLS: &[usize] = &[3, 4];
/// Columns of a latency row that must be positive: t_min, t_max, t_typical, t_avg.
const LAT_COLS: &[usize] = &[2, 3, 4, 5];

#[test]
fn perftest_write_bw() {
    let Some(pair) = stock_pair("ib_write_bw", &["-d", "softhca0", "-n", "200", "-s", "4096"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

#[test]
fn perftest_read_bw() {
    let Some(pair) = stock_pair("ib_read_bw", &["-d", "softhca0", "-n", "200", "-s", "4096"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

#[test]
fn perftest_send_bw() {
    let Some(pair) = stock_pair("ib_send_bw", &["-d", "softhca0", "-n", "200", "-s", "4096"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

/// Fetch-and-add (perftest's default atomic) of 8 bytes.
#[test]
fn perftest_atomic_bw() {
    let Some(pair) = stock_pair("ib_atomic_bw", &["-d", "softhca0", "-n", "200"]) else { return };
    check_perftest(&pair, BW_HEADER, 8, 200, true, BW_COLS);
}

/// 2-byte inline RDMA WRITE ping-pong (BlueFlame doorbells from both sides).
#[test]
fn perftest_write_lat() {
    let Some(pair) = stock_pair("ib_write_lat", &["-d", "softhca0", "-n", "50"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, true, LAT_COLS);
}

/// RDMA READ latency: only the client measures (the server's QP is passive).
#[test]
fn perftest_read_lat() {
    let Some(pair) = stock_pair("ib_read_lat", &["-d", "softhca0", "-n", "50"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, false, LAT_COLS);
}

#[test]
fn perftest_send_lat() {
    let Some(pair) = stock_pair("ib_send_lat", &["-d", "softhca0", "-n", "50"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, true, LAT_COLS);
}

// ---------------------------------------------------------------------------------------
// perftest with `-e`: every test perftest allows with events (it refuses WRITE and
// duration mode). Each end sleeps in ibv_get_cq_event, re-arms before it polls
// (`ctx_notify_events`), and polls once per event in the latency tests: a lost event
// hangs it, an extra one makes it post past its queue depth ("Couldn't post send") or
// poll an unwritten completion. The CQs of a process arm through one UAR register.

#[test]
fn perftest_send_bw_events() {
    let Some(pair) = stock_pair("ib_send_bw", &["-d", "softhca0", "-n", "200", "-s", "4096", "-e"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

#[test]
fn perftest_send_bw_ud_events() {
    let Some(pair) = stock_pair("ib_send_bw", &["-d", "softhca0", "-c", "UD", "-n", "200", "-s", "1024", "-e"]) else { return };
    check_perftest(&pair, BW_HEADER, 1024, 200, true, BW_COLS);
}

#[test]
fn perftest_read_bw_events() {
    let Some(pair) = stock_pair("ib_read_bw", &["-d", "softhca0", "-n", "200", "-s", "4096", "-e"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

#[test]
fn perftest_atomic_bw_events() {
    let Some(pair) = stock_pair("ib_atomic_bw", &["-d", "softhca0", "-n", "200", "-e"]) else { return };
    check_perftest(&pair, BW_HEADER, 8, 200, true, BW_COLS);
}

#[test]
fn perftest_send_lat_events() {
    let Some(pair) = stock_pair("ib_send_lat", &["-d", "softhca0", "-n", "50", "-e"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, true, LAT_COLS);
}

#[test]
fn perftest_send_lat_ud_events() {
    let Some(pair) = stock_pair("ib_send_lat", &["-d", "softhca0", "-c", "UD", "-n", "50", "-e"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, true, LAT_COLS);
}

#[test]
fn perftest_read_lat_events() {
    let Some(pair) = stock_pair("ib_read_lat", &["-d", "softhca0", "-n", "50", "-e"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, false, LAT_COLS);
}

#[test]
fn perftest_atomic_lat_events() {
    let Some(pair) = stock_pair("ib_atomic_lat", &["-d", "softhca0", "-n", "50", "-e"]) else { return };
    check_perftest(&pair, LAT_HEADER, 8, 50, false, LAT_COLS);
}

// perftest over UC (SEND and RDMA WRITE, what UC has).

#[test]
fn perftest_send_bw_uc() {
    let Some(pair) = stock_pair("ib_send_bw", &["-d", "softhca0", "-c", "UC", "-n", "200", "-s", "4096"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

#[test]
fn perftest_write_bw_uc() {
    let Some(pair) = stock_pair("ib_write_bw", &["-d", "softhca0", "-c", "UC", "-n", "200", "-s", "4096"]) else { return };
    check_perftest(&pair, BW_HEADER, 4096, 200, true, BW_COLS);
}

#[test]
fn perftest_send_lat_uc_events() {
    let Some(pair) = stock_pair("ib_send_lat", &["-d", "softhca0", "-c", "UC", "-n", "50", "-e"]) else { return };
    check_perftest(&pair, LAT_HEADER, 2, 50, true, LAT_COLS);
}
