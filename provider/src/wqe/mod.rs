//! mlx5 send/receive queue formats: the byte layout of every WQE segment, the size
//! rules, and writers that build a whole send WQE in place in the SQ ring.
//!
//! Layouts follow `struct mlx5_wqe_*` in `<infiniband/mlx5dv.h>` and the PRM; every
//! multi-byte field is big-endian. Each segment file holds one `#[repr(C)]` raw type
//! (zerocopy-derived, so it can be read in place from a fetched WQE as softhca
//! does) with a constructor, a `write` into its slot and read accessors. The
//! [`send`] module composes them; it allocates nothing and takes slots straight from
//! the ring, so the post path writes each byte once.
//!
//! Units: the SQ is an array of 64-byte WQE basic blocks ([`WQEBB_SIZE`]); a WQE
//! starts on a WQEBB, its size is counted in 16-byte units ([`DS_SIZE`]) in the
//! control segment, and it may run past the end of the ring into its start.

pub mod atomic;
pub mod ctrl;
pub mod data;
pub mod datagram;
pub mod inline;
pub mod raddr;
pub mod ring;
pub mod send;
pub mod size;
pub mod small;

#[cfg(test)]
mod send_tests;

/// Bytes in a WQE basic block (`MLX5_SEND_WQE_BB`).
pub const WQEBB_SIZE: u32 = 64;
/// log2 of [`WQEBB_SIZE`] (`MLX5_SEND_WQE_SHIFT`).
pub const WQEBB_SHIFT: u32 = 6;
/// Bytes in one DS unit, the granularity of WQE sizes and segments.
pub const DS_SIZE: u32 = 16;

pub use atomic::{AtomicSeg, ATOMIC_SIZE};
pub use ctrl::{CtrlSeg, MAX_DS};
pub use data::{write_recv_wqe, DataSeg, Sge, INVALID_LKEY};
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
