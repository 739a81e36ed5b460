//! ALLOC_XRCD / DEALLOC_XRCD: an XRC domain, answered by its 24-bit number.
//!
//! The kernel's `include/linux/mlx5/mlx5_ifc.h` (`mlx5_ifc_alloc_xrcd_in_bits` and
//! friends); the domain number goes into `qpc.xrcd` of an XRC target QP and
//! `xrc_srqc.xrcd` of an XRC SRQ, and a message reaches an XRC SRQ only through a
//! target QP of the same domain.

use crate::layout;

layout! {
    /// ALLOC_XRCD inbox.
    pub struct AllocXrcdIn = alloc_xrcd_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// ALLOC_XRCD outbox: the domain number.
    pub struct AllocXrcdOut = alloc_xrcd_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        xrcd: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DEALLOC_XRCD inbox (the outbox is a plain [`MboxOut`](super::header::MboxOut)).
    pub struct DeallocXrcdIn = dealloc_xrcd_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        xrcd: 0x18,
        reserved_at_60: [0x20],
    }
}
