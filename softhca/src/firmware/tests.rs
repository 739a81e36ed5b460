//! Firmware tests. Expected statuses are the PRM's for each refusal (named in
//! `prm::cmd::status`), expected errnos are written out from Linux 6.1's
//! `cmd_status_to_err` (drivers/net/ethernet/mellanox/mlx5/core/cmd.c), and the
//! capability check recomputes mlx5_ib's `mlx5_ib_query_device` derivation.

use std::sync::Arc;

use nix::errno::Errno;
use prm::bits::{Layout, View, ViewMut};
use prm::cmd::cq::{CreateCqIn, Cqc, DestroyCqIn, ModifyCqIn};
use prm::cmd::uctx::{CreateUctxIn, Uctx};
use prm::cmd::umem::{CreateUmemIn, Umem};
use prm::cmd::header::MboxIn;
use prm::cmd::hca_cap::{self as hc, AtomicCaps, CmdHcaCap, QueryHcaCapIn, QueryHcaCapOut};
use prm::cmd::mkey::{access_mode, CreateMkeyIn, DestroyMkeyIn, Mkc};
use prm::cmd::opcode as op;
use prm::cmd::pd::DeallocPdIn;
use prm::cmd::qp::{self as q, Ads, CreateQpIn, DestroyQpIn, QueryQpIn, QueryQpOut, Qpc, Rst2initQpIn};
use prm::cmd::status as st;
use prm::cmd::uar::DeallocUarIn;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::status::syndrome as syn;
use super::Outcome;
use crate::hca::Hca;

/// Large enough for every answer (QUERY_HCA_CAP's is 0x1010 bytes).
const OUT: usize = 0x1100;

