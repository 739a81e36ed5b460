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
//!
//! Where the bytes are ([`MrBacking`], summed up for key checks in [`KeySpan::peer`]):
//! in this process (REG_MR, or a dma-buf softhca mapped), reached by CPU pointer; or in
//! peer memory (a dma-buf the CPU cannot map, GPU memory), reached only through the
//! exporter's [`PeerMemory`] at device addresses. A key check answers with a [`Loc`]
//! saying which; see `crate::device::mkey` and `crate::device::stage` for how the data
//! path moves bytes in each case.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use crate::peer::PeerMemory;

use uverbs::sys::verbs::{
    ACCESS_LOCAL_WRITE, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

use crate::hca::{Access, KeyError};

use super::{Live, Pd};

/// Where the bytes of an MR live.
#[derive(Debug)]
pub enum MrBacking {
    /// Ordinary memory of this process, registered with REG_MR.
    User,
    /// A dma-buf (REG_DMABUF_MR) that softhca mapped into this process to reach its bytes.
    /// `map` is the mapping's address (the MR's `span.addr` points `offset` bytes into it).
    Dmabuf {
        /// Our duplicate of the dma-buf fd, kept while the MR lives.
        fd: OwnedFd,
        /// Start and length of our mapping of the whole dma-buf.
        map: u64,
        map_len: usize,
    },
    /// A dma-buf the CPU cannot map (GPU memory), claimed by a [`crate::peer`] resolver:
    /// the device reaches its bytes through `mem`, and the MR's `span.addr` is the device
    /// address of its first byte (`addr`).
    Peer {
        /// Our duplicate of the dma-buf fd, kept while the MR lives (as the kernel keeps
        /// its reference on the dma-buf).
        fd: OwnedFd,
        /// The exporter's copy engine.
        mem: Arc<dyn PeerMemory>,
        /// Device address of the MR's first byte (byte `offset` of the buffer).
        addr: u64,
    },
}

impl MrBacking {
    /// The peer memory behind the MR, if its bytes are not reachable by CPU pointer.
    pub fn peer(&self) -> Option<&Arc<dyn PeerMemory>> {
        match self {
            MrBacking::Peer { mem, .. } => Some(mem),
            _ => None,
        }
    }
}

/// A registered memory region (`struct ib_mr` + mlx5 MKey).
#[derive(Debug)]
pub struct Mr {
    /// The PD this MR belongs to; work requests may use it only on QPs of the same PD.
    pub pd: Arc<Pd>,
    /// Keys, PD number, range and rights: everything a key check reads.
    pub span: KeySpan,
    pub backing: MrBacking,
    pub(crate) _live: Live,
}

/// An MR as a key check sees it: keys, PD, range and rights, as plain values.
///
/// Why a value of its own: the data path keeps copies of recently used ones
/// (`crate::device::mkey::KeyCache`); holding the `Arc<Mr>` there instead would keep a
/// deregistered MR (and its PD) alive, and taking a reference per packet costs two
/// locked instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeySpan {
    /// The number of the MR's PD.
    pub pdn: u32,
    /// mlx5 keys: `index << 8 | variant`. User MRs have `lkey == rkey`.
    pub lkey: u32,
    pub rkey: u32,
    /// The process address of the first byte (REG_MR `start`); for peer memory the
    /// device address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub length: u64,
    /// The address work requests use for the first byte (REG_MR `hca_va`).
    pub iova: u64,
    /// `IB_UVERBS_ACCESS_*` bits as registered.
    pub access: u32,
    /// The bytes are peer memory ([`MrBacking::Peer`]): `addr` is a device address that
    /// only the MR's [`PeerMemory`] can reach, never a CPU pointer.
    pub peer: bool,
    /// Ordinary process memory ([`MrBacking::User`]), which another process may read with
    /// `process_vm_readv`: the same-host path may send a reference to it instead of the
    /// bytes (`crate::device::link`). Not a dma-buf mapping (the kernel refuses such
    /// `VM_PFNMAP` ranges to other processes) nor peer memory.
    pub by_ref: bool,
}

/// Where a checked range of an MR begins: the answer of a key check.
///
/// Why an enum rather than an address: a peer MR's addresses are device addresses, and
/// dereferencing one as a CPU pointer would be wrong; the data path must branch on the
/// kind before it touches the bytes (one predictable branch per access for host MRs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// A process address, for `crate::device::mem`.
    Host(u64),
    /// A device address in the MR's [`PeerMemory`].
    Peer(u64),
}

