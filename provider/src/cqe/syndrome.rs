//! The completion status each error CQE syndrome (`MLX5_CQE_SYNDROME_*`, numbered in
//! the `prm` crate) is reported as.

use super::status::WcStatus;

pub use prm::cqe::syndrome::Syndrome;

/// The `ibv_wc_status` of a syndrome (a trait because [`Syndrome`] is the `prm`
/// crate's and the status vocabulary the provider's).
pub trait SyndromeStatus {
    /// The status libmlx5 reports for this syndrome (`mlx5_handle_error_cqe`).
    fn wc_status(self) -> WcStatus;
}

impl SyndromeStatus for Syndrome {
    #[inline]
    fn wc_status(self) -> WcStatus {
        syndrome_status(self)
    }
}

/// The `ibv_wc_status` this syndrome is reported as (libmlx5's mapping).
pub const fn syndrome_status(s: Syndrome) -> WcStatus {
    {
        match s {
            Syndrome::LocalLengthErr => WcStatus::LocLenErr,
            Syndrome::LocalQpOpErr => WcStatus::LocQpOpErr,
            Syndrome::LocalProtErr => WcStatus::LocProtErr,
            Syndrome::WrFlushErr => WcStatus::WrFlushErr,
            Syndrome::MwBindErr => WcStatus::MwBindErr,
            Syndrome::BadRespErr => WcStatus::BadRespErr,
            Syndrome::LocalAccessErr => WcStatus::LocAccessErr,
            Syndrome::RemoteInvalReqErr => WcStatus::RemInvReqErr,
            Syndrome::RemoteAccessErr => WcStatus::RemAccessErr,
            Syndrome::RemoteOpErr => WcStatus::RemOpErr,
            Syndrome::TransportRetryExcErr => WcStatus::RetryExcErr,
            Syndrome::RnrRetryExcErr => WcStatus::RnrRetryExcErr,
            Syndrome::RemoteAbortedErr => WcStatus::RemAbortErr,
        }
    }
}

impl WcStatus {
    /// The status for a raw syndrome byte; syndromes mlx5dv.h does not define are
    /// general errors, as libmlx5 reports them.
    pub const fn from_syndrome(raw: u8) -> Self {
        match Syndrome::from_u8(raw) {
            Some(s) => syndrome_status(s),
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
