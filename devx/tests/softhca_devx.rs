//! DevX end to end on softhca, through this crate's safe API: the context is granted
//! DevX, capability pages agree with what the verbs queries of the same device say,
//! UMEMs refuse deregistration while in use, the errors of the kernel's checks and of
//! the firmware come back as Linux and a ConnectX give them, and QUERY_QP answers for
//! a QP made by `ibv_create_qp`.
//!
//! Expected values come from outside the code under test: the verbs answers
//! (QUERY_DEVICE, QUERY_PORT, GET_CONTEXT) of the same device, Linux's DevX
//! (`drivers/infiniband/hw/mlx5/devx.c`: a command off its lists is EINVAL, a
//! mailbox under the header's 16 bytes fails the attribute's minimum size, EINVAL,
//! a firmware failure is EREMOTEIO with the outbox) and the PRM status table.

#[path = "../../softhca/tests/common/mod.rs"]
mod common;

use common::{connect, Host, Opts};
use devx::cmd::cq::{create_cq_in, CqParams, UmemRef};
use devx::cmd::outbox;
use devx::cmd::qp::{query_qp_in, queried_qpc};
use devx::umem::access;
use devx::{DevxContext, Error};
use nix::errno::Errno;
use prm::cmd::cq::CreateCqOut;
use prm::cmd::hca_cap::{cap_type, CmdHcaCap};
use prm::cmd::qp::{state, Qpc, QueryQpOut};
use prm::cmd::status;

fn devx_on(h: &Host) -> DevxContext {
    DevxContext::new(h.ctx.clone()).expect("softhca grants DevX (GET_CONTEXT accepts the DEVX flag)")
}

#[test]
fn caps_agree_with_the_verbs_queries() {
    let h = Host::new([127, 61, 0, 1]);
    let d = devx_on(&h);
    let g = d.query_hca_cap(cap_type::GENERAL, false).unwrap();
    let g = g.view::<CmdHcaCap>().unwrap();
    let attr = h.ctx.device_attr().base;
    let port = h.ctx.query_port(1).unwrap().legacy_resp;
    assert_eq!(g.get(CmdHcaCap::num_ports), attr.phys_port_cnt);
    assert!(1u64 << g.get(CmdHcaCap::log_max_qp) >= attr.max_qp as u64);
    assert!(1u64 << g.get(CmdHcaCap::log_max_qp_sz) >= attr.max_qp_wr as u64);
    assert!(1u64 << g.get(CmdHcaCap::log_max_cq_sz) >= attr.max_cqe as u64);
    assert_eq!(g.get(CmdHcaCap::gid_table_size) as u32, port.gid_tbl_len);
    // Every completion vector's EQ (DEVX_QUERY_EQN, the kernel's mlx5_vector2eqn) is one
    // the device says it has.
    for v in 0..h.ctx.num_comp_vectors() {
        let eqn = d.query_eqn(v).unwrap();
        assert!(eqn < 1 << g.get(CmdHcaCap::log_max_eq), "vector {v}: EQ {eqn}, log_max_eq {}", g.get(CmdHcaCap::log_max_eq));
    }
    assert_eq!(g.get(CmdHcaCap::cqe_version), h.ctx.ucontext().cqe_version);
    assert!(g.get(CmdHcaCap::rc) && g.get(CmdHcaCap::ud) && g.get(CmdHcaCap::roce));
    // The current values are a page too.
    d.query_hca_cap(cap_type::GENERAL, true).unwrap();
}

#[test]
fn a_umem_in_use_refuses_deregistration() {
    let h = Host::new([127, 61, 0, 2]);
    let d = devx_on(&h);
    let uar = d.alloc_uar(false).unwrap();
    let eqn = d.query_eqn(0).unwrap();
    let buf = d.reg_umem(64 * 64, access::LOCAL_WRITE).unwrap();
    let dbr = d.reg_umem(64, access::LOCAL_WRITE).unwrap();
    let mut out = outbox::<CreateCqOut>();
    let cq = d.create_obj(&create_cq_in(&CqParams { log_cq_size: 6, cqe_128: false, uar_page: uar.page_id(),
        c_eqn: eqn as u8, buf: UmemRef { id: buf.id(), offset: 0 }, dbr: UmemRef { id: dbr.id(), offset: 0 } }), &mut out)
        .unwrap();
    assert_ne!(cq.id(), 0);
    let (buf, e) = buf.dereg().expect_err("the CQ still names the UMEM");
    assert_eq!(e.errno(), Some(Errno::EBUSY), "{e}");
    drop(cq);
    buf.dereg().map_err(|(_, e)| e).expect("free once the CQ is gone");
    dbr.dereg().map_err(|(_, e)| e).unwrap();
}

