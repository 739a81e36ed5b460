//! Multi-packet RDMA WRITE and READ (4 packets at the 1024-byte MTU) whose range crosses
//! an MR's end, with the first, a middle or the last packet the first one out of range,
//! against the responder's MR (rkey side) and against the requester's own MR (lkey
//! side). Each MR is the middle of a larger buffer, and both sides' whole buffers are
//! compared afterwards, so a byte written past the MR, or before the error, is seen.
//!
//! Expected values from outside softhca:
//! - the CQE: `MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR` and `MLX5_CQE_SYNDROME_LOCAL_PROT_ERR`,
//!   read from rdma-core's /usr/include/infiniband/mlx5dv.h at run time, compared with the
//!   syndrome byte of the requester's raw error CQE (`struct mlx5_err_cqe` in the same
//!   header: 32 reserved bytes, srqn, 18 reserved, vendor_err_synd, then `syndrome` at
//!   byte 0x37), not with the provider's translation into a `WcStatus`;
//! - the responder's memory: IBTA o9-20 / C9-88 (the responder validates the R_Key and
//!   the whole range of the RETH, which carries the total DMA length, when the first
//!   packet arrives, and NAKs the request): no byte of its buffer may change, whichever
//!   packet would have crossed the end. For READ the requester's buffer cannot change
//!   either (no response carries data).
//! - lkey side (the requester's gather or scatter list leaves its MR): the WQE completes
//!   with LOCAL_PROT_ERR and no byte outside the requester's MR changes; bytes of packets
//!   before the bad one may have moved (a ConnectX checks the local key as it fetches
//!   each packet's data), so the peer's buffer may hold, at the request's offsets, only
//!   its old bytes or the source's, and only before the first bad packet.
//!
//! Addresses: 127.1.9.x (hints, see common::bind_free).

mod common;

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp, Sge};
use provider::{Access, OwnedMr};

const MTU: usize = 1024;
/// 4 packets.
const LEN: usize = 4 * MTU;
/// The registered part of each buffer: `[GUARD, GUARD + MR_LEN)` of `GUARD + MR_LEN + GUARD`.
const MR_LEN: usize = 8 * MTU;
const GUARD: usize = 4096;

/// A buffer with only its middle registered (the MR owns a clone of the buffer).
struct Window {
    mr: OwnedMr<Buf>,
    buf: Buf,
}

impl Window {
    fn new(h: &Host, access: Access, seed: u64) -> Window {
        let buf = Buf::new(GUARD + MR_LEN + GUARD);
        buf.fill_pattern(seed);
        let mr = h.pd.reg_owned_range(buf.clone(), GUARD..GUARD + MR_LEN, access).expect("reg_mr");
        Window { mr, buf }
    }
    fn mr_start(&self) -> u64 {
        self.buf.addr() + GUARD as u64
    }
    fn mr_end(&self) -> u64 {
        self.mr_start() + MR_LEN as u64
    }
}

/// `MLX5_CQE_SYNDROME_<name>` from rdma-core's mlx5dv.h, or None after a skip.
fn syndrome_from_header(name: &str) -> Option<u8> {
    let path = "/usr/include/infiniband/mlx5dv.h";
    let Ok(text) = std::fs::read_to_string(path) else {
        testkit::skip(testkit::Need::Tool, format!("{path} missing (apt-get install libibverbs-dev)"));
        return None;
    };
    let key = format!("MLX5_CQE_SYNDROME_{name}");
    let line = text.lines().find(|l| l.split_whitespace().next() == Some(key.as_str()))
        .unwrap_or_else(|| panic!("{key} not in {path}"));
    let v = line.split('=').nth(1).unwrap().trim().trim_end_matches(',');
    Some(u8::from_str_radix(v.trim_start_matches("0x"), 16).unwrap())
}

