//! The 16-byte remote-address segment of RDMA READ/WRITE and atomic WQEs.
//!
//! Layout (big-endian, `struct mlx5_wqe_raddr_seg`): bytes 0..8 remote virtual
//! address, 8..12 rkey, 12..16 reserved (written as zero).

use zerocopy::byteorder::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

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
pub struct RaddrSeg {
    pub raddr: U64,
    pub rkey: U32,
    pub reserved: U32,
}

const _: () = assert!(core::mem::size_of::<RaddrSeg>() == 16);

impl RaddrSeg {
    #[inline(always)]
    pub const fn new(raddr: u64, rkey: u32) -> Self {
        Self {
            raddr: U64::new(raddr),
            rkey: U32::new(rkey),
            reserved: U32::ZERO,
        }
    }

    /// Stores the segment into its 16-byte slot of the send queue.
    #[inline(always)]
    pub fn write(&self, slot: &mut [u8; 16]) {
        *slot = zerocopy::transmute!(*self);
    }

    #[inline(always)]
    pub fn view(slot: &[u8; 16]) -> &Self {
        zerocopy::transmute_ref!(slot)
    }

    pub const fn raddr(&self) -> u64 {
        self.raddr.get()
    }

    pub const fn rkey(&self) -> u32 {
        self.rkey.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-derived from the layout: raddr big-endian, rkey big-endian, zero pad.
    #[test]
    fn golden() {
        let mut slot = [0xeeu8; 16];
        RaddrSeg::new(0x0123_4567_89ab_cdef, 0xfedc_ba98).write(&mut slot);
        assert_eq!(
            slot,
            [0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0, 0, 0, 0]
        );
        let v = RaddrSeg::view(&slot);
        assert_eq!(v.raddr(), 0x0123_4567_89ab_cdef);
        assert_eq!(v.rkey(), 0xfedc_ba98);

        RaddrSeg::new(u64::MAX, u32::MAX).write(&mut slot);
        assert_eq!(
            slot,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]
        );
    }
}