fn inbox<L: Layout>(opcode: u16, uid: u16, f: impl FnOnce(&mut ViewMut<'_, L>)) -> Vec<u8> {
    let mut b = vec![0u8; L::BYTES];
    ViewMut::<MboxIn>::new(&mut b).unwrap().set(MboxIn::opcode, opcode).set(MboxIn::uid, uid);
    f(&mut ViewMut::new(&mut b).unwrap());
    b
}

fn exec(h: &Hca, inb: &[u8]) -> (Outcome, Vec<u8>) {
    let mut out = vec![0xa5u8; OUT];
    let o = h.firmware().exec(inb, &mut out);
    (o, out)
}

/// The 24-bit number every create/alloc answer carries at bit 0x48.
fn id_of(out: &[u8]) -> u32 {
    u32::from_be_bytes([0, out[9], out[10], out[11]])
}

fn ok(h: &Hca, inb: &[u8]) -> u32 {
    let (o, out) = exec(h, inb);
    assert_eq!(o, Outcome::OK, "opcode {:#x}", u16::from_be_bytes([inb[0], inb[1]]));
    assert_eq!(out[0], 0, "status byte in the outbox");
    id_of(&out)
}

fn plain(opcode: u16, uid: u16) -> Vec<u8> {
    inbox::<MboxIn>(opcode, uid, |_| {})
}

/// An inbox naming object `id` at bit 0x48 (DEALLOC_*, DESTROY_*, QUERY_QP, 2ERR...).
fn with_id(opcode: u16, uid: u16, id: u32) -> Vec<u8> {
    let mut b = inbox::<Rst2initQpIn>(opcode, uid, |_| {});
    b[9..12].copy_from_slice(&id.to_be_bytes()[1..]);
    let len = match opcode {
        op::RST2INIT_QP | op::INIT2INIT_QP | op::INIT2RTR_QP | op::RTR2RTS_QP | op::SQERR2RTS_QP => Rst2initQpIn::BYTES,
        op::RTS2RTS_QP => prm::cmd::qp::Rts2rtsQpIn::BYTES,
        _ => 16,
    };
    b.resize(len, 0);
    b
}

/// A page-aligned 1 MiB of memory every test ring and doorbell record points into, never
/// freed: the device half reads (and, for a CQ's arm mailbox, writes) these words while
/// the objects live, though no test here rings a doorbell. The tests' CQs share one
/// doorbell record, which none of them depends on.
fn arena() -> u64 {
    static ARENA: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ARENA.get_or_init(|| {
        let v: &'static mut [u8] = Box::leak(vec![0u8; (1 << 20) + 4096].into_boxed_slice());
        (v.as_ptr() as u64 + 4095) & !4095
    })
}

/// Appends a page list (the arena's first 64 KiB, 4 KiB pages) to a CREATE_CQ/CREATE_QP
/// inbox.
fn with_pas(mut b: Vec<u8>) -> Vec<u8> {
    for i in 0..16u64 {
        b.extend_from_slice(&(arena() + i * 4096).to_be_bytes());
    }
    b
}

fn cq_in(uid: u16, uar: u32, log_size: u8) -> Vec<u8> {
    with_pas(inbox::<CreateCqIn>(op::CREATE_CQ, uid, |v| {
        v.sub_mut(CreateCqIn::cq_context).set(Cqc::log_cq_size, log_size).set(Cqc::uar_page, uar)
            .set(Cqc::dbr_addr, arena() + (1 << 19));
    }))
}

fn qp_in(uid: u16, st_: u8, pd: u32, cq: u32, uar: u32) -> Vec<u8> {
    with_pas(inbox::<CreateQpIn>(op::CREATE_QP, uid, |v| {
        v.sub_mut(CreateQpIn::qpc)
            .set(Qpc::st, st_)
            .set(Qpc::pd, pd)
            .set(Qpc::cqn_snd, cq)
            .set(Qpc::cqn_rcv, cq)
            .set(Qpc::uar_page, uar)
            .set(Qpc::log_sq_size, 6)
            .set(Qpc::log_rq_size, 6)
            .set(Qpc::log_rq_stride, 2)
            .set(Qpc::dbr_addr, arena() + (1 << 19) + 64);
    }))
}

/// A CREATE_UMEM inbox over 4 KiB pages at `pages`.
fn umem_in(uid: u16, pages: &[u64]) -> Vec<u8> {
    let mut b = inbox::<CreateUmemIn>(op::CREATE_UMEM, uid, |v| {
        v.sub_mut(CreateUmemIn::umem).set(Umem::num_of_mtt, pages.len() as u64);
    });
    for p in pages {
        b.extend_from_slice(&(p | 3).to_be_bytes());
    }
    b
}

fn mkey_in(uid: u16, pd: u32, mode: u8) -> Vec<u8> {
    inbox::<CreateMkeyIn>(op::CREATE_MKEY, uid, |v| {
        v.sub_mut(CreateMkeyIn::memory_key_mkey_entry)
            .set(Mkc::access_mode_1_0, mode)
            .set(Mkc::pd, pd)
            .set(Mkc::mkey_7_0, 0x42)
            .set(Mkc::lw, true)
            .set(Mkc::lr, true)
            .set(Mkc::len, 4096);
    })
}

/// A transition inbox with the fields mlx5_ib fills for it.
fn transition(opcode: u16, uid: u16, qpn: u32) -> Vec<u8> {
    let mut b = with_id(opcode, uid, qpn);
    if b.len() >= Rst2initQpIn::BYTES {
        let mut v = ViewMut::<Rst2initQpIn>::new(&mut b).unwrap();
        let mut c = v.sub_mut(Rst2initQpIn::qpc);
        c.set(Qpc::mtu, q::mtu::MTU_1024).set(Qpc::remote_qpn, 0x1234).set(Qpc::next_rcv_psn, 0x111)
            .set(Qpc::next_send_psn, 0x222).set(Qpc::retry_count, 7).set(Qpc::rnr_retry, 7);
        c.sub_mut(Qpc::primary_address_path).set(Ads::vhca_port_num, 1).set(Ads::ack_timeout, 14);
    }
    b
}

/// A set of objects of uid 1: PD, UAR, CQ, an RC QP on the CQ, an mkey in the PD.
struct Set {
    pd: u32,
    uar: u32,
    cq: u32,
    qp: u32,
    mkey: u32,
}

fn make_set(h: &Hca, uid: u16) -> Set {
    let pd = ok(h, &plain(op::ALLOC_PD, uid));
    let uar = ok(h, &plain(op::ALLOC_UAR, uid));
    let cq = ok(h, &cq_in(uid, uar, 8));
    let qp = ok(h, &qp_in(uid, q::st::RC, pd, cq, uar));
    let mkey = ok(h, &mkey_in(uid, pd, access_mode::MTT));
    Set { pd, uar, cq, qp, mkey }
}

fn destroy_set(h: &Hca, uid: u16, s: &Set) {
    ok(h, &with_id(op::DESTROY_QP, uid, s.qp));
    ok(h, &with_id(op::DESTROY_MKEY, uid, s.mkey));
    ok(h, &with_id(op::DESTROY_CQ, uid, s.cq));
    ok(h, &with_id(op::DEALLOC_PD, uid, s.pd));
    ok(h, &with_id(op::DEALLOC_UAR, uid, s.uar));
}

#[test]
fn firmware_objects_made_and_destroyed() {
    let h = Hca::for_tests();
    let fw = h.firmware();
    let s = make_set(&h, 1);
    assert_eq!(fw.counts(), super::Counts { pd: 1, uar: 1, cq: 1, qp: 1, srq: 0, mkey: 1, umem: 0, uctx: 0, xrcd: 0 });
    // Numbers from the HCA's pools: CQNs start at 0x400, QPNs at 0x108 (hca.rs), UAR
    // indexes are device pages (the first UAR page), mkey indexes start at 3 (2 is the
    // dump-fill key).
    let first_uar = crate::pages::FIRST_UAR_PAGE;
    assert!(s.cq >= 0x400 && s.qp >= 0x108 && s.uar == first_uar && s.mkey >= 3, "{} {} {} {}", s.cq, s.qp, s.uar, s.mkey);
    // The CQ and QP are the device half's too.
    assert!(h.cq(s.cq).is_some() && h.qp(s.qp).is_some());
    assert!(h.pages().is_allocated(s.uar));
    destroy_set(&h, 1, &s);
    assert_eq!(fw.counts().total(), 0);
    assert!(h.cq(s.cq).is_none() && h.qp(s.qp).is_none() && !h.pages().is_allocated(s.uar));
    assert_eq!(h.live_objects(), 0, "no object outlives its destroy");
}

/// (what, inbox, outbox length, status, syndrome, errno).
type Row = (&'static str, Vec<u8>, usize, u8, u32, Errno);

#[test]
fn firmware_error_table() {
    let h = Hca::for_tests();
    let s = make_set(&h, 1);
    let before = h.firmware().counts();
    let cap_bad_page = inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, 1, |v| {
        v.set(QueryHcaCapIn::op_mod, hc::op_mod(0x11, false));
    });
    let other_fn = inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, 1, |v| {
        v.set(QueryHcaCapIn::other_function, true);
    });
    let mut pd_op_mod = plain(op::ALLOC_PD, 1);
    ViewMut::<MboxIn>::new(&mut pd_op_mod).unwrap().set(MboxIn::op_mod, 1);
    let mut short_qp = qp_in(1, q::st::RC, s.pd, s.cq, s.uar);
    short_qp.truncate(100);
    let mut bad_cqe = cq_in(1, s.uar, 8);
    ViewMut::<CreateCqIn>::new(&mut bad_cqe).unwrap().sub_mut(CreateCqIn::cq_context).set(Cqc::cqe_sz, 2);
    let mut comp_cq = cq_in(1, s.uar, 8);
    ViewMut::<CreateCqIn>::new(&mut comp_cq).unwrap().sub_mut(CreateCqIn::cq_context).set(Cqc::cqe_comp_en, true);
    let mut stride = qp_in(1, q::st::RC, s.pd, s.cq, s.uar);
    ViewMut::<CreateQpIn>::new(&mut stride).unwrap().sub_mut(CreateQpIn::qpc).set(Qpc::log_rq_stride, 6);
    let mut modify_cq = with_id(op::MODIFY_CQ, 1, s.cq);
    modify_cq.resize(ModifyCqIn::BYTES, 0);
    ViewMut::<ModifyCqIn>::new(&mut modify_cq).unwrap().set(ModifyCqIn::modify_field_select, 1);
    let mut modify_cq_op2 = modify_cq.clone();
    ViewMut::<MboxIn>::new(&mut modify_cq_op2).unwrap().set(MboxIn::op_mod, 2);
    let mut no_pas = cq_in(1, s.uar, 8);
    no_pas.truncate(CreateCqIn::BYTES);
    let mut unmapped = cq_in(1, s.uar, 8);
    for (i, e) in unmapped[CreateCqIn::BYTES..].chunks_exact_mut(8).enumerate() {
        e.copy_from_slice(&(0x10_0000_0000u64 + i as u64 * 4096).to_be_bytes());
    }
    let mut gap = cq_in(1, s.uar, 8);
    gap[CreateCqIn::BYTES + 8..CreateCqIn::BYTES + 16].copy_from_slice(&(arena() + 8192).to_be_bytes());
    let mut short_pas = cq_in(1, s.uar, 8);
    short_pas.truncate(CreateCqIn::BYTES + 8);
    let mut no_umem = cq_in(1, s.uar, 8);
    ViewMut::<CreateCqIn>::new(&mut no_umem).unwrap().set(CreateCqIn::cq_umem_valid, true).set(CreateCqIn::cq_umem_id, 9);
    let umem_empty = inbox::<CreateUmemIn>(op::CREATE_UMEM, 1, |_| {});
    let mut umem_misaligned = umem_in(1, &[arena() + 0x100]);
    let _ = &mut umem_misaligned;
    let mut umem_short = umem_in(1, &[arena(), arena() + 4096]);
    umem_short.truncate(umem_short.len() - 8);
    let uctx_raw = inbox::<CreateUctxIn>(op::CREATE_UCTX, 0, |v| {
        v.sub_mut(CreateUctxIn::uctx).set(Uctx::cap, prm::cmd::uctx::cap::RAW_TX);
    });

    // (what, inbox, outbox length, status, syndrome, the errno Linux's
    // cmd_status_to_err gives that status)
    let rows: Vec<Row> = vec![
        ("unknown opcode 0x999", plain(0x999, 1), OUT, st::BAD_OP_ERR, syn::UNKNOWN_OPCODE, Errno::EINVAL),
        ("QUERY_CQ of uid 1's CQ by uid 2", with_id(op::QUERY_CQ, 2, s.cq), OUT, st::BAD_PARAM_ERR, syn::FOREIGN_OBJECT, Errno::EINVAL),
        ("MODIFY_CQ moderation (cq_moderation is 0)", modify_cq, OUT, st::BAD_PARAM_ERR, syn::CQ_FEATURE, Errno::EINVAL),
        ("MODIFY_CQ op_mod 2", modify_cq_op2, OUT, st::BAD_PARAM_ERR, syn::BAD_OP_MOD, Errno::EINVAL),
        ("CREATE_CQ without UMEM or page list", no_pas, OUT, st::BAD_INP_LEN_ERR, syn::INBOX_LEN, Errno::EIO),
        ("CREATE_CQ on unmapped memory", unmapped, OUT, st::BAD_PARAM_ERR, syn::BAD_ADDRESS, Errno::EINVAL),
        ("CREATE_CQ with pages that do not follow each other", gap, OUT, st::BAD_PARAM_ERR, syn::BAD_ADDRESS, Errno::EINVAL),
        ("CREATE_CQ with one page for a 16 KiB ring", short_pas, OUT, st::BAD_INP_LEN_ERR, syn::INBOX_LEN, Errno::EIO),
        ("CREATE_CQ on a UMEM that does not exist", no_umem, OUT, st::BAD_PARAM_ERR, syn::BAD_UMEM, Errno::EINVAL),
        ("CREATE_UMEM with no pages", umem_empty, OUT, st::BAD_PARAM_ERR, syn::UMEM_PAGES, Errno::EINVAL),
        ("CREATE_UMEM with a misaligned page", umem_misaligned, OUT, st::BAD_PARAM_ERR, syn::UMEM_PAGES, Errno::EINVAL),
        ("CREATE_UMEM with fewer MTT entries than num_of_mtt", umem_short, OUT, st::BAD_INP_LEN_ERR, syn::INBOX_LEN, Errno::EIO),
        ("CREATE_UCTX asking for raw transmit", uctx_raw, OUT, st::BAD_PARAM_ERR, syn::UCTX_CAP, Errno::EINVAL),
        ("QUERY_HCA_CAP page 0x11", cap_bad_page, OUT, st::BAD_PARAM_ERR, syn::BAD_OP_MOD, Errno::EINVAL),
        ("QUERY_HCA_CAP other function", other_fn, OUT, st::BAD_PARAM_ERR, syn::OTHER_FUNCTION, Errno::EINVAL),
        ("ALLOC_PD op_mod 1", pd_op_mod, OUT, st::BAD_PARAM_ERR, syn::BAD_OP_MOD, Errno::EINVAL),
        ("inbox shorter than the header", vec![0x08, 0x00, 0, 1], OUT, st::BAD_INP_LEN_ERR, syn::INBOX_LEN, Errno::EIO),
        ("CREATE_QP inbox of 100 bytes", short_qp, OUT, st::BAD_INP_LEN_ERR, syn::INBOX_LEN, Errno::EIO),
        ("QUERY_HCA_CAP outbox of 16 bytes",
         inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, 1, |_| {}), 16, st::BAD_OUTP_LEN_ERR, syn::OUTBOX_LEN, Errno::EIO),
        ("QUERY_QP outbox of 0x20 bytes", with_id(op::QUERY_QP, 1, s.qp), 0x20, st::BAD_OUTP_LEN_ERR, syn::OUTBOX_LEN, Errno::EIO),
        ("CREATE_CQ log_cq_size 23 > log_max_cq_sz 22", cq_in(1, s.uar, 23), OUT, st::BAD_PARAM_ERR, syn::CQ_SIZE, Errno::EINVAL),
        ("CREATE_CQ cqe_sz 2", bad_cqe, OUT, st::BAD_PARAM_ERR, syn::CQE_SIZE, Errno::EINVAL),
        ("CREATE_CQ with compression", comp_cq, OUT, st::BAD_PARAM_ERR, syn::CQ_FEATURE, Errno::EINVAL),
        ("CREATE_CQ on a UAR that does not exist", cq_in(1, 77, 8), OUT, st::BAD_PARAM_ERR, syn::BAD_UAR, Errno::EINVAL),
        ("CREATE_QP DCI", qp_in(1, q::st::DCI, s.pd, s.cq, s.uar), OUT, st::BAD_PARAM_ERR, syn::QP_TYPE, Errno::EINVAL),
        ("CREATE_QP log_rq_stride 6 (1 KiB > 512)", stride, OUT, st::BAD_PARAM_ERR, syn::RQ_STRIDE, Errno::EINVAL),
        ("CREATE_MKEY KLM", mkey_in(1, s.pd, access_mode::KLMS), OUT, st::BAD_PARAM_ERR, syn::ACCESS_MODE, Errno::EINVAL),
        ("DESTROY_CQ of a CQ a QP uses", with_id(op::DESTROY_CQ, 1, s.cq), OUT, st::RES_BUSY, syn::IN_USE, Errno::EBUSY),
        ("DEALLOC_PD of a PD a QP uses", with_id(op::DEALLOC_PD, 1, s.pd), OUT, st::RES_BUSY, syn::IN_USE, Errno::EBUSY),
        ("DEALLOC_UAR of a UAR a CQ uses", with_id(op::DEALLOC_UAR, 1, s.uar), OUT, st::RES_BUSY, syn::IN_USE, Errno::EBUSY),
        ("DESTROY_QP of uid 1's QP by uid 2", with_id(op::DESTROY_QP, 2, s.qp), OUT, st::BAD_PARAM_ERR, syn::FOREIGN_OBJECT, Errno::EINVAL),
        ("QUERY_QP of uid 1's QP by uid 2", with_id(op::QUERY_QP, 2, s.qp), OUT, st::BAD_PARAM_ERR, syn::FOREIGN_OBJECT, Errno::EINVAL),
        ("DESTROY_MKEY of uid 1's key by uid 0", with_id(op::DESTROY_MKEY, 0, s.mkey), OUT, st::BAD_PARAM_ERR, syn::FOREIGN_OBJECT, Errno::EINVAL),
        ("RST2INIT of uid 1's QP by uid 2", transition(op::RST2INIT_QP, 2, s.qp), OUT, st::BAD_PARAM_ERR, syn::FOREIGN_OBJECT, Errno::EINVAL),
        ("CREATE_QP by uid 2 on uid 1's PD", qp_in(2, q::st::RC, s.pd, s.cq, s.uar), OUT, st::BAD_PARAM_ERR, syn::BAD_PD, Errno::EINVAL),
        ("CREATE_MKEY by uid 2 in uid 1's PD", mkey_in(2, s.pd, access_mode::MTT), OUT, st::BAD_PARAM_ERR, syn::BAD_PD, Errno::EINVAL),
        ("DESTROY_QP of no QP", with_id(op::DESTROY_QP, 1, 0xabcdef), OUT, st::BAD_RES_ERR, syn::NO_OBJECT, Errno::EINVAL),
        ("INIT2RTR of a QP in RESET", transition(op::INIT2RTR_QP, 1, s.qp), OUT, st::BAD_RES_STATE_ERR, syn::QP_STATE, Errno::EINVAL),
    ];
    for (what, inb, outlen, status, syndrome, errno) in rows {
        let mut out = vec![0xa5u8; outlen];
        let o = h.firmware().exec(&inb, &mut out);
        assert_eq!((o.status, o.syndrome), (status, syndrome), "{what}");
        assert_eq!(o.errno(), Some(errno), "{what}");
        assert_eq!(out[0], status, "{what}: status in the outbox");
        assert_eq!(&out[4..8], &syndrome.to_be_bytes(), "{what}: syndrome in the outbox");
        assert!(out[16..].iter().all(|&b| b == 0), "{what}: the rest of the outbox zeroed");
    }
    // An outbox shorter than the header cannot carry the status: only the return does.
    let mut tiny = [0xa5u8; 8];
    let o = h.firmware().exec(&plain(op::ALLOC_PD, 1), &mut tiny);
    assert_eq!((o.status, o.errno()), (st::BAD_OUTP_LEN_ERR, Some(Errno::EIO)));
    assert_eq!(h.firmware().counts(), before, "no refused command changed an object");
    // The QP still answers its owner.
    let (o, out) = exec(&h, &with_id(op::QUERY_QP, 1, s.qp));
    assert!(o.is_ok());
    let qpc = View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc);
    assert_eq!((qpc.get(Qpc::state), qpc.get(Qpc::st), qpc.get(Qpc::pd)), (q::state::RST, q::st::RC, s.pd));
    destroy_set(&h, 1, &s);
    assert_eq!(h.firmware().counts().total(), 0);
}

