//! Memory keys on the data path: checking lkeys/rkeys and moving bytes between packets
//! and registered memory.
//!
//! Every access resolves its key again (PD, bounds, access rights) while the engine lock
//! is held, through [`KeyCache::check`]: [`Hca::check_key`], or the same check on a copy
//! of the MR that the table has not changed since. A deregistration waits for that lock,
//! so a translated address is never used after its MR is gone (see `super::mem`).
//!
//! A check answers with a [`Loc`]: where the bytes are. Host memory ([`Loc::Host`], a
//! process address) is copied with `super::mem`, or referred to in place by the transmit
//! path. Peer memory ([`Loc::Peer`], a device address of a dma-buf MR the CPU cannot map,
//! see [`crate::peer`]) is reached only through the MR's [`PeerMemory`]; the functions
//! here make one call per contiguous piece they are given, and the data path hands them
//! whole messages or segments through [`super::stage`], never single packets. Every peer
//! call is counted (`peer_*` in [`super::counters`]); one that fails answers
//! [`KeyError::PeerFault`], which the caller completes like any failed access.

use std::sync::Arc;

use crate::hca::{Access, Hca, KeyError};
use crate::objects::{KeySpan, Loc, Pd};
use crate::peer::PeerMemory;

use super::counters::Counters;
use super::link::copy::{Copies, Payload};
use super::mem;
use super::wqe::Sge;

/// Entries of a [`KeyCache`] (direct-mapped by MKey index).
const KEY_CACHE: usize = 8;

/// The MRs this device's data path resolved last, each with the MR table's generation
/// ([`Hca::mr_generation`]) at the time.
///
/// Why: every packet of an RDMA WRITE, and every packet a requester sends, resolves a
/// key. A lookup in the shared table takes its read lock and a reference on the MR: four
/// locked read-modify-writes per packet. On x86 each of those waits until every earlier
/// store has left the store buffer, so the first one after a packet's copy into the MR
/// paid for that copy's cache misses at once (5 % of a 2 MiB all-reduce, by `perf
/// annotate`: the samples sat on the reference drop after the copy) instead of letting
/// them drain under the next packet's work. A hit is one plain load of the generation
/// and the checks on a [`KeySpan`].
///
/// Why a hit is right: registering or deregistering any MR changes the generation, so an
/// entry whose generation is current is what [`Hca::check_key`] would return now. A
/// deregistration that races with a step changes the generation before its hook takes
/// the engine lock, and the hook waits for the step, exactly as with a table lookup; the
/// next step, which takes the lock after the hook, sees the new generation.
#[derive(Debug, Default)]
pub struct KeyCache {
    slots: [Option<(KeySpan, u64)>; KEY_CACHE],
}

impl KeyCache {
    /// [`Hca::check_key`]'s answer for an access through `key`: where the first byte is.
    #[inline]
    pub fn check(&mut self, hca: &Hca, key: u32, pd: &Pd, iova: u64, len: u64, access: Access) -> Result<Loc, KeyError> {
        // Read before the lookup, so that a change racing with it makes the entry stale.
        let generation = hca.mr_generation();
        let slot = &mut self.slots[(key >> 8) as usize % KEY_CACHE];
        if let Some((span, g)) = slot {
            if *g == generation && (span.lkey == key || span.rkey == key) {
                return span.locate(key, pd.pdn, iova, len, access);
            }
        }
        // A failed lookup leaves the slot as it was: errors are not cached.
        let (mr, _) = hca.check_key(key, pd, iova, len, access)?;
        *slot = Some((mr.span, generation));
        mr.span.locate(key, pd.pdn, iova, len, access)
    }

    /// Whether the MR named by `key`, which a check through this cache just passed, is
    /// ordinary process memory a same-host peer may read by reference
    /// ([`KeySpan::by_ref`]). A key not in the cache answers false (the bytes go inline).
    #[inline]
    pub fn by_ref(&self, key: u32) -> bool {
        match &self.slots[(key >> 8) as usize % KEY_CACHE] {
            Some((span, _)) => (span.lkey == key || span.rkey == key) && span.by_ref,
            None => false,
        }
    }
}

