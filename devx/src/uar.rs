//! DevX UARs: the doorbell page a DevX CQ or QP context names by `uar_page`.
//!
//! As `mlx5dv_devx_alloc_uar` does: on a context with dynamic UARs (what Linux gives
//! a library asking for DYN_UAR) a dedicated page is allocated as a `MLX5_IB_OBJECT_UAR`
//! and its `page_id` is the device index; on a context with static UARs the first
//! static page is mapped and its device index comes from DEVX_QUERY_UAR.

use provider::uar::UarPage;
use uverbs::sys::ids::mlx5::{UAR_ALLOC_TYPE_BF, UAR_ALLOC_TYPE_NC};

use crate::context::DevxContext;
use crate::error::Result;

/// A mapped UAR page and the index the device knows it by.
#[derive(Debug)]
pub struct Uar {
    devx: DevxContext,
    page: UarPage,
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
            Ok(Uar { devx: self.clone(), page, dev_idx })
        } else {
            let page = UarPage::map_legacy(dev, 0)?;
            let dev_idx = self.query_uar(0)?;
            Ok(Uar { devx: self.clone(), page, dev_idx })
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
        self.page.base()
    }

    /// The first BlueFlame register (page + 0x800): where a QP on this page rings.
    pub fn bf_reg(&self) -> *mut u8 {
        // SAFETY: the page is 4 KiB and BF_OFFSET is inside it.
        unsafe { self.page.base().add(prm::uar::BF_OFFSET) }
    }
}

impl Drop for Uar {
    fn drop(&mut self) {
        self.page.destroy(self.devx.device());
    }
}