/// The syndrome byte of the first error CQE (opcode MLX5_CQE_REQ_ERR, 0xd, in the high
/// nibble of op_own) in `e`'s send CQ ring, read from the ring itself.
fn first_error_syndrome(h: &Host, e: &End) -> u8 {
    let cq = h.hca.cq(e.scq.cqn()).expect("the send CQ");
    let size = cq.cqe_size as usize;
    for i in 0..cq.entries as usize {
        // A 128-byte CQE keeps the 64-byte CQE in its second half.
        let base = cq.buf_addr as usize + i * size + (size - 64);
        let mut cqe = [0u8; 64];
        // SAFETY: the CQE ring (`entries` CQEs of `cqe_size` bytes at buf_addr) is mapped
        // in this process while the CQ lives (`e` holds it); the device wrote this CQE
        // before its completion was polled.
        unsafe { std::ptr::copy_nonoverlapping(base as *const u8, cqe.as_mut_ptr(), 64) };
        if cqe[63] >> 4 == 0xd {
            return cqe[0x37];
        }
    }
    panic!("no error CQE in CQ {:#x}", cq.cqn);
}

/// The offsets where `k` packets of the 4 are in range and packet `k` is the first to
/// cross the end: the request starts `k * MTU + 100` bytes before the MR's end.
fn start_before_end(k: usize) -> u64 {
    (k * MTU + 100) as u64
}

fn remote_range_crossing_the_mr_end_writes_nothing() {
    let Some(want) = syndrome_from_header("REMOTE_ACCESS_ERR") else { return };
    for (n, (read, k)) in [(false, 0usize), (false, 1), (false, 3), (true, 0), (true, 2), (true, 3)].into_iter().enumerate() {
        let ip = 2 * n as u8 + 1;
        let a = Host::new([127, 1, 9, ip]);
        let b = Host::new([127, 1, 9, ip + 1]);
        // A 537 ms local ACK timeout: the NAK, not the retry budget, is what is tested
        // (see errors.rs, nak_opts).
        let (mut ea, _eb) = connect(&a, &b, &Opts { timeout: 17, ..Default::default() });
        let local = Window::new(&a, all_access(), 100 + n as u64);
        let remote = Window::new(&b, all_access(), 200 + n as u64);
        let (local_before, remote_before) = (local.buf.read(), remote.buf.read());
        let raddr = remote.mr_end() - start_before_end(k);
        let op = if read { SendOp::RdmaRead { raddr, rkey: remote.mr.rkey() } } else { SendOp::RdmaWrite { raddr, rkey: remote.mr.rkey() } };
        let sge = Sge::new(local.mr_start(), LEN as u32, local.mr.lkey());
        ea.qp.post_send(1, &signaled(op, Payload::Sgl(&[sge]))).unwrap();
        let wc = wait(&mut ea.scq, 1)[0];
        let what = format!("{} of 4 packets from {} B before the MR end (first out of range: packet {k})",
                           if read { "READ" } else { "WRITE" }, start_before_end(k));
        assert_eq!((wc.status, wc.wr_id), (WcStatus::RemAccessErr, 1), "{what}: {wc:?}");
        assert_eq!(first_error_syndrome(&a, &ea), want, "{what}: the CQE's syndrome byte");
        let changed = |x: &[u8], y: &[u8]| x.iter().zip(y).filter(|(p, q)| p != q).count();
        let remote_after = remote.buf.read();
        assert_eq!(changed(&remote_after, &remote_before), 0, "{what}: responder bytes changed");
        let local_after = local.buf.read();
        assert_eq!(changed(&local_after, &local_before), 0, "{what}: requester bytes changed");
    }
}

