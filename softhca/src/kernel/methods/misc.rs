//! Commands softhca answers without an object of its own: destroy methods whose handler
//! has nothing left to do, destroys and queries of object types softhca never creates
//! (the lookup's ENOENT/EINVAL is the whole answer, as on a device where none exist), and
//! commands a ConnectX-5 supports but softhca does not implement (EOPNOTSUPP after the
//! header checks; listed in the crate docs).

use nix::errno::Errno;
use zerocopy::{FromBytes, IntoBytes};

use crate::kernel::ioctl::Call;
use crate::kernel::uobject::ObjType;
use crate::kernel::write::WCall;
use crate::kernel::Result;

/// Handler of a destroy method: the object was destroyed before it ran.
pub(crate) fn destroyed(_c: &mut Call<'_>) -> Result<()> {
    Ok(())
}

/// WQ destroy: would report the object's event count (unreachable: none exist).
pub(crate) fn destroyed_with_events(c: &mut Call<'_>) -> Result<()> {
    c.b.copy_to(1, 0u32.as_bytes())
}

/// An ioctl method whose objects cannot exist here.
pub(crate) fn not_supported(_c: &mut Call<'_>) -> Result<()> {
    Err(Errno::EOPNOTSUPP)
}

/// A write command softhca does not implement.
pub(crate) fn write_not_supported(_c: &mut WCall<'_>) -> Result<()> {
    Err(Errno::EOPNOTSUPP)
}

/// `{handle}` or `{response, handle, ...}` request whose handle names a type never created.
fn lookup_only<T: FromBytes + IntoBytes>(c: &mut WCall<'_>, ty: ObjType, handle: impl Fn(&T) -> u32) -> Result<()> {
    let cmd: T = c.request()?;
    c.st.table.lookup(handle(&cmd) as i64, ty).map(|_| ())
}

#[derive(zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout)]
#[repr(C)]
struct Handle {
    handle: u32,
}

#[derive(zerocopy::FromBytes, zerocopy::IntoBytes, zerocopy::Immutable, zerocopy::KnownLayout)]
#[repr(C)]
struct MaskHandle {
    comp_mask: u32,
    handle: u32,
}

/// DEALLOC_MW (write 16): `struct ib_uverbs_dealloc_mw`.
pub(crate) fn dealloc_mw(c: &mut WCall<'_>) -> Result<()> {
    lookup_only::<Handle>(c, ObjType::Mw, |h| h.handle)
}

fn ex_destroy(c: &mut WCall<'_>, ty: ObjType) -> Result<()> {
    let cmd: MaskHandle = c.request()?;
    if cmd.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    c.st.table.lookup(cmd.handle as i64, ty).map(|_| ())
}

/// EX_DESTROY_WQ: `struct ib_uverbs_ex_destroy_wq`.
pub(crate) fn destroy_wq(c: &mut WCall<'_>) -> Result<()> {
    ex_destroy(c, ObjType::Wq)
}

/// EX_DESTROY_RWQ_IND_TBL: `struct ib_uverbs_ex_destroy_rwq_ind_table`.
pub(crate) fn destroy_rwq_ind_tbl(c: &mut WCall<'_>) -> Result<()> {
    ex_destroy(c, ObjType::RwqIndTbl)
}
