//! Object, method and attribute ids of the ioctl interface (ib_user_ioctl_cmds.h,
//! mlx5_user_ioctl_cmds.h), one module per object. Driver-specific ids live in the
//! driver namespace (`UVERBS_ID_NS` bit 12 set).


abi_consts! {
    fn ns_consts;
    pub const UVERBS_ID_NS_SHIFT: u32 = 12 => "UVERBS_ID_NS_SHIFT";
    pub const UVERBS_ID_NS_MASK: u16 = 0xF000 => "UVERBS_ID_NS_MASK";
    /// Driver namespace flag: ids with this bit are driver-defined.
    pub const UVERBS_ID_DRIVER_NS: u16 = 0x1000 => "UVERBS_UDATA_DRIVER_DATA_FLAG";
    /// Driver input ("udata in") attribute of any method.
    pub const UVERBS_ATTR_UHW_IN: u16 = 0x1000 => "UVERBS_ATTR_UHW_IN";
    /// Driver output ("udata out") attribute of any method.
    pub const UVERBS_ATTR_UHW_OUT: u16 = 0x1001 => "UVERBS_ATTR_UHW_OUT";
}

/// `enum uverbs_default_objects`.
pub mod object {
    abi_consts! {
        fn consts;
        pub const DEVICE: u16 = 0 => "UVERBS_OBJECT_DEVICE";
        pub const PD: u16 = 1 => "UVERBS_OBJECT_PD";
        pub const COMP_CHANNEL: u16 = 2 => "UVERBS_OBJECT_COMP_CHANNEL";
        pub const CQ: u16 = 3 => "UVERBS_OBJECT_CQ";
        pub const QP: u16 = 4 => "UVERBS_OBJECT_QP";
        pub const SRQ: u16 = 5 => "UVERBS_OBJECT_SRQ";
        pub const AH: u16 = 6 => "UVERBS_OBJECT_AH";
        pub const MR: u16 = 7 => "UVERBS_OBJECT_MR";
        pub const MW: u16 = 8 => "UVERBS_OBJECT_MW";
        pub const FLOW: u16 = 9 => "UVERBS_OBJECT_FLOW";
        pub const XRCD: u16 = 10 => "UVERBS_OBJECT_XRCD";
        pub const RWQ_IND_TBL: u16 = 11 => "UVERBS_OBJECT_RWQ_IND_TBL";
        pub const WQ: u16 = 12 => "UVERBS_OBJECT_WQ";
        pub const FLOW_ACTION: u16 = 13 => "UVERBS_OBJECT_FLOW_ACTION";
        pub const DM: u16 = 14 => "UVERBS_OBJECT_DM";
        pub const COUNTERS: u16 = 15 => "UVERBS_OBJECT_COUNTERS";
        pub const ASYNC_EVENT: u16 = 16 => "UVERBS_OBJECT_ASYNC_EVENT";
        /// mlx5 driver objects (mlx5_user_ioctl_cmds.h).
        pub const MLX5_DEVX: u16 = 0x1000 => "MLX5_IB_OBJECT_DEVX";
        pub const MLX5_DEVX_OBJ: u16 = 0x1001 => "MLX5_IB_OBJECT_DEVX_OBJ";
        pub const MLX5_DEVX_UMEM: u16 = 0x1002 => "MLX5_IB_OBJECT_DEVX_UMEM";
        pub const MLX5_FLOW_MATCHER: u16 = 0x1003 => "MLX5_IB_OBJECT_FLOW_MATCHER";
        pub const MLX5_DEVX_ASYNC_CMD_FD: u16 = 0x1004 => "MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD";
        pub const MLX5_DEVX_ASYNC_EVENT_FD: u16 = 0x1005 => "MLX5_IB_OBJECT_DEVX_ASYNC_EVENT_FD";
        pub const MLX5_VAR: u16 = 0x1006 => "MLX5_IB_OBJECT_VAR";
        pub const MLX5_PP: u16 = 0x1007 => "MLX5_IB_OBJECT_PP";
        pub const MLX5_UAR: u16 = 0x1008 => "MLX5_IB_OBJECT_UAR";
    }
}