#[test]
fn firmware_errnos_are_the_kernels() {
    // cmd_status_to_err, Linux 6.1 cmd.c, row by row.
    let table = [
        (st::INT_ERR, Errno::EIO), (st::BAD_OP_ERR, Errno::EINVAL), (st::BAD_PARAM_ERR, Errno::EINVAL),
        (st::BAD_SYS_STATE_ERR, Errno::EIO), (st::BAD_RES_ERR, Errno::EINVAL), (st::RES_BUSY, Errno::EBUSY),
        (st::LIM_ERR, Errno::ENOMEM), (st::BAD_RES_STATE_ERR, Errno::EINVAL), (st::IX_ERR, Errno::EINVAL),
        (st::NO_RES_ERR, Errno::EAGAIN), (st::BAD_INP_LEN_ERR, Errno::EIO), (st::BAD_OUTP_LEN_ERR, Errno::EIO),
        (st::BAD_QP_STATE_ERR, Errno::EINVAL), (st::BAD_PKT_ERR, Errno::EINVAL),
        (st::BAD_SIZE_OUTS_CQES_ERR, Errno::EINVAL), (0x77, Errno::EIO),
    ];
    for (s, e) in table {
        assert_eq!(super::status::errno_of(s), Some(e), "status {s:#x}");
    }
    assert_eq!(super::status::errno_of(st::OK), None);
}

