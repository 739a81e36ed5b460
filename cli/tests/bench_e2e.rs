//! End to end: `doorbell bench` between two processes (two softhca hosts), every
//! opcode with `--check` (every byte, every atomic result and immediate verified), the
//! awkward sizes (0, 1, page-1/page/page+1, 1 MiB + 1, 4 MiB), many QPs at once,
//! completion events, -D runs and a plain server/client pair. Correctness only:
//! nothing here looks at the numbers.

mod common;

use std::time::Duration;

use common::{free_port, run_ok, spawn, wait_listening};

const LIMIT: Duration = Duration::from_secs(180);
const MIB: u64 = 1 << 20;

/// `doorbell bench TEST --local --check ARGS`; returns stdout.
fn local(test: &str, args: &[&str]) -> String {
    let mut a = vec!["bench", test, "--local", "--check", "--timeout", "30"];
    a.extend_from_slice(args);
    let out = run_ok(&a, LIMIT);
    assert!(out.contains(" Data check: every size verified"), "no check verdict in:\n{out}");
    out
}

/// Iterations that keep a size quick in a debug build.
fn iters_for(size: u64) -> &'static str {
    match size {
        s if s >= MIB => "8",
        s if s >= 4096 => "64",
        _ => "200",
    }
}

fn every_size(test: &str, sizes: &[u64], extra: &[&str]) {
    for &s in sizes {
        let ss = s.to_string();
        let mut a = vec!["-s", &ss, "-n", iters_for(s)];
        a.extend_from_slice(extra);
        let out = local(test, &a);
        let row = out.lines().find(|l| l.split_whitespace().next() == Some(ss.as_str()));
        assert!(row.is_some(), "{test} -s {s}: no result row in:\n{out}");
    }
}

const SIZES: [u64; 7] = [0, 1, 4095, 4096, 4097, MIB + 1, 4 * MIB];

#[test]
fn write_every_size() {
    every_size("write-bw", &SIZES, &[]);
}

#[test]
fn write_imm_every_size() {
    every_size("write-bw", &SIZES, &["--imm"]);
}

#[test]
fn read_every_size() {
    every_size("read-bw", &SIZES, &[]);
}

#[test]
fn send_every_size() {
    every_size("send-bw", &SIZES, &[]);
}

#[test]
fn send_imm_every_size() {
    every_size("send-bw", &SIZES, &["--imm"]);
}

#[test]
fn inline_writes_and_sends() {
    // Sizes at and around the inline limit asked for.
    every_size("write-bw", &[1, 60, 61, 200], &["-I", "200"]);
    every_size("send-bw", &[1, 60, 61, 200], &["-I", "200"]);
}

#[test]
fn atomics() {
    local("atomic-bw", &["-n", "2000"]);
    local("atomic-bw", &["-n", "2000", "-A", "CMP_AND_SWAP"]);
    local("atomic-bw", &["-n", "300", "-t", "1"]);
}

#[test]
fn latency_tests() {
    every_size("write-lat", &[1, 2, 4095, 4096, 4097, MIB + 1], &[]);
    every_size("send-lat", &[0, 1, 4097, MIB + 1], &[]);
    every_size("send-lat", &[0, 4097], &["--imm"]);
    every_size("read-lat", &[0, 1, 4097, MIB + 1], &[]);
}

#[test]
fn many_qps() {
    for t in ["write-bw", "read-bw", "send-bw", "atomic-bw"] {
        local(t, &["-q", "8", "-s", "4097", "-n", "100"]);
    }
    local("write-bw", &["-q", "8", "-s", "3000", "-n", "100", "--imm"]);
}

#[test]
fn completion_events() {
    local("write-bw", &["-e", "-s", "4096", "-n", "200"]);
    local("send-bw", &["-e", "-s", "4096", "-n", "200", "-q", "2"]);
    local("send-lat", &["-e", "-s", "64", "-n", "100"]);
    local("read-lat", &["-e", "-s", "64", "-n", "100"]);
}

#[test]
fn timed_runs() {
    for t in ["write-bw", "send-bw", "write-lat", "send-lat", "read-lat"] {
        local(t, &["-D", "1", "-s", "1000"]);
    }
    local("write-bw", &["-D", "1", "-s", "1000", "--imm", "-q", "2"]);
}

#[test]
fn all_sizes_in_one_run() {
    let out = local("write-bw", &["-a", "-n", "4"]);
    for s in [2u64, 4096, 8 * MIB] {
        assert!(out.lines().any(|l| l.split_whitespace().next() == Some(&s.to_string())), "no row for {s}:\n{out}");
    }
}

#[test]
fn server_and_client_processes() {
    let port = free_port().to_string();
    let server = spawn(&["bench", "send-bw", "-p", &port, "--timeout", "30"]);
    wait_listening(port.parse().unwrap(), Duration::from_secs(30));
    let client = run_ok(&["bench", "send-bw", "127.0.0.1", "-p", &port, "-s", "4097", "-n", "100", "-q", "2", "--check", "--timeout", "30"], LIMIT);
    let server = server.wait_ok(Duration::from_secs(30)).stdout;
    for out in [&client, &server] {
        assert!(out.contains("Send BW Test"), "{out}");
        assert!(out.contains(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"), "{out}");
        assert!(out.contains(" local address: LID 0000 QPN 0x"), "{out}");
        assert!(out.lines().any(|l| l.starts_with(" 4097 ")), "{out}");
        assert!(out.contains(" Data check: every size verified"), "{out}");
    }
    assert_eq!(client.matches(" remote address:").count(), 2);
}

#[test]
fn mismatched_tests_fail_cleanly() {
    let port = free_port().to_string();
    let server = spawn(&["bench", "read-bw", "-p", &port, "--timeout", "10"]);
    wait_listening(port.parse().unwrap(), Duration::from_secs(30));
    let client = spawn(&["bench", "write-bw", "127.0.0.1", "-p", &port, "--timeout", "10"]).wait(LIMIT);
    assert!(!client.status.success());
    assert!(client.stderr.contains("the client runs write-bw, this server read-bw"), "{}", client.stderr);
    assert!(!server.wait(Duration::from_secs(30)).status.success());
}

#[test]
fn latency_table_layout() {
    let out = local("send-lat", &["-s", "8", "-n", "50"]);
    assert!(out.contains(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"), "{out}");
    let row = out.lines().find(|l| l.starts_with(" 8 ")).expect("row");
    assert_eq!(row.split_whitespace().count(), 9, "{row}");
}
