//! ALLOC_UAR / DEALLOC_UAR: a UAR page (doorbells, BlueFlame, CQ arm; see
//! [`crate::uar`]) for a DevX context, answered by its page index.

use crate::layout;

layout! {
    /// ALLOC_UAR inbox.
    pub struct AllocUarIn = alloc_uar_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// ALLOC_UAR outbox: the UAR page index.
    pub struct AllocUarOut = alloc_uar_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        uar: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DEALLOC_UAR inbox.
    pub struct DeallocUarIn = dealloc_uar_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        uar: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DEALLOC_UAR outbox.
    pub struct DeallocUarOut = dealloc_uar_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}
