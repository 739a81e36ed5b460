//! Running stock rdma-core programs (and `doorbell`) as separate processes in tests.
//!
//! Every child is killed when its handle drops, so a failing or hanging test leaves
//! nothing behind; output is collected by threads, so a chatty child never blocks on a
//! full pipe; every wait has a deadline, past which the child is killed and the test
//! fails with what it printed. Deadlines only turn a hang into a failure: nothing
//! asserts how long a run took.
//!
//! Shared by softhca/preload/tests and (through `#[path]`) cli/tests.

#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// libdoorbell_preload.so of this build, in the target profile directory next to the
/// test executable's `deps/` folder.
///
/// `cargo test` does not build a cdylib that nothing links against: on a clean checkout
/// the library would be missing, and after a change to softhca it would be stale. So it
/// is built here (once per test process) with the same cargo, profile and target
/// directory as the test itself, which is a no-op when it is up to date. That puts it
/// next to the `doorbell` executable too, where `doorbell softhca` looks for it.
pub fn preload() -> PathBuf {
    static LIB: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let deps = exe.parent().expect("deps dir");
        let profile_dir = deps.parent().unwrap_or(deps);
        let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
            Some("debug") => "dev",
            Some(name) => name,
            None => panic!("no cargo profile directory above {}", exe.display()),
        };
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| option_env!("CARGO").unwrap_or("cargo").into());
        let status = Command::new(&cargo)
            .args(["build", "-q", "-p", "softhca-preload", "--profile", profile])
            .env("CARGO_TARGET_DIR", target_dir)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo");
        assert!(status.success(), "cargo build -p softhca-preload --profile {profile} failed: {status}");
        let lib = profile_dir.join("libdoorbell_preload.so");
        assert!(lib.is_file(), "{} missing after cargo build -p softhca-preload", lib.display());
        lib
    })
    .clone()
}

/// The path of an rdma-core program on PATH, or None (and a SKIP line naming the packages).
pub fn tool(name: &str) -> Option<PathBuf> {
    tool_in(name, "rdma-core ibverbs-utils ibverbs-providers perftest")
}

/// The path of a program on PATH, or None and a SKIP line naming the Debian `packages`
/// that install it.
pub fn tool_in(name: &str, packages: &str) -> Option<PathBuf> {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/bin", "/usr/sbin"]) {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return Some(p);
        }
    }
    testkit::skip(testkit::Need::Tool, format!("{name} is not installed (apt-get install {packages})"));
    None
}

