//! Where a verb becomes a WQE: posting sends and receives.
//!
//! `post_send` checks room in the SQ, writes the WQE at the producer index with
//! [`write_send_wqe`], records the wr_id for the poller, advances the producer index
//! by the WQE's WQEBBs, then rings the doorbell once for the whole batch: doorbell
//! record first, then an 8-byte UAR store or (one small WQE) a BlueFlame copy.
//! `post_recv` writes receive WQEs and publishes the RQ head; receives need no UAR
//! write because the device reads the RQ head when a SEND arrives.
//!
//! A single WR of the common shapes (one WQEBB: SEND/WRITE/READ with one gather entry
//! or a short inline payload) takes a fast lane, `post_send_small`: the same WQE bytes
//! (from [`crate::wqe::small`]), bookkeeping and doorbell, without the generic path's
//! iteration and with the addresses and constant WQE words it needs resolved at QP
//! creation (`Hot`, `wqe::small::Lane`). With TRACE events on, or where the lane is
//! closed (UD, no BlueFlame, see `fast_lane`), every post takes the generic path.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::{PostError, PostErrorKind, Qp, QpShared, QpType, SqEntry};
use crate::buf::DmaBuf;
use crate::dbrec::Dbrec;
use crate::doorbell;
use crate::error::{Error, Result};
use crate::opcode::{FmCeSe, WqeOpcode};
use crate::uar::Bfreg;
use crate::wqe::data::write_recv_wqe;
use crate::wqe::ring::SqRing;
use crate::wqe::send::{write_send_wqe, Payload, SendWr, WqeError};
use crate::wqe::small::{write_small, Lane};
use crate::wqe::{Sge, WQEBB_SIZE};

/// What the fast lane uses on every post, resolved once at QP creation instead of
/// through the QP's owners (buffer, doorbell record, UAR page, shared state, geometry)
/// each time: addresses, and the constant parts of its WQEs.
#[derive(Debug)]
pub(crate) struct Hot {
    /// First WQEBB of the SQ.
    sq: NonNull<u8>,
    /// Word 1 of the doorbell record (SQ producer counter).
    db_sq: NonNull<u32>,
    /// The half of the BlueFlame register the next copy (or doorbell store) goes to,
    /// and what turns one half's address into the other's (`reg ^ (reg + bf)`): one
    /// xor a post, where an offset would need an add and the register's address too.
    bf_next: usize,
    bf_toggle: usize,
    /// `QpShared::sq_ent`, one entry per WQEBB.
    ent: NonNull<SqEntry>,
    /// `(sq_wqe_cnt - 1) * 16`: a producer index, times 16, to its entry's byte offset
    /// in `ent` (16-byte entries; the count is a power of two); times 4 again, the
    /// offset of its WQEBB. One shift and one mask serve both.
    mask16: usize,
    /// The QP's constant WQE words and limits.
    lane: Lane,
}

// SAFETY: the pointers address memory owned by the same `Qp` (its buffer, its doorbell
// record and UAR page through their Arcs, its `QpShared`), whose addresses never change
// (mappings and heap boxes) while the Qp lives; they are used only by `&mut self`
// methods of that Qp, so sending or sharing the Qp shares nothing more than its owners
// already do.
unsafe impl Send for Hot {}
// SAFETY: as above.
unsafe impl Sync for Hot {}

impl Hot {
    /// Resolves the addresses; the caller keeps `buf`, `dbrec`, `bfreg` and `shared`
    /// in the same `Qp` as the result.
    pub(crate) fn new(buf: &DmaBuf, geo: &super::Geometry, dbrec: &Dbrec, bfreg: &Bfreg, shared: &QpShared, lane: Lane) -> Hot {
        let nn = |p: *mut u8| NonNull::new(p).expect("mapped memory is never at 0");
        Hot {
            // SAFETY: the SQ follows the RQ inside the buffer (rq_size <= its length).
            sq: nn(unsafe { buf.as_ptr().add(geo.rq_size as usize) }),
            db_sq: nn(dbrec.word(prm::dbrec::SND_DBR).cast()).cast(),
            bf_next: bfreg.reg() as usize,
            bf_toggle: (bfreg.reg() as usize) ^ (bfreg.reg() as usize + bfreg.buf_size),
            ent: NonNull::from(&shared.sq_ent[..]).cast(),
            mask16: (geo.sq_wqe_cnt.wrapping_sub(1) as usize) << 4,
            lane,
        }
    }

