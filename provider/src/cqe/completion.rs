//! What a CQE means in `ibv_wc` terms: the provider's reading of the `prm` crate's
//! CQE layouts. Traits, because the layouts are `prm`'s types and the work-completion
//! vocabulary the provider's; import them to call the methods on a [`Cqe64`] or an
//! [`ErrCqe`].

use prm::cqe::{Cqe64, ErrCqe};

use super::status::WcStatus;
use super::wc_opcode::{WcFlags, WcOpcode};

/// Work-completion opcode and flags of a successful CQE.
pub trait Completion {
    /// The work-completion opcode and flags of a successful requester CQE, derived
    /// from the echoed WQE opcode. `None` for WQEs whose completion opcode only the
    /// poster knows (NOP, UMR: memory-window bind and local invalidate), which the
    /// QP records per WQE.
    fn req_completion(&self) -> Option<(WcOpcode, WcFlags)>;

    /// The work-completion opcode and flags of a successful responder CQE. The GRH
    /// flag comes from `flags_rqpn`.
    fn resp_completion(&self) -> Option<(WcOpcode, WcFlags)>;
}

impl Completion for Cqe64 {
    #[inline]
    fn req_completion(&self) -> Option<(WcOpcode, WcFlags)> {
        let op = self.send_wqe_opcode()?;
        let wc = WcOpcode::from_send_wqe_opcode(op)?;
        Some((wc, WcFlags::for_send_wqe_opcode(op)))
    }

    #[inline]
    fn resp_completion(&self) -> Option<(WcOpcode, WcFlags)> {
        let op = self.opcode()?;
        let wc = WcOpcode::from_resp_cqe_opcode(op)?;
        let mut flags = WcFlags::for_resp_cqe_opcode(op);
        if self.has_grh() {
            flags |= WcFlags::GRH;
        }
        Some((wc, flags))
    }
}

/// The completion status of an error CQE.
pub trait ErrStatus {
    /// The status libmlx5 reports for this CQE (unknown syndromes are a general
    /// error).
    fn status(&self) -> WcStatus;
}

impl ErrStatus for ErrCqe {
    #[inline]
    fn status(&self) -> WcStatus {
        WcStatus::from_syndrome(self.syndrome_raw())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cqe::Syndrome;
    use crate::opcode::{CqeOpcode, WqeOpcode};

    /// A requester CQE for an RDMA WRITE with immediate, hand-assembled (bytes 56..60
    /// `sop_drop_qpn`: WQE opcode 0x09 echoed in the top byte).
    #[test]
    fn req_completion() {
        let mut b = [0u8; 64];
        b[56..60].copy_from_slice(&[0x09, 0x00, 0x0a, 0xbc]);
        b[63] = 0x01;
        let c = Cqe64::view(&b);
        assert_eq!(c.send_wqe_opcode(), Some(WqeOpcode::RdmaWriteImm));
        assert_eq!(c.req_completion(), Some((WcOpcode::RdmaWrite, WcFlags::WITH_IMM)));
        assert_eq!(c.resp_completion(), None);
    }

    /// A responder SEND with immediate and a GRH (flags_rqpn bits 29:28 = 2).
    #[test]
    fn resp_completion() {
        let mut b = [0u8; 64];
        b[24..28].copy_from_slice(&[0x23, 0x00, 0x00, 0x42]);
        b[63] = (3 << 4) | 0x2;
        let c = Cqe64::view(&b);
        assert_eq!(c.opcode(), Some(CqeOpcode::RespSendImm));
        assert_eq!(c.resp_completion(), Some((WcOpcode::Recv, WcFlags::WITH_IMM | WcFlags::GRH)));
    }

    /// A remote-access error (syndrome 0x13 at byte 55) is IBV_WC_REM_ACCESS_ERR.
    #[test]
    fn err_status() {
        let mut b = [0u8; 64];
        b[55] = 0x13;
        b[63] = 0xd0;
        let e = Cqe64::view(&b).as_err();
        assert_eq!(e.syndrome(), Some(Syndrome::RemoteAccessErr));
        assert_eq!(e.status(), WcStatus::RemAccessErr);
    }
}
