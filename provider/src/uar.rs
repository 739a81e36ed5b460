//! UAR pages and BlueFlame registers: where the provider rings the doorbell.
//!
//! A UAR ("user access region") is a 4 KiB page of device registers mapped into the
//! process. Writing the first 8 bytes of a WQE's control segment to a BlueFlame
//! register at page + 0x800 (+ k * bf_reg_size) tells the device that the SQ has new
//! work; writing a whole small WQE there (a "BlueFlame copy") saves the device the
//! fetch. The CQ arm doorbell sits at page + 0x20.
//!
//! Two ways to get pages, chosen by the device's GET_CONTEXT answer:
//! * dynamic (`tot_bfregs == 0`, what Linux does when the library asks for DYN_UAR):
//!   each page is a `MLX5_IB_OBJECT_UAR` object allocated by ioctl and mapped at the
//!   offset the device returns; one non-cached page is shared for CQ arming;
//! * legacy (`tot_bfregs > 0`): `tot_bfregs / 4` pages mapped at open by index.

use std::sync::{Arc, Mutex};

use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::{mlx5, object};
use prm::uar::BF_OFFSET;
use uverbs::sys::mlx5::{mmap_pgoff, AllocUcontextResp, MMAP_REGULAR_PAGE};
use uverbs::{Device, Mapping};

use crate::buf::page_size;
use crate::error::{Op, Result};

/// BlueFlame registers per UAR (`bfreg_index` numbering) and those the kernel hands
/// out (`tot_bfregs` counts these, so a context has `tot_bfregs / 2` static pages):
/// the UAR layout is the `prm` crate's.
pub use prm::uar::{BFREGS_PER_UAR, NON_FP_BFREGS_PER_UAR};

/// A mapped UAR page.
#[derive(Debug)]
pub struct UarPage {
    map: Mapping,
    /// The `MLX5_IB_OBJECT_UAR` handle in dynamic mode.
    handle: Option<u32>,
    /// The page index the device knows it by (create CQ/QP name it).
    pub page_id: u32,
}

impl UarPage {
    /// Allocates and maps a dynamic UAR page of the given type
    /// (`UAR_ALLOC_TYPE_BF` or `UAR_ALLOC_TYPE_NC`).
    pub fn alloc_dynamic(dev: &Device, ty: u32) -> Result<UarPage> {
        let (mut off, mut len, mut page_id) = (0u64, 0u32, 0u32);
        let mut c = Ioctl::new(object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC);
        let h = c.new_handle(mlx5::ATTR_UAR_OBJ_ALLOC_HANDLE);
        c.in_const(mlx5::ATTR_UAR_OBJ_ALLOC_TYPE, ty as u64);
        c.out_struct(mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &mut off);
        c.out_struct(mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &mut len);
        c.out_struct(mlx5::ATTR_UAR_OBJ_ALLOC_PAGE_ID, &mut page_id);
        c.run(dev).op("alloc UAR")?;
        let handle = c.handle_out(h);
        let map = dev.mmap(len as usize, libc::PROT_WRITE, off).op("mmap UAR")?;
        Ok(UarPage { map, handle: Some(handle), page_id })
    }

    /// Maps legacy static UAR `index`.
    pub fn map_legacy(dev: &Device, index: u32) -> Result<UarPage> {
        let off = mmap_pgoff(MMAP_REGULAR_PAGE, index) * page_size() as u64;
        let map = dev.mmap(page_size(), libc::PROT_WRITE, off).op("mmap UAR")?;
        Ok(UarPage { map, handle: None, page_id: index })
    }

