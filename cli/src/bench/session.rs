//! One benchmark run from either end: the out-of-band handshake, connecting the QPs,
//! then for every size: prepare buffers, run, exchange counts and the result row, and
//! (`--check`) verify and exchange verdicts. See `oob` for the line protocol.

use std::io::Write as _;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};

use super::bw;
use super::cuda_memcpy;
use super::gpu;
use super::lat;
use super::memcpy;
use super::oob::{self, Oob, QpInfo};
use super::opts::{Opts, Params, Test, Verb};
use super::pattern::{self, End};
use super::report::{self, LatStats};
use super::resources::{self, Res};

const HELLO: &str = "doorbell-bench 1";

/// The client end: connects to `host` and drives the run.
pub fn client(test: Test, o: &Opts, host: &str) -> Result<()> {
    let mut p = Params::from_opts(test, o)?;
    if test.is_lat() && p.qps > 1 {
        bail!("latency tests use one QP");
    }
    gpu::check_params(o, &p)?;
    let res = Res::new(o, &p)?;
    p.mtu = if p.mtu == 0 { res.active_mtu } else { p.mtu.min(res.active_mtu) };
    let mut oob = Oob::connect(host, o.port, Duration::from_secs(10))?;
    let mut res = res;
    let r = client_session(&mut res, &p, o, &mut oob);
    if let Err(e) = &r {
        oob.send_error(&format!("{e:#}"));
    }
    counters(&res, o, "client", r.is_err());
    r
}

/// Prints the softhca counters (stderr) on failure or when asked.
fn counters(res: &Res, o: &Opts, end: &str, failed: bool) {
    if failed || o.counters {
        if let Some(c) = res.softhca_counters() {
            eprintln!(" softhca counters ({end}): {c}");
        }
    }
}

/// The server end: waits for one client on `o.port` and follows its parameters.
pub fn server(test: Test, o: &Opts) -> Result<()> {
    let l = oob::listen(o.port)?;
    if o.announce_port {
        println!("PORT {}", l.local_addr()?.port());
        std::io::stdout().flush()?;
    }
    let mut oob = Oob::accept(&l)?;
    drop(l);
    let r = server_session(test, o, &mut oob);
    if let Err(e) = &r {
        oob.send_error(&format!("{e:#}"));
        if let Some(c) = resources::softhca_counters(&provider::device::soft_name()) {
            eprintln!(" softhca counters (server): {c}");
        }
    }
    r
}

fn exchange_qps(oob: &mut Oob, res: &Res, client: bool) -> Result<(Vec<QpInfo>, Vec<QpInfo>)> {
    let nq = res.qps.len();
    let local: Vec<QpInfo> = (0..nq).map(|q| res.info(q)).collect();
    let send = |oob: &mut Oob| -> Result<()> {
        for (q, i) in local.iter().enumerate() {
            oob.send(&i.encode(q))?;
        }
        Ok(())
    };
    if client {
        send(oob)?;
    }
    let mut remote = Vec::with_capacity(nq);
    for q in 0..nq {
        remote.push(QpInfo::decode(&oob.recv()?, q)?);
    }
    if !client {
        send(oob)?;
    }
    Ok((local, remote))
}

