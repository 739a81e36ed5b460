//! The 16-byte data (scatter/gather pointer) segment, used by send WQEs (gather) and
//! receive WQEs (scatter).
//!
//! Layout (big-endian, `struct mlx5_wqe_data_seg`): bytes 0..4 byte count, 4..8
//! lkey, 8..16 virtual address. A receive WQE with fewer entries than its slots
//! ends its list with [`DataSeg::terminator`] (lkey [`INVALID_LKEY`]). A byte count
//! of 0 in a gather entry means 2 GiB ([`DataSeg::length`]), as the PRM defines it.

use zerocopy::byteorder::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The lkey that ends a receive WQE's scatter list (`MLX5_INVALID_LKEY`).
pub const INVALID_LKEY: u32 = 0x100;

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
pub struct DataSeg {
    pub byte_count: U32,
    pub lkey: U32,
    pub addr: U64,
}

const _: () = assert!(core::mem::size_of::<DataSeg>() == 16);

impl DataSeg {
    #[inline(always)]
    pub const fn new(byte_count: u32, lkey: u32, addr: u64) -> Self {
        Self {
            byte_count: U32::new(byte_count),
            lkey: U32::new(lkey),
            addr: U64::new(addr),
        }
    }

    /// The entry that ends a short receive scatter list: byte count 0, lkey
    /// [`INVALID_LKEY`], address 0.
    #[inline(always)]
    pub const fn terminator() -> Self {
        Self::new(0, INVALID_LKEY, 0)
    }

    /// Stores the segment into its 16-byte slot.
    #[inline(always)]
    pub fn write(&self, slot: &mut [u8; 16]) {
        *slot = zerocopy::transmute!(*self);
    }

    #[inline(always)]
    pub fn view(slot: &[u8; 16]) -> &Self {
        zerocopy::transmute_ref!(slot)
    }

    pub const fn byte_count(&self) -> u32 {
        self.byte_count.get()
    }

    pub const fn lkey(&self) -> u32 {
        self.lkey.get()
    }

    pub const fn addr(&self) -> u64 {
        self.addr.get()
    }

    /// The length the device acts on: the byte count, where 0 means 2^31 bytes.
    #[inline(always)]
    pub const fn length(&self) -> u64 {
        match self.byte_count.get() {
            0 => 1 << 31,
            n => n as u64,
        }
    }

    /// Whether this entry ends a receive scatter list.
    pub const fn is_terminator(&self) -> bool {
        self.lkey.get() == INVALID_LKEY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let mut slot = [0u8; 16];
        DataSeg::new(0x0001_0000, 0xffff_ffff, 0x7fff_1234_5678_9abc).write(&mut slot);
        assert_eq!(
            slot,
            [
                0x00, 0x01, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0x12, 0x34, 0x56, 0x78,
                0x9a, 0xbc
            ]
        );
        let v = DataSeg::view(&slot);
        assert_eq!(
            (v.byte_count(), v.lkey(), v.addr()),
            (0x10000, 0xffff_ffff, 0x7fff_1234_5678_9abc)
        );
        DataSeg::terminator().write(&mut slot);
        assert_eq!(slot, [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(DataSeg::view(&slot).is_terminator());
        assert_eq!(DataSeg::view(&slot).length(), 1 << 31, "a byte count of 0 is 2 GiB");
    }
}
