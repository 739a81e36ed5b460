//! `ib_umem_get` for an in-process device: the checks the kernel makes when it pins user
//! memory for the HCA (MR buffers, CQ and QP rings, doorbell pages).
//!
//! softhca cannot pin pages, so it checks instead that the range is mapped with the
//! permissions the pin would need, when the command runs: every page of the range must be
//! inside a mapping, writable if the HCA will write there. Like the kernel's FOLL_FORCE
//! pins, a read-only *private* mapping is accepted for a read-only use. The device half
//! later reaches the memory through checked copies, so a range unmapped afterwards gives
//! an access error rather than a crash.

use nix::errno::Errno;

use super::Result;

const PAGE: u64 = 4096;

/// The pages `[addr, addr + len)` spans, as `ib_umem_get` counts them: EINVAL when the
/// range wraps or the page count is 0 or too large.
pub(crate) fn page_range(addr: u64, len: u64) -> Result<(u64, u64)> {
    let end = addr.checked_add(len).ok_or(Errno::EINVAL)?;
    let end_up = end.checked_add(PAGE - 1).ok_or(Errno::EINVAL)? & !(PAGE - 1);
    let start = addr & !(PAGE - 1);
    let npages = (end_up - start) / PAGE;
    if npages == 0 || npages > u32::MAX as u64 {
        return Err(Errno::EINVAL);
    }
    Ok((start, end_up))
}

/// One line of /proc/self/maps that matters here.
struct Vma {
    start: u64,
    end: u64,
    write: bool,
    private: bool,
    special: bool,
}

fn parse_maps(maps: &str) -> impl Iterator<Item = Vma> + '_ {
    maps.lines().filter_map(|line| {
        let mut f = line.split_whitespace();
        let range = f.next()?;
        let perms = f.next()?.as_bytes();
        let path = f.nth(3).unwrap_or("");
        let (s, e) = range.split_once('-')?;
        Some(Vma {
            start: u64::from_str_radix(s, 16).ok()?,
            end: u64::from_str_radix(e, 16).ok()?,
            write: perms.get(1) == Some(&b'w'),
            private: perms.get(3) == Some(&b'p'),
            special: special(path),
        })
    })
}

/// Whether a mapping named `path` (as /proc/self/maps prints it) is device pages.
fn special(path: &str) -> bool {
    // Device pages (UARs, clock) are VM_IO | VM_PFNMAP on a real HCA: get_user_pages
    // refuses them. Here it also keeps the engine from ever writing through an
    // application mapping of a UAR page it may have write-protected (its doorbell
    // trap, crate::device::engine), which would block it on itself.
    path == "[vvar]" || path == "[vsyscall]" || path == "[vvar_vclock]"
        || path.strip_prefix("/memfd:").is_some_and(|n| n.starts_with(crate::pages::MEMFD_NAME))
}

/// Checks that `[addr, addr + len)` could be pinned, `writable` if the HCA writes there.
/// EINVAL for a bad range, EFAULT for unmapped or insufficiently permitted memory.
///
/// Asks the kernel for the mappings that cover the range one by one (`PROCMAP_QUERY`,
/// Linux 6.11), or, where that ioctl is missing, reads all of /proc/self/maps. The
/// first costs a few system calls; the second formats every mapping of the process,
/// tens of microseconds, which a collective registering its buffers at every call
/// would pay each time.
pub(crate) fn pin(addr: u64, len: u64, writable: bool) -> Result<()> {
    let (start, end) = page_range(addr, len)?;
    match query::covering(start, end) {
        Some(vmas) => check(vmas?.into_iter(), start, end, writable),
        None => {
            let maps = std::fs::read_to_string("/proc/self/maps").map_err(|_| Errno::EFAULT)?;
            check(parse_maps(&maps), start, end, writable)
        }
    }
}

