//! `doorbell trace`'s two halves.
//!
//! - [`record`]: a `tracing_subscriber` layer that, when [`DIR_ENV`] names a directory,
//!   writes every event and span of the driver's layers (the targets listed in
//!   `softhca/src/device/trace.rs`) to `DIR/<pid>.jsonl`, one JSON object a line, with a
//!   CLOCK_MONOTONIC timestamp so that the files of all processes of one host share a
//!   time axis.
//! - [`chrome`]: reads those files and writes one Chrome Trace Event JSON document
//!   (Perfetto and chrome://tracing open it), with flow arrows tying a verb to its WQE,
//!   its packets, the remote side's action, the ACK and the completion; [`text`] prints
//!   the per-thread call tree.

pub mod chrome;
pub mod flows;
pub mod jsonl;
pub mod record;
pub mod svg;
pub mod text;

/// The environment variable naming the directory the records go to.
pub const DIR_ENV: &str = "DOORBELL_TRACE_DIR";

pub use record::{layer_from_env, RecordLayer};