    /// The next copy goes to the other half of the register (with `bf` 0, no
    /// BlueFlame, the toggle is 0 and the address stays).
    #[inline(always)]
    fn toggle_bf(&mut self) {
        self.bf_next ^= self.bf_toggle;
    }

    /// The register half for the next copy. (An address rather than a pointer, so that
    /// the toggle is a plain xor; the UAR mapping it points into lives as long as the
    /// QP, see `Bfreg`.)
    #[inline(always)]
    fn bf_reg(&self) -> *mut u8 {
        self.bf_next as *mut u8
    }
}

impl Qp {
    /// Posts one send WR and rings the doorbell (`ibv_post_send` with one WR).
    ///
    /// The common one-WQEBB requests (SEND, WRITE, READ with one gather entry or a
    /// short inline payload: [`crate::wqe::small`]) take a fast lane (`post_send_small`);
    /// everything else, and every request the generic path would refuse, goes through
    /// [`Qp::post_send_list`]. Both write the same WQE and ring the same doorbell.
    #[inline]
    pub fn post_send(&mut self, wr_id: u64, wr: &SendWr<'_>) -> Result<()> {
        if self.post_send_small(wr_id, wr).is_some() {
            return Ok(());
        }
        self.post_send_one(wr, wr_id)
    }

    /// [`Qp::post_send`]'s generic path, kept out of line so that the fast lane's
    /// caller does not carry its stack frame. (`wr` before `wr_id`: the caller's
    /// arguments stay in their registers, so the call can be a jump.)
    #[cold]
    #[inline(never)]
    fn post_send_one(&mut self, wr: &SendWr<'_>, wr_id: u64) -> Result<()> {
        self.post_send_list(std::slice::from_ref(&(wr_id, *wr)))
    }

