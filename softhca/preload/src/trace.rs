//! `DOORBELL_PRELOAD_TRACE`: one line per intercepted kernel call, decoded.
//!
//! ```text
//! ioctl fd=5 DEVICE.GET_CONTEXT [NUM_COMP_VECTORS out 4 B, CORE_SUPPORT out 8 B, UHW_IN 32 B, UHW_OUT out 72 B] driver=1 -> ok {NUM_COMP_VECTORS=0x2 CORE_SUPPORT=0x1}
//! ioctl fd=5 INVOKE_WRITE(MODIFY_QP) [CORE_IN 112 B qp_handle=5 attr_mask=0x39 -> INIT] driver=1 -> ok
//! write fd=5 CREATE_CQ len=72 in_words=18 out_words=4 (words of 4 B: in 72 B, out 16 B) -> 72
//! mmap fd=5 len=0x1000 prot=W SHARED offset=0x900000 (cmd 9 UAR object entry, index 0) -> 0x7fc4305c0000
//! ```
//!
//! The request is copied from the caller's memory with softhca's checked copies before
//! the call (a bad pointer gives no line rather than a crash) and the outputs after it.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use nix::errno::Errno;
use softhca::uaccess::{copy_from_user, read_struct};
use uverbs::sys::ids::{self, object};
use uverbs::sys::names::{attr_name, method_name, object_name, write_cmd_name};
use uverbs::sys::ioctl::{IoctlAttr, IoctlHdr, RDMA_VERBS_IOCTL, UVERBS_ATTR_F_VALID_OUTPUT};
use uverbs::sys::write::{CmdHdr, CMD_FLAG_EXTENDED};

static ON: AtomicBool = AtomicBool::new(false);

/// Installs the subscriber if `DOORBELL_PRELOAD_TRACE` (the stderr lines) or
/// `DOORBELL_TRACE_DIR` (`doorbell trace`'s recording layer) asks for it; with neither
/// nothing is installed and the decoder below stays off.
pub fn init() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let stderr = crate::shim::flags().trace.as_deref().map(|spec| {
            let filter = if spec == "1" || spec.eq_ignore_ascii_case("true") { "doorbell_preload=trace" } else { spec };
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .without_time()
                // SAFETY: isatty only inspects fd 2.
                .with_ansi(unsafe { libc::isatty(2) } == 1)
                .with_target(false)
                .with_filter(tracing_subscriber::EnvFilter::new(filter))
        });
        let rec = doorbell_trace::layer_from_env().map(|r| r.with_filter(doorbell_trace::record::targets()));
        if stderr.is_none() && rec.is_none() {
            return;
        }
        let sub = tracing_subscriber::registry().with(stderr).with(rec);
        if tracing::subscriber::set_global_default(sub).is_ok() {
            ON.store(true, Ordering::Relaxed);
        }
    });
}

fn on() -> bool {
    ON.load(Ordering::Relaxed) && tracing::enabled!(target: "doorbell_preload", tracing::Level::TRACE)
}

fn errno_text(e: Errno) -> String {
    format!("{e:?}")
}

// ---- names ------------------------------------------------------------------------------

/// Attributes through which the kernel returns a new object's handle or fd (written
/// into the attribute's `data`).
fn is_new(o: u16, m: u16, a: u16) -> bool {
    use ids::{async_event, cq, mlx5, qp, srq};
    matches!((o, m, a),
        (object::CQ, cq::CREATE, cq::ATTR_CREATE_HANDLE)
        | (object::SRQ, srq::CREATE, srq::ATTR_CREATE_HANDLE)
        | (object::QP, qp::CREATE, qp::ATTR_CREATE_HANDLE)
        | (object::ASYNC_EVENT, async_event::ALLOC, async_event::ATTR_ALLOC_FD_HANDLE)
        | (object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC, mlx5::ATTR_UAR_OBJ_ALLOC_HANDLE)
        | (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE, mlx5::ATTR_DEVX_OBJ_CREATE_HANDLE)
        | (object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_REG, mlx5::ATTR_DEVX_UMEM_REG_HANDLE)
        | (object::MLX5_DEVX_ASYNC_CMD_FD, mlx5::DEVX_ASYNC_CMD_FD_ALLOC, mlx5::ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE)
        | (object::MR, ids::mr::REG_DMABUF_MR, ids::mr::ATTR_REG_DMABUF_HANDLE)
        | (object::MR, ids::mr::DM_MR_REG, 0))
}

