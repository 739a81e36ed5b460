//! mlx5 dynamic UARs: `MLX5_IB_METHOD_UAR_OBJ_ALLOC` / `_DESTROY`. Each object is one
//! doorbell page the application then maps at the returned mmap offset.

use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::mlx5 as ids;

use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::uobject::Uobj;
use crate::kernel::Result;
use crate::objects::{Kind, Live, UarKind, UarObj};
use crate::pages::PAGE_SIZE;

/// Wraps an allocated device page as a UAR object.
pub(crate) fn new_uar(hca: &Hca, page: u32, kind: UarKind, mmap_key: Option<u32>) -> Arc<UarObj> {
    Arc::new(UarObj { page, kind, mmap_key, pages: hca.pages().clone(), _live: Live::new(hca.live_counts(), Kind::Uar) })
}

/// The byte offset mmap() must be given for an entry key (`mlx5_entry_to_mmap_offset`).
pub(crate) fn mmap_offset(key: u32) -> u64 {
    let cmd = (key >> 16) & 0xffff;
    let index = key & 0xffff;
    (((index as u64 >> 8) << 16) | ((cmd as u64) << 8) | (index as u64 & 0xff)) * PAGE_SIZE as u64
}

/// The mmap entry key (`cmd << 16 | index`) whose offset is device page `page`.
pub(crate) fn key_for_page(page: u32) -> u32 {
    ((page >> 8) << 16) | (page & 0xff)
}

/// `MLX5_IB_METHOD_UAR_OBJ_ALLOC`.
pub(crate) fn uar_obj_alloc(c: &mut Call<'_>) -> Result<()> {
    c.st.ctx()?;
    let ty = c.b.get_const(ids::ATTR_UAR_OBJ_ALLOC_TYPE, u32::MAX as u64)? as u32;
    let kind = match ty {
        ids::UAR_ALLOC_TYPE_BF => UarKind::BlueFlame,
        ids::UAR_ALLOC_TYPE_NC => UarKind::NonCached,
        _ => return Err(Errno::EOPNOTSUPP),
    };
    if kind == UarKind::BlueFlame && !c.hca.config().write_combining {
        return Err(Errno::EOPNOTSUPP);
    }
    let ctx = c.st.ctx_mut()?;
    let page = c.hca.pages().alloc().ok_or(Errno::ENOMEM)?;
    // The entry is named after its page (see `crate::pages`): its mmap offset is the
    // page's offset in the device page file, unique on the HCA (mlx5_ib picks any free
    // entry of the context; a program cannot tell).
    let key = key_for_page(page);
    debug_assert!((crate::kernel::mlx5::MMAP_OFFSET_START..=crate::kernel::mlx5::MMAP_OFFSET_END).contains(&key));
    let uar = new_uar(c.hca, page, kind, Some(key));
    ctx.mmap_entries.insert(key, uar.clone());
    c.fill_new(ids::ATTR_UAR_OBJ_ALLOC_HANDLE, Uobj::Uar(uar))?;
    c.b.copy_to(ids::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, mmap_offset(key).as_bytes())?;
    c.b.copy_to(ids::ATTR_UAR_OBJ_ALLOC_PAGE_ID, page.as_bytes())?;
    c.b.copy_to(ids::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, (PAGE_SIZE as u32).as_bytes())?;
    // The program maps it next, maybe past the preload's mmap hook.
    c.hca.device().expect_mappings(&[page], false);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_of_dynamic_entries() {
        assert_eq!(mmap_offset(9 << 16), 0x90_0000);
        assert_eq!(mmap_offset((9 << 16) | 1), 0x90_1000);
        assert_eq!(mmap_offset((9 << 16) | 0x100), 0x1090_0000);
        let (cmd, index) = uverbs::sys::mlx5::mmap_split(mmap_offset((9 << 16) | 0x1ff) / PAGE_SIZE as u64);
        assert_eq!((cmd, index), (9, 0x1ff));
        // Every UAR page's entry maps at the page's own offset in the device page file.
        for page in [crate::pages::FIRST_UAR_PAGE, 0x9ff, 0xa00, crate::pages::MAX_PAGE - 1] {
            assert_eq!(mmap_offset(key_for_page(page)), page as u64 * PAGE_SIZE as u64);
            assert!((crate::kernel::mlx5::MMAP_OFFSET_START..=crate::kernel::mlx5::MMAP_OFFSET_END).contains(&key_for_page(page)));
        }
    }
}