/// DEVICE object: methods and their attributes.
pub mod device {
    abi_consts! {
        fn consts;
        pub const INVOKE_WRITE: u16 = 0 => "UVERBS_METHOD_INVOKE_WRITE";
        pub const INFO_HANDLES: u16 = 1 => "UVERBS_METHOD_INFO_HANDLES";
        pub const QUERY_PORT: u16 = 2 => "UVERBS_METHOD_QUERY_PORT";
        pub const GET_CONTEXT: u16 = 3 => "UVERBS_METHOD_GET_CONTEXT";
        pub const QUERY_CONTEXT: u16 = 4 => "UVERBS_METHOD_QUERY_CONTEXT";
        pub const QUERY_GID_TABLE: u16 = 5 => "UVERBS_METHOD_QUERY_GID_TABLE";
        pub const QUERY_GID_ENTRY: u16 = 6 => "UVERBS_METHOD_QUERY_GID_ENTRY";

        pub const ATTR_CORE_IN: u16 = 0 => "UVERBS_ATTR_CORE_IN";
        pub const ATTR_CORE_OUT: u16 = 1 => "UVERBS_ATTR_CORE_OUT";
        pub const ATTR_WRITE_CMD: u16 = 2 => "UVERBS_ATTR_WRITE_CMD";

        pub const ATTR_QUERY_PORT_PORT_NUM: u16 = 0 => "UVERBS_ATTR_QUERY_PORT_PORT_NUM";
        pub const ATTR_QUERY_PORT_RESP: u16 = 1 => "UVERBS_ATTR_QUERY_PORT_RESP";

        pub const ATTR_GET_CONTEXT_NUM_COMP_VECTORS: u16 = 0 => "UVERBS_ATTR_GET_CONTEXT_NUM_COMP_VECTORS";
        pub const ATTR_GET_CONTEXT_CORE_SUPPORT: u16 = 1 => "UVERBS_ATTR_GET_CONTEXT_CORE_SUPPORT";

        pub const ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS: u16 = 0 => "UVERBS_ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS";
        pub const ATTR_QUERY_CONTEXT_CORE_SUPPORT: u16 = 1 => "UVERBS_ATTR_QUERY_CONTEXT_CORE_SUPPORT";

        pub const ATTR_INFO_OBJECT_ID: u16 = 0 => "UVERBS_ATTR_INFO_OBJECT_ID";
        pub const ATTR_INFO_TOTAL_HANDLES: u16 = 1 => "UVERBS_ATTR_INFO_TOTAL_HANDLES";
        pub const ATTR_INFO_HANDLES_LIST: u16 = 2 => "UVERBS_ATTR_INFO_HANDLES_LIST";

        pub const ATTR_QUERY_GID_TABLE_ENTRY_SIZE: u16 = 0 => "UVERBS_ATTR_QUERY_GID_TABLE_ENTRY_SIZE";
        pub const ATTR_QUERY_GID_TABLE_FLAGS: u16 = 1 => "UVERBS_ATTR_QUERY_GID_TABLE_FLAGS";
        pub const ATTR_QUERY_GID_TABLE_RESP_ENTRIES: u16 = 2 => "UVERBS_ATTR_QUERY_GID_TABLE_RESP_ENTRIES";
        pub const ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES: u16 = 3 => "UVERBS_ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES";

        pub const ATTR_QUERY_GID_ENTRY_PORT: u16 = 0 => "UVERBS_ATTR_QUERY_GID_ENTRY_PORT";
        pub const ATTR_QUERY_GID_ENTRY_GID_INDEX: u16 = 1 => "UVERBS_ATTR_QUERY_GID_ENTRY_GID_INDEX";
        pub const ATTR_QUERY_GID_ENTRY_FLAGS: u16 = 2 => "UVERBS_ATTR_QUERY_GID_ENTRY_FLAGS";
        pub const ATTR_QUERY_GID_ENTRY_RESP_ENTRY: u16 = 3 => "UVERBS_ATTR_QUERY_GID_ENTRY_RESP_ENTRY";
    }
}

/// PD object (only destroy is an ioctl method; allocation is the write() command).
pub mod pd {
    abi_consts! {
        fn consts;
        pub const DESTROY: u16 = 0 => "UVERBS_METHOD_PD_DESTROY";
        pub const ATTR_DESTROY_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_PD_HANDLE";
    }
}

