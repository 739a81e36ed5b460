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
//!
//! ## From opening a device to a completed RDMA WRITE
//!
//! One RC QP connected to itself on the embedded softhca (two processes or two hosts
//! do the same with the other side's QP number, PSN and GID from [`oob`]): open the
//! device, allocate a PD, register memory, create a CQ and a QP, move the QP to INIT and
//! connect it (RTR and RTS with ibv_rc_pingpong's defaults), post a signaled RDMA WRITE
//! and poll its completion. Each step is one call; [`Qp::post_send`] is where the verb
//! becomes a WQE (`wqe::send`), the doorbell record and the BlueFlame write.
//!
//! ```
//! use provider::{Access, ConnectOptions, Context, Payload, QpInit, QpType, Remote, SendOp, SendWr, Wc, WcStatus};
//! use provider::qp::QpCap;
//!
//! let ctx = Context::open(None)?; // softhca0 unless DOORBELL_DEVICE names a kernel device
//! let pd = ctx.alloc_pd()?;
//! // 8 KiB the provider allocates and registers: the source in the first half,
//! // the target (remote write allowed) in the second.
//! let mut mem = pd.alloc_mr(8192, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! mem[..5].copy_from_slice(b"hello");
//! let mut cq = ctx.create_cq(16, None)?;
//! let cap = QpCap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
//! let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None })?;
//! qp.to_init(1, Access::REMOTE_WRITE)?;
//! let gid = ctx.default_gid(1)?;
//! qp.connect(&Remote { qpn: qp.qpn(), psn: 0, gid: gid.raw() }, &ConnectOptions::default())?;
//!
//! let sge = [mem.sge(..5)];
//! let write = SendOp::RdmaWrite { raddr: mem.addr() + 4096, rkey: mem.rkey() };
//! qp.post_send(1, &SendWr::new(write, Payload::Sgl(&sge)).signaled())?;
//!
//! let mut wc = [Wc::default(); 1];
//! while cq.poll(&mut wc) == 0 {
//!     ctx.progress(); // softhca in this thread (polled mode); a no-op on hardware
//! }
//! assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::Success));
//! assert_eq!(&mem[4096..4101], b"hello");
//! # Ok::<(), provider::Error>(())
//! ```

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
pub use mlx5::{barrier, buf, cqe, dbrec, doorbell, opcode, uar, uar_regs, wqe};

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
