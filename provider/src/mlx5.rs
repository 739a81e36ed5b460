//! The mlx5-specific, raw half of the provider, kept apart from the verbs as rdma-core
//! keeps `mlx5dv.h` apart from `verbs.h`: the hardware formats and the memory the
//! device shares with the program. Application code needs none of it; it is here for
//! tools that build or inspect WQEs and CQEs, ring doorbells or look at queue memory
//! (tests, the trace, DevX users).
//!
//! * [`wqe`]: send/receive WQE segments, the size rules and the SQ ring writer;
//! * [`cqe`]: the 64-byte CQE layouts, ownership and syndromes;
//! * [`opcode`]: WQE and CQE opcode numbers and the control segment's flags;
//! * [`dbrec`], [`doorbell`], [`uar`], [`uar_regs`], [`barrier`]: doorbell records, the
//!   two-step doorbell, UAR pages, their registers as a typed block, and the fences
//!   between them;
//! * [`buf`]: page-aligned memory the device reads and writes (rings).
//!
//! Each module is also reachable at the crate root under its old path
//! (`provider::wqe`, ...), so code written before this split keeps compiling. The
//! everyday types among them (`Sge`, `SendWr`, `SendOp`, `Payload`, `WcStatus`, ...)
//! are re-exported at the crate root as well.

#[path = "barrier.rs"]
pub mod barrier;
#[path = "buf.rs"]
pub mod buf;
#[path = "cqe/mod.rs"]
pub mod cqe;
#[path = "dbrec.rs"]
pub mod dbrec;
#[path = "doorbell.rs"]
pub mod doorbell;
#[path = "opcode.rs"]
pub mod opcode;
#[path = "uar.rs"]
pub mod uar;
#[path = "uar_regs.rs"]
pub mod uar_regs;
#[path = "wqe/mod.rs"]
pub mod wqe;
