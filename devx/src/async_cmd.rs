//! Asynchronous queries: `mlx5dv_devx_obj_query_async` and the fd its answers arrive on.
//!
//! DEVX_OBJ_ASYNC_QUERY returns at once; the kernel runs the query and queues
//! `struct mlx5_ib_uapi_devx_async_cmd_hdr { __u64 wr_id; __u8 out_data[]; }` on the
//! async command fd, one record per read(). A program can have many queries in
//! flight and match answers by `wr_id`.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use uverbs::cmd::devx as devxcmd;

use crate::context::DevxContext;
use crate::error::{check_out, trace_cmd, Error, Result};
use crate::obj::Obj;

/// `mlx5dv_devx_create_cmd_comp`: the fd asynchronous answers are read from.
#[derive(Debug)]
pub struct AsyncCmdFd {
    fd: OwnedFd,
}

/// Bytes of the record header before the outbox (`wr_id`).
const HDR: usize = 8;

impl DevxContext {
    /// `MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC`.
    pub fn async_cmd_fd(&self) -> Result<AsyncCmdFd> {
        let fd = devxcmd::async_cmd_fd_alloc(self.device()).map_err(|errno| Error::Os { op: "devx async_cmd_fd", errno })?;
        Ok(AsyncCmdFd { fd })
    }
}

impl Obj {
    /// `mlx5dv_devx_obj_query_async`: the answer (`out_len` bytes of outbox) arrives
    /// on `fd` tagged with `wr_id`.
    pub fn query_async(&self, fd: &AsyncCmdFd, inbox: &[u8], out_len: u16, wr_id: u64) -> Result<()> {
        let r = devxcmd::obj_async_query(self.device(), self.handle(), inbox, out_len, wr_id, fd.fd.as_raw_fd())
            .map_err(|errno| Error::Os { op: "devx obj_query_async", errno });
        trace_cmd("obj_query_async", inbox, &[], &r);
        r
    }
}

impl AsyncCmdFd {
    /// `mlx5dv_devx_get_async_cmd_comp`: waits up to `timeout` (None: forever) for one
    /// answer of at most `out_len` outbox bytes; returns its `wr_id` and outbox, or
    /// [`Error::Firmware`] (with the wr_id lost) when the query failed there.
    pub fn read(&self, out_len: usize, timeout: Option<Duration>) -> Result<(u64, Vec<u8>)> {
        let t = match timeout {
            None => PollTimeout::NONE,
            Some(d) => PollTimeout::try_from(d.as_millis().min(i32::MAX as u128) as i32).unwrap_or(PollTimeout::MAX),
        };
        let mut p = [PollFd::new(self.fd.as_fd(), PollFlags::POLLIN)];
        let n = poll(&mut p, t).map_err(|errno| Error::Os { op: "devx async read", errno })?;
        if n == 0 {
            return Err(Error::Os { op: "devx async read", errno: Errno::ETIMEDOUT });
        }
        let mut b = vec![0u8; HDR + out_len];
        let got = nix::unistd::read(self.fd.as_raw_fd(), &mut b).map_err(|errno| Error::Os { op: "devx async read", errno })?;
        if got < HDR {
            return Err(Error::Invalid { op: "devx async read", why: format!("a {got}-byte record") });
        }
        let wr_id = u64::from_ne_bytes(b[..HDR].try_into().expect("8 bytes"));
        let out = b[HDR..got].to_vec();
        check_out("devx async query", &[], &out)?;
        Ok((wr_id, out))
    }
}
