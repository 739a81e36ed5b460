//! The 16-byte XRC segment of an XRC initiator's send WQEs.
//!
//! Layout (big-endian, `struct mlx5_wqe_xrc_seg` in `<infiniband/mlx5dv.h>`): bytes 0..4
//! `xrc_srqn` (the remote XRC SRQ number, 24 bits used), 4..16 reserved. libmlx5's
//! `mlx5_post_send` puts it right after the control segment of every WQE of an
//! `IBV_QPT_XRC_SEND` QP (before a remote-address segment and the data), from
//! `wr->qp_type.xrc.remote_srqn`; the device carries the number in the packets' XRCETH.

use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The XRC segment, byte-for-byte.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
pub struct XrcSeg {
    pub xrc_srqn: U32,
    pub reserved: [u8; 12],
}

const _: () = assert!(core::mem::size_of::<XrcSeg>() == 16);

impl XrcSeg {
    /// The segment naming remote XRC SRQ `srqn` (written as given, as libmlx5 does).
    pub const fn new(srqn: u32) -> Self {
        Self { xrc_srqn: U32::new(srqn), reserved: [0; 12] }
    }

    #[inline(always)]
    pub fn write(&self, dst: &mut [u8; 16]) {
        *dst = zerocopy::transmute!(*self);
    }

    #[inline(always)]
    pub fn view(src: &[u8; 16]) -> &Self {
        zerocopy::transmute_ref!(src)
    }

    /// The XRC SRQ number (its 24 bits).
    pub const fn srqn(&self) -> u32 {
        self.xrc_srqn.get() & 0x00ff_ffff
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes libmlx5 writes for `remote_srqn` 0x123456: `htobe32` then 12 zero bytes.
    #[test]
    fn golden_bytes() {
        let mut b = [0xffu8; 16];
        XrcSeg::new(0x12_3456).write(&mut b);
        assert_eq!(b, [0x00, 0x12, 0x34, 0x56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(XrcSeg::view(&[0xab, 0x00, 0x00, 0x07, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).srqn(), 7);
    }
}
