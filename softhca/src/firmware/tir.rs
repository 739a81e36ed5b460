//! CREATE_TIR / DESTROY_TIR: where steering delivers a received frame. A direct TIR
//! names one RQ (`inline_rqn`), which it keeps from being destroyed; an indirect TIR
//! (RSS over an RQ table) needs CREATE_RQT, which this firmware does not execute, so
//! it is refused (BAD_PARAM).
//!
//! The device half reaches an RQ only through a TIR (`device::port::deliver_to_tir`),
//! as a flow rule's "forward to TIR n" does.

use prm::cmd::tir::{self as t, CreateTirIn, CreateTirOut, DestroyTirIn, Tirc};

use super::status::syndrome;
use super::{bad_param, check_named, next_free, remove, use_named, Cmd, Obj, R};

#[derive(Debug)]
pub(super) struct TirObj {
    pub rqn: u32,
    /// `self_lb_block`: frames this function sent itself are not delivered here.
    #[allow(dead_code)]
    pub self_lb_block: u8,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let ctx = c.input::<CreateTirIn>()?.sub(CreateTirIn::ctx);
    if ctx.get(Tirc::disp_type) != t::disp_type::DIRECT {
        return Err(bad_param(syndrome::TIR_DISP_TYPE));
    }
    let rqn = ctx.get(Tirc::inline_rqn);
    check_named(&c.objs.rqs, rqn, c.uid, syndrome::BAD_RQ)?;
    let v = TirObj { rqn, self_lb_block: ctx.get(Tirc::self_lb_block) };
    use_named(&mut c.objs.rqs, rqn, 1);
    let tirn = next_free(&c.objs.tirs);
    c.objs.tirs.insert(tirn, Obj { uid: c.uid, users: 0, v });
    c.output::<CreateTirOut>()?.set(CreateTirOut::tirn, tirn);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let tirn = c.input::<DestroyTirIn>()?.get(DestroyTirIn::tirn);
    let o = remove(&mut c.objs.tirs, tirn, c.uid)?;
    use_named(&mut c.objs.rqs, o.v.rqn, -1);
    Ok(())
}
