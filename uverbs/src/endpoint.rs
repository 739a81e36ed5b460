//! The other side of a uverbs file when it is not the kernel.
//!
//! An [`Endpoint`] answers the three system calls a provider makes on
//! `/dev/infiniband/uverbsN` with the same bytes and the same errnos. softhca's kernel
//! half implements it in-process; an LD_PRELOAD shim routes a C program's syscalls on a
//! fake uverbs fd to it too. Addresses are passed as integers, exactly as the kernel
//! receives them: the endpoint must treat them as untrusted user pointers (reading and
//! writing through checked copies that fail with EFAULT), never as Rust references.

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
}
