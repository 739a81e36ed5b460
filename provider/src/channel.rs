//! Completion channels: an fd that becomes readable when an armed CQ completes.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use uverbs::cmd::cq as cqcmd;
use uverbs::sys::verbs::CompEventDesc;
use zerocopy::FromBytes;

use crate::context::Context;
use crate::error::{Error, Op, Result};

/// `ibv_comp_channel`.
pub struct CompChannel {
    /// Held so the device stays open while the channel exists.
    #[allow(dead_code)]
    pub(crate) ctx: Arc<Context>,
    fd: OwnedFd,
}

impl Context {
    /// `ibv_create_comp_channel`.
    pub fn create_comp_channel(self: &Arc<Self>) -> Result<CompChannel> {
        let fd = cqcmd::create_comp_channel(&self.dev).op("create_comp_channel")?;
        Ok(CompChannel { ctx: self.clone(), fd })
    }
}

impl CompChannel {
    /// The fd, for poll()/epoll.
    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Blocks until an event arrives and returns the CQ's user handle
    /// (`ibv_get_cq_event`). A timeout of `None` waits forever.
    pub fn get_event(&self, timeout: Option<std::time::Duration>) -> Result<u64> {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let t = match timeout {
            None => PollTimeout::NONE,
            Some(d) => PollTimeout::try_from(d.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX),
        };
        let mut fds = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        let n = poll(&mut fds, t).op("get_cq_event")?;
        if n == 0 {
            return Err(Error::Device { op: "get_cq_event", errno: nix::errno::Errno::ETIMEDOUT });
        }
        let mut b = [0u8; 8];
        let r = nix::unistd::read(self.fd.as_raw_fd(), &mut b).op("get_cq_event")?;
        if r != b.len() {
            return Err(Error::Invalid { op: "get_cq_event", why: format!("short event read ({r} bytes)") });
        }
        Ok(CompEventDesc::read_from_bytes(&b).map(|d| d.cq_handle).unwrap_or(0))
    }
}
