//! softhca's way into GPU memory: a [`PeerMemory`] that moves bytes with CUDA copies at
//! device addresses, and the [`PeerResolver`] that turns an NVIDIA dma-buf (exporter
//! `nv_dmabuf`, which the CPU cannot mmap) into one.
//!
//! **What is emulated.** A ConnectX writes and reads GPU memory by PCIe peer-to-peer
//! through the GPU's BAR. softhca runs in the process that owns the memory, so it asks
//! the GPU's copy engine instead: `cuMemcpyHtoDAsync` / `cuMemcpyDtoHAsync` on a private
//! non-blocking stream, then `cuStreamSynchronize` on that stream. The private stream is
//! why a peer copy never waits for the program's kernels or copies (a NIC's DMA does
//! not either) and the synchronize is why a write has landed in device memory, not in a
//! staging buffer, when [`PeerMemory::write`] returns (so the CQE softhca writes next is
//! never seen before the data, as with the real NIC's ordering). softhca calls once per
//! message or segment of up to [`softhca::peer::PEER_SEGMENT`] bytes, never per packet.
//!
//! **Contexts.** The copies run in the context that owns the memory: the GPU's primary
//! context for gdr's own buffers and for `cudaMalloc` memory, the allocating context
//! when CUDA reports one (perftest creates its own with `cuCtxCreate`). softhca's
//! engine may run on its own thread or inside the program's calls, so each copy pushes
//! the context (`cuCtxPushCurrent`) and pops it after: the calling thread's current
//! context is left as it was.
//!
//! **Atomics** are a read, the arithmetic on the host and a write, under one
//! process-wide lock (and the engine's own lock): atomic with respect to every access
//! softhca makes, not to the GPU's kernels. A PCIe AtomicOp through the BAR would be
//! atomic with respect to the GPU too; no copy-engine operation is.
//!
//! **Which address.** [`CudaResolver`] finds the device address of the MR's first byte
//! (1) in [`crate::exports`] when gdr exported the dma-buf, whatever iova the caller
//! registered; else (2) by the iova convention of perftest and NCCL, iova = the device
//! address of byte `offset` of the dma-buf, checked with `cuPointerGetAttribute` (device
//! memory whose allocation covers `[iova, iova + length)`); else (3) it refuses with
//! EOPNOTSUPP and a warning that says why.

use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};

use cudarc::driver::sys;
use nix::errno::Errno;
use softhca::peer::{DmabufRequest, HostBuffer, PeerError, PeerMemory, PeerResolver};

use crate::error::{CudaCall, Error, Result};
use crate::exports::{self, Export};
use crate::pointer::{self, PtrInfo};

/// The exporter name NVIDIA's driver gives its dma-bufs (`exp_name` in fdinfo).
pub const NV_EXPORTER: &str = "nv_dmabuf";

/// Serialises every peer atomic of the process.
static ATOMICS: Mutex<()> = Mutex::new(());

/// Whose context the copies run in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// The primary context of this CUDA ordinal (retained for the memory's lifetime).
    Primary(usize),
    /// A context CUDA reported for the allocation (not retained: the program owns it
    /// and destroys it after deregistering its MRs, as it must).
    Context(usize),
}

/// Where an MR's bytes are: device address of its first byte, and whose they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Located {
    pub addr: u64,
    pub owner: Owner,
    /// Which rule found it.
    pub how: How,
}

/// The rule that located an MR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// gdr exported the dma-buf and recorded its device range.
    Registry,
    /// The caller's iova is a device address covering the MR (perftest, NCCL).
    Iova,
}

/// Decides where the MR of `req` is, from what gdr recorded for its fd (`export`) and
/// what CUDA says about an address (`query`). Pure: unit-tested without a GPU.
pub fn locate(
    offset: u64,
    length: u64,
    iova: u64,
    export: Option<Export>,
    query: impl Fn(u64) -> Result<PtrInfo>,
) -> Result<Located, String> {
    if let Some(e) = export {
        let end = offset.checked_add(length).filter(|&end| end <= e.size);
        if end.is_none() {
            return Err(format!("{length} bytes at offset {offset} are past the {}-byte dma-buf", e.size));
        }
        return Ok(Located { addr: e.base + offset, owner: Owner::Primary(e.ordinal), how: How::Registry });
    }
    let info = query(iova).map_err(|e| {
        format!(
            "the dma-buf was not exported by gdr, and its iova {iova:#x} is not a CUDA address in this process ({e}); \
             register GPU memory with iova = its device address, as perftest and NCCL do"
        )
    })?;
    if !info.device {
        return Err(format!("iova {iova:#x} is CUDA memory but not device memory"));
    }
    if !info.covers(iova, length, crate::buffer::host_page()) {
        return Err(format!(
            "iova {iova:#x} + {length} bytes is not inside one device allocation (the one at the iova is {:#x} + {} bytes)",
            info.range_start, info.range_size
        ));
    }
    let owner = match info.context {
        0 => Owner::Primary(usize::try_from(info.ordinal).map_err(|_| format!("device ordinal {} of iova {iova:#x}", info.ordinal))?),
        c => Owner::Context(c),
    };
    Ok(Located { addr: iova, owner, how: How::Iova })
}

