//! CREATE_SRQ / DESTROY_SRQ / QUERY_SRQ / ARM_RQ and the SRQ context (`srqc`).
//!
//! rdma-core's PRM copy has only the opcode; these follow the kernel's
//! `include/linux/mlx5/mlx5_ifc.h` (`mlx5_ifc_srqc_bits`, `mlx5_ifc_create_srq_in_bits`,
//! `mlx5_ifc_arm_rq_in_bits`). A device of ISSI 0 gets basic SRQs through these (mlx5_core's
//! `create_srq_cmd`), not through RMPs. The SRQ buffer's page list follows the inbox
//! (`pas`, the tail).
//!
//! An SRQ's WQEs form a list in its buffer: each starts with a 16-byte "next" segment
//! whose big-endian `next_wqe_index` (byte 2) names the WQE after it, then the scatter
//! entries. The doorbell record's word 0 counts the WQEs posted.

use crate::layout;

/// `srqc.state`.
pub mod state {
    pub const GOOD: u8 = 0x0;
    pub const ERROR: u8 = 0x1;
}

/// `arm_rq_in.op_mod` for an SRQ (`MLX5_ARM_RQ_IN_OP_MOD_SRQ`).
pub const ARM_RQ_OP_MOD_SRQ: u16 = 0x1;

layout! {
    /// The SRQ context.
    pub struct Srqc = srqc {
        state: 0x4,
        /// log2 of the number of WQEs.
        log_srq_size: 0x4,
        reserved_at_8: [0x18],
        wq_signature: 0x1,
        cont_srq: 0x1,
        reserved_at_22: [0x1],
        rlky: 0x1,
        reserved_at_24: [0x1],
        /// log2 of the WQE size in 16-byte units.
        log_rq_stride: 0x3,
        xrcd: 0x18,
        /// Offset of the buffer in its first page, in 64-byte units.
        page_offset: 0x6,
        reserved_at_46: [0x2],
        cqn: 0x18,
        reserved_at_60: [0x20],
        reserved_at_80: [0x2],
        log_page_size: 0x6,
        reserved_at_88: [0x18],
        reserved_at_a0: [0x20],
        reserved_at_c0: [0x8],
        pd: 0x18,
        /// The limit ("limit water mark"): an armed SRQ raises its limit event when
        /// fewer WQEs than this are left.
        lwm: 0x10,
        wqe_cnt: 0x10,
        reserved_at_100: [0x40],
        dbr_addr: 0x40,
        reserved_at_180: [0x80],
    }
}

layout! {
    /// CREATE_SRQ inbox.
    pub struct CreateSrqIn = create_srq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        srq_context_entry: Srqc,
        reserved_at_280: [0x600],
    }
}

layout! {
    /// CREATE_SRQ outbox: the new SRQ number.
    pub struct CreateSrqOut = create_srq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        srqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_SRQ inbox (the outbox is a plain [`MboxOut`](super::header::MboxOut)).
    pub struct DestroySrqIn = destroy_srq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        srqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// QUERY_SRQ inbox.
    pub struct QuerySrqIn = query_srq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        srqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// QUERY_SRQ outbox: the SRQ context as it is now (the page list would follow).
    pub struct QuerySrqOut = query_srq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
        srq_context_entry: Srqc,
        reserved_at_280: [0x600],
    }
}

layout! {
    /// ARM_RQ inbox: arms the limit event of SRQ `srq_number` at `lwm`.
    pub struct ArmRqIn = arm_rq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        srq_number: 0x18,
        reserved_at_60: [0x10],
        lwm: 0x10,
    }
}