// ---- peer memory ----------------------------------------------------------------------

/// The peer memory of the MR named by `key`, whose check just answered [`Loc::Peer`]
/// under the engine lock (the MR cannot have gone since: a deregistration waits for the
/// lock). Once per message or segment, so the table lookup costs nothing that matters.
fn peer_memory(hca: &Hca, key: u32) -> Result<Arc<dyn PeerMemory>, KeyError> {
    hca.mr_by_key(key).and_then(|mr| mr.backing.peer().cloned()).ok_or(KeyError::NoSuchKey)
}

/// The peer memory of the MR named by `key`, if it is one (whose staging buffer to
/// borrow, see [`super::stage`]).
pub fn peer_memory_of(hca: &Hca, key: u32) -> Option<Arc<dyn PeerMemory>> {
    peer_memory(hca, key).ok()
}

/// The peer memory of the first entry of `sges` that is in peer memory.
pub fn first_peer_memory(hca: &Hca, sges: &[Sge]) -> Option<Arc<dyn PeerMemory>> {
    sges.iter().find_map(|s| peer_memory_of(hca, s.lkey))
}

fn counters(hca: &Hca) -> &Counters {
    hca.device().live_counters()
}

/// Counts a failed peer call and turns it into [`KeyError::PeerFault`].
fn peer_failed(hca: &Hca, e: crate::peer::PeerError) -> KeyError {
    counters(hca).peer_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!(target: "softhca::peer", "{e}");
    KeyError::PeerFault
}

/// Copies `out.len()` bytes at device address `addr` of the MR `key` (checked) into `out`.
pub fn peer_read(hca: &Hca, key: u32, addr: u64, out: &mut [u8]) -> Result<(), KeyError> {
    if out.is_empty() {
        return Ok(());
    }
    let m = peer_memory(hca, key)?;
    let c = counters(hca);
    c.peer_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    c.peer_read_bytes.fetch_add(out.len() as u64, std::sync::atomic::Ordering::Relaxed);
    tracing::trace!(target: "softhca::peer", memory = m.name(), addr = %format_args!("{addr:#x}"), len = out.len(), "peer read");
    m.read(addr, out).map_err(|e| peer_failed(hca, e))
}

/// Copies `data` to device address `addr` of the MR `key` (checked).
pub fn peer_write(hca: &Hca, key: u32, addr: u64, data: &[u8]) -> Result<(), KeyError> {
    if data.is_empty() {
        return Ok(());
    }
    let m = peer_memory(hca, key)?;
    let c = counters(hca);
    c.peer_writes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    c.peer_write_bytes.fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
    tracing::trace!(target: "softhca::peer", memory = m.name(), addr = %format_args!("{addr:#x}"), len = data.len(), "peer write");
    m.write(addr, data).map_err(|e| peer_failed(hca, e))
}

fn peer_atomic(hca: &Hca, key: u32, addr: u64, compare: Option<u64>, swap_or_add: u64) -> Result<u64, KeyError> {
    let m = peer_memory(hca, key)?;
    counters(hca).peer_atomics.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    m.atomic_u64(addr, compare, swap_or_add).map_err(|e| peer_failed(hca, e))
}

/// Checks every entry of a gather/scatter list for `access` over its whole length, and
/// tells whether any of them is in peer memory (the WQE's data then moves through
/// [`super::stage`]).
pub fn validate(hca: &Hca, keys: &mut KeyCache, pd: &Pd, sges: &[Sge], access: Access) -> Result<bool, KeyError> {
    let mut peer = false;
    for s in sges {
        if access == Access::LocalWrite && s.lkey == hca.dump_fill_mkey() {
            continue;
        }
        peer |= matches!(keys.check(hca, s.lkey, pd, s.addr, s.len as u64, access)?, Loc::Peer(_));
    }
    Ok(peer)
}

