//! softhca's DevX driven through the ioctl bytes libmlx5's mlx5dv_devx_* calls send:
//! a context opened with the DevX flag, general commands, UMEMs, a CQ and an RC QP
//! made entirely of PRM mailboxes and moved to RTS, DEVX_OBJ_QUERY on a verbs QP, and
//! the error table (errno and PRM status for each refusal, as Linux 6.1's devx.c and a
//! ConnectX give them), then a seeded fuzzer of mailboxes through every DevX method.
//!
//! Expected values come from outside softhca: errnos from devx.c's checks and
//! mlx5_cmd_do/`cmd_status_to_err`, statuses from the PRM (`prm::cmd::status`),
//! offsets from mlx5_ifc.h (through `prm`'s tested layouts).

mod common;
use common::{hca, Buf};

use std::sync::Arc;

use nix::errno::Errno;
use prm::bits::{Layout, View, ViewMut};
use prm::cmd::cq::{CreateCqIn, Cqc, QueryCqIn, QueryCqOut};
use prm::cmd::hca_cap::{self as hc, CmdHcaCap, QueryHcaCapIn, QueryHcaCapOut};
use prm::cmd::header::{MboxIn, MboxOut};
use prm::cmd::opcode as op;
use prm::cmd::qp::{self as q, Ads, CreateQpIn, QueryQpIn, QueryQpOut, Qpc, Rst2initQpIn};
use prm::cmd::status as st;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use softhca::objects::QpState;
use softhca::Hca;
use uverbs::cmd::{context, pd};
use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::{mlx5 as ids, object};
use uverbs::sys::mlx5::{self as mlx5, AllocUcontextReqV2, AllocUcontextResp};
use uverbs::sys::verbs::ACCESS_LOCAL_WRITE;
use uverbs::Device;
use zerocopy::IntoBytes;


/// Opens a context as mlx5dv_open_device(MLX5DV_CONTEXT_FLAGS_DEVX) does (or a plain
/// one without the flag), with dynamic UARs.
fn open(h: &Arc<Hca>, devx: bool) -> Device {
    let dev = Device::from_endpoint(Box::new(h.open()), "softhca0");
    let req = AllocUcontextReqV2 {
        total_num_bfregs: 16,
        num_low_latency_bfregs: 4,
        flags: if devx { mlx5::ALLOC_UCTX_DEVX } else { 0 },
        max_cqe_version: 1,
        lib_caps: mlx5::LIB_CAP_4K_UAR | mlx5::LIB_CAP_DYN_UAR,
        ..Default::default()
    };
    let mut resp = AllocUcontextResp::default();
    context::get_context_ioctl(&dev, req.as_bytes(), resp.as_mut_bytes()).unwrap();
    dev
}

fn inbox<L: Layout>(opcode: u16, f: impl FnOnce(&mut ViewMut<'_, L>)) -> Vec<u8> {
    let mut b = vec![0u8; L::BYTES];
    ViewMut::<MboxIn>::new(&mut b).unwrap().set(MboxIn::opcode, opcode);
    f(&mut ViewMut::new(&mut b).unwrap());
    b
}

/// An inbox naming object `id` at bit 0x48, `len` bytes long.
fn with_id(opcode: u16, id: u32, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len.max(16)];
    b[..2].copy_from_slice(&opcode.to_be_bytes());
    b[9..12].copy_from_slice(&id.to_be_bytes()[1..]);
    b
}

/// The outbox's (status, syndrome); (0, 0) for a buffer too short to hold them.
fn status(out: &[u8]) -> (u8, u32) {
    match View::<MboxOut>::new(out) {
        Ok(v) => (v.get(MboxOut::status), v.get(MboxOut::syndrome)),
        Err(_) => (0, 0),
    }
}

/// The 24-bit number a create's outbox carries at bit 0x48.
fn id_of(out: &[u8]) -> u32 {
    u32::from_be_bytes([0, out[9], out[10], out[11]])
}

/// mlx5dv_devx_general_cmd.
fn other(dev: &Device, inb: &[u8], outlen: usize) -> (uverbs::Result<()>, Vec<u8>) {
    let mut out = vec![0u8; outlen];
    let mut c = Ioctl::new(object::MLX5_DEVX, ids::DEVX_OTHER);
    c.in_bytes(ids::ATTR_DEVX_OTHER_CMD_IN, inb);
    c.out_bytes(ids::ATTR_DEVX_OTHER_CMD_OUT, &mut out);
    let r = c.run(dev);
    (r, out)
}

/// mlx5dv_devx_obj_create: (result, handle, outbox).
fn create(dev: &Device, inb: &[u8], outlen: usize) -> (uverbs::Result<()>, u32, Vec<u8>) {
    let mut out = vec![0u8; outlen];
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, ids::DEVX_OBJ_CREATE);
    let h = c.new_handle(ids::ATTR_DEVX_OBJ_CREATE_HANDLE);
    c.in_bytes(ids::ATTR_DEVX_OBJ_CREATE_CMD_IN, inb);
    c.out_bytes(ids::ATTR_DEVX_OBJ_CREATE_CMD_OUT, &mut out);
    let r = c.run(dev);
    let handle = c.handle_out(h);
    (r, handle, out)
}

fn destroy(dev: &Device, handle: u32) -> uverbs::Result<()> {
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, ids::DEVX_OBJ_DESTROY);
    c.handle(ids::ATTR_DEVX_OBJ_DESTROY_HANDLE, handle);
    c.run(dev)
}

/// mlx5dv_devx_obj_modify / _query (`modify` picks the method).
fn obj_cmd(dev: &Device, modify: bool, handle: u32, inb: &[u8], outlen: usize) -> (uverbs::Result<()>, Vec<u8>) {
    let (m, hid, iid, oid) = if modify {
        (ids::DEVX_OBJ_MODIFY, ids::ATTR_DEVX_OBJ_MODIFY_HANDLE, ids::ATTR_DEVX_OBJ_MODIFY_CMD_IN, ids::ATTR_DEVX_OBJ_MODIFY_CMD_OUT)
    } else {
        (ids::DEVX_OBJ_QUERY, ids::ATTR_DEVX_OBJ_QUERY_HANDLE, ids::ATTR_DEVX_OBJ_QUERY_CMD_IN, ids::ATTR_DEVX_OBJ_QUERY_CMD_OUT)
    };
    let mut out = vec![0u8; outlen];
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, m);
    c.handle(hid, handle);
    c.in_bytes(iid, inb);
    c.out_bytes(oid, &mut out);
    let r = c.run(dev);
    (r, out)
}

/// mlx5dv_devx_umem_reg: (handle, umem id).
fn umem_reg(dev: &Device, addr: u64, len: u64, access: u32) -> uverbs::Result<(u32, u32)> {
    let mut id = 0u32;
    let mut c = Ioctl::new(object::MLX5_DEVX_UMEM, ids::DEVX_UMEM_REG);
    let h = c.new_handle(ids::ATTR_DEVX_UMEM_REG_HANDLE);
    c.in_value(ids::ATTR_DEVX_UMEM_REG_ADDR, addr);
    c.in_value(ids::ATTR_DEVX_UMEM_REG_LEN, len);
    c.in_value(ids::ATTR_DEVX_UMEM_REG_ACCESS, access);
    c.out_struct(ids::ATTR_DEVX_UMEM_REG_OUT_ID, &mut id);
    c.run(dev)?;
    Ok((c.handle_out(h), id))
}

