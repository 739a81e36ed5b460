//! The match layout of a flow group's mask and a flow table entry's value
//! (`fte_match_param` and its `fte_match_set_lyr_2_4` outer header set).
//!
//! One layout serves both: a flow group's `match_criteria` has a 1 in every bit the
//! group compares, an entry's `match_value` has the values of those bits. Only the
//! outer L2-L4 set is named field by field; the misc and inner sets are kept as
//! byte areas (softhca refuses masks in them: see its firmware), but sit at their
//! PRM places so that a mailbox built by a real user decodes right.

use crate::layout;

/// `match_criteria_enable` bits (`MLX5_MATCH_*` in mlx5_ib/fs_core): which sets of an
/// [`FteMatchParam`] the group's mask uses.
pub mod criteria {
    pub const OUTER_HEADERS: u8 = 1 << 0;
    pub const MISC_PARAMETERS: u8 = 1 << 1;
    pub const INNER_HEADERS: u8 = 1 << 2;
    pub const MISC_PARAMETERS_2: u8 = 1 << 3;
    pub const MISC_PARAMETERS_3: u8 = 1 << 4;
    pub const MISC_PARAMETERS_4: u8 = 1 << 5;
    pub const MISC_PARAMETERS_5: u8 = 1 << 6;
}

/// `ip_version` values of the outer header set (4 and 6: the IP version nibble).
pub const IP_VERSION_4: u8 = 4;
pub const IP_VERSION_6: u8 = 6;

/// `l4_type` values (`MLX5_PACKET_L4_TYPE_*`).
pub const L4_TYPE_NONE: u8 = 0;
pub const L4_TYPE_TCP: u8 = 1;
pub const L4_TYPE_UDP: u8 = 2;

layout! {
    /// `fte_match_set_lyr_2_4`: the L2-L4 fields of one header set (outer or
    /// inner). MACs are split at the PRM's dword boundaries (`smac_47_16` +
    /// `smac_15_0`); the two address unions are 128 bits each: an IPv6 address
    /// whole, or an IPv4 address in their last dword (`ipv4_layout`).
    pub struct FteMatchSetLyr24 = fte_match_set_lyr_2_4 {
        smac_47_16: 0x20,
        smac_15_0: 0x10,
        ethertype: 0x10,
        dmac_47_16: 0x20,
        dmac_15_0: 0x10,
        first_prio: 0x3,
        first_cfi: 0x1,
        first_vid: 0xc,
        ip_protocol: 0x8,
        ip_dscp: 0x6,
        ip_ecn: 0x2,
        /// The frame has a customer VLAN tag (0x8100).
        cvlan_tag: 0x1,
        /// The frame has a service VLAN tag (0x88a8).
        svlan_tag: 0x1,
        frag: 0x1,
        ip_version: 0x4,
        tcp_flags: 0x9,
        tcp_sport: 0x10,
        tcp_dport: 0x10,
        l4_type: 0x2,
        // The kernel names these two reserved_at_c2 and reserved_at_c4; by offset
        // they are at 0xc2 and 0xd4.
        reserved_at_c2: [0xe],
        ipv4_ihl: 0x4,
        reserved_at_d4: [0x4],
        ttl_hoplimit: 0x8,
        udp_sport: 0x10,
        udp_dport: 0x10,
        src_ipv4_src_ipv6: [0x80],
        dst_ipv4_dst_ipv6: [0x80],
    }
}

layout! {
    /// `fte_match_set_misc`: the misc set's fields through the IPv6 flow labels, the
    /// rest reserved here. softhca's firmware refuses criteria in this set; the kernel
    /// half's mlx5_ib translation (GRE, VXLAN, IPv6 flow label) writes them where a
    /// ConnectX reads them, so that refusal is the firmware's.
    pub struct FteMatchSetMisc = fte_match_set_misc {
        gre_c_present: 0x1,
        reserved_at_1: [0x1],
        gre_k_present: 0x1,
        gre_s_present: 0x1,
        source_vhca_port: 0x4,
        source_sqn: 0x18,
        source_eswitch_owner_vhca_id: 0x10,
        source_port: 0x10,
        outer_second_prio: 0x3,
        outer_second_cfi: 0x1,
        outer_second_vid: 0xc,
        inner_second_prio: 0x3,
        inner_second_cfi: 0x1,
        inner_second_vid: 0xc,
        outer_second_cvlan_tag: 0x1,
        inner_second_cvlan_tag: 0x1,
        outer_second_svlan_tag: 0x1,
        inner_second_svlan_tag: 0x1,
        reserved_at_64: [0xc],
        gre_protocol: 0x10,
        /// `gre_key` (the union of `nvgre.hi`/`nvgre.lo` and `key`).
        gre_key: 0x20,
        vxlan_vni: 0x18,
        bth_opcode: 0x8,
        geneve_vni: 0x18,
        reserved_at_d8: [0x7],
        geneve_oam: 0x1,
        reserved_at_e0: [0xc],
        outer_ipv6_flow_label: 0x14,
        reserved_at_100: [0xc],
        inner_ipv6_flow_label: 0x14,
        reserved_at_120: [0xe0],
    }
}

layout! {
    /// `fte_match_param`: every match set a flow group may use, in the order of the
    /// `match_criteria_enable` bits ([`criteria`]).
    pub struct FteMatchParam = fte_match_param {
        outer_headers: FteMatchSetLyr24,
        misc_parameters: [0x200],
        inner_headers: FteMatchSetLyr24,
        misc_parameters_2: [0x200],
        misc_parameters_3: [0x200],
        misc_parameters_4: [0x200],
        misc_parameters_5: [0x200],
        reserved_at_e00: [0x200],
    }
}

/// The byte range of an IPv4 address inside a 16-byte address union
/// (`ipv4_layout`: 0x60 reserved bits, then `ipv4`).
pub const IPV4_IN_UNION: core::ops::Range<usize> = 12..16;
