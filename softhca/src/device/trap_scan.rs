//! Finding the application's mappings of the device page file that the kernel half never
//! saw, so that the doorbell trap ([`super::trap`]) protects them too.
//!
//! Why: the uverbs fd a program holds under the preload library is a dup of the device
//! page memfd, laid out at mlx5_ib's mmap offsets ([`crate::pages`]). A program whose
//! `mmap` does not reach the preload's hook (UCX's bistro patches `mmap` and issues the
//! system call itself; some code calls `syscall(SYS_mmap, ...)`) still gets the right UAR
//! or clock page, but the trap never hears of that mapping: an armed engine sleeps
//! through every doorbell rung there, and a punched clock page reads back as zeros.
//!
//! How: the kernel's own list of the process's mappings, `/proc/self/maps`, names every
//! mapping of a file by device and inode and says at which file offset it starts; the
//! offset tells which device page each of its pages is. [`scan`] lists the mappings of
//! this HCA's memfd (not its own mapping of the whole file), [`pieces`] cuts each into
//! runs of UAR pages and of the clock page, and [`uncovered`] drops what the trap has
//! registered already. The rest is registered like a mapping the kernel half made.
//!
//! When: reading the maps costs tens of microseconds (more in a process with thousands of
//! mappings) and takes the process's mmap lock, so the trap does not read them on every
//! arm. It reads them only while it expects a mapping it has not registered, and only
//! when a program holds an fd of the file at all ([`crate::pages::DevicePages::handed_out`]:
//! in-process users map through the kernel half, which registers every mapping). The
//! kernel half announces what will be mapped ([`crate::device::Device::expect_mappings`]):
//! a context's static UAR pages and one clock mapping per new context (libmlx5 maps both
//! in `mlx5_set_context`, right after GET_CONTEXT), and each UAR object's page. A UAR
//! range whose mapping went away (its protect fails with ENOENT) is expected again: the
//! program may have mapped its page elsewhere. While anything is expected the trap reads
//! the maps at each arm that is due ([`Sweep`]: at once, then after gaps from
//! [`SWEEP_MIN`] doubling up to [`SWEEP_MAX`]), the engine's armed sleep ends at the next
//! one, and the clock page stays in the file (the engine refreshes it at each wake-up
//! instead of punching it, since a read of a punched page through an unregistered
//! mapping would bring in a page of zeros). An expectation is met by a registration of
//! either origin, so a program whose mmap comes through the preload's hook rarely reads
//! the maps at all; one that never maps what it was given (a context that never maps the
//! clock page) stops the sweeps after [`GIVE_UP`], and the trap sleeps as before.
//!
//! What this cannot see: a mapping made past the kernel half after the expectation for
//! its page was met or given up (a second mapping of a page already mapped, a page mapped
//! more than [`GIVE_UP`] after it was handed out), or of a page the kernel half did not
//! announce (one a DevX ALLOC_UAR command allocated, which mlx5_ib would not let a program
//! map at all). Static UARs (a context without dynamic UARs) and the legacy dynamic UAR
//! (`MMAP_ALLOC_WC`) have mmap offsets that are not their pages' file offsets, so a
//! mapping of them past the kernel half maps a hole, which nothing here can mend; their
//! expectations are given up.
//!
//! Races: between the read of the maps and the registration the program could unmap a
//! range and map something else there. A registration stays with the mapping it was made
//! on, so when anything was registered the trap reads the maps once more
//! ([`maps_page`]): a registration whose range no longer maps its page is undone, and a
//! failed one only turns the trap off if the mapping is still there. What is left is a
//! range unmapped and mapped again after that second read, which any registration has
//! (the next protect fails with ENOENT and the page is expected again).

use std::io;
use std::time::{Duration, Instant};

use crate::pages::{CLOCK_PAGE, FIRST_UAR_PAGE, PAGE_SIZE};

use super::trap::MapKind;

/// First gap between two reads of the maps while a mapping is expected.
pub const SWEEP_MIN: Duration = Duration::from_micros(500);
/// Longest gap (also the staleness of the clock page meanwhile: it is not punched).
pub const SWEEP_MAX: Duration = super::timers::SLEEP_DEEP;
/// How long an expectation stays open without being met.
pub const GIVE_UP: Duration = Duration::from_secs(1);

