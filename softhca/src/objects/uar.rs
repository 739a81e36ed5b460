//! User Access Region pages: the doorbell pages an application maps from the device fd.
//!
//! On a ConnectX a UAR page is a 4 KiB window of the PCI BAR: the 8-byte doorbell and
//! BlueFlame writes of the provider land there. In softhca each UAR page is a page of the
//! HCA's shared memory file ([`crate::pages`]): the application maps it through mmap of the
//! uverbs fd, and the device half reads the same page through the HCA's own mapping.

use std::sync::Arc;

use super::Live;
use crate::pages::DevicePages;

/// How the application asked for the page (`MLX5_IB_UAPI_UAR_ALLOC_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UarKind {
    /// BlueFlame: mapped write-combining, doorbells plus WQE copies at 0x800/0xa00.
    BlueFlame,
    /// Non-cached: 8-byte doorbells only.
    NonCached,
}

/// A UAR page owned by one context: either a dynamic UAR object (UAR_OBJ_ALLOC) or one of
/// the context's static pages.
#[derive(Debug)]
pub struct UarObj {
    /// The page id: what the provider passes as `bfreg_index`/`uar_page_index` and what
    /// CQ and QP contexts record. Equal to the page's index in [`DevicePages`].
    pub page: u32,
    pub kind: UarKind,
    /// The mmap entry key (`cmd << 16 | index`) for dynamic UARs; None for static pages.
    pub mmap_key: Option<u32>,
    pub(crate) pages: Arc<DevicePages>,
    pub(crate) _live: Live,
}

impl Drop for UarObj {
    fn drop(&mut self) {
        self.pages.free(self.page);
    }
}
