//! Writing a whole send WQE into the SQ ring: the safe, allocation-free post path.
//!
//! A WQE is written as control segment, then (UD) the datagram segment, then (RDMA,
//! atomics) the remote-address and atomic segments, then the payload: data segments
//! or one inline segment. The first WQEBB (64 bytes) is contiguous, and those header
//! segments never need more than it; data segments and inline bytes may run past
//! the end of the ring and continue at its start.

use super::atomic::{AtomicSeg, ATOMIC_SIZE};
use super::ctrl::CtrlSeg;
use super::data::{DataSeg, Sge};
use super::datagram::DatagramSeg;
use super::inline::write_inline;
use super::raddr::RaddrSeg;
use super::ring::SqRing;
use super::size::{send_wqe_info, PayloadLen, WqeInfo};
use super::{DS_SIZE, WQEBB_SIZE};
use crate::opcode::{FmCeSe, WqeOpcode};

/// The operation of a send work request and its operation-specific fields.
///
/// Immediate data is a number that reaches the responder's completion unchanged
/// (it is carried big-endian on the wire, as ibverbs' `__be32 imm_data` is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOp {
    /// A NOP WQE (completes, moves nothing).
    Nop,
    /// SEND: the payload consumes a receive WQE at the peer.
    Send,
    /// SEND with 32 bits of immediate data in the peer's completion.
    SendImm {
        /// The immediate data (host order; the wire carries it big-endian).
        imm: u32,
    },
    /// SEND that invalidates `rkey` at the responder.
    SendInv {
        /// The remote key.
        rkey: u32,
    },
    /// RDMA WRITE of the payload to `raddr`.
    RdmaWrite {
        /// The remote address.
        raddr: u64,
        /// The remote key.
        rkey: u32,
    },
    /// RDMA WRITE that also consumes a receive WQE at the peer, with immediate data.
    RdmaWriteImm {
        /// The remote address.
        raddr: u64,
        /// The remote key.
        rkey: u32,
        /// The immediate data (host order; the wire carries it big-endian).
        imm: u32,
    },
    /// RDMA READ from `raddr` into the local SGEs.
    RdmaRead {
        /// The remote address.
        raddr: u64,
        /// The remote key.
        rkey: u32,
    },
    /// 8-byte compare-and-swap at `raddr`; the old value lands in the local SGE.
    CompareSwap {
        /// The remote address.
        raddr: u64,
        /// The remote key.
        rkey: u32,
        /// The value the remote word must hold.
        compare: u64,
        /// The value it gets if it did.
        swap: u64,
    },
    /// 8-byte fetch-and-add at `raddr`; the old value lands in the local SGE.
    FetchAdd {
        /// The remote address.
        raddr: u64,
        /// The remote key.
        rkey: u32,
        /// The value added to the remote word.
        add: u64,
    },
}

impl SendOp {
    /// The mlx5 opcode the WQE carries (and the requester CQE echoes).
    #[inline(always)]
    pub const fn opcode(&self) -> WqeOpcode {
        match self {
            Self::Nop => WqeOpcode::Nop,
            Self::Send => WqeOpcode::Send,
            Self::SendImm { .. } => WqeOpcode::SendImm,
            Self::SendInv { .. } => WqeOpcode::SendInval,
            Self::RdmaWrite { .. } => WqeOpcode::RdmaWrite,
            Self::RdmaWriteImm { .. } => WqeOpcode::RdmaWriteImm,
            Self::RdmaRead { .. } => WqeOpcode::RdmaRead,
            Self::CompareSwap { .. } => WqeOpcode::AtomicCs,
            Self::FetchAdd { .. } => WqeOpcode::AtomicFa,
        }
    }

    /// The control segment's `imm` field.
    #[inline(always)]
    const fn imm(&self) -> u32 {
        match *self {
            Self::SendImm { imm } | Self::RdmaWriteImm { imm, .. } => imm,
            Self::SendInv { rkey } => rkey,
            _ => 0,
        }
    }

    const fn is_atomic(&self) -> bool {
        matches!(self, Self::CompareSwap { .. } | Self::FetchAdd { .. })
    }
}

