//! Queue pairs: creation (buffer layout and driver data as libmlx5 does it),
//! state changes, and (in `post`) the send path where a verb becomes a WQE.
//!
//! The QP buffer holds the RQ at offset 0 and the SQ right after it; the doorbell
//! record holds the RQ head in word 0 and the SQ producer counter in word 1; the
//! BlueFlame register comes from the context's UAR pool.

pub mod attr;
pub mod connect;
pub mod post;
pub mod post_error;
pub mod sizing;
pub mod ud;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::Arc;

use uverbs::cmd::qp::{self as qpcmd, QpArgs};
use uverbs::sys::mlx5::{CreateQp as Mlx5CreateQp, CreateQpResp as Mlx5CreateQpResp, QP_FLAG_UAR_PAGE_INDEX};
use uverbs::sys::verbs::{self as sysverbs, QpCap as SysQpCap};
use zerocopy::IntoBytes;

use crate::buf::DmaBuf;
use crate::cq::{Cq, CqInner};
use crate::dbrec::Dbrec;
use crate::error::{Error, Op, Result};
use crate::pd::{Pd, PdInner};
use crate::uar::Bfreg;
use crate::wqe::size::{QpTransport, SendOps};

pub use attr::{Ah, QpAttr, QpState, Remote};
pub use connect::{ConnectOptions, Mtu};
pub use post_error::{PostError, PostErrorKind};
pub use sizing::{Geometry, QpCap};

/// Transport service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpType {
    /// Reliable Connected: every operation, acknowledged.
    Rc,
    /// Unreliable Connected: SEND and RDMA WRITE, no acknowledgements.
    Uc,
    /// Unreliable Datagram: SEND only, each to an address.
    Ud,
}

/// What `ibv_create_qp` takes.
#[derive(Clone, Copy)]
pub struct QpInit<'a> {
    /// The CQ send completions go to.
    pub send_cq: &'a Cq,
    /// The CQ receive completions go to (may be the send CQ).
    pub recv_cq: &'a Cq,
    /// Queue sizes asked for (the device may grant more: `Qp::cap`).
    pub cap: QpCap,
    /// RC, UC, UD, raw packet.
    pub qp_type: QpType,
    /// Every send WR generates a CQE, whatever its flags.
    pub sq_sig_all: bool,
    /// Restrict the operations the SQ will carry (like `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`):
    /// a smaller per-WQE header leaves more room for inline data.
    pub send_ops: Option<SendOps>,
}

/// Completion-side state shared by the poster and the CQ poller: the wr_id of every
/// posted WQE. Written before the doorbell (release) and read after seeing its CQE
/// (acquire), so relaxed atomics suffice.
#[derive(Debug)]
pub(crate) struct QpShared {
    /// The poller's record of the WQE starting at each SQ WQEBB index (one array, so
    /// that the post path stores both words through one address).
    pub(crate) sq_ent: Box<[SqEntry]>,
    /// SQ WQEBBs consumed by the device (advanced by the poller).
    pub(crate) sq_tail: AtomicU32,
    pub(crate) rq_wrid: Box<[AtomicU64]>,
    /// Receives completed (advanced by the poller).
    pub(crate) rq_tail: AtomicU32,
    /// Set by a modify to RESET: the next post starts both rings at index 0, as the
    /// device does (libmlx5's `mlx5_init_qp_indices` after RESET). `modify` takes
    /// `&self`, so the producer counters, which only `&mut self` methods touch, are
    /// reset by the next of those ([`Qp::restart_if_reset`]).
    pub(crate) restart: AtomicBool,
    /// The SRQ the QP receives from (then it has no RQ; receive CQEs name the SRQ's WQE).
    pub(crate) srq: Option<Arc<crate::srq::SrqShared>>,
}

/// What the poller needs of one posted send WQE, stored before its doorbell (16 bytes,
/// which the post path's index arithmetic relies on, `post::Hot::mask16`).
#[derive(Debug, Default)]
#[repr(C, align(16))]
pub(crate) struct SqEntry {
    /// The WR's wr_id.
    pub(crate) wr_id: AtomicU64,
    /// Producer index after the WQE: where the SQ tail moves when it completes.
    pub(crate) next: AtomicU32,
}

const _: () = assert!(std::mem::size_of::<SqEntry>() == 16);

