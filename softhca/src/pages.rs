//! The HCA's device memory: the pages an application maps from the uverbs fd.
//!
//! A ConnectX exposes doorbell pages (UARs) and its clock through PCI BARs; the kernel
//! maps those pages into the application. softhca backs them with one sparse shared
//! memory file (memfd): page [`CLOCK_PAGE`] holds the free-running timer,
//! [`CLOCK_INFO_PAGE`] the `mlx5_ib_clock_info` conversion record, and the rest are UAR
//! pages handed out one by one. The application's mmap maps a page of the file; the HCA
//! keeps its own mapping of the whole file, so the device half sees every doorbell write
//! without any copy.
//!
//! Access rules: the application writes doorbells with plain (write-combining) stores in
//! another thread, so the device half must read pages with volatile loads
//! ([`DevicePages::read_u64`]) and must not form Rust references into them.
//!
//! The clock page can be *punched* ([`DevicePages::punch_clock`]): while the engine sleeps
//! with its doorbell trap armed (see `crate::device::engine`) nobody refreshes the timer,
//! so the page is removed from the file (`fallocate(PUNCH_HOLE)`) and an application read
//! of it misses, which the engine's userfaultfd reports; the engine then writes a fresh
//! value with `pwrite` (the page enters the file already holding it: a reader never sees a
//! zero page) and wakes the reader. Every write to the clock page goes through the same
//! lock as the punch, so the HCA's own mapping never repopulates a punched page with
//! zeros.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::Mutex;

use nix::errno::Errno;

/// Page size of every device page (mlx5 UARs are 4 KiB with `uar_4k`).
pub const PAGE_SIZE: usize = 4096;
// Layout: every page sits at the page offset mlx5_ib's mmap gives it (`cmd << 8 |
// index`), so a program that maps the uverbs fd itself (the mmap system call, or a hooked
// `mmap` that bypasses the preload) gets the right page from the file: the uverbs fd the
// preload hands out is this file.

/// The page whose first 8 bytes are the HCA's free-running timer (`internal_timer_h`
/// big-endian at +0, `internal_timer_l` at +4), mapped by MLX5_IB_MMAP_CORE_CLOCK: page
/// offset `5 << 8`.
pub const CLOCK_PAGE: u32 = 0x500;
/// The page holding `struct mlx5_ib_clock_info`, mapped by MLX5_IB_MMAP_CLOCK_INFO with
/// index MLX5_IB_CLOCK_INFO_V1 (0): page offset `7 << 8`.
pub const CLOCK_INFO_PAGE: u32 = 0x700;
/// First page available for UARs: the first dynamic mmap entry mlx5_ib hands out
/// (`MLX5_IB_MMAP_OFFSET_START` = 9, index 0). UAR page `p` is entry (command `p >> 8`,
/// index `p & 0xff`), whose mmap offset is `p` pages.
pub const FIRST_UAR_PAGE: u32 = 0x900;
/// Pages past the last UAR page the layout allows: commands up to 255, index below 256.
pub const MAX_PAGE: u32 = 0x1_0000;
/// The memfd's name, as `/proc/self/maps` shows every mapping of it
/// (`/memfd:softhca-device-pages (deleted)`).
pub const MEMFD_NAME: &str = "softhca-device-pages";

/// The clock page's punch state.
#[derive(Debug, Default)]
struct ClockState {
    /// The page is not in the file (see the module docs).
    punched: bool,
    /// The last timer value stored at offset 0.
    last: u64,
}

/// The memfd and the HCA's mapping of it.
#[derive(Debug)]
pub struct DevicePages {
    fd: OwnedFd,
    base: NonNull<u8>,
    npages: u32,
    free: Mutex<Vec<bool>>,
    clock: Mutex<ClockState>,
    /// A program holds an fd of the file ([`DevicePages::user_fd`]), so it can map pages
    /// without the kernel half seeing it.
    handed_out: std::sync::atomic::AtomicBool,
}

// SAFETY: the mapping is shared memory that lives as long as this value; all accesses
// go through volatile reads/writes of plain integers, never references, so concurrent
// use from several threads (and by the application) cannot violate Rust's aliasing rules.
unsafe impl Send for DevicePages {}
// SAFETY: as above.
unsafe impl Sync for DevicePages {}

