//! Shared receive queues (`ibv_create_srq`, `ibv_post_srq_recv`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_destroy_srq`), laid out and driven as libmlx5 does it.
//!
//! The SRQ buffer holds `max` WQEs of `1 << wqe_shift` bytes: a 16-byte next segment
//! (`struct mlx5_wqe_srq_next_seg`: `next_wqe_index`, big-endian, at byte 2) and then
//! scatter entries. The free WQEs form a list through `next_wqe_index`; posting takes
//! the WQE at the list's head and moves the head to its successor, and the device
//! consumes WQEs in the same order (it follows the same links from index 0). A CQE
//! names the WQE it used by `wqe_counter`; the poller turns that back into the `wr_id`
//! and links the WQE in after the list's tail (`SrqShared::complete`, libmlx5's
//! `mlx5_free_srq_wqe`). The doorbell record's word 0 counts WQEs posted.
//!
//! Sizing is libmlx5 44's (`mlx5_alloc_srq_buf`): the WQE is `16 + 16 * max_sge`
//! bytes rounded up to a power of two and at least 32; the buffer has room for
//! `2 * max_wr + 1` WQEs (the extra half is libmlx5's wait queue for on-demand paging,
//! which this provider never uses but still sizes, so the device sees the same
//! geometry) unless the device limit forbids it; the list initially holds
//! `roundup_pow2(max_wr + 1) - 1` postable WQEs, which is the `max_wr` granted.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::{destroy as destroy_ids, object, srq as ids, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use uverbs::sys::mlx5::{CreateSrq as Mlx5CreateSrq, CreateSrqResp as Mlx5CreateSrqResp};
use uverbs::sys::verbs::{DestroySrq, DestroySrqResp, ModifySrq, QuerySrq, QuerySrqResp};
use uverbs::sys::write::{CMD_DESTROY_SRQ, CMD_MODIFY_SRQ, CMD_QUERY_SRQ};
use zerocopy::IntoBytes;

use crate::buf::DmaBuf;
use crate::dbrec::Dbrec;
use crate::doorbell;
use crate::error::{Op, Result};
use crate::pd::{Pd, PdInner};
use crate::qp::{PostError, PostErrorKind};
use crate::wqe::data::write_recv_wqe;
use crate::wqe::Sge;

/// `sizeof(struct mlx5_wqe_srq_next_seg)`, and of one scatter entry.
const NEXT_SEG: u32 = 16;
const DATA_SEG: u32 = 16;

/// `enum ibv_srq_attr_mask`.
const SRQ_LIMIT: u32 = 1 << 1;

/// What `ibv_create_srq` takes (`struct ibv_srq_attr`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SrqAttr {
    /// Receive WQEs the SRQ holds.
    pub max_wr: u32,
    /// Scatter entries per receive WQE.
    pub max_sge: u32,
    /// Fewer WQEs than this left raises SRQ_LIMIT_REACHED once (0: not armed).
    pub srq_limit: u32,
}

/// The geometry libmlx5 derives from a request: (WQEs in the buffer, log2 of the WQE
/// size, scatter entries per WQE, postable WQEs), or why not.
pub fn geometry(max_wr: u32, max_sge: u32, max_rq_desc_sz: u32, max_srq_recv_wr: u32) -> std::result::Result<(u32, u32, u32, u32), String> {
    if max_sge > max_rq_desc_sz / DATA_SEG {
        return Err(format!("max_sge {max_sge} exceeds the device's receive WQE size {max_rq_desc_sz}"));
    }
    let size = (NEXT_SEG + max_sge * DATA_SEG).max(32).next_power_of_two();
    if size > max_rq_desc_sz {
        return Err(format!("SRQ WQE of {size} bytes exceeds max_rq_desc_sz {max_rq_desc_sz}"));
    }
    let with_waitq = max_wr.saturating_mul(2).saturating_add(1);
    let wqes = if with_waitq > max_srq_recv_wr { max_wr + 1 } else { with_waitq };
    let max = wqes.next_power_of_two();
    let postable = (max_wr + 1).next_power_of_two() - 1;
    Ok((max, size.trailing_zeros(), (size - NEXT_SEG) / DATA_SEG, postable))
}