    /// Base address of the page.
    pub fn base(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Releases the page object on the device (dynamic mode); the mapping goes on drop.
    pub fn destroy(&self, dev: &Device) {
        if let Some(h) = self.handle {
            let mut c = Ioctl::new(object::MLX5_UAR, mlx5::UAR_OBJ_DESTROY);
            c.handle(mlx5::ATTR_UAR_OBJ_DESTROY_HANDLE, h);
            // Like libmlx5 at close: an error here leaves nothing to undo.
            let _ = c.run(dev);
        }
    }
}

/// A BlueFlame register: where one QP rings its doorbell.
#[derive(Debug, Clone)]
pub struct Bfreg {
    /// The mapped UAR page the registers are in (kept alive by every user).
    pub page: Arc<UarPage>,
    /// Offset of the register in the page (0x800 + k * bf_reg_size).
    pub offset: usize,
    /// Bytes of each of the two alternating BlueFlame buffers (bf_reg_size / 2);
    /// 0 means "8-byte doorbell writes only".
    pub buf_size: usize,
    /// Index the device knows this register by (legacy mode's bfreg_index).
    pub index: u32,
}

impl Bfreg {
    /// Address of the register.
    pub fn reg(&self) -> *mut u8 {
        // SAFETY: offset < page size by construction.
        unsafe { self.page.base().add(self.offset) }
    }
}

/// The context's UAR pages and the registers handed to QPs.
pub struct UarPool {
    dynamic: bool,
    bf_reg_size: usize,
    /// Legacy: pages mapped at open. Dynamic: BF pages allocated so far.
    pages: Vec<Arc<UarPage>>,
    /// Registers not in use.
    free: Vec<Bfreg>,
    /// The page used for CQ arming (and for doorbells when BlueFlame is off).
    nc: Option<Arc<UarPage>>,
}

impl UarPool {
    /// Sets up UARs as the GET_CONTEXT answer says.
    pub fn new(dev: &Device, resp: &AllocUcontextResp) -> Result<UarPool> {
        let mut pool = UarPool {
            dynamic: resp.tot_bfregs == 0,
            bf_reg_size: resp.bf_reg_size as usize,
            pages: Vec::new(),
            free: Vec::new(),
            nc: None,
        };
        if pool.dynamic {
            pool.nc = Some(Arc::new(UarPage::alloc_dynamic(dev, mlx5::UAR_ALLOC_TYPE_NC)?));
        } else {
            // tot_bfregs counts the 2 usable registers of each page, while bfreg_index
            // numbers 4 per page: 16 bfregs are 8 pages, and CREATE_QP may name any of them.
            let per_page = resp.num_uars_per_page.max(1) * NON_FP_BFREGS_PER_UAR;
            for i in 0..resp.tot_bfregs.div_ceil(per_page) {
                let page = Arc::new(UarPage::map_legacy(dev, i)?);
                pool.pages.push(page);
            }
            pool.nc = pool.pages.first().cloned();
        }
        Ok(pool)
    }

    /// True when UARs are device objects allocated on demand.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// The page holding the CQ arm doorbell.
    pub fn cq_page(&self) -> Arc<UarPage> {
        self.nc.clone().expect("UAR pool without a CQ page")
    }

    /// A register for a new QP in dynamic mode (legacy QPs get theirs from the
    /// CREATE_QP answer through [`UarPool::legacy_bfreg`]).
    pub fn take(&mut self, dev: &Device) -> Result<Bfreg> {
        if self.bf_reg_size == 0 {
            // No BlueFlame: every QP rings through the shared non-cached page.
            let page = self.cq_page();
            return Ok(Bfreg { page: page.clone(), offset: BF_OFFSET, buf_size: 0, index: page.page_id });
        }
        if let Some(b) = self.free.pop() {
            return Ok(b);
        }
        let page = Arc::new(UarPage::alloc_dynamic(dev, mlx5::UAR_ALLOC_TYPE_BF)?);
        // Two registers per dynamic 4 KiB page (num_uars_per_page * 2).
        for k in (0..2).rev() {
            self.free.push(Bfreg {
                page: page.clone(),
                offset: BF_OFFSET + k * self.bf_reg_size,
                buf_size: self.bf_reg_size / 2,
                index: page.page_id,
            });
        }
        self.pages.push(page);
        Ok(self.free.pop().unwrap())
    }

    /// Gives a register back.
    pub fn give_back(&mut self, b: Bfreg) {
        if b.buf_size != 0 && self.dynamic {
            self.free.push(b);
        }
    }

    /// Legacy mode: the register the device assigned (CREATE_QP's bfreg_index).
    pub fn legacy_bfreg(&self, index: u32) -> Option<Bfreg> {
        let page = self.pages.get((index / BFREGS_PER_UAR) as usize)?.clone();
        let k = (index % BFREGS_PER_UAR) as usize;
        // bfreg 0 is the "no BlueFlame" register shared by everyone.
        let buf_size = if index == 0 { 0 } else { self.bf_reg_size / 2 };
        Some(Bfreg { page, offset: BF_OFFSET + k * self.bf_reg_size, buf_size, index })
    }

    /// Destroys the dynamic page objects (at context close).
    pub fn destroy_all(&mut self, dev: &Device) {
        self.free.clear();
        for p in self.pages.drain(..).chain(self.nc.take()) {
            p.destroy(dev);
        }
    }
}

/// Lock type used by the context for the pool.
pub type SharedUarPool = Mutex<UarPool>;
