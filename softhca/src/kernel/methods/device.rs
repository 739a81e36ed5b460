//! DEVICE methods: INVOKE_WRITE, INFO_HANDLES, QUERY_DEVICE (legacy and extended).

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::device as dev;
use uverbs::sys::verbs::{ExQueryDevice, QueryDevice};

use crate::kernel::ioctl::Call;
use crate::kernel::mlx5::{query_device_core, query_device_driver, query_device_ex_core};
use crate::kernel::udata::{InBuf, OutBuf};
use crate::kernel::uobject::ObjType;
use crate::kernel::write::{self, CoreOut, WCall};
use crate::kernel::Result;

/// `UVERBS_METHOD_INVOKE_WRITE`: a write command carried by an ioctl. The command number
/// goes through the write table (gaps and disabled commands are EOPNOTSUPP), CORE_IN and
/// CORE_OUT shorter than the command's structs are ENOSPC, and the `response` word inside
/// CORE_IN is ignored: output goes to CORE_OUT.
pub(crate) fn invoke_write(c: &mut Call<'_>) -> Result<()> {
    let cmd = c.b.get_const(dev::ATTR_WRITE_CMD, u32::MAX as u64)? as u32;
    let def = write::get_method(cmd)?.ok_or(Errno::EOPNOTSUPP)?;
    let core_in = c.b.in_buf(dev::ATTR_CORE_IN).unwrap_or_else(InBuf::empty);
    let core_out = match c.b.out_buf(dev::ATTR_CORE_OUT) {
        Some(o) => CoreOut { buf: o, attr: true },
        None => CoreOut { buf: OutBuf::default(), attr: false },
    };
    if core_in.len() < def.req || core_out.buf.len < def.resp {
        return Err(Errno::ENOSPC);
    }
    let mut w = WCall { hca: c.hca, st: c.st, core_in, core_out, udata: c.udata, new: None, new_fd: None };
    let r = (def.handler)(&mut w);
    let (new, new_fd) = (w.new.take(), w.new_fd.take());
    write::finalize(c.hca, c.st, new, new_fd, r.is_ok());
    r
}

/// `UVERBS_METHOD_INFO_HANDLES`: the handles of one object type, newest first.
pub(crate) fn info_handles(c: &mut Call<'_>) -> Result<()> {
    let out = c.b.out_buf(dev::ATTR_INFO_HANDLES_LIST).ok_or(Errno::EINVAL)?;
    if out.len == 0 || out.len % 4 != 0 {
        return Err(Errno::EINVAL);
    }
    let id = c.b.get_const(dev::ATTR_INFO_OBJECT_ID, u16::MAX as u64)? as u16;
    let handles = if id == uverbs::sys::ids::object::DEVICE {
        Vec::new()
    } else {
        let ty = ObjType::from_object_id(id).ok_or(Errno::ENOENT)?;
        c.st.table.handles_of(ty)
    };
    let n = handles.len().min(out.len / 4);
    c.b.copy_to(dev::ATTR_INFO_HANDLES_LIST, handles[..n].as_bytes())?;
    c.b.copy_to(dev::ATTR_INFO_TOTAL_HANDLES, (n as u64).as_bytes())
}

/// QUERY_DEVICE (write 1): the core attributes, no driver data.
pub(crate) fn query_device(c: &mut WCall<'_>) -> Result<()> {
    c.st.ctx()?;
    let _cmd: QueryDevice = c.request()?;
    c.response(query_device_core(c.hca).as_bytes())
}

/// EX_QUERY_DEVICE: core attributes plus mlx5's `mlx5_ib_query_device_resp` in the
/// driver output.
pub(crate) fn query_device_ex(c: &mut WCall<'_>) -> Result<()> {
    c.st.ctx()?;
    let cmd: ExQueryDevice = c.request()?;
    if cmd.comp_mask != 0 || cmd.reserved != 0 {
        return Err(Errno::EINVAL);
    }
    query_device_driver(&c.udata)?;
    let mut resp = query_device_ex_core(c.hca);
    resp.response_length = c.response_length(std::mem::size_of_val(&resp));
    c.response(resp.as_bytes())
}
