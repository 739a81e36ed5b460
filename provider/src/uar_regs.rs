//! The UAR page as a typed register block: the registers the provider writes, at the
//! offsets of the `prm` crate's layout ([`prm::uar`]), each a write-only volatile cell
//! (`volatile_register::WO`), so that a doorbell is a `write` on a named field rather
//! than a store through an offset pointer.
//!
//! What this does not change: the ordering. A register write is one volatile store; the
//! fences around it (the write-combining start and flush of [`crate::barrier`]) stay in
//! [`crate::doorbell`], which is where a newcomer looks for them.

use std::mem::{offset_of, size_of};

use prm::uar::{BF_OFFSET, CQ_ARM_OFFSET, UAR_SIZE};
use volatile_register::WO;

/// The store a BlueFlame copy is made of: 16 bytes (SSE2, part of the x86-64 baseline:
/// four stores a block), 8 bytes elsewhere.
#[cfg(target_arch = "x86_64")]
pub type Lane = std::arch::x86_64::__m128i;
/// The store a BlueFlame copy is made of (8 bytes off x86-64).
#[cfg(not(target_arch = "x86_64"))]
pub type Lane = u64;
/// Stores per 64-byte block.
pub const LANES: usize = 64 / size_of::<Lane>();

/// One 64-byte block of a BlueFlame buffer, the unit of a BlueFlame copy, as the
/// stores that write it (in address order).
#[repr(C, align(64))]
pub struct BfBlock {
    /// The block's lanes.
    pub lanes: [WO<Lane>; LANES],
}

/// A BlueFlame register's first 8 bytes, where an 8-byte doorbell (the control
/// segment's first 8 bytes) goes.
#[repr(C, align(8))]
pub struct Doorbell {
    /// The doorbell word.
    pub word: WO<u64>,
}

/// The registers of one UAR page.
#[repr(C)]
pub struct UarRegs {
    _before_arm: [u8; CQ_ARM_OFFSET],
    /// The CQ arm doorbell (`MLX5_CQ_DOORBELL`): the arm word and CQ number, big-endian.
    pub cq_arm: WO<u64>,
    _before_bf: [u8; BF_OFFSET - CQ_ARM_OFFSET - 8],
    /// The BlueFlame area: register `k` starts at block `k * bf_reg_size / 64`, each
    /// register two alternating halves of `bf_reg_size / 2` bytes.
    pub bf: [BfBlock; (UAR_SIZE - BF_OFFSET) / 64],
}

// The layout is the PRM's: checked when the crate compiles.
const _: () = assert!(size_of::<UarRegs>() == UAR_SIZE);
const _: () = assert!(offset_of!(UarRegs, cq_arm) == CQ_ARM_OFFSET);
const _: () = assert!(offset_of!(UarRegs, bf) == BF_OFFSET);
const _: () = assert!(size_of::<BfBlock>() == 64);

impl UarRegs {
    /// The register block of the page mapped at `base`.
    ///
    /// # Safety
    /// `base` must be the start of a mapped, writable UAR page that stays mapped for `'a`.
    pub unsafe fn at<'a>(base: *mut u8) -> &'a UarRegs {
        // SAFETY: the caller vouches for a mapped page of UAR_SIZE bytes, page aligned
        // (so aligned for the block's 64 bytes); every field is a volatile cell or
        // padding, so a shared reference allows the writes through `WO::write`.
        unsafe { &*base.cast::<UarRegs>() }
    }
}

/// The doorbell word at `reg` (a BlueFlame register or half).
///
/// # Safety
/// `reg` must be a register of the BlueFlame area of a mapped UAR page, 8-byte aligned,
/// mapped for `'a`.
#[inline(always)]
pub unsafe fn doorbell<'a>(reg: *mut u8) -> &'a Doorbell {
    // SAFETY: as the caller promises; Doorbell is one 8-byte volatile cell.
    unsafe { &*reg.cast::<Doorbell>() }
}

/// The 64-byte BlueFlame block at `reg` (a register or a block inside one).
///
/// # Safety
/// `reg` must lie in the BlueFlame area of a mapped UAR page, 64-byte aligned, and stay
/// mapped for `'a`.
#[inline(always)]
pub unsafe fn block<'a>(reg: *mut u8) -> &'a BfBlock {
    // SAFETY: as the caller promises; BfBlock is 64 bytes of volatile cells.
    unsafe { &*reg.cast::<BfBlock>() }
}
