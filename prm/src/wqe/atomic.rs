//! The 16-byte atomic segment that follows the remote-address segment of an
//! 8-byte compare-and-swap or fetch-and-add WQE.
//!
//! Layout (big-endian, `struct mlx5_wqe_atomic_seg`): bytes 0..8 `swap_add` (the
//! swap value for compare-and-swap, the addend for fetch-and-add), 8..16 `compare`.
//! The device writes the original remote value (8 bytes) to the WQE's single data
//! segment, whose byte count is 8.

use zerocopy::byteorder::big_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// Operand size of the plain atomics; also the byte count of their data segment.
pub const ATOMIC_SIZE: u32 = 8;

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
pub struct AtomicSeg {
    pub swap_add: U64,
    pub compare: U64,
}

const _: () = assert!(core::mem::size_of::<AtomicSeg>() == 16);

impl AtomicSeg {
    /// Compare-and-swap: if the remote value equals `compare`, store `swap`.
    #[inline(always)]
    pub const fn compare_swap(compare: u64, swap: u64) -> Self {
        Self {
            swap_add: U64::new(swap),
            compare: U64::new(compare),
        }
    }

    /// Fetch-and-add of `add`. `compare` is unused by the device and written as zero
    /// (libmlx5 leaves whatever the slot held before).
    #[inline(always)]
    pub const fn fetch_add(add: u64) -> Self {
        Self {
            swap_add: U64::new(add),
            compare: U64::ZERO,
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

    pub const fn swap_add(&self) -> u64 {
        self.swap_add.get()
    }

    pub const fn compare(&self) -> u64 {
        self.compare.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-derived: swap_add first, then compare, both big-endian.
    #[test]
    fn golden_compare_swap() {
        let mut slot = [0u8; 16];
        AtomicSeg::compare_swap(0x1122_3344_5566_7788, 0x99aa_bbcc_ddee_ff00).write(&mut slot);
        assert_eq!(
            slot,
            [
                0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x00, // swap
                0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // compare
            ]
        );
        let v = AtomicSeg::view(&slot);
        assert_eq!(v.swap_add(), 0x99aa_bbcc_ddee_ff00);
        assert_eq!(v.compare(), 0x1122_3344_5566_7788);
    }

    #[test]
    fn golden_fetch_add() {
        let mut slot = [0xffu8; 16];
        AtomicSeg::fetch_add(1).write(&mut slot);
        assert_eq!(slot, [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    }
}
