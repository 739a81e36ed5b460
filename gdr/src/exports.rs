//! The process-wide registry of dma-bufs that [`crate::buffer::GpuBuffer`] exported.
//!
//! Why: REG_DMABUF_MR gives the device an fd, an offset into the dma-buf, a length and
//! an iova. For a dma-buf the CPU can map, the offset says where the bytes are. For
//! NVIDIA's exporter it does not: softhca needs the *device address* of the dma-buf's
//! first byte, which only CUDA knows and the fd does not say. perftest and NCCL pass the
//! device address as the iova, and the resolver relies on that when it must; but a
//! caller may pass any iova (the verbs API allows it, and a zero-based iova is common
//! in other stacks), so for every buffer gdr exports itself it records here which
//! device range the new dma-buf covers. A dma-buf is named by its inode: every export
//! is a new file on the dma-buf filesystem with a new inode number (since Linux 5.13
//! `dma_buf_getfile` numbers them from a 64-bit counter of its own, the "unique inode
//! number" of /sys/kernel/dmabuf/buffers; the H200's exports were inodes 1 and 2), and
//! every fd of the same dma-buf (a `dup`, an fd passed through a socket) has the same
//! `(st_dev, st_ino)`. Entries live as long as their buffer (one per export, closed or
//! not), which is what makes a stale inode harmless: it is never handed out again.

use std::collections::HashMap;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Mutex;

use nix::errno::Errno;

/// One exported range: `size` bytes at device address `base` of GPU `ordinal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export {
    /// Device address of the dma-buf's first byte.
    pub base: u64,
    /// Bytes in the dma-buf.
    pub size: u64,
    /// The CUDA ordinal of the GPU whose memory it is.
    pub ordinal: usize,
    /// Which buffer exported it (forgotten with the buffer).
    pub(crate) owner: u64,
}

/// `(st_dev, st_ino)` of a file.
type FileId = (u64, u64);

static EXPORTS: Mutex<Option<HashMap<FileId, Export>>> = Mutex::new(None);

fn file_id(fd: BorrowedFd<'_>) -> Result<FileId, Errno> {
    let st = nix::sys::stat::fstat(fd.as_raw_fd())?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

fn with<R>(f: impl FnOnce(&mut HashMap<FileId, Export>) -> R) -> R {
    let mut g = EXPORTS.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(HashMap::new))
}

/// Records that the dma-buf behind `fd` is `e`.
pub(crate) fn record(fd: BorrowedFd<'_>, e: Export) -> Result<(), Errno> {
    let id = file_id(fd)?;
    with(|m| m.insert(id, e));
    Ok(())
}

/// What gdr exported as the dma-buf behind `fd`, if gdr exported it and its buffer is
/// still allocated.
pub fn lookup(fd: BorrowedFd<'_>) -> Option<Export> {
    let id = file_id(fd).ok()?;
    with(|m| m.get(&id).copied())
}

/// Forgets every export of buffer `owner` (the buffer is being freed: a later lookup
/// must not hand out its addresses).
pub(crate) fn forget_owner(owner: u64) {
    with(|m| m.retain(|_, e| e.owner != owner));
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::memfd::{memfd_create, MemFdCreateFlag};
    use std::os::fd::AsFd;

    /// Keys are the file, not the fd number: a dup of the fd finds the entry (same
    /// inode, as `fstat` of a dup reports), another file does not, and forgetting the
    /// owner removes only its entries. memfds stand in for dma-bufs: both are files on
    /// an internal filesystem with their own inode numbers.
    #[test]
    fn keyed_by_inode() {
        let a = memfd_create(c"exports-a", MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        let b = memfd_create(c"exports-b", MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        let c = memfd_create(c"exports-c", MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        let ea = Export { base: 0x7fdf_9fe0_0000, size: 2 << 20, ordinal: 0, owner: 9001 };
        let ec = Export { base: 0x7fdf_a000_0000, size: 4096, ordinal: 1, owner: 9002 };
        record(a.as_fd(), ea).unwrap();
        record(c.as_fd(), ec).unwrap();
        let dup = a.try_clone().unwrap();
        assert_ne!(dup.as_raw_fd(), a.as_raw_fd());
        assert_eq!(lookup(dup.as_fd()), Some(ea));
        assert_eq!(lookup(b.as_fd()), None);
        forget_owner(9001);
        assert_eq!(lookup(a.as_fd()), None);
        assert_eq!(lookup(c.as_fd()), Some(ec));
        forget_owner(9002);
        assert_eq!(lookup(c.as_fd()), None);
    }
}
