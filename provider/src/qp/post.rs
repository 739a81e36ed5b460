//! Where a verb becomes a WQE: posting sends and receives.
//!
//! `post_send` checks room in the SQ, writes the WQE at the producer index with
//! [`write_send_wqe`], records the wr_id for the poller, advances the producer index
//! by the WQE's WQEBBs, then rings the doorbell once for the whole batch: doorbell
//! record first, then an 8-byte UAR store or (one small WQE) a BlueFlame copy.
//! `post_recv` writes receive WQEs and publishes the RQ head; receives need no UAR
//! write because the device reads the RQ head when a SEND arrives.

use std::ptr::NonNull;
use std::sync::atomic::Ordering;

use super::Qp;
use crate::doorbell;
use crate::error::{Error, Result};
use crate::opcode::FmCeSe;
use crate::wqe::data::write_recv_wqe;
use crate::wqe::ring::SqRing;
use crate::wqe::send::{write_send_wqe, Payload, SendWr};
use crate::wqe::{Sge, WQEBB_SIZE};

impl Qp {
    /// Posts one send WR and rings the doorbell (`ibv_post_send` with one WR).
    #[inline]
    pub fn post_send(&mut self, wr_id: u64, wr: &SendWr<'_>) -> Result<()> {
        self.post_send_list(std::slice::from_ref(&(wr_id, *wr)))
    }

    /// Posts a chain of send WRs with one doorbell.
    pub fn post_send_list(&mut self, wrs: &[(u64, SendWr<'_>)]) -> Result<()> {
        let cnt = self.geo.sq_wqe_cnt;
        if cnt == 0 {
            return Err(Error::Invalid { op: "post_send", why: "QP has no send queue".into() });
        }
        let sq_base = self.sq_base();
        // SAFETY: the SQ occupies `cnt` WQEBBs at `sq_base` inside self.buf, which
        // lives as long as self; `&mut self` makes this the only writer.
        let mut ring = unsafe { SqRing::from_raw_parts(sq_base, cnt) };
        let mut last: Option<(u16, crate::wqe::size::WqeInfo)> = None;
        for (wr_id, wr) in wrs {
            let mut wr = *wr;
            if self.sq_sig_all {
                wr.flags |= FmCeSe::CQ_UPDATE;
            }
            if let Payload::Inline(chunks) = wr.payload {
                let len: usize = chunks.iter().map(|c| c.len()).sum();
                if len > self.cap.max_inline_data as usize {
                    self.ring(&ring, last, wrs.len());
                    return Err(Error::Invalid { op: "post_send", why: format!("inline {len} B exceeds {}", self.cap.max_inline_data) });
                }
            }
            let need = wr.wqe_info().map_err(|e| Error::Invalid { op: "post_send", why: e.to_string() })?;
            let tail = self.shared.sq_tail.load(Ordering::Acquire) as u16;
            let used = self.sq_cur_post.wrapping_sub(tail) as u32;
            if used + need.wqebb_count as u32 > cnt {
                self.ring(&ring, last, wrs.len());
                return Err(Error::Device { op: "post_send", errno: nix::errno::Errno::ENOMEM });
            }
            let pi = self.sq_cur_post;
            let info = write_send_wqe(&mut ring, pi, self.qpn, &wr)
                .map_err(|e| Error::Invalid { op: "post_send", why: e.to_string() })?;
            let idx = (pi as u32 & (cnt - 1)) as usize;
            self.shared.sq_wrid[idx].store(*wr_id, Ordering::Relaxed);
            self.sq_cur_post = pi.wrapping_add(info.wqebb_count);
            self.shared.sq_next[idx].store(self.sq_cur_post as u32, Ordering::Relaxed);
            tracing::trace!(target: "provider::post", qpn = self.qpn, pi, wr_id, ds = info.ds, op = ?wr.op, "wqe");
            last = Some((pi, info));
        }
        self.ring(&ring, last, wrs.len());
        Ok(())
    }

    /// Publishes the producer index and pokes the device for the WQEs just written.
    #[inline]
    fn ring(&mut self, ring: &SqRing<'_>, last: Option<(u16, crate::wqe::size::WqeInfo)>, nreq: usize) {
        let Some((pi, info)) = last else { return };
        // SAFETY: word 1 of our doorbell record is live while self is.
        unsafe { doorbell::publish(self.dbrec.word(1), self.sq_cur_post as u32 & 0xffff) };
        let reg = self.bfreg.reg();
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
            // SAFETY: the register has two halves of `bf` bytes at reg and reg + bf;
            // the copy is at most `bf` bytes (ds * 16 <= bf, rounded to 64 <= bf).
            unsafe { doorbell::ring_bf(reg.add(self.bf_offset), &chunks[..info.wqebb_count as usize]) };
            tracing::trace!(target: "provider::doorbell", qpn = self.qpn, pi = self.sq_cur_post, bytes = info.wqebb_count as usize * 64, "blueflame");
        } else {
            let first8: [u8; 8] = wqebb(pi)[..8].try_into().unwrap();
            // SAFETY: the register is mapped for the QP's lifetime.
            unsafe { doorbell::ring_db(reg.add(self.bf_offset), first8) };
            tracing::trace!(target: "provider::doorbell", qpn = self.qpn, pi = self.sq_cur_post, "doorbell");
        }
        self.bf_offset ^= bf;
    }

    fn sq_base(&self) -> NonNull<u8> {
        // SAFETY: rq_size <= buffer length; the SQ follows the RQ.
        NonNull::new(unsafe { self.buf.as_ptr().add(self.geo.rq_size as usize) }).unwrap()
    }

    /// Posts one receive WR (`ibv_post_recv`).
    pub fn post_recv(&mut self, wr_id: u64, sgl: &[Sge]) -> Result<()> {
        self.post_recv_list(std::slice::from_ref(&(wr_id, sgl)))
    }

    /// Posts a chain of receive WRs and publishes the new RQ head once.
    pub fn post_recv_list(&mut self, wrs: &[(u64, &[Sge])]) -> Result<()> {
        let cnt = self.geo.rq_wqe_cnt;
        let slots = 1usize << (self.geo.rq_wqe_shift.max(4) - 4);
        let mut posted = false;
        let mut result = Ok(());
        for (wr_id, sgl) in wrs {
            let tail = self.shared.rq_tail.load(Ordering::Acquire);
            if cnt == 0 || self.rq_head.wrapping_sub(tail) >= cnt {
                result = Err(Error::Device { op: "post_recv", errno: nix::errno::Errno::ENOMEM });
                break;
            }
            let idx = (self.rq_head & (cnt - 1)) as usize;
            let off = idx << self.geo.rq_wqe_shift;
            // SAFETY: receive WQE idx lies within the RQ at the start of self.buf;
            // `&mut self` makes this the only writer of the RQ.
            let wqe = unsafe { std::slice::from_raw_parts_mut(self.buf.as_ptr().add(off).cast::<[u8; 16]>(), slots) };
            if write_recv_wqe(wqe, sgl).is_none() {
                result = Err(Error::Invalid { op: "post_recv", why: format!("{} SGEs exceed {}", sgl.len(), slots) });
                break;
            }
            self.shared.rq_wrid[idx].store(*wr_id, Ordering::Relaxed);
            self.rq_head = self.rq_head.wrapping_add(1);
            posted = true;
        }
        if posted {
            // SAFETY: word 0 of our doorbell record is live while self is.
            unsafe { doorbell::publish(self.dbrec.word(0), self.rq_head & 0xffff) };
        }
        result
    }
}
