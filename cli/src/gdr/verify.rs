//! `doorbell gdr verify`: does GPUDirect RDMA work on this node?
//!
//! First the capabilities NCCL checks (gdr::caps), then two passes of real traffic
//! between this process and a child running this same binary (its own softhca host,
//! like `doorbell bench --local`): pass 1 with the memory under test on this side only
//! (the peer uses host memory), pass 2 on both sides (the peer's WRITE sources, READ
//! sinks and atomic results are then GPU memory too). Each pass runs the steps of
//! [`super::steps`]; every line is PASS, FAIL or INFO with its reason.
//!
//! Exit status: 0 every check passed; 1 a check failed; 3 CUDA is not usable here (no
//! driver, or it does not initialise), said in one line. `--mem host` runs the same
//! passes on host memory and needs no GPU.

use std::io::Write as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::ValueEnum as _;

use ::gdr::caps::{self, Check, Verdict};
use ::gdr::cuda::{self, Gpu};

use super::link::{Link, QPS};
use super::mem::{Kind, Mem};
use super::steps::{self, Fault, Remote, Target, BUF_LEN, STEPS};
use crate::bench::oob::{self, Oob, QpInfo};

/// Exit status when CUDA cannot be used.
pub const EXIT_NO_CUDA: i32 = 3;

pub const EXIT_HELP: &str = "\
Exit status:
  0  every check PASSed
  1  a check FAILed (each FAIL line says why)
  3  CUDA is not usable on this machine (no NVIDIA driver, or cuInit fails): one line
     says which; nothing else is run. --mem host needs no CUDA.";

const HELLO: &str = "doorbell-gdr-verify 1";

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// RDMA device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
    /// CUDA ordinal of the GPU.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// The memory under test: gpu (a dma-buf MR of CUDA memory) or host (plain MR; the
    /// same steps without a GPU).
    #[arg(long, value_enum, default_value_t = Kind::Gpu)]
    pub mem: Kind,
    /// Seconds a pass may take before its peer process is killed.
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
    /// Internal: run as the peer of the verify listening at HOST:PORT.
    #[arg(long, hide = true)]
    pub peer_of: Option<String>,
    /// Internal (tests): make the peer get one step wrong, to show it is caught.
    #[arg(long, hide = true, value_enum)]
    pub fault: Option<Fault>,
}

/// Prints one check.
fn show(c: &Check) {
    println!("{:<4}  {}: {}", c.verdict.to_string(), c.name, c.detail);
    let _ = std::io::stdout().flush();
}

/// Runs the command; returns the exit status.
pub fn run(a: &Args) -> i32 {
    if let Some(at) = &a.peer_of {
        return match peer(a, at) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("doorbell gdr verify (peer): {e:#}");
                1
            }
        };
    }
    let gpu = if a.mem == Kind::Gpu {
        if let Err(e) = cuda::probe() {
            println!("doorbell gdr verify: CUDA is not usable here: {e} (--mem host runs the same checks on host memory)");
            return EXIT_NO_CUDA;
        }
        match Gpu::open(a.gpu) {
            Ok(g) => Some(g),
            Err(e) => {
                show(&Check::new(format!("open GPU {}", a.gpu), Verdict::Fail, e.to_string()));
                return 1;
            }
        }
    } else {
        None
    };
    let mut all = Vec::new();
    let mut record = |c: Check| {
        show(&c);
        all.push(c.verdict);
    };
    let gpu_line = match &gpu {
        Some(g) => format!(
            "GPU {} {} ({})",
            g.ordinal(),
            g.name().unwrap_or_else(|e| format!("(name: {e})")),
            g.pci_bus_id().unwrap_or_else(|e| format!("bus id: {e}"))
        ),
        None => "no GPU (--mem host)".into(),
    };
    println!("doorbell gdr verify: {gpu_line}, device {} port {}, memory under test: {}",
             a.dev.as_deref().unwrap_or("(default: softhca)"), a.ib_port, a.mem.noun());
    // Capabilities.
    let mut gpu_dmabuf = false;
    match &gpu {
        Some(g) => {
            for c in caps::gpu_checks(g) {
                if c.name == "GPU DMA_BUF_SUPPORTED" {
                    gpu_dmabuf = c.verdict == Verdict::Pass;
                }
                record(c);
            }
        }
        None => record(Check::new("GPU attributes", Verdict::Info, "not checked (--mem host)")),
    }
    let nic = match provider::Context::open(a.dev.as_deref()).and_then(|ctx| ctx.alloc_pd()) {
        Ok(pd) => caps::nic_dmabuf_probe(&pd),
        Err(e) => Check::new("NIC ibv_reg_dmabuf_mr(fd = -1)", Verdict::Fail, format!("cannot open the device: {e}")),
    };
    let nic_dmabuf = nic.verdict == Verdict::Pass;
    record(nic);
    let root = caps::sysfs_root();
    let peermem = !caps::peermem_clients(&root).is_empty();
    record(caps::peermem_check(&root));
    if gpu.is_some() {
        record(caps::nccl_decision(gpu_dmabuf, nic_dmabuf, peermem));
    }
    // Traffic.
    let passes = [
        (format!("pass 1: {} on this side, host memory on the peer", a.mem.noun()), a.mem, Kind::Host),
        (format!("pass 2: {} on both sides", a.mem.noun()), a.mem, a.mem),
    ];
    for (title, mine, theirs) in passes {
        println!("{title}");
        for c in pass(a, mine, theirs, gpu.as_ref()) {
            record(c);
        }
    }
    let fails = all.iter().filter(|v| **v == Verdict::Fail).count();
    let passed = all.iter().filter(|v| **v == Verdict::Pass).count();
    println!("summary: {passed} PASS, {fails} FAIL: {}",
             if fails == 0 { format!("RDMA to and from {} works on this device", a.mem.noun()) } else { "see the FAIL lines".into() });
    i32::from(fails > 0)
}

