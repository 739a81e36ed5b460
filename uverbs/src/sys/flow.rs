//! Flow steering of the write path (`IB_USER_VERBS_EX_CMD_CREATE_FLOW`/`DESTROY_FLOW`):
//! the request structs and the flow spec list that follows `ib_uverbs_flow_attr`
//! (rdma/ib_user_verbs.h), and the spec and attribute numbers (rdma-core's
//! `enum ibv_flow_spec_type` / `ibv_flow_attr_type` / `ibv_flow_flags`, which the
//! kernel's `ib_flow_spec_type` mirrors; the uapi header has no names for them).
//!
//! Fields the headers declare `__be16`/`__be32` are kept as the raw bytes' native
//! integers here: `u16::from_be` gives the value.

abi_struct! {
    /// `struct ib_uverbs_flow_attr`: `size` is the byte length of the spec list that
    /// follows (not counting this struct).
    pub struct FlowAttr = "struct ib_uverbs_flow_attr" {
        ty: u32 => "type",
        size: u16,
        priority: u16,
        num_of_specs: u8,
        reserved: [u8; 2],
        port: u8,
        flags: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_create_flow` (EX_CREATE_FLOW's core request; the specs follow).
    pub struct CreateFlow = "struct ib_uverbs_create_flow" {
        comp_mask: u32,
        qp_handle: u32,
        flow_attr: FlowAttr,
    }
}

abi_struct! {
    /// `struct ib_uverbs_create_flow_resp`.
    pub struct CreateFlowResp = "struct ib_uverbs_create_flow_resp" {
        comp_mask: u32,
        flow_handle: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_destroy_flow`.
    pub struct DestroyFlow = "struct ib_uverbs_destroy_flow" {
        comp_mask: u32,
        flow_handle: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_hdr`: every spec starts with it; `size` is the whole
    /// spec's (a filter spec is the header, the value, then the mask, of equal sizes).
    pub struct FlowSpecHdr = "struct ib_uverbs_flow_spec_hdr" {
        ty: u32 => "type",
        size: u16,
        reserved: u16,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_eth_filter`.
    pub struct EthFilter = "struct ib_uverbs_flow_eth_filter" {
        dst_mac: [u8; 6],
        src_mac: [u8; 6],
        ether_type: u16,
        vlan_tag: u16,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_ipv4_filter`.
    pub struct Ipv4Filter = "struct ib_uverbs_flow_ipv4_filter" {
        src_ip: u32,
        dst_ip: u32,
        proto: u8,
        tos: u8,
        ttl: u8,
        flags: u8,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_ipv6_filter`.
    pub struct Ipv6Filter = "struct ib_uverbs_flow_ipv6_filter" {
        src_ip: [u8; 16],
        dst_ip: [u8; 16],
        flow_label: u32,
        next_hdr: u8,
        traffic_class: u8,
        hop_limit: u8,
        reserved: u8,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_tcp_udp_filter`.
    pub struct TcpUdpFilter = "struct ib_uverbs_flow_tcp_udp_filter" {
        dst_port: u16,
        src_port: u16,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_tunnel_filter` (VXLAN).
    pub struct TunnelFilter = "struct ib_uverbs_flow_tunnel_filter" {
        tunnel_id: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_esp_filter`.
    pub struct EspFilter = "struct ib_uverbs_flow_spec_esp_filter" {
        spi: u32,
        seq: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_gre_filter`.
    pub struct GreFilter = "struct ib_uverbs_flow_gre_filter" {
        c_ks_res0_ver: u16,
        protocol: u16,
        key: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_mpls_filter`.
    pub struct MplsFilter = "struct ib_uverbs_flow_mpls_filter" {
        label: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_eth`.
    pub struct FlowSpecEth = "struct ib_uverbs_flow_spec_eth" {
        hdr: FlowSpecHdr,
        val: EthFilter,
        mask: EthFilter,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_ipv4`.
    pub struct FlowSpecIpv4 = "struct ib_uverbs_flow_spec_ipv4" {
        hdr: FlowSpecHdr,
        val: Ipv4Filter,
        mask: Ipv4Filter,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_ipv6`.
    pub struct FlowSpecIpv6 = "struct ib_uverbs_flow_spec_ipv6" {
        hdr: FlowSpecHdr,
        val: Ipv6Filter,
        mask: Ipv6Filter,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_tcp_udp`.
    pub struct FlowSpecTcpUdp = "struct ib_uverbs_flow_spec_tcp_udp" {
        hdr: FlowSpecHdr,
        val: TcpUdpFilter,
        mask: TcpUdpFilter,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_action_tag`.
    pub struct FlowSpecActionTag = "struct ib_uverbs_flow_spec_action_tag" {
        hdr: FlowSpecHdr,
        tag_id: u32,
        reserved1: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_action_drop`: the header alone.
    pub struct FlowSpecActionDrop = "struct ib_uverbs_flow_spec_action_drop" {
        hdr: FlowSpecHdr,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_action_handle` (a flow action object's handle);
    /// `struct ib_uverbs_flow_spec_action_count` (a counters object's) has its layout.
    pub struct FlowSpecActionHandle = "struct ib_uverbs_flow_spec_action_handle" {
        hdr: FlowSpecHdr,
        handle: u32,
        reserved1: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_flow_spec_action_count`.
    pub struct FlowSpecActionCount = "struct ib_uverbs_flow_spec_action_count" {
        hdr: FlowSpecHdr,
        handle: u32,
        reserved1: u32,
    }
}

/// `sizeof(struct ib_uverbs_flow_spec)` (the kernel's drivers/infiniband/core/uverbs.h,
/// not uapi): the union of the eth, ipv4, esp, tcp_udp, ipv6 and action specs, the IPv6
/// spec being the largest. `flow_attr.size` may not exceed `num_of_specs` of them.
pub const FLOW_SPEC_UNION_BYTES: usize = core::mem::size_of::<FlowSpecIpv6>();

abi_consts! {
    fn flow_consts;
    // enum ibv_flow_spec_type (infiniband/verbs.h) = the kernel's enum ib_flow_spec_type
    pub const SPEC_ETH: u32 = 0x20 => "IBV_FLOW_SPEC_ETH";
    pub const SPEC_IPV4: u32 = 0x30 => "IBV_FLOW_SPEC_IPV4";
    pub const SPEC_IPV6: u32 = 0x31 => "IBV_FLOW_SPEC_IPV6";
    /// rdma-core's own: libibverbs sends it as [`SPEC_IPV4`]; the kernel has no 0x32.
    pub const SPEC_IPV4_EXT: u32 = 0x32 => "IBV_FLOW_SPEC_IPV4_EXT";
    pub const SPEC_ESP: u32 = 0x34 => "IBV_FLOW_SPEC_ESP";
    pub const SPEC_TCP: u32 = 0x40 => "IBV_FLOW_SPEC_TCP";
    pub const SPEC_UDP: u32 = 0x41 => "IBV_FLOW_SPEC_UDP";
    pub const SPEC_VXLAN_TUNNEL: u32 = 0x50 => "IBV_FLOW_SPEC_VXLAN_TUNNEL";
    pub const SPEC_GRE: u32 = 0x51 => "IBV_FLOW_SPEC_GRE";
    pub const SPEC_MPLS: u32 = 0x60 => "IBV_FLOW_SPEC_MPLS";
    /// Or'ed into a filter type: match the inner (tunnelled) headers.
    pub const SPEC_INNER: u32 = 0x100 => "IBV_FLOW_SPEC_INNER";
    /// Types from here on are actions.
    pub const SPEC_ACTION_TAG: u32 = 0x1000 => "IBV_FLOW_SPEC_ACTION_TAG";
    pub const SPEC_ACTION_DROP: u32 = 0x1001 => "IBV_FLOW_SPEC_ACTION_DROP";
    pub const SPEC_ACTION_HANDLE: u32 = 0x1002 => "IBV_FLOW_SPEC_ACTION_HANDLE";
    pub const SPEC_ACTION_COUNT: u32 = 0x1003 => "IBV_FLOW_SPEC_ACTION_COUNT";
    // enum ibv_flow_attr_type
    pub const ATTR_NORMAL: u32 = 0 => "IBV_FLOW_ATTR_NORMAL";
    pub const ATTR_ALL_DEFAULT: u32 = 1 => "IBV_FLOW_ATTR_ALL_DEFAULT";
    pub const ATTR_MC_DEFAULT: u32 = 2 => "IBV_FLOW_ATTR_MC_DEFAULT";
    pub const ATTR_SNIFFER: u32 = 3 => "IBV_FLOW_ATTR_SNIFFER";
    // enum ibv_flow_flags
    pub const ATTR_FLAGS_DONT_TRAP: u32 = 1 << 1 => "IBV_FLOW_ATTR_FLAGS_DONT_TRAP";
    pub const ATTR_FLAGS_EGRESS: u32 = 1 << 2 => "IBV_FLOW_ATTR_FLAGS_EGRESS";
}

/// `IB_FLOW_ATTR_FLAGS_RESERVED` (the kernel's ib_verbs.h: the bit after EGRESS):
/// flags at or above it are EINVAL.
pub const ATTR_FLAGS_RESERVED: u32 = 1 << 3;

/// `IB_FLOW_SPEC_SUPPORT_LAYERS` (the kernel's ib_verbs.h): the most specs a flow has.
pub const SPEC_SUPPORT_LAYERS: u8 = 10;
