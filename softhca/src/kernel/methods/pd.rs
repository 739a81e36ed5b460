//! ALLOC_PD / DEALLOC_PD (PD_DESTROY is a plain destroy).

use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::mlx5::AllocPdResp as Mlx5AllocPdResp;
use uverbs::sys::verbs::{AllocPd, AllocPdResp, DeallocPd};

use crate::kernel::uobject::{ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::Result;
use crate::objects::{Kind, Live, Pd};

/// ALLOC_PD (write 3). mlx5 writes the PD number to the driver output, which must exist
/// (EFAULT otherwise: the kernel copies 4 bytes whatever the output length).
pub(crate) fn alloc_pd(c: &mut WCall<'_>) -> Result<()> {
    let _cmd: AllocPd = c.request()?;
    let h = c.alloc(ObjType::Pd)?;
    let pdn = c.hca.alloc_pdn().ok_or(Errno::ENOMEM)?;
    if let Err(e) = c.udata.copy_to(Mlx5AllocPdResp { pdn }.as_bytes()) {
        c.hca.free_pdn(pdn);
        return Err(e);
    }
    let pd = Arc::new(Pd::new(pdn, Live::new(c.hca.live_counts(), Kind::Pd)));
    c.st.table.fill(h, Uobj::Pd(pd));
    c.response(AllocPdResp { pd_handle: h }.as_bytes())
}

/// DEALLOC_PD (write 4): EBUSY while MRs, QPs or AHs use it.
pub(crate) fn dealloc_pd(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DeallocPd = c.request()?;
    c.st.destroy(c.hca, cmd.pd_handle as i64, ObjType::Pd).map(|_| ())
}
