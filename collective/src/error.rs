//! Errors of collective operations: what failed, and which rank when it is known.

use std::time::Duration;

/// A collective or bootstrap failure.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Another rank died, disconnected, or its link reported an error.
    #[error("rank {rank} failed: {why}")]
    PeerFailed { rank: usize, why: String },
    /// Nothing moved for `after` while waiting for `rank`.
    #[error("timed out after {after:?} waiting for rank {rank} ({what})")]
    Timeout { rank: usize, after: Duration, what: String },
    /// Bootstrap (TCP rendezvous through MASTER_ADDR:MASTER_PORT) failed.
    #[error("bootstrap: {0}")]
    Bootstrap(String),
    /// A verb failed on this rank.
    #[error("rdma: {0}")]
    Rdma(#[from] provider::Error),
    /// A message that does not follow the protocol (a bug or memory corruption).
    #[error("protocol error with rank {rank}: {why}")]
    Protocol { rank: usize, why: String },
    /// Bad arguments or configuration.
    #[error("{0}")]
    Invalid(String),
    /// An operating-system call failed.
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

impl Error {
    /// The rank the failure is attributed to, when known.
    pub fn failed_rank(&self) -> Option<usize> {
        match self {
            Error::PeerFailed { rank, .. } | Error::Timeout { rank, .. } | Error::Protocol { rank, .. } => Some(*rank),
            _ => None,
        }
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io { what: what.into(), source }
    }
}

/// Result of collective operations.
pub type Result<T> = std::result::Result<T, Error>;
