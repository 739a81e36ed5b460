//! Why a post verb refused a work request, and which one.
//!
//! Like `ibv_post_send`'s `bad_wr`, a [`PostError`] names the first work request of the
//! list that was not posted: every request before [`PostError::index`] was written and
//! handed to the device (the doorbell was rung for them), the failing one and all after
//! it were not. The reasons are local checks, made before anything reaches the device,
//! so none of them is a device error; [`PostError::errno`] gives the errno libmlx5
//! returns for the same case (ENOMEM for a full queue, EINVAL for the rest).

use nix::errno::Errno;

use super::QpType;
use crate::opcode::WqeOpcode;

/// Why one work request could not be posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PostErrorKind {
    /// The QP was created without a send queue (`max_send_wr` 0).
    #[error("the QP has no send queue")]
    NoSendQueue,
    /// The QP was created without a receive queue (`max_recv_wr` 0).
    #[error("the QP has no receive queue")]
    NoRecvQueue,
    /// The send queue has fewer free WQEBBs than the WQE needs: poll completions first.
    #[error("send queue full: the WQE needs {need} WQEBBs, {free} free")]
    SendQueueFull {
        /// WQEBBs the WQE needs.
        need: u16,
        /// WQEBBs free now.
        free: u32,
    },
    /// The receive queue has no free slot: poll completions first.
    #[error("receive queue full ({capacity} WQEs)")]
    RecvQueueFull {
        /// Receive WQEs the queue holds.
        capacity: u32,
    },
    /// More gather/scatter entries than the QP was created for (`max_send_sge` /
    /// `max_recv_sge`; libmlx5 counts every entry of the list, empty ones too).
    #[error("{sges} SGEs exceed the QP's limit of {max}")]
    TooManySges {
        /// Entries in the work request.
        sges: usize,
        /// The QP's limit.
        max: u32,
    },
    /// An inline payload longer than the QP's granted `max_inline_data`.
    #[error("inline payload of {len} B exceeds the QP's max_inline_data {max}")]
    InlineTooBig {
        /// The payload's bytes.
        len: usize,
        /// The QP's limit.
        max: u32,
    },
    /// Inline data on an operation that has no outgoing payload (READ, atomics).
    #[error("{op:?} cannot carry inline data")]
    InlineNotAllowed {
        /// The operation asked for.
        op: WqeOpcode,
    },
    /// The operation does not exist for the QP's transport (READ or atomics on UC,
    /// anything but SEND on UD, SEND with invalidate outside RC).
    #[error("{op:?} is not an operation of a {qp_type:?} QP")]
    BadOpcode {
        /// The operation asked for.
        op: WqeOpcode,
        /// The QP's transport.
        qp_type: QpType,
    },
    /// A SEND on a UD QP without an address (`SendWr::to_ud`).
    #[error("a UD send needs a destination (SendWr::to_ud)")]
    NoDestination,
    /// A UD destination on a connected QP.
    #[error("a UD destination on a {qp_type:?} QP")]
    DestinationOnConnected {
        /// The QP's transport.
        qp_type: QpType,
    },
    /// The WQE would exceed 63 x 16 bytes, the most the control segment can describe.
    #[error("WQE larger than 63 x 16 bytes")]
    WqeTooLarge,
    /// The WQE is larger than the whole send queue.
    #[error("a WQE of {wqebbs} WQEBBs does not fit a send queue of {wqe_cnt}")]
    LargerThanQueue {
        /// WQEBBs the WQE needs.
        wqebbs: u16,
        /// WQEBBs in the send queue.
        wqe_cnt: u32,
    },
}

impl PostErrorKind {
    /// The errno libmlx5's post verbs return for this case.
    pub fn errno(&self) -> Errno {
        match self {
            Self::SendQueueFull { .. } | Self::RecvQueueFull { .. } => Errno::ENOMEM,
            _ => Errno::EINVAL,
        }
    }

    /// True when the request may succeed once completions are polled.
    pub fn is_queue_full(&self) -> bool {
        matches!(self, Self::SendQueueFull { .. } | Self::RecvQueueFull { .. })
    }
}

/// A post verb stopped at work request `index` of its list (0 for the single-request
/// verbs); requests `0..index` were posted and their doorbell rung.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{verb}: work request {index}: {kind}")]
pub struct PostError {
    /// `post_send` or `post_recv`.
    pub verb: &'static str,
    /// Position of the refused request in the list; also how many were posted.
    pub index: usize,
    /// Why.
    pub kind: PostErrorKind,
}

impl PostError {
    /// The errno libmlx5 returns for this case.
    pub fn errno(&self) -> Errno {
        self.kind.errno()
    }
}