/// Buffers before a size runs (no transfer in flight): with `--check` our send areas
/// get our pattern and our receive areas the complement of the peer's; atomic counters
/// get their start values; write-lat's polled byte is cleared. GPU memory is filled
/// through its staging buffer (`memory`).
fn prepare(res: &Res, p: &Params, size: u64, end: End) -> Result<()> {
    let peer = if end == End::Client { End::Server } else { End::Client };
    let size = size as usize;
    for q in 0..res.qps.len() {
        if p.check {
            // SAFETY (both closures): the slice is `size` bytes, as the pattern is given.
            // SAFETY: the closure gets `size` bytes, as the pattern is given.
            res.mem.fill(res.send_off(q), size, |b| unsafe { pattern::fill(b.as_mut_ptr(), size, end, q) })?;
            if p.test.verb() == Verb::Atomic {
                res.mem.fill(res.recv_off(q), res.area, |b| b.fill(0xee))?;
            } else {
                // SAFETY: as above.
                res.mem.fill(res.recv_off(q), size, |b| unsafe { pattern::poison(b.as_mut_ptr(), size, peer, q) })?;
            }
        }
        if p.test.verb() == Verb::Atomic && end == End::Server {
            // SAFETY: the counter is the first 8 bytes of our receive area (host memory:
            // atomic-bw is refused with GPU memory); nothing is in flight between sizes.
            unsafe { std::ptr::write_volatile(res.recv_ptr(q).cast::<u64>(), pattern::atomic_base(q)) };
        }
    }
    if p.test == Test::WriteLat {
        lat::reset(res, p, size as u64);
    }
    Ok(())
}

/// What a verdict line says.
fn verdict_line(v: &Option<Result<(), String>>) -> String {
    match v {
        None => "verify none".into(),
        Some(Ok(())) => "verify ok".into(),
        Some(Err(e)) => format!("verify fail {}", e.replace('\n', " ")),
    }
}

/// Checks what arrived in our receive areas from `from`: bytes `0..size` (write-lat:
/// all but the last, which must hold the message count). A QP that completed nothing at
/// a size with bytes is a failure, not a pass: there would be nothing to compare, and
/// "every size verified" would be vacuous.
fn verify_received(res: &Res, p: &Params, size: u64, from: End, counts: &[u64]) -> Result<(), String> {
    for (q, &c) in counts.iter().enumerate() {
        if size == 0 {
            continue;
        }
        if c == 0 {
            return Err(format!("QP {q}: no message completed at {size} B, so nothing was verified"));
        }
        let n = if p.test == Test::WriteLat { size as usize - 1 } else { size as usize };
        // SAFETY: the run is over; nothing writes the area now, and the slice is `n` bytes.
        res.mem.inspect(res.recv_off(q), n, |b| unsafe { pattern::verify(b.as_ptr(), n, from, q) }).map_err(|e| format!("{e:#}"))??;
        if p.test == Test::WriteLat {
            // SAFETY: as above.
            let last = unsafe { std::ptr::read_volatile(res.recv_ptr(q).add(size as usize - 1)) };
            if last != c as u8 {
                return Err(format!("QP {q}: last byte {last:#04x}, expected the count {:#04x}", c as u8));
            }
        }
    }
    Ok(())
}

