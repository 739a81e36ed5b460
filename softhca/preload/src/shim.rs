//! The process's softhca instance, its sysfs tree, and what the hooks do with a uverbs
//! fd. Everything here runs with the busy flag set (see [`crate::guard`]).

use std::ffi::{c_int, c_ulong, c_void, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use nix::errno::Errno;
use softhca::{Config, Hca};

use crate::fdtable::{self, Entry, MAX_FD};
use crate::guard::{errno, set_errno};
use crate::{real, sysfs, trace};

/// Environment switches (read once).
pub struct Flags {
    /// `DOORBELL_PRELOAD_NO_IOCTL`: every ioctl is ENOTTY (write() only).
    pub no_ioctl: bool,
    /// Static UARs (`DOORBELL_PRELOAD_STATIC_UARS`, implied by `no_ioctl`).
    pub static_uars: bool,
    /// `DOORBELL_PRELOAD_TRACE`: the tracing filter, if set.
    pub trace: Option<String>,
}

fn env_on(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty() && v != "0")
}

pub fn flags() -> &'static Flags {
    static F: OnceLock<Flags> = OnceLock::new();
    F.get_or_init(|| {
        let no_ioctl = env_on("DOORBELL_PRELOAD_NO_IOCTL");
        let trace = std::env::var("DOORBELL_PRELOAD_TRACE").ok().filter(|v| !v.is_empty() && v != "0");
        Flags { no_ioctl, static_uars: no_ioctl || env_on("DOORBELL_PRELOAD_STATIC_UARS"), trace }
    })
}

/// The `SYSFS_PATH` this process uses. Chosen by the constructor; created on first use.
static ROOT: OnceLock<PathBuf> = OnceLock::new();
/// The pid that created the tree (a forked child must not delete its parent's).
static CREATOR: OnceLock<u32> = OnceLock::new();

/// A random nonce for the directory name (it is created later, and must not be
/// guessable by anyone who could create it first).
fn nonce() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most `b.len()` bytes into `b`.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), libc::GRND_NONBLOCK) };
    if n == b.len() as isize {
        return u64::from_ne_bytes(b);
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64);
    t.unwrap_or(0) ^ (&b as *const _ as u64).rotate_left(17)
}

fn base_dir() -> PathBuf {
    match std::env::var_os("TMPDIR") {
        Some(d) if Path::new(&d).is_absolute() => PathBuf::from(d),
        _ => PathBuf::from("/tmp"),
    }
}

const DIR_PREFIX: &str = "doorbell-softhca.";

/// Constructor: choose this process's sysfs root and point `SYSFS_PATH` at it, before
/// libibverbs (which reads it once, at its first device list) can look.
pub fn on_load() {
    real::warm();
    crate::stat::set_load_time();
    crate::passthrough::init_from_env();
    if crate::passthrough::on() {
        // The real device: no tree, libibverbs reads the machine's sysfs.
        return;
    }
    let root = base_dir().join(format!("{DIR_PREFIX}{}.{:016x}", std::process::id(), nonce()));
    let Ok(c) = CString::new(root.as_os_str().as_bytes()) else { return };
    // SAFETY: setenv with two NUL-terminated strings; the constructor runs before the
    // program's threads exist.
    unsafe { libc::setenv(c"SYSFS_PATH".as_ptr(), c.as_ptr(), 1) };
    let _ = ROOT.set(root);
}

/// Destructor: remove the tree if this process created it.
pub fn on_exit() {
    if let (Some(root), Some(&pid)) = (ROOT.get(), CREATOR.get()) {
        if pid == std::process::id() {
            let _ = std::fs::remove_dir_all(root);
        }
    }
}

/// Whether `path` is inside this process's sysfs root (allocation-free).
pub fn under_root(path: &[u8]) -> bool {
    match ROOT.get() {
        Some(r) => {
            let r = r.as_os_str().as_bytes();
            path.starts_with(r) && (path.len() == r.len() || path[r.len()] == b'/')
        }
        None => false,
    }
}

