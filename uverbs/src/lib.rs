//! # uverbs: the kernel's RDMA user-verbs ABI, byte for byte
//!
//! A provider talks to an RDMA device through one character device,
//! `/dev/infiniband/uverbsN`, with three system calls:
//!
//! * `ioctl(fd, RDMA_VERBS_IOCTL, hdr)`: an object/method call with typed attributes
//!   ([`ioctl`]);
//! * `write(fd, cmd, len)`: the older fixed-layout commands, legacy and extended
//!   ([`write`](mod@write));
//! * `mmap(fd, offset)`: device pages (UAR doorbells, clock) ([`device`]).
//!
//! [`sys`] declares the raw layouts once; [`cmd`] has one typed function per verb
//! command; [`device::Device`] owns either a real uverbs fd or an [`Endpoint`] (softhca,
//! the software HCA) that answers the very same bytes; [`discovery`] finds both.

pub mod sys;
pub mod cmd;
pub mod device;
pub mod discovery;
pub mod endpoint;
pub mod ioctl;
pub mod write;

pub use device::{Device, Mapping};
pub use endpoint::Endpoint;
pub use nix::errno::Errno;

/// Result of a uverbs call: the kernel's errno on failure.
pub type Result<T> = std::result::Result<T, Errno>;
