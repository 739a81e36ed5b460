//! The cases, in the order they run.
//!
//! Every expectation is what the Linux 6.1 uverbs core answers (checked on rxe; see the
//! project's kernel fact sheet): none depends on the driver, so rxe and softhca must
//! agree on every row. Inputs where rxe and mlx5 legitimately differ (driver data
//! contents, CQ flags, `cqe = 0`, QP attribute ranges, SQD, GID layout, ...) are left
//! out. The driver id sent by the "wrong driver id" case is 0, wrong for both.
//!
//! The one exception is REG_DMABUF_MR: Linux 6.1's rxe has no `reg_user_mr_dmabuf`, so
//! there the core answers EOPNOTSUPP before any rule of the method. Those rows carry
//! rxe's answer as a per-driver expectation ([`Case::per_driver`], recorded from rxe in
//! the guest), and their general expectation, which softhca (an mlx5 device) must give,
//! comes from the kernel source, quoted above the case functions. [`dmabuf_cases`] are
//! the rows that need a real dma-buf (vgem, in the guest).
//!
//! The sections:
//! 1. before GET_CONTEXT, on a fresh file;
//! 2. the context: write GET_CONTEXT, a second GET_CONTEXT, then a new file with the
//!    ioctl GET_CONTEXT and the async event fd (all later cases use that file);
//! 3. queries: device, port, GIDs;
//! 4. object creation (PD, MR, completion channel, CQs, RC QPs) and bad handles;
//! 5. the QP state machine, RESET -> INIT -> RTR -> RTS, with illegal transitions;
//!    and a basic SRQ (write CREATE_SRQ/QUERY_SRQ/MODIFY_SRQ/DESTROY_SRQ, an RC QP on it)
//!    with its bad handles;
//! 6. destroys out of order (EBUSY);
//! 7. malformed ioctl calls;
//! 8. malformed write() commands;
//! 9. every destroy, and double destroys.

use std::os::fd::AsRawFd;

use uverbs::cmd::{context, cq as cqc, mr as mrc, pd as pdc, port, qp as qpc};
use uverbs::ioctl::{AttrIdx, Ioctl};
use uverbs::sys::ids::{async_event, cq as cqi, device, mr as mri, object, pd as pdi, qp as qpi};
use uverbs::sys::verbs::{
    qp_attr as m, qp_state, AllocPd, AllocPdResp, ExModifyQp, ExQueryDevice, ExQueryDeviceResp, GidEntry,
    ModifyQp, QpCap, QueryDevice, QueryDeviceResp, QueryPort, QueryPortRespEx, RegMr, RegMrResp, Sge,
    ADVISE_MR_ADVICE_PREFETCH, ADVISE_MR_ADVICE_PREFETCH_WRITE, ADVISE_MR_FLAG_FLUSH, ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, GID_TYPE_ROCE_V2, QPT_RC,
};
use uverbs::sys::write::{
    CMD_ALLOC_PD, CMD_CREATE_SRQ, CMD_DEALLOC_PD, CMD_DESTROY_SRQ, CMD_FLAG_EXTENDED, CMD_MODIFY_QP, CMD_MODIFY_SRQ,
    CMD_QUERY_SRQ,
    CMD_QUERY_DEVICE, CMD_QUERY_PORT, CMD_REG_MR, EX_CMD_CREATE_CQ, EX_CMD_QUERY_DEVICE,
};
use uverbs::sys::{CmdHdr, ExCmdHdr};
use uverbs::write::WriteCmd;
use uverbs::Errno;
use zerocopy::IntoBytes;

use crate::{ensure, Case, Expect, Fail, Outcome, PageBuf, Session, NO_HANDLE};

const OK: Expect = Expect::Ok;
const EINVAL: Expect = Expect::Errno(Errno::EINVAL);
const ENOENT: Expect = Expect::Errno(Errno::ENOENT);
const EBUSY: Expect = Expect::Errno(Errno::EBUSY);
const EBADF: Expect = Expect::Errno(Errno::EBADF);
const EFAULT: Expect = Expect::Errno(Errno::EFAULT);
const ENOSPC: Expect = Expect::Errno(Errno::ENOSPC);
const ENODATA: Expect = Expect::Errno(Errno::ENODATA);
const EOPNOTSUPP: Expect = Expect::Errno(Errno::EOPNOTSUPP);
const EPROTONOSUPPORT: Expect = Expect::Errno(Errno::EPROTONOSUPPORT);

macro_rules! case {
    ($name:ident, $expect:expr, $what:literal) => {
        Case { name: stringify!($name), expect: $expect, per_driver: &[], what: $what, run: $name }
    };
    ($name:ident, $expect:expr, rxe: $rxe:expr, $what:literal) => {
        Case { name: stringify!($name), expect: $expect, per_driver: &[("rxe", $rxe)], what: $what, run: $name }
    };
}

