//! The 64-byte CQE (`struct mlx5_cqe64`), read in place.
//!
//! | bytes  | field                                                          |
//! |--------|----------------------------------------------------------------|
//! | 2..4   | wqe_id (striding RQ)                                            |
//! | 17     | ml_path: source path bits `[6:0]`                                 |
//! | 22..24 | slid                                                           |
//! | 24..28 | flags_rqpn: grh `[29:28]`, sl / RoCE packet type `[27:24]`, source QP `[23:0]` ([`super::flags_rqpn`]) |
//! | 28     | hds_ip_ext (L2/L3/L4 OK bits)                                   |
//! | 29     | l4_hdr_type_etc                                                 |
//! | 30..32 | vlan_info                                                      |
//! | 32..36 | srqn_uidx: SRQ number, or the QP's user index with CQE version 1 |
//! | 36..40 | imm_inval_pkey: immediate / invalidated rkey / pkey index `[15:0]`|
//! | 40     | app (1 = tag matching)                                          |
//! | 41     | app_op                                                         |
//! | 42..44 | app_info                                                       |
//! | 44..48 | byte_cnt                                                       |
//! | 48..56 | timestamp                                                      |
//! | 56..60 | sop_drop_qpn: WQE opcode `[31:24]` (requester), QP number `[23:0]`  |
//! | 60..62 | wqe_counter: index of the completed WQE                         |
//! | 62     | signature                                                      |
//! | 63     | op_own: opcode `[7:4]`, format `[3:2]` (inline-scatter bits), se `[1]`, owner `[0]` |

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::err::ErrCqe;
use super::flags_rqpn::RocePacketType;
use crate::opcode::{CqeOpcode, WqeOpcode};

#[repr(C)]
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned,
)]
pub struct Cqe64 {
    pub rsvd0: [u8; 2],
    pub wqe_id: U16,
    pub rsvd4: [u8; 13],
    pub ml_path: u8,
    pub rsvd20: [u8; 4],
    pub slid: U16,
    pub flags_rqpn: U32,
    pub hds_ip_ext: u8,
    pub l4_hdr_type_etc: u8,
    pub vlan_info: U16,
    pub srqn_uidx: U32,
    pub imm_inval_pkey: U32,
    pub app: u8,
    pub app_op: u8,
    pub app_info: U16,
    pub byte_cnt: U32,
    pub timestamp: U64,
    pub sop_drop_qpn: U32,
    pub wqe_counter: U16,
    pub signature: u8,
    pub op_own: u8,
}

const _: () = assert!(core::mem::size_of::<Cqe64>() == 64);

/// Where a responder CQE's inline-scattered data is (`op_own` bits 2 and 3): small
/// payloads can be delivered in the CQE itself instead of to the receive buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InlineScatter {
    None,
    /// Up to 32 bytes, in bytes 0..32 of this CQE.
    InCqe32,
    /// Up to 64 bytes, in the 64 bytes before this CQE (128-byte CQEs).
    InCqe64,
}

impl Cqe64 {
    /// Views 64 bytes of the CQ buffer as a CQE. Read only after ownership has been
    /// established and ordered (see [`super::owner`]).
    #[inline(always)]
    pub fn view(bytes: &[u8; 64]) -> &Self {
        zerocopy::transmute_ref!(bytes)
    }