    /// The fast lane of [`Qp::post_send`]: one WQE of one WQEBB, then its doorbell.
    /// `None` when the request is not one of the shapes it handles, would fail a check
    /// (no send queue, inline bytes over the limit, a full ring), is refused by the
    /// builder, or TRACE events are on, or a modify to RESET is pending; nothing has
    /// been published then (the free slot and its poller entries may hold part of what
    /// the generic path writes there, see [`crate::wqe::small`]), and the caller takes
    /// the generic path, which restarts the counters, repeats the checks, writes the
    /// WQE or reports the error.
    ///
    /// Same steps as the generic path, without its iteration: build the WQE in its
    /// slot, record the wr_id and where the tail moves when it completes, publish the
    /// producer index, BlueFlame-copy the slot (the lane is open only with BlueFlame) to the
    /// register. The fences are the generic path's, in doorbell.rs and barrier.rs:
    /// a release fence before the doorbell record (WQE and bookkeeping visible first),
    /// `sfence` before the register write (the record is not overtaken by the
    /// write-combining store) and after it (the doorbell leaves the WC buffer now).
    #[inline(always)]
    fn post_send_small(&mut self, wr_id: u64, wr: &SendWr<'_>) -> Option<()> {
        // With TRACE events on, the generic path posts: it emits the same two events
        // (the WQE, then the doorbell or BlueFlame copy, before the register write). A
        // call to emit them here would be a call in the middle of the lane, across
        // which the slot, the index and the QP must survive in callee-saved registers,
        // saved and restored on every post, traced or not; the check costs one load and
        // a branch.
        if tracing::level_enabled!(tracing::Level::TRACE) {
            return None;
        }
        let shared = &*self.shared;
        // A pending restart (modify to RESET) is the generic path's (restart_if_reset).
        // SAFETY: a plain read of the flag (which the compiler folds into a compare; it
        // does not fold atomic loads): its only writers are `modify` (`&self`) and
        // `restart_if_reset` (`&mut self`), neither of which can run while this `&mut
        // self` method does, so no store races with the read, and the borrow hand-over
        // that ended them ordered their stores before it. The poller never writes it.
        if unsafe { *shared.restart.as_ptr() } {
            return None;
        }
        // Room for one WQEBB (a QP without a send queue or with the lane closed,
        // fast_cnt 0, never has room).
        // Acquire pairs with the poller's release of the tail: the device is done with
        // the slot before we overwrite it (a plain load on x86-64).
        let tail = shared.sq_tail.load(Ordering::Acquire) as u16;
        let pi = self.sq_cur_post;
        if pi.wrapping_sub(tail) >= self.fast_cnt {
            return None;
        }
        let hot = &self.hot;
        // idx * 16, idx = pi mod sq_wqe_cnt
        let off16 = ((pi as usize) << 4) & hot.mask16;
        // SAFETY: the SQ holds `fast_cnt` = sq_wqe_cnt WQEBBs at hot.sq inside self.buf
        // (alive as long as self) and idx <= sq_wqe_cnt - 1 (fast_cnt > 0 here), so the
        // WQEBB at idx * 64 = off16 * 4 is inside it; `&mut self` makes this the only
        // writer of the SQ, and the room check above says the device no longer reads
        // this WQEBB.
        let slot = unsafe { &mut *hot.sq.as_ptr().add(off16 * 4).cast::<[u8; 64]>() };
        let next = pi.wrapping_add(1);
        // The poller's entries for this slot, before the WQE, so that the index is dead
        // while the WQE is written (fewer registers). Harmless when the request is then
        // refused: the slot is free and not published, the poller reads its entries
        // only for a WQE it was given, and the generic path writes them again.
        // SAFETY: hot.ent points at self.shared's sq_ent, one 16-byte entry per SQ
        // WQEBB (create_qp sizes it with sq_wqe_cnt), and off16 = idx * 16 with idx <
        // sq_wqe_cnt.
        // Relaxed: the doorbell record's release store below publishes them together
        // with the WQE.
        let ent = unsafe { &*hot.ent.as_ptr().byte_add(off16) };
        ent.wr_id.store(wr_id, Ordering::Relaxed);
        ent.next.store(next as u32, Ordering::Relaxed);
        write_small(slot, pi, &hot.lane, wr)?;
        self.sq_cur_post = next;
        // Doorbell record, then the register (fences in doorbell.rs / barrier.rs).
        // SAFETY: hot.db_sq is word 1 of our doorbell record, live while self is.
        unsafe { doorbell::publish(hot.db_sq.as_ptr(), next as u32) };
        // SAFETY: bf_reg is one half of our register, mapped for the QP's lifetime, of
        // `bf` bytes; the lane is open only where 64 <= bf (`fast_lane`), so the
        // BlueFlame copy of one WQEBB fits (and is what the generic path does for every
        // fast-lane WQE, whose ds is 2 to 4: ds > 1 and ds * 16 <= bf).
        unsafe { doorbell::ring_bf(hot.bf_reg(), &[&*slot]) };
        self.hot.toggle_bf();
        Some(())
    }

