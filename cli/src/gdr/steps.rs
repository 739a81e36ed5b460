//! The steps of one verify pass, from both ends.
//!
//! The *target* (the process the user started) owns the memory under test; the *peer*
//! (a child process, its own softhca host) is the initiator: it writes a pattern into
//! the target's memory, reads it back, sends into a receive buffer there, sends and
//! writes inline data, runs fetch-and-add and compare-and-swap on it, and finally makes
//! two writes the target's MR must refuse. The target keeps the image it expects its
//! whole buffer to hold and, after every step, copies the buffer back (CUDA copies for
//! GPU memory) and compares every byte: a step passes only if its bytes landed and no
//! other byte changed.
//!
//! Exchange after the connection (lines, see [`crate::bench::oob`]):
//!
//! ```text
//! target -> peer   step <name>              (after its own preparation: receives posted...)
//! peer -> target   result ok <detail>       (or: result fail <why>)
//! ...
//! target -> peer   bye
//! ```

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use provider::cqe::{WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::Mr;

use ::gdr::caps::{Check, Verdict};

use super::link::Link;
use super::mem::Mem;
use crate::bench::oob::Oob;

/// Bytes of the target's buffer and the peer's: three of softhca's 1 MiB peer segments,
/// so that long transfers cross segment boundaries.
pub const BUF_LEN: usize = 3 << 20;

/// The WRITE (and READ back): an odd length at an odd offset, over two segment
/// boundaries.
const WRITE_OFF: usize = 4099;
const WRITE_LEN: usize = (2 << 20) + 4093;
/// The receive buffer of the SEND, and the SEND (shorter than the buffer).
const RECV_OFF: usize = (1 << 20) + 12345;
const RECV_LEN: usize = (1 << 20) + 500_000;
const SEND_LEN: usize = (1 << 20) + 333_333;
/// The inline SEND's receive buffer and length; the inline WRITE's place and length.
const IRECV_OFF: usize = BUF_LEN - 4096 + 1;
const IRECV_LEN: usize = 200;
const ISEND_LEN: usize = 50;
const IWRITE_OFF: usize = BUF_LEN - 100;
const IWRITE_LEN: usize = 37;
/// The atomics' word (8-aligned), its start value, the add and the swap.
const ATOMIC_OFF: usize = 8000;
const ATOMIC_START: u64 = 0x1111_2222_3333_4444;
const ATOMIC_ADD: u64 = 0x0000_0001_0000_0010;
const ATOMIC_SWAP: u64 = 0xdead_beef_0000_0001;
/// The refused writes: 64 bytes straddling the buffer's end; 64 bytes with a key whose
/// low byte (the key's variant, which Linux and mlx5 check) is changed.
const BAD_LEN: usize = 64;
const RKEY_FLIP: u32 = 0x80;

const SEED_WRITE: u64 = 0x5eed_0001;
const SEED_SEND: u64 = 0x5eed_0002;
const SEED_ISEND: u64 = 0x5eed_0003;
const SEED_IWRITE: u64 = 0x5eed_0004;

// The step table's ranges, checked at compile time: every range ends inside BUF_LEN,
// the SEND fits its receive buffer, the atomic word is 8-aligned, the inline payloads fit
// the QPs' inline size, and the WRITE crosses both 1 MiB boundaries of softhca's peer
// segments.
const _: () = {
    assert!(WRITE_OFF + WRITE_LEN <= BUF_LEN);
    assert!(WRITE_OFF < 1 << 20 && WRITE_OFF + WRITE_LEN > 2 << 20);
    assert!(RECV_OFF + RECV_LEN <= BUF_LEN && SEND_LEN <= RECV_LEN);
    assert!(IRECV_OFF + IRECV_LEN <= BUF_LEN && ISEND_LEN <= IRECV_LEN);
    assert!(IWRITE_OFF + IWRITE_LEN <= BUF_LEN);
    assert!(ATOMIC_OFF % 8 == 0);
    assert!(ISEND_LEN <= super::link::INLINE as usize);
    assert!(IWRITE_LEN <= super::link::INLINE as usize);
};

/// A deliberate mistake of the peer, for the tests that show a wrong transfer is
/// caught (hidden `--fault`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// The WRITE lands one byte later than announced.
    ShiftWrite,
    /// The out-of-bounds step writes inside the MR instead.
    InBounds,
}