/// Drives a fresh RC QP of uid 1 into `state` with the PRM commands.
/// INIT2RTR's Q_Key is an optional parameter (the PRM's `opt_param_mask`, bit
/// MLX5_QP_OPTPAR_Q_KEY): without the bit the Q_Key set at RST2INIT stays, with it the
/// new one is taken (a DevX user sending INIT2RTR's usual fields must not wipe it).
#[test]
fn init2rtr_takes_the_qkey_only_when_flagged() {
    let h = Hca::for_tests();
    let s = make_set(&h, 1);
    let qkey_of = |qpn: u32| {
        let (o, out) = exec(&h, &with_id(op::QUERY_QP, 1, qpn));
        assert!(o.is_ok());
        View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc).get(Qpc::q_key)
    };
    for (flag, want) in [(0, 0x1111_1111), (q::optpar::Q_KEY, 0x2222_2222)] {
        let ud = ok(&h, &qp_in(1, q::st::UD, s.pd, s.cq, s.uar));
        let mut b = transition(op::RST2INIT_QP, 1, ud);
        ViewMut::<Rst2initQpIn>::new(&mut b).unwrap().sub_mut(Rst2initQpIn::qpc).set(Qpc::q_key, 0x1111_1111);
        ok(&h, &b);
        let mut b = transition(op::INIT2RTR_QP, 1, ud);
        let mut v = ViewMut::<Rst2initQpIn>::new(&mut b).unwrap();
        v.set(Rst2initQpIn::opt_param_mask, flag);
        v.sub_mut(Rst2initQpIn::qpc).set(Qpc::q_key, 0x2222_2222);
        ok(&h, &b);
        assert_eq!(qkey_of(ud), want, "opt_param_mask {flag:#x}");
        ok(&h, &with_id(op::DESTROY_QP, 1, ud));
    }
    destroy_set(&h, 1, &s);
}