/// The whole table, in run order.
pub fn cases() -> Vec<Case> {
    vec![
        // 1. before GET_CONTEXT
        case!(noctx_query_device_write, EINVAL, "legacy QUERY_DEVICE before any context"),
        case!(noctx_query_port_ioctl, EINVAL, "ioctl QUERY_PORT before any context"),
        case!(noctx_alloc_pd, EINVAL, "ALLOC_PD before any context (no ucontext to own it)"),
        case!(noctx_dealloc_pd, ENOENT, "DEALLOC_PD 0 before any context: empty handle table"),
        case!(noctx_destroy_pd_ioctl, ENOENT, "ioctl PD_DESTROY 0 before any context"),
        case!(noctx_async_event_alloc, EINVAL, "ASYNC_EVENT_ALLOC before any context"),
        case!(noctx_create_comp_channel, EINVAL, "CREATE_COMP_CHANNEL before any context"),
        // 2. contexts
        case!(get_context_write, OK, "legacy GET_CONTEXT with the driver's data; returns the async fd"),
        case!(get_context_again_ioctl, EINVAL, "ioctl GET_CONTEXT on a file that has a context"),
        case!(get_context_again_write, EINVAL, "legacy GET_CONTEXT on a file that has a context"),
        case!(get_context_ioctl, OK, "ioctl GET_CONTEXT on a new file (NUM_COMP_VECTORS, CORE_SUPPORT)"),
        case!(async_event_alloc, OK, "ASYNC_EVENT_ALLOC returns a new fd"),
        case!(async_event_alloc_fd_len, EINVAL, "ASYNC_EVENT_ALLOC with FD_HANDLE len 4 (FD attrs need len 0)"),
        // 3. queries
        case!(query_device_write, OK, "legacy QUERY_DEVICE"),
        case!(query_device_ex, OK, "extended QUERY_DEVICE agrees with the legacy one"),
        case!(query_device_ex_invoke, OK, "EX_QUERY_DEVICE through ioctl INVOKE_WRITE"),
        case!(query_port_ioctl, OK, "ioctl QUERY_PORT 1: active Ethernet port"),
        case!(query_port_write, OK, "legacy QUERY_PORT 1 agrees with the ioctl"),
        case!(query_port_ioctl_port0, EINVAL, "ioctl QUERY_PORT port 0"),
        case!(query_port_ioctl_port2, EINVAL, "ioctl QUERY_PORT port 2 (one-port device)"),
        case!(query_port_ioctl_port256, EINVAL, "ioctl QUERY_PORT 256: CONST_IN u8 out of range"),
        case!(query_port_write_port0, EINVAL, "legacy QUERY_PORT port 0"),
        case!(query_port_write_port2, EINVAL, "legacy QUERY_PORT port 2"),
        case!(query_gid_table, OK, "QUERY_GID_TABLE: the valid GIDs of port 1"),
        case!(query_gid_entry, OK, "QUERY_GID_ENTRY of the chosen RoCEv2 GID equals its table row"),
        case!(query_gid_entry_port2, EINVAL, "QUERY_GID_ENTRY on port 2"),
        case!(query_gid_entry_flags, EINVAL, "QUERY_GID_ENTRY with FLAGS 1 (no flags defined)"),
        case!(query_gid_entry_no_flags, EINVAL, "QUERY_GID_ENTRY without the mandatory FLAGS attr"),
        case!(query_gid_entry_index_oob, EINVAL, "QUERY_GID_ENTRY index = gid_tbl_len"),
        case!(query_gid_entry_empty, ENODATA, "QUERY_GID_ENTRY of an empty slot (the last one)"),
        case!(query_gid_table_raw, OK, "the QUERY_GID_TABLE call the next two cases break, unbroken"),
        case!(query_gid_table_entry_size0, EINVAL, "QUERY_GID_TABLE with ENTRY_SIZE 0"),
        case!(query_gid_table_flags, EINVAL, "QUERY_GID_TABLE with FLAGS 1"),
        // 4. objects
        case!(alloc_pd, OK, "legacy ALLOC_PD"),
        case!(alloc_pd_invoke, OK, "ALLOC_PD through INVOKE_WRITE (a second PD)"),
        case!(reg_mr, OK, "legacy REG_MR of 64 KiB, local write + remote read/write"),
        case!(reg_mr_invoke, OK, "REG_MR through INVOKE_WRITE (a second MR)"),
        case!(reg_mr_page_offset, EINVAL, "REG_MR with (start ^ hca_va) & 0xfff != 0"),
        case!(reg_mr_remote_write_only, EINVAL, "REG_MR with REMOTE_WRITE but not LOCAL_WRITE"),
        case!(reg_mr_unmapped, EFAULT, "REG_MR of an unmapped page"),
        case!(reg_mr_bad_pd, ENOENT, "REG_MR on a handle that does not exist"),
        case!(reg_dmabuf_mr_bad_pd, ENOENT, "REG_DMABUF_MR on a PD that does not exist (attribute check)"),
        // REG_DMABUF_MR's own rules (see the case functions for the kernel lines). Linux
        // 6.1's rxe has no reg_user_mr_dmabuf: the core answers EOPNOTSUPP before them.
        case!(reg_dmabuf_mr_nccl_probe, EBADF, rxe: EOPNOTSUPP,
              "NCCL's probe: offset 0, length 0, iova 0, fd -1, access 0 (EBADF: dma-buf supported)"),
        case!(reg_dmabuf_mr_bad_fd, EBADF, rxe: EOPNOTSUPP, "REG_DMABUF_MR of fd -1"),
        case!(reg_dmabuf_mr_closed_fd, EBADF, rxe: EOPNOTSUPP, "REG_DMABUF_MR of fd 999999 (not open)"),
        case!(reg_dmabuf_mr_not_dmabuf, EINVAL, rxe: EOPNOTSUPP, "REG_DMABUF_MR of a memfd (an open file, not a dma-buf)"),
        case!(reg_dmabuf_mr_page_offset, EINVAL, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR with (offset ^ iova) & 0xfff != 0 and fd -1: checked before the fd"),
        case!(reg_dmabuf_mr_unknown_access, EINVAL, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR with MW_BIND (outside the method's flags) and fd -1"),
        case!(reg_dmabuf_mr_remote_write_only, EINVAL, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR with REMOTE_WRITE but not LOCAL_WRITE and fd -1"),
        case!(reg_dmabuf_mr_overflow, EINVAL, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR with offset + length past 2^64 and fd -1: checked before the fd"),
        // ADVISE_MR: in the core's tree for every device, but both rxe (6.1) and mlx5
        // without on-demand paging have no advise_mr: EOPNOTSUPP once the attributes
        // pass their spec checks, before the advice is read.
        case!(advise_mr, EOPNOTSUPP, "ADVISE_MR PREFETCH_WRITE + FLUSH of 4 KiB of the first MR (no ODP)"),
        case!(advise_mr_bad_advice, EOPNOTSUPP, "ADVISE_MR with advice 77: refused before the advice is read"),
        case!(advise_mr_bad_pd, ENOENT, "ADVISE_MR on a PD that does not exist (attribute check)"),
        case!(advise_mr_short_sge_list, EINVAL, "ADVISE_MR with an 8-byte SGE list (at least one ib_uverbs_sge)"),
        case!(advise_mr_unmapped_sge_list, EFAULT, "ADVISE_MR with its SGE list on an unmapped page (copied in)"),
        case!(advise_mr_no_flags, EINVAL, "ADVISE_MR without the mandatory FLAGS attribute"),
        case!(create_comp_channel, OK, "CREATE_COMP_CHANNEL returns an fd"),
        case!(create_cq_ioctl, OK, "ioctl CQ_CREATE with the completion channel"),
        case!(create_cq_write, OK, "legacy CREATE_CQ without a channel"),
        case!(create_cq_bad_vector, EINVAL, "CREATE_CQ with comp_vector = num_comp_vectors"),
        case!(create_cq_async_fd_as_channel, EBADF, "CREATE_CQ naming the async event fd as its channel"),
        case!(create_cq_ioctl_bad_flags, EINVAL, "ioctl CQ_CREATE with an undefined FLAGS bit (0x80)"),
        case!(create_cq_ioctl_raw, OK, "the CQ_CREATE call the next case breaks, unbroken (then destroyed)"),
        case!(create_cq_ioctl_cqe_len8, EINVAL, "ioctl CQ_CREATE with CQE len 8 (exactly 4 required)"),
        case!(create_cq_ex, OK, "EX_CREATE_CQ (then destroyed)"),
        case!(create_cq_ex_comp_mask, EINVAL, "EX_CREATE_CQ with comp_mask != 0"),
        case!(create_cq_ex_reserved, EINVAL, "EX_CREATE_CQ with reserved != 0"),
        case!(create_qp_ioctl, OK, "ioctl QP_CREATE, RC, on the ioctl CQ"),
        case!(create_qp_write, OK, "legacy CREATE_QP, RC, on the write() CQ"),
        case!(create_qp_bad_type, EINVAL, "ioctl QP_CREATE of type 77"),
        case!(create_qp_no_pd, ENOENT, "ioctl QP_CREATE without the PD attribute"),
        case!(create_qp_missing_pd, ENOENT, "ioctl QP_CREATE naming a PD that does not exist"),
        case!(create_qp_cq_as_pd, EINVAL, "ioctl QP_CREATE naming a CQ as its PD (wrong type)"),
        case!(create_qp_cap_tail_zero, OK, "QP_CREATE CAP of 24 bytes, zero past the struct (then destroyed)"),
        case!(create_qp_cap_tail_nonzero, EOPNOTSUPP, "QP_CREATE CAP of 24 bytes, non-zero past the struct"),
        case!(create_qp_cap_short, EINVAL, "QP_CREATE CAP of 16 bytes (shorter than the struct)"),
        case!(create_qp_ex, OK, "extended CREATE_QP, RC"),
        case!(create_qp_write_bad_cq, ENOENT, "legacy CREATE_QP naming a send CQ that does not exist"),
        // 5. QP state machine
        case!(query_qp_reset, OK, "QUERY_QP of a new QP: RESET"),
        case!(modify_qp_reset_to_rtr, EINVAL, "RESET -> RTR is not a legal transition"),
        case!(modify_qp_init_without_pkey, EINVAL, "RESET -> INIT without the required PKEY_INDEX"),
        case!(modify_qp_reset_to_init_extra_qkey, EINVAL, "RESET -> INIT of an RC QP with QKEY (not allowed)"),
        case!(modify_qp_mask_bit21, EOPNOTSUPP, "legacy MODIFY_QP with attr_mask bit 21 (not a standard bit)"),
        case!(modify_qp_bad_port, EINVAL, "RESET -> INIT with port 2"),
        case!(modify_qp_reset_to_init, OK, "RESET -> INIT"),
        case!(modify_qp_init_to_rts, EINVAL, "INIT -> RTS is not a legal transition"),
        case!(modify_qp_rtr_not_global, EINVAL, "INIT -> RTR with an AV without GRH on a RoCE port"),
        case!(modify_qp_rtr_without_min_rnr, EINVAL, "INIT -> RTR without the required MIN_RNR_TIMER"),
        case!(modify_qp_trailing_nonzero, EOPNOTSUPP, "legacy MODIFY_QP with 8 non-zero bytes after the struct"),
        case!(modify_qp_init_to_rtr, OK, "INIT -> RTR to itself over the chosen GID"),
        case!(modify_qp_rts_without_sq_psn, EINVAL, "RTR -> RTS without the required SQ_PSN"),
        case!(modify_qp_rtr_to_rts, OK, "RTR -> RTS"),
        case!(query_qp_rts, OK, "QUERY_QP after RTS echoes state, dest QPN, MTU and AV"),
        case!(modify_qp_ex_to_init, OK, "EX_MODIFY_QP RESET -> INIT of the extended QP; response {0, 8}"),
        case!(modify_qp_invoke_to_init, OK, "RESET -> INIT of the write() QP through INVOKE_WRITE"),
        case!(query_qp_missing, ENOENT, "QUERY_QP of a handle that does not exist"),
        case!(query_qp_wrong_type, EINVAL, "QUERY_QP of a PD handle"),
        // 6. destroy out of order
        // SRQs (core rules only: mlx5's and rxe's size and limit rules differ and are left
        // out; rxe refuses a limit above the WQEs posted, mlx5 only one >= the WQE count)
        case!(create_srq_write, OK, "legacy CREATE_SRQ of 16 WQEs, 1 SGE (max_wr >= 16 back)"),
        case!(create_srq_bad_pd, ENOENT, "legacy CREATE_SRQ on a PD that does not exist"),
        case!(create_srq_pd_is_cq, EINVAL, "legacy CREATE_SRQ whose PD handle is a CQ"),
        case!(query_srq_write, OK, "legacy QUERY_SRQ: max_wr >= 16, max_sge >= 1, no limit"),
        case!(query_srq_missing, ENOENT, "legacy QUERY_SRQ of a handle that does not exist"),
        case!(query_srq_wrong_type, EINVAL, "legacy QUERY_SRQ of a PD handle"),
        case!(modify_srq_missing, ENOENT, "legacy MODIFY_SRQ (limit) of a handle that does not exist"),
        case!(create_qp_on_srq, OK, "legacy CREATE_QP with is_srq: an RC QP without receive WRs on the SRQ"),
        case!(create_qp_missing_srq, ENOENT, "legacy CREATE_QP with is_srq naming a handle that does not exist"),
        case!(destroy_srq_busy, EBUSY, "DESTROY_SRQ of the SRQ a QP uses"),
        case!(destroy_qp_on_srq, OK, "DESTROY_QP of the QP on the SRQ"),
        case!(destroy_srq_wrong_type, EINVAL, "DESTROY_SRQ of a PD handle"),
        case!(destroy_srq, OK, "DESTROY_SRQ once no QP uses it: no events reported"),
        case!(destroy_srq_twice, ENOENT, "DESTROY_SRQ of the destroyed SRQ"),
        case!(dealloc_pd_busy, EBUSY, "DEALLOC_PD of a PD with an MR and QPs"),
        case!(destroy_pd_ioctl_busy, EBUSY, "ioctl PD_DESTROY of a PD with an MR and QPs"),
        case!(destroy_cq_write_busy, EBUSY, "DESTROY_CQ of a CQ used by a QP"),
        case!(destroy_cq_ioctl_busy, EBUSY, "ioctl CQ_DESTROY of a CQ used by a QP"),
        case!(dealloc_pd_wrong_type, EINVAL, "DEALLOC_PD of a CQ handle"),
        case!(destroy_cq_ioctl_missing, ENOENT, "ioctl CQ_DESTROY of a handle that does not exist"),
        case!(destroy_cq_ioctl_no_resp, EINVAL, "ioctl CQ_DESTROY without its mandatory RESP"),
        // 7. malformed ioctl
        case!(ioctl_baseline, OK, "the QUERY_PORT call the following cases break, unbroken"),
        case!(ioctl_length_long, EINVAL, "hdr.length 16 bytes more than 24 + 16 * num_attrs"),
        case!(ioctl_length_short, EINVAL, "hdr.length 16 bytes less than 24 + 16 * num_attrs"),
        case!(ioctl_length_over_page, EINVAL, "num_attrs 255, length 4104 > PAGE_SIZE"),
        case!(ioctl_reserved1, EPROTONOSUPPORT, "hdr.reserved1 != 0"),
        case!(ioctl_reserved2, EPROTONOSUPPORT, "hdr.reserved2 != 0"),
        case!(ioctl_wrong_driver_id, EINVAL, "hdr.driver_id 0 (RDMA_DRIVER_UNKNOWN)"),
        case!(ioctl_length_before_reserved, EINVAL, "bad length and reserved1: the length check comes first"),
        case!(ioctl_reserved_before_driver_id, EPROTONOSUPPORT, "reserved1 and wrong driver id: reserved first"),
        case!(ioctl_unknown_object, EPROTONOSUPPORT, "object 0xff"),
        case!(ioctl_unknown_driver_object, EPROTONOSUPPORT, "object 0x1fff (driver namespace)"),
        case!(ioctl_unknown_method, EPROTONOSUPPORT, "DEVICE method 0x7f"),
        case!(ioctl_mr_method5, EPROTONOSUPPORT, "MR method 5 (REG_MR does not exist in 6.1)"),
        case!(ioctl_unknown_mandatory_attr, EPROTONOSUPPORT, "an unknown attribute flagged mandatory"),
        case!(ioctl_unknown_optional_attr, OK, "an unknown attribute not flagged mandatory is ignored"),
        case!(ioctl_duplicate_attr, EINVAL, "the same attribute twice"),
        case!(ioctl_missing_mandatory, EINVAL, "QUERY_PORT without RESP"),
        case!(ioctl_unknown_before_missing, EPROTONOSUPPORT, "unknown mandatory attr beats a missing mandatory one"),
        case!(ioctl_const_len4, EINVAL, "CONST_IN PORT_NUM with len 4 (only 8 accepted)"),
        case!(ioctl_attr_reserved, EINVAL, "PTR_OUT RESP with attr_data.reserved != 0"),
        case!(ioctl_out_short, EINVAL, "QUERY_PORT RESP of 40 bytes (48 required)"),
        case!(ioctl_out_long, OK, "QUERY_PORT RESP of 100 bytes: zero-filled past 48, VALID_OUTPUT set"),
        case!(ioctl_resp_efault, EFAULT, "QUERY_PORT RESP pointing at address 8"),
        case!(ioctl_hdr_efault, EFAULT, "ioctl argument NULL"),
        case!(ioctl_idr_len, EINVAL, "PD_DESTROY handle attribute with len 4"),
        case!(ioctl_idr_negative, EINVAL, "PD_DESTROY handle -1"),
        case!(invoke_write_probe, ENOSPC, "INVOKE_WRITE(QUERY_DEVICE) without CORE_IN/OUT (rdma-core's probe)"),
        case!(invoke_write_core_out_short, ENOSPC, "INVOKE_WRITE(QUERY_DEVICE) with CORE_OUT 100 < 176"),
        case!(invoke_write_core_in_short, EINVAL, "INVOKE_WRITE with CORE_IN of 2 bytes (min 4)"),
        case!(invoke_write_gap, EOPNOTSUPP, "INVOKE_WRITE of command 7 (QUERY_AH, never implemented)"),
        // 8. malformed write()
        case!(write_baseline, OK, "the QUERY_DEVICE write() the following cases break, unbroken"),
        case!(write_count_short, EINVAL, "write() of 4 bytes"),
        case!(write_command_bits, EINVAL, "command with bits outside 0x800000ff"),
        case!(write_unknown_command, EOPNOTSUPP, "legacy command 0x7f"),
        case!(write_gap_command, EOPNOTSUPP, "legacy command 7 (a gap), consistent in_words"),
        case!(write_gap_in_words, EINVAL, "legacy command 7 (a gap), in_words not matching"),
        case!(write_poll_cq, EOPNOTSUPP, "legacy POLL_CQ (21): outside the core command mask"),
        case!(write_in_words_mismatch, EINVAL, "QUERY_DEVICE with in_words one more than the write"),
        case!(write_short_core, ENOSPC, "QUERY_PORT with an 8-byte body (16 required)"),
        case!(write_short_response, ENOSPC, "QUERY_DEVICE with out_words 10 (176 bytes required)"),
        case!(write_response_efault, EFAULT, "QUERY_DEVICE with response pointer 8"),
        case!(write_alloc_pd_efault, EFAULT, "ALLOC_PD with response pointer 8"),
        case!(write_alloc_pd_efault_rollback, OK, "after an ALLOC_PD failing with EFAULT its handle is free again"),
        case!(write_trailing_nonzero, EOPNOTSUPP, "DEALLOC_PD with 4 non-zero bytes after the struct"),
        case!(write_trailing_zero, ENOENT, "DEALLOC_PD (missing handle) with 4 zero bytes after the struct"),
        case!(write_ex_baseline, OK, "the EX_QUERY_DEVICE write() the following cases break, unbroken"),
        case!(write_ex_count_short, EINVAL, "extended write() of 16 bytes"),
        case!(write_ex_words_mismatch, EINVAL, "EX_QUERY_DEVICE with in_words 2 for an 8-byte body"),
        case!(write_ex_hdr_reserved, EINVAL, "EX_QUERY_DEVICE with ex_hdr.cmd_hdr_reserved != 0"),
        case!(write_ex_response_without_out, EINVAL, "EX_QUERY_DEVICE with a response but out_words 0"),
        case!(write_ex_out_without_response, EINVAL, "EX_QUERY_DEVICE with out_words but response 0"),
        case!(write_ex_unknown, EOPNOTSUPP, "extended command 0x50"),
        case!(write_ex_query_device_comp_mask, EINVAL, "EX_QUERY_DEVICE with comp_mask 1"),
        // 9. destroys
        case!(destroy_qp_ioctl, OK, "ioctl QP_DESTROY"),
        case!(destroy_qp_ioctl_twice, ENOENT, "ioctl QP_DESTROY of the same handle again"),
        case!(destroy_qp_write, OK, "legacy DESTROY_QP"),
        case!(destroy_qp_write_twice, ENOENT, "legacy DESTROY_QP of the same handle again"),
        case!(destroy_qp_ex, OK, "legacy DESTROY_QP of the extended QP"),
        case!(destroy_cq_ioctl, OK, "ioctl CQ_DESTROY"),
        case!(destroy_cq_write, OK, "legacy DESTROY_CQ"),
        case!(destroy_cq_write_twice, ENOENT, "legacy DESTROY_CQ of the same handle again"),
        case!(dereg_mr_write, OK, "legacy DEREG_MR"),
        case!(destroy_mr_ioctl, OK, "ioctl MR_DESTROY"),
        case!(dereg_mr_twice, ENOENT, "legacy DEREG_MR of the same handle again"),
        case!(dealloc_pd_write, OK, "legacy DEALLOC_PD"),
        case!(destroy_pd_ioctl, OK, "ioctl PD_DESTROY"),
        case!(dealloc_pd_twice, ENOENT, "legacy DEALLOC_PD of the same handle again"),
        case!(destroy_pd_ioctl_twice, ENOENT, "ioctl PD_DESTROY of the same handle again"),
    ]
}

/// The REG_DMABUF_MR rows that need a real, CPU-mappable dma-buf: a 64 KiB vgem buffer
/// (present in the rxe guest). A table of its own, run on a fresh file (`uverbs-conformance
/// --dmabuf`), because the main table runs everywhere, vgem or not. The kernel's rules
/// are quoted in this file above the REG_DMABUF_MR case functions.
#[cfg(feature = "vgem")]
pub fn dmabuf_cases() -> Vec<Case> {
    vec![
        case!(get_context_ioctl, OK, "ioctl GET_CONTEXT on a new file"),
        case!(alloc_pd, OK, "legacy ALLOC_PD"),
        case!(vgem_buffer, OK, "a 64 KiB vgem dumb buffer exported as a dma-buf (not a device call)"),
        case!(reg_dmabuf_mr_vgem, OK, rxe: EOPNOTSUPP, "REG_DMABUF_MR of the whole vgem buffer, then MR_DESTROY"),
        case!(reg_dmabuf_mr_vgem_tail, OK, rxe: EOPNOTSUPP, "REG_DMABUF_MR of its last page exactly (end == size)"),
        case!(reg_dmabuf_mr_vgem_subpage, OK, rxe: EOPNOTSUPP, "REG_DMABUF_MR at offset 100 (iova 0x10064), 1000 bytes"),
        case!(reg_dmabuf_mr_vgem_past_end, EINVAL, rxe: EOPNOTSUPP, "REG_DMABUF_MR of offset 4 KiB + the whole size (end > size)"),
        case!(reg_dmabuf_mr_vgem_len0, EINVAL, rxe: EOPNOTSUPP, "REG_DMABUF_MR of length 0 of a real dma-buf: no pages"),
        case!(reg_dmabuf_mr_vgem_len0_subpage, EINVAL, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR of length 0 at offset 100 (iova 100): still no pages (the count ignores the offset)"),
        case!(reg_dmabuf_mr_vgem_remote_write_only, EINVAL, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR of the vgem buffer with REMOTE_WRITE but not LOCAL_WRITE"),
        case!(reg_dmabuf_mr_vgem_read_only_fd, OK, rxe: EOPNOTSUPP,
              "REG_DMABUF_MR, local and remote write, of a vgem buffer exported without DRM_RDWR (an O_RDONLY fd)"),
    ]
}

#[cfg(feature = "vgem")]
const VGEM_LEN: u64 = 64 * 1024;

#[cfg(feature = "vgem")]
fn vgem_buffer(s: &mut Session) -> Outcome {
    let v = gdr::vgem::Vgem::open().map_err(|e| Fail::Bad(e.to_string()))?;
    let b = v.create(VGEM_LEN as usize).map_err(|e| Fail::Bad(e.to_string()))?;
    ensure!(b.len() as u64 == VGEM_LEN, "vgem buffer of {} bytes", b.len());
    s.obj.dmabuf = Some((b.into_fd(), VGEM_LEN));
    Ok(())
}

#[cfg(feature = "vgem")]
fn vgem_fd(s: &Session) -> Result<i32, Fail> {
    s.obj.dmabuf.as_ref().map(|(f, _)| f.as_raw_fd()).ok_or_else(no_obj)
}

/// A registration that must succeed: checks the keys, then destroys the MR.
#[cfg(feature = "vgem")]
fn vgem_reg_ok(s: &Session, offset: u64, length: u64, iova: u64) -> Outcome {
    let fd = vgem_fd(s)?;
    let r = mrc::reg_dmabuf_mr(s.dev(), s.obj.pd, offset, length, iova, fd, MR_ACCESS)?;
    ensure!(r.lkey != 0 || r.rkey != 0, "keys {:#x} {:#x}", r.lkey, r.rkey);
    mrc::destroy_mr_ioctl(s.dev(), r.handle).map_err(|e| Fail::Bad(format!("MR_DESTROY of the dma-buf MR: {e:?}")))?;
    Ok(())
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem(s: &mut Session) -> Outcome {
    vgem_reg_ok(s, 0, VGEM_LEN, 0x7000_0000)
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_tail(s: &mut Session) -> Outcome {
    vgem_reg_ok(s, VGEM_LEN - 4096, 4096, 0x7000_0000)
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_subpage(s: &mut Session) -> Outcome {
    vgem_reg_ok(s, 100, 1000, 0x10064)
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_past_end(s: &mut Session) -> Outcome {
    let fd = vgem_fd(s)?;
    dmabuf_reg(s, 4096, VGEM_LEN, 0x7000_0000, fd, MR_ACCESS)
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_len0(s: &mut Session) -> Outcome {
    let fd = vgem_fd(s)?;
    dmabuf_reg(s, 0, 0, 0, fd, MR_ACCESS)
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_len0_subpage(s: &mut Session) -> Outcome {
    let fd = vgem_fd(s)?;
    dmabuf_reg(s, 100, 0, 100, fd, MR_ACCESS)
}

/// Nothing on the import path looks at the dma-buf file's mode: dma_buf_get takes any
/// dma-buf file, and ib_umem_dmabuf_get attaches and maps it for DMA (the exporter's
/// map_dma_buf), never through the fd's f_mode. So a writable MR over an fd opened
/// read-only registers.
#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_read_only_fd(s: &mut Session) -> Outcome {
    let v = gdr::vgem::Vgem::open().map_err(|e| Fail::Bad(e.to_string()))?;
    let b = v.create_read_only(VGEM_LEN as usize).map_err(|e| Fail::Bad(e.to_string()))?;
    let r = mrc::reg_dmabuf_mr(s.dev(), s.obj.pd, 0, VGEM_LEN, 0, b.fd().as_raw_fd(), MR_ACCESS)?;
    mrc::destroy_mr_ioctl(s.dev(), r.handle).map_err(|e| Fail::Bad(format!("MR_DESTROY of the dma-buf MR: {e:?}")))?;
    Ok(())
}

#[cfg(feature = "vgem")]
fn reg_dmabuf_mr_vgem_remote_write_only(s: &mut Session) -> Outcome {
    let fd = vgem_fd(s)?;
    dmabuf_reg(s, 0, VGEM_LEN, 0, fd, ACCESS_REMOTE_WRITE)
}

// ----------------------------------------------------------------------------- helpers

fn rc_cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 }
}

fn no_obj() -> Fail {
    Fail::Bad("a previous case did not create the object this case needs".into())
}

/// Legacy write() bytes for `core_in` (response pointer first when `resp` is Some).
fn legacy_bytes(command: u32, core_in: &[u8], resp: Option<&mut [u8]>, drv_in: &[u8]) -> Vec<u8> {
    let (ptr, out) = match resp {
        Some(r) => (r.as_mut_ptr() as u64, r),
        None => (0, &mut [][..]),
    };
    WriteCmd::new(command, core_in, out).udata(drv_in, &mut []).encode_legacy(ptr)
}

/// Sets the `in_words` of encoded command bytes.
fn set_in_words(b: &mut [u8], words: u16) {
    b[4..6].copy_from_slice(&words.to_ne_bytes());
}

/// Sets the `out_words` of encoded command bytes.
fn set_out_words(b: &mut [u8], words: u16) {
    b[6..8].copy_from_slice(&words.to_ne_bytes());
}

fn write_ok(s: &Session, b: &[u8]) -> Outcome {
    let n = s.write_bytes(b)?;
    ensure!(n == b.len(), "write() returned {n}, not {}", b.len());
    Ok(())
}

/// An extended command: headers, core body and no driver data.
fn ex_bytes(command: u32, body: &[u8], in_words: u16, out_words: u16, response: u64, reserved: u32) -> Vec<u8> {
    let hdr = CmdHdr { command: command | CMD_FLAG_EXTENDED, in_words, out_words };
    let ex = ExCmdHdr { response, provider_in_words: 0, provider_out_words: 0, cmd_hdr_reserved: reserved };
    let mut v = hdr.as_bytes().to_vec();
    v.extend_from_slice(ex.as_bytes());
    v.extend_from_slice(body);
    v
}

/// The QUERY_PORT(1) ioctl that the malformed-ioctl cases break in one way each.
fn port_call(resp: &mut QueryPortRespEx) -> (Ioctl<'_>, AttrIdx, AttrIdx) {
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_PORT);
    let p = c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, 1);
    let r = c.out_struct(device::ATTR_QUERY_PORT_RESP, resp);
    (c, p, r)
}

/// Runs the QUERY_PORT(1) call after `tweak`.
fn broken_port_call(s: &Session, tweak: impl FnOnce(&mut Ioctl<'_>, AttrIdx, AttrIdx)) -> Outcome {
    let mut resp = QueryPortRespEx::default();
    let (mut c, p, r) = port_call(&mut resp);
    tweak(&mut c, p, r);
    c.run(s.dev())?;
    Ok(())
}

fn query_port_raw(s: &Session, port: u64) -> Outcome {
    let mut resp = QueryPortRespEx::default();
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_PORT);
    c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, port);
    c.out_struct(device::ATTR_QUERY_PORT_RESP, &mut resp);
    c.run(s.dev())?;
    Ok(())
}

/// A QP_CREATE ioctl assembled field by field, for the malformed variants.
struct RawQp<'b> {
    pd: Option<u32>,
    send_cq: u32,
    recv_cq: u32,
    qp_type: u64,
    cap: &'b [u8],
}

fn create_qp_raw(s: &mut Session, q: RawQp<'_>) -> uverbs::Result<(u32, u32)> {
    let d = s.qp_udata(&rc_cap());
    let mut drv_out = vec![0u8; d.out_len];
    let mut cap_out = QpCap::default();
    let mut qpn = 0u32;
    let mut c = Ioctl::new(object::QP, qpi::CREATE);
    let h = c.new_handle(qpi::ATTR_CREATE_HANDLE);
    if let Some(pd) = q.pd {
        c.handle(qpi::ATTR_CREATE_PD_HANDLE, pd);
    }
    c.handle(qpi::ATTR_CREATE_SEND_CQ_HANDLE, q.send_cq);
    c.handle(qpi::ATTR_CREATE_RECV_CQ_HANDLE, q.recv_cq);
    c.in_value(qpi::ATTR_CREATE_USER_HANDLE, 0x5150u64);
    c.in_bytes(qpi::ATTR_CREATE_CAP, q.cap);
    c.in_const(qpi::ATTR_CREATE_TYPE, q.qp_type);
    c.out_struct(qpi::ATTR_CREATE_RESP_CAP, &mut cap_out);
    c.out_struct(qpi::ATTR_CREATE_RESP_QP_NUM, &mut qpn);
    if !d.input.is_empty() {
        c.in_bytes(uverbs::sys::ids::UVERBS_ATTR_UHW_IN, &d.input);
    }
    if !drv_out.is_empty() {
        c.out_bytes(uverbs::sys::ids::UVERBS_ATTR_UHW_OUT, &mut drv_out);
    }
    c.run(s.dev())?;
    let handle = c.handle_out(h);
    Ok((handle, qpn))
}

fn cap_bytes(extra: &[u8]) -> Vec<u8> {
    let mut v = rc_cap().as_bytes().to_vec();
    v.extend_from_slice(extra);
    v
}

fn modify(s: &Session, qp: u32, mask: u32, f: impl FnOnce(&mut ModifyQp)) -> Outcome {
    let mut mq = ModifyQp { qp_handle: qp, attr_mask: mask, ..Default::default() };
    f(&mut mq);
    qpc::modify_qp(s.dev(), &mq)?;
    Ok(())
}

const INIT_MASK: u32 = m::STATE | m::PKEY_INDEX | m::PORT | m::ACCESS_FLAGS;
const RTR_MASK: u32 = m::STATE | m::AV | m::PATH_MTU | m::DEST_QPN | m::RQ_PSN | m::MAX_DEST_RD_ATOMIC | m::MIN_RNR_TIMER;
const RTS_MASK: u32 = m::STATE | m::TIMEOUT | m::RETRY_CNT | m::RNR_RETRY | m::SQ_PSN | m::MAX_QP_RD_ATOMIC;

fn init_attrs(q: &mut ModifyQp) {
    q.qp_state = qp_state::INIT;
    q.pkey_index = 0;
    q.port_num = 1;
    q.qp_access_flags = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE;
}

/// RTR attributes: a loopback connection to the QP itself, over the chosen GID.
fn rtr_attrs(s: &Session, q: &mut ModifyQp) {
    q.qp_state = qp_state::RTR;
    q.dest.dgid.copy_from_slice(&s.obj.gid.raw());
    q.dest.sgid_index = s.obj.gid.gid_index as u8;
    q.dest.is_global = 1;
    q.dest.hop_limit = 64;
    q.dest.port_num = 1;
    q.path_mtu = rtr_mtu(s);
    q.dest_qp_num = s.obj.qpn;
    q.rq_psn = 0x1234;
    q.max_dest_rd_atomic = 1;
    q.min_rnr_timer = 12;
}

fn rtr_mtu(s: &Session) -> u8 {
    match s.obj.port.legacy_resp.active_mtu {
        m @ 1..=5 => m.min(3),
        _ => 3,
    }
}

fn rts_attrs(q: &mut ModifyQp) {
    q.qp_state = qp_state::RTS;
    q.timeout = 14;
    q.retry_cnt = 7;
    q.rnr_retry = 7;
    q.sq_psn = 0x1234;
    q.max_rd_atomic = 1;
}

// ------------------------------------------------------------------ 1. before context

fn noctx_query_device_write(s: &mut Session) -> Outcome {
    context::query_device(s.dev())?;
    Ok(())
}

fn noctx_query_port_ioctl(s: &mut Session) -> Outcome {
    port::query_port_ioctl(s.dev(), 1)?;
    Ok(())
}

fn noctx_alloc_pd(s: &mut Session) -> Outcome {
    let mut drv = vec![0u8; s.profile.pd_out_len()];
    pdc::alloc_pd(s.dev(), &mut drv)?;
    Ok(())
}

fn noctx_dealloc_pd(s: &mut Session) -> Outcome {
    pdc::dealloc_pd_write(s.dev(), 0)?;
    Ok(())
}

fn noctx_destroy_pd_ioctl(s: &mut Session) -> Outcome {
    pdc::destroy_pd_ioctl(s.dev(), 0)?;
    Ok(())
}

fn noctx_async_event_alloc(s: &mut Session) -> Outcome {
    context::alloc_async_fd(s.dev())?;
    Ok(())
}

fn noctx_create_comp_channel(s: &mut Session) -> Outcome {
    cqc::create_comp_channel(s.dev())?;
    Ok(())
}

// ------------------------------------------------------------------------ 2. contexts

fn get_context_write(s: &mut Session) -> Outcome {
    let d = s.profile.context();
    let mut out = vec![0u8; d.out_len];
    let (r, fd) = context::get_context_write(s.dev(), &d.input, &mut out)?;
    ensure!(r.num_comp_vectors >= 1, "num_comp_vectors {}", r.num_comp_vectors);
    ensure!(fd.as_raw_fd() >= 0, "async fd {}", fd.as_raw_fd());
    Ok(())
}

fn get_context_again_ioctl(s: &mut Session) -> Outcome {
    let d = s.profile.context();
    let mut out = vec![0u8; d.out_len];
    context::get_context_ioctl(s.dev(), &d.input, &mut out)?;
    Ok(())
}

fn get_context_again_write(s: &mut Session) -> Outcome {
    let d = s.profile.context();
    let mut out = vec![0u8; d.out_len];
    // On failure the kernel has already written (and closed again) an async fd number
    // into the response; on success we would own a real fd, which the drop closes.
    context::get_context_write(s.dev(), &d.input, &mut out)?;
    Ok(())
}

fn get_context_ioctl(s: &mut Session) -> Outcome {
    s.reopen()?;
    let d = s.profile.context();
    let mut out = vec![0u8; d.out_len];
    let info = context::get_context_ioctl(s.dev(), &d.input, &mut out)?;
    ensure!(info.num_comp_vectors >= 1, "num_comp_vectors {}", info.num_comp_vectors);
    ensure!(info.core_support & uverbs::sys::verbs::CORE_SUPPORT_OPTIONAL_MR_ACCESS as u64 != 0,
            "core_support {:#x} lacks OPTIONAL_MR_ACCESS", info.core_support);
    s.obj.num_comp_vectors = info.num_comp_vectors;
    s.profile.after_context(s.dev()).map_err(|e| Fail::Bad(format!("profile setup after the context: {e:?}")))?;
    Ok(())
}

fn async_event_alloc(s: &mut Session) -> Outcome {
    let fd = context::alloc_async_fd(s.dev())?;
    ensure!(fd.as_raw_fd() >= 0, "fd {}", fd.as_raw_fd());
    let fl = nix::fcntl::fcntl(fd.as_raw_fd(), nix::fcntl::FcntlArg::F_GETFD)?;
    ensure!(fl & libc::FD_CLOEXEC != 0, "async fd is not close-on-exec");
    s.obj.async_fd = Some(fd);
    Ok(())
}

fn async_event_alloc_fd_len(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::ASYNC_EVENT, async_event::ALLOC);
    let i = c.new_fd(async_event::ATTR_ALLOC_FD_HANDLE);
    c.attr_mut(i).len = 4;
    c.run(s.dev())?;
    // Succeeded against the expectation: do not leak the fd.
    let fd = c.fd_out(i);
    if fd >= 0 {
        let _ = nix::unistd::close(fd);
    }
    Ok(())
}

// ------------------------------------------------------------------------- 3. queries

fn query_device_write(s: &mut Session) -> Outcome {
    let r = context::query_device(s.dev())?;
    ensure!(r.phys_port_cnt == 1, "phys_port_cnt {}", r.phys_port_cnt);
    ensure!(r.max_qp > 0 && r.max_cq > 0 && r.max_cqe > 0 && r.max_pd > 0 && r.max_mr > 0,
            "zero limits: max_qp {} max_cq {} max_cqe {} max_pd {} max_mr {}", r.max_qp, r.max_cq, r.max_cqe, r.max_pd, r.max_mr);
    ensure!(r.max_qp_wr >= 16 && r.max_sge >= 1, "max_qp_wr {} max_sge {}", r.max_qp_wr, r.max_sge);
    Ok(())
}

fn query_device_ex(s: &mut Session) -> Outcome {
    let legacy = context::query_device(s.dev())?;
    let mut drv = vec![0u8; s.profile.query_device_out_len()];
    let r = context::query_device_ex(s.dev(), &mut drv)?;
    ensure!(r.base == legacy, "extended base differs from legacy QUERY_DEVICE");
    ensure!(r.response_length as usize >= std::mem::size_of::<QueryDeviceResp>() + 8,
            "response_length {}", r.response_length);
    Ok(())
}

fn query_device_ex_invoke(s: &mut Session) -> Outcome {
    let legacy = context::query_device(s.dev())?;
    let body = ExQueryDevice::default();
    let mut out = ExQueryDeviceResp::default();
    WriteCmd::new(EX_CMD_QUERY_DEVICE | CMD_FLAG_EXTENDED, body.as_bytes(), out.as_mut_bytes()).run_invoke(s.dev())?;
    ensure!(out.base == legacy, "INVOKE_WRITE base differs from legacy QUERY_DEVICE");
    ensure!(out.response_length as usize >= std::mem::size_of::<QueryDeviceResp>() + 8,
            "response_length {}", out.response_length);
    Ok(())
}

fn query_port_ioctl(s: &mut Session) -> Outcome {
    let p = port::query_port_ioctl(s.dev(), 1)?;
    let l = &p.legacy_resp;
    ensure!(l.state == 4, "state {} (want 4 ACTIVE)", l.state);
    ensure!(l.link_layer == 2, "link_layer {} (want 2 Ethernet)", l.link_layer);
    ensure!(l.gid_tbl_len > 0, "gid_tbl_len 0");
    ensure!((1..=5).contains(&l.active_mtu) && l.active_mtu <= l.max_mtu, "mtu {} / {}", l.active_mtu, l.max_mtu);
    ensure!(l.flags & 1 != 0, "flags {:#x}: GRH_REQUIRED missing on a RoCE port", l.flags);
    ensure!(p.reserved == [0; 6], "reserved bytes not zero");
    s.obj.port = p;
    Ok(())
}

fn query_port_write(s: &mut Session) -> Outcome {
    let w = port::query_port_write(s.dev(), 1)?;
    let i = s.obj.port.legacy_resp;
    ensure!(w == i, "legacy {:?} != ioctl {:?}", w, i);
    Ok(())
}

fn query_port_ioctl_port0(s: &mut Session) -> Outcome {
    query_port_raw(s, 0)
}

fn query_port_ioctl_port2(s: &mut Session) -> Outcome {
    query_port_raw(s, 2)
}

fn query_port_ioctl_port256(s: &mut Session) -> Outcome {
    query_port_raw(s, 256)
}

fn query_port_write_port0(s: &mut Session) -> Outcome {
    port::query_port_write(s.dev(), 0)?;
    Ok(())
}

fn query_port_write_port2(s: &mut Session) -> Outcome {
    port::query_port_write(s.dev(), 2)?;
    Ok(())
}

fn query_gid_table(s: &mut Session) -> Outcome {
    let max = s.obj.port.legacy_resp.gid_tbl_len.clamp(1, 4096) as usize;
    let t = port::query_gid_table(s.dev(), max)?;
    ensure!(!t.is_empty(), "no valid GID");
    ensure!(t.iter().all(|e| e.port_num == 1), "an entry not on port 1");
    ensure!(t.iter().all(|e| e.raw() != [0; 16]), "an all-zero GID listed as valid");
    // The GID of the loopback connection: RoCEv2, link-local preferred (a link-local
    // destination needs no neighbour resolution), else the first RoCEv2 one.
    let v2: Vec<&GidEntry> = t.iter().filter(|e| e.gid_type == GID_TYPE_ROCE_V2).collect();
    let pick = v2.iter().find(|e| e.raw()[..2] == [0xfe, 0x80]).or(v2.first()).copied();
    let Some(g) = pick else { return Err(Fail::Bad("no RoCEv2 GID".into())) };
    s.obj.gid = *g;
    s.obj.gids = t;
    Ok(())
}

fn query_gid_entry(s: &mut Session) -> Outcome {
    ensure!(!s.obj.gids.is_empty(), "no GID table from the previous case");
    let e = port::query_gid_entry(s.dev(), 1, s.obj.gid.gid_index)?;
    ensure!(e == s.obj.gid, "entry {:?} != table row {:?}", e, s.obj.gid);
    Ok(())
}

fn gid_entry_raw(s: &Session, port: u64, index: u64, flags: Option<u32>) -> Outcome {
    let mut e = GidEntry::default();
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_GID_ENTRY);
    c.in_const(device::ATTR_QUERY_GID_ENTRY_PORT, port);
    c.in_const(device::ATTR_QUERY_GID_ENTRY_GID_INDEX, index);
    if let Some(f) = flags {
        c.in_value(device::ATTR_QUERY_GID_ENTRY_FLAGS, f);
    }
    c.out_struct(device::ATTR_QUERY_GID_ENTRY_RESP_ENTRY, &mut e);
    c.run(s.dev())?;
    Ok(())
}

fn query_gid_entry_port2(s: &mut Session) -> Outcome {
    gid_entry_raw(s, 2, 0, Some(0))
}

fn query_gid_entry_flags(s: &mut Session) -> Outcome {
    gid_entry_raw(s, 1, 0, Some(1))
}

fn query_gid_entry_no_flags(s: &mut Session) -> Outcome {
    gid_entry_raw(s, 1, 0, None)
}

fn query_gid_entry_index_oob(s: &mut Session) -> Outcome {
    let n = s.obj.port.legacy_resp.gid_tbl_len;
    ensure!(n > 0, "no port attributes from an earlier case");
    gid_entry_raw(s, 1, n as u64, Some(0))
}

fn query_gid_entry_empty(s: &mut Session) -> Outcome {
    let n = s.obj.port.legacy_resp.gid_tbl_len;
    ensure!(n > 1, "gid_tbl_len {n}");
    ensure!(s.obj.gids.iter().all(|e| e.gid_index != n - 1), "the last GID slot is in use");
    gid_entry_raw(s, 1, (n - 1) as u64, Some(0))
}

fn gid_table_raw(s: &Session, entry_size: u64, flags: u32) -> Outcome {
    let mut buf = vec![0u8; 32 * 16];
    let mut n = 0u64;
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_GID_TABLE);
    c.in_const(device::ATTR_QUERY_GID_TABLE_ENTRY_SIZE, entry_size);
    c.in_value(device::ATTR_QUERY_GID_TABLE_FLAGS, flags);
    c.out_bytes(device::ATTR_QUERY_GID_TABLE_RESP_ENTRIES, &mut buf);
    c.out_struct(device::ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES, &mut n);
    c.run(s.dev())?;
    Ok(())
}

fn query_gid_table_raw(s: &mut Session) -> Outcome {
    gid_table_raw(s, 32, 0)
}

fn query_gid_table_entry_size0(s: &mut Session) -> Outcome {
    gid_table_raw(s, 0, 0)
}

fn query_gid_table_flags(s: &mut Session) -> Outcome {
    gid_table_raw(s, 32, 1)
}

// ------------------------------------------------------------------------- 4. objects

fn alloc_pd(s: &mut Session) -> Outcome {
    let mut drv = vec![0u8; s.profile.pd_out_len()];
    s.obj.pd = pdc::alloc_pd(s.dev(), &mut drv)?;
    Ok(())
}

fn alloc_pd_invoke(s: &mut Session) -> Outcome {
    let mut drv = vec![0u8; s.profile.pd_out_len()];
    let mut out = AllocPdResp::default();
    WriteCmd::new(CMD_ALLOC_PD, AllocPd::default().as_bytes(), out.as_mut_bytes())
        .udata(&[], &mut drv)
        .run_invoke(s.dev())?;
    ensure!(out.pd_handle != s.obj.pd, "same handle {} as the first PD", out.pd_handle);
    s.obj.pd2 = out.pd_handle;
    Ok(())
}

const MR_LEN: usize = 64 * 1024;
const MR_ACCESS: u32 = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE;

fn reg_mr(s: &mut Session) -> Outcome {
    let buf = PageBuf::new(MR_LEN);
    let r = mrc::reg_mr(s.dev(), s.obj.pd, buf.addr(), MR_LEN as u64, buf.addr(), MR_ACCESS)?;
    s.obj.mr = r.mr_handle;
    s.obj.mr_lkey = r.lkey;
    s.obj.mr_buf = Some(buf);
    Ok(())
}

fn reg_mr_invoke(s: &mut Session) -> Outcome {
    let addr = s.obj.mr_buf.as_ref().ok_or_else(no_obj)?.addr();
    let cmd = RegMr { start: addr, length: 4096, hca_va: addr, pd_handle: s.obj.pd, access_flags: ACCESS_LOCAL_WRITE, ..Default::default() };
    let mut out = RegMrResp::default();
    WriteCmd::new(CMD_REG_MR, cmd.as_bytes(), out.as_mut_bytes()).run_invoke(s.dev())?;
    ensure!(out.mr_handle != s.obj.mr, "same handle {} as the first MR", out.mr_handle);
    s.obj.mr2 = out.mr_handle;
    Ok(())
}

fn reg_mr_page_offset(s: &mut Session) -> Outcome {
    let addr = s.obj.mr_buf.as_ref().ok_or_else(no_obj)?.addr();
    mrc::reg_mr(s.dev(), s.obj.pd, addr, 4096, addr + 8, ACCESS_LOCAL_WRITE)?;
    Ok(())
}

fn reg_mr_remote_write_only(s: &mut Session) -> Outcome {
    let addr = s.obj.mr_buf.as_ref().ok_or_else(no_obj)?.addr();
    mrc::reg_mr(s.dev(), s.obj.pd, addr, 4096, addr, ACCESS_REMOTE_WRITE)?;
    Ok(())
}

fn reg_mr_unmapped(s: &mut Session) -> Outcome {
    // A page that was mapped a moment ago and is not any more.
    let addr = PageBuf::new(4096).addr();
    mrc::reg_mr(s.dev(), s.obj.pd, addr, 4096, addr, ACCESS_LOCAL_WRITE)?;
    Ok(())
}

fn reg_mr_bad_pd(s: &mut Session) -> Outcome {
    let addr = s.obj.mr_buf.as_ref().ok_or_else(no_obj)?.addr();
    mrc::reg_mr(s.dev(), NO_HANDLE, addr, 4096, addr, ACCESS_LOCAL_WRITE)?;
    Ok(())
}

fn reg_dmabuf_mr_bad_pd(s: &mut Session) -> Outcome {
    let fd = s.obj.async_fd.as_ref().ok_or_else(no_obj)?.as_raw_fd();
    mrc::reg_dmabuf_mr(s.dev(), NO_HANDLE, 0, 4096, 0, fd, ACCESS_LOCAL_WRITE)?;
    Ok(())
}

// ADVISE_MR, Linux 6.1: the method's spec (uverbs_std_types_mr.c,
// DECLARE_UVERBS_NAMED_METHOD(UVERBS_METHOD_ADVISE_MR, ...)): PD_HANDLE an IDR of a PD
// (READ), ADVICE a CONST_IN, FLAGS a FLAGS_IN, SGE_LIST a PTR_IN of at least
// sizeof(struct ib_uverbs_sge) with UA_ALLOC_AND_COPY (copied while the attribute is
// processed: EFAULT), all four mandatory. Its handler's first line is
// `if (!ib_dev->ops.advise_mr) return -EOPNOTSUPP;`; rxe has no advise_mr in 6.1, and
// mlx5_ib sets it only when the device has on-demand paging (odp.c,
// mlx5_ib_odp_init_one), which softhca has not.

fn sge_of_mr(s: &Session) -> Result<Sge, Fail> {
    let addr = s.obj.mr_buf.as_ref().ok_or_else(no_obj)?.addr();
    Ok(Sge { addr, length: 4096, lkey: s.obj.mr_lkey })
}

fn advise_mr(s: &mut Session) -> Outcome {
    let sge = sge_of_mr(s)?;
    mrc::advise_mr(s.dev(), s.obj.pd, ADVISE_MR_ADVICE_PREFETCH_WRITE, ADVISE_MR_FLAG_FLUSH, &[sge])?;
    Ok(())
}

fn advise_mr_bad_advice(s: &mut Session) -> Outcome {
    let sge = sge_of_mr(s)?;
    mrc::advise_mr(s.dev(), s.obj.pd, 77, 0, &[sge])?;
    Ok(())
}

fn advise_mr_bad_pd(s: &mut Session) -> Outcome {
    let sge = sge_of_mr(s)?;
    mrc::advise_mr(s.dev(), NO_HANDLE, ADVISE_MR_ADVICE_PREFETCH, 0, &[sge])?;
    Ok(())
}

/// ADVISE_MR(PREFETCH) of the first MR with its SGE list as `sges`, after `tweak`.
fn advise_mr_raw(s: &Session, sges: &[u8], with_flags: bool, tweak: impl FnOnce(&mut Ioctl<'_>, AttrIdx)) -> Outcome {
    let mut c = Ioctl::new(object::MR, mri::ADVISE);
    c.handle(mri::ATTR_ADVISE_PD_HANDLE, s.obj.pd);
    c.in_const(mri::ATTR_ADVISE_ADVICE, ADVISE_MR_ADVICE_PREFETCH as u64);
    if with_flags {
        c.in_value(mri::ATTR_ADVISE_FLAGS, 0u32);
    }
    let l = c.in_bytes(mri::ATTR_ADVISE_SGE_LIST, sges);
    tweak(&mut c, l);
    c.run(s.dev())?;
    Ok(())
}

fn advise_mr_short_sge_list(s: &mut Session) -> Outcome {
    let sge = sge_of_mr(s)?;
    advise_mr_raw(s, &sge.as_bytes()[..8], true, |_, _| {})
}

fn advise_mr_unmapped_sge_list(s: &mut Session) -> Outcome {
    let sge = sge_of_mr(s)?;
    // A page that was mapped a moment ago and is not any more.
    let gone = PageBuf::new(4096).addr();
    advise_mr_raw(s, sge.as_bytes(), true, |c, l| c.attr_mut(l).data = gone)
}

fn advise_mr_no_flags(s: &mut Session) -> Outcome {
    let sge = sge_of_mr(s)?;
    advise_mr_raw(s, sge.as_bytes(), false, |_, _| {})
}

// REG_DMABUF_MR's rules, Linux 6.1. The core, drivers/infiniband/core/
// uverbs_std_types_mr.c, UVERBS_HANDLER(UVERBS_METHOD_REG_DMABUF_MR), in this order:
//   `if (!ib_dev->ops.reg_user_mr_dmabuf) return -EOPNOTSUPP;`   (rxe in 6.1: all rows)
//   `if ((offset & ~PAGE_MASK) != (iova & ~PAGE_MASK)) return -EINVAL;`
//   `ret = uverbs_get_flags32(&access_flags, attrs, ..._ACCESS_FLAGS, IB_ACCESS_LOCAL_WRITE |
//    IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC |
//    IB_ACCESS_RELAXED_ORDERING);`                                  (other bits: -EINVAL)
//   `ret = ib_check_mr_access(ib_dev, access_flags);` (include/rdma/ib_verbs.h: remote
//    write or atomic without local write: -EINVAL)
// then mlx5_ib_reg_user_mr_dmabuf (drivers/infiniband/hw/mlx5/mr.c) calls
// ib_umem_dmabuf_get (drivers/infiniband/core/umem_dmabuf.c), in this order:
//   `if (check_add_overflow(offset, (unsigned long)size, &end)) return ret;` (-EINVAL)
//   `dmabuf = dma_buf_get(fd); if (IS_ERR(dmabuf)) return ERR_CAST(dmabuf);`
//    (drivers/dma-buf/dma-buf.c: no such file -EBADF, not a dma-buf -EINVAL)
//   `if (dmabuf->size < end) goto out_release_dmabuf;`               (-EINVAL)
//   `if (!ib_umem_num_pages(umem)) goto out_free_umem;`  (-EINVAL; umem->iova is still 0
//    there, so this counts the pages of `length` alone: 0 only for length 0)
// The rows that break a check before dma_buf_get pass fd -1, so EINVAL (not EBADF) also
// shows that the check comes first.

fn dmabuf_reg(s: &Session, offset: u64, length: u64, iova: u64, fd: i32, access: u32) -> Outcome {
    let r = mrc::reg_dmabuf_mr(s.dev(), s.obj.pd, offset, length, iova, fd, access)?;
    // A registration that should have failed: leave nothing behind for later rows.
    let _ = mrc::destroy_mr_ioctl(s.dev(), r.handle);
    Ok(())
}

/// nccl src/transport/net_ib.cc (ncclIbDmaBufSupport): `ibv_reg_dmabuf_mr(pd, 0ULL, 0ULL,
/// 0ULL, -1, 0)`, and dma-buf counts as supported when that fails with EBADF
/// (EOPNOTSUPP/EPROTONOSUPPORT: not supported). Length 0 does not fail first: the page
/// count comes after dma_buf_get.
fn reg_dmabuf_mr_nccl_probe(s: &mut Session) -> Outcome {
    dmabuf_reg(s, 0, 0, 0, -1, 0)
}

fn reg_dmabuf_mr_bad_fd(s: &mut Session) -> Outcome {
    dmabuf_reg(s, 0, 4096, 0, -1, ACCESS_LOCAL_WRITE)
}

fn reg_dmabuf_mr_closed_fd(s: &mut Session) -> Outcome {
    // Above any RLIMIT_NOFILE here, so never open.
    dmabuf_reg(s, 0, 4096, 0, 999_999, ACCESS_LOCAL_WRITE)
}

fn reg_dmabuf_mr_not_dmabuf(s: &mut Session) -> Outcome {
    let f = nix::sys::memfd::memfd_create(c"not-a-dmabuf", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
    nix::unistd::ftruncate(&f, 65536)?;
    dmabuf_reg(s, 0, 4096, 0, f.as_raw_fd(), ACCESS_LOCAL_WRITE)
}

fn reg_dmabuf_mr_page_offset(s: &mut Session) -> Outcome {
    dmabuf_reg(s, 0, 4096, 8, -1, ACCESS_LOCAL_WRITE)
}

fn reg_dmabuf_mr_unknown_access(s: &mut Session) -> Outcome {
    dmabuf_reg(s, 0, 4096, 0, -1, ACCESS_LOCAL_WRITE | uverbs::sys::verbs::ACCESS_MW_BIND)
}

fn reg_dmabuf_mr_remote_write_only(s: &mut Session) -> Outcome {
    dmabuf_reg(s, 0, 4096, 0, -1, ACCESS_REMOTE_WRITE)
}

fn reg_dmabuf_mr_overflow(s: &mut Session) -> Outcome {
    let offset: u64 = !0xfff; // the last page of the 64-bit range
    dmabuf_reg(s, offset, 8192, offset, -1, ACCESS_LOCAL_WRITE)
}

fn create_comp_channel(s: &mut Session) -> Outcome {
    let fd = cqc::create_comp_channel(s.dev())?;
    ensure!(fd.as_raw_fd() >= 0, "fd {}", fd.as_raw_fd());
    s.obj.channel = Some(fd);
    Ok(())
}

const CQE: u32 = 15;

fn create_cq_ioctl(s: &mut Session) -> Outcome {
    let chan = s.obj.channel.as_ref().ok_or_else(no_obj)?.as_raw_fd();
    let d = s.cq_udata(CQE);
    let mut out = vec![0u8; d.out_len];
    let event_fd = s.obj.async_fd.as_ref().map(|f| f.as_raw_fd());
    let a = cqc::CqArgs { cqe: CQE, user_handle: 0xc0, comp_vector: 0, comp_channel: Some(chan), event_fd, ..Default::default() };
    let (h, cqe) = cqc::create_cq_ioctl(s.dev(), &a, &d.input, &mut out)?;
    ensure!(cqe >= CQE, "cqe {cqe} < {CQE}");
    s.obj.cq = h;
    Ok(())
}

fn create_cq_write(s: &mut Session) -> Outcome {
    let d = s.cq_udata(CQE);
    let mut out = vec![0u8; d.out_len];
    let a = cqc::CqArgs { cqe: CQE, user_handle: 0xc1, ..Default::default() };
    let r = cqc::create_cq_write(s.dev(), &a, &d.input, &mut out)?;
    ensure!(r.cqe >= CQE, "cqe {} < {CQE}", r.cqe);
    ensure!(r.cq_handle != s.obj.cq, "same handle as the ioctl CQ");
    s.obj.cq_w = r.cq_handle;
    Ok(())
}

fn create_cq_bad_vector(s: &mut Session) -> Outcome {
    ensure!(s.obj.num_comp_vectors > 0, "no context info");
    let d = s.cq_udata(CQE);
    let mut out = vec![0u8; d.out_len];
    let a = cqc::CqArgs { cqe: CQE, comp_vector: s.obj.num_comp_vectors, ..Default::default() };
    cqc::create_cq_write(s.dev(), &a, &d.input, &mut out)?;
    Ok(())
}

fn create_cq_async_fd_as_channel(s: &mut Session) -> Outcome {
    let fd = s.obj.async_fd.as_ref().ok_or_else(no_obj)?.as_raw_fd();
    let d = s.cq_udata(CQE);
    let mut out = vec![0u8; d.out_len];
    let a = cqc::CqArgs { cqe: CQE, comp_channel: Some(fd), ..Default::default() };
    cqc::create_cq_write(s.dev(), &a, &d.input, &mut out)?;
    Ok(())
}

fn create_cq_ioctl_bad_flags(s: &mut Session) -> Outcome {
    let d = s.cq_udata(CQE);
    let mut out = vec![0u8; d.out_len];
    let a = cqc::CqArgs { cqe: CQE, flags: 0x80, ..Default::default() };
    cqc::create_cq_ioctl(s.dev(), &a, &d.input, &mut out)?;
    Ok(())
}

/// CQ_CREATE assembled by hand; `cqe_len` is the length of the CQE attribute (4 is right).
fn create_cq_raw(s: &mut Session, cqe_len: u16) -> uverbs::Result<u32> {
    let d = s.cq_udata(CQE);
    let mut drv_out = vec![0u8; d.out_len];
    let mut resp_cqe = 0u32;
    let mut c = Ioctl::new(object::CQ, cqi::CREATE);
    let h = c.new_handle(cqi::ATTR_CREATE_HANDLE);
    let n = c.in_value(cqi::ATTR_CREATE_CQE, CQE);
    c.attr_mut(n).len = cqe_len;
    c.in_value(cqi::ATTR_CREATE_USER_HANDLE, 0u64);
    c.in_value(cqi::ATTR_CREATE_COMP_VECTOR, 0u32);
    c.out_struct(cqi::ATTR_CREATE_RESP_CQE, &mut resp_cqe);
    if !d.input.is_empty() {
        c.in_bytes(uverbs::sys::ids::UVERBS_ATTR_UHW_IN, &d.input);
    }
    if !drv_out.is_empty() {
        c.out_bytes(uverbs::sys::ids::UVERBS_ATTR_UHW_OUT, &mut drv_out);
    }
    c.run(s.dev())?;
    Ok(c.handle_out(h))
}

fn destroy_cq_after(s: &Session, h: u32) -> Outcome {
    cqc::destroy_cq_ioctl(s.dev(), h).map_err(|e| Fail::Bad(format!("destroying it: {e:?}")))?;
    Ok(())
}

fn create_cq_ioctl_raw(s: &mut Session) -> Outcome {
    let h = create_cq_raw(s, 4)?;
    destroy_cq_after(s, h)
}

fn create_cq_ioctl_cqe_len8(s: &mut Session) -> Outcome {
    let h = create_cq_raw(s, 8)?;
    let _ = cqc::destroy_cq_ioctl(s.dev(), h);
    Ok(())
}

/// EX_CREATE_CQ (`struct ib_uverbs_ex_create_cq`: user_handle u64, cqe, comp_vector,
/// comp_channel (s32), comp_mask, flags, reserved; response 16 bytes beginning with
/// the handle), with the driver's CQ data. Returns the new handle.
fn create_cq_ex_raw(s: &mut Session, comp_mask: u32, reserved: u32) -> uverbs::Result<u32> {
    let d = s.cq_udata(CQE);
    let mut body = Vec::new();
    body.extend_from_slice(&0xc2u64.to_ne_bytes());
    body.extend_from_slice(&CQE.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend_from_slice(&(-1i32).to_ne_bytes());
    body.extend_from_slice(&comp_mask.to_ne_bytes());
    body.extend_from_slice(&0u32.to_ne_bytes());
    body.extend_from_slice(&reserved.to_ne_bytes());
    let mut resp = [0u8; 16];
    let mut drv_out = vec![0u8; d.out_len];
    WriteCmd::new(EX_CMD_CREATE_CQ, &body, &mut resp).udata(&d.input, &mut drv_out).run_ex(s.dev())?;
    Ok(u32::from_ne_bytes(resp[0..4].try_into().unwrap()))
}

fn create_cq_ex(s: &mut Session) -> Outcome {
    let h = create_cq_ex_raw(s, 0, 0)?;
    destroy_cq_after(s, h)
}

fn create_cq_ex_comp_mask(s: &mut Session) -> Outcome {
    let h = create_cq_ex_raw(s, 1, 0)?;
    let _ = cqc::destroy_cq_ioctl(s.dev(), h);
    Ok(())
}

fn create_cq_ex_reserved(s: &mut Session) -> Outcome {
    let h = create_cq_ex_raw(s, 0, 1)?;
    let _ = cqc::destroy_cq_ioctl(s.dev(), h);
    Ok(())
}

fn create_qp_ioctl(s: &mut Session) -> Outcome {
    ensure!(s.obj.pd != NO_HANDLE && s.obj.cq != NO_HANDLE, "no PD or CQ");
    let cap = rc_cap();
    let d = s.qp_udata(&cap);
    let mut out = vec![0u8; d.out_len];
    let event_fd = s.obj.async_fd.as_ref().map(|f| f.as_raw_fd());
    let a = qpc::QpArgs { pd: s.obj.pd, send_cq: s.obj.cq, recv_cq: s.obj.cq, cap, qp_type: QPT_RC, user_handle: 0x9a, event_fd, ..Default::default() };
    let q = qpc::create_qp_ioctl(s.dev(), &a, &d.input, &mut out)?;
    ensure!(q.qpn != 0 && q.qpn < 1 << 24, "qpn {:#x}", q.qpn);
    ensure!(q.cap.max_send_wr >= cap.max_send_wr && q.cap.max_recv_wr >= cap.max_recv_wr
            && q.cap.max_send_sge >= 1 && q.cap.max_recv_sge >= 1, "granted {:?}", q.cap);
    s.obj.qp = q.handle;
    s.obj.qpn = q.qpn;
    Ok(())
}

fn create_qp_write(s: &mut Session) -> Outcome {
    ensure!(s.obj.pd != NO_HANDLE && s.obj.cq_w != NO_HANDLE, "no PD or CQ");
    let cap = rc_cap();
    let d = s.qp_udata(&cap);
    let mut out = vec![0u8; d.out_len];
    let a = qpc::QpArgs { pd: s.obj.pd, send_cq: s.obj.cq_w, recv_cq: s.obj.cq_w, cap, qp_type: QPT_RC, user_handle: 0x9b, ..Default::default() };
    let q = qpc::create_qp_write(s.dev(), &a, &d.input, &mut out)?;
    ensure!(q.qpn != 0 && q.qpn != s.obj.qpn && q.qpn < 1 << 24, "qpn {:#x}", q.qpn);
    ensure!(q.cap.max_send_wr >= cap.max_send_wr && q.cap.max_recv_wr >= cap.max_recv_wr, "granted {:?}", q.cap);
    s.obj.qp_w = q.handle;
    s.obj.qpn_w = q.qpn;
    Ok(())
}

fn create_qp_ex(s: &mut Session) -> Outcome {
    ensure!(s.obj.pd != NO_HANDLE && s.obj.cq_w != NO_HANDLE, "no PD or CQ");
    let cap = rc_cap();
    let d = s.qp_udata(&cap);
    let mut out = vec![0u8; d.out_len];
    let a = qpc::QpArgs { pd: s.obj.pd, send_cq: s.obj.cq_w, recv_cq: s.obj.cq_w, cap, qp_type: QPT_RC, user_handle: 0x9c, ..Default::default() };
    let q = qpc::create_qp_ex(s.dev(), &a, &d.input, &mut out)?;
    ensure!(q.qpn != 0 && q.qpn != s.obj.qpn && q.qpn != s.obj.qpn_w && q.qpn < 1 << 24, "qpn {:#x}", q.qpn);
    ensure!(q.cap.max_send_wr >= cap.max_send_wr && q.cap.max_recv_wr >= cap.max_recv_wr, "granted {:?}", q.cap);
    s.obj.qp_ex = q.handle;
    Ok(())
}

fn raw_qp<'b>(s: &Session, cap: &'b [u8]) -> RawQp<'b> {
    RawQp { pd: Some(s.obj.pd), send_cq: s.obj.cq, recv_cq: s.obj.cq, qp_type: QPT_RC as u64, cap }
}

/// Creating succeeded where it should not have: destroy the QP so later cases run on
/// the state they expect, and report success (the mismatch shows in the result).
fn created_unexpectedly(s: &Session, h: u32) -> Outcome {
    let _ = qpc::destroy_qp_ioctl(s.dev(), h);
    Ok(())
}

fn create_qp_bad_type(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[]);
    let mut q = raw_qp(s, &cap);
    q.qp_type = 77;
    let (h, _) = create_qp_raw(s, q)?;
    created_unexpectedly(s, h)
}

fn create_qp_no_pd(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[]);
    let mut q = raw_qp(s, &cap);
    q.pd = None;
    let (h, _) = create_qp_raw(s, q)?;
    created_unexpectedly(s, h)
}

fn create_qp_missing_pd(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[]);
    let mut q = raw_qp(s, &cap);
    q.pd = Some(NO_HANDLE);
    let (h, _) = create_qp_raw(s, q)?;
    created_unexpectedly(s, h)
}

fn create_qp_cq_as_pd(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[]);
    let mut q = raw_qp(s, &cap);
    q.pd = Some(s.obj.cq);
    let (h, _) = create_qp_raw(s, q)?;
    created_unexpectedly(s, h)
}

