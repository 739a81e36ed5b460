//! Errors of the GPU half.

use cudarc::driver::DriverError;

/// What went wrong, said so that a cluster engineer knows what to fix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// libcuda.so.1 cannot be loaded: no NVIDIA driver on this machine (or not on the
    /// loader's path).
    #[error("no CUDA driver: libcuda.so.1 could not be loaded (is the NVIDIA driver installed?)")]
    NoDriver,
    /// The driver loaded but has no such GPU.
    #[error("no GPU {ordinal}: the CUDA driver sees {count}")]
    NoGpu { ordinal: usize, count: usize },
    /// A CUDA driver call failed.
    #[error("CUDA {call}: {err}")]
    Cuda { call: &'static str, err: DriverError },
    /// A verbs call on the NIC failed.
    #[error("{0}")]
    Provider(#[from] provider::Error),
    /// Anything else, with its reason.
    #[error("{0}")]
    Other(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Tags a cudarc result with the name of the driver call.
pub(crate) trait CudaCall<T> {
    fn call(self, name: &'static str) -> Result<T>;
}

impl<T> CudaCall<T> for std::result::Result<T, DriverError> {
    fn call(self, name: &'static str) -> Result<T> {
        self.map_err(|err| Error::Cuda { call: name, err })
    }
}
