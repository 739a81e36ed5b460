//! ALLOC_PD / DEALLOC_PD: a protection domain, and the [`objects::Pd`] the device half
//! checks keys against (a firmware QP in this PD and an MR in it match by number).

use std::sync::Arc;

use prm::cmd::pd::{AllocPdOut, DeallocPdIn};

use super::{exhausted, remove, Cmd, Obj, R};
use crate::objects::{self, Kind, Live};

pub(super) fn alloc(c: &mut Cmd<'_>) -> R<()> {
    let pdn = c.hca.alloc_pdn().ok_or_else(exhausted)?;
    let pd = Arc::new(objects::Pd::new(pdn, Live::new(c.hca.live_counts(), Kind::Pd)));
    c.objs.pds.insert(pdn, Obj { uid: c.uid, users: 0, v: pd });
    c.output::<AllocPdOut>()?.set(AllocPdOut::pd, pdn);
    Ok(())
}

pub(super) fn dealloc(c: &mut Cmd<'_>) -> R<()> {
    let pdn = c.input::<DeallocPdIn>()?.get(DeallocPdIn::pd);
    remove(&mut c.objs.pds, pdn, c.uid)?;
    c.hca.free_pdn(pdn);
    Ok(())
}
