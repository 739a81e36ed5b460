//! QUERY_HCA_CAP: the device's capabilities, one page per `op_mod`.
//!
//! `op_mod` is `(capability type << 1) | current`: type 0 is the general device page
//! ([`CmdHcaCap`]), 3 atomic, 4 RoCE, 7 the NIC flow table, 0x20 the second general
//! page; bit 0 asks for the current values rather than the maximum. libmlx5 reads the
//! general page at every `ibv_open_device` when DevX is on, and DPDK reads nearly every
//! field of it, acting on each set bit: a device must answer zero for what it lacks.
//!
//! [`CmdHcaCap`] lists the general page's fields that libmlx5, its steering code and
//! DPDK's `mlx5_devx_cmds.c` read, by their PRM names; the runs in between are folded
//! into `reserved_at_<offset>` areas.

use crate::bits::{Layout, View};
use crate::layout;

/// `op_mod` capability types (the value before the `<< 1`).
pub mod cap_type {
    pub const GENERAL: u16 = 0x0;
    pub const ATOMIC: u16 = 0x3;
    pub const ROCE: u16 = 0x4;
    pub const NIC_FLOW_TABLE: u16 = 0x7;
    pub const GENERAL_2: u16 = 0x20;
}

/// `op_mod` bit 0: the maximum the device supports (`HCA_CAP_OPMOD_GET_MAX`).
pub const OPMOD_GET_MAX: u16 = 0;
/// `op_mod` bit 0: the values currently set (`HCA_CAP_OPMOD_GET_CUR`).
pub const OPMOD_GET_CUR: u16 = 1;

/// The `op_mod` asking for page `cap_type`, current values or maximum.
pub const fn op_mod(cap_type: u16, current: bool) -> u16 {
    (cap_type << 1) | current as u16
}

layout! {
    /// The inbox.
    pub struct QueryHcaCapIn = query_hca_cap_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        other_function: 0x1,
        reserved_at_41: [0xf],
        function_id: 0x10,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// The outbox: header, then one capability page.
    pub struct QueryHcaCapOut = query_hca_cap_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
        capability: HcaCapUnion,
    }
}

layout! {
    /// The capability area of the outbox: a union in the PRM, of which the general
    /// page is one member; the others (RoCE, atomic, flow table...) overlay the
    /// same bytes from offset 0, so view them with `View::new(view.bytes(...))`.
    pub struct HcaCapUnion = hca_cap_union {
        cmd_hca_cap: CmdHcaCap,
        reserved_at_800: [0x7800],
    }
}

