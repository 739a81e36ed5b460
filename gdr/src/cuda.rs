//! The CUDA driver, loaded at run time, and one GPU's primary context.
//!
//! Why the driver API and not the runtime: the driver API is what perftest and NCCL use
//! for GPUDirect RDMA (`cuMemGetHandleForAddressRange`, `cuPointerSetAttribute`,
//! `cuDeviceGetAttribute`), libcuda ships with every NVIDIA driver while libcudart is a
//! toolkit library, and the runtime's `cudaMemcpy` is itself a driver copy
//! (`cuMemcpyHtoD`/`DtoH`) on the primary context, which is the context used here too,
//! so buffers allocated by doorbell and by a PyTorch or NCCL program in the same process
//! are in the same address space.
//!
//! cudarc with `dynamic-loading` resolves each symbol at first call and panics when
//! libcuda is missing: [`probe`] checks for the library first, and every constructor here
//! goes through it.

use std::sync::{Arc, OnceLock};

use cudarc::driver::result;
use cudarc::driver::sys;
use cudarc::driver::CudaContext;

use crate::error::{CudaCall, Error, Result};

/// Whether libcuda can be loaded and initialised, checked once per process.
///
/// `Err(Error::NoDriver)` on a machine without the NVIDIA driver; a driver that loads but
/// fails `cuInit` (no device, a broken install) gives that call's error.
pub fn probe() -> Result<()> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    let r = PROBED.get_or_init(|| {
        // SAFETY: only tries to dlopen the library names cudarc would use; loads nothing
        // that runs code beyond the library's constructors.
        if !unsafe { sys::is_culib_present() } {
            return Err(String::new());
        }
        if let Some(missing) = missing_symbol() {
            return Err(format!("libcuda has no {missing} (the driver is older than CUDA 11.7, which gdr needs)"));
        }
        result::init().map_err(|e| format!("CUDA cuInit: {e}"))
    });
    match r {
        Ok(()) => Ok(()),
        Err(e) if e.is_empty() => Err(Error::NoDriver),
        Err(e) => Err(Error::Other(e.clone())),
    }
}

/// Every driver entry point gdr calls. cudarc resolves a symbol at its first call and
/// panics when it is missing; checking them all once here turns an old driver into an
/// error instead (`cuMemGetHandleForAddressRange` is the youngest: CUDA 11.7).
const SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetAttribute",
    "cuDeviceGetName",
    "cuDeviceGetPCIBusId",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostAlloc",
    "cuMemFreeHost",
    "cuMemsetD8_v2",
    "cuMemcpyHtoD_v2",
    "cuMemcpyDtoH_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuStreamCreate",
    "cuStreamSynchronize",
    "cuStreamDestroy_v2",
    "cuPointerGetAttribute",
    "cuPointerSetAttribute",
    "cuMemGetHandleForAddressRange",
];

/// The first of [`SYMBOLS`] the loaded libcuda lacks.
fn missing_symbol() -> Option<&'static str> {
    // SAFETY: only called after is_culib_present() said the library loads; culib()
    // loads it (once) and `get` looks a name up without calling it.
    let lib = unsafe { sys::culib() };
    SYMBOLS.iter().copied().find(|name| {
        // SAFETY: the symbol is only looked up, never called through this type.
        unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err()
    })
}

/// How many GPUs the driver sees (0 without a driver).
pub fn device_count() -> usize {
    if probe().is_err() {
        return 0;
    }
    result::device::get_count().map(|n| n as usize).unwrap_or(0)
}

/// One GPU, with its primary context (the one the runtime, PyTorch and NCCL use).
#[derive(Debug, Clone)]
pub struct Gpu {
    ordinal: usize,
    ctx: Arc<CudaContext>,
}

impl Gpu {
    /// Opens GPU `ordinal` (CUDA's numbering, as `CUDA_VISIBLE_DEVICES` leaves it).
    pub fn open(ordinal: usize) -> Result<Gpu> {
        probe()?;
        let count = device_count();
        if ordinal >= count {
            return Err(Error::NoGpu { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain")?;
        Ok(Gpu { ordinal, ctx })
    }

    /// The CUDA ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The primary context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Makes the primary context current on the calling thread (the engine thread of
    /// softhca calls this before each copy; it is a cheap thread-local store when the
    /// context is already current).
    pub fn bind(&self) -> Result<()> {
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")
    }

    /// The raw device handle.
    pub fn cu_device(&self) -> sys::CUdevice {
        self.ctx.cu_device()
    }

    /// The device's name, as `nvidia-smi` prints it.
    pub fn name(&self) -> Result<String> {
        self.ctx.name().call("cuDeviceGetName")
    }

    /// `cuDeviceGetAttribute`.
    pub fn attribute(&self, attr: sys::CUdevice_attribute) -> Result<i32> {
        // SAFETY: a valid device handle and an attribute enum value.
        unsafe { result::device::get_attribute(self.cu_device(), attr) }.call("cuDeviceGetAttribute")
    }

    /// The PCI bus id, `0000:00:06.0` style (lower case, as sysfs names devices).
    pub fn pci_bus_id(&self) -> Result<String> {
        let mut buf = [0 as std::ffi::c_char; 64];
        // SAFETY: the buffer is 64 bytes and its length is passed; the driver writes a
        // NUL-terminated string into it.
        unsafe { sys::cuDeviceGetPCIBusId(buf.as_mut_ptr(), buf.len() as i32, self.cu_device()) }
            .result()
            .call("cuDeviceGetPCIBusId")?;
        // SAFETY: NUL-terminated by the driver within the buffer.
        let s = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().to_lowercase();
        // The driver prints an 8-digit domain ("00000000:00:06.0"); sysfs uses 4.
        Ok(match s.split_once(':') {
            Some((dom, rest)) if dom.len() > 4 => format!("{}:{rest}", &dom[dom.len() - 4..]),
            _ => s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without libcuda (every CI machine) the probe answers NoDriver and opening a GPU is
    /// that error, not cudarc's panic. With a driver, opening a GPU past the count fails
    /// with NoGpu.
    #[test]
    fn probe_never_panics() {
        match probe() {
            Err(Error::NoDriver) => {
                assert_eq!(device_count(), 0);
                assert!(matches!(Gpu::open(0), Err(Error::NoDriver)));
            }
            Ok(()) => {
                let n = device_count();
                assert!(matches!(Gpu::open(n), Err(Error::NoGpu { .. })));
            }
            Err(e) => panic!("probe: {e}"),
        }
    }
}
