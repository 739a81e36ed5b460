//! Latency tests, as perftest runs them, on one QP:
//! - write-lat: ping-pong of RDMA WRITEs; each end writes a counter into the last byte
//!   of its message and polls the last byte of its own receive area for the peer's;
//! - send-lat: ping-pong of SENDs, each end waiting for a receive completion;
//! - read-lat: one RDMA READ outstanding at a time, the server passive.
//!
//! The client takes a timestamp before each post; for the ping-pong tests one
//! iteration is half the round trip, for read-lat the whole operation.

use std::time::{Duration, Instant};

use anyhow::Result;
use provider::cqe::{WcFlags, WcOpcode};
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::Wc;

use super::bw::parse_counts;
use super::oob::{Oob, QpInfo};
use super::opts::{Params, Verb};
use super::resources::Res;
use super::wait::{check_wc, wait_cq, Watchdog};

/// What one end of a latency run saw.
pub struct LatOut {
    /// Iterations done.
    pub count: u64,
    /// Per-iteration latency in microseconds (client only).
    pub samples: Vec<f64>,
    /// --check: receives of the wrong length or immediate (send-lat).
    pub bad_len: Option<String>,
}

/// Receive bookkeeping of a send-lat end.
struct Rx {
    /// Receive completions seen and not yet consumed by the ping-pong.
    pending: u64,
    /// Receive completions seen in all.
    seen: u64,
    /// Send completions seen and not yet reaped.
    sent: u64,
    bad: Option<String>,
}

const SEND_ID: u64 = 1 << 62;

/// Posts this end's message of QP 0 (write or send), signaled, inline when it fits.
fn post_msg(res: &mut Res, p: &Params, size: u64, r: &QpInfo, seq: u64) -> Result<()> {
    let sge = [Sge::new(res.send_addr(0), size as u32, res.mr().lkey())];
    let inline: [&[u8]; 1];
    let payload = if size > 0 && size <= res.max_inline as u64 {
        // SAFETY: our send area; only this thread writes it, and not during the post.
        inline = [unsafe { std::slice::from_raw_parts(res.send_ptr(0), size as usize) }];
        Payload::Inline(&inline)
    } else {
        Payload::Sgl(&sge)
    };
    let op = match p.test.verb() {
        Verb::Write => SendOp::RdmaWrite { raddr: r.dst, rkey: r.rkey },
        Verb::Send if p.imm => SendOp::SendImm { imm: seq as u32 },
        Verb::Send => SendOp::Send,
        _ => unreachable!(),
    };
    res.qps[0].post_send(SEND_ID, &SendWr::new(op, payload).signaled())?;
    Ok(())
}

/// Waits for the completion of our one outstanding send/write.
fn reap_send(res: &mut Res, p: &Params, wd: &mut Watchdog, rx: &mut Rx, size: u64) -> Result<()> {
    let mut wcs = [Wc::default(); 4];
    while rx.sent == 0 {
        let n = wait_cq(&mut res.cq, res.channel.as_ref(), &mut wcs, wd, "send completion", false)?;
        for wc in &wcs[..n] {
            note(res, p, wc, size, rx)?;
        }
    }
    rx.sent -= 1;
    Ok(())
}

/// Books one completion of a latency run.
fn note(res: &mut Res, p: &Params, wc: &Wc, size: u64, rx: &mut Rx) -> Result<()> {
    check_wc(wc)?;
    if wc.opcode == WcOpcode::Recv {
        note_recv(res, p, wc, size, rx)
    } else {
        rx.sent += 1;
        Ok(())
    }
}

fn note_recv(res: &mut Res, p: &Params, wc: &Wc, size: u64, rx: &mut Rx) -> Result<()> {
    rx.pending += 1;
    rx.seen += 1;
    if rx.bad.is_none() {
        if wc.byte_len as u64 != size {
            rx.bad = Some(format!("message #{}: {} bytes, expected {size}", rx.seen, wc.byte_len));
        } else if p.imm && (!wc.flags.contains(WcFlags::WITH_IMM) || wc.imm != rx.seen as u32) {
            rx.bad = Some(format!("message #{}: immediate {:#x} (flags {:?}), expected {:#x}", rx.seen, wc.imm, wc.flags, rx.seen as u32));
        }
    }
    res.rx_posted[0] -= 1;
    if res.rx_posted[0] <= res.rx_depth / 2 {
        res.refill(0)?;
    }
    Ok(())
}

/// The last byte of our receive area for a message of `size`.
fn poll_byte(res: &Res, size: u64) -> *const u8 {
    // SAFETY: size <= area.
    unsafe { res.recv_ptr(0).add(size as usize - 1) }
}

/// Resets what write-lat polls before a size starts (no transfer is in flight).
pub fn reset(res: &Res, p: &Params, size: u64) {
    if p.test.verb() == Verb::Write {
        // SAFETY: in our receive area; nothing writes it between sizes.
        unsafe { std::ptr::write_volatile(poll_byte(res, size) as *mut u8, 0) };
    }
}

