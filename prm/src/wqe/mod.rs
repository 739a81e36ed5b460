//! mlx5 send/receive queue formats: the byte layout of every WQE segment as the
//! device reads it (`struct mlx5_wqe_*` in `<infiniband/mlx5dv.h>` and the PRM).
//!
//! Every multi-byte field is big-endian. Each file holds one `#[repr(C)]` raw type,
//! zerocopy-derived, so the provider stores it into its SQ slot with one copy and
//! softhca reads it in place from a fetched WQE; constructors and accessors do the
//! bit packing, so neither side writes an offset or a shift of its own. Composing
//! whole WQEs (size rules, ring wrap, BlueFlame) is the provider's business
//! (`provider::wqe`), executing them softhca's.
//!
//! Units: the SQ is an array of 64-byte WQE basic blocks ([`WQEBB_SIZE`]); a WQE
//! starts on a WQEBB, its size is counted in 16-byte units ([`DS_SIZE`]) in the
//! control segment, and it may run past the end of the ring into its start.

pub mod atomic;
pub mod ctrl;
pub mod data;
pub mod datagram;
pub mod eth;
pub mod inline;
pub mod raddr;
pub mod xrc;

/// Bytes in a WQE basic block (`MLX5_SEND_WQE_BB`).
pub const WQEBB_SIZE: u32 = 64;
/// log2 of [`WQEBB_SIZE`] (`MLX5_SEND_WQE_SHIFT`).
pub const WQEBB_SHIFT: u32 = 6;
/// Bytes in one DS unit, the granularity of WQE sizes and segments.
pub const DS_SIZE: u32 = 16;

pub use atomic::{AtomicSeg, ATOMIC_SIZE};
pub use ctrl::{CtrlSeg, MAX_DS};
pub use data::{DataSeg, INVALID_LKEY};
pub use datagram::{DatagramSeg, EXTENDED_UD_AV};
pub use eth::EthSeg;
pub use inline::{inline_ds, InlineHeader, INLINE_HDR_SIZE, INLINE_SEG};
pub use raddr::RaddrSeg;
