//! dma-buf MRs on softhca, end to end, with a real dma-buf: a vgem dumb buffer inside the
//! QEMU guest of tests/vm/rxe-vm.sh (the only place here that has one: the build machine
//! has no vgem, udmabuf or dma-buf heap).
//!
//! The host side of the test boots the guest once and runs this same test binary in it
//! (environment `DOORBELL_VGEM_ROLE=guest`); in the guest every case runs and prints one
//! line, `VGEM <case> PASS` or `VGEM <case> FAIL <why>`, and the host checks that every
//! case of [`CASES`] passed. Without the VM the test says `SKIP: ...`; with
//! `DOORBELL_REQUIRE_VM=1` (CI) it fails instead.
//!
//! The cases, on two softhca instances in one process ("nic", whose MR is ordinary host
//! memory, and "gpu", whose MR is the dma-buf), every operation with the dma-buf MR in
//! each role: RDMA WRITE and READ into / out of it as the responder's MR, WRITE and READ
//! with it as the requester's local source / sink, SEND into a receive buffer in it, SEND
//! from it, inline WRITE and SEND into it, CAS and FAA on it; and the bad inputs: writes
//! past either end of the MR (inside the dma-buf, so a missing bounds check would show),
//! a wrong rkey, an MR without remote write, a deregistered MR, each completing with
//! REMOTE_ACCESS_ERR and no byte of the whole dma-buf changed (read back through a
//! second, separate mapping of the fd); a local SGE past the MR's end or with a wrong
//! lkey, LOC_PROT_ERR. One case runs across two processes: a peer
//! process in the guest owns the dma-buf MR, this one writes and reads it over RoCEv2.

#[path = "../../softhca/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsFd;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Stdio};

use common::*;
use gdr::vgem::{self, Dmabuf, Mapping, Vgem};
use provider::cqe::{WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp, Sge};
use provider::{Access, Mr};

const ROLE: &str = "DOORBELL_VGEM_ROLE";
/// The dma-buf: 64 KiB.
const BUF: usize = 64 << 10;
/// The MR: 32 KiB from offset 4 KiB of the dma-buf, so the buffer has bytes on both
/// sides of it that an out-of-bounds access would reach.
const MR_OFF: usize = 4096;
const MR_LEN: usize = 32 << 10;
/// The MR's iova: not the address of any mapping in this process (as with GPU memory,
/// where it is the CUDA device pointer), same page offset as `MR_OFF`.
const IOVA: u64 = 0x7e00_0000_0000;

type Check = Result<(), String>;

macro_rules! ensure {
    ($c:expr, $($f:tt)+) => {
        if !$c { return Err(format!($($f)+)); }
    };
}

/// A xorshift pattern, different per seed (never all-zero).
fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len).map(|_| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    }).collect()
}

/// Where the first difference is, for failure messages.
fn first_diff(a: &[u8], b: &[u8]) -> String {
    match a.iter().zip(b).position(|(x, y)| x != y) {
        Some(i) => format!("first difference at byte {i}: {:#04x} vs {:#04x}", a[i], b[i]),
        None => format!("lengths {} vs {}", a.len(), b.len()),
    }
}

/// The two instances, the dma-buf, its MR on "gpu" and a second mapping for checks.
struct Fixture {
    nic: Host,
    gpu: Host,
    buf: Dmabuf,
    /// The CPU's view, a mapping separate from the one softhca made when registering.
    view: Mapping,
    mr: Mr,
    /// Ordinary host memory on "nic": source and sink of the peer's side.
    local: Mem,
}

impl Fixture {
    fn new() -> Result<Fixture, String> {
        let vgem = Vgem::open().map_err(|e| e.to_string())?;
        let buf = vgem.create(BUF).map_err(|e| format!("vgem create: {e}"))?;
        ensure!(buf.len() == BUF, "vgem buffer of {} bytes, asked {BUF}", buf.len());
        let view = buf.map().map_err(|e| e.to_string())?;
        view.write(0, &pattern(1, BUF));
        let nic = Host::new([127, 9, 1, 1]);
        let gpu = Host::new([127, 9, 1, 2]);
        let mr = gpu.pd.reg_dmabuf_mr(buf.fd(), MR_OFF as u64, MR_LEN, IOVA, all_access())
            .map_err(|e| format!("reg_dmabuf_mr: {e}"))?;
        let local = nic.mem(MR_LEN, all_access());
        Ok(Fixture { nic, gpu, buf, view, mr, local })
    }

