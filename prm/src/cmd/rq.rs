//! CREATE_RQ / MODIFY_RQ / DESTROY_RQ and the receive queue context (`rqc`): the
//! receive half of a raw Ethernet QP (mlx5_ib's `create_raw_packet_qp_rq`), fed by
//! the TIR that names it.
//!
//! Kernel `include/linux/mlx5/mlx5_ifc.h`: `mlx5_ifc_rqc_bits` (the [`Wq`] at 0x180),
//! `create_rq_in` (context at 0x100), `modify_rq_in` (`rq_state` the current state,
//! `rqn`, `modify_bitmask`, then the context whose `state` is the new one).

use super::wq::Wq;
use crate::layout;

/// `rqc.state` / `modify_rq_in.rq_state`.
pub mod state {
    pub const RST: u8 = 0x0;
    pub const RDY: u8 = 0x1;
    pub const ERR: u8 = 0x3;
}

/// `rqc.mem_rq_type`: WQEs in the RQ's own buffer (`MLX5_RQC_MEM_RQ_TYPE_MEMORY_RQ_INLINE`).
pub const MEM_RQ_TYPE_INLINE: u8 = 0x0;

layout! {
    /// The RQ context.
    pub struct Rqc = rqc {
        rlky: 0x1,
        delay_drop_en: 0x1,
        scatter_fcs: 0x1,
        vsd: 0x1,
        mem_rq_type: 0x4,
        state: 0x4,
        reserved_at_c: [0x1],
        flush_in_error_en: 0x1,
        hairpin: 0x1,
        reserved_at_f: [0x11],
        reserved_at_20: [0x8],
        user_index: 0x18,
        reserved_at_40: [0x8],
        cqn: 0x18,
        counter_set_id: 0x8,
        reserved_at_68: [0x18],
        reserved_at_80: [0x8],
        rmpn: 0x18,
        reserved_at_a0: [0x8],
        hairpin_peer_sq: 0x18,
        reserved_at_c0: [0x10],
        hairpin_peer_vhca: 0x10,
        reserved_at_e0: [0xa0],
        wq: Wq,
    }
}

layout! {
    /// CREATE_RQ inbox (the RQ buffer's page list follows).
    pub struct CreateRqIn = create_rq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0xc0],
        ctx: Rqc,
    }
}

layout! {
    /// CREATE_RQ outbox: the new RQ number.
    pub struct CreateRqOut = create_rq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        rqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// MODIFY_RQ inbox: from `rq_state` to `ctx.state`.
    pub struct ModifyRqIn = modify_rq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        rq_state: 0x4,
        reserved_at_44: [0x4],
        rqn: 0x18,
        reserved_at_60: [0x20],
        modify_bitmask: 0x40,
        reserved_at_c0: [0x40],
        ctx: Rqc,
    }
}

layout! {
    /// DESTROY_RQ inbox.
    pub struct DestroyRqIn = destroy_rq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        rqn: 0x18,
        reserved_at_60: [0x20],
    }
}