layout! {
    /// The general device capabilities page (`op_mod` type 0).
    pub struct CmdHcaCap = cmd_hca_cap {
        access_other_hca_roce: 0x1,
        reserved_at_1: [0x1e],
        vhca_resource_manager: 0x1,
        hca_cap_2: 0x1,
        reserved_at_21: [0xf],
        vhca_id: 0x10,
        reserved_at_40: [0x22],
        qp_data_in_order: 0x1,
        reserved_at_63: [0x8],
        log_dma_mmo_max_size: 0x5,
        reserved_at_70: [0x10],
        log_max_srq_sz: 0x8,
        log_max_qp_sz: 0x8,
        reserved_at_90: [0x3],
        isolate_vl_tc_new: 0x1,
        reserved_at_94: [0x4],
        prio_tag_required: 0x1,
        reserved_at_99: [0x2],
        log_max_qp: 0x5,
        reserved_at_a0: [0xb],
        log_max_srq: 0x5,
        reserved_at_b0: [0x18],
        log_max_cq_sz: 0x8,
        reserved_at_d0: [0xb],
        log_max_cq: 0x5,
        log_max_eq_sz: 0x8,
        relaxed_ordering_write: 0x1,
        reserved_at_e9: [0x1],
        log_max_mkey: 0x6,
        tunneled_atomic: 0x1,
        reserved_at_f1: [0xb],
        log_max_eq: 0x4,
        max_indirection: 0x8,
        fixed_buffer_size: 0x1,
        log_max_mrw_sz: 0x7,
        reserved_at_110: [0x2],
        log_max_bsf_list_size: 0x6,
        umr_extended_translation_offset: 0x1,
        null_mkey: 0x1,
        log_max_klm_list_size: 0x6,
        reserved_at_120: [0x2],
        qpc_extension: 0x1,
        reserved_at_123: [0x7],
        log_max_ra_req_dc: 0x6,
        reserved_at_130: [0xa],
        log_max_ra_res_dc: 0x6,
        reserved_at_140: [0x7],
        sig_crc64_xp10: 0x1,
        sig_crc32c: 0x1,
        reserved_at_149: [0x1],
        log_max_ra_req_qp: 0x6,
        reserved_at_150: [0x1],
        rts2rts_qp_udp_sport: 0x1,
        rts2rts_lag_tx_port_affinity: 0x1,
        dma_mmo_sq: 0x1,
        reserved_at_154: [0x6],
        log_max_ra_res_qp: 0x6,
        end_pad: 0x1,
        cc_query_allowed: 0x1,
        cc_modify_allowed: 0x1,
        start_pad: 0x1,
        cache_line_128byte: 0x1,
        gid_table_size_ro: 0x1,
        pkey_table_size_ro: 0x1,
        reserved_at_167: [0x2],
        rts2rts_qp_counters_set_id: 0x1,
        rts2rts_qp_dscp: 0x1,
        reserved_at_16b: [0x4],
        qcam_reg: 0x1,
        gid_table_size: 0x10,
        out_of_seq_cnt: 0x1,
        vport_counters: 0x1,
        retransmission_q_counters: 0x1,
        debug: 0x1,
        modify_rq_counters_set_id: 0x1,
        rq_delay_drop: 0x1,
        max_qp_cnt: 0xa,
        pkey_table_size: 0x10,
        vport_group_manager: 0x1,
        vhca_group_manager: 0x1,
        ib_virt: 0x1,
        eth_virt: 0x1,
        vnic_env_queue_counters: 0x1,
        ets: 0x1,
        nic_flow_table: 0x1,
        eswitch_manager: 0x1,
        device_memory: 0x1,
        mcam_reg: 0x1,
        pcam_reg: 0x1,
        local_ca_ack_delay: 0x5,
        port_module_event: 0x1,
        enhanced_retransmission_q_counters: 0x1,
        port_checks: 0x1,
        pulse_gen_control: 0x1,
        disable_link_up_by_init_hca: 0x1,
        beacon_led: 0x1,
        port_type: 0x2,
        num_ports: 0x8,
        reserved_at_1c0: [0x1],
        pps: 0x1,
        pps_modify: 0x1,
        log_max_msg: 0x5,
        multi_path_xrc_rdma: 0x1,
        multi_path_dc_rdma: 0x1,
        multi_path_rc_rdma: 0x1,
        reserved_at_1cb: [0x1],
        max_tc: 0x4,
        reserved_at_1d0: [0x2],
        general_notification_event: 0x1,
        multi_prio_sq: 0x1,
        reserved_at_1d4: [0xc],
        stat_rate_support: 0x10,
        sig_block_4048: 0x1,
        reserved_at_1f1: [0xb],
        cqe_version: 0x4,
        compact_address_vector: 0x1,
        eth_striding_wq: 0x1,
        reserved_at_202: [0x1],
        ipoib_enhanced_offloads: 0x1,
        ipoib_basic_offloads: 0x1,
        ib_striding_wq: 0x1,
        reserved_at_206: [0x4],
        umr_fence: 0x2,
        reserved_at_20c: [0x1],
        dc_connect_qp: 0x1,
        reserved_at_20e: [0x2],
        cmdif_checksum: 0x2,
        sigerr_cqe: 0x1,
        reserved_at_213: [0x1],
        wq_signature: 0x1,
        sctr_data_cqe: 0x1,
        reserved_at_216: [0x1],
        sho: 0x1,
        tph: 0x1,
        rf: 0x1,
        dct: 0x1,
        qos: 0x1,
        eth_net_offloads: 0x1,
        roce: 0x1,
        atomic: 0x1,
        extended_retry_count: 0x1,
        cq_oi: 0x1,
        cq_resize: 0x1,
        cq_moderation: 0x1,
        cq_period_mode_modify: 0x1,
        cq_invalidate: 0x1,
        reserved_at_225: [0x1],
        cq_eq_remap: 0x1,
        pg: 0x1,
        block_lb_mc: 0x1,
        exponential_backoff: 0x1,
        scqe_break_moderation: 0x1,
        cq_period_start_from_cqe: 0x1,
        cd: 0x1,
        atm: 0x1,
        apm: 0x1,
        vector_calc: 0x1,
        umr_ptr_rlkey: 0x1,
        imaicl: 0x1,
        qp_packet_based: 0x1,
        reserved_at_233: [0x3],
        qkv: 0x1,
        pkv: 0x1,
        set_deth_sqpn: 0x1,
        reserved_at_239: [0x1],
        initiator_src_dct: 0x1,
        dc_v2: 0x1,
        xrc: 0x1,
        ud: 0x1,
        uc: 0x1,
        rc: 0x1,
        uar_4k: 0x1,
        reserved_at_241: [0x7],
        fl_rc_qp_when_roce_disabled: 0x1,
        reserved_at_249: [0x1],
        uar_sz: 0x6,
        reserved_at_250: [0x2],
        umem_uid_0: 0x1,
        log_max_dc_cnak_qps: 0x5,
        log_pg_sz: 0x8,
        bf: 0x1,
        driver_version: 0x1,
        pad_tx_eth_packet: 0x1,
        query_driver_version: 0x1,
        max_qp_retry_freq: 0x1,
        qp_by_name: 0x1,
        mkey_by_name: 0x1,
        reserved_at_267: [0x1],
        suspend_qp_uc: 0x1,
        suspend_qp_ud: 0x1,
        suspend_qp_rc: 0x1,
        log_bf_reg_size: 0x5,
        reserved_at_270: [0x6],
        lag_dct: 0x2,
        lag_tx_port_affinity: 0x1,
        reserved_at_279: [0x2],
        lag_master: 0x1,
        num_lag_ports: 0x4,
        num_of_diagnostic_counters: 0x10,
        max_wqe_sz_sq: 0x10,
        reserved_at_2a0: [0x10],
        max_wqe_sz_rq: 0x10,
        max_flow_counter_31_16: 0x10,
        max_wqe_sz_sq_dc: 0x10,
        reserved_at_2e0: [0x7],
        max_qp_mcg: 0x19,
        mlnx_tag_ethertype: 0x10,
        reserved_at_310: [0x8],
        log_max_mcg: 0x8,
        reserved_at_320: [0x3],
        log_max_transport_domain: 0x5,
        reserved_at_328: [0x3],
        log_max_pd: 0x5,
        dp_ordering_ooo_all_ud: 0x1,
        dp_ordering_ooo_all_uc: 0x1,
        dp_ordering_ooo_all_xrc: 0x1,
        dp_ordering_ooo_all_dc: 0x1,
        dp_ordering_ooo_all_rc: 0x1,
        reserved_at_335: [0x6],
        log_max_xrcd: 0x5,
        nic_receive_steering_discard: 0x1,
        receive_discard_vport_down: 0x1,
        transmit_discard_vport_down: 0x1,
        eq_overrun_count: 0x1,
        reserved_at_344: [0x1],
        invalid_command_count: 0x1,
        quota_exceeded_count: 0x1,
        reserved_at_347: [0x1],
        log_max_flow_counter_bulk: 0x8,
        max_flow_counter_15_0: 0x10,
        modify_tis: 0x1,
        reserved_at_361: [0x2],
        log_max_rq: 0x5,
        reserved_at_368: [0x3],
        log_max_sq: 0x5,
        reserved_at_370: [0x3],
        log_max_tir: 0x5,
        reserved_at_378: [0x3],
        log_max_tis: 0x5,
        basic_cyclic_rcv_wqe: 0x1,
        reserved_at_381: [0x2],
        log_max_rmp: 0x5,
        reserved_at_388: [0x3],
        log_max_rqt: 0x5,
        reserved_at_390: [0x3],
        log_max_rqt_size: 0x5,
        reserved_at_398: [0x3],
        log_max_tis_per_sq: 0x5,
        ext_stride_num_range: 0x1,
        reserved_at_3a1: [0x2],
        log_max_stride_sz_rq: 0x5,
        reserved_at_3a8: [0x3],
        log_min_stride_sz_rq: 0x5,
        reserved_at_3b0: [0x3],
        log_max_stride_sz_sq: 0x5,
        reserved_at_3b8: [0x3],
        log_min_stride_sz_sq: 0x5,
        hairpin: 0x1,
        reserved_at_3c1: [0x2],
        log_max_hairpin_queues: 0x5,
        reserved_at_3c8: [0x3],
        log_max_hairpin_wq_data_sz: 0x5,
        reserved_at_3d0: [0x3],
        log_max_hairpin_num_packets: 0x5,
        reserved_at_3d8: [0x3],
        log_max_wq_sz: 0x5,
        nic_vport_change_event: 0x1,
        disable_local_lb_uc: 0x1,
        disable_local_lb_mc: 0x1,
        log_min_hairpin_wq_data_sz: 0x5,
        reserved_at_3e8: [0x3],
        log_max_vlan_list: 0x5,
        reserved_at_3f0: [0x1],
        aes_xts_single_block_le_tweak: 0x1,
        aes_xts_multi_block_be_tweak: 0x1,
        log_max_current_mc_list: 0x5,
        reserved_at_3f8: [0x3],
        log_max_current_uc_list: 0x5,
        general_obj_types: 0x40,
        sq_ts_format: 0x2,
        rq_ts_format: 0x2,
        steering_format_version: 0x4,
        create_qp_start_hint: 0x18,
        reserved_at_460: [0x3],
        /// log2 of the DevX user contexts (0: no DevX).
        log_max_uctx: 0x5,
        reserved_at_468: [0x1],
        crypto: 0x1,
        reserved_at_46a: [0x1],
        /// log2 of the UMEMs (0: DevX has no UMEMs).
        log_max_umem: 0x5,
        max_num_eqs: 0x10,
        reserved_at_480: [0x380],
    }
}

