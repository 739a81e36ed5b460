//! DevX UARs: the doorbell page a DevX CQ or QP context names by `uar_page`.
//!
//! As `mlx5dv_devx_alloc_uar` does: on a context with dynamic UARs (what Linux gives
//! a library asking for DYN_UAR) a dedicated page is allocated as a `MLX5_IB_OBJECT_UAR`
//! and its `page_id` is the device index. On a context with static UARs, a *dynamic
//! bfreg* page is allocated by mapping it (`mmap` command `MLX5_IB_MMAP_ALLOC_WC` at the
//! next free dynamic page index) and its device index comes from DEVX_QUERY_UAR, which
//! takes the dynamic bfreg's number (`bfregn_to_uar_index(.., dyn_bfreg = true)` in
//! mlx5_ib): the static pages belong to the library's verbs QPs.

use provider::buf::page_size;
use provider::uar::{UarPage, NON_FP_BFREGS_PER_UAR};
use uverbs::sys::ids::mlx5::{UAR_ALLOC_TYPE_BF, UAR_ALLOC_TYPE_NC};
use uverbs::sys::mlx5::{mmap_pgoff, MMAP_ALLOC_WC};
use uverbs::Mapping;

use crate::context::DevxContext;
use crate::error::{Error, Result};

#[derive(Debug)]
enum Page {
    /// A `MLX5_IB_OBJECT_UAR`, destroyed on drop.
    Object(UarPage),
    /// A dynamic bfreg page, freed with the context (Linux keeps it until close).
    Mapped(Mapping),
}

/// A mapped UAR page and the index the device knows it by.
#[derive(Debug)]
pub struct Uar {
    devx: DevxContext,
    page: Page,
    dev_idx: u32,
}

impl DevxContext {
    /// A UAR for DevX objects: write-combining (BlueFlame) when `nc` is false, else
    /// non-cached.
    pub fn alloc_uar(&self, nc: bool) -> Result<Uar> {
        let dev = self.device();
        if self.context().ucontext().tot_bfregs == 0 {
            let ty = if nc { UAR_ALLOC_TYPE_NC } else { UAR_ALLOC_TYPE_BF };
            let page = UarPage::alloc_dynamic(dev, ty)?;
            let dev_idx = page.page_id;
            Ok(Uar { devx: self.clone(), page: Page::Object(page), dev_idx })
        } else {
            // The first dynamic page this context has not mapped yet (the kernel answers
            // EINVAL for a taken one); bfregs come two to a 4 KiB page.
            let pages = self.context().ucontext().num_dyn_bfregs / NON_FP_BFREGS_PER_UAR;
            let mut last = nix::errno::Errno::ENOMEM;
            for index in 0..pages {
                let off = mmap_pgoff(MMAP_ALLOC_WC, index) * page_size() as u64;
                match dev.mmap(page_size(), libc::PROT_WRITE, off) {
                    Ok(map) => {
                        let dev_idx = self.query_uar(index * NON_FP_BFREGS_PER_UAR)?;
                        return Ok(Uar { devx: self.clone(), page: Page::Mapped(map), dev_idx });
                    }
                    Err(e) => last = e,
                }
            }
            Err(Error::Os { op: "devx alloc_uar (no free dynamic bfreg page)", errno: last })
        }
    }
}

impl Uar {
    /// The device's index of the page (`uar_page` in a CQ or QP context).
    pub fn page_id(&self) -> u32 {
        self.dev_idx
    }

    /// The mapped page.
    pub fn base(&self) -> *mut u8 {
        match &self.page {
            Page::Object(p) => p.base(),
            Page::Mapped(m) => m.as_ptr(),
        }
    }

    /// The first BlueFlame register (page + 0x800): where a QP on this page rings.
    pub fn bf_reg(&self) -> *mut u8 {
        // SAFETY: the page is 4 KiB and BF_OFFSET is inside it.
        unsafe { self.base().add(prm::uar::BF_OFFSET) }
    }
}

impl Drop for Uar {
    fn drop(&mut self) {
        if let Page::Object(p) = &self.page {
            p.destroy(self.devx.device());
        }
    }
}

