//! ALLOC_PD: a protection domain, answered by its 24-bit number.

use crate::layout;

layout! {
    /// ALLOC_PD inbox.
    pub struct AllocPdIn = alloc_pd_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// ALLOC_PD outbox: the PD number.
    pub struct AllocPdOut = alloc_pd_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        pd: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DEALLOC_PD inbox.
    pub struct DeallocPdIn = dealloc_pd_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        pd: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DEALLOC_PD outbox.
    pub struct DeallocPdOut = dealloc_pd_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}
