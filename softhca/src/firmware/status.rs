//! Command statuses, the syndromes softhca's firmware answers with, and the errno
//! Linux's mlx5 command layer turns each status into.
//!
//! The status byte is the PRM's ([`prm::cmd::status`]). A real firmware's syndrome
//! is an opaque 32-bit number that only its makers can decode; softhca's are its own,
//! one per reason (below), so that a test or a DevX user can tell which check refused
//! a command, and they never collide with 0 (success).

use nix::errno::Errno;
use prm::cmd::status::*;

/// A failed command: what goes into the outbox header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// [`prm::cmd::status`]; 0 is success.
    pub status: u8,
    /// Which check refused the command ([`syndrome`]); 0 on success.
    pub syndrome: u32,
}

impl Outcome {
    pub const OK: Outcome = Outcome { status: OK, syndrome: 0 };

    pub(crate) const fn err(status: u8, syndrome: u32) -> Outcome {
        Outcome { status, syndrome }
    }

    pub fn is_ok(&self) -> bool {
        self.status == OK
    }

    /// The errno Linux's mlx5_core returns to its caller for this status
    /// ([`errno_of`]).
    pub fn errno(&self) -> Option<Errno> {
        errno_of(self.status)
    }
}

/// `cmd_status_to_err` of Linux's `drivers/net/ethernet/mellanox/mlx5/core/cmd.c`
/// (6.1; `mlx5_cmd_check` applies it to every failed command's status): the errno a
/// kernel caller of the command sees, None for success. A DevX caller sees EREMOTEIO
/// instead, with the outbox copied back (`devx.c`), so the status itself reaches it.
/// Unknown statuses are EIO there, as here.
pub fn errno_of(status: u8) -> Option<Errno> {
    Some(match status {
        OK => return None,
        INT_ERR => Errno::EIO,
        BAD_OP_ERR => Errno::EINVAL,
        BAD_PARAM_ERR => Errno::EINVAL,
        BAD_SYS_STATE_ERR => Errno::EIO,
        BAD_RES_ERR => Errno::EINVAL,
        RES_BUSY => Errno::EBUSY,
        LIM_ERR => Errno::ENOMEM,
        BAD_RES_STATE_ERR => Errno::EINVAL,
        IX_ERR => Errno::EINVAL,
        NO_RES_ERR => Errno::EAGAIN,
        BAD_INP_LEN_ERR => Errno::EIO,
        BAD_OUTP_LEN_ERR => Errno::EIO,
        BAD_QP_STATE_ERR => Errno::EINVAL,
        BAD_PKT_ERR => Errno::EINVAL,
        BAD_SIZE_OUTS_CQES_ERR => Errno::EINVAL,
        _ => Errno::EIO,
    })
}

