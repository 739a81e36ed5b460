//! Taking receive WQEs from a shared receive queue.
//!
//! A QP attached to an SRQ has no RQ: when a message that consumes a receive WQE starts
//! (a SEND's first packet, a WRITE_WITH_IMM's last, a UD datagram), the QP takes the WQE
//! at the SRQ's head and holds it until the message completes; the CQE's `wqe_counter`
//! is that WQE's index in the SRQ, which libmlx5 turns back into the `wr_id` and links
//! at its list's tail (`mlx5_free_srq_wqe`). The head then moves to the WQE the taken
//! one's next segment names (`next_wqe_index`, big-endian at byte 2): the order libmlx5
//! posted them in, since it posts at the same head. The doorbell record's word 0 counts
//! the WQEs posted; the SRQ keeps how many the device took, so the difference is what is
//! left. Taking one that leaves fewer than the armed limit raises SRQ_LIMIT_REACHED once
//! and disarms the limit (the IB spec's SRQ limit: software re-arms with MODIFY_SRQ).

use crate::objects::Srq;

use super::mem;
use super::wqe::{parse_recv, Sge};

/// `sizeof(struct mlx5_wqe_srq_next_seg)`.
const NEXT_SEG: usize = 16;

/// Takes the WQE at the SRQ's head: its index and scatter list, or None when every
/// posted WQE is taken.
pub(crate) fn take(srq: &Srq) -> Option<(u16, Vec<Sge>)> {
    let mut d = srq.dev.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: the doorbell record was checked mapped at CREATE_SRQ and stays until
    // DESTROY_SRQ, which the firmware refuses while a QP (the caller's) is attached.
    let posted = unsafe { mem::load_be32_acquire(srq.db_addr) } as u16;
    let left = posted.wrapping_sub(d.taken);
    if left == 0 {
        return None;
    }
    let index = d.head;
    let size = 1usize << srq.wqe_shift;
    let slot = srq.buf_addr + ((index as u64 & (srq.wqe_count() as u64 - 1)) << srq.wqe_shift);
    let mut b = vec![0u8; size];
    // SAFETY: the slot lies inside the SRQ buffer given at CREATE_SRQ (the index is
    // taken modulo the WQE count), live as the record is; the WQE was published by the
    // counter read with acquire.
    unsafe { mem::read(slot, &mut b) };
    d.head = u16::from_be_bytes([b[2], b[3]]);
    d.taken = d.taken.wrapping_add(1);
    let fire = d.limit != 0 && u32::from(left - 1) < d.limit;
    if fire {
        d.limit = 0;
    }
    drop(d);
    if fire {
        tracing::debug!(target: "softhca::srq", srqn = srq.srqn, left = left - 1, "SRQ limit reached");
        super::events::srq_event(srq, uverbs::sys::verbs::event::SRQ_LIMIT_REACHED);
    }
    let max = (srq.max_gs as usize).max(1).min(size / 16 - 1);
    Some((index, parse_recv(&b[NEXT_SEG..], max)))
}
