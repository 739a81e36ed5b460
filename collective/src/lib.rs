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
//!   (double binary tree), [`doubling`] (recursive doubling), [`halving`]
//!   (halving-doubling), [`alltoall`] (one-step reduce-scatter and all-gather),
//!   [`algo`] (which one, by size);
//! * machinery: [`plan`] (actions and lanes), [`engine`] (running a plan), [`stream`]
//!   (slots, credits, immediates), [`direct`] (all-gather writes straight into the
//!   receiver's buffer), [`reduce`] (kernels), [`staging`], [`transport`]
//!   (RDMA and in-process), [`bootstrap`] (rendezvous and liveness), [`launch`]
//!   (launcher variables), [`affinity`] (ranks on CPUs when oversubscribed).
//!
//! See docs/collectives.md for how the pieces fit and why.

pub mod affinity;
pub mod algo;
pub mod alltoall;
pub mod bootstrap;
pub mod comm;
pub mod doubling;
pub mod direct;
pub mod dtype;
pub mod engine;
pub mod error;
pub mod halving;
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

/// Whether a value of an on/off environment switch means off: `0`, `false`, `off` or
/// `no`, in any case and with surrounding blanks.
pub(crate) fn is_off(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "0" | "false" | "off" | "no")
}

/// Whether the environment switch `var` is set to off ([`is_off`]); unset is on.
pub(crate) fn switched_off(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| is_off(&v))
}

#[cfg(test)]
mod tests {
    #[test]
    fn off_switches() {
        for off in ["0", " 0 ", "false", "OFF", "no"] {
            assert!(super::is_off(off), "{off:?}");
        }
        for on in ["1", "", "on", "262144"] {
            assert!(!super::is_off(on), "{on:?}");
        }
    }
}