/// Where the payload comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Payload<'a> {
    /// Gathered by the device from registered memory; empty SGEs are skipped.
    Sgl(&'a [Sge]),
    /// Copied into the WQE now (`IBV_SEND_INLINE`): the buffers may be reused as
    /// soon as the post returns and need no memory registration. The caller bounds
    /// the total length by the QP's inline limit.
    Inline(&'a [&'a [u8]]),
}

impl Payload<'_> {
    /// No payload (zero-length operations).
    pub const NONE: Payload<'static> = Payload::Sgl(&[]);
}

/// Destination of a UD send: an address handle's AV template plus the remote QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdDest<'a> {
    /// The address vector (from an address handle).
    pub av: &'a DatagramSeg,
    /// The destination QP number.
    pub remote_qpn: u32,
    /// The Q_Key the destination QP expects.
    pub qkey: u32,
}

/// A send work request, borrowed for the duration of one post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendWr<'a> {
    /// The operation and its remote arguments.
    pub op: SendOp,
    /// The bytes to send: SGEs or inline data.
    pub payload: Payload<'a>,
    /// CQ_UPDATE (signaled), SOLICITED, FENCE.
    pub flags: FmCeSe,
    /// Set for UD QPs (a datagram segment is written), `None` for RC/UC.
    pub ud: Option<UdDest<'a>>,
}

impl<'a> SendWr<'a> {
    /// An unsignaled request on a connected QP.
    #[inline(always)]
    pub const fn new(op: SendOp, payload: Payload<'a>) -> Self {
        Self {
            op,
            payload,
            flags: FmCeSe::empty(),
            ud: None,
        }
    }

    /// Requests a CQE for this WQE (`IBV_SEND_SIGNALED`).
    #[inline(always)]
    pub const fn signaled(mut self) -> Self {
        self.flags = self.flags.union(FmCeSe::CQ_UPDATE);
        self
    }

    /// Adds control flags (solicited event, fence).
    #[inline(always)]
    pub const fn with_flags(mut self, flags: FmCeSe) -> Self {
        self.flags = self.flags.union(flags);
        self
    }

    /// Makes this a UD send to `dest`.
    #[inline(always)]
    pub const fn to_ud(mut self, dest: UdDest<'a>) -> Self {
        self.ud = Some(dest);
        self
    }

    /// Validates the request and returns the size of its WQE.
    #[inline]
    pub fn wqe_info(&self) -> Result<WqeInfo, WqeError> {
        let op = self.op.opcode();
        if self.ud.is_some() && op.has_raddr() {
            return Err(WqeError::NotForUd(op));
        }
        let payload = match self.payload {
            Payload::Sgl(sgl) => {
                PayloadLen::Sges(sgl.iter().filter(|s| s.length != 0).count() as u32)
            }
            Payload::Inline(chunks) => {
                if matches!(op, WqeOpcode::RdmaRead) || self.op.is_atomic() {
                    return Err(WqeError::InlineNotAllowed(op));
                }
                let len = chunks
                    .iter()
                    .fold(0usize, |acc, c| acc.saturating_add(c.len()));
                PayloadLen::Inline(u32::try_from(len).unwrap_or(u32::MAX))
            }
        };
        send_wqe_info(op, self.ud.is_some(), payload).ok_or(WqeError::TooLarge)
    }
}

/// Why a send WQE could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WqeError {
    #[error("WQE larger than 63 x 16 bytes")]
    /// The WQE would exceed 63 x 16 bytes.
    TooLarge,
    #[error("WQE of {wqebbs} WQEBBs does not fit a ring of {wqe_cnt}")]
    /// The WQE needs more WQEBBs than the ring has.
    LargerThanRing {
        /// WQEBBs the WQE needs.
        wqebbs: u16,
        /// WQEBBs in the ring.
        wqe_cnt: u32,
    },
    #[error("{0:?} cannot carry inline data")]
    /// Inline data on an operation without an outgoing payload.
    InlineNotAllowed(WqeOpcode),
    #[error("{0:?} is not a UD operation")]
    /// Not an operation of a UD QP.
    NotForUd(WqeOpcode),
}