impl Loc {
    /// The address, whichever kind it is.
    pub fn addr(self) -> u64 {
        match self {
            Loc::Host(a) | Loc::Peer(a) => a,
        }
    }
}

impl KeySpan {
    /// Checks `key` for an access of `len` bytes at `iova` by a QP of PD `pdn`, and
    /// returns the process address of the first byte. Remote accesses name the rkey,
    /// local ones the lkey.
    pub fn check(&self, key: u32, pdn: u32, iova: u64, len: u64, access: Access) -> Result<u64, KeyError> {
        let remote = matches!(access, Access::RemoteRead | Access::RemoteWrite | Access::RemoteAtomic);
        if remote && self.rkey != key || !remote && self.lkey != key {
            return Err(KeyError::NoSuchKey);
        }
        if self.pdn != pdn {
            return Err(KeyError::WrongPd);
        }
        let needs = match access {
            Access::LocalRead => 0,
            Access::LocalWrite => ACCESS_LOCAL_WRITE,
            Access::RemoteRead => ACCESS_REMOTE_READ,
            Access::RemoteWrite => ACCESS_REMOTE_WRITE,
            Access::RemoteAtomic => ACCESS_REMOTE_ATOMIC,
        };
        if self.access & needs != needs {
            return Err(KeyError::AccessDenied);
        }
        self.translate(iova, len).ok_or(KeyError::OutOfBounds)
    }

    /// The address (process or, for peer memory, device address) of `[iova, iova + len)`,
    /// or None when the range is not inside the MR. A zero-length access at the very end
    /// is inside.
    pub fn translate(&self, iova: u64, len: u64) -> Option<u64> {
        let off = iova.checked_sub(self.iova)?;
        let end = off.checked_add(len)?;
        if end > self.length {
            return None;
        }
        self.addr.checked_add(off)
    }

    /// [`KeySpan::check`], answering where the bytes are.
    #[inline]
    pub fn locate(&self, key: u32, pdn: u32, iova: u64, len: u64, access: Access) -> Result<Loc, KeyError> {
        let a = self.check(key, pdn, iova, len, access)?;
        Ok(if self.peer { Loc::Peer(a) } else { Loc::Host(a) })
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The key check on its own (the table lookup in front of it filters keys too, so
    /// only here does each rule stand alone): an mlx5 key is `index << 8 | variant`,
    /// and the whole key must match (PRM: the MKey's `mkey_7_0` is part of the key; a
    /// stale variant of a reused index is another key); remote accesses name the
    /// rkey, local ones the lkey (ibv_sge.lkey, RETH/AtomicETH R_Key).
    #[test]
    fn the_whole_key_of_the_right_kind_must_match() {
        let all = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC;
        let s = KeySpan { pdn: 3, lkey: 0x1234_5601, rkey: 0x00ab_cd02, addr: 0x7000_0000, length: 4096, iova: 0x10_0000, access: all, peer: false, by_ref: true };
        let remote = [Access::RemoteRead, Access::RemoteWrite, Access::RemoteAtomic];
        let local = [Access::LocalRead, Access::LocalWrite];
        for a in remote {
            assert_eq!(s.check(0x00ab_cd02, 3, 0x10_0008, 8, a), Ok(0x7000_0008), "{a:?}");
            assert_eq!(s.check(0x1234_5601, 3, 0x10_0008, 8, a), Err(KeyError::NoSuchKey), "{a:?} with the lkey");
            assert_eq!(s.check(0x00ab_cd03, 3, 0x10_0008, 8, a), Err(KeyError::NoSuchKey), "{a:?}, another variant");
        }
        for a in local {
            assert_eq!(s.check(0x1234_5601, 3, 0x10_0008, 8, a), Ok(0x7000_0008), "{a:?}");
            assert_eq!(s.check(0x00ab_cd02, 3, 0x10_0008, 8, a), Err(KeyError::NoSuchKey), "{a:?} with the rkey");
            assert_eq!(s.check(0x1234_5600, 3, 0x10_0008, 8, a), Err(KeyError::NoSuchKey), "{a:?}, another variant");
        }
        // A user MR (lkey == rkey): a stale variant is refused for every kind of access.
        let u = KeySpan { lkey: 0x0000_0501, rkey: 0x0000_0501, ..s };
        for a in remote.into_iter().chain(local) {
            assert_eq!(u.check(0x0000_0502, 3, 0x10_0000, 8, a), Err(KeyError::NoSuchKey), "{a:?}");
        }
        assert_eq!(Loc::Host(5).addr(), 5);
        assert_eq!(Loc::Peer(6).addr(), 6);
    }
}
