//! mlx5 send/receive queues: the WQE segment layouts, the size rules, and writers
//! that build a whole send WQE in place in the SQ ring.
//!
//! The segment layouts (`struct mlx5_wqe_*` of `<infiniband/mlx5dv.h>`) are defined
//! once in the `prm` crate, which softhca reads them through too; the [`ctrl`],
//! [`raddr`], [`atomic`], [`datagram`] modules and the raw halves of [`data`] and
//! [`inline`] are re-exports of it. What is the provider's own is here: the
//! [`send`] module composes the segments; it allocates nothing and takes slots
//! straight from the ring, so the post path writes each byte once.
//!
//! Units: the SQ is an array of 64-byte WQE basic blocks ([`WQEBB_SIZE`]); a WQE
//! starts on a WQEBB, its size is counted in 16-byte units ([`DS_SIZE`]) in the
//! control segment, and it may run past the end of the ring into its start.

pub use prm::wqe::{atomic, ctrl, datagram, raddr};
pub mod data;
pub mod inline;
pub mod ring;
pub mod send;
pub mod size;
pub mod small;

#[cfg(test)]
mod send_tests;

pub use prm::wqe::{DS_SIZE, WQEBB_SHIFT, WQEBB_SIZE};

pub use atomic::{AtomicSeg, ATOMIC_SIZE};
pub use ctrl::{CtrlSeg, MAX_DS};
pub use data::{data_seg, write_recv_wqe, DataSeg, Sge, INVALID_LKEY};
pub use datagram::{DatagramSeg, EXTENDED_UD_AV};
pub use inline::{
    copy_wrapping, inline_ds, write_inline, InlineHeader, INLINE_HDR_SIZE, INLINE_SEG,
};
pub use raddr::RaddrSeg;
pub use ring::{SqRing, MAX_WQE_CNT};
pub use send::{write_send_wqe, Payload, SendOp, SendWr, UdDest, WqeError};
pub use size::{
    header_ds, max_inline_data, send_wqe_info, send_wqe_stride, sq_overhead, PayloadLen,
    QpTransport, SendOps, WqeInfo, MAX_WQE_SIZE,
};
pub use small::write_small_send_wqe;
