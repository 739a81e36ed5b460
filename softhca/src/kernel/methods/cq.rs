//! Completion queues: CQ_CREATE (ioctl), CREATE_CQ (write, legacy and extended),
//! CQ_DESTROY / DESTROY_CQ.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::cq as ids;
use uverbs::sys::mlx5::{CreateCq as Mlx5CreateCq, CREATE_CQ_FLAGS_CQE_128B_PAD, CREATE_CQ_FLAGS_REAL_TIME_TS,
                        CREATE_CQ_FLAGS_UAR_PAGE_INDEX};
use uverbs::sys::verbs::{
    CreateCq, CreateCqResp, DestroyCq, DestroyCqResp, ExCreateCq, ExCreateCqResp, CQ_FLAGS_IGNORE_OVERRUN,
    CQ_FLAGS_TIMESTAMP_COMPLETION,
};

use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::mlx5::caps;
use crate::kernel::pin::pin;
use crate::kernel::udata::Udata;
use crate::kernel::uobject::{FdObj, ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::{FileState, Result};
use crate::objects::{AsyncEventFile, CompChannel, Cq, Kind, Live};

/// Core flags the CQ commands accept.
const CQ_FLAGS: u32 = CQ_FLAGS_TIMESTAMP_COMPLETION | CQ_FLAGS_IGNORE_OVERRUN;

/// What the core hands the driver.
pub(crate) struct CqArgs {
    pub cqe: u32,
    pub comp_vector: u32,
    pub flags: u32,
    pub user_handle: u64,
    pub channel: Option<Arc<CompChannel>>,
    pub event_file: Option<Arc<AsyncEventFile>>,
}

/// `mlx5_ib_create_cq` for a user CQ: validates the driver data, builds the CQ context,
/// enters it in the HCA and writes the CQ number to the driver output. Check order as
/// docs/notes/kernel-6.1-uverbs.md §5.3.
pub(crate) fn create_cq(hca: &Hca, st: &FileState, a: CqArgs, udata: &Udata) -> Result<Arc<Cq>> {
    let ctx = st.ctx()?;
    let max = 1u32 << caps::LOG_MAX_CQ_SZ;
    if a.cqe as i32 > max as i32 || (a.cqe as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    if a.flags & !CQ_FLAGS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let entries = (a.cqe + 1).next_power_of_two();
    if entries > max {
        return Err(Errno::EINVAL);
    }
    // create_cq_user
    let inlen = udata.inp.len().min(std::mem::size_of::<Mlx5CreateCq>());
    if inlen < 22 {
        return Err(Errno::EINVAL);
    }
    let mut ucmd = Mlx5CreateCq::default();
    udata.inp.read(0, &mut ucmd.as_mut_bytes()[..inlen])?;
    if ucmd.flags & !(CREATE_CQ_FLAGS_CQE_128B_PAD | CREATE_CQ_FLAGS_UAR_PAGE_INDEX | CREATE_CQ_FLAGS_REAL_TIME_TS) != 0 {
        return Err(Errno::EINVAL);
    }
    if (ucmd.cqe_size != 64 && ucmd.cqe_size != 128) || ucmd.reserved0 != 0 || ucmd.reserved1 != 0 {
        return Err(Errno::EINVAL);
    }
    pin(ucmd.buf_addr, entries as u64 * ucmd.cqe_size as u64, true)?;
    // The CQC's page offset is in 64-byte units.
    if ucmd.buf_addr % 64 != 0 {
        return Err(Errno::EINVAL);
    }
    pin(ucmd.db_addr & !0xfff, 4096, false)?;
    let uar_page = if ucmd.flags & CREATE_CQ_FLAGS_UAR_PAGE_INDEX != 0 {
        ucmd.uar_page_index as u32
    } else if ctx.dyn_uar {
        return Err(Errno::EINVAL);
    } else {
        ctx.bfregs.as_ref().and_then(|b| b.sys_pages.first()?.as_ref().map(|u| u.page)).unwrap_or(0)
    };
    if ucmd.cqe_comp_en == 1 {
        // No CQE compression on this device.
        return Err(Errno::EOPNOTSUPP);
    }
    if ucmd.flags & CREATE_CQ_FLAGS_CQE_128B_PAD != 0 {
        // No 128-byte CQE padding either.
        return Err(Errno::EOPNOTSUPP);
    }
    let cqn = hca.alloc_cqn().ok_or(Errno::ENOMEM)?;
    if let Err(e) = udata.copy_to(cqn.as_bytes()) {
        hca.free_cqn(cqn);
        return Err(e);
    }
    let cq = Arc::new(Cq {
        cqn,
        entries,
        cqe: entries - 1,
        cqe_size: ucmd.cqe_size,
        buf_addr: ucmd.buf_addr,
        db_addr: ucmd.db_addr,
        uar_page,
        user_handle: a.user_handle,
        comp_vector: a.comp_vector,
        flags: a.flags,
        mlx5_flags: ucmd.flags,
        cqe_comp: None,
        comp_channel: a.channel,
        event_file: a.event_file,
        comp_events_reported: AtomicU32::new(0),
        async_events_reported: AtomicU32::new(0),
        usecnt: AtomicU32::new(0),
        dev: Mutex::new(Default::default()),
        _live: Live::new(hca.live_counts(), Kind::Cq),
    });
    hca.insert_cq(&cq);
    // mlx5_ib's CREATE_CQ runs in the firmware under the context's uid.
    hca.firmware().register_verbs_cq(&cq, ctx.devx_uid);
    Ok(cq)
}

fn channel_of(o: Option<&FdObj>) -> Option<Arc<CompChannel>> {
    match o {
        Some(FdObj::Comp(c)) => Some(c.clone()),
        _ => None,
    }
}

fn async_of(o: Option<&FdObj>) -> Option<Arc<AsyncEventFile>> {
    match o {
        Some(FdObj::Async(a)) => Some(a.clone()),
        _ => None,
    }
}

/// `UVERBS_METHOD_CQ_CREATE`.
pub(crate) fn create_cq_ioctl(c: &mut Call<'_>) -> Result<()> {
    let comp_vector: u32 = c.b.copy_from(ids::ATTR_CREATE_COMP_VECTOR)?;
    let cqe: u32 = c.b.copy_from(ids::ATTR_CREATE_CQE)?;
    let user_handle: u64 = c.b.copy_from(ids::ATTR_CREATE_USER_HANDLE)?;
    let flags = c.b.get_flags32(ids::ATTR_CREATE_FLAGS, CQ_FLAGS as u64)?;
    let channel = channel_of(c.b.fd_obj(ids::ATTR_CREATE_COMP_CHANNEL));
    let event_file = async_of(c.b.fd_obj(ids::ATTR_CREATE_EVENT_FD)).or_else(|| c.st.default_async.clone());
    if comp_vector >= c.hca.config().num_comp_vectors {
        return Err(Errno::EINVAL);
    }
    let cq = create_cq(c.hca, c.st, CqArgs { cqe, comp_vector, flags, user_handle, channel, event_file }, &c.udata)?;
    let resp_cqe = cq.cqe;
    c.fill_new(ids::ATTR_CREATE_HANDLE, Uobj::Cq(cq))?;
    c.b.copy_to(ids::ATTR_CREATE_RESP_CQE, resp_cqe.as_bytes())
}

/// The write path's `create_cq`: comp_vector, then the handle, then the channel fd.
fn create_cq_common(c: &mut WCall<'_>, cmd: ExCreateCq) -> Result<Arc<Cq>> {
    if cmd.comp_vector >= c.hca.config().num_comp_vectors {
        return Err(Errno::EINVAL);
    }
    let h = c.alloc(ObjType::Cq)?;
    let channel = if cmd.comp_channel >= 0 {
        channel_of(Some(&super::channel::lookup_fd(c.st, cmd.comp_channel, crate::kernel::ioctl::FdType::CompChannel)?))
    } else {
        None
    };
    let args = CqArgs {
        cqe: cmd.cqe,
        comp_vector: cmd.comp_vector,
        flags: cmd.flags,
        user_handle: cmd.user_handle,
        channel,
        event_file: c.st.default_async.clone(),
    };
    let cq = create_cq(c.hca, c.st, args, &c.udata)?;
    c.st.table.fill(h, Uobj::Cq(cq.clone()));
    Ok(cq)
}

/// CREATE_CQ (write 18).
pub(crate) fn create_cq_write(c: &mut WCall<'_>) -> Result<()> {
    let cmd: CreateCq = c.request()?;
    let ex = ExCreateCq {
        user_handle: cmd.user_handle,
        cqe: cmd.cqe,
        comp_vector: cmd.comp_vector,
        comp_channel: cmd.comp_channel,
        ..Default::default()
    };
    let cq = create_cq_common(c, ex)?;
    let h = c.new.unwrap_or(0);
    c.response(CreateCqResp { cq_handle: h, cqe: cq.cqe }.as_bytes())
}

/// EX_CREATE_CQ.
pub(crate) fn create_cq_ex(c: &mut WCall<'_>) -> Result<()> {
    let cmd: ExCreateCq = c.request()?;
    if cmd.comp_mask != 0 || cmd.reserved != 0 {
        return Err(Errno::EINVAL);
    }
    let cq = create_cq_common(c, cmd)?;
    let h = c.new.unwrap_or(0);
    let mut resp = ExCreateCqResp { base: CreateCqResp { cq_handle: h, cqe: cq.cqe }, ..Default::default() };
    resp.response_length = c.response_length(std::mem::size_of_val(&resp));
    c.response(resp.as_bytes())
}

/// The events of a destroyed CQ the application read: the kernel counts an event when it
/// is read and drops the unread ones at destroy, so the unread records are taken back out
/// of the channel and the async file and not reported (libibverbs would otherwise wait
/// forever for acknowledgements of events nobody read).
fn destroy_resp(cq: &Cq) -> DestroyCqResp {
    let unread_comp = cq.comp_channel.as_ref().map_or(0, |ch| ch.discard(cq.user_handle));
    let unread_async = cq.event_file.as_ref().map_or(0, |f| f.discard(cq.user_handle));
    DestroyCqResp {
        comp_events_reported: cq.comp_events_reported.load(Ordering::SeqCst).saturating_sub(unread_comp),
        async_events_reported: cq.async_events_reported.load(Ordering::SeqCst).saturating_sub(unread_async),
    }
}

/// `UVERBS_METHOD_CQ_DESTROY`: the CQ is already gone; report its event counts.
pub(crate) fn destroy_cq_ioctl(c: &mut Call<'_>) -> Result<()> {
    let Some(Uobj::Cq(cq)) = c.destroyed.as_ref() else { return Err(Errno::EINVAL) };
    let resp = destroy_resp(cq);
    c.b.copy_to(ids::ATTR_DESTROY_RESP, resp.as_bytes())
}

/// DESTROY_CQ (write 20).
pub(crate) fn destroy_cq_write(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DestroyCq = c.request()?;
    let obj = c.st.destroy(c.hca, cmd.cq_handle as i64, ObjType::Cq)?;
    let Uobj::Cq(cq) = obj else { return Err(Errno::EINVAL) };
    c.response(destroy_resp(&cq).as_bytes())
}
