//! Quick latency, bandwidth and idle-CPU readings of softhca's data path, between two
//! processes on this machine (the example spawns itself as the second host).
//!
//! ```text
//! cargo run --release -p softhca --example rc_perf -- lat   [iters]     # 8-byte RDMA WRITE ping-pong
//! cargo run --release -p softhca --example rc_perf -- bw    [secs] [size]
//! cargo run --release -p softhca --example rc_perf -- idle  [secs]      # CPU of an idle instance
//! cargo run --release -p softhca --example rc_perf -- wake  [samples] [gap_ms] [spin]  # latency after idleness
//! ```
//!
//! `lat` works like ib_write_lat: each side RDMA WRITEs an 8-byte counter into the other's
//! buffer and spins on its own buffer until the peer's counter arrives; half the round
//! trip is reported. `bw` streams RDMA WRITEs with 32 outstanding, like ib_write_bw.
//! `wake` lets both instances go idle for `gap_ms` (default 200: past every grace period
//! and, without the doorbell trap, into the deepest sleep), then times one signaled 8-byte
//! RDMA WRITE: from post until the idle engine has read the doorbell record (pickup), and
//! from post to CQE (pickup + the responder's wake-up by the packet + the ACK), `samples`
//! times (default 30); the same WRITE posted back to back (engines awake) is the
//! reference. The application spins on the CQ without yielding. With `spin` a third
//! thread spins meanwhile, so no CPU idles (on a VM, waking a halted vCPU costs 100+ us,
//! which otherwise dominates both numbers). `DOORBELL_DOORBELL_TRAP=0` compares with
//! the timed backoff. Every mode prints the parent engine's idle counters.
//! Addresses 127.1.9.1 (this process) and 127.1.9.2 (the child).

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use provider::opcode::FmCeSe;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, Context, Cq, MemoryRegion, Pd, Qp, QpAttr, QpInit, QpState, QpType, Wc};
use softhca::{Config, Hca};

struct Host {
    pd: Pd,
    ctx: Arc<Context>,
    hca: Arc<Hca>,
}

fn host(last: u8) -> Host {
    let hca = Hca::new(Config::for_addr(IpAddr::V4(Ipv4Addr::new(127, 1, 9, last)))).expect("bind");
    let ctx = Context::from_device(uverbs::Device::from_endpoint(Box::new(hca.open()), "softhca0")).unwrap();
    let pd = ctx.alloc_pd().unwrap();
    Host { pd, ctx, hca }
}

struct Conn {
    qp: Qp,
    cq: Cq,
    /// The buffer and its registration.
    buf: MemoryRegion,
}

fn setup(h: &Host, len: usize) -> Conn {
    let cq = h.ctx.create_cq(1024, None).unwrap();
    let cap = QpCap { max_send_wr: 256, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 };
    let qp = h.pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None }).unwrap();
    let buf = h.pd.alloc_mr(len, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
    Conn { qp, cq, buf }
}

fn connect(c: &Conn, peer: &[u64; 4], gid: [u8; 16], my_psn: u32) {
    c.qp.to_init(1, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&peer[2].to_be_bytes());
    g[8..].copy_from_slice(&peer[3].to_be_bytes());
    let _ = gid;
    c.qp.modify(&QpAttr {
        state: Some(QpState::Rtr),
        ah: Some(provider::qp::Ah { dgid: g, sgid_index: softhca::config::IP_GID_INDEX, hop_limit: 64, port: 1, ..Default::default() }),
        path_mtu: Some(5),
        dest_qpn: Some(peer[0] as u32 & 0xff_ffff),
        rq_psn: Some(peer[0] as u32 >> 24 << 8),
        max_dest_rd_atomic: Some(1),
        min_rnr_timer: Some(12),
        ..Default::default()
    }).unwrap();
    c.qp.to_rts(my_psn, 14, 7, 7, 1).unwrap();
}

/// What a side tells the other: qpn | psn-ish, addr, rkey, gid.
fn info(c: &Conn, h: &Host) -> String {
    let gid = h.hca.config().ip_gid();
    format!("PERF {} {} {} {} {}", c.qp.qpn() | (0x12 << 24), c.buf.as_ptr() as u64, c.buf.rkey(),
            u64::from_be_bytes(gid[..8].try_into().unwrap()), u64::from_be_bytes(gid[8..].try_into().unwrap()))
}

fn parse(l: &str) -> ([u64; 4], u64, u32) {
    let f: Vec<u64> = l[l.find("PERF ").unwrap() + 5..].split_whitespace().map(|x| x.parse().unwrap()).collect();
    ([f[0], f[1], f[3], f[4]], f[1], f[2] as u32)
}

fn read_line(r: &mut impl BufRead) -> String {
    let mut l = String::new();
    loop {
        l.clear();
        assert!(r.read_line(&mut l).unwrap() > 0, "peer gone");
        if l.contains("PERF ") {
            return l;
        }
    }
}