    /// A fresh connected pair (nic end, gpu end): every case starts from RTS, and error
    /// cases leave theirs in ERR.
    fn pair(&self) -> (End, End) {
        connect(&self.nic, &self.gpu, &Opts::default())
    }

    /// The dma-buf MR's bytes `[off, off + len)` as the CPU sees them.
    fn mr_bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.view.read(MR_OFF + off, len)
    }

    fn sge(&self, off: usize, len: usize) -> Sge {
        Sge::new(IOVA + off as u64, len as u32, self.mr.lkey())
    }
}

fn one(cq: &mut provider::Cq, want: WcStatus) -> Result<provider::Wc, String> {
    let wc = wait(cq, 1)[0];
    ensure!(wc.status == want, "completion {:?}, expected {want:?}: {wc:?}", wc.status);
    Ok(wc)
}

// ------------------------------------------------------------------ the cases

fn register(f: &Fixture) -> Check {
    // drm_gem_prime_export (drivers/gpu/drm/drm_prime.c) exports with
    // `.exp_name = KBUILD_MODNAME`, the DRM core's module name.
    let exp = vgem::exporter_name(f.buf.fd());
    ensure!(exp.as_deref() == Some("drm"), "exporter {exp:?} in the fd's fdinfo, expected \"drm\"");
    ensure!(f.mr.lkey() != 0 && f.mr.rkey() != 0, "keys {:#x} {:#x}", f.mr.lkey(), f.mr.rkey());
    ensure!(f.mr.addr() == IOVA, "Mr::addr {:#x}, iova {IOVA:#x}", f.mr.addr());
    Ok(())
}

/// nic WRITEs into the dma-buf (responder MR), across a page boundary.
fn write_into(f: &Fixture) -> Check {
    let (mut e, _g) = f.pair();
    let data = pattern(2, 10_000);
    f.local.buf.write(0, &data);
    let before = f.view.read(0, BUF);
    e.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: IOVA + 3000, rkey: f.mr.rkey() },
                                Payload::Sgl(&[f.local.sge(0, data.len())]))).map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::Success)?;
    let got = f.mr_bytes(3000, data.len());
    ensure!(got == data, "dma-buf after WRITE: {}", first_diff(&got, &data));
    // Nothing else moved.
    let mut want = before;
    want[MR_OFF + 3000..MR_OFF + 3000 + data.len()].copy_from_slice(&data);
    let all = f.view.read(0, BUF);
    ensure!(all == want, "bytes outside the written range changed: {}", first_diff(&all, &want));
    Ok(())
}

/// nic READs from the dma-buf (responder MR).
fn read_from(f: &Fixture) -> Check {
    let (mut e, _g) = f.pair();
    let data = pattern(3, 9000);
    f.view.write(MR_OFF + 5000, &data);
    e.qp.post_send(1, &signaled(SendOp::RdmaRead { raddr: IOVA + 5000, rkey: f.mr.rkey() },
                                Payload::Sgl(&[f.local.sge(100, data.len())]))).map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::Success)?;
    let got = &f.local.buf.read()[100..100 + data.len()];
    ensure!(got == &data[..], "host buffer after READ: {}", first_diff(got, &data));
    Ok(())
}

/// gpu WRITEs from the dma-buf (local source) into nic's host memory.
fn write_from(f: &Fixture) -> Check {
    let (_e, mut g) = f.pair();
    let data = pattern(4, 7000);
    f.view.write(MR_OFF + 8192, &data);
    g.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: f.local.addr() + 64, rkey: f.local.mr.rkey() },
                                Payload::Sgl(&[f.sge(8192, data.len())]))).map_err(|e| e.to_string())?;
    one(&mut g.scq, WcStatus::Success)?;
    let got = &f.local.buf.read()[64..64 + data.len()];
    ensure!(got == &data[..], "host buffer after WRITE from the dma-buf: {}", first_diff(got, &data));
    Ok(())
}

/// gpu READs nic's host memory into the dma-buf (local sink).
fn read_into(f: &Fixture) -> Check {
    let (_e, mut g) = f.pair();
    let data = pattern(5, 6000);
    f.local.buf.write(200, &data);
    g.qp.post_send(1, &signaled(SendOp::RdmaRead { raddr: f.local.addr() + 200, rkey: f.local.mr.rkey() },
                                Payload::Sgl(&[f.sge(12_000, data.len())]))).map_err(|e| e.to_string())?;
    one(&mut g.scq, WcStatus::Success)?;
    let got = f.mr_bytes(12_000, data.len());
    ensure!(got == data, "dma-buf after READ into it: {}", first_diff(&got, &data));
    Ok(())
}

