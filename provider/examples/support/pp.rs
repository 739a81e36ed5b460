//! What the pingpong examples share with each other and with libibverbs' examples
//! (`pingpong.c` and each program's `pp_*_exch_dest`): the command line, the
//! out-of-band TCP exchange ("LID:QPN:PSN:GID" in hex, 52 bytes with the NUL, then
//! "done"), the address lines and the result lines, so that each example
//! interoperates with the stock program in either role and reads like it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

pub type Res<T> = Result<T, Box<dyn std::error::Error>>;

pub const RECV_WRID: u64 = 1;
pub const SEND_WRID: u64 = 2;

/// The stock programs' options (each program's defaults in `Opts::parse`).
#[derive(Debug, Clone)]
pub struct Opts {
    pub port: u16,
    pub dev: Option<String>,
    pub ib_port: u8,
    pub size: u32,
    pub mtu: u32,
    pub num_qp: u32,
    pub rx_depth: u32,
    pub iters: u32,
    pub sl: u8,
    pub events: bool,
    pub gid_idx: i32,
    pub chk: bool,
    /// UC instead of RC (`--uc`, this examples' own flag: ibv_uc_pingpong's transport).
    pub uc: bool,
    pub host: Option<String>,
}

impl Opts {
    /// Parses `-x VAL`, `-xVAL`, `--long=VAL` and `--long VAL` as getopt_long does.
    pub fn parse(mut o: Opts) -> Res<Opts> {
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            let (key, inline): (String, Option<String>) = if let Some(l) = a.strip_prefix("--") {
                match l.split_once('=') {
                    Some((k, v)) => (k.into(), Some(v.into())),
                    None => (l.into(), None),
                }
            } else if a.len() > 1 && a.starts_with('-') {
                (a[1..2].into(), (a.len() > 2).then(|| a[2..].to_string()))
            } else {
                o.host = Some(a);
                continue;
            };
            let flag = matches!(key.as_str(), "e" | "events" | "c" | "chk" | "uc");
            let v = if flag { String::new() } else { inline.or_else(|| args.next()).ok_or(format!("option {key} needs a value"))? };
            let num = |v: &str| -> Res<i64> {
                Ok(match v.strip_prefix("0x") { Some(h) => i64::from_str_radix(h, 16)?, None => v.parse()? })
            };
            match key.as_str() {
                "p" | "port" => o.port = num(&v)?.try_into()?,
                "d" | "ib-dev" => o.dev = Some(v),
                "i" | "ib-port" => o.ib_port = num(&v)?.try_into()?,
                "s" | "size" => o.size = num(&v)?.try_into()?,
                "m" | "mtu" => o.mtu = num(&v)?.try_into()?,
                "q" | "num-qp" => o.num_qp = num(&v)?.try_into()?,
                "r" | "rx-depth" => o.rx_depth = num(&v)?.try_into()?,
                "n" | "iters" => o.iters = num(&v)?.try_into()?,
                "l" | "sl" => o.sl = num(&v)?.try_into()?,
                "g" | "gid-idx" => o.gid_idx = num(&v)?.try_into()?,
                "e" | "events" => o.events = true,
                "c" | "chk" => o.chk = true,
                "uc" => o.uc = true,
                k => return Err(format!("unknown option {k}").into()),
            }
        }
        Ok(o)
    }

    /// `pp_mtu_to_enum`.
    pub fn mtu_code(&self) -> Res<u8> {
        Ok(match self.mtu {
            256 => 1,
            512 => 2,
            1024 => 3,
            2048 => 4,
            4096 => 5,
            m => return Err(format!("invalid MTU {m}").into()),
        })
    }
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            port: 18515, dev: None, ib_port: 1, size: 4096, mtu: 1024, num_qp: 1, rx_depth: 500, iters: 1000, sl: 0,
            events: false, gid_idx: -1, chk: false, uc: false, host: None,
        }
    }
}

/// One end's address as exchanged (the stock programs' message: `provider::oob`).
pub use provider::oob::Dest;

