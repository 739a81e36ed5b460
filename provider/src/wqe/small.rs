//! The post path's fast lane: the common send WQEs that fit in one WQEBB, written
//! without the generic builder's iteration.
//!
//! [`write_small_send_wqe`] handles a connected-QP SEND, SEND with immediate, RDMA
//! WRITE, RDMA WRITE with immediate or RDMA READ whose payload is one non-empty gather
//! entry or (not READ) one non-empty inline chunk, and whose WQE fits in 64 bytes:
//! control segment, remote-address segment for RDMA, then one data segment or the
//! inline segment. It writes exactly the bytes [`super::write_send_wqe`] writes for the
//! same request (same control segment, same zero padding after inline bytes, nothing
//! past `ds * 16`), which a test below checks over every shape and the golden test
//! (`softhca/preload/tests/libmlx5_golden.rs`) checks against libmlx5. Anything else
//! (including the rare empty payloads) returns `None`, and the caller takes the
//! generic path; the slot (free, not yet published to the device) may then hold the
//! request's control segment (but its DS count) and remote-address segment, which the
//! generic builder writes again (the same bytes).
//!
//! A WQE that starts a WQEBB and fits in it never wraps around the ring, so the writer
//! works on the one 64-byte slot; every offset below is a constant or is bounded by the
//! 64-byte check, which is what lets the compiler drop the bounds checks.

use super::inline::INLINE_SEG;
use super::send::{Payload, SendOp, SendWr};
use super::DS_SIZE;

const _: () = assert!(DS_SIZE == 16);
use crate::opcode::{FmCeSe, WqeOpcode};

/// Writes `wr` at producer index `pi` of QP `qpn` into `slot` (the WQEBB at that
/// index) if it is one of the shapes above, and returns its DS count (2 to 4); `None`
/// otherwise, when the slot holds nothing or at most the request's control (but its
/// DS count) and remote-address segments, a part of the WQE the generic builder writes
/// for it, so the caller writes it with [`super::write_send_wqe`] or leaves the slot
/// unused.
///
/// As with [`super::write_send_wqe`], the caller has checked that the ring has room
/// and that an inline payload is within the QP's inline limit.
#[inline(always)]
pub fn write_small_send_wqe(slot: &mut [u8; 64], pi: u16, qpn: u32, wr: &SendWr<'_>) -> Option<u8> {
    write_small(slot, pi, &Lane::new(qpn, false, usize::MAX, true), wr)
}

/// The per-QP constants of the fast lane's WQEs, computed once at QP creation so that
/// a post only combines them with the request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Lane {
    /// The control segment's qpn_ds word without the DS count: `qpn << 8`.
    qpn8: u32,
    /// `fm_ce_se` bits every WQE carries: CQ_UPDATE on a QP created with sq_sig_all.
    sig: u8,
    /// The longest inline payload the lane writes after the control segment alone
    /// (SEND: 64 - 16 - 4 bytes) and after control and remote-address segments (RDMA
    /// WRITE: 64 - 32 - 4), each also bounded by the QP's inline limit: longer ones are
    /// left to the generic path, which writes them in several WQEBBs or reports them.
    inline_send: u8,
    inline_raddr: u8,
    /// The QP's transport has RDMA READ (`qp::post::fast_lane`).
    read_ok: bool,
}

impl Lane {
    pub(crate) fn new(qpn: u32, sig_all: bool, max_inline: usize, read_ok: bool) -> Lane {
        Lane {
            qpn8: (qpn & 0x00ff_ffff) << 8,
            sig: if sig_all { FmCeSe::CQ_UPDATE.bits() } else { 0 },
            inline_send: max_inline.min(64 - 16 - 4) as u8,
            inline_raddr: max_inline.min(64 - 32 - 4) as u8,
            read_ok,
        }
    }
}

