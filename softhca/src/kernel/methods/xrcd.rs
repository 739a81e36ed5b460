//! XRC domains: OPEN_XRCD (write 37) and CLOSE_XRCD (write 38).
//!
//! `ib_uverbs_open_xrcd` (uverbs_cmd.c): `fd` -1 makes a private domain; any other fd
//! names a file whose inode keys the device's table of shared domains
//! (`xrcd_tree`), so every process that opens the same file on the same device gets
//! the same domain. A bad fd is EBADF; an inode without a domain and no O_CREAT is
//! EAGAIN; one with a domain and O_EXCL is EINVAL (not EEXIST). A new domain is the
//! firmware's ALLOC_XRCD (`mlx5_ib_alloc_xrcd`, under the context's uid); with an
//! inode, the domain counts its openers (`xrcd->usecnt`) and goes (DEALLOC_XRCD, out of
//! the table) when the last one closes it (`ib_uverbs_dealloc_xrcd`). Closing a handle
//! that SRQs or QPs were made from is EBUSY (the uobject's `refcnt`,
//! `uverbs_free_xrcd`).
//!
//! On softhca the "device" of the table is the HCA instance: the embedded default gives
//! each process its own, so two processes share a domain only through one softhca
//! instance (`DOORBELL_SOFTHCA_ADDR` shared is not enough: each has its own firmware).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::verbs::{CloseXrcd, OpenXrcd, OpenXrcdResp};

use prm::bits::{View, ViewMut};
use prm::cmd::header::MboxOut;
use prm::cmd::opcode as op;
use prm::cmd::xrcd::{AllocXrcdIn, AllocXrcdOut, DeallocXrcdIn};

use crate::hca::Hca;
use crate::kernel::uobject::{ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::Result;

/// `struct ib_xrcd`: the domain number, the inode that shares it (device and inode
/// number), and the openers through that inode.
#[derive(Debug)]
pub(crate) struct Xrcd {
    pub xrcdn: u32,
    pub inode: Option<(u64, u64)>,
    pub usecnt: AtomicU32,
}

/// `struct ib_uxrcd_object`: one handle of a domain, with the SRQs and QPs made
/// through it (`refcnt`).
#[derive(Debug)]
pub(crate) struct UXrcd {
    pub xrcd: Arc<Xrcd>,
    pub refcnt: AtomicU32,
}

/// The inode of an open file descriptor of this process (`file_inode(fdget(fd))`).
fn inode_of(fd: i32) -> Result<(u64, u64)> {
    let st = nix::sys::stat::fstat(fd).map_err(|_| Errno::EBADF)?;
    Ok((st.st_dev as u64, st.st_ino as u64))
}

/// ALLOC_XRCD in the firmware.
fn alloc_xrcd_cmd(hca: &Hca, uid: u16) -> Result<u32> {
    let mut b = vec![0u8; AllocXrcdIn::BYTES];
    if let Ok(mut v) = ViewMut::<AllocXrcdIn>::new(&mut b) {
        v.set(AllocXrcdIn::opcode, op::ALLOC_XRCD).set(AllocXrcdIn::uid, uid);
    }
    let out = hca.firmware().kernel_cmd(&b, AllocXrcdOut::BYTES, None)?;
    Ok(View::<AllocXrcdOut>::new(&out).map_err(|_| Errno::EIO)?.get(AllocXrcdOut::xrcd))
}

/// DEALLOC_XRCD in the firmware (`mlx5_cmd_xrcd_dealloc`).
fn dealloc_xrcd_cmd(hca: &Hca, xrcdn: u32, uid: u16) -> Result<()> {
    let mut b = vec![0u8; DeallocXrcdIn::BYTES];
    if let Ok(mut v) = ViewMut::<DeallocXrcdIn>::new(&mut b) {
        v.set(DeallocXrcdIn::opcode, op::DEALLOC_XRCD).set(DeallocXrcdIn::uid, uid).set(DeallocXrcdIn::xrcd, xrcdn);
    }
    hca.firmware().kernel_cmd(&b, MboxOut::BYTES, None).map(|_| ())
}

/// OPEN_XRCD (write 37), in `ib_uverbs_open_xrcd`'s order.
pub(crate) fn open_xrcd(c: &mut WCall<'_>) -> Result<()> {
    let cmd: OpenXrcd = c.request()?;
    let mut table = c.hca.xrcd_table();
    let mut inode = None;
    let mut found = None;
    if cmd.fd as i32 != -1 {
        let i = inode_of(cmd.fd as i32)?;
        found = table.get(&i).cloned();
        if found.is_none() && cmd.oflags & libc::O_CREAT as u32 == 0 {
            return Err(Errno::EAGAIN);
        }
        if found.is_some() && cmd.oflags & libc::O_EXCL as u32 != 0 {
            return Err(Errno::EINVAL);
        }
        inode = Some(i);
    }
    let h = c.alloc(ObjType::Xrcd)?;
    let uid = c.st.ctx()?.devx_uid;
    let (xrcd, new) = match found {
        Some(x) => (x, false),
        None => {
            let xrcdn = alloc_xrcd_cmd(c.hca, uid)?;
            (Arc::new(Xrcd { xrcdn, inode, usecnt: AtomicU32::new(0) }), true)
        }
    };
    if let Some(i) = inode {
        if new {
            table.insert(i, xrcd.clone());
        }
        xrcd.usecnt.fetch_add(1, Ordering::SeqCst);
    }
    drop(table);
    c.st.table.fill(h, Uobj::Xrcd(Arc::new(UXrcd { xrcd, refcnt: AtomicU32::new(0) })));
    c.response(OpenXrcdResp { xrcd_handle: h }.as_bytes())
}

/// CLOSE_XRCD (write 38): the handle's destroy ([`release`]).
pub(crate) fn close_xrcd(c: &mut WCall<'_>) -> Result<()> {
    let cmd: CloseXrcd = c.request()?;
    c.st.destroy(c.hca, cmd.xrcd_handle as i64, ObjType::Xrcd).map(|_| ())
}

/// `uverbs_free_xrcd` + `ib_uverbs_dealloc_xrcd`: EBUSY while SRQs or QPs made
/// through this handle exist (unless the create is being aborted); a shared domain
/// stays while other openers hold it; the last one deallocates it in the firmware and
/// takes it out of the table.
pub(crate) fn release(hca: &Hca, u: &UXrcd, uid: u16, force: bool) -> Result<()> {
    if u.refcnt.load(Ordering::SeqCst) > 0 && !force {
        return Err(Errno::EBUSY);
    }
    let mut table = hca.xrcd_table();
    let x = &u.xrcd;
    if let Some(i) = x.inode {
        if x.usecnt.fetch_sub(1, Ordering::SeqCst) != 1 {
            return Ok(());
        }
        table.remove(&i);
    }
    match dealloc_xrcd_cmd(hca, x.xrcdn, uid) {
        Err(e) if !force => {
            if let Some(i) = x.inode {
                x.usecnt.fetch_add(1, Ordering::SeqCst);
                table.insert(i, x.clone());
            }
            Err(e)
        }
        _ => Ok(()),
    }
}
