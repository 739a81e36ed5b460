//! ALLOC_UAR / DEALLOC_UAR: a UAR is a device page.
//!
//! The index ALLOC_UAR answers is the page's number in the HCA's device pages
//! ([`crate::pages`]), the same numbering the kernel half's UARs use, so the device
//! half watches the doorbells of a CQ or QP that names it. (mlx5_ib maps such a page
//! for DevX through the context's UAR objects; the kernel half's static and dynamic
//! UARs take their pages from the same pool.)
//!
//! A CQ or QP context may name any UAR page that is handed out, whoever owns it: as
//! Linux's devx.c explains, the device checks at doorbell time that a doorbell came
//! through the object's own UAR, so naming another context's UAR only lets that
//! context ring this one's doorbells. What the firmware refuses is a page that is not
//! a UAR at all ([`valid`]).

use prm::cmd::uar::{AllocUarOut, DeallocUarIn};

use super::{exhausted, remove, Cmd, Obj, R};

pub(super) fn alloc(c: &mut Cmd<'_>) -> R<()> {
    let page = c.hca.pages().alloc().ok_or_else(exhausted)?;
    c.objs.uars.insert(page, Obj { uid: c.uid, users: 0, v: () });
    c.output::<AllocUarOut>()?.set(AllocUarOut::uar, page);
    Ok(())
}

pub(super) fn dealloc(c: &mut Cmd<'_>) -> R<()> {
    let index = c.input::<DeallocUarIn>()?.get(DeallocUarIn::uar);
    remove(&mut c.objs.uars, index, c.uid)?;
    c.hca.pages().free(index);
    Ok(())
}

/// Whether a context may name `page` as its UAR: a page ALLOC_UAR handed out or one of
/// the kernel half's UAR pages.
pub(super) fn valid(c: &Cmd<'_>, page: u32) -> bool {
    c.objs.uars.contains_key(&page) || c.hca.pages().is_allocated(page)
}
