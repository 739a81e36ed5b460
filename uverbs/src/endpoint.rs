//! The other side of a uverbs file when it is not the kernel.
//!
//! An [`Endpoint`] answers the three system calls a provider makes on
//! `/dev/infiniband/uverbsN` with the same bytes and the same errnos. softhca's kernel
//! half implements it in-process; an LD_PRELOAD shim routes a C program's syscalls on a
//! fake uverbs fd to it too. Addresses are passed as integers, exactly as the kernel
//! receives them: the endpoint must treat them as untrusted user pointers (reading and
//! writing through checked copies that fail with EFAULT), never as Rust references.

use std::os::fd::RawFd;

use crate::Result;

/// A uverbs file implemented outside the kernel. Dropping it is `close()`: every object
/// created through it is destroyed, as the kernel does when the last fd reference goes.
pub trait Endpoint: Send + Sync {
    /// `ioctl(fd, RDMA_VERBS_IOCTL, arg)`: `arg` is the address of a
    /// `struct ib_uverbs_ioctl_hdr` followed by its attributes.
    fn ioctl(&self, arg: u64) -> Result<()>;

    /// `write(fd, buf, len)`: one legacy or extended command. Returns `len` on success.
    fn write(&self, buf: u64, len: usize) -> Result<usize>;

    /// `mmap(addr, len, prot, flags, fd, offset)`: maps a device page (UAR, clock)
    /// and returns its address. `offset` is in bytes, as passed to mmap().
    fn mmap(&self, addr: u64, len: usize, prot: i32, flags: i32, offset: i64) -> Result<u64>;

    /// The `enum rdma_driver_id` this device checks ioctl headers against.
    fn driver_id(&self) -> u32;

    /// Polled mode: does one step of the device's data path in the calling thread, if it
    /// can do so without waiting (another thread may be stepping it). Returns whether
    /// the step did anything. A software device that moves packets in a thread of its
    /// own otherwise hands every doorbell and every arrival to that thread: a wake-up
    /// each, which on a small machine costs more than the work. An application that
    /// waits for completions anyway can call this while it waits, and its posts then
    /// leave, and its arrivals complete, without a hand-off. Calling it also tells the
    /// device that the caller keeps calling it for a while (see the implementation), so
    /// the device may leave the caller's doorbells to it. Hardware (and the default)
    /// does nothing.
    fn progress(&self) -> bool {
        false
    }

    /// A descriptor that becomes readable when [`Endpoint::progress`] has something to
    /// do (a packet arrived), for a caller that blocks between calls; `None` when there
    /// is none (hardware: wait on the completion channel alone).
    fn progress_fd(&self) -> Option<RawFd> {
        None
    }

    /// The caller is about to block on [`Endpoint::progress_fd`]. A device whose peers
    /// skip the wake-up while its caller steps (softhca's same-host path) learns that
    /// they must wake it from now on. Returns false when work already arrived: call
    /// [`Endpoint::progress`] instead of blocking. The default: block.
    fn before_progress_wait(&self) -> bool {
        true
    }
}