/// A file as `/proc/<pid>/maps` names it: device number and inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileId {
    pub major: u32,
    pub minor: u32,
    pub ino: u64,
}

impl FileId {
    /// The file behind `fd`.
    pub fn of(fd: std::os::fd::RawFd) -> io::Result<FileId> {
        let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: fstat writes a `struct stat` into the buffer we pass.
        if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fstat succeeded, so the buffer is initialized.
        let st = unsafe { st.assume_init() };
        Ok(FileId { major: libc::major(st.st_dev), minor: libc::minor(st.st_dev), ino: st.st_ino })
    }
}

/// One mapping of the file: `[start, end)` maps the file from page `pgoff` on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
}

/// The shared mappings of `file` in the text of a maps file, except those inside `skip`
/// (the HCA's own mapping). A line is `start-end perms offset major:minor inode [path]`, all
/// numbers hexadecimal except the inode (fs/proc/task_mmu.c, `show_vma_header_prefix`).
pub fn parse_maps(text: &str, file: FileId, skip: (u64, u64)) -> Vec<Vma> {
    let hex = |s: &str| u64::from_str_radix(s, 16).ok();
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_ascii_whitespace();
            let (range, perms, off, dev, ino) = (f.next()?, f.next()?, f.next()?, f.next()?, f.next()?);
            // A private mapping holds copies: stores there never reach the device (mlx5_ib
            // refuses to make one; softhca's kernel half too).
            if perms.as_bytes().get(3) != Some(&b's') {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            let (maj, min) = dev.split_once(':')?;
            if ino.parse::<u64>().ok()? != file.ino || hex(maj)? != file.major as u64 || hex(min)? != file.minor as u64 {
                return None;
            }
            let v = Vma { start: hex(s)?, end: hex(e)?, pgoff: hex(off)? / PAGE_SIZE as u64 };
            let inside_skip = v.start >= skip.0 && v.end <= skip.0 + skip.1;
            (v.end > v.start && !inside_skip).then_some(v)
        })
        .collect()
}

/// The mappings of `file` in this process (see [`parse_maps`]).
pub fn scan(file: FileId, skip: (u64, u64)) -> io::Result<Vec<Vma>> {
    Ok(parse_maps(&std::fs::read_to_string("/proc/self/maps")?, file, skip))
}

/// What the trap registers of a mapping: runs of consecutive pages of one kind, as
/// `(kind, first device page, start, len)`. UAR pages are those from
/// [`FIRST_UAR_PAGE`] up to `npages`; the clock page is [`CLOCK_PAGE`]; the rest (the
/// clock-info record, holes) is never rewritten and needs no trap.
pub fn pieces(v: &Vma, npages: u32) -> Vec<(MapKind, u32, u64, u64)> {
    let kind = |p: u64| match p {
        p if p == CLOCK_PAGE as u64 => Some(MapKind::Clock),
        p if p >= FIRST_UAR_PAGE as u64 && p < npages as u64 => Some(MapKind::Uar),
        _ => None,
    };
    let mut out: Vec<(MapKind, u32, u64, u64)> = Vec::new();
    let pages = (v.end - v.start) / PAGE_SIZE as u64;
    for i in 0..pages {
        let page = v.pgoff + i;
        let Some(k) = kind(page) else { continue };
        let at = v.start + i * PAGE_SIZE as u64;
        match out.last_mut() {
            // The clock is one page: two clock pages in a row are two mappings' worth.
            Some(last) if last.0 == k && k == MapKind::Uar && last.2 + last.3 == at => last.3 += PAGE_SIZE as u64,
            _ => out.push((k, page as u32, at, PAGE_SIZE as u64)),
        }
    }
    out
}

/// Whether one of `vmas` maps `[start, start + len)` from device page `page` on.
pub fn maps_page(vmas: &[Vma], start: u64, len: u64, page: u32) -> bool {
    vmas.iter().any(|v| {
        v.start <= start && start + len <= v.end && v.pgoff + (start - v.start) / PAGE_SIZE as u64 == page as u64
    })
}