fn client_session(res: &mut Res, p: &Params, o: &Opts, oob: &mut Oob) -> Result<()> {
    oob.send(&format!("hello {HELLO} {}", p.encode()))?;
    let ok = oob.expect("ok")?;
    let mtu: u8 = ok.strip_prefix("mtu=").and_then(|m| m.parse().ok()).ok_or_else(|| anyhow!("bad answer {ok:?}"))?;
    let (local, remote) = exchange_qps(oob, res, true)?;
    res.connect(&remote, mtu)?;
    if p.needs_recv() {
        res.post_receives()?;
    }
    oob.send("ready")?;
    oob.expect("ready")?;
    println!("{}", report::header(p, res, mtu, &local, &remote));
    println!("{}", report::table_head(p, o.report_gbits));
    let mut failures = Vec::new();
    let mut memcpy_lines = Vec::new();
    // Average RDMA bandwidth per size (bytes/s), for the cudaMemcpy reference.
    let mut rdma_bw = Vec::with_capacity(p.sizes.len());
    for &size in &p.sizes {
        prepare(res, p, size, End::Client)?;
        oob.send(&format!("go {size}"))?;
        oob.expect("go-ok")?;
        let memcpy_before = (o.vs_memcpy && p.test == Test::WriteBw).then(|| memcpy::measure(memcpy::REFERENCE_BYTES, Duration::from_millis(300)));
        let (counts, row, mine) = match p.test.is_lat() {
            false => {
                let out = bw::client(res, p, size, &remote, o.timeout).with_context(|| format!("{} at {size} B", p.test.name()))?;
                let total: u64 = out.counts.iter().sum();
                let avg_ops = if out.secs > 0.0 { total as f64 / out.secs } else { 0.0 };
                let shown = if p.duration > 0.0 { total / p.qps as u64 } else { p.iters };
                let row = report::bw_row(size, shown, out.peak_ops * size as f64, avg_ops * size as f64, avg_ops, o.report_gbits);
                rdma_bw.push(avg_ops * size as f64);
                if let Some(before) = memcpy_before {
                    let after = memcpy::measure(memcpy::REFERENCE_BYTES, Duration::from_millis(300));
                    let m = (before + after) / 2.0;
                    let bw = avg_ops * size as f64;
                    memcpy_lines.push(format!(
                        " ratio vs memcpy: {:.4}  ({size} B: write-bw {:.2} MB/sec, single-core memcpy of {} MiB {:.2} MB/sec = mean of {:.2} before and {:.2} after)",
                        if m > 0.0 { bw / m } else { 0.0 },
                        report::bw_unit(bw, false),
                        memcpy::REFERENCE_BYTES >> 20,
                        report::bw_unit(m, false),
                        report::bw_unit(before, false),
                        report::bw_unit(after, false)
                    ));
                }
                let mine = match p.test {
                    Test::ReadBw => p.check.then(|| verify_received(res, p, size, End::Server, &out.counts)),
                    Test::AtomicBw => out.check,
                    _ => None,
                };
                (out.counts, row, mine)
            }
            true => {
                let out = lat::run(res, p, size, &remote[0], oob, true, o.timeout).with_context(|| format!("{} at {size} B", p.test.name()))?;
                let row = report::lat_row(size, out.count, &LatStats::from_samples(out.samples));
                let counts = vec![out.count];
                let mine = p.check.then(|| {
                    verify_received(res, p, size, End::Server, &counts).and_then(|()| out.bad_len.map_or(Ok(()), Err))
                });
                (counts, row, mine)
            }
        };
        let counts_line: Vec<String> = counts.iter().map(|c| c.to_string()).collect();
        oob.send(&format!("counts {}", counts_line.join(" ")))?;
        println!("{row}");
        oob.send(&format!("row {row}"))?;
        if p.check {
            oob.send(&verdict_line(&mine))?;
            let theirs = oob.expect("verify")?;
            if let Some(Err(e)) = mine {
                failures.push(format!("{size} B: client: {e}"));
            }
            if let Some(e) = theirs.strip_prefix("fail ") {
                failures.push(format!("{size} B: server: {e}"));
            }
        }
    }
    println!("{}", report::DASHES);
    for l in memcpy_lines {
        println!("{l}");
    }
    oob.send("done")?;
    if let Some(g) = res.mem.gpu() {
        // After "done": the peer has nothing more to do, so the copies have the GPU and
        // its link to themselves.
        let copies = cuda_memcpy::measure(g, &p.sizes, p.iters).context("cudaMemcpy reference")?;
        println!("{}", cuda_memcpy::table(&g.describe(), p.iters, &copies, &rdma_bw, o.report_gbits));
    }
    finish(p, failures)
}

fn finish(p: &Params, failures: Vec<String>) -> Result<()> {
    if !failures.is_empty() {
        for f in &failures {
            eprintln!(" data check failed: {f}");
        }
        bail!("{} data check failure(s)", failures.len());
    }
    if p.check {
        println!(" Data check: every size verified");
    }
    Ok(())
}

