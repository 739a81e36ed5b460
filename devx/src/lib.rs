//! # devx: PRM commands from userspace, safely
//!
//! mlx5's DevX lets a process hand the device's firmware PRM command mailboxes
//! directly (`mlx5dv_devx_*` in C): the kernel only checks that the command is one a
//! user may send, that the objects it names are the caller's, and writes the caller's
//! uid into it. This crate is that interface for Rust, on a [`provider::Context`]
//! whose GET_CONTEXT asked for DevX:
//!
//! * [`DevxContext`]: opened from a provider context (an error when the device did not
//!   grant DevX); [`DevxContext::general_cmd`] for commands that create nothing
//!   (QUERY_HCA_CAP, QUERY_QP on a verbs QP...), [`DevxContext::query_eqn`];
//! * [`Obj`]: a firmware object made from its create inbox, destroyed on drop (the
//!   kernel derives the destroy command), with query and modify;
//! * [`Umem`]: user memory registered for the firmware to use by id (queue buffers,
//!   doorbell records), deregistered on drop, `EBUSY` while an object uses it;
//! * [`Uar`]: a UAR page for DevX objects (the `uar_page` of a CQ or QP context);
//! * [`AsyncCmdFd`]: asynchronous queries ([`Obj::query_async`]) and their answers;
//! * [`cmd`]: typed builders of the inboxes (QUERY_HCA_CAP pages, CREATE_CQ,
//!   CREATE_QP, the QP state transitions, QUERY_QP, CREATE_MKEY) over `prm` layouts;
//! * [`Error`]: errno, and for a firmware refusal (`EREMOTEIO`) the outbox's PRM
//!   status by name and syndrome.
//!
//! [`rc`] builds an RC QP entirely this way (buffers and doorbell records in UMEMs, a
//! DevX UAR, PRM transitions) and moves data with the provider's WQE writer and CQE
//! reader.

pub mod async_cmd;
pub mod cmd;
pub mod context;
pub mod error;
pub mod flow;
pub mod obj;
pub mod rc;
pub mod uar;
pub mod umem;

pub use async_cmd::AsyncCmdFd;
pub use context::DevxContext;
pub use error::{Error, Result};
pub use obj::Obj;
pub use uar::Uar;
pub use umem::Umem;
