//! Completion queues: the CQE ring the device writes and the provider polls.
//!
//! Created as libmlx5 creates them: `ncqe = roundup_pow_of_two(cqe + 1)` entries of
//! 64 bytes, each initialised to `op_own = 0xF0` (invalid, owner 0), a doorbell record
//! (word 0 consumer index, word 1 arm), and the device told the ring's address, the record's
//! address and the UAR page that carries the arm doorbell. The device answers with the
//! CQ number and `ncqe - 1`, which the poller uses as its index mask.

pub mod arm;
pub mod poll;

use std::sync::Arc;

use uverbs::cmd::cq::{self as cqcmd, CqArgs};
use uverbs::sys::mlx5::{CreateCq as Mlx5CreateCq, CreateCqResp as Mlx5CreateCqResp, CREATE_CQ_FLAGS_UAR_PAGE_INDEX};
use zerocopy::IntoBytes;

use crate::buf::DmaBuf;
use crate::channel::CompChannel;
use crate::context::Context;
use crate::cqe::{CQE_INIT_OP_OWN, CQE_SIZE};
use crate::dbrec::Dbrec;
use crate::error::{invalid, Op, Result};
use crate::uar::UarPage;

pub(crate) struct CqInner {
    pub(crate) ctx: Arc<Context>,
    pub(crate) handle: u32,
    pub(crate) cqn: u32,
    pub(crate) buf: DmaBuf,
    /// Entries in the ring (a power of two).
    pub(crate) ncqe: u32,
    pub(crate) dbrec: Dbrec,
    /// The page whose +0x20 register arms this CQ.
    pub(crate) uar: Arc<UarPage>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if let Err(e) = cqcmd::destroy_cq_ioctl(&self.ctx.dev, self.handle) {
            tracing::warn!(handle = self.handle, errno = %e, "destroy_cq failed");
        }
    }
}

/// A completion queue.
pub struct Cq {
    pub(crate) inner: Arc<CqInner>,
    /// Consumer index: CQEs consumed so far (only the poller touches it).
    pub(crate) ci: u32,
    /// Arm sequence number, advanced per completion event (mlx5 `arm_sn`).
    pub(crate) arm_sn: u32,
    /// The QP of the last CQE, to skip the context lookup for runs of one QP.
    pub(crate) last_qp: Option<(u32, Arc<crate::qp::QpShared>)>,
}

impl Context {
    /// `ibv_create_cq` with at least `cqe` entries, optionally signalling `channel`.
    pub fn create_cq(self: &Arc<Self>, cqe: u32, channel: Option<&CompChannel>) -> Result<Cq> {
        let _span = tracing::debug_span!("provider::create_cq", cqe).entered();
        if cqe == 0 || cqe >= 1 << 24 {
            return invalid("create_cq", format!("cqe {cqe} out of range 1..2^24"));
        }
        let ncqe = (cqe + 1).next_power_of_two();
        let buf = DmaBuf::new(ncqe as usize * CQE_SIZE).op("create_cq")?;
        for i in 0..ncqe as usize {
            // SAFETY: entry i's last byte is inside the buffer just allocated.
            unsafe { *buf.as_ptr().add(i * CQE_SIZE + CQE_SIZE - 1) = CQE_INIT_OP_OWN };
        }
        let dbrec = self.dbrecs.alloc()?;
        let (uar, dynamic) = {
            let p = self.uars.lock().unwrap();
            (p.cq_page(), p.is_dynamic())
        };
        let req = Mlx5CreateCq {
            buf_addr: buf.addr(),
            db_addr: dbrec.addr(),
            cqe_size: CQE_SIZE as u32,
            flags: if dynamic { CREATE_CQ_FLAGS_UAR_PAGE_INDEX } else { 0 },
            uar_page_index: if dynamic { uar.page_id as u16 } else { 0 },
            ..Default::default()
        };
        let mut resp = Mlx5CreateCqResp::default();
        let args = CqArgs {
            cqe: ncqe - 1,
            user_handle: buf.addr(),
            comp_channel: channel.map(|c| c.fd()),
            event_fd: Some(self.async_fd()),
            ..Default::default()
        };
        let (handle, got) = cqcmd::create_cq_ioctl(&self.dev, &args, req.as_bytes(), resp.as_mut_bytes()).op("create_cq")?;
        if got != ncqe - 1 {
            // The poller uses ncqe - 1 as its mask; any other answer breaks it.
            let _ = cqcmd::destroy_cq_ioctl(&self.dev, handle);
            return invalid("create_cq", format!("device answered cqe {got}, expected {}", ncqe - 1));
        }
        tracing::debug!(target: "provider::cq", cqn = resp.cqn, ncqe, "create_cq");
        Ok(Cq {
            inner: Arc::new(CqInner { ctx: self.clone(), handle, cqn: resp.cqn, buf, ncqe, dbrec, uar }),
            ci: 0,
            arm_sn: 0,
            last_qp: None,
        })
    }
}

impl Cq {
    /// The device's CQ number.
    pub fn cqn(&self) -> u32 {
        self.inner.cqn
    }

    /// Entries in the ring.
    pub fn ncqe(&self) -> u32 {
        self.inner.ncqe
    }

    /// The value completion events carry for this CQ (`user_handle`).
    pub fn user_handle(&self) -> u64 {
        self.inner.buf.addr()
    }
}
