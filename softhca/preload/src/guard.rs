//! Re-entrancy and panic guard for the hooks.
//!
//! While the library does its own work on a thread (creating the instance, writing the
//! sysfs tree, running a softhca command, logging) every hook on that thread passes
//! straight through to libc: softhca's own `mmap` of its device pages, `fstat` of event
//! sockets or `write` of a log line must not be looked at again. The flag is a
//! const-initialised thread-local without a destructor: reading it never allocates.

use std::cell::Cell;
use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

thread_local! {
    static BUSY: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside the library's own code.
pub fn busy() -> bool {
    BUSY.try_with(Cell::get).unwrap_or(true)
}

/// Sets the calling thread's errno.
pub fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot, always valid.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's errno.
pub fn errno() -> c_int {
    // SAFETY: as in `set_errno`.
    unsafe { *libc::__errno_location() }
}

/// Runs `f` with the busy flag set. A panic is caught (it must not unwind into C): the
/// result is then `on_panic` with errno EIO.
pub fn run<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    match enter(f) {
        Some(v) => v,
        None => {
            set_errno(libc::EIO);
            on_panic
        }
    }
}

/// Like [`run`] for code with no caller to report to (constructor, destructor).
pub fn run_quiet<T>(on_panic: T, f: impl FnOnce() -> T) -> T {
    enter(f).unwrap_or(on_panic)
}

fn enter<T>(f: impl FnOnce() -> T) -> Option<T> {
    let prev = BUSY.try_with(|b| b.replace(true)).unwrap_or(true);
    let r = catch_unwind(AssertUnwindSafe(f)).ok();
    let _ = BUSY.try_with(|b| b.set(prev));
    r
}
