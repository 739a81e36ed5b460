//! softhca's firmware: the PRM command interface a ConnectX has between its driver
//! and the device.
//!
//! A driver (mlx5_core, or a DevX user through mlx5_ib) hands a ConnectX a command
//! inbox — the opcode, the issuer's `uid` and `op_mod` in a 16-byte header, then the
//! command's fields as PRM bit layouts ([`prm::cmd`]) — and gets an outbox back: a
//! status byte, a 32-bit syndrome, and the answer. [`Firmware::exec`] is that, on
//! firmware objects kept per HCA, each recorded with the uid that created it. What it
//! executes:
//!
//! | command | file |
//! |---|---|
//! | QUERY_HCA_CAP (general, atomic, RoCE, NIC flow table, cap2 pages; max and current) | [`caps`] |
//! | CREATE_UCTX, DESTROY_UCTX (DevX user contexts: uids) | [`uctx`] |
//! | CREATE_UMEM, DESTROY_UMEM (user memory by page list) | `umem.rs` |
//! | ALLOC_PD, DEALLOC_PD | `pd.rs` |
//! | ALLOC_UAR, DEALLOC_UAR (device pages) | `uar.rs` |
//! | CREATE_CQ, DESTROY_CQ, QUERY_CQ, MODIFY_CQ | `cq.rs` |
//! | CREATE_QP, DESTROY_QP, QUERY_QP, RST2INIT, INIT2INIT, INIT2RTR, RTR2RTS, RTS2RTS, SQERR2RTS, 2ERR, 2RST | `qp.rs`, `qpc.rs` |
//! | CREATE_SRQ, DESTROY_SRQ, QUERY_SRQ, ARM_RQ (basic SRQs, as an ISSI 0 device has them) | `srq.rs` |
//! | CREATE_XRC_SRQ, DESTROY_XRC_SRQ (an SRQ of an XRC domain, with its CQ and user index) | `srq.rs` |
//! | ALLOC_XRCD, DEALLOC_XRCD (XRC domains) | `xrcd.rs` |
//! | CREATE_MKEY, DESTROY_MKEY | `mkey.rs` |
//! | CREATE_TIS, DESTROY_TIS; CREATE_SQ, MODIFY_SQ, DESTROY_SQ; CREATE_RQ, MODIFY_RQ, DESTROY_RQ; CREATE_TIR (direct), DESTROY_TIR (raw Ethernet queues; a verbs RAW_PACKET QP is built of them: `raw_qp.rs`) | `tis.rs`, `sq.rs`, `rq.rs`, `tir.rs` |
//! | CREATE/DESTROY/QUERY_FLOW_TABLE, SET_FLOW_TABLE_ROOT, CREATE/DESTROY_FLOW_GROUP, SET/QUERY/DELETE_FLOW_TABLE_ENTRY, ALLOC/DEALLOC/QUERY_FLOW_COUNTER (NIC RX steering) | `flow/` |
//!
//! Firmware objects are the device's objects. A CQ or QP carries memory: its ring and
//! doorbell record (in a UMEM, or at the page list's address) are resolved, checked
//! mapped, and handed to the device half as the [`crate::objects::Cq`] /
//! [`crate::objects::Qp`] it runs; every QP transition turns the merged context into
//! [`crate::objects::QpAttrs`] and tells the device half. A PD is the
//! [`crate::objects::Pd`] keys are checked against; a UAR is a device page. The kernel
//! half's verbs are these same commands, as mlx5_ib's are: ALLOC_PD, CREATE_CQ /
//! DESTROY_CQ (`kernel/methods/cq.rs` builds the inbox as `create_cq_user` does),
//! CREATE_QP / the transition commands / 2RST + DESTROY_QP (`kernel/methods/qp.rs`, as
//! `create_user_qp` and `__mlx5_ib_modify_qp` do), all under the context's uid (0
//! without DevX). The firmware's object IS the verbs object: what the kernel half
//! keeps beside the context (user handle, event channels, the requested caps; a
//! modify's attributes the PRM context does not hold) rides along as a `Host`.
//! So a QP made by ibv_create_qp and one made through DevX are the same kind of
//! object, a DevX QUERY_QP on a verbs QP answers, and DevX may move it. The kernel's
//! own checks (and errnos) come first; a firmware refusal reaches the verbs as the
//! errno `mlx5_cmd_check` makes of its status ([`status::errno_of`]). DevX cannot
//! destroy a verbs object: a raw DESTROY_* is no general command (devx.c: EINVAL) and
//! a verbs object has no DEVX_OBJ handle.
//! The kernel half's DevX ([`crate::kernel::methods`]'s `devx.rs`) stamps each
//! context's uid into its commands.
//!
//! How it answers what a ConnectX refuses ([`status`] has the statuses, softhca's
//! syndromes, and the errno Linux's mlx5 command layer makes of each):
//! - an opcode it does not execute: BAD_OP;
//! - an inbox shorter than the command, an outbox shorter than the answer:
//!   BAD_INP_LEN, BAD_OUTP_LEN (an outbox shorter than the 16-byte header cannot
//!   even hold the status: the [`Outcome`] returned is then the only answer); an inbox
//!   longer than the command is accepted, its tail ignored unless it is a page list;
//! - an op_mod the command does not have, a field out of range, a context naming a
//!   PD/CQ/UMEM that does not exist or belongs to another uid, a ring softhca cannot
//!   reach: BAD_PARAM (a UAR page may be any context's: see `uar.rs`);
//! - a command on an object that does not exist: BAD_RES; on another uid's object:
//!   BAD_PARAM (the object is left alone);
//! - a QP transition the QP's state does not have: BAD_RES_STATE, with the rules of
//!   [`crate::kernel::qp_state`] (mlx5's per-transition command table, which the
//!   verbs' MODIFY_QP uses too);
//! - a destroy of an object another one uses (a CQ, PD or UMEM under a QP, a UMEM under
//!   a CQ, a uid that still owns objects): RES_BUSY, and the object stays. Linux's
//!   `cmd_status_to_err` makes that EBUSY, the errno DEVX_UMEM_DEREG of a UMEM in use
//!   gives and the one an RDMA user expects from every destroy of a busy object.
//!   (The PRM's RES_BUSY is "resource busy"; BAD_RES_STATE would be EINVAL.)
//!
//! The uid in a header is not checked against the live user contexts: the kernel
//! writes it, so a DevX user cannot choose it; commands with uid 0 are the kernel's.
//!
//! Object numbers come from the HCA's own pools (QPN, CQN, PDN, mkey index), the
//! ones the verbs use, so a firmware object and a verbs object never share a number.
//!
//! Not yet: the verbs' transition commands carry `opt_param_mask` 0 (this firmware
//! applies every field a transition carries, so mlx5_ib's optional-parameter table
//! is not modelled); the verbs' QUERY_QP answers from the device half's attributes,
//! not from a QUERY_QP (the verbs' attributes include what the context does not
//! hold); reg_mr is not CREATE_MKEY yet (mkeys carry no memory); DevX events.

