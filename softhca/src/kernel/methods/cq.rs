//! Completion queues: CQ_CREATE (ioctl), CREATE_CQ (write, legacy and extended),
//! CQ_DESTROY / DESTROY_CQ.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::cq as ids;
use uverbs::sys::mlx5::{CreateCq as Mlx5CreateCq, CREATE_CQ_FLAGS_CQE_128B_PAD, CREATE_CQ_FLAGS_REAL_TIME_TS,
                        CREATE_CQ_FLAGS_UAR_PAGE_INDEX};
use uverbs::sys::verbs::{
    CreateCq, CreateCqResp, DestroyCq, DestroyCqResp, ExCreateCq, ExCreateCqResp, CQ_FLAGS_IGNORE_OVERRUN,
    CQ_FLAGS_TIMESTAMP_COMPLETION,
};

use prm::bits::{View, ViewMut};
use prm::cmd::cq::{cqe_sz, CreateCqIn, CreateCqOut, Cqc, DestroyCqIn};
use prm::cmd::header::MboxOut;
use prm::cmd::opcode as op;

use crate::firmware::{CqHost, Host, FIRST_COMP_EQN};
use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::mlx5::caps;
use crate::kernel::pin::pin;
use crate::kernel::udata::Udata;
use crate::kernel::uobject::{FdObj, ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::{FileState, Result};
use crate::objects::{AsyncEventFile, CompChannel, Cq};

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

/// `mlx5_ib_create_cq` for a user CQ: validates the driver data, has the firmware make
/// the CQ (CREATE_CQ, [`create_cq_inbox`]) and writes the CQ number to the driver
/// output. Check order as
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
    // mlx5_ib_create_cq: CREATE_CQ under the context's uid, and the firmware's CQ is
    // the verbs CQ.
    let inbox = create_cq_inbox(ctx.devx_uid, entries, ucmd.cqe_size, uar_page, a.comp_vector, ucmd.buf_addr,
                                ucmd.db_addr);
    let host = CqHost {
        user_handle: a.user_handle,
        flags: a.flags,
        mlx5_flags: ucmd.flags,
        comp_channel: a.channel,
        event_file: a.event_file,
    };
    let fw = hca.firmware();
    let out = fw.kernel_cmd(&inbox, CreateCqOut::BYTES, Some(Host::Cq(host)))?;
    let cqn = View::<CreateCqOut>::new(&out).map_err(|_| Errno::EIO)?.get(CreateCqOut::cqn);
    let Some(cq) = fw.cq(cqn) else { return Err(Errno::EIO) };
    if let Err(e) = udata.copy_to(cqn.as_bytes()) {
        let _ = destroy_cq_cmd(hca, cqn, ctx.devx_uid);
        return Err(e);
    }
    Ok(cq)
}

/// The CREATE_CQ inbox `create_cq_user` and `mlx5_ib_create_cq` build for a user CQ:
/// the ring as a page list of the pinned buffer (softhca's DMA addresses are the
/// process's virtual addresses, its pages 4 KiB: `log_page_size` 0, `page_offset` in
/// 64-byte units), the CQE size, `log_cq_size`, the UAR page, the completion EQ of the
/// vector and the doorbell record's address. IGNORE_OVERRUN would set `cqc.oi`, which
/// softhca's capabilities do not have (`cq_oi` 0): its CQs report no overrun at all, so
/// the flag stays the kernel half's (on the CQ) and the firmware is not asked for it.
pub(crate) fn create_cq_inbox(uid: u16, entries: u32, cqe_size: u32, uar_page: u32, comp_vector: u32, buf: u64,
                              db: u64) -> Vec<u8> {
    const PAGE: u64 = 4096;
    let first = buf & !(PAGE - 1);
    let end = buf + entries as u64 * cqe_size as u64;
    let npages = (end - first).div_ceil(PAGE).max(1) as usize;
    let mut b = vec![0u8; CreateCqIn::BYTES + npages * 8];
    if let Ok(mut v) = ViewMut::<CreateCqIn>::new(&mut b) {
        v.set(CreateCqIn::opcode, op::CREATE_CQ).set(CreateCqIn::uid, uid);
        v.sub_mut(CreateCqIn::cq_context)
            .set(Cqc::cqe_sz, if cqe_size == 128 { cqe_sz::BYTES_128 } else { cqe_sz::BYTES_64 })
            .set(Cqc::log_cq_size, entries.trailing_zeros() as u8)
            .set(Cqc::uar_page, uar_page)
            .set(Cqc::c_eqn, (FIRST_COMP_EQN + comp_vector) as u8)
            .set(Cqc::log_page_size, 0)
            .set(Cqc::page_offset, ((buf - first) / 64) as u8)
            .set(Cqc::dbr_addr, db);
    }
    for (i, e) in b[CreateCqIn::BYTES..].chunks_exact_mut(8).enumerate() {
        e.copy_from_slice(&(first + i as u64 * PAGE).to_be_bytes());
    }
    b
}

/// DESTROY_CQ (`mlx5_core_destroy_cq`) under the context's uid.
pub(crate) fn destroy_cq_cmd(hca: &Hca, cqn: u32, uid: u16) -> Result<()> {
    let mut b = vec![0u8; DestroyCqIn::BYTES];
    if let Ok(mut v) = ViewMut::<DestroyCqIn>::new(&mut b) {
        v.set(DestroyCqIn::opcode, op::DESTROY_CQ).set(DestroyCqIn::uid, uid).set(DestroyCqIn::cqn, cqn);
    }
    hca.firmware().kernel_cmd(&b, MboxOut::BYTES, None).map(|_| ())
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
