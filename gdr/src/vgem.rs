//! vgem: dma-bufs the CPU can map, from DRM's virtual GEM driver.
//!
//! Why this exists: a dma-buf MR needs a dma-buf, and on a machine without a GPU the
//! usual sources are missing (no udmabuf, no dma-buf heaps in the Debian 6.1 guest of
//! tests/vm/rxe-vm.sh nor on the build machine). vgem (`modprobe vgem`) is a DRM driver
//! with no hardware behind it: a "dumb" buffer of shmem pages, exported through PRIME,
//! is a real dma-buf that any importer (softhca here, a NIC driver in the kernel) can
//! take, and that the CPU can `mmap`. So the dma-buf MR paths run end to end here, and
//! `doorbell gdr verify` can check the dma-buf half of GPUDirect RDMA on a node without
//! a GPU.
//!
//! Use: [`Vgem::open`] finds the device (the `/dev/dri/card*` whose DRM driver name is
//! `vgem`), [`Vgem::create`] makes a buffer and returns its dma-buf fd ([`Dmabuf`]), and
//! [`Dmabuf::map`] maps it shared ([`Mapping`]), as a separate view onto the same pages
//! that an importer maps or DMAs into.
//!
//! vgem buffers are mapped write-combined (vgem has no CPU-access ioctls, so it keeps
//! every mapping coherent): correct for tests, slow for bulk CPU reads on real hardware.

pub mod drm;

use std::fs::{File, OpenOptions};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;

/// What went wrong with vgem.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No DRM card node is the vgem driver (module not loaded, or no permission).
    #[error("no vgem device: no /dev/dri/card* has the DRM driver name \"vgem\" \
             (modprobe vgem as root; tests/vm/rxe-vm.sh loads it in its guest)")]
    NoDevice,
    /// The node opened but is another driver.
    #[error("{path}: DRM driver {name:?}, not vgem")]
    NotVgem { path: PathBuf, name: String },
    /// A system call failed.
    #[error("{what}: {errno}")]
    Sys { what: String, errno: Errno },
    /// A size no dumb buffer can have.
    #[error("bad vgem buffer size {0}: must be 1 byte to 4 GiB - 4 KiB")]
    BadSize(usize),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

fn sys(what: impl Into<String>) -> impl FnOnce(Errno) -> Error {
    let what = what.into();
    move |errno| Error::Sys { what, errno }
}

/// Pitch of the dumb buffers made here: one 4 KiB page per "row" at 8 bits per pixel, so
/// the buffer is exactly the requested length rounded up to whole pages.
const ROW: u64 = 4096;

/// An open vgem DRM device.
#[derive(Debug)]
pub struct Vgem {
    file: File,
    path: PathBuf,
}

/// The DRM driver name of an open DRM node (`DRM_IOCTL_VERSION`), e.g. `vgem`, `i915`.
pub fn driver_name(fd: BorrowedFd<'_>) -> Result<String> {
    let mut name = [0u8; 64];
    let mut v = drm::DrmVersion {
        version_major: 0,
        version_minor: 0,
        version_patchlevel: 0,
        name_len: name.len(),
        name: name.as_mut_ptr().cast(),
        date_len: 0,
        date: std::ptr::null_mut(),
        desc_len: 0,
        desc: std::ptr::null_mut(),
    };
    // SAFETY: `v` is a valid drm_version whose name buffer has `name_len` writable bytes
    // (the kernel copies at most that many) and whose date/desc lengths are 0 (nothing
    // is written through their null pointers).
    unsafe { drm::drm_version(fd.as_raw_fd(), &mut v) }.map_err(sys("DRM_IOCTL_VERSION"))?;
    // name_len comes back as the full length of the name; the copy was truncated to ours.
    let n = v.name_len.min(name.len());
    Ok(String::from_utf8_lossy(&name[..n]).into_owned())
}