pub mod caps;
mod cq;
mod flow;
mod mkey;
mod pd;
mod qp;
mod qpc;
mod raw_qp;
mod rq;
mod sq;
mod srq;
pub mod status;
mod tir;
mod tis;
mod uar;
pub mod uctx;
mod umem;
mod xrcd;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use prm::bits::{Layout, View, ViewMut};
use prm::cmd::header::{MboxIn, MboxOut};
use prm::cmd::{self as c, opcode as op};

use crate::hca::Hca;

pub(crate) use cq::CqHost;
pub(crate) use qp::{QpHost, RQ_TYPE_SRQ};
pub(crate) use srq::SrqHost;
pub(crate) use qpc::write_attrs as write_qp_attrs;
pub use status::Outcome;
use status::syndrome;

type R<T> = Result<T, Outcome>;

/// One firmware object: who made it, and how many other objects use it.
#[derive(Debug)]
struct Obj<T> {
    uid: u16,
    /// Objects that name this one (QPs naming a CQ, ...): a destroy waits for 0.
    users: u32,
    v: T,
}

/// The firmware's objects on one HCA.
#[derive(Debug, Default)]
pub(crate) struct Objects {
    pds: BTreeMap<u32, Obj<std::sync::Arc<crate::objects::Pd>>>,
    uars: BTreeMap<u32, Obj<()>>,
    cqs: BTreeMap<u32, Obj<cq::CqObj>>,
    qps: BTreeMap<u32, Obj<qp::QpObj>>,
    srqs: BTreeMap<u32, Obj<srq::SrqObj>>,
    mkeys: BTreeMap<u32, Obj<mkey::MkeyObj>>,
    umems: BTreeMap<u32, Obj<umem::UmemObj>>,
    xrcds: BTreeMap<u32, Obj<()>>,
    /// Raw Ethernet queues and their transport interfaces (SQ and RQ numbers come from
    /// the QPN pool; TIS and TIR numbers are their own, from 1).
    sqs: BTreeMap<u32, Obj<sq::SqObj>>,
    rqs: BTreeMap<u32, Obj<rq::RqObj>>,
    tiss: BTreeMap<u32, Obj<tis::TisObj>>,
    tirs: BTreeMap<u32, Obj<tir::TirObj>>,
    /// Flow tables, groups and counters (the steering engine and their owners).
    flow: flow::FlowObjs,
    /// DevX user contexts (their uids).
    uctxs: BTreeSet<u16>,
    /// The device's own user context for whitelisted commands of contexts opened
    /// without DevX (mlx5_ib's `devx_whitelist_uid`); not counted in [`Counts`].
    whitelist: Option<u16>,
}

