//! # collective: ring and double-binary-tree collectives over RDMA
//!
//! The NCCL-style collectives (all-reduce, reduce-scatter, all-gather, broadcast,
//! barrier) for ranks that are processes (or machines) connected by RC QPs, moving
//! data with RDMA WRITE WITH IMM into the receiver's registered staging slots, with
//! credits for flow control. Ranks find each other through a TCP bootstrap at
//! `MASTER_ADDR:MASTER_PORT`, under torchrun's, `doorbell launch`'s or Open MPI's
//! variables.
//!
//! Where things are:
//! * API: [`comm`] ([`Communicator`]), element types [`dtype`], operations [`op`];
//! * algorithms: [`ring`] (reduce-scatter + all-gather, chain broadcast), [`tree`]
//!   (double binary tree), [`algo`] (which one, by size);
//! * machinery: [`plan`] (actions and lanes), [`engine`] (running a plan), [`stream`]
//!   (slots, credits, immediates), [`reduce`] (kernels), [`staging`], [`transport`]
//!   (RDMA and in-process), [`bootstrap`] (rendezvous and liveness), [`launch`]
//!   (launcher variables), [`affinity`] (ranks on CPUs when oversubscribed).
//!
//! See docs/collectives.md for how the pieces fit and why.

pub mod affinity;
pub mod algo;
pub mod bootstrap;
pub mod comm;
pub mod doubling;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod launch;
pub mod op;
pub mod plan;
pub mod reduce;
pub mod ring;
pub mod staging;
pub mod stream;
pub mod transport;
pub mod tree;

pub use half;

pub use algo::{Algo, AlgoChoice};
pub use comm::{Communicator, InitOpts, Tuning};
pub use dtype::{DataType, Element};
pub use error::{Error, Result};
pub use launch::LaunchEnv;
pub use op::ReduceOp;
pub use transport::mem::MemFabric;
