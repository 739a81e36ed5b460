//! Core command and response layouts of the write() commands and of the ioctl
//! attributes that carry structs (ib_user_verbs.h, ib_user_ioctl_verbs.h).
//!
//! Field names are the C member names, so `grep` finds both sides. Flexible
//! `driver_data[]` tails are not declared: driver data is appended by the encoder.


abi_struct! {
    /// `struct ib_uverbs_get_context`.
    pub struct GetContext = "struct ib_uverbs_get_context" { response: u64 }
}
abi_struct! {
    /// `struct ib_uverbs_get_context_resp`; the mlx5 context response follows it.
    pub struct GetContextResp = "struct ib_uverbs_get_context_resp" {
        async_fd: u32,
        num_comp_vectors: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_query_device`.
    pub struct QueryDevice = "struct ib_uverbs_query_device" { response: u64 }
}
abi_struct! {
    /// `struct ib_uverbs_query_device_resp` (176 bytes): what `ibv_query_device` returns.
    pub struct QueryDeviceResp = "struct ib_uverbs_query_device_resp" {
        fw_ver: u64,
        /// Big-endian on the wire, as the GUID bytes read left to right.
        node_guid: u64,
        sys_image_guid: u64,
        max_mr_size: u64,
        page_size_cap: u64,
        vendor_id: u32,
        vendor_part_id: u32,
        hw_ver: u32,
        max_qp: u32,
        max_qp_wr: u32,
        device_cap_flags: u32,
        max_sge: u32,
        max_sge_rd: u32,
        max_cq: u32,
        max_cqe: u32,
        max_mr: u32,
        max_pd: u32,
        max_qp_rd_atom: u32,
        max_ee_rd_atom: u32,
        max_res_rd_atom: u32,
        max_qp_init_rd_atom: u32,
        max_ee_init_rd_atom: u32,
        atomic_cap: u32,
        max_ee: u32,
        max_rdd: u32,
        max_mw: u32,
        max_raw_ipv6_qp: u32,
        max_raw_ethy_qp: u32,
        max_mcast_grp: u32,
        max_mcast_qp_attach: u32,
        max_total_mcast_qp_attach: u32,
        max_ah: u32,
        max_fmr: u32,
        max_map_per_fmr: u32,
        max_srq: u32,
        max_srq_wr: u32,
        max_srq_sge: u32,
        max_pkeys: u16,
        local_ca_ack_delay: u8,
        phys_port_cnt: u8,
        reserved: [u8; 4],
    }
}

abi_struct! {
    /// `struct ib_uverbs_ex_query_device` (extended command body).
    pub struct ExQueryDevice = "struct ib_uverbs_ex_query_device" {
        comp_mask: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_ex_query_device_resp`, with the nested capability structs
    /// flattened. The kernel may return a prefix: `response_length` says how much.
    pub struct ExQueryDeviceResp = "struct ib_uverbs_ex_query_device_resp" {
        base: QueryDeviceResp,
        comp_mask: u32,
        response_length: u32,
        odp_general_caps: u64 => "odp_caps.general_caps",
        odp_rc_caps: u32 => "odp_caps.per_transport_caps.rc_odp_caps",
        odp_uc_caps: u32 => "odp_caps.per_transport_caps.uc_odp_caps",
        odp_ud_caps: u32 => "odp_caps.per_transport_caps.ud_odp_caps",
        odp_reserved: u32 => "odp_caps.reserved",
        timestamp_mask: u64,
        /// In kHz.
        hca_core_clock: u64,
        device_cap_flags_ex: u64,
        rss_supported_qpts: u32 => "rss_caps.supported_qpts",
        rss_max_rwq_indirection_tables: u32 => "rss_caps.max_rwq_indirection_tables",
        rss_max_rwq_indirection_table_size: u32 => "rss_caps.max_rwq_indirection_table_size",
        rss_reserved: u32 => "rss_caps.reserved",
        max_wq_type_rq: u32,
        raw_packet_caps: u32,
        tm_max_rndv_hdr_size: u32 => "tm_caps.max_rndv_hdr_size",
        tm_max_num_tags: u32 => "tm_caps.max_num_tags",
        tm_flags: u32 => "tm_caps.flags",
        tm_max_ops: u32 => "tm_caps.max_ops",
        tm_max_sge: u32 => "tm_caps.max_sge",
        tm_reserved: u32 => "tm_caps.reserved",
        max_cq_moderation_count: u16 => "cq_moderation_caps.max_cq_moderation_count",
        max_cq_moderation_period: u16 => "cq_moderation_caps.max_cq_moderation_period",
        cq_moderation_reserved: u32 => "cq_moderation_caps.reserved",
        max_dm_size: u64,
        xrc_odp_caps: u32,
        reserved: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_query_port`.
    pub struct QueryPort = "struct ib_uverbs_query_port" {
        response: u64,
        port_num: u8,
        reserved: [u8; 7],
    }
}
abi_struct! {
    /// `struct ib_uverbs_query_port_resp` (40 bytes).
    pub struct QueryPortResp = "struct ib_uverbs_query_port_resp" {
        port_cap_flags: u32,
        max_msg_sz: u32,
        bad_pkey_cntr: u32,
        qkey_viol_cntr: u32,
        gid_tbl_len: u32,
        pkey_tbl_len: u16,
        lid: u16,
        sm_lid: u16,
        state: u8,
        max_mtu: u8,
        active_mtu: u8,
        lmc: u8,
        max_vl_num: u8,
        sm_sl: u8,
        subnet_timeout: u8,
        init_type_reply: u8,
        active_width: u8,
        active_speed: u8,
        phys_state: u8,
        link_layer: u8,
        flags: u8,
        reserved: u8,
    }
}
abi_struct! {
    /// `struct ib_uverbs_query_port_resp_ex`: the ioctl QUERY_PORT output.
    pub struct QueryPortRespEx = "struct ib_uverbs_query_port_resp_ex" {
        legacy_resp: QueryPortResp,
        port_cap_flags2: u16,
        reserved: [u8; 6],
    }
}

abi_struct! {
    /// `struct ib_uverbs_gid_entry` (32 bytes): one row of the GID table.
    pub struct GidEntry = "struct ib_uverbs_gid_entry" {
        /// The 16 GID bytes in network order, as two u64 words of raw bytes.
        gid: [u64; 2],
        gid_index: u32,
        port_num: u32,
        gid_type: u32,
        netdev_ifindex: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_open_xrcd`: `fd` -1 for a private domain, or a file whose inode
    /// names a domain shared by every opener; `oflags` O_CREAT / O_EXCL as for open(2).
    pub struct OpenXrcd = "struct ib_uverbs_open_xrcd" { response: u64, fd: u32, oflags: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_open_xrcd_resp`.
    pub struct OpenXrcdResp = "struct ib_uverbs_open_xrcd_resp" { xrcd_handle: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_close_xrcd`.
    pub struct CloseXrcd = "struct ib_uverbs_close_xrcd" { xrcd_handle: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_alloc_pd`.
    pub struct AllocPd = "struct ib_uverbs_alloc_pd" { response: u64 }
}
abi_struct! {
    /// `struct ib_uverbs_alloc_pd_resp`; mlx5 appends the PD number.
    pub struct AllocPdResp = "struct ib_uverbs_alloc_pd_resp" { pd_handle: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_dealloc_pd`.
    pub struct DeallocPd = "struct ib_uverbs_dealloc_pd" { pd_handle: u32 }
}

abi_struct! {
    /// `struct ib_uverbs_reg_mr`.
    pub struct RegMr = "struct ib_uverbs_reg_mr" {
        response: u64,
        start: u64,
        length: u64,
        hca_va: u64,
        pd_handle: u32,
        access_flags: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_reg_mr_resp`.
    pub struct RegMrResp = "struct ib_uverbs_reg_mr_resp" {
        mr_handle: u32,
        lkey: u32,
        rkey: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_dereg_mr`.
    pub struct DeregMr = "struct ib_uverbs_dereg_mr" { mr_handle: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_sge`: one element of ADVISE_MR's SGE_LIST.
    pub struct Sge = "struct ib_uverbs_sge" {
        addr: u64,
        length: u32,
        lkey: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_create_comp_channel`.
    pub struct CreateCompChannel = "struct ib_uverbs_create_comp_channel" { response: u64 }
}
abi_struct! {
    /// `struct ib_uverbs_create_comp_channel_resp`.
    pub struct CreateCompChannelResp = "struct ib_uverbs_create_comp_channel_resp" { fd: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_comp_event_desc`: what a read() of a completion channel yields.
    pub struct CompEventDesc = "struct ib_uverbs_comp_event_desc" { cq_handle: u64 }
}
abi_struct! {
    /// `struct ib_uverbs_async_event_desc`: what a read() of the async event fd yields.
    pub struct AsyncEventDesc = "struct ib_uverbs_async_event_desc" {
        element: u64,
        event_type: u32,
        reserved: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_create_cq`.
    pub struct CreateCq = "struct ib_uverbs_create_cq" {
        response: u64,
        user_handle: u64,
        cqe: u32,
        comp_vector: u32,
        /// A completion channel fd, or -1.
        comp_channel: i32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_cq_resp`; mlx5 appends the CQ number.
    pub struct CreateCqResp = "struct ib_uverbs_create_cq_resp" {
        cq_handle: u32,
        cqe: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_cq`.
    pub struct DestroyCq = "struct ib_uverbs_destroy_cq" {
        response: u64,
        cq_handle: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_cq_resp`: events the kernel delivered, so the
    /// library can wait until the application has acknowledged them all.
    pub struct DestroyCqResp = "struct ib_uverbs_destroy_cq_resp" {
        comp_events_reported: u32,
        async_events_reported: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_qp_cap`: the ioctl QP_CREATE capability attribute.
    pub struct QpCap = "struct ib_uverbs_qp_cap" {
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_qp`.
    pub struct CreateQp = "struct ib_uverbs_create_qp" {
        response: u64,
        user_handle: u64,
        pd_handle: u32,
        send_cq_handle: u32,
        recv_cq_handle: u32,
        srq_handle: u32,
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
        sq_sig_all: u8,
        qp_type: u8,
        is_srq: u8,
        reserved: u8,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_qp_resp`; mlx5 appends its QP response.
    pub struct CreateQpResp = "struct ib_uverbs_create_qp_resp" {
        qp_handle: u32,
        qpn: u32,
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_ex_create_qp` (extended command body).
    pub struct ExCreateQp = "struct ib_uverbs_ex_create_qp" {
        user_handle: u64,
        pd_handle: u32,
        send_cq_handle: u32,
        recv_cq_handle: u32,
        srq_handle: u32,
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
        sq_sig_all: u8,
        qp_type: u8,
        is_srq: u8,
        reserved: u8,
        comp_mask: u32,
        create_flags: u32,
        rwq_ind_tbl_handle: u32,
        source_qpn: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_ex_create_qp_resp`.
    pub struct ExCreateQpResp = "struct ib_uverbs_ex_create_qp_resp" {
        base: CreateQpResp,
        comp_mask: u32,
        response_length: u32,
    }
}

abi_struct! {
    /// `struct ib_uverbs_qp_dest`: the address vector inside modify/query QP.
    pub struct QpDest = "struct ib_uverbs_qp_dest" {
        dgid: [u8; 16],
        flow_label: u32,
        dlid: u16,
        reserved: u16,
        sgid_index: u8,
        hop_limit: u8,
        traffic_class: u8,
        sl: u8,
        src_path_bits: u8,
        static_rate: u8,
        is_global: u8,
        port_num: u8,
    }
}
abi_struct! {
    /// `struct ib_uverbs_modify_qp` (112 bytes); `attr_mask` says which fields count.
    pub struct ModifyQp = "struct ib_uverbs_modify_qp" {
        dest: QpDest,
        alt_dest: QpDest,
        qp_handle: u32,
        attr_mask: u32,
        qkey: u32,
        rq_psn: u32,
        sq_psn: u32,
        dest_qp_num: u32,
        qp_access_flags: u32,
        pkey_index: u16,
        alt_pkey_index: u16,
        qp_state: u8,
        cur_qp_state: u8,
        path_mtu: u8,
        path_mig_state: u8,
        en_sqd_async_notify: u8,
        max_rd_atomic: u8,
        max_dest_rd_atomic: u8,
        min_rnr_timer: u8,
        port_num: u8,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
        alt_port_num: u8,
        alt_timeout: u8,
        reserved: [u8; 2],
    }
}
abi_struct! {
    /// `struct ib_uverbs_ex_modify_qp`.
    pub struct ExModifyQp = "struct ib_uverbs_ex_modify_qp" {
        base: ModifyQp,
        rate_limit: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_ex_modify_qp_resp`.
    pub struct ExModifyQpResp = "struct ib_uverbs_ex_modify_qp_resp" {
        comp_mask: u32,
        response_length: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_query_qp`.
    pub struct QueryQp = "struct ib_uverbs_query_qp" {
        response: u64,
        qp_handle: u32,
        attr_mask: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_query_qp_resp` (128 bytes).
    pub struct QueryQpResp = "struct ib_uverbs_query_qp_resp" {
        dest: QpDest,
        alt_dest: QpDest,
        max_send_wr: u32,
        max_recv_wr: u32,
        max_send_sge: u32,
        max_recv_sge: u32,
        max_inline_data: u32,
        qkey: u32,
        rq_psn: u32,
        sq_psn: u32,
        dest_qp_num: u32,
        qp_access_flags: u32,
        pkey_index: u16,
        alt_pkey_index: u16,
        qp_state: u8,
        cur_qp_state: u8,
        path_mtu: u8,
        path_mig_state: u8,
        sq_draining: u8,
        max_rd_atomic: u8,
        max_dest_rd_atomic: u8,
        min_rnr_timer: u8,
        port_num: u8,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
        alt_port_num: u8,
        alt_timeout: u8,
        sq_sig_all: u8,
        reserved: [u8; 5],
    }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_qp`.
    pub struct DestroyQp = "struct ib_uverbs_destroy_qp" {
        response: u64,
        qp_handle: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_qp_resp`.
    pub struct DestroyQpResp = "struct ib_uverbs_destroy_qp_resp" { events_reported: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_post_send_resp`: the index of the first work request the kernel
    /// refused (what a software device such as rxe answers to `POST_SEND`).
    pub struct PostSendResp = "struct ib_uverbs_post_send_resp" { bad_wr: u32 }
}

abi_struct! {
    /// `struct ib_uverbs_create_srq` (CREATE_SRQ, write 32); mlx5 appends its SRQ request.
    pub struct CreateSrq = "struct ib_uverbs_create_srq" {
        response: u64,
        user_handle: u64,
        pd_handle: u32,
        max_wr: u32,
        max_sge: u32,
        srq_limit: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_xsrq` (CREATE_XSRQ, write 39): any SRQ type; the answer is
    /// CREATE_SRQ's.
    pub struct CreateXsrq = "struct ib_uverbs_create_xsrq" {
        response: u64,
        user_handle: u64,
        srq_type: u32,
        pd_handle: u32,
        max_wr: u32,
        max_sge: u32,
        srq_limit: u32,
        max_num_tags: u32,
        xrcd_handle: u32,
        cq_handle: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_srq_resp`; mlx5 appends its SRQ response.
    pub struct CreateSrqResp = "struct ib_uverbs_create_srq_resp" {
        srq_handle: u32,
        max_wr: u32,
        max_sge: u32,
        srqn: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_modify_srq` (MODIFY_SRQ, write 33: no response).
    pub struct ModifySrq = "struct ib_uverbs_modify_srq" {
        srq_handle: u32,
        attr_mask: u32,
        max_wr: u32,
        srq_limit: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_query_srq` (QUERY_SRQ, write 34).
    pub struct QuerySrq = "struct ib_uverbs_query_srq" {
        response: u64,
        srq_handle: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_query_srq_resp`.
    pub struct QuerySrqResp = "struct ib_uverbs_query_srq_resp" {
        max_wr: u32,
        max_sge: u32,
        srq_limit: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_srq` (DESTROY_SRQ, write 35).
    pub struct DestroySrq = "struct ib_uverbs_destroy_srq" {
        response: u64,
        srq_handle: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_srq_resp`.
    pub struct DestroySrqResp = "struct ib_uverbs_destroy_srq_resp" { events_reported: u32 }
}

abi_struct! {
    /// `struct ib_uverbs_ah_attr` with its `ib_uverbs_global_route` flattened: an address
    /// vector as CREATE_AH carries it.
    pub struct AhAttr = "struct ib_uverbs_ah_attr" {
        dgid: [u8; 16] => "grh.dgid",
        flow_label: u32 => "grh.flow_label",
        sgid_index: u8 => "grh.sgid_index",
        hop_limit: u8 => "grh.hop_limit",
        traffic_class: u8 => "grh.traffic_class",
        grh_reserved: u8 => "grh.reserved",
        dlid: u16,
        sl: u8,
        src_path_bits: u8,
        static_rate: u8,
        is_global: u8,
        port_num: u8,
        reserved: u8,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_ah` (56 bytes).
    pub struct CreateAh = "struct ib_uverbs_create_ah" {
        response: u64,
        user_handle: u64,
        pd_handle: u32,
        reserved: u32,
        attr: AhAttr,
    }
}
abi_struct! {
    /// `struct ib_uverbs_create_ah_resp`; mlx5 appends the resolved destination MAC.
    pub struct CreateAhResp = "struct ib_uverbs_create_ah_resp" { ah_handle: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_destroy_ah`.
    pub struct DestroyAh = "struct ib_uverbs_destroy_ah" { ah_handle: u32 }
}
abi_struct! {
    /// `struct ib_uverbs_ex_create_cq` (extended command body).
    pub struct ExCreateCq = "struct ib_uverbs_ex_create_cq" {
        user_handle: u64,
        cqe: u32,
        comp_vector: u32,
        comp_channel: i32,
        comp_mask: u32,
        /// `ib_uverbs_ex_create_cq_flags`.
        flags: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct ib_uverbs_ex_create_cq_resp`.
    pub struct ExCreateCqResp = "struct ib_uverbs_ex_create_cq_resp" {
        base: CreateCqResp,
        comp_mask: u32,
        response_length: u32,
    }
}

abi_consts! {
    fn verbs_consts;
    // enum ib_uverbs_qp_type
    pub const QPT_RC: u8 = 2 => "IB_UVERBS_QPT_RC";
    pub const QPT_UC: u8 = 3 => "IB_UVERBS_QPT_UC";
    pub const QPT_UD: u8 = 4 => "IB_UVERBS_QPT_UD";
    pub const QPT_RAW_PACKET: u8 = 8 => "IB_UVERBS_QPT_RAW_PACKET";
    pub const QPT_XRC_INI: u8 = 9 => "IB_UVERBS_QPT_XRC_INI";
    pub const QPT_XRC_TGT: u8 = 10 => "IB_UVERBS_QPT_XRC_TGT";
    // enum ib_uverbs_qp_create_flags
    pub const QP_CREATE_BLOCK_MULTICAST_LOOPBACK: u32 = 1 << 1 => "IB_UVERBS_QP_CREATE_BLOCK_MULTICAST_LOOPBACK";
    pub const QP_CREATE_SCATTER_FCS: u32 = 1 << 8 => "IB_UVERBS_QP_CREATE_SCATTER_FCS";
    pub const QP_CREATE_CVLAN_STRIPPING: u32 = 1 << 9 => "IB_UVERBS_QP_CREATE_CVLAN_STRIPPING";
    pub const QP_CREATE_PCI_WRITE_END_PADDING: u32 = 1 << 11 => "IB_UVERBS_QP_CREATE_PCI_WRITE_END_PADDING";
    pub const QP_CREATE_SQ_SIG_ALL: u32 = 1 << 12 => "IB_UVERBS_QP_CREATE_SQ_SIG_ALL";
    // enum ib_uverbs_ex_create_cq_flags
    pub const CQ_FLAGS_TIMESTAMP_COMPLETION: u32 = 1 << 0 => "IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION";
    pub const CQ_FLAGS_IGNORE_OVERRUN: u32 = 1 << 1 => "IB_UVERBS_CQ_FLAGS_IGNORE_OVERRUN";
    // enum ib_uverbs_query_port_cap_flags / ib_uverbs_query_port_flags
    pub const PCF_CM_SUP: u32 = 1 << 16 => "IB_UVERBS_PCF_CM_SUP";
    pub const QPF_GRH_REQUIRED: u8 = 1 << 0 => "IB_UVERBS_QPF_GRH_REQUIRED";
    pub const QPT_DRIVER: u8 = 0xff => "IB_UVERBS_QPT_DRIVER";
    // enum ib_uverbs_access_flags
    pub const ACCESS_LOCAL_WRITE: u32 = 1 << 0 => "IB_UVERBS_ACCESS_LOCAL_WRITE";
    pub const ACCESS_REMOTE_WRITE: u32 = 1 << 1 => "IB_UVERBS_ACCESS_REMOTE_WRITE";
    pub const ACCESS_REMOTE_READ: u32 = 1 << 2 => "IB_UVERBS_ACCESS_REMOTE_READ";
    pub const ACCESS_REMOTE_ATOMIC: u32 = 1 << 3 => "IB_UVERBS_ACCESS_REMOTE_ATOMIC";
    pub const ACCESS_MW_BIND: u32 = 1 << 4 => "IB_UVERBS_ACCESS_MW_BIND";
    pub const ACCESS_ZERO_BASED: u32 = 1 << 5 => "IB_UVERBS_ACCESS_ZERO_BASED";
    pub const ACCESS_ON_DEMAND: u32 = 1 << 6 => "IB_UVERBS_ACCESS_ON_DEMAND";
    pub const ACCESS_HUGETLB: u32 = 1 << 7 => "IB_UVERBS_ACCESS_HUGETLB";
    pub const ACCESS_RELAXED_ORDERING: u32 = 1 << 20 => "IB_UVERBS_ACCESS_RELAXED_ORDERING";
    pub const ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000 => "IB_UVERBS_ACCESS_OPTIONAL_RANGE";
    // enum ib_uverbs_gid_type
    pub const GID_TYPE_IB: u32 = 0 => "IB_UVERBS_GID_TYPE_IB";
    pub const GID_TYPE_ROCE_V1: u32 = 1 => "IB_UVERBS_GID_TYPE_ROCE_V1";
    pub const GID_TYPE_ROCE_V2: u32 = 2 => "IB_UVERBS_GID_TYPE_ROCE_V2";
    // enum rdma_driver_id
    pub const RDMA_DRIVER_UNKNOWN: u32 = 0 => "RDMA_DRIVER_UNKNOWN";
    pub const RDMA_DRIVER_MLX5: u32 = 1 => "RDMA_DRIVER_MLX5";
    pub const RDMA_DRIVER_RXE: u32 = 14 => "RDMA_DRIVER_RXE";
    // enum ib_uverbs_core_support
    pub const CORE_SUPPORT_OPTIONAL_MR_ACCESS: u32 = 1 => "IB_UVERBS_CORE_SUPPORT_OPTIONAL_MR_ACCESS";
    pub const PCF_IP_BASED_GIDS: u32 = 1 << 26 => "IB_UVERBS_PCF_IP_BASED_GIDS";
    // enum ib_uverbs_advise_mr_advice, enum ib_uverbs_advise_mr_flag
    pub const ADVISE_MR_ADVICE_PREFETCH: u32 = 0 => "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH";
    pub const ADVISE_MR_ADVICE_PREFETCH_WRITE: u32 = 1 => "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE";
    pub const ADVISE_MR_ADVICE_PREFETCH_NO_FAULT: u32 = 2 => "IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT";
    pub const ADVISE_MR_FLAG_FLUSH: u32 = 1 << 0 => "IB_UVERBS_ADVISE_MR_FLAG_FLUSH";
}

/// `enum ib_qp_state` (verbs.h): the QP state machine's states.
pub mod qp_state {
    pub const RESET: u8 = 0;
    pub const INIT: u8 = 1;
    pub const RTR: u8 = 2;
    pub const RTS: u8 = 3;
    pub const SQD: u8 = 4;
    pub const SQE: u8 = 5;
    pub const ERR: u8 = 6;
}

/// `enum ib_qp_attr_mask` (verbs.h): which modify_qp fields are meaningful.
pub mod qp_attr {
    pub const STATE: u32 = 1 << 0;
    pub const CUR_STATE: u32 = 1 << 1;
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    pub const PKEY_INDEX: u32 = 1 << 4;
    pub const PORT: u32 = 1 << 5;
    pub const QKEY: u32 = 1 << 6;
    pub const AV: u32 = 1 << 7;
    pub const PATH_MTU: u32 = 1 << 8;
    pub const TIMEOUT: u32 = 1 << 9;
    pub const RETRY_CNT: u32 = 1 << 10;
    pub const RNR_RETRY: u32 = 1 << 11;
    pub const RQ_PSN: u32 = 1 << 12;
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    pub const ALT_PATH: u32 = 1 << 14;
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    pub const SQ_PSN: u32 = 1 << 16;
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    pub const CAP: u32 = 1 << 19;
    pub const DEST_QPN: u32 = 1 << 20;
    pub const RATE_LIMIT: u32 = 1 << 25;
}

/// `enum ibv_mtu`: 1 = 256 B ... 5 = 4096 B.
pub mod mtu {
    pub const MTU_256: u8 = 1;
    pub const MTU_512: u8 = 2;
    pub const MTU_1024: u8 = 3;
    pub const MTU_2048: u8 = 4;
    pub const MTU_4096: u8 = 5;

    /// Bytes of an `ibv_mtu` code, or None for a code outside 1..=5.
    pub fn bytes(code: u8) -> Option<u32> {
        (1..=5).contains(&code).then(|| 128u32 << code)
    }
}

/// `enum ibv_port_state`.
pub mod port_state {
    pub const DOWN: u8 = 1;
    pub const INIT: u8 = 2;
    pub const ARMED: u8 = 3;
    pub const ACTIVE: u8 = 4;
}

/// `IBV_LINK_LAYER_*`.
pub mod link_layer {
    pub const UNSPECIFIED: u8 = 0;
    pub const INFINIBAND: u8 = 1;
    pub const ETHERNET: u8 = 2;
}

/// `enum ib_event_type` values carried in [`AsyncEventDesc::event_type`].
pub mod event {
    pub const CQ_ERR: u32 = 0;
    pub const QP_FATAL: u32 = 1;
    pub const QP_REQ_ERR: u32 = 2;
    pub const QP_ACCESS_ERR: u32 = 3;
    pub const COMM_EST: u32 = 4;
    pub const SQ_DRAINED: u32 = 5;
    pub const PATH_MIG: u32 = 6;
    pub const PATH_MIG_ERR: u32 = 7;
    pub const DEVICE_FATAL: u32 = 8;
    pub const PORT_ACTIVE: u32 = 9;
    pub const PORT_ERR: u32 = 10;
    pub const LID_CHANGE: u32 = 11;
    pub const PKEY_CHANGE: u32 = 12;
    pub const SM_CHANGE: u32 = 13;
    pub const SRQ_ERR: u32 = 14;
    pub const SRQ_LIMIT_REACHED: u32 = 15;
    pub const QP_LAST_WQE_REACHED: u32 = 16;
    pub const CLIENT_REREGISTER: u32 = 17;
    pub const GID_CHANGE: u32 = 18;
}
