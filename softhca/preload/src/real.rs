//! The definitions the hooks stand in front of, found with `dlsym(RTLD_NEXT, name)` on
//! first use and cached in an atomic (no lock, no allocation after the first lookup).
//!
//! Each wrapper has the C signature of the libc function. If the symbol cannot be found
//! (it always can in a process with glibc), the call fails with ENOSYS.

#![allow(clippy::unused_unit)] // `-> ()` in the closefrom declaration

use std::ffi::{c_char, c_int, c_ulong, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};

use libc::{mode_t, off_t, size_t, ssize_t};

/// One lazily resolved symbol.
pub struct Sym {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
}

impl Sym {
    pub const fn new(name: &'static CStr) -> Sym {
        Sym { name, ptr: AtomicPtr::new(ptr::null_mut()) }
    }

    /// The next definition's address, or null.
    pub fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return p;
        }
        // SAFETY: dlsym with RTLD_NEXT and a NUL-terminated name has no preconditions;
        // it returns null when there is no later definition.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) };
        self.ptr.store(p, Ordering::Release);
        p
    }
}

/// Declares `pub unsafe fn $name(args) -> ret` calling the next definition of the
/// symbol, with `$fail` returned (errno ENOSYS) when there is none. Variadic C functions
/// are declared with their one optional argument spelled out, and called variadically.
macro_rules! real_fn {
    ($(#[$m:meta])* $name:ident, $stat:ident = $sym:literal ($($a:ident : $t:ty),*) $(, ...($va:ident : $vt:ty))? -> $ret:ty, fail $fail:expr) => {
        pub static $stat: Sym = Sym::new($sym);
        $(#[$m])*
        pub unsafe fn $name($($a: $t),* $(, $va: $vt)?) -> $ret {
            let p = $stat.get();
            if p.is_null() {
                crate::guard::set_errno(libc::ENOSYS);
                return $fail;
            }
            real_fn!(@call p, ($($a: $t),*) $(, ($va: $vt))? -> $ret)
        }
    };
    (@call $p:ident, ($($a:ident : $t:ty),*) -> $ret:ty) => {{
        // SAFETY: `$p` is libc's definition of this symbol, whose C prototype is the
        // signature spelled out here; the caller passes the arguments the C caller gave.
        let f: unsafe extern "C" fn($($t),*) -> $ret = unsafe { std::mem::transmute($p) };
        // SAFETY: calling libc's function with its caller's arguments (see above).
        unsafe { f($($a),*) }
    }};
    (@call $p:ident, ($($a:ident : $t:ty),*), ($va:ident : $vt:ty) -> $ret:ty) => {{
        // SAFETY: as above, for a variadic C function called with its fixed arguments and
        // the one optional argument.
        let f: unsafe extern "C" fn($($t),*, ...) -> $ret = unsafe { std::mem::transmute($p) };
        // SAFETY: as above.
        unsafe { f($($a),*, $va) }
    }};
}

real_fn!(open, OPEN = c"open" (path: *const c_char, flags: c_int), ...(mode: mode_t) -> c_int, fail -1);
real_fn!(open64, OPEN64 = c"open64" (path: *const c_char, flags: c_int), ...(mode: mode_t) -> c_int, fail -1);
real_fn!(openat, OPENAT = c"openat" (dirfd: c_int, path: *const c_char, flags: c_int), ...(mode: mode_t) -> c_int, fail -1);
real_fn!(openat64, OPENAT64 = c"openat64" (dirfd: c_int, path: *const c_char, flags: c_int), ...(mode: mode_t) -> c_int, fail -1);
real_fn!(open_2, OPEN_2 = c"__open_2" (path: *const c_char, flags: c_int) -> c_int, fail -1);
real_fn!(open64_2, OPEN64_2 = c"__open64_2" (path: *const c_char, flags: c_int) -> c_int, fail -1);
real_fn!(openat_2, OPENAT_2 = c"__openat_2" (dirfd: c_int, path: *const c_char, flags: c_int) -> c_int, fail -1);
real_fn!(openat64_2, OPENAT64_2 = c"__openat64_2" (dirfd: c_int, path: *const c_char, flags: c_int) -> c_int, fail -1);
real_fn!(close, CLOSE = c"close" (fd: c_int) -> c_int, fail -1);
real_fn!(read, READ = c"read" (fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t, fail -1);
real_fn!(write, WRITE = c"write" (fd: c_int, buf: *const c_void, n: size_t) -> ssize_t, fail -1);
real_fn!(ioctl, IOCTL = c"ioctl" (fd: c_int, req: c_ulong), ...(arg: *mut c_void) -> c_int, fail -1);
real_fn!(mmap, MMAP = c"mmap" (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, fail libc::MAP_FAILED);
real_fn!(mmap64, MMAP64 = c"mmap64" (addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void, fail libc::MAP_FAILED);
real_fn!(stat, STAT = c"stat" (path: *const c_char, buf: *mut libc::stat) -> c_int, fail -1);
real_fn!(stat64, STAT64 = c"stat64" (path: *const c_char, buf: *mut libc::stat64) -> c_int, fail -1);
real_fn!(lstat, LSTAT = c"lstat" (path: *const c_char, buf: *mut libc::stat) -> c_int, fail -1);
real_fn!(lstat64, LSTAT64 = c"lstat64" (path: *const c_char, buf: *mut libc::stat64) -> c_int, fail -1);
real_fn!(fstat, FSTAT = c"fstat" (fd: c_int, buf: *mut libc::stat) -> c_int, fail -1);
real_fn!(fstat64, FSTAT64 = c"fstat64" (fd: c_int, buf: *mut libc::stat64) -> c_int, fail -1);
real_fn!(fstatat, FSTATAT = c"fstatat" (dirfd: c_int, path: *const c_char, buf: *mut libc::stat, flags: c_int) -> c_int, fail -1);
real_fn!(fstatat64, FSTATAT64 = c"fstatat64" (dirfd: c_int, path: *const c_char, buf: *mut libc::stat64, flags: c_int) -> c_int, fail -1);
real_fn!(statx, STATX = c"statx" (dirfd: c_int, path: *const c_char, flags: c_int, mask: libc::c_uint, buf: *mut libc::statx) -> c_int, fail -1);
real_fn!(socket, SOCKET = c"socket" (domain: c_int, ty: c_int, protocol: c_int) -> c_int, fail -1);
real_fn!(dup, DUP = c"dup" (fd: c_int) -> c_int, fail -1);
real_fn!(dup2, DUP2 = c"dup2" (fd: c_int, newfd: c_int) -> c_int, fail -1);
real_fn!(dup3, DUP3 = c"dup3" (fd: c_int, newfd: c_int, flags: c_int) -> c_int, fail -1);
real_fn!(fcntl, FCNTL = c"fcntl" (fd: c_int, cmd: c_int), ...(arg: c_ulong) -> c_int, fail -1);
real_fn!(fcntl64, FCNTL64 = c"fcntl64" (fd: c_int, cmd: c_int), ...(arg: c_ulong) -> c_int, fail -1);
real_fn!(opendir, OPENDIR = c"opendir" (path: *const c_char) -> *mut libc::DIR, fail ptr::null_mut());
real_fn!(access, ACCESS = c"access" (path: *const c_char, mode: c_int) -> c_int, fail -1);
real_fn!(faccessat, FACCESSAT = c"faccessat" (dirfd: c_int, path: *const c_char, mode: c_int, flags: c_int) -> c_int, fail -1);
real_fn!(readlink, READLINK = c"readlink" (path: *const c_char, buf: *mut c_char, len: size_t) -> ssize_t, fail -1);
real_fn!(readlinkat, READLINKAT = c"readlinkat" (dirfd: c_int, path: *const c_char, buf: *mut c_char, len: size_t) -> ssize_t, fail -1);
real_fn!(realpath, REALPATH = c"realpath" (path: *const c_char, resolved: *mut c_char) -> *mut c_char, fail ptr::null_mut());
real_fn!(realpath_chk, REALPATH_CHK = c"__realpath_chk" (path: *const c_char, resolved: *mut c_char, len: size_t) -> *mut c_char, fail ptr::null_mut());
real_fn!(canonicalize_file_name, CANONICALIZE = c"canonicalize_file_name" (path: *const c_char) -> *mut c_char, fail ptr::null_mut());
real_fn!(getxattr, GETXATTR = c"getxattr" (path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t, fail -1);
real_fn!(lgetxattr, LGETXATTR = c"lgetxattr" (path: *const c_char, name: *const c_char, value: *mut c_void, size: size_t) -> ssize_t, fail -1);
real_fn!(listxattr, LISTXATTR = c"listxattr" (path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t, fail -1);
real_fn!(llistxattr, LLISTXATTR = c"llistxattr" (path: *const c_char, list: *mut c_char, size: size_t) -> ssize_t, fail -1);
real_fn!(fopen, FOPEN = c"fopen" (path: *const c_char, mode: *const c_char) -> *mut libc::FILE, fail ptr::null_mut());
real_fn!(fopen64, FOPEN64 = c"fopen64" (path: *const c_char, mode: *const c_char) -> *mut libc::FILE, fail ptr::null_mut());
real_fn!(scandir, SCANDIR = c"scandir" (path: *const c_char, list: *mut *mut *mut libc::dirent,
    filter: Option<unsafe extern "C" fn(*const libc::dirent) -> c_int>,
    compar: Option<unsafe extern "C" fn(*mut *const libc::dirent, *mut *const libc::dirent) -> c_int>) -> c_int, fail -1);
real_fn!(close_range, CLOSE_RANGE = c"close_range" (first: libc::c_uint, last: libc::c_uint, flags: c_int) -> c_int, fail -1);
real_fn!(closefrom, CLOSEFROM = c"closefrom" (lowfd: c_int) -> (), fail ());

/// Resolves the symbols that may be called from signal handlers (`write`, `read`,
/// `close`) or very early, so that their first use is a plain atomic load rather than a
/// `dlsym` (which is not async-signal-safe).
pub fn warm() {
    for s in [&OPEN, &OPEN64, &OPENAT, &CLOSE, &READ, &WRITE, &IOCTL, &MMAP, &FSTAT, &STAT, &SOCKET, &DUP, &DUP2, &FCNTL] {
        s.get();
    }
}
