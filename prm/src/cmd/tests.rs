//! Every layout's offsets and size against the PRM sources.
//!
//! The expected `(field, bit offset, width)` rows are those of rdma-core's
//! `providers/mlx5/mlx5_ifc.h` (commit a4ab8e8b): the offsets were computed once from
//! that header by summing the C structures' `u8 name[width]` bit widths, nested
//! structures and unions included, and are written down here; `layout!` derives its
//! own from the Rust lists, so a width mistyped there (or a field left out) moves
//! every later offset and fails. The CQ layouts, absent from rdma-core's copy, are
//! checked against offsets read off the kernel's `include/linux/mlx5/mlx5_ifc.h`.
//! Independently, every `reserved_at_<hex>` name states its own offset (the PRM
//! names reserved areas that way), and `reserved_names_state_their_offsets` checks
//! them all.

use super::*;
use crate::bits::{FieldInfo, Kind, Layout, View, ViewMut};

fn find<L: Layout>(name: &str) -> FieldInfo {
    *L::FIELDS.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("{}: no field {name}", L::NAME))
}

fn check<L: Layout>(bits: usize, rows: &[(&str, usize, usize)]) {
    assert_eq!(L::BITS, bits, "{} size", L::NAME);
    for &(name, off, width) in rows {
        let f = find::<L>(name);
        assert_eq!((f.bit_off, f.bits), (off, width), "{}.{name}", L::NAME);
    }
}

fn all_fields() -> [&'static [FieldInfo]; 73] {
    use cq::*;
    use hca_cap::*;
    use header::*;
    use mkey::*;
    use pd::*;
    use qp::*;
    use uar::*;
    [
        MboxIn::FIELDS, MboxOut::FIELDS, QueryHcaCapIn::FIELDS, QueryHcaCapOut::FIELDS,
        HcaCapUnion::FIELDS, CmdHcaCap::FIELDS, AllocPdIn::FIELDS, AllocPdOut::FIELDS,
        Cqc::FIELDS, CreateCqIn::FIELDS, CreateCqOut::FIELDS, Ads::FIELDS, Qpc::FIELDS,
        CreateQpIn::FIELDS, CreateQpOut::FIELDS, Rst2initQpIn::FIELDS, Rst2initQpOut::FIELDS,
        Init2rtrQpIn::FIELDS, Init2rtrQpOut::FIELDS, Rtr2rtsQpIn::FIELDS, Rtr2rtsQpOut::FIELDS,
        Mkc::FIELDS, CreateMkeyIn::FIELDS, CreateMkeyOut::FIELDS, Rts2rtsQpIn::FIELDS,
        Rts2rtsQpOut::FIELDS, QueryQpIn::FIELDS, QueryQpOut::FIELDS, DestroyQpIn::FIELDS,
        Qp2errIn::FIELDS, Qp2rstIn::FIELDS, DestroyCqIn::FIELDS, DeallocPdIn::FIELDS,
        DeallocPdOut::FIELDS, AllocUarIn::FIELDS, AllocUarOut::FIELDS, DeallocUarIn::FIELDS,
        DeallocUarOut::FIELDS, DestroyMkeyIn::FIELDS, DestroyMkeyOut::FIELDS, RoceCap::FIELDS,
        AtomicCaps::FIELDS, CmdHcaCap2::FIELDS, GeneralObjInCmdHdr::FIELDS,
        GeneralObjOutCmdHdr::FIELDS, uctx::Uctx::FIELDS, uctx::CreateUctxIn::FIELDS,
        uctx::CreateUctxOut::FIELDS, uctx::DestroyUctxIn::FIELDS, umem::Mtt::FIELDS, umem::Umem::FIELDS,
        umem::CreateUmemIn::FIELDS, umem::CreateUmemOut::FIELDS, umem::DestroyUmemIn::FIELDS,
        QueryCqIn::FIELDS, QueryCqOut::FIELDS, ModifyCqIn::FIELDS, FlowTablePropLayout::FIELDS,
        FlowTableNicCap::FIELDS, srq::Srqc::FIELDS, srq::CreateSrqIn::FIELDS, srq::CreateSrqOut::FIELDS,
        srq::DestroySrqIn::FIELDS, srq::QuerySrqIn::FIELDS, srq::QuerySrqOut::FIELDS, srq::ArmRqIn::FIELDS,
        xrcd::AllocXrcdIn::FIELDS, xrcd::AllocXrcdOut::FIELDS, xrcd::DeallocXrcdIn::FIELDS, xrc_srq::XrcSrqc::FIELDS,
        xrc_srq::CreateXrcSrqIn::FIELDS, xrc_srq::CreateXrcSrqOut::FIELDS, xrc_srq::DestroyXrcSrqIn::FIELDS,
    ]
}

#[test]
fn reserved_names_state_their_offsets() {
    let mut n = 0;
    for fields in all_fields() {
        for f in fields.iter().filter(|f| f.is_reserved()) {
            let hex = f.name.strip_prefix("reserved_at_").unwrap_or_else(|| panic!("odd name {}", f.name));
            let at = usize::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("odd name {}", f.name));
            assert_eq!(at, f.bit_off, "{}", f.name);
            n += 1;
        }
        // no gaps, no overlaps: each field starts where the previous ended
        for w in fields.windows(2) {
            assert_eq!(w[0].bit_off + w[0].bits, w[1].bit_off, "{} -> {}", w[0].name, w[1].name);
        }
    }
    assert!(n > 100, "only {n} reserved fields seen");
}

