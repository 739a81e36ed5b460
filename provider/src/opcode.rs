//! mlx5 opcode numbers: send WQE opcodes, CQE opcodes and the control segment's
//! `fm_ce_se` byte, defined once in the `prm` crate (softhca decodes the same
//! constants) and re-exported here so provider users need no second dependency.

pub use prm::opcode::{CqeOpcode, FmCeSe, WqeOpcode};
