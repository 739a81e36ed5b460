//! Completion queue: the HCA's CQ context (CQC).
//!
//! The application owns the CQE ring (`buf_addr`, `entries` CQEs of `cqe_size` bytes) and
//! the doorbell record (`db_addr`: consumer index at +0, arm word at +4); the device half
//! writes CQEs into the ring with the owner bit of the current pass and raises completion
//! events after an arm doorbell (UAR page + 0x20).
//!
//! Written once by the kernel half at creation: everything except [`Cq::dev`] and the
//! event counters. The device half owns [`CqDevState`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use super::{AsyncEventFile, CompChannel, Live};

/// A view of what the device half tracks per CQ, mirrored by the engine after each step
/// in which it changed (the working state lives in `crate::device::cqe::CqCtx`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CqDevState {
    /// Next CQE index the HCA will write (its producer counter; the owner bit of a CQE is
    /// `(producer_index / entries) & 1`).
    pub producer_index: u32,
    /// The arm sequence number and consumer index of the last arm doorbell seen.
    pub armed: Option<(u32, u32)>,
    /// Solicited-only arming.
    pub solicited_only: bool,
}

/// A completion queue (`struct ib_cq` + mlx5 CQC).
#[derive(Debug)]
pub struct Cq {
    /// The CQ number (opaque, 24 bits), carried in arm doorbells.
    pub cqn: u32,
    /// Number of CQEs in the ring: a power of two.
    pub entries: u32,
    /// `entries - 1`, what the create command reported back as `cqe`.
    pub cqe: u32,
    /// 64 or 128.
    pub cqe_size: u32,
    /// Address of the CQE ring in this process.
    pub buf_addr: u64,
    /// Address of the 8-byte doorbell record in this process.
    pub db_addr: u64,
    /// UAR page the application rings the arm doorbell on (+0x20): the page the driver data
    /// named, or the context's first static page. A page id of [`crate::pages`].
    pub uar_page: u32,
    /// Echoed in completion events (`ib_uverbs_comp_event_desc.cq_handle`).
    pub user_handle: u64,
    pub comp_vector: u32,
    /// `IB_UVERBS_CQ_FLAGS_*` from the create command.
    pub flags: u32,
    /// `MLX5_IB_CREATE_CQ_FLAGS_*` from the driver data.
    pub mlx5_flags: u16,
    /// CQE compression requested (`cqe_comp_en`) and its mini-CQE format.
    pub cqe_comp: Option<u8>,
    /// Where completion events go, if the CQ has a channel.
    pub comp_channel: Option<Arc<CompChannel>>,
    /// Where async events for this CQ go (CQ overrun ...).
    pub event_file: Option<Arc<AsyncEventFile>>,
    /// Completion events delivered to the channel (reported by DESTROY_CQ so the library
    /// can wait for the application to acknowledge them). Device half increments.
    pub comp_events_reported: AtomicU32,
    /// Async events delivered for this CQ. Device half increments.
    pub async_events_reported: AtomicU32,
    /// QPs using this CQ (`cq->usecnt`, counted once per send and once per receive use):
    /// a CQ in use cannot be destroyed (EBUSY). Kernel half only.
    pub(crate) usecnt: AtomicU32,
    /// The device half's state for this CQ.
    pub dev: Mutex<CqDevState>,
    pub(crate) _live: Live,
}

impl Cq {
    /// QPs currently using this CQ (counting a QP twice if it uses it for both queues).
    pub fn usecnt(&self) -> u32 {
        self.usecnt.load(Ordering::SeqCst)
    }
}
