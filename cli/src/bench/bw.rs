//! Bandwidth tests (write-bw, read-bw, send-bw, atomic-bw), as perftest runs them: the
//! client keeps `tx-depth` work requests outstanding on every QP, asks for a completion
//! every `cq-mod` of them (and for the last), and counts; a signaled completion retires
//! every earlier request of its QP. The server is passive except in send-bw, where it
//! keeps receives posted and counts them.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use provider::cqe::{WcFlags, WcOpcode};
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::Wc;

use super::oob::{Oob, QpInfo};
use super::opts::{AtomicType, Params, Verb};
use super::pattern;
use super::resources::Res;
use super::wait::{check_wc, wait_cq, Watchdog};

/// wr_id layout: QP index above bit 40, the request's 1-based sequence number below.
const SEQ_BITS: u32 = 40;
const SEQ_MASK: u64 = (1 << SEQ_BITS) - 1;

/// What the client measured for one size.
pub struct BwOut {
    /// Operations completed per QP.
    pub counts: Vec<u64>,
    pub secs: f64,
    /// Peak operations per second.
    pub peak_ops: f64,
    /// Problems `--check` found while running (atomic results).
    pub check: Option<Result<(), String>>,
}

/// Posts request `seq` (1-based) on QP `q`.
fn post_one(res: &mut Res, p: &Params, q: usize, seq: u64, size: u64, r: &QpInfo, signaled: bool) -> Result<()> {
    let lkey = res.mr().lkey();
    let len = size as u32;
    let slots = p.tx_depth as u64;
    let (op, sge) = match p.test.verb() {
        Verb::Write if p.imm => (SendOp::RdmaWriteImm { raddr: r.dst, rkey: r.rkey, imm: seq as u32 }, Sge::new(res.send_addr(q), len, lkey)),
        Verb::Write => (SendOp::RdmaWrite { raddr: r.dst, rkey: r.rkey }, Sge::new(res.send_addr(q), len, lkey)),
        Verb::Send if p.imm => (SendOp::SendImm { imm: seq as u32 }, Sge::new(res.send_addr(q), len, lkey)),
        Verb::Send => (SendOp::Send, Sge::new(res.send_addr(q), len, lkey)),
        Verb::Read => (SendOp::RdmaRead { raddr: r.src, rkey: r.rkey }, Sge::new(res.recv_addr(q), len, lkey)),
        Verb::Atomic => {
            let slot = Sge::new(res.recv_addr(q) + 8 * ((seq - 1) % slots), 8, lkey);
            let old = pattern::atomic_base(q).wrapping_add(seq - 1);
            let op = match p.atomic {
                AtomicType::FetchAndAdd => SendOp::FetchAdd { raddr: r.dst, rkey: r.rkey, add: 1 },
                AtomicType::CmpAndSwap => SendOp::CompareSwap { raddr: r.dst, rkey: r.rkey, compare: old, swap: old.wrapping_add(1) },
            };
            (op, slot)
        }
    };
    let sgl = [sge];
    let inline: [&[u8]; 1];
    let payload = if size > 0 && size <= res.max_inline as u64 && matches!(p.test.verb(), Verb::Write | Verb::Send) {
        // SAFETY: the send area is ours and nothing writes it during the run.
        inline = [unsafe { std::slice::from_raw_parts(res.send_ptr(q), size as usize) }];
        Payload::Inline(&inline)
    } else {
        Payload::Sgl(&sgl)
    };
    let mut wr = SendWr::new(op, payload);
    if signaled {
        wr = wr.signaled();
    }
    res.qps[q].post_send(((q as u64) << SEQ_BITS) | seq, &wr)?;
    Ok(())
}

/// Checks the atomic results of requests `from..=to` (1-based) of QP `q`: each old
/// value must be the counter's start plus the number of earlier operations.
fn check_atomics(res: &Res, p: &Params, q: usize, from: u64, to: u64) -> Result<(), String> {
    let slots = p.tx_depth as u64;
    for seq in from..=to {
        // SAFETY: the slot lies in QP q's receive area; the device finished writing it
        // (its completion, or a later one of the same QP, was polled).
        let got = unsafe { std::ptr::read_volatile(res.recv_ptr(q).add(8 * ((seq - 1) % slots) as usize).cast::<u64>()) };
        let want = pattern::atomic_base(q).wrapping_add(seq - 1);
        if got != want {
            return Err(format!("QP {q}: atomic #{seq} returned {got:#018x}, expected {want:#018x}"));
        }
    }
    Ok(())
}

