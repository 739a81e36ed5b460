//! Running `doorbell` processes from tests: every child is killed when its handle
//! drops (a failing test leaves nothing behind), output is collected by threads so a
//! chatty child never blocks, and every wait has a deadline.

#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_doorbell")
}

/// A running child.
pub struct Proc {
    child: Child,
    what: String,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

/// What a finished child printed.
pub struct Done {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

fn drain(mut r: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut b = [0u8; 4096];
        while let Ok(n) = r.read(&mut b) {
            if n == 0 {
                break;
            }
            into.lock().unwrap().extend_from_slice(&b[..n]);
        }
    })
}

/// Starts `doorbell ARGS`.
pub fn spawn(args: &[&str]) -> Proc {
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .env_remove("DOORBELL_SOFTHCA_ADDR")
        .env_remove("DOORBELL_DEVICE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("start doorbell");
    let out = Arc::new(Mutex::new(Vec::new()));
    let err = Arc::new(Mutex::new(Vec::new()));
    let readers = vec![
        drain(child.stdout.take().unwrap(), out.clone()),
        drain(child.stderr.take().unwrap(), err.clone()),
    ];
    Proc { child, what: format!("doorbell {}", args.join(" ")), out, err, readers }
}

impl Proc {
    /// Output so far.
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits up to `timeout`; kills the child and panics (with its output) past it.
    pub fn wait(mut self, timeout: Duration) -> Done {
        let start = Instant::now();
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break Some(s);
            }
            if start.elapsed() > timeout {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if status.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let stdout = String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned();
        let stderr = String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned();
        match status {
            Some(status) => Done { status, stdout, stderr },
            None => panic!("`{}` did not finish in {timeout:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}", self.what),
        }
    }

    /// Waits and insists on success.
    pub fn wait_ok(self, timeout: Duration) -> Done {
        let what = self.what.clone();
        let d = self.wait(timeout);
        assert!(d.status.success(), "`{what}` failed ({})\n--- stdout\n{}\n--- stderr\n{}", d.status, d.stdout, d.stderr);
        d
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `doorbell ARGS` to success within `timeout`; returns its stdout.
pub fn run_ok(args: &[&str], timeout: Duration) -> String {
    spawn(args).wait_ok(timeout).stdout
}

/// A TCP port nobody listens on right now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Waits until something listens on TCP `port` (from /proc/net/tcp, so the listener's
/// one accept() is not used up by probing).
pub fn wait_listening(port: u16, timeout: Duration) {
    let start = Instant::now();
    let hex = format!(":{port:04X} ");
    while start.elapsed() < timeout {
        for f in ["/proc/net/tcp", "/proc/net/tcp6"] {
            if let Ok(s) = std::fs::read_to_string(f) {
                // local_address is field 1, state (0A = LISTEN) field 3.
                if s.lines().skip(1).any(|l| {
                    let v: Vec<&str> = l.split_whitespace().collect();
                    v.len() > 3 && format!("{} ", v[1]).ends_with(&hex) && v[3] == "0A"
                }) {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port} after {timeout:?}");
}