/// A queue pair.
pub struct Qp {
    pub(crate) pd: Arc<PdInner>,
    /// Held so the CQs outlive the QP (the device refuses to destroy a CQ in use).
    #[allow(dead_code)]
    pub(crate) send_cq: Arc<CqInner>,
    #[allow(dead_code)]
    pub(crate) recv_cq: Arc<CqInner>,
    pub(crate) handle: u32,
    pub(crate) qpn: u32,
    pub(crate) uidx: u32,
    pub(crate) qp_type: QpType,
    pub(crate) buf: DmaBuf,
    pub(crate) dbrec: Dbrec,
    pub(crate) bfreg: Bfreg,
    pub(crate) geo: Geometry,
    pub(crate) cap: QpCap,
    pub(crate) sq_sig_all: bool,
    pub(crate) shared: Arc<QpShared>,
    /// Next free WQEBB index (the SQ producer counter, wraps at 2^16).
    pub(crate) sq_cur_post: u16,
    /// Next RQ slot to fill (the RQ head).
    pub(crate) rq_head: u32,
    /// The post path's addresses into the fields above (see `post::Hot`).
    pub(crate) hot: post::Hot,
    /// The fast lane's view of the SQ size: `geo.sq_wqe_cnt`, or 0 where the lane must
    /// never be taken (UD, no gather entries), so its room check always fails there
    /// (`post::fast_lane`); costs nothing over reading the geometry.
    /// (A u16: the room check is then one 16-bit compare; an SQ of 2^16 WQEBBs, whose
    /// size does not fit, closes the lane.)
    pub(crate) fast_cnt: u16,
}

impl Pd {
    /// `ibv_create_qp`.
    pub fn create_qp(&self, init: &QpInit) -> Result<Qp> {
        self.create_qp_on(init, None)
    }