/// The free list and the wr_ids, under one lock (libmlx5's `srq->lock`): posters and
/// the CQ poller (which links completed WQEs back) both change it.
#[derive(Debug)]
struct FreeList {
    /// The WQE the next post fills.
    head: u32,
    /// The list's last WQE: a post that finds `head == tail` finds the SRQ full.
    tail: u32,
    /// WQEs posted, modulo 2^16 (doorbell record word 0).
    counter: u32,
    wrid: Vec<u64>,
}

/// The SRQ itself, shared by the [`Srq`] handle and the QPs attached to it (whose
/// pollers link completed WQEs back), so it is destroyed after its last QP.
pub(crate) struct SrqShared {
    pd: Arc<PdInner>,
    handle: u32,
    dbrec: Dbrec,
    buf: DmaBuf,
    wqe_shift: u32,
    max: u32,
    list: Mutex<FreeList>,
    /// WQEs posted and not completed: what the limit is about (for tests and users).
    outstanding: AtomicU32,
}

impl SrqShared {
    /// The next segment of WQE `i`.
    fn next_index_ptr(&self, i: u32) -> *mut [u8; 2] {
        let off = ((i & (self.max - 1)) << self.wqe_shift) as usize + 2;
        // SAFETY: WQE i (mod max) starts inside the buffer, which has max << wqe_shift bytes.
        unsafe { self.buf.as_ptr().add(off).cast() }
    }

    fn set_next(&self, i: u32, next: u32) {
        // SAFETY: a 2-byte field inside the buffer (next_index_ptr); the device reads
        // it only after the WQE was posted through the doorbell record, and i is not
        // posted while it is linked in here (it is the list's tail or a free WQE).
        unsafe { *self.next_index_ptr(i) = (next as u16).to_be_bytes() };
    }

    fn next(&self, i: u32) -> u32 {
        // SAFETY: as set_next; only this process writes the field.
        u16::from_be_bytes(unsafe { *self.next_index_ptr(i) }) as u32
    }

    /// A receive CQE named WQE `wqe_counter` of this SRQ: its wr_id, and the WQE goes
    /// back to the list's tail (`mlx5_free_srq_wqe`).
    pub(crate) fn complete(&self, wqe_counter: u16) -> u64 {
        let ind = wqe_counter as u32 & (self.max - 1);
        let mut l = self.list.lock().unwrap_or_else(|p| p.into_inner());
        let id = l.wrid[ind as usize];
        self.set_next(l.tail, ind);
        l.tail = ind;
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
        id
    }
}

impl std::fmt::Debug for SrqShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SrqShared").field("handle", &self.handle).field("max", &self.max).finish_non_exhaustive()
    }
}

/// A shared receive queue. Dropping it destroys the SRQ once no QP uses it.
pub struct Srq {
    srqn: u32,
    max_wr: u32,
    max_gs: u32,
    pub(crate) shared: Arc<SrqShared>,
}

