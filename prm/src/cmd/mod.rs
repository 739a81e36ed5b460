//! PRM command mailboxes: what a driver hands the firmware (the inbox) and what it
//! answers (the outbox), as bit layouts (see [`crate::bits`]).
//!
//! Every inbox starts with the same header ([`header::MboxIn`]: `opcode`, `uid`,
//! `op_mod`) and every outbox with [`header::MboxOut`] (`status`, `syndrome`): the
//! kernel's DevX reads the opcode and writes the caller's uid there, the firmware
//! answers a failure with a [`status`] and a 32-bit syndrome. Names and widths are the
//! PRM's, taken from the `mlx5_ifc_*_bits` structures in rdma-core's
//! `providers/mlx5/mlx5_ifc.h` (and, for the CQ context rdma-core lacks, the
//! kernel's `include/linux/mlx5/mlx5_ifc.h`); offsets are derived by
//! [`layout!`](crate::layout) and tested against the offsets those files give.
//!
//! Where a command carries a page list (`pas[]`, `klm_pas_mtt[]`) it follows the
//! layout; read it through the view's `tail`.
//!
//! DevX's QUERY_EQN is not a firmware command but a uverbs method of mlx5_ib (the
//! kernel maps a completion vector to the EQ number `cqc.c_eqn` wants), so it has no
//! mailbox here; its attributes belong with the other uverbs layouts.

pub mod cq;
pub mod flow;
pub mod hca_cap;
pub mod header;
pub mod mkey;
pub mod opcode;
pub mod pd;
pub mod qp;
pub mod rq;
pub mod sq;
pub mod srq;
pub mod status;
pub mod tir;
pub mod tis;
pub mod uar;
pub mod uctx;
pub mod umem;
pub mod wq;
pub mod xrc_srq;
pub mod xrcd;

#[cfg(test)]
mod raw_tests;
#[cfg(test)]
mod tests;