fn qp_in_state(h: &Hca, s: &Set, state: u8) -> u32 {
    let qpn = ok(h, &qp_in(1, q::st::RC, s.pd, s.cq, s.uar));
    let path: &[u16] = match state {
        q::state::RST => &[],
        q::state::INIT => &[op::RST2INIT_QP],
        q::state::RTR => &[op::RST2INIT_QP, op::INIT2RTR_QP],
        q::state::RTS => &[op::RST2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP],
        q::state::ERR => &[op::QP_2ERR],
        _ => unreachable!(),
    };
    for &c in path {
        ok(h, &transition(c, 1, qpn));
    }
    qpn
}

fn state_of(h: &Hca, qpn: u32) -> u8 {
    let (o, out) = exec(h, &with_id(op::QUERY_QP, 1, qpn));
    assert!(o.is_ok());
    View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc).get(Qpc::state)
}

#[test]
fn firmware_qp_state_machine() {
    use q::state::*;
    let h = Hca::for_tests();
    let s = make_set(&h, 1);
    // Which command works from which reachable state, from the PRM's command names
    // (RST2INIT works from RST only, ...); 2ERR and 2RST from every state.
    let cmds = [
        (op::RST2INIT_QP, &[RST][..], INIT),
        (op::INIT2INIT_QP, &[INIT][..], INIT),
        (op::INIT2RTR_QP, &[INIT][..], RTR),
        (op::RTR2RTS_QP, &[RTR][..], RTS),
        (op::RTS2RTS_QP, &[RTS][..], RTS),
        (op::SQERR2RTS_QP, &[][..], RTS),
        (op::QP_2ERR, &[RST, INIT, RTR, RTS, ERR][..], ERR),
        (op::QP_2RST, &[RST, INIT, RTR, RTS, ERR][..], RST),
    ];
    let mut checked = 0;
    for (opcode, from, to) in cmds {
        for state in [RST, INIT, RTR, RTS, ERR] {
            let qpn = qp_in_state(&h, &s, state);
            assert_eq!(state_of(&h, qpn), state);
            let (o, _) = exec(&h, &transition(opcode, 1, qpn));
            if from.contains(&state) {
                assert!(o.is_ok(), "{opcode:#x} from {state}: {o:?}");
                assert_eq!(state_of(&h, qpn), to, "{opcode:#x} from {state}");
            } else {
                assert_eq!((o.status, o.syndrome), (st::BAD_RES_STATE_ERR, syn::QP_STATE), "{opcode:#x} from {state}");
                assert_eq!(o.errno(), Some(Errno::EINVAL));
                assert_eq!(state_of(&h, qpn), state, "a refused transition leaves the state");
            }
            ok(&h, &with_id(op::DESTROY_QP, 1, qpn));
            checked += 1;
        }
    }
    assert_eq!(checked, 40);
    // The fields the transitions carried are in QUERY_QP's context.
    let qpn = qp_in_state(&h, &s, RTS);
    let (_, out) = exec(&h, &with_id(op::QUERY_QP, 1, qpn));
    let qpc = View::<QueryQpOut>::new(&out).unwrap().sub(QueryQpOut::qpc);
    assert_eq!((qpc.get(Qpc::remote_qpn), qpc.get(Qpc::next_rcv_psn), qpc.get(Qpc::next_send_psn)), (0x1234, 0x111, 0x222));
    assert_eq!((qpc.get(Qpc::mtu), qpc.get(Qpc::retry_count)), (q::mtu::MTU_1024, 7));
    assert_eq!(qpc.sub(Qpc::primary_address_path).get(Ads::ack_timeout), 14);
    // INIT2RTR with an MTU that is none of the five: BAD_PARAM, state kept.
    let q2 = qp_in_state(&h, &s, INIT);
    let mut bad = transition(op::INIT2RTR_QP, 1, q2);
    ViewMut::<Rst2initQpIn>::new(&mut bad).unwrap().sub_mut(Rst2initQpIn::qpc).set(Qpc::mtu, 7);
    let (o, _) = exec(&h, &bad);
    assert_eq!((o.status, o.syndrome), (st::BAD_PARAM_ERR, syn::MTU));
    assert_eq!(state_of(&h, q2), INIT);
    // A UD QP goes to RTS too.
    let ud = ok(&h, &qp_in(1, q::st::UD, s.pd, s.cq, s.uar));
    for c in [op::RST2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP] {
        ok(&h, &transition(c, 1, ud));
    }
    assert_eq!(state_of(&h, ud), RTS);
    for n in [qpn, q2, ud] {
        ok(&h, &with_id(op::DESTROY_QP, 1, n));
    }
    destroy_set(&h, 1, &s);
    assert_eq!(h.firmware().counts().total(), 0);
}

fn cap_page(h: &Hca, ty: u16, current: bool) -> Vec<u8> {
    let (o, out) = exec(h, &inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, 0, |v| {
        v.set(QueryHcaCapIn::op_mod, hc::op_mod(ty, current));
    }));
    assert!(o.is_ok(), "page {ty:#x}: {o:?}");
    out
}

