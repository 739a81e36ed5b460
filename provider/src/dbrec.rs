//! Doorbell records: 8-byte slots in device-visible pages where the provider publishes
//! its producer/consumer counters (the word layout is [`prm::dbrec`]'s: QP word 0 RQ
//! head, word 1 SQ producer; CQ word 0 consumer index, word 1 arm).
//!
//! Like libmlx5, records are carved out of shared pages in cache-line-sized slots, so
//! two queues never share a cache line (the device polls them; false sharing with a
//! neighbour's counter would cost both).

use std::sync::{Arc, Mutex};

use crate::buf::{page_size, DmaBuf};
use crate::error::{Error, Result};

struct Page {
    buf: Arc<DmaBuf>,
    used: Vec<bool>,
}

/// Allocator of doorbell records for one context.
pub struct DbrecPool {
    slot: usize,
    pages: Mutex<Vec<Page>>,
}

/// One doorbell record; returns its slot to the pool on drop.
pub struct Dbrec {
    buf: Arc<DmaBuf>,
    offset: usize,
    pool: Arc<DbrecPool>,
}

impl DbrecPool {
    /// `cache_line` is the device's cache line size from GET_CONTEXT (64 on x86).
    pub fn new(cache_line: usize) -> Arc<DbrecPool> {
        let slot = cache_line.clamp(8, page_size());
        Arc::new(DbrecPool { slot, pages: Mutex::new(Vec::new()) })
    }

    /// A zeroed record.
    pub fn alloc(self: &Arc<Self>) -> Result<Dbrec> {
        let mut pages = self.pages.lock().unwrap();
        for p in pages.iter_mut() {
            if let Some(i) = p.used.iter().position(|u| !u) {
                p.used[i] = true;
                return Ok(self.record(&p.buf, i));
            }
        }
        let buf = Arc::new(DmaBuf::new(page_size()).map_err(|errno| Error::Device { op: "alloc dbrec", errno })?);
        let mut used = vec![false; page_size() / self.slot];
        used[0] = true;
        let rec = self.record(&buf, 0);
        pages.push(Page { buf, used });
        Ok(rec)
    }

    fn record(self: &Arc<Self>, buf: &Arc<DmaBuf>, i: usize) -> Dbrec {
        let offset = i * self.slot;
        // SAFETY: offset + 8 <= page size, inside the page `buf` owns.
        unsafe { std::ptr::write_bytes(buf.as_ptr().add(offset), 0, 8) };
        Dbrec { buf: buf.clone(), offset, pool: self.clone() }
    }
}

impl Dbrec {
    /// Address of the record as the device sees it.
    pub fn addr(&self) -> u64 {
        self.buf.addr() + self.offset as u64
    }

    /// Pointer to word `i` (0 or 1) of the record.
    #[inline]
    pub fn word(&self, i: usize) -> *mut u32 {
        assert!(i < 2);
        // SAFETY: the record is 8 bytes at `offset` inside the page.
        unsafe { self.buf.as_ptr().add(self.offset + 4 * i).cast() }
    }
}

impl Drop for Dbrec {
    fn drop(&mut self) {
        let mut pages = self.pool.pages.lock().unwrap();
        if let Some(p) = pages.iter_mut().find(|p| Arc::ptr_eq(&p.buf, &self.buf)) {
            p.used[self.offset / self.pool.slot] = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_cache_lines_and_reused() {
        let pool = DbrecPool::new(64);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        assert_eq!(b.addr() - a.addr(), 64);
        let a_addr = a.addr();
        drop(a);
        let c = pool.alloc().unwrap();
        assert_eq!(c.addr(), a_addr);
    }
}
