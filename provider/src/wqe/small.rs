//! The post path's fast lane: the common send WQEs that fit in one WQEBB, written
//! without the generic builder's iteration.
//!
//! [`write_small_send_wqe`] handles a connected-QP SEND, SEND with immediate, RDMA
//! WRITE, RDMA WRITE with immediate or RDMA READ whose payload is at most one gather
//! entry or (not READ) one inline chunk, and whose WQE fits in 64 bytes: control
//! segment, remote-address segment for RDMA, then one data segment or the inline
//! segment. It writes exactly the bytes [`super::write_send_wqe`] writes for the same
//! request (same control segment, same zero padding after inline bytes, nothing past
//! `ds * 16`), which a test below checks over every shape and the golden test
//! (`softhca/preload/tests/libmlx5_golden.rs`) checks against libmlx5. Anything else
//! returns `None`, and the caller takes the generic path; the slot (free, not yet
//! published to the device) may then hold the request's control and remote-address
//! segments, which the generic builder writes again (the same bytes).
//!
//! A WQE that starts a WQEBB and fits in it never wraps around the ring, so the writer
//! works on the one 64-byte slot; every offset below is a constant or is bounded by the
//! 64-byte check, which is what lets the compiler drop the bounds checks.

use super::data::Sge;
use super::inline::INLINE_SEG;
use super::send::{Payload, SendOp, SendWr};
use super::DS_SIZE;

const _: () = assert!(DS_SIZE == 16);
use crate::opcode::{FmCeSe, WqeOpcode};

/// Writes `wr` at producer index `pi` of QP `qpn` into `slot` (the WQEBB at that
/// index) if it is one of the shapes above, and returns its DS count (2 to 4, or 1
/// for a SEND without payload); `None` otherwise, when the slot holds nothing or at
/// most the request's control and remote-address segments (a prefix of the WQE the
/// generic builder writes for it), so the caller writes it with
/// [`super::write_send_wqe`] or leaves the slot unused.
///
/// As with [`super::write_send_wqe`], the caller has checked that the ring has room
/// and that an inline payload is within the QP's inline limit.
#[inline(always)]
pub fn write_small_send_wqe(slot: &mut [u8; 64], pi: u16, qpn: u32, wr: &SendWr<'_>) -> Option<u8> {
    write_small(slot, pi, qpn, wr, wr.flags, usize::MAX, true)
}