    /// Posts a chain of send WRs with one doorbell (`ibv_post_send` with a list).
    ///
    /// Each request is checked (operation for the QP's transport, destination, SGE
    /// count, inline size and room in the SQ) and written in turn. On the first that
    /// fails, the ones before it are still handed to the device (doorbell record and
    /// register, as for a list that ends there), and the error says which request
    /// failed and why: [`Error::Post`] with a [`PostError`] whose `index` is also the
    /// number of requests posted, as `bad_wr` is for `ibv_post_send`.
    pub fn post_send_list(&mut self, wrs: &[(u64, SendWr<'_>)]) -> Result<()> {
        self.restart_if_reset();
        let cnt = self.geo.sq_wqe_cnt;
        if cnt == 0 {
            return Err(PostError { verb: "post_send", index: 0, kind: PostErrorKind::NoSendQueue }.into());
        }
        let sq_base = self.sq_base();
        // SAFETY: the SQ occupies `cnt` WQEBBs at `sq_base` inside self.buf, which
        // lives as long as self; `&mut self` makes this the only writer.
        let mut ring = unsafe { SqRing::from_raw_parts(sq_base, cnt) };
        let mut last: Option<(u16, crate::wqe::size::WqeInfo)> = None;
        let mut posted = 0;
        let mut result = Ok(());
        for (index, (wr_id, wr)) in wrs.iter().enumerate() {
            match self.write_one(&mut ring, *wr_id, wr) {
                Ok(wqe) => {
                    last = Some(wqe);
                    posted += 1;
                }
                Err(kind) => {
                    result = Err(PostError { verb: "post_send", index, kind }.into());
                    break;
                }
            }
        }
        // Whatever was written before a failure is posted: the device sees a list that
        // ends at the failing request.
        self.ring(&ring, last, posted);
        result
    }

    /// Checks one send WR against the QP, writes its WQE at the producer index and
    /// records it for the poller; returns where it starts and its size. Nothing is
    /// written (and the producer index stays) when it is refused.
    #[inline]
    fn write_one(&mut self, ring: &mut SqRing<'_>, wr_id: u64, wr: &SendWr<'_>) -> std::result::Result<(u16, crate::wqe::size::WqeInfo), PostErrorKind> {
        let mut wr = *wr;
        if self.sq_sig_all {
            wr.flags |= FmCeSe::CQ_UPDATE;
        }
        check_send(self.qp_type, &self.cap, &wr)?;
        let need = wr.wqe_info().map_err(wqe_error)?;
        let cnt = self.geo.sq_wqe_cnt;
        let tail = self.shared.sq_tail.load(Ordering::Acquire) as u16;
        let used = self.sq_cur_post.wrapping_sub(tail) as u32;
        if used + need.wqebb_count as u32 > cnt {
            return Err(PostErrorKind::SendQueueFull { need: need.wqebb_count, free: cnt.saturating_sub(used) });
        }
        let pi = self.sq_cur_post;
        let info = write_send_wqe(ring, pi, self.qpn, &wr).map_err(wqe_error)?;
        let idx = (pi as u32 & (cnt - 1)) as usize;
        self.shared.sq_ent[idx].wr_id.store(wr_id, Ordering::Relaxed);
        self.sq_cur_post = pi.wrapping_add(info.wqebb_count);
        self.shared.sq_ent[idx].next.store(self.sq_cur_post as u32, Ordering::Relaxed);
        tracing::trace!(target: "provider::post", qpn = self.qpn, pi, wr_id, ds = info.ds, op = %format_args!("{:x?}", wr.op), "wqe");
        Ok((pi, info))
    }

    /// Posts WQE bytes built by the caller, as they are, and rings the doorbell: for
    /// experiments with the WQE format and for negative tests (a malformed WQE must
    /// complete with a LOC_QP_OP_ERR CQE, as on a ConnectX). `wqebbs` is whole WQEBBs of
    /// one WQE; the caller fills the control segment, including the WQE index
    /// (`opmod_idx_opcode`, which must equal the SQ's producer index, see
    /// [`Qp::sq_producer_index`]), the QPN and ds. Nothing in it is checked but its size.
    pub fn post_send_raw(&mut self, wr_id: u64, wqebbs: &[[u8; 64]]) -> Result<()> {
        self.restart_if_reset();
        let cnt = self.geo.sq_wqe_cnt;
        let n = wqebbs.len() as u32;
        if n == 0 || n > 4 || n > cnt {
            return Err(Error::Invalid { op: "post_send_raw", why: format!("{n} WQEBBs (1 to 4 that fit the SQ)") });
        }
        let tail = self.shared.sq_tail.load(Ordering::Acquire) as u16;
        let used = self.sq_cur_post.wrapping_sub(tail) as u32;
        if used + n > cnt {
            let kind = PostErrorKind::SendQueueFull { need: n as u16, free: cnt.saturating_sub(used) };
            return Err(PostError { verb: "post_send_raw", index: 0, kind }.into());
        }
        // SAFETY: as in post_send_list: the SQ's `cnt` WQEBBs inside self.buf, and
        // `&mut self` makes this the only writer.
        let mut ring = unsafe { SqRing::from_raw_parts(self.sq_base(), cnt) };
        let pi = self.sq_cur_post;
        for (k, bb) in wqebbs.iter().enumerate() {
            *ring.wqebb_mut(pi.wrapping_add(k as u16)) = *bb;
        }
        let idx = (pi as u32 & (cnt - 1)) as usize;
        self.shared.sq_ent[idx].wr_id.store(wr_id, Ordering::Relaxed);
        self.sq_cur_post = pi.wrapping_add(n as u16);
        self.shared.sq_ent[idx].next.store(self.sq_cur_post as u32, Ordering::Relaxed);
        // ds for the BlueFlame decision only: the caller's value, at least 1.
        let info = crate::wqe::size::WqeInfo::from_ds((wqebbs[0][7] & 0x3f).max(1) as u32).expect("1..=63");
        tracing::trace!(target: "provider::post", qpn = self.qpn, pi, wr_id, ds = info.ds, "raw wqe");
        self.ring(&ring, Some((pi, crate::wqe::size::WqeInfo { wqebb_count: n as u16, ..info })), 1);
        Ok(())
    }

    /// The SQ producer index: the WQE index the next posted WQE gets (its control
    /// segment's `wqe_index`), counted in WQEBBs modulo 2^16.
    pub fn sq_producer_index(&self) -> u16 {
        if self.shared.restart.load(Ordering::Acquire) { 0 } else { self.sq_cur_post }
    }

    /// The doorbell record as the device reads it: `[RQ head, SQ producer counter]`
    /// (words 0 and 1, decoded from big-endian), what this QP last published. For
    /// diagnostics and tests: the record, not the provider's own counters, is what says
    /// which WQEs the device was given.
    pub fn doorbell_record(&self) -> [u32; 2] {
        // SAFETY: both words of our doorbell record are live, aligned u32s while self
        // is; the atomic loads pair with publish's release stores.
        let word = |i| u32::from_be(unsafe { AtomicU32::from_ptr(self.dbrec.word(i)) }.load(Ordering::Acquire));
        [word(prm::dbrec::RCV_DBR), word(prm::dbrec::SND_DBR)]
    }

    /// Starts the producer counters at 0 after a modify to RESET (see
    /// `QpShared::restart`). A plain load on x86-64 when nothing was reset.
    #[inline(always)]
    pub(crate) fn restart_if_reset(&mut self) {
        if self.shared.restart.load(Ordering::Acquire) {
            self.shared.restart.store(false, Ordering::Relaxed);
            self.sq_cur_post = 0;
            self.rq_head = 0;
        }
    }

    /// Publishes the producer index and pokes the device for the WQEs just written.
    #[inline]
    fn ring(&mut self, ring: &SqRing<'_>, last: Option<(u16, crate::wqe::size::WqeInfo)>, nreq: usize) {
        let Some((pi, info)) = last else { return };
        // SAFETY: word 1 of our doorbell record is live while self is.
        unsafe { doorbell::publish(self.dbrec.word(prm::dbrec::SND_DBR), self.sq_cur_post as u32 & 0xffff) };
        let reg = self.hot.bf_reg();
        let bytes = ring.as_bytes();
        let wqebb = |i: u16| -> &[u8; 64] {
            let off = ring.wqe_offset(i);
            bytes[off..off + WQEBB_SIZE as usize].try_into().unwrap()
        };
        let bf = self.bfreg.buf_size;
        if nreq == 1 && bf != 0 && info.ds > 1 && (info.ds as usize) * 16 <= bf {
            let mut chunks = [wqebb(pi); 4];
            for (k, c) in chunks.iter_mut().enumerate().take(info.wqebb_count as usize) {
                *c = wqebb(pi.wrapping_add(k as u16));
            }
            tracing::trace!(target: "provider::doorbell", qpn = self.qpn, pi = self.sq_cur_post, bytes = info.wqebb_count as usize * 64, "blueflame");
            // SAFETY: reg is one half of the register, `bf` bytes; the copy is at
            // most `bf` bytes (ds * 16 <= bf, rounded to 64 <= bf).
            unsafe { doorbell::ring_bf(reg, &chunks[..info.wqebb_count as usize]) };
        } else {
            let first8: [u8; 8] = wqebb(pi)[..8].try_into().unwrap();
            tracing::trace!(target: "provider::doorbell", qpn = self.qpn, pi = self.sq_cur_post, "doorbell");
            // SAFETY: the register is mapped for the QP's lifetime.
            unsafe { doorbell::ring_db(reg, first8) };
        }
        self.hot.toggle_bf();
    }

    #[inline(always)]
    fn sq_base(&self) -> NonNull<u8> {
        // SAFETY: rq_size <= buffer length (the SQ follows the RQ in the same buffer),
        // so the sum is inside the buffer's mapping, which is never at address 0.
        unsafe { NonNull::new_unchecked(self.buf.as_ptr().add(self.geo.rq_size as usize)) }
    }

    /// Posts one receive WR (`ibv_post_recv`).
    pub fn post_recv(&mut self, wr_id: u64, sgl: &[Sge]) -> Result<()> {
        self.post_recv_list(std::slice::from_ref(&(wr_id, sgl)))
    }

    /// Posts a chain of receive WRs and publishes the new RQ head once. As for sends,
    /// the requests before a refused one are posted, and the [`PostError`] names it.
    pub fn post_recv_list(&mut self, wrs: &[(u64, &[Sge])]) -> Result<()> {
        self.restart_if_reset();
        let cnt = self.geo.rq_wqe_cnt;
        let slots = 1usize << (self.geo.rq_wqe_shift.max(4) - 4);
        // The RQ's scatter limit: what the QP was granted (libmlx5's rq.max_gs), never
        // more than a receive WQE holds.
        let max_sge = (self.cap.max_recv_sge as usize).min(slots);
        let mut posted = 0;
        let mut result = Ok(());
        for (index, (wr_id, sgl)) in wrs.iter().enumerate() {
            let tail = self.shared.rq_tail.load(Ordering::Acquire);
            let kind = if cnt == 0 {
                Some(PostErrorKind::NoRecvQueue)
            } else if self.rq_head.wrapping_sub(tail) >= cnt {
                Some(PostErrorKind::RecvQueueFull { capacity: cnt })
            } else if sgl.len() > max_sge {
                Some(PostErrorKind::TooManySges { sges: sgl.len(), max: max_sge as u32 })
            } else {
                None
            };
            if let Some(kind) = kind {
                result = Err(PostError { verb: "post_recv", index, kind }.into());
                break;
            }
            let idx = (self.rq_head & (cnt - 1)) as usize;
            let off = idx << self.geo.rq_wqe_shift;
            // SAFETY: receive WQE idx lies within the RQ at the start of self.buf;
            // `&mut self` makes this the only writer of the RQ.
            let wqe = unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(off).cast::<[u8; 16]>(), slots) };
            write_recv_wqe(wqe, sgl).expect("the SGE count was checked against the WQE's slots");
            self.shared.rq_wrid[idx].store(*wr_id, Ordering::Relaxed);
            self.rq_head = self.rq_head.wrapping_add(1);
            posted += 1;
        }
        if posted > 0 {
            // SAFETY: word 0 of our doorbell record is live while self is.
            unsafe { doorbell::publish(self.dbrec.word(prm::dbrec::RCV_DBR), self.rq_head & 0xffff) };
        }
        result
    }
}

