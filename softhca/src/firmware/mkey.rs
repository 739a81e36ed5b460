//! CREATE_MKEY / DESTROY_MKEY: a memory key over a page list in a PD.
//!
//! The firmware picks the index, the caller the key's low byte (`mkey_7_0`): the key
//! is `mkey_index << 8 | mkey_7_0`. Only MTT keys exist in softhca (what reg_mr
//! makes); the page list is not read yet.

use prm::cmd::mkey::{access_mode, CreateMkeyIn, CreateMkeyOut, DestroyMkeyIn, Mkc};

use super::status::syndrome;
use super::{bad_param, check_named, exhausted, remove, use_named, Cmd, Obj, R};

#[derive(Debug)]
pub(super) struct MkeyObj {
    pd: u32,
    /// The full key (index and variant).
    #[allow(dead_code)]
    key: u32,
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let mkc = c.input::<CreateMkeyIn>()?.sub(CreateMkeyIn::memory_key_mkey_entry);
    if mkc.get(Mkc::access_mode_1_0) != access_mode::MTT || mkc.get(Mkc::access_mode_4_2) != 0 {
        return Err(bad_param(syndrome::ACCESS_MODE));
    }
    let pd = mkc.get(Mkc::pd);
    check_named(&c.objs.pds, pd, c.uid, syndrome::BAD_PD)?;
    let index = c.hca.alloc_mkey().ok_or_else(exhausted)? >> 8;
    use_named(&mut c.objs.pds, pd, 1);
    let key = index << 8 | mkc.get(Mkc::mkey_7_0) as u32;
    c.objs.mkeys.insert(index, Obj { uid: c.uid, users: 0, v: MkeyObj { pd, key } });
    c.output::<CreateMkeyOut>()?.set(CreateMkeyOut::mkey_index, index);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let index = c.input::<DestroyMkeyIn>()?.get(DestroyMkeyIn::mkey_index);
    let m = remove(&mut c.objs.mkeys, index, c.uid)?;
    use_named(&mut c.objs.pds, m.v.pd, -1);
    c.hca.free_mkey(index << 8);
    Ok(())
}
