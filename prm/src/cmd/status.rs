//! Command status codes (`MLX5_CMD_STAT_*`): the outbox's `status` byte.
//!
//! Linux's mlx5_core turns each into an errno (`cmd_status_to_err`); DevX returns
//! `EREMOTEIO` with the outbox copied back, so the caller sees the status itself.

pub const OK: u8 = 0x00;
pub const INT_ERR: u8 = 0x01;
/// Unknown opcode, or an op_mod the command does not have.
pub const BAD_OP_ERR: u8 = 0x02;
/// A field out of range.
pub const BAD_PARAM_ERR: u8 = 0x03;
pub const BAD_SYS_STATE_ERR: u8 = 0x04;
/// The object named does not exist (or is not the caller's).
pub const BAD_RES_ERR: u8 = 0x05;
/// The object is in use (destroying a CQ a QP still uses).
pub const RES_BUSY: u8 = 0x06;
/// A limit exceeded (more objects than the capability allows).
pub const LIM_ERR: u8 = 0x08;
pub const BAD_RES_STATE_ERR: u8 = 0x09;
pub const IX_ERR: u8 = 0x0a;
pub const NO_RES_ERR: u8 = 0x0f;
/// A state transition the QP's current state does not allow.
pub const BAD_QP_STATE_ERR: u8 = 0x10;
pub const BAD_PKT_ERR: u8 = 0x30;
pub const BAD_SIZE_OUTS_CQES_ERR: u8 = 0x40;
/// The inbox is shorter than the command.
pub const BAD_INP_LEN_ERR: u8 = 0x50;
/// The outbox is shorter than the answer.
pub const BAD_OUTP_LEN_ERR: u8 = 0x51;

/// The PRM name of a status (`MLX5_CMD_STAT_<name>`), for messages; `None` for a
/// status the PRM does not define.
pub const fn name(status: u8) -> Option<&'static str> {
    Some(match status {
        OK => "OK",
        INT_ERR => "INT_ERR",
        BAD_OP_ERR => "BAD_OP_ERR",
        BAD_PARAM_ERR => "BAD_PARAM_ERR",
        BAD_SYS_STATE_ERR => "BAD_SYS_STATE_ERR",
        BAD_RES_ERR => "BAD_RES_ERR",
        RES_BUSY => "RES_BUSY",
        LIM_ERR => "LIM_ERR",
        BAD_RES_STATE_ERR => "BAD_RES_STATE_ERR",
        IX_ERR => "IX_ERR",
        NO_RES_ERR => "NO_RES_ERR",
        BAD_QP_STATE_ERR => "BAD_QP_STATE_ERR",
        BAD_PKT_ERR => "BAD_PKT_ERR",
        BAD_SIZE_OUTS_CQES_ERR => "BAD_SIZE_OUTS_CQES_ERR",
        BAD_INP_LEN_ERR => "BAD_INP_LEN_ERR",
        BAD_OUTP_LEN_ERR => "BAD_OUTP_LEN_ERR",
        _ => return None,
    })
}