/// Output attributes (the kernel writes through the pointer in `data`).
fn is_out(o: u16, m: u16, a: u16) -> bool {
    use ids::{cq, device as d, mlx5, qp};
    if o & ids::UVERBS_ID_DRIVER_NS == 0 && a == ids::UVERBS_ATTR_UHW_OUT {
        return true;
    }
    matches!((o, m, a),
        (object::DEVICE, d::INVOKE_WRITE, d::ATTR_CORE_OUT)
        | (object::DEVICE, d::GET_CONTEXT, _)
        | (object::DEVICE, d::QUERY_CONTEXT, _)
        | (object::DEVICE, d::QUERY_PORT, d::ATTR_QUERY_PORT_RESP)
        | (object::DEVICE, d::QUERY_GID_ENTRY, d::ATTR_QUERY_GID_ENTRY_RESP_ENTRY)
        | (object::DEVICE, d::QUERY_GID_TABLE, d::ATTR_QUERY_GID_TABLE_RESP_ENTRIES)
        | (object::DEVICE, d::QUERY_GID_TABLE, d::ATTR_QUERY_GID_TABLE_RESP_NUM_ENTRIES)
        | (object::CQ, cq::CREATE, cq::ATTR_CREATE_RESP_CQE)
        | (object::CQ, cq::DESTROY, cq::ATTR_DESTROY_RESP)
        | (object::QP, qp::CREATE, qp::ATTR_CREATE_RESP_CAP)
        | (object::QP, qp::CREATE, qp::ATTR_CREATE_RESP_QP_NUM)
        | (object::QP, qp::DESTROY, qp::ATTR_DESTROY_RESP)
        | (object::MLX5_DEVX, mlx5::DEVX_OTHER, mlx5::ATTR_DEVX_OTHER_CMD_OUT)
        | (object::MLX5_DEVX, mlx5::DEVX_QUERY_UAR, mlx5::ATTR_DEVX_QUERY_UAR_DEV_IDX)
        | (object::MLX5_DEVX, mlx5::DEVX_QUERY_EQN, mlx5::ATTR_DEVX_QUERY_EQN_DEV_EQN)
        | (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE, mlx5::ATTR_DEVX_OBJ_CREATE_CMD_OUT)
        | (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_MODIFY, mlx5::ATTR_DEVX_OBJ_MODIFY_CMD_OUT)
        | (object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_QUERY, mlx5::ATTR_DEVX_OBJ_QUERY_CMD_OUT)
        | (object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_REG, mlx5::ATTR_DEVX_UMEM_REG_OUT_ID)
        | (object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC, mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET)
        | (object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC, mlx5::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH)
        | (object::MLX5_UAR, mlx5::UAR_OBJ_ALLOC, mlx5::ATTR_UAR_OBJ_ALLOC_PAGE_ID))
        // GET_CONTEXT's and QUERY_CONTEXT's inputs are only the driver's UHW_IN.
        && !(o == object::DEVICE && (m == d::GET_CONTEXT || m == d::QUERY_CONTEXT) && a == ids::UVERBS_ATTR_UHW_IN)
}

/// A few words about a legacy command's core request at `ptr` (the struct after the
/// command header): the QP transition of MODIFY_QP, the range and access of REG_MR.
fn describe_core_in(cmd: u32, ptr: u64, len: usize) -> String {
    let mut b = [0u8; 112];
    let n = len.min(b.len());
    if copy_from_user(&mut b[..n], ptr).is_err() {
        return String::new();
    }
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap_or([0; 4]));
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]));
    match cmd {
        26 if n >= 112 => {
            const STATES: [&str; 7] = ["RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR"];
            let mask = u32_at(68);
            let state = STATES.get(b[96] as usize).copied().unwrap_or("?");
            let mut t = format!(" qp_handle={} attr_mask={mask:#x}", u32_at(64));
            if mask & 1 != 0 {
                let _ = write!(t, " -> {state}");
            }
            if mask & (1 << 20) != 0 {
                let _ = write!(t, " dest_qpn={:#x}", u32_at(84));
            }
            t
        }
        9 if n >= 40 => format!(" start={:#x} length={:#x} pd_handle={} access={:#x}", u64_at(8), u64_at(16), u32_at(32), u32_at(36)),
        _ => String::new(),
    }
}