/// The paths of the real sysfs that the private tree stands in for, with their
/// subdirectories: programs that read them directly (UCX, pyverbs' tests, scripts) see
/// the same device as libibverbs through `SYSFS_PATH`.
const SYS_PATHS: [&[u8]; 3] = [b"/sys/class/infiniband", b"/sys/class/infiniband_verbs", b"/sys/devices/pcid00b:00"];
const _: () = assert!(same(SYS_PATHS[2], b"/sys/devices/", sysfs::PCI_BUS.as_bytes()));

/// Whether `a` is `p` followed by `q` (for the assertion above).
const fn same(a: &[u8], p: &[u8], q: &[u8]) -> bool {
    if a.len() != p.len() + q.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        let c = if i < p.len() { p[i] } else { q[i - p.len()] };
        if a[i] != c {
            return false;
        }
        i += 1;
    }
    true
}

/// The longest path the hooks rewrite (PATH_MAX with its NUL).
pub const PATH_BUF: usize = libc::PATH_MAX as usize;

/// Whether `path` is one of [`SYS_PATHS`] or inside one (allocation-free).
pub fn is_sys_path(path: &[u8]) -> bool {
    path.starts_with(b"/sys/")
        && SYS_PATHS.iter().any(|p| path.starts_with(p) && (path.len() == p.len() || path[p.len()] == b'/'))
}

/// `path` (one of [`SYS_PATHS`] or below) in the private tree: the root followed by the
/// path without its `/sys`, NUL-terminated in `out`. None when it does not fit or there
/// is no root.
pub fn sys_redirect<'a>(path: &[u8], out: &'a mut [u8; PATH_BUF]) -> Option<&'a std::ffi::CStr> {
    let root = ROOT.get()?.as_os_str().as_bytes();
    let rest = path.strip_prefix(b"/sys")?;
    let n = root.len() + rest.len();
    if n >= PATH_BUF {
        return None;
    }
    out[..root.len()].copy_from_slice(root);
    out[root.len()..n].copy_from_slice(rest);
    out[n] = 0;
    std::ffi::CStr::from_bytes_with_nul(&out[..=n]).ok()
}

/// The inverse of [`sys_redirect`] on a resolved path (realpath's answer) in place: a path
/// inside the private tree is given back as the `/sys` path it stands for, so that the
/// program's later calls on it come back here.
///
/// # Safety
/// `resolved` is null or a NUL-terminated, writable string.
pub unsafe fn sys_unredirect(resolved: *mut std::ffi::c_char) {
    let Some(root) = ROOT.get().map(|r| r.as_os_str().as_bytes()) else { return };
    if resolved.is_null() {
        return;
    }
    // SAFETY: NUL-terminated per the caller.
    let b = unsafe { std::ffi::CStr::from_ptr(resolved) }.to_bytes();
    if !(b.starts_with(root) && (b.len() == root.len() || b[root.len()] == b'/')) {
        return;
    }
    let rest = b.len() - root.len();
    // SAFETY: "/sys" is shorter than the root (an absolute directory path with a
    // 16-digit nonce), so the result, NUL included, fits where the answer was;
    // `ptr::copy` handles the overlap.
    unsafe {
        std::ptr::copy(resolved.add(root.len()), resolved.add(4), rest + 1);
        std::ptr::copy_nonoverlapping(b"/sys".as_ptr().cast(), resolved, 4);
    }
}

/// The softhca instance of this process and its uverbs device.
pub struct Instance {
    pub hca: Arc<Hca>,
}

static INSTANCE: OnceLock<Result<Instance, String>> = OnceLock::new();

