//! The per-file object table (`ufile->idr` and `ufile->uobjects`).
//!
//! Every uverbs file has one handle space shared by all object types: a new object gets
//! the lowest free handle starting at 0 (the kernel's `xa_alloc`), a freed handle is
//! reused, and a failed create gives its handle back. A handle is reserved when creation
//! starts and becomes visible to lookups only when the create commits. Lookups fail with
//! ENOENT when nothing is there and EINVAL when the handle names another type.
//!
//! Completion channels and async event files are "fd objects": they have no handle (their
//! id is the application's fd number) and live in a separate list of the file.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;

use uverbs::sys::ids::object;

use crate::hca::Hca;
use crate::objects::{Ah, AsyncEventFile, CompChannel, Cq, Mr, Pd, Qp, Srq, UarObj};

use super::{FileState, Result, Why};

/// Object types of the uverbs object tree (`enum uverbs_default_objects` plus mlx5's).
/// softhca creates only some of them; the others still matter for type checks (a PD handle
/// passed as an SRQ is EINVAL, a missing SRQ ENOENT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ObjType {
    Pd,
    CompChannel,
    Cq,
    Qp,
    Srq,
    Ah,
    Mr,
    Mw,
    Flow,
    Xrcd,
    RwqIndTbl,
    Wq,
    FlowAction,
    Dm,
    Counters,
    AsyncEvent,
    Mlx5Uar,
    Mlx5DevxObj,
    Mlx5DevxUmem,
    Mlx5FlowMatcher,
    /// `UVERBS_IDR_ANY_OBJECT`: a lookup that takes a handle of any type (DevX's
    /// MODIFY/QUERY, which then check the object against the command).
    Any,
}

impl ObjType {
    /// The type behind an ioctl object id (INFO_HANDLES), or None.
    pub(crate) fn from_object_id(id: u16) -> Option<ObjType> {
        Some(match id {
            object::PD => ObjType::Pd,
            object::COMP_CHANNEL => ObjType::CompChannel,
            object::CQ => ObjType::Cq,
            object::QP => ObjType::Qp,
            object::SRQ => ObjType::Srq,
            object::AH => ObjType::Ah,
            object::MR => ObjType::Mr,
            object::MW => ObjType::Mw,
            object::FLOW => ObjType::Flow,
            object::XRCD => ObjType::Xrcd,
            object::RWQ_IND_TBL => ObjType::RwqIndTbl,
            object::WQ => ObjType::Wq,
            object::FLOW_ACTION => ObjType::FlowAction,
            object::DM => ObjType::Dm,
            object::COUNTERS => ObjType::Counters,
            object::ASYNC_EVENT => ObjType::AsyncEvent,
            object::MLX5_UAR => ObjType::Mlx5Uar,
            object::MLX5_DEVX_OBJ => ObjType::Mlx5DevxObj,
            object::MLX5_DEVX_UMEM => ObjType::Mlx5DevxUmem,
            object::MLX5_FLOW_MATCHER => ObjType::Mlx5FlowMatcher,
            _ => return None,
        })
    }
}

/// An object in the handle table.
#[derive(Debug, Clone)]
pub(crate) enum Uobj {
    Pd(Arc<Pd>),
    Cq(Arc<Cq>),
    Qp(Arc<Qp>),
    Srq(Arc<Srq>),
    Mr(Arc<Mr>),
    Ah(Arc<Ah>),
    Uar(Arc<UarObj>),
    Devx(Arc<DevxObj>),
    Umem(Arc<DevxUmem>),
    Xrcd(Arc<super::methods::xrcd::UXrcd>),
    Flow(Arc<super::methods::flow::UFlow>),
    FlowMatcher(Arc<super::methods::flow_matcher::FlowMatcher>),
}

