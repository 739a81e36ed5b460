//! The memory-ordering fences between the CPU and the device, written out.
//!
//! Three kinds of memory meet on the data path: ordinary memory the device reads or
//! writes (WQE rings, CQE rings, doorbell records), device registers mapped from a
//! UAR page (uncached or write-combining), and the CPU's view of both. Each helper
//! below names the ordering it provides and why the post/poll paths need it. On
//! x86-64 stores are not reordered with older stores and loads not with older loads,
//! so most of these are compiler fences; write-combining memory is the exception.

use std::sync::atomic::{compiler_fence, fence, Ordering};

// The instructions, per architecture, of rdma-core's util/udma_barrier.h, which the
// helpers below emit (x86-64 in Rust terms, aarch64 as written there).
//
// | macro                       | x86-64          | aarch64     |
// |-----------------------------|-----------------|-------------|
// | udma_to_device_barrier      | compiler only   | dmb oshst   |
// | udma_from_device_barrier    | lfence          | dmb oshld   |
// | mmio_flush_writes           | sfence          | dsb st      |
// | mmio_wc_start (= flush)     | sfence          | dsb st      |
//
// On aarch64 the device is an observer in the *outer* shareable domain, and the
// release/acquire fences Rust emits (`dmb ish`, `dmb ishld`) only order accesses for
// observers in the inner shareable domain (the other CPUs): a NIC could see the
// doorbell record before the WQE. `dmb osh*` extends the ordering to the device.
// A store to a UAR page (Device or Normal-NC memory, write-combining) is only sure to
// have left the CPU after a `dsb`, which waits for completion, not just order; that is
// what both doorbell fences need (the record in memory before the register store, the
// register store gone before the next one). On x86-64 from_device keeps the acquire
// fence (no instruction) rather than rdma-core's lfence: WB loads are not reordered
// with older loads there, and the CQE ring is WB memory.

/// rdma-core's aarch64 instructions (see the table above); `tests/barrier_asm.rs`
/// checks that the compiled fences contain them.
#[cfg(target_arch = "aarch64")]
mod aarch64 {
    macro_rules! to_device { () => { "dmb oshst" } }
    macro_rules! from_device { () => { "dmb oshld" } }
    macro_rules! wc_flush { () => { "dsb st" } }
    pub(super) use {from_device, to_device, wc_flush};
}


/// Before publishing a producer counter in a doorbell record: every WQE (or receive
/// WQE) store must be visible to the device before the counter that says it exists.
/// (rdma-core calls this `udma_to_device_barrier`.) A release fence orders the earlier
/// plain stores before the later counter store for a device that is another CPU
/// thread (softhca); on x86-64 it compiles to nothing but keeps the compiler honest.
///
/// On aarch64 also `dmb oshst` (stores before it reach the device's view before stores
/// after it); the release fence stays for the Rust memory model, which softhca's
/// acquire loads pair with.
#[inline(always)]
pub fn to_device() {
    fence(Ordering::Release);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction; it accesses no memory and only orders accesses
    // (the asm is not `nomem`, so the compiler treats it as touching memory too).
    unsafe {
        std::arch::asm!(aarch64::to_device!(), options(nostack, preserves_flags))
    };
}

/// After seeing a CQE owned by software and before reading the rest of it: the
/// device wrote the CQE body before flipping the owner byte, so no later load may be
/// satisfied before the owner-byte load (`udma_from_device_barrier`). An acquire fence
/// provides exactly that against a device thread; x86 needs no instruction.
///
/// On aarch64 also `dmb oshld`, which orders the owner-byte load before later loads
/// with respect to the device's writes (the acquire fence alone covers other CPUs).
#[inline(always)]
pub fn from_device() {
    fence(Ordering::Acquire);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as in `to_device`.
    unsafe {
        std::arch::asm!(aarch64::from_device!(), options(nostack, preserves_flags))
    };
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
/// before every later one, and drains the WC buffers); `dsb st` on aarch64 (waits
/// until every earlier store has completed, to memory and to device registers alike).
/// Elsewhere a sequentially consistent fence, which orders CPU memory but is not
/// rdma-core's instruction for that architecture (ppc64 `sync`, riscv `fence ow,ow`):
/// not a supported target. The two doorbell barriers above are this one instruction
/// with different jobs, kept apart by name as rdma-core keeps `mmio_wc_start` and
/// `mmio_flush_writes`.
#[inline(always)]
fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence has no preconditions; it only orders stores.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction (as in `to_device`).
    unsafe {
        std::arch::asm!(aarch64::wc_flush!(), options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}

/// Keeps the compiler from moving ring stores across a point where only program
/// order matters (no other observer yet).
#[inline(always)]
pub fn compiler_only() {
    compiler_fence(Ordering::SeqCst);
}