fn create() -> Result<Instance, String> {
    let f = flags();
    let hca = if f.static_uars {
        let (addr, sock) = softhca::config::bind_default().map_err(|e| format!("binding the RoCE socket: {e}"))?;
        let cfg = Config { dynamic_uars: false, ..Config::for_addr(addr) };
        Hca::with_socket(cfg, sock)
    } else {
        softhca::default_hca()
    }
    .map_err(|e| format!("creating the softhca instance: {e}"))?;
    // GPU memory: registrations of NVIDIA dma-bufs (perftest --use_cuda_dmabuf, NCCL)
    // go to gdr's resolver, which reaches the bytes with CUDA copies. Loads nothing of
    // CUDA until such a dma-buf is registered.
    gdr::install();
    let root = ROOT.get_or_init(|| {
        // The constructor did not run (unusual loaders): use the default location.
        base_dir().join(format!("{DIR_PREFIX}{}.{:016x}", std::process::id(), nonce()))
    });
    remove_stale(root.parent().unwrap_or(Path::new("/tmp")));
    let _ = CREATOR.set(std::process::id());
    sysfs::write_tree(root, hca.config()).map_err(|e| format!("writing the sysfs tree at {}: {e}", root.display()))?;
    let c = hca.config();
    tracing::debug!(target: "doorbell_preload", name = %c.name, addr = %c.addr, sysfs = %root.display(),
                    static_uars = f.static_uars, no_ioctl = f.no_ioctl, "softhca instance up");
    Ok(Instance { hca })
}

/// Removes trees left by processes that died without running their destructor.
fn remove_stale(base: &Path) {
    let Ok(rd) = std::fs::read_dir(base) else { return };
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    for e in rd.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else { continue };
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<i32>().ok()) else { continue };
        let owned = std::os::unix::fs::MetadataExt::uid(&match e.metadata() {
            Ok(m) => m,
            Err(_) => continue,
        }) == uid;
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let dead = unsafe { libc::kill(pid, 0) } != 0 && errno() == libc::ESRCH;
        if owned && dead {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The instance, created (with its sysfs tree) on first use. A failure is reported once
/// on stderr and then remembered.
pub fn instance() -> Result<&'static Instance, &'static str> {
    trace::init();
    INSTANCE
        .get_or_init(|| {
            let r = create();
            if let Err(e) = &r {
                eprintln!("doorbell_preload: softhca is not available: {e}");
            }
            r
        })
        .as_ref()
        .map_err(String::as_str)
}

/// Makes sure the tree exists (libibverbs is about to look for devices).
pub fn ensure() {
    let _ = instance();
}

// ---- the uverbs fd --------------------------------------------------------------------

/// `open("/dev/infiniband/uverbs0", flags)`.
pub fn open_uverbs(flags: c_int) -> c_int {
    let inst = match instance() {
        Ok(i) => i,
        Err(_) => {
            set_errno(libc::ENXIO);
            return -1;
        }
    };
    let acc = flags & libc::O_ACCMODE;
    // The fd is the HCA's device page file, laid out at mlx5_ib's mmap offsets
    // (softhca::pages): a program whose mmap does not come through our hook (UCX's
    // bistro hooks patch `mmap` itself and then issue the system call; some programs call
    // it directly) still maps the right UAR or clock page from it.
    use std::os::fd::IntoRawFd;
    let fd = match inst.hca.pages().user_fd(flags & libc::O_CLOEXEC != 0) {
        Ok(f) => f.into_raw_fd(),
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EMFILE));
            return -1;
        }
    };
    if fd >= MAX_FD {
        // SAFETY: closing the fd just created.
        unsafe { real::close(fd) };
        set_errno(libc::EMFILE);
        return -1;
    }
    let file = Arc::new(inst.hca.open());
    let entry = Entry { file, readable: acc != libc::O_WRONLY, writable: acc != libc::O_RDONLY };
    let old = fdtable::insert(fd, entry);
    tracing::trace!(target: "doorbell_preload", fd, flags = format_args!("{flags:#x}"), "open /dev/infiniband/uverbs0");
    drop(old);
    fd
}

/// `close(fd)` of a uverbs fd: forget it, close the memfd, and close the softhca file
/// if this was its last fd.
pub fn close_uverbs(fd: c_int) -> c_int {
    let old = fdtable::remove(fd);
    // SAFETY: closing the application's fd on its behalf.
    let r = unsafe { real::close(fd) };
    let e = errno();
    let last = old.as_ref().map(|o| Arc::strong_count(&o.file) == 1).unwrap_or(false);
    drop(old);
    tracing::trace!(target: "doorbell_preload", fd, last, "close uverbs fd");
    set_errno(e);
    r
}

