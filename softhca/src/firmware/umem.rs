//! CREATE_UMEM / DESTROY_UMEM: user memory described by its page list.
//!
//! softhca's DMA address space is the process's virtual address space, so the MTT
//! entries the kernel half writes (DEVX_UMEM_REG, as Linux's `devx_umem_reg_cmd_alloc`
//! builds them) are the page addresses of the pinned user range. A CQ, QP or doorbell
//! record named by `umem_id` + offset resolves to an address here ([`UmemObj::resolve`]);
//! the device half then reads and writes that memory through checked copies, as it does
//! for verbs rings. A UMEM that objects use cannot be destroyed (RES_BUSY, which Linux
//! turns into DEVX_UMEM_DEREG's EBUSY).

use prm::bits::View;
use prm::cmd::umem::{CreateUmemIn, CreateUmemOut, DestroyUmemIn, Mtt, Umem};

use super::status::syndrome;
use super::{bad_param, exhausted, remove, Cmd, Obj, Outcome, R};
use crate::kernel::pin::pin;

/// The largest UMEM page: 4 KiB << 20 (4 GiB), far above what softhca needs.
const MAX_LOG_PAGE_SIZE: u8 = 20;

/// A registered UMEM.
#[derive(Debug)]
pub(crate) struct UmemObj {
    /// Page addresses, `page_size` bytes each.
    pages: Vec<u64>,
    page_size: u64,
    /// Where the UMEM starts in its first page.
    page_offset: u64,
}

impl UmemObj {
    /// Bytes the UMEM covers.
    pub(crate) fn len(&self) -> u64 {
        (self.pages.len() as u64 * self.page_size).saturating_sub(self.page_offset)
    }

    /// The address of `[offset, offset + len)` of the UMEM, if the range is inside it and
    /// its pages are contiguous in the address space (softhca's rings are one mapping).
    pub(crate) fn resolve(&self, offset: u64, len: u64) -> Option<u64> {
        let end = offset.checked_add(len)?;
        if len == 0 || end > self.len() {
            return None;
        }
        let start = self.page_offset + offset;
        let first = (start / self.page_size) as usize;
        let last = ((self.page_offset + end - 1) / self.page_size) as usize;
        for i in first..last {
            if self.pages[i].checked_add(self.page_size)? != self.pages[i + 1] {
                return None;
            }
        }
        Some(self.pages[first] + start % self.page_size)
    }
}

pub(super) fn create(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateUmemIn>()?;
    let u = inp.sub(CreateUmemIn::umem);
    let n = u.get(Umem::num_of_mtt);
    let log = u.get(Umem::log_page_size);
    let page_offset = u.get(Umem::page_offset) as u64;
    if n == 0 || log > MAX_LOG_PAGE_SIZE {
        return Err(bad_param(syndrome::UMEM_PAGES));
    }
    let page_size = 4096u64 << log;
    if page_offset >= page_size {
        return Err(bad_param(syndrome::UMEM_PAGES));
    }
    // The page list is the inbox's tail: it must hold all num_of_mtt entries.
    let tail = inp.tail();
    let need = (n as usize).checked_mul(Mtt::BYTES).filter(|&b| b <= tail.len());
    let Some(need) = need else {
        return Err(Outcome::err(prm::cmd::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN));
    };
    let mut pages = Vec::with_capacity(n as usize);
    for e in tail[..need].chunks_exact(Mtt::BYTES) {
        let v = View::<Mtt>::new(e).map_err(|_| super::internal())?;
        let addr = Mtt::addr(&v);
        if addr % page_size != 0 {
            return Err(bad_param(syndrome::UMEM_PAGES));
        }
        pages.push(addr);
    }
    let max = 1u32 << super::uctx::LOG_MAX_UMEM;
    let id = (1..max).find(|i| !c.objs.umems.contains_key(i)).ok_or_else(exhausted)?;
    c.objs.umems.insert(id, Obj { uid: c.uid, users: 0, v: UmemObj { pages, page_size, page_offset } });
    c.output::<CreateUmemOut>()?.set(CreateUmemOut::umem_id, id);
    Ok(())
}

pub(super) fn destroy(c: &mut Cmd<'_>) -> R<()> {
    let id = c.input::<DestroyUmemIn>()?.get(DestroyUmemIn::umem_id);
    remove(&mut c.objs.umems, id, c.uid)?;
    Ok(())
}

