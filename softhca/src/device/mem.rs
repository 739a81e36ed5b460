//! Raw access to application memory: the one place the device half dereferences user
//! addresses.
//!
//! What the device touches, and why raw pointers are sound there:
//! - **Doorbell records, QP buffers (SQ/RQ) and CQ buffers** were given at CREATE_QP /
//!   CREATE_CQ, checked mapped (and writable where the HCA writes) by the kernel half's
//!   `pin`, and the application promises to keep them until DESTROY returns. DESTROY
//!   calls the device's destroy hook, which takes the engine lock, so no access is in
//!   flight once the hook returns (see `super::Device`).
//! - **MR memory** was checked mapped at REG_MR and the application promises to keep it
//!   until DEREG_MR (ibverbs' rule for `ibv_reg_mr`; the provider's public registrations
//!   keep that promise by owning or borrowing the memory for as long as the MR lives,
//!   its one raw registration being private to it); the deregistration hook takes the
//!   engine lock the same way, and every access re-resolves the key under that lock, so
//!   a deregistered key is never used.
//!   Only host MRs come here: a peer MR's addresses are device addresses, which the key
//!   check marks as such (`Loc::Peer`) and `super::mkey` hands to the MR's
//!   `PeerMemory` instead.
//! - **Staging buffers** of a QP (`super::stage`), which the transmit path refers to like
//!   MR memory until the step's flush.
//!
//! The application writes some of this memory concurrently (doorbell records, the CQ
//! consumer index, WQEs of later work requests), so the counters are read with atomic
//! loads and everything else with volatile or `copy_nonoverlapping` copies of ranges the
//! verbs contract forbids it to change meanwhile (a posted WQE, a buffer under DMA).
//! Memory ordering with the application is written out at each function.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

/// Reads a big-endian 32-bit counter the application publishes with a release store
/// (a doorbell record word). The acquire load pairs with that release: everything the
/// application wrote before publishing (the WQEs) is visible to reads after this one.
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside a doorbell page given at create time
/// of a live object (see the module docs).
#[inline]
pub unsafe fn load_be32_acquire(addr: u64) -> u32 {
    // SAFETY: the caller guarantees a live, aligned word; an atomic view tolerates the
    // application's concurrent stores.
    u32::from_be(unsafe { AtomicU32::from_ptr(addr as *mut u32) }.load(Ordering::Acquire))
}

/// Copies `out.len()` bytes from `addr`.
///
/// # Safety
/// `[addr, addr + out.len())` must be mapped and readable: inside a buffer given at create
/// time of a live object, or inside a registered MR whose key was just checked under the
/// engine lock (see the module docs).
#[inline]
pub unsafe fn read(addr: u64, out: &mut [u8]) {
    if out.is_empty() {
        return;
    }
    // SAFETY: readable per the caller; `out` is our own buffer and cannot overlap
    // application memory the caller vouched for.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) }
}

/// The bytes at `[addr, addr + len)` as a slice, for reads that must not copy (the ICRC
/// and the kernel's copy of a transmitted payload; see `super::tx`).
///
/// # Safety
/// As for [`read`], and for as long as the slice is used: the range must stay mapped
/// (its MR registered, the engine lock held). The verbs contract forbids the application
/// to write a buffer under a posted send or an answered READ until its completion; one
/// that does anyway races with the device as it would with a real HCA's DMA (the packet
/// carries a mix of old and new bytes), the slice is only ever read byte-wise, and no
/// Rust code draws conclusions from its contents beyond hashing and sending them.
#[inline]
pub unsafe fn slice<'a>(addr: u64, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: mapped and readable for the slice's lifetime, per the caller.
    unsafe { std::slice::from_raw_parts(addr as *const u8, len) }
}

/// Copies `data` to `addr`.
///
/// # Safety
/// `[addr, addr + data.len())` must be mapped and writable: inside a CQ buffer of a live
/// CQ, or a registered MR whose key was just checked for write access under the engine
/// lock.
#[inline]
pub unsafe fn write(addr: u64, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    // SAFETY: writable per the caller; the source is our own buffer.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) }
}

/// Stores one byte with release ordering: every store this thread made before (the
/// rest of a CQE) becomes visible to a reader that sees this byte and then issues an
/// acquire fence (the poller's `udma_from_device_barrier`).
///
/// # Safety
/// `addr` must be inside a CQ buffer of a live CQ.
#[inline]
pub unsafe fn store_u8_release(addr: u64, v: u8) {
    // SAFETY: per the caller; a u8 atomic needs no alignment.
    unsafe { AtomicU8::from_ptr(addr as *mut u8) }.store(v, Ordering::Release)
}

/// Atomically applies compare-and-swap (`Some(compare)`) or fetch-and-add (`None`) to the
/// 8-byte host-order word at `addr`, returning the original value.
///
/// # Safety
/// `addr` must be 8-byte aligned and inside a registered MR whose key was just checked
/// for atomic access under the engine lock.
#[inline]
pub unsafe fn atomic_u64(addr: u64, compare: Option<u64>, swap_or_add: u64) -> u64 {
    // SAFETY: aligned and live per the caller; the CPU may access the word concurrently,
    // so this is a real atomic RMW, as a PCIe atomic would be.
    let a = unsafe { AtomicU64::from_ptr(addr as *mut u64) };
    match compare {
        Some(c) => match a.compare_exchange(c, swap_or_add, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(v) | Err(v) => v,
        },
        None => a.fetch_add(swap_or_add, Ordering::SeqCst),
    }
}

/// Takes the command out of a mailbox word the application writes (a CQ doorbell
/// record's arm word, see `super::events`): if the word is not `taken`, atomically
/// replaces it with `taken` and returns what it held (big-endian, converted). The
/// application's next store of any value, even the same one, is then a change the next
/// call sees: every store is taken once, none twice. `taken` must read the same in both
/// byte orders or be given as stored.
///
/// The load first keeps the common case (nothing new) a read: the word shares a cache
/// line with the consumer index the application writes on every poll. The swap is
/// acquire-release: it pairs with the application's release store of the word (what it
/// wrote before, the consumer index, is visible after it).
///
/// # Safety
/// `addr` must be a 4-byte aligned, writable word of a doorbell record of a live object
/// (see the module docs).
#[inline]
pub unsafe fn take_u32(addr: u64, taken: u32) -> Option<u32> {
    // SAFETY: aligned and live per the caller; the application stores to it concurrently
    // (plain aligned 32-bit stores, atomic on every CPU softhca runs on), which an
    // atomic view tolerates.
    let a = unsafe { AtomicU32::from_ptr(addr as *mut u32) };
    if a.load(Ordering::Acquire) == taken {
        return None;
    }
    let old = a.swap(taken, Ordering::AcqRel);
    (old != taken).then(|| u32::from_be(old))
}