/// nic SENDs into a receive buffer in the dma-buf, scattered over two SGEs of it.
fn send_into(f: &Fixture) -> Check {
    let (mut e, mut g) = f.pair();
    let data = pattern(6, 3000);
    f.local.buf.write(0, &data);
    g.qp.post_recv(7, &[f.sge(16_000, 1000), f.sge(20_000, 4000)]).map_err(|e| e.to_string())?;
    e.qp.post_send(1, &signaled(SendOp::Send, Payload::Sgl(&[f.local.sge(0, data.len())]))).map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::Success)?;
    let wc = one(&mut g.rcq, WcStatus::Success)?;
    ensure!(wc.opcode == WcOpcode::Recv && wc.byte_len == 3000 && wc.wr_id == 7, "receive completion {wc:?}");
    let (a, b) = (f.mr_bytes(16_000, 1000), f.mr_bytes(20_000, 2000));
    ensure!(a == data[..1000] && b == data[1000..], "dma-buf after SEND: {} / {}", first_diff(&a, &data[..1000]),
            first_diff(&b, &data[1000..]));
    Ok(())
}

/// gpu SENDs from the dma-buf into a host receive buffer.
fn send_from(f: &Fixture) -> Check {
    let (mut e, mut g) = f.pair();
    let data = pattern(7, 2500);
    f.view.write(MR_OFF + 24_000, &data);
    e.qp.post_recv(3, &[f.local.sge(0, 4096)]).map_err(|e| e.to_string())?;
    g.qp.post_send(1, &signaled(SendOp::Send, Payload::Sgl(&[f.sge(24_000, data.len())]))).map_err(|e| e.to_string())?;
    one(&mut g.scq, WcStatus::Success)?;
    let wc = one(&mut e.rcq, WcStatus::Success)?;
    ensure!(wc.byte_len == 2500, "receive completion {wc:?}");
    let got = &f.local.buf.read()[..data.len()];
    ensure!(got == &data[..], "host buffer after SEND from the dma-buf: {}", first_diff(got, &data));
    Ok(())
}

/// Inline data: a WRITE and a SEND whose payload is in the WQE, landing in the dma-buf.
fn inline_into(f: &Fixture) -> Check {
    let (mut e, mut g) = f.pair();
    let w = pattern(8, 100);
    let s = pattern(9, 60);
    g.qp.post_recv(4, &[f.sge(30_000, 128)]).map_err(|e| e.to_string())?;
    e.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: IOVA + 29_000, rkey: f.mr.rkey() }, Payload::Inline(&[&w[..40], &w[40..]])))
        .map_err(|e| e.to_string())?;
    e.qp.post_send(2, &signaled(SendOp::Send, Payload::Inline(&[&s]))).map_err(|e| e.to_string())?;
    let wcs = wait(&mut e.scq, 2);
    ensure!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let wc = one(&mut g.rcq, WcStatus::Success)?;
    ensure!(wc.byte_len == 60, "receive completion {wc:?}");
    let (gw, gs) = (f.mr_bytes(29_000, 100), f.mr_bytes(30_000, 60));
    ensure!(gw == w, "inline WRITE: {}", first_diff(&gw, &w));
    ensure!(gs == s, "inline SEND: {}", first_diff(&gs, &s));
    Ok(())
}

fn u64_at(v: &Mapping, off: usize) -> u64 {
    u64::from_ne_bytes(v.read(off, 8).try_into().unwrap())
}