/// Whether the mappings `vmas` (in address order) cover `[start, end)` with the
/// permissions a pin needs.
fn check(vmas: impl Iterator<Item = Vma>, start: u64, end: u64, writable: bool) -> Result<()> {
    let mut covered = start;
    for vma in vmas {
        if vma.end <= covered {
            continue;
        }
        if vma.start > covered {
            break;
        }
        if vma.special || (!vma.write && (writable || !vma.private)) {
            return Err(Errno::EFAULT);
        }
        covered = vma.end;
        if covered >= end {
            return Ok(());
        }
    }
    Err(Errno::EFAULT)
}

/// Whether a same-host peer could read `[addr, addr + len)` of this process with
/// `process_vm_readv` (the MR's `by_ref`: its packets then carry a reference instead of
/// the bytes). The kernel answers it with the same page walk (`pin_user_pages_remote`)
/// another process's call makes: one call of this process on itself, a byte each from
/// the range's first, middle and last page, as three remote iovecs; a failing iovec ends
/// the transfer there (process_vm_readv(2): "partial transfers apply at the granularity
/// of iovec elements"), so all three bytes come back only if all three pages can be read.
/// Memory the kernel will not hand to another process (`VM_IO`/`VM_PFNMAP` mappings:
/// some drivers' pinned host memory, dma-buf mappings) fails.
///
/// One call instead of one per byte: the two calls saved are a sixth of what REG_MR and
/// DEREG_MR cost together (5.2 to 4.3 us for 1 MiB on the development VM), paid twice
/// per collective call and rank now that the collective registers per call.
pub(crate) fn cma_readable(addr: u64, len: u64) -> bool {
    if len == 0 {
        return true;
    }
    let Some(last) = addr.checked_add(len - 1) else { return false };
    let mut out = [0u8; 3];
    let local = libc::iovec { iov_base: out.as_mut_ptr().cast(), iov_len: out.len() };
    let remote = [addr, addr + (len - 1) / 2, last].map(|a| libc::iovec { iov_base: a as *mut libc::c_void, iov_len: 1 });
    // SAFETY: the local iovec is `out`, writable for its 3 bytes for the call; the remote
    // ones are only read, by the kernel, which checks them (a short count or EFAULT, never
    // a fault here).
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, remote.as_ptr(), remote.len() as libc::c_ulong, 0) };
    n == out.len() as isize
}

/// `PROCMAP_QUERY` on /proc/self/maps (include/uapi/linux/fs.h).
mod query {
    use std::fs::File;
    use std::os::fd::AsRawFd;
    use std::sync::Mutex;

    use nix::errno::Errno;

    use super::{special, Vma};

    /// `struct procmap_query` (104 bytes).
    #[repr(C)]
    #[derive(Default)]
    pub(super) struct ProcmapQuery {
        pub size: u64,
        pub query_flags: u64,
        pub query_addr: u64,
        pub vma_start: u64,
        pub vma_end: u64,
        pub vma_flags: u64,
        pub vma_page_size: u64,
        pub vma_offset: u64,
        pub inode: u64,
        pub dev_major: u32,
        pub dev_minor: u32,
        pub vma_name_size: u32,
        pub build_id_size: u32,
        pub vma_name_addr: u64,
        pub build_id_addr: u64,
    }
    const _: () = assert!(std::mem::size_of::<ProcmapQuery>() == 104);

    /// `PROCMAP_QUERY_VMA_WRITABLE`, `PROCMAP_QUERY_VMA_SHARED`.
    const VMA_WRITABLE: u64 = 0x02;
    const VMA_SHARED: u64 = 0x08;

    // _IOWR('f', 17, struct procmap_query) = 0xc0686611.
    nix::ioctl_readwrite!(procmap_query, b'f', 17, ProcmapQuery);

