//! The work queue context (`wq`) that SQs and RQs of Ethernet queues carry at their
//! end, followed by the page list of the queue's buffer (`pas`, read through the
//! inbox's tail).
//!
//! Kernel `include/linux/mlx5/mlx5_ifc.h`, `mlx5_ifc_wq_bits` (192 bytes: the
//! striding-RQ and SHAMPO fields of later kernels are left reserved here).

use crate::layout;

/// `wq.wq_type`.
pub mod wq_type {
    pub const LINKED_LIST: u8 = 0x0;
    pub const CYCLIC: u8 = 0x1;
}

layout! {
    /// A work queue: buffer geometry, doorbell record, owning PD and UAR.
    pub struct Wq = wq {
        wq_type: 0x4,
        wq_signature: 0x1,
        end_padding_mode: 0x2,
        cd_slave: 0x1,
        reserved_at_8: [0x18],
        hds_skip_first_sge: 0x1,
        log2_hds_buf_size: 0x3,
        reserved_at_24: [0x7],
        /// Offset of the buffer in its first page (in 64-byte units on a ConnectX-4+).
        page_offset: 0x5,
        lwm: 0x10,
        reserved_at_40: [0x8],
        pd: 0x18,
        reserved_at_60: [0x8],
        uar_page: 0x18,
        dbr_addr: 0x40,
        hw_counter: 0x20,
        sw_counter: 0x20,
        reserved_at_100: [0xc],
        /// log2 of the WQE stride in bytes.
        log_wq_stride: 0x4,
        reserved_at_110: [0x3],
        /// log2 of the buffer's page size, less 12.
        log_wq_pg_sz: 0x5,
        reserved_at_118: [0x3],
        /// log2 of the number of WQEs.
        log_wq_sz: 0x5,
        dbr_umem_valid: 0x1,
        wq_umem_valid: 0x1,
        reserved_at_122: [0x1e],
        dbr_umem_id: 0x20,
        wq_umem_id: 0x20,
        wq_umem_offset: 0x40,
        reserved_at_1c0: [0x440],
    }
}