impl Pd {
    /// `ibv_create_srq`: UVERBS_METHOD_SRQ_CREATE with libmlx5's driver data (buffer,
    /// doorbell record), events to the context's async fd.
    pub fn create_srq(&self, attr: &SrqAttr) -> Result<Srq> {
        let _span = tracing::debug_span!("provider::create_srq").entered();
        let ctx = &self.inner.ctx;
        let u = ctx.ucontext();
        let (max, wqe_shift, max_gs, postable) = geometry(attr.max_wr, attr.max_sge, u.max_rq_desc_sz as u32, u.max_srq_recv_wr)
            .map_err(|why| crate::Error::Invalid { op: "create_srq", why })?;
        let buf = DmaBuf::new((max as usize) << wqe_shift).op("create_srq")?;
        let dbrec = ctx.dbrecs.alloc()?;
        // SAFETY: word 0 of a record just allocated for this SRQ alone.
        unsafe { std::ptr::write_volatile(dbrec.word(0), 0) };
        // The user index of a basic SRQ: the kernel (`get_srq_user_index`) wants one
        // with CQE version 1, where MLX5_IB_DEFAULT_UIDX is refused and CQEs name the
        // QP, not the SRQ, so 0 (what libmlx5's zeroed command carries); without CQE
        // version 1 exactly the default.
        let req = Mlx5CreateSrq {
            buf_addr: buf.addr(),
            db_addr: dbrec.addr(),
            uidx: if ctx.cqe_v1() { 0 } else { 0xff_ffff },
            ..Default::default()
        };
        let req_len = std::mem::size_of::<Mlx5CreateSrq>();
        let mut resp = Mlx5CreateSrqResp::default();
        // The kernel is told the whole buffer, as libmlx5 does (`max_wr = srq->max - 1`).
        let (max_wr_in, max_sge_in, limit) = (max - 1, max_gs, attr.srq_limit);
        let user_handle = buf.addr();
        let (mut got_wr, mut got_sge) = (0u32, 0u32);
        let mut c = Ioctl::new(object::SRQ, ids::CREATE);
        let h = c.new_handle(ids::ATTR_CREATE_HANDLE);
        c.handle(ids::ATTR_CREATE_PD_HANDLE, self.inner.handle);
        c.in_value(ids::ATTR_CREATE_USER_HANDLE, user_handle);
        c.in_value(ids::ATTR_CREATE_MAX_WR, max_wr_in);
        c.in_value(ids::ATTR_CREATE_MAX_SGE, max_sge_in);
        c.in_value(ids::ATTR_CREATE_LIMIT, limit);
        c.in_const(ids::ATTR_CREATE_TYPE, ids::SRQT_BASIC as u64);
        c.fd(ids::ATTR_CREATE_EVENT_FD, ctx.async_fd());
        c.out_struct(ids::ATTR_CREATE_RESP_MAX_WR, &mut got_wr);
        c.out_struct(ids::ATTR_CREATE_RESP_MAX_SGE, &mut got_sge);
        c.in_bytes(UVERBS_ATTR_UHW_IN, &req.as_bytes()[..req_len]);
        c.out_bytes(UVERBS_ATTR_UHW_OUT, resp.as_mut_bytes());
        c.run(&ctx.dev).op("create_srq")?;
        let handle = c.handle_out(h);
        drop(c);
        let shared = Arc::new(SrqShared {
            pd: self.inner.clone(),
            handle,
            dbrec,
            buf,
            wqe_shift,
            max,
            list: Mutex::new(FreeList { head: 0, tail: postable, counter: 0, wrid: vec![0; max as usize] }),
            outstanding: AtomicU32::new(0),
        });
        for i in 0..postable {
            shared.set_next(i, i + 1);
        }
        tracing::debug!(target: "provider::srq", srqn = resp.srqn, max, wqe_shift, max_gs, postable, got_wr, got_sge, "create_srq");
        Ok(Srq { srqn: resp.srqn, max_wr: postable, max_gs, shared })
    }
}

impl Pd {
    /// `ibv_create_qp` with `init_attr.srq`: receives come from `srq` (the QP keeps it
    /// alive); `init.cap`'s receive fields are ignored.
    pub fn create_qp_with_srq(&self, init: &crate::QpInit, srq: &Srq) -> Result<crate::Qp> {
        self.create_qp_on(init, Some(srq))
    }
}

