//! The flow layouts against Linux's `include/linux/mlx5/mlx5_ifc.h` (v6.x), and
//! golden bytes of a mailbox as `MLX5_SET` would write it.
//!
//! The `(field, bit offset, width)` rows were computed from the kernel header by
//! summing the `u8 name[width]` widths of each structure (nested structures and
//! unions by their size); totals that rdma-core's `providers/mlx5/mlx5_ifc.h` also
//! has (it collapses the group and FTE bodies into reserved areas) agree with it:
//! create_flow_table_in 0x200, create_flow_group_in 0x2000, flow_context 0x1800,
//! set_fte_in 0x1a00, alloc_flow_counter_in 0x80.

use super::counter::*;
use super::entry::*;
use super::group::*;
use super::matching::*;
use super::table::*;
use crate::bits::{FieldInfo, Layout, View, ViewMut};
use crate::cmd::opcode as op;

fn check<L: Layout>(bits: usize, rows: &[(&str, usize, usize)]) {
    assert_eq!(L::BITS, bits, "{} size", L::NAME);
    for &(name, off, width) in rows {
        let f = L::FIELDS.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{}: no {name}", L::NAME));
        assert_eq!((f.bit_off, f.bits), (off, width), "{}.{name}", L::NAME);
    }
}

fn all() -> [&'static [FieldInfo]; 22] {
    [
        FteMatchSetLyr24::FIELDS, FteMatchParam::FIELDS, FlowTableContext::FIELDS,
        CreateFlowTableIn::FIELDS, CreateFlowTableOut::FIELDS, DestroyFlowTableIn::FIELDS,
        QueryFlowTableIn::FIELDS, QueryFlowTableOut::FIELDS, SetFlowTableRootIn::FIELDS,
        FlowCmdOut::FIELDS, CreateFlowGroupIn::FIELDS, CreateFlowGroupOut::FIELDS,
        DestroyFlowGroupIn::FIELDS, FlowContext::FIELDS, DestFormat::FIELDS, FlowCounterList::FIELDS,
        SetFteIn::FIELDS, DeleteFteIn::FIELDS, QueryFteOut::FIELDS, AllocFlowCounterIn::FIELDS,
        QueryFlowCounterIn::FIELDS, TrafficCounter::FIELDS,
    ]
}

/// Every reserved name states its offset, and fields tile each layout.
#[test]
fn flow_reserved_names_state_their_offsets() {
    for fields in all() {
        for f in fields.iter().filter(|f| f.is_reserved()) {
            let at = usize::from_str_radix(f.name.strip_prefix("reserved_at_").unwrap(), 16).unwrap();
            assert_eq!(at, f.bit_off, "{}", f.name);
        }
        for w in fields.windows(2) {
            assert_eq!(w[0].bit_off + w[0].bits, w[1].bit_off, "{} -> {}", w[0].name, w[1].name);
        }
    }
}

#[test]
fn flow_opcodes_are_the_prm_s() {
    // include/linux/mlx5/mlx5_ifc.h, enum MLX5_CMD_OP_*
    assert_eq!(
        [op::SET_FLOW_TABLE_ROOT, op::CREATE_FLOW_TABLE, op::DESTROY_FLOW_TABLE, op::QUERY_FLOW_TABLE,
         op::CREATE_FLOW_GROUP, op::DESTROY_FLOW_GROUP, op::SET_FLOW_TABLE_ENTRY,
         op::QUERY_FLOW_TABLE_ENTRY, op::DELETE_FLOW_TABLE_ENTRY, op::ALLOC_FLOW_COUNTER,
         op::DEALLOC_FLOW_COUNTER, op::QUERY_FLOW_COUNTER],
        [0x92f, 0x930, 0x931, 0x932, 0x933, 0x934, 0x936, 0x937, 0x938, 0x939, 0x93a, 0x93b]
    );
}

