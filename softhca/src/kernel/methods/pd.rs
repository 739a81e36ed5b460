//! ALLOC_PD / DEALLOC_PD (PD_DESTROY is a plain destroy).

use std::sync::Arc;

use zerocopy::IntoBytes;

use uverbs::sys::mlx5::AllocPdResp as Mlx5AllocPdResp;
use uverbs::sys::verbs::{AllocPd, AllocPdResp, DeallocPd};

use crate::kernel::uobject::{ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::Result;
use crate::objects::Pd;

/// ALLOC_PD (write 3): the firmware's ALLOC_PD under the context's DevX uid, as
/// `mlx5_ib_alloc_pd` issues it, so a DevX QP may name the PD (and the device half
/// checks keys against the same [`Pd`]). mlx5 writes the PD number to the driver
/// output, which must exist (EFAULT otherwise: the kernel copies 4 bytes whatever the
/// output length).
pub(crate) fn alloc_pd(c: &mut WCall<'_>) -> Result<()> {
    let _cmd: AllocPd = c.request()?;
    let uid = c.st.ctx()?.devx_uid;
    let h = c.alloc(ObjType::Pd)?;
    let pd: Arc<Pd> = c.hca.firmware().alloc_pd(uid)?;
    if let Err(e) = c.udata.copy_to(Mlx5AllocPdResp { pdn: pd.pdn }.as_bytes()) {
        let _ = c.hca.firmware().dealloc_pd(pd.pdn, uid);
        return Err(e);
    }
    c.st.table.fill(h, Uobj::Pd(pd));
    c.response(AllocPdResp { pd_handle: h }.as_bytes())
}

/// DEALLOC_PD (write 4): EBUSY while MRs, QPs or AHs use it.
pub(crate) fn dealloc_pd(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DeallocPd = c.request()?;
    c.st.destroy(c.hca, cmd.pd_handle as i64, ObjType::Pd).map(|_| ())
}
