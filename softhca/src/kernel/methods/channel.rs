//! Completion channels (CREATE_COMP_CHANNEL) and async event fds (ASYNC_EVENT_ALLOC):
//! fd objects whose id is the application's fd number.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::verbs::{CreateCompChannel, CreateCompChannelResp};

use crate::hca::Hca;
use crate::kernel::ioctl::{Call, FdType};
use crate::kernel::uobject::FdObj;
use crate::kernel::write::WCall;
use crate::kernel::{FileState, Result};
use crate::objects::channel::{fd_identity, DevxCmdFile, EventQueue};
use crate::objects::{AsyncEventFile, CompChannel, Kind, Live};

/// Makes a new fd object: the object and the application's end of its socket pair.
pub(crate) fn new_fd_object(hca: &Hca, ty: FdType) -> std::io::Result<(FdObj, OwnedFd)> {
    let (queue, app) = EventQueue::new()?;
    let obj = match ty {
        FdType::CompChannel => FdObj::Comp(Arc::new(CompChannel { queue, _live: Live::new(hca.live_counts(), Kind::CompChannel) })),
        FdType::AsyncEvent => FdObj::Async(Arc::new(AsyncEventFile { queue, _live: Live::new(hca.live_counts(), Kind::AsyncEventFile) })),
        FdType::DevxAsyncCmd => {
            FdObj::DevxCmd(Arc::new(DevxCmdFile { queue, _live: Live::new(hca.live_counts(), Kind::AsyncEventFile) }))
        }
    };
    Ok((obj, app))
}

/// `lookup_get_fd_uobject`: the fd object of this file behind the application's fd
/// `fdno`, of type `ty`. EBADF for anything else: not an fd, another kind of file, a
/// channel of another uverbs file.
pub(crate) fn lookup_fd(st: &FileState, fdno: i32, ty: FdType) -> Result<FdObj> {
    let id = fd_identity(fdno)?;
    st.fds.iter().map(|(_, o)| o).find(|o| match (o, ty) {
        (FdObj::Comp(c), FdType::CompChannel) => c.queue.is_app_end(id),
        (FdObj::Async(a), FdType::AsyncEvent) => a.queue.is_app_end(id),
        (FdObj::DevxCmd(d), FdType::DevxAsyncCmd) => d.queue.is_app_end(id),
        _ => false,
    }).cloned().ok_or(Errno::EBADF)
}

/// `UVERBS_METHOD_ASYNC_EVENT_ALLOC`: the fd was made while processing the attribute;
/// committing the call registers it (the first one becomes the file's default).
pub(crate) fn async_event_alloc(_c: &mut Call<'_>) -> Result<()> {
    Ok(())
}

/// CREATE_COMP_CHANNEL (write 17).
pub(crate) fn create_comp_channel(c: &mut WCall<'_>) -> Result<()> {
    let _cmd: CreateCompChannel = c.request()?;
    c.st.ctx()?;
    let (obj, app) = new_fd_object(c.hca, FdType::CompChannel).map_err(|_| Errno::ENOMEM)?;
    let resp = CreateCompChannelResp { fd: app.as_raw_fd() as u32 };
    c.new_fd = Some((obj, app));
    c.response(resp.as_bytes())
}
