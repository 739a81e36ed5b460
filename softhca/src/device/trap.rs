//! The doorbell trap: write-protected UAR pages that turn an application's doorbell
//! store into a wake-up of the sleeping engine, the way a ConnectX sees a UAR write (an
//! MMIO store) at once.
//!
//! The kernel half serves every mmap of a device page that reaches it (`kernel/mmap.rs`),
//! so it knows those application mappings of a UAR page and of the clock page. It
//! registers them here ([`TrapShared::register`]) with one userfaultfd per HCA; mappings
//! a program made on its fd of the page file without the kernel half (under the preload,
//! a hooked mmap or the system call) are found in `/proc/self/maps` and registered the
//! same way ([`super::trap_scan`]):
//! - UAR pages in write-protect mode (`UFFDIO_REGISTER_MODE_WP`). When the engine goes
//!   idle it write-protects them (`Trap::arm`); the application's next store to any of
//!   them (a send doorbell, a BlueFlame copy, a CQ arm at +0x20) faults, the kernel queues
//!   a message on the userfaultfd and the storing thread waits. The engine, asleep in
//!   `ppoll` on the userfaultfd, its UDP socket and its wake eventfd, wakes, lifts the
//!   protection (`Trap::disarm`: `UFFDIO_WRITEPROTECT` with mode 0, which also wakes the
//!   waiting thread so its store completes), and runs a step that reads the doorbell
//!   records. While busy it leaves the pages writable: doorbells cost nothing extra.
//! - The clock page in missing mode (`UFFDIO_REGISTER_MODE_MISSING`): while armed, the
//!   engine does not refresh the timer, so it punches the page out of the device memory
//!   file ([`crate::pages::DevicePages::punch_clock`]); an application read then misses,
//!   the engine writes a fresh timer value into the file and wakes the reader
//!   (`Trap::wake_clock`). A read of the clock thus costs one trap after idleness and
//!   is never stale by more than a busy engine's refresh period.
//!
//! Only the engine arms, disarms, and reads messages; the kernel half only registers (with
//! the same fd, under [`TrapShared`]'s lock) and then wakes the engine so that it protects
//! the new range before it sleeps again.
//!
//! Availability: userfaultfd with `UFFD_USER_MODE_ONLY` (no privilege needed), falling
//! back to `/dev/userfaultfd`; write-protection of shmem needs
//! `UFFD_FEATURE_WP_HUGETLBFS_SHMEM` (Linux 5.19). Anything missing (ENOSYS, EPERM,
//! EINVAL, an older kernel) leaves the HCA on the timed backoff, with one debug line on
//! `softhca::engine`; `DOORBELL_DOORBELL_TRAP=0` (or [`crate::Config::doorbell_trap`])
//! forces that fallback. A UAR mapping that cannot be registered turns the trap off for
//! good on that HCA (the engine could otherwise sleep through its doorbells); a clock
//! mapping that cannot be registered only keeps the engine waking every
//! [`super::timers::SLEEP_DEEP`] to refresh the timer.
//!
//! Address reuse: the application may unmap a UAR page at any time (softhca does not see
//! munmap). The kernel drops the registration with the mapping, so protecting that
//! address later fails with ENOENT, and the range is then forgotten. If the address has
//! been mapped and registered again meanwhile, the kernel would let us protect it even
//! when another instance's userfaultfd registered it, so every protect goes through
//! [`super::trap_owners`], which refuses it unless the last registration there was ours.
//! Waking (`UFFDIO_WAKE`) never touches memory. What could still go wrong would need
//! another userfaultfd user in the process (not softhca) to register write-protection at
//! exactly a reused address of ours between two of our arms: its pages would get one
//! spurious protection that its own handler resolves.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::pages::{DevicePages, PAGE_SIZE};

use super::trap_owners;
use super::trap_scan::{self, FileId, Sweep, Verdict};

/// The environment variable that turns the trap off (`0`) for every instance.
pub const TRAP_ENV: &str = "DOORBELL_DOORBELL_TRAP";

/// Whether the environment allows the trap (anything but `0`, `false`, `off`, `no`).
pub fn env_allows() -> bool {
    !crate::config::switched_off(TRAP_ENV)
}

