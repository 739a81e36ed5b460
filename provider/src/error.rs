//! Provider errors: which verb failed and the errno the device gave.

use nix::errno::Errno;

/// A failed verb: the operation and the errno, as `ibv_*` would report it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The device (kernel or softhca) refused a command.
    #[error("{op}: {errno} ({})", errno.desc())]
    Device {
        /// The verb (`reg_mr`, `create_qp`...).
        op: &'static str,
        /// What the device answered.
        errno: Errno,
    },
    /// The request is invalid before anything reaches the device.
    #[error("{op}: {why}")]
    Invalid {
        /// The verb.
        op: &'static str,
        /// What is wrong with the request.
        why: String,
    },
    /// A post verb refused a work request before it reached the device: which one
    /// (the ones before it were posted) and why.
    #[error(transparent)]
    Post(#[from] crate::qp::PostError),
    /// A named device does not exist.
    #[error("no RDMA device named {0:?} (try `doorbell devinfo` to list them)")]
    NoDevice(String),
}

impl Error {
    /// The errno behind this error (EINVAL for requests rejected locally).
    pub fn errno(&self) -> Errno {
        match self {
            Error::Device { errno, .. } => *errno,
            Error::Invalid { .. } => Errno::EINVAL,
            Error::Post(p) => p.errno(),
            Error::NoDevice(_) => Errno::ENODEV,
        }
    }

    /// The post verb's error, when this is one (which work request, and why).
    pub fn post_error(&self) -> Option<&crate::qp::PostError> {
        match self {
            Error::Post(p) => Some(p),
            _ => None,
        }
    }
}

/// Provider result.
pub type Result<T> = std::result::Result<T, Error>;

/// Attaches the verb name to a device errno.
pub(crate) trait Op<T> {
    fn op(self, op: &'static str) -> Result<T>;
}

impl<T> Op<T> for std::result::Result<T, Errno> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|errno| Error::Device { op, errno })
    }
}

pub(crate) fn invalid<T>(op: &'static str, why: impl Into<String>) -> Result<T> {
    Err(Error::Invalid { op, why: why.into() })
}