fn umem_dereg(dev: &Device, handle: u32) -> uverbs::Result<()> {
    let mut c = Ioctl::new(object::MLX5_DEVX_UMEM, ids::DEVX_UMEM_DEREG);
    c.handle(ids::ATTR_DEVX_UMEM_DEREG_HANDLE, handle);
    c.run(dev)
}

fn query_eqn(dev: &Device, vector: u32) -> uverbs::Result<u32> {
    let mut eqn = 0u32;
    let mut c = Ioctl::new(object::MLX5_DEVX, ids::DEVX_QUERY_EQN);
    c.in_value(ids::ATTR_DEVX_QUERY_EQN_USER_VEC, vector);
    c.out_struct(ids::ATTR_DEVX_QUERY_EQN_DEV_EQN, &mut eqn);
    c.run(dev)?;
    Ok(eqn)
}

/// mlx5dv_devx_alloc_uar with dynamic UARs (UAR_OBJ_ALLOC, non-cached): the page id.
fn uar_page(dev: &Device) -> u32 {
    let (mut off, mut len, mut page) = (0u64, 0u32, 0u32);
    let mut c = Ioctl::new(object::MLX5_UAR, ids::UAR_OBJ_ALLOC);
    c.new_handle(ids::ATTR_UAR_OBJ_ALLOC_HANDLE);
    c.in_const(ids::ATTR_UAR_OBJ_ALLOC_TYPE, ids::UAR_ALLOC_TYPE_NC as u64);
    c.out_struct(ids::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &mut off);
    c.out_struct(ids::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &mut len);
    c.out_struct(ids::ATTR_UAR_OBJ_ALLOC_PAGE_ID, &mut page);
    c.run(dev).unwrap();
    page
}

/// A DevX CQ of 2^log entries in a UMEM, its doorbell record in another.
fn cq_inbox(uar: u32, eqn: u32, log: u8, ring_umem: u32, dbr_umem: u32) -> Vec<u8> {
    inbox::<CreateCqIn>(op::CREATE_CQ, |v| {
        v.set(CreateCqIn::cq_umem_id, ring_umem).set(CreateCqIn::cq_umem_offset, 0);
        v.sub_mut(CreateCqIn::cq_context)
            .set(Cqc::log_cq_size, log)
            .set(Cqc::uar_page, uar)
            .set(Cqc::c_eqn, eqn as u8)
            .set(Cqc::dbr_umem_id, dbr_umem)
            .set(Cqc::dbr_addr, 0);
    })
}

/// A DevX RC QP: 64 receive WQEs of 64 bytes, 64 send WQEBBs, in one UMEM.
fn qp_inbox(pdn: u32, cqn: u32, uar: u32, wq_umem: u32, dbr_umem: u32) -> Vec<u8> {
    inbox::<CreateQpIn>(op::CREATE_QP, |v| {
        v.set(CreateQpIn::wq_umem_id, wq_umem).set(CreateQpIn::wq_umem_offset, 0);
        v.sub_mut(CreateQpIn::qpc)
            .set(Qpc::st, q::st::RC)
            .set(Qpc::pm_state, q::pm_state::MIGRATED)
            .set(Qpc::pd, pdn)
            .set(Qpc::uar_page, uar)
            .set(Qpc::log_rq_size, 6)
            .set(Qpc::log_rq_stride, 2)
            .set(Qpc::log_sq_size, 6)
            .set(Qpc::cqn_snd, cqn)
            .set(Qpc::cqn_rcv, cqn)
            .set(Qpc::dbr_umem_id, dbr_umem)
            .set(Qpc::dbr_addr, 0);
    })
}

/// A transition inbox with the fields mlx5_ib's modify fills.
fn transition(opcode: u16, qpn: u32, remote_qpn: u32) -> Vec<u8> {
    let len = match opcode {
        op::RTS2RTS_QP => prm::cmd::qp::Rts2rtsQpIn::BYTES,
        op::QP_2ERR | op::QP_2RST => 16,
        _ => Rst2initQpIn::BYTES,
    };
    let mut b = with_id(opcode, qpn, len);
    if len >= Rst2initQpIn::BYTES {
        let mut v = ViewMut::<Rst2initQpIn>::new(&mut b).unwrap();
        let mut c = v.sub_mut(Rst2initQpIn::qpc);
        c.set(Qpc::mtu, q::mtu::MTU_1024).set(Qpc::remote_qpn, remote_qpn).set(Qpc::next_rcv_psn, 0x111)
            .set(Qpc::next_send_psn, 0x222).set(Qpc::retry_count, 7).set(Qpc::rnr_retry, 7).set(Qpc::log_rra_max, 2)
            .set(Qpc::rwe, true).set(Qpc::rre, true);
        c.sub_mut(Qpc::primary_address_path).set(Ads::vhca_port_num, 1).set(Ads::ack_timeout, 14).set(Ads::hop_limit, 64);
    }
    b
}

/// Everything one DevX RC QP needs, made through DevX.
struct DevxQp {
    _mem: Buf,
    umem_h: u32,
    cq_h: u32,
    cqn: u32,
    qp_h: u32,
    qpn: u32,
}

fn devx_qp(dev: &Device, pdn: u32) -> DevxQp {
    let mem = Buf::new(64 * 1024);
    let (umem_h, umem) = umem_reg(dev, mem.addr(), 64 * 1024, ACCESS_LOCAL_WRITE).unwrap();
    let uar = uar_page(dev);
    let eqn = query_eqn(dev, 0).unwrap();
    // Ring at 0 (16 KiB), QP WQs at 16 KiB (4 + 4 KiB), doorbell records at 48 KiB: one
    // UMEM, different offsets. The CQ's dbr offset is in dbr_addr; the create names the
    // ring's offset.
    let mut cqi = cq_inbox(uar, eqn, 8, umem, umem);
    ViewMut::<CreateCqIn>::new(&mut cqi).unwrap().sub_mut(CreateCqIn::cq_context).set(Cqc::dbr_addr, 48 * 1024);
    let (r, cq_h, out) = create(dev, &cqi, 16);
    assert_eq!(r, Ok(()), "CREATE_CQ: {:?}", status(&out));
    let cqn = id_of(&out);
    let mut qpi = qp_inbox(pdn, cqn, uar, umem, umem);
    {
        let mut v = ViewMut::<CreateQpIn>::new(&mut qpi).unwrap();
        v.set(CreateQpIn::wq_umem_offset, 16 * 1024);
        v.sub_mut(CreateQpIn::qpc).set(Qpc::dbr_addr, 48 * 1024 + 64);
    }
    let (r, qp_h, out) = create(dev, &qpi, 16);
    assert_eq!(r, Ok(()), "CREATE_QP: {:?}", status(&out));
    DevxQp { _mem: mem, umem_h, cq_h, cqn, qp_h, qpn: id_of(&out) }
}

fn alloc_pdn(dev: &Device) -> (u32, u32) {
    let mut pdn = [0u8; 4];
    let h = pd::alloc_pd(dev, &mut pdn).unwrap();
    (h, u32::from_ne_bytes(pdn))
}

#[test]
fn devx_general_command_reads_the_caps() {
    let h = hca();
    let dev = open(&h, true);
    let inb = inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, |v| {
        v.set(QueryHcaCapIn::op_mod, hc::op_mod(hc::cap_type::GENERAL, true));
    });
    let (r, out) = other(&dev, &inb, QueryHcaCapOut::BYTES);
    assert_eq!(r, Ok(()));
    let g = View::<CmdHcaCap>::new(&out[16..]).unwrap();
    assert!(g.get(CmdHcaCap::log_max_uctx) > 0, "DevX offered");
    assert!(g.get(CmdHcaCap::log_max_umem) > 0);
    assert_eq!(g.get(CmdHcaCap::log_max_qp), 18);
    // A context without DevX still reads the caps (the whitelist uid), as libmlx5's
    // fallback open does.
    let plain = open(&h, false);
    assert_eq!(other(&plain, &inb, QueryHcaCapOut::BYTES).0, Ok(()));
    assert_eq!(h.firmware().counts().uctx, 1, "the whitelist uid is not a context's");
    drop(dev);
    drop(plain);
    assert_eq!(h.firmware().counts().total(), 0);
}