/// A DevX object (`struct devx_obj`): the firmware object a DEVX_OBJ_CREATE made, its
/// id as devx.c encodes it (the creating opcode in bits 32..48, a general object's
/// type above), and the destroy command derived from the create.
#[derive(Debug)]
pub(crate) struct DevxObj {
    pub obj_id: u64,
    pub dinbox: Vec<u8>,
}

/// A DevX UMEM (`struct devx_umem`): its DESTROY_UMEM inbox.
#[derive(Debug)]
pub(crate) struct DevxUmem {
    pub dinbox: Vec<u8>,
}

/// An fd object of a file.
#[derive(Debug, Clone)]
pub(crate) enum FdObj {
    Comp(Arc<CompChannel>),
    Async(Arc<AsyncEventFile>),
    DevxCmd(Arc<crate::objects::channel::DevxCmdFile>),
}

#[derive(Debug)]
enum SlotState {
    /// Creation in progress; invisible to lookups.
    Reserved,
    /// The object exists but its create has not committed; invisible to lookups.
    Filled(Uobj),
    Live(Uobj),
}

#[derive(Debug)]
struct Slot {
    ty: ObjType,
    state: SlotState,
    /// Creation order, for destroying newest first on close.
    seq: u64,
}

/// The handle table of one file.
#[derive(Debug, Default)]
pub(crate) struct UobjTable {
    slots: BTreeMap<u32, Slot>,
    seq: u64,
}

impl UobjTable {
    /// Reserves the lowest free handle for a new object of type `ty`.
    pub(crate) fn reserve(&mut self, ty: ObjType) -> Result<u32> {
        let mut h = 0u32;
        for &k in self.slots.keys() {
            if k != h {
                break;
            }
            h = h.checked_add(1).ok_or(Errno::ENOMEM)?;
        }
        self.seq += 1;
        self.slots.insert(h, Slot { ty, state: SlotState::Reserved, seq: self.seq });
        Ok(h)
    }

    /// Attaches the created object to a reserved handle.
    pub(crate) fn fill(&mut self, h: u32, obj: Uobj) {
        if let Some(s) = self.slots.get_mut(&h) {
            s.state = SlotState::Filled(obj);
        }
    }

    /// Makes a filled handle visible. A handle that was never filled is released.
    pub(crate) fn commit(&mut self, h: u32) {
        let filled = match self.slots.get_mut(&h) {
            Some(s) => match std::mem::replace(&mut s.state, SlotState::Reserved) {
                SlotState::Filled(o) | SlotState::Live(o) => {
                    s.state = SlotState::Live(o);
                    true
                }
                SlotState::Reserved => false,
            },
            None => return,
        };
        if !filled {
            self.slots.remove(&h);
        }
    }

    /// Releases a handle whose create failed; returns the object if it was created, so
    /// the caller can destroy it.
    pub(crate) fn abort(&mut self, h: u32) -> Option<Uobj> {
        match self.slots.remove(&h)?.state {
            SlotState::Filled(o) | SlotState::Live(o) => Some(o),
            SlotState::Reserved => None,
        }
    }

    /// Looks up a live object: ENOENT when nothing is there (including handles above
    /// u32 range), EINVAL when it has another type, EINVAL for a negative handle.
    pub(crate) fn lookup(&self, handle: i64, ty: ObjType) -> Result<Uobj> {
        if handle < 0 {
            return Err(Errno::EINVAL);
        }
        let h = u32::try_from(handle).map_err(|_| Errno::ENOENT)?;
        match self.slots.get(&h) {
            Some(Slot { state: SlotState::Live(o), ty: t, .. }) => {
                if *t != ty && ty != ObjType::Any {
                    Err(Errno::EINVAL)
                } else {
                    Ok(o.clone())
                }
            }
            _ => Err(Errno::ENOENT),
        }
    }