/// A context handle that may cross threads: CUDA contexts are process-wide objects,
/// made current per thread by the push/pop around each use.
#[derive(Debug, Clone, Copy)]
struct Ctx(sys::CUcontext);
// SAFETY: a CUcontext is a handle the driver accepts from any thread of the process.
unsafe impl Send for Ctx {}
// SAFETY: as above; the handle itself is never written after construction.
unsafe impl Sync for Ctx {}

/// A stream handle that may cross threads (same reasoning as [`Ctx`]).
#[derive(Debug, Clone, Copy)]
struct Stream(sys::CUstream);
// SAFETY: a CUstream may be used from any thread whose current context owns it, which
// `Pushed` ensures around every use.
unsafe impl Send for Stream {}
// SAFETY: as above; concurrent calls on one stream are serialised by the driver.
unsafe impl Sync for Stream {}

/// `ctx` made current on this thread until dropped (then the previous one again).
struct Pushed;

impl Pushed {
    fn new(ctx: Ctx) -> Result<Pushed> {
        // SAFETY: a valid context handle (kept alive by its owner, see Owner).
        unsafe { sys::cuCtxPushCurrent_v2(ctx.0) }.result().call("cuCtxPushCurrent")?;
        Ok(Pushed)
    }
}

impl Drop for Pushed {
    fn drop(&mut self) {
        let mut old: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: pops the context pushed in new(); writes the popped handle into `old`.
        if let Err(e) = unsafe { sys::cuCtxPopCurrent_v2(&mut old) }.result() {
            tracing::warn!(error = %e, "cuCtxPopCurrent failed");
        }
    }
}

/// GPU memory as softhca's device reaches it: CUDA copies on a private stream.
#[derive(Debug)]
pub struct CudaPeer {
    name: String,
    ctx: Ctx,
    stream: Stream,
    /// The device whose primary context was retained (released on drop).
    retained: Option<sys::CUdevice>,
}

impl CudaPeer {
    /// The peer memory for memory owned by `owner`.
    pub fn new(owner: Owner) -> Result<CudaPeer> {
        crate::cuda::probe()?;
        let (name, ctx, retained) = match owner {
            Owner::Primary(ordinal) => {
                let mut dev: sys::CUdevice = 0;
                // SAFETY: writes one device handle.
                unsafe { sys::cuDeviceGet(&mut dev, ordinal as i32) }.result().call("cuDeviceGet")?;
                let mut ctx: sys::CUcontext = std::ptr::null_mut();
                // SAFETY: writes the primary context handle; released in Drop.
                unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) }.result().call("cuDevicePrimaryCtxRetain")?;
                (format!("cuda:{ordinal}"), Ctx(ctx), Some(dev))
            }
            Owner::Context(c) => (format!("cuda:ctx{c:#x}"), Ctx(c as sys::CUcontext), None),
        };
        let stream = match Self::new_stream(ctx) {
            Ok(s) => s,
            Err(e) => {
                if let Some(dev) = retained {
                    // SAFETY: releases the retain made above.
                    let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) };
                }
                return Err(e);
            }
        };
        Ok(CudaPeer { name, ctx, stream, retained })
    }

    /// A non-blocking stream in `ctx` (it does not wait for the legacy default stream,
    /// so a peer copy never waits behind the program's work).
    fn new_stream(ctx: Ctx) -> Result<Stream> {
        let _p = Pushed::new(ctx)?;
        let mut s: sys::CUstream = std::ptr::null_mut();
        // SAFETY: creates a stream in the pushed context and writes its handle.
        unsafe { sys::cuStreamCreate(&mut s, sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32) }
            .result()
            .call("cuStreamCreate")?;
        Ok(Stream(s))
    }

    fn fail(&self, what: &'static str, addr: u64, len: usize, e: Error) -> PeerError {
        PeerError { what, addr, len, why: e.to_string() }
    }

    fn sync(&self) -> Result<()> {
        // SAFETY: our stream, with its context pushed by the caller.
        unsafe { sys::cuStreamSynchronize(self.stream.0) }.result().call("cuStreamSynchronize")
    }
}

