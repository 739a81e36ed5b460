//! SET/QUERY/DELETE_FLOW_TABLE_ENTRY: one entry (FTE) at a flow index, with its
//! match value, actions and destination list.
//!
//! The destination list follows the flow context: `destination_list_size` entries
//! of [`DestFormat`], then `flow_counter_list_size` entries of [`FlowCounterList`],
//! each 64 bits (without `extended_destination`). Read it through the inbox view's
//! `tail`: [`destinations`] and [`counters`] do.

use super::matching::FteMatchParam;
use crate::layout;

/// `action` bits of a flow context (`MLX5_FLOW_CONTEXT_ACTION_*`).
pub mod action {
    pub const ALLOW: u16 = 0x1;
    pub const DROP: u16 = 0x2;
    pub const FWD_DEST: u16 = 0x4;
    pub const COUNT: u16 = 0x8;
    pub const PACKET_REFORMAT: u16 = 0x10;
    pub const DECAP: u16 = 0x20;
    pub const MOD_HDR: u16 = 0x40;
    pub const VLAN_POP: u16 = 0x80;
    pub const VLAN_PUSH: u16 = 0x100;
}

/// `destination_type` of a [`DestFormat`] (`mlx5_ifc_flow_destination_type`). A
/// QP is no destination type on NIC RX: mlx5_ib forwards to a QP through its TIR.
pub mod dest_type {
    pub const VPORT: u8 = 0x0;
    pub const FLOW_TABLE: u8 = 0x1;
    pub const TIR: u8 = 0x2;
}

/// SET_FLOW_TABLE_ENTRY `op_mod`: 0 creates the entry, 1 modifies it under
/// `modify_enable_mask`.
pub const SET_FTE_OP_MOD_CREATE: u16 = 0;
pub const SET_FTE_OP_MOD_MODIFY: u16 = 1;

/// `modify_enable_mask` bits (`MLX5_SET_FTE_MODIFY_ENABLE_MASK_*`): what a modify
/// replaces.
pub mod modify_mask {
    pub const ACTION: u8 = 1 << 0;
    pub const FLOW_TAG: u8 = 1 << 1;
    pub const DESTINATION_LIST: u8 = 1 << 2;
    pub const FLOW_COUNTERS: u8 = 1 << 3;
}

layout! {
    /// `vlan`: a VLAN header to push (unused by softhca, named for its place).
    pub struct Vlan = vlan {
        ethtype: 0x10,
        prio: 0x3,
        cfi: 0x1,
        vid: 0xc,
    }
}

layout! {
    /// `flow_context`: what an entry matches and does. The destination list
    /// follows it.
    pub struct FlowContext = flow_context {
        push_vlan: Vlan,
        group_id: 0x20,
        reserved_at_40: [0x8],
        /// Reported in the CQE of a frame this entry delivers (`flow_table_metadata`).
        flow_tag: 0x18,
        reserved_at_60: [0x10],
        /// [`action`] bits.
        action: 0x10,
        extended_destination: 0x1,
        reserved_at_81: [0x1],
        flow_source: 0x2,
        reserved_at_84: [0x4],
        destination_list_size: 0x18,
        reserved_at_a0: [0x8],
        flow_counter_list_size: 0x18,
        packet_reformat_id: 0x20,
        modify_header_id: 0x20,
        push_vlan_2: Vlan,
        ipsec_obj_id: 0x20,
        reserved_at_140: [0xc0],
        match_value: FteMatchParam,
        reserved_at_1200: [0x600],
    }
}

layout! {
    /// One destination (`dest_format`).
    pub struct DestFormat = dest_format {
        /// [`dest_type`].
        destination_type: 0x8,
        destination_id: 0x18,
        reserved_at_20: [0x1],
        packet_reformat: 0x1,
        reserved_at_22: [0x1e],
    }
}

layout! {
    /// One counter of the counter list (`flow_counter_list`).
    pub struct FlowCounterList = flow_counter_list {
        flow_counter_id: 0x20,
        reserved_at_20: [0x20],
    }
}

layout! {
    /// SET_FLOW_TABLE_ENTRY inbox (`set_fte_in`).
    pub struct SetFteIn = set_fte_in {
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
        reserved_at_c0: [0x18],
        /// [`modify_mask`] bits, with op_mod [`SET_FTE_OP_MOD_MODIFY`].
        modify_enable_mask: 0x8,
        reserved_at_e0: [0x20],
        flow_index: 0x20,
        reserved_at_120: [0xe0],
        flow_context: FlowContext,
    }
}

layout! {
    /// DELETE_FLOW_TABLE_ENTRY inbox (`delete_fte_in`); QUERY_FLOW_TABLE_ENTRY's
    /// inbox (`query_fte_in`) is the same layout.
    pub struct DeleteFteIn = delete_fte_in {
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
        reserved_at_c0: [0x40],
        flow_index: 0x20,
        reserved_at_120: [0xe0],
    }
}

/// QUERY_FLOW_TABLE_ENTRY's inbox: [`DeleteFteIn`]'s layout.
pub type QueryFteIn = DeleteFteIn;

layout! {
    /// QUERY_FLOW_TABLE_ENTRY outbox: the entry's context, then its destination list.
    pub struct QueryFteOut = query_fte_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x1c0],
        flow_context: FlowContext,
    }
}

/// Bytes per destination or counter list entry (without extended destinations).
pub const DEST_ENTRY_BYTES: usize = DestFormat::BYTES;

/// The destination list entries after a flow context (`tail`), `n` of them; None
/// when the tail is shorter.
pub fn destinations(tail: &[u8], n: usize) -> Option<impl Iterator<Item = crate::bits::View<'_, DestFormat>>> {
    let b = tail.get(..n.checked_mul(DEST_ENTRY_BYTES)?)?;
    Some(b.chunks_exact(DEST_ENTRY_BYTES).map(|c| crate::bits::View::new(c).expect("one entry")))
}

/// The counter list after `n_dest` destinations, `n` of them; None when the tail
/// is shorter.
pub fn counters(tail: &[u8], n_dest: usize, n: usize) -> Option<impl Iterator<Item = u32> + '_> {
    let start = n_dest.checked_mul(DEST_ENTRY_BYTES)?;
    let b = tail.get(start..start.checked_add(n.checked_mul(DEST_ENTRY_BYTES)?)?)?;
    Some(b.chunks_exact(DEST_ENTRY_BYTES).map(|c| {
        crate::bits::View::<FlowCounterList>::new(c).expect("one entry").get(FlowCounterList::flow_counter_id)
    }))
}
