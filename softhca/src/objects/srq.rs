//! Shared receive queue: the HCA's SRQ context (SRQC).
//!
//! The application owns the WQE buffer (`buf_addr`: `1 << log_size` WQEs of
//! `1 << wqe_shift` bytes, each a 16-byte "next" segment then scatter entries) and the
//! doorbell record (`db_addr`: word 0 counts the WQEs posted, big-endian). The WQEs form a
//! list through the next segments' `next_wqe_index`; libmlx5 posts at its head and links a
//! completed WQE back in at its tail. The device takes WQEs from the head in the same
//! order ([`SrqDev`]), one per incoming message, for whichever QP attached to the SRQ
//! receives it.
//!
//! Written once by the kernel half at creation: everything except `dev`, `limit` and the
//! event counter.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::{AsyncEventFile, Live, Pd};

/// What the device half keeps of an SRQ: where its list starts and how many WQEs it took.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SrqDev {
    /// Index of the next WQE to take (the list's head as the device sees it).
    pub head: u16,
    /// WQEs taken, modulo 2^16 (the doorbell counter minus this is what is left).
    pub taken: u16,
    /// The armed limit (`srq_limit`, the PRM's `lwm`): 0 when not armed. Taking a WQE that
    /// leaves fewer than this raises SRQ_LIMIT_REACHED once and disarms.
    pub limit: u32,
}

/// What an XRC SRQ has besides an SRQ's context (`xrc_srqc`): its XRC domain, the CQ
/// its receives complete on (an XRC target QP has none), and the user index the CQE
/// carries (CQE version 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XrcSrq {
    pub xrcd: u32,
    pub cqn: u32,
    pub user_index: u32,
}

/// A shared receive queue (`struct ib_srq` + mlx5 SRQC).
#[derive(Debug)]
pub struct Srq {
    /// The SRQ number (24 bits).
    pub srqn: u32,
    pub pd: Arc<Pd>,
    /// The WQE buffer and the doorbell record in this process.
    pub buf_addr: u64,
    pub db_addr: u64,
    /// log2 of the number of WQEs and of their size.
    pub log_size: u32,
    pub wqe_shift: u32,
    /// Scatter entries per WQE (less the signature entry).
    pub max_gs: u32,
    /// The WQE signature bit of the context.
    pub wq_sig: bool,
    /// The `max_wr` and `max_sge` the create command reported back.
    pub max_wr: u32,
    pub max_sge: u32,
    /// Echoed in async events for this SRQ.
    pub user_handle: u64,
    /// Where async events for this SRQ go.
    pub event_file: Option<Arc<AsyncEventFile>>,
    /// Async events delivered for this SRQ (DESTROY_SRQ reports it). Device half increments.
    pub events_reported: AtomicU32,
    /// QPs attached (`srq->usecnt`): an SRQ in use cannot be destroyed (EBUSY). Kernel
    /// half only.
    pub(crate) usecnt: AtomicU32,
    /// The device's position in the WQE list and the armed limit. Device half writes the
    /// position; the firmware's ARM_RQ writes the limit.
    pub dev: Mutex<SrqDev>,
    /// An XRC SRQ's domain, CQ and user index; None for a basic SRQ.
    pub xrc: Option<XrcSrq>,
    pub(crate) _live: Live,
}

impl Srq {
    /// QPs attached to this SRQ.
    pub fn usecnt(&self) -> u32 {
        self.usecnt.load(Ordering::SeqCst)
    }

    /// The number of WQEs in the ring.
    pub fn wqe_count(&self) -> u32 {
        1 << self.log_size
    }

    /// The armed limit (0: not armed).
    pub fn limit(&self) -> u32 {
        self.dev.lock().unwrap_or_else(|p| p.into_inner()).limit
    }
}
