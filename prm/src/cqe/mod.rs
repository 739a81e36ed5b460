//! mlx5 completion queue entries: the 64-byte CQE layouts, the ownership (phase)
//! rule, and the error syndromes.
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
//! [`Syndrome`]. The translation into `ibv_wc` terms is the provider's
//! (`provider::cqe`); softhca writes these layouts.

pub mod cqe64;
pub mod err;
pub mod flags_rqpn;
pub mod owner;
pub mod syndrome;

pub use crate::opcode::CqeOpcode;
pub use cqe64::{Cqe64, InlineScatter};
pub use err::ErrCqe;
pub use flags_rqpn::{roce_flags_rqpn, GrhIn, RocePacketType};
pub use owner::{is_sw_owned, load_op_own, sw_owner_bit, CQE_INIT_OP_OWN, CQE_SIZE};
pub use syndrome::Syndrome;
