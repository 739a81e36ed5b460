//! mlx5 completion queue entries: the 64-byte CQE layouts as read-only views, the
//! ownership (phase) rule, and the translation of opcodes and error syndromes into
//! the work-completion vocabulary ibverbs users know.
//!
//! The layouts, the ownership rule and the syndrome numbers are the `prm` crate's
//! (softhca writes CQEs through the same definitions) and are re-exported here;
//! the translation into `ibv_wc` terms ([`WcStatus`], [`WcOpcode`], [`Completion`])
//! is the provider's own.
//!
//! A CQ is an array of `ncqe` (a power of two) 64-byte entries, initialised to
//! `op_own = 0xF0` (opcode INVALID). The device writes entry `n & (ncqe - 1)` with the
//! owner bit set to the parity of the lap (`n / ncqe`); software, at consumer index
//! `ci`, owns the entry when the opcode is not INVALID and the owner bit equals
//! `!!(ci & ncqe)` ([`owner`]). With 128-byte CQEs the 64-byte CQE described here is
//! the second half of each entry.
//!
//! What a completion means depends on the CQE opcode: requester CQEs
//! ([`CqeOpcode::Req`]) carry the WQE opcode in `sop_drop_qpn[31:24]` and the WQE
//! index in `wqe_counter`; responder CQEs carry their own opcode; error CQEs
//! ([`CqeOpcode::ReqErr`], [`CqeOpcode::RespErr`]) use the [`ErrCqe`] layout with a
//! [`Syndrome`].

pub use prm::cqe::{cqe64, err, owner};
pub mod completion;
pub mod status;
pub mod syndrome;
pub mod wc_opcode;

pub use crate::opcode::CqeOpcode;
pub use completion::{Completion, ErrStatus};
pub use cqe64::{Cqe64, InlineScatter};
pub use err::ErrCqe;
pub use owner::{is_sw_owned, load_op_own, sw_owner_bit, CQE_INIT_OP_OWN, CQE_SIZE};
pub use status::WcStatus;
pub use syndrome::{Syndrome, SyndromeStatus};
pub use wc_opcode::{WcFlags, WcOpcode};