/// The parts of `[start, start + len)` that no range in `known` (`(start, len)` pairs)
/// covers.
pub fn uncovered(start: u64, len: u64, known: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut k: Vec<(u64, u64)> = known.iter().copied().filter(|&(s, l)| s < start + len && start < s + l).collect();
    k.sort_unstable();
    let mut out = Vec::new();
    let mut at = start;
    for (s, l) in k {
        if s > at {
            out.push((at, s - at));
        }
        at = at.max(s + l);
    }
    if at < start + len {
        out.push((at, start + len - at));
    }
    out
}

/// When to read the maps while mappings are expected (see the module docs).
#[derive(Debug)]
pub struct Sweep {
    /// Since when an expectation is open (None: all met).
    since: Option<Instant>,
    /// When the maps are read next, and the gap after that.
    next: Instant,
    gap: Duration,
    /// Maps read so far.
    pub scans: u64,
}

/// What [`Sweep::step`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing is expected.
    Met,
    /// Something was expected for [`GIVE_UP`]: stop expecting it.
    GaveUp,
    /// Something is expected: read the maps now.
    Scan,
    /// Something is expected, the next read is not due yet.
    Wait,
}

impl Sweep {
    pub fn new(now: Instant) -> Sweep {
        Sweep { since: None, next: now, gap: SWEEP_MIN, scans: 0 }
    }

    /// Decides at an arm: `open` says whether a mapping is still expected.
    pub fn step(&mut self, now: Instant, open: bool) -> Verdict {
        if !open {
            self.since = None;
            return Verdict::Met;
        }
        let since = match self.since {
            Some(s) => s,
            None => {
                self.since = Some(now);
                self.next = now;
                self.gap = SWEEP_MIN;
                now
            }
        };
        if now.duration_since(since) >= GIVE_UP {
            self.since = None;
            return Verdict::GaveUp;
        }
        if now < self.next {
            return Verdict::Wait;
        }
        self.scans += 1;
        self.next = now + self.gap;
        self.gap = (self.gap * 2).min(SWEEP_MAX);
        Verdict::Scan
    }