/// CAS on the dma-buf: one that matches and swaps, one that does not and leaves it.
fn atomic_cas(f: &Fixture) -> Check {
    let (mut e, _g) = f.pair();
    let at = 256;
    f.view.write(MR_OFF + at, &0x1111_2222_3333_4444u64.to_ne_bytes());
    let raddr = IOVA + at as u64;
    e.qp.post_send(1, &signaled(SendOp::CompareSwap { raddr, rkey: f.mr.rkey(), compare: 0x1111_2222_3333_4444, swap: 0xabcd },
                                Payload::Sgl(&[f.local.sge(0, 8)]))).map_err(|e| e.to_string())?;
    e.qp.post_send(2, &signaled(SendOp::CompareSwap { raddr, rkey: f.mr.rkey(), compare: 5, swap: 6 },
                                Payload::Sgl(&[f.local.sge(8, 8)]))).map_err(|e| e.to_string())?;
    let wcs = wait(&mut e.scq, 2);
    ensure!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let (old1, old2) = (f.local.buf.read_u64(0), f.local.buf.read_u64(8));
    ensure!(old1 == 0x1111_2222_3333_4444 && old2 == 0xabcd, "returned old values {old1:#x} {old2:#x}");
    let now = u64_at(&f.view, MR_OFF + at);
    ensure!(now == 0xabcd, "dma-buf word after the CASes: {now:#x}, expected 0xabcd");
    Ok(())
}

/// FAA on the dma-buf, twice.
fn atomic_faa(f: &Fixture) -> Check {
    let (mut e, _g) = f.pair();
    let at = 512;
    f.view.write(MR_OFF + at, &1000u64.to_ne_bytes());
    let raddr = IOVA + at as u64;
    for (id, add) in [(1u64, 5u64), (2, u64::MAX)] {
        e.qp.post_send(id, &signaled(SendOp::FetchAdd { raddr, rkey: f.mr.rkey(), add }, Payload::Sgl(&[f.local.sge(8 * id as usize, 8)])))
            .map_err(|e| e.to_string())?;
    }
    let wcs = wait(&mut e.scq, 2);
    ensure!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let (old1, old2) = (f.local.buf.read_u64(8), f.local.buf.read_u64(16));
    // 1000 + 5 = 1005, then + (2^64 - 1) wraps to 1004.
    ensure!(old1 == 1000 && old2 == 1005, "returned old values {old1} {old2}");
    let now = u64_at(&f.view, MR_OFF + at);
    ensure!(now == 1004, "dma-buf word after the FAAs: {now}, expected 1004");
    Ok(())
}

/// A remote operation that must fail with REMOTE_ACCESS_ERR and leave every byte of the
/// dma-buf (not just the MR) as it was.
fn remote_error(f: &Fixture, op: SendOp, local_len: usize) -> Check {
    let (mut e, _g) = f.pair();
    f.local.buf.write(0, &pattern(10, MR_LEN));
    let before = f.view.read(0, BUF);
    e.qp.post_send(1, &signaled(op, Payload::Sgl(&[f.local.sge(0, local_len)]))).map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::RemAccessErr)?;
    let after = f.view.read(0, BUF);
    ensure!(after == before, "the dma-buf changed: {}", first_diff(&after, &before));
    Ok(())
}

fn oob_write_past_end(f: &Fixture) -> Check {
    // 64 bytes, the last 32 past the MR's end (inside the dma-buf).
    remote_error(f, SendOp::RdmaWrite { raddr: IOVA + MR_LEN as u64 - 32, rkey: f.mr.rkey() }, 64)
}

fn oob_write_before_start(f: &Fixture) -> Check {
    remote_error(f, SendOp::RdmaWrite { raddr: IOVA - 8, rkey: f.mr.rkey() }, 16)
}

fn oob_atomic(f: &Fixture) -> Check {
    remote_error(f, SendOp::FetchAdd { raddr: IOVA + MR_LEN as u64, rkey: f.mr.rkey(), add: 1 }, 8)
}

fn oob_read(f: &Fixture) -> Check {
    let (mut e, _g) = f.pair();
    f.local.buf.write(0, &[0x5a; 128]);
    e.qp.post_send(1, &signaled(SendOp::RdmaRead { raddr: IOVA + MR_LEN as u64 - 16, rkey: f.mr.rkey() },
                                Payload::Sgl(&[f.local.sge(0, 64)]))).map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::RemAccessErr)?;
    ensure!(f.local.buf.read()[..128].iter().all(|&b| b == 0x5a), "the READ's sink changed");
    Ok(())
}

fn wrong_rkey(f: &Fixture) -> Check {
    remote_error(f, SendOp::RdmaWrite { raddr: IOVA, rkey: f.mr.rkey() ^ 0x100 }, 64)?;
    remote_error(f, SendOp::CompareSwap { raddr: IOVA, rkey: f.mr.rkey() ^ 0x100, compare: 0, swap: 1 }, 8)
}

