//! Which doorbell trap owns each application mapping it registered, process-wide.
//!
//! Why this exists: `UFFDIO_WRITEPROTECT` acts on whatever mapping lies at the address,
//! provided it is registered for write-protection with *some* userfaultfd. The kernel
//! does not check that it is the caller's (checked on Linux 6.18: a second userfaultfd
//! sets and lifts the first one's protection without an error). softhca does not see
//! munmap, so an engine can still list a range whose pages the application unmapped and
//! another instance's application mapped again at the same address. Protecting or
//! unprotecting that range would change the other instance's page; lifting the
//! protection there lets a doorbell store go through without a fault, and the other
//! engine, asleep on its armed trap, sleeps through it. (In CI this showed as a first
//! completion that never came, about once in 600 tests, while other tests' instances
//! came and went in the same process.)
//!
//! So every registration is recorded here as `start -> (owner, len)`, in the same
//! critical section as its `UFFDIO_REGISTER`, replacing whatever overlapped it; and
//! every protect or unprotect runs under the same lock only while the entry is still
//! the caller's. An address that is unmapped, or mapped again but not yet registered,
//! fails in the kernel (ENOENT) as before. What remains outside softhca's reach is
//! another userfaultfd user in the process registering write-protection at a reused
//! address of ours (see [`super::trap`]).

use std::collections::BTreeMap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// One registration: whose, how long, and which (a number no other registration has, so
/// an old range of ours at a reused address is not taken for the new one either).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    owner: u64,
    len: u64,
    id: u64,
}

/// Registered ranges by start address.
static OWNERS: Mutex<BTreeMap<u64, Entry>> = Mutex::new(BTreeMap::new());

/// Ids handed out so far, owners and registrations alike (0 is never used).
static NEXT: AtomicU64 = AtomicU64::new(1);

fn owners() -> MutexGuard<'static, BTreeMap<u64, Entry>> {
    OWNERS.lock().unwrap_or_else(|p| p.into_inner())
}

fn next() -> u64 {
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A new owner id (one per trap).
pub(crate) fn new_owner() -> u64 {
    next()
}

/// Runs `register` (the `UFFDIO_REGISTER` of `[start, start + len)`) under the lock and,
/// when it succeeds, records the range as `owner`'s, forgetting every other entry that
/// overlaps it (that mapping is gone: this one replaced it). Returns `register`'s value
/// and the registration's id, which [`if_owned`] and [`release`] take.
pub(crate) fn claim<T>(owner: u64, start: u64, len: u64, register: impl FnOnce() -> io::Result<T>) -> io::Result<(T, u64)> {
    let mut o = owners();
    let r = register()?;
    let end = start + len;
    let stale: Vec<u64> = o.range(..end).filter(|(&s, e)| s + e.len > start).map(|(&s, _)| s).collect();
    for s in stale {
        o.remove(&s);
    }
    let id = next();
    o.insert(start, Entry { owner, len, id });
    Ok((r, id))
}

/// Runs `f` (a protect or unprotect of the range registered as `id` at `start`) under
/// the lock if that registration is still the last one there; otherwise returns an
/// error without calling it.
pub(crate) fn if_owned<T>(id: u64, start: u64, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let o = owners();
    if o.get(&start).map(|e| e.id) != Some(id) {
        return Err(io::Error::new(io::ErrorKind::NotFound, "the address belongs to another mapping now"));
    }
    f()
}

/// Forgets registration `id` at `start` (it failed, or was replaced). A later
/// registration there stays.
pub(crate) fn release(id: u64, start: u64) {
    let mut o = owners();
    if o.get(&start).is_some_and(|e| e.id == id) {
        o.remove(&start);
    }
}

/// Forgets every entry of `owner` (its trap is closing).
pub(crate) fn release_all(owner: u64) {
    owners().retain(|_, e| e.owner != owner);
}

#[cfg(test)]
mod tests {
    use super::*;

    // The addresses are made up and far apart from any other test's (the map is global).
    const BASE: u64 = 0x7e00_0000_0000;

    #[test]
    fn the_last_registration_owns_the_address() {
        let (a, b) = (new_owner(), new_owner());
        let ok = || Ok(());
        let (_, a1) = claim(a, BASE, 0x1000, ok).unwrap();
        let (_, a2) = claim(a, BASE + 0x3000, 0x2000, ok).unwrap();
        assert!(if_owned(a1, BASE, ok).is_ok());
        assert!(if_owned(a2, BASE, ok).is_err(), "another registration's id");

        // B's mapping reuses part of A's second range: A may no longer touch it.
        let (_, b1) = claim(b, BASE + 0x4000, 0x1000, ok).unwrap();
        let mut called = false;
        assert!(if_owned(a2, BASE + 0x3000, || { called = true; Ok(()) }).is_err());
        assert!(!called);
        assert!(if_owned(b1, BASE + 0x4000, ok).is_ok());

        // A registers the same address again, same length: its old range there is not
        // the new one, and releasing the old one keeps the new one.
        let (_, a3) = claim(a, BASE, 0x1000, ok).unwrap();
        assert!(if_owned(a1, BASE, ok).is_err());
        release(a1, BASE);
        assert!(if_owned(a3, BASE, ok).is_ok());

        // A failed registration records nothing.
        let failed = claim(a, BASE + 0x4000, 0x1000, || Err::<(), _>(io::Error::from_raw_os_error(libc::EINVAL)));
        assert!(failed.is_err());
        assert!(if_owned(b1, BASE + 0x4000, ok).is_ok());

        release_all(a);
        assert!(if_owned(a3, BASE, ok).is_err());
        assert!(if_owned(b1, BASE + 0x4000, ok).is_ok());
        release(b1, BASE + 0x4000);
        assert!(if_owned(b1, BASE + 0x4000, ok).is_err());
    }
}
