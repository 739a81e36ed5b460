//! # gdr: GPUDirect RDMA for doorbell
//!
//! The GPU half of doorbell: GPU memory registered with the NIC as a dma-buf MR, the
//! checks NCCL makes before it uses GPUDirect RDMA, and the PCIe/NVLink topology between
//! GPUs and NICs from which NCCL decides.
//!
//! Nothing here links against CUDA: the driver API (libcuda) and NVML (libnvidia-ml) are
//! loaded at run time, so doorbell builds and runs on machines without a GPU, and every
//! entry point that needs a GPU first asks [`cuda::probe`], which answers
//! [`Error::NoDriver`] instead of the panic cudarc gives at first use without libcuda.
//!
//! Where things are:
//! - [`cuda`]: loading the driver, one GPU's primary context.
//! - [`nvml`]: NVML loaded at run time (names, NVLinks, NVML indices).
//! - [`topo`]: the GPU/NIC topology matrix and NCCL's GDR decision.

pub mod cuda;
pub mod error;
pub mod nvml;
pub mod topo;

pub use error::{Error, Result};