    /// When the next read is due, while an expectation is open.
    pub fn due(&self) -> Option<Instant> {
        self.since.map(|_| self.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: FileId = FileId { major: 0, minor: 1, ino: 2087 };

    #[test]
    fn maps_lines_of_the_file_only() {
        // As Linux 6.x prints them (memfds live on the internal shmem mount, 00:01).
        let text = "\
55d0c6a00000-55d0c6a22000 r--p 00000000 fd:01 1311 /usr/bin/prog
7f1000000000-7f1000020000 rw-s 00000000 00:01 2087 /memfd:softhca-device-pages (deleted)
7f2000000000-7f2000001000 -w-s 00900000 00:01 2087 /memfd:softhca-device-pages (deleted)
7f2000001000-7f2000002000 r--s 00500000 00:01 2087 /memfd:softhca-device-pages (deleted)
7f2000003000-7f2000004000 -w-s 00901000 00:01 2088 /memfd:softhca-device-pages (deleted)
7f2000005000-7f2000006000 -w-s 00901000 01:01 2087 /memfd:softhca-device-pages (deleted)
7f2000007000-7f2000008000 rw-p 00901000 00:01 2087 /memfd:softhca-device-pages (deleted)
7ffd1c000000-7ffd1c021000 rw-p 00000000 00:00 0 [stack]
";
        let v = parse_maps(text, FILE, (0x7f10_0000_0000, 0x20000));
        assert_eq!(v, vec![
            Vma { start: 0x7f20_0000_0000, end: 0x7f20_0000_1000, pgoff: 0x900 },
            Vma { start: 0x7f20_0000_1000, end: 0x7f20_0000_2000, pgoff: 0x500 },
        ]);
    }

    #[test]
    fn this_process_sees_its_own_mapping_by_inode() {
        let pages = crate::pages::DevicePages::new(4).unwrap();
        let a = pages.map_to_user(FIRST_UAR_PAGE + 1, 0, PAGE_SIZE, libc::PROT_WRITE, libc::MAP_SHARED).unwrap();
        let v = scan(pages.file_id().unwrap(), pages.own_range()).unwrap();
        assert_eq!(v, vec![Vma { start: a, end: a + PAGE_SIZE as u64, pgoff: FIRST_UAR_PAGE as u64 + 1 }]);
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(a as *mut libc::c_void, PAGE_SIZE) };
        assert_eq!(scan(pages.file_id().unwrap(), pages.own_range()).unwrap(), vec![]);
    }

    #[test]
    fn pieces_by_kind() {
        let p = PAGE_SIZE as u64;
        // Three pages from the first UAR page, in a file with two UAR pages.
        let v = Vma { start: 0x10000, end: 0x10000 + 3 * p, pgoff: FIRST_UAR_PAGE as u64 };
        assert_eq!(pieces(&v, FIRST_UAR_PAGE + 2), vec![(MapKind::Uar, FIRST_UAR_PAGE, 0x10000, 2 * p)]);
        let v = Vma { start: 0x20000, end: 0x20000 + 2 * p, pgoff: CLOCK_PAGE as u64 - 1 };
        assert_eq!(pieces(&v, FIRST_UAR_PAGE + 2), vec![(MapKind::Clock, CLOCK_PAGE, 0x20000 + p, p)]);
        let v = Vma { start: 0x30000, end: 0x30000 + p, pgoff: 0x700 };
        assert_eq!(pieces(&v, FIRST_UAR_PAGE + 2), vec![]);
    }

    #[test]
    fn a_range_is_still_the_page_it_was() {
        let p = PAGE_SIZE as u64;
        let v = [Vma { start: 0x10000, end: 0x10000 + 2 * p, pgoff: 0x900 }];
        assert!(maps_page(&v, 0x10000, p, 0x900));
        assert!(maps_page(&v, 0x10000 + p, p, 0x901));
        assert!(!maps_page(&v, 0x10000 + p, p, 0x900), "another page there now");
        assert!(!maps_page(&v, 0x10000 + p, 2 * p, 0x901), "partly unmapped");
        assert!(!maps_page(&[], 0x10000, p, 0x900));
    }

    #[test]
    fn uncovered_parts() {
        assert_eq!(uncovered(100, 50, &[]), vec![(100, 50)]);
        assert_eq!(uncovered(100, 50, &[(100, 50)]), vec![]);
        assert_eq!(uncovered(100, 50, &[(110, 10), (0, 105), (140, 100)]), vec![(105, 5), (120, 20)]);
        assert_eq!(uncovered(100, 50, &[(0, 100), (150, 10)]), vec![(100, 50)]);
    }

    #[test]
    fn sweep_reads_at_once_then_backs_off_then_gives_up() {
        let t0 = Instant::now();
        let mut s = Sweep::new(t0);
        assert_eq!(s.step(t0, false), Verdict::Met);
        assert_eq!(s.due(), None);
        // Expected: read now, then not before the gap, which doubles.
        assert_eq!(s.step(t0, true), Verdict::Scan);
        assert_eq!(s.step(t0 + SWEEP_MIN / 2, true), Verdict::Wait);
        assert_eq!(s.due(), Some(t0 + SWEEP_MIN));
        assert_eq!(s.step(t0 + SWEEP_MIN, true), Verdict::Scan);
        assert_eq!(s.due(), Some(t0 + SWEEP_MIN * 3));
        // Met: no more reads.
        assert_eq!(s.step(t0 + SWEEP_MIN * 3, false), Verdict::Met);
        assert_eq!(s.due(), None);
        // Expected again, never met: the gaps stop growing at SWEEP_MAX, and it gives up.
        let t1 = t0 + Duration::from_secs(5);
        assert_eq!(s.step(t1, true), Verdict::Scan);
        let mut reads = 1;
        let t = loop {
            let t = s.due().expect("open");
            match s.step(t, true) {
                Verdict::Scan => reads += 1,
                Verdict::GaveUp => break t,
                v => panic!("{v:?} at a due time"),
            }
            assert!(s.due().unwrap() - t <= SWEEP_MAX);
        };
        assert!(t >= t1 + GIVE_UP && t < t1 + GIVE_UP + SWEEP_MAX, "gave up at {:?}", t - t1);
        assert!(reads <= 1 + GIVE_UP.as_micros() / SWEEP_MAX.as_micros() + 8, "{reads} reads");
        assert_eq!(s.due(), None);
        assert_eq!(s.scans, 2 + reads as u64);
    }
}