/// [`write_small_send_wqe`] for the QP's post path, with the QP's constants in `lane`:
/// its `sq_sig_all` flag is added to the request's flags, an inline payload over its
/// limit is refused (left to the generic path, which reports it), and so is an RDMA
/// READ unless the transport has it.
///
/// Each operation gets its own copy of the writer ([`write_op`], with the header size
/// a constant), so that no operation pays for the others' values being carried to a
/// common tail.
#[inline(always)]
pub(crate) fn write_small(slot: &mut [u8; 64], pi: u16, lane: &Lane, wr: &SendWr<'_>) -> Option<u8> {
    if wr.ud.is_some() {
        return None;
    }
    let p = &wr.payload;
    // The operation's fields are read where they are stored (`op`, after the checks),
    // not carried in registers through them.
    // Every operation named (none through `_`): the jump table then covers every
    // discriminant and needs no range check before it.
    match &wr.op {
        SendOp::RdmaWrite { raddr, rkey } => {
            write_op::<2>(slot, pi, lane, wr.flags, WqeOpcode::RdmaWrite, &0, (raddr, rkey), p, lane.inline_raddr)
        }
        SendOp::Send => write_op::<1>(slot, pi, lane, wr.flags, WqeOpcode::Send, &0, (&0, &0), p, lane.inline_send),
        SendOp::SendImm { imm } => {
            write_op::<1>(slot, pi, lane, wr.flags, WqeOpcode::SendImm, imm, (&0, &0), p, lane.inline_send)
        }
        SendOp::RdmaWriteImm { raddr, rkey, imm } => {
            write_op::<2>(slot, pi, lane, wr.flags, WqeOpcode::RdmaWriteImm, imm, (raddr, rkey), p, lane.inline_raddr)
        }
        // READ takes no inline data: a limit of 0 refuses every (non-empty) inline payload.
        SendOp::RdmaRead { raddr, rkey } if lane.read_ok => {
            write_op::<2>(slot, pi, lane, wr.flags, WqeOpcode::RdmaRead, &0, (raddr, rkey), p, 0)
        }
        SendOp::RdmaRead { .. } | SendOp::Nop | SendOp::SendInv { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => None,
    }
}

/// One operation's WQE: `UNITS` 16-byte units of header (1: control segment; 2: and
/// the remote-address segment `(raddr, rkey)`), then the payload: one non-empty gather
/// entry, or one non-empty inline chunk of at most `lim` bytes. Empty payloads (no
/// segment at all) and longer lists are the generic path's.
///
/// The header, all but its DS count, is stored before the payload is looked at, so
/// that the operation's values are dead (their registers free) while the payload is
/// checked and copied; a refused request leaves just these bytes in the free slot,
/// the same the generic builder writes there.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn write_op<const UNITS: usize>(
    slot: &mut [u8; 64],
    pi: u16,
    lane: &Lane,
    flags: FmCeSe,
    opcode: WqeOpcode,
    imm: &u32,
    (raddr, rkey): (&u64, &u32),
    payload: &Payload<'_>,
    lim: u8,
) -> Option<u8> {
    let p = slot.as_mut_ptr();
    // SAFETY: offsets 0..32 of the 64-byte slot; unaligned stores.
    unsafe {
        // Control segment (ctrl.rs): opmod 0, index, opcode | qpn, ds (below) |
        // signature 0, stream channel 0, fm_ce_se | immediate.
        put4(p, ((pi as u32) << 8) | opcode.as_u8() as u32);
        // (fm_ce_se and the immediate as one 8-byte store)
        put8(p.add(8), (((flags.bits() | lane.sig) as u64) << 32) | *imm as u64);
        if UNITS == 2 {
            // Remote-address segment (raddr.rs): address, key, reserved 0.
            put8(p.add(16), *raddr);
            put8(p.add(24), (*rkey as u64) << 32);
        }
    }
    let hdr = UNITS * DS_SIZE as usize;
    match *payload {
        Payload::Sgl([ref sge]) if sge.length != 0 => {
            let ds = UNITS as u32 + 1;
            // SAFETY: the header ends at hdr <= 32 and the data segment after it 16
            // bytes later, inside the 64-byte slot.
            unsafe {
                put4(p.add(4), lane.qpn8 | ds);
                // Data segment (data.rs): byte count, lkey, address.
                put4(p.add(hdr), sge.length);
                put4(p.add(hdr + 4), sge.lkey);
                put8(p.add(hdr + 8), sge.addr);
            }
            Some(ds as u8)
        }
        // `len - 1 < lim`: one comparison for 1 <= len <= lim
        Payload::Inline([d]) if d.len().wrapping_sub(1) < lim as usize => {
            let len = d.len();
            // header and bytes rounded up to whole 16-byte units (an add and a shift;
            // `div_ceil` compiles to a longer sequence)
            let ds = (hdr + 4 + len + 15) >> 4;
            // SAFETY: the inline payload is at most `lim` bytes, which Lane bounds by
            // 64 - 4 - hdr (READ: 0), so the inline segment ends at hdr + 4 + len <= 64
            // and its last unit, (ds - 1) * 16, starts at 48 or before: inside the slot.
            // `d` is not inside `slot` (which is mutably borrowed).
            unsafe {
                put4(p.add(4), lane.qpn8 | ds as u32);
                // Inline segment (inline.rs): zero the 16-byte unit that ends the
                // segment (its padding; the segment's last unit is the WQE's), then the
                // header and the bytes over it.
                p.add((ds - 1) * DS_SIZE as usize).cast::<[u8; 16]>().write_unaligned([0; 16]);
                put4(p.add(hdr), INLINE_SEG | len as u32);
                copy_small(p.add(hdr + 4), d.as_ptr(), len);
            }
            Some(ds as u8)
        }
        _ => None,
    }
}

