//! The error CQE (`struct mlx5_err_cqe`): the layout of REQ_ERR and RESP_ERR
//! entries.
//!
//! | bytes  | field                                                    |
//! |--------|----------------------------------------------------------|
//! | 32..36 | srqn (or user index, as in [`super::Cqe64`])              |
//! | 54     | vendor_err_synd (reported as `ibv_wc.vendor_err`)         |
//! | 55     | syndrome ([`Syndrome`])                                   |
//! | 56..60 | s_wqe_opcode_qpn: WQE opcode `[31:24]`, QP number `[23:0]`    |
//! | 60..62 | wqe_counter                                              |
//! | 62     | signature                                                |
//! | 63     | op_own                                                   |

use zerocopy::byteorder::big_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::syndrome::Syndrome;

#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct ErrCqe {
    pub rsvd0: [u8; 32],
    pub srqn: U32,
    pub rsvd1: [u8; 18],
    pub vendor_err_synd: u8,
    pub syndrome: u8,
    pub s_wqe_opcode_qpn: U32,
    pub wqe_counter: U16,
    pub signature: u8,
    pub op_own: u8,
}

const _: () = assert!(core::mem::size_of::<ErrCqe>() == 64);

impl ErrCqe {
    #[inline(always)]
    pub fn view(bytes: &[u8; 64]) -> &Self {
        zerocopy::transmute_ref!(bytes)
    }

    /// The raw syndrome byte.
    #[inline(always)]
    pub const fn syndrome_raw(&self) -> u8 {
        self.syndrome
    }

    /// The syndrome, if mlx5dv.h defines it.
    #[inline(always)]
    pub const fn syndrome(&self) -> Option<Syndrome> {
        Syndrome::from_u8(self.syndrome)
    }

    pub const fn vendor_err(&self) -> u8 {
        self.vendor_err_synd
    }

    /// Opcode of the WQE that failed (requester errors).
    pub const fn wqe_opcode_raw(&self) -> u8 {
        (self.s_wqe_opcode_qpn.get() >> 24) as u8
    }

    pub const fn qpn(&self) -> u32 {
        self.s_wqe_opcode_qpn.get() & 0x00ff_ffff
    }

    pub const fn srqn(&self) -> u32 {
        self.srqn.get() & 0x00ff_ffff
    }

    pub const fn wqe_counter(&self) -> u16 {
        self.wqe_counter.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cqe::Cqe64;
    use crate::opcode::CqeOpcode;
    use core::mem::offset_of;

    #[test]
    fn offsets_match_mlx5_err_cqe() {
        assert_eq!(offset_of!(ErrCqe, srqn), 32);
        assert_eq!(offset_of!(ErrCqe, vendor_err_synd), 54);
        assert_eq!(offset_of!(ErrCqe, syndrome), 55);
        assert_eq!(offset_of!(ErrCqe, s_wqe_opcode_qpn), 56);
        assert_eq!(offset_of!(ErrCqe, wqe_counter), 60);
    }

    /// A remote-access error on an RDMA WRITE, hand-assembled.
    #[test]
    fn decode_err_cqe() {
        let mut b = [0u8; 64];
        b[54] = 0x88;
        b[55] = 0x13;
        b[56..60].copy_from_slice(&[0x08, 0x12, 0x34, 0x56]);
        b[60..62].copy_from_slice(&[0x00, 0x07]);
        b[63] = 0xd0;
        let c = Cqe64::view(&b);
        assert_eq!(c.opcode(), Some(CqeOpcode::ReqErr));
        let e = c.as_err();
        assert_eq!(e.syndrome(), Some(Syndrome::RemoteAccessErr));
        assert_eq!(e.vendor_err(), 0x88);
        assert_eq!(e.wqe_opcode_raw(), 0x08);
        assert_eq!(e.qpn(), 0x12_3456);
        assert_eq!(e.wqe_counter(), 7);
    }
}