/// softhca's syndromes, one per refusing check. The high byte repeats the status so
/// a syndrome alone says which status it came with.
pub mod syndrome {
    /// INT_ERR: an inconsistency inside the firmware (a bug).
    pub const INTERNAL: u32 = 0x0100_0001;
    /// BAD_OP: an opcode softhca's firmware does not execute.
    pub const UNKNOWN_OPCODE: u32 = 0x0200_0001;
    /// BAD_PARAM: an op_mod the command does not have (a capability page softhca
    /// does not answer, or a nonzero op_mod where the command has none).
    pub const BAD_OP_MOD: u32 = 0x0300_0001;
    /// BAD_PARAM: QUERY_HCA_CAP for another function (softhca has one).
    pub const OTHER_FUNCTION: u32 = 0x0300_0002;
    /// BAD_PARAM: the object named belongs to another uid.
    pub const FOREIGN_OBJECT: u32 = 0x0300_0003;
    /// BAD_PARAM: a context names a PD that does not exist (or is another uid's).
    pub const BAD_PD: u32 = 0x0300_0004;
    /// BAD_PARAM: a context names a CQ that does not exist (or is another uid's).
    pub const BAD_CQ: u32 = 0x0300_0005;
    /// BAD_PARAM: a context names a UAR that does not exist (or is another uid's).
    pub const BAD_UAR: u32 = 0x0300_0006;
    /// BAD_PARAM: `cqc.log_cq_size` above `log_max_cq_sz`.
    pub const CQ_SIZE: u32 = 0x0300_0007;
    /// BAD_PARAM: `cqc.cqe_sz` neither 64 nor 128 bytes.
    pub const CQE_SIZE: u32 = 0x0300_0008;
    /// BAD_PARAM: a CQ feature the capabilities say is absent (compression,
    /// overrun ignore, collapsed CQE).
    pub const CQ_FEATURE: u32 = 0x0300_0009;
    /// BAD_PARAM: a QP service type other than RC, UC, UD.
    pub const QP_TYPE: u32 = 0x0300_000a;
    /// BAD_PARAM: `qpc.log_rq_stride` beyond `max_wqe_sz_rq`.
    pub const RQ_STRIDE: u32 = 0x0300_000b;
    /// BAD_PARAM: `qpc.mtu` not one of the IB MTUs.
    pub const MTU: u32 = 0x0300_000c;
    /// BAD_PARAM: a port other than 1, or a P_Key index beyond the table.
    pub const PORT_OR_PKEY: u32 = 0x0300_000d;
    /// BAD_PARAM: an mkey access mode other than MTT.
    pub const ACCESS_MODE: u32 = 0x0300_000e;
    /// BAD_PARAM: CREATE_UCTX asking for capabilities (`uctx.cap`) the device lacks.
    pub const UCTX_CAP: u32 = 0x0300_000f;
    /// BAD_PARAM: a UMEM page list that is empty, misaligned or of an unknown page size.
    pub const UMEM_PAGES: u32 = 0x0300_0010;
    /// BAD_PARAM: a context names a UMEM that does not exist, is another uid's, or is
    /// too small for what it is meant to hold.
    pub const BAD_UMEM: u32 = 0x0300_0011;
    /// BAD_PARAM: a ring or doorbell record address softhca cannot reach (no UMEM and
    /// no page list, or a misaligned doorbell record).
    pub const BAD_ADDRESS: u32 = 0x0300_0012;
    /// BAD_PARAM: `log_rq_size` or `log_sq_size` above `log_max_qp_sz`.
    pub const QP_SIZE: u32 = 0x0300_0013;
    /// BAD_PARAM: `log_srq_size` above `log_max_srq_sz`, or an SRQ WQE stride above
    /// `max_wqe_sz_rq`.
    pub const SRQ_SIZE: u32 = 0x0300_0014;
    /// BAD_PARAM: a QP context names an SRQ that does not exist or is another uid's.
    pub const BAD_SRQ: u32 = 0x0300_0015;
    /// BAD_PARAM: an XRC SRQ or XRC QP context names an XRC domain that does not exist
    /// or is another uid's.
    pub const BAD_XRCD: u32 = 0x0300_0016;
    /// BAD_RES: the object named does not exist.
    /// A WQ that is not cyclic, or an RQ whose WQEs are not in its own buffer.
    pub const WQ_TYPE: u32 = 0x0300_0030;
    /// An SQ or RQ created in a state other than RST, or moved from a state it is not
    /// in or along a move the PRM does not have.
    pub const WQ_STATE: u32 = 0x0300_0031;
    /// An SQ naming no TIS of the issuer (or more than one).
    pub const BAD_TIS: u32 = 0x0300_0032;
    /// A TIR naming no RQ of the issuer.
    pub const BAD_RQ: u32 = 0x0300_0033;
    /// An indirect TIR (RSS): no RQ tables here.
    pub const TIR_DISP_TYPE: u32 = 0x0300_0034;
    pub const NO_OBJECT: u32 = 0x0500_0001;
    /// BAD_RES_STATE: a QP transition its current state does not have.
    pub const QP_STATE: u32 = 0x0900_0001;
    /// RES_BUSY: a destroy of an object another object still uses.
    pub const IN_USE: u32 = 0x0600_0001;
    /// NO_RES: the object's number space is exhausted.
    pub const EXHAUSTED: u32 = 0x0f00_0001;
    /// BAD_INP_LEN: the inbox is shorter than the command.
    pub const INBOX_LEN: u32 = 0x5000_0001;
    /// BAD_OUTP_LEN: the outbox is shorter than the answer.
    pub const OUTBOX_LEN: u32 = 0x5100_0001;
}
