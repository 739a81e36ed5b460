//! The memory-ordering fences between the CPU and the device, written out.
//!
//! Three kinds of memory meet on the data path: ordinary memory the device reads or
//! writes (WQE rings, CQE rings, doorbell records), device registers mapped from a
//! UAR page (uncached or write-combining), and the CPU's view of both. Each helper
//! below names the ordering it provides and why the post/poll paths need it. On
//! x86-64 stores are not reordered with older stores and loads not with older loads,
//! so most of these are compiler fences; write-combining memory is the exception.

use std::sync::atomic::{compiler_fence, fence, Ordering};

/// Before publishing a producer counter in a doorbell record: every WQE (or receive
/// WQE) store must be visible to the device before the counter that says it exists.
/// (rdma-core calls this `udma_to_device_barrier`.) A release fence orders the earlier
/// plain stores before the later counter store for a device that is another CPU
/// thread (softhca); on x86-64 it compiles to nothing but keeps the compiler honest.
#[inline(always)]
pub fn to_device() {
    fence(Ordering::Release);
}

/// After seeing a CQE owned by software and before reading the rest of it: the
/// device wrote the CQE body before flipping the owner byte, so no later load may be
/// satisfied before the owner-byte load (`udma_from_device_barrier`). An acquire fence
/// provides exactly that against a device thread; x86 needs no instruction.
#[inline(always)]
pub fn from_device() {
    fence(Ordering::Acquire);
}

/// Before a store to a write-combining UAR (the BlueFlame doorbell): earlier stores
/// to ordinary memory (the doorbell record) must not be overtaken by the WC store,
/// which x86 does not promise for WC memory, hence `sfence` (`mmio_wc_start`).
#[inline(always)]
pub fn wc_start() {
    store_fence();
}

/// After the doorbell store(s): drain the write-combining buffer so the device sees
/// the doorbell now, not whenever the buffer happens to be evicted, and so that the
/// next doorbell cannot be merged with or reordered before this one
/// (`mmio_flush_writes`).
#[inline(always)]
pub fn wc_flush() {
    store_fence();
}

/// `sfence` on x86-64 (orders every earlier store, write-combining ones included,
/// before every later one, and drains the WC buffers); a full fence elsewhere. The
/// two doorbell barriers above are this one instruction with different jobs, kept
/// apart by name as rdma-core keeps `mmio_wc_start` and `mmio_flush_writes`.
#[inline(always)]
fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions; it only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    fence(Ordering::SeqCst);
}

/// Keeps the compiler from moving ring stores across a point where only program
/// order matters (no other observer yet).
#[inline(always)]
pub fn compiler_only() {
    compiler_fence(Ordering::SeqCst);
}
