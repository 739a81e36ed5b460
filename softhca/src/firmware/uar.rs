//! ALLOC_UAR / DEALLOC_UAR: a UAR page index and its owner.
//!
//! The index is not yet backed by a device page (the kernel half's UARs still come
//! from `kernel::methods::uar`); CQs and QPs name it as their doorbell page, which is
//! what the firmware checks.

use prm::cmd::uar::{AllocUarOut, DeallocUarIn};

use super::{exhausted, remove, Cmd, Obj, R};

/// UAR indexes are 24-bit; 0 is the kernel's own page.
const MAX_UAR: u32 = 0xff_ffff;

pub(super) fn alloc(c: &mut Cmd<'_>) -> R<()> {
    // The lowest free index, as a ConnectX hands them out.
    let mut index = 1;
    for &u in c.objs.uars.keys() {
        if u != index {
            break;
        }
        index += 1;
    }
    if index > MAX_UAR {
        return Err(exhausted());
    }
    c.objs.uars.insert(index, Obj { uid: c.uid, users: 0, v: () });
    c.output::<AllocUarOut>()?.set(AllocUarOut::uar, index);
    Ok(())
}

pub(super) fn dealloc(c: &mut Cmd<'_>) -> R<()> {
    let index = c.input::<DeallocUarIn>()?.get(DeallocUarIn::uar);
    remove(&mut c.objs.uars, index, c.uid)?;
    Ok(())
}
