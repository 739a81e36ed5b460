//! CREATE_SQ / MODIFY_SQ / DESTROY_SQ and the send queue context (`sqc`): the send
//! half of a raw Ethernet QP (mlx5_ib's `create_raw_packet_qp_sq`), sending through
//! the TIS it names.
//!
//! Kernel `include/linux/mlx5/mlx5_ifc.h`: `mlx5_ifc_sqc_bits` (the [`Wq`] at 0x180),
//! `create_sq_in` (context at 0x100), `modify_sq_in` (`sq_state` the current state,
//! `sqn`, `modify_bitmask`, then the context whose `state` is the new one).

use super::wq::Wq;
use crate::layout;

/// `sqc.state` / `modify_sq_in.sq_state`.
pub mod state {
    pub const RST: u8 = 0x0;
    pub const RDY: u8 = 0x1;
    pub const ERR: u8 = 0x3;
}

layout! {
    /// The SQ context.
    pub struct Sqc = sqc {
        rlky: 0x1,
        cd_master: 0x1,
        fre: 0x1,
        flush_in_error_en: 0x1,
        allow_multi_pkt_send_wqe: 0x1,
        min_wqe_inline_mode: 0x3,
        state: 0x4,
        reg_umr: 0x1,
        allow_swp: 0x1,
        hairpin: 0x1,
        reserved_at_f: [0x11],
        reserved_at_20: [0x8],
        user_index: 0x18,
        reserved_at_40: [0x8],
        cqn: 0x18,
        reserved_at_60: [0x8],
        hairpin_peer_rq: 0x18,
        reserved_at_80: [0x10],
        hairpin_peer_vhca: 0x10,
        reserved_at_a0: [0x50],
        packet_pacing_rate_limit_index: 0x10,
        tis_lst_sz: 0x10,
        reserved_at_110: [0x10],
        reserved_at_120: [0x40],
        reserved_at_160: [0x8],
        tis_num_0: 0x18,
        wq: Wq,
    }
}

layout! {
    /// CREATE_SQ inbox (the SQ buffer's page list follows).
    pub struct CreateSqIn = create_sq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0xc0],
        ctx: Sqc,
    }
}

layout! {
    /// CREATE_SQ outbox: the new SQ number.
    pub struct CreateSqOut = create_sq_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        sqn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// MODIFY_SQ inbox: from `sq_state` to `ctx.state`.
    pub struct ModifySqIn = modify_sq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        sq_state: 0x4,
        reserved_at_44: [0x4],
        sqn: 0x18,
        reserved_at_60: [0x20],
        modify_bitmask: 0x40,
        reserved_at_c0: [0x40],
        ctx: Sqc,
    }
}

layout! {
    /// DESTROY_SQ inbox (a plain [`MboxOut`](super::header::MboxOut) answers).
    pub struct DestroySqIn = destroy_sq_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        sqn: 0x18,
        reserved_at_60: [0x20],
    }
}
