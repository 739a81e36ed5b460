//! The exported libc symbols. Each one decides, without locking or allocating, whether
//! the call is about softhca (a uverbs fd, the char device path, the NETLINK_RDMA
//! socket, the sysfs tree); if not, or if the calling thread is inside the library
//! already, it calls the next definition unchanged.
//!
//! Variadic prototypes (`open`, `openat`, `ioctl`, `fcntl`) are declared with their
//! optional argument as a fixed one: on x86-64 (System V) a variadic integer or pointer
//! argument travels in the same register as a fixed one, so the callee sees the same
//! value, and an argument the caller did not pass is never used.
//!
//! The `__xstat` family (glibc < 2.33 binaries) and `stat64`-style names have the same
//! `struct stat` layout on x86-64; they are answered by the same code.

use std::ffi::{c_char, c_int, c_uint, c_ulong, c_void, CStr};

use libc::{mode_t, off_t, size_t, ssize_t};

use crate::{fdtable, guard, passthrough, real, shim, stat};

/// The bytes of a C path, or None for null.
///
/// # Safety
/// `p` is null or a NUL-terminated string (the C caller's contract).
unsafe fn bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated per the caller's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_bytes())
    }
}

/// What a path-taking call is about.
enum PathKind {
    /// `/dev/infiniband/uverbs0`.
    Dev,
    /// A path of the real sysfs that the private tree stands in for
    /// (`/sys/class/infiniband...`): the call is made on the tree's path instead
    /// ([`in_tree`]); the tree exists by then.
    Sys,
    /// Something else (the sysfs tree is created first if the path is inside it).
    Other,
}

/// Classifies an absolute `path`; relative paths are never ours.
///
/// # Safety
/// As [`bytes`].
unsafe fn classify(path: *const c_char) -> PathKind {
    // Passthrough: the real device, sysfs and stat answers are the machine's own.
    if guard::busy() || passthrough::on() {
        return PathKind::Other;
    }
    // SAFETY: forwarded contract.
    let Some(b) = (unsafe { bytes(path) }) else { return PathKind::Other };
    if shim::is_dev_path(b) {
        return PathKind::Dev;
    }
    if shim::is_sys_path(b) {
        guard::run_quiet((), shim::ensure);
        return PathKind::Sys;
    }
    if shim::under_root(b) {
        guard::run_quiet((), shim::ensure);
    }
    PathKind::Other
}

/// Calls `f` with `path` (a [`PathKind::Sys`] path) moved into the private sysfs tree, or
/// unchanged when the result would be too long.
///
/// # Safety
/// As [`bytes`].
unsafe fn in_tree<T>(path: *const c_char, f: impl FnOnce(*const c_char) -> T) -> T {
    let mut buf = [0u8; shim::PATH_BUF];
    // SAFETY: forwarded contract.
    let b = unsafe { bytes(path) }.unwrap_or_default();
    match shim::sys_redirect(b, &mut buf) {
        Some(moved) => f(moved.as_ptr()),
        None => f(path),
    }
}

/// The uverbs entry behind `fd`, unless this thread is inside the library.
fn ours(fd: c_int) -> Option<fdtable::Entry> {
    if !fdtable::maybe_ours(fd) || guard::busy() {
        return None;
    }
    guard::run(None, || fdtable::get(fd))
}

// ---- open -------------------------------------------------------------------------------

fn open_dev(flags: c_int) -> c_int {
    guard::run(-1, || shim::open_uverbs(flags))
}

