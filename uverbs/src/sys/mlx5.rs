//! mlx5 driver data: what libmlx5 appends to the core commands ("udata") and what
//! mlx5_ib answers (mlx5-abi.h), plus the mmap offset encoding of the UAR and clock pages.


abi_struct! {
    /// `struct mlx5_ib_alloc_ucontext_req_v2` (32 bytes): GET_CONTEXT driver input.
    pub struct AllocUcontextReqV2 = "struct mlx5_ib_alloc_ucontext_req_v2" {
        total_num_bfregs: u32,
        num_low_latency_bfregs: u32,
        flags: u32,
        comp_mask: u32,
        max_cqe_version: u8,
        reserved0: u8,
        reserved1: u16,
        reserved2: u32,
        lib_caps: u64,
    }
}
abi_struct! {
    /// `struct mlx5_ib_alloc_ucontext_req` (v1, 8 bytes): what old libraries send.
    pub struct AllocUcontextReq = "struct mlx5_ib_alloc_ucontext_req" {
        total_num_bfregs: u32,
        num_low_latency_bfregs: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_alloc_ucontext_resp` (72 bytes): GET_CONTEXT driver output.
    pub struct AllocUcontextResp = "struct mlx5_ib_alloc_ucontext_resp" {
        qp_tab_size: u32,
        bf_reg_size: u32,
        tot_bfregs: u32,
        cache_line_size: u32,
        max_sq_desc_sz: u16,
        max_rq_desc_sz: u16,
        max_send_wqebb: u32,
        max_recv_wr: u32,
        max_srq_recv_wr: u32,
        num_ports: u16,
        flow_action_flags: u16,
        comp_mask: u32,
        response_length: u32,
        cqe_version: u8,
        cmds_supp_uhw: u8,
        eth_min_inline: u8,
        clock_info_versions: u8,
        hca_core_clock_offset: u64,
        log_uar_size: u32,
        num_uars_per_page: u32,
        num_dyn_bfregs: u32,
        dump_fill_mkey: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_alloc_pd_resp`: the PD number, after the core response.
    pub struct AllocPdResp = "struct mlx5_ib_alloc_pd_resp" { pdn: u32 }
}
abi_struct! {
    /// `struct mlx5_ib_query_device_resp`: ex QUERY_DEVICE driver output, flattened.
    pub struct QueryDeviceResp = "struct mlx5_ib_query_device_resp" {
        comp_mask: u32,
        response_length: u32,
        max_tso: u32 => "tso_caps.max_tso",
        tso_supported_qpts: u32 => "tso_caps.supported_qpts",
        rx_hash_fields_mask: u64 => "rss_caps.rx_hash_fields_mask",
        rx_hash_function: u8 => "rss_caps.rx_hash_function",
        rss_reserved: [u8; 7] => "rss_caps.reserved",
        cqe_comp_max_num: u32 => "cqe_comp_caps.max_num",
        cqe_comp_supported_format: u32 => "cqe_comp_caps.supported_format",
        qp_rate_limit_min: u32 => "packet_pacing_caps.qp_rate_limit_min",
        qp_rate_limit_max: u32 => "packet_pacing_caps.qp_rate_limit_max",
        pp_supported_qpts: u32 => "packet_pacing_caps.supported_qpts",
        pp_cap_flags: u8 => "packet_pacing_caps.cap_flags",
        pp_reserved: [u8; 3] => "packet_pacing_caps.reserved",
        mlx5_ib_support_multi_pkt_send_wqes: u32,
        flags: u32,
        sw_parsing_offloads: u32 => "sw_parsing_caps.sw_parsing_offloads",
        sw_parsing_supported_qpts: u32 => "sw_parsing_caps.supported_qpts",
        min_single_stride_log_num_of_bytes: u32 => "striding_rq_caps.min_single_stride_log_num_of_bytes",
        max_single_stride_log_num_of_bytes: u32 => "striding_rq_caps.max_single_stride_log_num_of_bytes",
        min_single_wqe_log_num_of_strides: u32 => "striding_rq_caps.min_single_wqe_log_num_of_strides",
        max_single_wqe_log_num_of_strides: u32 => "striding_rq_caps.max_single_wqe_log_num_of_strides",
        striding_supported_qpts: u32 => "striding_rq_caps.supported_qpts",
        striding_reserved: u32 => "striding_rq_caps.reserved",
        tunnel_offloads_caps: u32,
        max_log_num_concurent: u8 => "dci_streams_caps.max_log_num_concurent",
        max_log_num_errored: u8 => "dci_streams_caps.max_log_num_errored",
        reserved: u16,
    }
}
abi_struct! {
    /// `struct mlx5_ib_create_cq` (32 bytes): CREATE_CQ driver input.
    pub struct CreateCq = "struct mlx5_ib_create_cq" {
        /// The CQE ring the library allocated.
        buf_addr: u64,
        /// The CQ doorbell record: word 0 consumer index, word 1 arm.
        db_addr: u64,
        cqe_size: u32,
        cqe_comp_en: u8,
        cqe_comp_res_format: u8,
        flags: u16,
        uar_page_index: u16,
        reserved0: u16,
        reserved1: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_create_cq_resp`.
    pub struct CreateCqResp = "struct mlx5_ib_create_cq_resp" {
        cqn: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_create_qp` (56 bytes): CREATE_QP driver input.
    pub struct CreateQp = "struct mlx5_ib_create_qp" {
        /// The QP buffer: RQ at offset 0, SQ after it.
        buf_addr: u64,
        /// Doorbell record: word 0 RQ head, word 1 SQ producer.
        db_addr: u64,
        sq_wqe_count: u32,
        rq_wqe_count: u32,
        rq_wqe_shift: u32,
        flags: u32,
        uidx: u32,
        bfreg_index: u32,
        sq_buf_addr: u64,
        ece_options: u32,
        log_num_concurent: u8 => "dci_streams.log_num_concurent",
        log_num_errored: u8 => "dci_streams.log_num_errored",
        reserved: u16,
    }
}
abi_struct! {
    /// `struct mlx5_ib_create_qp_resp` (40 bytes).
    pub struct CreateQpResp = "struct mlx5_ib_create_qp_resp" {
        bfreg_index: u32,
        ece_options: u32,
        comp_mask: u32,
        tirn: u32,
        tisn: u32,
        rqn: u32,
        sqn: u32,
        reserved1: u32,
        tir_icm_addr: u64,
    }
}
abi_struct! {
    /// `struct mlx5_ib_create_srq` (32 bytes): CREATE_SRQ driver input.
    pub struct CreateSrq = "struct mlx5_ib_create_srq" {
        /// The SRQ buffer: `max` WQEs of `1 << wqe_shift` bytes.
        buf_addr: u64,
        /// Doorbell record: word 0 counts the WQEs posted.
        db_addr: u64,
        flags: u32,
        reserved0: u32,
        /// User index (XRC and tag-matching SRQs only).
        uidx: u32,
        reserved1: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_create_srq_resp`.
    pub struct CreateSrqResp = "struct mlx5_ib_create_srq_resp" {
        srqn: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_modify_qp`: MODIFY_QP (ex) driver input.
    pub struct ModifyQp = "struct mlx5_ib_modify_qp" {
        comp_mask: u32,
        max_burst_sz: u32 => "burst_info.max_burst_sz",
        typical_pkt_sz: u16 => "burst_info.typical_pkt_sz",
        burst_reserved: u16 => "burst_info.reserved",
        ece_options: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_modify_qp_resp`.
    pub struct ModifyQpResp = "struct mlx5_ib_modify_qp_resp" {
        response_length: u32,
        dctn: u32,
        ece_options: u32,
        reserved: u32,
    }
}
abi_struct! {
    /// `struct mlx5_ib_clock_info`: the page mapped at MMAP_CLOCK_INFO, updated by the
    /// kernel so the library can turn CQE timestamps into nanoseconds.
    pub struct ClockInfo = "struct mlx5_ib_clock_info" {
        sign: u32,
        resv: u32,
        nsec: u64,
        cycles: u64,
        frac: u64,
        mult: u32,
        shift: u32,
        mask: u64,
        overflow_period: u64,
    }
}

abi_struct! {
    /// `struct mlx5_ib_create_ah_resp`: CREATE_AH driver output with the resolved MAC.
    pub struct CreateAhResp = "struct mlx5_ib_create_ah_resp" {
        response_length: u32,
        dmac: [u8; 6],
        reserved: [u8; 6],
    }
}

abi_consts! {
    fn mlx5_consts;
    pub const MMAP_REGULAR_PAGE: u32 = 0 => "MLX5_IB_MMAP_REGULAR_PAGE";
    pub const MMAP_WC_PAGE: u32 = 2 => "MLX5_IB_MMAP_WC_PAGE";
    pub const MMAP_NC_PAGE: u32 = 3 => "MLX5_IB_MMAP_NC_PAGE";
    pub const MMAP_CORE_CLOCK: u32 = 5 => "MLX5_IB_MMAP_CORE_CLOCK";
    pub const MMAP_ALLOC_WC: u32 = 6 => "MLX5_IB_MMAP_ALLOC_WC";
    pub const MMAP_CLOCK_INFO: u32 = 7 => "MLX5_IB_MMAP_CLOCK_INFO";
    pub const LIB_CAP_4K_UAR: u64 = 1 << 0 => "MLX5_LIB_CAP_4K_UAR";
    pub const LIB_CAP_DYN_UAR: u64 = 1 << 1 => "MLX5_LIB_CAP_DYN_UAR";
    pub const ALLOC_UCTX_DEVX: u32 = 1 << 0 => "MLX5_IB_ALLOC_UCTX_DEVX";
    pub const RESP_MASK_CORE_CLOCK_OFFSET: u32 = 1 << 0 => "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_CORE_CLOCK_OFFSET";
    pub const RESP_MASK_DUMP_FILL_MKEY: u32 = 1 << 1 => "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_DUMP_FILL_MKEY";
    pub const RESP_MASK_ECE: u32 = 1 << 2 => "MLX5_IB_ALLOC_UCONTEXT_RESP_MASK_ECE";
    pub const CMDS_SUPP_UHW_QUERY_DEVICE: u8 = 1 << 0 => "MLX5_USER_CMDS_SUPP_UHW_QUERY_DEVICE";
    pub const CMDS_SUPP_UHW_CREATE_AH: u8 = 1 << 1 => "MLX5_USER_CMDS_SUPP_UHW_CREATE_AH";
    pub const QP_FLAG_SIGNATURE: u32 = 1 << 0 => "MLX5_QP_FLAG_SIGNATURE";
    pub const SRQ_FLAG_SIGNATURE: u32 = 1 << 0 => "MLX5_SRQ_FLAG_SIGNATURE";
    pub const QP_FLAG_SCATTER_CQE: u32 = 1 << 1 => "MLX5_QP_FLAG_SCATTER_CQE";
    pub const QP_FLAG_BFREG_INDEX: u32 = 1 << 3 => "MLX5_QP_FLAG_BFREG_INDEX";
    pub const QP_FLAG_ALLOW_SCATTER_CQE: u32 = 1 << 8 => "MLX5_QP_FLAG_ALLOW_SCATTER_CQE";
    pub const QP_FLAG_UAR_PAGE_INDEX: u32 = 1 << 10 => "MLX5_QP_FLAG_UAR_PAGE_INDEX";
    pub const CREATE_CQ_FLAGS_CQE_128B_PAD: u16 = 1 << 0 => "MLX5_IB_CREATE_CQ_FLAGS_CQE_128B_PAD";
    pub const CREATE_CQ_FLAGS_UAR_PAGE_INDEX: u16 = 1 << 1 => "MLX5_IB_CREATE_CQ_FLAGS_UAR_PAGE_INDEX";
    pub const CREATE_CQ_FLAGS_REAL_TIME_TS: u16 = 1 << 2 => "MLX5_IB_CREATE_CQ_FLAGS_REAL_TIME_TS";
    pub const QP_FLAG_TUNNEL_OFFLOADS: u32 = 1 << 2 => "MLX5_QP_FLAG_TUNNEL_OFFLOADS";
    pub const QP_FLAG_TYPE_DCT: u32 = 1 << 4 => "MLX5_QP_FLAG_TYPE_DCT";
    pub const QP_FLAG_TYPE_DCI: u32 = 1 << 5 => "MLX5_QP_FLAG_TYPE_DCI";
    pub const QP_FLAG_TIR_ALLOW_SELF_LB_UC: u32 = 1 << 6 => "MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_UC";
    pub const QP_FLAG_TIR_ALLOW_SELF_LB_MC: u32 = 1 << 7 => "MLX5_QP_FLAG_TIR_ALLOW_SELF_LB_MC";
    pub const QP_FLAG_PACKET_BASED_CREDIT_MODE: u32 = 1 << 9 => "MLX5_QP_FLAG_PACKET_BASED_CREDIT_MODE";
    pub const QP_FLAG_DCI_STREAM: u32 = 1 << 11 => "MLX5_QP_FLAG_DCI_STREAM";
    pub const CQE_RES_FORMAT_HASH: u8 = 1 << 0 => "MLX5_IB_CQE_RES_FORMAT_HASH";
    pub const CQE_RES_FORMAT_CSUM: u8 = 1 << 1 => "MLX5_IB_CQE_RES_FORMAT_CSUM";
    pub const CQE_RES_FORMAT_CSUM_STRIDX: u8 = 1 << 2 => "MLX5_IB_CQE_RES_FORMAT_CSUM_STRIDX";
    pub const QUERY_DEV_RESP_FLAGS_CQE_128B_COMP: u32 = 1 << 0 => "MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_COMP";
    pub const QUERY_DEV_RESP_FLAGS_CQE_128B_PAD: u32 = 1 << 1 => "MLX5_IB_QUERY_DEV_RESP_FLAGS_CQE_128B_PAD";
    pub const QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT: u32 = 1 << 3 => "MLX5_IB_QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT";
    pub const CLOCK_INFO_V1: u32 = 0 => "MLX5_IB_CLOCK_INFO_V1";
    pub const MMAP_GET_CONTIGUOUS_PAGES: u32 = 1 => "MLX5_IB_MMAP_GET_CONTIGUOUS_PAGES";
}

/// The mmap page offset mlx5_ib decodes: `(cmd << 8) | index`, in pages.
///
/// libmlx5 passes `page_size * mmap_pgoff(cmd, index)` as the byte offset of mmap();
/// the kernel sees the page offset and splits it back into command and index (the
/// index's bits above 8 go to bits 16 and up).
pub fn mmap_pgoff(cmd: u32, index: u32) -> u64 {
    (((index >> 8) as u64) << 16) | ((cmd as u64) << 8) | (index & 0xff) as u64
}

/// Splits a page offset into (command, index); the inverse of [`mmap_pgoff`].
pub fn mmap_split(pgoff: u64) -> (u32, u32) {
    let cmd = ((pgoff >> 8) & 0xff) as u32;
    let index = ((pgoff & 0xff) | (((pgoff >> 16) & 0xffff) << 8)) as u32;
    (cmd, index)
}

/// Where the first BlueFlame register of a 4 KiB UAR page sits; register `k` is at
/// `BF_OFFSET + k * bf_reg_size`. The UAR layout is the `prm` crate's ([`prm::uar`]).
pub const BF_OFFSET: usize = prm::uar::BF_OFFSET;
/// The 8-byte CQ arm doorbell in a UAR page.
pub const UAR_CQ_ARM_OFFSET: usize = prm::uar::CQ_ARM_OFFSET;
