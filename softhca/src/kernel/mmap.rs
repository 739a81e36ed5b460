//! mmap of the uverbs fd (`ib_uverbs_mmap` -> `mlx5_ib_mmap`).
//!
//! The page offset carries a command and an index (`uverbs::sys::mlx5::mmap_split`):
//! - 0 REGULAR, 2 WC, 3 NC: static UAR page `index` of a context opened without dynamic
//!   UARs;
//! - 6 ALLOC_WC: allocates the legacy dynamic UAR at `index` (after the static ones);
//! - 5 CORE_CLOCK: the page with the free-running timer, read-only;
//! - 7 CLOCK_INFO: the `mlx5_ib_clock_info` page, read-only;
//! - 1: ENOSYS; anything else: an entry made by UAR_OBJ_ALLOC, looked up by
//!   `cmd << 16 | index` (EINVAL if there is none).
//!
//! Every mapping must be shared and exactly the entry's size (one page); before
//! GET_CONTEXT every mmap is EINVAL (docs/notes/kernel-6.1-uverbs.md §5.2). The pages come from the HCA's
//! device memory ([`crate::pages`]), so the device half sees the doorbells written there.
//!
//! Every UAR and core-clock mapping made here is handed to the device half
//! ([`crate::device::Device::user_mapped`]), which registers it with its doorbell trap:
//! the engine write-protects the application's UAR mappings while it sleeps, so a
//! doorbell store wakes it (see `crate::device::trap`).

use std::sync::Arc;

use nix::errno::Errno;

use uverbs::sys::mlx5::{
    mmap_split, CLOCK_INFO_V1, MMAP_ALLOC_WC, MMAP_CLOCK_INFO, MMAP_CORE_CLOCK, MMAP_GET_CONTIGUOUS_PAGES,
    MMAP_NC_PAGE, MMAP_REGULAR_PAGE, MMAP_WC_PAGE,
};

use crate::device::MapKind;
use crate::hca::Hca;
use crate::pages::{CLOCK_INFO_PAGE, CLOCK_PAGE, PAGE_SIZE};

use super::{FileState, Result};

/// Handles mmap(addr, len, prot, flags, fd, offset) on a uverbs file.
pub(crate) fn mmap(hca: &Arc<Hca>, st: &mut FileState, addr: u64, len: usize, prot: i32, flags: i32, offset: i64)
                   -> Result<u64> {
    // The VFS checks before the driver sees anything.
    let map_type = flags & libc::MAP_TYPE;
    if len == 0 || offset < 0 || offset as u64 & (PAGE_SIZE as u64 - 1) != 0
        || !matches!(map_type, libc::MAP_SHARED | libc::MAP_PRIVATE | libc::MAP_SHARED_VALIDATE) {
        return Err(Errno::EINVAL);
    }
    let vma_len = len.checked_add(PAGE_SIZE - 1).ok_or(Errno::ENOMEM)? & !(PAGE_SIZE - 1);
    let shared = map_type != libc::MAP_PRIVATE;
    let write = prot & libc::PROT_WRITE != 0;
    let exec = prot & libc::PROT_EXEC != 0;
    let pgoff = offset as u64 / PAGE_SIZE as u64;

    let wc = hca.config().write_combining;
    let ctx = st.ctx_mut()?;
    let (cmd, index) = mmap_split(pgoff);
    // `rdma_user_mmap_io`: shared and exactly the entry's size.
    let io_checks = |size: usize| -> Result<()> {
        if !shared || vma_len != size {
            return Err(Errno::EINVAL);
        }
        Ok(())
    };
    let page = match cmd {
        MMAP_WC_PAGE | MMAP_ALLOC_WC | MMAP_NC_PAGE | MMAP_REGULAR_PAGE => {
            if (cmd == MMAP_WC_PAGE || cmd == MMAP_ALLOC_WC) && !wc {
                return Err(Errno::EPERM);
            }
            let bf = ctx.bfregs.as_mut().ok_or(Errno::EINVAL)?;
            if vma_len != PAGE_SIZE {
                return Err(Errno::EINVAL);
            }
            if cmd == MMAP_ALLOC_WC {
                // The legacy dynamic UAR: allocated by this mmap.
                let idx = index as usize + bf.num_static_sys_pages as usize;
                if idx >= bf.num_sys_pages as usize {
                    return Err(Errno::EINVAL);
                }
                let first_bfreg = idx * super::mlx5::NON_FP_BFREGS_PER_UAR as usize;
                if first_bfreg >= bf.total_num_bfregs as usize || bf.sys_pages.get(idx).is_some_and(|p| p.is_some()) {
                    return Err(Errno::EINVAL);
                }
                io_checks(PAGE_SIZE)?;
                let page = hca.pages().alloc().ok_or(Errno::ENOMEM)?;
                let uar = super::methods::uar::new_uar(hca, page, crate::objects::UarKind::BlueFlame, None);
                if let Some(slot) = bf.sys_pages.get_mut(idx) {
                    *slot = Some(uar);
                }
                page
            } else {
                let idx = index as usize;
                if idx >= bf.num_static_sys_pages as usize {
                    return Err(Errno::EINVAL);
                }
                io_checks(PAGE_SIZE)?;
                bf.sys_pages.get(idx).and_then(|p| p.as_ref()).map(|u| u.page).ok_or(Errno::EINVAL)?
            }
        }
        MMAP_GET_CONTIGUOUS_PAGES => return Err(Errno::ENOSYS),
        MMAP_CORE_CLOCK => {
            if vma_len != PAGE_SIZE {
                return Err(Errno::EINVAL);
            }
            if write {
                return Err(Errno::EPERM);
            }
            io_checks(PAGE_SIZE)?;
            hca.update_clock();
            CLOCK_PAGE
        }
        MMAP_CLOCK_INFO => {
            if vma_len != PAGE_SIZE || !shared {
                return Err(Errno::EINVAL);
            }
            if index != CLOCK_INFO_V1 {
                return Err(Errno::EOPNOTSUPP);
            }
            if write || exec {
                return Err(Errno::EPERM);
            }
            CLOCK_INFO_PAGE
        }
        _ => {
            let key = (cmd << 16) | index;
            let uar = ctx.mmap_entries.get(&key).ok_or(Errno::EINVAL)?;
            io_checks(PAGE_SIZE)?;
            uar.page
        }
    };
    let at = hca.pages().map_to_user(page, addr, vma_len, prot, flags)?;
    let kind = match page {
        CLOCK_PAGE => Some(MapKind::Clock),
        // Never rewritten after creation: nothing to trap.
        CLOCK_INFO_PAGE => None,
        _ => Some(MapKind::Uar),
    };
    if let Some(kind) = kind {
        hca.device().user_mapped(kind, page, at, vma_len);
    }
    Ok(at)
}