fn create_qp_cap_tail_zero(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[0; 4]);
    let q = raw_qp(s, &cap);
    let (h, qpn) = create_qp_raw(s, q)?;
    ensure!(qpn != 0, "qpn 0");
    qpc::destroy_qp_ioctl(s.dev(), h).map_err(|e| Fail::Bad(format!("destroying it: {e:?}")))?;
    Ok(())
}

fn create_qp_cap_tail_nonzero(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[0, 0, 1, 0]);
    let q = raw_qp(s, &cap);
    let (h, _) = create_qp_raw(s, q)?;
    created_unexpectedly(s, h)
}

fn create_qp_cap_short(s: &mut Session) -> Outcome {
    let cap = cap_bytes(&[]);
    let q = raw_qp(s, &cap[..16]);
    let (h, _) = create_qp_raw(s, q)?;
    created_unexpectedly(s, h)
}

fn create_qp_write_bad_cq(s: &mut Session) -> Outcome {
    let cap = rc_cap();
    let d = s.qp_udata(&cap);
    let mut out = vec![0u8; d.out_len];
    let a = qpc::QpArgs { pd: s.obj.pd, send_cq: NO_HANDLE, recv_cq: NO_HANDLE, cap, qp_type: QPT_RC, ..Default::default() };
    let q = qpc::create_qp_write(s.dev(), &a, &d.input, &mut out)?;
    created_unexpectedly(s, q.handle)
}

