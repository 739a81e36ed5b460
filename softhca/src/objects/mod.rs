//! The HCA's view of each resource: what a ConnectX keeps in its PD, MKey, CQ, QP and SRQ
//! contexts, shared by the two halves of softhca.
//!
//! The kernel half ([`crate::kernel`]) creates these objects, fills in what the commands
//! carry and destroys them; the device half ([`crate::device`]) reads them to execute work
//! requests. Each file documents which half writes which field. Fields that never change
//! after creation are plain; fields changed later sit behind a `Mutex` (attributes set by
//! modify_qp) or are atomics (counters).
//!
//! Every object holds a [`Live`] token, so [`crate::Hca::live_objects`] counts objects that
//! still exist in memory (not just in tables): a leaked `Arc` shows up in leak checks.

pub mod ah;
pub mod channel;
pub mod cq;
pub mod mr;
pub mod pd;
pub mod qp;
pub mod srq;
pub mod uar;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

pub use ah::Ah;
pub use channel::{AsyncEventFile, CompChannel};
pub use cq::Cq;
pub use mr::{KeySpan, Loc, Mr, MrBacking};
pub use pd::Pd;
pub use qp::{AddressVector, Qp, QpAttrs, QpState, QpType, RawQueues};
pub use srq::Srq;
pub use uar::{UarKind, UarObj};

/// How many objects of each kind exist right now, across all files of one HCA.
#[derive(Debug, Default)]
pub struct LiveCounts {
    counts: [AtomicUsize; Kind::COUNT],
}

/// The kinds of objects counted by [`LiveCounts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Context,
    Pd,
    Mr,
    Cq,
    Qp,
    Ah,
    Uar,
    CompChannel,
    AsyncEventFile,
    Srq,
}

impl Kind {
    const COUNT: usize = 10;
    /// Every kind, in declaration order.
    pub const ALL: [Kind; Kind::COUNT] = [
        Kind::Context, Kind::Pd, Kind::Mr, Kind::Cq, Kind::Qp, Kind::Ah, Kind::Uar,
        Kind::CompChannel, Kind::AsyncEventFile, Kind::Srq,
    ];
}

impl LiveCounts {
    /// Objects of one kind.
    pub fn get(&self, kind: Kind) -> usize {
        self.counts[kind as usize].load(Ordering::SeqCst)
    }

    /// Objects of every kind together.
    pub fn total(&self) -> usize {
        Kind::ALL.iter().map(|k| self.get(*k)).sum()
    }
}

/// Counts one live object; the count drops when the token (and so its object) is dropped.
#[derive(Debug)]
pub struct Live {
    counts: Arc<LiveCounts>,
    kind: Kind,
}

impl Live {
    pub(crate) fn new(counts: &Arc<LiveCounts>, kind: Kind) -> Live {
        counts.counts[kind as usize].fetch_add(1, Ordering::SeqCst);
        Live { counts: counts.clone(), kind }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.counts.counts[self.kind as usize].fetch_sub(1, Ordering::SeqCst);
    }
}