/// Writes the send WQE for `wr` at producer index `pi` of `sq` for QP `qpn`, and
/// returns its size: the caller advances its producer index by
/// `info.wqebb_count`, rings the doorbell record with the new index, and copies
/// `info.bytes()` (rounded to 64) to BlueFlame if it uses it.
///
/// Nothing is written when an error is returned. The caller must already have
/// checked that the ring has room for the WQE (this function only checks that it is
/// not larger than the whole ring) and that an inline payload is within the QP's
/// limit.
#[inline]
pub fn write_send_wqe(
    sq: &mut SqRing<'_>,
    pi: u16,
    qpn: u32,
    wr: &SendWr<'_>,
) -> Result<WqeInfo, WqeError> {
    let info = wr.wqe_info()?;
    if info.wqebb_count as u32 > sq.wqe_cnt() {
        return Err(WqeError::LargerThanRing {
            wqebbs: info.wqebb_count,
            wqe_cnt: sq.wqe_cnt(),
        });
    }
    let opcode = wr.op.opcode();

    // Header segments: all inside the first WQEBB (at most ctrl + datagram = 64 B, or
    // ctrl + raddr + atomic = 48 B).
    let first = sq.wqebb_mut(pi);
    let (ctrl, rest) = first.split_at_mut(16);
    CtrlSeg::new(pi, opcode, qpn, info.ds, wr.flags)
        .with_imm(wr.op.imm())
        .write(slot16(ctrl));
    let mut ds_off: u32 = 1;
    if let Some(ud) = &wr.ud {
        let dgram: &mut [u8; 48] = rest.try_into().expect("64 - 16 = 48");
        DatagramSeg::for_ud(ud.av, ud.remote_qpn, ud.qkey).write(dgram);
        ds_off = 4;
    } else {
        match wr.op {
            SendOp::RdmaWrite { raddr, rkey }
            | SendOp::RdmaWriteImm { raddr, rkey, .. }
            | SendOp::RdmaRead { raddr, rkey } => {
                RaddrSeg::new(raddr, rkey).write(slot16(&mut rest[..16]));
                ds_off = 2;
            }
            SendOp::CompareSwap {
                raddr,
                rkey,
                compare,
                swap,
            } => {
                RaddrSeg::new(raddr, rkey).write(slot16(&mut rest[..16]));
                AtomicSeg::compare_swap(compare, swap).write(slot16(&mut rest[16..32]));
                ds_off = 3;
            }
            SendOp::FetchAdd { raddr, rkey, add } => {
                RaddrSeg::new(raddr, rkey).write(slot16(&mut rest[..16]));
                AtomicSeg::fetch_add(add).write(slot16(&mut rest[16..32]));
                ds_off = 3;
            }
            SendOp::Nop | SendOp::Send | SendOp::SendImm { .. } | SendOp::SendInv { .. } => {}
        }
    }

    // Payload: DS slots counted from the ring start; `slot_mut` wraps them.
    let first_payload_ds = pi as u32 * (WQEBB_SIZE / DS_SIZE) + ds_off;
    match wr.payload {
        Payload::Sgl(sgl) => {
            let atomic = wr.op.is_atomic();
            for (ds, sge) in (first_payload_ds..).zip(sgl.iter().filter(|s| s.length != 0)) {
                let len = if atomic { ATOMIC_SIZE } else { sge.length };
                DataSeg::new(len, sge.lkey, sge.addr).write(sq.slot_mut(ds));
            }
        }
        Payload::Inline(chunks) => {
            let offset = (first_payload_ds as usize * DS_SIZE as usize) & (sq.len() - 1);
            write_inline(sq.as_bytes_mut(), offset, chunks);
        }
    }
    Ok(info)
}

/// A 16-byte sub-slice as an array reference (the lengths are constants at every
/// call site, so this compiles to nothing).
#[inline(always)]
fn slot16(s: &mut [u8]) -> &mut [u8; 16] {
    s.try_into().expect("16-byte segment slot")
}
