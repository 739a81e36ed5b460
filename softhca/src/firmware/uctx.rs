//! CREATE_UCTX / DESTROY_UCTX: DevX user contexts.
//!
//! mlx5_ib creates one user context per uverbs context opened with the DevX flag
//! (`mlx5_ib_devx_create`) and writes its uid into every command that context issues;
//! objects then belong to that uid (a command on another uid's object is BAD_PARAM). uid 0 is the kernel's own.
//! The number of contexts is bounded by `log_max_uctx` ([`LOG_MAX_UCTX`]).
//!
//! A DESTROY_UCTX while objects of the uid still exist is refused with RES_BUSY, as a
//! destroy of any object in use is (the kernel destroys a context's objects first).

use prm::cmd::uctx::{CreateUctxIn, CreateUctxOut, DestroyUctxIn, Uctx};

use super::status::syndrome;
use super::{bad_param, busy, exhausted, Cmd, Outcome, R};

/// `cmd_hca_cap.log_max_uctx`: up to 2^LOG_MAX_UCTX DevX contexts at once.
pub const LOG_MAX_UCTX: u8 = 10;
/// `cmd_hca_cap.log_max_umem`: up to 2^LOG_MAX_UMEM UMEMs.
pub const LOG_MAX_UMEM: u8 = 20;

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let caps = c.input::<CreateUctxIn>()?.sub(CreateUctxIn::uctx).get(Uctx::cap);
    // uctx_cap is 0: neither raw transmit (cap::RAW_TX) nor internal device resources
    // (cap::INTERNAL_DEV_RES) can be granted, nor anything else.
    if caps != 0 {
        return Err(bad_param(syndrome::UCTX_CAP));
    }
    let max = 1u32 << LOG_MAX_UCTX;
    let uid = (1..=max.min(u16::MAX as u32) as u16).find(|u| !c.objs.uctxs.contains(u)).ok_or_else(exhausted)?;
    c.objs.uctxs.insert(uid);
    c.output::<CreateUctxOut>()?.set(CreateUctxOut::uid, uid);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let uid = c.input::<DestroyUctxIn>()?.get(DestroyUctxIn::uid);
    if !c.objs.uctxs.contains(&uid) {
        return Err(Outcome::err(prm::cmd::status::BAD_RES_ERR, syndrome::NO_OBJECT));
    }
    if c.objs.owned_by(uid) {
        return Err(busy());
    }
    c.objs.uctxs.remove(&uid);
    Ok(())
}
