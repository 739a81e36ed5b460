//! mlx5 opcode numbers: send WQE opcodes, CQE opcodes and the control segment's
//! `fm_ce_se` byte.
//!
//! These are the numbers the ConnectX (and softhca) decode, so they live in one place
//! and both halves of the project use the same constants. Values were checked against
//! `/usr/include/infiniband/mlx5dv.h` (rdma-core 44); the golden test in
//! `provider/tests/mlx5dv_golden.rs` compares them with the header at test time.

use bitflags::bitflags;

/// The opcode byte of a send WQE (low byte of the control segment's
/// `opmod_idx_opcode`). Requester CQEs echo it in the top byte of `sop_drop_qpn`,
/// which is how a send completion's operation is recovered (see
/// [`crate::cqe::Cqe64::send_wqe_opcode`]).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WqeOpcode {
    /// No operation; still consumes a WQEBB and can request a CQE.
    Nop = 0x00,
    /// SEND with invalidate: `imm` carries the rkey to invalidate at the responder.
    SendInval = 0x01,
    RdmaWrite = 0x08,
    /// RDMA WRITE with immediate: `imm` carries the immediate data.
    RdmaWriteImm = 0x09,
    Send = 0x0a,
    /// SEND with immediate: `imm` carries the immediate data.
    SendImm = 0x0b,
    /// Large send offload (raw Ethernet QPs).
    Tso = 0x0e,
    RdmaRead = 0x10,
    /// Atomic compare-and-swap (8 bytes).
    AtomicCs = 0x11,
    /// Atomic fetch-and-add (8 bytes).
    AtomicFa = 0x12,
    AtomicMaskedCs = 0x14,
    AtomicMaskedFa = 0x15,
    Fmr = 0x19,
    LocalInval = 0x1b,
    ConfigCmd = 0x1f,
    SetPsv = 0x20,
    /// User-mode memory registration (memory windows, local invalidate).
    Umr = 0x25,
    TagMatching = 0x28,
    FlowTblAccess = 0x2c,
    Mmo = 0x2f,
}

impl WqeOpcode {
    /// Decodes an opcode byte; `None` for numbers mlx5dv.h does not define.
    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0x00 => Self::Nop,
            0x01 => Self::SendInval,
            0x08 => Self::RdmaWrite,
            0x09 => Self::RdmaWriteImm,
            0x0a => Self::Send,
            0x0b => Self::SendImm,
            0x0e => Self::Tso,
            0x10 => Self::RdmaRead,
            0x11 => Self::AtomicCs,
            0x12 => Self::AtomicFa,
            0x14 => Self::AtomicMaskedCs,
            0x15 => Self::AtomicMaskedFa,
            0x19 => Self::Fmr,
            0x1b => Self::LocalInval,
            0x1f => Self::ConfigCmd,
            0x20 => Self::SetPsv,
            0x25 => Self::Umr,
            0x28 => Self::TagMatching,
            0x2c => Self::FlowTblAccess,
            0x2f => Self::Mmo,
            _ => return None,
        })
    }

    /// The opcode byte as written into the control segment.
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// Whether a remote-address segment follows the control segment (RDMA and
    /// atomic operations).
    pub const fn has_raddr(self) -> bool {
        matches!(
            self,
            Self::RdmaWrite
                | Self::RdmaWriteImm
                | Self::RdmaRead
                | Self::AtomicCs
                | Self::AtomicFa
                | Self::AtomicMaskedCs
                | Self::AtomicMaskedFa
        )
    }

    /// Whether an atomic segment follows the remote-address segment. Only the two
    /// plain 8-byte atomics are built here; the masked forms use larger segments.
    pub const fn has_atomic(self) -> bool {
        matches!(self, Self::AtomicCs | Self::AtomicFa)
    }

    /// Whether the control segment's `imm` field is meaningful (immediate data or
    /// the rkey to invalidate).
    pub const fn uses_imm(self) -> bool {
        matches!(self, Self::SendImm | Self::RdmaWriteImm | Self::SendInval)
    }
}

/// The opcode nibble of a CQE (`op_own >> 4`).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CqeOpcode {
    /// Requester (send queue) completion; the WQE opcode is in `sop_drop_qpn[31:24]`.
    Req = 0,
    /// Responder: RDMA WRITE with immediate consumed a receive WQE.
    RespWrImm = 1,
    RespSend = 2,
    RespSendImm = 3,
    RespSendInv = 4,
    ResizeCq = 5,
    NoPacket = 6,
    SigErr = 12,
    /// Requester error; the CQE is a [`crate::cqe::ErrCqe`].
    ReqErr = 13,
    /// Responder error; the CQE is a [`crate::cqe::ErrCqe`].
    RespErr = 14,
    /// Hardware never wrote this entry; the CQ buffer is initialised to it.
    Invalid = 15,
}

