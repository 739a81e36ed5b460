//! mlx5_ib's DevX (drivers/infiniband/hw/mlx5/devx.c): PRM commands from userspace,
//! executed by softhca's [`firmware`](crate::firmware) under the context's uid.
//!
//! - GET_CONTEXT with `MLX5_IB_ALLOC_UCTX_DEVX` makes a firmware user context
//!   ([`create_uctx`]); close() destroys it after the context's objects.
//! - DEVX_OTHER runs the general commands devx.c lets through (`devx_is_general_cmd`:
//!   queries of the device, not of objects); DEVX_QUERY_UAR maps a context's bfreg to
//!   its UAR page (`bfregn_to_uar_index`); DEVX_QUERY_EQN names the EQ of a completion
//!   vector.
//! - DEVX_OBJ_CREATE accepts only the object-creating commands of
//!   `devx_is_obj_create_cmd`, stamps the uid, forces the UMEM-valid bits
//!   (`devx_set_umem_valid`: a DevX ring is always in a UMEM), and derives the destroy
//!   command from the create (`devx_obj_build_destroy_cmd`), which DEVX_OBJ_DESTROY and
//!   close() run. MODIFY/QUERY/ASYNC_QUERY re-derive the object from the inbox
//!   (`devx_get_obj_id`) and check it against the handle (`devx_is_valid_obj_id`): a
//!   DevX object, or a verbs CQ/QP by its number.
//! - DEVX_UMEM_REG pins the range and registers it with CREATE_UMEM, its page list
//!   built as `devx_umem_reg_cmd_alloc` builds it; DEREG of a UMEM in use is EBUSY.
//! - A command the firmware refuses is EREMOTEIO with the outbox (status, syndrome)
//!   copied back (`mlx5_cmd_do`); the kernel's own refusals (a command not on the
//!   method's list, an object that does not match) are EINVAL before any firmware runs.
//!
//! Not here: DEVX_SUBSCRIBE_EVENT and the async event fd (completion and async events
//! of DevX objects are not delivered; DevX CQs are polled). An async command fd's
//! records are queued when the command runs (softhca executes commands at once); the
//! kernel's 1 MiB bound on outstanding answers is applied per command, and a read()
//! with a buffer smaller than a record truncates it instead of failing with ENOSPC.

use std::sync::Arc;

use nix::errno::Errno;
use prm::bits::{View, ViewMut};
use prm::cmd::header::MboxIn;
use prm::cmd::opcode as op;
use prm::cmd::umem::{CreateUmemIn, Umem};
use prm::cmd::uctx::{CreateUctxIn, CreateUctxOut, DestroyUctxIn};
use zerocopy::IntoBytes;

use uverbs::sys::ids::mlx5 as ids;
use uverbs::sys::verbs::{ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};

use crate::firmware::{Outcome, FIRST_COMP_EQN};
use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::pin::pin;
use crate::kernel::uobject::{DevxObj, DevxUmem, FdObj, Uobj};
use crate::kernel::Result;

/// Opcodes devx.c names that `prm::cmd::opcode` does not (`MLX5_CMD_OP_*`).
mod opc {
    pub const QUERY_ADAPTER: u16 = 0x101;
    pub const QUERY_ISSI: u16 = 0x10a;
    pub const NOP: u16 = 0x10d;
    pub const CREATE_PSV: u16 = 0x600;
    pub const CREATE_XRC_SRQ: u16 = 0x705;
    pub const CREATE_DCT: u16 = 0x710;
    pub const CREATE_XRQ: u16 = 0x717;
    pub const QUERY_VPORT_STATE: u16 = 0x750;
    pub const QUERY_ESW_VPORT_CONTEXT: u16 = 0x752;
    pub const QUERY_HCA_VPORT_CONTEXT: u16 = 0x762;
    pub const QUERY_VNIC_ENV: u16 = 0x76f;
    pub const QUERY_VPORT_COUNTER: u16 = 0x770;
    pub const ALLOC_Q_COUNTER: u16 = 0x771;
    pub const CREATE_SCHEDULING_ELEMENT: u16 = 0x782;
    pub const ATTACH_TO_MCG: u16 = 0x806;
    pub const ALLOC_XRCD: u16 = 0x80e;
    pub const QUERY_CONG_STATUS: u16 = 0x822;
    pub const QUERY_CONG_PARAMS: u16 = 0x824;
    pub const QUERY_CONG_STATISTICS: u16 = 0x826;
    pub const ADD_VXLAN_UDP_DPORT: u16 = 0x827;
    pub const SET_L2_TABLE_ENTRY: u16 = 0x829;
    pub const QUERY_LAG: u16 = 0x842;
    pub const CREATE_TIR: u16 = 0x900;
    pub const GET_DROPPED_PACKET_LOG: u16 = 0x902;
    pub const CREATE_SQ: u16 = 0x904;
    pub const CREATE_RQ: u16 = 0x908;
    pub const CREATE_RMP: u16 = 0x90c;
    pub const CREATE_TIS: u16 = 0x912;
    pub const CREATE_RQT: u16 = 0x916;
    pub const CREATE_FLOW_TABLE: u16 = 0x930;
    pub const CREATE_FLOW_GROUP: u16 = 0x933;
    pub const SET_FLOW_TABLE_ENTRY: u16 = 0x936;
    pub const ALLOC_FLOW_COUNTER: u16 = 0x939;
    pub const ALLOC_PACKET_REFORMAT_CONTEXT: u16 = 0x93d;
    pub const ALLOC_MODIFY_HEADER_CONTEXT: u16 = 0x940;
    /// `MLX5_CMD_OP_GENERAL_START` .. `_END`: commands devx passes as general.
    pub const GENERAL_START: u16 = 0xb00;
    pub const GENERAL_END: u16 = 0xd00;
}

