//! # provider: an mlx5-style userspace RDMA provider
//!
//! The control path goes through the kernel's uverbs ABI ([`uverbs`]); the data path
//! never does: the provider writes WQEs into the send queue itself, publishes the
//! producer counter in the doorbell record, rings the UAR/BlueFlame doorbell, and
//! polls CQEs the device writes into memory.
//!
//! Where things are:
//! * opening: [`device`] (softhca by default, a kernel device when named), [`context`]
//!   (GET_CONTEXT with libmlx5's driver data, UARs, cached attributes);
//! * objects: [`pd`], [`mr`], [`cq`], [`channel`], [`qp`] (with `qp::sizing` for
//!   libmlx5's queue geometry and `qp::attr` for state changes);
//! * formats: [`wqe`] (send/receive WQE segments and the SQ ring writer), [`cqe`]
//!   (CQE layout, ownership, syndromes), [`opcode`];
//! * memory the device touches: [`buf`] (rings), [`dbrec`] (doorbell records), [`uar`]
//!   (doorbell pages and BlueFlame registers).

pub mod barrier;
pub mod borrowed_mr;
pub mod buf;
pub mod channel;
pub mod context;
pub mod cq;
pub mod cqe;
pub mod dbrec;
pub mod device;
pub mod doorbell;
pub mod error;
pub mod memory_region;
pub mod mr;
pub mod opcode;
pub mod pd;
pub mod qp;
pub mod uar;
pub mod wqe;

pub use channel::CompChannel;
pub use context::Context;
pub use cq::{poll::Wc, Cq};
pub use error::{Error, Result};
pub use borrowed_mr::BorrowedMr;
pub use memory_region::MemoryRegion;
pub use mr::{Access, Mr};
pub use pd::Pd;
pub use qp::{Qp, QpAttr, QpInit, QpState, QpType};
