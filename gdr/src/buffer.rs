//! GPU memory for RDMA: a `cuMemAlloc` buffer, its copies to and from the host, and its
//! export as a dma-buf for `ibv_reg_dmabuf_mr`, done as perftest and NCCL do them.
//!
//! - The size is rounded up to 64 KiB, the GPU page a NIC's peer mappings are made of
//!   (perftest's `ACCEL_PAGE_SIZE`), so an MR never ends inside a GPU page shared with
//!   another allocation.
//! - `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` is set: NVIDIA's GPUDirect RDMA guide asks for it
//!   on memory a NIC accesses, so that a synchronous `cuMemcpy` to the buffer has
//!   completed, not merely been queued, when it returns, and the NIC never reads bytes
//!   the CPU believes written but the copy engine has not yet delivered.
//! - The dma-buf is made with `cuMemGetHandleForAddressRange(DMA_BUF_FD)` on the range
//!   rounded out to host pages (the call requires a host-page-aligned address and
//!   size), and registered with `offset = ptr - aligned base` and `iova = ptr`, so that
//!   work requests address the MR by the CUDA pointer (perftest's
//!   `cuda_allocate_device_memory_buffer` and `ibv_reg_dmabuf_mr` call).
//!
//! Every export is entered in [`crate::exports`], so that softhca's resolver knows the
//! device address behind the fd whatever iova the caller registers it with.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

use cudarc::driver::sys;

use crate::cuda::Gpu;
use crate::error::{CudaCall, Error, Result};
use crate::exports::{self, Export};

/// The GPU page: allocations are rounded up to it.
pub const GPU_PAGE: usize = 64 << 10;

/// Rounds `n` up to a multiple of `to` (a power of two).
const fn round_up(n: u64, to: u64) -> u64 {
    (n + to - 1) & !(to - 1)
}

/// The host page size.
pub(crate) fn host_page() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

/// The range `cuMemGetHandleForAddressRange` is asked for to cover `len` bytes at
/// device address `ptr`: `(aligned base, offset of ptr in it, size)`, with base and
/// size multiples of the host page `page`.
pub fn export_range(ptr: u64, len: u64, page: u64) -> (u64, u64, u64) {
    let base = ptr & !(page - 1);
    let offset = ptr - base;
    (base, offset, round_up(len + offset, page))
}

/// A dma-buf of GPU memory, ready for `reg_dmabuf_mr(fd, offset, len, iova, ...)`.
#[derive(Debug)]
pub struct DmabufExport {
    /// The dma-buf (the registration takes its own reference: it may be closed after).
    pub fd: OwnedFd,
    /// Where the MR starts in the dma-buf.
    pub offset: u64,
    /// The MR's length.
    pub len: u64,
    /// The device address of the MR's first byte (the iova to register).
    pub iova: u64,
    /// Bytes in the dma-buf (host pages).
    pub size: u64,
}

impl DmabufExport {
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Device memory on one GPU, freed on drop.
///
/// Free it only after the MRs registered over it are deregistered, as with any memory a
/// NIC may access: softhca's peer copies (and a real NIC's DMA) would otherwise reach
/// whatever the allocator puts there next.
#[derive(Debug)]
pub struct GpuBuffer {
    gpu: Gpu,
    ptr: u64,
    len: usize,
    alloc: usize,
    id: u64,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl GpuBuffer {
    /// Allocates `len` bytes (rounded up to [`GPU_PAGE`]) on `gpu`, zero-filled, with
    /// `SYNC_MEMOPS` set. Also installs gdr's resolver into softhca ([`crate::install`]),
    /// so that the buffer can be registered on softhca.
    pub fn new(gpu: &Gpu, len: usize) -> Result<GpuBuffer> {
        if len == 0 {
            return Err(Error::Other("a GPU buffer of 0 bytes".into()));
        }
        crate::install();
        gpu.bind()?;
        let alloc = round_up(len as u64, GPU_PAGE as u64) as usize;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: cuMemAlloc writes one device pointer into `ptr`.
        unsafe { sys::cuMemAlloc_v2(&mut ptr, alloc) }.result().call("cuMemAlloc")?;
        let b = GpuBuffer { gpu: gpu.clone(), ptr, len, alloc, id: NEXT_ID.fetch_add(1, Ordering::Relaxed) };
        let one: u32 = 1;
        // SAFETY: SYNC_MEMOPS takes a pointer to an unsigned int (a boolean); `ptr` is
        // the allocation just made.
        unsafe {
            sys::cuPointerSetAttribute(
                (&one as *const u32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                ptr,
            )
        }
        .result()
        .call("cuPointerSetAttribute(SYNC_MEMOPS)")?;
        b.fill(0)?;
        Ok(b)
    }

    /// The GPU it is on.
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// The device address of the first byte.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// Bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true (a buffer has at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (a multiple of [`GPU_PAGE`]).
    pub fn alloc_len(&self) -> usize {
        self.alloc
    }

    fn check(&self, what: &str, offset: usize, len: usize) -> Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(Error::Other(format!("{what}: {len} bytes at offset {offset} are outside the {}-byte GPU buffer", self.len))),
        }
    }

