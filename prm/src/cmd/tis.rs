//! CREATE_TIS / DESTROY_TIS and the transport interface send context (`tisc`): what
//! an Ethernet SQ sends through (priority, transport domain).
//!
//! Kernel `include/linux/mlx5/mlx5_ifc.h`: `mlx5_ifc_tisc_bits` (160 bytes),
//! `create_tis_in` (context at 0x100).

use crate::layout;

layout! {
    /// The TIS context.
    pub struct Tisc = tisc {
        strict_lag_tx_port_affinity: 0x1,
        tls_en: 0x1,
        reserved_at_2: [0x2],
        lag_tx_port_affinity: 0x4,
        reserved_at_8: [0x4],
        prio: 0x4,
        reserved_at_10: [0x10],
        reserved_at_20: [0x100],
        reserved_at_120: [0x8],
        transport_domain: 0x18,
        reserved_at_140: [0x8],
        underlay_qpn: 0x18,
        reserved_at_160: [0x8],
        pd: 0x18,
        reserved_at_180: [0x380],
    }
}

layout! {
    /// CREATE_TIS inbox.
    pub struct CreateTisIn = create_tis_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0xc0],
        ctx: Tisc,
    }
}

layout! {
    /// CREATE_TIS outbox: the new TIS number.
    pub struct CreateTisOut = create_tis_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        tisn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_TIS inbox.
    pub struct DestroyTisIn = destroy_tis_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        tisn: 0x18,
        reserved_at_60: [0x20],
    }
}
