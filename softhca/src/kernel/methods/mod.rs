//! The handlers, one file per object, and the tables that route ioctl methods and write
//! commands to them. INVOKE_WRITE runs the write handlers with the core structs taken from
//! CORE_IN/CORE_OUT attributes, so both paths share one implementation per command.

pub(crate) mod ah;
pub(crate) mod channel;
pub(crate) mod context;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod devx;
pub(crate) mod flow;
pub(crate) mod flow_fs;
pub(crate) mod flow_matcher;
pub(crate) mod misc;
pub(crate) mod mr;
pub(crate) mod pd;
pub(crate) mod port;
pub(crate) mod qp;
pub(crate) mod raw_qp;
pub(crate) mod srq;
pub(crate) mod uar;
pub(crate) mod xrcd;

use uverbs::sys::ids::{self, async_event, destroy, device as dev, mlx5, object, UVERBS_ID_DRIVER_NS};

use super::ioctl::{
    enum_in, fd, idr, idrs_arr, in_min, in_min_copied, in_struct, in_type, m, o, out_min, out_struct, out_type, Access, AttrDef,
    FdType, MethodDef, Spec, CONST_IN, FLAGS_IN, NO_DATA,
};
use super::uobject::ObjType;
use super::write::WriteDef;

const fn method(object: u16, method: u16, attrs: &'static [AttrDef], udata: bool,
                handler: super::ioctl::Handler) -> MethodDef {
    MethodDef { object, method, attrs, udata, handler }
}

/// `sizeof(struct ib_uverbs_sge)`: ADVISE_MR's SGE list holds at least one.
const SGE_LEN: u16 = std::mem::size_of::<uverbs::sys::verbs::Sge>() as u16;

/// `UVERBS_ATTR_SIZE(1, sizeof(struct mlx5_ib_match_params))`.
const MATCH_PARAMS: Spec = Spec::PtrIn { min: 1, len: mlx5::MATCH_PARAMS_BYTES, zero_trailing: false };

/// `sizeof(struct mlx5_ib_alloc_ucontext_resp)`.
const UCTX_RESP: u16 = 72;

