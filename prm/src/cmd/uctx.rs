//! CREATE_UCTX / DESTROY_UCTX: a DevX user context, the `uid` every command of one
//! uverbs context carries (mlx5_ib creates one per context opened with DevX).
//!
//! rdma-core's PRM copy has no UCTX layouts; these follow the kernel's
//! `include/linux/mlx5/mlx5_ifc.h` (`mlx5_ifc_uctx_bits`, `mlx5_ifc_create_uctx_in_bits`).

use crate::layout;

/// `uctx.cap` bits (`MLX5_UCTX_CAP_*`).
pub mod cap {
    pub const RAW_TX: u32 = 1 << 0;
    pub const INTERNAL_DEV_RES: u32 = 1 << 1;
}

layout! {
    /// The user context.
    pub struct Uctx = uctx {
        /// [`cap`] bits the context may use.
        cap: 0x20,
        reserved_at_20: [0x160],
    }
}

layout! {
    /// CREATE_UCTX inbox (its own `uid` field is reserved: the command has none yet).
    pub struct CreateUctxIn = create_uctx_in {
        opcode: 0x10,
        reserved_at_10: [0x10],
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        uctx: Uctx,
    }
}

layout! {
    /// CREATE_UCTX outbox: the new uid.
    pub struct CreateUctxOut = create_uctx_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x10],
        uid: 0x10,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_UCTX inbox: the uid goes in the body, not the header.
    pub struct DestroyUctxIn = destroy_uctx_in {
        opcode: 0x10,
        reserved_at_10: [0x10],
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x10],
        uid: 0x10,
        reserved_at_60: [0x20],
    }
}