// ---------------------------------------------------------------- 5. QP state machine

fn query_qp_reset(s: &mut Session) -> Outcome {
    let r = qpc::query_qp(s.dev(), s.obj.qp, 0)?;
    ensure!(r.qp_state == qp_state::RESET, "state {}", r.qp_state);
    // Only the receive side: mlx5 reports max_send_wr/sge 0 for user QPs (rxe echoes them).
    ensure!(r.max_recv_wr >= 16 && r.max_recv_sge >= 1, "max_recv_wr {} max_recv_sge {}", r.max_recv_wr, r.max_recv_sge);
    Ok(())
}

fn modify_qp_reset_to_rtr(s: &mut Session) -> Outcome {
    let qp = s.obj.qp;
    modify(s, qp, RTR_MASK, |q| rtr_attrs(s, q))
}

fn modify_qp_init_without_pkey(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, INIT_MASK & !m::PKEY_INDEX, init_attrs)
}

fn modify_qp_reset_to_init_extra_qkey(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, INIT_MASK | m::QKEY, |q| {
        init_attrs(q);
        q.qkey = 0x11;
    })
}

fn modify_qp_mask_bit21(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, INIT_MASK | 1 << 21, init_attrs)
}

fn modify_qp_bad_port(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, INIT_MASK, |q| {
        init_attrs(q);
        q.port_num = 2;
    })
}