/// [`write_small_send_wqe`] for the QP's post path: the control flags are given apart
/// from `wr` (the QP adds CQ_UPDATE for `sq_sig_all` without copying the request), and
/// an inline payload longer than `max_inline` is refused (left to the generic path,
/// which reports it), and so is an RDMA READ unless `read_ok` (the QP's transport has
/// READ, `qp::post::fast_lane`).
#[inline(always)]
pub(crate) fn write_small(
    slot: &mut [u8; 64],
    pi: u16,
    qpn: u32,
    wr: &SendWr<'_>,
    flags: FmCeSe,
    max_inline: usize,
    read_ok: bool,
) -> Option<u8> {
    if wr.ud.is_some() {
        return None;
    }
    // The operation: opcode, immediate and (RDMA) the remote-address segment (raddr.rs:
    // address, key, reserved 0) go into the slot at once; `hdr` is where the payload
    // starts. A request refused after this point has written only these first 16 or
    // 32 bytes, which the generic builder's WQE for it covers (it has the same header).
    let raddr_seg = |slot: &mut [u8; 64], raddr: u64, rkey: u32| {
        slot[16..24].copy_from_slice(&raddr.to_be_bytes());
        slot[24..28].copy_from_slice(&rkey.to_be_bytes());
        slot[28..32].copy_from_slice(&[0; 4]);
    };
    let (opcode, imm, hdr, may_inline): (WqeOpcode, u32, usize, bool) = match wr.op {
        SendOp::Send => (WqeOpcode::Send, 0, 16, true),
        SendOp::SendImm { imm } => (WqeOpcode::SendImm, imm, 16, true),
        SendOp::RdmaWrite { raddr, rkey } => {
            raddr_seg(slot, raddr, rkey);
            (WqeOpcode::RdmaWrite, 0, 32, true)
        }
        SendOp::RdmaWriteImm { raddr, rkey, imm } => {
            raddr_seg(slot, raddr, rkey);
            (WqeOpcode::RdmaWriteImm, imm, 32, true)
        }
        SendOp::RdmaRead { raddr, rkey } if read_ok => {
            raddr_seg(slot, raddr, rkey);
            (WqeOpcode::RdmaRead, 0, 32, false)
        }
        _ => return None,
    };
    // Control segment (ctrl.rs), all but the DS count: opmod 0, index, opcode |
    // signature 0, stream channel 0, fm_ce_se | immediate.
    slot[0..4].copy_from_slice(&(((pi as u32) << 8) | opcode.as_u8() as u32).to_be_bytes());
    slot[8..12].copy_from_slice(&(flags.bits() as u32).to_be_bytes());
    slot[12..16].copy_from_slice(&imm.to_be_bytes());
    let payload = match wr.payload {
        Payload::Sgl([]) => Small::None,
        Payload::Sgl([sge]) => {
            if sge.length == 0 {
                Small::None
            } else {
                Small::Sge(sge)
            }
        }
        Payload::Sgl(_) => return None,
        // READ with inline data: the generic path reports the error.
        Payload::Inline(_) if !may_inline => return None,
        Payload::Inline([]) => Small::None,
        Payload::Inline([[]]) => Small::None,
        // header (4) + bytes must end inside the slot
        Payload::Inline([d]) if d.len() <= 64 - 4 - hdr && d.len() <= max_inline => {
            Small::Inline(d)
        }
        Payload::Inline(_) => return None,
    };
    let ds = match payload {
        Small::None => hdr / DS_SIZE as usize,
        Small::Sge(_) => hdr / DS_SIZE as usize + 1,
        // header and bytes rounded up to whole 16-byte units (an add and a shift;
        // `div_ceil` compiles to a longer sequence)
        Small::Inline(d) => (hdr + 4 + d.len() + 15) >> 4,
    } as u8;
    // qpn | ds
    slot[4..8].copy_from_slice(&(((qpn & 0x00ff_ffff) << 8) | ds as u32).to_be_bytes());
    match payload {
        Small::None => {}
        Small::Sge(sge) => {
            // Data segment (data.rs): byte count, lkey, address.
            let seg: &mut [u8; 16] = (&mut slot[hdr..hdr + 16]).try_into().unwrap();
            seg[0..4].copy_from_slice(&sge.length.to_be_bytes());
            seg[4..8].copy_from_slice(&sge.lkey.to_be_bytes());
            seg[8..16].copy_from_slice(&sge.addr.to_be_bytes());
        }
        Small::Inline(d) => {
            // Inline segment (inline.rs): zero the 16-byte unit that ends the segment
            // (its padding), then the header and the bytes over it.
            let len = d.len();
            // the segment's last unit is the WQE's last unit
            let last = (ds as usize - 1) * DS_SIZE as usize;
            let p = slot.as_mut_ptr();
            // SAFETY: hdr is 16 or 32 and the shape check above bounds len by
            // 64 - 4 - hdr, so the segment ends at hdr + 4 + len <= 64 and ds <= 4:
            // the unit at `last` and the bytes hdr..hdr + 4 + len are inside the
            // 64-byte slot. Unaligned writes
            // need no alignment; `d` is not inside `slot` (which is mutably borrowed).
            unsafe {
                p.add(last).cast::<[u8; 16]>().write_unaligned([0; 16]);
                p.add(hdr)
                    .cast::<[u8; 4]>()
                    .write_unaligned((INLINE_SEG | len as u32).to_be_bytes());
                copy_small(p.add(hdr + 4), d.as_ptr(), len);
            }
        }
    }
    Some(ds)
}

/// The payload shapes of the fast lane.
#[derive(Clone, Copy)]
enum Small<'a> {
    None,
    Sge(&'a Sge),
    Inline(&'a [u8]),
}

/// Copies `len` bytes (at most 60) from `s` to `d` with 8-byte (or 4-byte) moves,
/// the last one overlapping the one before when the length is not a multiple: a few
/// loads and stores instead of a call to `memcpy`.
///
/// # Safety
/// `s` must be valid for reads and `d` for writes of `len` bytes, not overlapping.
#[inline(always)]
unsafe fn copy_small(d: *mut u8, s: *const u8, len: usize) {
    // SAFETY: every access is inside `0..len` of both ranges (the caller's contract):
    // words at `i < len - 8` and at `len - 8` when len >= 8, at 0 and `len - 4` when
    // 4 <= len < 8, bytes below len otherwise. Unaligned accesses need no alignment.
    unsafe {
        if len >= 8 {
            let mut i = 0;
            while i + 8 < len {
                d.add(i)
                    .cast::<u64>()
                    .write_unaligned(s.add(i).cast::<u64>().read_unaligned());
                i += 8;
            }
            d.add(len - 8)
                .cast::<u64>()
                .write_unaligned(s.add(len - 8).cast::<u64>().read_unaligned());
        } else if len >= 4 {
            d.cast::<u32>()
                .write_unaligned(s.cast::<u32>().read_unaligned());
            d.add(len - 4)
                .cast::<u32>()
                .write_unaligned(s.add(len - 4).cast::<u32>().read_unaligned());
        } else {
            for i in 0..len {
                *d.add(i) = *s.add(i);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn copy_small_every_length() {
        let src: Vec<u8> = (100..150).collect();
        for len in 0..=44 {
            let mut dst = [0u8; 46];
            // SAFETY: both ranges hold len bytes and are distinct arrays.
            unsafe { copy_small(dst.as_mut_ptr().add(1), src.as_ptr(), len) };
            assert_eq!(dst[0], 0);
            assert_eq!(&dst[1..1 + len], &src[..len]);
            assert!(dst[1 + len..].iter().all(|&b| b == 0), "{len}");
        }
    }
}