/// Whether the fast lane ([`Qp::post_send_small`]) may take this QP's requests: its
/// SQ size as the lane sees it, and whether RDMA READ is among them. The lane writes
/// connected one-WQEBB SEND/WRITE/READ WQEs without the generic path's per-transport
/// checks, so it is closed (size 0: its room check always fails) for UD, whose sends
/// carry a datagram segment, and for a QP granted no gather entries (the lane does not
/// count them); and READ is left to the generic path on UC, which refuses it. It
/// always rings with a BlueFlame copy, so it is closed too where the register (`bf`
/// bytes a half, 0 without BlueFlame) cannot take 64 bytes, and for an SQ whose size
/// does not fit its 16-bit room check.
pub(crate) fn fast_lane(qp_type: QpType, max_send_sge: u32, sq_wqe_cnt: u32, bf: usize) -> (u16, bool) {
    let cnt = u16::try_from(sq_wqe_cnt).unwrap_or(0);
    match qp_type {
        _ if max_send_sge == 0 || bf < WQEBB_SIZE as usize => (0, false),
        QpType::Rc => (cnt, true),
        QpType::Uc => (cnt, false),
        QpType::Ud => (0, false),
    }
}

/// The generic path's checks of one send WR against the QP (transport, destination,
/// SGE count, inline size), in the order libmlx5's `_mlx5_post_send` makes them.
fn check_send(qp_type: QpType, cap: &super::QpCap, wr: &SendWr<'_>) -> std::result::Result<(), PostErrorKind> {
    let op = wr.op.opcode();
    let allowed = match qp_type {
        QpType::Rc => true,
        // UC has SEND and RDMA WRITE (with or without immediate), no responder
        // resources for READ or atomics, and no SEND with invalidate (IBTA 9.4.x;
        // Linux's ib_pack.h has no UC_SEND_*_WITH_INVALIDATE).
        QpType::Uc => matches!(op, WqeOpcode::Nop | WqeOpcode::Send | WqeOpcode::SendImm | WqeOpcode::RdmaWrite | WqeOpcode::RdmaWriteImm),
        QpType::Ud => matches!(op, WqeOpcode::Nop | WqeOpcode::Send | WqeOpcode::SendImm),
    };
    if !allowed {
        return Err(PostErrorKind::BadOpcode { op, qp_type });
    }
    match (qp_type, wr.ud.is_some()) {
        (QpType::Ud, false) if op != WqeOpcode::Nop => return Err(PostErrorKind::NoDestination),
        (QpType::Rc | QpType::Uc, true) => return Err(PostErrorKind::DestinationOnConnected { qp_type }),
        _ => {}
    }
    match wr.payload {
        Payload::Sgl(sgl) if sgl.len() > cap.max_send_sge as usize => {
            Err(PostErrorKind::TooManySges { sges: sgl.len(), max: cap.max_send_sge })
        }
        Payload::Sgl(_) => Ok(()),
        Payload::Inline(_) if matches!(op, WqeOpcode::RdmaRead | WqeOpcode::AtomicCs | WqeOpcode::AtomicFa) => {
            Err(PostErrorKind::InlineNotAllowed { op })
        }
        Payload::Inline(chunks) => {
            let len = chunks.iter().fold(0usize, |a, c| a.saturating_add(c.len()));
            if len > cap.max_inline_data as usize {
                Err(PostErrorKind::InlineTooBig { len, max: cap.max_inline_data })
            } else {
                Ok(())
            }
        }
    }
}

