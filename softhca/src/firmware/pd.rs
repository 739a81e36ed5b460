//! ALLOC_PD / DEALLOC_PD: a protection domain is a number and its owner.

use prm::cmd::pd::{AllocPdOut, DeallocPdIn};

use super::{exhausted, remove, Cmd, Obj, R};

pub(super) fn alloc(c: &mut Cmd<'_>) -> R<()> {
    let pdn = c.hca.alloc_pdn().ok_or_else(exhausted)?;
    c.objs.pds.insert(pdn, Obj { uid: c.uid, users: 0, v: () });
    c.output::<AllocPdOut>()?.set(AllocPdOut::pd, pdn);
    Ok(())
}

pub(super) fn dealloc(c: &mut Cmd<'_>) -> R<()> {
    let pdn = c.input::<DeallocPdIn>()?.get(DeallocPdIn::pd);
    remove(&mut c.objs.pds, pdn, c.uid)?;
    c.hca.free_pdn(pdn);
    Ok(())
}