impl Vgem {
    /// Opens the first `/dev/dri/card*` whose driver is vgem.
    pub fn open() -> Result<Vgem> {
        let mut cards: Vec<PathBuf> = std::fs::read_dir("/dev/dri")
            .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path())
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("card")))
                .collect())
            .unwrap_or_default();
        cards.sort();
        cards.into_iter().find_map(|p| Vgem::open_path(&p).ok()).ok_or(Error::NoDevice)
    }

    /// Opens `path` and checks that its driver is vgem. A card node (not a render node):
    /// DRM allows dumb buffers only on card nodes.
    pub fn open_path(path: &Path) -> Result<Vgem> {
        let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_CLOEXEC).open(path)
            .map_err(|e| Error::Sys { what: format!("open {}", path.display()), errno: Errno::from_raw(e.raw_os_error().unwrap_or(0)) })?;
        let name = driver_name(file.as_fd())?;
        if name != "vgem" {
            return Err(Error::NotVgem { path: path.to_path_buf(), name });
        }
        Ok(Vgem { file, path: path.to_path_buf() })
    }

    /// The device node.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A new buffer of at least `len` bytes (whole 4 KiB pages), zeroed, exported as a
    /// read-write dma-buf. The dma-buf holds the buffer: the GEM handle is closed before
    /// returning, and the device may be dropped.
    pub fn create(&self, len: usize) -> Result<Dmabuf> {
        self.create_exported(len, drm::CLOEXEC | drm::RDWR)
    }

    /// Like [`Vgem::create`], but exported without `DRM_RDWR`: the fd is opened read-only,
    /// so the CPU can map it only `PROT_READ`. Importers do not look at the fd's mode (a
    /// NIC registers such a buffer writable all the same); tests use this to check that.
    pub fn create_read_only(&self, len: usize) -> Result<Dmabuf> {
        self.create_exported(len, drm::CLOEXEC)
    }

    fn create_exported(&self, len: usize, flags: u32) -> Result<Dmabuf> {
        let rows = (len as u64).div_ceil(ROW);
        // drm_gem_shmem_dumb_create computes pitch * height in 32 bits.
        if rows == 0 || rows * ROW > u32::MAX as u64 {
            return Err(Error::BadSize(len));
        }
        let fd = self.file.as_raw_fd();
        let mut dumb = drm::DrmModeCreateDumb { height: rows as u32, width: ROW as u32, bpp: 8, ..Default::default() };
        // SAFETY: a valid drm_mode_create_dumb the kernel reads and fills in.
        unsafe { drm::drm_mode_create_dumb(fd, &mut dumb) }.map_err(sys("DRM_IOCTL_MODE_CREATE_DUMB"))?;
        let mut prime = drm::DrmPrimeHandle { handle: dumb.handle, flags, fd: -1 };
        // SAFETY: a valid drm_prime_handle naming the handle just created.
        let exported = unsafe { drm::drm_prime_handle_to_fd(fd, &mut prime) }.map_err(sys("DRM_IOCTL_PRIME_HANDLE_TO_FD"));
        let close = drm::DrmGemClose { handle: dumb.handle, pad: 0 };
        // SAFETY: closes our own handle; the dma-buf (if exported) keeps its own reference
        // to the object.
        let closed = unsafe { drm::drm_gem_close(fd, &close) }.map_err(sys("DRM_IOCTL_GEM_CLOSE"));
        exported?;
        // SAFETY: PRIME_HANDLE_TO_FD returned a new fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(prime.fd) };
        closed?;
        let size = usize::try_from(dumb.size).map_err(|_| Error::BadSize(len))?;
        Ok(Dmabuf { fd, len: size })
    }
}

/// A dma-buf fd and its size.
#[derive(Debug)]
pub struct Dmabuf {
    fd: OwnedFd,
    len: usize,
}

impl Dmabuf {
    /// The fd, to register (`Pd::reg_dmabuf_mr`, `ibv_reg_dmabuf_mr`) or to pass on.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// The buffer's size in bytes (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a buffer has at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The fd, for a caller that keeps it (the buffer lives while any fd or mapping of
    /// it does).
    pub fn into_fd(self) -> OwnedFd {
        self.fd
    }

    /// A new shared read-write mapping of the whole buffer.
    pub fn map(&self) -> Result<Mapping> {
        Mapping::new(self.fd(), self.len)
    }
}

/// The exporter named in a dma-buf fd's `/proc/self/fdinfo` (`exp_name`), or None when
/// the fd is not a dma-buf. vgem buffers say `drm` (DRM's PRIME exporter), NVIDIA's say
/// `nv_dmabuf`.
pub fn exporter_name(fd: BorrowedFd<'_>) -> Option<String> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd())).ok()?;
    info.lines().find_map(|l| l.strip_prefix("exp_name:")).map(|v| v.trim().to_string())
}

/// A shared mapping of a dma-buf: the CPU's view of its pages, next to whatever else
/// maps or DMAs into them. Reads and writes are plain copies; the caller orders them
/// against the other users (for an MR, after the completion of the operation).
#[derive(Debug)]
pub struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory owned by this value; every access goes
// through `read`/`write`, which copy.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Maps `len` bytes of the dma-buf `fd` from offset 0.
    pub fn new(fd: BorrowedFd<'_>, len: usize) -> Result<Mapping> {
        // SAFETY: a new shared mapping chosen by the kernel; it overlaps nothing and is
        // unmapped on drop.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            return Err(Error::Sys { what: format!("mmap of the dma-buf ({len} bytes)"), errno: Errno::last() });
        }
        Ok(Mapping { ptr: p.cast(), len })
    }

    /// Mapped length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true for a mapping of a buffer.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapping's address in this process (for an ordinary MR over the same pages, or
    /// for comparisons); accesses through it are the caller's to make safe.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// A copy of `len` bytes at `off`. Panics when the range is outside the mapping.
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off.checked_add(len).is_some_and(|e| e <= self.len), "read {off}+{len} outside {} bytes", self.len);
        let mut v = vec![0u8; len];
        // SAFETY: inside the live mapping (checked above); the destination is our own
        // vector. Concurrent writers change only bytes, never validity.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), v.as_mut_ptr(), len) };
        v
    }

    /// Copies `data` to `off`. Panics when the range is outside the mapping.
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off.checked_add(data.len()).is_some_and(|e| e <= self.len), "write {off}+{} outside {} bytes", data.len(), self.len);
        // SAFETY: inside the live mapping (checked above), from our own slice.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe the mapping `new` made.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_device_is_a_clear_error() {
        let e = Vgem::open_path(Path::new("/dev/null/none")).unwrap_err();
        assert!(matches!(e, Error::Sys { errno: Errno::ENOTDIR, .. }), "{e:?}");
        // /dev/null is not a DRM node: DRM_IOCTL_VERSION fails with ENOTTY.
        let e = Vgem::open_path(Path::new("/dev/null")).unwrap_err();
        assert!(matches!(e, Error::Sys { errno: Errno::ENOTTY, .. }), "{e:?}");
    }

    #[test]
    fn a_memfd_is_not_a_dmabuf() {
        let f = nix::sys::memfd::memfd_create(c"plain", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        assert_eq!(exporter_name(f.as_fd()), None);
    }
}