fn local_range_crossing_the_mr_end_is_a_protection_error() {
    let Some(want) = syndrome_from_header("LOCAL_PROT_ERR") else { return };
    for (n, (read, k)) in [(false, 0usize), (false, 2), (false, 3), (true, 0), (true, 1), (true, 3)].into_iter().enumerate() {
        let ip = 2 * n as u8 + 31;
        let a = Host::new([127, 1, 9, ip]);
        let b = Host::new([127, 1, 9, ip + 1]);
        let (mut ea, _eb) = connect(&a, &b, &Opts::default());
        let local = Window::new(&a, all_access(), 300 + n as u64);
        let remote = Window::new(&b, all_access(), 400 + n as u64);
        let (local_before, remote_before) = (local.buf.read(), remote.buf.read());
        // The remote range is wholly inside its MR; the local list leaves ours at packet k.
        let roff = GUARD + 1000;
        let raddr = remote.buf.addr() + roff as u64;
        let laddr = local.mr_end() - start_before_end(k);
        let loff = (laddr - local.buf.addr()) as usize;
        let op = if read { SendOp::RdmaRead { raddr, rkey: remote.mr.rkey() } } else { SendOp::RdmaWrite { raddr, rkey: remote.mr.rkey() } };
        ea.qp.post_send(1, &signaled(op, Payload::Sgl(&[Sge::new(laddr, LEN as u32, local.mr.lkey())]))).unwrap();
        let wc = wait(&mut ea.scq, 1)[0];
        let what = format!("{} with the local list from {} B before its MR end (first out of range: packet {k})",
                           if read { "READ" } else { "WRITE" }, start_before_end(k));
        assert_eq!((wc.status, wc.wr_id), (WcStatus::LocProtErr, 1), "{what}: {wc:?}");
        assert_eq!(first_error_syndrome(&a, &ea), want, "{what}: the CQE's syndrome byte");
        let (local_after, remote_after) = (local.buf.read(), remote.buf.read());
        // The written side (responder for WRITE, requester for READ) and where data may land:
        // only packets 0..k, at the request's offsets, with the source's bytes.
        let (dst_before, dst_after, dst_off, src, src_off) = if read {
            (&local_before, &local_after, loff, &remote_before, roff)
        } else {
            (&remote_before, &remote_after, roff, &local_before, loff)
        };
        for (i, (&x, &y)) in dst_before.iter().zip(dst_after.iter()).enumerate() {
            if x == y {
                continue;
            }
            let in_early_packets = i >= dst_off && i < dst_off + k * MTU;
            assert!(in_early_packets && y == src[src_off + (i - dst_off)],
                    "{what}: byte {i} of the {} buffer changed ({x:#04x} -> {y:#04x}), outside packets 0..{k} or not the source's",
                    if read { "requester's" } else { "responder's" });
        }
        // The side that only gives data does not change at all.
        let (other_before, other_after) = if read { (&remote_before, &remote_after) } else { (&local_before, &local_after) };
        assert!(other_before == other_after, "{what}: the source side's buffer changed");
    }
}

/// A bad lkey on a multi-packet WRITE: nothing is sent, whatever the length.
fn bad_lkey_on_a_multi_packet_write() {
    let Some(want) = syndrome_from_header("LOCAL_PROT_ERR") else { return };
    let a = Host::new([127, 1, 9, 61]);
    let b = Host::new([127, 1, 9, 62]);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let local = Window::new(&a, all_access(), 500);
    let remote = Window::new(&b, all_access(), 600);
    let remote_before = remote.buf.read();
    let sge = Sge::new(local.mr_start(), LEN as u32, local.mr.lkey() ^ 0x5500);
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: remote.mr_start(), rkey: remote.mr.rkey() }, Payload::Sgl(&[sge]))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.wr_id), (WcStatus::LocProtErr, 1), "{wc:?}");
    assert_eq!(first_error_syndrome(&a, &ea), want);
    assert!(remote.buf.read() == remote_before, "the responder's buffer changed");
    assert_eq!(sent(&a.hca), 0, "a bad lkey on the first packet sends nothing");
}

// Every test above runs on both wires: RoCEv2 over UDP and the same-host path.
on_both_wires!(
    remote_range_crossing_the_mr_end_writes_nothing,
    local_range_crossing_the_mr_end_is_a_protection_error,
    bad_lkey_on_a_multi_packet_write,
);
