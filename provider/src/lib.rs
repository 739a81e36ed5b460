//! provider
pub mod cqe;
pub mod opcode;
pub mod wqe;