/// The userfaultfd ABI (linux/userfaultfd.h).
mod sys {
    pub const UFFD_API: u64 = 0xaa;
    pub const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    const UFFDIO: u64 = 0xaa;

    const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
        dir << 30 | (size as u64) << 16 | UFFDIO << 8 | nr
    }
    const READ: u64 = 2;
    const RW: u64 = 3;

    pub const UFFDIO_API: u64 = ioc(RW, 0x3f, std::mem::size_of::<Api>());
    pub const UFFDIO_REGISTER: u64 = ioc(RW, 0x00, std::mem::size_of::<Register>());
    pub const UFFDIO_UNREGISTER: u64 = ioc(READ, 0x01, std::mem::size_of::<Range>());
    pub const UFFDIO_WAKE: u64 = ioc(READ, 0x02, std::mem::size_of::<Range>());
    pub const UFFDIO_WRITEPROTECT: u64 = ioc(RW, 0x06, std::mem::size_of::<WriteProtect>());
    /// `/dev/userfaultfd`'s ioctl that makes a new userfaultfd (`_IO(0xaa, 0)`).
    pub const USERFAULTFD_IOC_NEW: u64 = 0xaa00;

    /// `_UFFDIO_*` bits of the `ioctls` answers.
    pub const IOCTL_WAKE: u64 = 1 << 0x02;
    pub const IOCTL_WRITEPROTECT: u64 = 1 << 0x06;

    pub const REGISTER_MODE_MISSING: u64 = 1 << 0;
    pub const REGISTER_MODE_WP: u64 = 1 << 1;
    pub const WRITEPROTECT_MODE_WP: u64 = 1 << 0;

    pub const FEATURE_MISSING_SHMEM: u64 = 1 << 5;
    pub const FEATURE_WP_HUGETLBFS_SHMEM: u64 = 1 << 12;

    pub const EVENT_PAGEFAULT: u8 = 0x12;

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Api {
        pub api: u64,
        pub features: u64,
        pub ioctls: u64,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Range {
        pub start: u64,
        pub len: u64,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Register {
        pub range: Range,
        pub mode: u64,
        pub ioctls: u64,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct WriteProtect {
        pub range: Range,
        pub mode: u64,
    }

    /// `struct uffd_msg` as a page fault fills it.
    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub struct Msg {
        pub event: u8,
        pub reserved1: u8,
        pub reserved2: u16,
        pub reserved3: u32,
        pub flags: u64,
        pub address: u64,
        pub feat: u64,
    }

    const _: () = assert!(std::mem::size_of::<Msg>() == 32);
    const _: () = assert!(std::mem::size_of::<Api>() == 24);
    const _: () = assert!(std::mem::size_of::<Register>() == 32);
    const _: () = assert!(std::mem::size_of::<WriteProtect>() == 24);
}

/// `ioctl(fd, req, arg)` as an io::Result.
///
/// # Safety
/// `arg` must point at a live value of the type `req` names.
unsafe fn ioctl<T>(fd: RawFd, req: u64, arg: *mut T) -> io::Result<()> {
    // SAFETY: per the caller.
    if unsafe { libc::ioctl(fd, req as _, arg) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A new userfaultfd (non-blocking, close-on-exec, user-mode faults only).
fn new_uffd() -> io::Result<OwnedFd> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | sys::UFFD_USER_MODE_ONLY;
    // SAFETY: the userfaultfd syscall takes one int of flags and touches no memory.
    let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as libc::c_int;
    if fd >= 0 {
        // SAFETY: a new descriptor nothing else owns.
        return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    let first = io::Error::last_os_error();
    // `vm.unprivileged_userfaultfd` and seccomp can refuse the syscall; the device node
    // is governed by its file permissions instead.
    let dev = std::fs::OpenOptions::new().read(true).write(true).open("/dev/userfaultfd").map_err(|_| first)?;
    // SAFETY: USERFAULTFD_IOC_NEW takes the new fd's flags as its integer argument.
    let fd = unsafe { libc::ioctl(dev.as_raw_fd(), sys::USERFAULTFD_IOC_NEW as _, flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A userfaultfd that can write-protect shmem, and whether it can also trap missing
/// shmem pages (the clock).
fn open_uffd() -> io::Result<(OwnedFd, bool)> {
    // The first UFFDIO_API (features 0) reports what the kernel has; a userfaultfd takes
    // one UFFDIO_API only, so the real handshake uses a second one.
    let probe = new_uffd()?;
    let mut api = sys::Api { api: sys::UFFD_API, ..Default::default() };
    // SAFETY: UFFDIO_API with a live `uffdio_api`.
    unsafe { ioctl(probe.as_raw_fd(), sys::UFFDIO_API, &mut api) }?;
    drop(probe);
    if api.features & sys::FEATURE_WP_HUGETLBFS_SHMEM == 0 {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "no write-protection of shmem (UFFD_FEATURE_WP_HUGETLBFS_SHMEM)"));
    }
    let clock = api.features & sys::FEATURE_MISSING_SHMEM != 0;
    let fd = new_uffd()?;
    let features = sys::FEATURE_WP_HUGETLBFS_SHMEM | if clock { sys::FEATURE_MISSING_SHMEM } else { 0 };
    let mut api = sys::Api { api: sys::UFFD_API, features, ioctls: 0 };
    // SAFETY: as above.
    unsafe { ioctl(fd.as_raw_fd(), sys::UFFDIO_API, &mut api) }?;
    Ok((fd, clock))
}

/// What an application mapping maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// A UAR page: doorbells, BlueFlame, CQ arm.
    Uar,
    /// The free-running timer page.
    Clock,
}

/// One registered application mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Range {
    start: u64,
    len: u64,
    kind: MapKind,
    /// The device page it maps (its first page).
    page: u32,
    /// The registration's id in [`trap_owners`].
    id: u64,
}

impl Range {
    /// The device page behind application address `addr`, if this range maps it.
    fn device_page(&self, addr: u64) -> Option<u32> {
        let off = addr.checked_sub(self.start).filter(|o| *o < self.len)?;
        Some(self.page + (off / PAGE_SIZE as u64) as u32)
    }
}

/// A copy of a UAR page taken when a store to it trapped: the store has landed once the
/// page differs from it.
#[derive(Debug)]
struct Watch {
    page: u32,
    words: Box<[u64]>,
}

#[derive(Debug, Default)]
struct Inner {
    /// None: no trap (turned off, unavailable, or the engine has exited).
    fd: Option<OwnedFd>,
    /// This trap's id in [`trap_owners`].
    owner: u64,
    /// The fd can register the clock page (missing mode on shmem).
    clock_ok: bool,
    /// Registered since the engine last looked.
    new: Vec<Range>,
    /// A UAR mapping could not be registered: the engine must not rely on the trap.
    uar_failed: bool,
    /// A clock mapping could not be registered: the engine must keep the timer fresh.
    clock_failed: bool,
    /// New contexts whose clock mapping has not been registered yet (see
    /// [`super::trap_scan`]).
    want_clock: u32,
    /// Device pages announced since the engine last looked ([`TrapShared::expect`]).
    expect: Vec<u32>,
}

/// The part of the trap the kernel half uses (at mmap) and the engine takes over.
#[derive(Debug, Default)]
pub struct TrapShared {
    inner: Mutex<Inner>,
}

impl TrapShared {
    /// Opens the trap when `enabled` and the kernel has what it needs; otherwise it stays
    /// empty (the engine then uses the timed backoff). Called once, before the engine
    /// starts.
    pub fn open(&self, enabled: bool) {
        let mut inner = self.lock();
        if !enabled {
            tracing::debug!(target: "softhca::engine", "doorbell trap off ({TRAP_ENV}=0 or Config::doorbell_trap): timed backoff");
        } else {
            match open_uffd() {
                Ok((fd, clock_ok)) => {
                    inner.fd = Some(fd);
                    inner.owner = trap_owners::new_owner();
                    inner.clock_ok = clock_ok;
                }
                Err(e) => tracing::debug!(target: "softhca::engine", "doorbell trap unavailable (userfaultfd: {e}): timed backoff"),
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the trap is in use.
    pub fn active(&self) -> bool {
        let i = self.lock();
        i.fd.is_some() && !i.uar_failed
    }

    /// Mappings of device pages are about to be made: UAR pages `uars` were handed out
    /// to a program, and (`clock`) a new context will map the clock page once, as
    /// libmlx5 does. The engine then looks for them in `/proc/self/maps` until they are
    /// registered (see [`super::trap_scan`]), whether or not their mmap reaches the
    /// kernel half. Returns whether the engine must be woken to start looking.
    pub fn expect(&self, uars: &[u32], clock: bool) -> bool {
        let mut i = self.lock();
        if i.fd.is_none() || (uars.is_empty() && !clock) {
            return false;
        }
        if clock {
            i.want_clock = i.want_clock.saturating_add(1);
        }
        i.expect.extend_from_slice(uars);
        true
    }

    /// An application mapping of device page `page` was made at `[start, start + len)`:
    /// registers it. Returns whether the engine must be woken to protect it.
    pub fn register(&self, kind: MapKind, page: u32, start: u64, len: u64) -> bool {
        let mut i = self.lock();
        if i.fd.is_none() {
            return false;
        }
        if let Err(e) = Self::try_register(&mut i, kind, page, start, len) {
            tracing::debug!(target: "softhca::engine", ?kind, start, len, "device page mapping not trappable ({e}): timed backoff for it");
            Self::failed(&mut i, kind);
        }
        true
    }

    /// A mapping of `kind` could not be registered: the engine must not rely on the trap
    /// for it.
    fn failed(i: &mut Inner, kind: MapKind) {
        match kind {
            MapKind::Uar => i.uar_failed = true,
            MapKind::Clock => i.clock_failed = true,
        }
    }

    /// Registers `[start, start + len)` (device page `page` on) for `kind`'s mode and
    /// queues it for the engine. A clock mapping meets one expected clock mapping (see
    /// [`TrapShared::expect`]) whatever the outcome.
    fn try_register(i: &mut Inner, kind: MapKind, page: u32, start: u64, len: u64) -> io::Result<()> {
        let fd = i.fd.as_ref().map(|f| f.as_raw_fd()).ok_or(io::ErrorKind::NotConnected)?;
        if kind == MapKind::Clock {
            i.want_clock = i.want_clock.saturating_sub(1);
        }
        let (mode, need) = match kind {
            MapKind::Uar => (sys::REGISTER_MODE_WP, sys::IOCTL_WRITEPROTECT),
            MapKind::Clock if i.clock_ok => (sys::REGISTER_MODE_MISSING, sys::IOCTL_WAKE),
            MapKind::Clock => return Err(io::Error::new(io::ErrorKind::Unsupported, "no missing-page traps on shmem")),
        };
        let mut reg = sys::Register { range: sys::Range { start, len }, mode, ioctls: 0 };
        // The address is ours from now on, whoever had it before.
        let ((), id) = trap_owners::claim(i.owner, start, len, || {
            // SAFETY: UFFDIO_REGISTER with a live `uffdio_register`; the range is a
            // mapping of the device page file in this process (made by the kernel half's
            // mmap just now, or read from /proc/self/maps, see `register_found`).
            unsafe { ioctl(fd, sys::UFFDIO_REGISTER, &mut reg) }
        })?;
        if reg.ioctls & need != need {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "the range cannot be write-protected or woken"));
        }
        i.new.push(Range { start, len, kind, page, id });
        Ok(())
    }

    /// [`TrapShared::register`] for a mapping found in `/proc/self/maps`: the error is
    /// returned instead of turning the trap off (the mapping may be gone already).
    fn register_found(&self, kind: MapKind, page: u32, start: u64, len: u64) -> io::Result<()> {
        let mut i = self.lock();
        if i.fd.is_none() {
            return Ok(());
        }
        Self::try_register(&mut i, kind, page, start, len)
    }

    /// Undoes a registration queued by [`TrapShared::register_found`] whose range turned
    /// out to be something else by the time it was registered.
    fn unregister_found(&self, start: u64, len: u64) {
        let mut i = self.lock();
        let Some(fd) = i.fd.as_ref().map(|f| f.as_raw_fd()) else { return };
        let Some(pos) = i.new.iter().position(|r| r.start == start && r.len == len) else { return };
        let r = i.new.swap_remove(pos);
        let _ = trap_owners::if_owned(r.id, r.start, || {
            let mut range = sys::Range { start, len };
            // SAFETY: UFFDIO_UNREGISTER with a live `uffdio_range`: drops our
            // registration of the range (whatever is mapped there now), touching no memory.
            unsafe { ioctl(fd, sys::UFFDIO_UNREGISTER, &mut range) }
        });
        trap_owners::release(r.id, r.start);
    }
}

/// The engine's side of the trap (it alone arms, disarms and reads messages).
#[derive(Debug)]
pub(crate) struct Trap {
    shared: Arc<super::Shared>,
    pages: Arc<DevicePages>,
    fd: RawFd,
    /// Our id in [`trap_owners`].
    owner: u64,
    /// Registered mappings, and whether each UAR range is write-protected now.
    ranges: Vec<(Range, bool)>,
    armed: bool,
    /// Fault messages read so far.
    pub faults: u64,
    /// Pages whose trapped stores may not have landed yet, and until when to wait for
    /// them (see [`Trap::held`]).
    watch: Vec<Watch>,
    hold_until: Option<std::time::Instant>,
    /// The memfd as `/proc/self/maps` names it (None: unknown, no sweeps).
    file: Option<FileId>,
    /// UAR pages expected to be mapped and not registered yet, and when to look for
    /// them (see [`super::trap_scan`]).
    expected: BTreeSet<u32>,
    sweep: Sweep,
}

impl Trap {
    /// The engine's side, if the trap is in use.
    pub fn new(shared: Arc<super::Shared>, pages: Arc<DevicePages>) -> Option<Trap> {
        let (fd, owner) = {
            let i = shared.trap.lock();
            (i.fd.as_ref().map(|f| f.as_raw_fd())?, i.owner)
        };
        let file = pages.file_id().map_err(|e| tracing::debug!(target: "softhca::engine", "device page file: {e}: mappings made past the kernel half stay unseen")).ok();
        Some(Trap { shared, pages, fd, owner, ranges: Vec::new(), armed: false, faults: 0, watch: Vec::new(), hold_until: None,
                    file, expected: BTreeSet::new(), sweep: Sweep::new(std::time::Instant::now()) })
    }

    /// The userfaultfd, for `ppoll`.
    pub fn fd(&self) -> RawFd {
        self.fd
    }

    /// Whether the pages are protected (the engine may sleep without a timeout).
    pub fn armed(&self) -> bool {
        self.armed
    }

    /// Whether the engine can rely on the trap (no UAR mapping escaped registration).
    pub fn usable(&self) -> bool {
        !self.shared.trap.lock().uar_failed
    }

    /// Whether a clock mapping exists that the trap cannot refresh on demand.
    pub fn clock_needs_tick(&self) -> bool {
        self.shared.trap.lock().clock_failed
    }

    /// Whether the trap must be armed again before the engine sleeps: mappings were
    /// registered or announced since the last arm, or a look for expected mappings is
    /// due.
    pub fn has_new(&self, now: std::time::Instant) -> bool {
        let i = self.shared.trap.lock();
        !i.new.is_empty() || !i.expect.is_empty() || i.want_clock > 0 && self.sweep.due().is_none()
            || self.sweep.due().is_some_and(|d| now >= d)
    }

    /// While mappings are expected: when the engine must look for them next (its armed
    /// sleep must end then).
    pub fn sweep_due(&self) -> Option<std::time::Instant> {
        self.sweep.due()
    }

    /// Drops the expected pages that are mapped (a registered range covers them) or no
    /// longer handed out; returns whether any is left.
    fn unseen(&mut self) -> bool {
        let (ranges, pages) = (&self.ranges, &self.pages);
        self.expected.retain(|&p| {
            pages.is_allocated(p)
                && !ranges.iter().any(|(r, _)| {
                    r.kind == MapKind::Uar && p >= r.page && ((p - r.page) as u64) < r.len / PAGE_SIZE as u64
                })
        });
        !self.expected.is_empty()
    }

    /// Whether a new context's clock mapping is still expected.
    fn want_clock(&self) -> bool {
        self.shared.trap.lock().want_clock > 0
    }

    /// Looks for expected mappings (see [`super::trap_scan`]) when that is due, and
    /// registers what it finds. Returns whether mappings are still expected (the clock
    /// must then stay in the file, and the armed sleep end at [`Trap::sweep_due`]).
    fn sweep(&mut self, now: std::time::Instant) -> bool {
        let announced = std::mem::take(&mut self.shared.trap.lock().expect);
        if self.file.is_none() || !self.pages.handed_out() {
            // Every mapping goes through the kernel half (no program holds the file).
            self.shared.trap.lock().want_clock = 0;
            self.expected.clear();
            return false;
        }
        self.expected.extend(announced);
        if self.expected.is_empty() && !self.want_clock() && self.sweep.due().is_none() {
            return false;
        }
        let open = self.unseen() || self.want_clock();
        let mut verdict = self.sweep.step(now, open);
        if verdict == Verdict::Scan {
            if let Some(file) = self.file {
                self.shared.counters.trap_sweeps.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.register_found(file);
            }
            self.take_new();
            let open = self.unseen() || self.want_clock();
            verdict = self.sweep.step(now, open);
        }
        if verdict == Verdict::GaveUp {
            tracing::debug!(target: "softhca::engine", pages = ?self.expected, want_clock = self.want_clock(),
                            "doorbell trap: expected mappings of device pages never appeared; no longer looking");
            self.expected.clear();
            self.shared.trap.lock().want_clock = 0;
        }
        matches!(verdict, Verdict::Scan | Verdict::Wait)
    }

    /// Reads `/proc/self/maps` and registers every shared mapping of the device page
    /// file that no registered range covers.
    fn register_found(&mut self, file: FileId) {
        let own = self.pages.own_range();
        let vmas = match trap_scan::scan(file, own) {
            Ok(v) => v,
            Err(e) => {
                tracing::debug!(target: "softhca::engine", "reading /proc/self/maps: {e}");
                return;
            }
        };
        let known: Vec<(u64, u64)> = {
            let i = self.shared.trap.lock();
            self.ranges.iter().map(|(r, _)| (r.start, r.len)).chain(i.new.iter().map(|r| (r.start, r.len))).collect()
        };
        let mut tried = Vec::new();
        for v in &vmas {
            for (kind, page, start, len) in trap_scan::pieces(v, self.pages.npages()) {
                for (s, l) in trap_scan::uncovered(start, len, &known) {
                    let p = page + ((s - start) / PAGE_SIZE as u64) as u32;
                    tracing::debug!(target: "softhca::engine", ?kind, page = p, start = s, len = l,
                                    "doorbell trap: a mapping made past the kernel half, found in /proc/self/maps");
                    tried.push((kind, p, s, l, self.shared.trap.register_found(kind, p, s, l)));
                }
            }
        }
        if tried.is_empty() {
            return;
        }
        // The program may have unmapped a range, and mapped something else there, between
        // the read and the registration. A registration stays with the mapping it was
        // made on, so reading the maps once more settles it.
        let now = trap_scan::scan(file, own).unwrap_or_default();
        for (kind, page, s, l, r) in tried {
            let still = trap_scan::maps_page(&now, s, l, page);
            match (r, still) {
                (Ok(()), true) => {
                    self.shared.counters.trap_found.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                (Ok(()), false) => self.shared.trap.unregister_found(s, l),
                (Err(e), true) => {
                    tracing::debug!(target: "softhca::engine", ?kind, start = s, len = l, "device page mapping not trappable ({e}): timed backoff for it");
                    TrapShared::failed(&mut self.shared.trap.lock(), kind);
                }
                (Err(_), false) => {}
            }
        }
    }

    fn take_new(&mut self) {
        let new = std::mem::take(&mut self.shared.trap.lock().new);
        for r in new {
            // A new mapping at an address we knew replaced the old one (MAP_FIXED, or
            // the address was unmapped and reused).
            self.ranges.retain(|(o, _)| o.start + o.len <= r.start || r.start + r.len <= o.start);
            self.ranges.push((r, false));
        }
    }

    fn protect(&self, r: &Range, wp: bool) -> io::Result<()> {
        let mut a = sys::WriteProtect { range: sys::Range { start: r.start, len: r.len }, mode: if wp { sys::WRITEPROTECT_MODE_WP } else { 0 } };
        // Only while the last registration at this address is ours (see `trap_owners`).
        trap_owners::if_owned(r.id, r.start, || {
            // SAFETY: UFFDIO_WRITEPROTECT with a live `uffdio_writeprotect`. The kernel
            // checks that every mapping in the range is registered for write-protection
            // with a userfaultfd (ENOENT otherwise), so an address the application
            // unmapped and reused for something else is refused, not protected.
            unsafe { ioctl(self.fd, sys::UFFDIO_WRITEPROTECT, &mut a) }
        })
    }

    /// Forgets range `i` (its mapping is gone, or no longer ours).
    fn forget(&mut self, i: usize) {
        let (r, _) = self.ranges.swap_remove(i);
        trap_owners::release(r.id, r.start);
        // Its pages may have been mapped again elsewhere, past the kernel half.
        if r.kind == MapKind::Uar {
            self.expected.extend(r.page..r.page + (r.len / PAGE_SIZE as u64) as u32);
        }
    }

    fn wake(&self, start: u64, len: u64) {
        let mut r = sys::Range { start, len };
        // SAFETY: UFFDIO_WAKE with a live `uffdio_range`; it only wakes threads waiting on
        // this userfaultfd for faults in the range and touches no memory.
        let _ = unsafe { ioctl(self.fd, sys::UFFDIO_WAKE, &mut r) };
    }

    /// Going idle: punches the clock page (if a mapping of it is registered) and
    /// write-protects every UAR mapping not yet protected. The caller must then look at
    /// every doorbell record once more before it sleeps (see `super::engine`).
    pub fn arm(&mut self) {
        self.take_new();
        if self.sweep(std::time::Instant::now()) {
            // A clock mapping may exist that is not registered: a read of a punched page
            // there would bring in a page of zeros. Keep the clock in the file (the
            // engine refreshes it whenever it wakes) until the sweeps end.
            self.pages.unpunch_clock();
        } else if self.ranges.iter().any(|(r, _)| r.kind == MapKind::Clock) && !self.pages.clock_punched() {
            if let Err(e) = self.pages.punch_clock() {
                tracing::debug!(target: "softhca::engine", "clock page punch: {e}");
            }
        }
        let mut i = 0;
        while i < self.ranges.len() {
            let (r, on) = self.ranges[i];
            if r.kind == MapKind::Uar && !on {
                match self.protect(&r, true) {
                    Ok(()) => self.ranges[i].1 = true,
                    Err(e) => {
                        // Unmapped (ENOENT), or no longer ours: forget it.
                        tracing::trace!(target: "softhca::engine", start = r.start, "trap range gone: {e}");
                        self.forget(i);
                        continue;
                    }
                }
            }
            i += 1;
        }
        tracing::trace!(target: "softhca::engine", ranges = self.ranges.len(), "trap armed");
        // Before the engine looks at the polled-mode window again (see `super::polled`).
        self.shared.polled.set_armed(true);
        if !self.armed {
            self.armed = true;
            self.shared.counters.trap_arms.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Busy again: lifts every protection (waking threads that wait on a doorbell store),
    /// puts the clock page back, and wakes clock readers. The caller refreshes the timer
    /// first when it can (`Hca::update_clock` writes the fresh value into a punched page);
    /// otherwise the last value goes back. Returns how many fault messages were still
    /// queued (their threads were woken).
    pub fn disarm(&mut self) -> usize {
        // Copies of the trapped pages before their stores can land (see `held`).
        let n = self.drain();
        self.pages.unpunch_clock();
        let mut i = 0;
        while i < self.ranges.len() {
            let (r, on) = self.ranges[i];
            match r.kind {
                MapKind::Uar if on => {
                    if self.protect(&r, false).is_err() {
                        // Gone: a thread that faulted there before the unmap still waits.
                        self.wake(r.start, r.len);
                        self.forget(i);
                        continue;
                    }
                    self.ranges[i].1 = false;
                }
                MapKind::Clock => self.wake(r.start, r.len),
                MapKind::Uar => {}
            }
            i += 1;
        }
        self.armed = false;
        self.shared.polled.set_armed(false);
        tracing::trace!(target: "softhca::engine", "trap disarmed");
        // Messages of faults that were just resolved (their threads are awake) would make
        // the next ppoll return at once: read them now.
        n + self.drain()
    }

    /// Whether the engine must not arm yet because a trapped store may not have landed:
    /// the remaining wait, or None. The hold ends when every page a store trapped on
    /// differs from its copy taken before the disarm (the store is done: the thread ran),
    /// or after [`super::timers::HOLDOFF`] (a store of an unchanged value, a reader of the
    /// clock page, or a thread that did not get the CPU: arming then costs at most one
    /// more trap of the same store).
    pub fn held(&mut self, now: std::time::Instant) -> Option<std::time::Duration> {
        let until = self.hold_until?;
        let landed = !self.watch.is_empty()
            && self.watch.iter().all(|w| w.words.iter().enumerate().any(|(i, &v)| self.pages.read_u64(w.page, i * 8) != v));
        if now >= until || landed {
            self.hold_until = None;
            self.watch.clear();
            return None;
        }
        Some(until - now)
    }

    /// Reads every queued fault message. Returns how many there were. Each faulting thread
    /// is woken again explicitly (harmless when the disarm already did), so a fault on an
    /// address we do not know (a range forgotten meanwhile) never leaves a thread waiting.
    pub fn drain(&mut self) -> usize {
        let mut n = 0;
        loop {
            let mut m = sys::Msg::default();
            // SAFETY: reading at most one `uffd_msg` into a live value of that size from
            // our non-blocking userfaultfd.
            let r = unsafe { libc::read(self.fd, (&mut m as *mut sys::Msg).cast(), std::mem::size_of::<sys::Msg>()) };
            if r != std::mem::size_of::<sys::Msg>() as isize {
                break;
            }
            n += 1;
            if m.event == sys::EVENT_PAGEFAULT {
                let page = m.address & !(PAGE_SIZE as u64 - 1);
                let range = self.ranges.iter().find(|(r, _)| (r.start..r.start + r.len).contains(&page)).map(|(r, _)| *r);
                let clock = range.is_some_and(|r| r.kind == MapKind::Clock);
                self.hold_until = Some(std::time::Instant::now() + super::timers::HOLDOFF);
                if let Some(dp) = range.filter(|r| r.kind == MapKind::Uar).and_then(|r| r.device_page(page)) {
                    if self.armed && !self.watch.iter().any(|w| w.page == dp) {
                        let words = (0..PAGE_SIZE / 8).map(|i| self.pages.read_u64(dp, i * 8)).collect();
                        self.watch.push(Watch { page: dp, words });
                    }
                }
                let c = &self.shared.counters;
                if clock {
                    c.trap_clock_faults.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                } else {
                    c.trap_faults.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                tracing::trace!(target: "softhca::doorbell", addr = %format_args!("{:#x}", m.address), flags = m.flags, clock, "trap");
                if !self.armed {
                    // Resolved already (the page is writable / the clock is back): the
                    // thread may still be parked on the message.
                    self.wake(page, PAGE_SIZE as u64);
                }
            }
        }
        self.faults += n as u64;
        n
    }

    /// Whether the clock page is out of the file (its refresh must wait for a read).
    pub fn clock_punched(&self) -> bool {
        self.pages.clock_punched()
    }
}

impl Drop for Trap {
    /// The engine is exiting (HCA dropped, or a bug): release every waiting thread and
    /// close the userfaultfd, which also drops every registration, so no later store can
    /// wait for an engine that is gone.
    fn drop(&mut self) {
        self.disarm();
        let fd = self.shared.trap.lock().fd.take();
        drop(fd);
        trap_owners::release_all(self.owner);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_numbers() {
        // linux/userfaultfd.h as a C compiler computes them.
        assert_eq!(sys::UFFDIO_API, 0xc018_aa3f);
        assert_eq!(sys::UFFDIO_REGISTER, 0xc020_aa00);
        assert_eq!(sys::UFFDIO_UNREGISTER, 0x8010_aa01);
        assert_eq!(sys::UFFDIO_WAKE, 0x8010_aa02);
        assert_eq!(sys::UFFDIO_WRITEPROTECT, 0xc018_aa06);
    }

    #[test]
    fn ranges_map_to_device_pages() {
        let r = Range { start: 0x10000, len: 0x2000, kind: MapKind::Uar, page: 7, id: 1 };
        assert_eq!(r.device_page(0x10000), Some(7));
        assert_eq!(r.device_page(0x11fff), Some(8));
        assert_eq!(r.device_page(0x12000), None);
        assert_eq!(r.device_page(0xffff), None);
    }
}
