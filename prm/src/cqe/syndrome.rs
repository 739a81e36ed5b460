//! Error CQE syndromes (`MLX5_CQE_SYNDROME_*`): why the device completed a WQE in
//! error. The provider maps them to `ibv_wc_status`; softhca writes them.

/// Why the device completed a WQE in error (byte 55 of an error CQE).
#[repr(u8)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Receive buffer too small, or message longer than the port MTU (UD).
    LocalLengthErr = 0x01,
    LocalQpOpErr = 0x02,
    /// The lkey does not cover the buffer, or the MR lacks local access.
    LocalProtErr = 0x04,
    /// Flushed because the QP entered the error state.
    WrFlushErr = 0x05,
    MwBindErr = 0x06,
    BadRespErr = 0x10,
    LocalAccessErr = 0x11,
    RemoteInvalReqErr = 0x12,
    /// The responder rejected the rkey, bounds or access rights.
    RemoteAccessErr = 0x13,
    RemoteOpErr = 0x14,
    /// No ACK after `retry_cnt` retransmissions.
    TransportRetryExcErr = 0x15,
    /// Receiver not ready more than `rnr_retry` times.
    RnrRetryExcErr = 0x16,
    RemoteAbortedErr = 0x22,
}

impl Syndrome {
    pub const ALL: [Syndrome; 13] = [
        Self::LocalLengthErr,
        Self::LocalQpOpErr,
        Self::LocalProtErr,
        Self::WrFlushErr,
        Self::MwBindErr,
        Self::BadRespErr,
        Self::LocalAccessErr,
        Self::RemoteInvalReqErr,
        Self::RemoteAccessErr,
        Self::RemoteOpErr,
        Self::TransportRetryExcErr,
        Self::RnrRetryExcErr,
        Self::RemoteAbortedErr,
    ];

    pub const fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0x01 => Self::LocalLengthErr,
            0x02 => Self::LocalQpOpErr,
            0x04 => Self::LocalProtErr,
            0x05 => Self::WrFlushErr,
            0x06 => Self::MwBindErr,
            0x10 => Self::BadRespErr,
            0x11 => Self::LocalAccessErr,
            0x12 => Self::RemoteInvalReqErr,
            0x13 => Self::RemoteAccessErr,
            0x14 => Self::RemoteOpErr,
            0x15 => Self::TransportRetryExcErr,
            0x16 => Self::RnrRetryExcErr,
            0x22 => Self::RemoteAbortedErr,
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The syndrome numbers of mlx5dv.h (`MLX5_CQE_SYNDROME_*`); the golden test in
    /// `tests/mlx5dv_layout.rs` compares them with the installed header.
    #[test]
    fn numbering() {
        let table: [u8; 13] = [0x01, 0x02, 0x04, 0x05, 0x06, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x22];
        for (s, syn) in Syndrome::ALL.iter().zip(table) {
            assert_eq!(*s as u8, syn);
            assert_eq!(Syndrome::from_u8(syn), Some(*s));
        }
        for unknown in [0x00, 0x03, 0x07, 0x0f, 0x17, 0x21, 0x93, 0xff] {
            assert_eq!(Syndrome::from_u8(unknown), None);
        }
    }
}