#[test]
fn layouts_match_mlx5_ifc() {
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_mbox_in_bits, 0x80 bits
    check::<header::MboxIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_mbox_out_bits, 0x80 bits
    check::<header::MboxOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_query_hca_cap_in_bits, 0x80 bits
    check::<hca_cap::QueryHcaCapIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("op_mod", 0x30, 0x10), ("other_function", 0x40, 0x1),
        ("function_id", 0x50, 0x10),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_query_hca_cap_out_bits, 0x8080 bits
    check::<hca_cap::QueryHcaCapOut>(0x8080, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("capability", 0x80, 0x8000),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_cmd_hca_cap_bits, 0x800 bits
    check::<hca_cap::CmdHcaCap>(0x800, &[
        ("access_other_hca_roce", 0x0, 0x1), ("vhca_resource_manager", 0x1f, 0x1),
        ("hca_cap_2", 0x20, 0x1), ("vhca_id", 0x30, 0x10), ("qp_data_in_order", 0x62, 0x1),
        ("log_dma_mmo_max_size", 0x6b, 0x5), ("log_max_srq_sz", 0x80, 0x8),
        ("log_max_qp_sz", 0x88, 0x8), ("isolate_vl_tc_new", 0x93, 0x1),
        ("prio_tag_required", 0x98, 0x1), ("log_max_qp", 0x9b, 0x5), ("log_max_srq", 0xab, 0x5),
        ("log_max_cq_sz", 0xc8, 0x8), ("log_max_cq", 0xdb, 0x5), ("log_max_eq_sz", 0xe0, 0x8),
        ("relaxed_ordering_write", 0xe8, 0x1), ("log_max_mkey", 0xea, 0x6),
        ("tunneled_atomic", 0xf0, 0x1), ("log_max_eq", 0xfc, 0x4), ("max_indirection", 0x100, 0x8),
        ("fixed_buffer_size", 0x108, 0x1), ("log_max_mrw_sz", 0x109, 0x7),
        ("log_max_bsf_list_size", 0x112, 0x6), ("umr_extended_translation_offset", 0x118, 0x1),
        ("null_mkey", 0x119, 0x1), ("log_max_klm_list_size", 0x11a, 0x6),
        ("qpc_extension", 0x122, 0x1), ("log_max_ra_req_dc", 0x12a, 0x6),
        ("log_max_ra_res_dc", 0x13a, 0x6), ("sig_crc64_xp10", 0x147, 0x1),
        ("sig_crc32c", 0x148, 0x1), ("log_max_ra_req_qp", 0x14a, 0x6),
        ("rts2rts_qp_udp_sport", 0x151, 0x1), ("rts2rts_lag_tx_port_affinity", 0x152, 0x1),
        ("dma_mmo_sq", 0x153, 0x1), ("log_max_ra_res_qp", 0x15a, 0x6), ("end_pad", 0x160, 0x1),
        ("cc_query_allowed", 0x161, 0x1), ("cc_modify_allowed", 0x162, 0x1),
        ("start_pad", 0x163, 0x1), ("cache_line_128byte", 0x164, 0x1),
        ("gid_table_size_ro", 0x165, 0x1), ("pkey_table_size_ro", 0x166, 0x1),
        ("rts2rts_qp_counters_set_id", 0x169, 0x1), ("rts2rts_qp_dscp", 0x16a, 0x1),
        ("qcam_reg", 0x16f, 0x1), ("gid_table_size", 0x170, 0x10), ("out_of_seq_cnt", 0x180, 0x1),
        ("vport_counters", 0x181, 0x1), ("retransmission_q_counters", 0x182, 0x1),
        ("debug", 0x183, 0x1), ("modify_rq_counters_set_id", 0x184, 0x1),
        ("rq_delay_drop", 0x185, 0x1), ("max_qp_cnt", 0x186, 0xa),
        ("pkey_table_size", 0x190, 0x10), ("vport_group_manager", 0x1a0, 0x1),
        ("vhca_group_manager", 0x1a1, 0x1), ("ib_virt", 0x1a2, 0x1), ("eth_virt", 0x1a3, 0x1),
        ("vnic_env_queue_counters", 0x1a4, 0x1), ("ets", 0x1a5, 0x1),
        ("nic_flow_table", 0x1a6, 0x1), ("eswitch_manager", 0x1a7, 0x1),
        ("device_memory", 0x1a8, 0x1), ("mcam_reg", 0x1a9, 0x1), ("pcam_reg", 0x1aa, 0x1),
        ("local_ca_ack_delay", 0x1ab, 0x5), ("port_module_event", 0x1b0, 0x1),
        ("enhanced_retransmission_q_counters", 0x1b1, 0x1), ("port_checks", 0x1b2, 0x1),
        ("pulse_gen_control", 0x1b3, 0x1), ("disable_link_up_by_init_hca", 0x1b4, 0x1),
        ("beacon_led", 0x1b5, 0x1), ("port_type", 0x1b6, 0x2), ("num_ports", 0x1b8, 0x8),
        ("pps", 0x1c1, 0x1), ("pps_modify", 0x1c2, 0x1), ("log_max_msg", 0x1c3, 0x5),
        ("multi_path_xrc_rdma", 0x1c8, 0x1), ("multi_path_dc_rdma", 0x1c9, 0x1),
        ("multi_path_rc_rdma", 0x1ca, 0x1), ("max_tc", 0x1cc, 0x4),
        ("general_notification_event", 0x1d2, 0x1), ("multi_prio_sq", 0x1d3, 0x1),
        ("stat_rate_support", 0x1e0, 0x10), ("sig_block_4048", 0x1f0, 0x1),
        ("cqe_version", 0x1fc, 0x4), ("compact_address_vector", 0x200, 0x1),
        ("eth_striding_wq", 0x201, 0x1), ("ipoib_enhanced_offloads", 0x203, 0x1),
        ("ipoib_basic_offloads", 0x204, 0x1), ("ib_striding_wq", 0x205, 0x1),
        ("umr_fence", 0x20a, 0x2), ("dc_connect_qp", 0x20d, 0x1), ("cmdif_checksum", 0x210, 0x2),
        ("sigerr_cqe", 0x212, 0x1), ("wq_signature", 0x214, 0x1), ("sctr_data_cqe", 0x215, 0x1),
        ("sho", 0x217, 0x1), ("tph", 0x218, 0x1), ("rf", 0x219, 0x1), ("dct", 0x21a, 0x1),
        ("qos", 0x21b, 0x1), ("eth_net_offloads", 0x21c, 0x1), ("roce", 0x21d, 0x1),
        ("atomic", 0x21e, 0x1), ("extended_retry_count", 0x21f, 0x1), ("cq_oi", 0x220, 0x1),
        ("cq_resize", 0x221, 0x1), ("cq_moderation", 0x222, 0x1),
        ("cq_period_mode_modify", 0x223, 0x1), ("cq_invalidate", 0x224, 0x1),
        ("cq_eq_remap", 0x226, 0x1), ("pg", 0x227, 0x1), ("block_lb_mc", 0x228, 0x1),
        ("exponential_backoff", 0x229, 0x1), ("scqe_break_moderation", 0x22a, 0x1),
        ("cq_period_start_from_cqe", 0x22b, 0x1), ("cd", 0x22c, 0x1), ("atm", 0x22d, 0x1),
        ("apm", 0x22e, 0x1), ("vector_calc", 0x22f, 0x1), ("umr_ptr_rlkey", 0x230, 0x1),
        ("imaicl", 0x231, 0x1), ("qp_packet_based", 0x232, 0x1), ("qkv", 0x236, 0x1),
        ("pkv", 0x237, 0x1), ("set_deth_sqpn", 0x238, 0x1), ("initiator_src_dct", 0x23a, 0x1),
        ("dc_v2", 0x23b, 0x1), ("xrc", 0x23c, 0x1), ("ud", 0x23d, 0x1), ("uc", 0x23e, 0x1),
        ("rc", 0x23f, 0x1), ("uar_4k", 0x240, 0x1), ("fl_rc_qp_when_roce_disabled", 0x248, 0x1),
        ("uar_sz", 0x24a, 0x6), ("umem_uid_0", 0x252, 0x1), ("log_max_dc_cnak_qps", 0x253, 0x5),
        ("log_pg_sz", 0x258, 0x8), ("bf", 0x260, 0x1), ("driver_version", 0x261, 0x1),
        ("pad_tx_eth_packet", 0x262, 0x1), ("query_driver_version", 0x263, 0x1),
        ("max_qp_retry_freq", 0x264, 0x1), ("qp_by_name", 0x265, 0x1),
        ("mkey_by_name", 0x266, 0x1), ("suspend_qp_uc", 0x268, 0x1), ("suspend_qp_ud", 0x269, 0x1),
        ("suspend_qp_rc", 0x26a, 0x1), ("log_bf_reg_size", 0x26b, 0x5), ("lag_dct", 0x276, 0x2),
        ("lag_tx_port_affinity", 0x278, 0x1), ("lag_master", 0x27b, 0x1),
        ("num_lag_ports", 0x27c, 0x4), ("num_of_diagnostic_counters", 0x280, 0x10),
        ("max_wqe_sz_sq", 0x290, 0x10), ("max_wqe_sz_rq", 0x2b0, 0x10),
        ("max_flow_counter_31_16", 0x2c0, 0x10), ("max_wqe_sz_sq_dc", 0x2d0, 0x10),
        ("max_qp_mcg", 0x2e7, 0x19), ("mlnx_tag_ethertype", 0x300, 0x10),
        ("log_max_mcg", 0x318, 0x8), ("log_max_transport_domain", 0x323, 0x5),
        ("log_max_pd", 0x32b, 0x5), ("dp_ordering_ooo_all_ud", 0x330, 0x1),
        ("dp_ordering_ooo_all_uc", 0x331, 0x1), ("dp_ordering_ooo_all_xrc", 0x332, 0x1),
        ("dp_ordering_ooo_all_dc", 0x333, 0x1), ("dp_ordering_ooo_all_rc", 0x334, 0x1),
        ("log_max_xrcd", 0x33b, 0x5), ("nic_receive_steering_discard", 0x340, 0x1),
        ("receive_discard_vport_down", 0x341, 0x1), ("transmit_discard_vport_down", 0x342, 0x1),
        ("eq_overrun_count", 0x343, 0x1), ("invalid_command_count", 0x345, 0x1),
        ("quota_exceeded_count", 0x346, 0x1), ("log_max_flow_counter_bulk", 0x348, 0x8),
        ("max_flow_counter_15_0", 0x350, 0x10), ("modify_tis", 0x360, 0x1),
        ("log_max_rq", 0x363, 0x5), ("log_max_sq", 0x36b, 0x5), ("log_max_tir", 0x373, 0x5),
        ("log_max_tis", 0x37b, 0x5), ("basic_cyclic_rcv_wqe", 0x380, 0x1),
        ("log_max_rmp", 0x383, 0x5), ("log_max_rqt", 0x38b, 0x5), ("log_max_rqt_size", 0x393, 0x5),
        ("log_max_tis_per_sq", 0x39b, 0x5), ("ext_stride_num_range", 0x3a0, 0x1),
        ("log_max_stride_sz_rq", 0x3a3, 0x5), ("log_min_stride_sz_rq", 0x3ab, 0x5),
        ("log_max_stride_sz_sq", 0x3b3, 0x5), ("log_min_stride_sz_sq", 0x3bb, 0x5),
        ("hairpin", 0x3c0, 0x1), ("log_max_hairpin_queues", 0x3c3, 0x5),
        ("log_max_hairpin_wq_data_sz", 0x3cb, 0x5), ("log_max_hairpin_num_packets", 0x3d3, 0x5),
        ("log_max_wq_sz", 0x3db, 0x5), ("nic_vport_change_event", 0x3e0, 0x1),
        ("disable_local_lb_uc", 0x3e1, 0x1), ("disable_local_lb_mc", 0x3e2, 0x1),
        ("log_min_hairpin_wq_data_sz", 0x3e3, 0x5), ("log_max_vlan_list", 0x3eb, 0x5),
        ("aes_xts_single_block_le_tweak", 0x3f1, 0x1),
        ("aes_xts_multi_block_be_tweak", 0x3f2, 0x1), ("log_max_current_mc_list", 0x3f3, 0x5),
        ("log_max_current_uc_list", 0x3fb, 0x5), ("general_obj_types", 0x400, 0x40),
        ("sq_ts_format", 0x440, 0x2), ("rq_ts_format", 0x442, 0x2),
        ("steering_format_version", 0x444, 0x4), ("create_qp_start_hint", 0x448, 0x18),
        ("log_max_uctx", 0x463, 0x5), ("crypto", 0x469, 0x1), ("log_max_umem", 0x46b, 0x5),
        ("max_num_eqs", 0x470, 0x10),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_alloc_pd_in_bits, 0x80 bits
    check::<pd::AllocPdIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_alloc_pd_out_bits, 0x80 bits
    check::<pd::AllocPdOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("pd", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_ads_bits, 0x160 bits
    check::<qp::Ads>(0x160, &[
        ("fl", 0x0, 0x1), ("free_ar", 0x1, 0x1), ("pkey_index", 0x10, 0x10), ("grh", 0x28, 0x1),
        ("mlid", 0x29, 0x7), ("rlid", 0x30, 0x10), ("ack_timeout", 0x40, 0x5),
        ("src_addr_index", 0x48, 0x8), ("stat_rate", 0x54, 0x4), ("hop_limit", 0x58, 0x8),
        ("tclass", 0x64, 0x8), ("flow_label", 0x6c, 0x14), ("rgid_rip", 0x80, 0x80),
        ("f_dscp", 0x104, 0x1), ("f_ecn", 0x105, 0x1), ("f_eth_prio", 0x107, 0x1),
        ("ecn", 0x108, 0x2), ("dscp", 0x10a, 0x6), ("udp_sport", 0x110, 0x10),
        ("dei_cfi", 0x120, 0x1), ("eth_prio", 0x121, 0x3), ("sl", 0x124, 0x4),
        ("vhca_port_num", 0x128, 0x8), ("rmac_47_32", 0x130, 0x10), ("rmac_31_0", 0x140, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_qpc_bits, 0x740 bits
    check::<qp::Qpc>(0x740, &[
        ("state", 0x0, 0x4), ("lag_tx_port_affinity", 0x4, 0x4), ("st", 0x8, 0x8),
        ("isolate_vl_tc", 0x12, 0x1), ("pm_state", 0x13, 0x2), ("req_e2e_credit_mode", 0x16, 0x2),
        ("offload_type", 0x18, 0x4), ("end_padding_mode", 0x1c, 0x2), ("wq_signature", 0x20, 0x1),
        ("block_lb_mc", 0x21, 0x1), ("atomic_like_write_en", 0x22, 0x1),
        ("latency_sensitive", 0x23, 0x1), ("drain_sigerr", 0x25, 0x1), ("pd", 0x28, 0x18),
        ("mtu", 0x40, 0x3), ("log_msg_max", 0x43, 0x5), ("log_rq_size", 0x49, 0x4),
        ("log_rq_stride", 0x4d, 0x3), ("no_sq", 0x50, 0x1), ("log_sq_size", 0x51, 0x4),
        ("ts_format", 0x58, 0x2), ("data_in_order", 0x5a, 0x1), ("rlky", 0x5b, 0x1),
        ("ulp_stateless_offload_mode", 0x5c, 0x4), ("counter_set_id", 0x60, 0x8),
        ("uar_page", 0x68, 0x18), ("user_index", 0x88, 0x18), ("log_page_size", 0xa3, 0x5),
        ("remote_qpn", 0xa8, 0x18), ("primary_address_path", 0xc0, 0x160),
        ("secondary_address_path", 0x220, 0x160), ("log_ack_req_freq", 0x380, 0x4),
        ("log_sra_max", 0x388, 0x3), ("retry_count", 0x38d, 0x3), ("rnr_retry", 0x390, 0x3),
        ("fre", 0x394, 0x1), ("cur_rnr_retry", 0x395, 0x3), ("cur_retry_count", 0x398, 0x3),
        ("next_send_psn", 0x3c8, 0x18), ("cqn_snd", 0x3e8, 0x18), ("deth_sqpn", 0x408, 0x18),
        ("last_acked_psn", 0x448, 0x18), ("ssn", 0x468, 0x18), ("log_rra_max", 0x488, 0x3),
        ("atomic_mode", 0x48c, 0x4), ("rre", 0x490, 0x1), ("rwe", 0x491, 0x1), ("rae", 0x492, 0x1),
        ("page_offset", 0x494, 0x6), ("cd_slave_receive", 0x49d, 0x1),
        ("cd_slave_send", 0x49e, 0x1), ("cd_master", 0x49f, 0x1), ("min_rnr_nak", 0x4a3, 0x5),
        ("next_rcv_psn", 0x4a8, 0x18), ("xrcd", 0x4c8, 0x18), ("cqn_rcv", 0x4e8, 0x18),
        ("dbr_addr", 0x500, 0x40), ("q_key", 0x540, 0x20), ("rq_type", 0x565, 0x3),
        ("srqn_rmpn_xrqn", 0x568, 0x18), ("rmsn", 0x588, 0x18),
        ("hw_sq_wqebb_counter", 0x5a0, 0x10), ("sw_sq_wqebb_counter", 0x5b0, 0x10),
        ("hw_rq_counter", 0x5c0, 0x20), ("sw_rq_counter", 0x5e0, 0x20), ("cgs", 0x62f, 0x1),
        ("cs_req", 0x630, 0x8), ("cs_res", 0x638, 0x8), ("dc_access_key", 0x640, 0x40),
        ("dbr_umem_valid", 0x683, 0x1), ("dbr_umem_id", 0x720, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_create_qp_in_bits, 0x880 bits
    check::<qp::CreateQpIn>(0x880, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10),
        ("opt_param_mask", 0x80, 0x20), ("qpc", 0xc0, 0x740),
        // wq_umem_offset: the kernel's include/linux/mlx5/mlx5_ifc.h (reserved in rdma-core's)
        ("wq_umem_offset", 0x800, 0x40), ("wq_umem_id", 0x840, 0x20),
        ("wq_umem_valid", 0x860, 0x1),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_create_qp_out_bits, 0x80 bits
    check::<qp::CreateQpOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("qpn", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_rst2init_qp_in_bits, 0x880 bits
    check::<qp::Rst2initQpIn>(0x880, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("qpn", 0x48, 0x18),
        ("opt_param_mask", 0x80, 0x20), ("qpc", 0xc0, 0x740),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_init2rtr_qp_in_bits, 0x880 bits
    check::<qp::Init2rtrQpIn>(0x880, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("qpn", 0x48, 0x18),
        ("opt_param_mask", 0x80, 0x20), ("qpc", 0xc0, 0x740),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_rtr2rts_qp_in_bits, 0x880 bits
    check::<qp::Rtr2rtsQpIn>(0x880, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("qpn", 0x48, 0x18),
        ("opt_param_mask", 0x80, 0x20), ("qpc", 0xc0, 0x740),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_rtr2rts_qp_out_bits, 0x80 bits
    check::<qp::Rtr2rtsQpOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_mkc_bits, 0x200 bits
    check::<mkey::Mkc>(0x200, &[
        ("free", 0x1, 0x1), ("access_mode_4_2", 0x3, 0x3), ("relaxed_ordering_write", 0xd, 0x1),
        ("small_fence_on_rdma_read_response", 0xf, 0x1), ("umr_en", 0x10, 0x1), ("a", 0x11, 0x1),
        ("rw", 0x12, 0x1), ("rr", 0x13, 0x1), ("lw", 0x14, 0x1), ("lr", 0x15, 0x1),
        ("access_mode_1_0", 0x16, 0x2), ("qpn", 0x20, 0x18), ("mkey_7_0", 0x38, 0x8),
        ("length64", 0x60, 0x1), ("bsf_en", 0x61, 0x1), ("sync_umr", 0x62, 0x1),
        ("expected_sigerr_count", 0x65, 0x1), ("en_rinval", 0x67, 0x1), ("pd", 0x68, 0x18),
        ("start_addr", 0x80, 0x40), ("len", 0xc0, 0x40), ("bsf_octword_size", 0x100, 0x20),
        ("translations_octword_size", 0x1a0, 0x20), ("relaxed_ordering_read", 0x1d9, 0x1),
        ("log_page_size", 0x1db, 0x5), ("crypto_en", 0x1e3, 0x2),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_create_mkey_in_bits, 0x880 bits
    check::<mkey::CreateMkeyIn>(0x880, &[
        ("opcode", 0x0, 0x10), ("op_mod", 0x30, 0x10), ("pg_access", 0x60, 0x1),
        ("mkey_umem_valid", 0x61, 0x1), ("memory_key_mkey_entry", 0x80, 0x200),
        ("translations_octword_actual_size", 0x300, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_create_mkey_out_bits, 0x80 bits
    check::<mkey::CreateMkeyOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("mkey_index", 0x48, 0x18),
    ]);
}

/// The second batch: the remaining QP transitions and queries, destroys, UARs, the
/// RoCE/atomic/cap2 capability pages and the general-object headers.
#[test]
fn more_layouts_match_mlx5_ifc() {
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_rts2rts_qp_in_bits, 0xe80 bits
    check::<qp::Rts2rtsQpIn>(0xe80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("qpc_ext", 0x40, 0x1),
        ("qpn", 0x48, 0x18), ("opt_param_mask", 0x80, 0x20), ("qpc", 0xc0, 0x740),
        ("opt_param_mask_95_32", 0x840, 0x40), ("qpc_data_ext", 0x880, 0x600),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_rts2rts_qp_out_bits, 0x80 bits
    check::<qp::Rts2rtsQpOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_query_qp_in_bits, 0x80 bits
    check::<qp::QueryQpIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("op_mod", 0x30, 0x10), ("qpn", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_query_qp_out_bits, 0x880 bits
    check::<qp::QueryQpOut>(0x880, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("opt_param_mask", 0x80, 0x20),
        ("qpc", 0xc0, 0x740),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_destroy_qp_in_bits, 0x80 bits
    check::<qp::DestroyQpIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("qpn", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_destroy_cq_in_bits, 0x80 bits
    check::<cq::DestroyCqIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("cqn", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_dealloc_pd_in_bits, 0x80 bits
    check::<pd::DeallocPdIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("pd", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_dealloc_pd_out_bits, 0x80 bits
    check::<pd::DeallocPdOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_alloc_uar_in_bits, 0x80 bits
    check::<uar::AllocUarIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("op_mod", 0x30, 0x10),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_alloc_uar_out_bits, 0x80 bits
    check::<uar::AllocUarOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("uar", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_dealloc_uar_in_bits, 0x80 bits
    check::<uar::DeallocUarIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("op_mod", 0x30, 0x10), ("uar", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_dealloc_uar_out_bits, 0x80 bits
    check::<uar::DeallocUarOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_destroy_mkey_in_bits, 0x80 bits
    check::<mkey::DestroyMkeyIn>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10),
        ("mkey_index", 0x48, 0x18),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_destroy_mkey_out_bits, 0x80 bits
    check::<mkey::DestroyMkeyOut>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_roce_cap_bits, 0x800 bits
    check::<hca_cap::RoceCap>(0x800, &[
        ("sw_r_roce_src_udp_port", 0x4, 0x1), ("fl_rc_qp_when_roce_disabled", 0x5, 0x1),
        ("fl_rc_qp_when_roce_enabled", 0x6, 0x1), ("qp_ts_format", 0x1e, 0x2),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_atomic_caps_bits, 0x800 bits
    check::<hca_cap::AtomicCaps>(0x800, &[
        ("atomic_req_8B_endianness_mode", 0x40, 0x2),
        ("supported_atomic_req_8B_endianness_mode_1", 0x46, 0x1),
        ("atomic_operations", 0x90, 0x10), ("atomic_size_qp", 0xb0, 0x10),
        ("atomic_size_dc", 0xd0, 0x10), ("fetch_add_pci_atomic", 0x280, 0x10),
        ("swap_pci_atomic", 0x290, 0x10), ("compare_swap_pci_atomic", 0x2a0, 0x10),
    ]);
    // The kernel's include/linux/mlx5/mlx5_ifc.h (6.1): struct
    // mlx5_ifc_flow_table_prop_layout_bits, 0x200 bits (six of them fill 0x200..0xe00 of
    // the NIC page, where reserved_at_e00 follows the transmit sniffer's)
    check::<hca_cap::FlowTablePropLayout>(0x200, &[
        ("ft_support", 0x0, 0x1), ("flow_counter", 0x2, 0x1), ("flow_modify_en", 0x3, 0x1),
        ("modify_root", 0x4, 0x1), ("identified_miss_table_mode", 0x5, 0x1), ("flow_table_modify", 0x6, 0x1),
        ("reformat", 0x7, 0x1), ("decap", 0x8, 0x1), ("pop_vlan", 0xa, 0x1), ("push_vlan", 0xb, 0x1),
        ("pop_vlan_2", 0xd, 0x1), ("push_vlan_2", 0xe, 0x1), ("reformat_and_vlan_action", 0xf, 0x1),
        ("sw_owner", 0x11, 0x1), ("reformat_l3_tunnel_to_l2", 0x12, 0x1), ("reformat_l2_to_l3_tunnel", 0x13, 0x1),
        ("reformat_and_modify_action", 0x14, 0x1), ("log_max_ft_size", 0x22, 0x6),
        ("log_max_modify_header_context", 0x28, 0x8), ("max_modify_header_actions", 0x30, 0x8),
        ("max_ft_level", 0x38, 0x8), ("log_max_ft_num", 0x78, 0x8), ("log_max_flow_counter", 0x90, 0x8),
        ("log_max_destination", 0x98, 0x8), ("log_max_flow", 0xb8, 0x8),
    ]);
    // The kernel's struct mlx5_ifc_flow_table_nic_cap_bits (the 0x8000-bit union member)
    check::<hca_cap::FlowTableNicCap>(0x8000, &[
        ("nic_rx_multi_path_tirs", 0x0, 0x1), ("nic_rx_multi_path_tirs_fts", 0x1, 0x1),
        ("allow_sniffer_and_nic_rx_shared_tir", 0x2, 0x1), ("sw_owner_reformat_supported", 0x7, 0x1),
        ("encap_general_header", 0x20, 0x1), ("log_max_packet_reformat_context", 0x2b, 0x5),
        ("max_encap_header_size", 0x36, 0xa), ("flow_table_properties_nic_receive", 0x200, 0x200),
        ("flow_table_properties_nic_receive_rdma", 0x400, 0x200),
        ("flow_table_properties_nic_receive_sniffer", 0x600, 0x200),
        ("flow_table_properties_nic_transmit", 0x800, 0x200),
        ("flow_table_properties_nic_transmit_rdma", 0xa00, 0x200),
        ("flow_table_properties_nic_transmit_sniffer", 0xc00, 0x200),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_cmd_hca_cap_2_bits, 0x800 bits
    check::<hca_cap::CmdHcaCap2>(0x800, &[
        ("log_reserved_qpn_granularity", 0x93, 0x5),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_general_obj_in_cmd_hdr_bits, 0x80 bits
    check::<header::GeneralObjInCmdHdr>(0x80, &[
        ("opcode", 0x0, 0x10), ("uid", 0x10, 0x10), ("obj_type", 0x30, 0x10),
        ("obj_id", 0x40, 0x20), ("log_obj_range", 0x63, 0x5),
    ]);
    // rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_general_obj_out_cmd_hdr_bits, 0x80 bits
    check::<header::GeneralObjOutCmdHdr>(0x80, &[
        ("status", 0x0, 0x8), ("syndrome", 0x20, 0x20), ("obj_id", 0x40, 0x20),
    ]);
}

/// Kernel include/linux/mlx5/mlx5_ifc.h (absent from rdma-core's copy): 2ERR and 2RST
/// name the QP at bits 0x48..0x60, after reserved_at_40[0x8]; both are 16 bytes.
#[test]
fn qp_2err_2rst_match_kernel() {
    check::<qp::Qp2errIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("qpn", 0x48, 0x18)]);
    check::<qp::Qp2rstIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("qpn", 0x48, 0x18)]);
}

/// The `uid` DevX writes into every inbox sits at 0x10 (rdma-core's older copy calls
/// those bits reserved in a few commands; the kernel's mlx5_ifc.h names them `uid`).
#[test]
fn uid_is_at_0x10_everywhere() {
    assert_eq!(find::<header::MboxIn>("uid").bit_off, 0x10);
    assert_eq!(find::<hca_cap::QueryHcaCapIn>("uid").bit_off, 0x10);
    assert_eq!(find::<mkey::CreateMkeyIn>("uid").bit_off, 0x10);
    assert_eq!(find::<cq::CreateCqIn>("uid").bit_off, 0x10);
    assert_eq!(find::<qp::CreateQpIn>("uid").bit_off, 0x10);
}

/// Kernel include/linux/mlx5/mlx5_ifc.h: the reserved names around each field give
/// its offset (log_cq_size after reserved_at_60[0x3], uar_page before reserved_at_80,
/// c_eqn after reserved_at_a0[0x18], log_page_size after reserved_at_c0[0x3],
/// dbr_addr after reserved_at_180[0x40]; cqc is 64 bytes; create_cq_in ends at
/// reserved_at_2e1 + 0x59f = 0x880).
#[test]
fn cq_layouts_match_kernel() {
    check::<cq::Cqc>(0x200, &[
        ("status", 0x0, 0x4), ("dbr_umem_valid", 0x6, 0x1), ("cqe_sz", 0x8, 0x3), ("cc", 0xb, 0x1),
        ("oi", 0xe, 0x1), ("cq_period_mode", 0xf, 0x2), ("cqe_comp_en", 0x11, 0x1),
        ("mini_cqe_res_format", 0x12, 0x2), ("st", 0x14, 0x4), ("dbr_umem_id", 0x20, 0x20),
        ("page_offset", 0x54, 0x6), ("log_cq_size", 0x63, 0x5), ("uar_page", 0x68, 0x18),
        ("cq_period", 0x84, 0xc), ("cq_max_count", 0x90, 0x10), ("c_eqn", 0xb8, 0x8),
        ("log_page_size", 0xc3, 0x5), ("last_notified_index", 0x108, 0x18),
        ("last_solicit_index", 0x128, 0x18), ("consumer_counter", 0x148, 0x18),
        ("producer_counter", 0x168, 0x18), ("dbr_addr", 0x1c0, 0x40),
    ]);
    check::<cq::CreateCqIn>(0x880, &[
        ("opcode", 0, 0x10), ("op_mod", 0x30, 0x10), ("cq_context", 0x80, 0x200),
        ("cq_umem_offset", 0x280, 0x40), ("cq_umem_id", 0x2c0, 0x20), ("cq_umem_valid", 0x2e0, 1),
    ]);
    check::<cq::CreateCqOut>(0x80, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("cqn", 0x48, 0x18)]);
    assert_eq!(find::<cq::CreateCqIn>("cq_context").kind, Kind::Sub("cqc"));
    // query_cq_in / query_cq_out (context after reserved_at_40[0x40], then
    // reserved_at_280[0x600] before pas[]) and modify_cq_in (cqn after
    // reserved_at_40[0x8], the 32-bit field select, the context at 0x80, cq_umem_valid
    // after reserved_at_280[0x60]).
    check::<cq::QueryCqIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("cqn", 0x48, 0x18)]);
    check::<cq::QueryCqOut>(0x880, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("cq_context", 0x80, 0x200)]);
    check::<cq::ModifyCqIn>(0x880, &[
        ("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("cqn", 0x48, 0x18),
        ("modify_field_select", 0x60, 0x20), ("cq_context", 0x80, 0x200), ("cq_umem_valid", 0x2e0, 1),
    ]);
}

/// Kernel include/linux/mlx5/mlx5_ifc.h: mlx5_ifc_srqc_bits (64 bytes: log_rq_stride
/// after reserved_at_24[0x1], cqn after reserved_at_46[0x2], pd after reserved_at_c0[0x8],
/// lwm and wqe_cnt at 0xe0, dbr_addr after reserved_at_100[0x40]); create_srq_in and
/// query_srq_out carry it at 0x80 with reserved_at_280[0x600] before pas[];
/// destroy_srq_in / query_srq_in name the SRQ after reserved_at_40[0x8]; arm_rq_in has
/// srq_number there and lwm after reserved_at_60[0x10].
#[test]
fn srq_layouts_match_kernel() {
    check::<srq::Srqc>(0x200, &[
        ("state", 0, 4), ("log_srq_size", 4, 4), ("wq_signature", 0x20, 1), ("rlky", 0x23, 1),
        ("log_rq_stride", 0x25, 3), ("xrcd", 0x28, 0x18), ("page_offset", 0x40, 6), ("cqn", 0x48, 0x18),
        ("log_page_size", 0x82, 6), ("pd", 0xc8, 0x18), ("lwm", 0xe0, 0x10), ("wqe_cnt", 0xf0, 0x10),
        ("dbr_addr", 0x140, 0x40),
    ]);
    check::<srq::CreateSrqIn>(0x880, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("srq_context_entry", 0x80, 0x200)]);
    check::<srq::CreateSrqOut>(0x80, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("srqn", 0x48, 0x18)]);
    check::<srq::DestroySrqIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("srqn", 0x48, 0x18)]);
    check::<srq::QuerySrqIn>(0x80, &[("srqn", 0x48, 0x18)]);
    check::<srq::QuerySrqOut>(0x880, &[("srq_context_entry", 0x80, 0x200)]);
    check::<srq::ArmRqIn>(0x80, &[("op_mod", 0x30, 0x10), ("srq_number", 0x48, 0x18), ("lwm", 0x70, 0x10)]);
    assert_eq!((opcode::CREATE_SRQ, opcode::DESTROY_SRQ, opcode::QUERY_SRQ, opcode::ARM_RQ), (0x700, 0x701, 0x702, 0x703));
}

/// Kernel include/linux/mlx5/mlx5_ifc.h: mlx5_ifc_xrc_srqc_bits (64 bytes:
/// basic_cyclic_rcv_wqe before log_rq_stride, dbr_umem_valid before cqn, user_index at
/// 0x88 after log_page_size, db_record_addr_h/_l after reserved_at_100[0x40]),
/// create_xrc_srq_in (the context at 0x80, xrc_srq_umem_valid at 0x2e0, pas[] after
/// reserved_at_300[0x580]), create_xrc_srq_out / destroy_xrc_srq_in (xrc_srqn after
/// reserved_at_40[0x8]); alloc_xrcd_out / dealloc_xrcd_in (xrcd there too). Opcodes from
/// enum mlx5_cmd_op (rdma-core's copy lists them as well).
#[test]
fn xrc_layouts_match_kernel() {
    check::<xrc_srq::XrcSrqc>(0x200, &[
        ("state", 0, 4), ("log_xrc_srq_size", 4, 4), ("wq_signature", 0x20, 1), ("basic_cyclic_rcv_wqe", 0x24, 1),
        ("log_rq_stride", 0x25, 3), ("xrcd", 0x28, 0x18), ("page_offset", 0x40, 6), ("dbr_umem_valid", 0x47, 1),
        ("cqn", 0x48, 0x18), ("user_index_equal_xrc_srqn", 0x80, 1), ("log_page_size", 0x82, 6),
        ("user_index", 0x88, 0x18), ("pd", 0xc8, 0x18), ("lwm", 0xe0, 0x10), ("wqe_cnt", 0xf0, 0x10),
        ("db_record_addr", 0x140, 0x40),
    ]);
    check::<xrc_srq::CreateXrcSrqIn>(0x880, &[
        ("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("xrc_srq_context_entry", 0x80, 0x200),
        ("xrc_srq_umem_valid", 0x2e0, 1),
    ]);
    check::<xrc_srq::CreateXrcSrqOut>(0x80, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("xrc_srqn", 0x48, 0x18)]);
    check::<xrc_srq::DestroyXrcSrqIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("xrc_srqn", 0x48, 0x18)]);
    check::<xrcd::AllocXrcdIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10)]);
    check::<xrcd::AllocXrcdOut>(0x80, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("xrcd", 0x48, 0x18)]);
    check::<xrcd::DeallocXrcdIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("xrcd", 0x48, 0x18)]);
    assert_eq!((opcode::CREATE_XRC_SRQ, opcode::DESTROY_XRC_SRQ, opcode::ALLOC_XRCD, opcode::DEALLOC_XRCD),
               (0x705, 0x706, 0x80e, 0x80f));
}

/// rdma-core providers/mlx5/mlx5_ifc.h: struct mlx5_ifc_mtt_bits (0x40 bits),
/// mlx5_ifc_umem_bits (0x100 bits before the mtt[] tail), mlx5_ifc_create_umem_in_bits
/// (0x80 + umem), mlx5_ifc_create_umem_out_bits, mlx5_ifc_destroy_umem_in_bits.
#[test]
fn umem_layouts_match_mlx5_ifc() {
    check::<umem::Mtt>(0x40, &[("ptag_63_32", 0, 0x20), ("ptag_31_8", 0x20, 0x18), ("wr_en", 0x3e, 1), ("rd_en", 0x3f, 1)]);
    check::<umem::Umem>(0x100, &[("log_page_size", 0x9b, 0x5), ("page_offset", 0xa0, 0x20), ("num_of_mtt", 0xc0, 0x40)]);
    check::<umem::CreateUmemIn>(0x180, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("op_mod", 0x30, 0x10), ("umem", 0x80, 0x100)]);
    check::<umem::CreateUmemOut>(0x80, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("umem_id", 0x48, 0x18)]);
    check::<umem::DestroyUmemIn>(0x80, &[("opcode", 0, 0x10), ("uid", 0x10, 0x10), ("umem_id", 0x48, 0x18)]);
    // An MTT entry holds the page address with bits 31..8 in its second dword.
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&0x7fu32.to_be_bytes());
    b[4..].copy_from_slice(&(0x1234_5000u32 | 0x3).to_be_bytes());
    assert_eq!(umem::Mtt::addr(&View::<umem::Mtt>::new(&b).unwrap()), 0x7f_1234_5000);
}

/// Kernel include/linux/mlx5/mlx5_ifc.h: mlx5_ifc_uctx_bits (cap[0x20] then
/// reserved_at_20[0x160]), create_uctx_in (header 0x80 + uctx), create_uctx_out (uid
/// after reserved_at_40[0x10]), destroy_uctx_in (uid after reserved_at_40[0x10]).
#[test]
fn uctx_layouts_match_kernel() {
    check::<uctx::Uctx>(0x180, &[("cap", 0, 0x20)]);
    check::<uctx::CreateUctxIn>(0x200, &[("opcode", 0, 0x10), ("op_mod", 0x30, 0x10), ("uctx", 0x80, 0x180)]);
    check::<uctx::CreateUctxOut>(0x80, &[("status", 0, 8), ("syndrome", 0x20, 0x20), ("uid", 0x50, 0x10)]);
    check::<uctx::DestroyUctxIn>(0x80, &[("opcode", 0, 0x10), ("op_mod", 0x30, 0x10), ("uid", 0x50, 0x10)]);
}

/// A QUERY_HCA_CAP exchange built and read through the layouts, with the bytes
/// DEVX_SET would produce (hand-derived: opcode 0x100 in bits 0..16 = bytes 0..2,
/// op_mod in bits 0x30..0x40 = bytes 6..8; log_max_qp at bit 0x9b of the page, 5 bits:
/// dword 4, shift 32 - 27 - 5 = 0, so byte 0x10 + 3 holds it; the page starts at
/// byte 0x10 of the outbox).
#[test]
fn query_hca_cap_round_trip() {
    use hca_cap::*;
    let mut inbox = [0u8; QueryHcaCapIn::BYTES];
    ViewMut::<QueryHcaCapIn>::new(&mut inbox)
        .unwrap()
        .set(QueryHcaCapIn::opcode, opcode::QUERY_HCA_CAP)
        .set(QueryHcaCapIn::op_mod, op_mod(cap_type::GENERAL, true));
    assert_eq!(inbox, [0x01, 0x00, 0, 0, 0, 0, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 0]);
    let hdr = View::<header::MboxIn>::new(&inbox).unwrap();
    assert_eq!(hdr.get(header::MboxIn::opcode), 0x100);

    let mut out = [0u8; QueryHcaCapOut::BYTES];
    {
        let mut v = ViewMut::<QueryHcaCapOut>::new(&mut out).unwrap();
        let mut cap = v.sub_mut(QueryHcaCapOut::capability);
        let mut gen = cap.sub_mut(HcaCapUnion::cmd_hca_cap);
        gen.set(CmdHcaCap::log_max_qp, 17).set(CmdHcaCap::roce, true).set(CmdHcaCap::cqe_version, 1);
    }
    assert_eq!(out[0x10 + 0x13], 17, "log_max_qp: bits 0x9b..0xa0 of the page");
    // roce at bit 0x21d: byte 0x43, bit 7 - 5 = 2
    assert_eq!(out[0x10 + 0x43], 1 << 2);
    let v = View::<QueryHcaCapOut>::new(&out).unwrap();
    let g = general(v);
    assert_eq!((g.get(CmdHcaCap::log_max_qp), g.get(CmdHcaCap::roce), g.get(CmdHcaCap::rc)), (17, true, false));
    assert_eq!(g.get(CmdHcaCap::cqe_version), 1);
    assert!(View::<QueryHcaCapOut>::new(&out[..0x100]).is_err(), "a short outbox is an error");
}

/// A QP context as INIT2RTR carries it: fields in the nested `qpc` and its address
/// path land where the PRM puts them (qpc starts at bit 0xc0 = byte 0x18; qpc.mtu is
/// bits 0x40..0x43 of qpc, the top 3 bits of byte 0x18 + 8; remote_qpn bits
/// 0xa8..0xc0 = bytes 0x18 + 0x15..0x18).
#[test]
fn init2rtr_nested_context() {
    use qp::*;
    let mut inbox = [0u8; Init2rtrQpIn::BYTES];
    let mut v = ViewMut::<Init2rtrQpIn>::new(&mut inbox).unwrap();
    v.set(Init2rtrQpIn::opcode, opcode::INIT2RTR_QP).set(Init2rtrQpIn::qpn, 0x12_3456);
    let mut qpc = v.sub_mut(Init2rtrQpIn::qpc);
    qpc.set(Qpc::mtu, mtu::MTU_1024).set(Qpc::remote_qpn, 0xab_cdef);
    qpc.sub_mut(Qpc::primary_address_path).set(Ads::src_addr_index, 3);
    assert_eq!(&inbox[0..2], &[0x05, 0x03]);
    assert_eq!(&inbox[9..12], &[0x12, 0x34, 0x56]);
    assert_eq!(inbox[0x18 + 8] >> 5, 3);
    assert_eq!(&inbox[0x18 + 0x15..0x18 + 0x18], &[0xab, 0xcd, 0xef]);
    let v = View::<Init2rtrQpIn>::new(&inbox).unwrap();
    let ads = v.sub(Init2rtrQpIn::qpc).sub(Qpc::primary_address_path);
    assert_eq!(ads.get(Ads::src_addr_index), 3);
    assert_eq!(v.nonzero_reserved(), None);
}

/// `op_mod` of QUERY_HCA_CAP as the kernel and DPDK spell it (include/linux/mlx5/
/// device.h, `enum mlx5_cap_type` shifted by one, `HCA_CAP_OPMOD_GET_CUR` = 1; DPDK's
/// `MLX5_GET_HCA_CAP_OP_MOD_ROCE` = 0x4 << 1, `..._GENERAL_DEVICE_2` = 0x20 << 1).
#[test]
fn hca_cap_op_mod_values() {
    use hca_cap::{cap_type, op_mod};
    assert_eq!(op_mod(cap_type::GENERAL, false), 0x0);
    assert_eq!(op_mod(cap_type::GENERAL, true), 0x1);
    assert_eq!(op_mod(cap_type::ATOMIC, true), 0x7);
    assert_eq!(op_mod(cap_type::ROCE, false), 0x8);
    assert_eq!(op_mod(cap_type::ROCE, true), 0x9);
    assert_eq!(op_mod(cap_type::GENERAL_2, false), 0x40);
}