#[test]
fn devx_rc_qp_to_rts_and_back() {
    let h = hca();
    let dev = open(&h, true);
    let (pd_h, pdn) = alloc_pdn(&dev);
    let x = devx_qp(&dev, pdn);
    // The device half runs the QP.
    let qp = h.qp(x.qpn).expect("the DevX QP is the device's");
    assert_eq!(qp.state(), QpState::Reset);
    assert_eq!(qp.send_cq.as_ref().map(|c| c.cqn), Some(x.cqn));
    for opc in [op::RST2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP] {
        let (r, out) = obj_cmd(&dev, true, x.qp_h, &transition(opc, x.qpn, 0x4242), 16);
        assert_eq!(r, Ok(()), "{opc:#x}: {:?}", status(&out));
    }
    let a = qp.attrs();
    assert_eq!((a.state, a.dest_qpn, a.rq_psn, a.sq_psn, a.path_mtu, a.timeout), (QpState::Rts, 0x4242, 0x111, 0x222, 3, 14));
    // QUERY_QP through DEVX_OBJ_QUERY.
    let (r, out) = obj_cmd(&dev, false, x.qp_h, &with_id(op::QUERY_QP, x.qpn, QueryQpIn::BYTES), QueryQpOut::BYTES);
    assert_eq!(r, Ok(()));
    let qpc = View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc);
    assert_eq!((qpc.get(Qpc::state), qpc.get(Qpc::remote_qpn), qpc.get(Qpc::pd)), (q::state::RTS, 0x4242, pdn));
    // QUERY_CQ on the CQ's handle.
    let (r, out) = obj_cmd(&dev, false, x.cq_h, &with_id(op::QUERY_CQ, x.cqn, QueryCqIn::BYTES), QueryCqOut::BYTES);
    assert_eq!(r, Ok(()));
    assert_eq!(View::<QueryCqOut>::new(&out).unwrap().sub(QueryCqOut::cq_context).get(Cqc::log_cq_size), 8);
    // In-use objects refuse to go: the UMEM (DEVX_UMEM_DEREG's EBUSY), the CQ under the
    // QP (RES_BUSY, which mlx5_cmd_exec makes EBUSY), the PD under the QP.
    assert_eq!(umem_dereg(&dev, x.umem_h), Err(Errno::EBUSY));
    assert_eq!(destroy(&dev, x.cq_h), Err(Errno::EBUSY));
    assert_eq!(pd::dealloc_pd_write(&dev, pd_h), Err(Errno::EBUSY));
    // 2RST, then destroy in order.
    assert_eq!(obj_cmd(&dev, true, x.qp_h, &transition(op::QP_2RST, x.qpn, 0), 16).0, Ok(()));
    assert_eq!(qp.state(), QpState::Reset);
    drop(qp);
    assert_eq!(destroy(&dev, x.qp_h), Ok(()));
    assert!(h.qp(x.qpn).is_none());
    assert_eq!(destroy(&dev, x.cq_h), Ok(()));
    assert_eq!(umem_dereg(&dev, x.umem_h), Ok(()));
    assert_eq!(pd::dealloc_pd_write(&dev, pd_h), Ok(()));
    assert_eq!(h.firmware().counts().total(), 1, "only the context's uid");
    drop(dev);
    assert_eq!(h.firmware().counts().total(), 0);
    assert_eq!(h.live_objects(), 0);
}

#[test]
fn close_destroys_devx_objects() {
    let h = hca();
    let dev = open(&h, true);
    let (_pd_h, pdn) = alloc_pdn(&dev);
    let x = devx_qp(&dev, pdn);
    assert_eq!(obj_cmd(&dev, true, x.qp_h, &transition(op::RST2INIT_QP, x.qpn, 0), 16).0, Ok(()));
    assert!(h.firmware().counts().total() >= 5);
    drop(dev);
    assert_eq!(h.firmware().counts().total(), 0, "close destroyed the DevX objects, the PD and the uid");
    assert_eq!(h.live_objects(), 0);
}

/// The ioctl's errno and the outbox's (status, syndrome).
type Got = (uverbs::Result<()>, (u8, u32));