/// CQ object.
pub mod cq {
    abi_consts! {
        fn consts;
        pub const CREATE: u16 = 0 => "UVERBS_METHOD_CQ_CREATE";
        pub const DESTROY: u16 = 1 => "UVERBS_METHOD_CQ_DESTROY";
        pub const ATTR_CREATE_HANDLE: u16 = 0 => "UVERBS_ATTR_CREATE_CQ_HANDLE";
        pub const ATTR_CREATE_CQE: u16 = 1 => "UVERBS_ATTR_CREATE_CQ_CQE";
        pub const ATTR_CREATE_USER_HANDLE: u16 = 2 => "UVERBS_ATTR_CREATE_CQ_USER_HANDLE";
        pub const ATTR_CREATE_COMP_CHANNEL: u16 = 3 => "UVERBS_ATTR_CREATE_CQ_COMP_CHANNEL";
        pub const ATTR_CREATE_COMP_VECTOR: u16 = 4 => "UVERBS_ATTR_CREATE_CQ_COMP_VECTOR";
        pub const ATTR_CREATE_FLAGS: u16 = 5 => "UVERBS_ATTR_CREATE_CQ_FLAGS";
        pub const ATTR_CREATE_RESP_CQE: u16 = 6 => "UVERBS_ATTR_CREATE_CQ_RESP_CQE";
        pub const ATTR_CREATE_EVENT_FD: u16 = 7 => "UVERBS_ATTR_CREATE_CQ_EVENT_FD";
        pub const ATTR_DESTROY_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_CQ_HANDLE";
        pub const ATTR_DESTROY_RESP: u16 = 1 => "UVERBS_ATTR_DESTROY_CQ_RESP";
    }
}

/// QP object.
pub mod qp {
    abi_consts! {
        fn consts;
        pub const CREATE: u16 = 0 => "UVERBS_METHOD_QP_CREATE";
        pub const DESTROY: u16 = 1 => "UVERBS_METHOD_QP_DESTROY";
        pub const ATTR_CREATE_HANDLE: u16 = 0 => "UVERBS_ATTR_CREATE_QP_HANDLE";
        pub const ATTR_CREATE_XRCD_HANDLE: u16 = 1 => "UVERBS_ATTR_CREATE_QP_XRCD_HANDLE";
        pub const ATTR_CREATE_PD_HANDLE: u16 = 2 => "UVERBS_ATTR_CREATE_QP_PD_HANDLE";
        pub const ATTR_CREATE_SRQ_HANDLE: u16 = 3 => "UVERBS_ATTR_CREATE_QP_SRQ_HANDLE";
        pub const ATTR_CREATE_SEND_CQ_HANDLE: u16 = 4 => "UVERBS_ATTR_CREATE_QP_SEND_CQ_HANDLE";
        pub const ATTR_CREATE_RECV_CQ_HANDLE: u16 = 5 => "UVERBS_ATTR_CREATE_QP_RECV_CQ_HANDLE";
        pub const ATTR_CREATE_IND_TABLE_HANDLE: u16 = 6 => "UVERBS_ATTR_CREATE_QP_IND_TABLE_HANDLE";
        pub const ATTR_CREATE_USER_HANDLE: u16 = 7 => "UVERBS_ATTR_CREATE_QP_USER_HANDLE";
        pub const ATTR_CREATE_CAP: u16 = 8 => "UVERBS_ATTR_CREATE_QP_CAP";
        pub const ATTR_CREATE_TYPE: u16 = 9 => "UVERBS_ATTR_CREATE_QP_TYPE";
        pub const ATTR_CREATE_FLAGS: u16 = 10 => "UVERBS_ATTR_CREATE_QP_FLAGS";
        pub const ATTR_CREATE_SOURCE_QPN: u16 = 11 => "UVERBS_ATTR_CREATE_QP_SOURCE_QPN";
        pub const ATTR_CREATE_EVENT_FD: u16 = 12 => "UVERBS_ATTR_CREATE_QP_EVENT_FD";
        pub const ATTR_CREATE_RESP_CAP: u16 = 13 => "UVERBS_ATTR_CREATE_QP_RESP_CAP";
        pub const ATTR_CREATE_RESP_QP_NUM: u16 = 14 => "UVERBS_ATTR_CREATE_QP_RESP_QP_NUM";
        pub const ATTR_DESTROY_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_QP_HANDLE";
        pub const ATTR_DESTROY_RESP: u16 = 1 => "UVERBS_ATTR_DESTROY_QP_RESP";
    }
}

