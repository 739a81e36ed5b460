//! The device half's entry points: what the kernel half tells the "hardware".
//!
//! On a ConnectX the driver issues firmware commands (CREATE_CQ, RST2INIT_QP, ...) and the
//! hardware starts or stops processing queues. softhca's kernel half does the bookkeeping
//! itself and then calls these hooks so the device half can react. The data path
//! (watching doorbells, executing WQEs, RoCEv2 on the wire, writing CQEs) is filled in by
//! the data-path issue; until then these hooks only record nothing and log.
//!
//! What the device half can rely on when a hook runs:
//! - The object is already in the HCA's tables ([`crate::Hca::qp`], [`crate::Hca::cq`],
//!   [`crate::Hca::mr_by_key`]) on creation and removed before the destroy hook.
//! - `qp_modified` runs after the new attributes are stored in `Qp::attrs`, with the
//!   kernel half's per-file lock held (no concurrent modify of the same QP).
//! - Destroy hooks run before the CQ/QP memory may be freed by the application: after
//!   they return, the device half must not touch the object's buffers again.
//!
//! Live objects to scan: [`crate::Hca::qps`] and [`crate::Hca::cqs`].

use std::sync::Arc;

use crate::objects::{Cq, Mr, Qp, QpState};

/// The device half of one HCA.
#[derive(Debug, Default)]
pub struct Device {}

impl Device {
    /// A device half with no data path yet.
    pub fn new() -> Device {
        Device {}
    }

    /// A CQ was created (its CQC is complete).
    pub fn cq_created(&self, cq: &Arc<Cq>) {
        tracing::trace!(target: "softhca::device", cqn = cq.cqn, "cq created");
    }

    /// A CQ is being destroyed: stop writing CQEs to it.
    pub fn cq_destroyed(&self, cq: &Arc<Cq>) {
        tracing::trace!(target: "softhca::device", cqn = cq.cqn, "cq destroyed");
    }

    /// A QP was created (state RESET).
    pub fn qp_created(&self, qp: &Arc<Qp>) {
        tracing::trace!(target: "softhca::device", qpn = qp.qpn, "qp created");
    }

    /// MODIFY_QP moved a QP from `from` to `to` (possibly the same state, when only
    /// attributes changed). Entering RTR starts receive processing, RTS send processing;
    /// RESET and ERR stop them (ERR flushes outstanding WQEs with error CQEs).
    pub fn qp_modified(&self, qp: &Arc<Qp>, from: QpState, to: QpState) {
        tracing::trace!(target: "softhca::device", qpn = qp.qpn, ?from, ?to, "qp modified");
    }

    /// A QP is being destroyed: stop processing its queues and forget its connection.
    pub fn qp_destroyed(&self, qp: &Arc<Qp>) {
        tracing::trace!(target: "softhca::device", qpn = qp.qpn, "qp destroyed");
    }

    /// An MR was registered or is being deregistered. In-flight operations that already
    /// resolved the key may finish; new lookups fail once it is gone.
    pub fn mr_registered(&self, mr: &Arc<Mr>) {
        tracing::trace!(target: "softhca::device", lkey = mr.lkey, "mr registered");
    }

    /// See [`Device::mr_registered`].
    pub fn mr_deregistered(&self, mr: &Arc<Mr>) {
        tracing::trace!(target: "softhca::device", lkey = mr.lkey, "mr deregistered");
    }
}
