//! CREATE_TIS / DESTROY_TIS: the transport interface an Ethernet SQ sends through.
//! softhca's one port has no LAG and no TLS, so a TIS only records its priority and
//! transport domain; an SQ naming it keeps it from being destroyed (RES_BUSY).

use prm::cmd::tis::{CreateTisIn, CreateTisOut, DestroyTisIn, Tisc};

use super::{next_free, remove, Cmd, Obj, R};

#[derive(Debug)]
pub(super) struct TisObj {
    #[allow(dead_code)]
    pub prio: u8,
    #[allow(dead_code)]
    pub transport_domain: u32,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let ctx = c.input::<CreateTisIn>()?.sub(CreateTisIn::ctx);
    let v = TisObj { prio: ctx.get(Tisc::prio), transport_domain: ctx.get(Tisc::transport_domain) };
    let tisn = next_free(&c.objs.tiss);
    c.objs.tiss.insert(tisn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateTisOut>()?.set(CreateTisOut::tisn, tisn);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let tisn = c.input::<DestroyTisIn>()?.get(DestroyTisIn::tisn);
    remove(&mut c.objs.tiss, tisn, c.uid).map(|_| ())
}
