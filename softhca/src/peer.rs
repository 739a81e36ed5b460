//! Peer memory: MR bytes the device reaches other than through a CPU pointer.
//!
//! A ConnectX reaches a GPU's memory by PCIe peer-to-peer: the GPU driver exports the
//! memory as a dma-buf, `ib_umem_dmabuf_get` turns it into DMA addresses, and the NIC's
//! reads and writes go straight to the GPU's BAR. softhca is a CPU program in the process
//! that owns the memory, so for a dma-buf the CPU can map it maps it (see
//! `kernel::methods::mr`); for one it cannot map (NVIDIA's exporter, `nv_dmabuf`, refuses
//! mmap with errno 524) it asks a [`PeerResolver`] for a [`PeerMemory`] that performs the
//! NIC's peer reads and writes with the exporter's own copy engine (CUDA copies at the
//! device address). That is an emulation of the DMA, documented in docs/gdr.md: the bytes
//! land where the NIC's would, but through a different engine and with CUDA's ordering.
//!
//! REG_DMABUF_MR asks the resolvers ([`claim`]) before it tries to map the buffer, so a
//! resolver decides by exporter name even for a mappable exporter. The device half
//! batches its calls per message or [`PEER_SEGMENT`] through host staging buffers of the
//! QP (`crate::device::stage`, docs/softhca.md "Memory: where an MR's bytes are") and
//! counts them (`peer_*` device counters).
//!
//! softhca itself knows no GPU: `gdr` implements both traits for CUDA and installs its
//! resolver with [`install_resolver`] (the preload shim does the same at start, so stock
//! rdma-core programs reach GPU memory too). Without a resolver a non-mappable dma-buf is
//! refused with EOPNOTSUPP, as a NIC without peer-memory support refuses it.

use std::fmt::Debug;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::{Arc, RwLock};

use nix::errno::Errno;

/// An error from the exporter's copy engine; the device completes the work request with
/// the syndrome a failed DMA gets (local protection for a local access, remote access for
/// a remote one), as a NIC does when a peer read or write faults.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("peer memory {what} of {len} bytes at {addr:#x} failed: {why}")]
pub struct PeerError {
    pub what: &'static str,
    pub addr: u64,
    pub len: usize,
    pub why: String,
}

/// Memory behind one dma-buf the device reaches through the exporter, addressed by the
/// exporter's device addresses.
///
/// Calls come from the device half's engine, under its lock, on whatever thread runs the
/// engine step (the engine thread, or an application thread in polled mode): an
/// implementation makes its own context current. `read`/`write`/`atomic_u64` are only
/// ever given ranges inside a registered MR whose key was just checked. The device batches: one call
/// covers a whole message or segment of up to [`PEER_SEGMENT`] bytes, never a packet.
pub trait PeerMemory: Send + Sync + Debug {
    /// Short name for logs and traces, e.g. `cuda:0`.
    fn name(&self) -> &str;
    /// Copies `out.len()` bytes at device address `addr` into `out` (the NIC's peer read).
    /// Returns once the bytes are in `out`.
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), PeerError>;
    /// Copies `data` to device address `addr` (the NIC's peer write). Returns once the
    /// bytes are visible to the exporter's later work (a CQE written after this call is
    /// never seen before the data, as with the real NIC's write ordering).
    fn write(&self, addr: u64, data: &[u8]) -> Result<(), PeerError>;
    /// An 8-byte atomic at `addr` (8-byte aligned): compare-and-swap with
    /// `Some(compare)`, fetch-and-add with `None`; returns the original value. Atomic with
    /// respect to the device's other accesses (the engine lock serialises them), not to
    /// the GPU's own kernels, which is also what a PCIe atomic through a BAR gives on most
    /// GPUs (docs/gdr.md).
    fn atomic_u64(&self, addr: u64, compare: Option<u64>, swap_or_add: u64) -> Result<u64, PeerError>;

    /// Host memory of `len` bytes (at least) for one of the device's staging buffers
    /// (`crate::device::stage`), when this memory's copies are faster from memory of its
    /// own: CUDA copies from page-locked memory run at the link's speed, from pageable
    /// memory they go through the driver's bounce buffer. `None`, the default: the device
    /// uses ordinary heap memory.
    ///
    /// Asked once per staging buffer (a few per QP), when the buffer is first needed for
    /// this memory; the buffer is kept for the QP's life and may then serve other peer
    /// memories too (CUDA: allocate it portable). It is released by dropping the
    /// [`HostBuffer`], on whatever thread drops the QP's device context.
    fn staging_buffer(&self, len: usize) -> Option<HostBuffer> {
        let _ = len;
        None
    }
}