    /// The mappings that cover `[start, end)` from `start` on, up to the first gap
    /// (ENOENT), in address order; `None` where the kernel has no PROCMAP_QUERY.
    pub(super) fn covering(start: u64, end: u64) -> Option<Result<Vec<Vma>, Errno>> {
        // Opening /proc/self/maps is a path walk in procfs, dearer than the queries:
        // the file is kept, per process (a child of fork must not ask its parent's).
        static MAPS: Mutex<Option<(u32, File)>> = Mutex::new(None);
        let mut kept = MAPS.lock().unwrap_or_else(|e| e.into_inner());
        let pid = std::process::id();
        if kept.as_ref().is_none_or(|(p, _)| *p != pid) {
            match File::open("/proc/self/maps") {
                Ok(f) => *kept = Some((pid, f)),
                Err(_) => return Some(Err(Errno::EFAULT)),
            }
        }
        let maps = &kept.as_ref().expect("opened above").1;
        let mut out = Vec::new();
        let mut at = start;
        let mut name = [0u8; 256];
        while at < end {
            let mut q = ProcmapQuery {
                size: std::mem::size_of::<ProcmapQuery>() as u64,
                query_addr: at,
                vma_name_size: name.len() as u32,
                vma_name_addr: name.as_mut_ptr() as u64,
                ..ProcmapQuery::default()
            };
            // SAFETY: `q` is a valid procmap_query of the size it states, and its name
            // buffer is `name`, writable for vma_name_size bytes, alive across the call.
            match unsafe { procmap_query(maps.as_raw_fd(), &mut q) } {
                Ok(_) => {}
                // No mapping covers `at`: a gap (the check refuses it).
                Err(Errno::ENOENT) => break,
                Err(Errno::ENOTTY) | Err(Errno::EINVAL) if out.is_empty() && at == start => return None,
                Err(_) => return Some(Err(Errno::EFAULT)),
            }
            // vma_name_size comes back with the name's length including its NUL (0: no name).
            let n = (q.vma_name_size as usize).saturating_sub(1).min(name.len());
            let path = std::str::from_utf8(&name[..n]).unwrap_or("");
            out.push(Vma {
                start: q.vma_start,
                end: q.vma_end,
                write: q.vma_flags & VMA_WRITABLE != 0,
                private: q.vma_flags & VMA_SHARED == 0,
                special: special(path),
            });
            if q.vma_end <= at {
                break;
            }
            at = q.vma_end;
        }
        Some(Ok(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(page_range(0x1000, 0), Err(Errno::EINVAL));
        assert_eq!(page_range(0x1001, 0), Ok((0x1000, 0x2000)));
        assert_eq!(page_range(0x1fff, 2), Ok((0x1000, 0x3000)));
        assert_eq!(page_range(u64::MAX - 10, 20), Err(Errno::EINVAL));
        assert_eq!(page_range(u64::MAX - 10, 5), Err(Errno::EINVAL), "page align overflows");
    }

    #[test]
    fn pins_heap_rejects_unmapped_and_readonly() {
        let v = vec![0u8; 3 * 4096];
        pin(v.as_ptr() as u64, v.len() as u64, true).unwrap();
        assert_eq!(pin(16, 8, false), Err(Errno::EFAULT));
        // SAFETY: an anonymous read-only shared mapping made and unmapped by this test.
        let ro = unsafe {
            libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(ro, libc::MAP_FAILED);
        assert_eq!(pin(ro as u64, 64, true), Err(Errno::EFAULT));
        assert_eq!(pin(ro as u64, 64, false), Err(Errno::EFAULT), "shared read-only cannot be forced");
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(ro, 4096) };
        assert_eq!(pin(ro as u64, 64, false), Err(Errno::EFAULT));
        let s: &'static [u8] = b"private read-only data";
        pin(s.as_ptr() as u64, s.len() as u64, false).unwrap();
        assert_eq!(pin(s.as_ptr() as u64, s.len() as u64, true), Err(Errno::EFAULT));
    }

    /// The kernel's PROCMAP_QUERY answers and the text of /proc/self/maps describe the
    /// same mappings: every mapping of the text, queried at its start, comes back with the
    /// same bounds, permissions and device-page verdict (where the kernel has the ioctl;
    /// a kernel before 6.11 has only the text, which the other tests check).
    #[test]
    fn query_agrees_with_the_maps_text() {
        let pages = crate::pages::DevicePages::new(1).unwrap();
        let page = pages.alloc().unwrap();
        let user = pages.map_to_user(page, 0, 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED).unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let text: Vec<Vma> = parse_maps(&maps).filter(|v| v.start < 0xffff_ffff_ffff_0000).collect();
        assert!(text.iter().any(|v| v.start == user && v.special), "the device page is in the text");
        let mut compared = 0;
        for v in &text {
            let Some(q) = query::covering(v.start, v.start + 1) else {
                testkit::skip(testkit::Need::Kernel, "no PROCMAP_QUERY in this kernel (Linux 6.11 or later)");
                return;
            };
            let q = q.unwrap();
            // A mapping may have changed between the read and the query (another
            // thread's mmap); the ones that did not must agree.
            let Some(q) = q.first() else { continue };
            if q.start != v.start || q.end != v.end {
                continue;
            }
            assert_eq!((q.write, q.private, q.special), (v.write, v.private, v.special), "mapping {:#x}-{:#x}", v.start, v.end);
            compared += 1;
        }
        assert!(compared * 2 > text.len(), "only {compared} of {} mappings compared", text.len());
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(user as *mut libc::c_void, 4096) };
    }

    /// Ordinary memory is readable by reference; a range with an unmapped page at its
    /// start, middle or end is not.
    #[test]
    fn cma_probe_tells_mapped_from_unmapped() {
        let v = vec![7u8; 3 * 4096];
        let m = memmap2::MmapMut::map_anon(5 * 4096).unwrap();
        let base = m.as_ptr() as u64;
        // SAFETY: unmaps pages 1 and 3 of our own anonymous mapping, which nothing else
        // uses; `m` unmaps the rest (munmap of an already unmapped page is harmless).
        unsafe {
            libc::munmap((base + 4096) as *mut libc::c_void, 4096);
            libc::munmap((base + 3 * 4096) as *mut libc::c_void, 4096);
        }
        let cases = [
            (v.as_ptr() as u64, v.len() as u64, true),
            (v.as_ptr() as u64 + 1, 1, true),
            (base, 4096, true),
            (base + 2 * 4096, 4096, true),
            (base, 3 * 4096, false),            // the middle page is gone
            (base + 4096, 4096, false),         // starts in a hole
            (base + 2 * 4096, 2 * 4096, false), // ends in a hole
            (base + 4095, 2, false),            // the last byte is in the hole
            (u64::MAX - 1, 8, false),           // wraps
            (16, 8, false),
            (base, 0, true),
        ];
        for (addr, len, want) in cases {
            assert_eq!(cma_readable(addr, len), want, "{addr:#x}+{len}");
        }
        // softhca's device pages are shared memory (a memfd), not VM_IO/VM_PFNMAP: the
        // kernel hands them to a peer's process_vm_readv like any other page.
        let pages = crate::pages::DevicePages::new(1).unwrap();
        let page = pages.alloc().unwrap();
        let user = pages.map_to_user(page, 0, 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED).unwrap();
        assert!(cma_readable(user, 64));
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(user as *mut libc::c_void, 4096) };
    }

    #[test]
    fn device_pages_cannot_be_pinned() {
        let pages = crate::pages::DevicePages::new(4).unwrap();
        let page = pages.alloc().unwrap();
        let user = pages.map_to_user(page, 0, 4096, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED).unwrap();
        assert_eq!(pin(user, 64, true), Err(Errno::EFAULT), "a UAR page is not memory the HCA may DMA to");
        assert_eq!(pin(user, 64, false), Err(Errno::EFAULT));
        // SAFETY: unmapping the test's own mapping.
        unsafe { libc::munmap(user as *mut libc::c_void, 4096) };
    }
}