#[test]
fn devx_error_table() {
    let h = hca();
    let dev = open(&h, true);
    let other_ctx = open(&h, true);
    let plain = open(&h, false);
    let (_pd_h, pdn) = alloc_pdn(&dev);
    let x = devx_qp(&dev, pdn);
    let cap = |op_mod: u16| inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, |v| {
        v.set(QueryHcaCapIn::op_mod, op_mod);
    });
    let st_of = |r: (uverbs::Result<()>, Vec<u8>)| -> Got { let s = status(&r.1); (r.0, s) };
    let cr = |d: &Device, inb: &[u8], outlen: usize| -> Got {
        let (r, _, out) = create(d, inb, outlen);
        (r, status(&out))
    };
    let mut long_cap = cap(hc::op_mod(hc::cap_type::GENERAL, true));
    long_cap.resize(4096, 0);
    let mut cq_short = cq_inbox(0, 0, 8, 1, 1);
    cq_short.truncate(100);
    let mut tunneled = cq_inbox(0, 0, 8, 1, 1);
    tunneled[4..6].copy_from_slice(&1u16.to_be_bytes());
    let uar = uar_page(&dev);
    let mut modify_cq = with_id(op::MODIFY_CQ, x.cqn, prm::cmd::cq::ModifyCqIn::BYTES);
    ViewMut::<prm::cmd::cq::ModifyCqIn>::new(&mut modify_cq).unwrap()
        .set(prm::cmd::cq::ModifyCqIn::modify_field_select, prm::cmd::cq::modify_select::PERIOD);
    let rows: Vec<(&str, Got, Got)> = vec![
        // devx.c's own checks: EINVAL before the firmware sees anything.
        ("OTHER of an opcode not on the general list (CREATE_CQ)",
         st_of(other(&dev, &cq_inbox(0, 0, 8, 1, 1), 16)), (Err(Errno::EINVAL), (0, 0))),
        ("OTHER of an unknown opcode 0x999", st_of(other(&dev, &with_id(0x999, 0, 16), 16)), (Err(Errno::EINVAL), (0, 0))),
        ("OBJ_CREATE of a query", cr(&dev, &with_id(op::QUERY_QP, x.qpn, 16), 16), (Err(Errno::EINVAL), (0, 0))),
        ("OBJ_CREATE with a vhca tunnel id", cr(&dev, &tunneled, 16), (Err(Errno::EINVAL), (0, 0))),
        ("OBJ_CREATE on a context without DevX", cr(&plain, &cq_inbox(0, 0, 8, 1, 1), 16), (Err(Errno::EINVAL), (0, 0))),
        ("OTHER inbox shorter than the header", st_of(other(&dev, &[0x01, 0x00, 0, 0, 0, 0, 0, 1], 16)), (Err(Errno::EINVAL), (0, 0))),
        ("OTHER outbox shorter than the header", st_of(other(&dev, &cap(1), 8)), (Err(Errno::EINVAL), (0, 0))),
        ("QUERY of another object's number (the CQ's handle, the QP's number)",
         st_of(obj_cmd(&dev, false, x.cq_h, &with_id(op::QUERY_QP, x.qpn, QueryQpIn::BYTES), QueryQpOut::BYTES)),
         (Err(Errno::EINVAL), (0, 0))),
        ("MODIFY with a command that is not a modify (QUERY_QP)",
         st_of(obj_cmd(&dev, true, x.qp_h, &with_id(op::QUERY_QP, x.qpn, QueryQpIn::BYTES), QueryQpOut::BYTES)),
         (Err(Errno::EINVAL), (0, 0))),
        // The firmware's refusals: EREMOTEIO, the status and syndrome in the outbox.
        ("QUERY_HCA_CAP of a page the device lacks (0x11)",
         st_of(other(&dev, &cap(hc::op_mod(0x11, false)), QueryHcaCapOut::BYTES)),
         (Err(Errno::EREMOTEIO), (st::BAD_PARAM_ERR, softhca::firmware::status::syndrome::BAD_OP_MOD))),
        ("QUERY_HCA_CAP outbox of 16 bytes", st_of(other(&dev, &cap(1), 16)),
         (Err(Errno::EREMOTEIO), (st::BAD_OUTP_LEN_ERR, softhca::firmware::status::syndrome::OUTBOX_LEN))),
        ("QUERY_HCA_CAP inbox of 4 KiB (longer than the command)", st_of(other(&dev, &long_cap, QueryHcaCapOut::BYTES)),
         (Ok(()), (st::OK, 0))),
        ("CREATE_CQ inbox of 100 bytes", cr(&dev, &cq_short, 16),
         (Err(Errno::EREMOTEIO), (st::BAD_INP_LEN_ERR, softhca::firmware::status::syndrome::INBOX_LEN))),
        ("CREATE_CQ log_cq_size 23", cr(&dev, &cq_inbox(uar, 0, 23, 1, 1), 16),
         (Err(Errno::EREMOTEIO), (st::BAD_PARAM_ERR, softhca::firmware::status::syndrome::CQ_SIZE))),
        ("CREATE_CQ on a UMEM that does not exist", cr(&dev, &cq_inbox(uar, 0, 8, 0xabcd, 0xabcd), 16),
         (Err(Errno::EREMOTEIO), (st::BAD_PARAM_ERR, softhca::firmware::status::syndrome::BAD_UMEM))),
        ("CREATE_DCT (a create softhca's firmware lacks)", cr(&dev, &with_id(0x710, 0, 0x100), 16),
         (Err(Errno::EREMOTEIO), (st::BAD_OP_ERR, softhca::firmware::status::syndrome::UNKNOWN_OPCODE))),
        ("CREATE_QP by another context on this context's PD and CQ",
         cr(&other_ctx, &qp_inbox(pdn, x.cqn, uar, 1, 1), 16),
         (Err(Errno::EREMOTEIO), (st::BAD_PARAM_ERR, softhca::firmware::status::syndrome::BAD_PD))),
        ("INIT2RTR of a QP in RESET", st_of(obj_cmd(&dev, true, x.qp_h, &transition(op::INIT2RTR_QP, x.qpn, 1), 16)),
         (Err(Errno::EREMOTEIO), (st::BAD_RES_STATE_ERR, softhca::firmware::status::syndrome::QP_STATE))),
        ("OTHER of an opcode in the general range softhca lacks (0xc00)", st_of(other(&dev, &with_id(0xc00, 0, 16), 16)),
         (Err(Errno::EREMOTEIO), (st::BAD_OP_ERR, softhca::firmware::status::syndrome::UNKNOWN_OPCODE))),
        ("MODIFY_CQ moderation (cq_moderation is 0)", st_of(obj_cmd(&dev, true, x.cq_h, &modify_cq, 16)),
         (Err(Errno::EREMOTEIO), (st::BAD_PARAM_ERR, softhca::firmware::status::syndrome::CQ_FEATURE))),
    ];
    for (what, got, want) in rows {
        assert_eq!(got, want, "{what}");
    }
    // Destroys of objects in use: EBUSY (RES_BUSY through mlx5_cmd_exec).
    assert_eq!(umem_dereg(&dev, x.umem_h), Err(Errno::EBUSY), "UMEM under a CQ and a QP");
    assert_eq!(destroy(&dev, x.cq_h), Err(Errno::EBUSY), "CQ under a QP");
    // Handles are the context's own: another context's handle number is not an object.
    assert_eq!(destroy(&other_ctx, x.qp_h), Err(Errno::ENOENT));
    // UMEM registration checks (devx_umem_get, ib_umem_get).
    assert_eq!(umem_reg(&plain, 0x1000, 4096, 0).unwrap_err(), Errno::EINVAL, "no DevX uid");
    assert_eq!(umem_reg(&dev, 0x1000, 4096, 1 << 5).unwrap_err(), Errno::EINVAL, "access bit not allowed");
    assert_eq!(umem_reg(&dev, 0x1000, 0, ACCESS_LOCAL_WRITE).unwrap_err(), Errno::EINVAL, "no pages");
    assert_eq!(umem_reg(&dev, 0x1000, 4096, ACCESS_LOCAL_WRITE).unwrap_err(), Errno::EFAULT, "unmapped");
    assert_eq!(query_eqn(&dev, 99), Err(Errno::ENOENT), "no such completion vector");
    // QUERY_UAR maps static-UAR contexts' bfregs; a dynamic-UAR context has none.
    let mut dev_idx = 0u32;
    let mut c = Ioctl::new(object::MLX5_DEVX, ids::DEVX_QUERY_UAR);
    c.in_value(ids::ATTR_DEVX_QUERY_UAR_USER_IDX, 0u32);
    c.out_struct(ids::ATTR_DEVX_QUERY_UAR_DEV_IDX, &mut dev_idx);
    assert_eq!(c.run(&dev), Err(Errno::EINVAL), "QUERY_UAR without static bfregs");
    // Nothing a refusal touched changed.
    drop(dev);
    drop(other_ctx);
    drop(plain);
    assert_eq!(h.firmware().counts().total(), 0, "no object left after close");
    assert_eq!(h.live_objects(), 0);
}

/// A verbs CQ (64 CQEs of 64 bytes, doorbell record at `db`) and a verbs RC QP on it
/// (64 send WQEBBs, 64 receive WQEs of 16 bytes, user index `uidx`, doorbell record at
/// `db + 64`), created with the driver data libmlx5 sends, on UAR page `uar`. The rings
/// live as long as the value.
struct VerbsRc {
    cq_h: u32,
    cqn: u32,
    qp: uverbs::cmd::qp::QpCreated,
    db: Buf,
    _ring: Buf,
    _wq: Buf,
}