/// Legacy commands whose answer [`describe_core_out`] decodes; each one's core request
/// starts with the `response` pointer.
fn answers(cmd: u32) -> bool {
    use uverbs::sys::write as w;
    matches!(cmd, w::CMD_GET_CONTEXT | w::CMD_ALLOC_PD | w::CMD_REG_MR | w::CMD_CREATE_COMP_CHANNEL
                  | w::CMD_CREATE_CQ | w::CMD_CREATE_QP | w::CMD_POST_SEND)
}

/// The kernel's answer to a legacy command, from the core response it wrote at `ptr`
/// (`len` bytes of room): the handles, keys and numbers that later calls use. Empty
/// for commands not decoded here.
fn describe_core_out(cmd: u32, ptr: u64, len: usize) -> String {
    use uverbs::sys::verbs as v;
    use uverbs::sys::write as w;
    fn get<T: zerocopy::FromBytes + zerocopy::IntoBytes>(ptr: u64, len: usize) -> Option<T> {
        if len < std::mem::size_of::<T>() {
            return None;
        }
        read_struct(ptr).ok()
    }
    let t = match cmd {
        w::CMD_GET_CONTEXT => get::<v::GetContextResp>(ptr, len)
            .map(|r| format!("async_fd={} num_comp_vectors={}", r.async_fd, r.num_comp_vectors)),
        w::CMD_ALLOC_PD => get::<v::AllocPdResp>(ptr, len).map(|r| format!("pd_handle={}", r.pd_handle)),
        w::CMD_REG_MR => get::<v::RegMrResp>(ptr, len)
            .map(|r| format!("mr_handle={} lkey={:#x} rkey={:#x}", r.mr_handle, r.lkey, r.rkey)),
        w::CMD_CREATE_COMP_CHANNEL => get::<v::CreateCompChannelResp>(ptr, len).map(|r| format!("fd={}", r.fd)),
        w::CMD_CREATE_CQ => get::<v::CreateCqResp>(ptr, len).map(|r| format!("cq_handle={} cqe={}", r.cq_handle, r.cqe)),
        w::CMD_CREATE_QP => get::<v::CreateQpResp>(ptr, len).map(|r| {
            format!("qp_handle={} qpn={:#x} max_send_wr={} max_recv_wr={} max_inline_data={}",
                    r.qp_handle, r.qpn, r.max_send_wr, r.max_recv_wr, r.max_inline_data)
        }),
        w::CMD_POST_SEND => get::<v::PostSendResp>(ptr, len).map(|r| format!("bad_wr={}", r.bad_wr)),
        _ => None,
    };
    t.unwrap_or_default()
}

// ---- ioctl ------------------------------------------------------------------------------

/// The decoded request, kept across the call.
pub struct IoctlPre {
    arg: u64,
    hdr: IoctlHdr,
    attrs: Vec<IoctlAttr>,
}

pub fn ioctl_before(req: libc::c_ulong, arg: u64) -> Option<IoctlPre> {
    if !on() || crate::shim::req_u64(req) != RDMA_VERBS_IOCTL {
        if on() {
            tracing::trace!(target: "doorbell_preload", "ioctl request {req:#x} (not RDMA_VERBS_IOCTL)");
        }
        return None;
    }
    let hdr: IoctlHdr = read_struct(arg).ok()?;
    let attrs = read_attrs(arg, hdr.num_attrs)?;
    Some(IoctlPre { arg, hdr, attrs })
}

fn read_attrs(arg: u64, n: u16) -> Option<Vec<IoctlAttr>> {
    let n = n.min(64) as u64;
    (0..n).map(|i| read_struct::<IoctlAttr>(arg + 24 + 16 * i).ok()).collect()
}

