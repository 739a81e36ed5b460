//! QP commands: CREATE_QP and the RST2INIT, INIT2RTR, RTR2RTS transitions, with the
//! QP context (`qpc`) and its address path (`ads`).
//!
//! The transition commands share one shape (header, `qpn`, `opt_param_mask`, a full
//! `qpc`) and differ in which context fields the firmware takes: INIT2RTR carries
//! the remote QPN, the receive PSN and the address path; RTR2RTS the send PSN,
//! retry counts and timeout.

use crate::layout;

/// `qpc.st` service types.
pub mod st {
    pub const RC: u8 = 0x0;
    pub const UC: u8 = 0x1;
    pub const UD: u8 = 0x2;
    pub const XRC: u8 = 0x3;
    pub const DCI: u8 = 0x5;
    pub const QP0: u8 = 0x7;
    pub const QP1: u8 = 0x8;
    pub const RAW_DATAGRAM: u8 = 0x9;
    pub const REG_UMR: u8 = 0xc;
}

/// `qpc.state` (what QUERY_QP answers).
pub mod state {
    pub const RST: u8 = 0x0;
    pub const INIT: u8 = 0x1;
    pub const RTR: u8 = 0x2;
    pub const RTS: u8 = 0x3;
    pub const SQER: u8 = 0x4;
    pub const SQD: u8 = 0x5;
    pub const ERR: u8 = 0x6;
}

/// `qpc.pm_state` path migration states.
pub mod pm_state {
    pub const ARMED: u8 = 0x0;
    pub const REARM: u8 = 0x1;
    pub const MIGRATED: u8 = 0x3;
}

/// `qpc.mtu` (the IB MTU enumeration: 1 = 256 bytes ... 5 = 4096).
/// `opt_param_mask` bits of the transition commands (`MLX5_QP_OPTPAR_*`, the kernel's
/// include/linux/mlx5/qp.h): the optional context fields a transition changes; a field
/// whose bit is clear keeps the value the QP already has.
pub mod optpar {
    pub const RNR_TIMEOUT: u32 = 1 << 6;
    pub const Q_KEY: u32 = 1 << 5;
    pub const SRA_MAX: u32 = 1 << 8;
    pub const RETRY_COUNT: u32 = 1 << 12;
    pub const RNR_RETRY: u32 = 1 << 13;
    pub const ACK_TIMEOUT: u32 = 1 << 14;
    /// RTS2RTS_QP's `opt_param_mask_95_32`: the primary path's UDP source port
    /// (`MLX5_QPC_OPT_MASK_32_UDP_SPORT`, rdma-core providers/mlx5/mlx5_ifc.h; what
    /// `mlx5dv_modify_qp_udp_sport` sets).
    pub const UDP_SPORT_95_32: u64 = 1 << 2;
}

pub mod mtu {
    pub const MTU_256: u8 = 0x1;
    pub const MTU_512: u8 = 0x2;
    pub const MTU_1024: u8 = 0x3;
    pub const MTU_2048: u8 = 0x4;
    pub const MTU_4096: u8 = 0x5;
}

layout! {
    /// The address path: where the QP sends (RoCE: the destination MAC, GID, UDP source port and the source GID index).
    pub struct Ads = ads {
        fl: 0x1,
        free_ar: 0x1,
        reserved_at_2: [0xe],
        pkey_index: 0x10,
        reserved_at_20: [0x8],
        grh: 0x1,
        mlid: 0x7,
        rlid: 0x10,
        ack_timeout: 0x5,
        reserved_at_45: [0x3],
        src_addr_index: 0x8,
        reserved_at_50: [0x4],
        stat_rate: 0x4,
        hop_limit: 0x8,
        reserved_at_60: [0x4],
        tclass: 0x8,
        flow_label: 0x14,
        rgid_rip: [0x80],
        reserved_at_100: [0x4],
        f_dscp: 0x1,
        f_ecn: 0x1,
        reserved_at_106: [0x1],
        f_eth_prio: 0x1,
        ecn: 0x2,
        dscp: 0x6,
        udp_sport: 0x10,
        dei_cfi: 0x1,
        eth_prio: 0x3,
        sl: 0x4,
        vhca_port_num: 0x8,
        rmac_47_32: 0x10,
        rmac_31_0: 0x20,
    }
}

