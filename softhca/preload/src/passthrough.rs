//! `DOORBELL_PRELOAD_PASSTHROUGH=1`: the library records instead of standing in.
//!
//! On a machine with a real uverbs device (the rxe guest of tests/vm/rxe-vm.sh, a host
//! with an HCA) the library creates no softhca instance, writes no sysfs tree and leaves
//! netlink, sysfs and stat alone: libibverbs finds the real device and opens the real
//! `/dev/infiniband/uverbsN`. The fds it gets back are remembered here, and their
//! `ioctl`, `write` and `mmap` go to the kernel unchanged, with the decoder of
//! [`crate::trace`] around them: the same lines as for softhca, but with the kernel's
//! answers (`doorbell trace --passthrough` records them; `DOORBELL_PRELOAD_TRACE` prints
//! them). `dup`s of such an fd are not followed (libibverbs makes none).

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::errno::Errno;

use crate::fdtable::MAX_FD;
use crate::guard::{self, errno, set_errno};
use crate::{real, trace};

static ON: AtomicBool = AtomicBool::new(false);
static BITS: [AtomicU64; (MAX_FD / 64) as usize] = [const { AtomicU64::new(0) }; (MAX_FD / 64) as usize];

/// Reads the switch (the constructor calls this before anything else).
pub fn init_from_env() {
    let on = std::env::var_os("DOORBELL_PRELOAD_PASSTHROUGH").is_some_and(|v| !v.is_empty() && v != "0");
    ON.store(on, Ordering::Relaxed);
}

/// Whether this process runs in passthrough mode.
#[inline]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

fn slot(fd: c_int) -> Option<(usize, u64)> {
    (0..MAX_FD).contains(&fd).then(|| ((fd / 64) as usize, 1u64 << (fd % 64)))
}

/// Whether `fd` is a real uverbs fd being recorded (lock- and allocation-free), and the
/// calling thread is not inside the library.
#[inline]
pub fn is(fd: c_int) -> bool {
    on() && slot(fd).is_some_and(|(i, bit)| BITS[i].load(Ordering::Acquire) & bit != 0) && !guard::busy()
}

fn forget(fd: c_int) {
    if let Some((i, bit)) = slot(fd) {
        BITS[i].fetch_and(!bit, Ordering::Release);
    }
}

/// After the real open of `path` returned `fd`: remember a uverbs fd. Returns `fd`, with
/// errno as the open left it.
///
/// # Safety
/// `path` is null or a NUL-terminated string (the C caller's contract).
pub unsafe fn opened(path: *const c_char, flags: c_int, fd: c_int) -> c_int {
    if !on() || fd < 0 || path.is_null() || guard::busy() {
        return fd;
    }
    // SAFETY: non-null and NUL-terminated per the caller's contract.
    let p = unsafe { CStr::from_ptr(path) }.to_bytes();
    if !p.starts_with(b"/dev/infiniband/uverbs") {
        return fd;
    }
    let e = errno();
    guard::run_quiet((), || {
        trace::init();
        if let Some((i, bit)) = slot(fd) {
            BITS[i].fetch_or(bit, Ordering::Release);
        }
        tracing::trace!(target: "doorbell_preload", fd, flags = format_args!("{flags:#x}"), passthrough = true,
                        "open {}", String::from_utf8_lossy(p));
    });
    set_errno(e);
    fd
}

/// close() of a recorded fd.
pub fn close(fd: c_int) -> c_int {
    forget(fd);
    // SAFETY: closing the application's fd on its behalf.
    let r = unsafe { real::close(fd) };
    let e = errno();
    guard::run_quiet((), || tracing::trace!(target: "doorbell_preload", fd, "close uverbs fd"));
    set_errno(e);
    r
}

/// close_range/closefrom: forget the recorded fds in `first..=last`.
pub fn forget_range(first: c_int, last: c_int) {
    if !on() {
        return;
    }
    for fd in first.max(0)..=last.min(MAX_FD - 1) {
        forget(fd);
    }
}

/// The kernel's answer as a Result, and errno restored after logging.
fn result(r: c_int) -> (Result<(), Errno>, c_int) {
    let e = errno();
    (if r < 0 { Err(Errno::from_raw(e)) } else { Ok(()) }, e)
}

pub fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    guard::run(-1, || {
        let pre = trace::ioctl_before(req, arg as u64);
        // SAFETY: forwarding the caller's request unchanged.
        let r = unsafe { real::ioctl(fd, req, arg) };
        let (res, e) = result(r);
        trace::ioctl_after(fd, pre, res);
        set_errno(e);
        r
    })
}

pub fn write(fd: c_int, buf: *const c_void, n: usize) -> isize {
    guard::run(-1, || {
        let pre = trace::write_before(buf as u64, n);
        // SAFETY: forwarding the caller's buffer unchanged.
        let r = unsafe { real::write(fd, buf, n) };
        let e = errno();
        let res = if r < 0 { Err(Errno::from_raw(e)) } else { Ok(r as usize) };
        trace::write_after(fd, pre, &res);
        set_errno(e);
        r
    })
}

pub fn mmap(addr: *mut c_void, len: usize, prot: c_int, flags: c_int, fd: c_int, off: i64) -> *mut c_void {
    guard::run(libc::MAP_FAILED, || {
        // SAFETY: forwarding the caller's arguments unchanged.
        let r = unsafe { real::mmap(addr, len, prot, flags, fd, off) };
        let e = errno();
        let res = if r == libc::MAP_FAILED { Err(Errno::from_raw(e)) } else { Ok(r as u64) };
        trace::mmap(fd, len, prot, flags, off, &res, false);
        set_errno(e);
        r
    })
}