impl Objects {
    /// Whether any object belongs to `uid`.
    fn owned_by(&self, uid: u16) -> bool {
        self.pds.values().any(|o| o.uid == uid)
            || self.uars.values().any(|o| o.uid == uid)
            || self.cqs.values().any(|o| o.uid == uid)
            || self.qps.values().any(|o| o.uid == uid)
            || self.srqs.values().any(|o| o.uid == uid)
            || self.mkeys.values().any(|o| o.uid == uid)
            || self.umems.values().any(|o| o.uid == uid)
            || self.xrcds.values().any(|o| o.uid == uid)
            || self.sqs.values().any(|o| o.uid == uid)
            || self.rqs.values().any(|o| o.uid == uid)
            || self.tiss.values().any(|o| o.uid == uid)
            || self.tirs.values().any(|o| o.uid == uid)
            || self.flow.owned_by(uid)
    }
}

/// How many firmware objects of each kind exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub pd: usize,
    pub uar: usize,
    pub cq: usize,
    pub qp: usize,
    pub srq: usize,
    pub mkey: usize,
    pub umem: usize,
    pub uctx: usize,
    pub xrcd: usize,
}

impl Counts {
    pub fn total(&self) -> usize {
        self.pd + self.uar + self.cq + self.qp + self.srq + self.mkey + self.umem + self.uctx + self.xrcd
    }
}

/// The firmware of one HCA ([`Hca::firmware`]).
#[derive(Debug, Clone, Copy)]
pub struct Firmware<'a> {
    hca: &'a Hca,
    objects: &'a Mutex<Objects>,
}

/// One command being executed.
struct Cmd<'a> {
    hca: &'a Hca,
    objs: &'a mut Objects,
    uid: u16,
    inbox: &'a [u8],
    outbox: &'a mut [u8],
    /// What the kernel half hands along with its own commands ([`Host`]).
    host: Option<Host>,
}

/// The kernel half's own state of an object it creates through a command (mlx5_ib's
/// `mlx5_ib_cq` around the `mlx5_core_cq`): carried into the firmware's object, since
/// that object is the one the uverbs handle names. DevX commands carry none.
#[derive(Debug)]
pub(crate) enum Host {
    Cq(cq::CqHost),
    Qp(qp::QpHost),
    Srq(srq::SrqHost),
    /// The verbs' MODIFY_QP: the attributes `__mlx5_ib_modify_qp` built, with what the
    /// PRM context does not hold (the requested access flags and responder depth
    /// before rounding, the path migration state, the SQD notification, the rate
    /// limit and static rate). The device half gets these rather than the context's
    /// conversion, so the verbs' QUERY_QP reads back what the verbs set.
    QpAttrs(Box<crate::objects::QpAttrs>),
}

/// The EQ number of completion vector 0 (`mlx5_vector2eqn`): EQs 0..3 are mlx5_core's
/// async, command and page-request EQs; DEVX_QUERY_EQN answers from here too.
pub(crate) const FIRST_COMP_EQN: u32 = 3;

