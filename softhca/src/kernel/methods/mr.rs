//! Memory registration: REG_MR (write/INVOKE_WRITE), DEREG_MR / MR_DESTROY, QUERY_MR,
//! REG_DMABUF_MR, and ADVISE_MR (always EOPNOTSUPP: no on-demand paging).
//!
//! REG_DMABUF_MR: a ConnectX DMAs straight into the exporter's memory (GPU memory through
//! PCIe peer-to-peer). softhca keeps Linux 6.1's order of checks and errnos
//! (`UVERBS_HANDLER(UVERBS_METHOD_REG_DMABUF_MR)`: the page offsets of `offset` and
//! `iova` must agree, then the access flags; `ib_umem_dmabuf_get`: `offset + length`
//! must not wrap, `dma_buf_get` answers EBADF for a bad fd and EINVAL for a file that is
//! not a dma-buf, recognised here by the `exp_name` line of its /proc fdinfo, the range
//! must lie inside the buffer and span at least one page, all EINVAL; the page count is
//! taken before the umem has an iova, so it counts `length` alone: only a zero length
//! fails it, at any offset). Then it finds a
//! way to reach the bytes, where the NIC would attach to the dma-buf:
//! 1. the installed [`crate::peer`] resolvers, first: one that claims the exporter (gdr's
//!    for `nv_dmabuf`, a test's for its own) gives a [`crate::peer::PeerMemory`], and the
//!    MR becomes peer memory ([`MrBacking::Peer`]);
//! 2. else a shared mapping of the whole buffer, for an exporter that supports mmap
//!    (vgem, udmabuf): the MR is then ordinary memory of this process
//!    ([`MrBacking::Dmabuf`]); through an fd opened read-only the mapping can only be
//!    read-only, so the device refuses writes into that MR (a real NIC would DMA into
//!    it: the kernel never looks at the fd's mode);
//! 3. else EOPNOTSUPP, as a NIC that cannot attach (no peer-to-peer) answers.
//!
//! The iova is only a name, as on a real NIC: work requests address the MR by it and
//! softhca translates to the buffer's bytes, whatever the caller chose (perftest and NCCL
//! choose the CUDA pointer, which makes GPU addresses and iovas the same numbers).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::mr as ids;
use uverbs::sys::verbs::{
    DeregMr, RegMr, RegMrResp, ACCESS_LOCAL_WRITE, ACCESS_MW_BIND, ACCESS_ON_DEMAND, ACCESS_OPTIONAL_RANGE,
    ACCESS_RELAXED_ORDERING, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE,
};

