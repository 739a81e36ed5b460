//! A receive-only RAW_PACKET QP: where `doorbell flow` rules deliver frames.
//!
//! softhca is a library inside the process using it, so a rule's destination must be
//! a QP of the same process (and of the same user context, whose uid owns the TIR).
//! The provider crate has no raw packet QPs, so this module makes one the way libmlx5
//! does on Linux, with the same uverbs commands: a CQ (`mlx5_ib_create_cq` driver
//! data), and CREATE_QP of type RAW_PACKET with an RQ only (`sq_wqe_count` 0), which
//! mlx5_ib turns into an RQ and a direct TIR (the response's `tirn`). Rules forward
//! to that TIR. Each RQ WQE is one 16-byte data segment pointing at a 2 KiB slot of a
//! registered buffer; [`RawRx::poll`] counts the CQEs, keeps the last one's flow tag,
//! and posts the WQE again, so the QP never runs dry while it is polled.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use provider::buf::DmaBuf;
use provider::cqe::{is_sw_owned, Cqe64, CQE_INIT_OP_OWN, CQE_SIZE};
use provider::dbrec::{Dbrec, DbrecPool};
use provider::{Access, MemoryRegion, Pd};
use uverbs::cmd::cq::{self as cqcmd, CqArgs};
use uverbs::cmd::qp::{self as qpcmd, QpArgs};
use uverbs::sys::mlx5::{self, CreateCq, CreateCqResp, CreateQp, CreateQpResp};
use uverbs::sys::verbs::{qp_attr, qp_state, ModifyQp, QpCap, QPT_RAW_PACKET};
use zerocopy::IntoBytes;

/// Bytes of one receive slot: a 1514-byte frame, a VLAN tag, room to spare.
pub const SLOT: usize = 2048;
/// `rq_wqe_shift`: a WQE is one 16-byte data segment.
const RQ_WQE_SHIFT: u32 = 4;
/// mlx5 CQE opcodes (`MLX5_CQE_RESP_SEND`).
const CQE_RESP_SEND: u8 = 2;

/// What [`RawRx::poll`] saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Polled {
    pub frames: u64,
    pub bytes: u64,
    /// Error CQEs (a frame longer than a slot, a flushed WQE).
    pub errors: u64,
}

/// A receive-only raw packet QP with its CQ, buffers and MR.
pub struct RawRx {
    dev: Arc<provider::Context>,
    qp_handle: u32,
    cq_handle: u32,
    pub qpn: u32,
    pub tirn: u32,
    n: u32,
    ncqe: u32,
    ci: u32,
    /// The RQ head: WQEs posted so far.
    head: u32,
    rq: DmaBuf,
    cq: DmaBuf,
    /// The receive slots and their registration (taken in Drop once the QP is gone).
    data: Option<MemoryRegion>,
    qp_db: Dbrec,
    cq_db: Dbrec,
    /// The UAR page the CQ and QP name (dynamic-UAR contexts); kept while they live.
    _uar: Option<devx::Uar>,
    /// The flow tag of the last frame received (the steering rule's `--tag`).
    pub last_flow_tag: u32,
}

// SAFETY: the raw pointers behind DmaBuf/Dbrec are owned by this struct and used only
// through `&mut self`; nothing here is tied to the creating thread.
unsafe impl Send for RawRx {}

