//! Error CQE syndromes (`MLX5_CQE_SYNDROME_*`) and the completion status each one
//! is reported as.

use super::status::WcStatus;

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

    /// The `ibv_wc_status` this syndrome is reported as.
    pub const fn wc_status(self) -> WcStatus {
        match self {
            Self::LocalLengthErr => WcStatus::LocLenErr,
            Self::LocalQpOpErr => WcStatus::LocQpOpErr,
            Self::LocalProtErr => WcStatus::LocProtErr,
            Self::WrFlushErr => WcStatus::WrFlushErr,
            Self::MwBindErr => WcStatus::MwBindErr,
            Self::BadRespErr => WcStatus::BadRespErr,
            Self::LocalAccessErr => WcStatus::LocAccessErr,
            Self::RemoteInvalReqErr => WcStatus::RemInvReqErr,
            Self::RemoteAccessErr => WcStatus::RemAccessErr,
            Self::RemoteOpErr => WcStatus::RemOpErr,
            Self::TransportRetryExcErr => WcStatus::RetryExcErr,
            Self::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
            Self::RemoteAbortedErr => WcStatus::RemAbortErr,
        }
    }
}

impl WcStatus {
    /// The status for a raw syndrome byte; syndromes mlx5dv.h does not define are
    /// general errors, as libmlx5 reports them.
    pub const fn from_syndrome(raw: u8) -> Self {
        match Syndrome::from_u8(raw) {
            Some(s) => s.wc_status(),
            None => WcStatus::GeneralErr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Syndrome byte -> ibv_wc_status number, from mlx5dv.h and verbs.h.
    #[test]
    fn syndrome_to_status_table() {
        let table: [(u8, u32); 13] = [
            (0x01, 1),
            (0x02, 2),
            (0x04, 4),
            (0x05, 5),
            (0x06, 6),
            (0x10, 7),
            (0x11, 8),
            (0x12, 9),
            (0x13, 10),
            (0x14, 11),
            (0x15, 12),
            (0x16, 13),
            (0x22, 16),
        ];
        for (syn, status) in table {
            assert_eq!(
                WcStatus::from_syndrome(syn) as u32,
                status,
                "syndrome {syn:#x}"
            );
            assert_eq!(Syndrome::from_u8(syn).unwrap() as u8, syn);
        }
        for (s, (syn, _)) in Syndrome::ALL.iter().zip(table) {
            assert_eq!(*s as u8, syn);
        }
        for unknown in [0x00, 0x03, 0x07, 0x0f, 0x17, 0x21, 0x93, 0xff] {
            assert_eq!(WcStatus::from_syndrome(unknown), WcStatus::GeneralErr);
            assert_eq!(Syndrome::from_u8(unknown), None);
        }
    }
}