fn modify_qp_reset_to_init(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, INIT_MASK, init_attrs)?;
    let r = qpc::query_qp(s.dev(), s.obj.qp, 0)?;
    ensure!(r.qp_state == qp_state::INIT, "state {} after the transition", r.qp_state);
    Ok(())
}

fn modify_qp_init_to_rts(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, RTS_MASK, rts_attrs)
}

fn modify_qp_rtr_not_global(s: &mut Session) -> Outcome {
    let qp = s.obj.qp;
    modify(s, qp, RTR_MASK, |q| {
        rtr_attrs(s, q);
        q.dest.is_global = 0;
    })
}

fn modify_qp_rtr_without_min_rnr(s: &mut Session) -> Outcome {
    let qp = s.obj.qp;
    modify(s, qp, RTR_MASK & !m::MIN_RNR_TIMER, |q| rtr_attrs(s, q))
}

fn modify_qp_trailing_nonzero(s: &mut Session) -> Outcome {
    let mut q = ModifyQp { qp_handle: s.obj.qp, attr_mask: RTR_MASK, ..Default::default() };
    rtr_attrs(s, &mut q);
    let mut tail = q.as_bytes().to_vec();
    tail.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0]);
    let b = legacy_bytes(CMD_MODIFY_QP, &tail, None, &[]);
    write_ok(s, &b)
}