#[test]
fn match_layouts_match_kernel() {
    // struct mlx5_ifc_fte_match_set_lyr_2_4_bits, 0x200 bits
    check::<FteMatchSetLyr24>(0x200, &[
        ("smac_47_16", 0x0, 0x20), ("smac_15_0", 0x20, 0x10), ("ethertype", 0x30, 0x10),
        ("dmac_47_16", 0x40, 0x20), ("dmac_15_0", 0x60, 0x10), ("first_prio", 0x70, 0x3),
        ("first_cfi", 0x73, 0x1), ("first_vid", 0x74, 0xc), ("ip_protocol", 0x80, 0x8),
        ("ip_dscp", 0x88, 0x6), ("ip_ecn", 0x8e, 0x2), ("cvlan_tag", 0x90, 0x1),
        ("svlan_tag", 0x91, 0x1), ("frag", 0x92, 0x1), ("ip_version", 0x93, 0x4),
        ("tcp_flags", 0x97, 0x9), ("tcp_sport", 0xa0, 0x10), ("tcp_dport", 0xb0, 0x10),
        ("l4_type", 0xc0, 0x2), ("ipv4_ihl", 0xd0, 0x4), ("ttl_hoplimit", 0xd8, 0x8),
        ("udp_sport", 0xe0, 0x10), ("udp_dport", 0xf0, 0x10),
        ("src_ipv4_src_ipv6", 0x100, 0x80), ("dst_ipv4_dst_ipv6", 0x180, 0x80),
    ]);
    // struct mlx5_ifc_fte_match_set_misc_bits, 0x200 bits
    check::<FteMatchSetMisc>(0x200, &[
        ("source_sqn", 0x8, 0x18), ("source_port", 0x30, 0x10), ("gre_protocol", 0x70, 0x10),
        ("gre_key", 0x80, 0x20), ("vxlan_vni", 0xa0, 0x18), ("bth_opcode", 0xb8, 0x8),
        ("outer_ipv6_flow_label", 0xec, 0x14), ("inner_ipv6_flow_label", 0x10c, 0x14),
    ]);
    // struct mlx5_ifc_fte_match_param_bits, 0x1000 bits
    check::<FteMatchParam>(0x1000, &[
        ("outer_headers", 0x0, 0x200), ("misc_parameters", 0x200, 0x200),
        ("inner_headers", 0x400, 0x200), ("misc_parameters_2", 0x600, 0x200),
        ("misc_parameters_3", 0x800, 0x200), ("misc_parameters_4", 0xa00, 0x200),
        ("misc_parameters_5", 0xc00, 0x200),
    ]);
}

