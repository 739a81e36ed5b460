//! The 16-byte control segment that starts every send WQE.
//!
//! Layout (big-endian, PRM "WQE control segment", `struct mlx5_wqe_ctrl_seg`):
//!
//! | bytes  | field                                                  |
//! |--------|--------------------------------------------------------|
//! | 0..4   | `opmod[31:24]`, `wqe_index[23:8]`, `opcode[7:0]`     |
//! | 4..8   | `qpn[31:8]`, `ds[7:0]` (ds: WQE size in 16-byte units)  |
//! | 8      | signature                                              |
//! | 9..11  | dci_stream_channel_id (0 for RC/UC/UD)                 |
//! | 11     | fm_ce_se                                               |
//! | 12..16 | immediate data / rkey to invalidate / UMR mkey          |
//!
//! The device fetches a WQE by its index, so `wqe_index` must be the producer
//! counter (wrapping at 0xffff, independent of the ring size).

use zerocopy::byteorder::big_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::opcode::{FmCeSe, WqeOpcode};

/// The largest DS count the 6-bit size field can carry (63 x 16 = 1008 bytes).
pub const MAX_DS: u8 = 0x3f;

/// Raw control segment, byte-for-byte as the device reads it.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct CtrlSeg {
    pub opmod_idx_opcode: U32,
    pub qpn_ds: U32,
    pub signature: u8,
    pub dci_stream_channel_id: U16,
    pub fm_ce_se: u8,
    /// Stored big-endian: the numeric value here is what the peer sees as the
    /// immediate (ibverbs' `imm_data` is already `htobe32(x)`, which gives the same
    /// bytes) or the rkey to invalidate.
    pub imm: U32,
}

const _: () = assert!(core::mem::size_of::<CtrlSeg>() == 16);

impl CtrlSeg {
    /// A control segment with the fields every WQE needs; signature, opmod and
    /// immediate are zero (set them with the `with_*` methods).
    ///
    /// `qpn` is masked to 24 bits; `ds` must be `<= MAX_DS` (checked in debug builds).
    #[inline(always)]
    pub const fn new(pi: u16, opcode: WqeOpcode, qpn: u32, ds: u8, fm_ce_se: FmCeSe) -> Self {
        Self::from_raw(pi, opcode.as_u8(), 0, qpn, fm_ce_se.bits(), ds, 0, 0)
    }

    /// Every field as a plain number, in `mlx5dv_set_ctrl_seg`'s argument order.
    /// Unlike that setter, `imm` is a host-order number stored big-endian, and the
    /// reserved stream-channel id is cleared.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub const fn from_raw(
        pi: u16,
        opcode: u8,
        opmod: u8,
        qpn: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
    ) -> Self {
        debug_assert!(ds <= MAX_DS);
        Self {
            opmod_idx_opcode: U32::new(((opmod as u32) << 24) | ((pi as u32) << 8) | opcode as u32),
            qpn_ds: U32::new(((qpn & 0x00ff_ffff) << 8) | ds as u32),
            signature,
            dci_stream_channel_id: U16::ZERO,
            fm_ce_se,
            imm: U32::new(imm),
        }
    }

    /// Sets the immediate / invalidate-rkey field.
    #[inline(always)]
    pub const fn with_imm(mut self, imm: u32) -> Self {
        self.imm = U32::new(imm);
        self
    }

    /// Sets the opcode modifier (e.g. the masked-atomic size).
    #[inline(always)]
    pub const fn with_opmod(mut self, opmod: u8) -> Self {
        let v = self.opmod_idx_opcode.get();
        self.opmod_idx_opcode = U32::new((v & 0x00ff_ffff) | ((opmod as u32) << 24));
        self
    }

    /// Sets the WQE signature byte (only checked when the QP was created with
    /// WQE signatures enabled).
    #[inline(always)]
    pub const fn with_signature(mut self, signature: u8) -> Self {
        self.signature = signature;
        self
    }

    /// Stores the segment into its 16-byte slot of the send queue.
    #[inline(always)]
    pub fn write(&self, slot: &mut [u8; 16]) {
        *slot = zerocopy::transmute!(*self);
    }

    /// Reads a control segment in place (e.g. softhca fetching a WQE).
    #[inline(always)]
    pub fn view(slot: &[u8; 16]) -> &Self {
        zerocopy::transmute_ref!(slot)
    }

    /// The WQE index (producer counter) the WQE was posted at.
    pub const fn wqe_index(&self) -> u16 {
        (self.opmod_idx_opcode.get() >> 8) as u16
    }

    /// The raw opcode byte.
    pub const fn opcode_raw(&self) -> u8 {
        self.opmod_idx_opcode.get() as u8
    }

    /// The opcode, if it is one mlx5dv.h defines.
    pub const fn opcode(&self) -> Option<WqeOpcode> {
        WqeOpcode::from_u8(self.opcode_raw())
    }

    pub const fn opmod(&self) -> u8 {
        (self.opmod_idx_opcode.get() >> 24) as u8
    }

    /// The 24-bit QP (or SQ) number.
    pub const fn qpn(&self) -> u32 {
        self.qpn_ds.get() >> 8
    }

    /// WQE size in 16-byte units (the 6-bit field; upper bits are reserved).
    pub const fn ds(&self) -> u8 {
        (self.qpn_ds.get() as u8) & MAX_DS
    }

    /// The flags byte; unknown bits are kept.
    pub const fn fm_ce_se(&self) -> FmCeSe {
        FmCeSe::from_bits_retain(self.fm_ce_se)
    }

    pub const fn imm(&self) -> u32 {
        self.imm.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The known-good vector from ABI-NOTES.md (mlx5dv_set_ctrl_seg output).
    #[test]
    fn abi_notes_vector() {
        let seg = CtrlSeg::new(0x1234, WqeOpcode::RdmaWrite, 0xabcdef, 3, FmCeSe::CQ_UPDATE);
        let mut slot = [0xffu8; 16];
        seg.write(&mut slot);
        assert_eq!(
            slot,
            [
                0x00, 0x12, 0x34, 0x08, 0xab, 0xcd, 0xef, 0x03, 0x00, 0x00, 0x00, 0x08, 0x00, 0x00,
                0x00, 0x00
            ]
        );
    }

    #[test]
    fn fields_roundtrip() {
        let seg = CtrlSeg::new(
            0xffff,
            WqeOpcode::SendImm,
            0x1ff_ffff,
            MAX_DS,
            FmCeSe::CQ_UPDATE | FmCeSe::SOLICITED,
        )
        .with_imm(0xdead_beef)
        .with_opmod(0x5a)
        .with_signature(0xa5);
        let mut slot = [0u8; 16];
        seg.write(&mut slot);
        assert_eq!(
            slot,
            [
                0x5a, 0xff, 0xff, 0x0b, 0xff, 0xff, 0xff, 0x3f, 0xa5, 0x00, 0x00, 0x0a, 0xde, 0xad,
                0xbe, 0xef
            ]
        );
        let v = CtrlSeg::view(&slot);
        assert_eq!(v.wqe_index(), 0xffff);
        assert_eq!(v.opcode(), Some(WqeOpcode::SendImm));
        assert_eq!(v.opmod(), 0x5a);
        assert_eq!(v.qpn(), 0xff_ffff);
        assert_eq!(v.ds(), 63);
        assert_eq!(v.fm_ce_se(), FmCeSe::CQ_UPDATE | FmCeSe::SOLICITED);
        assert_eq!(v.imm(), 0xdead_beef);
        assert_eq!(v.signature, 0xa5);
    }
}