fn modify_qp_init_to_rtr(s: &mut Session) -> Outcome {
    let qp = s.obj.qp;
    modify(s, qp, RTR_MASK, |q| rtr_attrs(s, q))?;
    let r = qpc::query_qp(s.dev(), s.obj.qp, 0)?;
    ensure!(r.qp_state == qp_state::RTR, "state {} after the transition", r.qp_state);
    Ok(())
}

fn modify_qp_rts_without_sq_psn(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, RTS_MASK & !m::SQ_PSN, rts_attrs)
}

fn modify_qp_rtr_to_rts(s: &mut Session) -> Outcome {
    modify(s, s.obj.qp, RTS_MASK, rts_attrs)
}

fn query_qp_rts(s: &mut Session) -> Outcome {
    let r = qpc::query_qp(s.dev(), s.obj.qp, RTR_MASK | RTS_MASK)?;
    ensure!(r.qp_state == qp_state::RTS, "state {}", r.qp_state);
    ensure!(r.dest_qp_num == s.obj.qpn, "dest_qp_num {:#x} != {:#x}", r.dest_qp_num, s.obj.qpn);
    ensure!(r.path_mtu == rtr_mtu(s), "path_mtu {}", r.path_mtu);
    ensure!(r.rq_psn == 0x1234 && r.sq_psn == 0x1234, "psn rq {:#x} sq {:#x}", r.rq_psn, r.sq_psn);
    ensure!(r.dest.is_global == 1 && r.dest.sgid_index as u32 == s.obj.gid.gid_index && r.dest.dgid == s.obj.gid.raw(),
            "AV {:?}", r.dest);
    ensure!(r.port_num == 1 && r.dest.port_num == 1, "port {} / AV port {}", r.port_num, r.dest.port_num);
    ensure!(r.min_rnr_timer == 12 && r.timeout == 14 && r.retry_cnt == 7 && r.rnr_retry == 7,
            "rnr {} timeout {} retry {} rnr_retry {}", r.min_rnr_timer, r.timeout, r.retry_cnt, r.rnr_retry);
    Ok(())
}

