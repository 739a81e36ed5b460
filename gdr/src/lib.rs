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
//! - [`buffer`]: GPU buffers and their dma-buf export (perftest's and NCCL's way).
//! - [`exports`]: which dma-buf covers which device range (for the resolver).
//! - [`mod@pointer`]: what CUDA says about an address.
//! - [`peer`]: softhca's access to GPU memory (CUDA copies) and the resolver that
//!   hands it out for `nv_dmabuf` registrations; [`install`] puts it in place.
//! - [`caps`]: NCCL's capability checks (GPU attributes, the NIC's dma-buf probe, the
//!   legacy peer-memory modules).
//! - [`pinned`]: page-locked host memory and the copies `cudaMemcpy` makes.
//! - [`vgem`]: CPU-mappable dma-bufs from DRM's vgem driver, for dma-buf MRs without a GPU.
//! - [`nvml`]: NVML loaded at run time (names, NVLinks, NVML indices).
//! - [`topo`]: the GPU/NIC topology matrix and NCCL's GDR decision.

pub mod buffer;
pub mod caps;
pub mod cuda;
pub mod error;
pub mod exports;
pub mod peer;
pub mod pinned;
pub mod pointer;
pub mod vgem;
pub mod nvml;
pub mod topo;

pub use error::{Error, Result};

/// Installs gdr's [`peer::CudaResolver`] into softhca, once per process (later calls do
/// nothing). Cheap: nothing of CUDA is loaded until softhca registers an `nv_dmabuf`
/// dma-buf. [`buffer::GpuBuffer::new`] calls it; so does the preload shim at start, so
/// that stock programs (perftest `--use_cuda_dmabuf`) reach GPU memory on softhca.
pub fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| softhca::peer::install_resolver(std::sync::Arc::new(peer::CudaResolver)));
}