#[test]
fn caps_agree_with_query_device() {
    let h = Hca::for_tests();
    let out = cap_page(&h, hc::cap_type::GENERAL, false);
    assert_eq!(out, cap_page(&h, hc::cap_type::GENERAL, true), "current = max (no SET_HCA_CAP)");
    let g = hc::general(View::<QueryHcaCapOut>::new(&out).unwrap());
    let aout = cap_page(&h, hc::cap_type::ATOMIC, false);
    let off = QueryHcaCapOut::capability.off() / 8;
    let a = View::<AtomicCaps>::new(&aout[off..]).unwrap();
    let d = crate::kernel::mlx5::query_device_core(&h);
    // mlx5_ib_query_device's derivation (Linux 6.1 drivers/infiniband/hw/mlx5/main.c),
    // field by field.
    let p2 = |v: u8| 1u32 << v;
    assert_eq!(d.max_qp, p2(g.get(CmdHcaCap::log_max_qp)), "max_qp = 1 << log_max_qp");
    assert_eq!(d.max_qp_wr, p2(g.get(CmdHcaCap::log_max_qp_sz)), "max_qp_wr = 1 << log_max_qp_sz");
    assert_eq!(d.max_cq, p2(g.get(CmdHcaCap::log_max_cq)), "max_cq");
    assert_eq!(d.max_cqe, p2(g.get(CmdHcaCap::log_max_cq_sz)) - 1, "max_cqe = (1 << log_max_cq_sz) - 1");
    assert_eq!(d.max_mr, p2(g.get(CmdHcaCap::log_max_mkey)), "max_mr");
    assert_eq!(d.max_pd, p2(g.get(CmdHcaCap::log_max_pd)), "max_pd");
    assert_eq!(d.max_qp_rd_atom, p2(g.get(CmdHcaCap::log_max_ra_res_qp)), "max_qp_rd_atom");
    assert_eq!(d.max_qp_init_rd_atom, p2(g.get(CmdHcaCap::log_max_ra_req_qp)), "max_qp_init_rd_atom");
    assert_eq!(d.max_res_rd_atom, d.max_qp_rd_atom * d.max_qp, "max_res_rd_atom");
    assert_eq!(d.max_srq, p2(g.get(CmdHcaCap::log_max_srq)), "max_srq");
    assert_eq!(d.max_srq_wr, p2(g.get(CmdHcaCap::log_max_srq_sz)) - 1, "max_srq_wr");
    // max_sq_desc = min(max_wqe_sz_sq, 512); sq sg = (desc - ctrl 16 - raddr 16) / 16;
    // rq sg = max_wqe_sz_rq / 16.
    let sq_sg = (g.get(CmdHcaCap::max_wqe_sz_sq).min(512) as u32 - 32) / 16;
    let rq_sg = g.get(CmdHcaCap::max_wqe_sz_rq) as u32 / 16;
    assert_eq!(d.max_sge, sq_sg.min(rq_sg), "max_sge");
    assert_eq!(d.max_srq_sge, rq_sg - 1, "max_srq_sge");
    assert_eq!(d.max_mcast_grp, p2(g.get(CmdHcaCap::log_max_mcg)), "max_mcast_grp");
    assert_eq!(d.max_mcast_qp_attach, g.get(CmdHcaCap::max_qp_mcg), "max_mcast_qp_attach");
    assert_eq!(d.max_pkeys as u32, 128 << g.get(CmdHcaCap::pkey_table_size), "mlx5_to_sw_pkey_sz");
    assert_eq!(d.local_ca_ack_delay, g.get(CmdHcaCap::local_ca_ack_delay), "local_ca_ack_delay");
    assert_eq!(d.phys_port_cnt, g.get(CmdHcaCap::num_ports), "phys_port_cnt");
    assert_eq!(d.max_mr_size, u64::MAX, "max_mr_size ~0 (log_max_mrw_sz {})", g.get(CmdHcaCap::log_max_mrw_sz));
    assert_eq!(g.get(CmdHcaCap::log_max_mrw_sz), 64);
    // get_atomic_caps: CMP_SWAP|FETCH_ADD on 8-byte QP atomics in big-endian mode is
    // IB_ATOMIC_HCA (1).
    let ops = a.get(AtomicCaps::atomic_operations);
    let hca_atomic = ops & 3 == 3 && a.get(AtomicCaps::atomic_size_qp) & (1 << 3) != 0
        && a.get(AtomicCaps::atomic_req_8B_endianness_mode) != 1;
    assert_eq!(d.atomic_cap, if hca_atomic && g.get(CmdHcaCap::atomic) { 1 } else { 0 }, "atomic_cap");
    // device_cap_flags bits mlx5_ib sets from the page (ib_verbs.h numbering).
    let flags = crate::kernel::mlx5::DEVICE_CAP_FLAGS;
    for (bit, cap, name) in [
        (1u64 << 1, g.get(CmdHcaCap::pkv), "BAD_PKEY_CNTR = pkv"),
        (1 << 2, g.get(CmdHcaCap::qkv), "BAD_QKEY_CNTR = qkv"),
        (1 << 4, g.get(CmdHcaCap::apm), "AUTO_PATH_MIG = apm"),
        (1 << 17, g.get(CmdHcaCap::imaicl), "MEM_WINDOW = imaicl"),
        (1 << 20, g.get(CmdHcaCap::xrc), "XRC = xrc"),
        (1 << 22, g.get(CmdHcaCap::block_lb_mc), "BLOCK_MULTICAST_LOOPBACK = block_lb_mc"),
        (1 << 27, g.get(CmdHcaCap::cd), "CROSS_CHANNEL = cd"),
        (1 << 36, g.get(CmdHcaCap::end_pad), "PCI_WRITE_END_PADDING = end_pad"),
    ] {
        assert_eq!(flags & bit != 0, cap, "{name}");
    }
    // QUERY_PORT: max_msg_sz = 1 << log_max_msg, gid_tbl_len = gid_table_size.
    let port = crate::kernel::methods::port::port_attrs(&h);
    assert_eq!(port.max_msg_sz, p2(g.get(CmdHcaCap::log_max_msg)), "max_msg_sz");
    assert_eq!(port.gid_tbl_len, g.get(CmdHcaCap::gid_table_size) as u32, "gid_tbl_len");
    // Features softhca lacks are zero (what libmlx5/DPDK would act on).
    for (name, v) in [
        ("dct", g.get(CmdHcaCap::dct)), ("cq_resize", g.get(CmdHcaCap::cq_resize)),
        ("cq_moderation", g.get(CmdHcaCap::cq_moderation)), ("cq_oi", g.get(CmdHcaCap::cq_oi)),
        ("device_memory", g.get(CmdHcaCap::device_memory)),
        ("eth_net_offloads", g.get(CmdHcaCap::eth_net_offloads)), ("sho", g.get(CmdHcaCap::sho)),
        ("imaicl", g.get(CmdHcaCap::imaicl)), ("lag_master", g.get(CmdHcaCap::lag_master)),
    ] {
        assert!(!v, "{name} must be 0");
    }
    assert_eq!(g.get(CmdHcaCap::log_max_transport_domain), 0);
    // XRC domains, XRC SRQs and XRC QPs exist: xrc, and a ConnectX-5's domain count.
    assert!(g.get(CmdHcaCap::xrc));
    assert_eq!(g.get(CmdHcaCap::log_max_xrcd), 24);
    assert_eq!(g.get(CmdHcaCap::general_obj_types), 0);
    // NIC RX flow tables exist (firmware/flow; its tests check the page).
    assert!(g.get(CmdHcaCap::nic_flow_table));
    // The other pages answer, all zero except the atomic and flow table ones.
    for ty in [hc::cap_type::ROCE, hc::cap_type::GENERAL_2] {
        assert!(cap_page(&h, ty, true)[16..].iter().all(|&b| b == 0), "page {ty:#x}");
    }
}

