//! CQE ownership: when a CQ entry belongs to software.
//!
//! The device writes the entries of lap `k` (consumer indices `k * ncqe ..
//! (k + 1) * ncqe`) with owner bit `k & 1`; software at consumer index `ci` expects
//! owner `!!(ci & ncqe)`. Entries start as `op_own = 0xF0` (INVALID opcode, owner 0)
//! so that nothing is mistaken for a CQE on lap 0 before the device writes it.
//!
//! Ordering: the poller reads `op_own` with [`load_op_own`] (a volatile load, since
//! the device writes it behind the compiler's back) and, once the entry is owned,
//! issues an acquire fence (`dma_rmb`) before reading any other field, so no field is
//! read from before the device's write of `op_own` became visible. The device
//! writes `op_own` last.

use core::ptr::NonNull;

use crate::opcode::CqeOpcode;

/// Bytes of a CQE (the 64-byte format; 128-byte CQEs hold it in their second half).
pub const CQE_SIZE: usize = 64;

/// `op_own` of a CQ entry the device has not written yet.
pub const CQE_INIT_OP_OWN: u8 = (CqeOpcode::Invalid as u8) << 4;

/// The owner bit software expects at consumer index `ci` on a CQ of `ncqe` entries
/// (`ncqe` a power of two).
#[inline(always)]
pub const fn sw_owner_bit(ci: u32, ncqe: u32) -> u8 {
    (ci & ncqe != 0) as u8
}

/// Whether the entry with this `op_own`, at consumer index `ci` of a CQ of `ncqe`
/// entries, holds a new CQE for software.
#[inline(always)]
pub const fn is_sw_owned(op_own: u8, ci: u32, ncqe: u32) -> bool {
    (op_own >> 4) != CqeOpcode::Invalid as u8 && (op_own & 1) == sw_owner_bit(ci, ncqe)
}

/// Reads the `op_own` byte (offset 63) of the 64-byte CQE at `cqe`.
///
/// # Safety
/// `cqe` must point to a live 64-byte CQE in the CQ buffer (valid for reads for the
/// duration of the call). The device may write it concurrently; the volatile read
/// returns either the old or the new byte.
#[inline(always)]
pub unsafe fn load_op_own(cqe: NonNull<[u8; CQE_SIZE]>) -> u8 {
    // SAFETY: the caller guarantees `cqe` is readable for 64 bytes; offset 63 is
    // inside; a u8 needs no alignment.
    unsafe { core::ptr::read_volatile(cqe.cast::<u8>().as_ptr().add(CQE_SIZE - 1)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NCQE: u32 = 4;

    /// The device's view: entry for counter `n` is written with owner `(n / ncqe) & 1`.
    fn hw_op_own(opcode: u8, n: u32) -> u8 {
        (opcode << 4) | ((n / NCQE) & 1) as u8
    }

    #[test]
    fn initial_entries_are_not_owned() {
        for ci in 0..NCQE {
            assert!(!is_sw_owned(CQE_INIT_OP_OWN, ci, NCQE));
        }
        assert_eq!(CQE_INIT_OP_OWN, 0xf0);
    }

    #[test]
    fn owner_bit_around_the_wrap() {
        assert_eq!(
            [0, 1, 2, 3, 4, 5, 7, 8, 12].map(|ci| sw_owner_bit(ci, NCQE)),
            [0, 0, 0, 0, 1, 1, 1, 0, 1]
        );
        // Counter wrap of the 32-bit consumer index (ncqe divides 2^32: parity holds).
        assert_eq!(sw_owner_bit(u32::MAX, NCQE), 1);
        assert_eq!(sw_owner_bit(u32::MAX.wrapping_add(1), NCQE), 0);
        // 24-bit consumer index as kept in the doorbell record.
        assert_eq!(sw_owner_bit(0xff_ffff, 1 << 10), 1);
    }

    #[test]
    fn entries_written_this_lap_are_owned_last_lap_not() {
        for ci in 0..(4 * NCQE) {
            // freshly written for this ci
            assert!(is_sw_owned(hw_op_own(0, ci), ci, NCQE), "ci {ci}");
            // the same slot still holding the previous lap's CQE
            if ci >= NCQE {
                assert!(!is_sw_owned(hw_op_own(0, ci - NCQE), ci, NCQE), "ci {ci}");
            }
            // an error CQE is a CQE too
            assert!(is_sw_owned(hw_op_own(0xd, ci), ci, NCQE));
            // INVALID is never owned, whatever the owner bit
            assert!(!is_sw_owned(hw_op_own(0xf, ci), ci, NCQE));
        }
    }

    #[test]
    fn load_reads_byte_63() {
        let mut e = [0u8; CQE_SIZE];
        e[63] = 0x21;
        // SAFETY: `e` is a live 64-byte buffer.
        assert_eq!(unsafe { load_op_own(NonNull::from(&e)) }, 0x21);
    }
}
