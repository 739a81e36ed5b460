//! A verbs RAW_PACKET QP is no firmware object of its own: mlx5_ib's
//! `create_raw_packet_qp` builds it from a TIS, an SQ sending through it, an RQ and a
//! direct TIR naming the RQ, and its QP number is the SQ's (the RQ's without an SQ).
//! The device half runs one [`objects::Qp`] for it, built here from the SQ's and RQ's
//! contexts once the kernel half made them, and linked to both: the SQ's doorbells
//! send frames, and a frame steered to the TIR lands in the RQ (the device half keeps
//! the TIR -> QP link: `device::port::deliver_to_tir`).
//!
//! The QP's number is freed with the queue that carries it; the other queue's number
//! goes back to the pool on its own destroy.

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use nix::errno::Errno;

use super::{Cmd, Firmware, QpHost};
use crate::objects::{self, Kind, Live, QpAttrs, QpType};

impl Firmware<'_> {
    /// The device half's QP of a raw packet QP made of SQ `sqn` and RQ `rqn` (at least
    /// one), both `uid`'s; EINVAL when either is missing.
    pub(crate) fn raw_qp(&self, uid: u16, raw: objects::RawQueues, host: QpHost) -> Result<Arc<objects::Qp>, Errno> {
        let (sqn, rqn) = (raw.sqn, raw.rqn);
        let mut o = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let sq = match sqn {
            Some(n) => Some(o.sqs.get(&n).filter(|s| s.uid == uid).ok_or(Errno::EINVAL)?),
            None => None,
        };
        let rq = match rqn {
            Some(n) => Some(o.rqs.get(&n).filter(|r| r.uid == uid).ok_or(Errno::EINVAL)?),
            None => None,
        };
        let qpn = sqn.or(rqn).ok_or(Errno::EINVAL)?;
        let pdn = sq.map(|s| s.v.pd).or(rq.map(|r| r.v.pd)).ok_or(Errno::EINVAL)?;
        let scqn = sq.map(|s| s.v.cqn).or(rq.map(|r| r.v.cqn)).ok_or(Errno::EINVAL)?;
        let rcqn = rq.map(|r| r.v.cqn).unwrap_or(scqn);
        let pd = o.pds.get(&pdn).map(|p| p.v.clone()).ok_or(Errno::EINVAL)?;
        let send_cq = o.cqs.get(&scqn).map(|c| c.v.cq.clone()).ok_or(Errno::EINVAL)?;
        let recv_cq = o.cqs.get(&rcqn).map(|c| c.v.cq.clone()).ok_or(Errno::EINVAL)?;
        let qp = Arc::new(objects::Qp {
            qpn,
            qp_type: QpType::RawPacket,
            pd,
            send_cq: Some(send_cq),
            recv_cq: Some(recv_cq),
            xrcd: 0,
            user_handle: host.user_handle,
            sq_sig_all: host.sq_sig_all,
            create_flags: host.create_flags,
            mlx5_flags: host.mlx5_flags,
            cap: host.cap,
            buf_addr: rq.map_or(0, |r| r.v.buf),
            sq_offset: 0,
            sq_buf_addr: sq.map_or(0, |s| s.v.buf),
            raw: Some(raw),
            db_addr: sq.map(|s| s.v.db).or(rq.map(|r| r.v.db)).unwrap_or(0),
            rq_wqe_count: rq.map_or(0, |r| r.v.count),
            rq_wqe_shift: rq.map_or(0, |r| r.v.stride_shift),
            rq_max_gs: host.rq_max_gs,
            sq_wqe_count: sq.map_or(0, |s| s.v.count),
            uidx: sq.map(|s| s.v.user_index).or(rq.map(|r| r.v.user_index)).unwrap_or(0),
            uar_page: sq.map_or(0, |s| s.v.uar),
            bfregn: host.bfregn,
            srq: None,
            event_file: host.event_file,
            events_reported: AtomicU32::new(0),
            attrs: Mutex::new(QpAttrs::default()),
            dev: Mutex::new(Default::default()),
            _live: Live::new(self.hca.live_counts(), Kind::Qp),
        });
        if let Some(s) = sqn.and_then(|n| o.sqs.get_mut(&n)) {
            s.v.qp = Some(qp.clone());
        }
        if let Some(r) = rqn.and_then(|n| o.rqs.get_mut(&n)) {
            r.v.qp = Some(qp.clone());
        }
        self.hca.insert_qp(&qp);
        Ok(qp)
    }
}

/// An SQ or RQ numbered `n` was destroyed: the device half's QP goes with the queue
/// whose number it carries; otherwise only the number goes back.
pub(super) fn queue_gone(c: &mut Cmd<'_>, n: u32, qp: Option<&Arc<objects::Qp>>) {
    match qp {
        Some(q) if q.qpn == n => c.hca.remove_qp(q),
        _ => c.hca.free_qpn(n),
    }
}