/// What the fuzzer knows exists: (kind's destroy opcode, id, uid).
type Known = Vec<(u16, u32, u16)>;

fn destroy_op(create: u16) -> Option<u16> {
    Some(match create {
        op::ALLOC_PD => op::DEALLOC_PD,
        op::ALLOC_UAR => op::DEALLOC_UAR,
        op::CREATE_CQ => op::DESTROY_CQ,
        op::CREATE_QP => op::DESTROY_QP,
        op::CREATE_MKEY => op::DESTROY_MKEY,
        op::ALLOC_XRCD => op::DEALLOC_XRCD,
        _ => return None,
    })
}

fn pick(rng: &mut SmallRng, known: &Known, kind: u16, uid: u16) -> u32 {
    let mine: Vec<u32> = known.iter().filter(|k| k.0 == kind && k.2 == uid).map(|k| k.1).collect();
    if mine.is_empty() || rng.gen_ratio(1, 10) {
        rng.gen::<u32>() & 0xff_ffff
    } else {
        mine[rng.gen_range(0..mine.len())]
    }
}

/// A valid-looking inbox for a random command, naming known objects.
fn template(rng: &mut SmallRng, known: &Known) -> Vec<u8> {
    let uid = rng.gen_range(0..3u16);
    let pd = pick(rng, known, op::DEALLOC_PD, uid);
    let uar = pick(rng, known, op::DEALLOC_UAR, uid);
    let cq = pick(rng, known, op::DESTROY_CQ, uid);
    let qp = pick(rng, known, op::DESTROY_QP, uid);
    match rng.gen_range(0..16) {
        0 => inbox::<QueryHcaCapIn>(op::QUERY_HCA_CAP, uid, |v| {
            v.set(QueryHcaCapIn::op_mod, rng.gen_range(0..0x50));
        }),
        1 => plain(op::ALLOC_PD, uid),
        2 => plain(op::ALLOC_UAR, uid),
        3 => cq_in(uid, uar, rng.gen_range(0..24)),
        4 => qp_in(uid, [q::st::RC, q::st::UD, q::st::UC][rng.gen_range(0..3)], pd, cq, uar),
        5 => mkey_in(uid, pd, access_mode::MTT),
        6 => with_id(op::DEALLOC_PD, uid, pd),
        7 => with_id(op::DEALLOC_UAR, uid, uar),
        8 => with_id(op::DESTROY_CQ, uid, cq),
        9 => with_id(op::DESTROY_QP, uid, qp),
        10 => with_id(op::DESTROY_MKEY, uid, pick(rng, known, op::DESTROY_MKEY, uid)),
        11 => with_id(op::QUERY_QP, uid, qp),
        _ => {
            let ops = [op::RST2INIT_QP, op::INIT2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP, op::RTS2RTS_QP,
                       op::SQERR2RTS_QP, op::QP_2ERR, op::QP_2RST];
            transition(ops[rng.gen_range(0..ops.len())], uid, qp)
        }
    }
}

fn mutate(rng: &mut SmallRng, b: &mut Vec<u8>) {
    for _ in 0..rng.gen_range(0..4) {
        match rng.gen_range(0..5) {
            0 if !b.is_empty() => {
                let i = rng.gen_range(0..b.len());
                b[i] ^= 1 << rng.gen_range(0..8);
            }
            1 if !b.is_empty() => {
                let i = rng.gen_range(0..b.len());
                b[i] = rng.gen();
            }
            2 => b.truncate(rng.gen_range(0..=b.len())),
            3 => b.extend((0..rng.gen_range(0..64)).map(|_| rng.gen::<u8>())),
            _ if b.len() >= 4 => b[2..4].copy_from_slice(&rng.gen_range(0..4u16).to_be_bytes()),
            _ => {}
        }
    }
}

