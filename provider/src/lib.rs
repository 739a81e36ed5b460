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
//! * memory (which call when: docs/provider.md, "PD, MR, CQ"): [`MemoryRegion`]
//!   (`Pd::alloc_mr`: the provider allocates and owns it), [`OwnedMr`] (`Pd::reg_owned`,
//!   `Pd::reg_owned_range`: memory of a [`StableMemory`] type the registration owns),
//!   [`BorrowedMr`] (`Pd::reg_mr`, an exclusive borrow), [`SharedMr`]
//!   (`Pd::reg_mr_shared`, a shared borrow the device only reads), [`DeviceMr`]
//!   (`Pd::reg_device`: GPU memory by address, the peer-memory path), or the bare
//!   [`Mr`] of `reg_dmabuf_mr`;
//! * shared receive queues and UD: [`srq`] (`Pd::create_srq`, `Pd::create_qp_with_srq`),
//!   [`ah`] (`Pd::create_ah`), `qp::ud`, and their events in [`async_event`];
//! * connecting: [`Qp::connect`] with [`ConnectOptions`] (ibv_rc_pingpong's defaults),
//!   and [`oob`], the address message the libibverbs example programs exchange over TCP;
//! * posting: [`SendWr`], [`SendOp`], [`Payload`], [`Sge`]; refusals are [`PostError`]s;
//! * the mlx5-specific raw parts, in [`mlx5`]: [`wqe`] (WQE segments, SQ ring writer),
//!   [`cqe`] (CQE layout, ownership, syndromes), [`opcode`], [`buf`] (rings),
//!   [`dbrec`] (doorbell records), [`doorbell`], [`uar`] (doorbell pages and BlueFlame
//!   registers), [`barrier`] (fences); each also at its old path at the root.

#![deny(missing_docs)]

pub mod ah;
pub mod async_event;
pub mod borrowed_mr;
pub mod caps;
pub mod channel;
pub mod context;
pub mod cq;
pub mod device;
pub mod device_mr;
pub mod error;
pub mod memory_region;
pub mod mlx5;
pub mod mr;
pub mod oob;
pub mod owned_mr;
pub mod pd;
pub mod qp;
pub mod shared_mr;
pub mod srq;
pub mod stable_memory;

// The raw modules' old paths (they live in `mlx5`).
pub use mlx5::{barrier, buf, cqe, dbrec, doorbell, opcode, uar, wqe};

// The everyday types, at the root: open, register, create, connect, post, poll.
pub use borrowed_mr::BorrowedMr;
pub use device_mr::{DeviceMemory, DeviceMr};
pub use caps::{DeviceCaps, LinkLayer, PortAttr, PortState};
pub use channel::CompChannel;
pub use context::Context;
pub use cq::{poll::Wc, Cq};
pub use cqe::{WcFlags, WcOpcode, WcStatus};
pub use error::{Error, Result};
pub use memory_region::MemoryRegion;
pub use mr::{Access, Mr};
pub use opcode::FmCeSe;
pub use owned_mr::{OwnedMr, RegError};
pub use pd::Pd;
pub use shared_mr::SharedMr;
pub use stable_memory::StableMemory;
pub use qp::{
    Ah, ConnectOptions, Mtu, PostError, PostErrorKind, Qp, QpAttr, QpCap, QpInit, QpState, QpType, Remote,
};
pub use wqe::{Payload, SendOp, SendWr, Sge, UdDest};
pub use srq::{Srq, SrqAttr};
pub use ah::AddressHandle;
