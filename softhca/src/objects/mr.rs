//! Memory region: the HCA's MKey context. The device half translates (key, address,
//! length) of work requests and incoming RDMA requests through it.
//!
//! All fields are written once by the kernel half at registration; the MR is immutable
//! afterwards (REREG_MR is not implemented).
//!
//! softhca cannot pin memory: registering only checks that the range is mapped with the
//! needed permissions when the command runs. Like a real HCA, the device half then
//! relies on the application's promise (ibverbs' rule for `ibv_reg_mr`) to keep the range
//! mapped until DEREG_MR: it copies to and from MR memory directly, re-resolving the key
//! (PD, bounds, access) under its engine lock for every access, and the deregistration
//! hook waits for that lock, so nothing touches the range after DEREG_MR returns (see
//! `crate::device::mem`).

use std::os::fd::OwnedFd;
use std::sync::Arc;

use uverbs::sys::verbs::{
    ACCESS_LOCAL_WRITE, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

use super::{Live, Pd};

/// Where the bytes of an MR live.
#[derive(Debug)]
pub enum MrBacking {
    /// Ordinary memory of this process, registered with REG_MR.
    User,
    /// A dma-buf (REG_DMABUF_MR) that softhca mapped into this process to reach its bytes.
    /// `map` is the mapping's address (`Mr::addr` points `offset` bytes into it).
    Dmabuf {
        /// Our duplicate of the dma-buf fd, kept while the MR lives.
        fd: OwnedFd,
        /// Start and length of our mapping of the whole dma-buf.
        map: u64,
        map_len: usize,
    },
}

/// A registered memory region (`struct ib_mr` + mlx5 MKey).
#[derive(Debug)]
pub struct Mr {
    /// The PD this MR belongs to; work requests may use it only on QPs of the same PD.
    pub pd: Arc<Pd>,
    /// mlx5 keys: `index << 8 | variant`. User MRs have `lkey == rkey`.
    pub lkey: u32,
    pub rkey: u32,
    /// The process address of the first byte (REG_MR `start`).
    pub addr: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address work requests use for the first byte (REG_MR `hca_va`).
    pub iova: u64,
    /// `IB_UVERBS_ACCESS_*` bits as registered.
    pub access: u32,
    pub backing: MrBacking,
    pub(crate) _live: Live,
}

impl Mr {
    /// The process address of `[iova, iova + len)`, or None when the range is not inside
    /// the MR. A zero-length access at the very end is inside.
    pub fn translate(&self, iova: u64, len: u64) -> Option<u64> {
        let off = iova.checked_sub(self.iova)?;
        let end = off.checked_add(len)?;
        if end > self.length {
            return None;
        }
        self.addr.checked_add(off)
    }

    /// Whether the local HCA may write into this MR (receive buffers, RDMA READ responses).
    pub fn local_write(&self) -> bool {
        self.access & ACCESS_LOCAL_WRITE != 0
    }

    /// Whether a remote peer may RDMA WRITE into this MR.
    pub fn remote_write(&self) -> bool {
        self.access & ACCESS_REMOTE_WRITE != 0
    }

    /// Whether a remote peer may RDMA READ from this MR.
    pub fn remote_read(&self) -> bool {
        self.access & ACCESS_REMOTE_READ != 0
    }

    /// Whether a remote peer may run atomics on this MR.
    pub fn remote_atomic(&self) -> bool {
        self.access & ACCESS_REMOTE_ATOMIC != 0
    }
}

impl Drop for MrBacking {
    fn drop(&mut self) {
        if let MrBacking::Dmabuf { map, map_len, .. } = *self {
            // SAFETY: `map`/`map_len` describe the mapping created at registration, owned
            // by this backing alone; nothing reads through it once the MR is gone.
            unsafe { libc::munmap(map as *mut libc::c_void, map_len) };
        }
    }
}