#[test]
fn firmware_fuzz_100k_mailboxes() {
    let h: Arc<Hca> = Hca::for_tests();
    // Mutated addresses must not reach memory this test does not own: the engine would
    // read a QP's doorbell record there when a fuzzed MODIFY_QP flushes it.
    h.confine_dma(arena()..arena() + (1 << 20));
    let fw = h.firmware();
    let seed = 0x5eed_f00d_u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut known: Known = Vec::new();
    let mut oks = 0usize;
    let mut out = vec![0u8; OUT];
    for i in 0..100_000 {
        let mut inb = if rng.gen_ratio(1, 10) {
            let mut r: Vec<u8> = (0..rng.gen_range(0..0x1200)).map(|_| rng.gen()).collect();
            if r.len() >= 2 && rng.gen_bool(0.5) {
                let known_ops = [op::QUERY_HCA_CAP, op::CREATE_QP, op::CREATE_CQ, op::CREATE_MKEY, op::RST2INIT_QP];
                r[..2].copy_from_slice(&known_ops[rng.gen_range(0..known_ops.len())].to_be_bytes());
            }
            r
        } else {
            let mut t = template(&mut rng, &known);
            if rng.gen_ratio(1, 2) {
                mutate(&mut rng, &mut t);
            }
            t
        };
        // Keep the population bounded: past 3000 objects, only destroys.
        if known.len() > 3000 {
            let (d, id, uid) = known[rng.gen_range(0..known.len())];
            inb = with_id(d, uid, id);
        }
        let outlen = if rng.gen_ratio(1, 20) { rng.gen_range(0..OUT) } else { OUT };
        let o = fw.exec(&inb, &mut out[..outlen]);
        if outlen >= 16 {
            assert_eq!(out[0], o.status, "iteration {i} (seed {seed:#x}): status in the outbox");
        }
        if !o.is_ok() {
            assert_ne!(o.syndrome, 0, "iteration {i}: a failure carries a syndrome");
            continue;
        }
        oks += 1;
        let opcode = u16::from_be_bytes([inb[0], inb[1]]);
        let uid = u16::from_be_bytes([inb[2], inb[3]]);
        if let Some(d) = destroy_op(opcode) {
            known.push((d, id_of(&out), uid));
        } else if matches!(opcode, op::DEALLOC_PD | op::DEALLOC_UAR | op::DESTROY_CQ | op::DESTROY_QP | op::DESTROY_MKEY | op::DEALLOC_XRCD) {
            let id = id_of(&inb);
            let before = known.len();
            known.retain(|k| !(k.0 == opcode && k.1 == id && k.2 == uid));
            assert_eq!(before - known.len(), 1, "iteration {i}: a destroy that succeeded removed one known object");
        }
    }
    // Every object the firmware holds is one the outboxes announced: nothing leaked.
    assert_eq!(fw.counts().total(), known.len(), "seed {seed:#x}");
    assert!(oks > 10_000 && !known.is_empty(), "the fuzzer reached the commands ({oks} succeeded)");
    // Destroy everything, users first.
    for kind in [op::DESTROY_QP, op::DESTROY_MKEY, op::DESTROY_CQ, op::DEALLOC_PD, op::DEALLOC_UAR, op::DEALLOC_XRCD] {
        for &(d, id, uid) in known.iter().filter(|k| k.0 == kind) {
            let (o, _) = exec(&h, &with_id(d, uid, id));
            assert!(o.is_ok(), "destroy {d:#x} {id:#x} uid {uid}: {o:?}");
        }
    }
    assert_eq!(fw.counts().total(), 0);
}

#[test]
fn firmware_destroy_inboxes_read_the_right_field() {
    // DestroyCqIn/DestroyQpIn/DeallocPdIn/... all name their object at bit 0x48, which
    // the tests' `with_id` relies on: check it against the layouts.
    assert_eq!(DestroyCqIn::cqn.off(), 0x48);
    assert_eq!(DestroyQpIn::qpn.off(), 0x48);
    assert_eq!(DeallocPdIn::pd.off(), 0x48);
    assert_eq!(DeallocUarIn::uar.off(), 0x48);
    assert_eq!(DestroyMkeyIn::mkey_index.off(), 0x48);
    assert_eq!(QueryQpIn::qpn.off(), 0x48);
    assert_eq!(Rst2initQpIn::qpn.off(), 0x48);
}

#[test]
fn caps_agree_with_get_context() {
    use uverbs::sys::ids::{device as dev, object, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
    use uverbs::sys::ioctl::UVERBS_ATTR_F_MANDATORY as M;
    use uverbs::sys::mlx5::{AllocUcontextReqV2, AllocUcontextResp};
    use uverbs::sys::verbs::RDMA_DRIVER_MLX5;
    use uverbs::sys::{IoctlAttr, IoctlHdr};
    use uverbs::Endpoint;
    use zerocopy::{FromBytes, IntoBytes};

    let h = Hca::for_tests();
    let f = h.open();
    // libmlx5's request with CQE version 1 (what a stock open sends, DevX aside).
    let req = AllocUcontextReqV2 { total_num_bfregs: 16, num_low_latency_bfregs: 4, max_cqe_version: 1,
                                   ..Default::default() };
    let mut resp = [0u8; 72];
    let attrs = [
        IoctlAttr { attr_id: UVERBS_ATTR_UHW_IN, len: 32, flags: M, data: req.as_bytes().as_ptr() as u64, ..Default::default() },
        IoctlAttr { attr_id: UVERBS_ATTR_UHW_OUT, len: 72, flags: M, data: resp.as_mut_ptr() as u64, ..Default::default() },
    ];
    let hdr = IoctlHdr { length: 24 + 32, object_id: object::DEVICE, method_id: dev::GET_CONTEXT, num_attrs: 2,
                         driver_id: RDMA_DRIVER_MLX5, ..Default::default() };
    let mut buf = hdr.as_bytes().to_vec();
    for x in &attrs {
        buf.extend_from_slice(x.as_bytes());
    }
    f.ioctl(buf.as_mut_ptr() as u64).expect("GET_CONTEXT");
    let r = AllocUcontextResp::read_from_bytes(&resp[..]).unwrap();
    let out = cap_page(&h, hc::cap_type::GENERAL, true);
    let g = hc::general(View::<QueryHcaCapOut>::new(&out).unwrap());
    // mlx5_ib_alloc_ucontext's response (Linux 6.1 drivers/infiniband/hw/mlx5/main.c).
    assert_eq!(r.qp_tab_size, 1 << g.get(CmdHcaCap::log_max_qp), "qp_tab_size = 1 << log_max_qp");
    let bf = if g.get(CmdHcaCap::bf) { 1 << g.get(CmdHcaCap::log_bf_reg_size) } else { 0 };
    assert_eq!(r.bf_reg_size, bf, "bf_reg_size = 1 << log_bf_reg_size");
    assert_eq!(r.max_sq_desc_sz, g.get(CmdHcaCap::max_wqe_sz_sq), "max_sq_desc_sz");
    assert_eq!(r.max_rq_desc_sz, g.get(CmdHcaCap::max_wqe_sz_rq), "max_rq_desc_sz");
    assert_eq!(r.max_send_wqebb, 1 << g.get(CmdHcaCap::log_max_qp_sz), "max_send_wqebb");
    assert_eq!(r.max_recv_wr, 1 << g.get(CmdHcaCap::log_max_qp_sz), "max_recv_wr");
    assert_eq!(r.max_srq_recv_wr, 1 << g.get(CmdHcaCap::log_max_srq_sz), "max_srq_recv_wr");
    assert_eq!(r.num_ports as u8, g.get(CmdHcaCap::num_ports), "num_ports");
    assert_eq!(r.cqe_version, g.get(CmdHcaCap::cqe_version).min(1), "cqe_version = min(cap, requested 1)");
    // uar_4k with 4 KiB UARs: one UAR per system page, log_uar_size 12.
    assert!(g.get(CmdHcaCap::uar_4k));
    assert_eq!((r.log_uar_size, r.num_uars_per_page), (12 + g.get(CmdHcaCap::uar_sz) as u32, 1));
}