/// Bytes a scatter list can hold.
pub fn capacity(sges: &[Sge]) -> u64 {
    sges.iter().map(|s| s.len as u64).sum()
}

/// Walks the pieces of `[offset, offset + len)` of the list, calling `f(sge, offset in the
/// sge, offset in the range, piece length)`.
pub(crate) fn pieces<E>(sges: &[Sge], mut offset: u64, len: usize, mut f: impl FnMut(&Sge, u64, usize, usize) -> Result<(), E>) -> Result<(), E> {
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

/// Gathers `out.len()` bytes starting `offset` bytes into the list (send payloads; READ
/// responses are gathered with [`read_remote`]). Peer pieces take one peer read each.
pub fn gather(hca: &Hca, keys: &mut KeyCache, pd: &Pd, sges: &[Sge], offset: u64, out: &mut [u8]) -> Result<(), KeyError> {
    let len = out.len();
    pieces(sges, offset, len, |s, off, at, n| {
        match keys.check(hca, s.lkey, pd, s.addr + off, n as u64, Access::LocalRead)? {
            // SAFETY: the key check just confirmed [addr, addr + n) lies inside a live MR of
            // this PD, under the engine lock (see `mem`).
            Loc::Host(addr) => unsafe { mem::read(addr, &mut out[at..at + n]) },
            Loc::Peer(addr) => peer_read(hca, s.lkey, addr, &mut out[at..at + n])?,
        }
        Ok(())
    })
}

/// The process address of `[offset, offset + len)` of the list, when that range lies in
/// one entry of host memory (checked for local read, like [`gather`]), and whether that
/// entry's MR is ordinary memory ([`KeyCache::by_ref`]): `Ok(None)` when it spans entries
/// or is in peer memory (the caller gathers a copy instead). The address may be used
/// while the engine lock is held (see `mem`).
#[inline]
pub fn contiguous(hca: &Hca, keys: &mut KeyCache, pd: &Pd, sges: &[Sge], mut offset: u64, len: usize) -> Result<Option<(u64, bool)>, KeyError> {
    for s in sges {
        let l = s.len as u64;
        if offset >= l {
            offset -= l;
            continue;
        }
        if offset + len as u64 > l {
            return Ok(None);
        }
        return match keys.check(hca, s.lkey, pd, s.addr + offset, len as u64, Access::LocalRead)? {
            Loc::Host(addr) => Ok(Some((addr, keys.by_ref(s.lkey)))),
            Loc::Peer(_) => Ok(None),
        };
    }
    Ok(None)
}

/// Scatters `data` starting `offset` bytes into the list (receive WQEs, READ and atomic
/// results). The dump-and-fill key swallows its bytes. Peer pieces take one peer write
/// each: for data that arrives in packets, use [`super::stage::scatter`] instead.
pub fn scatter(hca: &Hca, keys: &mut KeyCache, pd: &Pd, sges: &[Sge], offset: u64, data: &[u8]) -> Result<(), KeyError> {
    pieces(sges, offset, data.len(), |s, off, at, n| {
        if s.lkey == hca.dump_fill_mkey() {
            return Ok(());
        }
        match keys.check(hca, s.lkey, pd, s.addr + off, n as u64, Access::LocalWrite)? {
            // SAFETY: the key check just confirmed [addr, addr + n) lies inside a live MR of
            // this PD that allows local writes, under the engine lock.
            Loc::Host(addr) => unsafe { mem::write(addr, &data[at..at + n]) },
            Loc::Peer(addr) => peer_write(hca, s.lkey, addr, &data[at..at + n])?,
        }
        Ok(())
    })
}

/// Where `len` bytes at `va` of the MR named by `rkey` are, checked for remote read (RDMA
/// READ responder: a host address is sent without a copy, see `mem`).
#[inline]
pub fn locate_remote_read(hca: &Hca, keys: &mut KeyCache, pd: &Pd, rkey: u32, va: u64, len: usize) -> Result<Loc, KeyError> {
    keys.check(hca, rkey, pd, va, len as u64, Access::RemoteRead)
}

/// Reads `out.len()` bytes at `va` of the MR named by `rkey` (RDMA READ responder).
pub fn read_remote(hca: &Hca, keys: &mut KeyCache, pd: &Pd, rkey: u32, va: u64, out: &mut [u8]) -> Result<(), KeyError> {
    if out.is_empty() {
        return Ok(());
    }
    match keys.check(hca, rkey, pd, va, out.len() as u64, Access::RemoteRead)? {
        // SAFETY: checked inside a live MR allowing remote reads, under the engine lock.
        Loc::Host(addr) => unsafe { mem::read(addr, out) },
        Loc::Peer(addr) => peer_read(hca, rkey, addr, out)?,
    }
    Ok(())
}

/// Writes `data` at `va` of the MR named by `rkey` (RDMA WRITE responder): host memory at
/// once, peer memory into `stage`, to be flushed with one peer write per contiguous run
/// (see [`super::stage::InStage`]).
#[inline]
pub fn write_remote(hca: &Hca, keys: &mut KeyCache, pd: &Pd, rkey: u32, va: u64, data: Payload<'_>, stage: &mut super::stage::InStage,
                    copies: &mut Copies) -> Result<(), KeyError> {
    if data.is_empty() {
        return Ok(());
    }
    match keys.check(hca, rkey, pd, va, data.len() as u64, Access::RemoteWrite)? {
        // SAFETY: checked inside a live MR allowing remote writes, under the engine lock
        // (which the caller holds until `copies` is flushed).
        Loc::Host(addr) => unsafe { data.write_to(addr, copies) },
        Loc::Peer(_) => {
            let mut held = Vec::new();
            let bytes = data.bytes(&mut held, copies).ok_or(KeyError::PeerFault)?;
            stage.append(hca, keys, pd, rkey, va, Access::RemoteWrite, bytes)?
        }
    }
    Ok(())
}

/// Runs an 8-byte atomic at `va` of the MR named by `rkey`; `va` must be 8-byte aligned.
/// On peer memory the exporter's engine runs it ([`PeerMemory::atomic_u64`]).
pub fn atomic_remote(hca: &Hca, keys: &mut KeyCache, pd: &Pd, rkey: u32, va: u64, compare: Option<u64>, swap_or_add: u64) -> Result<u64, KeyError> {
    let loc = keys.check(hca, rkey, pd, va, 8, Access::RemoteAtomic)?;
    if loc.addr() % 8 != 0 {
        return Err(KeyError::OutOfBounds);
    }
    match loc {
        // SAFETY: checked inside a live MR allowing atomics, aligned, under the engine lock.
        Loc::Host(addr) => Ok(unsafe { mem::atomic_u64(addr, compare, swap_or_add) }),
        Loc::Peer(addr) => peer_atomic(hca, rkey, addr, compare, swap_or_add),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use uverbs::sys::verbs::{ACCESS_LOCAL_WRITE, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};

    use super::*;
    use crate::objects::{Kind, Live, Mr, MrBacking};

    fn pd(hca: &Hca, pdn: u32) -> Arc<Pd> {
        Arc::new(Pd::new(pdn, Live::new(hca.live_counts(), Kind::Pd)))
    }

    /// Registers `len` bytes at `addr` (iova 0x10000) under `key`, as REG_MR would.
    fn register(hca: &Hca, pd: &Arc<Pd>, key: u32, addr: u64, len: u64, access: u32) -> Arc<Mr> {
        let mr = Arc::new(Mr {
            pd: pd.clone(),
            span: KeySpan { pdn: pd.pdn, lkey: key, rkey: key, addr, length: len, iova: 0x10000, access, peer: false, by_ref: true },
            backing: MrBacking::User,
            _live: Live::new(hca.live_counts(), Kind::Mr),
        });
        hca.insert_mr(&mr);
        mr
    }

    /// Every answer of the cache, on a miss and on the hit after it, is the table's; a
    /// deregistration is seen at once (the entry does not outlive its MR, and holds no
    /// reference to it); a new MR under a reused key is translated afresh.
    #[test]
    fn cache_answers_as_the_table_does() {
        let hca = Hca::for_tests();
        let (pd1, pd2) = (pd(&hca, 1), pd(&hca, 2));
        let buf = vec![0u8; 8192];
        let base = buf.as_ptr() as u64;
        let rw = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE;
        let a = register(&hca, &pd1, 0x0100, base, 4096, rw);
        let b = register(&hca, &pd1, 0x0205, base + 4096, 4096, ACCESS_REMOTE_READ);
        // Same slot as `a` (index 9 = 1 + KEY_CACHE), so the two evict each other.
        let c = register(&hca, &pd2, 0x0900 | 7, base, 8192, rw);
        let mut keys = KeyCache::default();
        let cases = [
            (0x0100, &pd1, 0x10000, 4096, Access::RemoteWrite),
            (0x0100, &pd1, 0x10ff0, 16, Access::LocalWrite),
            (0x0100, &pd1, 0x10ff0, 17, Access::RemoteWrite), // past the end
            (0x0100, &pd1, 0xfff0, 16, Access::LocalRead),    // before the start
            (0x0100, &pd2, 0x10000, 8, Access::RemoteWrite),  // another PD
            (0x0101, &pd1, 0x10000, 8, Access::RemoteWrite),  // stale variant
            (0x0205, &pd1, 0x10000, 8, Access::RemoteRead),
            (0x0205, &pd1, 0x10000, 8, Access::RemoteWrite),  // not allowed
            (0x0205, &pd1, 0x10000, 8, Access::LocalWrite),   // not allowed
            (0x0907, &pd2, 0x11000, 4096, Access::RemoteWrite),
            (0x0100, &pd1, 0x10008, 8, Access::RemoteAtomic), // not allowed
            (0x0907, &pd2, 0x10000, 8192, Access::LocalRead),
        ];
        for round in 0..3 {
            for &(key, pd, iova, len, access) in &cases {
                let want = hca.check_key(key, pd, iova, len, access).map(|(_, addr)| Loc::Host(addr));
                assert_eq!(keys.check(&hca, key, pd, iova, len, access), want, "round {round}, key {key:#x} {access:?}");
                assert_eq!(keys.check(&hca, key, pd, iova, len, access), want, "again: round {round}, key {key:#x}");
            }
        }
        assert_eq!(keys.check(&hca, 0x0100, &pd1, 0x10000, 8, Access::RemoteWrite), Ok(Loc::Host(base)));
        hca.remove_mr(&a);
        assert_eq!(keys.check(&hca, 0x0100, &pd1, 0x10000, 8, Access::RemoteWrite), Err(KeyError::NoSuchKey));
        let a2 = register(&hca, &pd1, 0x0100, base + 100, 50, rw);
        assert_eq!(keys.check(&hca, 0x0100, &pd1, 0x10000, 8, Access::RemoteWrite), Ok(Loc::Host(base + 100)));
        assert_eq!(keys.check(&hca, 0x0100, &pd1, 0x10000, 51, Access::RemoteWrite), Err(KeyError::OutOfBounds));
        for mr in [a2, b, c] {
            hca.remove_mr(&mr);
            assert_eq!(Arc::strong_count(&mr), 1, "the cache holds no reference");
        }
        assert_eq!(keys.check(&hca, 0x0907, &pd2, 0x10000, 8, Access::LocalRead), Err(KeyError::NoSuchKey));
    }
}
