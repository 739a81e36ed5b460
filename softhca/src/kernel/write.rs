//! The write() commands, legacy and extended (`ib_uverbs_write`, `verify_hdr`,
//! `uapi_get_method`), and the command table that `UVERBS_METHOD_INVOKE_WRITE` shares.
//!
//! Header checks follow docs/notes/kernel-6.1-uverbs.md §2.1 in order. Legacy commands: `in_words * 4` is the
//! whole write including the 8-byte header; the response pointer is the first u64 of the
//! body; driver data follows the core struct in and out. Extended commands: sizes in
//! 8-byte words after a second 16-byte header that carries the response pointer. Commands
//! inside the table that Linux never implemented or mlx5 disables (POLL_CQ, POST_SEND,
//! ...) are the "not supported" stub, which is checked as a legacy command: a wrong
//! `in_words` is EINVAL before EOPNOTSUPP, even with bit 31 set.

use std::os::fd::{IntoRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::{FromBytes, IntoBytes};

use uverbs::sys::write::{CMD_COMMAND_MASK, CMD_FLAG_EXTENDED};
use uverbs::sys::{CmdHdr, ExCmdHdr};

use crate::hca::Hca;
use crate::uaccess::copy_from_user;

use super::methods;
use super::udata::{access_ok, InBuf, OutBuf, Udata};
use super::uobject::{FdObj, ObjType};
use super::{FileState, Result, Why};

/// Legacy command indexes below this exist in the table (OPEN_QP = 40 is the last).
pub(crate) const NUM_WRITE: u32 = 41;
/// Extended command indexes below this exist (EX_MODIFY_CQ = 57 is the last).
pub(crate) const NUM_WRITE_EX: u32 = 58;

/// A write command handler.
pub(crate) type WHandler = fn(&mut WCall<'_>) -> Result<()>;

/// One write command (`struct uverbs_api_write_method`).
#[derive(Debug)]
pub(crate) struct WriteDef {
    pub ex: bool,
    /// Size of the core request (including the legacy response pointer).
    pub req: usize,
    /// Size of the core response.
    pub resp: usize,
    pub has_resp: bool,
    pub udata: bool,
    pub handler: WHandler,
}

/// The core response of a command: either behind the write()'s response pointer or an
/// INVOKE_WRITE CORE_OUT attribute.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreOut {
    pub buf: OutBuf,
    /// True for a CORE_OUT attribute (copy-to-struct-or-zero and VALID_OUTPUT).
    pub attr: bool,
}

/// One write command in a handler's hands (`struct uverbs_attr_bundle` of the write
/// path).
pub(crate) struct WCall<'a> {
    pub hca: &'a Arc<Hca>,
    pub st: &'a mut FileState,
    pub core_in: InBuf,
    pub core_out: CoreOut,
    pub udata: Udata,
    /// The handle `alloc` reserved, finalized after the handler.
    pub new: Option<u32>,
    /// An fd object made by the command, committed after the handler.
    pub new_fd: Option<(FdObj, OwnedFd)>,
}

impl WCall<'_> {
    /// `uverbs_request`.
    pub(crate) fn request<T: FromBytes + IntoBytes>(&self) -> Result<T> {
        self.core_in.request()
    }

    /// `uverbs_response`.
    pub(crate) fn response(&self, data: &[u8]) -> Result<()> {
        if self.core_out.attr {
            self.core_out.buf.copy_to_struct_or_zero(data)
        } else {
            self.core_out.buf.response(data)
        }
    }

    /// `uverbs_response_length`: what an extended response reports as written.
    pub(crate) fn response_length(&self, size: usize) -> u32 {
        self.core_out.buf.len.min(size) as u32
    }

    /// `uobj_alloc`: reserves a handle for a new object (EINVAL before GET_CONTEXT).
    pub(crate) fn alloc(&mut self, ty: ObjType) -> Result<u32> {
        self.st.ctx()?;
        let h = self.st.table.reserve(ty)?;
        self.new = Some(h);
        Ok(h)
    }
}

