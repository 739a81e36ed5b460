//! One typed function per verb command, in both encodings where the kernel has both.
//!
//! Functions named `*_ioctl` use `RDMA_VERBS_IOCTL`; `*_write` use the legacy write();
//! `*_ex` the extended write(). Driver data ("udata") is passed as raw bytes: the
//! provider owns its driver's layouts (see [`crate::sys::mlx5`]).

pub mod context;
pub mod cq;
pub mod devx;
pub mod mr;
pub mod pd;
pub mod port;
pub mod qp;

/// Reads an owned fd returned by the device in a response.
pub(crate) fn owned_fd(fd: i32) -> crate::Result<std::os::fd::OwnedFd> {
    if fd < 0 {
        return Err(nix::errno::Errno::EBADF);
    }
    // SAFETY: the device just created this fd for us and nothing else owns it.
    Ok(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
}
