//! CREATE/DESTROY_FLOW_GROUP: an index range of a table with one match mask.

use super::matching::FteMatchParam;
use crate::layout;

layout! {
    /// CREATE_FLOW_GROUP inbox: the range `start_flow_index ..= end_flow_index`
    /// and the mask its entries are compared under.
    pub struct CreateFlowGroupIn = create_flow_group_in {
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
        source_eswitch_owner_vhca_id_valid: 0x1,
        reserved_at_c1: [0x1f],
        start_flow_index: 0x20,
        reserved_at_100: [0x20],
        /// Inclusive.
        end_flow_index: 0x20,
        reserved_at_140: [0x10],
        match_definer_id: 0x10,
        reserved_at_160: [0x80],
        reserved_at_1e0: [0x18],
        /// [`super::matching::criteria`] bits.
        match_criteria_enable: 0x8,
        match_criteria: FteMatchParam,
        reserved_at_1200: [0xe00],
    }
}

layout! {
    /// CREATE_FLOW_GROUP outbox.
    pub struct CreateFlowGroupOut = create_flow_group_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        group_id: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// DESTROY_FLOW_GROUP inbox.
    pub struct DestroyFlowGroupIn = destroy_flow_group_in {
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
        group_id: 0x20,
        reserved_at_e0: [0x120],
    }
}