fn verbs_rc(dev: &Device, pd_h: u32, uar: u32, uidx: u32) -> VerbsRc {
    use uverbs::cmd::{cq, qp};
    use uverbs::sys::mlx5::{CreateCq, CreateQp};
    use uverbs::sys::verbs::{QpCap, QPT_RC};
    let ring = Buf::new(4096 * 4);
    let db = Buf::new(4096);
    let ccmd = CreateCq {
        buf_addr: ring.addr(),
        db_addr: db.addr(),
        cqe_size: 64,
        flags: mlx5::CREATE_CQ_FLAGS_UAR_PAGE_INDEX,
        uar_page_index: uar as u16,
        ..Default::default()
    };
    let mut cq_out = [0u8; 8];
    let (cq_h, _) = cq::create_cq_ioctl(dev, &cq::CqArgs { cqe: 63, ..Default::default() }, ccmd.as_bytes(), &mut cq_out).unwrap();
    let cqn = u32::from_ne_bytes(cq_out[..4].try_into().unwrap());
    let wq = Buf::new(4096 * 8);
    let qcmd = CreateQp {
        buf_addr: wq.addr(),
        db_addr: db.addr() + 64,
        sq_wqe_count: 64,
        rq_wqe_count: 64,
        rq_wqe_shift: 4,
        flags: mlx5::QP_FLAG_UAR_PAGE_INDEX,
        bfreg_index: uar,
        uidx,
        ..Default::default()
    };
    let cap = QpCap { max_send_wr: 16, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qargs = qp::QpArgs { qp_type: QPT_RC, pd: pd_h, send_cq: cq_h, recv_cq: cq_h, cap, ..Default::default() };
    let qp = qp::create_qp_ioctl(dev, &qargs, qcmd.as_bytes(), &mut [0u8; 32]).unwrap();
    VerbsRc { cq_h, cqn, qp, db, _ring: ring, _wq: wq }
}

#[test]
fn devx_query_on_a_verbs_qp() {
    use uverbs::cmd::{cq, qp};
    let h = hca();
    let dev = open(&h, true);
    let (pd_h, _pdn) = alloc_pdn(&dev);
    let uar = uar_page(&dev);
    let v = verbs_rc(&dev, pd_h, uar, 5);
    let (cq_h, cqn, qr, db) = (v.cq_h, v.cqn, &v.qp, &v.db);
    // DEVX_OBJ_QUERY with QUERY_QP on the verbs QP's handle.
    let (r, out) = obj_cmd(&dev, false, qr.handle, &with_id(op::QUERY_QP, qr.qpn, QueryQpIn::BYTES), QueryQpOut::BYTES);
    assert_eq!(r, Ok(()), "{:?}", status(&out));
    let qpc = View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc);
    assert_eq!((qpc.get(Qpc::state), qpc.get(Qpc::st), qpc.get(Qpc::cqn_snd)), (q::state::RST, q::st::RC, cqn));
    // The verbs' CREATE_QP was the firmware's: its context is what create_user_qp and
    // create_qp_common write from the verbs' arguments (ilog2 of the WQE counts, the
    // RQ stride as wqe_shift - 4, pm_state MIGRATED, the user index of CQE version 1).
    assert_eq!((qpc.get(Qpc::pd), qpc.get(Qpc::cqn_rcv), qpc.get(Qpc::uar_page)), (_pdn, cqn, uar));
    assert_eq!((qpc.get(Qpc::log_sq_size), qpc.get(Qpc::log_rq_size), qpc.get(Qpc::log_rq_stride)), (6, 6, 0));
    assert_eq!((qpc.get(Qpc::no_sq), qpc.get(Qpc::rq_type)), (false, 0));
    assert_eq!((qpc.get(Qpc::pm_state), qpc.get(Qpc::user_index)), (q::pm_state::MIGRATED, 5));
    assert_eq!((qpc.get(Qpc::dbr_addr), qpc.get(Qpc::log_page_size), qpc.get(Qpc::page_offset)), (db.addr() + 64, 0, 0));
    assert_eq!(h.firmware().counts().qp, 1, "one firmware QP, not a copy");
    // A raw DESTROY_QP through DEVX_OTHER: no general command (devx.c), EINVAL; a
    // DEVX_OBJ_DESTROY needs a DevX object's handle, which a verbs QP is not.
    let (r, _) = other(&dev, &with_id(op::DESTROY_QP, qr.qpn, prm::cmd::qp::DestroyQpIn::BYTES), 16);
    assert_eq!(r, Err(Errno::EINVAL));
    assert_eq!(destroy(&dev, qr.handle), Err(Errno::EINVAL));
    assert_eq!(h.firmware().counts().qp, 1);
    // QUERY_CQ on the verbs CQ.
    let (r, out) = obj_cmd(&dev, false, cq_h, &with_id(op::QUERY_CQ, cqn, QueryCqIn::BYTES), QueryCqOut::BYTES);
    assert_eq!(r, Ok(()));
    assert_eq!(View::<QueryCqOut>::new(&out).unwrap().sub(QueryCqOut::cq_context).get(Cqc::log_cq_size), 6);
    // DevX may move a verbs QP (as mlx5dv's LAG and UDP-port helpers do), and the verbs
    // then see the firmware's state.
    let (r, out) = obj_cmd(&dev, true, qr.handle, &transition(op::RST2INIT_QP, qr.qpn, 0), 16);
    assert_eq!(r, Ok(()), "{:?}", status(&out));
    assert_eq!(h.qp(qr.qpn).unwrap().state(), QpState::Init);
    let (r, out) = obj_cmd(&dev, true, qr.handle, &transition(op::RTR2RTS_QP, qr.qpn, 0), 16);
    assert_eq!((r, status(&out).0), (Err(Errno::EREMOTEIO), st::BAD_RES_STATE_ERR), "INIT has no RTR2RTS");
    // The verbs' destroy is the firmware's 2RST + DESTROY_QP, and then the CQ's
    // DESTROY_CQ has no user left.
    qp::destroy_qp_ioctl(&dev, qr.handle).unwrap();
    assert_eq!(h.firmware().counts().qp, 0);
    assert!(h.qp(qr.qpn).is_none());
    cq::destroy_cq_ioctl(&dev, cq_h).unwrap();
    assert_eq!(h.firmware().counts().cq, 0);
    drop(dev);
    assert_eq!(h.firmware().counts().total(), 0);
}