fn read_value(ptr: u64, len: u16) -> Option<u64> {
    let mut b = [0u8; 8];
    let n = (len as usize).min(8);
    copy_from_user(&mut b[..n], ptr).ok()?;
    Some(u64::from_le_bytes(b))
}

/// The legacy command an `INVOKE_WRITE` carries, if this is one.
fn invoke_write_cmd(o: u16, m: u16, attrs: &[IoctlAttr]) -> Option<u32> {
    if o != object::DEVICE || m != ids::device::INVOKE_WRITE {
        return None;
    }
    attrs.iter().find(|a| a.attr_id == ids::device::ATTR_WRITE_CMD).map(|a| a.data as u32)
}

pub fn ioctl_after(fd: i32, pre: Option<IoctlPre>, r: Result<(), Errno>) {
    let Some(p) = pre else { return };
    let (o, m) = (p.hdr.object_id, p.hdr.method_id);
    let mut what = format!("{}.{}", object_name(o), method_name(o, m));
    if o == object::DEVICE && m == ids::device::INVOKE_WRITE {
        if let Some(c) = p.attrs.iter().find(|a| a.attr_id == ids::device::ATTR_WRITE_CMD) {
            what = format!("INVOKE_WRITE({})", write_cmd_name(c.data as u32));
        }
    }
    let after = read_attrs(p.arg, p.hdr.num_attrs).unwrap_or_default();
    let mut req = String::new();
    let mut out = String::new();
    for (i, a) in p.attrs.iter().enumerate() {
        let name = attr_name(o, m, a.attr_id);
        if o == object::DEVICE && m == ids::device::INVOKE_WRITE && a.attr_id == ids::device::ATTR_WRITE_CMD {
            continue;
        }
        let post = after.get(i).copied().unwrap_or(*a);
        let written = post.flags & UVERBS_ATTR_F_VALID_OUTPUT != 0;
        let opt = if a.flags & 1 == 0 { "?" } else { "" };
        if !req.is_empty() {
            req.push_str(", ");
        }
        if a.len == 0 {
            // A handle or fd: in (data = handle) or new (data written back).
            if is_new(o, m, a.attr_id) {
                let _ = write!(req, "{name}{opt} new");
                if r.is_ok() {
                    let _ = write!(out, " {name}={}", post.data);
                }
            } else {
                let _ = write!(req, "{name}{opt}={}", a.data);
            }
        } else if written || is_out(o, m, a.attr_id) {
            let _ = write!(req, "{name}{opt} out {} B", a.len);
            let cmd = invoke_write_cmd(o, m, &p.attrs);
            if let Some(cmd) = cmd.filter(|&c| a.attr_id == ids::device::ATTR_CORE_OUT && answers(c) && r.is_ok()) {
                // A legacy command's response struct, decoded as for write().
                let d = describe_core_out(cmd, post.data, a.len as usize);
                if !d.is_empty() {
                    let _ = write!(out, " {d}");
                    continue;
                }
            }
            if written && a.len <= 8 {
                if let Some(v) = read_value(post.data, a.len) {
                    let _ = write!(out, " {name}={v:#x}");
                }
            }
        } else if (a.len as usize) <= uverbs::sys::ioctl::INLINE_MAX {
            let v = a.data & if a.len >= 8 { u64::MAX } else { (1u64 << (8 * a.len)) - 1 };
            let _ = write!(req, "{name}{opt}={v:#x}");
        } else {
            let _ = write!(req, "{name}{opt} {} B", a.len);
        }
    }
    let res = match r {
        Ok(()) if out.is_empty() => "ok".to_string(),
        Ok(()) => format!("ok {{{}}}", out.trim_start()),
        Err(e) => errno_text(e),
    };
    if o == object::DEVICE && m == ids::device::INVOKE_WRITE {
        let cmd = p.attrs.iter().find(|a| a.attr_id == ids::device::ATTR_WRITE_CMD).map(|a| a.data as u32);
        let core = p.attrs.iter().find(|a| a.attr_id == ids::device::ATTR_CORE_IN);
        if let (Some(cmd), Some(c)) = (cmd, core) {
            if c.len as usize > uverbs::sys::ioctl::INLINE_MAX {
                req.push_str(&describe_core_in(cmd, c.data, c.len as usize));
            }
        }
    }
    if req.is_empty() && o == object::DEVICE && m == ids::device::INVOKE_WRITE {
        req.push_str("WRITE_CMD only: the has-INVOKE_WRITE probe");
    }
    let drv = if p.hdr.driver_id != 0 { format!(" driver={}", p.hdr.driver_id) } else { String::new() };
    tracing::trace!(target: "doorbell_preload", "ioctl fd={fd} {what} [{req}]{drv} -> {res}");
}