fn os_errno(r: devx::Result<()>) -> Errno {
    match r {
        Err(Error::Os { errno, .. }) => errno,
        other => panic!("wanted a kernel errno, got {other:?}"),
    }
}

#[test]
fn error_table() {
    let h = Host::new([127, 61, 0, 3]);
    let d = devx_on(&h);
    let mut out = [0u8; 0x1010];

    // Not a command DevX lets through as a general command: EINVAL before the firmware.
    let mut bad = [0u8; 16];
    bad[0..2].copy_from_slice(&0x7ffu16.to_be_bytes());
    assert_eq!(os_errno(d.general_cmd(&bad, &mut out)), Errno::EINVAL, "unknown opcode");
    let cq_in = create_cq_in(&CqParams { log_cq_size: 6, cqe_128: false, uar_page: 0, c_eqn: 0,
                                          buf: UmemRef::default(), dbr: UmemRef::default() });
    assert_eq!(os_errno(d.general_cmd(&cq_in, &mut out)), Errno::EINVAL, "a create as a general command");

    // Mailboxes shorter than the 16-byte headers the attributes require.
    let cap_in = devx::cmd::caps::query_hca_cap_in(cap_type::GENERAL, false);
    assert_eq!(os_errno(d.general_cmd(&cap_in[..8], &mut out)), Errno::EINVAL, "short inbox");
    assert_eq!(os_errno(d.general_cmd(&cap_in, &mut out[..8])), Errno::EINVAL, "short outbox");

    // An inbox longer than the command is taken (its tail ignored); an outbox that has
    // the header but not the page is the firmware's BAD_OUTP_LEN_ERR.
    let mut long = cap_in.clone();
    long.resize(4096, 0);
    d.general_cmd(&long, &mut out).expect("a 4 KiB QUERY_HCA_CAP inbox");
    let e = d.general_cmd(&cap_in, &mut out[..16]).unwrap_err();
    assert_eq!((e.errno(), e.status()), (Some(Errno::EREMOTEIO), Some(status::BAD_OUTP_LEN_ERR)), "{e}");

    // A capability page the device does not have: the firmware's refusal, EREMOTEIO.
    let e = d.query_hca_cap(0x7f, false).expect_err("no such page");
    assert_eq!((e.errno(), e.status()), (Some(Errno::EREMOTEIO), Some(status::BAD_PARAM_ERR)), "{e}");
    // The status by its PRM name, and softhca's syndrome by its name.
    assert!(e.to_string().contains("BAD_PARAM_ERR") && e.to_string().contains("BAD_OP_MOD"), "{e}");
}

#[test]
fn query_qp_on_a_verbs_qp() {
    let (a, b) = (Host::new([127, 61, 0, 4]), Host::new([127, 61, 0, 5]));
    let o = Opts::default();
    let (ea, eb) = connect(&a, &b, &o);
    let d = devx_on(&a);
    let mut out = outbox::<QueryQpOut>();
    d.query_verbs_qp(&ea.qp, &query_qp_in(ea.qp.qpn()), &mut out).unwrap();
    let q = queried_qpc(&out).unwrap();
    assert_eq!(q.get(Qpc::state), state::RTS);
    assert_eq!(q.get(Qpc::remote_qpn), eb.qp.qpn());
    assert_eq!(q.get(Qpc::mtu), o.mtu);
    assert_eq!(q.get(Qpc::pd), a.pd.pdn());
    // The inbox must name the QP the handle is: another QPN is refused (EINVAL).
    let e = d.query_verbs_qp(&ea.qp, &query_qp_in(ea.qp.qpn() ^ 1), &mut out).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
}

fn devx_cq(d: &DevxContext, uar_page: u32, log: u8) -> (devx::Obj, devx::Umem, devx::Umem) {
    let eqn = d.query_eqn(0).unwrap();
    let buf = d.reg_umem(64 << log, access::LOCAL_WRITE).unwrap();
    let dbr = d.reg_umem(64, access::LOCAL_WRITE).unwrap();
    let mut out = outbox::<CreateCqOut>();
    let cq = d.create_obj(&create_cq_in(&CqParams { log_cq_size: log, cqe_128: false, uar_page, c_eqn: eqn as u8,
        buf: UmemRef { id: buf.id(), offset: 0 }, dbr: UmemRef { id: dbr.id(), offset: 0 } }), &mut out).unwrap();
    (cq, buf, dbr)
}