/// The verbs' CREATE_CQ is the firmware's CREATE_CQ (mlx5_ib's `create_cq_user` +
/// `mlx5_ib_create_cq`): the firmware holds the CQ from the verbs' create to their
/// destroy, and its context is the one mlx5_ib writes from the verbs' arguments: the
/// CQE size and count asked for, the UAR page given, the EQ DEVX_QUERY_EQN names for
/// the vector, the doorbell record's address and the ring's page list (4 KiB pages).
#[test]
fn verbs_cq_is_the_firmware_cq() {
    use uverbs::cmd::cq;
    use uverbs::sys::mlx5::CreateCq;
    let h = hca();
    let dev = open(&h, true);
    let uar = uar_page(&dev);
    let ring = Buf::new(4096 * 4);
    let db = Buf::new(4096);
    let eqn = query_eqn(&dev, 1).unwrap();
    for (cqe, cqe_size, log, sz) in [(63u32, 64u32, 6u8, 0u8), (100, 128, 7, 1)] {
        let ccmd = CreateCq {
            buf_addr: ring.addr(),
            db_addr: db.addr() + 8,
            cqe_size,
            flags: mlx5::CREATE_CQ_FLAGS_UAR_PAGE_INDEX,
            uar_page_index: uar as u16,
            ..Default::default()
        };
        let before = h.firmware().counts().cq;
        let mut cq_out = [0u8; 8];
        let args = cq::CqArgs { cqe, comp_vector: 1, ..Default::default() };
        let (cq_h, resp_cqe) = cq::create_cq_ioctl(&dev, &args, ccmd.as_bytes(), &mut cq_out).unwrap();
        // ibv_create_cq's answer: entries rounded up to a power of two, less one.
        assert_eq!(resp_cqe, (1u32 << log) - 1);
        let cqn = u32::from_ne_bytes(cq_out[..4].try_into().unwrap());
        assert_eq!(h.firmware().counts().cq, before + 1, "one firmware CQ, not a copy");
        let (r, out) = obj_cmd(&dev, false, cq_h, &with_id(op::QUERY_CQ, cqn, QueryCqIn::BYTES), QueryCqOut::BYTES);
        assert_eq!(r, Ok(()), "{:?}", status(&out));
        let cqc = View::<QueryCqOut>::new(&out).unwrap().sub(QueryCqOut::cq_context);
        // mlx5_ifc.h's cqe_sz: 0 is 64 bytes, 1 is 128.
        assert_eq!((cqc.get(Cqc::log_cq_size), cqc.get(Cqc::cqe_sz)), (log, sz));
        assert_eq!((cqc.get(Cqc::uar_page), cqc.get(Cqc::c_eqn) as u32), (uar, eqn));
        assert_eq!(cqc.get(Cqc::dbr_addr), db.addr() + 8);
        assert_eq!((cqc.get(Cqc::log_page_size), cqc.get(Cqc::page_offset)), (0, 0));
        // A raw DESTROY_CQ through DEVX_OTHER is no general command (devx.c): EINVAL,
        // and the CQ stays.
        let (r, _) = other(&dev, &with_id(op::DESTROY_CQ, cqn, prm::cmd::cq::DestroyCqIn::BYTES), 16);
        assert_eq!(r, Err(Errno::EINVAL));
        assert_eq!(h.firmware().counts().cq, before + 1);
        // The verbs' destroy is the firmware's DESTROY_CQ.
        cq::destroy_cq_ioctl(&dev, cq_h).unwrap();
        assert_eq!(h.firmware().counts().cq, before);
        assert!(h.cq(cqn).is_none());
    }
    // A UAR index that is no UAR page: mlx5_ib passes it on, the firmware refuses
    // (BAD_PARAM), and mlx5_cmd_check makes that EINVAL.
    let ccmd = CreateCq {
        buf_addr: ring.addr(),
        db_addr: db.addr(),
        cqe_size: 64,
        flags: mlx5::CREATE_CQ_FLAGS_UAR_PAGE_INDEX,
        uar_page_index: 0xfff0,
        ..Default::default()
    };
    let mut cq_out = [0u8; 8];
    let r = cq::create_cq_ioctl(&dev, &cq::CqArgs { cqe: 7, ..Default::default() }, ccmd.as_bytes(), &mut cq_out);
    assert_eq!(r.err(), Some(Errno::EINVAL));
    drop(dev);
    assert_eq!(h.firmware().counts().total(), 0);
    assert_eq!(h.live_objects(), 0);
}

/// The verbs' MODIFY_QP is the firmware's transition command: after ibv_modify_qp to
/// RTS, DEVX_OBJ_QUERY's QUERY_QP answers the values the verbs set, in the encodings
/// mlx5_ib's `__mlx5_ib_modify_qp` writes (log2 of the rounded-up RDMA depths, the
/// 3-bit retry counts, the path's GID index, hop limit and traffic class); a DevX 2ERR
/// then moves the verbs QP, and the verbs' RESET is the firmware's 2RST.
#[test]
fn verbs_modify_is_the_firmware_transition() {
    use uverbs::cmd::qp;
    use uverbs::sys::verbs::{qp_attr, qp_state, ModifyQp, QpDest, ACCESS_REMOTE_ATOMIC,
                             ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};
    let h = hca();
    let dev = open(&h, true);
    let (pd_h, _) = alloc_pdn(&dev);
    let uar = uar_page(&dev);
    let v = verbs_rc(&dev, pd_h, uar, 1);
    let qr = &v.qp;
    let base = |mask: u32, state: u8| ModifyQp { qp_handle: qr.handle, attr_mask: mask | qp_attr::STATE, qp_state: state,
                                                 ..Default::default() };
    let mut m = base(qp_attr::PKEY_INDEX | qp_attr::PORT | qp_attr::ACCESS_FLAGS, qp_state::INIT);
    m.port_num = 1;
    m.qp_access_flags = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;
    qp::modify_qp(&dev, &m).unwrap();
    let dgid = h.config().ip_gid();
    let mut m = base(qp_attr::AV | qp_attr::PATH_MTU | qp_attr::DEST_QPN | qp_attr::RQ_PSN | qp_attr::MAX_DEST_RD_ATOMIC
                     | qp_attr::MIN_RNR_TIMER, qp_state::RTR);
    m.path_mtu = 3;
    m.dest_qp_num = 0x1234;
    m.rq_psn = 0xab_cdef;
    m.max_dest_rd_atomic = 3;
    m.min_rnr_timer = 12;
    m.dest = QpDest { dgid, sgid_index: softhca::config::IP_GID_INDEX, hop_limit: 64, traffic_class: 8, is_global: 1, port_num: 1, ..Default::default() };
    qp::modify_qp(&dev, &m).unwrap();
    let mut m = base(qp_attr::TIMEOUT | qp_attr::RETRY_CNT | qp_attr::RNR_RETRY | qp_attr::SQ_PSN | qp_attr::MAX_QP_RD_ATOMIC,
                     qp_state::RTS);
    m.timeout = 14;
    m.retry_cnt = 7;
    m.rnr_retry = 9;
    m.sq_psn = 0x12_3456;
    m.max_rd_atomic = 2;
    qp::modify_qp(&dev, &m).unwrap();
    let query = with_id(op::QUERY_QP, qr.qpn, QueryQpIn::BYTES);
    let (r, out) = obj_cmd(&dev, false, qr.handle, &query, QueryQpOut::BYTES);
    assert_eq!(r, Ok(()), "{:?}", status(&out));
    let qpc = View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc);
    assert_eq!(qpc.get(Qpc::state), q::state::RTS);
    assert_eq!((qpc.get(Qpc::mtu), qpc.get(Qpc::remote_qpn), qpc.get(Qpc::next_rcv_psn), qpc.get(Qpc::next_send_psn)),
               (3, 0x1234, 0xab_cdef, 0x12_3456));
    // max_dest_rd_atomic 3 -> 4 responder resources (log 2), max_rd_atomic 2 (log 1).
    assert_eq!((qpc.get(Qpc::log_rra_max), qpc.get(Qpc::log_sra_max), qpc.get(Qpc::min_rnr_nak)), (2, 1, 12));
    assert_eq!((qpc.get(Qpc::retry_count), qpc.get(Qpc::rnr_retry)), (7, 9 & 7));
    assert_eq!((qpc.get(Qpc::rre), qpc.get(Qpc::rwe), qpc.get(Qpc::rae)), (true, true, true));
    let path = qpc.sub(Qpc::primary_address_path);
    assert_eq!((path.get(Ads::ack_timeout), path.get(Ads::vhca_port_num), path.get(Ads::src_addr_index)), (14, 1, softhca::config::IP_GID_INDEX));
    assert_eq!((path.get(Ads::hop_limit), path.get(Ads::tclass)), (64, 8));
    assert_eq!(&path.bytes(Ads::rgid_rip)[..16], &dgid[..]);
    // mlx5_set_path's UDP source port: no flow label, so from the QPN pair
    // (rdma_get_udp_sport; the formula is checked against the kernel's in wire_scapy).
    let sport = softhca::wire::udp_sport::udp_sport(0, qr.qpn, 0x1234);
    assert_eq!(path.get(Ads::udp_sport), sport);
    assert_eq!(h.qp(qr.qpn).unwrap().attrs().av.udp_sport, sport);
    // mlx5dv_modify_qp_udp_sport's command (rdma-core providers/mlx5/mlx5.c): RTS2RTS_QP
    // with MLX5_QPC_OPT_MASK_32_UDP_SPORT in opt_param_mask_95_32 and the new port in
    // the path; without the bit the port in the inbox is ignored.
    use prm::cmd::qp::Rts2rtsQpIn;
    let rts2rts = |port: u16, flag: u64| {
        let mut b = vec![0u8; Rts2rtsQpIn::BYTES];
        let mut v = ViewMut::<Rts2rtsQpIn>::new(&mut b).unwrap();
        v.set(Rts2rtsQpIn::opcode, op::RTS2RTS_QP).set(Rts2rtsQpIn::qpn, qr.qpn).set(Rts2rtsQpIn::opt_param_mask_95_32, flag);
        v.sub_mut(Rts2rtsQpIn::qpc).sub_mut(Qpc::primary_address_path).set(Ads::udp_sport, port);
        let (r, out) = obj_cmd(&dev, true, qr.handle, &b, prm::cmd::qp::Rts2rtsQpOut::BYTES);
        assert_eq!(r, Ok(()), "{:?}", status(&out));
        let (_, out) = obj_cmd(&dev, false, qr.handle, &query, QueryQpOut::BYTES);
        View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc).sub(Qpc::primary_address_path).get(Ads::udp_sport)
    };
    assert_eq!(rts2rts(0xd00d, 0), sport, "no UDP_SPORT bit");
    assert_eq!(rts2rts(0xd00d, 1 << 2), 0xd00d);
    assert_eq!(h.qp(qr.qpn).unwrap().attrs().av.udp_sport, 0xd00d, "the device sends from it");
    // Everything in RTS2RTS is optional: the zeros of the rest of that inbox changed nothing.
    let (_, out) = obj_cmd(&dev, false, qr.handle, &query, QueryQpOut::BYTES);
    let qpc = View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc);
    assert_eq!((qpc.get(Qpc::retry_count), qpc.get(Qpc::rnr_retry), qpc.get(Qpc::log_sra_max), qpc.get(Qpc::min_rnr_nak)),
               (7, 9 & 7, 1, 12));
    assert_eq!(qpc.sub(Qpc::primary_address_path).get(Ads::ack_timeout), 14);
    // DevX moves the verbs QP to ERR; the verbs see it.
    let mut e = vec![0u8; prm::cmd::qp::Qp2errIn::BYTES];
    ViewMut::<prm::cmd::qp::Qp2errIn>::new(&mut e).unwrap().set(prm::cmd::qp::Qp2errIn::opcode, op::QP_2ERR)
        .set(prm::cmd::qp::Qp2errIn::qpn, qr.qpn);
    let (r, out) = obj_cmd(&dev, true, qr.handle, &e, 16);
    assert_eq!(r, Ok(()), "{:?}", status(&out));
    assert_eq!(qp::query_qp(&dev, qr.handle, 0).unwrap().qp_state, qp_state::ERR);
    // The verbs' RESET: the firmware's 2RST.
    qp::modify_qp(&dev, &base(0, qp_state::RESET)).unwrap();
    let (_, out) = obj_cmd(&dev, false, qr.handle, &query, QueryQpOut::BYTES);
    assert_eq!(View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc).get(Qpc::state), q::state::RST);
    assert_eq!(h.qp(qr.qpn).unwrap().state(), QpState::Reset);
    drop(dev);
    assert_eq!(h.firmware().counts().total(), 0);
}