/// `MLX5_IB_MTT_READ` / `MLX5_IB_MTT_WRITE`: the access bits of a UMEM page entry.
const MTT_READ: u64 = 1 << 0;
const MTT_WRITE: u64 = 1 << 1;
/// `MAX_ASYNC_BYTES_IN_USE`.
const MAX_ASYNC_BYTES: u64 = 1024 * 1024;

fn opcode(inb: &[u8]) -> u16 {
    u16::from_be_bytes([inb[0], inb[1]])
}

/// `general_obj_in_cmd_hdr.vhca_tunnel_id` (bits 0x20..0x30, which rdma-core's copy of
/// the PRM still calls reserved).
fn vhca_tunnel_id(inb: &[u8]) -> u16 {
    u16::from_be_bytes([inb[4], inb[5]])
}

fn set_uid(inb: &mut [u8], uid: u16) {
    inb[2..4].copy_from_slice(&uid.to_be_bytes());
}

/// The 24-bit object number at bit 0x48 (dword 2) of an inbox or outbox: where every
/// command softhca executes keeps it (`cqn`, `qpn`, `pd`, `mkey_index`, `umem_id`).
fn id_at_0x48(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[9], b[10], b[11]])
}

/// The 32-bit `obj_id` of a general object header (bit 0x40).
fn obj_id_at_0x40(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[8], b[9], b[10], b[11]])
}

/// `get_enc_obj_id`.
fn enc(opcode: u32, id: u32) -> u64 {
    (opcode as u64) << 32 | id as u64
}

/// The inbox of attribute `id`, copied in (`UA_ALLOC_AND_COPY`).
fn read_in(c: &Call<'_>, id: u16) -> Result<Vec<u8>> {
    let b = c.b.in_buf(id).ok_or(Errno::EINVAL)?;
    let mut v = vec![0u8; b.len()];
    b.read(0, &mut v)?;
    Ok(v)
}

fn out_len(c: &Call<'_>, id: u16) -> Result<usize> {
    Ok(c.b.out_buf(id).ok_or(Errno::EINVAL)?.len)
}

/// `mlx5_cmd_do` + the copy back: the outbox goes to the caller whatever the status;
/// a firmware refusal is EREMOTEIO.
fn exec_copy(c: &Call<'_>, inb: &[u8], out_id: u16, outlen: usize) -> Result<Vec<u8>> {
    let mut out = vec![0u8; outlen];
    let o = c.hca.firmware().exec(inb, &mut out);
    c.b.copy_to(out_id, &out)?;
    if !o.is_ok() {
        return Err(Errno::EREMOTEIO);
    }
    Ok(out)
}