/// How long one completion may take.
const LIMIT: Duration = Duration::from_secs(20);

/// The steps, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Write,
    Read,
    Send,
    InlineSend,
    InlineWrite,
    Atomics,
    OutOfBounds,
    WrongRkey,
}

pub const STEPS: [Step; 8] =
    [Step::Write, Step::Read, Step::Send, Step::InlineSend, Step::InlineWrite, Step::Atomics, Step::OutOfBounds, Step::WrongRkey];

impl Step {
    pub fn name(self) -> &'static str {
        match self {
            Step::Write => "write",
            Step::Read => "read",
            Step::Send => "send",
            Step::InlineSend => "inline-send",
            Step::InlineWrite => "inline-write",
            Step::Atomics => "atomics",
            Step::OutOfBounds => "out-of-bounds",
            Step::WrongRkey => "wrong-rkey",
        }
    }

    fn from_name(s: &str) -> Option<Step> {
        STEPS.iter().copied().find(|x| x.name() == s)
    }

    /// The report's title for memory called `noun` ("GPU memory").
    pub fn title(self, noun: &str) -> String {
        match self {
            Step::Write => format!("RDMA WRITE into {noun} ({WRITE_LEN} B at offset {WRITE_OFF})"),
            Step::Read => format!("RDMA READ of {noun} (the same {WRITE_LEN} B back)"),
            Step::Send => format!("SEND into a receive buffer in {noun} ({SEND_LEN} B into {RECV_LEN} B at offset {RECV_OFF})"),
            Step::InlineSend => format!("inline SEND into {noun} ({ISEND_LEN} B)"),
            Step::InlineWrite => format!("inline RDMA WRITE into {noun} ({IWRITE_LEN} B at offset {IWRITE_OFF})"),
            Step::Atomics => format!("atomics on {noun} (fetch-and-add, compare-and-swap hit and miss, at offset {ATOMIC_OFF})"),
            Step::OutOfBounds => format!("RDMA WRITE past the end of the {noun} MR is refused"),
            Step::WrongRkey => format!("RDMA WRITE to {noun} with a wrong rkey is refused"),
        }
    }
}

/// `len` bytes of the pattern `seed` (a linear congruential sequence, top byte of each
/// state: no period short enough to hide a misplaced block).
pub fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
            (x >> 56) as u8
        })
        .collect()
}

/// Compares `got` with `want`: the first differing byte and how many differ.
pub fn diff(got: &[u8], want: &[u8]) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{} bytes, expected {}", got.len(), want.len()));
    }
    let mut bad = got.iter().zip(want).enumerate().filter(|(_, (a, b))| a != b);
    let Some((first, (g, w))) = bad.next() else { return Ok(()) };
    let n = 1 + bad.count();
    Err(format!("{n} byte(s) differ, the first at offset {first}: {g:#04x}, expected {w:#04x}"))
}

/// What the target of a pass holds.
pub struct Target<'a> {
    pub link: &'a mut Link,
    pub mem: &'a Mem,
    pub mr: &'a Mr,
    /// What every byte of `mem` should hold.
    expect: Vec<u8>,
}