/// Host memory a [`PeerMemory`] lends the device for staging ([`PeerMemory::staging_buffer`]),
/// given back (its release function run) when dropped.
pub struct HostBuffer {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
    release: Option<Box<dyn FnOnce() + Send>>,
}

// SAFETY: the buffer is owned exclusively by this value (`from_raw`'s contract) and the
// release function is `Send`; nothing in it is tied to a thread.
unsafe impl Send for HostBuffer {}

impl HostBuffer {
    /// Wraps `len` bytes at `ptr`, which `release` frees.
    ///
    /// # Safety
    /// `[ptr, ptr + len)` must be valid for reads and writes, and used by nothing else,
    /// until `release` runs (when the value is dropped); nothing else may free it.
    pub unsafe fn from_raw(ptr: std::ptr::NonNull<u8>, len: usize, release: impl FnOnce() + Send + 'static) -> HostBuffer {
        HostBuffer { ptr, len, release: Some(Box::new(release)) }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: valid and exclusively ours for `len` bytes (`from_raw`).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: valid and exclusively ours for `len` bytes (`from_raw`); `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        if let Some(r) = self.release.take() {
            r();
        }
    }
}

impl Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer").field("ptr", &self.ptr).field("len", &self.len).finish_non_exhaustive()
    }
}

/// The largest single copy the device asks of a [`PeerMemory`]: a message longer than this
/// is moved in segments of this size.
pub const PEER_SEGMENT: usize = 1 << 20;

/// A dma-buf the CPU could not map, as REG_DMABUF_MR saw it.
#[derive(Debug, Clone, Copy)]
pub struct DmabufRequest<'a> {
    /// The dma-buf: softhca's duplicate of the caller's fd, which the MR keeps; valid
    /// for the duration of the call (a resolver that needs it longer dups it).
    pub fd: BorrowedFd<'a>,
    /// `exp_name` from the fd's /proc fdinfo, e.g. `nv_dmabuf`.
    pub exporter: &'a str,
    /// The dma-buf's size in bytes.
    pub size: u64,
    /// REG_DMABUF_MR's offset, length and iova.
    pub offset: u64,
    pub length: u64,
    pub iova: u64,
}

/// What a resolver answers for a buffer it claims: the memory, and the device address
/// of the MR's first byte.
pub type Resolved = (Arc<dyn PeerMemory>, u64);

/// Turns a non-mappable dma-buf into peer memory.
pub trait PeerResolver: Send + Sync {
    /// `Ok(Some((memory, addr)))`: the buffer is this resolver's, and byte `offset` of it
    /// is at device address `addr` (the MR's first byte). `Ok(None)`: not this resolver's
    /// exporter. `Err(errno)`: this resolver's, but the registration cannot be served (the
    /// errno REG_DMABUF_MR returns).
    fn resolve(&self, req: &DmabufRequest<'_>) -> Result<Option<Resolved>, Errno>;
}

static RESOLVERS: RwLock<Vec<Arc<dyn PeerResolver>>> = RwLock::new(Vec::new());

/// Adds a resolver for this process (idempotent per resolver is the caller's concern:
/// install once, at start).
pub fn install_resolver(r: Arc<dyn PeerResolver>) {
    RESOLVERS.write().unwrap_or_else(|p| p.into_inner()).push(r);
}

/// Asks each installed resolver in turn, in the order they were installed: the first
/// that claims the buffer answers. `Ok(None)` when none claims it (REG_DMABUF_MR then
/// maps the buffer if the exporter allows it, see `kernel::methods::mr`).
///
/// Why resolvers come before mmap: a resolver claims buffers by exporter name, and an
/// exporter the CPU can map may still want its own engine (a test resolver that claims
/// vgem buffers to exercise the peer path on a machine without a GPU).
pub fn claim(req: &DmabufRequest<'_>) -> Result<Option<Resolved>, Errno> {
    let list = RESOLVERS.read().unwrap_or_else(|p| p.into_inner()).clone();
    for r in list {
        if let Some(found) = r.resolve(req)? {
            return Ok(Some(found));
        }
    }
    Ok(None)
}

/// [`claim`], with EOPNOTSUPP when no resolver takes the buffer.
pub fn resolve(req: &DmabufRequest<'_>) -> Result<Resolved, Errno> {
    claim(req)?.ok_or(Errno::EOPNOTSUPP)
}

/// Files that REG_DMABUF_MR treats as dma-bufs although their fdinfo has no `exp_name`
/// (see [`emulate_dmabuf`]), by (device, inode) of the open file.
static EMULATED: RwLock<Vec<Emulated>> = RwLock::new(Vec::new());

/// One [`emulate_dmabuf`] entry: the file's (device, inode), exporter name and size.
struct Emulated {
    id: (u64, u64),
    exporter: String,
    size: u64,
}

/// While the returned guard lives, REG_DMABUF_MR accepts `fd` (any file, typically a
/// memfd) as a dma-buf of exporter `exporter` and `size` bytes, as `dma_buf_get` would
/// accept a real one; every other rule (range, access, resolvers, then mmap) is applied
/// unchanged.
///
/// For tests only: this machine has no dma-buf exporter at all (no udmabuf, no dma-buf
/// heaps, no GPU), and the peer path must still run end to end through
/// `ibv_reg_dmabuf_mr` / `Pd::reg_dmabuf_mr`. With an exporter name no resolver claims,
/// a memfd goes the mmap way (the mappable dma-buf path); with one a test resolver
/// claims, it becomes peer memory. The file is recognised by its inode, so duplicates of
/// the fd count too. Nothing calls this outside tests, and an empty table costs one
/// lock on REG_DMABUF_MR of a file that is not a dma-buf, never on the data path.
#[doc(hidden)]
pub fn emulate_dmabuf(fd: BorrowedFd<'_>, exporter: &str, size: u64) -> Result<EmulatedDmabuf, Errno> {
    let id = file_id(fd.as_raw_fd())?;
    EMULATED.write().unwrap_or_else(|p| p.into_inner()).push(Emulated { id, exporter: exporter.to_string(), size });
    Ok(EmulatedDmabuf { id })
}

/// Ends an [`emulate_dmabuf`] when dropped (MRs already registered keep working).
#[doc(hidden)]
#[derive(Debug)]
pub struct EmulatedDmabuf {
    id: (u64, u64),
}

impl Drop for EmulatedDmabuf {
    fn drop(&mut self) {
        let mut t = EMULATED.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = t.iter().position(|e| e.id == self.id) {
            t.remove(i);
        }
    }
}

fn file_id(fd: RawFd) -> Result<(u64, u64), Errno> {
    let st = nix::sys::stat::fstat(fd)?;
    Ok((st.st_dev, st.st_ino))
}

/// The exporter name and size [`emulate_dmabuf`] gave the file behind `fd`, if any.
pub(crate) fn emulated(fd: RawFd) -> Option<(String, u64)> {
    let t = EMULATED.read().unwrap_or_else(|p| p.into_inner());
    if t.is_empty() {
        return None;
    }
    let id = file_id(fd).ok()?;
    t.iter().find(|e| e.id == id).map(|e| (e.exporter.clone(), e.size))
}