/// Every ioctl method softhca implements. A pair not listed is EPROTONOSUPPORT, as for a
/// method missing from the kernel's tree.
pub(crate) static METHODS: &[MethodDef] = &[
    method(object::DEVICE, dev::INVOKE_WRITE, &[
        m(dev::ATTR_WRITE_CMD, CONST_IN),
        o(dev::ATTR_CORE_IN, in_min(4)),
        o(dev::ATTR_CORE_OUT, out_min(0)),
    ], true, device::invoke_write),
    method(object::DEVICE, dev::INFO_HANDLES, &[
        m(dev::ATTR_INFO_OBJECT_ID, CONST_IN),
        o(dev::ATTR_INFO_TOTAL_HANDLES, out_type(4)),
        o(dev::ATTR_INFO_HANDLES_LIST, out_min(4)),
    ], false, device::info_handles),
    method(object::DEVICE, dev::QUERY_PORT, &[
        m(dev::ATTR_QUERY_PORT_PORT_NUM, CONST_IN),
        m(dev::ATTR_QUERY_PORT_RESP, out_struct(48)),
    ], false, port::query_port_ioctl),
    method(object::DEVICE, dev::GET_CONTEXT, &[
        o(dev::ATTR_GET_CONTEXT_NUM_COMP_VECTORS, out_type(4)),
        o(dev::ATTR_GET_CONTEXT_CORE_SUPPORT, out_type(8)),
    ], true, context::get_context_ioctl),
    method(object::DEVICE, dev::QUERY_CONTEXT, &[
        o(dev::ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS, out_type(4)),
        o(dev::ATTR_QUERY_CONTEXT_CORE_SUPPORT, out_type(8)),
        m(mlx5::ATTR_QUERY_CONTEXT_RESP_UCTX, out_struct(UCTX_RESP)),
    ], false, context::query_context),
    method(object::DEVICE, dev::QUERY_GID_TABLE, &[
        m(dev::ATTR_QUERY_GID_TABLE_ENTRY_SIZE, CONST_IN),
        o(dev::ATTR_QUERY_GID_TABLE_FLAGS, FLAGS_IN),
        m(dev::ATTR_QUERY_GID_TABLE_RESP_ENTRIES, out_min(0)),
        m(dev::ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, out_type(8)),
    ], false, port::query_gid_table),
    method(object::DEVICE, dev::QUERY_GID_ENTRY, &[
        m(dev::ATTR_QUERY_GID_ENTRY_PORT, CONST_IN),
        m(dev::ATTR_QUERY_GID_ENTRY_GID_INDEX, CONST_IN),
        m(dev::ATTR_QUERY_GID_ENTRY_FLAGS, FLAGS_IN),
        m(dev::ATTR_QUERY_GID_ENTRY_RESP_ENTRY, out_struct(32)),
    ], false, port::query_gid_entry),
    method(object::PD, ids::pd::DESTROY, &[
        m(ids::pd::ATTR_DESTROY_HANDLE, idr(ObjType::Pd, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::CQ, ids::cq::CREATE, &[
        m(ids::cq::ATTR_CREATE_HANDLE, idr(ObjType::Cq, Access::New)),
        m(ids::cq::ATTR_CREATE_CQE, in_type(4)),
        m(ids::cq::ATTR_CREATE_USER_HANDLE, in_type(8)),
        o(ids::cq::ATTR_CREATE_COMP_CHANNEL, fd(FdType::CompChannel, Access::Read)),
        m(ids::cq::ATTR_CREATE_COMP_VECTOR, in_type(4)),
        o(ids::cq::ATTR_CREATE_FLAGS, FLAGS_IN),
        m(ids::cq::ATTR_CREATE_RESP_CQE, out_type(4)),
        o(ids::cq::ATTR_CREATE_EVENT_FD, fd(FdType::AsyncEvent, Access::Read)),
    ], true, cq::create_cq_ioctl),
    method(object::CQ, ids::cq::DESTROY, &[
        m(ids::cq::ATTR_DESTROY_HANDLE, idr(ObjType::Cq, Access::Destroy)),
        m(ids::cq::ATTR_DESTROY_RESP, out_type(8)),
    ], false, cq::destroy_cq_ioctl),
    method(object::QP, ids::qp::CREATE, &[
        m(ids::qp::ATTR_CREATE_HANDLE, idr(ObjType::Qp, Access::New)),
        o(ids::qp::ATTR_CREATE_XRCD_HANDLE, idr(ObjType::Xrcd, Access::Read)),
        o(ids::qp::ATTR_CREATE_PD_HANDLE, idr(ObjType::Pd, Access::Read)),
        o(ids::qp::ATTR_CREATE_SRQ_HANDLE, idr(ObjType::Srq, Access::Read)),
        o(ids::qp::ATTR_CREATE_SEND_CQ_HANDLE, idr(ObjType::Cq, Access::Read)),
        o(ids::qp::ATTR_CREATE_RECV_CQ_HANDLE, idr(ObjType::Cq, Access::Read)),
        o(ids::qp::ATTR_CREATE_IND_TABLE_HANDLE, idr(ObjType::RwqIndTbl, Access::Read)),
        m(ids::qp::ATTR_CREATE_USER_HANDLE, in_type(8)),
        m(ids::qp::ATTR_CREATE_CAP, in_struct(20, 20)),
        m(ids::qp::ATTR_CREATE_TYPE, CONST_IN),
        o(ids::qp::ATTR_CREATE_FLAGS, FLAGS_IN),
        o(ids::qp::ATTR_CREATE_SOURCE_QPN, in_type(4)),
        o(ids::qp::ATTR_CREATE_EVENT_FD, fd(FdType::AsyncEvent, Access::Read)),
        m(ids::qp::ATTR_CREATE_RESP_CAP, out_struct(20)),
        m(ids::qp::ATTR_CREATE_RESP_QP_NUM, out_type(4)),
    ], true, qp::create_qp_ioctl),
    method(object::QP, ids::qp::DESTROY, &[
        m(ids::qp::ATTR_DESTROY_HANDLE, idr(ObjType::Qp, Access::Destroy)),
        m(ids::qp::ATTR_DESTROY_RESP, out_type(4)),
    ], false, qp::destroy_qp_ioctl),
    method(object::SRQ, ids::srq::CREATE, &[
        m(ids::srq::ATTR_CREATE_HANDLE, idr(ObjType::Srq, Access::New)),
        m(ids::srq::ATTR_CREATE_PD_HANDLE, idr(ObjType::Pd, Access::Read)),
        m(ids::srq::ATTR_CREATE_TYPE, CONST_IN),
        m(ids::srq::ATTR_CREATE_USER_HANDLE, in_type(8)),
        m(ids::srq::ATTR_CREATE_MAX_WR, in_type(4)),
        m(ids::srq::ATTR_CREATE_MAX_SGE, in_type(4)),
        m(ids::srq::ATTR_CREATE_LIMIT, in_type(4)),
        o(ids::srq::ATTR_CREATE_XRCD_HANDLE, idr(ObjType::Xrcd, Access::Read)),
        o(ids::srq::ATTR_CREATE_CQ_HANDLE, idr(ObjType::Cq, Access::Read)),
        o(ids::srq::ATTR_CREATE_MAX_NUM_TAGS, in_type(4)),
        o(ids::srq::ATTR_CREATE_EVENT_FD, fd(FdType::AsyncEvent, Access::Read)),
        m(ids::srq::ATTR_CREATE_RESP_MAX_WR, out_type(4)),
        m(ids::srq::ATTR_CREATE_RESP_MAX_SGE, out_type(4)),
        o(ids::srq::ATTR_CREATE_RESP_SRQ_NUM, out_type(4)),
    ], true, srq::create_srq_ioctl),
    method(object::SRQ, destroy::SRQ_DESTROY, &[
        m(destroy::ATTR_SRQ_HANDLE, idr(ObjType::Srq, Access::Destroy)),
        m(destroy::ATTR_SRQ_RESP, out_type(4)),
    ], false, srq::destroy_srq_ioctl),
    method(object::AH, destroy::AH_DESTROY, &[
        m(destroy::ATTR_AH_HANDLE, idr(ObjType::Ah, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::MR, ids::mr::DM_MR_REG, &[
        m(0, idr(ObjType::Mr, Access::New)),
        m(1, in_type(8)),
        m(2, in_type(8)),
        m(3, idr(ObjType::Pd, Access::Read)),
        o(4, FLAGS_IN),
        m(5, idr(ObjType::Dm, Access::Read)),
        m(6, out_type(4)),
        m(7, out_type(4)),
    ], false, misc::not_supported),
    method(object::MR, ids::mr::ADVISE, &[
        m(ids::mr::ATTR_ADVISE_PD_HANDLE, idr(ObjType::Pd, Access::Read)),
        m(ids::mr::ATTR_ADVISE_ADVICE, CONST_IN),
        m(ids::mr::ATTR_ADVISE_FLAGS, FLAGS_IN),
        m(ids::mr::ATTR_ADVISE_SGE_LIST, in_min_copied(SGE_LEN)),
    ], false, mr::advise_mr),
    method(object::MR, ids::mr::DESTROY, &[
        m(ids::mr::ATTR_DESTROY_HANDLE, idr(ObjType::Mr, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::MR, ids::mr::QUERY, &[
        m(ids::mr::ATTR_QUERY_HANDLE, idr(ObjType::Mr, Access::Read)),
        m(ids::mr::ATTR_QUERY_RESP_RKEY, out_type(4)),
        m(ids::mr::ATTR_QUERY_RESP_LKEY, out_type(4)),
        m(ids::mr::ATTR_QUERY_RESP_LENGTH, out_type(8)),
        o(ids::mr::ATTR_QUERY_RESP_IOVA, out_type(8)),
    ], false, mr::query_mr),
    method(object::MR, ids::mr::REG_DMABUF_MR, &[
        m(ids::mr::ATTR_REG_DMABUF_HANDLE, idr(ObjType::Mr, Access::New)),
        m(ids::mr::ATTR_REG_DMABUF_PD_HANDLE, idr(ObjType::Pd, Access::Read)),
        m(ids::mr::ATTR_REG_DMABUF_OFFSET, in_type(8)),
        m(ids::mr::ATTR_REG_DMABUF_LENGTH, in_type(8)),
        m(ids::mr::ATTR_REG_DMABUF_IOVA, in_type(8)),
        m(ids::mr::ATTR_REG_DMABUF_FD, in_type(4)),
        o(ids::mr::ATTR_REG_DMABUF_ACCESS_FLAGS, FLAGS_IN),
        m(ids::mr::ATTR_REG_DMABUF_RESP_LKEY, out_type(4)),
        m(ids::mr::ATTR_REG_DMABUF_RESP_RKEY, out_type(4)),
    ], false, mr::reg_dmabuf_mr),
    method(object::MW, destroy::MW_DESTROY, &[
        m(destroy::ATTR_MW_HANDLE, idr(ObjType::Mw, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::FLOW, destroy::FLOW_DESTROY, &[
        m(destroy::ATTR_FLOW_HANDLE, idr(ObjType::Flow, Access::Destroy)),
    ], false, misc::destroyed),
    // mlx5_ib's raw flow steering (fs.c): matchers, and flows made through them.
    method(object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_CREATE, &[
        m(mlx5::ATTR_FLOW_MATCHER_CREATE_HANDLE, idr(ObjType::Mlx5FlowMatcher, Access::New)),
        m(mlx5::ATTR_FLOW_MATCHER_MATCH_MASK, MATCH_PARAMS),
        m(mlx5::ATTR_FLOW_MATCHER_FLOW_TYPE, enum_in(&[in_type(2), NO_DATA, NO_DATA, NO_DATA])),
        m(mlx5::ATTR_FLOW_MATCHER_MATCH_CRITERIA, in_type(1)),
        o(mlx5::ATTR_FLOW_MATCHER_FLOW_FLAGS, FLAGS_IN),
        o(mlx5::ATTR_FLOW_MATCHER_FT_TYPE, CONST_IN),
    ], false, flow_matcher::matcher_create),
    method(object::MLX5_FLOW_MATCHER, mlx5::FLOW_MATCHER_DESTROY, &[
        m(mlx5::ATTR_FLOW_MATCHER_DESTROY_HANDLE, idr(ObjType::Mlx5FlowMatcher, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::FLOW, mlx5::CREATE_FLOW, &[
        m(mlx5::ATTR_CREATE_FLOW_HANDLE, idr(ObjType::Flow, Access::New)),
        m(mlx5::ATTR_CREATE_FLOW_MATCH_VALUE, MATCH_PARAMS),
        m(mlx5::ATTR_CREATE_FLOW_MATCHER, idr(ObjType::Mlx5FlowMatcher, Access::Read)),
        o(mlx5::ATTR_CREATE_FLOW_DEST_QP, idr(ObjType::Qp, Access::Read)),
        o(mlx5::ATTR_CREATE_FLOW_DEST_DEVX, idr(ObjType::Mlx5DevxObj, Access::Read)),
        o(mlx5::ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS, idrs_arr(ObjType::FlowAction, 1, 2)),
        o(mlx5::ATTR_CREATE_FLOW_TAG, in_type(4)),
        o(mlx5::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX, idrs_arr(ObjType::Mlx5DevxObj, 1, 1)),
        o(mlx5::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET, in_min_copied(4)),
        o(mlx5::ATTR_CREATE_FLOW_FLAGS, FLAGS_IN),
    ], false, flow_matcher::create_flow),
    method(object::FLOW, mlx5::DESTROY_FLOW, &[
        m(mlx5::ATTR_CREATE_FLOW_HANDLE, idr(ObjType::Flow, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::XRCD, destroy::XRCD_DESTROY, &[
        m(destroy::ATTR_XRCD_HANDLE, idr(ObjType::Xrcd, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::RWQ_IND_TBL, destroy::RWQ_IND_TBL_DESTROY, &[
        m(destroy::ATTR_RWQ_IND_TBL_HANDLE, idr(ObjType::RwqIndTbl, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::WQ, destroy::WQ_DESTROY, &[
        m(destroy::ATTR_WQ_HANDLE, idr(ObjType::Wq, Access::Destroy)),
        m(destroy::ATTR_WQ_RESP, out_type(4)),
    ], false, misc::destroyed_with_events),
    method(object::ASYNC_EVENT, async_event::ALLOC, &[
        m(async_event::ATTR_ALLOC_FD_HANDLE, fd(FdType::AsyncEvent, Access::New)),
    ], false, channel::async_event_alloc),
    method(object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC, &[
        m(mlx5::ATTR_UAR_OBJ_ALLOC_HANDLE, idr(ObjType::Mlx5Uar, Access::New)),
        m(mlx5::ATTR_UAR_OBJ_ALLOC_TYPE, CONST_IN),
        m(mlx5::ATTR_UAR_OBJ_ALLOC_PAGE_ID, out_type(4)),
        m(mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, out_type(4)),
        m(mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, out_type(8)),
    ], false, uar::uar_obj_alloc),
    method(object::MLX5_UAR, mlx5::UAR_OBJ_DESTROY, &[
        m(mlx5::ATTR_UAR_OBJ_DESTROY_HANDLE, idr(ObjType::Mlx5Uar, Access::Destroy)),
    ], false, misc::destroyed),
    // DevX (devx.c's method declarations; in and out mailboxes at least a header).
    method(object::MLX5_DEVX, mlx5::DEVX_OTHER, &[
        m(mlx5::ATTR_DEVX_OTHER_CMD_IN, in_min(DEVX_HDR)),
        m(mlx5::ATTR_DEVX_OTHER_CMD_OUT, out_min(DEVX_HDR)),
    ], false, devx::other),
    method(object::MLX5_DEVX, mlx5::DEVX_QUERY_UAR, &[
        m(mlx5::ATTR_DEVX_QUERY_UAR_USER_IDX, in_type(4)),
        m(mlx5::ATTR_DEVX_QUERY_UAR_DEV_IDX, out_type(4)),
    ], false, devx::query_uar),
    method(object::MLX5_DEVX, mlx5::DEVX_QUERY_EQN, &[
        m(mlx5::ATTR_DEVX_QUERY_EQN_USER_VEC, in_type(4)),
        m(mlx5::ATTR_DEVX_QUERY_EQN_DEV_EQN, out_type(4)),
    ], false, devx::query_eqn),
    method(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE, &[
        m(mlx5::ATTR_DEVX_OBJ_CREATE_HANDLE, idr(ObjType::Mlx5DevxObj, Access::New)),
        m(mlx5::ATTR_DEVX_OBJ_CREATE_CMD_IN, in_min(DEVX_HDR)),
        m(mlx5::ATTR_DEVX_OBJ_CREATE_CMD_OUT, out_min(DEVX_HDR)),
    ], false, devx::obj_create),
    method(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_DESTROY, &[
        m(mlx5::ATTR_DEVX_OBJ_DESTROY_HANDLE, idr(ObjType::Mlx5DevxObj, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_MODIFY, &[
        m(mlx5::ATTR_DEVX_OBJ_MODIFY_HANDLE, idr(ObjType::Any, Access::Read)),
        m(mlx5::ATTR_DEVX_OBJ_MODIFY_CMD_IN, in_min(DEVX_HDR)),
        m(mlx5::ATTR_DEVX_OBJ_MODIFY_CMD_OUT, out_min(DEVX_HDR)),
    ], false, devx::obj_modify),
    method(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_QUERY, &[
        m(mlx5::ATTR_DEVX_OBJ_QUERY_HANDLE, idr(ObjType::Any, Access::Read)),
        m(mlx5::ATTR_DEVX_OBJ_QUERY_CMD_IN, in_min(DEVX_HDR)),
        m(mlx5::ATTR_DEVX_OBJ_QUERY_CMD_OUT, out_min(DEVX_HDR)),
    ], false, devx::obj_query),
    method(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_ASYNC_QUERY, &[
        m(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, idr(ObjType::Any, Access::Read)),
        m(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, in_min(DEVX_HDR)),
        m(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, CONST_IN),
        m(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_FD, fd(FdType::DevxAsyncCmd, Access::Read)),
        m(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, in_type(8)),
    ], false, devx::obj_async_query),
    method(object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_REG, &[
        m(mlx5::ATTR_DEVX_UMEM_REG_HANDLE, idr(ObjType::Mlx5DevxUmem, Access::New)),
        m(mlx5::ATTR_DEVX_UMEM_REG_ADDR, in_type(8)),
        m(mlx5::ATTR_DEVX_UMEM_REG_LEN, in_type(8)),
        o(mlx5::ATTR_DEVX_UMEM_REG_ACCESS, FLAGS_IN),
        o(mlx5::ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, CONST_IN),
        m(mlx5::ATTR_DEVX_UMEM_REG_OUT_ID, out_type(4)),
    ], false, devx::umem_reg),
    method(object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_DEREG, &[
        m(mlx5::ATTR_DEVX_UMEM_DEREG_HANDLE, idr(ObjType::Mlx5DevxUmem, Access::Destroy)),
    ], false, misc::destroyed),
    method(object::MLX5_DEVX_ASYNC_CMD_FD, mlx5::DEVX_ASYNC_CMD_FD_ALLOC, &[
        m(mlx5::ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE, fd(FdType::DevxAsyncCmd, Access::New)),
    ], false, devx::async_cmd_fd_alloc),
];

/// `sizeof(struct mlx5_ifc_general_obj_in_cmd_hdr_bits)`, and of the out header.
const DEVX_HDR: u16 = 16;

const _: () = assert!(UVERBS_ID_DRIVER_NS == 0x1000);

const fn w(req: usize, resp: usize, has_resp: bool, udata: bool, handler: super::write::WHandler) -> WriteDef {
    WriteDef { ex: false, req, resp, has_resp, udata, handler }
}

const fn wx(handler: super::write::WHandler) -> WriteDef {
    WriteDef { ex: true, req: 0, resp: 0, has_resp: true, udata: true, handler }
}

/// The legacy write commands of the 6.1 core that mlx5 leaves enabled; gaps and disabled
/// commands are `None`. Sizes are `sizeof` of the request (including the response pointer)
/// and response structs.
pub(crate) fn write_def(idx: u32) -> Option<&'static WriteDef> {
    static GET_CONTEXT: WriteDef = w(8, 8, true, true, context::get_context_write);
    static QUERY_DEVICE: WriteDef = w(8, 176, true, false, device::query_device);
    static QUERY_PORT: WriteDef = w(16, 40, true, false, port::query_port_write);
    static ALLOC_PD: WriteDef = w(8, 4, true, true, pd::alloc_pd);
    static DEALLOC_PD: WriteDef = w(4, 0, false, false, pd::dealloc_pd);
    static CREATE_AH: WriteDef = w(56, 4, true, true, ah::create_ah);
    static DESTROY_AH: WriteDef = w(4, 0, false, false, ah::destroy_ah);
    static REG_MR: WriteDef = w(40, 12, true, true, mr::reg_mr);
    static REREG_MR: WriteDef = w(48, 8, true, true, misc::write_not_supported);
    static DEREG_MR: WriteDef = w(4, 0, false, false, mr::dereg_mr);
    static ALLOC_MW: WriteDef = w(16, 8, true, true, misc::write_not_supported);
    static DEALLOC_MW: WriteDef = w(4, 0, false, false, misc::dealloc_mw);
    static CREATE_COMP_CHANNEL: WriteDef = w(8, 4, true, false, channel::create_comp_channel);
    static CREATE_CQ: WriteDef = w(32, 8, true, true, cq::create_cq_write);
    static RESIZE_CQ: WriteDef = w(16, 8, true, true, misc::write_not_supported);
    static DESTROY_CQ: WriteDef = w(16, 8, true, false, cq::destroy_cq_write);
    static CREATE_QP: WriteDef = w(56, 32, true, true, qp::create_qp_write);
    static QUERY_QP: WriteDef = w(16, 128, true, false, qp::query_qp);
    static MODIFY_QP: WriteDef = w(112, 0, false, false, qp::modify_qp_write);
    static DESTROY_QP: WriteDef = w(16, 4, true, false, qp::destroy_qp_write);
    static ATTACH_MCAST: WriteDef = w(24, 0, false, false, misc::write_not_supported);
    static DETACH_MCAST: WriteDef = w(24, 0, false, false, misc::write_not_supported);
    static CREATE_SRQ: WriteDef = w(32, 16, true, true, srq::create_srq_write);
    static MODIFY_SRQ: WriteDef = w(16, 0, false, true, srq::modify_srq);
    static QUERY_SRQ: WriteDef = w(16, 16, true, false, srq::query_srq);
    static DESTROY_SRQ: WriteDef = w(16, 4, true, false, srq::destroy_srq_write);
    static OPEN_XRCD: WriteDef = w(16, 4, true, true, xrcd::open_xrcd);
    static CLOSE_XRCD: WriteDef = w(4, 0, false, false, xrcd::close_xrcd);
    static CREATE_XSRQ: WriteDef = w(48, 16, true, true, srq::create_xsrq);
    static OPEN_QP: WriteDef = w(32, 32, true, true, misc::write_not_supported);
    Some(match idx {
        0 => &GET_CONTEXT,
        1 => &QUERY_DEVICE,
        2 => &QUERY_PORT,
        3 => &ALLOC_PD,
        4 => &DEALLOC_PD,
        5 => &CREATE_AH,
        8 => &DESTROY_AH,
        9 => &REG_MR,
        11 => &REREG_MR,
        13 => &DEREG_MR,
        14 => &ALLOC_MW,
        16 => &DEALLOC_MW,
        17 => &CREATE_COMP_CHANNEL,
        18 => &CREATE_CQ,
        19 => &RESIZE_CQ,
        20 => &DESTROY_CQ,
        24 => &CREATE_QP,
        25 => &QUERY_QP,
        26 => &MODIFY_QP,
        27 => &DESTROY_QP,
        30 => &ATTACH_MCAST,
        31 => &DETACH_MCAST,
        32 => &CREATE_SRQ,
        33 => &MODIFY_SRQ,
        34 => &QUERY_SRQ,
        35 => &DESTROY_SRQ,
        37 => &OPEN_XRCD,
        38 => &CLOSE_XRCD,
        39 => &CREATE_XSRQ,
        40 => &OPEN_QP,
        _ => return None,
    })
}

/// The extended write commands (bit 31 set).
pub(crate) fn write_ex_def(idx: u32) -> Option<&'static WriteDef> {
    static QUERY_DEVICE: WriteDef = wx(device::query_device_ex);
    static CREATE_CQ: WriteDef = wx(cq::create_cq_ex);
    static CREATE_QP: WriteDef = wx(qp::create_qp_ex);
    static MODIFY_QP: WriteDef = wx(qp::modify_qp_ex);
    static NOT_SUPPORTED: WriteDef = wx(misc::write_not_supported);
    static CREATE_FLOW: WriteDef = wx(flow::create_flow);
    static DESTROY_FLOW: WriteDef = wx(flow::destroy_flow);
    static DESTROY_WQ: WriteDef = wx(misc::destroy_wq);
    static DESTROY_RWQ_IND_TBL: WriteDef = wx(misc::destroy_rwq_ind_tbl);
    Some(match idx {
        1 => &QUERY_DEVICE,
        18 => &CREATE_CQ,
        24 => &CREATE_QP,
        26 => &MODIFY_QP,
        50 => &CREATE_FLOW,
        52 | 53 | 55 | 57 => &NOT_SUPPORTED,
        51 => &DESTROY_FLOW,
        54 => &DESTROY_WQ,
        56 => &DESTROY_RWQ_IND_TBL,
        _ => return None,
    })
}