/// One end of a ping-pong (write-lat, send-lat) or the client of read-lat.
///
/// The client stops after `iters` (or `-D` seconds, then sends its count); the server
/// answers until it has answered the client's count, which it learns from `iters` or,
/// for `-D`, from the out-of-band "counts" line.
pub fn run(res: &mut Res, p: &Params, size: u64, r: &QpInfo, oob: &mut Oob, client: bool, timeout: u64) -> Result<LatOut> {
    let timed = p.duration > 0.0;
    let mut wd = Watchdog::for_res(res, timeout);
    let mut samples = Vec::with_capacity(if client { p.iters as usize + 1 } else { 0 });
    let mut rx = Rx { pending: 0, seen: 0, sent: 0, bad: None };
    let mut limit = if timed && !client { u64::MAX } else { p.iters };
    let t0 = Instant::now();
    let stop_at = t0 + Duration::from_secs_f64(p.duration);
    let mut i = 0u64;
    let mut last = t0;
    let mut send_out = false; // a send/write is outstanding
    let verb = p.test.verb();
    let mut wcs = [Wc::default(); 4];
    while i < limit {
        if client && timed && Instant::now() >= stop_at {
            break;
        }
        i += 1;
        if verb == Verb::Read {
            let sge = [Sge::new(res.recv_addr(0), size as u32, res.mr().lkey())];
            let t = Instant::now();
            res.qps[0].post_send(SEND_ID, &SendWr::new(SendOp::RdmaRead { raddr: r.src, rkey: r.rkey }, Payload::Sgl(&sge)).signaled())?;
            let n = wait_cq(&mut res.cq, res.channel.as_ref(), &mut wcs, &mut wd, "read completion", false)?;
            for wc in &wcs[..n] {
                check_wc(wc)?;
            }
            samples.push(t.elapsed().as_secs_f64() * 1e6);
            continue;
        }
        // The server answers: first wait for the client's message number i.
        if !client && !wait_peer(res, p, size, i, &mut wd, &mut rx, oob, &mut limit, timed)? {
            i -= 1;
            break;
        }
        if send_out {
            reap_send(res, p, &mut wd, &mut rx, size)?;
        }
        if verb == Verb::Write {
            // SAFETY: our send area; the previous write completed (reaped above).
            unsafe { std::ptr::write_volatile(res.send_ptr(0).add(size as usize - 1), i as u8) };
        }
        if client {
            let now = Instant::now();
            if i > 1 {
                samples.push(now.duration_since(last).as_secs_f64() * 1e6 / 2.0);
            }
            last = now;
        }
        post_msg(res, p, size, r, i)?;
        send_out = true;
        if client {
            wait_peer(res, p, size, i, &mut wd, &mut rx, oob, &mut limit, false)?;
        }
    }
    if client && i > 0 && verb != Verb::Read {
        samples.push(last.elapsed().as_secs_f64() * 1e6 / 2.0);
    }
    if send_out {
        reap_send(res, p, &mut wd, &mut rx, size)?;
    }
    Ok(LatOut { count: i, samples, bad_len: rx.bad })
}

/// Waits for the peer's message `i`: the last byte of the receive area turning to `i`
/// (write) or a receive completion (send). A timed server also watches the out-of-band
/// connection for the client's final count and returns false once all are answered.
#[allow(clippy::too_many_arguments)]
fn wait_peer(
    res: &mut Res,
    p: &Params,
    size: u64,
    i: u64,
    wd: &mut Watchdog,
    rx: &mut Rx,
    oob: &mut Oob,
    limit: &mut u64,
    timed_server: bool,
) -> Result<bool> {
    let mut wcs = [Wc::default(); 4];
    loop {
        if timed_server && i > *limit {
            return Ok(false);
        }
        let look_oob = match p.test.verb() {
            Verb::Write => {
                // SAFETY: in our receive area; the device writes it, hence volatile.
                if unsafe { std::ptr::read_volatile(poll_byte(res, size)) } == i as u8 {
                    wd.progress();
                    return Ok(true);
                }
                wd.idle("the peer's write")?;
                wd.every_ms()
            }
            Verb::Send => {
                if rx.pending > 0 {
                    rx.pending -= 1;
                    return Ok(true);
                }
                let n = wait_cq(&mut res.cq, res.channel.as_ref(), &mut wcs, wd, "the peer's send", timed_server)?;
                for wc in &wcs[..n] {
                    note(res, p, wc, size, rx)?;
                }
                n == 0
            }
            _ => unreachable!(),
        };
        if timed_server && look_oob {
            if let Some(l) = oob.try_recv()? {
                *limit = parse_counts(&l, 1)?[0];
            }
        }
    }
}