/// The dma-buf MR as a local SGE that crosses its end (and one with a wrong lkey): the
/// requester completes with LOC_PROT_ERR and the peer's memory is untouched.
fn local_sge_out_of_bounds(f: &Fixture) -> Check {
    for (i, sge) in [f.sge(MR_LEN - 100, 200), Sge::new(IOVA, 64, f.mr.lkey() ^ 0x100)].into_iter().enumerate() {
        let (_e, mut g) = f.pair();
        f.local.buf.write(0, &[0x33; 256]);
        g.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: f.local.addr(), rkey: f.local.mr.rkey() }, Payload::Sgl(&[sge])))
            .map_err(|e| e.to_string())?;
        one(&mut g.scq, WcStatus::LocProtErr).map_err(|e| format!("SGE {i}: {e}"))?;
        ensure!(f.local.buf.read()[..256].iter().all(|&b| b == 0x33), "SGE {i}: the peer's memory changed");
    }
    Ok(())
}

/// A second dma-buf MR over the same pages with remote READ only: a WRITE through it
/// fails, a READ through it works.
fn read_only_mr(f: &Fixture) -> Check {
    let ro = f.gpu.pd.reg_dmabuf_mr(f.buf.fd(), 0, BUF, 0x5500_0000_0000, Access::REMOTE_READ)
        .map_err(|e| format!("reg_dmabuf_mr read-only: {e}"))?;
    remote_error(f, SendOp::RdmaWrite { raddr: 0x5500_0000_0000, rkey: ro.rkey() }, 64)?;
    let (mut e, _g) = f.pair();
    e.qp.post_send(1, &signaled(SendOp::RdmaRead { raddr: 0x5500_0000_0000 + 100, rkey: ro.rkey() },
                                Payload::Sgl(&[f.local.sge(0, 64)]))).map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::Success)?;
    let want = f.view.read(100, 64);
    ensure!(f.local.buf.read()[..64] == want[..], "READ through the read-only MR");
    Ok(())
}

/// An MR at a sub-page offset of the dma-buf, registered and then the fd closed (the
/// registration holds its own reference): bytes land at offset + (raddr - iova).
/// Deregistered, its rkey is refused and nothing changes.
fn subpage_offset_fd_closed_then_dereg(f: &Fixture) -> Check {
    let fd2 = f.buf.fd().try_clone_to_owned().map_err(|e| e.to_string())?;
    let (off, iova) = (8192 + 100u64, 0x6600_0000_0064u64);
    let mr = f.gpu.pd.reg_dmabuf_mr(fd2.as_fd(), off, 1000, iova, all_access()).map_err(|e| format!("reg_dmabuf_mr: {e}"))?;
    drop(fd2);
    let data = pattern(11, 500);
    f.local.buf.write(0, &data);
    let (mut e, _g) = f.pair();
    e.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: iova + 10, rkey: mr.rkey() }, Payload::Sgl(&[f.local.sge(0, 500)])))
        .map_err(|e| e.to_string())?;
    one(&mut e.scq, WcStatus::Success)?;
    let got = f.view.read(off as usize + 10, 500);
    ensure!(got == data, "sub-page MR write: {}", first_diff(&got, &data));
    let rkey = mr.rkey();
    drop(mr);
    remote_error(f, SendOp::RdmaWrite { raddr: iova, rkey }, 64)
}

/// The dumb-buffer sizes vgem cannot make are refused before any ioctl.
fn bad_sizes(_f: &Fixture) -> Check {
    let v = Vgem::open().map_err(|e| e.to_string())?;
    ensure!(matches!(v.create(0), Err(vgem::Error::BadSize(0))), "create(0) not refused");
    ensure!(matches!(v.create(1 << 32), Err(vgem::Error::BadSize(_))), "create(4 GiB) not refused");
    Ok(())
}

