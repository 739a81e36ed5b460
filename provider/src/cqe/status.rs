//! Work-completion status, numbered and named as ibverbs' `enum ibv_wc_status`, so
//! that logs and tools read the same as with rdma-core.

use core::fmt;

#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
/// `enum ibv_wc_status`: how a work request ended (values as libibverbs numbers them).
pub enum WcStatus {
    /// Completed.
    Success = 0,
    /// Local length error (a receive buffer too small, a gather list too long).
    LocLenErr = 1,
    /// Local QP operation error (an inconsistent WQE).
    LocQpOpErr = 2,
    /// Local EE context operation error (RD only).
    LocEecOpErr = 3,
    /// Local protection error: an lkey that does not cover the buffer or lacks access.
    LocProtErr = 4,
    /// Flushed: the QP went to the error state before the work request ran.
    WrFlushErr = 5,
    /// Memory window bind error.
    MwBindErr = 6,
    /// Bad response from the responder (an unexpected opcode).
    BadRespErr = 7,
    /// Local access error (a protection error on a responder's write).
    LocAccessErr = 8,
    /// Remote invalid request: the responder refused the request (length, opcode).
    RemInvReqErr = 9,
    /// Remote access error: a bad rkey, bounds or access at the responder.
    RemAccessErr = 10,
    /// Remote operation error: the responder could not complete the request.
    RemOpErr = 11,
    /// Transport retry counter exceeded: no ACK from the peer.
    RetryExcErr = 12,
    /// RNR retry counter exceeded: the peer kept having no receive WQE.
    RnrRetryExcErr = 13,
    /// Local RDD violation (RD only).
    LocRddViolErr = 14,
    /// Remote invalid RD request (RD only).
    RemInvRdReqErr = 15,
    /// Remote aborted: the responder aborted the operation.
    RemAbortErr = 16,
    /// Invalid EE context number (RD only).
    InvEecnErr = 17,
    /// Invalid EE context state (RD only).
    InvEecStateErr = 18,
    /// Fatal error.
    FatalErr = 19,
    /// Response timeout.
    RespTimeoutErr = 20,
    /// General error (the catch-all libmlx5 maps unknown syndromes to).
    GeneralErr = 21,
    /// Tag matching error.
    TmErr = 22,
    /// Tag matching rendezvous incomplete.
    TmRndvIncomplete = 23,
}

impl WcStatus {
    /// Every status, in numeric order.
    pub const ALL: [WcStatus; 24] = [
        Self::Success,
        Self::LocLenErr,
        Self::LocQpOpErr,
        Self::LocEecOpErr,
        Self::LocProtErr,
        Self::WrFlushErr,
        Self::MwBindErr,
        Self::BadRespErr,
        Self::LocAccessErr,
        Self::RemInvReqErr,
        Self::RemAccessErr,
        Self::RemOpErr,
        Self::RetryExcErr,
        Self::RnrRetryExcErr,
        Self::LocRddViolErr,
        Self::RemInvRdReqErr,
        Self::RemAbortErr,
        Self::InvEecnErr,
        Self::InvEecStateErr,
        Self::FatalErr,
        Self::RespTimeoutErr,
        Self::GeneralErr,
        Self::TmErr,
        Self::TmRndvIncomplete,
    ];

    /// The status of libibverbs number `v`, `None` for a number it does not define.
    pub const fn from_u32(v: u32) -> Option<Self> {
        if (v as usize) < Self::ALL.len() {
            Some(Self::ALL[v as usize])
        } else {
            None
        }
    }

    /// Whether the work request completed.
    pub const fn is_success(self) -> bool {
        matches!(self, Self::Success)
    }

    /// The text `ibv_wc_status_str` gives for this status.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::LocLenErr => "local length error",
            Self::LocQpOpErr => "local QP operation error",
            Self::LocEecOpErr => "local EE context operation error",
            Self::LocProtErr => "local protection error",
            Self::WrFlushErr => "Work Request Flushed Error",
            Self::MwBindErr => "memory management operation error",
            Self::BadRespErr => "bad response error",
            Self::LocAccessErr => "local access error",
            Self::RemInvReqErr => "remote invalid request error",
            Self::RemAccessErr => "remote access error",
            Self::RemOpErr => "remote operation error",
            Self::RetryExcErr => "transport retry counter exceeded",
            Self::RnrRetryExcErr => "RNR retry counter exceeded",
            Self::LocRddViolErr => "local RDD violation error",
            Self::RemInvRdReqErr => "remote invalid RD request",
            Self::RemAbortErr => "aborted error",
            Self::InvEecnErr => "invalid EE context number",
            Self::InvEecStateErr => "invalid EE context state",
            Self::FatalErr => "fatal error",
            Self::RespTimeoutErr => "response timeout error",
            Self::GeneralErr => "general error",
            Self::TmErr => "TM error",
            Self::TmRndvIncomplete => "TM software rendezvous",
        }
    }
}

impl fmt::Display for WcStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbering_and_names() {
        for (i, s) in WcStatus::ALL.iter().enumerate() {
            assert_eq!(*s as u32, i as u32);
            assert_eq!(WcStatus::from_u32(i as u32), Some(*s));
        }
        assert_eq!(WcStatus::from_u32(24), None);
        assert_eq!(WcStatus::GeneralErr as u32, 21);
        assert_eq!(
            WcStatus::RetryExcErr.to_string(),
            "transport retry counter exceeded"
        );
        assert_eq!(
            WcStatus::WrFlushErr.to_string(),
            "Work Request Flushed Error"
        );
    }
}