impl PeerMemory for CudaPeer {
    fn name(&self) -> &str {
        &self.name
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), PeerError> {
        if out.is_empty() {
            return Ok(());
        }
        let len = out.len();
        let mut go = || -> Result<()> {
            let _p = Pushed::new(self.ctx)?;
            // SAFETY: `out` is a live exclusive buffer of the length passed and stays
            // borrowed until the stream is synchronized below; the device range is the
            // caller's (softhca checked it against the MR).
            unsafe { sys::cuMemcpyDtoHAsync_v2(out.as_mut_ptr().cast(), addr, out.len(), self.stream.0) }
                .result()
                .call("cuMemcpyDtoHAsync")?;
            self.sync()
        };
        go().map_err(|e| self.fail("read", addr, len, e))
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), PeerError> {
        if data.is_empty() {
            return Ok(());
        }
        let go = || -> Result<()> {
            let _p = Pushed::new(self.ctx)?;
            // SAFETY: `data` is live and borrowed until the stream is synchronized below;
            // the device range is the caller's (checked against the MR by softhca).
            unsafe { sys::cuMemcpyHtoDAsync_v2(addr, data.as_ptr().cast(), data.len(), self.stream.0) }
                .result()
                .call("cuMemcpyHtoDAsync")?;
            self.sync()
        };
        go().map_err(|e| self.fail("write", addr, data.len(), e))
    }

    /// Page-locked staging, for memory of a primary context: a copy from pageable memory
    /// goes through the driver's own bounce buffer (a CPU copy plus a DMA per chunk), one
    /// from pinned memory is a single DMA by the copy engine, as the NIC's would be.
    ///
    /// The buffer outlives this peer memory (softhca keeps it for the QP's life), so it
    /// holds its own retain of the primary context ([`crate::pinned::alloc_portable`]):
    /// the pages stay mapped however the program's contexts come and go. Memory of
    /// another context (one the program created and may destroy) gets no pinned staging.
    fn staging_buffer(&self, len: usize) -> Option<HostBuffer> {
        let dev = self.retained?;
        match crate::pinned::alloc_portable(dev, len) {
            Ok(b) => Some(b),
            Err(e) => {
                tracing::warn!(target: "gdr::peer", "{}: no pinned staging ({e}); staging in pageable memory", self.name);
                None
            }
        }
    }

    fn atomic_u64(&self, addr: u64, compare: Option<u64>, swap_or_add: u64) -> Result<u64, PeerError> {
        let _g = ATOMICS.lock().unwrap_or_else(|p| p.into_inner());
        let mut old = [0u8; 8];
        self.read(addr, &mut old)?;
        let old = u64::from_ne_bytes(old);
        let new = match compare {
            Some(c) if c == old => Some(swap_or_add),
            Some(_) => None,
            None => Some(old.wrapping_add(swap_or_add)),
        };
        if let Some(v) = new {
            self.write(addr, &v.to_ne_bytes())?;
        }
        Ok(old)
    }
}

impl Drop for CudaPeer {
    fn drop(&mut self) {
        match Pushed::new(self.ctx) {
            Ok(p) => {
                // SAFETY: our stream, destroyed once, with its context current.
                let _ = unsafe { sys::cuStreamDestroy_v2(self.stream.0) };
                drop(p);
            }
            // The program destroyed its context first: the stream went with it.
            Err(e) => tracing::debug!(error = %e, "peer memory: context gone before its stream"),
        }
        if let Some(dev) = self.retained {
            // SAFETY: releases the retain made in new().
            let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(dev) };
        }
    }
}

/// Claims `nv_dmabuf` dma-bufs for softhca (see the module doc for the rules).
#[derive(Debug, Default)]
pub struct CudaResolver;

impl CudaResolver {
    fn resolve_fd(fd: BorrowedFd<'_>, offset: u64, length: u64, iova: u64) -> Result<(Arc<dyn PeerMemory>, u64), String> {
        crate::cuda::probe().map_err(|e| format!("{e}"))?;
        let loc = locate(offset, length, iova, exports::lookup(fd), pointer::query)?;
        if loc.how == How::Registry && loc.addr != iova {
            tracing::debug!(target: "gdr::peer", iova = format_args!("{iova:#x}"), addr = format_args!("{:#x}", loc.addr),
                            "dma-buf known to gdr: the MR's device address comes from its export, not the iova");
        }
        let mem = CudaPeer::new(loc.owner).map_err(|e| e.to_string())?;
        tracing::debug!(target: "gdr::peer", name = mem.name(), addr = format_args!("{:#x}", loc.addr), length, how = ?loc.how,
                        "GPU memory registered for softhca");
        Ok((Arc::new(mem), loc.addr))
    }
}