/// SRQ object (its destroy is in [`destroy`]).
pub mod srq {
    abi_consts! {
        fn consts;
        pub const CREATE: u16 = 0 => "UVERBS_METHOD_SRQ_CREATE";
        pub const ATTR_CREATE_HANDLE: u16 = 0 => "UVERBS_ATTR_CREATE_SRQ_HANDLE";
        pub const ATTR_CREATE_PD_HANDLE: u16 = 1 => "UVERBS_ATTR_CREATE_SRQ_PD_HANDLE";
        pub const ATTR_CREATE_XRCD_HANDLE: u16 = 2 => "UVERBS_ATTR_CREATE_SRQ_XRCD_HANDLE";
        pub const ATTR_CREATE_CQ_HANDLE: u16 = 3 => "UVERBS_ATTR_CREATE_SRQ_CQ_HANDLE";
        pub const ATTR_CREATE_USER_HANDLE: u16 = 4 => "UVERBS_ATTR_CREATE_SRQ_USER_HANDLE";
        pub const ATTR_CREATE_MAX_WR: u16 = 5 => "UVERBS_ATTR_CREATE_SRQ_MAX_WR";
        pub const ATTR_CREATE_MAX_SGE: u16 = 6 => "UVERBS_ATTR_CREATE_SRQ_MAX_SGE";
        pub const ATTR_CREATE_LIMIT: u16 = 7 => "UVERBS_ATTR_CREATE_SRQ_LIMIT";
        pub const ATTR_CREATE_MAX_NUM_TAGS: u16 = 8 => "UVERBS_ATTR_CREATE_SRQ_MAX_NUM_TAGS";
        pub const ATTR_CREATE_TYPE: u16 = 9 => "UVERBS_ATTR_CREATE_SRQ_TYPE";
        pub const ATTR_CREATE_EVENT_FD: u16 = 10 => "UVERBS_ATTR_CREATE_SRQ_EVENT_FD";
        pub const ATTR_CREATE_RESP_MAX_WR: u16 = 11 => "UVERBS_ATTR_CREATE_SRQ_RESP_MAX_WR";
        pub const ATTR_CREATE_RESP_MAX_SGE: u16 = 12 => "UVERBS_ATTR_CREATE_SRQ_RESP_MAX_SGE";
        pub const ATTR_CREATE_RESP_SRQ_NUM: u16 = 13 => "UVERBS_ATTR_CREATE_SRQ_RESP_SRQ_NUM";
        pub const SRQT_BASIC: u32 = 0 => "IB_UVERBS_SRQT_BASIC";
        pub const SRQT_XRC: u32 = 1 => "IB_UVERBS_SRQT_XRC";
        pub const SRQT_TM: u32 = 2 => "IB_UVERBS_SRQT_TM";
    }
}

/// MR object.
pub mod mr {
    abi_consts! {
        fn consts;
        pub const DM_MR_REG: u16 = 0 => "UVERBS_METHOD_DM_MR_REG";
        pub const DESTROY: u16 = 1 => "UVERBS_METHOD_MR_DESTROY";
        pub const ADVISE: u16 = 2 => "UVERBS_METHOD_ADVISE_MR";
        pub const QUERY: u16 = 3 => "UVERBS_METHOD_QUERY_MR";
        pub const REG_DMABUF_MR: u16 = 4 => "UVERBS_METHOD_REG_DMABUF_MR";
        pub const ATTR_DESTROY_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_MR_HANDLE";
        pub const ATTR_REG_DMABUF_HANDLE: u16 = 0 => "UVERBS_ATTR_REG_DMABUF_MR_HANDLE";
        pub const ATTR_REG_DMABUF_PD_HANDLE: u16 = 1 => "UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE";
        pub const ATTR_REG_DMABUF_OFFSET: u16 = 2 => "UVERBS_ATTR_REG_DMABUF_MR_OFFSET";
        pub const ATTR_REG_DMABUF_LENGTH: u16 = 3 => "UVERBS_ATTR_REG_DMABUF_MR_LENGTH";
        pub const ATTR_REG_DMABUF_IOVA: u16 = 4 => "UVERBS_ATTR_REG_DMABUF_MR_IOVA";
        pub const ATTR_REG_DMABUF_FD: u16 = 5 => "UVERBS_ATTR_REG_DMABUF_MR_FD";
        pub const ATTR_REG_DMABUF_ACCESS_FLAGS: u16 = 6 => "UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS";
        pub const ATTR_REG_DMABUF_RESP_LKEY: u16 = 7 => "UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY";
        pub const ATTR_REG_DMABUF_RESP_RKEY: u16 = 8 => "UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY";
        pub const ATTR_QUERY_HANDLE: u16 = 0 => "UVERBS_ATTR_QUERY_MR_HANDLE";
        pub const ATTR_QUERY_RESP_LKEY: u16 = 1 => "UVERBS_ATTR_QUERY_MR_RESP_LKEY";
        pub const ATTR_QUERY_RESP_RKEY: u16 = 2 => "UVERBS_ATTR_QUERY_MR_RESP_RKEY";
        pub const ATTR_QUERY_RESP_LENGTH: u16 = 3 => "UVERBS_ATTR_QUERY_MR_RESP_LENGTH";
        pub const ATTR_QUERY_RESP_IOVA: u16 = 4 => "UVERBS_ATTR_QUERY_MR_RESP_IOVA";
        pub const ATTR_ADVISE_PD_HANDLE: u16 = 0 => "UVERBS_ATTR_ADVISE_MR_PD_HANDLE";
        pub const ATTR_ADVISE_ADVICE: u16 = 1 => "UVERBS_ATTR_ADVISE_MR_ADVICE";
        pub const ATTR_ADVISE_FLAGS: u16 = 2 => "UVERBS_ATTR_ADVISE_MR_FLAGS";
        pub const ATTR_ADVISE_SGE_LIST: u16 = 3 => "UVERBS_ATTR_ADVISE_MR_SGE_LIST";
    }
}

