//! The kernel half: what `ib_uverbs` and `mlx5_ib` do for a uverbs file.
//!
//! A [`File`] is one open `/dev/infiniband/uverbsN`. It decodes the same `ioctl` and
//! `write` bytes the kernel decodes ([`ioctl`], [`write`](mod@write)), keeps the file's objects with
//! the kernel's handle and lifetime rules (`uobject`), runs the QP state machine
//! ([`qp_state`]), plays mlx5_ib's part (context, CQ/QP driver data, [`mlx5`]) and serves
//! mmap of UAR and clock pages ([`mmap`]). Bad input fails with the errno Linux 6.1 +
//! mlx5_ib gives, checked in the kernel's order: the first failing check decides.
//!
//! One command runs at a time per file (a per-file lock); commands on different files
//! of the same HCA run concurrently and meet only in the HCA's tables.
//!
//! Dropping a `File` is `close()`: every object is destroyed, newest first, and the
//! context with its UAR pages is released. Completion channels and async event fds are
//! separate files in the kernel; here the application keeps its end and reads EOF once
//! the last object referring to them is gone.

pub mod ioctl;
pub mod methods;
pub mod mlx5;
pub mod mmap;
pub(crate) mod pin;
pub mod qp_state;
pub(crate) mod udata;
pub(crate) mod uobject;
pub mod write;
#[cfg(test)]
mod tests;

use std::sync::{Arc, Mutex, MutexGuard};

use nix::errno::Errno;

use uverbs::sys::ioctl::RDMA_VERBS_IOCTL;
use uverbs::sys::verbs::RDMA_DRIVER_MLX5;

use crate::hca::Hca;
use crate::objects::AsyncEventFile;

use self::mlx5::Ucontext;
use self::uobject::{FdObj, UobjTable};

/// Result of a kernel-half operation: an errno on failure.
pub type Result<T> = std::result::Result<T, Errno>;

/// Why an object is being destroyed (`enum rdma_remove_reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Why {
    /// A destroy command: objects in use refuse (EBUSY).
    Destroy,
    /// close(): objects in use refuse too, and the walk retries them later.
    Close,
    /// A create that failed after the object was made: nothing can depend on it yet.
    Abort,
}

/// The state of one uverbs file, behind the file's lock.
#[derive(Debug, Default)]
pub(crate) struct FileState {
    /// The mlx5 user context, once GET_CONTEXT succeeded.
    pub ctx: Option<Ucontext>,
    /// Objects with handles.
    pub table: UobjTable,
    /// Completion channels and async event files, with their creation order.
    pub fds: Vec<(u64, FdObj)>,
    /// The first async event file: objects created without EVENT_FD report there.
    pub default_async: Option<Arc<AsyncEventFile>>,
    /// What each XRC SRQ (by SRQ number) holds: its domain's handle object (whose
    /// `refcnt` counts it) and its CQ (`usecnt`), released with the SRQ.
    /// The domain handle object each XRC target QP (by QPN) was made through.
    pub xrc_tgts: std::collections::BTreeMap<u32, Arc<methods::xrcd::UXrcd>>,
    pub xrc_srqs: std::collections::BTreeMap<u32, (Arc<methods::xrcd::UXrcd>, Arc<crate::objects::Cq>)>,
}

impl FileState {
    /// The context, or EINVAL before GET_CONTEXT (`ib_uverbs_get_ucontext`).
    pub(crate) fn ctx(&self) -> Result<&Ucontext> {
        self.ctx.as_ref().ok_or(Errno::EINVAL)
    }

    pub(crate) fn ctx_mut(&mut self) -> Result<&mut Ucontext> {
        self.ctx.as_mut().ok_or(Errno::EINVAL)
    }

    /// Registers a committed fd object.
    pub(crate) fn add_fd(&mut self, obj: FdObj) {
        let seq = self.table.next_seq();
        if let FdObj::Async(a) = &obj {
            if self.default_async.is_none() {
                self.default_async = Some(a.clone());
            }
        }
        self.fds.push((seq, obj));
    }
}

/// One open uverbs file of an HCA.
pub struct File {
    hca: Arc<Hca>,
    id: u64,
    st: Mutex<FileState>,
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("File").field("id", &self.id).field("hca", &self.hca.config().name).finish()
    }
}

impl File {
    pub(crate) fn new(hca: Arc<Hca>, id: u64) -> File {
        File { hca, id, st: Mutex::new(FileState::default()) }
    }

    /// The HCA this file was opened on.
    pub fn hca(&self) -> &Arc<Hca> {
        &self.hca
    }

    fn state(&self) -> MutexGuard<'_, FileState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `ioctl(fd, cmd, arg)` with the request number checked: anything but
    /// `RDMA_VERBS_IOCTL` is ENOTTY (the VFS turns the driver's ENOIOCTLCMD into it).
    pub fn ioctl_cmd(&self, cmd: u64, arg: u64) -> Result<()> {
        if cmd != RDMA_VERBS_IOCTL {
            return Err(Errno::ENOTTY);
        }
        uverbs::Endpoint::ioctl(self, arg)
    }

    /// Handles of live objects, for tests and tools.
    pub fn live_handles(&self) -> usize {
        self.state().table.live().len()
    }
}

impl uverbs::Endpoint for File {
    fn ioctl(&self, arg: u64) -> Result<()> {
        let mut st = self.state();
        ioctl::run(&self.hca, &mut st, arg)
    }

    fn write(&self, buf: u64, len: usize) -> Result<usize> {
        let mut st = self.state();
        write::run(&self.hca, &mut st, buf, len)
    }

    fn mmap(&self, addr: u64, len: usize, prot: i32, flags: i32, offset: i64) -> Result<u64> {
        let mut st = self.state();
        mmap::mmap(&self.hca, &mut st, addr, len, prot, flags, offset)
    }

    fn driver_id(&self) -> u32 {
        RDMA_DRIVER_MLX5
    }

    fn progress(&self) -> bool {
        self.hca.device().progress(&self.hca)
    }

    fn progress_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.hca.socket().as_raw_fd())
    }

    fn before_progress_wait(&self) -> bool {
        self.hca.device().before_wait()
    }
}

impl Drop for File {
    fn drop(&mut self) {
        let hca = self.hca.clone();
        self.state().close(&hca);
    }
}