fn modify_qp_ex_to_init(s: &mut Session) -> Outcome {
    let mut q = ExModifyQp { base: ModifyQp { qp_handle: s.obj.qp_ex, attr_mask: INIT_MASK, ..Default::default() }, ..Default::default() };
    init_attrs(&mut q.base);
    let r = qpc::modify_qp_ex(s.dev(), &q, &[], &mut [])?;
    ensure!(r.comp_mask == 0 && r.response_length == 8, "response {:?}", r);
    let st = qpc::query_qp(s.dev(), s.obj.qp_ex, 0)?;
    ensure!(st.qp_state == qp_state::INIT, "state {}", st.qp_state);
    Ok(())
}

fn modify_qp_invoke_to_init(s: &mut Session) -> Outcome {
    let mut q = ModifyQp { qp_handle: s.obj.qp_w, attr_mask: INIT_MASK, ..Default::default() };
    init_attrs(&mut q);
    WriteCmd::new(CMD_MODIFY_QP, q.as_bytes(), &mut []).run_invoke(s.dev())?;
    let r = qpc::query_qp(s.dev(), s.obj.qp_w, 0)?;
    ensure!(r.qp_state == qp_state::INIT, "state {}", r.qp_state);
    Ok(())
}

fn query_qp_missing(s: &mut Session) -> Outcome {
    qpc::query_qp(s.dev(), NO_HANDLE, 0)?;
    Ok(())
}

fn query_qp_wrong_type(s: &mut Session) -> Outcome {
    qpc::query_qp(s.dev(), s.obj.pd, 0)?;
    Ok(())
}

// ------------------------------------------------------------- 6. destroy out of order

fn dealloc_pd_busy(s: &mut Session) -> Outcome {
    pdc::dealloc_pd_write(s.dev(), s.obj.pd)?;
    Ok(())
}

fn destroy_pd_ioctl_busy(s: &mut Session) -> Outcome {
    pdc::destroy_pd_ioctl(s.dev(), s.obj.pd)?;
    Ok(())
}

// ---------------------------------------------------------------- SRQs

/// Legacy CREATE_SRQ on PD handle `pd`: the handle and the answer's max_wr, max_sge.
fn create_srq_on(s: &mut Session, pd: u32) -> Result<(u32, u32, u32), Fail> {
    let d = s.srq_udata(16, 1);
    let core = uverbs::sys::verbs::CreateSrq { pd_handle: pd, max_wr: 16, max_sge: 1, user_handle: 5, ..Default::default() };
    let mut resp = vec![0u8; 16 + d.out_len];
    let b = legacy_bytes(CMD_CREATE_SRQ, core.as_bytes(), Some(&mut resp[..16]), &d.input);
    // The driver's answer follows the core's in the same buffer.
    let mut b = b;
    set_out_words(&mut b, ((16 + d.out_len) / 4) as u16);
    write_ok(s, &b)?;
    let w = |i: usize| u32::from_ne_bytes(resp[i * 4..i * 4 + 4].try_into().unwrap_or_default());
    Ok((w(0), w(1), w(2)))
}

fn create_srq_write(s: &mut Session) -> Outcome {
    let pd = s.obj.pd;
    let (h, max_wr, max_sge) = create_srq_on(s, pd)?;
    s.obj.srq = h;
    ensure!(max_wr >= 16 && max_sge >= 1, "max_wr {max_wr} max_sge {max_sge}");
    Ok(())
}

fn create_srq_bad_pd(s: &mut Session) -> Outcome {
    create_srq_on(s, NO_HANDLE).map(|_| ())
}

fn create_srq_pd_is_cq(s: &mut Session) -> Outcome {
    let cq = s.obj.cq;
    create_srq_on(s, cq).map(|_| ())
}

/// Legacy QUERY_SRQ: (max_wr, max_sge, srq_limit).
fn query_srq_of(s: &Session, handle: u32) -> Result<(u32, u32, u32), Fail> {
    let mut resp = [0u8; 16];
    let core = uverbs::sys::verbs::QuerySrq { srq_handle: handle, ..Default::default() };
    let b = legacy_bytes(CMD_QUERY_SRQ, core.as_bytes(), Some(&mut resp), &[]);
    write_ok(s, &b)?;
    let w = |i: usize| u32::from_ne_bytes(resp[i * 4..i * 4 + 4].try_into().unwrap_or_default());
    Ok((w(0), w(1), w(2)))
}

fn query_srq_write(s: &mut Session) -> Outcome {
    let (max_wr, max_sge, limit) = query_srq_of(s, s.obj.srq)?;
    ensure!(max_wr >= 16 && max_sge >= 1 && limit == 0, "max_wr {max_wr} max_sge {max_sge} limit {limit}");
    Ok(())
}

fn query_srq_missing(s: &mut Session) -> Outcome {
    query_srq_of(s, NO_HANDLE).map(|_| ())
}

fn query_srq_wrong_type(s: &mut Session) -> Outcome {
    query_srq_of(s, s.obj.pd).map(|_| ())
}

/// Legacy MODIFY_SRQ of the limit (`IB_SRQ_LIMIT`).
fn modify_srq_of(s: &Session, handle: u32, limit: u32) -> Outcome {
    let core = uverbs::sys::verbs::ModifySrq { srq_handle: handle, attr_mask: 2, max_wr: 0, srq_limit: limit };
    write_ok(s, &legacy_bytes(CMD_MODIFY_SRQ, core.as_bytes(), None, &[]))
}

fn modify_srq_missing(s: &mut Session) -> Outcome {
    modify_srq_of(s, NO_HANDLE, 4)
}

/// Legacy CREATE_QP of an RC QP on SRQ handle `srq`, without receive WRs of its own.
fn create_qp_on(s: &mut Session, srq: u32) -> Result<u32, Fail> {
    let cap = QpCap { max_recv_wr: 0, max_recv_sge: 0, ..rc_cap() };
    let d = s.qp_udata(&cap);
    let mut out = vec![0u8; d.out_len];
    let a = qpc::QpArgs { pd: s.obj.pd, send_cq: s.obj.cq, recv_cq: s.obj.cq, srq: Some(srq), cap, qp_type: QPT_RC,
                          ..Default::default() };
    Ok(qpc::create_qp_write(s.dev(), &a, &d.input, &mut out)?.handle)
}

fn create_qp_on_srq(s: &mut Session) -> Outcome {
    let srq = s.obj.srq;
    s.obj.qp_srq = create_qp_on(s, srq)?;
    Ok(())
}

fn create_qp_missing_srq(s: &mut Session) -> Outcome {
    let h = create_qp_on(s, NO_HANDLE)?;
    created_unexpectedly(s, h)
}

/// Legacy DESTROY_SRQ: the events reported.
fn destroy_srq_of(s: &Session, handle: u32) -> Result<u32, Fail> {
    let mut resp = [0u8; 4];
    let core = uverbs::sys::verbs::DestroySrq { srq_handle: handle, ..Default::default() };
    write_ok(s, &legacy_bytes(CMD_DESTROY_SRQ, core.as_bytes(), Some(&mut resp), &[]))?;
    Ok(u32::from_ne_bytes(resp))
}

fn destroy_srq_busy(s: &mut Session) -> Outcome {
    destroy_srq_of(s, s.obj.srq).map(|_| ())
}

fn destroy_qp_on_srq(s: &mut Session) -> Outcome {
    qpc::destroy_qp_write(s.dev(), s.obj.qp_srq)?;
    Ok(())
}

fn destroy_srq_wrong_type(s: &mut Session) -> Outcome {
    destroy_srq_of(s, s.obj.pd).map(|_| ())
}

fn destroy_srq(s: &mut Session) -> Outcome {
    let n = destroy_srq_of(s, s.obj.srq)?;
    ensure!(n == 0, "events_reported {n}");
    Ok(())
}

fn destroy_srq_twice(s: &mut Session) -> Outcome {
    destroy_srq_of(s, s.obj.srq).map(|_| ())
}

fn destroy_cq_write_busy(s: &mut Session) -> Outcome {
    cqc::destroy_cq_write(s.dev(), s.obj.cq_w)?;
    Ok(())
}

fn destroy_cq_ioctl_busy(s: &mut Session) -> Outcome {
    cqc::destroy_cq_ioctl(s.dev(), s.obj.cq)?;
    Ok(())
}

fn dealloc_pd_wrong_type(s: &mut Session) -> Outcome {
    pdc::dealloc_pd_write(s.dev(), s.obj.cq)?;
    Ok(())
}

fn destroy_cq_ioctl_missing(s: &mut Session) -> Outcome {
    cqc::destroy_cq_ioctl(s.dev(), NO_HANDLE)?;
    Ok(())
}

fn destroy_cq_ioctl_no_resp(s: &mut Session) -> Outcome {
    // A CQ of its own, so that a device that wrongly destroys it breaks nothing else.
    let d = s.cq_udata(CQE);
    let mut out = vec![0u8; d.out_len];
    let (h, _) = cqc::create_cq_ioctl(s.dev(), &cqc::CqArgs { cqe: CQE, ..Default::default() }, &d.input, &mut out)
        .map_err(|e| Fail::Bad(format!("creating the CQ: {e:?}")))?;
    let mut c = Ioctl::new(object::CQ, cqi::DESTROY);
    c.handle(cqi::ATTR_DESTROY_HANDLE, h);
    let r = c.run(s.dev());
    // The failed call must have left the CQ alive.
    let again = cqc::destroy_cq_ioctl(s.dev(), h);
    r?;
    again.map_err(|e| Fail::Bad(format!("destroy without RESP succeeded; a second destroy: {e:?}")))?;
    Ok(())
}

// ----------------------------------------------------------------- 7. malformed ioctl

fn ioctl_baseline(s: &mut Session) -> Outcome {
    broken_port_call(s, |_, _, _| {})
}

fn ioctl_length_long(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().length += 16)
}

fn ioctl_length_short(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().length -= 16)
}

fn ioctl_length_over_page(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| {
        c.hdr_mut().num_attrs = 255;
        c.hdr_mut().length = 24 + 16 * 255;
    })
}

fn ioctl_reserved1(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().reserved1 = 1)
}

fn ioctl_reserved2(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().reserved2 = 1)
}

/// Runs `f` with the device sending driver id 0 in ioctl headers.
fn with_driver_id_0(s: &mut Session, f: impl FnOnce(&Session) -> Outcome) -> Outcome {
    let id = s.dev().driver_id();
    s.dev_mut().set_driver_id(0);
    let r = f(s);
    s.dev_mut().set_driver_id(id);
    r
}

fn ioctl_wrong_driver_id(s: &mut Session) -> Outcome {
    with_driver_id_0(s, |s| broken_port_call(s, |_, _, _| {}))
}

fn ioctl_length_before_reserved(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| {
        c.hdr_mut().length += 16;
        c.hdr_mut().reserved1 = 1;
    })
}

fn ioctl_reserved_before_driver_id(s: &mut Session) -> Outcome {
    with_driver_id_0(s, |s| broken_port_call(s, |c, _, _| c.hdr_mut().reserved1 = 1))
}

fn ioctl_unknown_object(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().object_id = 0xff)
}

fn ioctl_unknown_driver_object(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().object_id = 0x1fff)
}

fn ioctl_unknown_method(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| c.hdr_mut().method_id = 0x7f)
}

fn ioctl_mr_method5(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::MR, 5);
    c.new_handle(0);
    c.handle(1, s.obj.pd);
    c.run(s.dev())?;
    Ok(())
}

fn ioctl_unknown_mandatory_attr(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| {
        c.in_const(0x99, 0);
    })
}

fn ioctl_unknown_optional_attr(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| {
        let i = c.in_const(0x99, 0);
        c.optional(i);
    })
}

fn ioctl_duplicate_attr(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, _| {
        c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, 1);
    })
}

fn ioctl_missing_mandatory(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_PORT);
    c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, 1);
    c.run(s.dev())?;
    Ok(())
}

fn ioctl_unknown_before_missing(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_PORT);
    c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, 1);
    c.in_const(0x99, 0);
    c.run(s.dev())?;
    Ok(())
}

fn ioctl_const_len4(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, p, _| c.attr_mut(p).len = 4)
}

fn ioctl_attr_reserved(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, r| c.attr_mut(r).elem_id = 1)
}

fn ioctl_out_short(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, r| c.attr_mut(r).len = 40)
}