/// `mlx5_cmd_exec` for the kernel's own commands: a refusal is the status's errno.
fn exec_kernel(hca: &Hca, inb: &[u8], out: &mut [u8]) -> Result<()> {
    let o: Outcome = hca.firmware().exec(inb, out);
    match o.errno() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `mlx5_ib_devx_create`: a user context for a uverbs context opened with DevX.
pub(crate) fn create_uctx(hca: &Hca) -> Result<u16> {
    let mut inb = vec![0u8; CreateUctxIn::BYTES];
    ViewMut::<MboxIn>::new(&mut inb).map_err(|_| Errno::EINVAL)?.set(MboxIn::opcode, op::CREATE_UCTX);
    let mut out = vec![0u8; CreateUctxOut::BYTES];
    exec_kernel(hca, &inb, &mut out)?;
    Ok(View::<CreateUctxOut>::new(&out).map_err(|_| Errno::EINVAL)?.get(CreateUctxOut::uid))
}

/// `mlx5_ib_devx_destroy` (its result ignored, as the driver does).
pub(crate) fn destroy_uctx(hca: &Hca, uid: u16) {
    let mut inb = vec![0u8; DestroyUctxIn::BYTES];
    if let Ok(mut v) = ViewMut::<DestroyUctxIn>::new(&mut inb) {
        v.set(DestroyUctxIn::opcode, op::DESTROY_UCTX).set(DestroyUctxIn::uid, uid);
    }
    let mut out = [0u8; 16];
    let _ = hca.firmware().exec(&inb, &mut out);
}

/// `devx_is_whitelist_cmd`.
fn is_whitelist(opcode: u16) -> bool {
    matches!(opcode, op::QUERY_HCA_CAP | opc::QUERY_HCA_VPORT_CONTEXT | opc::QUERY_ESW_VPORT_CONTEXT)
}

/// `devx_get_uid`: the context's uid; for whitelisted queries of a context without
/// DevX, the device's whitelist uid.
fn get_uid(c: &Call<'_>, inb: &[u8]) -> Result<u16> {
    let uid = c.st.ctx()?.devx_uid;
    if is_whitelist(opcode(inb)) {
        if uid != 0 {
            return Ok(uid);
        }
        return c.hca.firmware().whitelist_uid().ok_or(Errno::EOPNOTSUPP);
    }
    if uid == 0 {
        return Err(Errno::EINVAL);
    }
    Ok(uid)
}

/// `devx_is_general_cmd` (no vhca tunnel commands: `vhca_tunnel_commands` is 0).
fn is_general(opcode: u16) -> bool {
    (opc::GENERAL_START..opc::GENERAL_END).contains(&opcode)
        || matches!(
            opcode,
            op::QUERY_HCA_CAP
                | opc::QUERY_HCA_VPORT_CONTEXT
                | opc::QUERY_ESW_VPORT_CONTEXT
                | opc::QUERY_VPORT_STATE
                | opc::QUERY_ADAPTER
                | opc::QUERY_ISSI
                | op::QUERY_NIC_VPORT_CONTEXT
                | op::QUERY_ROCE_ADDRESS
                | opc::QUERY_VNIC_ENV
                | opc::QUERY_VPORT_COUNTER
                | opc::GET_DROPPED_PACKET_LOG
                | opc::NOP
                | opc::QUERY_CONG_STATUS
                | opc::QUERY_CONG_PARAMS
                | opc::QUERY_CONG_STATISTICS
                | opc::QUERY_LAG
        )
}

/// `devx_is_obj_create_cmd`.
fn is_create(opcode: u16, inb: &[u8]) -> bool {
    match opcode {
        op::CREATE_GENERAL_OBJECT | op::CREATE_MKEY | op::CREATE_CQ | op::ALLOC_PD | op::ALLOC_TRANSPORT_DOMAIN
        | opc::CREATE_RMP | opc::CREATE_SQ | opc::CREATE_RQ | opc::CREATE_RQT | opc::CREATE_TIR | opc::CREATE_TIS
        | opc::ALLOC_Q_COUNTER | opc::CREATE_FLOW_TABLE | opc::CREATE_FLOW_GROUP | opc::ALLOC_FLOW_COUNTER
        | opc::ALLOC_PACKET_REFORMAT_CONTEXT | opc::ALLOC_MODIFY_HEADER_CONTEXT | opc::CREATE_SCHEDULING_ELEMENT
        | opc::ADD_VXLAN_UDP_DPORT | opc::SET_L2_TABLE_ENTRY | op::CREATE_QP | op::CREATE_SRQ | opc::CREATE_XRC_SRQ
        | opc::CREATE_DCT | opc::CREATE_XRQ | opc::ATTACH_TO_MCG | opc::ALLOC_XRCD => true,
        // set_fte_in.op_mod 0 creates, 1 modifies.
        opc::SET_FLOW_TABLE_ENTRY => u16::from_be_bytes([inb[6], inb[7]]) == 0,
        // create_psv_in.num_psv (bits 0x40..0x44) must be 1.
        opc::CREATE_PSV => inb.get(8).map(|b| b >> 4) == Some(1),
        _ => false,
    }
}

/// `devx_is_obj_modify_cmd` and `devx_get_obj_id` for them: the object a modify acts
/// on, for the commands whose objects can exist here (others have no object a handle
/// could name, so `devx_is_valid_obj_id` refuses them all the same: EINVAL).
fn modify_obj_id(inb: &[u8]) -> Option<u64> {
    let o = opcode(inb);
    Some(match o {
        op::MODIFY_GENERAL_OBJECT => general_obj_id(inb),
        op::MODIFY_CQ => enc(op::CREATE_CQ as u32, id_at_0x48(inb)),
        op::RST2INIT_QP | op::INIT2RTR_QP | op::INIT2INIT_QP | op::RTR2RTS_QP | op::RTS2RTS_QP | op::SQERR2RTS_QP
        | op::QP_2ERR | op::QP_2RST => enc(op::CREATE_QP as u32, id_at_0x48(inb)),
        // devx.c names ARM_RQ's object as an RQ's (CREATE_RQ), so no SRQ handle ever
        // matches it: EINVAL, as on Linux.
        op::ARM_RQ => enc(opc::CREATE_RQ as u32, id_at_0x48(inb)),
        _ => return None,
    })
}

/// `devx_is_obj_query_cmd` and `devx_get_obj_id` for them (as [`modify_obj_id`]).
fn query_obj_id(inb: &[u8]) -> Option<u64> {
    Some(match opcode(inb) {
        op::QUERY_GENERAL_OBJECT => general_obj_id(inb),
        op::QUERY_MKEY => enc(op::CREATE_MKEY as u32, id_at_0x48(inb)),
        op::QUERY_CQ => enc(op::CREATE_CQ as u32, id_at_0x48(inb)),
        op::QUERY_QP => enc(op::CREATE_QP as u32, id_at_0x48(inb)),
        op::QUERY_SRQ => enc(op::CREATE_SRQ as u32, id_at_0x48(inb)),
        op::QUERY_FLOW_TABLE => {
            use prm::cmd::flow::table::QueryFlowTableIn as Q;
            enc(op::CREATE_FLOW_TABLE as u32, View::<Q>::new(inb).ok()?.get(Q::table_id))
        }
        op::QUERY_FLOW_TABLE_ENTRY => {
            use prm::cmd::flow::entry::QueryFteIn as Q;
            enc(op::SET_FLOW_TABLE_ENTRY as u32, View::<Q>::new(inb).ok()?.get(Q::flow_index))
        }
        op::QUERY_FLOW_COUNTER => {
            use prm::cmd::flow::counter::QueryFlowCounterIn as Q;
            enc(op::ALLOC_FLOW_COUNTER as u32, View::<Q>::new(inb).ok()?.get(Q::flow_counter_id))
        }
        _ => return None,
    })
}

fn general_obj_id(inb: &[u8]) -> u64 {
    let obj_type = u16::from_be_bytes([inb[6], inb[7]]) as u32;
    enc(op::CREATE_GENERAL_OBJECT as u32 | obj_type << 16, obj_id_at_0x40(inb))
}

/// `devx_is_valid_obj_id`: the handle's object is the one the command names.
fn is_valid_obj(obj: &Uobj, id: u64) -> bool {
    match obj {
        Uobj::Cq(cq) => enc(op::CREATE_CQ as u32, cq.cqn) == id,
        Uobj::Qp(qp) => enc(op::CREATE_QP as u32, qp.qpn) == id,
        // A basic SRQ of an ISSI 0 device is CREATE_SRQ's (not CREATE_RMP's).
        Uobj::Srq(srq) => enc(op::CREATE_SRQ as u32, srq.srqn) == id,
        Uobj::Devx(o) => o.obj_id == id,
        _ => false,
    }
}

/// `devx_set_umem_valid`: DevX rings and doorbell records always live in UMEMs.
fn set_umem_valid(inb: &mut [u8]) {
    use prm::cmd::cq::{CreateCqIn, Cqc};
    use prm::cmd::qp::{CreateQpIn, Qpc};
    match opcode(inb) {
        op::CREATE_CQ => {
            if let Ok(mut v) = ViewMut::<CreateCqIn>::new(inb) {
                v.set(CreateCqIn::cq_umem_valid, true);
                v.sub_mut(CreateCqIn::cq_context).set(Cqc::dbr_umem_valid, true);
            }
        }
        op::CREATE_QP => {
            if let Ok(mut v) = ViewMut::<CreateQpIn>::new(inb) {
                v.set(CreateQpIn::wq_umem_valid, true);
                v.sub_mut(CreateQpIn::qpc).set(Qpc::dbr_umem_valid, true);
            }
        }
        op::MODIFY_CQ => {
            if let Ok(mut v) = ViewMut::<prm::cmd::cq::ModifyCqIn>::new(inb) {
                v.set(prm::cmd::cq::ModifyCqIn::cq_umem_valid, true);
            }
        }
        _ => {}
    }
    // (An inbox shorter than its command keeps its bytes: the firmware refuses it
    // with BAD_INP_LEN.)
}

/// `devx_obj_build_destroy_cmd` for the creates softhca's firmware executes: the
/// 16-byte destroy inbox (with the creator's uid) and the created object's number.
/// Other creates never succeed here (the firmware answers BAD_OP), so never get here.
fn build_destroy(inb: &[u8], out: &[u8], opcode: u16) -> (Vec<u8>, u32) {
    if let Some(flow) = build_flow_destroy(inb, out, opcode) {
        return flow;
    }
    let mut d = vec![0u8; 16];
    d[2..4].copy_from_slice(&inb[2..4]);
    let (dop, id) = match opcode {
        op::CREATE_GENERAL_OBJECT => {
            let id = obj_id_at_0x40(out);
            d[6..8].copy_from_slice(&inb[6..8]);
            d[8..12].copy_from_slice(&id.to_be_bytes());
            (op::DESTROY_GENERAL_OBJECT, id)
        }
        _ => {
            let id = id_at_0x48(out);
            let dop = match opcode {
                op::CREATE_UMEM => op::DESTROY_UMEM,
                op::CREATE_MKEY => op::DESTROY_MKEY,
                op::CREATE_CQ => op::DESTROY_CQ,
                op::ALLOC_PD => op::DEALLOC_PD,
                op::CREATE_QP => op::DESTROY_QP,
                op::CREATE_SRQ => op::DESTROY_SRQ,
                op::CREATE_XRC_SRQ => op::DESTROY_XRC_SRQ,
                op::ALLOC_XRCD => op::DEALLOC_XRCD,
                op::CREATE_TIS => op::DESTROY_TIS,
                op::CREATE_SQ => op::DESTROY_SQ,
                op::CREATE_RQ => op::DESTROY_RQ,
                op::CREATE_TIR => op::DESTROY_TIR,
                _ => 0,
            };
            d[9..12].copy_from_slice(&id.to_be_bytes()[1..]);
            (dop, id)
        }
    };
    d[0..2].copy_from_slice(&dop.to_be_bytes());
    (d, id)
}

/// `devx_obj_build_destroy_cmd`'s flow steering cases: the destroy names the table (its
/// type and id, and the vport as the create did) and the group, entry or counter; the
/// object's number is the table id, group id, flow index or counter id.
fn build_flow_destroy(inb: &[u8], out: &[u8], opcode: u16) -> Option<(Vec<u8>, u32)> {
    use prm::cmd::flow::{counter as fc, entry as fe, group as fg, table as ft};
    macro_rules! din {
        ($T:ty, $op:expr, |$v:ident| $fill:block) => {{
            let mut d = vec![0u8; <$T>::BYTES];
            let mut $v = ViewMut::<$T>::new(&mut d).ok()?;
            $v.set(<$T>::opcode, $op as _);
            $fill
            d
        }};
    }
    Some(match opcode {
        op::CREATE_FLOW_TABLE => {
            let i = View::<ft::CreateFlowTableIn>::new(inb).ok()?;
            let id = View::<ft::CreateFlowTableOut>::new(out).ok()?.get(ft::CreateFlowTableOut::table_id) as u32;
            let d = din!(ft::DestroyFlowTableIn, op::DESTROY_FLOW_TABLE, |v| {
                v.set(ft::DestroyFlowTableIn::uid, i.get(ft::CreateFlowTableIn::uid));
                v.set(ft::DestroyFlowTableIn::other_vport, i.get(ft::CreateFlowTableIn::other_vport));
                v.set(ft::DestroyFlowTableIn::vport_number, i.get(ft::CreateFlowTableIn::vport_number));
                v.set(ft::DestroyFlowTableIn::table_type, i.get(ft::CreateFlowTableIn::table_type));
                v.set(ft::DestroyFlowTableIn::table_id, id as _);
            });
            (d, id)
        }
        op::CREATE_FLOW_GROUP => {
            let i = View::<fg::CreateFlowGroupIn>::new(inb).ok()?;
            let id = View::<fg::CreateFlowGroupOut>::new(out).ok()?.get(fg::CreateFlowGroupOut::group_id) as u32;
            let d = din!(fg::DestroyFlowGroupIn, op::DESTROY_FLOW_GROUP, |v| {
                v.set(fg::DestroyFlowGroupIn::uid, i.get(fg::CreateFlowGroupIn::uid));
                v.set(fg::DestroyFlowGroupIn::other_vport, i.get(fg::CreateFlowGroupIn::other_vport));
                v.set(fg::DestroyFlowGroupIn::vport_number, i.get(fg::CreateFlowGroupIn::vport_number));
                v.set(fg::DestroyFlowGroupIn::table_type, i.get(fg::CreateFlowGroupIn::table_type));
                v.set(fg::DestroyFlowGroupIn::table_id, i.get(fg::CreateFlowGroupIn::table_id));
                v.set(fg::DestroyFlowGroupIn::group_id, id as _);
            });
            (d, id)
        }
        op::SET_FLOW_TABLE_ENTRY => {
            let i = View::<fe::SetFteIn>::new(inb).ok()?;
            let id = i.get(fe::SetFteIn::flow_index) as u32;
            let d = din!(fe::DeleteFteIn, op::DELETE_FLOW_TABLE_ENTRY, |v| {
                v.set(fe::DeleteFteIn::uid, i.get(fe::SetFteIn::uid));
                v.set(fe::DeleteFteIn::other_vport, i.get(fe::SetFteIn::other_vport));
                v.set(fe::DeleteFteIn::vport_number, i.get(fe::SetFteIn::vport_number));
                v.set(fe::DeleteFteIn::table_type, i.get(fe::SetFteIn::table_type));
                v.set(fe::DeleteFteIn::table_id, i.get(fe::SetFteIn::table_id));
                v.set(fe::DeleteFteIn::flow_index, id as _);
            });
            (d, id)
        }
        op::ALLOC_FLOW_COUNTER => {
            let i = View::<fc::AllocFlowCounterIn>::new(inb).ok()?;
            let id = View::<fc::AllocFlowCounterOut>::new(out).ok()?.get(fc::AllocFlowCounterOut::flow_counter_id) as u32;
            let d = din!(fc::DeallocFlowCounterIn, op::DEALLOC_FLOW_COUNTER, |v| {
                v.set(fc::DeallocFlowCounterIn::uid, i.get(fc::AllocFlowCounterIn::uid));
                v.set(fc::DeallocFlowCounterIn::flow_counter_id, id as _);
            });
            (d, id)
        }
        _ => return None,
    })
}

/// `MLX5_IB_METHOD_DEVX_OTHER`.
pub(crate) fn other(c: &mut Call<'_>) -> Result<()> {
    let mut inb = read_in(c, ids::ATTR_DEVX_OTHER_CMD_IN)?;
    let uid = get_uid(c, &inb)?;
    if !is_general(opcode(&inb)) {
        return Err(Errno::EINVAL);
    }
    let outlen = out_len(c, ids::ATTR_DEVX_OTHER_CMD_OUT)?;
    set_uid(&mut inb, uid);
    exec_copy(c, &inb, ids::ATTR_DEVX_OTHER_CMD_OUT, outlen).map(|_| ())
}

/// `MLX5_IB_METHOD_DEVX_QUERY_UAR`: the UAR page of a dynamic bfreg.
pub(crate) fn query_uar(c: &mut Call<'_>) -> Result<()> {
    let ctx = c.st.ctx()?;
    let user_idx: u32 = c.b.copy_from(ids::ATTR_DEVX_QUERY_UAR_USER_IDX).map_err(|_| Errno::EFAULT)?;
    let page = ctx.bfregs.as_ref().ok_or(Errno::EINVAL)?.dyn_bfreg_page(user_idx)?;
    c.b.copy_to(ids::ATTR_DEVX_QUERY_UAR_DEV_IDX, page.as_bytes())
}

/// `MLX5_IB_METHOD_DEVX_QUERY_EQN`: `mlx5_vector2eqn` (ENOENT past the last vector).
pub(crate) fn query_eqn(c: &mut Call<'_>) -> Result<()> {
    let vec: u32 = c.b.copy_from(ids::ATTR_DEVX_QUERY_EQN_USER_VEC).map_err(|_| Errno::EFAULT)?;
    c.st.ctx()?;
    if vec >= c.hca.config().num_comp_vectors {
        return Err(Errno::ENOENT);
    }
    c.b.copy_to(ids::ATTR_DEVX_QUERY_EQN_DEV_EQN, (FIRST_COMP_EQN + vec).as_bytes())
}

/// `MLX5_IB_METHOD_DEVX_OBJ_CREATE`.
pub(crate) fn obj_create(c: &mut Call<'_>) -> Result<()> {
    let mut inb = read_in(c, ids::ATTR_DEVX_OBJ_CREATE_CMD_IN)?;
    if vhca_tunnel_id(&inb) != 0 {
        return Err(Errno::EINVAL);
    }
    let uid = get_uid(c, &inb)?;
    let opcode = opcode(&inb);
    if !is_create(opcode, &inb) {
        return Err(Errno::EINVAL);
    }
    let outlen = out_len(c, ids::ATTR_DEVX_OBJ_CREATE_CMD_OUT)?;
    set_uid(&mut inb, uid);
    if opcode == op::CREATE_MKEY {
        // devx_handle_mkey_create: the whole mkey context must be there; KLM/KSM keys
        // keep mkey_umem_valid clear (and would be indirect; softhca has none).
        use prm::cmd::mkey::{access_mode, CreateMkeyIn, Mkc};
        let min = (CreateMkeyIn::memory_key_mkey_entry.off() + Mkc::BITS) / 8;
        if inb.len() < min {
            return Err(Errno::EINVAL);
        }
        let mut v = ViewMut::<CreateMkeyIn>::new(&mut inb).map_err(|_| Errno::EINVAL)?;
        let mkc = v.sub_mut(CreateMkeyIn::memory_key_mkey_entry);
        let mode = mkc.get(Mkc::access_mode_1_0) | mkc.get(Mkc::access_mode_4_2) << 2;
        if mode != access_mode::KLMS && mode != access_mode::KSM {
            v.set(CreateMkeyIn::mkey_umem_valid, true);
        }
    } else {
        set_umem_valid(&mut inb);
    }
    let mut out = vec![0u8; outlen];
    let o = c.hca.firmware().exec(&inb, &mut out);
    if !o.is_ok() {
        c.b.copy_to(ids::ATTR_DEVX_OBJ_CREATE_CMD_OUT, &out)?;
        return Err(Errno::EREMOTEIO);
    }
    let (dinbox, id) = build_destroy(&inb, &out, opcode);
    let obj_type = if opcode == op::CREATE_GENERAL_OBJECT { u16::from_be_bytes([inb[6], inb[7]]) as u32 } else { 0 };
    let obj = Arc::new(DevxObj { obj_id: enc(opcode as u32 | obj_type << 16, id), dinbox });
    // From here a failure aborts the handle, which runs the destroy command.
    c.fill_new(ids::ATTR_DEVX_OBJ_CREATE_HANDLE, Uobj::Devx(obj))?;
    c.b.copy_to(ids::ATTR_DEVX_OBJ_CREATE_CMD_OUT, &out)
}

/// `MLX5_IB_METHOD_DEVX_OBJ_MODIFY`.
pub(crate) fn obj_modify(c: &mut Call<'_>) -> Result<()> {
    obj_cmd(c, ids::ATTR_DEVX_OBJ_MODIFY_HANDLE, ids::ATTR_DEVX_OBJ_MODIFY_CMD_IN, ids::ATTR_DEVX_OBJ_MODIFY_CMD_OUT,
            modify_obj_id)
}

/// `MLX5_IB_METHOD_DEVX_OBJ_QUERY`.
pub(crate) fn obj_query(c: &mut Call<'_>) -> Result<()> {
    obj_cmd(c, ids::ATTR_DEVX_OBJ_QUERY_HANDLE, ids::ATTR_DEVX_OBJ_QUERY_CMD_IN, ids::ATTR_DEVX_OBJ_QUERY_CMD_OUT,
            query_obj_id)
}

fn obj_cmd(c: &mut Call<'_>, handle: u16, in_id: u16, out_id: u16, obj_id: fn(&[u8]) -> Option<u64>) -> Result<()> {
    let mut inb = read_in(c, in_id)?;
    if vhca_tunnel_id(&inb) != 0 {
        return Err(Errno::EINVAL);
    }
    let uid = get_uid(c, &inb)?;
    let id = obj_id(&inb).ok_or(Errno::EINVAL)?;
    let obj = c.b.obj(handle).ok_or(Errno::EINVAL)?;
    if !is_valid_obj(obj, id) {
        return Err(Errno::EINVAL);
    }
    let outlen = out_len(c, out_id)?;
    set_uid(&mut inb, uid);
    if in_id == ids::ATTR_DEVX_OBJ_MODIFY_CMD_IN {
        set_umem_valid(&mut inb);
    }
    exec_copy(c, &inb, out_id, outlen).map(|_| ())
}

/// `MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY`: the answer is queued on the async command fd.
pub(crate) fn obj_async_query(c: &mut Call<'_>) -> Result<()> {
    let mut inb = read_in(c, ids::ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN)?;
    if vhca_tunnel_id(&inb) != 0 {
        return Err(Errno::EINVAL);
    }
    let uid = get_uid(c, &inb)?;
    let id = query_obj_id(&inb).ok_or(Errno::EINVAL)?;
    let outlen = c.b.get_const(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, u16::MAX as u64)?;
    let obj = c.b.obj(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE).ok_or(Errno::EINVAL)?;
    if !is_valid_obj(obj, id) {
        return Err(Errno::EINVAL);
    }
    let Some(FdObj::DevxCmd(file)) = c.b.fd_obj(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_FD).cloned() else {
        return Err(Errno::EINVAL);
    };
    if outlen > MAX_ASYNC_BYTES {
        return Err(Errno::EAGAIN);
    }
    let wr_id: u64 = c.b.copy_from(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID)?;
    set_uid(&mut inb, uid);
    let mut out = vec![0u8; outlen as usize];
    // The status is the answer's: devx_query_callback queues it whatever it is.
    let _ = c.hca.firmware().exec(&inb, &mut out);
    if !file.post(wr_id, &out) {
        return Err(Errno::ENOMEM);
    }
    Ok(())
}

/// `MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC`: the fd was made with its attribute.
pub(crate) fn async_cmd_fd_alloc(_c: &mut Call<'_>) -> Result<()> {
    Ok(())
}

/// `devx_umem_find_best_pgsize` over `ib_umem_find_best_pgoff` for memory whose DMA
/// addresses are its virtual ones (one contiguous range): the largest page size of
/// `bitmap` that the range's start and length are multiples of, down to 4 KiB.
fn best_page_size(addr: u64, len: u64, bitmap: u64) -> u64 {
    let genmask = |hi: u32, lo: u32| -> u64 {
        if hi >= 64 || lo > hi {
            return if lo >= 64 { 0 } else { u64::MAX << lo };
        }
        (u64::MAX >> (63 - hi)) & (u64::MAX << lo)
    };
    let order = 64 - (len - 1).leading_zeros();
    let mut bitmap = bitmap & genmask(order.max(12), 12);
    if bitmap == 0 {
        return 0;
    }
    // ib_umem_find_best_pgsz: no page larger than the VA bits that change over the range.
    let bits = 64 - ((addr + len - 1) ^ addr).leading_zeros();
    let mask = if bits >= 64 { 0 } else { bitmap & genmask(63, bits) };
    if mask != 0 {
        bitmap &= genmask(mask.trailing_zeros(), 0);
    }
    if bitmap == 0 {
        return 0;
    }
    let mut ps = 1u64 << (63 - bitmap.leading_zeros());
    while (addr % ps != 0 || len % ps != 0) && ps > 4096 {
        ps /= 2;
    }
    ps
}

/// `MLX5_IB_METHOD_DEVX_UMEM_REG`.
pub(crate) fn umem_reg(c: &mut Call<'_>) -> Result<()> {
    let uid = c.st.ctx()?.devx_uid;
    if uid == 0 {
        return Err(Errno::EINVAL);
    }
    let addr: u64 = c.b.copy_from(ids::ATTR_DEVX_UMEM_REG_ADDR).map_err(|_| Errno::EFAULT)?;
    let len: u64 = c.b.copy_from(ids::ATTR_DEVX_UMEM_REG_LEN).map_err(|_| Errno::EFAULT)?;
    let access = c.b.get_flags32(ids::ATTR_DEVX_UMEM_REG_ACCESS,
                                 (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ) as u64)?;
    super::mr::check_mr_access(access)?;
    // ib_umem_get: wrap and page-count checks (EINVAL), then the pin (EFAULT).
    let writable = access & (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE) != 0;
    pin(addr, len, writable)?;
    let bitmap = match c.b.get_const(ids::ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, u64::MAX) {
        Err(Errno::ENOENT) => u64::MAX << 12,
        r => r?,
    };
    let ps = best_page_size(addr, len, bitmap);
    if ps == 0 {
        return Err(Errno::EINVAL);
    }
    let first = addr & !(ps - 1);
    let end = (addr + len).div_ceil(ps) * ps;
    let n = (end - first) / ps;
    let mut inb = vec![0u8; CreateUmemIn::BYTES + n as usize * 8];
    {
        let mut v = ViewMut::<CreateUmemIn>::new(&mut inb).map_err(|_| Errno::EINVAL)?;
        v.set(CreateUmemIn::opcode, op::CREATE_UMEM).set(CreateUmemIn::uid, uid);
        v.sub_mut(CreateUmemIn::umem)
            .set(Umem::num_of_mtt, n)
            .set(Umem::log_page_size, (ps.trailing_zeros() - 12) as u8)
            .set(Umem::page_offset, (addr & (ps - 1)) as u32);
    }
    let bits = MTT_READ | if writable { MTT_WRITE } else { 0 };
    for (i, e) in inb[CreateUmemIn::BYTES..].chunks_exact_mut(8).enumerate() {
        e.copy_from_slice(&((first + i as u64 * ps) | bits).to_be_bytes());
    }
    let mut out = [0u8; 16];
    exec_kernel(c.hca, &inb, &mut out)?;
    let (dinbox, id) = build_destroy(&inb, &out, op::CREATE_UMEM);
    c.fill_new(ids::ATTR_DEVX_UMEM_REG_HANDLE, Uobj::Umem(Arc::new(DevxUmem { dinbox })))?;
    c.b.copy_to(ids::ATTR_DEVX_UMEM_REG_OUT_ID, id.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_sizes_as_the_kernel_picks_them() {
        let all = u64::MAX << 12;
        // A 2 MiB-aligned 2 MiB range: one 2 MiB page.
        assert_eq!(best_page_size(0x20_0000, 0x20_0000, all), 0x20_0000);
        // 8 KiB starting at an odd 4 KiB page: 4 KiB pages.
        assert_eq!(best_page_size(0x1000, 0x2000, all), 0x1000);
        // A range inside one page, not at its start: 4 KiB with an offset.
        assert_eq!(best_page_size(0x1040, 0x100, all), 0x1000);
        // Only 4 KiB allowed.
        assert_eq!(best_page_size(0x20_0000, 0x20_0000, 1 << 12), 0x1000);
        // No allowed size at or below the range's order.
        assert_eq!(best_page_size(0x1000, 0x1000, 1 << 30), 0);
    }

    #[test]
    fn destroy_commands_derived_from_creates() {
        let mut inb = vec![0u8; 16];
        inb[0..2].copy_from_slice(&op::CREATE_CQ.to_be_bytes());
        inb[2..4].copy_from_slice(&7u16.to_be_bytes());
        let mut out = vec![0u8; 16];
        out[9..12].copy_from_slice(&[0, 0x04, 0x01]);
        let (d, id) = build_destroy(&inb, &out, op::CREATE_CQ);
        assert_eq!(id, 0x401);
        assert_eq!(&d[..4], &[0x04, 0x01, 0, 7], "DESTROY_CQ with the creator's uid");
        assert_eq!(id_at_0x48(&d), 0x401);
    }

    #[test]
    fn flow_counter_query_names_its_alloc_object() {
        // mlx5_ifc.h: alloc_flow_counter_out.flow_counter_id at bit 0x40,
        // query_flow_counter_in.flow_counter_id at bit 0xe0.
        let mut inb = vec![0u8; 16];
        inb[0..2].copy_from_slice(&op::ALLOC_FLOW_COUNTER.to_be_bytes());
        let mut out = vec![0u8; 16];
        out[8..12].copy_from_slice(&0x1234u32.to_be_bytes());
        let (_, id) = build_destroy(&inb, &out, op::ALLOC_FLOW_COUNTER);
        let created = enc(op::ALLOC_FLOW_COUNTER as u32, id);
        let mut q = vec![0u8; 32];
        q[0..2].copy_from_slice(&op::QUERY_FLOW_COUNTER.to_be_bytes());
        q[0x1c..0x20].copy_from_slice(&0x1234u32.to_be_bytes());
        assert_eq!(query_obj_id(&q), Some(created));
        q[0x1f] = 0x35;
        assert_ne!(query_obj_id(&q), Some(created), "another counter's id");
        assert_eq!(query_obj_id(&q[..0x1e]), None, "a short inbox names nothing");
    }
}