/// The general capability page of a QUERY_HCA_CAP answer.
pub fn general(out: View<'_, QueryHcaCapOut>) -> View<'_, CmdHcaCap> {
    out.sub(QueryHcaCapOut::capability).sub(HcaCapUnion::cmd_hca_cap)
}

const _: () = assert!(CmdHcaCap::BITS <= <HcaCapUnion as Layout>::BITS);

layout! {
    /// The RoCE capabilities page (`op_mod` type 4), as far as rdma-core's copy names it.
    pub struct RoceCap = roce_cap {
        reserved_at_0: [0x4],
        sw_r_roce_src_udp_port: 0x1,
        fl_rc_qp_when_roce_disabled: 0x1,
        fl_rc_qp_when_roce_enabled: 0x1,
        reserved_at_7: [0x17],
        qp_ts_format: 0x2,
        reserved_at_20: [0x7e0],
    }
}

layout! {
    /// The atomic capabilities page (`op_mod` type 3).
    pub struct AtomicCaps = atomic_caps {
        reserved_at_0: [0x40],
        atomic_req_8B_endianness_mode: 0x2,
        reserved_at_42: [0x4],
        supported_atomic_req_8B_endianness_mode_1: 0x1,
        reserved_at_47: [0x49],
        atomic_operations: 0x10,
        reserved_at_a0: [0x10],
        atomic_size_qp: 0x10,
        reserved_at_c0: [0x10],
        atomic_size_dc: 0x10,
        reserved_at_e0: [0x1a0],
        fetch_add_pci_atomic: 0x10,
        swap_pci_atomic: 0x10,
        compare_swap_pci_atomic: 0x10,
        reserved_at_2b0: [0x550],
    }
}

layout! {
    /// The second general capabilities page (`op_mod` type 0x20), as far as rdma-core's copy names it.
    pub struct CmdHcaCap2 = cmd_hca_cap_2 {
        reserved_at_0: [0x93],
        log_reserved_qpn_granularity: 0x5,
        reserved_at_98: [0x768],
    }
}

layout! {
    /// One flow table type's properties in the NIC flow table page
    /// (`flow_table_prop_layout`), as far as named here: what a steering user checks
    /// first (support, table size and levels, counters, destinations); the supported
    /// match fields that follow are kept reserved.
    pub struct FlowTablePropLayout = flow_table_prop_layout {
        ft_support: 0x1,
        reserved_at_1: [0x1],
        flow_counter: 0x1,
        flow_modify_en: 0x1,
        modify_root: 0x1,
        identified_miss_table_mode: 0x1,
        flow_table_modify: 0x1,
        reformat: 0x1,
        decap: 0x1,
        reserved_at_9: [0x1],
        pop_vlan: 0x1,
        push_vlan: 0x1,
        reserved_at_c: [0x1],
        pop_vlan_2: 0x1,
        push_vlan_2: 0x1,
        reformat_and_vlan_action: 0x1,
        reserved_at_10: [0x1],
        sw_owner: 0x1,
        reformat_l3_tunnel_to_l2: 0x1,
        reformat_l2_to_l3_tunnel: 0x1,
        reformat_and_modify_action: 0x1,
        reserved_at_15: [0xb],
        reserved_at_20: [0x2],
        log_max_ft_size: 0x6,
        log_max_modify_header_context: 0x8,
        max_modify_header_actions: 0x8,
        max_ft_level: 0x8,
        reserved_at_40: [0x20],
        reserved_at_60: [0x18],
        log_max_ft_num: 0x8,
        reserved_at_80: [0x10],
        log_max_flow_counter: 0x8,
        log_max_destination: 0x8,
        reserved_at_a0: [0x18],
        log_max_flow: 0x8,
        reserved_at_c0: [0x140],
    }
}

layout! {
    /// The NIC flow table capabilities page (`op_mod` type 7): receive, RDMA receive,
    /// sniffer, transmit, RDMA transmit and transmit-sniffer tables. Kernel
    /// `mlx5_ifc_flow_table_nic_cap_bits`; the ICM addresses and field-support words
    /// after the six property blocks are kept reserved.
    pub struct FlowTableNicCap = flow_table_nic_cap {
        nic_rx_multi_path_tirs: 0x1,
        nic_rx_multi_path_tirs_fts: 0x1,
        allow_sniffer_and_nic_rx_shared_tir: 0x1,
        reserved_at_3: [0x4],
        sw_owner_reformat_supported: 0x1,
        reserved_at_8: [0x18],
        encap_general_header: 0x1,
        reserved_at_21: [0xa],
        log_max_packet_reformat_context: 0x5,
        reserved_at_30: [0x6],
        max_encap_header_size: 0xa,
        reserved_at_40: [0x1c0],
        flow_table_properties_nic_receive: FlowTablePropLayout,
        flow_table_properties_nic_receive_rdma: FlowTablePropLayout,
        flow_table_properties_nic_receive_sniffer: FlowTablePropLayout,
        flow_table_properties_nic_transmit: FlowTablePropLayout,
        flow_table_properties_nic_transmit_rdma: FlowTablePropLayout,
        flow_table_properties_nic_transmit_sniffer: FlowTablePropLayout,
        reserved_at_e00: [0x7200],
    }
}
