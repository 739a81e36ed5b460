//! CREATE_XRC_SRQ / DESTROY_XRC_SRQ and the XRC SRQ context (`xrc_srqc`).
//!
//! The kernel's `include/linux/mlx5/mlx5_ifc.h` (`mlx5_ifc_xrc_srqc_bits`,
//! `mlx5_ifc_create_xrc_srq_in_bits`). An XRC SRQ is an SRQ (the same WQE list, the
//! same doorbell record, see [`super::srq`]) that belongs to an XRC domain (`xrcd`) and
//! completes on a CQ of its own (`cqn`), with its own `user_index` for the CQE (CQE
//! version 1): the receiving XRC target QP has neither a CQ nor an index libmlx5 knows.
//! XRC SRQ numbers share the SRQ number space. The buffer's page list follows the
//! inbox (`pas`, the tail).

use crate::layout;

layout! {
    /// The XRC SRQ context.
    pub struct XrcSrqc = xrc_srqc {
        state: 0x4,
        /// log2 of the number of WQEs.
        log_xrc_srq_size: 0x4,
        reserved_at_8: [0x18],
        wq_signature: 0x1,
        cont_srq: 0x1,
        reserved_at_22: [0x1],
        rlky: 0x1,
        basic_cyclic_rcv_wqe: 0x1,
        /// log2 of the WQE size in 16-byte units.
        log_rq_stride: 0x3,
        xrcd: 0x18,
        /// Offset of the buffer in its first page, in 64-byte units.
        page_offset: 0x6,
        reserved_at_46: [0x1],
        dbr_umem_valid: 0x1,
        cqn: 0x18,
        reserved_at_60: [0x20],
        user_index_equal_xrc_srqn: 0x1,
        reserved_at_81: [0x1],
        log_page_size: 0x6,
        user_index: 0x18,
        reserved_at_a0: [0x20],
        reserved_at_c0: [0x8],
        pd: 0x18,
        lwm: 0x10,
        wqe_cnt: 0x10,
        reserved_at_100: [0x40],
        /// The doorbell record's address (`db_record_addr_h`/`_l`, the low 2 bits
        /// reserved: the record is 4-byte aligned), as one 64-bit field.
        db_record_addr: 0x40,
        reserved_at_180: [0x80],
    }
}

layout! {
    /// CREATE_XRC_SRQ inbox.
    pub struct CreateXrcSrqIn = create_xrc_srq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        xrc_srq_context_entry: XrcSrqc,
        reserved_at_280: [0x60],
        xrc_srq_umem_valid: 0x1,
        reserved_at_2e1: [0x1f],
        reserved_at_300: [0x580],
    }
}

layout! {
    /// CREATE_XRC_SRQ outbox: the new SRQ number.
    pub struct CreateXrcSrqOut = create_xrc_srq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        xrc_srqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_XRC_SRQ inbox (the outbox is a plain [`MboxOut`](super::header::MboxOut)).
    pub struct DestroyXrcSrqIn = destroy_xrc_srq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        xrc_srqn: 0x18,
        reserved_at_60: [0x20],
    }
}