/// Finalizes the write path's new object: commit on success, abort (destroying what was
/// created) on failure.
pub(crate) fn finalize(hca: &Hca, st: &mut FileState, new: Option<u32>, new_fd: Option<(FdObj, OwnedFd)>, ok: bool) {
    if let Some(h) = new {
        if ok {
            st.table.commit(h);
        } else if let Some(obj) = st.table.abort(h) {
            let _ = st.destroy_hw(hca, &obj, Why::Abort);
        }
    }
    if let Some((obj, app)) = new_fd {
        if ok {
            let _ = app.into_raw_fd();
            st.add_fd(obj);
        }
    }
}

/// The method for a command number: EINVAL for bits outside the index and bit 31,
/// EOPNOTSUPP past the table; `None` for a gap (the not-supported stub).
pub(crate) fn get_method(command: u32) -> Result<Option<&'static WriteDef>> {
    if command & !(CMD_FLAG_EXTENDED | CMD_COMMAND_MASK) != 0 {
        return Err(Errno::EINVAL);
    }
    let idx = command & CMD_COMMAND_MASK;
    if command & CMD_FLAG_EXTENDED != 0 {
        if idx >= NUM_WRITE_EX {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(methods::write_ex_def(idx))
    } else {
        if idx >= NUM_WRITE {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(methods::write_def(idx))
    }
}

/// A driver input buffer: NULL when empty (`ib_uverbs_init_udata_buf_or_null`).
fn user_in(addr: u64, len: usize) -> InBuf {
    InBuf::User { addr: if len == 0 { 0 } else { addr }, len }
}

/// A driver output buffer: NULL when empty, so a driver that writes anyway faults.
fn user_out(addr: u64, len: usize) -> OutBuf {
    OutBuf::user(if len == 0 { 0 } else { addr }, len)
}

/// Runs one write() of `count` bytes at `buf`; returns `count` on success.
pub(crate) fn run(hca: &Arc<Hca>, st: &mut FileState, buf: u64, count: usize) -> Result<usize> {
    let hdr_len = std::mem::size_of::<CmdHdr>();
    if count < hdr_len {
        return Err(Errno::EINVAL);
    }
    let mut hdr = CmdHdr::default();
    copy_from_user(hdr.as_mut_bytes(), buf)?;
    let def = get_method(hdr.command)?;
    let body = buf.wrapping_add(hdr_len as u64);

    let Some(def) = def else {
        // The stub: legacy size rule, then "not supported".
        if hdr.in_words as usize * 4 != count {
            return Err(Errno::EINVAL);
        }
        return Err(Errno::EOPNOTSUPP);
    };

    let (core_in, core_out, udata) = if def.ex {
        let ex_len = std::mem::size_of::<ExCmdHdr>();
        if count < hdr_len + ex_len {
            return Err(Errno::EINVAL);
        }
        let mut ex = ExCmdHdr::default();
        copy_from_user(ex.as_mut_bytes(), body)?;
        let rest = (count - hdr_len - ex_len) as u64;
        if (hdr.in_words as u64 + ex.provider_in_words as u64) * 8 != rest {
            return Err(Errno::EINVAL);
        }
        if ex.cmd_hdr_reserved != 0 {
            return Err(Errno::EINVAL);
        }
        let out_len = (hdr.out_words as u64 + ex.provider_out_words as u64) * 8;
        if ex.response != 0 {
            if hdr.out_words == 0 && ex.provider_out_words == 0 {
                return Err(Errno::EINVAL);
            }
            if !access_ok(ex.response, out_len) {
                return Err(Errno::EFAULT);
            }
        } else if hdr.out_words != 0 || ex.provider_out_words != 0 {
            return Err(Errno::EINVAL);
        }
        let in_addr = body.wrapping_add(ex_len as u64);
        let core_len = hdr.in_words as usize * 8;
        let core_out_len = hdr.out_words as usize * 8;
        let core_in = InBuf::User { addr: in_addr, len: core_len };
        let core_out = OutBuf::user(ex.response, core_out_len);
        let udata = Udata {
            inp: user_in(in_addr.wrapping_add(core_len as u64), ex.provider_in_words as usize * 8),
            out: user_out(ex.response.wrapping_add(core_out_len as u64), ex.provider_out_words as usize * 8),
        };
        (core_in, core_out, udata)
    } else {
        let mut in_words = hdr.in_words as usize;
        if in_words * 4 != count {
            return Err(Errno::EINVAL);
        }
        if count < def.req + hdr_len {
            // rdma-core v18/v19 sent DESTROY_CQ as a 16-byte write.
            if hdr.command == uverbs::sys::write::CMD_DESTROY_CQ && count == 16 {
                in_words = 6;
            } else {
                return Err(Errno::ENOSPC);
            }
        }
        if hdr.out_words as usize * 4 < def.resp {
            return Err(Errno::ENOSPC);
        }
        let mut in_len = in_words * 4 - hdr_len;
        let mut out_len = hdr.out_words as usize * 4;
        let mut udata = Udata::default();
        if def.udata {
            udata.inp = user_in(body.wrapping_add(def.req as u64), in_len - def.req);
            in_len = def.req;
        }
        let mut response = 0u64;
        if def.has_resp {
            let mut w = [0u8; 8];
            copy_from_user(&mut w, body)?;
            response = u64::from_ne_bytes(w);
            if def.udata {
                udata.out = user_out(response.wrapping_add(def.resp as u64), out_len - def.resp);
                out_len = def.resp;
            }
        } else {
            out_len = 0;
        }
        (InBuf::User { addr: body, len: in_len }, OutBuf::user(response, out_len), udata)
    };

    let mut call = WCall { hca, st, core_in, core_out: CoreOut { buf: core_out, attr: false }, udata, new: None, new_fd: None };
    let r = (def.handler)(&mut call);
    let (new, new_fd) = (call.new.take(), call.new_fd.take());
    finalize(hca, st, new, new_fd, r.is_ok());
    r.map(|_| count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_number_rules() {
        assert_eq!(get_method(0x100).unwrap_err(), Errno::EINVAL);
        assert_eq!(get_method(0x4000_0000).unwrap_err(), Errno::EINVAL);
        assert_eq!(get_method(100).unwrap_err(), Errno::EOPNOTSUPP);
        assert_eq!(get_method(CMD_FLAG_EXTENDED | 0x50).unwrap_err(), Errno::EOPNOTSUPP);
        assert!(get_method(7).unwrap().is_none(), "QUERY_AH is a gap");
        assert!(get_method(21).unwrap().is_none(), "POLL_CQ is disabled on mlx5");
        assert!(get_method(28).unwrap().is_none(), "POST_SEND is disabled on mlx5");
        assert!(get_method(CMD_FLAG_EXTENDED | 8).unwrap().is_none());
        let qd = get_method(1).unwrap().unwrap();
        assert_eq!((qd.ex, qd.req, qd.resp, qd.has_resp, qd.udata), (false, 8, 176, true, false));
        let ex = get_method(CMD_FLAG_EXTENDED | 1).unwrap().unwrap();
        assert_eq!((ex.ex, ex.req, ex.resp), (true, 0, 0), "extended commands have no size minimum");
        for i in 0..NUM_WRITE {
            if let Some(d) = methods::write_def(i) {
                assert!(!d.ex && d.req >= 4, "legacy command {i}");
                assert!(!d.has_resp || d.req >= 8, "command {i} with a response starts with its pointer");
            }
        }
        for i in 0..NUM_WRITE_EX {
            if let Some(d) = methods::write_ex_def(i) {
                assert!(d.ex && d.req == 0 && d.resp == 0, "extended command {i}");
            }
        }
    }
}
