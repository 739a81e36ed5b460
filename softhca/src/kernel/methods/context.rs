//! GET_CONTEXT (ioctl and write), QUERY_CONTEXT.

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::{device as dev, mlx5};
use uverbs::sys::verbs::{GetContext, GetContextResp, CORE_SUPPORT_OPTIONAL_MR_ACCESS};

use crate::kernel::ioctl::{Call, FdType};
use crate::kernel::mlx5::{alloc_ucontext, ucontext_resp};
use crate::kernel::write::WCall;
use crate::kernel::Result;

use super::channel::new_fd_object;

/// `UVERBS_METHOD_GET_CONTEXT`: outputs first (a short output fails before anything is
/// made), then the context; a second context is EINVAL. No async fd is created.
pub(crate) fn get_context_ioctl(c: &mut Call<'_>) -> Result<()> {
    let ncv = c.hca.config().num_comp_vectors;
    c.b.copy_to_opt(dev::ATTR_GET_CONTEXT_NUM_COMP_VECTORS, ncv.as_bytes())?;
    c.b.copy_to_opt(dev::ATTR_GET_CONTEXT_CORE_SUPPORT, (CORE_SUPPORT_OPTIONAL_MR_ACCESS as u64).as_bytes())?;
    if c.st.ctx.is_some() {
        return Err(Errno::EINVAL);
    }
    let ctx = alloc_ucontext(c.hca, &c.udata)?;
    c.st.ctx = Some(ctx);
    Ok(())
}

/// GET_CONTEXT (write 0): makes the async fd, writes the response, and only then finds
/// out whether the file already has a context (EINVAL, the fd closed again).
pub(crate) fn get_context_write(c: &mut WCall<'_>) -> Result<()> {
    let _cmd: GetContext = c.request()?;
    let (obj, app) = new_fd_object(c.hca, FdType::AsyncEvent).map_err(|_| Errno::ENOMEM)?;
    let resp = GetContextResp {
        async_fd: std::os::fd::AsRawFd::as_raw_fd(&app) as u32,
        num_comp_vectors: c.hca.config().num_comp_vectors,
    };
    c.new_fd = Some((obj, app));
    c.response(resp.as_bytes())?;
    if c.st.ctx.is_some() {
        return Err(Errno::EINVAL);
    }
    let ctx = alloc_ucontext(c.hca, &c.udata)?;
    c.st.ctx = Some(ctx);
    Ok(())
}

/// `UVERBS_METHOD_QUERY_CONTEXT` with mlx5's RESP_UCTX: the context response again.
pub(crate) fn query_context(c: &mut Call<'_>) -> Result<()> {
    let ctx = c.st.ctx()?;
    let ncv = c.hca.config().num_comp_vectors;
    c.b.copy_to_opt(dev::ATTR_QUERY_CONTEXT_NUM_COMP_VECTORS, ncv.as_bytes())?;
    c.b.copy_to_opt(dev::ATTR_QUERY_CONTEXT_CORE_SUPPORT, (CORE_SUPPORT_OPTIONAL_MR_ACCESS as u64).as_bytes())?;
    let mut resp = ucontext_resp(c.hca, ctx);
    let len = c.b.out_buf(mlx5::ATTR_QUERY_CONTEXT_RESP_UCTX).map(|o| o.len).unwrap_or(0);
    resp.response_length = len.min(std::mem::size_of_val(&resp)) as u32;
    c.b.copy_to_struct_or_zero(mlx5::ATTR_QUERY_CONTEXT_RESP_UCTX, resp.as_bytes())
}
