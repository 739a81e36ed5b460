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
            // Device pages (UARs, clock) are VM_IO | VM_PFNMAP on a real HCA: get_user_pages
            // refuses them. Here it also keeps the engine from ever writing through an
            // application mapping of a UAR page it may have write-protected (its doorbell
            // trap, crate::device::engine), which would block it on itself.
            special: path == "[vvar]" || path == "[vsyscall]" || path == "[vvar_vclock]"
                || path.strip_prefix("/memfd:").is_some_and(|n| n.starts_with(crate::pages::MEMFD_NAME)),
        })
    })
}

/// Checks that `[addr, addr + len)` could be pinned, `writable` if the HCA writes there.
/// EINVAL for a bad range, EFAULT for unmapped or insufficiently permitted memory.
pub(crate) fn pin(addr: u64, len: u64, writable: bool) -> Result<()> {
    let (start, end) = page_range(addr, len)?;
    let maps = std::fs::read_to_string("/proc/self/maps").map_err(|_| Errno::EFAULT)?;
    let mut covered = start;
    for vma in parse_maps(&maps) {
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
