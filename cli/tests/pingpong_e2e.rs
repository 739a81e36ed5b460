//! End to end: `doorbell pingpong` server and client as two processes (two softhca
//! hosts), with `-c` so every echoed byte is checked, busy polling and events.

mod common;

use std::time::Duration;

use common::{free_port, spawn, wait_listening};

const LIMIT: Duration = Duration::from_secs(120);

/// Runs a server and a client with the same extra flags; returns both outputs.
fn pair(extra: &[&str]) -> (String, String) {
    let port = free_port().to_string();
    let mut sa = vec!["pingpong", "-p", &port, "--timeout", "30"];
    sa.extend_from_slice(extra);
    let server = spawn(&sa);
    wait_listening(port.parse().unwrap(), Duration::from_secs(30));
    let mut ca = vec!["pingpong", "127.0.0.1", "-p", &port, "--timeout", "30"];
    ca.extend_from_slice(extra);
    let client = spawn(&ca).wait_ok(LIMIT).stdout;
    let server = server.wait_ok(LIMIT).stdout;
    (server, client)
}

fn assert_output(out: &str, size: u64, iters: u64) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines[0].starts_with("  local address:  LID 0x0000, QPN 0x"), "{out}");
    assert!(lines[0].contains(", GID ::ffff:127.0.0."), "{out}");
    assert!(lines[1].starts_with("  remote address: LID 0x0000, QPN 0x"), "{out}");
    assert!(lines[2].starts_with(&format!("{} bytes in ", size * iters * 2)) && lines[2].ends_with(" Mbit/sec"), "{out}");
    assert!(lines[3].starts_with(&format!("{iters} iters in ")) && lines[3].ends_with(" usec/iter"), "{out}");
}

#[test]
fn default_size_checked() {
    let (s, c) = pair(&["-c", "-n", "300"]);
    assert_output(&s, 4096, 300);
    assert_output(&c, 4096, 300);
}

#[test]
fn events_checked() {
    let (s, c) = pair(&["-c", "-e", "-n", "200", "-s", "1000"]);
    assert_output(&s, 1000, 200);
    assert_output(&c, 1000, 200);
}

#[test]
fn odd_sizes_checked() {
    for size in ["1", "8193", "65537"] {
        let (s, c) = pair(&["-c", "-n", "50", "-s", size, "-m", "4096", "-r", "8"]);
        assert_output(&s, size.parse().unwrap(), 50);
        assert_output(&c, size.parse().unwrap(), 50);
    }
}
