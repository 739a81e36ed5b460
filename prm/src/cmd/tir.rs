//! CREATE_TIR / DESTROY_TIR and the transport interface receive context (`tirc`):
//! where steering delivers a frame. A direct TIR names one RQ (`inline_rqn`); an
//! indirect one hashes over an RQ table (not executed by softhca).
//!
//! Kernel `include/linux/mlx5/mlx5_ifc.h`: `mlx5_ifc_tirc_bits` (240 bytes; the hash
//! key and the two hash field selectors are kept as byte strings here),
//! `create_tir_in` (context at 0x100), `create_tir_out` (the ICM address bits of SW
//! steering around `tirn`).

use crate::layout;

/// `tirc.disp_type`.
pub mod disp_type {
    pub const DIRECT: u8 = 0x0;
    pub const INDIRECT: u8 = 0x1;
}

/// `tirc.self_lb_block` bits: drop what this function's own SQs send.
pub mod self_lb_block {
    pub const UNICAST: u8 = 0x1;
    pub const MULTICAST: u8 = 0x2;
}

layout! {
    /// The TIR context.
    pub struct Tirc = tirc {
        reserved_at_0: [0x20],
        disp_type: 0x4,
        tls_en: 0x1,
        reserved_at_25: [0x1b],
        reserved_at_40: [0x40],
        reserved_at_80: [0x4],
        lro_timeout_period_usecs: 0x10,
        lro_enable_mask: 0x4,
        lro_max_ip_payload_size: 0x8,
        reserved_at_a0: [0x40],
        reserved_at_e0: [0x8],
        inline_rqn: 0x18,
        rx_hash_symmetric: 0x1,
        reserved_at_101: [0x1],
        tunneled_offload_en: 0x1,
        reserved_at_103: [0x5],
        indirect_table: 0x18,
        rx_hash_fn: 0x4,
        reserved_at_124: [0x2],
        self_lb_block: 0x2,
        transport_domain: 0x18,
        rx_hash_toeplitz_key: [0x140],
        rx_hash_field_selector_outer: 0x20,
        rx_hash_field_selector_inner: 0x20,
        reserved_at_2c0: [0x4c0],
    }
}

layout! {
    /// CREATE_TIR inbox.
    pub struct CreateTirIn = create_tir_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0xc0],
        ctx: Tirc,
    }
}

layout! {
    /// CREATE_TIR outbox: the new TIR number.
    pub struct CreateTirOut = create_tir_out {
        status: 0x8,
        icm_address_63_40: 0x18,
        syndrome: 0x20,
        icm_address_39_32: 0x8,
        tirn: 0x18,
        icm_address_31_0: 0x20,
    }
}

layout! {
    /// DESTROY_TIR inbox.
    pub struct DestroyTirIn = destroy_tir_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        tirn: 0x18,
        reserved_at_60: [0x20],
    }
}