// ---- write ------------------------------------------------------------------------------

pub struct WritePre {
    hdr: CmdHdr,
    len: usize,
    detail: String,
    /// Where the kernel writes a decoded command's response.
    resp: Option<u64>,
}

pub fn write_before(buf: u64, len: usize) -> Option<WritePre> {
    if !on() || len < 8 {
        return None;
    }
    let hdr: CmdHdr = read_struct(buf).ok()?;
    let detail = if hdr.command & CMD_FLAG_EXTENDED == 0 { describe_core_in(hdr.command, buf + 8, len - 8) } else { String::new() };
    let resp = if answers(hdr.command) && len >= 16 { read_value(buf + 8, 8) } else { None };
    Some(WritePre { hdr, len, detail, resp })
}

pub fn write_after(fd: i32, pre: Option<WritePre>, r: &Result<usize, Errno>) {
    let Some(p) = pre else { return };
    let c = p.hdr.command;
    let res = match (r, p.resp) {
        (Ok(n), Some(resp)) => match describe_core_out(c, resp, p.hdr.out_words as usize * 4) {
            d if d.is_empty() => format!("{n}"),
            d => format!("{n} {{{d}}}"),
        },
        (Ok(n), None) => format!("{n}"),
        (Err(e), _) => errno_text(*e),
    };
    let (unit, what) = if c & CMD_FLAG_EXTENDED != 0 { (8, "core words of 8 B") } else { (4, "words of 4 B") };
    tracing::trace!(target: "doorbell_preload",
        "write fd={fd} {} len={} in_words={} out_words={} ({what}: in {} B, out {} B){} -> {res}",
        write_cmd_name(c), p.len, p.hdr.in_words, p.hdr.out_words,
        p.hdr.in_words as usize * unit, p.hdr.out_words as usize * unit, p.detail);
}

// ---- mmap -------------------------------------------------------------------------------

/// `mlx5`: the offset is one of mlx5_ib's (softhca's device); a real device of another
/// driver (passthrough) has its own offsets, printed as they are.
pub fn mmap(fd: i32, len: usize, prot: i32, flags: i32, off: i64, r: &Result<u64, Errno>, mlx5: bool) {
    if !on() {
        return;
    }
    let mut p = String::new();
    for (bit, c) in [(libc::PROT_READ, 'R'), (libc::PROT_WRITE, 'W'), (libc::PROT_EXEC, 'X')] {
        if prot & bit != 0 {
            p.push(c);
        }
    }
    let kind = match flags & libc::MAP_TYPE {
        libc::MAP_SHARED => "SHARED",
        libc::MAP_PRIVATE => "PRIVATE",
        _ => "SHARED_VALIDATE",
    };
    let (cmd, index) = uverbs::sys::mlx5::mmap_split(off as u64 / 4096);
    let cmd_name = match cmd {
        0 => "REGULAR_PAGE (static UAR)",
        1 => "GET_CONTIGUOUS_PAGES",
        2 => "WC_PAGE",
        3 => "NC_PAGE",
        5 => "CORE_CLOCK",
        6 => "ALLOC_WC",
        7 => "CLOCK_INFO",
        _ => "UAR object entry",
    };
    let res = match r {
        Ok(a) => format!("{a:#x}"),
        Err(e) => errno_text(*e),
    };
    if !mlx5 {
        tracing::trace!(target: "doorbell_preload", "mmap fd={fd} len={len:#x} prot={p} {kind} offset={off:#x} -> {res}");
        return;
    }
    tracing::trace!(target: "doorbell_preload",
        "mmap fd={fd} len={len:#x} prot={p} {kind} offset={off:#x} (cmd {cmd} {cmd_name}, index {index}) -> {res}");
}