layout! {
    /// The QP context: everything the firmware keeps about a QP, given at create and in each transition.
    pub struct Qpc = qpc {
        state: 0x4,
        lag_tx_port_affinity: 0x4,
        st: 0x8,
        reserved_at_10: [0x2],
        isolate_vl_tc: 0x1,
        pm_state: 0x2,
        reserved_at_15: [0x1],
        req_e2e_credit_mode: 0x2,
        offload_type: 0x4,
        end_padding_mode: 0x2,
        reserved_at_1e: [0x2],
        wq_signature: 0x1,
        block_lb_mc: 0x1,
        atomic_like_write_en: 0x1,
        latency_sensitive: 0x1,
        reserved_at_24: [0x1],
        drain_sigerr: 0x1,
        reserved_at_26: [0x2],
        pd: 0x18,
        mtu: 0x3,
        log_msg_max: 0x5,
        reserved_at_48: [0x1],
        log_rq_size: 0x4,
        log_rq_stride: 0x3,
        no_sq: 0x1,
        log_sq_size: 0x4,
        reserved_at_55: [0x3],
        ts_format: 0x2,
        data_in_order: 0x1,
        rlky: 0x1,
        ulp_stateless_offload_mode: 0x4,
        counter_set_id: 0x8,
        uar_page: 0x18,
        reserved_at_80: [0x8],
        user_index: 0x18,
        reserved_at_a0: [0x3],
        log_page_size: 0x5,
        remote_qpn: 0x18,
        primary_address_path: Ads,
        secondary_address_path: Ads,
        log_ack_req_freq: 0x4,
        reserved_at_384: [0x4],
        log_sra_max: 0x3,
        reserved_at_38b: [0x2],
        retry_count: 0x3,
        rnr_retry: 0x3,
        reserved_at_393: [0x1],
        fre: 0x1,
        cur_rnr_retry: 0x3,
        cur_retry_count: 0x3,
        reserved_at_39b: [0x2d],
        next_send_psn: 0x18,
        reserved_at_3e0: [0x8],
        cqn_snd: 0x18,
        reserved_at_400: [0x8],
        deth_sqpn: 0x18,
        reserved_at_420: [0x28],
        last_acked_psn: 0x18,
        reserved_at_460: [0x8],
        ssn: 0x18,
        reserved_at_480: [0x8],
        log_rra_max: 0x3,
        reserved_at_48b: [0x1],
        atomic_mode: 0x4,
        rre: 0x1,
        rwe: 0x1,
        rae: 0x1,
        reserved_at_493: [0x1],
        page_offset: 0x6,
        reserved_at_49a: [0x3],
        cd_slave_receive: 0x1,
        cd_slave_send: 0x1,
        cd_master: 0x1,
        reserved_at_4a0: [0x3],
        min_rnr_nak: 0x5,
        next_rcv_psn: 0x18,
        reserved_at_4c0: [0x8],
        xrcd: 0x18,
        reserved_at_4e0: [0x8],
        cqn_rcv: 0x18,
        dbr_addr: 0x40,
        q_key: 0x20,
        reserved_at_560: [0x5],
        rq_type: 0x3,
        srqn_rmpn_xrqn: 0x18,
        reserved_at_580: [0x8],
        rmsn: 0x18,
        hw_sq_wqebb_counter: 0x10,
        sw_sq_wqebb_counter: 0x10,
        hw_rq_counter: 0x20,
        sw_rq_counter: 0x20,
        reserved_at_600: [0x2f],
        cgs: 0x1,
        cs_req: 0x8,
        cs_res: 0x8,
        dc_access_key: 0x40,
        reserved_at_680: [0x3],
        dbr_umem_valid: 0x1,
        reserved_at_684: [0x9c],
        dbr_umem_id: 0x20,
    }
}