impl RawRx {
    /// Creates the CQ and the QP with `n` (a power of two) receive WQEs, moves the QP
    /// to RTR and fills its RQ. `uidx` is the CQE v1 user index (unique per context).
    pub fn new(d: &devx::DevxContext, pd: &Pd, n: u32, uidx: u32) -> Result<RawRx> {
        let ctx = d.context().clone();
        let dev = ctx.device();
        let u = ctx.ucontext();
        let dynamic = u.tot_bfregs == 0;
        let uar = if dynamic { Some(d.alloc_uar(true).context("UAR page for the raw QP")?) } else { None };
        let pool = DbrecPool::new((u.cache_line_size as usize).max(64));
        let (cq_db, qp_db) = (pool.alloc()?, pool.alloc()?);
        let ncqe = (2 * n).next_power_of_two();
        let cq = DmaBuf::new(ncqe as usize * CQE_SIZE)?;
        for i in 0..ncqe as usize {
            // SAFETY: entry i's last byte lies inside the buffer just allocated.
            unsafe { *cq.as_ptr().add(i * CQE_SIZE + CQE_SIZE - 1) = CQE_INIT_OP_OWN };
        }
        let req = CreateCq {
            buf_addr: cq.addr(),
            db_addr: cq_db.addr(),
            cqe_size: CQE_SIZE as u32,
            flags: if dynamic { mlx5::CREATE_CQ_FLAGS_UAR_PAGE_INDEX } else { 0 },
            uar_page_index: uar.as_ref().map_or(0, |x| x.page_id() as u16),
            ..Default::default()
        };
        let mut resp = CreateCqResp::default();
        let args = CqArgs { cqe: ncqe - 1, user_handle: cq.addr(), event_fd: Some(ctx.async_fd()), ..Default::default() };
        let (cq_handle, got) = cqcmd::create_cq_ioctl(dev, &args, req.as_bytes(), resp.as_mut_bytes())
            .map_err(|e| anyhow::anyhow!("create_cq: {e}"))?;
        if got != ncqe - 1 {
            let _ = cqcmd::destroy_cq_ioctl(dev, cq_handle);
            bail!("create_cq: {got} entries, asked {}", ncqe - 1);
        }
        let rq = DmaBuf::new((n as usize) << RQ_WQE_SHIFT)?;
        let data = pd.alloc_mr(n as usize * SLOT, Access::LOCAL_WRITE).context("reg_mr")?;
        let ucmd = CreateQp {
            buf_addr: rq.addr(),
            db_addr: qp_db.addr(),
            sq_wqe_count: 0,
            rq_wqe_count: n,
            rq_wqe_shift: RQ_WQE_SHIFT,
            flags: if dynamic { mlx5::QP_FLAG_UAR_PAGE_INDEX } else { 0 },
            uidx: if u.cqe_version == 1 { uidx } else { 0xff_ffff },
            bfreg_index: uar.as_ref().map_or(0, |x| x.page_id()),
            ..Default::default()
        };
        let mut qresp = CreateQpResp::default();
        let qargs = QpArgs {
            pd: pd.handle(),
            send_cq: cq_handle,
            recv_cq: cq_handle,
            cap: QpCap { max_recv_wr: n, max_recv_sge: 1, ..Default::default() },
            qp_type: QPT_RAW_PACKET,
            user_handle: rq.addr(),
            event_fd: Some(ctx.async_fd()),
            ..Default::default()
        };
        let created = match qpcmd::create_qp_ioctl(dev, &qargs, ucmd.as_bytes(), qresp.as_mut_bytes()) {
            Ok(c) => c,
            Err(e) => {
                let _ = cqcmd::destroy_cq_ioctl(dev, cq_handle);
                bail!("create_qp(RAW_PACKET): {e}{}", if e == nix::errno::Errno::EPERM { " (needs CAP_NET_RAW)" } else { "" });
            }
        };
        let mut r = RawRx {
            dev: ctx.clone(),
            qp_handle: created.handle,
            cq_handle,
            qpn: created.qpn,
            tirn: qresp.tirn,
            n,
            ncqe,
            ci: 0,
            head: 0,
            rq,
            cq,
            data: Some(data),
            qp_db,
            cq_db,
            _uar: uar,
            last_flow_tag: 0,
        };
        if qresp.comp_mask & 1 == 0 {
            bail!("create_qp(RAW_PACKET): the response names no TIR (comp_mask {:#x})", qresp.comp_mask);
        }
        for i in 0..n {
            r.write_wqe(i);
        }
        r.head = n;
        r.publish_head();
        for (state, mask) in [(qp_state::INIT, qp_attr::STATE | qp_attr::PORT), (qp_state::RTR, qp_attr::STATE)] {
            let m = ModifyQp { qp_handle: created.handle, attr_mask: mask, qp_state: state, port_num: 1, ..Default::default() };
            qpcmd::modify_qp(dev, &m).map_err(|e| anyhow::anyhow!("modify_qp(raw, -> {state}): {e}"))?;
        }
        Ok(r)
    }

