//! Work-completion opcodes and flags (`enum ibv_wc_opcode`, `enum ibv_wc_flags`),
//! and how they are derived from mlx5 CQEs.
//!
//! Requester CQEs do not say what completed; the device echoes the WQE's opcode in
//! `sop_drop_qpn[31:24]`, and the completion opcode follows from it
//! ([`WcOpcode::from_send_wqe_opcode`]). Responder CQEs carry their own opcode
//! ([`WcOpcode::from_resp_cqe_opcode`]).

use bitflags::bitflags;

use crate::opcode::{CqeOpcode, WqeOpcode};

#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// `enum ibv_wc_opcode`: what a completion completed (receive opcodes have bit 7 set).
pub enum WcOpcode {
    /// A SEND (with or without immediate) the requester posted.
    Send = 0,
    /// An RDMA WRITE (with or without immediate).
    RdmaWrite = 1,
    /// An RDMA READ.
    RdmaRead = 2,
    /// An atomic compare and swap.
    CompSwap = 3,
    /// An atomic fetch and add.
    FetchAdd = 4,
    /// A memory window bind.
    BindMw = 5,
    /// A local invalidate.
    LocalInv = 6,
    /// A TCP segmentation offload send (raw packet QPs).
    Tso = 7,
    /// Receive completion; ibverbs sets bit 7 on every receive opcode.
    Recv = 1 << 7,
    /// An RDMA WRITE WITH IMM that consumed a receive WQE here.
    RecvRdmaWithImm = (1 << 7) + 1,
}

impl WcOpcode {
    /// The completion opcode of a successful send WQE with this mlx5 opcode. `None`
    /// for NOP/UMR/SET_PSV/MMO and others whose meaning (e.g. bind vs. local
    /// invalidate, both UMR) only the poster recorded.
    pub const fn from_send_wqe_opcode(op: WqeOpcode) -> Option<Self> {
        Some(match op {
            WqeOpcode::RdmaWrite | WqeOpcode::RdmaWriteImm => Self::RdmaWrite,
            WqeOpcode::Send | WqeOpcode::SendImm | WqeOpcode::SendInval => Self::Send,
            WqeOpcode::RdmaRead => Self::RdmaRead,
            WqeOpcode::AtomicCs => Self::CompSwap,
            WqeOpcode::AtomicFa => Self::FetchAdd,
            WqeOpcode::Tso => Self::Tso,
            _ => return None,
        })
    }

    /// The completion opcode of a successful responder CQE.
    pub const fn from_resp_cqe_opcode(op: CqeOpcode) -> Option<Self> {
        Some(match op {
            CqeOpcode::RespWrImm => Self::RecvRdmaWithImm,
            CqeOpcode::RespSend | CqeOpcode::RespSendImm | CqeOpcode::RespSendInv => Self::Recv,
            _ => return None,
        })
    }

    /// Whether this is a responder (receive) completion.
    pub const fn is_recv(self) -> bool {
        self as u32 & (1 << 7) != 0
    }
}

bitflags! {
    /// `ibv_wc.wc_flags`.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WcFlags: u32 {
        /// The receive buffer starts with the 40-byte GRH (UD receives).
        const GRH = 1 << 0;
        /// The completion carries immediate data.
        const WITH_IMM = 1 << 1;
        /// The device checked the packet's IP checksum (raw packet QPs).
        const IP_CSUM_OK = 1 << 2;
        /// The SEND invalidated an rkey here.
        const WITH_INV = 1 << 3;
    }
}

impl WcFlags {
    /// Flags of a requester completion: the immediate variants report WITH_IMM.
    pub const fn for_send_wqe_opcode(op: WqeOpcode) -> Self {
        match op {
            WqeOpcode::RdmaWriteImm | WqeOpcode::SendImm => Self::WITH_IMM,
            _ => Self::empty(),
        }
    }

    /// Flags of a responder completion (GRH comes from the CQE body, not the opcode).
    pub const fn for_resp_cqe_opcode(op: CqeOpcode) -> Self {
        match op {
            CqeOpcode::RespWrImm | CqeOpcode::RespSendImm => Self::WITH_IMM,
            CqeOpcode::RespSendInv => Self::WITH_INV,
            _ => Self::empty(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering() {
        assert_eq!(WcOpcode::Send as u32, 0);
        assert_eq!(WcOpcode::FetchAdd as u32, 4);
        assert_eq!(WcOpcode::Recv as u32, 128);
        assert_eq!(WcOpcode::RecvRdmaWithImm as u32, 129);
        assert!(WcOpcode::RecvRdmaWithImm.is_recv());
        assert!(!WcOpcode::RdmaRead.is_recv());
    }

    #[test]
    fn send_cqe_opcode_recovery() {
        let table = [
            (0x08, Some(WcOpcode::RdmaWrite), WcFlags::empty()),
            (0x09, Some(WcOpcode::RdmaWrite), WcFlags::WITH_IMM),
            (0x0a, Some(WcOpcode::Send), WcFlags::empty()),
            (0x0b, Some(WcOpcode::Send), WcFlags::WITH_IMM),
            (0x01, Some(WcOpcode::Send), WcFlags::empty()),
            (0x10, Some(WcOpcode::RdmaRead), WcFlags::empty()),
            (0x11, Some(WcOpcode::CompSwap), WcFlags::empty()),
            (0x12, Some(WcOpcode::FetchAdd), WcFlags::empty()),
            (0x00, None, WcFlags::empty()),
            (0x25, None, WcFlags::empty()),
        ];
        for (raw, wc, flags) in table {
            let op = WqeOpcode::from_u8(raw).unwrap();
            assert_eq!(WcOpcode::from_send_wqe_opcode(op), wc, "{op:?}");
            assert_eq!(WcFlags::for_send_wqe_opcode(op), flags, "{op:?}");
        }
    }

    #[test]
    fn resp_cqe_opcode() {
        assert_eq!(
            WcOpcode::from_resp_cqe_opcode(CqeOpcode::RespWrImm),
            Some(WcOpcode::RecvRdmaWithImm)
        );
        assert_eq!(
            WcOpcode::from_resp_cqe_opcode(CqeOpcode::RespSendInv),
            Some(WcOpcode::Recv)
        );
        assert_eq!(
            WcFlags::for_resp_cqe_opcode(CqeOpcode::RespSendInv),
            WcFlags::WITH_INV
        );
        assert_eq!(WcOpcode::from_resp_cqe_opcode(CqeOpcode::Req), None);
        assert_eq!(WcOpcode::from_resp_cqe_opcode(CqeOpcode::RespErr), None);
    }
}