    /// The same 64 bytes in the error layout (valid when the opcode is REQ_ERR or
    /// RESP_ERR).
    #[inline(always)]
    pub fn as_err(&self) -> &ErrCqe {
        zerocopy::transmute_ref!(self)
    }

    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8; 64] {
        zerocopy::transmute_ref!(self)
    }

    /// The opcode nibble (`mlx5dv_get_cqe_opcode`).
    #[inline(always)]
    pub const fn opcode_raw(&self) -> u8 {
        self.op_own >> 4
    }

    #[inline(always)]
    pub const fn opcode(&self) -> Option<CqeOpcode> {
        CqeOpcode::from_nibble(self.opcode_raw())
    }

    /// The owner bit (`mlx5dv_get_cqe_owner`).
    #[inline(always)]
    pub const fn owner(&self) -> u8 {
        self.op_own & 1
    }

    /// Solicited event bit (`mlx5dv_get_cqe_se`).
    #[inline(always)]
    pub const fn se(&self) -> u8 {
        (self.op_own >> 1) & 1
    }

    /// The 2-bit format field (`mlx5dv_get_cqe_format`).
    #[inline(always)]
    pub const fn format(&self) -> u8 {
        (self.op_own >> 2) & 3
    }

    pub const fn inline_scatter(&self) -> InlineScatter {
        if self.op_own & 0x4 != 0 {
            InlineScatter::InCqe32
        } else if self.op_own & 0x8 != 0 {
            InlineScatter::InCqe64
        } else {
            InlineScatter::None
        }
    }

    /// QP number the completion belongs to.
    #[inline(always)]
    pub const fn qpn(&self) -> u32 {
        self.sop_drop_qpn.get() & 0x00ff_ffff
    }

    /// For requester CQEs: the opcode byte of the completed WQE, echoed by the device
    /// in the top byte of `sop_drop_qpn`.
    #[inline(always)]
    pub const fn send_wqe_opcode_raw(&self) -> u8 {
        (self.sop_drop_qpn.get() >> 24) as u8
    }

    #[inline(always)]
    pub const fn send_wqe_opcode(&self) -> Option<WqeOpcode> {
        WqeOpcode::from_u8(self.send_wqe_opcode_raw())
    }

    /// The 16-bit index of the completed WQE (mask it with the queue size).
    #[inline(always)]
    pub const fn wqe_counter(&self) -> u16 {
        self.wqe_counter.get()
    }

    #[inline(always)]
    pub const fn byte_cnt(&self) -> u32 {
        self.byte_cnt.get()
    }

    /// Immediate data (numeric value), invalidated rkey, or (UD) the pkey index in the
    /// low 16 bits, depending on the opcode.
    #[inline(always)]
    pub const fn imm_inval_pkey(&self) -> u32 {
        self.imm_inval_pkey.get()
    }

    /// SRQ number, or with CQE version 1 the QP's user index (24 bits).
    #[inline(always)]
    pub const fn srqn_uidx(&self) -> u32 {
        self.srqn_uidx.get() & 0x00ff_ffff
    }

    /// Source QP of a UD receive.
    pub const fn src_qp(&self) -> u32 {
        self.flags_rqpn.get() & 0x00ff_ffff
    }

    pub const fn sl(&self) -> u8 {
        ((self.flags_rqpn.get() >> 24) & 0xf) as u8
    }

    /// Whether the received packet had a GRH.
    pub const fn has_grh(&self) -> bool {
        (self.flags_rqpn.get() >> 28) & 3 != 0
    }

    /// On a RoCE port: the L3 header the packet came with, read as mlx5_ib reads it
    /// (`(flags_rqpn >> 24) & 3`); `None` for the reserved value 3.
    pub const fn roce_packet_type(&self) -> Option<RocePacketType> {
        RocePacketType::from_bits(((self.flags_rqpn.get() >> 24) & 3) as u8)
    }

    pub const fn slid(&self) -> u16 {
        self.slid.get()
    }

    pub const fn dlid_path_bits(&self) -> u8 {
        self.ml_path & 0x7f
    }

    pub const fn timestamp(&self) -> u64 {
        self.timestamp.get()
    }

    // Writer side (the device: softhca). The body is composed in a local value and
    // stored with `op_own` last; see `owner` for the ordering rule.

    /// An all-zero CQE to fill in.
    #[inline(always)]
    pub fn zeroed() -> Self {
        zerocopy::FromZeros::new_zeroed()
    }

    /// The same 64 bytes in the error layout, for writing an error CQE.
    #[inline(always)]
    pub fn as_err_mut(&mut self) -> &mut ErrCqe {
        zerocopy::transmute_mut!(self)
    }

    /// Sets `sop_drop_qpn`: the echoed WQE opcode (requester CQEs; 0 otherwise) and
    /// the 24-bit QP number.
    #[inline(always)]
    pub fn set_sop_drop_qpn(&mut self, wqe_opcode: u8, qpn: u32) {
        self.sop_drop_qpn = U32::new(((wqe_opcode as u32) << 24) | (qpn & 0x00ff_ffff));
    }

    /// Sets the SRQ number / user index (24 bits).
    #[inline(always)]
    pub fn set_srqn_uidx(&mut self, v: u32) {
        self.srqn_uidx = U32::new(v & 0x00ff_ffff);
    }

    /// The `op_own` byte for a CQE of this opcode nibble, solicited bit and owner
    /// bit (the lap parity the consumer expects at this index).
    #[inline(always)]
    pub const fn make_op_own(opcode: u8, se: bool, owner: bool) -> u8 {
        (opcode << 4) | ((se as u8) << 1) | owner as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::offset_of;

    #[test]
    fn offsets_match_mlx5_cqe64() {
        assert_eq!(offset_of!(Cqe64, wqe_id), 2);
        assert_eq!(offset_of!(Cqe64, ml_path), 17);
        assert_eq!(offset_of!(Cqe64, slid), 22);
        assert_eq!(offset_of!(Cqe64, flags_rqpn), 24);
        assert_eq!(offset_of!(Cqe64, hds_ip_ext), 28);
        assert_eq!(offset_of!(Cqe64, vlan_info), 30);
        assert_eq!(offset_of!(Cqe64, srqn_uidx), 32);
        assert_eq!(offset_of!(Cqe64, imm_inval_pkey), 36);
        assert_eq!(offset_of!(Cqe64, app), 40);
        assert_eq!(offset_of!(Cqe64, byte_cnt), 44);
        assert_eq!(offset_of!(Cqe64, timestamp), 48);
        assert_eq!(offset_of!(Cqe64, sop_drop_qpn), 56);
        assert_eq!(offset_of!(Cqe64, wqe_counter), 60);
        assert_eq!(offset_of!(Cqe64, signature), 62);
        assert_eq!(offset_of!(Cqe64, op_own), 63);
    }

    /// The writer side composes the bytes the reader decodes: hand-derived from the
    /// layout table above.
    #[test]
    fn write_req_and_err() {
        let mut c = Cqe64::zeroed();
        c.set_srqn_uidx(0x0100_0005);
        c.byte_cnt = U32::new(4096);
        c.set_sop_drop_qpn(0x09, 0x12_3abc);
        c.wqe_counter = U16::new(0xfffe);
        c.op_own = Cqe64::make_op_own(CqeOpcode::Req as u8, false, true);
        let b = c.as_bytes();
        assert_eq!(&b[32..36], &[0, 0, 0, 5]);
        assert_eq!(&b[44..48], &[0, 0, 0x10, 0]);
        assert_eq!(&b[56..64], &[0x09, 0x12, 0x3a, 0xbc, 0xff, 0xfe, 0, 0x01]);
        assert_eq!(Cqe64::make_op_own(CqeOpcode::RespSendImm as u8, true, true), 0x33);

        let mut e = Cqe64::zeroed();
        e.as_err_mut().vendor_err_synd = 0x81;
        e.as_err_mut().syndrome = 0x15;
        e.set_sop_drop_qpn(0x0a, 0x108);
        e.op_own = Cqe64::make_op_own(CqeOpcode::ReqErr as u8, false, false);
        assert_eq!(&e.as_bytes()[54..64], &[0x81, 0x15, 0x0a, 0, 0x01, 0x08, 0, 0, 0, 0xd0]);
    }

    /// A requester CQE for an RDMA WRITE with immediate, hand-assembled.
    #[test]
    fn decode_req_cqe() {
        let mut b = [0u8; 64];
        b[32..36].copy_from_slice(&[0x00, 0x00, 0x00, 0x05]); // user index 5
        b[44..48].copy_from_slice(&[0x00, 0x00, 0x10, 0x00]); // 4096 bytes
        b[56..60].copy_from_slice(&[0x09, 0x00, 0x0a, 0xbc]); // RDMA_WRITE_IMM, qpn 0xabc
        b[60..62].copy_from_slice(&[0xff, 0xfe]);
        b[63] = 0x01; // REQ, owner 1
        let c = Cqe64::view(&b);
        assert_eq!(c.opcode(), Some(CqeOpcode::Req));
        assert_eq!(c.owner(), 1);
        assert_eq!(c.qpn(), 0xabc);
        assert_eq!(c.srqn_uidx(), 5);
        assert_eq!(c.byte_cnt(), 4096);
        assert_eq!(c.wqe_counter(), 0xfffe);
        assert_eq!(c.send_wqe_opcode(), Some(WqeOpcode::RdmaWriteImm));
    }

    #[test]
    fn decode_resp_cqe() {
        let mut b = [0u8; 64];
        b[17] = 0x85;
        b[22..24].copy_from_slice(&[0x12, 0x34]);
        b[24..28].copy_from_slice(&[0x23, 0x00, 0x00, 0x42]); // grh 2, sl 3, src qp 0x42
        b[36..40].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        b[63] = (3 << 4) | 0x2 | 0x4; // RESP_SEND_IMM, se, inline scatter 32
        let c = Cqe64::view(&b);
        assert_eq!(c.opcode(), Some(CqeOpcode::RespSendImm));
        assert_eq!((c.owner(), c.se(), c.format()), (0, 1, 1));
        assert_eq!(c.inline_scatter(), InlineScatter::InCqe32);
        assert_eq!(
            (
                c.src_qp(),
                c.sl(),
                c.has_grh(),
                c.slid(),
                c.dlid_path_bits()
            ),
            (0x42, 3, true, 0x1234, 5)
        );
        assert_eq!(c.imm_inval_pkey(), 0xdead_beef);
    }
}