    /// Copies `src` to byte `offset` of the buffer (`cuMemcpyHtoD`, synchronous).
    pub fn copy_from_host(&self, offset: usize, src: &[u8]) -> Result<()> {
        self.check("copy to the GPU", offset, src.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the destination range is inside the allocation (checked) and `src` is
        // a live slice of exactly the length passed.
        unsafe { sys::cuMemcpyHtoD_v2(self.ptr + offset as u64, src.as_ptr().cast(), src.len()) }
            .result()
            .call("cuMemcpyHtoD")
    }

    /// Copies bytes from `offset` into `dst` (`cuMemcpyDtoH`, synchronous).
    pub fn copy_to_host(&self, offset: usize, dst: &mut [u8]) -> Result<()> {
        self.check("copy from the GPU", offset, dst.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.gpu.bind()?;
        // SAFETY: the source range is inside the allocation (checked) and `dst` is a live
        // exclusive slice of exactly the length passed.
        unsafe { sys::cuMemcpyDtoH_v2(dst.as_mut_ptr().cast(), self.ptr + offset as u64, dst.len()) }
            .result()
            .call("cuMemcpyDtoH")
    }

    /// The whole buffer (its `len` bytes) copied to the host.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut v = vec![0u8; self.len];
        self.copy_to_host(0, &mut v)?;
        Ok(v)
    }

    /// Sets every allocated byte to `byte` (`cuMemsetD8`), and waits for it.
    ///
    /// `cuMemsetD8` on device memory is asynchronous with respect to the host (queued
    /// on the legacy default stream); softhca's peer copies run on a stream of their
    /// own that does not wait for that one, so the fill must be complete on return.
    pub fn fill(&self, byte: u8) -> Result<()> {
        self.gpu.bind()?;
        // SAFETY: the range is the whole allocation.
        unsafe { sys::cuMemsetD8_v2(self.ptr, byte, self.alloc) }.result().call("cuMemsetD8")?;
        // SAFETY: the null stream is the legacy default stream of the current context.
        unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) }.result().call("cuStreamSynchronize")
    }