impl Srq {
    /// What async events for this SRQ carry as their element (`ibv_srq` pointer in
    /// libibverbs; here the buffer address).
    pub fn user_handle(&self) -> u64 {
        self.shared.buf.addr()
    }

    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }

    /// The uverbs handle (what QP creation names).
    pub fn handle(&self) -> u32 {
        self.shared.handle
    }

    /// Receives that can be outstanding at once (the `max_wr` `ibv_create_srq` reports).
    pub fn max_wr(&self) -> u32 {
        self.max_wr
    }

    /// Scatter entries per receive.
    pub fn max_sge(&self) -> u32 {
        self.max_gs
    }

    /// Receives posted and not yet completed.
    pub fn outstanding(&self) -> u32 {
        self.shared.outstanding.load(Ordering::Relaxed)
    }

    /// The doorbell record's count of WQEs posted (what the device was given).
    pub fn doorbell_record(&self) -> u32 {
        // SAFETY: word 0 of our record is a live aligned u32 while self is.
        u32::from_be(unsafe { AtomicU32::from_ptr(self.shared.dbrec.word(0)) }.load(Ordering::Acquire))
    }

    /// `ibv_post_srq_recv` of one receive.
    pub fn post_recv(&self, wr_id: u64, sgl: &[Sge]) -> Result<()> {
        self.post_recv_list(std::slice::from_ref(&(wr_id, sgl)))
    }

    /// `ibv_post_srq_recv` of a list: each takes the WQE at the free list's head; the
    /// ones before a refused request are posted, and the [`PostError`] names it.
    pub fn post_recv_list(&self, wrs: &[(u64, &[Sge])]) -> Result<()> {
        let sh = &self.shared;
        let mut l = sh.list.lock().unwrap_or_else(|p| p.into_inner());
        let mut result = Ok(());
        let mut posted = 0u32;
        for (index, (wr_id, sgl)) in wrs.iter().enumerate() {
            let kind = if sgl.len() > self.max_gs as usize {
                Some(PostErrorKind::TooManySges { sges: sgl.len(), max: self.max_gs })
            } else if l.head == l.tail {
                Some(PostErrorKind::RecvQueueFull { capacity: self.max_wr })
            } else {
                None
            };
            if let Some(kind) = kind {
                result = Err(PostError { verb: "post_srq_recv", index, kind }.into());
                break;
            }
            let i = l.head;
            l.wrid[i as usize] = *wr_id;
            l.head = sh.next(i);
            let off = ((i << sh.wqe_shift) + NEXT_SEG) as usize;
            // SAFETY: the scatter entries of WQE i lie inside the buffer (i < max, the
            // WQE is 1 << wqe_shift bytes with max_gs entries after the next segment);
            // the lock makes this the only writer, and the device does not read WQE i
            // before the record counts it.
            let scat = unsafe { std::slice::from_raw_parts_mut(sh.buf.as_ptr().add(off).cast::<[u8; 16]>(), self.max_gs as usize) };
            write_recv_wqe(scat, sgl).expect("the SGE count was checked against max_gs");
            posted += 1;
        }
        if posted > 0 {
            l.counter = l.counter.wrapping_add(posted);
            sh.outstanding.fetch_add(posted, Ordering::Relaxed);
            // SAFETY: word 0 of our record is live while self is.
            unsafe { doorbell::publish(sh.dbrec.word(0), l.counter & 0xffff) };
        }
        result
    }

    /// `ibv_modify_srq(IBV_SRQ_LIMIT)`: arms the limit event (the device raises
    /// SRQ_LIMIT_REACHED once when fewer than `limit` WQEs are left, then disarms).
    pub fn arm_limit(&self, limit: u32) -> Result<()> {
        let m = ModifySrq { srq_handle: self.shared.handle, attr_mask: SRQ_LIMIT, max_wr: 0, srq_limit: limit };
        uverbs::write::legacy_no_resp(&self.shared.pd.ctx.dev, CMD_MODIFY_SRQ, &m).op("modify_srq")
    }

    /// `ibv_query_srq`: `max_wr` as the kernel counts it (the whole buffer less one,
    /// libmlx5 reports its own), `max_sge`, and the limit now armed (0 after it fired).
    pub fn query(&self) -> Result<QuerySrqResp> {
        let q = QuerySrq { srq_handle: self.shared.handle, ..Default::default() };
        uverbs::write::legacy(&self.shared.pd.ctx.dev, CMD_QUERY_SRQ, &q, &[], &mut []).op("query_srq")
    }

}

