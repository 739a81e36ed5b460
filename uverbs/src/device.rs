//! The device handle: one type for a real `/dev/infiniband/uverbsN` fd and for a
//! software endpoint. Everything above takes a [`Device`] and cannot tell them apart.

use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use nix::errno::Errno;

use crate::endpoint::Endpoint;
use crate::sys::ioctl::RDMA_VERBS_IOCTL;
use crate::sys::IoctlHdr;
use crate::Result;

enum Backend {
    /// A uverbs character device opened from /dev/infiniband.
    Kernel(OwnedFd),
    /// A software device answering the same bytes (softhca).
    Soft(Box<dyn Endpoint>),
}

/// An open uverbs file.
pub struct Device {
    backend: Backend,
    name: String,
    driver_id: u32,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.backend {
            Backend::Kernel(ref fd) => format!("kernel fd {}", fd.as_raw_fd()),
            Backend::Soft(_) => "soft endpoint".to_string(),
        };
        f.debug_struct("Device").field("name", &self.name).field("backend", &kind)
            .field("driver_id", &self.driver_id).finish()
    }
}

impl Device {
    /// Opens a uverbs character device, as libibverbs does (O_RDWR | O_CLOEXEC).
    /// `driver_id` is the device's `enum rdma_driver_id` (mlx5 1, rxe 14): the kernel
    /// rejects ioctls whose header names another driver.
    pub fn open_path(path: &Path, name: &str, driver_id: u32) -> Result<Device> {
        let fd = nix::fcntl::open(path, nix::fcntl::OFlag::O_RDWR | nix::fcntl::OFlag::O_CLOEXEC,
                                  nix::sys::stat::Mode::empty())?;
        // SAFETY: `open` just returned this fd and nothing else owns it.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        Ok(Device { backend: Backend::Kernel(fd), name: name.to_string(), driver_id })
    }

    /// Wraps a software endpoint.
    pub fn from_endpoint(ep: Box<dyn Endpoint>, name: &str) -> Device {
        let driver_id = ep.driver_id();
        Device { backend: Backend::Soft(ep), name: name.to_string(), driver_id }
    }

    /// The device name (`mlx5_0`, `rxe0`, `softhca0`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The driver id placed in every ioctl header.
    pub fn driver_id(&self) -> u32 {
        self.driver_id
    }

    /// Overrides the driver id sent in ioctl headers (tests send a wrong one on purpose).
    pub fn set_driver_id(&mut self, id: u32) {
        self.driver_id = id;
    }

    /// True when this is a real kernel device.
    pub fn is_kernel(&self) -> bool {
        matches!(self.backend, Backend::Kernel(_))
    }

    /// [`Endpoint::progress`]: one step of a software device's data path in the calling
    /// thread (polled mode); a kernel device progresses by itself (false).
    pub fn progress(&self) -> bool {
        match &self.backend {
            Backend::Kernel(_) => false,
            Backend::Soft(ep) => ep.progress(),
        }
    }

    /// [`Endpoint::progress_fd`]: what to block on between [`Device::progress`] calls,
    /// besides the completion channel.
    pub fn progress_fd(&self) -> Option<std::os::fd::RawFd> {
        match &self.backend {
            Backend::Kernel(_) => None,
            Backend::Soft(ep) => ep.progress_fd(),
        }
    }

    /// [`Endpoint::before_progress_wait`]: call right before blocking on the progress fd;
    /// false: do not block, progress instead.
    pub fn before_progress_wait(&self) -> bool {
        match &self.backend {
            Backend::Kernel(_) => true,
            Backend::Soft(ep) => ep.before_progress_wait(),
        }
    }

    /// `ioctl(fd, RDMA_VERBS_IOCTL, hdr)`.
    ///
    /// # Safety
    /// `hdr` must point at `hdr.length` readable and writable bytes (header and
    /// attributes), and every pointer attribute must point at memory valid for its
    /// `len` bytes and direction for the duration of the call: the device writes there.
    pub unsafe fn ioctl_raw(&self, hdr: *mut IoctlHdr) -> Result<()> {
        match &self.backend {
            Backend::Kernel(fd) => {
                // SAFETY: forwarded from this function's contract; the ioctl number
                // matches the argument type.
                let r = unsafe { libc::ioctl(fd.as_raw_fd(), RDMA_VERBS_IOCTL as _, hdr) };
                if r < 0 { Err(Errno::last()) } else { Ok(()) }
            }
            Backend::Soft(ep) => ep.ioctl(hdr as u64),
        }
    }

    /// `write(fd, buf, len)` of one command.
    ///
    /// # Safety
    /// The response pointer inside `buf` (if the command has one) must point at
    /// writable memory of the size `buf`'s header announces.
    pub unsafe fn write_raw(&self, buf: &[u8]) -> Result<usize> {
        match &self.backend {
            Backend::Kernel(fd) => {
                // SAFETY: `buf` is a valid slice; the response pointer is covered by
                // this function's contract.
                let r = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
                if r < 0 { Err(Errno::last()) } else { Ok(r as usize) }
            }
            Backend::Soft(ep) => ep.write(buf.as_ptr() as u64, buf.len()),
        }
    }

    /// Maps `len` bytes of device memory at byte `offset` (a UAR page, the clock page),
    /// shared, with the given protection (`libc::PROT_*`).
    pub fn mmap(&self, len: usize, prot: i32, offset: u64) -> Result<Mapping> {
        let flags = libc::MAP_SHARED;
        let addr = match &self.backend {
            Backend::Kernel(fd) => {
                // SAFETY: a fresh mapping chosen by the kernel (addr NULL) overlaps
                // nothing we own; the fd stays open for the call.
                let p = unsafe {
                    libc::mmap(std::ptr::null_mut(), len, prot, flags, fd.as_raw_fd(), offset as libc::off_t)
                };
                if p == libc::MAP_FAILED { return Err(Errno::last()); }
                p as u64
            }
            Backend::Soft(ep) => ep.mmap(0, len, prot, flags, offset as i64)?,
        };
        Ok(Mapping { addr: addr as *mut u8, len })
    }
}

/// A device page mapping; unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    addr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access goes through raw pointers
// with volatile or atomic operations chosen by the user of the mapping.
unsafe impl Send for Mapping {}
// SAFETY: as above; `Mapping` itself holds no interior state.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Start address of the mapping.
    pub fn as_ptr(&self) -> *mut u8 {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty mapping.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: addr/len describe a mapping this value created and still owns.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}