fn spin_until(p: *const u64, want: u64) {
    let mut n = 0u32;
    // SAFETY: `p` points into our leaked, registered buffer; the device writes it.
    while unsafe { std::ptr::read_volatile(p) } != want {
        n += 1;
        if n & 63 == 0 {
            std::thread::yield_now();
        }
    }
}

fn drain(cq: &mut Cq) {
    let mut wcs = [Wc::default(); 32];
    let n = cq.poll(&mut wcs);
    for w in &wcs[..n] {
        assert_eq!(w.status, provider::cqe::WcStatus::Success, "{w:?}");
    }
}

fn ping_pong(c: &mut Conn, raddr: u64, rkey: u32, iters: u64, first: bool) -> Vec<Duration> {
    let mine = c.buf.as_ptr() as *const u64;
    let mut times = Vec::with_capacity(iters as usize);
    let src = c.buf.as_ptr() as u64 + 64;
    for i in 1..=iters {
        let t = Instant::now();
        if !first {
            spin_until(mine, i);
        }
        // SAFETY: our own buffer; the device reads it once the WQE is posted.
        unsafe { std::ptr::write_volatile((src) as *mut u64, i) };
        let v = i.to_ne_bytes();
        let chunks: [&[u8]; 1] = [&v];
        let mut wr = SendWr::new(SendOp::RdmaWrite { raddr, rkey }, Payload::Inline(&chunks));
        if i % 64 == 0 {
            wr = wr.with_flags(FmCeSe::CQ_UPDATE);
        }
        c.qp.post_send(i, &wr).unwrap();
        if first {
            spin_until(mine, i);
        }
        times.push(t.elapsed());
        drain(&mut c.cq);
    }
    times
}

/// CPU time of this process's threads whose name starts with `prefix`: utime + stime
/// from /proc/self/task/*/stat (clock ticks), and the nanosecond run time from
/// /proc/self/task/*/schedstat.
fn cpu_of_threads(prefix: &str) -> (Duration, Duration) {
    let tck = 100.0; // USER_HZ
    let (mut ticks, mut ns) = (0.0, 0u64);
    for e in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let f: Vec<&str> = rest.split(' ').collect();
        ticks += (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / tck;
        let sched = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
        ns += sched.split(' ').next().and_then(|x| x.parse().ok()).unwrap_or(0);
    }
    (Duration::from_secs_f64(ticks), Duration::from_nanos(ns))
}

/// The idle-related device counters of `h`, as one line.
fn engine_line(h: &Host) -> String {
    let c = h.hca.device().counters();
    format!("engine: trap {}, sleeps {}, trap arms {}, doorbell traps {}, clock traps {}, yield stalls {}",
            if h.hca.device().doorbell_trap() { "on" } else { "off" }, c.sleeps, c.trap_arms, c.trap_faults, c.trap_clock_faults,
            c.yield_stalls)
}

/// Post to CQE of one signaled 8-byte RDMA WRITE, and post to the moment the engine read
/// the new doorbell record (its `sq_doorbells` counter moved).
fn one_write(c: &mut Conn, h: &Host, raddr: u64, rkey: u32, id: u64) -> (Duration, Duration) {
    let v = id.to_ne_bytes();
    let chunks: [&[u8]; 1] = [&v];
    let wr = SendWr::new(SendOp::RdmaWrite { raddr: raddr + 8, rkey }, Payload::Inline(&chunks)).with_flags(FmCeSe::CQ_UPDATE);
    let mut wcs = [Wc::default(); 4];
    let seen = h.hca.device().counters().sq_doorbells;
    let t = Instant::now();
    c.qp.post_send(id, &wr).unwrap();
    let mut pickup = None;
    loop {
        if pickup.is_none() && h.hca.device().counters().sq_doorbells != seen {
            pickup = Some(t.elapsed());
        }
        let n = c.cq.poll(&mut wcs);
        if n > 0 {
            assert_eq!(wcs[0].status, provider::cqe::WcStatus::Success, "{:?}", wcs[0]);
            let done = t.elapsed();
            return (pickup.unwrap_or(done), done);
        }
        std::hint::spin_loop();
    }
}

fn summary(mut t: Vec<Duration>) -> String {
    t.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    format!("median {:.1} us, p90 {:.1} us, max {:.1} us, min {:.1} us", us(t[t.len() / 2]), us(t[t.len() * 9 / 10]),
            us(t[t.len() - 1]), us(t[0]))
}