/// The two-process case: see `peer` and `two_processes`.
fn two_processes(_f: &Fixture) -> Check {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(["--exact", "dmabuf_mrs_on_softhca_in_the_guest", "--nocapture", "--test-threads=1"])
        .env(ROLE, "peer")
        .stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit())
        .spawn().map_err(|e| format!("spawn the peer: {e}"))?;
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut input = child.stdin.take().unwrap();
    let r = (|| {
        let info = read_tagged(&mut out, "PEER info ")?;
        let f: Vec<&str> = info.split(' ').collect();
        ensure!(f.len() == 4, "peer info {info:?}");
        let (qpn, gid, rkey, iova) = (f[0].parse::<u32>().map_err(|e| e.to_string())?, parse_gid(f[1])?,
                                      f[2].parse::<u32>().map_err(|e| e.to_string())?, f[3].parse::<u64>().map_err(|e| e.to_string())?);
        let h = Host::new([127, 9, 2, 1]);
        let o = Opts::default();
        let mut e = End::new(&h, &o);
        writeln!(input, "PEER info {} {}", e.qp.qpn(), hex(&h.gid())).map_err(|e| e.to_string())?;
        e.connect(&o, qpn, gid, 0x100, 0x200);
        read_tagged(&mut out, "PEER ready")?;
        // WRITE a pattern into the peer's dma-buf, READ it back, FAA on it.
        let local = h.mem(MR_LEN, all_access());
        let data = pattern(12, 20_000);
        local.buf.write(0, &data);
        e.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: iova + 1000, rkey }, Payload::Sgl(&[local.sge(0, data.len())])))
            .map_err(|e| e.to_string())?;
        e.qp.post_send(2, &signaled(SendOp::RdmaRead { raddr: iova + 1000, rkey }, Payload::Sgl(&[local.sge(20_480, 8000)])))
            .map_err(|e| e.to_string())?;
        e.qp.post_send(3, &signaled(SendOp::FetchAdd { raddr: iova, rkey, add: 7 }, Payload::Sgl(&[local.sge(30_000, 8)])))
            .map_err(|e| e.to_string())?;
        let wcs = wait(&mut e.scq, 3);
        ensure!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
        let back = &local.buf.read()[20_480..28_480];
        ensure!(back == &data[..8000], "READ back from the peer's dma-buf: {}", first_diff(back, &data[..8000]));
        ensure!(local.buf.read_u64(30_000) == 40, "FAA returned {}, the peer set 40", local.buf.read_u64(30_000));
        writeln!(input, "PEER check {}", data.len()).map_err(|e| e.to_string())?;
        let verdict = read_tagged(&mut out, "PEER result ")?;
        ensure!(verdict == "ok", "the peer says: {verdict}");
        Ok(())
    })();
    drop(input);
    let status = child.wait().map_err(|e| e.to_string())?;
    r?;
    ensure!(status.success(), "the peer exited {status}");
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn parse_gid(s: &str) -> Result<[u8; 16], String> {
    let mut g = [0u8; 16];
    for (i, b) in g.iter_mut().enumerate() {
        *b = s.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()).ok_or(format!("bad gid {s:?}"))?;
    }
    Ok(g)
}

/// The text after `tag` on the next line that holds it (the test harness prints its own
/// text, even on the same line).
fn read_tagged(r: &mut impl BufRead, tag: &str) -> Result<String, String> {
    let mut l = String::new();
    loop {
        l.clear();
        if r.read_line(&mut l).map_err(|e| e.to_string())? == 0 {
            return Err(format!("the other process closed its output before {tag:?}"));
        }
        if let Some(at) = l.find(tag) {
            return Ok(l[at + tag.len()..].trim_end().to_string());
        }
    }
}

/// The peer process: owns a vgem dma-buf MR (with 40 at its first word), lets the other
/// process write, read and add, then checks every byte through its own mapping.
fn peer() {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let r = (|| -> Check {
        let vgem = Vgem::open().map_err(|e| e.to_string())?;
        let buf = vgem.create(BUF).map_err(|e| e.to_string())?;
        let view = buf.map().map_err(|e| e.to_string())?;
        view.write(MR_OFF, &40u64.to_ne_bytes());
        let h = Host::new([127, 9, 2, 2]);
        let o = Opts::default();
        let e = End::new(&h, &o);
        let mr = h.pd.reg_dmabuf_mr(buf.fd(), MR_OFF as u64, MR_LEN, IOVA, all_access()).map_err(|e| e.to_string())?;
        println!("PEER info {} {} {} {IOVA}", e.qp.qpn(), hex(&h.gid()), mr.rkey());
        let other = read_tagged(&mut input, "PEER info ")?;
        let f: Vec<&str> = other.split(' ').collect();
        ensure!(f.len() == 2, "info {other:?}");
        e.connect(&o, f[0].parse().map_err(|_| "qpn")?, parse_gid(f[1])?, 0x200, 0x100);
        println!("PEER ready");
        let n: usize = read_tagged(&mut input, "PEER check ")?.parse().map_err(|_| "length")?;
        let want = pattern(12, n);
        let got = view.read(MR_OFF + 1000, n);
        ensure!(got == want, "written bytes: {}", first_diff(&got, &want));
        ensure!(u64_at(&view, MR_OFF) == 47, "first word {} after FAA 7 on 40", u64_at(&view, MR_OFF));
        Ok(())
    })();
    match r {
        Ok(()) => println!("PEER result ok"),
        Err(e) => println!("PEER result {e}"),
    }
    let _ = std::io::stdout().flush();
}

