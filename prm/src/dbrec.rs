//! Doorbell records: the 8 bytes in host memory where software publishes its queue
//! counters and the device reads them (`MLX5_RCV_DBR`, `MLX5_SND_DBR`,
//! `MLX5_CQ_SET_CI`, `MLX5_CQ_ARM_DB` in mlx5dv.h). Both words are big-endian.
//!
//! A QP's record holds the receive queue head in word 0 and the send queue producer
//! counter (16 bits used) in word 1. A CQ's record holds the consumer index (24 bits)
//! in word 0 and the arm word ([`cq_arm_word`]) in word 1; the same arm word, with
//! the CQ number, is also written to the UAR's arm doorbell
//! ([`crate::uar::CQ_ARM_OFFSET`], [`cq_arm_doorbell`]).

/// Size of one doorbell record in bytes.
pub const DBREC_SIZE: usize = 8;

/// Word index of a QP record's receive counter (`MLX5_RCV_DBR`).
pub const RCV_DBR: usize = 0;
/// Word index of a QP record's send counter (`MLX5_SND_DBR`).
pub const SND_DBR: usize = 1;
/// Word index of a CQ record's consumer index (`MLX5_CQ_SET_CI`).
pub const CQ_SET_CI: usize = 0;
/// Word index of a CQ record's arm word (`MLX5_CQ_ARM_DB`).
pub const CQ_ARM_DB: usize = 1;

/// The consumer index bits of a CQ record's word 0 and of the arm word.
pub const CQ_CI_MASK: u32 = 0x00ff_ffff;
/// Arm command "next CQE" (`MLX5_CQ_DB_REQ_NOT`), bits 27:24 of the arm word.
pub const CQ_DB_REQ_NOT: u32 = 0;
/// Arm command "next solicited or error CQE" (`MLX5_CQ_DB_REQ_NOT_SOL`).
pub const CQ_DB_REQ_NOT_SOL: u32 = 1 << 24;

/// The arm word `sn[29:28] | cmd[27:24] | ci[23:0]`: arm sequence number (2 bits,
/// advanced by software per event taken), command, consumer index at arming.
#[inline(always)]
pub const fn cq_arm_word(sn: u32, solicited_only: bool, ci: u32) -> u32 {
    let cmd = if solicited_only { CQ_DB_REQ_NOT_SOL } else { CQ_DB_REQ_NOT };
    ((sn & 3) << 28) | cmd | (ci & CQ_CI_MASK)
}

/// The 8-byte value stored (big-endian) at the UAR arm doorbell: the arm word in
/// the upper half, the CQ number in the lower.
#[inline(always)]
pub const fn cq_arm_doorbell(arm_word: u32, cqn: u32) -> u64 {
    ((arm_word as u64) << 32) | cqn as u64
}

/// An arm word taken apart (the device's side).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqArm {
    pub sn: u8,
    pub solicited_only: bool,
    pub ci: u32,
}

impl CqArm {
    pub const fn decode(word: u32) -> CqArm {
        CqArm {
            sn: ((word >> 28) & 3) as u8,
            solicited_only: word & CQ_DB_REQ_NOT_SOL != 0,
            ci: word & CQ_CI_MASK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-derived from mlx5dv.h's arm sequence (`mlx5_arm_cq` in libmlx5: sn << 28 |
    /// cmd | ci, then `(u64)word << 32 | cqn` to the doorbell).
    #[test]
    fn arm_word_and_doorbell() {
        let w = cq_arm_word(2, true, 0x12_3456);
        assert_eq!(w, 0x2112_3456);
        assert_eq!(cq_arm_word(7, false, 0xffff_ffff), 0x30ff_ffff, "sn and ci are masked");
        assert_eq!(cq_arm_doorbell(w, 0x88), 0x2112_3456_0000_0088);
        assert_eq!(CqArm::decode(w), CqArm { sn: 2, solicited_only: true, ci: 0x12_3456 });
        assert_eq!(CqArm::decode(0x0000_0005), CqArm { sn: 0, solicited_only: false, ci: 5 });
    }
}