layout! {
    /// CREATE_QP inbox: the context, then the page list of the WQ buffer (`pas`, the tail) unless a UMEM is named.
    pub struct CreateQpIn = create_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x40],
        opt_param_mask: 0x20,
        reserved_at_a0: [0x20],
        qpc: Qpc,
        /// Where the WQ buffer starts in the UMEM `wq_umem_id`.
        wq_umem_offset: 0x40,
        wq_umem_id: 0x20,
        wq_umem_valid: 0x1,
        reserved_at_861: [0x1f],
    }
}

layout! {
    /// CREATE_QP outbox: the new QP number.
    pub struct CreateQpOut = create_qp_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// RST2INIT_QP inbox.
    pub struct Rst2initQpIn = rst2init_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
        opt_param_mask: 0x20,
        reserved_at_a0: [0x20],
        qpc: Qpc,
        reserved_at_800: [0x80],
    }
}

layout! {
    /// RST2INIT_QP outbox.
    pub struct Rst2initQpOut = rst2init_qp_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// INIT2RTR_QP inbox.
    pub struct Init2rtrQpIn = init2rtr_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
        opt_param_mask: 0x20,
        reserved_at_a0: [0x20],
        qpc: Qpc,
        reserved_at_800: [0x80],
    }
}

layout! {
    /// INIT2RTR_QP outbox.
    pub struct Init2rtrQpOut = init2rtr_qp_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// RTR2RTS_QP inbox.
    pub struct Rtr2rtsQpIn = rtr2rts_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
        opt_param_mask: 0x20,
        reserved_at_a0: [0x20],
        qpc: Qpc,
        reserved_at_800: [0x80],
    }
}

layout! {
    /// RTR2RTS_QP outbox.
    pub struct Rtr2rtsQpOut = rtr2rts_qp_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// RTS2RTS_QP inbox (the `qpc_data_ext` extension is kept as bytes).
    pub struct Rts2rtsQpIn = rts2rts_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        qpc_ext: 0x1,
        reserved_at_41: [0x7],
        qpn: 0x18,
        reserved_at_60: [0x20],
        opt_param_mask: 0x20,
        reserved_at_a0: [0x20],
        qpc: Qpc,
        reserved_at_800: [0x40],
        opt_param_mask_95_32: 0x40,
        qpc_data_ext: [0x600],
    }
}

layout! {
    /// RTS2RTS_QP outbox.
    pub struct Rts2rtsQpOut = rts2rts_qp_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
    }
}

layout! {
    /// QUERY_QP inbox.
    pub struct QueryQpIn = query_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// QUERY_QP outbox: the QP's context (then its page list).
    pub struct QueryQpOut = query_qp_out {
        status: 0x8,
        reserved_at_8: [0x18],
        syndrome: 0x20,
        reserved_at_40: [0x40],
        opt_param_mask: 0x20,
        reserved_at_a0: [0x20],
        qpc: Qpc,
        reserved_at_800: [0x80],
    }
}

layout! {
    /// DESTROY_QP inbox (the outbox is a plain [`MboxOut`](super::header::MboxOut)).
    pub struct DestroyQpIn = destroy_qp_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x28],
        qpn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// 2ERR_QP inbox: any state to ERR (the outbox is a plain
    /// [`MboxOut`](super::header::MboxOut)). Kernel `mlx5_ifc_qp_2err_in_bits`.
    pub struct Qp2errIn = qp_2err_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
    }
}

layout! {
    /// 2RST_QP inbox: any state to RESET, the same shape as 2ERR. Kernel
    /// `mlx5_ifc_qp_2rst_in_bits`.
    pub struct Qp2rstIn = qp_2rst_in {
        opcode: 0x10,
        uid: 0x10,
        reserved_at_20: [0x10],
        op_mod: 0x10,
        reserved_at_40: [0x8],
        qpn: 0x18,
        reserved_at_60: [0x20],
    }
}