impl DevicePages {
    /// A file with `uar_pages` UAR pages after the clock pages (sparse: untouched pages
    /// cost nothing). At most `MAX_PAGE - FIRST_UAR_PAGE` UAR pages.
    pub fn new(uar_pages: u32) -> io::Result<DevicePages> {
        let npages = FIRST_UAR_PAGE + uar_pages.min(MAX_PAGE - FIRST_UAR_PAGE);
        let len = npages as usize * PAGE_SIZE;
        let fd = nix::sys::memfd::memfd_create(c"softhca-device-pages", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC)?;
        nix::unistd::ftruncate(&fd, len as i64)?;
        // SAFETY: a fresh shared mapping of a file we own; the kernel picks the address,
        // so it overlaps nothing. It is unmapped in Drop.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED,
                       fd.as_raw_fd(), 0)
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(Errno::ENOMEM))?;
        let mut free = vec![true; npages as usize];
        // Only UAR pages are handed out; the rest is the clock pages and holes.
        for p in free.iter_mut().take(FIRST_UAR_PAGE as usize) {
            *p = false;
        }
        Ok(DevicePages { fd, base, npages, free: Mutex::new(free), clock: Mutex::new(ClockState::default()), handed_out: Default::default() })
    }

    /// Number of pages in the file.
    pub fn npages(&self) -> u32 {
        self.npages
    }

    /// Takes the lowest free UAR page, zeroed. None when all are in use.
    pub fn alloc(&self) -> Option<u32> {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        let i = free.iter().position(|f| *f)?;
        free[i] = false;
        let page = i as u32;
        self.zero(page);
        Some(page)
    }

    /// The memfd's device and inode, as `/proc/self/maps` names its mappings.
    pub fn file_id(&self) -> io::Result<crate::device::trap_scan::FileId> {
        crate::device::trap_scan::FileId::of(self.fd.as_raw_fd())
    }

    /// The HCA's own mapping of the whole file: `(start, len)`.
    pub fn own_range(&self) -> (u64, u64) {
        (self.base.as_ptr() as u64, self.npages as u64 * PAGE_SIZE as u64)
    }

    /// Returns a UAR page. Pages below [`FIRST_UAR_PAGE`] are never freed.
    pub fn free(&self, page: u32) {
        if page < FIRST_UAR_PAGE || page >= self.npages {
            return;
        }
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = free.get_mut(page as usize) {
            *f = true;
        }
    }

    /// Whether `page` is a UAR page currently handed out.
    pub fn is_allocated(&self, page: u32) -> bool {
        if page < FIRST_UAR_PAGE {
            return false;
        }
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.get(page as usize) == Some(&false)
    }

    /// UAR pages currently handed out.
    pub fn in_use(&self) -> usize {
        let free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        free.iter().skip(FIRST_UAR_PAGE as usize).filter(|f| !**f).count()
    }

    fn zero(&self, page: u32) {
        for off in (0..PAGE_SIZE).step_by(8) {
            self.write_u64(page, off, 0);
        }
    }

    /// The HCA's address of byte `off` of `page`, for 8-byte aligned accesses.
    fn slot(&self, page: u32, off: usize) -> Option<*mut u64> {
        if page >= self.npages || off & 7 != 0 || off > PAGE_SIZE - 8 {
            return None;
        }
        // SAFETY: page < npages and off + 8 <= PAGE_SIZE keep the result inside the
        // mapping of npages * PAGE_SIZE bytes; the base is page aligned, so the result
        // is 8-byte aligned.
        Some(unsafe { self.base.as_ptr().add(page as usize * PAGE_SIZE + off) }.cast::<u64>())
    }

    /// Reads the 8 bytes at `off` (a multiple of 8) of `page` as the application stored
    /// them (native byte order of the stored bytes: doorbells are big-endian data).
    /// Returns 0 outside the file.
    pub fn read_u64(&self, page: u32, off: usize) -> u64 {
        if page == CLOCK_PAGE {
            let c = self.clock_state();
            if c.punched {
                // Reading through our mapping would bring the page back as zeros.
                return if off == 0 { c.last } else { 0 };
            }
        }
        match self.slot(page, off) {
            // SAFETY: `slot` returns an aligned pointer inside our live mapping; a
            // volatile read of an integer tolerates concurrent writers.
            Some(p) => unsafe { std::ptr::read_volatile(p) },
            None => 0,
        }
    }

    /// Writes 8 bytes at `off` (a multiple of 8) of `page`. Ignored outside the file.
    pub fn write_u64(&self, page: u32, off: usize, v: u64) {
        if page == CLOCK_PAGE {
            return self.write_clock(off, v);
        }
        if let Some(p) = self.slot(page, off) {
            // SAFETY: as in `read_u64`; the page is shared memory meant to be written.
            unsafe { std::ptr::write_volatile(p, v) };
        }
    }

    fn clock_state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.clock.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A store to the clock page: into the file with `pwrite` while the page is punched
    /// (it comes back holding the value), else through our mapping.
    fn write_clock(&self, off: usize, v: u64) {
        let Some(p) = self.slot(CLOCK_PAGE, off) else { return };
        let mut c = self.clock_state();
        if off == 0 {
            c.last = v;
        }
        if c.punched {
            let bytes = c.last.to_ne_bytes();
            // SAFETY: pwrite of 8 bytes from a live buffer into our own memfd, at byte 0
            // of the clock page.
            let at = CLOCK_PAGE as libc::off_t * PAGE_SIZE as libc::off_t;
            // SAFETY: see above: 8 bytes from a live buffer into our own memfd.
            let n = unsafe { libc::pwrite(self.fd.as_raw_fd(), bytes.as_ptr().cast(), 8, at) };
            if n != 8 {
                // Still punched: the next write tries again; readers keep waiting for it.
                return;
            }
            c.punched = false;
            if off == 0 {
                return;
            }
        }
        // SAFETY: as in `write_u64`: an aligned slot inside our live shared mapping; the
        // page is in the file (not punched, and the lock keeps it so), so this store
        // cannot recreate it as zeros behind a reader's back.
        unsafe { std::ptr::write_volatile(p, v) };
    }

    /// Removes the clock page from the file (see the module docs) until the next write to
    /// it. Mappings of it then miss on every access.
    pub fn punch_clock(&self) -> io::Result<()> {
        let mut c = self.clock_state();
        if c.punched {
            return Ok(());
        }
        // SAFETY: fallocate on our own memfd, a range inside the file.
        let r = unsafe {
            libc::fallocate(self.fd.as_raw_fd(), libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                            CLOCK_PAGE as libc::off_t * PAGE_SIZE as libc::off_t, PAGE_SIZE as libc::off_t)
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        c.punched = true;
        Ok(())
    }

    /// Puts a punched clock page back holding the last timer value stored.
    pub fn unpunch_clock(&self) {
        let last = {
            let c = self.clock_state();
            if !c.punched {
                return;
            }
            c.last
        };
        self.write_clock(0, last);
    }

    /// Whether the clock page is punched.
    pub fn clock_punched(&self) -> bool {
        self.clock_state().punched
    }

    /// Copies `bytes` (a multiple of 8 long) to `off` of `page` with 8-byte volatile stores.
    pub fn write_bytes(&self, page: u32, off: usize, bytes: &[u8]) {
        for (i, chunk) in bytes.chunks(8).enumerate() {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(page, off.saturating_add(i * 8), u64::from_ne_bytes(w));
        }
    }

    /// Maps `page` into the application as mmap() on the uverbs fd would: `len` must be
    /// one page; `prot` and `flags` are the application's (MAP_SHARED required by the
    /// caller); `addr` is its address hint. Returns the mapping's address.
    pub fn map_to_user(&self, page: u32, addr: u64, len: usize, prot: i32, flags: i32) -> Result<u64, Errno> {
        if page >= self.npages {
            return Err(Errno::EINVAL);
        }
        let off = page as libc::off_t * PAGE_SIZE as libc::off_t;
        // SAFETY: mmap of our memfd with the application's own address hint and flags:
        // this is the mapping the application asked for, exactly as the kernel would
        // create it; it does not touch memory Rust code owns unless the application
        // passed MAP_FIXED over its own memory, which is the application's contract.
        let p = unsafe { libc::mmap(addr as *mut libc::c_void, len, prot, flags, self.fd.as_raw_fd(), off) };
        if p == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        Ok(p as u64)
    }

    /// A new fd of the memfd for an application to hold as its uverbs fd: mapping it at
    /// an mmap offset the kernel half answered maps the same page (see the layout
    /// above), whatever the program's mmap goes through. The fd shares the memfd's open
    /// file description (the HCA never uses its file position or status flags).
    pub fn user_fd(&self, cloexec: bool) -> io::Result<OwnedFd> {
        let cmd = if cloexec { libc::F_DUPFD_CLOEXEC } else { libc::F_DUPFD };
        // SAFETY: fcntl duplicating our own fd; it touches no memory.
        let fd = unsafe { libc::fcntl(self.fd.as_raw_fd(), cmd, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        self.handed_out.store(true, std::sync::atomic::Ordering::Release);
        // SAFETY: a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// Whether a program was given an fd of the file ([`DevicePages::user_fd`]): only
    /// then can pages be mapped without the kernel half's mmap (the doorbell trap then
    /// looks for such mappings, see `crate::device::trap_scan`).
    pub fn handed_out(&self) -> bool {
        self.handed_out.load(std::sync::atomic::Ordering::Acquire)
    }
}

impl Drop for DevicePages {
    fn drop(&mut self) {
        // SAFETY: base/len describe the mapping made in `new`, owned by this value.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.npages as usize * PAGE_SIZE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_and_user_mapping() {
        let p = DevicePages::new(8).unwrap();
        let a = p.alloc().unwrap();
        let b = p.alloc().unwrap();
        assert_eq!((a, b), (FIRST_UAR_PAGE, FIRST_UAR_PAGE + 1));
        assert_eq!(p.in_use(), 2);
        p.free(a);
        assert_eq!(p.alloc(), Some(a));
        let user = p.map_to_user(b, 0, PAGE_SIZE, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED).unwrap();
        // SAFETY: `user` is a fresh mapping of one page we own in this test.
        unsafe { std::ptr::write_volatile((user as *mut u64).add(0x100), 0x1122_3344_5566_7788) };
        assert_eq!(p.read_u64(b, 0x800), 0x1122_3344_5566_7788);
        p.write_u64(b, 8, 7);
        // SAFETY: as above.
        assert_eq!(unsafe { std::ptr::read_volatile((user as *const u64).add(1)) }, 7);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(user as *mut libc::c_void, PAGE_SIZE) };
        assert_eq!(p.read_u64(p.npages(), 0), 0);
        assert_eq!(p.read_u64(b, 4095), 0);
        while p.alloc().is_some() {}
        assert_eq!(p.in_use(), 8);
    }

    #[test]
    fn punched_clock_comes_back_with_the_value() {
        let p = DevicePages::new(4).unwrap();
        p.write_u64(CLOCK_PAGE, 0, 0x55);
        let user = p.map_to_user(CLOCK_PAGE, 0, PAGE_SIZE, libc::PROT_READ, libc::MAP_SHARED).unwrap();
        // SAFETY: `user` is a fresh read-only mapping of one page made by this test.
        let read = || unsafe { std::ptr::read_volatile(user as *const u64) };
        assert_eq!(read(), 0x55);
        p.punch_clock().unwrap();
        assert!(p.clock_punched());
        assert_eq!(p.read_u64(CLOCK_PAGE, 0), 0x55, "the last value, without repopulating");
        assert!(p.clock_punched());
        // (An unregistered mapping would now read a fresh zero page: nobody reads here.)
        p.write_u64(CLOCK_PAGE, 0, 0x66);
        assert!(!p.clock_punched());
        assert_eq!(read(), 0x66);
        p.punch_clock().unwrap();
        p.unpunch_clock();
        assert_eq!(read(), 0x66);
        p.write_u64(CLOCK_PAGE, 0, 0x77);
        assert_eq!(read(), 0x77);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(user as *mut libc::c_void, PAGE_SIZE) };
    }
}
