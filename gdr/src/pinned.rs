//! Page-locked host memory from the CUDA driver, and the plain synchronous copies
//! between it and a device address.
//!
//! Why: `cudaMemcpy` bandwidth, the reference a GPU-memory RDMA benchmark is judged
//! against, is quoted for pinned host memory (`cudaMallocHost`, which is the driver's
//! `cuMemHostAlloc`; here with PORTABLE, pinned for every context): only pinned pages
//! are reached by the GPU's copy engines directly, while a pageable source goes through
//! a staging buffer and measures the CPU as well. softhca's staging buffers for GPU
//! MRs are the same memory ([`alloc_portable`]). The copies here are the driver calls
//! `cudaMemcpy` makes for
//! host-to-device and device-to-host (`cuMemcpyHtoD`, `cuMemcpyDtoH`), synchronous with
//! respect to the host as `cudaMemcpy` is for pinned memory: each returns when the bytes
//! have arrived, so timing a loop of them times the transfers.

use std::ptr::NonNull;

use cudarc::driver::{result, sys};
use softhca::peer::HostBuffer;

use crate::cuda::Gpu;
use crate::error::{CudaCall, Error, Result};

/// `len` bytes (at least 1) of page-locked host memory, pinned for every context
/// (`cuMemHostAlloc(PORTABLE)`, what `cudaMallocHost` gives plus portability), as a
/// [`HostBuffer`] that frees it on drop.
///
/// The buffer holds its own retain of device `dev`'s primary context, released after
/// `cuMemFreeHost`, so the pages stay mapped for as long as the buffer lives whatever the
/// program does with its contexts (softhca keeps a peer memory's staging buffers for a
/// QP's life, past the MR that lent them).
pub fn alloc_portable(dev: sys::CUdevice, len: usize) -> Result<HostBuffer> {
    let len = len.max(1);
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: writes the primary context handle; the retain is released by the buffer's
    // release function (or below, on failure).
    unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) }.result().call("cuDevicePrimaryCtxRetain")?;
    let release_ctx = move || {
        // SAFETY: releases the retain taken above, once.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) };
    };
    let alloc = || -> Result<NonNull<u8>> {
        // SAFETY: a context handle just retained.
        unsafe { sys::cuCtxPushCurrent_v2(ctx) }.result().call("cuCtxPushCurrent")?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer to `len` new page-locked bytes.
        let r = unsafe { sys::cuMemHostAlloc(&mut p, len, sys::CU_MEMHOSTALLOC_PORTABLE) }.result().call("cuMemHostAlloc");
        let mut popped: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed above.
        let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
        r?;
        NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Other("cuMemHostAlloc returned NULL".into()))
    };
    let ptr = match alloc() {
        Ok(p) => p,
        Err(e) => {
            release_ctx();
            return Err(e);
        }
    };
    let addr = ptr.as_ptr() as usize;
    let release = move || {
        // SAFETY: frees the allocation made above, once (host allocations need no
        // particular context current; the retain keeps the primary one alive).
        if let Err(e) = unsafe { result::free_host(addr as *mut std::ffi::c_void) } {
            tracing::warn!(target: "gdr::pinned", "cuMemFreeHost: {e}");
        }
        release_ctx();
    };
    // SAFETY: `len` bytes at `ptr`, allocated above, owned by the buffer alone and freed
    // only by `release`.
    Ok(unsafe { HostBuffer::from_raw(ptr, len, release) })
}

/// Pinned host memory for copies to and from one GPU, zeroed at allocation.
#[derive(Debug)]
pub struct PinnedHost {
    gpu: Gpu,
    buf: HostBuffer,
}

impl PinnedHost {
    /// Allocates `len` bytes (at least 1) pinned ([`alloc_portable`]), zeroed.
    pub fn new(gpu: &Gpu, len: usize) -> Result<PinnedHost> {
        let mut buf = alloc_portable(gpu.cu_device(), len)?;
        buf.as_mut_slice().fill(0);
        Ok(PinnedHost { gpu: gpu.clone(), buf })
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_slice()
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    /// `cuMemcpyHtoD`: the first `len` bytes of this buffer to device address `dst`.
    ///
    /// # Safety
    /// `[dst, dst + len)` must be device memory of this GPU's context, allocated and not
    /// written concurrently by anything else (a NIC's DMA, a kernel).
    pub unsafe fn copy_to_device(&self, dst: u64, len: usize) -> Result<()> {
        self.check_len(len)?;
        self.gpu.bind()?;
        // SAFETY: the source is `len` bytes of this pinned buffer; the destination is the
        // caller's contract. Synchronous for pinned memory: returns after the copy.
        unsafe { sys::cuMemcpyHtoD_v2(dst, self.buf.as_slice().as_ptr().cast(), len) }.result().call("cuMemcpyHtoD")
    }

    /// `cuMemcpyDtoH`: `len` bytes at device address `src` into the start of this buffer.
    ///
    /// # Safety
    /// `[src, src + len)` must be device memory of this GPU's context, allocated and not
    /// written concurrently.
    pub unsafe fn copy_from_device(&mut self, src: u64, len: usize) -> Result<()> {
        self.check_len(len)?;
        self.gpu.bind()?;
        // SAFETY: the destination is `len` bytes of this buffer, exclusively borrowed; the
        // source is the caller's contract. Returns after the copy.
        unsafe { sys::cuMemcpyDtoH_v2(self.buf.as_mut_slice().as_mut_ptr().cast(), src, len) }.result().call("cuMemcpyDtoH")
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len > self.len() {
            return Err(Error::Other(format!("copy of {len} bytes through a pinned buffer of {}", self.len())));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pattern through device memory and back arrives unchanged, and a copy longer than
    /// the pinned buffer is refused. Needs a GPU.
    #[test]
    fn round_trip_through_device() {
        let gpu = match Gpu::open(0) {
            Ok(g) => g,
            Err(e @ (Error::NoDriver | Error::NoGpu { .. })) => {
                testkit::skip(testkit::Need::Gpu, format!("{e} (run on a machine with an NVIDIA GPU and driver)"));
                return;
            }
            Err(e) => panic!("open GPU 0: {e}"),
        };
        let n = 3 * 4096 + 5;
        let mut a = PinnedHost::new(&gpu, n).unwrap();
        let mut b = PinnedHost::new(&gpu, n).unwrap();
        for (i, x) in a.as_mut_slice().iter_mut().enumerate() {
            *x = (i * 7 + 3) as u8;
        }
        // SAFETY: a fresh allocation of n bytes, freed below.
        let d = unsafe { result::malloc_sync(n) }.unwrap();
        // SAFETY: `d` is a device allocation of n bytes and `a` a host buffer of n bytes.
        unsafe {
            a.copy_to_device(d, n).unwrap();
            b.copy_from_device(d, n).unwrap();
            assert!(a.copy_to_device(d, n + 1).is_err());
            result::free_sync(d).unwrap();
        }
        assert_eq!(a.as_slice(), b.as_slice());
        assert_eq!(b.as_slice()[n - 1], ((n - 1) * 7 + 3) as u8);
    }
}
