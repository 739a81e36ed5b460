//! # libdoorbell_preload.so: softhca under unmodified rdma-core
//!
//! `LD_PRELOAD=libdoorbell_preload.so ibv_devinfo` (or `doorbell softhca ibv_devinfo`)
//! runs the stock libibverbs + libmlx5 on an in-process softhca instance. Nothing in
//! rdma-core is changed or configured; the library only stands in for the two things a
//! real machine provides: a sysfs tree describing the device and the character device
//! `/dev/infiniband/uverbs0`.
//!
//! ## How libibverbs is led to softhca
//! 1. **Sysfs.** The constructor points `SYSFS_PATH` at a private directory
//!    (`$TMPDIR/doorbell-softhca.<pid>.<nonce>`) that does not exist yet. The first time
//!    the process looks for RDMA devices (the NETLINK_RDMA socket, or any path under that
//!    directory), the softhca instance is created and the tree is written from its
//!    configuration (`sysfs`): one `uverbs0` whose `ibdev` is the instance's name
//!    (`softhca0`), ABI 1, and a PCI modalias that libmlx5 claims (15B3:1017, a
//!    ConnectX-5). The directory is removed at exit.
//! 2. **Netlink.** `socket(AF_NETLINK, *, NETLINK_RDMA)` fails with EPROTONOSUPPORT, as
//!    on a host without `ib_core`: libibverbs then reads sysfs.
//! 3. **The char device.** `open("/dev/infiniband/uverbs0")` returns a real fd (of the
//!    HCA's device page memfd, so close/dup/poll/fcntl work, and an mmap that bypasses
//!    our hook still maps the page mlx5_ib would: the file is laid out at its mmap
//!    offsets) mapped in a table to a softhca [`softhca::File`];
//!    `stat`/`fstat`/`statx` of that path or fd report a character device `231:192`,
//!    the number the sysfs `dev` file carries, so libibverbs' `st_rdev` check passes.
//! 4. **The kernel calls.** `ioctl`, `write` and `mmap` on that fd go to the
//!    [`softhca::File`] (`ioctl_cmd`, `write`, `mmap`); `read` fails with EINVAL as on
//!    the kernel's uverbs file; `close` of the last fd referring to it closes the file.
//!    Everything else passes through to the next definition (libc) untouched.
//!
//! ## Environment
//! - `DOORBELL_PRELOAD_TRACE=1` logs each intercepted call (ioctl object/method/attrs,
//!   write() command, mmap offset, and the answer) to stderr through `tracing`. Any other
//!   value is used as a `tracing` filter, e.g. `doorbell_preload=trace,softhca=debug`.
//! - `DOORBELL_PRELOAD_NO_IOCTL=1` answers ENOTTY to every ioctl, like a kernel without
//!   the ioctl interface: libibverbs then sends every command with write(). It also
//!   configures the instance without dynamic UARs (`Config::dynamic_uars = false`), the
//!   only mode libmlx5 can use without ioctl.
//! - `DOORBELL_PRELOAD_STATIC_UARS=1` configures static UARs but keeps ioctl.
//! - `DOORBELL_SOFTHCA_ADDR=IP` (softhca's own) forces the instance's address.
//! - `DOORBELL_PRELOAD_PASSTHROUGH=1` stands in for nothing: the program uses the
//!   machine's real uverbs device, and the library only decodes its ioctl/write/mmap
//!   calls and the kernel's answers (`passthrough`; `doorbell trace --passthrough`).
//!
//! ## Rules the hooks follow
//! The hooks run inside arbitrary programs, possibly before `main`, in signal handlers
//! (`write`, `close`) and re-entered from softhca itself. So:
//! - the pass-through path is one atomic bit test (is this fd ours?) or one string
//!   comparison, with no lock and no allocation (`fdtable`);
//! - while the library is doing its own work a thread-local flag makes every hook pass
//!   straight through (`guard`), so softhca's own libc calls never come back here;
//! - no lock is held while calling into softhca or libc;
//! - no panic crosses the C boundary: every hook runs under `catch_unwind` and answers a
//!   panic with -1/EIO.

#![allow(clippy::missing_safety_doc)]

mod fdtable;
mod guard;
mod hooks;
mod passthrough;
mod real;
mod shim;
mod stat;
mod sysfs;
mod trace;

use std::ffi::{c_char, c_int};

/// glibc runs `.init_array` entries with `(argc, argv, envp)` once the library is loaded,
/// before the program's `main`.
extern "C" fn preload_init(_argc: c_int, _argv: *const *const c_char, _envp: *const *const c_char) {
    guard::run_quiet((), shim::on_load);
}

#[used]
#[link_section = ".init_array"]
static PRELOAD_INIT: extern "C" fn(c_int, *const *const c_char, *const *const c_char) = preload_init;

/// Runs at exit (`.fini_array`): removes this process's sysfs tree.
extern "C" fn preload_fini() {
    guard::run_quiet((), shim::on_exit);
}

#[used]
#[link_section = ".fini_array"]
static PRELOAD_FINI: extern "C" fn() = preload_fini;
