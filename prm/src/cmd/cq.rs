//! CREATE_CQ and the CQ context (`cqc`).
//!
//! rdma-core's PRM copy has no CQ layouts; these follow the kernel's
//! `include/linux/mlx5/mlx5_ifc.h` (`mlx5_ifc_cqc_bits`, `mlx5_ifc_create_cq_in_bits`),
//! with the bits newer firmware gave to APU and extended-element CQs kept reserved.
//! The CQ buffer's page list follows the inbox (`pas`, the tail) unless
//! `cq_umem_valid` names a UMEM.

use crate::layout;

/// `cqc.cqe_sz`.
pub mod cqe_sz {
    pub const BYTES_64: u8 = 0x0;
    pub const BYTES_128: u8 = 0x1;
}

layout! {
    /// The CQ context.
    pub struct Cqc = cqc {
        status: 0x4,
        reserved_at_4: [0x2],
        /// The doorbell record is in a UMEM (`dbr_umem_id`), not at `dbr_addr`.
        dbr_umem_valid: 0x1,
        reserved_at_7: [0x1],
        /// [`cqe_sz`].
        cqe_sz: 0x3,
        cc: 0x1,
        reserved_at_c: [0x1],
        scqe_break_moderation_en: 0x1,
        oi: 0x1,
        cq_period_mode: 0x2,
        cqe_comp_en: 0x1,
        mini_cqe_res_format: 0x2,
        st: 0x4,
        reserved_at_18: [0x8],
        dbr_umem_id: 0x20,
        reserved_at_40: [0x14],
        page_offset: 0x6,
        reserved_at_5a: [0x2],
        mini_cqe_res_format_ext: 0x2,
        cq_timestamp_format: 0x2,
        reserved_at_60: [0x3],
        /// log2 of the number of CQEs.
        log_cq_size: 0x5,
        /// The UAR page whose arm doorbell arms this CQ.
        uar_page: 0x18,
        reserved_at_80: [0x4],
        cq_period: 0xc,
        cq_max_count: 0x10,
        reserved_at_a0: [0x18],
        /// The EQ completion events go to (QUERY_EQN's answer).
        c_eqn: 0x8,
        reserved_at_c0: [0x3],
        /// log2 of the buffer's page size, in 4 KiB units.
        log_page_size: 0x5,
        reserved_at_c8: [0x18],
        reserved_at_e0: [0x20],
        reserved_at_100: [0x8],
        last_notified_index: 0x18,
        reserved_at_120: [0x8],
        last_solicit_index: 0x18,
        reserved_at_140: [0x8],
        consumer_counter: 0x18,
        reserved_at_160: [0x8],
        producer_counter: 0x18,
        reserved_at_180: [0x40],
        /// Address of the CQ's doorbell record.
        dbr_addr: 0x40,
    }
}

layout! {
    /// CREATE_CQ inbox.
    pub struct CreateCqIn = create_cq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        cq_context: Cqc,
        cq_umem_offset: 0x40,
        cq_umem_id: 0x20,
        cq_umem_valid: 0x1,
        reserved_at_2e1: [0x59f],
    }
}

layout! {
    /// CREATE_CQ outbox: the new CQ number.
    pub struct CreateCqOut = create_cq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        cqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_CQ inbox (the outbox is a plain [`MboxOut`](super::header::MboxOut)).
    pub struct DestroyCqIn = destroy_cq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x28],
        cqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// QUERY_CQ inbox.
    pub struct QueryCqIn = query_cq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        cqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// QUERY_CQ outbox: the CQ context as it is now (the page list would follow).
    pub struct QueryCqOut = query_cq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
        cq_context: Cqc,
        reserved_at_280: [0x600],
    }
}

/// MODIFY_CQ's `op_mod`.
pub mod modify_op {
    /// Change moderation (`cq_period`, `cq_max_count`) as `modify_field_select` says.
    pub const MODIFY: u16 = 0x0;
    /// Resize the CQ.
    pub const RESIZE: u16 = 0x1;
}

/// `modify_field_select` bits of MODIFY_CQ (`MLX5_CQ_MODIFY_*`).
pub mod modify_select {
    pub const PERIOD: u32 = 1 << 0;
    pub const COUNT: u32 = 1 << 1;
    pub const OVERRUN: u32 = 1 << 2;
    pub const PERIOD_MODE: u32 = 1 << 4;
}

layout! {
    /// MODIFY_CQ inbox.
    pub struct ModifyCqIn = modify_cq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        cqn: 0x18,
        /// [`modify_select`] bits (a resize's field select shares the word).
        modify_field_select: 0x20,
        cq_context: Cqc,
        reserved_at_280: [0x60],
        cq_umem_valid: 0x1,
        reserved_at_2e1: [0x1f],
        reserved_at_300: [0x580],
    }
}