/// mlx5dv_devx_obj_query_async: two QUERY_CQs in flight, answered on the async
/// command fd with their wr_ids and the CQ's context (log_cq_size and uar_page as
/// created).
#[test]
fn async_query_answers_on_the_command_fd() {
    use prm::cmd::cq::{Cqc, QueryCqIn, QueryCqOut};
    use prm::bits::{View, ViewMut};
    let h = Host::new([127, 61, 0, 6]);
    let d = devx_on(&h);
    let uar = d.alloc_uar(false).unwrap();
    let (cq, _buf, _dbr) = devx_cq(&d, uar.page_id(), 7);
    let fd = d.async_cmd_fd().unwrap();
    // query_cq_in: opcode 0x402 @0, cqn @0x48 (24 bits)
    let mut inb = vec![0u8; QueryCqIn::BYTES];
    ViewMut::<QueryCqIn>::new(&mut inb).unwrap().set(QueryCqIn::opcode, 0x402).set(QueryCqIn::cqn, cq.id());
    cq.query_async(&fd, &inb, QueryCqOut::BYTES as u16, 0xabc).unwrap();
    cq.query_async(&fd, &inb, QueryCqOut::BYTES as u16, 0xdef).unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (wr_id, out) = fd.read(QueryCqOut::BYTES, Some(std::time::Duration::from_secs(10))).unwrap();
        let c = View::<QueryCqOut>::new(&out).unwrap().sub(QueryCqOut::cq_context);
        assert_eq!((c.get(Cqc::log_cq_size), c.get(Cqc::uar_page)), (7, uar.page_id()));
        seen.push(wr_id);
    }
    seen.sort();
    assert_eq!(seen, [0xabc, 0xdef]);
    // The inbox must name the object the handle is (devx.c: EINVAL).
    ViewMut::<QueryCqIn>::new(&mut inb).unwrap().set(QueryCqIn::cqn, cq.id() + 1);
    let e = cq.query_async(&fd, &inb, QueryCqOut::BYTES as u16, 1).unwrap_err();
    assert_eq!(e.errno(), Some(Errno::EINVAL), "{e}");
}

/// A UAR for DevX on a context with dynamic UARs is a UAR object whose page_id the
/// firmware accepts as a CQ's uar_page; a page index that is no UAR of the device is
/// refused at CREATE_CQ (EREMOTEIO, BAD_PARAM_ERR).
#[test]
fn devx_uar_is_the_cq_uar_page() {
    let h = Host::new([127, 61, 0, 7]);
    let d = devx_on(&h);
    let uar = d.alloc_uar(true).unwrap();
    assert!(!uar.base().is_null());
    let (cq, _b, _d) = devx_cq(&d, uar.page_id(), 6);
    assert_ne!(cq.id(), 0);
    let buf = d.reg_umem(4096, access::LOCAL_WRITE).unwrap();
    let dbr = d.reg_umem(64, access::LOCAL_WRITE).unwrap();
    let mut out = outbox::<CreateCqOut>();
    let e = d.create_obj(&create_cq_in(&CqParams { log_cq_size: 6, cqe_128: false, uar_page: 0xff_fff0, c_eqn: 3,
        buf: UmemRef { id: buf.id(), offset: 0 }, dbr: UmemRef { id: dbr.id(), offset: 0 } }), &mut out).unwrap_err();
    assert_eq!((e.errno(), e.status()), (Some(Errno::EREMOTEIO), Some(status::BAD_PARAM_ERR)), "{e}");
}

/// With static UARs (tot_bfregs > 0, as a library that does not ask for dynamic UARs
/// gets them), the DevX UAR is the context's first static page and its device index
/// comes from DEVX_QUERY_UAR; a CQ takes it as uar_page.
#[test]
fn devx_uar_on_a_static_uar_context() {
    let h = Host::at([127, 61, 0, 8], |c| c.dynamic_uars = false);
    assert!(h.ctx.ucontext().tot_bfregs > 0, "the context has static UARs");
    let d = devx_on(&h);
    let uar = d.alloc_uar(false).unwrap();
    let (cq, _b, _d) = devx_cq(&d, uar.page_id(), 6);
    assert_ne!(cq.id(), 0);
}