impl PeerResolver for CudaResolver {
    fn resolve(&self, req: &DmabufRequest<'_>) -> Result<Option<(Arc<dyn PeerMemory>, u64)>, Errno> {
        if req.exporter != NV_EXPORTER {
            return Ok(None);
        }
        match Self::resolve_fd(req.fd, req.offset, req.length, req.iova) {
            Ok(found) => Ok(Some(found)),
            Err(why) => {
                tracing::warn!(target: "gdr::peer", offset = req.offset, length = req.length, iova = format_args!("{:#x}", req.iova),
                               "softhca cannot reach this GPU dma-buf (EOPNOTSUPP): {why}");
                Err(Errno::EOPNOTSUPP)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x7fdf_9fe0_0000;

    fn alloc(start: u64, size: u64, context: usize) -> impl Fn(u64) -> Result<PtrInfo> {
        move |a| {
            if a >= start && a < start + size {
                Ok(PtrInfo { device: true, range_start: start, range_size: size, context, ordinal: 2 })
            } else {
                Err(Error::Other("CUDA_ERROR_INVALID_VALUE".into()))
            }
        }
    }

    /// gdr's own export wins over the caller's iova: a zero-based iova (which perftest
    /// would never pass, but the verbs API allows) still reaches base + offset.
    #[test]
    fn registry_first() {
        let e = Export { base: BASE, size: 0x3000, ordinal: 1, owner: 7 };
        let never = |_: u64| -> Result<PtrInfo> { panic!("CUDA must not be asked") };
        let l = locate(0x234, 0x2000, 0, Some(e), never).unwrap();
        assert_eq!(l, Located { addr: BASE + 0x234, owner: Owner::Primary(1), how: How::Registry });
        let err = locate(0x1001, 0x2000, 0, Some(e), never).unwrap_err();
        assert!(err.contains("past the 12288-byte dma-buf"), "{err}");
    }

    /// The iova convention: iova is the device address of the MR's first byte. Inside
    /// a 2 MiB allocation: accepted, with the allocation's context; crossing its end or
    /// outside any allocation: refused, saying why.
    #[test]
    fn iova_convention_checked() {
        let q = alloc(BASE, 2 << 20, 0xc0ffee);
        let l = locate(0x234, 4096, BASE + 0x1234, None, &q).unwrap();
        assert_eq!(l, Located { addr: BASE + 0x1234, owner: Owner::Context(0xc0ffee), how: How::Iova });
        let err = locate(0, 4096, BASE + (2 << 20) - 100, None, &q).unwrap_err();
        assert!(err.contains("not inside one device allocation"), "{err}");
        let err = locate(0, 4096, 0x1000, None, &q).unwrap_err();
        assert!(err.contains("not a CUDA address in this process"), "{err}");
    }

    /// Memory without a context (the VMM API's) runs in its device's primary context;
    /// host memory CUDA knows (pinned) is not a GPU dma-buf's.
    #[test]
    fn owner_and_memory_type() {
        let l = locate(0, 64, BASE, None, alloc(BASE, 4096, 0)).unwrap();
        assert_eq!(l.owner, Owner::Primary(2));
        let host = |_: u64| Ok(PtrInfo { device: false, range_start: BASE, range_size: 4096, context: 1, ordinal: 0 });
        assert!(locate(0, 64, BASE, None, host).unwrap_err().contains("not device memory"));
    }

    /// Another exporter's buffer is not ours (Ok(None): the next resolver, or softhca's
    /// own EOPNOTSUPP); an nv_dmabuf without a driver is refused with EOPNOTSUPP.
    #[test]
    fn resolver_claims_only_nv_dmabuf() {
        let f = nix::sys::memfd::memfd_create(c"not-nv", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        use std::os::fd::AsFd;
        let req = |exporter| DmabufRequest { fd: f.as_fd(), exporter, size: 4096, offset: 0, length: 4096, iova: BASE };
        assert!(matches!(CudaResolver.resolve(&req("udmabuf")), Ok(None)));
        if crate::cuda::probe().is_err() {
            assert!(matches!(CudaResolver.resolve(&req(NV_EXPORTER)), Err(Errno::EOPNOTSUPP)));
        }
    }
}
