//! What a DevX call can fail with.
//!
//! Linux's DevX answers a command the firmware refused with `EREMOTEIO` and the
//! outbox copied back, so the status and syndrome reach the caller: [`Error::Firmware`]
//! carries them, and its message names the status as the PRM does (`BAD_PARAM_ERR`).
//! The syndrome is the firmware's own number: on a ConnectX only its makers can decode
//! it, so it is printed; on softhca (a software device) it is also named, from
//! softhca's `firmware::status::syndrome` (`BAD_PD`, `CQ_SIZE`...). Everything the kernel refuses before the firmware runs (a
//! command not on DevX's list, another context's object, a short mailbox) is
//! [`Error::Os`] with the kernel's errno.

use nix::errno::Errno;
use prm::bits::View;
use prm::cmd::header::MboxOut;

/// A DevX error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel (or the device underneath) refused the call.
    #[error("{op}: {errno}")]
    Os { op: &'static str, errno: Errno },
    /// The firmware executed the command and answered a failure. `syndrome_name` is
    /// set when the firmware's syndromes are known by name (softhca's).
    #[error("{op}: firmware answered {} (status {status:#04x}, syndrome {syndrome:#010x}{}) to opcode {opcode:#06x}",
            prm::cmd::status::name(*status).unwrap_or("an unknown status"),
            syndrome_name.map(|n| format!(" {n}")).unwrap_or_default())]
    Firmware { op: &'static str, opcode: u16, status: u8, syndrome: u32, syndrome_name: Option<&'static str> },
    /// The context was opened without DevX (the device refused the flag).
    #[error("DevX was not granted to this context (the device refused GET_CONTEXT's DEVX flag)")]
    NotGranted,
    /// A mailbox too short for its layout, or a value too wide for its field.
    #[error("{op}: {why}")]
    Invalid { op: &'static str, why: String },
    /// Opening the context or one of its verbs objects failed.
    #[error(transparent)]
    Provider(#[from] provider::Error),
}

impl Error {
    /// The errno the call returned: `EREMOTEIO` for a firmware failure.
    pub fn errno(&self) -> Option<Errno> {
        match self {
            Error::Os { errno, .. } => Some(*errno),
            Error::Firmware { .. } => Some(Errno::EREMOTEIO),
            Error::NotGranted => Some(Errno::EOPNOTSUPP),
            Error::Invalid { .. } => Some(Errno::EINVAL),
            Error::Provider(_) => None,
        }
    }

    /// The PRM status of a firmware failure.
    pub fn status(&self) -> Option<u8> {
        match self {
            Error::Firmware { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// The syndrome of a firmware failure.
    pub fn syndrome(&self) -> Option<u32> {
        match self {
            Error::Firmware { syndrome, .. } => Some(*syndrome),
            _ => None,
        }
    }

    /// Turns a failed DevX ioctl into an error: `EREMOTEIO` with an outbox that
    /// carries a status becomes [`Error::Firmware`].
    pub(crate) fn from_call(op: &'static str, inbox: &[u8], out: &[u8], errno: Errno) -> Error {
        if errno == Errno::EREMOTEIO {
            if let Ok(v) = View::<MboxOut>::new(out) {
                if v.get(MboxOut::status) != 0 {
                    return Error::Firmware {
                        op,
                        opcode: opcode_of(inbox),
                        status: v.get(MboxOut::status),
                        syndrome: v.get(MboxOut::syndrome),
                        syndrome_name: None,
                    };
                }
            }
        }
        Error::Os { op, errno }
    }
}

/// The opcode of an inbox (0 when it is too short to have one).
pub fn opcode_of(inbox: &[u8]) -> u16 {
    if inbox.len() >= 2 { u16::from_be_bytes([inbox[0], inbox[1]]) } else { 0 }
}

/// A DevX result.
pub type Result<T> = std::result::Result<T, Error>;

/// Checks an outbox that came back with success from the kernel: a real kernel
/// returns `EREMOTEIO` for any nonzero status, but a status in a successful answer is
/// still a failure, so it is checked here too.
pub(crate) fn check_out(op: &'static str, inbox: &[u8], out: &[u8]) -> Result<()> {
    match View::<MboxOut>::new(out) {
        Ok(v) if v.get(MboxOut::status) != 0 => Err(Error::Firmware {
            op,
            opcode: opcode_of(inbox),
            status: v.get(MboxOut::status),
            syndrome: v.get(MboxOut::syndrome),
            syndrome_name: None,
        }),
        _ => Ok(()),
    }
}

/// The name of one of softhca's firmware syndromes (`softhca::firmware::status::syndrome`),
/// for messages. A ConnectX's syndromes are its firmware's own numbers, decodable only by
/// its makers, so they are never named.
pub fn softhca_syndrome_name(syndrome: u32) -> Option<&'static str> {
    use softhca::firmware::status::syndrome as s;
    const NAMES: &[(u32, &str)] = &[
        (s::INTERNAL, "INTERNAL"), (s::UNKNOWN_OPCODE, "UNKNOWN_OPCODE"), (s::BAD_OP_MOD, "BAD_OP_MOD"),
        (s::OTHER_FUNCTION, "OTHER_FUNCTION"), (s::FOREIGN_OBJECT, "FOREIGN_OBJECT"), (s::BAD_PD, "BAD_PD"),
        (s::BAD_CQ, "BAD_CQ"), (s::BAD_UAR, "BAD_UAR"), (s::CQ_SIZE, "CQ_SIZE"), (s::CQE_SIZE, "CQE_SIZE"),
        (s::CQ_FEATURE, "CQ_FEATURE"), (s::QP_TYPE, "QP_TYPE"), (s::RQ_STRIDE, "RQ_STRIDE"), (s::MTU, "MTU"),
        (s::PORT_OR_PKEY, "PORT_OR_PKEY"), (s::ACCESS_MODE, "ACCESS_MODE"), (s::UCTX_CAP, "UCTX_CAP"),
        (s::UMEM_PAGES, "UMEM_PAGES"), (s::BAD_UMEM, "BAD_UMEM"), (s::BAD_ADDRESS, "BAD_ADDRESS"),
        (s::QP_SIZE, "QP_SIZE"), (s::NO_OBJECT, "NO_OBJECT"), (s::QP_STATE, "QP_STATE"), (s::IN_USE, "IN_USE"),
        (s::EXHAUSTED, "EXHAUSTED"), (s::INBOX_LEN, "INBOX_LEN"), (s::OUTBOX_LEN, "OUTBOX_LEN"),
    ];
    NAMES.iter().find(|(v, _)| *v == syndrome).map(|(_, n)| *n)
}

impl Error {
    /// Names the syndrome of a firmware error from a software device (softhca).
    pub(crate) fn on(mut self, dev: &uverbs::Device) -> Error {
        if let Error::Firmware { syndrome, syndrome_name, .. } = &mut self {
            if !dev.is_kernel() {
                *syndrome_name = softhca_syndrome_name(*syndrome);
            }
        }
        self
    }
}

/// One line per command at debug level (target `devx`): what was sent, what the
/// firmware (or the kernel) answered. `RUST_LOG=devx=debug` shows a run's commands.
pub(crate) fn trace_cmd<T>(op: &'static str, inbox: &[u8], out: &[u8], r: &Result<T>) {
    if !tracing::enabled!(target: "devx", tracing::Level::DEBUG) {
        return;
    }
    let opcode = opcode_of(inbox);
    let name = crate::cmd::table::command(opcode).map(|c| c.name).unwrap_or("?");
    let op_mod = if inbox.len() >= 8 { u16::from_be_bytes([inbox[6], inbox[7]]) } else { 0 };
    match r {
        Ok(_) => tracing::debug!(target: "devx", op, cmd = name, opcode = format_args!("{opcode:#x}"), op_mod,
                                 inlen = inbox.len(), outlen = out.len(), "status OK"),
        Err(Error::Firmware { status, syndrome, .. }) => tracing::debug!(target: "devx", op, cmd = name,
            opcode = format_args!("{opcode:#x}"), op_mod, status = prm::cmd::status::name(*status).unwrap_or("?"),
            syndrome = format_args!("{syndrome:#x}"), "firmware refused (EREMOTEIO)"),
        Err(e) => tracing::debug!(target: "devx", op, cmd = name, opcode = format_args!("{opcode:#x}"), op_mod,
                                  error = %e, "kernel refused"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eremoteio_with_a_status_is_a_firmware_error_named_by_the_prm() {
        // mbox_out: status @0 (8 bits), syndrome @0x20 (32 bits)
        let mut out = [0u8; 16];
        out[0] = 0x03;
        out[4..8].copy_from_slice(&0x0300_0001u32.to_be_bytes());
        let inbox = [0x05, 0x02, 0, 0];
        let e = Error::from_call("op", &inbox, &out, Errno::EREMOTEIO);
        assert_eq!((e.status(), e.syndrome(), e.errno()), (Some(3), Some(0x0300_0001), Some(Errno::EREMOTEIO)));
        let msg = e.to_string();
        assert!(msg.contains("BAD_PARAM_ERR") && msg.contains("0x03000001") && msg.contains("0x0502"), "{msg}");
        // Another errno, or EREMOTEIO without a status, stays the kernel's errno.
        assert!(matches!(Error::from_call("op", &inbox, &out, Errno::EINVAL), Error::Os { errno: Errno::EINVAL, .. }));
        assert!(matches!(Error::from_call("op", &inbox, &[0u8; 16], Errno::EREMOTEIO), Error::Os { .. }));
        // A status in a "successful" answer is still a failure.
        assert!(check_out("op", &inbox, &out).is_err());
        assert!(check_out("op", &inbox, &[0u8; 16]).is_ok());
    }
}