/// Kills the peer process if the pass ends early or runs past its limit.
struct PeerProc {
    child: Child,
    stop: Option<mpsc::Sender<()>>,
    watchdog: Option<std::thread::JoinHandle<()>>,
}

impl PeerProc {
    fn spawn(a: &Args, port: u16, kind: Kind) -> Result<PeerProc> {
        let exe = std::env::current_exe().context("locate the doorbell binary")?;
        let mut cmd = Command::new(exe);
        cmd.args(["gdr", "verify", "--peer-of", &format!("127.0.0.1:{port}"), "--mem", &kind.to_string()])
            .args(["--gpu", &a.gpu.to_string(), "-i", &a.ib_port.to_string()]);
        if let Some(d) = &a.dev {
            cmd.args(["-d", d]);
        }
        if let Some(f) = a.fault {
            cmd.args(["--fault", f.to_possible_value().expect("no skipped variants").get_name()]);
        }
        // A forced address would make both ends the same softhca host.
        cmd.env_remove(softhca::config::ADDR_ENV);
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit());
        let child = cmd.spawn().context("start the peer process")?;
        let pid = child.id() as i32;
        let (tx, rx) = mpsc::channel::<()>();
        let limit = Duration::from_secs(a.timeout.max(1));
        let watchdog = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!("doorbell gdr verify: the pass took more than {limit:?}; stopping the peer");
                // SAFETY: kill(2) of the child this process started (not yet reaped:
                // PeerProc waits for it only after stopping this thread).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        });
        Ok(PeerProc { child, stop: Some(tx), watchdog: Some(watchdog) })
    }

    /// Waits for the peer to connect to `l`, or fails when it exits first.
    fn accept(&mut self, l: &std::net::TcpListener) -> Result<Oob> {
        l.set_nonblocking(true)?;
        let start = Instant::now();
        loop {
            match l.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    return Oob::from_stream(s).context("the peer's connection");
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e).context("accept the peer"),
            }
            if let Some(st) = self.child.try_wait()? {
                bail!("the peer process exited before connecting ({st})");
            }
            if start.elapsed() > Duration::from_secs(60) {
                bail!("the peer process did not connect within 60 s");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits for the peer's exit (after `bye`); kills it after a while.
    fn finish(mut self) -> Result<()> {
        let start = Instant::now();
        let st = loop {
            if let Some(st) = self.child.try_wait()? {
                break st;
            }
            if start.elapsed() > Duration::from_secs(20) {
                let _ = self.child.kill();
                break self.child.wait()?;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        self.stop_watchdog();
        if !st.success() {
            bail!("the peer process failed ({st})");
        }
        Ok(())
    }

    fn stop_watchdog(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(w) = self.watchdog.take() {
            let _ = w.join();
        }
    }
}

impl Drop for PeerProc {
    fn drop(&mut self) {
        self.stop_watchdog();
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One pass: the memory under test here (`mine`), the peer's (`theirs`).
fn pass(a: &Args, mine: Kind, theirs: Kind, gpu: Option<&Gpu>) -> Vec<Check> {
    let mut out = Vec::new();
    if let Err(e) = pass_inner(a, mine, theirs, gpu, &mut out) {
        out.push(Check::new("pass", Verdict::Fail, format!("{e:#}")));
    }
    out
}

fn pass_inner(a: &Args, mine: Kind, theirs: Kind, gpu: Option<&Gpu>, out: &mut Vec<Check>) -> Result<()> {
    let mut link = Link::new(a.dev.as_deref(), a.ib_port)?;
    let mem = Mem::new(mine, BUF_LEN, gpu, &link.pd)?;
    let reg_title = format!("register {} on this side ({BUF_LEN} B)", mine.noun());
    let (mr, how) = match mem.register(&link.pd) {
        Ok(r) => r,
        Err(e) => {
            out.push(Check::new(reg_title, Verdict::Fail, format!("{e:#}")));
            return Ok(());
        }
    };
    out.push(Check::new(reg_title, Verdict::Pass, how));
    let l = oob::listen(0)?;
    let port = l.local_addr()?.port();
    let mut proc = PeerProc::spawn(a, port, theirs)?;
    let mut oob = proc.accept(&l)?;
    drop(l);
    let hello = oob.expect("hello")?;
    let how = hello.strip_prefix(HELLO).ok_or_else(|| anyhow!("the peer speaks another protocol: {hello:?}"))?.trim();
    out.push(Check::new(format!("register {} on the peer", theirs.noun()), Verdict::Pass, how.to_string()));
    oob.send(&format!("mr {:x} {:x} {:x} {}", mem.addr(), mem.len(), mr.rkey(), link.mtu))?;
    for q in 0..QPS {
        oob.send(&link.info(q, mr.rkey(), mem.addr()).encode(q))?;
    }
    let mut remote = Vec::with_capacity(QPS);
    for q in 0..QPS {
        remote.push(QpInfo::decode(&oob.recv()?, q)?);
    }
    let mtu: u8 = oob.expect("ready")?.parse().map_err(|_| anyhow!("bad ready line"))?;
    link.connect(&remote, mtu)?;
    let noun = mine.noun();
    let mut t = Target::new(&mut link, &mem, &mr)?;
    for step in STEPS {
        match t.run(step, &mut oob, noun) {
            Ok(c) => out.push(c),
            Err(e) => {
                // The exchange or a completion broke down: the rest of the pass cannot
                // be judged (dropping `proc` stops the peer).
                out.push(Check::new(step.title(noun), Verdict::Fail, format!("{e:#}")));
                return Ok(());
            }
        }
    }
    oob.send("bye")?;
    drop(oob);
    proc.finish()
}

/// The peer process: connects back, registers its memory, then follows the steps.
fn peer(a: &Args, at: &str) -> Result<()> {
    let (host, port) = at.rsplit_once(':').ok_or_else(|| anyhow!("--peer-of wants HOST:PORT, got {at:?}"))?;
    let port: u16 = port.parse().map_err(|_| anyhow!("bad port in {at:?}"))?;
    let mut oob = Oob::connect(host, port, Duration::from_secs(10))?;
    let r = peer_session(a, &mut oob);
    if let Err(e) = &r {
        oob.send_error(&format!("{e:#}"));
    }
    r
}

fn peer_session(a: &Args, oob: &mut Oob) -> Result<()> {
    let gpu = match a.mem {
        Kind::Gpu => Some(Gpu::open(a.gpu)?),
        Kind::Host => None,
    };
    let mut link = Link::new(a.dev.as_deref(), a.ib_port)?;
    let mem = Mem::new(a.mem, BUF_LEN, gpu.as_ref(), &link.pd)?;
    let (mr, how) = mem.register(&link.pd)?;
    oob.send(&format!("hello {HELLO} {how}"))?;
    let m = oob.expect("mr")?;
    let f: Vec<&str> = m.split_whitespace().collect();
    let h = |s: &str| u64::from_str_radix(s, 16).map_err(|_| anyhow!("bad mr line {m:?}"));
    if f.len() != 4 {
        bail!("bad mr line {m:?}");
    }
    let r = Remote { addr: h(f[0])?, len: h(f[1])? as usize, rkey: h(f[2])? as u32 };
    let their_mtu: u8 = f[3].parse().map_err(|_| anyhow!("bad mr line {m:?}"))?;
    let mut remote = Vec::with_capacity(QPS);
    for q in 0..QPS {
        remote.push(QpInfo::decode(&oob.recv()?, q)?);
    }
    for q in 0..QPS {
        oob.send(&link.info(q, mr.rkey(), mem.addr()).encode(q))?;
    }
    let mtu = their_mtu.min(link.mtu);
    link.connect(&remote, mtu)?;
    oob.send(&format!("ready {mtu}"))?;
    steps::peer_loop(&mut link, &mem, &mr, r, oob, a.fault)
}