impl<'a> Cmd<'a> {
    /// The inbox as `L` (its length was checked against the command's).
    fn input<L: Layout>(&self) -> R<View<'a, L>> {
        View::new(self.inbox).map_err(|_| Outcome::err(c::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN))
    }

    /// The outbox as `L`.
    fn output<L: Layout>(&mut self) -> R<ViewMut<'_, L>> {
        ViewMut::new(self.outbox).map_err(|_| Outcome::err(c::status::BAD_OUTP_LEN_ERR, syndrome::OUTBOX_LEN))
    }
}

/// One command the firmware executes.
struct Entry {
    opcode: u16,
    inlen: usize,
    outlen: usize,
    /// Whether op_mod is the command's (QUERY_HCA_CAP's page); elsewhere it must be 0.
    op_mod: bool,
    run: fn(&mut Cmd<'_>) -> R<()>,
}

const fn entry(opcode: u16, inlen: usize, outlen: usize, run: fn(&mut Cmd<'_>) -> R<()>) -> Entry {
    Entry { opcode, inlen, outlen, op_mod: false, run }
}

/// The command table.
const COMMANDS: &[Entry] = &[
    Entry {
        opcode: op::QUERY_HCA_CAP,
        inlen: c::hca_cap::QueryHcaCapIn::BYTES,
        outlen: c::hca_cap::QueryHcaCapOut::BYTES,
        op_mod: true,
        run: caps::query_hca_cap,
    },
    entry(op::ALLOC_PD, c::pd::AllocPdIn::BYTES, c::pd::AllocPdOut::BYTES, pd::alloc),
    entry(op::DEALLOC_PD, c::pd::DeallocPdIn::BYTES, c::pd::DeallocPdOut::BYTES, pd::dealloc),
    entry(op::ALLOC_UAR, c::uar::AllocUarIn::BYTES, c::uar::AllocUarOut::BYTES, uar::alloc),
    entry(op::DEALLOC_UAR, c::uar::DeallocUarIn::BYTES, c::uar::DeallocUarOut::BYTES, uar::dealloc),
    entry(op::CREATE_CQ, c::cq::CreateCqIn::BYTES, c::cq::CreateCqOut::BYTES, cq::create),
    entry(op::DESTROY_CQ, c::cq::DestroyCqIn::BYTES, MboxOut::BYTES, cq::destroy),
    entry(op::QUERY_CQ, c::cq::QueryCqIn::BYTES, c::cq::QueryCqOut::BYTES, cq::query),
    Entry {
        opcode: op::MODIFY_CQ,
        inlen: c::cq::ModifyCqIn::BYTES,
        outlen: MboxOut::BYTES,
        op_mod: true,
        run: cq::modify,
    },
    entry(op::CREATE_QP, c::qp::CreateQpIn::BYTES, c::qp::CreateQpOut::BYTES, qp::create),
    entry(op::DESTROY_QP, c::qp::DestroyQpIn::BYTES, MboxOut::BYTES, qp::destroy),
    entry(op::QUERY_QP, c::qp::QueryQpIn::BYTES, c::qp::QueryQpOut::BYTES, qp::query),
    entry(op::RST2INIT_QP, c::qp::Rst2initQpIn::BYTES, c::qp::Rst2initQpOut::BYTES, qp::modify),
    entry(op::INIT2INIT_QP, c::qp::Rst2initQpIn::BYTES, c::qp::Rst2initQpOut::BYTES, qp::modify),
    entry(op::INIT2RTR_QP, c::qp::Init2rtrQpIn::BYTES, c::qp::Init2rtrQpOut::BYTES, qp::modify),
    entry(op::RTR2RTS_QP, c::qp::Rtr2rtsQpIn::BYTES, c::qp::Rtr2rtsQpOut::BYTES, qp::modify),
    entry(op::RTS2RTS_QP, c::qp::Rts2rtsQpIn::BYTES, c::qp::Rts2rtsQpOut::BYTES, qp::modify),
    entry(op::SQERR2RTS_QP, c::qp::Rtr2rtsQpIn::BYTES, c::qp::Rtr2rtsQpOut::BYTES, qp::modify),
    entry(op::QP_2ERR, c::qp::Qp2errIn::BYTES, MboxOut::BYTES, qp::modify),
    entry(op::QP_2RST, c::qp::Qp2rstIn::BYTES, MboxOut::BYTES, qp::modify),
    entry(op::CREATE_SRQ, c::srq::CreateSrqIn::BYTES, c::srq::CreateSrqOut::BYTES, srq::create),
    entry(op::DESTROY_SRQ, c::srq::DestroySrqIn::BYTES, MboxOut::BYTES, srq::destroy),
    entry(op::QUERY_SRQ, c::srq::QuerySrqIn::BYTES, c::srq::QuerySrqOut::BYTES, srq::query),
    Entry {
        opcode: op::ARM_RQ,
        inlen: c::srq::ArmRqIn::BYTES,
        outlen: MboxOut::BYTES,
        op_mod: true,
        run: srq::arm,
    },
    entry(op::CREATE_XRC_SRQ, c::xrc_srq::CreateXrcSrqIn::BYTES, c::xrc_srq::CreateXrcSrqOut::BYTES, srq::create_xrc),
    entry(op::DESTROY_XRC_SRQ, c::xrc_srq::DestroyXrcSrqIn::BYTES, MboxOut::BYTES, srq::destroy_xrc),
    entry(op::ALLOC_XRCD, c::xrcd::AllocXrcdIn::BYTES, c::xrcd::AllocXrcdOut::BYTES, xrcd::alloc),
    entry(op::DEALLOC_XRCD, c::xrcd::DeallocXrcdIn::BYTES, MboxOut::BYTES, xrcd::dealloc),
    entry(op::CREATE_MKEY, c::mkey::CreateMkeyIn::BYTES, c::mkey::CreateMkeyOut::BYTES, mkey::create),
    entry(op::DESTROY_MKEY, c::mkey::DestroyMkeyIn::BYTES, c::mkey::DestroyMkeyOut::BYTES, mkey::destroy),
    entry(op::CREATE_TIS, c::tis::CreateTisIn::BYTES, c::tis::CreateTisOut::BYTES, tis::create),
    entry(op::DESTROY_TIS, c::tis::DestroyTisIn::BYTES, MboxOut::BYTES, tis::destroy),
    entry(op::CREATE_SQ, c::sq::CreateSqIn::BYTES, c::sq::CreateSqOut::BYTES, sq::create),
    entry(op::MODIFY_SQ, c::sq::ModifySqIn::BYTES, MboxOut::BYTES, sq::modify),
    entry(op::DESTROY_SQ, c::sq::DestroySqIn::BYTES, MboxOut::BYTES, sq::destroy),
    entry(op::CREATE_RQ, c::rq::CreateRqIn::BYTES, c::rq::CreateRqOut::BYTES, rq::create),
    entry(op::MODIFY_RQ, c::rq::ModifyRqIn::BYTES, MboxOut::BYTES, rq::modify),
    entry(op::DESTROY_RQ, c::rq::DestroyRqIn::BYTES, MboxOut::BYTES, rq::destroy),
    entry(op::CREATE_TIR, c::tir::CreateTirIn::BYTES, c::tir::CreateTirOut::BYTES, tir::create),
    entry(op::DESTROY_TIR, c::tir::DestroyTirIn::BYTES, MboxOut::BYTES, tir::destroy),
    entry(op::CREATE_UCTX, c::uctx::CreateUctxIn::BYTES, c::uctx::CreateUctxOut::BYTES, uctx::create),
    entry(op::DESTROY_UCTX, c::uctx::DestroyUctxIn::BYTES, MboxOut::BYTES, uctx::destroy),
    entry(op::CREATE_UMEM, c::umem::CreateUmemIn::BYTES, c::umem::CreateUmemOut::BYTES, umem::create),
    entry(op::DESTROY_UMEM, c::umem::DestroyUmemIn::BYTES, MboxOut::BYTES, umem::destroy),
    entry(op::CREATE_FLOW_TABLE, c::flow::table::CreateFlowTableIn::BYTES, c::flow::table::CreateFlowTableOut::BYTES, flow::create_table),
    entry(op::DESTROY_FLOW_TABLE, c::flow::table::DestroyFlowTableIn::BYTES, MboxOut::BYTES, flow::destroy_table),
    entry(op::QUERY_FLOW_TABLE, c::flow::table::QueryFlowTableIn::BYTES, c::flow::table::QueryFlowTableOut::BYTES, flow::query_table),
    entry(op::SET_FLOW_TABLE_ROOT, c::flow::table::SetFlowTableRootIn::BYTES, MboxOut::BYTES, flow::set_root),
    entry(op::CREATE_FLOW_GROUP, c::flow::group::CreateFlowGroupIn::BYTES, c::flow::group::CreateFlowGroupOut::BYTES, flow::create_group),
    entry(op::DESTROY_FLOW_GROUP, c::flow::group::DestroyFlowGroupIn::BYTES, MboxOut::BYTES, flow::destroy_group),
    // op_mod 0 creates, 1 modifies.
    Entry {
        opcode: op::SET_FLOW_TABLE_ENTRY,
        inlen: c::flow::entry::SetFteIn::BYTES,
        outlen: MboxOut::BYTES,
        op_mod: true,
        run: flow::set_entry,
    },
    entry(op::QUERY_FLOW_TABLE_ENTRY, c::flow::entry::QueryFteIn::BYTES, c::flow::entry::QueryFteOut::BYTES, flow::query_entry),
    entry(op::DELETE_FLOW_TABLE_ENTRY, c::flow::entry::DeleteFteIn::BYTES, MboxOut::BYTES, flow::delete_entry),
    entry(op::ALLOC_FLOW_COUNTER, c::flow::counter::AllocFlowCounterIn::BYTES, c::flow::counter::AllocFlowCounterOut::BYTES, flow::alloc_counter),
    entry(op::DEALLOC_FLOW_COUNTER, c::flow::counter::DeallocFlowCounterIn::BYTES, MboxOut::BYTES, flow::dealloc_counter),
    entry(
        op::QUERY_FLOW_COUNTER,
        c::flow::counter::QueryFlowCounterIn::BYTES,
        c::flow::counter::QueryFlowCounterOut::BYTES + c::flow::counter::TrafficCounter::BYTES,
        flow::query_counter,
    ),
];

impl<'a> Firmware<'a> {
    pub(crate) fn new(hca: &'a Hca, objects: &'a Mutex<Objects>) -> Firmware<'a> {
        Firmware { hca, objects }
    }

    /// Executes one command: reads `inbox`, writes the answer into `outbox` (zeroed
    /// first, then the status and syndrome in its header when it holds one), and
    /// returns the status and syndrome. Never panics, whatever the bytes.
    pub fn exec(&self, inbox: &[u8], outbox: &mut [u8]) -> Outcome {
        self.exec_host(inbox, outbox, None)
    }

    /// [`Firmware::exec`] of one of the kernel half's commands, with what the kernel
    /// keeps of the object it creates.
    pub(crate) fn exec_host(&self, inbox: &[u8], outbox: &mut [u8], host: Option<Host>) -> Outcome {
        outbox.fill(0);
        let outcome = match self.run(inbox, outbox, host) {
            Ok(()) => Outcome::OK,
            Err(e) => e,
        };
        if let Ok(mut hdr) = ViewMut::<MboxOut>::new(outbox) {
            hdr.set(MboxOut::status, outcome.status).set(MboxOut::syndrome, outcome.syndrome);
        }
        outcome
    }

    fn run(&self, inbox: &[u8], outbox: &mut [u8], host: Option<Host>) -> R<()> {
        let hdr = View::<MboxIn>::new(inbox)
            .map_err(|_| Outcome::err(c::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN))?;
        if outbox.len() < MboxOut::BYTES {
            return Err(Outcome::err(c::status::BAD_OUTP_LEN_ERR, syndrome::OUTBOX_LEN));
        }
        let opcode = hdr.get(MboxIn::opcode);
        let Some(e) = COMMANDS.iter().find(|e| e.opcode == opcode) else {
            return Err(Outcome::err(c::status::BAD_OP_ERR, syndrome::UNKNOWN_OPCODE));
        };
        if inbox.len() < e.inlen {
            return Err(Outcome::err(c::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN));
        }
        if outbox.len() < e.outlen {
            return Err(Outcome::err(c::status::BAD_OUTP_LEN_ERR, syndrome::OUTBOX_LEN));
        }
        // DESTROY_CQ/QP keep op_mod's bits reserved: zero all the same.
        if !e.op_mod && hdr.get(MboxIn::op_mod) != 0 {
            return Err(Outcome::err(c::status::BAD_PARAM_ERR, syndrome::BAD_OP_MOD));
        }
        let mut objs = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let mut cmd = Cmd { hca: self.hca, objs: &mut objs, uid: hdr.get(MboxIn::uid), inbox, outbox, host };
        (e.run)(&mut cmd)
    }

    /// The whitelist uid (`mlx5_ib_devx_init`): one user context of the device, made
    /// on first use, under which contexts without DevX may still run QUERY_HCA_CAP and
    /// the vport queries (`devx_get_uid`).
    pub fn whitelist_uid(&self) -> Option<u16> {
        if let Some(u) = self.objects.lock().unwrap_or_else(|p| p.into_inner()).whitelist {
            return Some(u);
        }
        let mut inb = vec![0u8; c::uctx::CreateUctxIn::BYTES];
        ViewMut::<MboxIn>::new(&mut inb).ok()?.set(MboxIn::opcode, op::CREATE_UCTX);
        let mut out = [0u8; c::uctx::CreateUctxOut::BYTES];
        if !self.exec(&inb, &mut out).is_ok() {
            return None;
        }
        let uid = View::<c::uctx::CreateUctxOut>::new(&out).ok()?.get(c::uctx::CreateUctxOut::uid);
        let mut o = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        match o.whitelist {
            // Another thread won the race: give this one back.
            Some(w) => {
                o.uctxs.remove(&uid);
                Some(w)
            }
            None => {
                o.whitelist = Some(uid);
                Some(uid)
            }
        }
    }

    /// ALLOC_PD for the kernel half's verbs (`mlx5_ib_alloc_pd`): the PD the firmware
    /// made, the one its QPs and the verbs' share. The errno is mlx5_cmd_exec's.
    pub(crate) fn alloc_pd(&self, uid: u16) -> Result<std::sync::Arc<crate::objects::Pd>, nix::errno::Errno> {
        let mut inb = vec![0u8; c::pd::AllocPdIn::BYTES];
        ViewMut::<MboxIn>::new(&mut inb).map_err(|_| nix::errno::Errno::EINVAL)?
            .set(MboxIn::opcode, op::ALLOC_PD).set(MboxIn::uid, uid);
        let mut out = [0u8; c::pd::AllocPdOut::BYTES];
        let o = self.exec(&inb, &mut out);
        if let Some(e) = o.errno() {
            return Err(e);
        }
        let pdn = View::<c::pd::AllocPdOut>::new(&out).map_err(|_| nix::errno::Errno::EINVAL)?.get(c::pd::AllocPdOut::pd);
        let objs = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        objs.pds.get(&pdn).map(|o| o.v.clone()).ok_or(nix::errno::Errno::EIO)
    }

    /// A command of the kernel half (`mlx5_cmd_exec`): the outbox, or the errno
    /// `mlx5_cmd_check` makes of a failed status (see [`status::errno_of`]).
    pub(crate) fn kernel_cmd(&self, inbox: &[u8], outlen: usize, host: Option<Host>) -> Result<Vec<u8>, nix::errno::Errno> {
        let mut out = vec![0u8; outlen];
        match self.exec_host(inbox, &mut out, host).errno() {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// The device half's CQ behind firmware CQ `cqn`.
    pub(crate) fn cq(&self, cqn: u32) -> Option<std::sync::Arc<crate::objects::Cq>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).cqs.get(&cqn).map(|o| o.v.cq.clone())
    }

    /// Takes firmware CQ `cqn` out of the tables whatever uses it (the uverbs
    /// abort path, `Why::Abort`: the uverbs object goes regardless).
    pub(crate) fn forget_cq(&self, cqn: u32) {
        let gone = self.objects.lock().unwrap_or_else(|p| p.into_inner()).cqs.remove(&cqn);
        if let Some(o) = gone {
            self.hca.remove_cq(&o.v.cq);
        }
    }

    /// The device half's QP behind firmware QP `qpn`.
    pub(crate) fn qp(&self, qpn: u32) -> Option<std::sync::Arc<crate::objects::Qp>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).qps.get(&qpn).map(|o| o.v.qp.clone())
    }

    /// The device half's SRQ behind firmware SRQ `srqn`.
    pub(crate) fn srq(&self, srqn: u32) -> Option<std::sync::Arc<crate::objects::Srq>> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).srqs.get(&srqn).map(|o| o.v.srq.clone())
    }

    /// DEALLOC_PD for the kernel half (`mlx5_cmd_dealloc_pd`).
    pub(crate) fn dealloc_pd(&self, pdn: u32, uid: u16) -> Result<(), nix::errno::Errno> {
        let mut inb = vec![0u8; c::pd::DeallocPdIn::BYTES];
        ViewMut::<c::pd::DeallocPdIn>::new(&mut inb).map_err(|_| nix::errno::Errno::EINVAL)?
            .set(c::pd::DeallocPdIn::opcode, op::DEALLOC_PD).set(c::pd::DeallocPdIn::uid, uid)
            .set(c::pd::DeallocPdIn::pd, pdn);
        let mut out = [0u8; c::pd::DeallocPdOut::BYTES];
        match self.exec(&inb, &mut out).errno() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The steering engine the flow commands program: what the device half
    /// classifies received frames with.
    pub fn steering(&self) -> std::sync::Arc<crate::device::steer::Steering> {
        self.objects.lock().unwrap_or_else(|p| p.into_inner()).flow.steering.clone()
    }

    /// How many objects of each kind the firmware holds.
    pub fn counts(&self) -> Counts {
        let o = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        Counts {
            pd: o.pds.len(),
            uar: o.uars.len(),
            cq: o.cqs.len(),
            qp: o.qps.len(),
            srq: o.srqs.len(),
            xrcd: o.xrcds.len(),
            mkey: o.mkeys.len(),
            umem: o.umems.len(),
            uctx: o.uctxs.len() - usize::from(o.whitelist.is_some()),
        }
    }
}