#[test]
fn devx_async_query_answers_on_the_cmd_fd() {
    let h = hca();
    let dev = open(&h, true);
    let (_pd_h, pdn) = alloc_pdn(&dev);
    let x = devx_qp(&dev, pdn);
    let mut c = Ioctl::new(object::MLX5_DEVX_ASYNC_CMD_FD, ids::DEVX_ASYNC_CMD_FD_ALLOC);
    let fi = c.new_fd(ids::ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE);
    c.run(&dev).unwrap();
    let fd = c.fd_out(fi);
    let query = with_id(op::QUERY_QP, x.qpn, QueryQpIn::BYTES);
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, ids::DEVX_OBJ_ASYNC_QUERY);
    c.handle(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, x.qp_h);
    c.in_bytes(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, &query);
    c.in_const(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, QueryQpOut::BYTES as u64);
    c.fd(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_FD, fd);
    c.in_value(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, 0xfeed_u64);
    assert_eq!(c.run(&dev), Ok(()));
    // One record: struct mlx5_ib_uapi_devx_async_cmd_hdr (wr_id) and the outbox.
    let mut rec = vec![0u8; 8 + QueryQpOut::BYTES + 64];
    let n = nix::unistd::read(fd, &mut rec).unwrap();
    assert_eq!(n, 8 + QueryQpOut::BYTES);
    assert_eq!(u64::from_ne_bytes(rec[..8].try_into().unwrap()), 0xfeed);
    assert_eq!(status(&rec[8..]), (st::OK, 0));
    let qpc = View::<QueryQpOut>::new(&rec[8..]).unwrap().sub(QueryQpOut::qpc);
    assert_eq!((qpc.get(Qpc::state), qpc.get(Qpc::pd)), (q::state::RST, pdn));
    // Another object's number on this handle: EINVAL, nothing queued.
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, ids::DEVX_OBJ_ASYNC_QUERY);
    c.handle(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, x.cq_h);
    c.in_bytes(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, &query);
    c.in_const(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, QueryQpOut::BYTES as u64);
    c.fd(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_FD, fd);
    c.in_value(ids::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, 1u64);
    assert_eq!(c.run(&dev), Err(Errno::EINVAL));
    let _ = nix::unistd::close(fd);
}