impl<'a> Target<'a> {
    /// Fills the memory with a background the steps must not disturb.
    pub fn new(link: &'a mut Link, mem: &'a Mem, mr: &'a Mr) -> Result<Target<'a>> {
        let expect = pattern(0xbac6_9500, mem.len());
        mem.write(0, &expect)?;
        Ok(Target { link, mem, mr, expect })
    }

    /// One step from the target's side: prepare, tell the peer, hear its result, check.
    pub fn run(&mut self, step: Step, oob: &mut Oob, noun: &str) -> Result<Check> {
        let title = step.title(noun);
        let recv_id = 0x5e00 | step as u64;
        match step {
            Step::Send => self.post_recv(RECV_OFF, RECV_LEN, recv_id)?,
            Step::InlineSend => self.post_recv(IRECV_OFF, IRECV_LEN, recv_id)?,
            Step::Atomics => {
                self.mem.write(ATOMIC_OFF, &ATOMIC_START.to_ne_bytes())?;
                self.expect[ATOMIC_OFF..ATOMIC_OFF + 8].copy_from_slice(&ATOMIC_START.to_ne_bytes());
            }
            _ => {}
        }
        oob.send(&format!("step {}", step.name()))?;
        let r = oob.expect("result")?;
        let (peer_ok, detail) = match r.split_once(' ') {
            Some(("ok", d)) => (true, d.to_string()),
            None if r == "ok" => (true, String::new()),
            Some(("fail", why)) => (false, why.to_string()),
            _ => bail!("bad result line {r:?}"),
        };
        if !peer_ok {
            // Say what the failed step did to the memory, then judge later steps on their
            // own: take the memory as it is now.
            let image = self.mem.read_all()?;
            let mem = match diff(&image, &self.expect) {
                Ok(()) => "no byte of the buffer changed".to_string(),
                Err(e) => format!("in the buffer {e}"),
            };
            self.expect = image;
            return Ok(Check::new(title, Verdict::Fail, format!("peer: {detail}; {mem}")));
        }
        let landed = match step {
            Step::Write => Some((WRITE_OFF, pattern(SEED_WRITE, WRITE_LEN))),
            Step::Send => self.recv_done(recv_id, SEND_LEN).map(|()| Some((RECV_OFF, pattern(SEED_SEND, SEND_LEN))))?,
            Step::InlineSend => self.recv_done(recv_id, ISEND_LEN).map(|()| Some((IRECV_OFF, pattern(SEED_ISEND, ISEND_LEN))))?,
            Step::InlineWrite => Some((IWRITE_OFF, pattern(SEED_IWRITE, IWRITE_LEN))),
            Step::Atomics => Some((ATOMIC_OFF, ATOMIC_SWAP.to_ne_bytes().to_vec())),
            Step::Read | Step::OutOfBounds | Step::WrongRkey => None,
        };
        if let Some((off, bytes)) = landed {
            self.expect[off..off + bytes.len()].copy_from_slice(&bytes);
        }
        let image = self.mem.read_all()?;
        let what = match step {
            Step::Read | Step::OutOfBounds | Step::WrongRkey => "no byte of the buffer changed",
            _ => "every byte of the buffer as expected",
        };
        Ok(match diff(&image, &self.expect) {
            Ok(()) => Check::new(title, Verdict::Pass, format!("{detail}{}{what} (copied back)", if detail.is_empty() { "" } else { "; " })),
            Err(e) => {
                self.expect = image;
                Check::new(title, Verdict::Fail, format!("{}: {e}", if landed_step(step) { "the buffer" } else { "the buffer changed" }))
            }
        })
    }

    fn post_recv(&mut self, off: usize, len: usize, wr_id: u64) -> Result<()> {
        let sge = [Sge::new(self.mem.addr() + off as u64, len as u32, self.mr.lkey())];
        self.link.qps[0].post_recv(wr_id, &sge)?;
        Ok(())
    }

    fn recv_done(&mut self, wr_id: u64, len: usize) -> Result<()> {
        let wc = self.link.wait_ok(wr_id, LIMIT).map_err(|e| anyhow!("the receive: {e:#}"))?;
        if wc.opcode != WcOpcode::Recv || wc.byte_len as usize != len {
            bail!("the receive completed as {:?} of {} B, expected a SEND of {len} B", wc.opcode, wc.byte_len);
        }
        Ok(())
    }
}

fn landed_step(s: Step) -> bool {
    !matches!(s, Step::Read | Step::OutOfBounds | Step::WrongRkey)
}

/// The target's memory as the peer reaches it.
#[derive(Debug, Clone, Copy)]
pub struct Remote {
    pub addr: u64,
    pub len: usize,
    pub rkey: u32,
}

/// The peer's side of every step until `bye`.
pub fn peer_loop(link: &mut Link, mem: &Mem, mr: &Mr, remote: Remote, oob: &mut Oob, fault: Option<Fault>) -> Result<()> {
    loop {
        let l = oob.recv()?;
        if l == "bye" {
            return Ok(());
        }
        let name = l.strip_prefix("step ").ok_or_else(|| anyhow!("expected a step, got {l:?}"))?;
        let step = Step::from_name(name).ok_or_else(|| anyhow!("unknown step {name:?}"))?;
        let line = match peer_step(link, mem, mr, remote, step, fault) {
            Ok(d) => format!("result ok {d}"),
            Err(e) => format!("result fail {}", format!("{e:#}").replace('\n', " ")),
        };
        oob.send(&line)?;
    }
}

fn post(link: &mut Link, q: usize, wr_id: u64, op: SendOp, payload: Payload<'_>) -> Result<()> {
    link.qps[q].post_send(wr_id, &SendWr::new(op, payload).signaled())?;
    Ok(())
}

/// One step from the peer: its operations and its own checks; the detail for the report.
fn peer_step(link: &mut Link, mem: &Mem, mr: &Mr, r: Remote, step: Step, fault: Option<Fault>) -> Result<String> {
    let lkey = mr.lkey();
    let at = |off: usize| r.addr + off as u64;
    let id = 0x1000 | step as u64;
    match step {
        Step::Write => {
            mem.write(0, &pattern(SEED_WRITE, WRITE_LEN))?;
            let sge = [Sge::new(mem.addr(), WRITE_LEN as u32, lkey)];
            let off = if fault == Some(Fault::ShiftWrite) { WRITE_OFF + 1 } else { WRITE_OFF };
            post(link, 0, id, SendOp::RdmaWrite { raddr: at(off), rkey: r.rkey }, Payload::Sgl(&sge))?;
            link.wait_ok(id, LIMIT)?;
            Ok(format!("from {}", mem.kind().noun()))
        }
        Step::Read => {
            mem.fill(0xee)?;
            let sge = [Sge::new(mem.addr(), WRITE_LEN as u32, lkey)];
            post(link, 0, id, SendOp::RdmaRead { raddr: at(WRITE_OFF), rkey: r.rkey }, Payload::Sgl(&sge))?;
            link.wait_ok(id, LIMIT)?;
            let got = mem.read_all()?;
            diff(&got[..WRITE_LEN], &pattern(SEED_WRITE, WRITE_LEN)).map_err(|e| anyhow!("the data read back: {e}"))?;
            if let Some(i) = got[WRITE_LEN..].iter().position(|&b| b != 0xee) {
                bail!("the READ wrote past its {WRITE_LEN} B, at offset {}", WRITE_LEN + i);
            }
            Ok(format!("every byte read back into {} as written", mem.kind().noun()))
        }
        Step::Send => {
            mem.write(0, &pattern(SEED_SEND, SEND_LEN))?;
            let sge = [Sge::new(mem.addr(), SEND_LEN as u32, lkey)];
            post(link, 0, id, SendOp::Send, Payload::Sgl(&sge))?;
            link.wait_ok(id, LIMIT)?;
            Ok(format!("from {}", mem.kind().noun()))
        }
        Step::InlineSend | Step::InlineWrite => {
            let max = link.qps[0].cap().max_inline_data as usize;
            let (len, seed) = if step == Step::InlineSend { (ISEND_LEN, SEED_ISEND) } else { (IWRITE_LEN, SEED_IWRITE) };
            if max < len {
                bail!("the QP takes {max} inline bytes, the step needs {len}");
            }
            let data = pattern(seed, len);
            let parts: [&[u8]; 1] = [&data];
            let op = if step == Step::InlineSend { SendOp::Send } else { SendOp::RdmaWrite { raddr: at(IWRITE_OFF), rkey: r.rkey } };
            post(link, 0, id, op, Payload::Inline(&parts))?;
            link.wait_ok(id, LIMIT)?;
            Ok(String::new())
        }
        Step::Atomics => {
            mem.fill(0)?;
            let ops = [
                (SendOp::FetchAdd { raddr: at(ATOMIC_OFF), rkey: r.rkey, add: ATOMIC_ADD }, ATOMIC_START, "fetch-and-add"),
                (
                    SendOp::CompareSwap { raddr: at(ATOMIC_OFF), rkey: r.rkey, compare: ATOMIC_START.wrapping_add(ATOMIC_ADD), swap: ATOMIC_SWAP },
                    ATOMIC_START.wrapping_add(ATOMIC_ADD),
                    "compare-and-swap (equal)",
                ),
                (SendOp::CompareSwap { raddr: at(ATOMIC_OFF), rkey: r.rkey, compare: ATOMIC_START, swap: 0x5555 }, ATOMIC_SWAP, "compare-and-swap (not equal)"),
            ];
            for (i, (op, _, _)) in ops.iter().enumerate() {
                let sge = [Sge::new(mem.addr() + 8 * i as u64, 8, lkey)];
                post(link, 0, id + i as u64, *op, Payload::Sgl(&sge))?;
                link.wait_ok(id + i as u64, LIMIT)?;
            }
            let got = mem.read_all()?;
            for (i, (_, want, what)) in ops.iter().enumerate() {
                let v = u64::from_ne_bytes(got[8 * i..8 * i + 8].try_into().unwrap());
                if v != *want {
                    bail!("{what} returned {v:#018x}, expected {want:#018x}");
                }
            }
            Ok(format!("original values {ATOMIC_START:#x}, {:#x}, {ATOMIC_SWAP:#x} returned into {}", ATOMIC_START.wrapping_add(ATOMIC_ADD), mem.kind().noun()))
        }
        Step::OutOfBounds | Step::WrongRkey => {
            let (q, raddr, rkey) = match step {
                Step::OutOfBounds if fault == Some(Fault::InBounds) => (1, at(r.len - BAD_LEN), r.rkey),
                Step::OutOfBounds => (1, at(r.len - BAD_LEN / 2), r.rkey),
                _ => (2, at(8192), r.rkey ^ RKEY_FLIP),
            };
            mem.write(0, &[0xab; BAD_LEN])?;
            let sge = [Sge::new(mem.addr(), BAD_LEN as u32, lkey)];
            post(link, q, id, SendOp::RdmaWrite { raddr, rkey }, Payload::Sgl(&sge))?;
            let wc = link.wait(LIMIT)?;
            if wc.status != WcStatus::RemAccessErr {
                bail!("the write completed with {} ({}), expected REM_ACCESS_ERR (10)", wc.status.as_str(), wc.status as u32);
            }
            Ok(format!("completed with REM_ACCESS_ERR (raddr {raddr:#x}, rkey {rkey:#x})"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pattern is the LCG of Knuth's MMIX constants; its first bytes for seed 0
    /// are the top bytes of 1442695040888963407 (0x14057b7ef767814f) and of its
    /// successor (computed apart, with Python's integers mod 2^64): 0x14, then 0x1a.
    #[test]
    fn pattern_and_diff() {
        assert_eq!(pattern(0, 2), vec![0x14, 0x1a]);
        assert_ne!(pattern(1, 64), pattern(2, 64));
        assert_eq!(diff(&[1, 2, 3], &[1, 2, 3]), Ok(()));
        assert_eq!(diff(&[1, 9, 3, 8], &[1, 2, 3, 4]).unwrap_err(), "2 byte(s) differ, the first at offset 1: 0x09, expected 0x02");
    }
}