/// The object `id` a command acts on: BAD_RES if there is none, BAD_PARAM if it is
/// another uid's.
fn target<T>(map: &mut BTreeMap<u32, Obj<T>>, id: u32, uid: u16) -> R<&mut Obj<T>> {
    let o = map.get_mut(&id).ok_or(Outcome::err(c::status::BAD_RES_ERR, syndrome::NO_OBJECT))?;
    if o.uid != uid {
        return Err(Outcome::err(c::status::BAD_PARAM_ERR, syndrome::FOREIGN_OBJECT));
    }
    Ok(o)
}

/// Checks that an object a context names exists and is the issuer's (BAD_PARAM with
/// `syn` otherwise).
fn check_named<T>(map: &BTreeMap<u32, Obj<T>>, id: u32, uid: u16, syn: u32) -> R<()> {
    match map.get(&id) {
        Some(o) if o.uid == uid => Ok(()),
        _ => Err(Outcome::err(c::status::BAD_PARAM_ERR, syn)),
    }
}

/// Adds (`+1`) or drops (`-1`) a use of a named object that was checked to exist.
fn use_named<T>(map: &mut BTreeMap<u32, Obj<T>>, id: u32, delta: i32) {
    if let Some(o) = map.get_mut(&id) {
        o.users = o.users.saturating_add_signed(delta);
    }
}