/// The WQE builder's refusals, as post errors (the checks above leave only size ones).
fn wqe_error(e: WqeError) -> PostErrorKind {
    match e {
        WqeError::TooLarge => PostErrorKind::WqeTooLarge,
        WqeError::LargerThanRing { wqebbs, wqe_cnt } => PostErrorKind::LargerThanQueue { wqebbs, wqe_cnt },
        WqeError::InlineNotAllowed(op) => PostErrorKind::InlineNotAllowed { op },
        // check_send refuses every raddr opcode on UD before the builder sees it.
        WqeError::NotForUd(op) => PostErrorKind::BadOpcode { op, qp_type: QpType::Ud },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lane is open exactly where its shortcuts hold: a connected QP with gather
    /// entries, a BlueFlame half that takes a 64-byte block (mlx5 registers: 0 without
    /// BlueFlame, 256 or more bytes with it) and an SQ size its 16-bit room check can
    /// hold; READ only on RC.
    #[test]
    fn fast_lane_opens_only_where_its_shortcuts_hold() {
        assert_eq!(fast_lane(QpType::Rc, 1, 128, 256), (128, true));
        assert_eq!(fast_lane(QpType::Uc, 2, 64, 512), (64, false));
        assert_eq!(fast_lane(QpType::Rc, 1, 32768, 256), (32768, true));
        // closed: UD, no gather entries, no BlueFlame, a half under 64 bytes, 2^16 WQEBBs
        assert_eq!(fast_lane(QpType::Ud, 1, 128, 256).0, 0);
        assert_eq!(fast_lane(QpType::Rc, 0, 128, 256).0, 0);
        assert_eq!(fast_lane(QpType::Rc, 1, 128, 0).0, 0);
        assert_eq!(fast_lane(QpType::Rc, 1, 128, 32).0, 0);
        assert_eq!(fast_lane(QpType::Rc, 1, 65536, 256).0, 0);
    }
}
