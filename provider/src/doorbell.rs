//! Ringing the doorbell: the two-step hand-off of new work to the device.
//!
//! 1. the producer counter goes into the doorbell record in memory, big-endian, after
//!    a release fence so the WQEs it covers are visible first;
//! 2. the device is poked through its UAR register: either an 8-byte store of the
//!    first 8 bytes of the last WQE's control segment, or (BlueFlame) a copy of the
//!    whole WQE, which saves the device the trip to fetch it. Each BlueFlame register
//!    has two halves used alternately, so back-to-back copies never overlap.
//!
//! The record is what the device trusts (it is read again after a lost doorbell, and
//! it is what softhca watches); the register write is what makes a real NIC look now.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::barrier;
use crate::uar_regs::{self, Lane, LANES};

/// Publishes a 16-bit producer counter in a doorbell record word.
///
/// # Safety
/// `word` must point at a live, 4-byte-aligned doorbell record word.
#[inline(always)]
pub unsafe fn publish(word: *mut u32, counter: u32) {
    barrier::to_device();
    // SAFETY: the caller promises a live aligned word; the device reads it
    // concurrently, so the store is atomic (a plain `mov` on x86-64).
    unsafe { AtomicU32::from_ptr(word) }.store(counter.to_be(), Ordering::Release);
}

/// An 8-byte doorbell store: the first 8 bytes of the control segment
/// (opmod_idx_opcode and qpn_ds, already big-endian) to the register.
///
/// # Safety
/// `reg` must point at a mapped, 8-byte-aligned UAR register.
#[inline(always)]
pub unsafe fn ring_db(reg: *mut u8, ctrl_first8: [u8; 8]) {
    barrier::wc_start();
    // SAFETY: the caller promises a mapped aligned register; `WO::write` is one volatile
    // store, which the compiler neither drops nor splits.
    unsafe { uar_regs::doorbell(reg).word.write(u64::from_ne_bytes(ctrl_first8)) };
    barrier::wc_flush();
}

/// A BlueFlame copy of `chunks` (64-byte WQE blocks, in order) to the register, in
/// address order: on x86-64 as 16-byte SSE stores (SSE2 is part of the x86-64
/// baseline; four stores a block instead of eight), elsewhere as 8-byte stores.
///
/// # Safety
/// `reg` must point at a mapped BlueFlame buffer of at least `64 * chunks.len()` bytes,
/// 64-byte aligned (a BlueFlame half is 256 or more bytes at a multiple of 256 inside
/// the UAR page).
#[inline(always)]
pub unsafe fn ring_bf(reg: *mut u8, chunks: &[&[u8; 64]]) {
    barrier::wc_start();
    for (k, c) in chunks.iter().enumerate() {
        // SAFETY: block k lies inside the buffer the caller vouched for.
        unsafe { copy_block(reg.add(k * 64), c) };
    }
    barrier::wc_flush();
}

/// One 64-byte block to the register, as the lanes of a [`uar_regs::BfBlock`] (16-byte
/// stores on x86-64, 8-byte elsewhere), in address order.
///
/// # Safety
/// `dst` must be a 64-byte aligned block of a mapped BlueFlame buffer.
#[inline(always)]
unsafe fn copy_block(dst: *mut u8, c: &[u8; 64]) {
    // SAFETY: as the caller promises.
    let block = unsafe { uar_regs::block(dst) };
    let src = c.as_ptr().cast::<Lane>();
    for i in 0..LANES {
        // SAFETY: lane i of the 64 readable bytes of `c` (an unaligned read needs no
        // alignment; every bit pattern is a valid Lane), then one volatile store to the
        // matching register of the caller's block, which the compiler neither drops,
        // merges nor splits.
        unsafe { block.lanes[i].write(load_lane(src.add(i))) };
    }
}

/// One lane of a WQE block, from memory of any alignment.
///
/// # Safety
/// `p` must be valid for reading one `Lane`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn load_lane(p: *const Lane) -> Lane {
    // SAFETY: as the caller promises; `movdqu` needs no alignment.
    unsafe { std::arch::x86_64::_mm_loadu_si128(p) }
}

/// One lane of a WQE block, from memory of any alignment.
///
/// # Safety
/// `p` must be valid for reading one `Lane`.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn load_lane(p: *const Lane) -> Lane {
    // SAFETY: as the caller promises.
    unsafe { p.read_unaligned() }
}