fn ioctl_out_long(s: &mut Session) -> Outcome {
    let mut buf = [0xffu8; 100];
    let mut c = Ioctl::new(object::DEVICE, device::QUERY_PORT);
    c.in_const(device::ATTR_QUERY_PORT_PORT_NUM, 1);
    let r = c.out_bytes(device::ATTR_QUERY_PORT_RESP, &mut buf);
    c.run(s.dev())?;
    ensure!(c.valid_output(r), "VALID_OUTPUT not set on RESP");
    ensure!(buf[48..].iter().all(|&b| b == 0), "bytes past 48 not zero-filled");
    ensure!(buf[36] == s.obj.port.legacy_resp.phys_state, "phys_state byte {}", buf[36]);
    Ok(())
}

fn ioctl_resp_efault(s: &mut Session) -> Outcome {
    broken_port_call(s, |c, _, r| c.attr_mut(r).data = 8)
}

fn ioctl_hdr_efault(s: &mut Session) -> Outcome {
    // SAFETY: NULL is never dereferenced by this process; the device must reject it.
    unsafe { s.dev().ioctl_raw(std::ptr::null_mut())? };
    Ok(())
}

fn ioctl_idr_len(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::PD, pdi::DESTROY);
    let i = c.handle(pdi::ATTR_DESTROY_HANDLE, NO_HANDLE);
    c.attr_mut(i).len = 4;
    c.run(s.dev())?;
    Ok(())
}

fn ioctl_idr_negative(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::PD, pdi::DESTROY);
    let i = c.handle(pdi::ATTR_DESTROY_HANDLE, 0);
    c.attr_mut(i).data = u64::MAX;
    c.run(s.dev())?;
    Ok(())
}

fn invoke_write_probe(s: &mut Session) -> Outcome {
    let mut c = Ioctl::new(object::DEVICE, device::INVOKE_WRITE);
    c.in_const(device::ATTR_WRITE_CMD, CMD_QUERY_DEVICE as u64);
    c.run(s.dev())?;
    Ok(())
}

fn invoke_write_core_out_short(s: &mut Session) -> Outcome {
    let mut out = [0u8; 100];
    WriteCmd::new(CMD_QUERY_DEVICE, QueryDevice::default().as_bytes(), &mut out).run_invoke(s.dev())?;
    Ok(())
}

fn invoke_write_core_in_short(s: &mut Session) -> Outcome {
    let mut out = QueryDeviceResp::default();
    WriteCmd::new(CMD_QUERY_DEVICE, &[0, 0], out.as_mut_bytes()).run_invoke(s.dev())?;
    Ok(())
}

fn invoke_write_gap(s: &mut Session) -> Outcome {
    let mut out = [0u8; 64];
    WriteCmd::new(7, &[0u8; 16], &mut out).run_invoke(s.dev())?;
    Ok(())
}

// ----------------------------------------------------------------- 8. malformed write

fn query_device_bytes(resp: &mut QueryDeviceResp) -> Vec<u8> {
    legacy_bytes(CMD_QUERY_DEVICE, QueryDevice::default().as_bytes(), Some(resp.as_mut_bytes()), &[])
}

fn write_baseline(s: &mut Session) -> Outcome {
    let mut resp = QueryDeviceResp::default();
    let b = query_device_bytes(&mut resp);
    write_ok(s, &b)?;
    ensure!(resp.phys_port_cnt == 1, "response not written");
    Ok(())
}

fn write_count_short(s: &mut Session) -> Outcome {
    let mut resp = QueryDeviceResp::default();
    let b = query_device_bytes(&mut resp);
    write_ok(s, &b[..4])
}

fn write_command_bits(s: &mut Session) -> Outcome {
    let mut resp = QueryDeviceResp::default();
    let mut b = query_device_bytes(&mut resp);
    b[0..4].copy_from_slice(&(CMD_QUERY_DEVICE | 0x0100_0000).to_ne_bytes());
    write_ok(s, &b)
}

fn write_unknown_command(s: &mut Session) -> Outcome {
    let mut resp = [0u8; 64];
    let b = legacy_bytes(0x7f, &[0u8; 16], Some(&mut resp), &[]);
    write_ok(s, &b)
}

fn write_gap_command(s: &mut Session) -> Outcome {
    let mut resp = [0u8; 64];
    let b = legacy_bytes(7, &[0u8; 16], Some(&mut resp), &[]);
    write_ok(s, &b)
}

fn write_gap_in_words(s: &mut Session) -> Outcome {
    let mut resp = [0u8; 64];
    let mut b = legacy_bytes(7, &[0u8; 16], Some(&mut resp), &[]);
    set_in_words(&mut b, 7);
    write_ok(s, &b)
}

fn write_poll_cq(s: &mut Session) -> Outcome {
    // struct ib_uverbs_poll_cq: response, cq_handle, ne
    let mut body = [0u8; 16];
    body[8..12].copy_from_slice(&s.obj.cq.to_ne_bytes());
    body[12..16].copy_from_slice(&1u32.to_ne_bytes());
    let mut resp = [0u8; 64];
    let b = legacy_bytes(21, &body, Some(&mut resp), &[]);
    write_ok(s, &b)
}

fn write_in_words_mismatch(s: &mut Session) -> Outcome {
    let mut resp = QueryDeviceResp::default();
    let mut b = query_device_bytes(&mut resp);
    let words = (b.len() / 4 + 1) as u16;
    set_in_words(&mut b, words);
    write_ok(s, &b)
}

fn write_short_core(s: &mut Session) -> Outcome {
    let mut resp = [0u8; 40];
    let q = QueryPort { port_num: 1, ..Default::default() };
    let b = legacy_bytes(CMD_QUERY_PORT, &q.as_bytes()[..8], Some(&mut resp), &[]);
    write_ok(s, &b)
}

fn write_short_response(s: &mut Session) -> Outcome {
    let mut resp = QueryDeviceResp::default();
    let mut b = query_device_bytes(&mut resp);
    set_out_words(&mut b, 10);
    write_ok(s, &b)
}

fn write_response_efault(s: &mut Session) -> Outcome {
    let mut resp = QueryDeviceResp::default();
    let mut b = query_device_bytes(&mut resp);
    b[8..16].copy_from_slice(&8u64.to_ne_bytes());
    write_ok(s, &b)
}

fn write_alloc_pd_efault(s: &mut Session) -> Outcome {
    let mut resp = AllocPdResp::default();
    let mut b = legacy_bytes(CMD_ALLOC_PD, AllocPd::default().as_bytes(), Some(resp.as_mut_bytes()), &[]);
    b[8..16].copy_from_slice(&8u64.to_ne_bytes());
    write_ok(s, &b)
}

fn write_alloc_pd_efault_rollback(s: &mut Session) -> Outcome {
    let mut drv = vec![0u8; s.profile.pd_out_len()];
    let h = pdc::alloc_pd(s.dev(), &mut drv)?;
    pdc::dealloc_pd_write(s.dev(), h)?;
    // The lowest free handle is now `h`; the failing ALLOC_PD takes it and gives it back.
    let mut resp = AllocPdResp::default();
    let mut b = legacy_bytes(CMD_ALLOC_PD, AllocPd::default().as_bytes(), Some(resp.as_mut_bytes()), &[]);
    b[8..16].copy_from_slice(&8u64.to_ne_bytes());
    let r = s.write_bytes(&b);
    ensure!(r == Err(Errno::EFAULT), "the failing ALLOC_PD gave {r:?}");
    let again = pdc::alloc_pd(s.dev(), &mut drv)?;
    pdc::dealloc_pd_write(s.dev(), again)?;
    ensure!(again == h, "handle {h} was not reused: the next PD got {again}");
    Ok(())
}

fn write_trailing_nonzero(s: &mut Session) -> Outcome {
    let mut body = NO_HANDLE.to_ne_bytes().to_vec();
    body.extend_from_slice(&[0, 0, 0, 1]);
    let b = legacy_bytes(CMD_DEALLOC_PD, &body, None, &[]);
    write_ok(s, &b)
}

fn write_trailing_zero(s: &mut Session) -> Outcome {
    let mut body = NO_HANDLE.to_ne_bytes().to_vec();
    body.extend_from_slice(&[0, 0, 0, 0]);
    let b = legacy_bytes(CMD_DEALLOC_PD, &body, None, &[]);
    write_ok(s, &b)
}

fn ex_query_device(s: &Session, body: ExQueryDevice, in_words: u16, out_words: u16, with_resp: bool, reserved: u32) -> Outcome {
    let mut resp = ExQueryDeviceResp::default();
    let ptr = if with_resp { resp.as_mut_bytes().as_mut_ptr() as u64 } else { 0 };
    let b = ex_bytes(EX_CMD_QUERY_DEVICE, body.as_bytes(), in_words, out_words, ptr, reserved);
    write_ok(s, &b)
}

const EXQD_OUT_WORDS: u16 = (std::mem::size_of::<ExQueryDeviceResp>() / 8) as u16;

fn write_ex_baseline(s: &mut Session) -> Outcome {
    ex_query_device(s, ExQueryDevice::default(), 1, EXQD_OUT_WORDS, true, 0)
}

fn write_ex_count_short(s: &mut Session) -> Outcome {
    let mut resp = ExQueryDeviceResp::default();
    let b = ex_bytes(EX_CMD_QUERY_DEVICE, &[], 0, EXQD_OUT_WORDS, resp.as_mut_bytes().as_mut_ptr() as u64, 0);
    write_ok(s, &b[..16])
}

fn write_ex_words_mismatch(s: &mut Session) -> Outcome {
    ex_query_device(s, ExQueryDevice::default(), 2, EXQD_OUT_WORDS, true, 0)
}

fn write_ex_hdr_reserved(s: &mut Session) -> Outcome {
    ex_query_device(s, ExQueryDevice::default(), 1, EXQD_OUT_WORDS, true, 1)
}

fn write_ex_response_without_out(s: &mut Session) -> Outcome {
    ex_query_device(s, ExQueryDevice::default(), 1, 0, true, 0)
}

fn write_ex_out_without_response(s: &mut Session) -> Outcome {
    ex_query_device(s, ExQueryDevice::default(), 1, EXQD_OUT_WORDS, false, 0)
}

fn write_ex_unknown(s: &mut Session) -> Outcome {
    let mut resp = [0u8; 64];
    let b = ex_bytes(0x50, &[0u8; 8], 1, 8, resp.as_mut_ptr() as u64, 0);
    write_ok(s, &b)
}

fn write_ex_query_device_comp_mask(s: &mut Session) -> Outcome {
    ex_query_device(s, ExQueryDevice { comp_mask: 1, reserved: 0 }, 1, EXQD_OUT_WORDS, true, 0)
}

// --------------------------------------------------------------------- 9. destroys

fn destroy_qp_ioctl(s: &mut Session) -> Outcome {
    qpc::destroy_qp_ioctl(s.dev(), s.obj.qp)?;
    Ok(())
}

fn destroy_qp_ioctl_twice(s: &mut Session) -> Outcome {
    qpc::destroy_qp_ioctl(s.dev(), s.obj.qp)?;
    Ok(())
}

fn destroy_qp_write(s: &mut Session) -> Outcome {
    qpc::destroy_qp_write(s.dev(), s.obj.qp_w)?;
    Ok(())
}

fn destroy_qp_write_twice(s: &mut Session) -> Outcome {
    qpc::destroy_qp_write(s.dev(), s.obj.qp_w)?;
    Ok(())
}

fn destroy_qp_ex(s: &mut Session) -> Outcome {
    qpc::destroy_qp_write(s.dev(), s.obj.qp_ex)?;
    Ok(())
}

fn destroy_cq_ioctl(s: &mut Session) -> Outcome {
    let r = cqc::destroy_cq_ioctl(s.dev(), s.obj.cq)?;
    ensure!(r.comp_events_reported == 0 && r.async_events_reported == 0, "events {:?}", r);
    Ok(())
}

fn destroy_cq_write(s: &mut Session) -> Outcome {
    cqc::destroy_cq_write(s.dev(), s.obj.cq_w)?;
    Ok(())
}

fn destroy_cq_write_twice(s: &mut Session) -> Outcome {
    cqc::destroy_cq_write(s.dev(), s.obj.cq_w)?;
    Ok(())
}

fn dereg_mr_write(s: &mut Session) -> Outcome {
    mrc::dereg_mr_write(s.dev(), s.obj.mr)?;
    Ok(())
}

fn destroy_mr_ioctl(s: &mut Session) -> Outcome {
    mrc::destroy_mr_ioctl(s.dev(), s.obj.mr2)?;
    Ok(())
}

fn dereg_mr_twice(s: &mut Session) -> Outcome {
    mrc::dereg_mr_write(s.dev(), s.obj.mr)?;
    Ok(())
}

fn dealloc_pd_write(s: &mut Session) -> Outcome {
    pdc::dealloc_pd_write(s.dev(), s.obj.pd)?;
    Ok(())
}

fn destroy_pd_ioctl(s: &mut Session) -> Outcome {
    pdc::destroy_pd_ioctl(s.dev(), s.obj.pd2)?;
    Ok(())
}

fn dealloc_pd_twice(s: &mut Session) -> Outcome {
    pdc::dealloc_pd_write(s.dev(), s.obj.pd)?;
    Ok(())
}

fn destroy_pd_ioctl_twice(s: &mut Session) -> Outcome {
    pdc::destroy_pd_ioctl(s.dev(), s.obj.pd2)?;
    Ok(())
}