/// DESTROY_SRQ (ioctl, or the write command where the ioctl is missing).
fn destroy_srq(dev: &uverbs::Device, handle: u32) -> std::result::Result<u32, nix::errno::Errno> {
    let mut resp = DestroySrqResp::default();
    let mut c = Ioctl::new(object::SRQ, destroy_ids::SRQ_DESTROY);
    c.handle(destroy_ids::ATTR_SRQ_HANDLE, handle);
    c.out_struct(destroy_ids::ATTR_SRQ_RESP, &mut resp);
    match c.run(dev) {
        Ok(()) => Ok(resp.events_reported),
        Err(nix::errno::Errno::ENOTTY | nix::errno::Errno::EPROTONOSUPPORT) => {
            let d = DestroySrq { srq_handle: handle, ..Default::default() };
            uverbs::write::legacy::<_, DestroySrqResp>(dev, CMD_DESTROY_SRQ, &d, &[], &mut []).map(|r| r.events_reported)
        }
        Err(e) => Err(e),
    }
}

impl Drop for SrqShared {
    fn drop(&mut self) {
        // Every QP on the SRQ holds this through its shared state, so none is left.
        if let Err(e) = destroy_srq(&self.pd.ctx.dev, self.handle) {
            tracing::warn!(handle = self.handle, errno = %e, "destroy_srq failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values: what libmlx5 44 asked the kernel for (CREATE_SRQ max_wr =
    // buffer WQEs - 1, WQE shift) and reported (max_wr, max_sge) for ibv_srq_pingpong's
    // default SRQ (rx_depth 500, one SGE) and its -r 16 variant, on a device allowing
    // 2^15 receive WQEs with 512-byte descriptors.
    #[test]
    fn srq_pingpong_geometry() {
        assert_eq!(geometry(500, 1, 512, 1 << 15).unwrap(), (1024, 5, 1, 511));
        assert_eq!(geometry(16, 1, 512, 1 << 15).unwrap(), (64, 5, 1, 31));
        // No room for the wait queue: just max_wr + 1.
        assert_eq!(geometry(20000, 1, 512, 1 << 15).unwrap(), (32768, 5, 1, 32767));
        assert!(geometry(16, 33, 512, 1 << 15).is_err());
    }

    // The bytes of SRQ WQEs as `struct mlx5_wqe_srq_next_seg` (2 reserved bytes,
    // `__be16 next_wqe_index`, signature, 11 reserved) and `struct mlx5_wqe_data_seg`
    // (`__be32 byte_count`, `__be32 lkey`, `__be64 addr`) lay them out, with libmlx5's
    // terminator (byte count 0, MLX5_INVALID_LKEY 0x100, address 0) after a short list.
    #[test]
    fn wqe_bytes_and_free_list() {
        let ctx = crate::Context::open(None).expect("embedded softhca");
        let pd = ctx.alloc_pd().unwrap();
        // 2 SGEs: 16 + 32 = 48 -> 64-byte WQEs with room for 3 entries; 8 -> 32 WQEs, 15 postable.
        let srq = pd.create_srq(&SrqAttr { max_wr: 8, max_sge: 2, srq_limit: 0 }).unwrap();
        assert_eq!((srq.shared.max, srq.shared.wqe_shift, srq.max_sge(), srq.max_wr()), (32, 6, 3, 15));
        let wqe = |i: usize| -> [u8; 64] {
            // SAFETY: WQE i < 32 of the SRQ's buffer; nothing writes it meanwhile.
            unsafe { *srq.shared.buf.as_ptr().add(i * 64).cast::<[u8; 64]>() }
        };
        assert_eq!(&wqe(0)[..4], &[0, 0, 0, 1], "the list links WQE 0 to 1 at creation");
        assert_eq!(&wqe(14)[..4], &[0, 0, 0, 15]);
        srq.post_recv(0xaa, &[Sge::new(0x1122_3344_5566_7788, 0x99, 0xabcd)]).unwrap();
        let w = wqe(0);
        assert_eq!(&w[16..32], &[0, 0, 0, 0x99, 0, 0, 0xab, 0xcd, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88]);
        assert_eq!(&w[32..48], &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0], "terminator");
        assert_eq!(srq.doorbell_record(), 1);
        // The device used WQE 0: it goes behind the tail (15), whose next names it.
        assert_eq!(srq.shared.complete(0), 0xaa);
        assert_eq!(&wqe(15)[..4], &[0, 0, 0, 0]);
        let l = srq.shared.list.lock().unwrap();
        assert_eq!((l.head, l.tail), (1, 0));
    }
}