/// Objects whose only ioctl method is a destroy taking one handle (AH, MW, FLOW, XRCD,
/// RWQ_IND_TBL), and the SRQ/WQ destroys (handle plus a response).
pub mod destroy {
    abi_consts! {
        fn consts;
        pub const AH_DESTROY: u16 = 0 => "UVERBS_METHOD_AH_DESTROY";
        pub const ATTR_AH_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_AH_HANDLE";
        pub const MW_DESTROY: u16 = 0 => "UVERBS_METHOD_MW_DESTROY";
        pub const ATTR_MW_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_MW_HANDLE";
        pub const FLOW_DESTROY: u16 = 0 => "UVERBS_METHOD_FLOW_DESTROY";
        pub const ATTR_FLOW_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_FLOW_HANDLE";
        pub const XRCD_DESTROY: u16 = 0 => "UVERBS_METHOD_XRCD_DESTROY";
        pub const ATTR_XRCD_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_XRCD_HANDLE";
        pub const RWQ_IND_TBL_DESTROY: u16 = 0 => "UVERBS_METHOD_RWQ_IND_TBL_DESTROY";
        pub const ATTR_RWQ_IND_TBL_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_RWQ_IND_TBL_HANDLE";
        pub const SRQ_DESTROY: u16 = 1 => "UVERBS_METHOD_SRQ_DESTROY";
        pub const ATTR_SRQ_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_SRQ_HANDLE";
        pub const ATTR_SRQ_RESP: u16 = 1 => "UVERBS_ATTR_DESTROY_SRQ_RESP";
        pub const WQ_DESTROY: u16 = 1 => "UVERBS_METHOD_WQ_DESTROY";
        pub const ATTR_WQ_HANDLE: u16 = 0 => "UVERBS_ATTR_DESTROY_WQ_HANDLE";
        pub const ATTR_WQ_RESP: u16 = 1 => "UVERBS_ATTR_DESTROY_WQ_RESP";
    }
}

/// ASYNC_EVENT object: the fd that carries async events (port up, QP fatal, ...).
pub mod async_event {
    abi_consts! {
        fn consts;
        pub const ALLOC: u16 = 0 => "UVERBS_METHOD_ASYNC_EVENT_ALLOC";
        pub const ATTR_ALLOC_FD_HANDLE: u16 = 0 => "UVERBS_ATTR_ASYNC_EVENT_ALLOC_FD_HANDLE";
    }
}