type Case = (&'static str, fn(&Fixture) -> Check);

/// Every case, in run order; the host requires a PASS line for each.
const CASES: &[Case] = &[
    ("register", register),
    ("write_into_dmabuf", write_into),
    ("read_from_dmabuf", read_from),
    ("write_from_dmabuf", write_from),
    ("read_into_dmabuf", read_into),
    ("send_into_dmabuf", send_into),
    ("send_from_dmabuf", send_from),
    ("inline_into_dmabuf", inline_into),
    ("atomic_cas", atomic_cas),
    ("atomic_faa", atomic_faa),
    ("oob_write_past_end", oob_write_past_end),
    ("oob_write_before_start", oob_write_before_start),
    ("oob_atomic", oob_atomic),
    ("oob_read", oob_read),
    ("wrong_rkey", wrong_rkey),
    ("local_sge_out_of_bounds", local_sge_out_of_bounds),
    ("read_only_mr", read_only_mr),
    ("subpage_offset_fd_closed_then_dereg", subpage_offset_fd_closed_then_dereg),
    ("bad_sizes", bad_sizes),
    ("two_processes", two_processes),
];

/// In the guest: every case, one line each.
fn guest() {
    let f = match Fixture::new() {
        Ok(f) => f,
        Err(e) => {
            println!("VGEM setup FAIL {e}");
            return;
        }
    };
    println!("VGEM setup PASS");
    for (name, run) in CASES {
        let r = catch_unwind(AssertUnwindSafe(|| run(&f)))
            .unwrap_or_else(|p| Err(format!("panicked: {}", p.downcast_ref::<String>().cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default())));
        match r {
            Ok(()) => println!("VGEM {name} PASS"),
            Err(e) => println!("VGEM {name} FAIL {}", e.replace('\n', " ")),
        }
    }
}


#[test]
fn dmabuf_mrs_on_softhca_in_the_guest() {
    match std::env::var(ROLE).as_deref() {
        Ok("guest") => return guest(),
        Ok("peer") => return peer(),
        _ => {}
    }
    if let Err(reason) = testkit::vm::available() {
        testkit::skip(testkit::Need::Vm, format!("rxe VM unavailable: {reason} (run tests/vm/rxe-vm.sh --setup)"));
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // rxe0 holds UDP port 4791 on every address of the guest's initial network namespace
    // (Linux 6.1's rdma_rxe opens its socket at module load), so the softhca instances
    // run in a network namespace of their own, with only loopback.
    let out = Command::new(testkit::vm::script())
        .args(["--", "unshare", "--net", "sh", "-c", "ip link set lo up && exec \"$@\"", "sh", "env"])
        .arg(format!("{ROLE}=guest")).arg(&exe)
        .args(["--exact", "dmabuf_mrs_on_softhca_in_the_guest", "--nocapture", "--test-threads=1"])
        .output().expect("run rxe-vm.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<(&str, &str)> = text.lines().filter_map(|l| {
        let rest = &l[l.find("VGEM ")? + 5..];
        let (name, verdict) = rest.split_once(' ')?;
        Some((name, verdict))
    }).collect();
    let mut problems = Vec::new();
    for name in std::iter::once("setup").chain(CASES.iter().map(|c| c.0)) {
        match lines.iter().find(|(n, _)| *n == name) {
            Some((_, v)) if *v == "PASS" => {}
            Some((_, v)) => problems.push(format!("{name}: {v}")),
            None => problems.push(format!("{name}: no result line")),
        }
    }
    assert!(problems.is_empty(), "{} of {} dma-buf cases failed in the guest:\n  {}\n--- guest output ---\n{text}\n{stderr}",
            problems.len(), CASES.len() + 1, problems.join("\n  "));
    assert!(out.status.success(), "the guest run exited {:?}:\n{text}\n{stderr}", out.status);
    for (name, v) in &lines {
        eprintln!("VGEM {name} {v}");
    }
    eprintln!("{} dma-buf cases passed in the guest", CASES.len());
}
