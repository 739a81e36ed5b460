//! Which fds are open uverbs files, and the softhca [`File`] behind each.
//!
//! Every `read`, `write`, `close`, `ioctl`, `mmap` and `fstat` of the process passes
//! through the hooks, so "is this fd ours?" must be cheap and safe anywhere (before
//! `main`, in a signal handler): it is one atomic load from a bitmap. Only for fds whose
//! bit is set is the map behind a mutex consulted; the mutex is never held while calling
//! out of this module, and the [`File`] of a removed entry is dropped (which closes it,
//! destroying its objects) by the caller after the lock is released.
//!
//! Several fds may refer to one file (`dup`), as in the kernel: the file is closed when
//! the last of them is.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use softhca::File;

/// fds at or above this are never handed out for a uverbs file.
pub const MAX_FD: c_int = 1 << 16;

static BITS: [AtomicU64; (MAX_FD / 64) as usize] = [const { AtomicU64::new(0) }; (MAX_FD / 64) as usize];
static MAP: Mutex<BTreeMap<c_int, Entry>> = Mutex::new(BTreeMap::new());

/// One fd of an open uverbs file.
#[derive(Clone)]
pub struct Entry {
    pub file: Arc<File>,
    /// Opened with write access (O_WRONLY or O_RDWR): write() is EBADF otherwise.
    pub writable: bool,
    /// Opened with read access.
    pub readable: bool,
}

fn slot(fd: c_int) -> Option<(usize, u64)> {
    (0..MAX_FD).contains(&fd).then(|| ((fd / 64) as usize, 1u64 << (fd % 64)))
}

/// Whether `fd` may be a uverbs file: lock-free, allocation-free.
#[inline]
pub fn maybe_ours(fd: c_int) -> bool {
    match slot(fd) {
        Some((i, bit)) => BITS[i].load(Ordering::Acquire) & bit != 0,
        None => false,
    }
}

fn map() -> MutexGuard<'static, BTreeMap<c_int, Entry>> {
    MAP.lock().unwrap_or_else(|p| p.into_inner())
}

/// The file behind `fd`, if it is a uverbs file.
pub fn get(fd: c_int) -> Option<Entry> {
    if !maybe_ours(fd) {
        return None;
    }
    map().get(&fd).cloned()
}

/// Records `fd` as referring to `entry`'s file. Returns the entry `fd` referred to before
/// (a `dup2` over another uverbs fd), for the caller to drop. `fd` must be below
/// [`MAX_FD`].
pub fn insert(fd: c_int, entry: Entry) -> Option<Entry> {
    let (i, bit) = slot(fd)?;
    let mut m = map();
    let old = m.insert(fd, entry);
    BITS[i].fetch_or(bit, Ordering::Release);
    old
}

/// Forgets `fd`; returns its entry for the caller to drop outside the lock.
pub fn remove(fd: c_int) -> Option<Entry> {
    let (i, bit) = slot(fd)?;
    if !maybe_ours(fd) {
        return None;
    }
    let mut m = map();
    let old = m.remove(&fd);
    BITS[i].fetch_and(!bit, Ordering::Release);
    old
}

/// Forgets every uverbs fd in `first..=last` (close_range, closefrom); returns their
/// entries for the caller to drop outside the lock.
pub fn remove_range(first: c_int, last: c_int) -> Vec<Entry> {
    let mut m = map();
    let fds: Vec<c_int> = m.range(first.max(0)..=last).map(|(&fd, _)| fd).collect();
    let mut out = Vec::with_capacity(fds.len());
    for fd in fds {
        if let (Some(e), Some((i, bit))) = (m.remove(&fd), slot(fd)) {
            BITS[i].fetch_and(!bit, Ordering::Release);
            out.push(e);
        }
    }
    out
}
