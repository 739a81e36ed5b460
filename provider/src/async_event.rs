//! Asynchronous events (`ibv_get_async_event`): QP, CQ, SRQ and port events the device
//! queues on the context's async fd, one `struct ib_uverbs_async_event_desc` per read.

use std::os::fd::BorrowedFd;
use std::time::Duration;

use uverbs::sys::verbs::AsyncEventDesc;
use zerocopy::FromBytes;

use crate::context::Context;
use crate::error::{Error, Op, Result};

/// One async event: what it is about (`element`: the user handle the object was created
/// with, e.g. [`crate::Srq::user_handle`], or a port number) and its `ib_event_type`
/// (`uverbs::sys::verbs::event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// The object the event is about: the CQ's, QP's or SRQ's user handle, or the port number.
    pub element: u64,
    /// `ibv_event_type` (`enum ib_uverbs_async_event` numbering).
    pub event_type: u32,
}

impl Context {
    /// Waits up to `timeout` (`None`: forever) for the next async event.
    pub fn get_async_event(&self, timeout: Option<Duration>) -> Result<AsyncEvent> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        let t = match timeout {
            None => PollTimeout::NONE,
            Some(d) => PollTimeout::try_from(d.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX),
        };
        // SAFETY: the async fd is owned by self and open while self is.
        let fd = unsafe { BorrowedFd::borrow_raw(self.async_fd()) };
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        if poll(&mut fds, t).op("get_async_event")? == 0 {
            return Err(Error::Device { op: "get_async_event", errno: nix::errno::Errno::ETIMEDOUT });
        }
        let mut b = [0u8; std::mem::size_of::<AsyncEventDesc>()];
        let n = nix::unistd::read(self.async_fd(), &mut b).op("get_async_event")?;
        let d = AsyncEventDesc::read_from_bytes(&b[..n.min(b.len())])
            .map_err(|_| Error::Invalid { op: "get_async_event", why: format!("short event read ({n} bytes)") })?;
        Ok(AsyncEvent { element: d.element, event_type: d.event_type })
    }
}
