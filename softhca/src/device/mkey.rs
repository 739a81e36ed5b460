//! Memory keys on the data path: checking lkeys/rkeys and moving bytes between packets
//! and registered memory.
//!
//! Every access resolves its key again through [`Hca::check_key`] (PD, bounds, access
//! rights) while the engine lock is held; a deregistration waits for that lock, so a
//! translated address is never used after its MR is gone (see `super::mem`).

use crate::hca::{Access, Hca, KeyError};
use crate::objects::Pd;

use super::mem;
use super::wqe::Sge;

/// Checks every entry of a gather/scatter list for `access` over its whole length.
pub fn validate(hca: &Hca, pd: &Pd, sges: &[Sge], access: Access) -> Result<(), KeyError> {
    for s in sges {
        if access == Access::LocalWrite && s.lkey == hca.dump_fill_mkey() {
            continue;
        }
        hca.check_key(s.lkey, pd, s.addr, s.len as u64, access)?;
    }
    Ok(())
}

/// Bytes a scatter list can hold.
pub fn capacity(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| s.len as u64).sum()
}

/// Walks the pieces of `[offset, offset + len)` of the list, calling `f(sge, offset in the
/// sge, offset in the range, piece length)`.
fn pieces<E>(sges: &[Sge], mut offset: u64, len: usize, mut f: impl FnMut(&Sge, u64, usize, usize) -> Result<(), E>) -> Result<(), E> {
    let mut done = 0usize;
    for s in sges {
        if done == len {
            break;
        }
        let l = s.len as u64;
        if offset >= l {
            offset -= l;
            continue;
        }
        let n = ((l - offset) as usize).min(len - done);
        f(s, offset, done, n)?;
        done += n;
        offset = 0;
    }
    Ok(())
}

/// Gathers `out.len()` bytes starting `offset` bytes into the list (send payloads, READ
/// responses are gathered with [`read_remote`]).
pub fn gather(hca: &Hca, pd: &Pd, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), KeyError> {
    let len = out.len();
    pieces(sges, offset, len, |s, off, at, n| {
        let (_mr, addr) = hca.check_key(s.lkey, pd, s.addr + off, n as u64, Access::LocalRead)?;
        // SAFETY: check_key just confirmed [addr, addr + n) lies inside a live MR of this
        // PD, under the engine lock (see `mem`).
        unsafe { mem::read(addr, &mut out[at..at + n]) };
        Ok(())
    })
}

/// The process address of `[offset, offset + len)` of the list, when that range lies in
/// one entry (checked for local read, like [`gather`]): `Ok(None)` when it spans entries
/// (the caller gathers a copy instead). The address may be used while the engine lock
/// is held (see `mem`).
pub fn contiguous(hca: &Hca, pd: &Pd, sges: &[Sge], mut offset: u64, len: usize) -> Result<Option<u64>, KeyError> {
    for s in sges {
        let l = s.len as u64;
        if offset >= l {
            offset -= l;
            continue;
        }
        if offset + len as u64 > l {
            return Ok(None);
        }
        let (_mr, addr) = hca.check_key(s.lkey, pd, s.addr + offset, len as u64, Access::LocalRead)?;
        return Ok(Some(addr));
    }
    Ok(None)
}

/// Scatters `data` starting `offset` bytes into the list (receive WQEs, READ and atomic
/// results). The dump-and-fill key swallows its bytes.
pub fn scatter(hca: &Hca, pd: &Pd, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), KeyError> {
    pieces(sges, offset, data.len(), |s, off, at, n| {
        if s.lkey == hca.dump_fill_mkey() {
            return Ok(());
        }
        let (_mr, addr) = hca.check_key(s.lkey, pd, s.addr + off, n as u64, Access::LocalWrite)?;
        // SAFETY: check_key just confirmed [addr, addr + n) lies inside a live MR of this
        // PD that allows local writes, under the engine lock.
        unsafe { mem::write(addr, &data[at..at + n]) };
        Ok(())
    })
}

/// The process address of `len` bytes at `va` of the MR named by `rkey`, checked for
/// remote read (RDMA READ responder, sending without a copy; see `mem`).
pub fn locate_remote_read(hca: &Hca, pd: &Pd, rkey: u32, va: u64, len: usize) -> Result<u64, KeyError> {
    let (_mr, addr) = hca.check_key(rkey, pd, va, len as u64, Access::RemoteRead)?;
    Ok(addr)
}

/// Reads `out.len()` bytes at `va` of the MR named by `rkey` (RDMA READ responder).
pub fn read_remote(hca: &Hca, pd: &Pd, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), KeyError> {
    if out.is_empty() {
        return Ok(());
    }
    let (_mr, addr) = hca.check_key(rkey, pd, va, out.len() as u64, Access::RemoteRead)?;
    // SAFETY: checked inside a live MR allowing remote reads, under the engine lock.
    unsafe { mem::read(addr, out) };
    Ok(())
}

/// Writes `data` at `va` of the MR named by `rkey` (RDMA WRITE responder).
pub fn write_remote(hca: &Hca, pd: &Pd, rkey: u32, va: u64, data: &[u8]) -> Result<(), KeyError> {
    if data.is_empty() {
        return Ok(());
    }
    let (_mr, addr) = hca.check_key(rkey, pd, va, data.len() as u64, Access::RemoteWrite)?;
    // SAFETY: checked inside a live MR allowing remote writes, under the engine lock.
    unsafe { mem::write(addr, data) };
    Ok(())
}

/// Runs an 8-byte atomic at `va` of the MR named by `rkey`; `va` must be 8-byte aligned.
pub fn atomic_remote(hca: &Hca, pd: &Pd, rkey: u32, va: u64, compare: Option<u64>, swap_or_add: u64) -> Result<u64, KeyError> {
    let (_mr, addr) = hca.check_key(rkey, pd, va, 8, Access::RemoteAtomic)?;
    if addr % 8 != 0 {
        return Err(KeyError::OutOfBounds);
    }
    // SAFETY: checked inside a live MR allowing atomics, aligned, under the engine lock.
    Ok(unsafe { mem::atomic_u64(addr, compare, swap_or_add) })
}
