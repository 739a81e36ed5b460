//! What `stat`, `fstat` and `statx` say about `/dev/infiniband/uverbs0` and its fds: a
//! character device `231:192`, mode 0666, owned by root, like udev creates it. libibverbs
//! requires `S_ISCHR` and `st_rdev == makedev(231, 192)` (the sysfs `dev` value).

use std::sync::atomic::{AtomicI64, Ordering};

use crate::sysfs::{UVERBS_MAJOR, UVERBS_MINOR};

/// `st_dev` of /dev (devtmpfs) and the inode we report.
const DEV_MAJOR: u32 = 0;
const DEV_MINOR: u32 = 5;
const INODE: u64 = 0x0d00_4be1;
const MODE: u32 = libc::S_IFCHR | 0o666;

/// Seconds since the epoch when the library was loaded (the node's times).
static LOADED_AT: AtomicI64 = AtomicI64::new(0);

pub fn set_load_time() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    LOADED_AT.store(now, Ordering::Relaxed);
}

/// Fills `stat`/`stat64` (one layout on 64-bit Linux) for the char device.
macro_rules! fill_stat_fn {
    ($name:ident, $ty:ty) => {
        /// Overwrites `*buf` with the char device's attributes.
        ///
        /// # Safety
        /// `buf` must be valid for writes of the struct (the caller's `struct stat`).
        pub unsafe fn $name(buf: *mut $ty) {
            // SAFETY: the struct is plain integers; all-zero is a valid value.
            let mut st: $ty = unsafe { std::mem::zeroed() };
            let t = LOADED_AT.load(Ordering::Relaxed);
            st.st_dev = libc::makedev(DEV_MAJOR, DEV_MINOR);
            st.st_ino = INODE as _;
            st.st_nlink = 1;
            st.st_mode = MODE;
            st.st_uid = 0;
            st.st_gid = 0;
            st.st_rdev = libc::makedev(UVERBS_MAJOR, UVERBS_MINOR);
            st.st_size = 0;
            st.st_blksize = 4096;
            st.st_blocks = 0;
            st.st_atime = t;
            st.st_mtime = t;
            st.st_ctime = t;
            // SAFETY: the caller guarantees `buf` is writable for one struct.
            unsafe { buf.write(st) };
        }
    };
}

fill_stat_fn!(fill_stat, libc::stat);
fill_stat_fn!(fill_stat64, libc::stat64);

/// Fills a `struct statx` for the char device (every basic field is valid).
///
/// # Safety
/// `buf` must be valid for writes of one `struct statx`.
pub unsafe fn fill_statx(buf: *mut libc::statx) {
    // SAFETY: plain integers; all-zero is valid.
    let mut st: libc::statx = unsafe { std::mem::zeroed() };
    let t = LOADED_AT.load(Ordering::Relaxed);
    st.stx_mask = libc::STATX_BASIC_STATS;
    st.stx_blksize = 4096;
    st.stx_nlink = 1;
    st.stx_uid = 0;
    st.stx_gid = 0;
    st.stx_mode = MODE as u16;
    st.stx_ino = INODE;
    st.stx_size = 0;
    st.stx_blocks = 0;
    st.stx_atime.tv_sec = t;
    st.stx_ctime.tv_sec = t;
    st.stx_mtime.tv_sec = t;
    st.stx_rdev_major = UVERBS_MAJOR;
    st.stx_rdev_minor = UVERBS_MINOR;
    st.stx_dev_major = DEV_MAJOR;
    st.stx_dev_minor = DEV_MINOR;
    // SAFETY: the caller guarantees `buf` is writable.
    unsafe { buf.write(st) };
}
