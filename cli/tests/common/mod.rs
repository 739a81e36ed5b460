//! Running `doorbell` processes from tests, on top of the process runner the stock-tool
//! tests use (`softhca/preload/tests/common`: every child is killed when its handle
//! drops, output is collected by threads so a chatty child never blocks, and every wait
//! has a deadline). This layer adds what the `doorbell` tests want: the binary under
//! test with the device-selecting variables cleared, and waits that fail the test at
//! their deadline.

#![allow(dead_code, unused_imports)]

use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

#[path = "../../../softhca/preload/tests/common/mod.rs"]
mod stock;

pub use stock::free_port;

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_doorbell")
}

/// A running `doorbell`.
pub struct Proc(stock::Proc);

/// What a finished child printed.
pub struct Done {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// `program` without the variables an outer run may have set: a launcher's (torchrun,
/// mpirun: a test's children must not think they are ranks of it) and doorbell's device
/// choice. Callers set their own after this.
pub fn command(program: &str) -> Command {
    let mut cmd = Command::new(program);
    for k in ["RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"] {
        cmd.env_remove(k);
    }
    cmd.env_remove("DOORBELL_SOFTHCA_ADDR").env_remove("DOORBELL_DEVICE");
    cmd
}

/// Starts `cmd` (usually from [`command`]), named in messages by its program and
/// arguments.
pub fn start(cmd: Command) -> Proc {
    let what = std::iter::once(cmd.get_program()).chain(cmd.get_args()).map(|a| a.to_string_lossy()).collect::<Vec<_>>().join(" ");
    Proc(stock::spawn(cmd, what))
}

/// Starts `doorbell ARGS`.
pub fn spawn(args: &[&str]) -> Proc {
    let mut cmd = command(bin());
    cmd.args(args);
    start(cmd)
}

impl Proc {
    /// Output so far.
    pub fn stdout(&self) -> String {
        self.0.stdout_so_far()
    }

    /// Waits up to `timeout`; kills the child and panics (with its output) past it.
    pub fn wait(self, timeout: Duration) -> Done {
        let d = self.0.wait_until(Instant::now() + timeout);
        match d.status {
            Some(status) => Done { status, stdout: d.stdout, stderr: d.stderr },
            None => panic!("did not finish in {timeout:?}: {}", d.report()),
        }
    }

    /// Waits and insists on success.
    pub fn wait_ok(self, timeout: Duration) -> Done {
        let what = self.0.what.clone();
        let d = self.wait(timeout);
        assert!(d.status.success(), "`{what}` failed ({})\n--- stdout\n{}\n--- stderr\n{}", d.status, d.stdout, d.stderr);
        d
    }
}

/// Runs `doorbell ARGS` to success within `timeout`; returns its stdout.
pub fn run_ok(args: &[&str], timeout: Duration) -> String {
    spawn(args).wait_ok(timeout).stdout
}

/// Waits until something listens on TCP `port` ([`stock::listening`]).
pub fn wait_listening(port: u16, timeout: Duration) {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if stock::listening(port) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("nothing listens on port {port} after {timeout:?}");
}