/// The client's run of one size.
pub fn client(res: &mut Res, p: &Params, size: u64, remote: &[QpInfo], timeout: u64) -> Result<BwOut> {
    let nq = res.qps.len();
    let timed = p.duration > 0.0;
    let mut target = vec![if timed { u64::MAX } else { p.iters }; nq];
    let mut posted = vec![0u64; nq];
    let mut done = vec![0u64; nq];
    let mut wcs = [Wc::default(); 32];
    let mut wd = Watchdog::for_res(res, timeout);
    let mut samples: Vec<(Instant, u64)> = Vec::with_capacity((p.iters / p.cq_mod as u64 + 2) as usize);
    let mut check: Option<Result<(), String>> = if p.check && p.test.verb() == Verb::Atomic { Some(Ok(())) } else { None };
    let window = p.tx_depth as u64;
    let cq_mod = p.cq_mod as u64;
    let t0 = Instant::now();
    let stop_at = t0 + Duration::from_secs_f64(p.duration);
    samples.push((t0, 0));
    let mut total = 0u64;
    loop {
        if timed && target[0] == u64::MAX && Instant::now() >= stop_at {
            // Time is up: finish with one more signaled request where the last one was not.
            for q in 0..nq {
                target[q] = if posted[q] % cq_mod == 0 { posted[q] } else { posted[q] + 1 };
            }
        }
        let mut posted_any = false;
        for q in 0..nq {
            while posted[q] < target[q] && posted[q] - done[q] < window {
                let seq = posted[q] + 1;
                post_one(res, p, q, seq, size, &remote[q], seq % cq_mod == 0 || seq == target[q])?;
                posted[q] = seq;
                posted_any = true;
            }
        }
        if (0..nq).all(|q| done[q] == target[q]) {
            break;
        }
        let n = if posted_any {
            res.cq.poll(&mut wcs)
        } else {
            wait_cq(&mut res.cq, res.channel.as_ref(), &mut wcs, &mut wd, "send completions", false)?
        };
        if n == 0 {
            continue;
        }
        wd.progress();
        for wc in &wcs[..n] {
            check_wc(wc)?;
            let q = (wc.wr_id >> SEQ_BITS) as usize;
            let seq = wc.wr_id & SEQ_MASK;
            if q >= nq || seq <= done[q] || seq > posted[q] {
                bail!("unexpected completion wr_id {:#x} (QP {q}: {} done, {} posted)", wc.wr_id, done[q.min(nq - 1)], posted[q.min(nq - 1)]);
            }
            if let Some(Ok(())) = check {
                check = Some(check_atomics(res, p, q, done[q] + 1, seq));
            }
            total += seq - done[q];
            done[q] = seq;
        }
        samples.push((Instant::now(), total));
    }
    let secs = samples.last().map(|s| s.0.duration_since(t0).as_secs_f64()).unwrap_or(0.0);
    let peak_ops = super::report::peak_rate(&samples, (window * nq as u64).max(total / 32));
    Ok(BwOut { counts: done, secs, peak_ops, check })
}

/// Client counts, receives per QP, and the `--check` verdict.
pub type RecvOut = (Vec<u64>, Vec<u64>, Option<Result<(), String>>);

/// The server's part of send-bw (and write-bw with immediate): keep receives posted and
/// count them until the client's counts are reached. Returns the client's counts, the
/// receives per QP and, with `--check`, whether every receive had the right length and
/// (with immediates) carried its sequence number.
pub fn recv_server(res: &mut Res, p: &Params, size: u64, oob: &mut Oob, timeout: u64) -> Result<RecvOut> {
    let nq = res.qps.len();
    let mut expected: Option<Vec<u64>> = if p.duration > 0.0 { None } else { Some(vec![p.iters; nq]) };
    let mut counts_line = None;
    let mut got = vec![0u64; nq];
    let mut wcs = [Wc::default(); 32];
    let mut wd = Watchdog::for_res(res, timeout);
    let mut bad: Option<String> = None;
    let want_op = if p.test.verb() == Verb::Write { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv };
    loop {
        if expected.as_ref().is_some_and(|e| *e == got) {
            break;
        }
        let n = wait_cq(&mut res.cq, res.channel.as_ref(), &mut wcs, &mut wd, "receives", expected.is_none())?;
        if n == 0 {
            if let Some(l) = oob.try_recv()? {
                let c = parse_counts(&l, nq)?;
                expected = Some(c.clone());
                counts_line = Some(c);
            }
            continue;
        }
        for wc in &wcs[..n] {
            check_wc(wc)?;
            if wc.opcode != want_op {
                bail!("unexpected completion {:?} on the server (expected {want_op:?})", wc.opcode);
            }
            let q = (wc.wr_id >> SEQ_BITS) as usize;
            if q >= nq {
                bail!("receive completion with unknown wr_id {:#x}", wc.wr_id);
            }
            got[q] += 1;
            if bad.is_none() {
                if wc.byte_len as u64 != size {
                    bad = Some(format!("QP {q}: message #{} of {} bytes, expected {size}", got[q], wc.byte_len));
                } else if p.imm && (!wc.flags.contains(WcFlags::WITH_IMM) || wc.imm != got[q] as u32) {
                    bad = Some(format!(
                        "QP {q}: message #{} has immediate {:#x} (flags {:?}), expected {:#x}",
                        got[q], wc.imm, wc.flags, got[q] as u32
                    ));
                } else if !p.imm && wc.flags.contains(WcFlags::WITH_IMM) {
                    bad = Some(format!("QP {q}: message #{} has an immediate it was not sent with", got[q]));
                }
            }
            res.rx_posted[q] -= 1;
            if res.rx_posted[q] <= res.rx_depth / 2 {
                res.refill(q)?;
            }
        }
        if let Some(e) = &expected {
            if (0..nq).any(|q| got[q] > e[q]) {
                bail!("received more messages than were sent ({got:?} > {e:?})");
            }
        }
    }
    let counts = match counts_line {
        Some(c) => c,
        None => parse_counts(&oob.expect("counts")?, nq)?,
    };
    let check = p.check.then_some(match bad {
        Some(e) => Err(e),
        None => Ok(()),
    });
    Ok((counts, got, check))
}

/// Parses "counts c0 c1 ..." (or its tail after the word).
pub fn parse_counts(l: &str, nq: usize) -> Result<Vec<u64>> {
    let l = l.strip_prefix("counts").unwrap_or(l);
    let v: Vec<u64> = l.split_whitespace().map(|x| x.parse()).collect::<Result<_, _>>()?;
    if v.len() != nq {
        bail!("bad counts line {l:?}");
    }
    Ok(v)
}