fn main() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env()).with_writer(std::io::stderr).init();
    }
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).map(String::as_str).unwrap_or("lat");
    if mode == "idle" {
        let secs: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(5);
        let h = host(3);
        let c = setup(&h, 4096);
        drop(c.qp);
        std::thread::sleep(Duration::from_millis(200));
        let (t0, n0) = cpu_of_threads("shca-");
        let s0 = h.hca.device().counters().sleeps;
        let t = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        let (t1, n1) = cpu_of_threads("shca-");
        let el = t.elapsed().as_secs_f64();
        let wakes = h.hca.device().counters().sleeps - s0;
        println!("{}", engine_line(&h));
        println!("idle engine over {el:.1} s: utime+stime {:.3} s = {:.2} % of a core; schedstat {:.4} s = {:.2} %; {:.0} wake-ups/s",
                 (t1 - t0).as_secs_f64(), 100.0 * (t1 - t0).as_secs_f64() / el,
                 (n1 - n0).as_secs_f64(), 100.0 * (n1 - n0).as_secs_f64() / el, wakes as f64 / el);
        drop(h);
        return;
    }
    let child = std::env::var_os("RC_PERF_CHILD").is_some();
    let size: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(65536);
    let len = (size * 2).max(1 << 20);
    let h = host(if child { 2 } else { 1 });
    let mut c = setup(&h, len);
    let (mut to, mut from): (Box<dyn Write>, Box<dyn BufRead>);
    let mut kid = None;
    if child {
        to = Box::new(std::io::stdout());
        from = Box::new(BufReader::new(std::io::stdin()));
    } else {
        let mut k = Command::new(std::env::current_exe().unwrap()).args(&args[1..]).env("RC_PERF_CHILD", "1")
            .stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
        to = Box::new(k.stdin.take().unwrap());
        from = Box::new(BufReader::new(k.stdout.take().unwrap()));
        kid = Some(k);
    }
    writeln!(to, "{}", info(&c, &h)).unwrap();
    to.flush().unwrap();
    let (peer, raddr, rkey) = parse(&read_line(&mut from));
    connect(&c, &peer, [0; 16], 0x12 << 8);
    writeln!(to, "PERF 0 0 0 0 0").unwrap();
    to.flush().unwrap();
    read_line(&mut from);
    match mode {
        "lat" => {
            let iters: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20000);
            let mut t = ping_pong(&mut c, raddr, rkey, iters, !child);
            if !child {
                t.drain(..iters as usize / 10);
                t.sort();
                let half = |d: Duration| d.as_secs_f64() * 1e6 / 2.0;
                println!("8-byte RDMA WRITE ping-pong, {} iterations: half round trip median {:.2} us, p99 {:.2} us, min {:.2} us",
                         t.len(), half(t[t.len() / 2]), half(t[t.len() * 99 / 100]), half(t[0]));
            }
        }
        "bw" => {
            let secs: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3.0);
            if !child {
                let sge = [Sge::new(c.buf.as_ptr() as u64, size as u32, c.buf.lkey())];
                let start = Instant::now();
                let (mut posted, mut done) = (0u64, 0u64);
                let mut wcs = [Wc::default(); 32];
                while start.elapsed().as_secs_f64() < secs {
                    while posted - done < 32 {
                        let wr = SendWr::new(SendOp::RdmaWrite { raddr: raddr + size as u64, rkey }, Payload::Sgl(&sge)).with_flags(FmCeSe::CQ_UPDATE);
                        c.qp.post_send(posted, &wr).unwrap();
                        posted += 1;
                    }
                    done += c.cq.poll_wait(&mut wcs, Duration::from_secs(10)) as u64;
                }
                while done < posted {
                    done += c.cq.poll_wait(&mut wcs, Duration::from_secs(10)) as u64;
                }
                let el = start.elapsed().as_secs_f64();
                println!("RDMA WRITE {size} B x {done} in {el:.2} s: {:.1} MB/s, {:.0} msg/s", done as f64 * size as f64 / el / 1e6, done as f64 / el);
            }
        }
        "wake" => {
            let samples: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(30);
            let gap: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(200);
            let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
            if !child && args.get(4).map(String::as_str) == Some("spin") {
                // Keeps the other CPU from idling (a halted vCPU takes 100+ us to wake).
                let stop = stop.clone();
                std::thread::spawn(move || while !stop.load(std::sync::atomic::Ordering::Relaxed) { std::hint::spin_loop() });
            }
            if !child {
                let (mut pick, mut idle, mut busy) = (Vec::new(), Vec::new(), Vec::new());
                for i in 0..samples as u64 {
                    std::thread::sleep(Duration::from_millis(gap));
                    let (p, d) = one_write(&mut c, &h, raddr, rkey, 2 * i);
                    pick.push(p);
                    idle.push(d);
                    busy.push(one_write(&mut c, &h, raddr, rkey, 2 * i + 1).1);
                }
                println!("after {gap} ms idle, {samples} samples: doorbell picked up (post -> WQE fetched): {}", summary(pick));
                println!("  8-byte RDMA WRITE post -> CQE (both engines idle):      {}", summary(idle));
                println!("  the same right after (engines awake):                   {}", summary(busy));
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        _ => panic!("modes: lat, bw, idle, wake"),
    }
    if !child {
        println!("{}", engine_line(&h));
    }
    writeln!(to, "PERF 0 0 0 0 0").unwrap();
    to.flush().unwrap();
    read_line(&mut from);
    if let Some(mut k) = kid {
        drop(to);
        let _ = k.wait();
    } else {
        writeln!(to, "PERF 0 0 0 0 0").unwrap();
    }
}