/// Random and mutated mailboxes through every DevX method of two contexts: no panic,
/// every answer either a success or an errno with (for EREMOTEIO) a failure status, and
/// nothing left in the firmware once both contexts are closed.
#[test]
fn devx_fuzz_100k_mailboxes() {
    let h = hca();
    let seed = 0xdef_5eed_u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    let devs = [open(&h, true), open(&h, true)];
    let mems: Vec<Buf> = (0..2).map(|_| Buf::new(64 * 1024)).collect();
    let mut umems = Vec::new();
    let mut pdns = Vec::new();
    for (d, m) in devs.iter().zip(&mems) {
        umems.push(umem_reg(d, m.addr(), 64 * 1024, ACCESS_LOCAL_WRITE).unwrap().1);
        pdns.push(alloc_pdn(d).1);
    }
    let uars: Vec<u32> = devs.iter().map(uar_page).collect();
    let mut handles: Vec<Vec<(u32, u16, u32)>> = vec![Vec::new(), Vec::new()];
    let mut n_ok = 0usize;
    let mut created = [0usize; 2];
    for i in 0..100_000 {
        let k = rng.gen_range(0..2usize);
        let dev = &devs[k];
        let (umem, pdn, uar) = (umems[rng.gen_range(0..2)], pdns[rng.gen_range(0..2)], uars[k]);
        let known_cq = handles[k].iter().filter(|e| e.1 == op::CREATE_CQ).map(|e| e.2).next().unwrap_or(0x400);
        let known_qp = handles[k].iter().filter(|e| e.1 == op::CREATE_QP).map(|e| e.2).next().unwrap_or(0x108);
        let mut inb = match rng.gen_range(0..8) {
            0 => inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, |v| {
                v.set(QueryHcaCapIn::op_mod, rng.gen_range(0..0x50));
            }),
            1 => {
                let mut b = cq_inbox(uar, 3, rng.gen_range(0..10), umem, umem);
                ViewMut::<CreateCqIn>::new(&mut b).unwrap().sub_mut(CreateCqIn::cq_context).set(Cqc::dbr_addr, 60 * 1024);
                b
            }
            2 => {
                let mut b = qp_inbox(pdn, known_cq, uar, umem, umem);
                ViewMut::<CreateQpIn>::new(&mut b).unwrap().sub_mut(CreateQpIn::qpc).set(Qpc::dbr_addr, 60 * 1024 + 64);
                b
            }
            3 => {
                let ops = [op::RST2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP, op::RTS2RTS_QP, op::QP_2ERR, op::QP_2RST];
                transition(ops[rng.gen_range(0..ops.len())], known_qp, rng.gen::<u32>() & 0xff_ffff)
            }
            4 => with_id(op::QUERY_QP, known_qp, QueryQpIn::BYTES),
            5 => with_id(op::QUERY_CQ, known_cq, QueryCqIn::BYTES),
            6 => inbox::<MboxIn>(op::ALLOC_PD, |_| {}),
            _ => (0..rng.gen_range(0..0x300)).map(|_| rng.gen()).collect(),
        };
        // Mutations: flipped bits, random bytes, truncation, extension, another opcode.
        for _ in 0..rng.gen_range(0..4) {
            match rng.gen_range(0..5) {
                0 if !inb.is_empty() => {
                    let j = rng.gen_range(0..inb.len());
                    inb[j] ^= 1 << rng.gen_range(0..8);
                }
                1 if !inb.is_empty() => {
                    let j = rng.gen_range(0..inb.len());
                    inb[j] = rng.gen();
                }
                2 => inb.truncate(rng.gen_range(0..=inb.len())),
                3 => inb.extend((0..rng.gen_range(0..64)).map(|_| rng.gen::<u8>())),
                _ if inb.len() >= 2 => inb[..2].copy_from_slice(&rng.gen_range(0..0xb10u16).to_be_bytes()),
                _ => {}
            }
        }
        let outlen = if rng.gen_ratio(1, 20) { rng.gen_range(0..0x1100) } else { 0x1100 };
        let handle = if handles[k].is_empty() || rng.gen_ratio(1, 8) {
            rng.gen_range(0..64)
        } else {
            handles[k][rng.gen_range(0..handles[k].len())].0
        };
        let (r, out) = match rng.gen_range(0..5) {
            0 => other(dev, &inb, outlen),
            1 | 2 => {
                let (r, hh, out) = create(dev, &inb, outlen);
                if r.is_ok() {
                    let opcode = u16::from_be_bytes([inb[0], inb[1]]);
                    handles[k].push((hh, opcode, id_of(&out)));
                    created[usize::from(opcode == op::CREATE_QP)] += usize::from(matches!(opcode, op::CREATE_CQ | op::CREATE_QP));
                }
                (r, out)
            }
            3 => obj_cmd(dev, rng.gen_bool(0.5), handle, &inb, outlen),
            _ => {
                // A destroy, now and then, of a random handle.
                let r = destroy(dev, handle);
                if r.is_ok() {
                    handles[k].retain(|e| e.0 != handle);
                }
                (r, vec![0u8; 16])
            }
        };
        match r {
            Ok(()) => n_ok += 1,
            Err(Errno::EREMOTEIO) => {
                assert!(out.len() >= 16 && out[0] != st::OK, "iteration {i} (seed {seed:#x}): EREMOTEIO with a status")
            }
            Err(e) => assert!(
                [Errno::EINVAL, Errno::EBUSY, Errno::ENOENT, Errno::EFAULT, Errno::EOPNOTSUPP, Errno::EAGAIN, Errno::ENOMEM]
                    .contains(&e),
                "iteration {i}: unexpected {e}"
            ),
        }
        if handles[k].len() > 200 {
            // Keep the population bounded: destroy the newest (users go first).
            while let Some((hh, _, _)) = handles[k].pop() {
                let _ = destroy(dev, hh);
                if handles[k].len() < 100 {
                    break;
                }
            }
        }
    }
    assert!(n_ok > 5_000, "the fuzzer reached the firmware ({n_ok} succeeded)");
    assert!(created[0] > 100 && created[1] > 20, "CQs and QPs were made: {created:?}");
    drop(devs);
    let left = h.firmware().counts();
    assert_eq!(left.total(), 0, "seed {seed:#x}: nothing left after close: {left:?}");
    assert_eq!(h.live_objects(), 0);
}

/// A DevX SRQ (CREATE_SRQ with its buffer as a page list, as an ISSI 0 device takes
/// it): QUERY_SRQ through the handle reads the context back (devx.c encodes its object
/// as CREATE_SRQ's); ARM_RQ through it is EINVAL (devx.c names ARM_RQ's object as an
/// RQ's, so no SRQ handle matches: Linux's own answer); the destroy devx.c derives is
/// DESTROY_SRQ, so the firmware's SRQ goes with the handle and with close.
#[test]
fn devx_srq_create_query_destroy() {
    use prm::cmd::srq::{CreateSrqIn, QuerySrqOut, Srqc};
    let h = hca();
    let dev = open(&h, true);
    let (_pd_h, pdn) = alloc_pdn(&dev);
    let mem = Buf::new(8192);
    let mut inb = vec![0u8; CreateSrqIn::BYTES + 16];
    {
        let mut v = ViewMut::<CreateSrqIn>::new(&mut inb).unwrap();
        v.set(CreateSrqIn::opcode, op::CREATE_SRQ);
        v.sub_mut(CreateSrqIn::srq_context_entry)
            .set(Srqc::log_srq_size, 6)
            .set(Srqc::log_rq_stride, 1)
            .set(Srqc::pd, pdn)
            .set(Srqc::dbr_addr, mem.addr() + 4096);
    }
    // 64 WQEs of 32 bytes in the first page; the page list names both pages.
    inb[CreateSrqIn::BYTES..CreateSrqIn::BYTES + 8].copy_from_slice(&mem.addr().to_be_bytes());
    inb[CreateSrqIn::BYTES + 8..].copy_from_slice(&(mem.addr() + 4096).to_be_bytes());
    let (r, srq_h, out) = create(&dev, &inb, 16);
    assert_eq!(r, Ok(()), "CREATE_SRQ: {:?}", status(&out));
    let srqn = id_of(&out);
    assert_eq!(h.firmware().counts().srq, 1);

    let (r, out) = obj_cmd(&dev, false, srq_h, &with_id(op::QUERY_SRQ, srqn, 16), QuerySrqOut::BYTES);
    assert_eq!(r, Ok(()), "QUERY_SRQ: {:?}", status(&out));
    let v = View::<QuerySrqOut>::new(&out).unwrap();
    let c = v.sub(QuerySrqOut::srq_context_entry);
    assert_eq!((c.get(Srqc::log_srq_size), c.get(Srqc::log_rq_stride), c.get(Srqc::pd)), (6, 1, pdn));
    assert_eq!(obj_cmd(&dev, false, srq_h, &with_id(op::QUERY_SRQ, srqn + 1, 16), QuerySrqOut::BYTES).0,
               Err(Errno::EINVAL), "another SRQ's number");
    let mut arm = with_id(op::ARM_RQ, srqn, 16);
    arm[6..8].copy_from_slice(&1u16.to_be_bytes());
    assert_eq!(obj_cmd(&dev, true, srq_h, &arm, 16).0, Err(Errno::EINVAL), "ARM_RQ names an RQ in devx.c");

    assert_eq!(destroy(&dev, srq_h), Ok(()));
    assert_eq!(h.firmware().counts().srq, 0);
    let (r, _srq_h, out) = create(&dev, &inb, 16);
    assert_eq!(r, Ok(()), "CREATE_SRQ again: {:?}", status(&out));
    drop(dev);
    assert_eq!(h.firmware().counts().total(), 0, "close destroyed the SRQ");
    assert_eq!(h.live_objects(), 0);
}