/// A big-endian 4-byte field at `p`.
///
/// # Safety
/// `p` must be valid for a 4-byte write (any alignment).
#[inline(always)]
unsafe fn put4(p: *mut u8, v: u32) {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<[u8; 4]>().write_unaligned(v.to_be_bytes()) }
}

/// A big-endian 8-byte field at `p`.
///
/// # Safety
/// `p` must be valid for an 8-byte write (any alignment).
#[inline(always)]
unsafe fn put8(p: *mut u8, v: u64) {
    // SAFETY: the caller's contract.
    unsafe { p.cast::<[u8; 8]>().write_unaligned(v.to_be_bytes()) }
}

/// Copies `len` bytes (at most 48) from `s` to `d` without a loop: two moves of the
/// largest size that fits (16, 8, 4 bytes), one at the start and one ending at `len`,
/// overlapping when the length is not twice that size (a third 16-byte move in the
/// middle above 32 bytes); 1 to 3 bytes as first, middle and last byte. A few loads and
/// stores instead of a call to `memcpy`, and few registers.
///
/// # Safety
/// `s` must be valid for reads and `d` for writes of `len` bytes, not overlapping, and
/// `len <= 48`.
#[inline(always)]
unsafe fn copy_small(d: *mut u8, s: *const u8, len: usize) {
    /// Moves one `T` from `s + at` to `d + at`, unaligned.
    #[inline(always)]
    unsafe fn mv<T>(d: *mut u8, s: *const u8, at: usize) {
        // SAFETY: the caller's: both ranges hold `at + size_of::<T>()` bytes.
        unsafe { d.add(at).cast::<T>().write_unaligned(s.add(at).cast::<T>().read_unaligned()) }
    }
    // SAFETY: every move lies inside `0..len` of both ranges (the caller's contract):
    // `at` and `len - size` with size <= len, and 16 with 16 + 16 <= len < 48.
    unsafe {
        if (8..16).contains(&len) {
            // First: the common 8-byte payloads take the straight line.
            mv::<u64>(d, s, 0);
            mv::<u64>(d, s, len - 8);
        } else if len >= 16 {
            mv::<[u8; 16]>(d, s, 0);
            if len > 32 {
                mv::<[u8; 16]>(d, s, 16);
            }
            mv::<[u8; 16]>(d, s, len - 16);
        } else if len >= 4 {
            mv::<u32>(d, s, 0);
            mv::<u32>(d, s, len - 4);
        } else if len > 0 {
            mv::<u8>(d, s, 0);
            mv::<u8>(d, s, len / 2);
            mv::<u8>(d, s, len - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wqe::data::Sge;
    use crate::wqe::{write_send_wqe, SqRing};

    /// Every shape the fast lane takes gives the generic builder's bytes and touches
    /// nothing else; every other shape is refused without writing.
    #[test]
    fn same_bytes_as_the_generic_builder() {
        let data: Vec<u8> = (1..=64).collect();
        let sges = [
            Sge::new(0x1122_3344_5566_7788, 300, 0xabcd),
            Sge::new(0x1000, 0, 7),
            Sge::new(0x2000, 8, 9),
        ];
        let ops = [
            SendOp::Send,
            SendOp::SendImm { imm: 0xdead_beef },
            SendOp::RdmaWrite {
                raddr: 0x0102_0304_0506_0708,
                rkey: 0x1234_5678,
            },
            SendOp::RdmaWriteImm {
                raddr: 0xffff_0000_1111_2222,
                rkey: 1,
                imm: 42,
            },
            SendOp::RdmaRead {
                raddr: 0x10,
                rkey: 0xffff_ffff,
            },
            SendOp::SendInv { rkey: 5 },
            SendOp::FetchAdd {
                raddr: 0x40,
                rkey: 3,
                add: 1,
            },
            SendOp::Nop,
        ];
        let flags = [
            FmCeSe::empty(),
            FmCeSe::CQ_UPDATE,
            FmCeSe::CQ_UPDATE | FmCeSe::SOLICITED | FmCeSe::FENCE,
        ];
        let mut payloads: Vec<Vec<&[u8]>> = Vec::new();
        for len in [
            0usize, 1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 15, 16, 17, 24, 28, 29, 31, 32, 40, 44, 45, 60,
        ] {
            payloads.push(vec![&data[..len]]);
        }
        payloads.push(vec![]);
        payloads.push(vec![&data[..3], &data[3..9]]);
        let mut taken = 0;
        let mut refused = 0;
        for op in ops {
            for fl in flags {
                let mut shapes: Vec<Payload<'_>> = vec![
                    Payload::Sgl(&[]),
                    Payload::Sgl(&sges[..1]),
                    Payload::Sgl(&sges[1..2]),
                    Payload::Sgl(&sges[..2]),
                    Payload::Sgl(&sges),
                ];
                shapes.extend(payloads.iter().map(|p| Payload::Inline(p)));
                for payload in shapes {
                    let wr = SendWr::new(op, payload).with_flags(fl);
                    for pi in [0u16, 3, 7, 0xffff] {
                        let mut fast = [0xeeu8; 8 * 64];
                        let mut slow = [0xeeu8; 8 * 64];
                        let off = (pi as usize % 8) * 64;
                        let slot: &mut [u8; 64] = (&mut fast[off..off + 64]).try_into().unwrap();
                        match write_small_send_wqe(slot, pi, 0x12_3456, &wr) {
                            Some(ds) => {
                                let info = write_send_wqe(
                                    &mut SqRing::new(&mut slow).unwrap(),
                                    pi,
                                    0x12_3456,
                                    &wr,
                                )
                                .expect("the generic builder takes what the fast lane takes");
                                assert_eq!(ds, info.ds, "{wr:?}");
                                assert_eq!(info.wqebb_count, 1, "{wr:?}");
                                assert_eq!(fast[..], slow[..], "{wr:?} at {pi}");
                                taken += 1;
                            }
                            None => {
                                // At most the control and remote-address segments, and
                                // only bytes the generic builder writes the same way.
                                let generic = write_send_wqe(
                                    &mut SqRing::new(&mut slow).unwrap(),
                                    pi,
                                    0x12_3456,
                                    &wr,
                                );
                                for (i, &b) in fast.iter().enumerate().filter(|(_, &b)| b != 0xee) {
                                    assert!(
                                        (off..off + 32).contains(&i),
                                        "refused but wrote byte {}: {wr:?}",
                                        i - off
                                    );
                                    if generic.is_ok() {
                                        assert_eq!(
                                            b,
                                            slow[i],
                                            "refused, byte {} differs from the WQE: {wr:?}",
                                            i - off
                                        );
                                    }
                                }
                                refused += 1;
                            }
                        }
                    }
                }
            }
        }
        assert!(
            taken > 500 && refused > 500,
            "{taken} taken, {refused} refused"
        );
    }

    /// A QP's constants: sq_sig_all gives the generic builder's bytes for the request
    /// with CQ_UPDATE added, and an inline payload over the QP's limit (or any inline
    /// READ) is refused.
    #[test]
    fn lane_adds_sq_sig_all_and_keeps_the_inline_limit() {
        let data = [0x5au8; 12];
        let sge = [Sge::new(0x1000, 8, 7)];
        let write = SendOp::RdmaWrite { raddr: 0x2000, rkey: 9 };
        let lane = Lane::new(0x12_3456, true, 8, false);
        for payload in [Payload::Sgl(&sge), Payload::Inline(&[&data[..8]])] {
            let wr = SendWr::new(write, payload);
            let mut fast = [0xeeu8; 64];
            let ds = write_small(&mut fast, 5, &lane, &wr).expect("taken");
            let mut slow = [0xeeu8; 64];
            let info = write_send_wqe(&mut SqRing::new(&mut slow).unwrap(), 5, 0x12_3456, &wr.signaled()).unwrap();
            assert_eq!((ds, fast), (info.ds, slow), "{wr:?}");
        }
        let mut slot = [0u8; 64];
        let nine = [&data[..9]];
        assert_eq!(write_small(&mut slot, 0, &lane, &SendWr::new(write, Payload::Inline(&nine))), None);
        let read = SendOp::RdmaRead { raddr: 0x2000, rkey: 9 };
        assert_eq!(write_small(&mut slot, 0, &lane, &SendWr::new(read, Payload::Sgl(&sge))), None, "no READ on this lane");
    }

    #[test]
    fn copy_small_every_length() {
        let src: Vec<u8> = (100..150).collect();
        for len in 0..=48 {
            let mut dst = [0u8; 50];
            // SAFETY: both ranges hold len bytes and are distinct arrays.
            unsafe { copy_small(dst.as_mut_ptr().add(1), src.as_ptr(), len) };
            assert_eq!(dst[0], 0);
            assert_eq!(&dst[1..1 + len], &src[..len]);
            assert!(dst[1 + len..].iter().all(|&b| b == 0), "{len}");
        }
    }
}