    /// Writes RQ WQE `slot` (mod n): one data segment over data slot `slot`.
    fn write_wqe(&mut self, slot: u32) {
        let i = (slot & (self.n - 1)) as usize;
        let (lkey, base) = self.data.as_ref().map_or((0, 0), |m| (m.lkey(), m.addr()));
        let mut seg = [0u8; 16];
        seg[0..4].copy_from_slice(&(SLOT as u32).to_be_bytes());
        seg[4..8].copy_from_slice(&lkey.to_be_bytes());
        seg[8..16].copy_from_slice(&(base + (i * SLOT) as u64).to_be_bytes());
        // SAFETY: WQE i lies inside the RQ buffer (n WQEs of 16 bytes); the device reads
        // it only after the doorbell record says it is posted.
        unsafe { std::ptr::copy_nonoverlapping(seg.as_ptr(), self.rq.as_ptr().add(i << RQ_WQE_SHIFT), 16) };
    }

    fn publish_head(&self) {
        // SAFETY: word 0 (RCV_DBR) of the QP's doorbell record is live while self is.
        unsafe { provider::doorbell::publish(self.qp_db.word(prm::dbrec::RCV_DBR), self.head & 0xffff) };
    }

    /// Takes every CQE there is (at most `max`), reposting each WQE.
    pub fn poll(&mut self, max: usize) -> Polled {
        let mut p = Polled::default();
        while (p.frames + p.errors) < max as u64 {
            let idx = (self.ci & (self.ncqe - 1)) as usize;
            // SAFETY: entry idx is inside the CQ ring owned by self.
            let entry = unsafe { self.cq.as_ptr().add(idx * CQE_SIZE) };
            // SAFETY: the owner byte is the entry's last; the device writes it concurrently.
            let op_own = unsafe { AtomicU8::from_ptr(entry.add(CQE_SIZE - 1)) }.load(Ordering::Relaxed);
            if !is_sw_owned(op_own, self.ci, self.ncqe) {
                break;
            }
            provider::barrier::from_device();
            // SAFETY: the device finished this entry (owner checked, fence taken) and
            // does not write it again before the consumer index passes it.
            let cqe = Cqe64::view(unsafe { &*(entry as *const [u8; CQE_SIZE]) });
            if op_own >> 4 == CQE_RESP_SEND {
                let len = cqe.byte_cnt.get();
                p.frames += 1;
                p.bytes += u64::from(len);
                // libmlx5's mlx5_cq_read_flow_tag: the low 24 bits of sop_drop_qpn.
                self.last_flow_tag = cqe.sop_drop_qpn.get() & 0xff_ffff;
            } else {
                p.errors += 1;
            }
            self.ci = self.ci.wrapping_add(1);
            // WQEs complete in order: the one just consumed is the oldest; post it again.
            let h = self.head;
            self.write_wqe(h);
            self.head = h.wrapping_add(1);
        }
        if p.frames + p.errors > 0 {
            // SAFETY: word 0 of the CQ's doorbell record is live while self is.
            unsafe { provider::doorbell::publish(self.cq_db.word(prm::dbrec::CQ_SET_CI), self.ci & prm::dbrec::CQ_CI_MASK) };
            self.publish_head();
        }
        p
    }
}

impl Drop for RawRx {
    fn drop(&mut self) {
        let dev = self.dev.device();
        if let Err(e) = qpcmd::destroy_qp_ioctl(dev, self.qp_handle) {
            tracing::warn!(qpn = self.qpn, errno = %e, "destroy raw qp");
        }
        drop(self.data.take());
        if let Err(e) = cqcmd::destroy_cq_ioctl(dev, self.cq_handle) {
            tracing::warn!(errno = %e, "destroy raw qp's cq");
        }
    }
}