    /// `ibv_create_qp` with `init_attr.srq` (`srq` Some): the QP has no receive queue
    /// of its own (the request's receive capabilities are ignored, as libmlx5 does).
    pub(crate) fn create_qp_on(&self, init: &QpInit, srq: Option<&crate::srq::Srq>) -> Result<Qp> {
        let _span = tracing::debug_span!("provider::create_qp").entered();
        let ctx = &self.inner.ctx;
        let u = ctx.ucontext();
        let lim = sizing::Limits {
            max_sq_desc_sz: u.max_sq_desc_sz as u32,
            max_rq_desc_sz: u.max_rq_desc_sz as u32,
            max_send_wqebb: u.max_send_wqebb,
            max_recv_wr: u.max_recv_wr,
        };
        let transport = match init.qp_type { QpType::Rc => QpTransport::Rc, QpType::Uc => QpTransport::Uc, QpType::Ud => QpTransport::Ud };
        let ops = init.send_ops.unwrap_or(SendOps::default_for(transport));
        let geo = sizing::compute(&init.cap, transport, ops, &lim, srq.is_some())
            .map_err(|e| Error::Invalid { op: "create_qp", why: e.0 })?;
        let buf = DmaBuf::new((geo.rq_size + geo.sq_size) as usize).op("create_qp")?;
        let dbrec = ctx.dbrecs.alloc()?;
        let dynamic = ctx.uars.lock().unwrap().is_dynamic();
        let dyn_bfreg = if dynamic { Some(ctx.uars.lock().unwrap().take(&ctx.dev)?) } else { None };
        let uidx = if u.cqe_version == 1 { ctx.alloc_uidx() } else { 0xff_ffff };
        // No MLX5_QP_FLAG_SCATTER_CQE: with it, a ConnectX puts the data of small receives
        // (and of small READ/atomic responses) into the CQE instead of the buffer, and the
        // poller must copy it out (libmlx5 does, for its MLX5_CQE_*_INLINE_SCATTER
        // opcodes); this provider's poller does not, so asking for it would lose those
        // bytes on real hardware. softhca never scatters to the CQE either way.
        let mut flags = 0;
        if dynamic {
            flags |= QP_FLAG_UAR_PAGE_INDEX;
        }
        let req = Mlx5CreateQp {
            buf_addr: buf.addr(),
            db_addr: dbrec.addr(),
            sq_wqe_count: geo.sq_wqe_cnt,
            rq_wqe_count: geo.rq_wqe_cnt,
            rq_wqe_shift: geo.rq_wqe_shift,
            flags,
            uidx,
            bfreg_index: dyn_bfreg.as_ref().map(|b| b.index).unwrap_or(0),
            ..Default::default()
        };
        let mut resp = Mlx5CreateQpResp::default();
        let args = QpArgs {
            pd: self.inner.handle,
            send_cq: init.send_cq.inner.handle,
            recv_cq: init.recv_cq.inner.handle,
            srq: srq.map(|s| s.handle()),
            cap: SysQpCap {
                max_send_wr: init.cap.max_send_wr,
                max_recv_wr: if srq.is_some() { 0 } else { init.cap.max_recv_wr },
                max_send_sge: init.cap.max_send_sge,
                max_recv_sge: if srq.is_some() { 0 } else { init.cap.max_recv_sge },
                // libmlx5 tells the device the inline size the WQE stride really allows.
                max_inline_data: geo.max_inline,
            },
            qp_type: match init.qp_type { QpType::Rc => sysverbs::QPT_RC, QpType::Uc => sysverbs::QPT_UC, QpType::Ud => sysverbs::QPT_UD },
            sq_sig_all: init.sq_sig_all,
            user_handle: buf.addr(),
            create_flags: 0,
            event_fd: Some(ctx.async_fd()),
        };
        let created = qpcmd::create_qp_ioctl(&ctx.dev, &args, req.as_bytes(), resp.as_mut_bytes());
        let created = match created {
            Ok(c) => c,
            Err(errno) => {
                if let Some(b) = dyn_bfreg {
                    ctx.uars.lock().unwrap().give_back(b);
                }
                if uidx != 0xff_ffff {
                    ctx.free_uidx(uidx);
                }
                return Err(Error::Device { op: "create_qp", errno });
            }
        };
        let bfreg = match dyn_bfreg {
            Some(b) => b,
            None => ctx.uars.lock().unwrap().legacy_bfreg(resp.bfreg_index).ok_or(Error::Invalid {
                op: "create_qp",
                why: format!("device assigned unknown bfreg {}", resp.bfreg_index),
            })?,
        };
        let wrids = |n: u32| (0..n).map(|_| AtomicU64::new(0)).collect::<Box<[_]>>();
        let shared = Arc::new(QpShared {
            sq_ent: (0..geo.sq_wqe_cnt).map(|_| SqEntry::default()).collect(),
            sq_tail: AtomicU32::new(0),
            rq_wrid: wrids(geo.rq_wqe_cnt),
            rq_tail: AtomicU32::new(0),
            restart: AtomicBool::new(false),
            srq: srq.map(|s| s.shared.clone()),
        });
        ctx.register_qp(uidx, created.qpn, shared.clone());
        tracing::debug!(target: "provider::qp", qpn = created.qpn, sq_wqebbs = geo.sq_wqe_cnt, rq_wqes = geo.rq_wqe_cnt,
                        inline = geo.max_inline, "create_qp");
        let (fast_cnt, fast_read) = post::fast_lane(init.qp_type, created.cap.max_send_sge, geo.sq_wqe_cnt, bfreg.buf_size);
        let lane = crate::wqe::small::Lane::new(created.qpn, init.sq_sig_all, created.cap.max_inline_data as usize, fast_read);
        let hot = post::Hot::new(&buf, &geo, &dbrec, &bfreg, &shared, lane);
        Ok(Qp {
            pd: self.inner.clone(),
            send_cq: init.send_cq.inner.clone(),
            recv_cq: init.recv_cq.inner.clone(),
            handle: created.handle,
            qpn: created.qpn,
            uidx,
            qp_type: init.qp_type,
            buf,
            dbrec,
            bfreg,
            geo,
            cap: QpCap {
                max_send_wr: geo.sq_max_post,
                max_recv_wr: geo.rq_wqe_cnt,
                max_send_sge: created.cap.max_send_sge,
                max_recv_sge: geo.rq_max_gs,
                max_inline_data: created.cap.max_inline_data,
            },
            sq_sig_all: init.sq_sig_all,
            shared,
            sq_cur_post: 0,
            rq_head: 0,
            hot,
            fast_cnt,
        })
    }
}

impl Qp {
    /// The QP number peers address.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// The capabilities granted (what `ibv_query_qp(IBV_QP_CAP)` reports).
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The queue geometry.
    pub fn geometry(&self) -> Geometry {
        self.geo
    }

    /// The transport.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The PD this QP belongs to.
    pub fn pd_handle(&self) -> u32 {
        self.pd.handle
    }

    /// The uverbs handle (what `mlx5dv_devx_qp_query` passes to DEVX_OBJ_QUERY).
    pub fn handle(&self) -> u32 {
        self.handle
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        let ctx = &self.pd.ctx;
        if let Err(e) = qpcmd::destroy_qp_ioctl(&ctx.dev, self.handle) {
            tracing::warn!(handle = self.handle, errno = %e, "destroy_qp failed");
        }
        ctx.unregister_qp(self.uidx, self.qpn);
        if self.uidx != 0xff_ffff {
            ctx.free_uidx(self.uidx);
        }
        ctx.uars.lock().unwrap().give_back(self.bfreg.clone());
    }
}