/// Resolves `umem_id` + `offset` for `len` bytes on behalf of a context of `uid`
/// (BAD_PARAM with `syn` when the UMEM is missing, another uid's, or too small).
pub(super) fn resolve(umems: &std::collections::BTreeMap<u32, Obj<UmemObj>>, id: u32, uid: u16, offset: u64, len: u64,
                      syn: u32) -> R<u64> {
    match umems.get(&id) {
        Some(o) if o.uid == uid => o.v.resolve(offset, len).ok_or(bad_param(syn)),
        _ => Err(bad_param(syn)),
    }
}

/// The address of a ring given by a page list (`pas[]` after the inbox, big-endian page
/// addresses of `4096 << log_page_size` bytes) starting `offset` bytes into the first
/// page, for `len` bytes: the list must hold every page the ring spans (BAD_INP_LEN
/// otherwise, the inbox is short) and they must follow each other in the address
/// space, which is what softhca's device half reaches (BAD_PARAM otherwise).
pub(super) fn pas_addr(tail: &[u8], log_page_size: u8, offset: u64, len: u64) -> R<u64> {
    if log_page_size > MAX_LOG_PAGE_SIZE {
        return Err(bad_param(syndrome::BAD_ADDRESS));
    }
    let ps = 4096u64 << log_page_size;
    let pages = (offset + len.max(1)).div_ceil(ps) as usize;
    if pages.checked_mul(8).is_none_or(|n| n > tail.len()) {
        return Err(Outcome::err(prm::cmd::status::BAD_INP_LEN_ERR, syndrome::INBOX_LEN));
    }
    let at = |i: usize| u64::from_be_bytes(tail[i * 8..i * 8 + 8].try_into().unwrap_or_default());
    let first = at(0);
    if first % ps != 0 || (1..pages).any(|i| at(i) != first.wrapping_add(i as u64 * ps)) {
        return Err(bad_param(syndrome::BAD_ADDRESS));
    }
    Ok(first + offset)
}

/// Where CREATE_CQ or CREATE_QP puts a ring and its doorbell record.
pub(super) struct QueueMemory<'a> {
    /// The ring's UMEM and the offset into it, when the inbox names one (`*_umem_valid`).
    pub ring_umem: Option<(u32, u64)>,
    /// Otherwise the page list after the inbox, with the context's `log_page_size` and
    /// `page_offset` (in 64-byte units).
    pub pas: &'a [u8],
    pub log_page_size: u8,
    pub page_offset: u64,
    pub ring_len: u64,
    /// Whether the device writes the ring (a CQ's) or only reads it (a WQ's).
    pub ring_written: bool,
    /// The doorbell record's UMEM (`dbr_umem_valid`), in which `dbr_addr` is an offset;
    /// without one `dbr_addr` is the record's address.
    pub dbr_umem: Option<u32>,
    pub dbr_addr: u64,
}

/// Resolves a queue's ring and doorbell record to addresses the device half can reach,
/// appending the UMEMs it names to `umems` (the queue then uses them): BAD_PARAM for a
/// missing or foreign UMEM, a misaligned ring (64 bytes) or record (8 bytes), or
/// memory that is not mapped (the kernel's page pinning would have refused it; a real
/// device's DMA would fault instead) or outside the device's DMA window
/// ([`crate::Hca::confine_dma`]); BAD_INP_LEN for a page list shorter than the ring.
pub(super) fn place_queue(c: &Cmd<'_>, q: &QueueMemory<'_>, umems: &mut Vec<u32>) -> R<(u64, u64)> {
    let buf_addr = match q.ring_umem {
        Some((id, offset)) => {
            umems.push(id);
            resolve(&c.objs.umems, id, c.uid, offset, q.ring_len, syndrome::BAD_UMEM)?
        }
        None => pas_addr(q.pas, q.log_page_size, q.page_offset * 64, q.ring_len)?,
    };
    let db_addr = match q.dbr_umem {
        Some(id) => {
            umems.push(id);
            resolve(&c.objs.umems, id, c.uid, q.dbr_addr, 8, syndrome::BAD_UMEM)?
        }
        None => q.dbr_addr,
    };
    if buf_addr == 0 || buf_addr % 64 != 0 || db_addr == 0 || db_addr % 8 != 0 {
        return Err(bad_param(syndrome::BAD_ADDRESS));
    }
    let ring_len = q.ring_len.max(1);
    if !c.hca.dma_reachable(buf_addr, ring_len) || !c.hca.dma_reachable(db_addr, 8) {
        return Err(bad_param(syndrome::BAD_ADDRESS));
    }
    if pin(buf_addr, ring_len, q.ring_written).is_err() || pin(db_addr & !0xfff, 4096, false).is_err() {
        return Err(bad_param(syndrome::BAD_ADDRESS));
    }
    Ok((buf_addr, db_addr))
}