    /// Exports `len` bytes at `offset` as a dma-buf, as perftest and NCCL do (see the
    /// module doc), and records the export for softhca's resolver.
    pub fn export_dmabuf(&self, offset: usize, len: usize) -> Result<DmabufExport> {
        self.check("dma-buf export", offset, len)?;
        if len == 0 {
            return Err(Error::Other("dma-buf export of 0 bytes".into()));
        }
        let ptr = self.ptr + offset as u64;
        let (base, off, size) = export_range(ptr, len as u64, host_page());
        if base < self.ptr || base + size > self.ptr + self.alloc as u64 {
            // cuMemAlloc returns page-aligned memory and the allocation is a whole number
            // of GPU pages, so the host-page range always fits; say so if it ever does not.
            return Err(Error::Other(format!(
                "dma-buf range {base:#x}+{size:#x} leaves the allocation {:#x}+{:#x}",
                self.ptr, self.alloc
            )));
        }
        self.gpu.bind()?;
        let mut fd: i32 = -1;
        // SAFETY: for DMA_BUF_FD the handle is an int the driver writes the new fd into;
        // the range is host-page aligned and inside this allocation.
        unsafe {
            sys::cuMemGetHandleForAddressRange(
                (&mut fd as *mut i32).cast(),
                base,
                size as usize,
                sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
                0,
            )
        }
        .result()
        .call("cuMemGetHandleForAddressRange(DMA_BUF_FD)")?;
        if fd < 0 {
            return Err(Error::Other(format!("cuMemGetHandleForAddressRange succeeded with fd {fd}")));
        }
        // SAFETY: the driver created this fd for us; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        exports::record(fd.as_fd(), Export { base, size, ordinal: self.gpu.ordinal(), owner: self.id })
            .map_err(|e| Error::Other(format!("fstat of the new dma-buf: {e}")))?;
        tracing::debug!(target: "gdr::buffer", base = format_args!("{base:#x}"), size, offset = off,
                        iova = format_args!("{ptr:#x}"), "exported a dma-buf");
        Ok(DmabufExport { fd, offset: off, len: len as u64, iova: ptr, size })
    }
}

impl Drop for GpuBuffer {
    fn drop(&mut self) {
        exports::forget_owner(self.id);
        if let Err(e) = self.gpu.bind() {
            tracing::warn!(error = %e, "freeing a GPU buffer: cannot bind its context; leaked");
            return;
        }
        // SAFETY: allocated by cuMemAlloc in new(), freed once.
        if let Err(e) = unsafe { sys::cuMemFree_v2(self.ptr) }.result() {
            tracing::warn!(error = %e, ptr = format_args!("{:#x}", self.ptr), "cuMemFree failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// perftest's arithmetic by hand: a pointer 0x234 bytes into a host page, 8192
    /// bytes long, needs the page it starts in and two more (0x234 + 8192 = 8756 bytes
    /// from the page start, rounded up to 12288); an aligned pointer needs exactly its
    /// length rounded to pages. The H200 export of base+4096 for 8192 bytes
    /// (fixtures/h200-cmd/dmabuf.txt) is the aligned case: offset 0, size 8192.
    #[test]
    fn export_range_rounds_out_to_host_pages() {
        assert_eq!(export_range(0x7fdf_9fe0_1234, 8192, 4096), (0x7fdf_9fe0_1000, 0x234, 12288));
        assert_eq!(export_range(0x7fdf_9fe0_1000, 8192, 4096), (0x7fdf_9fe0_1000, 0, 8192));
        assert_eq!(export_range(0x7fdf_9fe0_0000, 1, 4096), (0x7fdf_9fe0_0000, 0, 4096));
        assert_eq!(export_range(0x7fdf_9fe0_0fff, 2, 4096), (0x7fdf_9fe0_0000, 0xfff, 8192));
        // 64 KiB host pages (aarch64 kernels): the same rule.
        assert_eq!(export_range(0x7fdf_9fe1_0010, 16, 65536), (0x7fdf_9fe1_0000, 0x10, 65536));
    }

    /// On a GPU: the allocation is one GPU page, copies land where asked, a copy past
    /// the end is an error. Without one: SKIP (cuda::tests checks the no-driver error).
    #[test]
    fn buffer_round_trip_on_a_gpu() {
        match crate::cuda::Gpu::open(0) {
            Err(Error::NoDriver) => testkit::skip(testkit::Need::Gpu, "no CUDA driver (run on a GPU node for the allocation path)"),
            Err(e) => testkit::skip(testkit::Need::Gpu, format!("no GPU 0: {e}")),
            Ok(g) => {
                let b = GpuBuffer::new(&g, 100).unwrap();
                assert_eq!(b.alloc_len(), GPU_PAGE);
                b.copy_from_host(10, b"gpu").unwrap();
                let v = b.to_vec().unwrap();
                assert_eq!(&v[9..14], b"\0gpu\0");
                assert!(b.copy_from_host(99, b"xy").is_err());
            }
        }
    }
}
