//! The UAR page layout: where software rings the device.
//!
//! A UAR ("user access region") is a 4 KiB page of device registers. The CQ arm
//! doorbell is the 8 bytes at [`CQ_ARM_OFFSET`] (`MLX5_CQ_DOORBELL`); the BlueFlame
//! registers start at [`BF_OFFSET`], register `k` at `BF_OFFSET + k * bf_reg_size`
//! (0x800 and 0xA00 with the 512-byte `bf_reg_size` a ConnectX-5 reports), each used
//! as two alternating halves: an 8-byte doorbell (the control segment's first 8
//! bytes) or a whole small WQE copied in (a "BlueFlame copy").

/// Bytes of a UAR page (the mlx5 adapter page, independent of the host page size).
pub const UAR_SIZE: usize = 4096;
/// The CQ arm doorbell in a UAR page (`MLX5_CQ_DOORBELL`).
pub const CQ_ARM_OFFSET: usize = 0x20;
/// The first BlueFlame register in a UAR page.
pub const BF_OFFSET: usize = 0x800;
/// BlueFlame registers per 4 KiB UAR (libmlx5's NUM_BFREGS_PER_UAR): the numbering
/// `bfreg_index` uses.
pub const BFREGS_PER_UAR: u32 = 4;
/// Registers per UAR the kernel actually hands out (MLX5_NUM_NON_FP_BFREGS_PER_UAR).
pub const NON_FP_BFREGS_PER_UAR: u32 = 2;
/// What a send doorbell writes: the first 8 bytes of the WQE's control segment.
pub const DOORBELL_SIZE: usize = 8;
