//! `--local`: both ends from one command. The server is a child process running this
//! same binary (so it has its own softhca instance: another host on 127.0.0.N); it
//! listens on a port the kernel picks and announces it on its first stdout line. Its
//! table duplicates ours, so its stdout is kept and shown only if it fails.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};

use super::opts::{Opts, Test};
use super::session;

/// Kills the child if the run ends early.
struct Guard(Option<Child>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub fn run(test: Test, o: &Opts) -> Result<()> {
    let exe = std::env::current_exe().context("locate the doorbell binary")?;
    let mut cmd = Command::new(exe);
    cmd.args(["bench", test.name(), "-p", "0", "--announce-port", "-i"])
        .arg(o.ib_port.to_string())
        .args(["--timeout", &o.timeout.to_string()]);
    if let Some(d) = &o.dev {
        cmd.args(["-d", d]);
    }
    if let Some(x) = o.gid_index {
        cmd.args(["-x", &x.to_string()]);
    }
    if o.events {
        cmd.arg("-e");
    }
    if o.counters {
        cmd.arg("--counters");
    }
    if o.polled {
        cmd.arg("--polled");
    }
    // Both ends put their buffers on the same GPU.
    if let Some(n) = o.use_cuda {
        cmd.args(["--use-cuda", &n.to_string()]);
    }
    if o.use_cuda_dmabuf {
        cmd.arg("--use-cuda-dmabuf");
    }
    // A forced address would make both ends the same host.
    cmd.env_remove(softhca::config::ADDR_ENV);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().context("start the server process")?;
    let out = child.stdout.take().expect("piped stdout");
    let mut guard = Guard(Some(child));

    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(30)).map_err(|_| anyhow!("the server process did not start"))?;
    let port: u16 = first
        .strip_prefix("PORT ")
        .and_then(|p| p.trim().parse().ok())
        .ok_or_else(|| anyhow!("unexpected first line from the server: {first:?}"))?;

    let mut co = o.clone();
    co.host = Some("127.0.0.1".into());
    co.port = port;
    co.local = false;
    let r = session::client(test, &co, "127.0.0.1");

    // The server ends right after the client's "done".
    let child = guard.0.as_mut().unwrap();
    let deadline = Instant::now() + Duration::from_secs(if r.is_ok() { 30 } else { 5 });
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        if Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(guard); // kills it if still running
    let _ = reader.join();
    let server_out: Vec<String> = rx.try_iter().collect();
    r?;
    match status {
        Some(s) if s.success() => Ok(()),
        other => {
            for l in server_out {
                eprintln!("server: {l}");
            }
            match other {
                Some(s) => bail!("the server process failed ({s})"),
                None => bail!("the server process did not finish"),
            }
        }
    }
}