#[no_mangle]
pub unsafe extern "C" fn open(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::open(p, flags, mode)),
            PathKind::Other => passthrough::opened(path, flags, real::open(path, flags, mode)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn open64(path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::open64(p, flags, mode)),
            PathKind::Other => passthrough::opened(path, flags, real::open64(path, flags, mode)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __open_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::open_2(p, flags)),
            PathKind::Other => passthrough::opened(path, flags, real::open_2(path, flags)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __open64_2(path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::open64_2(p, flags)),
            PathKind::Other => passthrough::opened(path, flags, real::open64_2(path, flags)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn openat(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::openat(dirfd, p, flags, mode)),
            PathKind::Other => passthrough::opened(path, flags, real::openat(dirfd, path, flags, mode)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn openat64(dirfd: c_int, path: *const c_char, flags: c_int, mode: mode_t) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::openat64(dirfd, p, flags, mode)),
            PathKind::Other => passthrough::opened(path, flags, real::openat64(dirfd, path, flags, mode)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __openat_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::openat_2(dirfd, p, flags)),
            PathKind::Other => passthrough::opened(path, flags, real::openat_2(dirfd, path, flags)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __openat64_2(dirfd: c_int, path: *const c_char, flags: c_int) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the other
    // arguments are forwarded unchanged to the next definition.
    unsafe {
        match classify(path) {
            PathKind::Dev => open_dev(flags),
            PathKind::Sys => in_tree(path, |p| real::openat64_2(dirfd, p, flags)),
            PathKind::Other => passthrough::opened(path, flags, real::openat64_2(dirfd, path, flags)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn opendir(path: *const c_char) -> *mut libc::DIR {
    // SAFETY: classify only reads the path; forwarding the caller's argument.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::opendir(p)),
            _ => real::opendir(path),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn access(path: *const c_char, mode: c_int) -> c_int {
    // SAFETY: `path` is null or NUL-terminated (the C caller's contract); the arguments
    // are forwarded unchanged otherwise.
    unsafe {
        match classify(path) {
            // rw-rw-rw-: readable and writable by everyone, executable by no one.
            PathKind::Dev if mode & libc::X_OK != 0 => {
                guard::set_errno(libc::EACCES);
                -1
            }
            PathKind::Dev => 0,
            PathKind::Sys => in_tree(path, |p| real::access(p, mode)),
            PathKind::Other => real::access(path, mode),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn faccessat(dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int {
    // SAFETY: as `access`.
    unsafe {
        match classify(path) {
            PathKind::Dev if mode & libc::X_OK != 0 => {
                guard::set_errno(libc::EACCES);
                -1
            }
            PathKind::Dev => 0,
            PathKind::Sys => in_tree(path, |p| real::faccessat(dirfd, p, mode, flags)),
            PathKind::Other => real::faccessat(dirfd, path, mode, flags),
        }
    }
}

// ---- the sysfs paths only: links, realpath, stdio ---------------------------------------
// glibc's own realpath, fopen and scandir reach the kernel through internal calls that
// no preloaded definition sees, so they are hooked themselves.

#[no_mangle]
pub unsafe extern "C" fn readlink(path: *const c_char, buf: *mut c_char, len: size_t) -> ssize_t {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::readlink(p, buf, len)),
            _ => real::readlink(path, buf, len),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn readlinkat(dirfd: c_int, path: *const c_char, buf: *mut c_char, len: size_t) -> ssize_t {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::readlinkat(dirfd, p, buf, len)),
            _ => real::readlinkat(dirfd, path, buf, len),
        }
    }
}

/// realpath's answer for a path in the tree is the `/sys` path it stands for.
#[no_mangle]
pub unsafe extern "C" fn realpath(path: *const c_char, resolved: *mut c_char) -> *mut c_char {
    // SAFETY: C caller's contract; the answer is null or a NUL-terminated string that
    // realpath wrote (into `resolved`, or a new allocation).
    unsafe {
        match classify(path) {
            PathKind::Sys => {
                let r = in_tree(path, |p| real::realpath(p, resolved));
                shim::sys_unredirect(r);
                r
            }
            _ => real::realpath(path, resolved),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn __realpath_chk(path: *const c_char, resolved: *mut c_char, len: size_t) -> *mut c_char {
    // SAFETY: as `realpath`.
    unsafe {
        match classify(path) {
            PathKind::Sys => {
                let r = in_tree(path, |p| real::realpath_chk(p, resolved, len));
                shim::sys_unredirect(r);
                r
            }
            _ => real::realpath_chk(path, resolved, len),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn canonicalize_file_name(path: *const c_char) -> *mut c_char {
    // SAFETY: as `realpath`.
    unsafe {
        match classify(path) {
            PathKind::Sys => {
                let r = in_tree(path, |p| real::canonicalize_file_name(p));
                shim::sys_unredirect(r);
                r
            }
            _ => real::canonicalize_file_name(path),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn fopen(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::fopen(p, mode)),
            _ => real::fopen(path, mode),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn fopen64(path: *const c_char, mode: *const c_char) -> *mut libc::FILE {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::fopen64(p, mode)),
            _ => real::fopen64(path, mode),
        }
    }
}

// Extended attributes: `ls -l` asks for ACLs and security labels of what it lists.

#[no_mangle]
pub unsafe extern "C" fn getxattr(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::getxattr(p, name, value, size)),
            _ => real::getxattr(path, name, value, size),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn lgetxattr(path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::lgetxattr(p, name, value, size)),
            _ => real::lgetxattr(path, name, value, size),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn listxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::listxattr(p, list, size)),
            _ => real::listxattr(path, list, size),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn llistxattr(path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::llistxattr(p, list, size)),
            _ => real::llistxattr(path, list, size),
        }
    }
}

type DirFilter = Option<unsafe extern "C" fn(*const libc::dirent) -> c_int>;
type DirCompare = Option<unsafe extern "C" fn(*mut *const libc::dirent, *mut *const libc::dirent) -> c_int>;

#[no_mangle]
pub unsafe extern "C" fn scandir(path: *const c_char, list: *mut *mut *mut libc::dirent, filter: DirFilter,
                                 compar: DirCompare) -> c_int {
    // SAFETY: C caller's contract; forwarded.
    unsafe {
        match classify(path) {
            PathKind::Sys => in_tree(path, |p| real::scandir(p, list, filter, compar)),
            _ => real::scandir(path, list, filter, compar),
        }
    }
}

// ---- close, read, write, ioctl, mmap ----------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if passthrough::is(fd) {
        return passthrough::close(fd);
    }
    if fdtable::maybe_ours(fd) && !guard::busy() {
        return guard::run(-1, || shim::close_uverbs(fd));
    }
    // SAFETY: forwarding.
    unsafe { real::close(fd) }
}

/// glibc's `CLOSE_RANGE_CLOEXEC` (linux/close_range.h): mark instead of close.
const CLOSE_RANGE_CLOEXEC: c_int = 1 << 2;

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    // SAFETY: forwarding.
    let r = unsafe { real::close_range(first, last, flags) };
    if r == 0 && flags & CLOSE_RANGE_CLOEXEC == 0 && !guard::busy() {
        let last = last.min(c_int::MAX as c_uint) as c_int;
        let first = first.min(c_int::MAX as c_uint) as c_int;
        guard::run_quiet((), || drop(fdtable::remove_range(first, last)));
        passthrough::forget_range(first, last);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn closefrom(lowfd: c_int) {
    // SAFETY: forwarding.
    unsafe { real::closefrom(lowfd) };
    if !guard::busy() {
        guard::run_quiet((), || drop(fdtable::remove_range(lowfd, c_int::MAX)));
        passthrough::forget_range(lowfd, c_int::MAX);
    }
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if let Some(e) = ours(fd) {
        return guard::run(-1, || shim::read_uverbs(&e));
    }
    // SAFETY: forwarding.
    unsafe { real::read(fd, buf, n) }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if let Some(e) = ours(fd) {
        return guard::run(-1, || shim::write_uverbs(&e, fd, buf, n));
    }
    if passthrough::is(fd) {
        return passthrough::write(fd, buf, n);
    }
    // SAFETY: forwarding.
    unsafe { real::write(fd, buf, n) }
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    if let Some(e) = ours(fd) {
        return guard::run(-1, || shim::ioctl_uverbs(&e, fd, req, arg));
    }
    if passthrough::is(fd) {
        return passthrough::ioctl(fd, req, arg);
    }
    // SAFETY: forwarding.
    unsafe { real::ioctl(fd, req, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t)
                              -> *mut c_void {
    if let Some(e) = ours(fd) {
        return guard::run(libc::MAP_FAILED, || shim::mmap_uverbs(&e, fd, addr, len, prot, flags, off));
    }
    if passthrough::is(fd) {
        return passthrough::mmap(addr, len, prot, flags, fd, off);
    }
    // SAFETY: forwarding.
    unsafe { real::mmap(addr, len, prot, flags, fd, off) }
}

#[no_mangle]
pub unsafe extern "C" fn mmap64(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t)
                                -> *mut c_void {
    if let Some(e) = ours(fd) {
        return guard::run(libc::MAP_FAILED, || shim::mmap_uverbs(&e, fd, addr, len, prot, flags, off));
    }
    if passthrough::is(fd) {
        return passthrough::mmap(addr, len, prot, flags, fd, off);
    }
    // SAFETY: forwarding.
    unsafe { real::mmap64(addr, len, prot, flags, fd, off) }
}

// ---- socket -----------------------------------------------------------------------------

/// `NETLINK_RDMA` (linux/netlink.h).
const NETLINK_RDMA: c_int = 20;

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    if domain == libc::AF_NETLINK && protocol == NETLINK_RDMA && !guard::busy() && !passthrough::on() {
        // libibverbs is about to list devices: make the sysfs tree, then answer as a host
        // without ib_core so that it reads sysfs.
        guard::run_quiet((), || {
            shim::ensure();
            tracing::trace!(target: "doorbell_preload", "socket(AF_NETLINK, NETLINK_RDMA) -> EPROTONOSUPPORT (use sysfs)");
        });
        guard::set_errno(libc::EPROTONOSUPPORT);
        return -1;
    }
    // SAFETY: forwarding.
    unsafe { real::socket(domain, ty, protocol) }
}

// ---- dup --------------------------------------------------------------------------------

/// Finishes a dup-like call that returned `r` for `oldfd`/`newfd` being uverbs fds.
fn after_dup(oldfd: c_int, r: c_int) -> c_int {
    if r < 0 {
        return r;
    }
    if guard::run(false, || shim::dup_done(oldfd, r)) {
        r
    } else {
        -1
    }
}

fn dup_involves_us(a: c_int, b: c_int) -> bool {
    (fdtable::maybe_ours(a) || fdtable::maybe_ours(b)) && !guard::busy()
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: forwarding.
    let r = unsafe { real::dup(fd) };
    if dup_involves_us(fd, -1) {
        return after_dup(fd, r);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, newfd: c_int) -> c_int {
    let involved = dup_involves_us(fd, newfd);
    // SAFETY: forwarding.
    let r = unsafe { real::dup2(fd, newfd) };
    if involved {
        return after_dup(fd, r);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, newfd: c_int, flags: c_int) -> c_int {
    let involved = dup_involves_us(fd, newfd);
    // SAFETY: forwarding.
    let r = unsafe { real::dup3(fd, newfd, flags) };
    if involved {
        return after_dup(fd, r);
    }
    r
}

fn is_dupfd(cmd: c_int) -> bool {
    cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarding.
    let r = unsafe { real::fcntl(fd, cmd, arg) };
    if is_dupfd(cmd) && dup_involves_us(fd, -1) {
        return after_dup(fd, r);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: forwarding.
    let r = unsafe { real::fcntl64(fd, cmd, arg) };
    if is_dupfd(cmd) && dup_involves_us(fd, -1) {
        return after_dup(fd, r);
    }
    r
}

// ---- stat -------------------------------------------------------------------------------

/// What `(dirfd, path, flags)` of an *at call names: the char device (the device path
/// itself, or an empty path with AT_EMPTY_PATH on a uverbs fd), a sysfs path the tree
/// stands in for, or something else.
///
/// # Safety
/// As [`bytes`].
unsafe fn at_kind(dirfd: c_int, path: *const c_char, flags: c_int) -> PathKind {
    // SAFETY: forwarded contract.
    let empty = unsafe { bytes(path) }.is_some_and(|b| b.is_empty());
    if empty && flags & libc::AT_EMPTY_PATH != 0 {
        return if ours(dirfd).is_some() { PathKind::Dev } else { PathKind::Other };
    }
    // SAFETY: forwarded contract.
    unsafe { classify(path) }
}

#[no_mangle]
pub unsafe extern "C" fn stat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: C caller's contract on `path` and `buf`.
    unsafe {
        match classify(path) {
            PathKind::Dev => {
                stat::fill_stat(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::stat(p, buf)),
            PathKind::Other => real::stat(path, buf),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn stat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: as `stat`.
    unsafe {
        match classify(path) {
            PathKind::Dev => {
                stat::fill_stat64(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::stat64(p, buf)),
            PathKind::Other => real::stat64(path, buf),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn lstat(path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: as `stat`.
    unsafe {
        match classify(path) {
            PathKind::Dev => {
                stat::fill_stat(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::lstat(p, buf)),
            PathKind::Other => real::lstat(path, buf),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn lstat64(path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: as `stat`.
    unsafe {
        match classify(path) {
            PathKind::Dev => {
                stat::fill_stat64(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::lstat64(p, buf)),
            PathKind::Other => real::lstat64(path, buf),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn fstat(fd: c_int, buf: *mut libc::stat) -> c_int {
    if ours(fd).is_some() {
        // SAFETY: the caller's buffer.
        unsafe { stat::fill_stat(buf) };
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real::fstat(fd, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn fstat64(fd: c_int, buf: *mut libc::stat64) -> c_int {
    if ours(fd).is_some() {
        // SAFETY: the caller's buffer.
        unsafe { stat::fill_stat64(buf) };
        return 0;
    }
    // SAFETY: forwarding.
    unsafe { real::fstat64(fd, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn fstatat(dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int {
    // SAFETY: C caller's contract.
    unsafe {
        match at_kind(dirfd, path, flags) {
            PathKind::Dev => {
                stat::fill_stat(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::fstatat(dirfd, p, buf, flags)),
            PathKind::Other => real::fstatat(dirfd, path, buf, flags),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn fstatat64(dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int {
    // SAFETY: C caller's contract.
    unsafe {
        match at_kind(dirfd, path, flags) {
            PathKind::Dev => {
                stat::fill_stat64(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::fstatat64(dirfd, p, buf, flags)),
            PathKind::Other => real::fstatat64(dirfd, path, buf, flags),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn statx(dirfd: c_int, path: *const c_char, flags: c_int, mask: c_uint, buf: *mut libc::statx)
                               -> c_int {
    // SAFETY: C caller's contract.
    unsafe {
        match at_kind(dirfd, path, flags) {
            PathKind::Dev => {
                stat::fill_statx(buf);
                0
            }
            PathKind::Sys => in_tree(path, |p| real::statx(dirfd, p, flags, mask, buf)),
            PathKind::Other => real::statx(dirfd, path, flags, mask, buf),
        }
    }
}

// glibc < 2.33 entry points: `ver` is _STAT_VER (1 on x86-64), whose layout is the one
// the modern functions use, so they forward to those.

#[no_mangle]
pub unsafe extern "C" fn __xstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: same contract as `stat`.
    unsafe { stat(path, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn __xstat64(_ver: c_int, path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: same contract as `stat64`.
    unsafe { stat64(path, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn __lxstat(_ver: c_int, path: *const c_char, buf: *mut libc::stat) -> c_int {
    // SAFETY: same contract as `lstat`.
    unsafe { lstat(path, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn __lxstat64(_ver: c_int, path: *const c_char, buf: *mut libc::stat64) -> c_int {
    // SAFETY: same contract as `lstat64`.
    unsafe { lstat64(path, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat(_ver: c_int, fd: c_int, buf: *mut libc::stat) -> c_int {
    // SAFETY: same contract as `fstat`.
    unsafe { fstat(fd, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstat64(_ver: c_int, fd: c_int, buf: *mut libc::stat64) -> c_int {
    // SAFETY: same contract as `fstat64`.
    unsafe { fstat64(fd, buf) }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstatat(_ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int)
                                    -> c_int {
    // SAFETY: same contract as `fstatat`.
    unsafe { fstatat(dirfd, path, buf, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn __fxstatat64(_ver: c_int, dirfd: c_int, path: *const c_char, buf: *mut libc::stat64,
                                      flags: c_int) -> c_int {
    // SAFETY: same contract as `fstatat64`.
    unsafe { fstatat64(dirfd, path, buf, flags) }
}