/// Removes the object `id` if the issuer owns it and nothing uses it (RES_BUSY
/// otherwise: see the module doc).
fn remove<T>(map: &mut BTreeMap<u32, Obj<T>>, id: u32, uid: u16) -> R<Obj<T>> {
    if target(map, id, uid)?.users != 0 {
        return Err(busy());
    }
    map.remove(&id).ok_or(Outcome::err(c::status::BAD_RES_ERR, syndrome::NO_OBJECT))
}

/// The smallest free number of a table numbered from 1 (TIS, TIR).
fn next_free<T>(map: &BTreeMap<u32, Obj<T>>) -> u32 {
    let mut n = 1;
    for &k in map.keys() {
        if k != n {
            break;
        }
        n += 1;
    }
    n
}

/// A destroy of an object another one still uses.
fn busy() -> Outcome {
    Outcome::err(c::status::RES_BUSY, syndrome::IN_USE)
}

fn exhausted() -> Outcome {
    Outcome::err(c::status::NO_RES_ERR, syndrome::EXHAUSTED)
}

fn bad_param(syn: u32) -> Outcome {
    Outcome::err(c::status::BAD_PARAM_ERR, syn)
}

/// A firmware bug (a stored context of the wrong size): INT_ERR, never a panic.
fn internal() -> Outcome {
    Outcome::err(c::status::INT_ERR, syndrome::INTERNAL)
}