/// A command for `prog ARGS` under the preload library (its own softhca instance on the
/// next free 127.0.0.N), with the library's optional variables cleared. stdout is made
/// line-buffered with `stdbuf` when available, so a child killed at its deadline still
/// shows what it printed.
pub fn stock(prog: &Path, args: &[&str]) -> Command {
    let mut c = match which("stdbuf") {
        Some(sb) => {
            let mut c = Command::new(sb);
            c.arg("-oL").arg(prog);
            c
        }
        None => Command::new(prog),
    };
    c.args(args)
        .env("LD_PRELOAD", preload())
        .env_remove("DOORBELL_SOFTHCA_ADDR")
        .env_remove("DOORBELL_PRELOAD_STATIC_UARS")
        .env_remove("DOORBELL_PRELOAD_NO_IOCTL")
        .env_remove("DOORBELL_PRELOAD_TRACE")
        .env_remove("RUST_LOG");
    c
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var("PATH").unwrap_or_default().split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

/// A running child.
pub struct Proc {
    child: Child,
    pub what: String,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

/// What a finished (or killed) child printed.
#[derive(Debug)]
pub struct Done {
    pub what: String,
    /// None: killed at its deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Done {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// Everything about this run, for assertion messages.
    pub fn report(&self) -> String {
        let st = match self.status {
            Some(s) => s.to_string(),
            None => "KILLED at its deadline (hung)".into(),
        };
        format!("`{}`: {st}\n--- stdout\n{}\n--- stderr\n{}", self.what, self.stdout, self.stderr)
    }
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

/// Starts `cmd` with piped output; `what` names it in messages.
pub fn spawn(mut cmd: Command, what: impl Into<String>) -> Proc {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let what = what.into();
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {what}: {e}"));
    let out = Arc::new(Mutex::new(Vec::new()));
    let err = Arc::new(Mutex::new(Vec::new()));
    let readers = vec![drain(child.stdout.take().unwrap(), out.clone()), drain(child.stderr.take().unwrap(), err.clone())];
    Proc { child, what, out, err, readers }
}

impl Proc {
    /// What the child has printed on stdout so far.
    pub fn stdout_so_far(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    /// Waits until the child exits or `deadline` passes (then kills it).
    pub fn wait_until(mut self, deadline: Instant) -> Done {
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break Some(s);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        let stdout = String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned();
        let stderr = String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned();
        Done { what: std::mem::take(&mut self.what), status, stdout, stderr }
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

/// A TCP port nobody listens on right now, and not handed out before in this process:
/// tests run as parallel threads, and two of them could otherwise be given the same
/// port between one's probe and its server's listen (seen once: "Couldn't listen to
/// port" from a perftest server while another test's server held it).
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> = std::sync::Mutex::new(std::collections::BTreeSet::new());
    loop {
        let p = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port");
        if GIVEN.lock().unwrap_or_else(|e| e.into_inner()).insert(p) {
            return p;
        }
    }
}

/// Whether something listens on TCP `port` (from /proc/net/tcp{,6}: probing with a
/// connection would use up the one accept() of ibv_rc_pingpong and perftest servers).
pub fn listening(port: u16) -> bool {
    let hex = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|s| {
            s.lines().skip(1).any(|l| {
                let v: Vec<&str> = l.split_whitespace().collect();
                // local_address is field 1, state (0A = LISTEN) field 3.
                v.len() > 3 && v[1].ends_with(&hex) && v[3] == "0A"
            })
        })
    })
}

/// A server and a client run as two processes (two softhca hosts).
pub struct Pair {
    pub server: Done,
    pub client: Done,
    pub elapsed: Duration,
}

impl Pair {
    pub fn report(&self) -> String {
        format!("=== server {}\n=== client {}", self.server.report(), self.client.report())
    }

    /// Both ends exited 0.
    pub fn assert_ok(&self) {
        assert!(self.server.ok() && self.client.ok(), "both ends must exit 0\n{}", self.report());
    }
}

/// Starts the server, waits until it listens on `port`, starts the client, and waits
/// for both within `limit` (from the client's start); a side still running then is
/// killed, and the pair is returned for the caller to judge (a hang reads as "KILLED").
/// If the server exits before it listens, the client is not started.
pub fn run_pair(server: (Command, String), client: (Command, String), port: u16, limit: Duration) -> Pair {
    let t0 = Instant::now();
    let s = spawn(server.0, server.1);
    let listen_by = Instant::now() + Duration::from_secs(30).min(limit);
    let mut s = Some(s);
    while !listening(port) {
        if Instant::now() > listen_by || s.as_mut().unwrap().child.try_wait().ok().flatten().is_some() {
            let server = s.take().unwrap().wait_until(Instant::now());
            let client = Done { what: client.1, status: None, stdout: String::new(), stderr: "(not started: the server never listened)".into() };
            panic!("server did not listen on port {port}\n=== server {}\n=== client {}", server.report(), client.report());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = spawn(client.0, client.1);
    let deadline = Instant::now() + limit;
    let client = c.wait_until(deadline);
    let server = s.take().unwrap().wait_until(deadline.max(Instant::now() + Duration::from_secs(5)));
    Pair { server, client, elapsed: t0.elapsed() }
}

/// The row under the result-table header that starts with `header_start` (perftest's
/// " #bytes ..." line): its whitespace-separated fields.
pub fn table_row(out: &str, header_start: &str) -> Option<Vec<String>> {
    let mut lines = out.lines();
    lines.find(|l| l.trim_start().starts_with(header_start))?;
    let row = lines.next()?;
    Some(row.split_whitespace().map(str::to_owned).collect())
}

/// Both ends of an ibv_rc_pingpong run exited 0, exchanged addresses with the expected
/// GIDs, moved `iters` messages of `size` bytes each way, and found no bad page.
pub fn check_pingpong(pair: &Pair, size: u64, iters: u64, gid_prefix: &str) {
    let report = pair.report();
    pair.assert_ok();
    for d in [&pair.server, &pair.client] {
        let out = &d.stdout;
        assert!(out.contains("  local address:  LID 0x0000, QPN 0x"), "{report}");
        assert!(out.contains("  remote address: LID 0x0000, QPN 0x"), "{report}");
        assert_eq!(out.matches(&format!(", GID {gid_prefix}")).count(), 2, "GIDs {gid_prefix}...\n{report}");
        assert!(out.contains(&format!("{} bytes in ", size * iters * 2)), "{report}");
        assert!(out.contains(&format!("{iters} iters in ")), "{report}");
        assert!(!out.contains("invalid data"), "ibv_rc_pingpong -c found bad data\n{report}");
    }
}