/// The rest of the error table, through the safe API: a field out of range
/// (the firmware's BAD_PARAM_ERR, EREMOTEIO), a destroy of an object in use (the
/// kernel runs DESTROY_CQ with mlx5_cmd_exec, so RES_BUSY becomes EBUSY, and the
/// object stays), and another context's handle (not in this file's table).
#[test]
fn error_table_objects() {
    use devx::cmd::qp::{create_qp_in, QpKind, QpParams};
    use prm::cmd::qp::CreateQpOut;
    let h = Host::new([127, 61, 0, 9]);
    let d = devx_on(&h);
    let uar = d.alloc_uar(false).unwrap();

    // log_cq_size 31: beyond log_max_cq_sz.
    let buf = d.reg_umem(4096, access::LOCAL_WRITE).unwrap();
    let dbr = d.reg_umem(64, access::LOCAL_WRITE).unwrap();
    let e = d.create_obj(&create_cq_in(&CqParams { log_cq_size: 31, cqe_128: false, uar_page: uar.page_id(), c_eqn: 3,
        buf: UmemRef { id: buf.id(), offset: 0 }, dbr: UmemRef { id: dbr.id(), offset: 0 } }), &mut outbox::<CreateCqOut>())
        .unwrap_err();
    assert_eq!((e.errno(), e.status()), (Some(Errno::EREMOTEIO), Some(status::BAD_PARAM_ERR)), "{e}");

    // A CQ a QP uses cannot be destroyed.
    let (cq, _b, _d) = devx_cq(&d, uar.page_id(), 6);
    let wq = d.reg_umem(8192, access::LOCAL_WRITE).unwrap();
    let qdbr = d.reg_umem(64, access::LOCAL_WRITE).unwrap();
    let qp = d.create_obj(&create_qp_in(&QpParams { kind: QpKind::Rc, pd: h.pd.pdn(), cqn_snd: cq.id(), cqn_rcv: cq.id(),
        uar_page: uar.page_id(), user_index: 0, log_sq_size: 4, log_rq_size: 4, log_rq_stride: 0,
        wq: UmemRef { id: wq.id(), offset: 0 }, dbr: UmemRef { id: qdbr.id(), offset: 0 } }), &mut outbox::<CreateQpOut>())
        .unwrap();
    let (cq, e) = cq.destroy().expect_err("the QP uses the CQ");
    assert_eq!(e.errno(), Some(Errno::EBUSY), "{e}");
    drop(qp);
    cq.destroy().map_err(|(_, e)| e).expect("free once the QP is gone");

    // Another context's object: handles are per file, so a handle this file never
    // made is unknown here (ib_uverbs' idr lookup: ENOENT), whatever the other file
    // holds under that number.
    let other = DevxContext::new(provider::Context::from_device(
        uverbs::Device::from_endpoint(Box::new(h.hca.open()), "softhca0")).unwrap()).unwrap();
    let other_uar = other.alloc_uar(false).unwrap();
    let mut theirs = Vec::new();
    for _ in 0..40 {
        theirs.push(devx_cq(&other, other_uar.page_id(), 6));
    }
    let last = theirs.last().unwrap().0.handle();
    let mut q = vec![0u8; 16];
    q[0..2].copy_from_slice(&0x402u16.to_be_bytes());
    q[8..12].copy_from_slice(&theirs.last().unwrap().0.id().to_be_bytes());
    let mut out = [0u8; 0x100];
    let r = uverbs::cmd::devx::obj_query(d.device(), last, &q, &mut out);
    assert_eq!(r, Err(Errno::ENOENT), "handle {last} of another file");
}

/// A flow counter is read through DEVX_OBJ_QUERY on its own object, as DPDK's
/// `mlx5_devx_cmd_flow_counter_query` does (devx.c maps QUERY_FLOW_COUNTER's
/// `flow_counter_id` to the ALLOC_FLOW_COUNTER object): a new counter reads (0, 0); the
/// query through another counter's handle is EINVAL (devx_is_valid_obj_id).
#[test]
fn flow_counter_query_through_its_object() {
    let h = Host::new([127, 61, 0, 10]);
    let d = devx_on(&h);
    let a = devx::flow::FlowCounter::new(&d).unwrap();
    let b = devx::flow::FlowCounter::new(&d).unwrap();
    assert_ne!(a.id, b.id);
    assert_eq!(a.query(false).unwrap(), (0, 0));
    assert_eq!(b.query(true).unwrap(), (0, 0));
    let mut out = vec![0u8; 0x10 + 0x10];
    let r = a.obj.query(&devx::flow::query_counter_in(b.id, false), &mut out);
    assert_eq!(os_errno(r), Errno::EINVAL, "a counter's handle does not read another counter");
}