/// read(): ib_uverbs has no read method.
pub fn read_uverbs(e: &Entry) -> isize {
    set_errno(if e.readable { libc::EINVAL } else { libc::EBADF });
    -1
}

/// write(): one legacy command.
pub fn write_uverbs(e: &Entry, fd: c_int, buf: *const c_void, n: usize) -> isize {
    if !e.writable {
        set_errno(libc::EBADF);
        return -1;
    }
    let pre = trace::write_before(buf as u64, n);
    let r = uverbs::Endpoint::write(&*e.file, buf as u64, n);
    trace::write_after(fd, pre, &r);
    match r {
        Ok(n) => n as isize,
        Err(err) => {
            set_errno(err as c_int);
            -1
        }
    }
}

/// The request number as softhca takes it (`unsigned long` is 64-bit on 64-bit Linux).
#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
pub fn req_u64(req: c_ulong) -> u64 {
    req as u64
}

/// Requests the VFS answers for every file before the driver sees them.
fn vfs_ioctl(req: c_ulong) -> bool {
    matches!(req, libc::FIOCLEX | libc::FIONCLEX | libc::FIONBIO | libc::FIOASYNC)
}

/// ioctl(): `RDMA_VERBS_IOCTL` goes to softhca (ENOTTY for everything in no-ioctl mode).
pub fn ioctl_uverbs(e: &Entry, fd: c_int, req: c_ulong, arg: *mut c_void) -> c_int {
    if vfs_ioctl(req) {
        // SAFETY: the generic fd requests act on our memfd exactly as on the char device.
        return unsafe { real::ioctl(fd, req, arg) };
    }
    let pre = trace::ioctl_before(req, arg as u64);
    let r = if flags().no_ioctl {
        Err(Errno::ENOTTY)
    } else {
        e.file.ioctl_cmd(req_u64(req), arg as u64)
    };
    trace::ioctl_after(fd, pre, r);
    match r {
        Ok(()) => 0,
        Err(err) => {
            set_errno(err as c_int);
            -1
        }
    }
}

/// mmap() of the uverbs fd.
pub fn mmap_uverbs(e: &Entry, fd: c_int, addr: *mut c_void, len: usize, prot: c_int, mflags: c_int, off: i64)
                   -> *mut c_void {
    let r = uverbs::Endpoint::mmap(&*e.file, addr as u64, len, prot, mflags, off);
    trace::mmap(fd, len, prot, mflags, off, &r, true);
    match r {
        Ok(a) => a as *mut c_void,
        Err(err) => {
            set_errno(err as c_int);
            libc::MAP_FAILED
        }
    }
}

/// After a successful dup of a uverbs fd: `newfd` refers to the same file. A `newfd`
/// that was itself a uverbs fd (dup2 over it) lets go of its old file. Returns false
/// (errno EMFILE, `newfd` closed again) if `newfd` is too high to track.
pub fn dup_done(oldfd: c_int, newfd: c_int) -> bool {
    if oldfd == newfd {
        return true;
    }
    let entry = fdtable::get(oldfd);
    let replaced = fdtable::remove(newfd);
    if let Some(e) = entry {
        if newfd >= MAX_FD {
            // Cannot track it: refuse rather than hand out an fd that acts like a memfd.
            // SAFETY: closing the fd the dup just created.
            unsafe { real::close(newfd) };
            drop(replaced);
            set_errno(libc::EMFILE);
            return false;
        }
        let _ = fdtable::insert(newfd, e);
        tracing::trace!(target: "doorbell_preload", oldfd, newfd, "dup uverbs fd");
    }
    drop(replaced);
    true
}

/// Whether a path names our char device.
pub fn is_dev_path(p: &[u8]) -> bool {
    p == b"/dev/infiniband/uverbs0"
}