#[test]
fn table_layouts_match_kernel() {
    // struct mlx5_ifc_flow_table_context_bits, 0x140 bits (rdma-core: same)
    check::<FlowTableContext>(0x140, &[
        ("sw_owner", 0x2, 0x1), ("table_miss_action", 0x4, 0x4), ("level", 0x8, 0x8),
        ("log_size", 0x18, 0x8), ("table_miss_id", 0x28, 0x18),
        ("lag_master_next_table_id", 0x48, 0x18), ("sw_owner_icm_root_1", 0xc0, 0x40),
        ("sw_owner_icm_root_0", 0x100, 0x40),
    ]);
    // struct mlx5_ifc_create_flow_table_in_bits, 0x200 bits
    check::<CreateFlowTableIn>(0x200, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("other_vport", 0x40, 0x1),
        ("vport_number", 0x50, 0x10), ("table_type", 0x80, 0x8), ("flow_table_context", 0xc0, 0x140),
    ]);
    // struct mlx5_ifc_create_flow_table_out_bits, 0x80 bits
    check::<CreateFlowTableOut>(0x80, &[("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("table_id", 0x48, 0x18)]);
    // struct mlx5_ifc_destroy_flow_table_in_bits, 0x200 bits
    check::<DestroyFlowTableIn>(0x200, &[("table_type", 0x80, 0x8), ("table_id", 0xa8, 0x18)]);
    // struct mlx5_ifc_query_flow_table_in_bits / _out_bits, 0x200 bits each
    check::<QueryFlowTableIn>(0x200, &[("table_type", 0x80, 0x8), ("table_id", 0xa8, 0x18)]);
    check::<QueryFlowTableOut>(0x200, &[("flow_table_context", 0xc0, 0x140)]);
    // struct mlx5_ifc_set_flow_table_root_in_bits, 0x200 bits
    check::<SetFlowTableRootIn>(0x200, &[
        ("table_type", 0x80, 0x8), ("table_id", 0xa8, 0x18), ("underlay_qpn", 0xc8, 0x18),
    ]);
}

#[test]
fn group_layouts_match_kernel() {
    // struct mlx5_ifc_create_flow_group_in_bits, 0x2000 bits
    check::<CreateFlowGroupIn>(0x2000, &[
        ("table_type", 0x80, 0x8), ("table_id", 0xa8, 0x18), ("start_flow_index", 0xe0, 0x20),
        ("end_flow_index", 0x120, 0x20), ("match_definer_id", 0x150, 0x10),
        ("match_criteria_enable", 0x1f8, 0x8), ("match_criteria", 0x200, 0x1000),
    ]);
    // struct mlx5_ifc_create_flow_group_out_bits, 0x80 bits
    check::<CreateFlowGroupOut>(0x80, &[("group_id", 0x48, 0x18)]);
    // struct mlx5_ifc_destroy_flow_group_in_bits, 0x200 bits
    check::<DestroyFlowGroupIn>(0x200, &[("table_id", 0xa8, 0x18), ("group_id", 0xc0, 0x20)]);
}

#[test]
fn entry_layouts_match_kernel() {
    // struct mlx5_ifc_flow_context_bits, 0x1800 bits (rdma-core: reserved_at_c0[0x1740] ends there too)
    check::<FlowContext>(0x1800, &[
        ("push_vlan", 0x0, 0x20), ("group_id", 0x20, 0x20), ("flow_tag", 0x48, 0x18),
        ("action", 0x70, 0x10), ("extended_destination", 0x80, 0x1),
        ("destination_list_size", 0x88, 0x18), ("flow_counter_list_size", 0xa8, 0x18),
        ("packet_reformat_id", 0xc0, 0x20), ("modify_header_id", 0xe0, 0x20),
        ("match_value", 0x200, 0x1000),
    ]);
    // struct mlx5_ifc_dest_format_bits, struct mlx5_ifc_flow_counter_list_bits: 0x40 bits
    check::<DestFormat>(0x40, &[("destination_type", 0x0, 0x8), ("destination_id", 0x8, 0x18), ("packet_reformat", 0x21, 0x1)]);
    check::<FlowCounterList>(0x40, &[("flow_counter_id", 0x0, 0x20)]);
    // struct mlx5_ifc_set_fte_in_bits, 0x1a00 bits
    check::<SetFteIn>(0x1a00, &[
        ("op_mod", 0x30, 0x10), ("table_type", 0x80, 0x8), ("table_id", 0xa8, 0x18),
        ("modify_enable_mask", 0xd8, 0x8), ("flow_index", 0x100, 0x20), ("flow_context", 0x200, 0x1800),
    ]);
    // struct mlx5_ifc_delete_fte_in_bits (= query_fte_in), 0x200 bits
    check::<DeleteFteIn>(0x200, &[("table_type", 0x80, 0x8), ("table_id", 0xa8, 0x18), ("flow_index", 0x100, 0x20)]);
    // struct mlx5_ifc_query_fte_out_bits, 0x1a00 bits
    check::<QueryFteOut>(0x1a00, &[("flow_context", 0x200, 0x1800)]);
}

#[test]
fn counter_layouts_match_kernel() {
    // struct mlx5_ifc_alloc_flow_counter_in_bits, 0x80 bits
    check::<AllocFlowCounterIn>(0x80, &[("flow_counter_bulk_log_size", 0x73, 0x5), ("flow_counter_bulk", 0x78, 0x8)]);
    // struct mlx5_ifc_alloc_flow_counter_out_bits, 0x80 bits
    check::<AllocFlowCounterOut>(0x80, &[("flow_counter_id", 0x40, 0x20)]);
    // struct mlx5_ifc_dealloc_flow_counter_in_bits, 0x80 bits
    check::<DeallocFlowCounterIn>(0x80, &[("flow_counter_id", 0x40, 0x20)]);
    // struct mlx5_ifc_query_flow_counter_in_bits, 0x100 bits
    check::<QueryFlowCounterIn>(0x100, &[
        ("mkey", 0x60, 0x20), ("address", 0x80, 0x40), ("clear", 0xc0, 0x1), ("dump_to_memory", 0xc1, 0x1),
        ("num_of_counters", 0xc2, 0x1e), ("flow_counter_id", 0xe0, 0x20),
    ]);
    // struct mlx5_ifc_traffic_counter_bits, 0x80 bits; query_flow_counter_out's header 0x80
    check::<TrafficCounter>(0x80, &[("packets", 0x0, 0x40), ("octets", 0x40, 0x80 - 0x40)]);
    check::<QueryFlowCounterOut>(0x80, &[("syndrome", 0x20, 0x20)]);
}

/// A SET_FLOW_TABLE_ENTRY forwarding UDP to 10.0.0.2:4791 to TIR 0x12 with a counter,
/// written field by field, lands where MLX5_SET would put each value: byte offset =
/// bit offset / 8 of the rows above (flow_context at byte 0x40 of the inbox,
/// match_value at 0x40 of it, the destination list right after the 0x340-byte inbox).
#[test]
fn set_fte_golden_bytes() {
    let mut b = vec![0u8; SetFteIn::BYTES + 2 * DEST_ENTRY_BYTES];
    assert_eq!(SetFteIn::BYTES, 0x340);
    {
        let mut v = ViewMut::<SetFteIn>::new(&mut b).unwrap();
        v.set(SetFteIn::opcode, op::SET_FLOW_TABLE_ENTRY).set(SetFteIn::table_id, 0x0a0b0c).set(SetFteIn::flow_index, 7);
        let mut fc = v.sub_mut(SetFteIn::flow_context);
        fc.set(FlowContext::flow_tag, 0x123456)
            .set(FlowContext::action, action::FWD_DEST | action::COUNT)
            .set(FlowContext::destination_list_size, 1)
            .set(FlowContext::flow_counter_list_size, 1);
        let mut mv = fc.sub_mut(FlowContext::match_value);
        let mut o = mv.sub_mut(FteMatchParam::outer_headers);
        o.set(FteMatchSetLyr24::ethertype, 0x0800).set(FteMatchSetLyr24::ip_protocol, 17)
            .set(FteMatchSetLyr24::udp_dport, 4791).set(FteMatchSetLyr24::ip_version, 4);
        o.bytes_mut(FteMatchSetLyr24::dst_ipv4_dst_ipv6)[IPV4_IN_UNION].copy_from_slice(&[10, 0, 0, 2]);
        let t = v.tail_mut();
        ViewMut::<DestFormat>::new(&mut t[..8]).unwrap().set(DestFormat::destination_type, dest_type::TIR).set(DestFormat::destination_id, 0x12);
        ViewMut::<FlowCounterList>::new(&mut t[8..16]).unwrap().set(FlowCounterList::flow_counter_id, 0x55);
    }
    assert_eq!(&b[0..2], &[0x09, 0x36]);
    assert_eq!(&b[0x14..0x18], &[0, 0x0a, 0x0b, 0x0c], "table_id at 0xa8");
    assert_eq!(&b[0x20..0x24], &[0, 0, 0, 7], "flow_index at 0x100");
    let fc = 0x40;
    assert_eq!(&b[fc + 8..fc + 12], &[0, 0x12, 0x34, 0x56], "flow_tag");
    assert_eq!(&b[fc + 12..fc + 16], &[0, 0, 0, 0x0c], "action FWD_DEST|COUNT");
    assert_eq!(&b[fc + 16..fc + 24], &[0, 0, 0, 1, 0, 0, 0, 1], "list sizes");
    let mv = fc + 0x40;
    assert_eq!(&b[mv + 6..mv + 8], &[0x08, 0x00], "ethertype");
    assert_eq!(b[mv + 0x10], 17, "ip_protocol");
    // cvlan_tag svlan_tag frag ip_version(4) tcp_flags(9) from bit 0x90: 0 0 0 0100 -> 0x08 in byte 0x12
    assert_eq!(b[mv + 0x12], 0x08, "ip_version 4");
    assert_eq!(&b[mv + 0x1e..mv + 0x20], &[0x12, 0xb7], "udp_dport 4791");
    assert_eq!(&b[mv + 0x3c..mv + 0x40], &[10, 0, 0, 2], "dst ipv4");
    assert_eq!(&b[0x340..0x350], &[2, 0, 0, 0x12, 0, 0, 0, 0, 0, 0, 0, 0x55, 0, 0, 0, 0]);
    let v = View::<SetFteIn>::new(&b).unwrap();
    assert_eq!(v.nonzero_reserved(), None);
    let d: Vec<_> = destinations(v.tail(), 1).unwrap().map(|d| (d.get(DestFormat::destination_type), d.get(DestFormat::destination_id))).collect();
    assert_eq!(d, [(dest_type::TIR, 0x12)]);
    assert_eq!(counters(v.tail(), 1, 1).unwrap().collect::<Vec<_>>(), [0x55]);
    assert!(counters(v.tail(), 1, 2).is_none(), "a list longer than the mailbox");
}

/// CREATE_FLOW_GROUP's mask for "outer dmac + ethertype": criteria_enable is the
/// last byte of dword 0x3f/8, the mask bytes at 0x40 + field offset.
#[test]
fn create_group_golden_bytes() {
    let mut b = vec![0u8; CreateFlowGroupIn::BYTES];
    {
        let mut v = ViewMut::<CreateFlowGroupIn>::new(&mut b).unwrap();
        v.set(CreateFlowGroupIn::start_flow_index, 0).set(CreateFlowGroupIn::end_flow_index, 0xff)
            .set(CreateFlowGroupIn::match_criteria_enable, criteria::OUTER_HEADERS);
        let mut m = v.sub_mut(CreateFlowGroupIn::match_criteria);
        let mut o = m.sub_mut(FteMatchParam::outer_headers);
        o.set(FteMatchSetLyr24::dmac_47_16, u32::MAX).set(FteMatchSetLyr24::dmac_15_0, u16::MAX)
            .set(FteMatchSetLyr24::ethertype, u16::MAX);
    }
    assert_eq!(&b[0x24..0x28], &[0, 0, 0, 0xff], "end_flow_index");
    assert_eq!(b[0x3f], 1, "match_criteria_enable");
    assert_eq!(&b[0x40 + 6..0x40 + 8], &[0xff, 0xff], "ethertype mask");
    assert_eq!(&b[0x40 + 8..0x40 + 14], &[0xff; 6], "dmac mask");
    assert_eq!(b[0x40 + 14], 0, "first_prio/vid untouched");
}
