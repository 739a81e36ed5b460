//! ALLOC_XRCD / DEALLOC_XRCD: an XRC domain, a number that XRC SRQs and XRC target QPs
//! name (`xrc_srqc.xrcd`, `qpc.xrcd`); a destroy while one still names it is RES_BUSY.
//! Numbers come from the HCA's own pool and start at 1, so the `xrcd` 0 of a basic SRQ
//! or a non-XRC QP (softhca's kernel half has no `xrcdn0` of its own, unlike mlx5_ib's
//! device resources) names no domain.

use prm::cmd::xrcd::{AllocXrcdOut, DeallocXrcdIn};

use super::{exhausted, remove, Cmd, Obj, R};

pub(super) fn alloc(c: &mut Cmd<'_>) -> R<()> {
    let n = c.hca.alloc_xrcdn().ok_or_else(exhausted)?;
    c.objs.xrcds.insert(n, Obj { uid: c.uid, users: 0, v: () });
    c.output::<AllocXrcdOut>()?.set(AllocXrcdOut::xrcd, n);
    Ok(())
}

pub(super) fn dealloc(c: &mut Cmd<'_>) -> R<()> {
    let n = c.input::<DeallocXrcdIn>()?.get(DeallocXrcdIn::xrcd);
    remove(&mut c.objs.xrcds, n, c.uid)?;
    c.hca.free_xrcdn(n);
    Ok(())
}
