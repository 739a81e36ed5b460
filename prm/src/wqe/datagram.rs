//! The 48-byte datagram segment (address vector) of UD (and DC) send WQEs.
//!
//! Layout (big-endian, `struct mlx5_wqe_av` / `struct mlx5_wqe_datagram_seg`):
//!
//! | bytes  | field                                                          |
//! |--------|----------------------------------------------------------------|
//! | 0..8   | key: UD Q_Key in bytes 0..4 (4..8 reserved), or the 64-bit DC key |
//! | 8..12  | `ext[31]`, `dqp_dct[23:0]` (destination QP / DCT number)         |
//! | 12     | stat_rate_sl: static rate `[7:4]`, SL (IB) or priority (RoCE)      |
//! | 13     | fl_mlid: force loopback `[7]`, source path bits `[6:0]`             |
//! | 14..16 | rlid (IB) or UDP source port (RoCE v2)                          |
//! | 16..20 | reserved                                                        |
//! | 20..26 | destination MAC (RoCE)                                          |
//! | 26     | traffic class                                                   |
//! | 27     | hop limit                                                       |
//! | 28..32 | `grh[30]`, `sgid_index[27:20]`, `flow_label[19:0]`                |
//! | 32..48 | destination GID                                                 |
//!
//! An address handle prepares everything but the key and destination QP once; each
//! UD WQE copies that template and fills in the per-WR remote QPN and Q_Key, which
//! is what [`DatagramSeg::for_ud`] does.

use zerocopy::byteorder::big_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The `ext` bit of `dqp_dct` (`MLX5_EXTENDED_UD_AV`): the AV is the full 48-byte
/// form. libmlx5 always sets it for UD.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;

/// The datagram segment / address vector, byte-for-byte.
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
pub struct DatagramSeg {
    /// Q_Key in the upper 32 bits (UD) or the DC access key.
    pub key: U64,
    pub dqp_dct: U32,
    pub stat_rate_sl: u8,
    pub fl_mlid: u8,
    pub rlid: U16,
    pub reserved0: [u8; 4],
    pub rmac: [u8; 6],
    pub tclass: u8,
    pub hop_limit: u8,
    pub grh_gid_fl: U32,
    pub rgid: [u8; 16],
}

const _: () = assert!(core::mem::size_of::<DatagramSeg>() == 48);

impl DatagramSeg {
    /// Every field as a plain number, in `mlx5dv_set_dgram_seg`'s argument order
    /// (`key` is the full 64-bit key field, `ext` only its low bit is used).
    #[allow(clippy::too_many_arguments)]
    pub const fn from_raw(
        key: u64,
        dqp_dct: u32,
        ext: u8,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: [u8; 6],
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: [u8; 16],
    ) -> Self {
        Self {
            key: U64::new(key),
            dqp_dct: U32::new((((ext & 1) as u32) << 31) | dqp_dct),
            stat_rate_sl,
            fl_mlid,
            rlid: U16::new(rlid),
            reserved0: [0; 4],
            rmac,
            tclass,
            hop_limit,
            grh_gid_fl: U32::new(grh_gid_fl),
            rgid,
        }
    }

    /// The per-WR datagram segment of a UD send: `av` (an address handle's template)
    /// with the destination QP number, the extended-AV bit and the Q_Key filled in.
    #[inline(always)]
    pub const fn for_ud(av: &DatagramSeg, remote_qpn: u32, qkey: u32) -> Self {
        let mut seg = *av;
        seg.dqp_dct = U32::new((remote_qpn & 0x00ff_ffff) | EXTENDED_UD_AV);
        seg.key = U64::new((qkey as u64) << 32);
        seg
    }

    /// Stores the segment into three consecutive 16-byte slots.
    #[inline(always)]
    pub fn write(&self, dst: &mut [u8; 48]) {
        *dst = zerocopy::transmute!(*self);
    }

    #[inline(always)]
    pub fn view(src: &[u8; 48]) -> &Self {
        zerocopy::transmute_ref!(src)
    }

    /// The UD Q_Key (upper half of the key field).
    pub const fn qkey(&self) -> u32 {
        (self.key.get() >> 32) as u32
    }

    /// Destination QP (UD) or DCT (DC) number.
    pub const fn dqpn(&self) -> u32 {
        self.dqp_dct.get() & 0x00ff_ffff
    }

    pub const fn is_extended(&self) -> bool {
        self.dqp_dct.get() & EXTENDED_UD_AV != 0
    }

    /// Whether a GRH is present (IB); reserved (0) for RoCE, where every packet has one.
    pub const fn grh(&self) -> bool {
        self.grh_gid_fl.get() & (1 << 30) != 0
    }

    pub const fn sgid_index(&self) -> u8 {
        (self.grh_gid_fl.get() >> 20) as u8
    }

    pub const fn flow_label(&self) -> u32 {
        self.grh_gid_fl.get() & 0x000f_ffff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_mlx5_wqe_av() {
        use core::mem::offset_of;
        assert_eq!(offset_of!(DatagramSeg, dqp_dct), 8);
        assert_eq!(offset_of!(DatagramSeg, stat_rate_sl), 12);
        assert_eq!(offset_of!(DatagramSeg, fl_mlid), 13);
        assert_eq!(offset_of!(DatagramSeg, rlid), 14);
        assert_eq!(offset_of!(DatagramSeg, rmac), 20);
        assert_eq!(offset_of!(DatagramSeg, tclass), 26);
        assert_eq!(offset_of!(DatagramSeg, hop_limit), 27);
        assert_eq!(offset_of!(DatagramSeg, grh_gid_fl), 28);
        assert_eq!(offset_of!(DatagramSeg, rgid), 32);
    }

    /// Hand-derived: a RoCE AV template, then the per-WR QPN and Q_Key.
    #[test]
    fn golden_for_ud() {
        let mut rgid = [0u8; 16];
        rgid[10] = 0xff;
        rgid[11] = 0xff;
        rgid[12..].copy_from_slice(&[127, 0, 0, 2]);
        let av = DatagramSeg::from_raw(
            0,
            0,
            0,
            0x02,
            0,
            0xc000,
            [2, 0, 0, 0, 0, 2],
            0,
            64,
            3 << 20,
            rgid,
        );
        let seg = DatagramSeg::for_ud(&av, 0x12_3456, 0x1111_1111);
        let mut out = [0u8; 48];
        seg.write(&mut out);
        #[rustfmt::skip]
        let expected: [u8; 48] = [
            0x11, 0x11, 0x11, 0x11, 0, 0, 0, 0,             // qkey, reserved
            0x80, 0x12, 0x34, 0x56,                         // ext | dqpn
            0x02, 0x00, 0xc0, 0x00,                         // stat_rate_sl, fl_mlid, rlid/sport
            0, 0, 0, 0,                                     // reserved
            2, 0, 0, 0, 0, 2, 0, 64,                        // rmac, tclass, hop_limit
            0x00, 0x30, 0x00, 0x00,                         // sgid index 3
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2,
        ];
        assert_eq!(out, expected);
        let v = DatagramSeg::view(&out);
        assert_eq!(
            (v.qkey(), v.dqpn(), v.is_extended(), v.grh(), v.sgid_index()),
            (0x1111_1111, 0x12_3456, true, false, 3)
        );
    }
}