use crate::hca::Hca;
use crate::kernel::ioctl::Call;
use crate::kernel::pin::pin;
use crate::kernel::uobject::{ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::Result;
use crate::objects::{KeySpan, Kind, Live, Mr, MrBacking, Pd};
use crate::peer::{self, DmabufRequest};

/// `IB_ACCESS_SUPPORTED`: bits 0..7 and the optional range.
const ACCESS_SUPPORTED: u32 = ((1 << 8) - 1) | ACCESS_OPTIONAL_RANGE;

/// `ib_check_mr_access`: remote write/atomic need local write; no unknown bits; no ODP
/// (this device has no on-demand paging).
pub(crate) fn check_mr_access(flags: u32) -> Result<()> {
    if flags & (ACCESS_REMOTE_ATOMIC | ACCESS_REMOTE_WRITE) != 0 && flags & ACCESS_LOCAL_WRITE == 0 {
        return Err(Errno::EINVAL);
    }
    if flags & !ACCESS_SUPPORTED != 0 {
        return Err(Errno::EINVAL);
    }
    if flags & ACCESS_ON_DEMAND != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(())
}

fn writable(access: u32) -> bool {
    access & (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC | ACCESS_MW_BIND) != 0
}

/// Makes the MKey: allocates a key, counts the PD use, enters the MR in the HCA table.
fn make_mr(hca: &Hca, pd: Arc<Pd>, addr: u64, length: u64, iova: u64, access: u32, backing: MrBacking) -> Result<Arc<Mr>> {
    let key = hca.alloc_mkey().ok_or(Errno::ENOMEM)?;
    pd.usecnt.fetch_add(1, Ordering::SeqCst);
    let peer = backing.peer().is_some();
    let by_ref = matches!(backing, MrBacking::User) && crate::kernel::pin::cma_readable(addr, length);
    let mr = Arc::new(Mr {
        span: KeySpan { pdn: pd.pdn, lkey: key, rkey: key, addr, length, iova, access, peer, by_ref },
        pd, backing,
        _live: Live::new(hca.live_counts(), Kind::Mr),
    });
    hca.insert_mr(&mr);
    Ok(mr)
}

fn pd_of(o: Uobj) -> Result<Arc<Pd>> {
    match o {
        Uobj::Pd(pd) => Ok(pd),
        _ => Err(Errno::EINVAL),
    }
}

/// REG_MR (write 9).
pub(crate) fn reg_mr(c: &mut WCall<'_>) -> Result<()> {
    let cmd: RegMr = c.request()?;
    if (cmd.start ^ cmd.hca_va) & 0xfff != 0 {
        return Err(Errno::EINVAL);
    }
    let h = c.alloc(ObjType::Mr)?;
    check_mr_access(cmd.access_flags)?;
    let pd = pd_of(c.st.table.lookup(cmd.pd_handle as i64, ObjType::Pd)?)?;
    pin(cmd.start, cmd.length, writable(cmd.access_flags))?;
    let mr = make_mr(c.hca, pd, cmd.start, cmd.length, cmd.hca_va, cmd.access_flags, MrBacking::User)?;
    let resp = RegMrResp { mr_handle: h, lkey: mr.span.lkey, rkey: mr.span.rkey };
    c.st.table.fill(h, Uobj::Mr(mr));
    c.response(resp.as_bytes())
}

/// DEREG_MR (write 13).
pub(crate) fn dereg_mr(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DeregMr = c.request()?;
    c.st.destroy(c.hca, cmd.mr_handle as i64, ObjType::Mr).map(|_| ())
}

/// `UVERBS_METHOD_QUERY_MR`.
pub(crate) fn query_mr(c: &mut Call<'_>) -> Result<()> {
    let Some(Uobj::Mr(mr)) = c.b.obj(ids::ATTR_QUERY_HANDLE).cloned() else { return Err(Errno::EINVAL) };
    c.b.copy_to(ids::ATTR_QUERY_RESP_LKEY, mr.span.lkey.as_bytes())?;
    c.b.copy_to(ids::ATTR_QUERY_RESP_RKEY, mr.span.rkey.as_bytes())?;
    c.b.copy_to(ids::ATTR_QUERY_RESP_LENGTH, mr.span.length.as_bytes())?;
    c.b.copy_to_opt(ids::ATTR_QUERY_RESP_IOVA, mr.span.iova.as_bytes())
}

/// `UVERBS_METHOD_ADVISE_MR` (`ibv_advise_mr`): EOPNOTSUPP, once the attributes have
/// passed their spec checks (the PD handle, the four mandatory attributes, an SGE list
/// of at least one `ib_uverbs_sge` that can be copied in).
///
/// The method is in the core's tree for every device (uverbs_std_types_mr.c; there is
/// no per-method `UAPI_DEF_OBJ_NEEDS_FN`), but its handler starts with
/// `if (!ib_dev->ops.advise_mr) return -EOPNOTSUPP;`, before reading the advice, the
/// flags or the SGE list. mlx5_ib installs `advise_mr` only on a device with on-demand
/// paging (odp.c, `mlx5_ib_odp_init_one`: `mlx5_ib_dev_odp_ops` is set when
/// `odp_caps.general_caps` has `IB_ODP_SUPPORT`), and softhca has none (ODP access is
/// refused at registration, [`check_mr_access`]). So a ConnectX without ODP, and rxe in
/// Linux 6.1, answer EOPNOTSUPP here whatever the advice; so does softhca.
pub(crate) fn advise_mr(_c: &mut Call<'_>) -> Result<()> {
    Err(Errno::EOPNOTSUPP)
}

/// The exporter name and size of a dma-buf, or EBADF/EINVAL as `dma_buf_get` would
/// answer (a file [`peer::emulate_dmabuf`] names counts as a dma-buf, for tests).
fn dmabuf_info(fd: i32) -> Result<(String, u64)> {
    if fd < 0 {
        return Err(Errno::EBADF);
    }
    nix::sys::stat::fstat(fd).map_err(|_| Errno::EBADF)?;
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).map_err(|_| Errno::EBADF)?;
    let Some(exporter) = info.lines().find_map(|l| l.strip_prefix("exp_name:")) else {
        return peer::emulated(fd).ok_or(Errno::EINVAL);
    };
    let size = info.lines()
        .find_map(|l| l.strip_prefix("size:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or(Errno::EINVAL)?;
    Ok((exporter.trim().to_string(), size))
}

/// Whether `fd` was opened read-only (`O_ACCMODE` of its status flags).
fn fcntl_read_only(fd: i32) -> bool {
    // SAFETY: F_GETFL reads the status flags of an fd we own; no memory is passed.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl >= 0 && fl & libc::O_ACCMODE == libc::O_RDONLY
}

/// `UVERBS_METHOD_REG_DMABUF_MR` (see the module docs for the order of checks and of the
/// ways to reach the bytes).
pub(crate) fn reg_dmabuf_mr(c: &mut Call<'_>) -> Result<()> {
    let pd = pd_of(c.b.obj(ids::ATTR_REG_DMABUF_PD_HANDLE).cloned().ok_or(Errno::EINVAL)?)?;
    let offset: u64 = c.b.copy_from(ids::ATTR_REG_DMABUF_OFFSET)?;
    let length: u64 = c.b.copy_from(ids::ATTR_REG_DMABUF_LENGTH)?;
    let iova: u64 = c.b.copy_from(ids::ATTR_REG_DMABUF_IOVA)?;
    if (offset ^ iova) & 0xfff != 0 {
        return Err(Errno::EINVAL);
    }
    let fd: u32 = c.b.copy_from(ids::ATTR_REG_DMABUF_FD)?;
    let access = c.b.get_flags32(ids::ATTR_REG_DMABUF_ACCESS_FLAGS,
        (ACCESS_LOCAL_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC | ACCESS_RELAXED_ORDERING) as u64)?;
    check_mr_access(access)?;
    // ib_umem_dmabuf_get
    let end = offset.checked_add(length).ok_or(Errno::EINVAL)?;
    let (exporter, size) = dmabuf_info(fd as i32)?;
    if size < end {
        return Err(Errno::EINVAL);
    }
    // `ib_umem_num_pages` with the umem's iova still 0: the pages of `length` alone, so
    // only a zero length has none (whatever the offset).
    if length == 0 {
        return Err(Errno::EINVAL);
    }
    let dup = nix::unistd::dup(fd as i32).map_err(|_| Errno::EBADF)?;
    // SAFETY: `dup` returned a new fd owned by nobody else.
    let dup = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(dup) };
    // Where the NIC would attach: the exporter's own engine first, then a CPU mapping.
    let req = DmabufRequest { fd: dup.as_fd(), exporter: &exporter, size, offset, length, iova };
    let mut device_access = access;
    let (addr, backing) = match peer::claim(&req)? {
        Some((mem, dev_addr)) => {
            tracing::debug!(target: "softhca::mr", exporter = %exporter, memory = mem.name(), addr = %format_args!("{dev_addr:#x}"),
                            length, "dma-buf MR in peer memory");
            (dev_addr, MrBacking::Peer { fd: dup, mem, addr: dev_addr })
        }
        None => {
            let map_len = usize::try_from(size).map_err(|_| Errno::EINVAL)?;
            // The kernel never looks at the fd's mode (a NIC DMAs into a dma-buf opened
            // read-only too), but a CPU mapping through a read-only fd can only be
            // read-only. The device then refuses writes into such an MR (local write,
            // remote write and atomics fail their rights check: LOCAL_PROT_ERR or
            // REMOTE_ACCESS_ERR) instead of faulting on the mapping; reads work.
            let read_only = fcntl_read_only(dup.as_raw_fd());
            let prot = if read_only {
                device_access &= !(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC);
                libc::PROT_READ
            } else {
                libc::PROT_READ | libc::PROT_WRITE
            };
            // SAFETY: a new shared mapping of the dma-buf chosen by the kernel; it
            // overlaps nothing and is unmapped when the MR is dropped.
            let map = unsafe { libc::mmap(std::ptr::null_mut(), map_len, prot, libc::MAP_SHARED, dup.as_raw_fd(), 0) };
            if map == libc::MAP_FAILED {
                tracing::debug!(target: "softhca::mr", exporter = %exporter, "dma-buf: no resolver and no mmap: {}", std::io::Error::last_os_error());
                return Err(Errno::EOPNOTSUPP);
            }
            (map as u64 + offset, MrBacking::Dmabuf { fd: dup, map: map as u64, map_len })
        }
    };
    let mr = make_mr(c.hca, pd, addr, length, iova, device_access, backing)?;
    let (lkey, rkey) = (mr.span.lkey, mr.span.rkey);
    c.fill_new(ids::ATTR_REG_DMABUF_HANDLE, Uobj::Mr(mr))?;
    c.b.copy_to(ids::ATTR_REG_DMABUF_RESP_LKEY, lkey.as_bytes())?;
    c.b.copy_to(ids::ATTR_REG_DMABUF_RESP_RKEY, rkey.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_rules() {
        assert_eq!(check_mr_access(ACCESS_REMOTE_WRITE), Err(Errno::EINVAL));
        assert_eq!(check_mr_access(ACCESS_REMOTE_ATOMIC), Err(Errno::EINVAL));
        assert_eq!(check_mr_access(ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC), Ok(()));
        assert_eq!(check_mr_access(ACCESS_REMOTE_READ | ACCESS_RELAXED_ORDERING), Ok(()));
        assert_eq!(check_mr_access(1 << 30), Err(Errno::EINVAL));
        assert_eq!(check_mr_access(ACCESS_ON_DEMAND | ACCESS_LOCAL_WRITE), Err(Errno::EINVAL));
    }

    #[test]
    fn dmabuf_detection() {
        assert_eq!(dmabuf_info(-1), Err(Errno::EBADF));
        assert_eq!(dmabuf_info(999_999), Err(Errno::EBADF));
        let f = nix::sys::memfd::memfd_create(c"not-a-dmabuf", nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC).unwrap();
        assert_eq!(dmabuf_info(f.as_raw_fd()), Err(Errno::EINVAL));
        // Emulated for tests: recognised by inode (through a duplicate too), until the
        // guard goes.
        let g = peer::emulate_dmabuf(f.as_fd(), "test_exp", 12288).unwrap();
        let d = nix::unistd::dup(f.as_raw_fd()).unwrap();
        assert_eq!(dmabuf_info(d), Ok(("test_exp".to_string(), 12288)));
        drop(g);
        assert_eq!(dmabuf_info(d), Err(Errno::EINVAL));
        nix::unistd::close(d).unwrap();
    }
}