    /// Removes a live object (after a successful destroy).
    pub(crate) fn remove(&mut self, h: u32) -> Option<Uobj> {
        match self.slots.get(&h)?.state {
            SlotState::Live(_) => match self.slots.remove(&h)?.state {
                SlotState::Live(o) => Some(o),
                _ => None,
            },
            _ => None,
        }
    }

    /// Live handles with their creation order.
    pub(crate) fn live(&self) -> Vec<(u32, u64, Uobj)> {
        self.slots.iter().filter_map(|(h, s)| match &s.state {
            SlotState::Live(o) => Some((*h, s.seq, o.clone())),
            _ => None,
        }).collect()
    }

    /// Live handles of one type, newest first (the order of `ufile->uobjects`).
    pub(crate) fn handles_of(&self, ty: ObjType) -> Vec<u32> {
        let mut v: Vec<(u64, u32)> = self.slots.iter()
            .filter(|(_, s)| s.ty == ty && matches!(s.state, SlotState::Live(_)))
            .map(|(h, s)| (s.seq, *h)).collect();
        v.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        v.into_iter().map(|(_, h)| h).collect()
    }

    /// Next creation sequence number (fd objects share the ordering).
    pub(crate) fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

/// Runs a DevX object's destroy command; on a create being aborted a failure is ignored.
fn fw_destroy(hca: &Hca, dinbox: &[u8], why: Why) -> Result<()> {
    let mut out = [0u8; 16];
    let o = hca.firmware().exec(dinbox, &mut out);
    match o.errno() {
        Some(e) if why != Why::Abort => Err(e),
        _ => Ok(()),
    }
}

/// Destruction with the kernel's lifetime rules: a PD used by MRs, QPs or AHs and a CQ
/// used by QPs refuse to go (EBUSY, `pd->usecnt` / `cq->usecnt`); destroying an object
/// releases what it held; close() destroys newest first.
impl FileState {
    /// Releases the hardware side of an object (`destroy_hw` of its type). On EBUSY the
    /// object is untouched.
    pub(crate) fn destroy_hw(&mut self, hca: &Hca, obj: &Uobj, why: Why) -> Result<()> {
        let busy = |n: u32| n > 0 && why != Why::Abort;
        match obj {
            Uobj::Pd(pd) => {
                if busy(pd.usecnt()) {
                    return Err(Errno::EBUSY);
                }
                // DEALLOC_PD in the firmware: refused while a DevX object uses it.
                let uid = self.ctx.as_ref().map_or(0, |c| c.devx_uid);
                match hca.firmware().dealloc_pd(pd.pdn, uid) {
                    Err(e) if why != Why::Abort => return Err(e),
                    _ => {}
                }
            }
            Uobj::Cq(cq) => {
                if busy(cq.usecnt()) {
                    return Err(Errno::EBUSY);
                }
                // mlx5_ib_destroy_cq: DESTROY_CQ, refused (EBUSY) while a DevX QP
                // still uses the CQ; an abort takes it out all the same.
                let uid = self.ctx.as_ref().map_or(0, |c| c.devx_uid);
                match super::methods::cq::destroy_cq_cmd(hca, cq.cqn, uid) {
                    Err(e) if why != Why::Abort => return Err(e),
                    Err(_) => hca.firmware().forget_cq(cq.cqn),
                    Ok(()) => {}
                }
            }
            Uobj::Qp(qp) => {
                // ib_destroy_qp_user: EBUSY while flows steer to it (`qp->usecnt`).
                if busy(self.flows_on(qp.qpn)) {
                    return Err(Errno::EBUSY);
                }
                // mlx5_ib_destroy_qp: 2RST and DESTROY_QP in the firmware (nothing
                // the firmware refuses for the QP's own uid).
                let uid = self.ctx.as_ref().map_or(0, |c| c.devx_uid);
                match super::methods::qp::destroy_qp_cmds(hca, qp, uid) {
                    Err(e) if why != Why::Abort => return Err(e),
                    _ => {}
                }
                qp.pd.usecnt.fetch_sub(1, Ordering::SeqCst);
                for cq in [&qp.send_cq, &qp.recv_cq].into_iter().flatten() {
                    cq.usecnt.fetch_sub(1, Ordering::SeqCst);
                }
                if let Some(x) = self.xrc_tgts.remove(&qp.qpn) {
                    x.refcnt.fetch_sub(1, Ordering::SeqCst);
                }
                if let Some(srq) = &qp.srq {
                    srq.usecnt.fetch_sub(1, Ordering::SeqCst);
                }
                if let (Some(n), Some(ctx)) = (qp.bfregn, self.ctx.as_mut()) {
                    ctx.free_bfreg(n);
                }
            }
            Uobj::Srq(srq) => {
                // ib_destroy_srq_user: EBUSY while QPs are attached; then
                // mlx5_ib_destroy_srq's DESTROY_SRQ.
                if busy(srq.usecnt()) {
                    return Err(Errno::EBUSY);
                }
                let uid = self.ctx.as_ref().map_or(0, |c| c.devx_uid);
                match super::methods::srq::destroy_srq_cmd(hca, srq, uid) {
                    Err(e) if why != Why::Abort => return Err(e),
                    _ => {}
                }
                srq.pd.usecnt.fetch_sub(1, Ordering::SeqCst);
                if let Some((x, cq)) = self.xrc_srqs.remove(&srq.srqn) {
                    x.refcnt.fetch_sub(1, Ordering::SeqCst);
                    cq.usecnt.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Uobj::Mr(mr) => {
                hca.remove_mr(mr);
                mr.pd.usecnt.fetch_sub(1, Ordering::SeqCst);
            }
            Uobj::Ah(ah) => {
                ah.pd.usecnt.fetch_sub(1, Ordering::SeqCst);
            }
            Uobj::Uar(uar) => {
                if let (Some(key), Some(ctx)) = (uar.mmap_key, self.ctx.as_mut()) {
                    ctx.mmap_entries.remove(&key);
                }
            }
            // devx_obj_cleanup / devx_umem_cleanup: the destroy command built at create;
            // a firmware refusal (an object still in use) keeps the object, with the
            // errno mlx5_cmd_exec makes of the status.
            Uobj::Devx(o) => fw_destroy(hca, &o.dinbox, why)?,
            Uobj::Umem(u) => fw_destroy(hca, &u.dinbox, why)?,
            Uobj::Flow(fl) => {
                match super::methods::flow::destroy(hca, fl) {
                    Err(e) if why != Why::Abort => return Err(e),
                    _ => {}
                }
                if let Some(m) = &fl.matcher {
                    m.usecnt.fetch_sub(1, Ordering::SeqCst);
                }
            }
            // flow_matcher_cleanup: EBUSY while flows use it.
            Uobj::FlowMatcher(m) => {
                if busy(m.usecnt.load(Ordering::SeqCst)) {
                    return Err(Errno::EBUSY);
                }
            }
            Uobj::Xrcd(u) => {
                let uid = self.ctx.as_ref().map_or(0, |c| c.devx_uid);
                super::methods::xrcd::release(hca, u, uid, why == Why::Abort)?;
            }
        }
        Ok(())
    }

    /// Live flows steering to QP `qpn`.
    fn flows_on(&self, qpn: u32) -> u32 {
        self.table.live().iter().filter(|(_, _, o)| matches!(o, Uobj::Flow(f) if f.qpn == Some(qpn))).count() as u32
    }

    /// Destroys the live object at `handle` of type `ty` (a destroy command): ENOENT or
    /// EINVAL from the lookup, EBUSY when in use. Returns the destroyed object.
    pub(crate) fn destroy(&mut self, hca: &Hca, handle: i64, ty: ObjType) -> Result<Uobj> {
        let obj = self.table.lookup(handle, ty)?;
        self.destroy_hw(hca, &obj, Why::Destroy)?;
        self.table.remove(handle as u32);
        Ok(obj)
    }

    /// close(): destroys every object newest first, retrying objects that were busy while
    /// a pass still makes progress, then releases the context
    /// (`uverbs_destroy_ufile_hw`).
    pub(crate) fn close(&mut self, hca: &Hca) {
        loop {
            let mut live = self.table.live();
            if live.is_empty() {
                break;
            }
            live.sort_unstable_by_key(|e| std::cmp::Reverse(e.1));
            let mut progress = false;
            for (h, _, obj) in &live {
                if self.destroy_hw(hca, obj, Why::Close).is_ok() {
                    self.table.remove(*h);
                    progress = true;
                }
            }
            if !progress {
                // Cannot happen with dependencies always newer than what they use; force
                // the rest so close always succeeds.
                for (h, _, obj) in live {
                    let _ = self.destroy_hw(hca, &obj, Why::Abort);
                    self.table.remove(h);
                }
            }
        }
        self.fds.sort_unstable_by_key(|e| std::cmp::Reverse(e.0));
        self.fds.clear();
        self.default_async = None;
        // mlx5_ib_dealloc_ucontext: the DevX user context goes after its objects.
        if let Some(uid) = self.ctx.as_ref().map(|c| c.devx_uid).filter(|&u| u != 0) {
            crate::kernel::methods::devx::destroy_uctx(hca, uid);
        }
        self.ctx = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::{Kind, Live, LiveCounts};

    fn pd(counts: &Arc<LiveCounts>) -> Uobj {
        Uobj::Pd(Arc::new(Pd::new(1, Live::new(counts, Kind::Pd))))
    }

    #[test]
    fn lowest_free_handle_and_visibility() {
        let c = Arc::new(LiveCounts::default());
        let mut t = UobjTable::default();
        let a = t.reserve(ObjType::Pd).unwrap();
        let b = t.reserve(ObjType::Pd).unwrap();
        assert_eq!((a, b), (0, 1));
        t.fill(a, pd(&c));
        assert_eq!(t.lookup(0, ObjType::Pd).unwrap_err(), Errno::ENOENT, "filled but not committed");
        t.commit(a);
        assert!(t.lookup(0, ObjType::Pd).is_ok());
        assert_eq!(t.lookup(0, ObjType::Cq).unwrap_err(), Errno::EINVAL);
        assert_eq!(t.lookup(-1, ObjType::Pd).unwrap_err(), Errno::EINVAL);
        assert_eq!(t.lookup(1 << 33, ObjType::Pd).unwrap_err(), Errno::ENOENT);
        assert!(t.abort(b).is_none(), "never filled");
        assert_eq!(t.reserve(ObjType::Cq).unwrap(), 1, "aborted handle is reused");
        t.commit(1);
        assert_eq!(t.lookup(1, ObjType::Cq).unwrap_err(), Errno::ENOENT, "commit of an unfilled handle releases it");
        assert!(t.remove(0).is_some());
        assert!(t.remove(0).is_none());
        assert_eq!(t.lookup(0, ObjType::Pd).unwrap_err(), Errno::ENOENT);
        assert!(t.is_empty());
        assert_eq!(c.get(Kind::Pd), 0);
    }

    #[test]
    fn handles_of_lists_newest_first() {
        let c = Arc::new(LiveCounts::default());
        let mut t = UobjTable::default();
        for _ in 0..3 {
            let h = t.reserve(ObjType::Pd).unwrap();
            t.fill(h, pd(&c));
            t.commit(h);
        }
        t.remove(1);
        let h = t.reserve(ObjType::Pd).unwrap();
        t.fill(h, pd(&c));
        t.commit(h);
        assert_eq!(t.handles_of(ObjType::Pd), vec![1, 2, 0]);
        assert_eq!(t.handles_of(ObjType::Cq), Vec::<u32>::new());
    }
}