fn server_session(test: Test, o: &Opts, oob: &mut Oob) -> Result<()> {
    let hello = oob.expect("hello")?;
    let Some(rest) = hello.strip_prefix(HELLO) else {
        bail!("client speaks another protocol: {hello:?}");
    };
    let p = Params::decode(rest)?;
    if p.test != test {
        bail!("the client runs {}, this server {}", p.test.name(), test.name());
    }
    let mut res = Res::new(o, &p)?;
    let mtu = p.mtu.clamp(1, res.active_mtu);
    oob.send(&format!("ok mtu={mtu}"))?;
    let (local, remote) = exchange_qps(oob, &res, false)?;
    res.connect(&remote, mtu)?;
    if p.needs_recv() {
        res.post_receives()?;
    }
    oob.expect("ready")?;
    oob.send("ready")?;
    println!("{}", report::header(&p, &res, mtu, &local, &remote));
    println!("{}", report::table_head(&p, o.report_gbits));
    std::io::stdout().flush()?;
    let timed = p.duration > 0.0;
    let mut failures = Vec::new();
    for &size in &p.sizes {
        let go = oob.expect("go")?;
        if go.parse::<u64>().ok() != Some(size) {
            bail!("client runs size {go}, expected {size}");
        }
        prepare(&res, &p, size, End::Server)?;
        oob.send("go-ok")?;
        let nq = res.qps.len();
        let (counts, mine) = match p.test {
            Test::SendBw | Test::WriteBw if p.needs_recv() => {
                let (counts, got, bad) = bw::recv_server(&mut res, &p, size, oob, o.timeout)?;
                let mine = p.check.then(|| {
                    bad.unwrap_or(Ok(()))?;
                    if got != counts {
                        return Err(format!("received {got:?} messages per QP, the client sent {counts:?}"));
                    }
                    verify_received(&res, &p, size, End::Client, &counts)
                });
                (counts, mine)
            }
            Test::WriteLat | Test::SendLat => {
                let out = lat::run(&mut res, &p, size, &remote[0], oob, false, o.timeout)?;
                let counts = if timed { vec![out.count] } else { bw::parse_counts(&oob.expect("counts")?, 1)? };
                let mine = p.check.then(|| {
                    if out.count != counts[0] {
                        return Err(format!("answered {} messages, the client sent {}", out.count, counts[0]));
                    }
                    verify_received(&res, &p, size, End::Client, &counts).and_then(|()| out.bad_len.map_or(Ok(()), Err))
                });
                (counts, mine)
            }
            Test::SendBw | Test::WriteBw | Test::ReadBw | Test::ReadLat | Test::AtomicBw => {
                let counts = bw::parse_counts(&oob.expect("counts")?, nq)?;
                let mine = match p.test {
                    Test::WriteBw => p.check.then(|| verify_received(&res, &p, size, End::Client, &counts)),
                    Test::AtomicBw => p.check.then(|| {
                        for (q, &c) in counts.iter().enumerate() {
                            // SAFETY: the run is over; the counter is in our receive area.
                            let v = unsafe { std::ptr::read_volatile(res.recv_ptr(q).cast::<u64>()) };
                            let want = pattern::atomic_base(q).wrapping_add(c);
                            if v != want {
                                return Err(format!("QP {q}: counter {v:#018x} after {c} operations, expected {want:#018x}"));
                            }
                        }
                        Ok(())
                    }),
                    _ => None,
                };
                (counts, mine)
            }
        };
        let _ = counts;
        let row = oob.recv()?;
        let row = row.strip_prefix("row ").ok_or_else(|| anyhow!("expected a result row, got {row:?}"))?;
        println!("{row}");
        if p.check {
            let theirs = oob.expect("verify")?;
            oob.send(&verdict_line(&mine))?;
            if let Some(Err(e)) = mine {
                failures.push(format!("{size} B: server: {e}"));
            }
            if let Some(e) = theirs.strip_prefix("fail ") {
                failures.push(format!("{size} B: client: {e}"));
            }
        }
        std::io::stdout().flush()?;
    }
    println!("{}", report::DASHES);
    oob.expect("done")?;
    counters(&res, o, "server", false);
    finish(&p, failures)
}