impl CqeOpcode {
    /// Decodes the opcode nibble (only the low 4 bits of `v` are looked at);
    /// `None` for the reserved values 7..=11.
    pub const fn from_nibble(v: u8) -> Option<Self> {
        Some(match v & 0xf {
            0 => Self::Req,
            1 => Self::RespWrImm,
            2 => Self::RespSend,
            3 => Self::RespSendImm,
            4 => Self::RespSendInv,
            5 => Self::ResizeCq,
            6 => Self::NoPacket,
            12 => Self::SigErr,
            13 => Self::ReqErr,
            14 => Self::RespErr,
            15 => Self::Invalid,
            _ => return None,
        })
    }

    /// Whether the CQE is laid out as an error CQE.
    pub const fn is_error(self) -> bool {
        matches!(self, Self::ReqErr | Self::RespErr)
    }
}

bitflags! {
    /// The control segment's `fm_ce_se` byte: fence mode (bits 7..5), completion
    /// request (bits 3..2) and solicited event (bit 1).
    ///
    /// Fence mode is a 3-bit field, not independent bits: set at most one of
    /// [`FmCeSe::FENCE`] and [`FmCeSe::INITIATOR_SMALL_FENCE`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct FmCeSe: u8 {
        /// Ask for a solicited event at the responder (`IBV_SEND_SOLICITED`).
        const SOLICITED = 1 << 1;
        /// Always write a CQE for this WQE (`IBV_SEND_SIGNALED`); without it a CQE
        /// is written only on error.
        const CQ_UPDATE = 2 << 2;
        /// Small fence: wait for prior RDMA READ/atomic responses (used by libmlx5
        /// after local invalidate and memory-window binds).
        const INITIATOR_SMALL_FENCE = 1 << 5;
        /// Full fence (`IBV_SEND_FENCE`).
        const FENCE = 4 << 5;
    }
}

impl FmCeSe {
    /// The fence mode field (bits 7..5): any non-zero mode fences the WQE.
    pub const FENCE_MODE_MASK: u8 = 0xe0;

    /// Whether the WQE waits for earlier ones (any fence mode).
    pub const fn fences(self) -> bool {
        self.bits() & Self::FENCE_MODE_MASK != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wqe_opcode_roundtrip() {
        for v in 0..=255u8 {
            if let Some(op) = WqeOpcode::from_u8(v) {
                assert_eq!(op.as_u8(), v);
            }
        }
        assert_eq!(WqeOpcode::from_u8(0x02), None);
        assert_eq!(WqeOpcode::RdmaWrite as u8, 8);
        assert_eq!(WqeOpcode::AtomicFa as u8, 0x12);
    }

    /// Which segments follow the control segment, per opcode, as libmlx5's
    /// `_mlx5_post_send` (providers/mlx5/qp.c) builds them: `set_raddr_seg` for RDMA
    /// READ/WRITE(_IMM) and the two atomics, `set_atomic_seg` for the two atomics only
    /// (the masked ones come from mlx5dv with their own segments), and `send_ieth` puts
    /// immediate data in `imm` for SEND_IMM and RDMA_WRITE_IMM, the rkey for SEND_INVAL.
    #[test]
    fn segments_per_opcode_follow_libmlx5() {
        use WqeOpcode as W;
        let raddr = [W::RdmaWrite, W::RdmaWriteImm, W::RdmaRead, W::AtomicCs, W::AtomicFa, W::AtomicMaskedCs, W::AtomicMaskedFa];
        let atomic = [W::AtomicCs, W::AtomicFa];
        let imm = [W::SendImm, W::RdmaWriteImm, W::SendInval];
        let mut seen = 0;
        for op in (0..=255u8).filter_map(WqeOpcode::from_u8) {
            seen += 1;
            assert_eq!(op.has_raddr(), raddr.contains(&op), "{op:?}");
            assert_eq!(op.has_atomic(), atomic.contains(&op), "{op:?}");
            assert_eq!(op.uses_imm(), imm.contains(&op), "{op:?}");
        }
        assert_eq!(seen, 20, "mlx5dv.h names 20 WQE opcodes");
    }

    #[test]
    fn cqe_opcode_nibble() {
        assert_eq!(CqeOpcode::from_nibble(0xf), Some(CqeOpcode::Invalid));
        assert_eq!(CqeOpcode::from_nibble(0x7), None);
        assert_eq!(CqeOpcode::from_nibble(0x1d), Some(CqeOpcode::ReqErr));
        assert!(CqeOpcode::RespErr.is_error());
        assert!(!CqeOpcode::Req.is_error());
    }

    #[test]
    fn fm_ce_se_values() {
        assert_eq!(FmCeSe::CQ_UPDATE.bits(), 0x08);
        assert_eq!(FmCeSe::SOLICITED.bits(), 0x02);
        assert_eq!(FmCeSe::FENCE.bits(), 0x80);
        assert_eq!(FmCeSe::INITIATOR_SMALL_FENCE.bits(), 0x20);
        assert!(FmCeSe::FENCE.fences() && FmCeSe::INITIATOR_SMALL_FENCE.fences());
        assert!(!(FmCeSe::CQ_UPDATE | FmCeSe::SOLICITED).fences());
    }
}
