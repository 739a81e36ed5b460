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
    // SAFETY: the caller promises a mapped aligned register. Device memory is
    // written with a volatile store so the compiler neither drops nor splits it.
    unsafe { std::ptr::write_volatile(reg.cast::<u64>(), u64::from_ne_bytes(ctrl_first8)) };
    barrier::wc_flush();
}

/// A BlueFlame copy of `chunks` (64-byte WQE blocks, in order) to the register, in
/// address order: on x86-64 as 16-byte SSE stores (SSE2 is part of the x86-64
/// baseline; four stores a block instead of eight), elsewhere as 8-byte stores.
///
/// # Safety
/// `reg` must point at a mapped BlueFlame buffer of at least `64 * chunks.len()` bytes,
/// 16-byte aligned (a BlueFlame half is 256 or more bytes at a multiple of 256 inside
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

/// One 64-byte block to the register, as 16-byte stores.
///
/// # Safety
/// `dst` must be valid for 64 bytes of (volatile) writes and 16-byte aligned.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_block(dst: *mut u8, c: &[u8; 64]) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    let dst = dst.cast::<__m128i>();
    for i in 0..4 {
        // SAFETY: `c` holds 64 readable bytes (an unaligned load needs no alignment);
        // dst + i is inside the caller's 64 bytes and 16-byte aligned. Device memory is
        // written with volatile stores so the compiler neither drops, merges nor splits
        // them.
        unsafe {
            let v = _mm_loadu_si128(c.as_ptr().add(i * 16).cast());
            std::ptr::write_volatile(dst.add(i), v);
        }
    }
}

/// One 64-byte block to the register, as 8-byte stores.
///
/// # Safety
/// `dst` must be valid for 64 bytes of (volatile) writes and 8-byte aligned.
#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
unsafe fn copy_block(dst: *mut u8, c: &[u8; 64]) {
    let dst = dst.cast::<u64>();
    for i in 0..8 {
        let w = u64::from_ne_bytes(c[i * 8..i * 8 + 8].try_into().unwrap());
        // SAFETY: inside the caller's 64 bytes; volatile as above.
        unsafe { std::ptr::write_volatile(dst.add(i), w) };
    }
}