/// The exchange of `mine` (several for srq_pingpong) for as many remote addresses:
/// the client writes its addresses, reads the server's, then writes "done"; the
/// server reads, calls `connect` (its QPs must be ready before the client sends),
/// writes its own and waits for "done".
pub fn exchange(o: &Opts, mine: &[Dest], connect: impl FnOnce(&[Dest]) -> Res<()>) -> Res<Vec<Dest>> {
    let read_all = |s: &mut TcpStream| -> Res<Vec<Dest>> {
        (0..mine.len()).map(|_| {
            let mut m = [0u8; provider::oob::WIRE_LEN];
            s.read_exact(&mut m)?;
            Ok(Dest::from_wire(&m)?)
        }).collect()
    };
    let write_all = |s: &mut TcpStream| -> Res<()> {
        for d in mine {
            s.write_all(&d.to_wire())?;
        }
        Ok(())
    };
    if let Some(host) = &o.host {
        let mut s = TcpStream::connect((host.as_str(), o.port)).map_err(|e| format!("Couldn't connect to {host}:{}: {e}", o.port))?;
        write_all(&mut s)?;
        let rem = read_all(&mut s)?;
        s.write_all(b"done\0")?;
        connect(&rem)?;
        Ok(rem)
    } else {
        let l = TcpListener::bind(("0.0.0.0", o.port)).map_err(|e| format!("Couldn't listen to port {}: {e}", o.port))?;
        let (mut s, _) = l.accept()?;
        let rem = read_all(&mut s)?;
        connect(&rem)?;
        write_all(&mut s)?;
        let mut done = [0u8; 5];
        s.read_exact(&mut done)?;
        Ok(rem)
    }
}

/// The two result lines.
pub fn report(bytes: u64, iters: u64, elapsed: std::time::Duration) {
    let usec = elapsed.as_secs_f64() * 1e6;
    println!("{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec", usec / 1e6, bytes as f64 * 8.0 / usec);
    println!("{iters} iters in {:.2} seconds = {:.2} usec/iter", usec / 1e6, usec / iters as f64);
}

/// A 24-bit PSN, as `lrand48() & 0xffffff` gives.
pub fn psn() -> u32 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    ((t.subsec_nanos() ^ std::process::id().wrapping_mul(2654435761)) & 0xff_ffff) as u32
}

/// The local GID for `-g` (`ibv_query_gid`), or zeros without it.
pub fn local_gid(ctx: &provider::Context, o: &Opts) -> Res<([u8; 16], u8)> {
    if o.gid_idx < 0 {
        return Ok(([0; 16], 0));
    }
    Ok((ctx.query_gid(o.ib_port, o.gid_idx as u32)?.raw(), o.gid_idx as u8))
}

/// A completion that did not succeed, in the stock programs' words.
pub fn check_status(wc: &provider::Wc) -> Res<()> {
    if wc.status != provider::cqe::WcStatus::Success {
        return Err(format!("Failed status {} ({}) for wr_id {}", wc.status.as_str(), wc.status as u32, wc.wr_id).into());
    }
    Ok(())
}

/// Waits for completions: busy polling (spinning briefly, then yielding: a softhca
/// device thread may need the CPU) or, with `-e`, a completion event, re-arm, poll.
pub fn wait_wcs(cq: &mut provider::Cq, chan: Option<&provider::CompChannel>, wcs: &mut [provider::Wc]) -> Res<usize> {
    if let Some(ch) = chan {
        ch.get_event(None)?;
        cq.ack_event();
        cq.req_notify(false);
        return Ok(cq.poll(wcs));
    }
    let mut spins = 0u32;
    loop {
        let n = cq.poll(wcs);
        if n > 0 {
            return Ok(n);
        }
        spins += 1;
        if spins < 64 { std::hint::spin_loop() } else { std::thread::yield_now() }
    }
}

/// `-c`: the first byte of every page of a received message is 0 (what the stock
/// programs put there and check).
pub fn bad_pages(buf: &[u8]) -> usize {
    buf.iter().step_by(provider::buf::page_size()).filter(|&&b| b != 0).count()
}