/// mlx5 driver methods used by DevX and dynamic UARs.
pub mod mlx5 {
    abi_consts! {
        fn consts;
        pub const DEVX_OTHER: u16 = 0x1000 => "MLX5_IB_METHOD_DEVX_OTHER";
        pub const DEVX_QUERY_UAR: u16 = 0x1001 => "MLX5_IB_METHOD_DEVX_QUERY_UAR";
        pub const DEVX_QUERY_EQN: u16 = 0x1002 => "MLX5_IB_METHOD_DEVX_QUERY_EQN";
        pub const DEVX_SUBSCRIBE_EVENT: u16 = 0x1003 => "MLX5_IB_METHOD_DEVX_SUBSCRIBE_EVENT";
        pub const ATTR_DEVX_OTHER_CMD_IN: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_OTHER_CMD_IN";
        pub const ATTR_DEVX_OTHER_CMD_OUT: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_OTHER_CMD_OUT";
        pub const ATTR_DEVX_QUERY_UAR_USER_IDX: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_QUERY_UAR_USER_IDX";
        pub const ATTR_DEVX_QUERY_UAR_DEV_IDX: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_QUERY_UAR_DEV_IDX";
        pub const ATTR_DEVX_QUERY_EQN_USER_VEC: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_QUERY_EQN_USER_VEC";
        pub const ATTR_DEVX_QUERY_EQN_DEV_EQN: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_QUERY_EQN_DEV_EQN";
        pub const ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_HANDLE";
        pub const ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_OBJ_HANDLE";
        pub const ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST: u16 = 0x1002 => "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_TYPE_NUM_LIST";
        pub const ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM: u16 = 0x1003 => "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_FD_NUM";
        pub const ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE: u16 = 0x1004 => "MLX5_IB_ATTR_DEVX_SUBSCRIBE_EVENT_COOKIE";

        pub const DEVX_OBJ_CREATE: u16 = 0x1000 => "MLX5_IB_METHOD_DEVX_OBJ_CREATE";
        pub const DEVX_OBJ_DESTROY: u16 = 0x1001 => "MLX5_IB_METHOD_DEVX_OBJ_DESTROY";
        pub const DEVX_OBJ_MODIFY: u16 = 0x1002 => "MLX5_IB_METHOD_DEVX_OBJ_MODIFY";
        pub const DEVX_OBJ_QUERY: u16 = 0x1003 => "MLX5_IB_METHOD_DEVX_OBJ_QUERY";
        pub const DEVX_OBJ_ASYNC_QUERY: u16 = 0x1004 => "MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY";
        pub const ATTR_DEVX_OBJ_CREATE_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_OBJ_CREATE_HANDLE";
        pub const ATTR_DEVX_OBJ_CREATE_CMD_IN: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_IN";
        pub const ATTR_DEVX_OBJ_CREATE_CMD_OUT: u16 = 0x1002 => "MLX5_IB_ATTR_DEVX_OBJ_CREATE_CMD_OUT";
        pub const ATTR_DEVX_OBJ_DESTROY_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_OBJ_DESTROY_HANDLE";
        pub const ATTR_DEVX_OBJ_MODIFY_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_OBJ_MODIFY_HANDLE";
        pub const ATTR_DEVX_OBJ_MODIFY_CMD_IN: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_IN";
        pub const ATTR_DEVX_OBJ_MODIFY_CMD_OUT: u16 = 0x1002 => "MLX5_IB_ATTR_DEVX_OBJ_MODIFY_CMD_OUT";
        pub const ATTR_DEVX_OBJ_QUERY_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_HANDLE";
        pub const ATTR_DEVX_OBJ_QUERY_CMD_IN: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_IN";
        pub const ATTR_DEVX_OBJ_QUERY_CMD_OUT: u16 = 0x1002 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_CMD_OUT";
        pub const ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE";
        pub const ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN";
        pub const ATTR_DEVX_OBJ_QUERY_ASYNC_FD: u16 = 0x1002 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_FD";
        pub const ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID: u16 = 0x1003 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID";
        pub const ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN: u16 = 0x1004 => "MLX5_IB_ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN";

        pub const DEVX_UMEM_REG: u16 = 0x1000 => "MLX5_IB_METHOD_DEVX_UMEM_REG";
        pub const DEVX_UMEM_DEREG: u16 = 0x1001 => "MLX5_IB_METHOD_DEVX_UMEM_DEREG";
        pub const ATTR_DEVX_UMEM_REG_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_UMEM_REG_HANDLE";
        pub const ATTR_DEVX_UMEM_REG_ADDR: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_UMEM_REG_ADDR";
        pub const ATTR_DEVX_UMEM_REG_LEN: u16 = 0x1002 => "MLX5_IB_ATTR_DEVX_UMEM_REG_LEN";
        pub const ATTR_DEVX_UMEM_REG_ACCESS: u16 = 0x1003 => "MLX5_IB_ATTR_DEVX_UMEM_REG_ACCESS";
        pub const ATTR_DEVX_UMEM_REG_OUT_ID: u16 = 0x1004 => "MLX5_IB_ATTR_DEVX_UMEM_REG_OUT_ID";
        pub const ATTR_DEVX_UMEM_REG_PGSZ_BITMAP: u16 = 0x1005 => "MLX5_IB_ATTR_DEVX_UMEM_REG_PGSZ_BITMAP";
        pub const ATTR_DEVX_UMEM_REG_DMABUF_FD: u16 = 0x1006 => "MLX5_IB_ATTR_DEVX_UMEM_REG_DMABUF_FD";
        pub const ATTR_DEVX_UMEM_DEREG_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_UMEM_DEREG_HANDLE";

        pub const DEVX_ASYNC_CMD_FD_ALLOC: u16 = 0x1000 => "MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC";
        pub const ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE";
        pub const DEVX_ASYNC_EVENT_FD_ALLOC: u16 = 0x1000 => "MLX5_IB_METHOD_DEVX_ASYNC_EVENT_FD_ALLOC";
        pub const ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_HANDLE";
        pub const ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS: u16 = 0x1001 => "MLX5_IB_ATTR_DEVX_ASYNC_EVENT_FD_ALLOC_FLAGS";

        // MLX5_IB_OBJECT_FLOW_MATCHER
        pub const FLOW_MATCHER_CREATE: u16 = 0x1000 => "MLX5_IB_METHOD_FLOW_MATCHER_CREATE";
        pub const FLOW_MATCHER_DESTROY: u16 = 0x1001 => "MLX5_IB_METHOD_FLOW_MATCHER_DESTROY";
        pub const ATTR_FLOW_MATCHER_CREATE_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_FLOW_MATCHER_CREATE_HANDLE";
        pub const ATTR_FLOW_MATCHER_MATCH_MASK: u16 = 0x1001 => "MLX5_IB_ATTR_FLOW_MATCHER_MATCH_MASK";
        pub const ATTR_FLOW_MATCHER_FLOW_TYPE: u16 = 0x1002 => "MLX5_IB_ATTR_FLOW_MATCHER_FLOW_TYPE";
        pub const ATTR_FLOW_MATCHER_MATCH_CRITERIA: u16 = 0x1003 => "MLX5_IB_ATTR_FLOW_MATCHER_MATCH_CRITERIA";
        pub const ATTR_FLOW_MATCHER_FLOW_FLAGS: u16 = 0x1004 => "MLX5_IB_ATTR_FLOW_MATCHER_FLOW_FLAGS";
        pub const ATTR_FLOW_MATCHER_FT_TYPE: u16 = 0x1005 => "MLX5_IB_ATTR_FLOW_MATCHER_FT_TYPE";
        pub const ATTR_FLOW_MATCHER_DESTROY_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_FLOW_MATCHER_DESTROY_HANDLE";
        /// `sizeof(struct mlx5_ib_match_params)`.
        pub const MATCH_PARAMS_BYTES: u16 = 0xa0 * 4 => "sizeof(struct mlx5_ib_match_params)";
        pub const FLOW_TYPE_NORMAL: u8 = 0 => "MLX5_IB_FLOW_TYPE_NORMAL";
        pub const FLOW_TYPE_SNIFFER: u8 = 1 => "MLX5_IB_FLOW_TYPE_SNIFFER";
        pub const FLOW_TYPE_ALL_DEFAULT: u8 = 2 => "MLX5_IB_FLOW_TYPE_ALL_DEFAULT";
        pub const FLOW_TYPE_MC_DEFAULT: u8 = 3 => "MLX5_IB_FLOW_TYPE_MC_DEFAULT";
        pub const FLOW_TABLE_TYPE_NIC_RX: u64 = 0 => "MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_RX";
        pub const FLOW_TABLE_TYPE_NIC_TX: u64 = 1 => "MLX5_IB_UAPI_FLOW_TABLE_TYPE_NIC_TX";
        pub const FLOW_TABLE_TYPE_FDB: u64 = 2 => "MLX5_IB_UAPI_FLOW_TABLE_TYPE_FDB";
        pub const FLOW_TABLE_TYPE_RDMA_RX: u64 = 3 => "MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_RX";
        pub const FLOW_TABLE_TYPE_RDMA_TX: u64 = 4 => "MLX5_IB_UAPI_FLOW_TABLE_TYPE_RDMA_TX";
        // UVERBS_OBJECT_FLOW's mlx5 methods
        pub const CREATE_FLOW: u16 = 0x1000 => "MLX5_IB_METHOD_CREATE_FLOW";
        pub const DESTROY_FLOW: u16 = 0x1001 => "MLX5_IB_METHOD_DESTROY_FLOW";
        pub const ATTR_CREATE_FLOW_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_CREATE_FLOW_HANDLE";
        pub const ATTR_CREATE_FLOW_MATCH_VALUE: u16 = 0x1001 => "MLX5_IB_ATTR_CREATE_FLOW_MATCH_VALUE";
        pub const ATTR_CREATE_FLOW_DEST_QP: u16 = 0x1002 => "MLX5_IB_ATTR_CREATE_FLOW_DEST_QP";
        pub const ATTR_CREATE_FLOW_DEST_DEVX: u16 = 0x1003 => "MLX5_IB_ATTR_CREATE_FLOW_DEST_DEVX";
        pub const ATTR_CREATE_FLOW_MATCHER: u16 = 0x1004 => "MLX5_IB_ATTR_CREATE_FLOW_MATCHER";
        pub const ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS: u16 = 0x1005 => "MLX5_IB_ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS";
        pub const ATTR_CREATE_FLOW_TAG: u16 = 0x1006 => "MLX5_IB_ATTR_CREATE_FLOW_TAG";
        pub const ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX: u16 = 0x1007 => "MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX";
        pub const ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET: u16 = 0x1008 => "MLX5_IB_ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET";
        pub const ATTR_CREATE_FLOW_FLAGS: u16 = 0x1009 => "MLX5_IB_ATTR_CREATE_FLOW_FLAGS";
        pub const CREATE_FLOW_FLAGS_DEFAULT_MISS: u32 = 1 << 0 => "MLX5_IB_ATTR_CREATE_FLOW_FLAGS_DEFAULT_MISS";
        pub const CREATE_FLOW_FLAGS_DROP: u32 = 1 << 1 => "MLX5_IB_ATTR_CREATE_FLOW_FLAGS_DROP";
        pub const UAR_OBJ_ALLOC: u16 = 0x1000 => "MLX5_IB_METHOD_UAR_OBJ_ALLOC";
        pub const UAR_OBJ_DESTROY: u16 = 0x1001 => "MLX5_IB_METHOD_UAR_OBJ_DESTROY";
        pub const ATTR_UAR_OBJ_ALLOC_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_UAR_OBJ_ALLOC_HANDLE";
        pub const ATTR_UAR_OBJ_ALLOC_TYPE: u16 = 0x1001 => "MLX5_IB_ATTR_UAR_OBJ_ALLOC_TYPE";
        pub const ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET: u16 = 0x1002 => "MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET";
        pub const ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH: u16 = 0x1003 => "MLX5_IB_ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH";
        pub const ATTR_UAR_OBJ_ALLOC_PAGE_ID: u16 = 0x1004 => "MLX5_IB_ATTR_UAR_OBJ_ALLOC_PAGE_ID";
        pub const ATTR_UAR_OBJ_DESTROY_HANDLE: u16 = 0x1000 => "MLX5_IB_ATTR_UAR_OBJ_DESTROY_HANDLE";
        /// mlx5's extra output of `UVERBS_METHOD_QUERY_CONTEXT`: the context response again.
        pub const ATTR_QUERY_CONTEXT_RESP_UCTX: u16 = 0x1000 => "MLX5_IB_ATTR_QUERY_CONTEXT_RESP_UCTX";
        /// `MLX5_IB_UAPI_UAR_ALLOC_TYPE_*`: a BlueFlame (write-combining) or non-cached page.
        pub const UAR_ALLOC_TYPE_BF: u32 = 0 => "MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF";
        pub const UAR_ALLOC_TYPE_NC: u32 = 1 => "MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC";
    }
}

/// Every id above with the C expression it must equal.
pub fn id_consts() -> Vec<crate::sys::layout::Const> {
    let mut v = ns_consts();
    for f in [object::consts, device::consts, pd::consts, cq::consts, qp::consts, srq::consts, mr::consts,
              async_event::consts, mlx5::consts, destroy::consts] {
        v.extend(f());
    }
    v
}
