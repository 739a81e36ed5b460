//! Page-locked host memory from the CUDA driver, and the plain synchronous copies
//! between it and a device address.
//!
//! Why: `cudaMemcpy` bandwidth, the reference a GPU-memory RDMA benchmark is judged
//! against, is quoted for pinned host memory (`cudaMallocHost`, which is the driver's
//! `cuMemAllocHost`, i.e. `cuMemHostAlloc` without flags, on the primary context): only
//! pinned pages are reached by the GPU's copy engines directly, while a pageable
//! source goes through a staging buffer and measures the CPU as well. The copies here are the driver calls `cudaMemcpy` makes for
//! host-to-device and device-to-host (`cuMemcpyHtoD`, `cuMemcpyDtoH`), synchronous with
//! respect to the host as `cudaMemcpy` is for pinned memory: each returns when the bytes
//! have arrived, so timing a loop of them times the transfers.

use std::ptr::NonNull;

use cudarc::driver::{result, sys};

use crate::cuda::Gpu;
use crate::error::{CudaCall, Error, Result};

/// `len` bytes of pinned host memory, freed on drop.
#[derive(Debug)]
pub struct PinnedHost {
    gpu: Gpu,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the memory is plain host memory owned by this value alone; the CUDA calls that
// touch it bind the primary context themselves, from whatever thread.
unsafe impl Send for PinnedHost {}

impl PinnedHost {
    /// Allocates `len` bytes (at least 1) pinned for `gpu`'s primary context, zeroed.
    pub fn new(gpu: &Gpu, len: usize) -> Result<PinnedHost> {
        let len = len.max(1);
        gpu.bind()?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: the driver writes one pointer into `p`; the memory is zeroed below
        // before anything reads it.
        unsafe { sys::cuMemAllocHost_v2(&mut p, len) }.result().call("cuMemAllocHost")?;
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| Error::Other("cuMemAllocHost returned NULL".into()))?;
        // SAFETY: `len` bytes were just allocated at `ptr`.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        Ok(PinnedHost { gpu: gpu.clone(), ptr, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `len` initialised bytes owned by self; the GPU writes them only inside
        // `copy_from_device`, which borrows self mutably.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, exclusively borrowed.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
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
        unsafe { sys::cuMemcpyHtoD_v2(dst, self.ptr.as_ptr().cast(), len) }.result().call("cuMemcpyHtoD")
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
        unsafe { sys::cuMemcpyDtoH_v2(self.ptr.as_ptr().cast(), src, len) }.result().call("cuMemcpyDtoH")
    }

    fn check_len(&self, len: usize) -> Result<()> {
        if len > self.len {
            return Err(Error::Other(format!("copy of {len} bytes through a pinned buffer of {}", self.len)));
        }
        Ok(())
    }
}

impl Drop for PinnedHost {
    fn drop(&mut self) {
        let _ = self.gpu.bind();
        // SAFETY: allocated by cuMemAllocHost in `new` and freed once, here.
        if let Err(e) = unsafe { result::free_host(self.ptr.as_ptr().cast()) } {
            tracing::warn!(target: "gdr::pinned", "cuMemFreeHost: {e}");
        }
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
