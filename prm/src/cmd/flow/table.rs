//! CREATE/DESTROY/QUERY_FLOW_TABLE and SET_FLOW_TABLE_ROOT, with the table context.

use crate::layout;

/// `table_type` of the NIC receive tables (`FS_FT_NIC_RX`).
pub const TABLE_TYPE_NIC_RX: u8 = 0x0;
/// `table_type` of the NIC transmit tables (`FS_FT_NIC_TX`).
pub const TABLE_TYPE_NIC_TX: u8 = 0x1;
/// RDMA receive tables (`FS_FT_RDMA_RX`).
pub const TABLE_TYPE_RDMA_RX: u8 = 0x7;

/// `table_miss_action`: what a frame that matches no entry does
/// (`MLX5_FLOW_TABLE_MISS_ACTION_*`).
pub mod miss_action {
    /// The default: go on to the next table of a higher level in the namespace (for
    /// the root table, the vport's default: drop on a NIC RX root).
    pub const DEFAULT: u8 = 0x0;
    /// Go to the table `table_miss_id` names.
    pub const FWD: u8 = 0x1;
}

layout! {
    /// `flow_table_context`: a table's level, size and miss behaviour.
    pub struct FlowTableContext = flow_table_context {
        reformat_en: 0x1,
        decap_en: 0x1,
        sw_owner: 0x1,
        termination_table: 0x1,
        table_miss_action: 0x4,
        level: 0x8,
        reserved_at_10: [0x8],
        /// log2 of the number of entries (flow indexes 0 .. 1 << log_size).
        log_size: 0x8,
        reserved_at_20: [0x8],
        table_miss_id: 0x18,
        reserved_at_40: [0x8],
        lag_master_next_table_id: 0x18,
        reserved_at_60: [0x60],
        sw_owner_icm_root_1: 0x40,
        sw_owner_icm_root_0: 0x40,
    }
}

layout! {
    /// CREATE_FLOW_TABLE inbox.
    pub struct CreateFlowTableIn = create_flow_table_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        other_vport: 0x1,
        reserved_at_41: [0xf],
        vport_number: 0x10,
        reserved_at_60: [0x20],
        table_type: 0x8,
        reserved_at_88: [0x18],
        reserved_at_a0: [0x20],
        flow_table_context: FlowTableContext,
    }
}

layout! {
    /// CREATE_FLOW_TABLE outbox: the table id (and, for sw_owner tables, an ICM
    /// address softhca never gives).
    pub struct CreateFlowTableOut = create_flow_table_out {
        status: 0x8,
        icm_address_63_40: 0x18,
        syndrome: 0x20,
        icm_address_39_32: 0x8,
        table_id: 0x18,
        icm_address_31_0: 0x20,
    }
}

layout! {
    /// DESTROY_FLOW_TABLE inbox.
    pub struct DestroyFlowTableIn = destroy_flow_table_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        other_vport: 0x1,
        reserved_at_41: [0xf],
        vport_number: 0x10,
        reserved_at_60: [0x20],
        table_type: 0x8,
        reserved_at_88: [0x18],
        reserved_at_a0: [0x8],
        table_id: 0x18,
        reserved_at_c0: [0x140],
    }
}

layout! {
    /// QUERY_FLOW_TABLE inbox.
    pub struct QueryFlowTableIn = query_flow_table_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        table_type: 0x8,
        reserved_at_88: [0x18],
        reserved_at_a0: [0x8],
        table_id: 0x18,
        reserved_at_c0: [0x140],
    }
}

layout! {
    /// QUERY_FLOW_TABLE outbox: the table's context.
    pub struct QueryFlowTableOut = query_flow_table_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x80],
        flow_table_context: FlowTableContext,
    }
}

layout! {
    /// SET_FLOW_TABLE_ROOT inbox: which table of a type is where classification
    /// starts (mlx5_core points the NIC RX root at its first table).
    pub struct SetFlowTableRootIn = set_flow_table_root_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        other_vport: 0x1,
        reserved_at_41: [0xf],
        vport_number: 0x10,
        reserved_at_60: [0x20],
        table_type: 0x8,
        reserved_at_88: [0x18],
        reserved_at_a0: [0x8],
        table_id: 0x18,
        reserved_at_c0: [0x8],
        underlay_qpn: 0x18,
        reserved_at_e0: [0x120],
    }
}

layout! {
    /// The outbox of DESTROY_FLOW_TABLE, SET_FLOW_TABLE_ROOT, DESTROY_FLOW_GROUP,
    /// SET/DELETE_FLOW_TABLE_ENTRY and DEALLOC_FLOW_COUNTER: header only
    /// (`set_fte_out` and its siblings).
    pub struct FlowCmdOut = set_fte_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}
