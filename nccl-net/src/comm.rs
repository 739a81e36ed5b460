//! Send and receive comms, and the requests NCCL tests.
//!
//! The design is NCCL's IB transport's, reduced: the receiver announces each receive
//! (up to [`MAX_RECVS`] buffers with their sizes, tags and rkeys) by an RDMA WRITE into
//! a FIFO of [`FIFO_SLOTS`] slots in the sender's memory; the sender's isend waits
//! for its slot, picks the buffer whose tag matches, and RDMA-WRITEs WITH IMMEDIATE
//! straight into it (zero copy). The immediate names the slot and buffer; the
//! receiver's completion carries the byte count, so a receive larger than the send
//! reports the sent size. Why not SEND/RECV: a receive WQE takes its buffer in posting
//! order, so tags and grouped receives would need staging copies and a size limit.
//!
//! Ordering: one FIFO slot per request sequence number, so at most [`FIFO_SLOTS`]
//! (NCCL's 32) receives are outstanding per comm; a new irecv whose slot's earlier
//! use is not finished (data not all arrived, or our FIFO write not yet completed)
//! answers "no request" and NCCL calls again. A FIFO entry is valid when it carries
//! the slot's sequence number + 1, written by the same RDMA WRITE as the rest.

use std::sync::atomic::{fence, Ordering};
use std::sync::Mutex;

use provider::cqe::WcOpcode;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, MemoryRegion, Mr};

use crate::link::Link;
use crate::mr::MrHandle;

/// FIFO slots = receives in flight per comm.
pub const FIFO_SLOTS: usize = crate::sys::NCCL_NET_MAX_REQUESTS;
/// Buffers per grouped receive (NCCL IB's maxRecvs).
pub const MAX_RECVS: usize = 8;
/// One announced buffer.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct FifoEntry {
    pub addr: u64,
    pub size: u64,
    pub rkey: u32,
    pub tag: i32,
    pub nreqs: u32,
    /// The slot's sequence number + 1 (0: never written).
    pub seq: u32,
}
const ENTRY_LEN: usize = std::mem::size_of::<FifoEntry>();
const SLOT_LEN: usize = ENTRY_LEN * MAX_RECVS;
const FIFO_LEN: usize = SLOT_LEN * FIFO_SLOTS;
/// wr_id bit marking a receiver's FIFO write (the rest is its sequence number).
const FIFO_WR: u64 = 1 << 63;

/// An error for NCCL: the result code, after a log line naming the cause.
#[derive(Debug)]
pub struct Fail(pub crate::sys::ncclResult_t);

pub type Res<T> = Result<T, Fail>;

fn remote(why: &str) -> Fail {
    crate::warn!("{why}");
    Fail(crate::sys::NCCL_REMOTE_ERROR)
}

pub fn usage(why: String) -> Fail {
    crate::warn!("{why}");
    Fail(crate::sys::NCCL_INVALID_USAGE)
}

pub fn system(why: String) -> Fail {
    crate::warn!("{why}");
    Fail(crate::sys::NCCL_SYSTEM_ERROR)
}

/// A page-aligned anonymous mapping with its registration (the provider's owned
/// registered memory: the mapping outlives the MR by construction).
pub struct Region {
    mem: MemoryRegion,
}

impl Region {
    pub fn new(link: &Link, len: usize) -> Res<Region> {
        let mem = link.dev.pd.alloc_mr(len, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            .map_err(|e| system(format!("register {len} bytes: {e}")))?;
        Ok(Region { mem })
    }

    /// The registration (keys, address, length).
    pub fn mr(&self) -> &Mr {
        self.mem.mr()
    }

    fn entry(&self, slot: usize, i: usize) -> *mut FifoEntry {
        debug_assert!(slot < FIFO_SLOTS && i < MAX_RECVS);
        // SAFETY: in bounds (FIFO_LEN bytes, page aligned so entries are aligned).
        unsafe { self.mem.as_ptr().add(slot * SLOT_LEN + i * ENTRY_LEN) as *mut FifoEntry }
    }
}

/// Checks that `[data, data + size)` lies in `mh`'s registration; returns its keys.
fn keys_for(mh: Option<&MrHandle>, data: u64, size: usize, what: &str) -> Res<(u32, u32)> {
    if size == 0 {
        return Ok(mh.map_or((0, 0), |m| (m.mr().lkey(), m.mr().rkey())));
    }
    let Some(m) = mh else { return Err(usage(format!("{what} of {size} bytes at {data:#x} without a memory handle"))) };
    let (start, len) = (m.mr().addr(), m.mr().len() as u64);
    if data < start || data.saturating_add(size as u64) > start + len {
        return Err(usage(format!(
            "{what} of {size} bytes at {data:#x} is outside its memory handle's registration [{start:#x}, {:#x})",
            start + len
        )));
    }
    Ok((m.mr().lkey(), m.mr().rkey()))
}

#[derive(Debug, Clone, Copy)]
struct SendReq {
    size: usize,
    done: bool,
}

struct SendInner {
    link: Link,
    fifo: Region,
    /// The FIFO slot isends consume now, and which of its buffers they took.
    seq: u32,
    used: u8,
    reqs: std::collections::HashMap<u64, SendReq>,
    next_id: u64,
}

/// A sending comm.
pub struct SendComm {
    inner: Mutex<SendInner>,
}

impl SendComm {
    /// A connected sender; the FIFO region is the one announced to the peer.
    pub fn new(link: Link, fifo: Region) -> SendComm {
        SendComm { inner: Mutex::new(SendInner { link, fifo, seq: 0, used: 0, reqs: Default::default(), next_id: 1 }) }
    }

    /// FIFO bytes to allocate.
    pub const FIFO_LEN: usize = FIFO_LEN;

    /// isend: `Ok(None)` when the receiver has not announced a matching buffer yet.
    pub fn isend(&self, data: u64, size: usize, tag: i32, mh: Option<&MrHandle>) -> Res<Option<u64>> {
        let (lkey, _) = keys_for(mh, data, size, "isend")?;
        let mut g = self.inner.lock().unwrap();
        let s = &mut *g;
        s.progress();
        if let Some(why) = &s.link.broken {
            return Err(remote(&format!("isend on a failed connection: {why}")));
        }
        let slot = s.seq as usize % FIFO_SLOTS;
        // SAFETY: entries of our own registered FIFO, written by the peer's device;
        // volatile reads because they change behind the program's back.
        let read = |i: usize| unsafe { std::ptr::read_volatile(s.fifo.entry(slot, i)) };
        let first = read(0);
        if first.seq != s.seq.wrapping_add(1) {
            return s.not_yet();
        }
        let n = first.nreqs as usize;
        if n == 0 || n > MAX_RECVS {
            return Err(remote(&format!("the peer announced a receive of {n} buffers (at most {MAX_RECVS})")));
        }
        let mut entries = [FifoEntry::default(); MAX_RECVS];
        for (i, e) in entries.iter_mut().enumerate().take(n) {
            *e = read(i);
            if e.seq != s.seq.wrapping_add(1) {
                return s.not_yet();
            }
        }
        fence(Ordering::Acquire);
        let Some(i) = (0..n).find(|&i| s.used & (1 << i) == 0 && entries[i].tag == tag) else {
            // The matching receive is in a later slot (or not posted yet).
            return s.not_yet();
        };
        let e = entries[i];
        if size as u64 > e.size {
            return Err(usage(format!(
                "isend of {size} bytes (tag {tag}) to a receive of {} bytes posted by {}: the send is larger than the receive",
                e.size, s.link.peer
            )));
        }
        let id = s.next_id;
        let imm = ((s.seq & 0xffff) << 8) | i as u32;
        let sge = [Sge::new(data, size as u32, lkey)];
        let sgl: &[Sge] = if size > 0 { &sge } else { &[] };
        let wr = SendWr::new(SendOp::RdmaWriteImm { raddr: e.addr, rkey: e.rkey, imm }, Payload::Sgl(sgl)).signaled();
        match s.link.qp.post_send(id, &wr) {
            Ok(()) => {}
            Err(err) if err.errno() as i32 == libc::ENOMEM => return Ok(None),
            Err(err) => return Err(system(format!("post RDMA WRITE WITH IMM of {size} bytes: {err}"))),
        }
        s.next_id += 1;
        s.reqs.insert(id, SendReq { size, done: false });
        s.used |= 1 << i;
        if s.used.count_ones() as usize == n {
            s.seq = s.seq.wrapping_add(1);
            s.used = 0;
        }
        Ok(Some(id))
    }

    /// test: `Some(size)` once request `id` is complete (and forgotten).
    pub fn test(&self, id: u64) -> Res<Option<usize>> {
        let mut g = self.inner.lock().unwrap();
        let s = &mut *g;
        s.progress();
        match s.reqs.get(&id).copied() {
            Some(SendReq { size, done: true }) => {
                s.reqs.remove(&id);
                return Ok(Some(size));
            }
            Some(_) => {}
            None => return Err(usage(format!("test of send request {id}, which this comm does not have"))),
        }
        s.link.check_alive();
        if let Some(why) = &s.link.broken {
            return Err(remote(&format!("send request failed: {why}")));
        }
        Ok(None)
    }

    /// Runs `f` on the link (registration needs its device).
    pub fn with_link<T>(&self, f: impl FnOnce(&Link) -> T) -> T {
        f(&self.inner.lock().unwrap().link)
    }
}

impl SendInner {
    /// "No request yet" — unless the peer is gone, which NCCL would otherwise never
    /// learn while it keeps calling isend for a receive that cannot come.
    fn not_yet<T>(&mut self) -> Res<Option<T>> {
        self.link.check_alive();
        match &self.link.broken {
            Some(why) => Err(remote(&format!("isend: {why}"))),
            None => Ok(None),
        }
    }

    fn progress(&mut self) {
        let reqs = &mut self.reqs;
        self.link.poll(|wc| {
            if let Some(r) = reqs.get_mut(&wc.wr_id) {
                r.done = true;
            }
        });
    }
}

#[derive(Debug, Clone, Copy)]
struct RecvSlot {
    seq: u32,
    n: usize,
    received: usize,
    sizes: [usize; MAX_RECVS],
}

struct RecvInner {
    link: Link,
    /// Our copies of the FIFO slots, the source of the announcing writes.
    local: Region,
    remote_fifo: (u64, u32),
    seq: u32,
    slots: [Option<RecvSlot>; FIFO_SLOTS],
    /// The announcing write of this slot is not completed yet (its source is busy).
    fifo_busy: [bool; FIFO_SLOTS],
    rq_posted: u32,
}

/// A receiving comm.
pub struct RecvComm {
    inner: Mutex<RecvInner>,
}

/// One buffer of an irecv.
pub struct RecvBuf<'a> {
    pub data: u64,
    pub size: usize,
    pub tag: i32,
    pub mh: Option<&'a MrHandle>,
}

impl RecvComm {
    pub fn new(link: Link, local: Region, remote_fifo: (u64, u32)) -> RecvComm {
        RecvComm {
            inner: Mutex::new(RecvInner {
                rq_posted: crate::link::RQ_DEPTH.min(link.qp.cap().max_recv_wr),
                link,
                local,
                remote_fifo,
                seq: 0,
                slots: [None; FIFO_SLOTS],
                fifo_busy: [false; FIFO_SLOTS],
            }),
        }
    }

    /// Bytes of the local FIFO copy.
    pub const LOCAL_LEN: usize = FIFO_LEN;

    /// irecv: `Ok(None)` when all slots are in use.
    pub fn irecv(&self, bufs: &[RecvBuf<'_>]) -> Res<Option<u32>> {
        let n = bufs.len();
        if n == 0 || n > MAX_RECVS {
            return Err(usage(format!("irecv of {n} buffers (1 to {MAX_RECVS})")));
        }
        let mut keys = [0u32; MAX_RECVS];
        for (i, b) in bufs.iter().enumerate() {
            keys[i] = keys_for(b.mh, b.data, b.size, "irecv")?.1;
        }
        let mut g = self.inner.lock().unwrap();
        let s = &mut *g;
        s.progress();
        if let Some(why) = &s.link.broken {
            return Err(remote(&format!("irecv on a failed connection: {why}")));
        }
        let seq = s.seq;
        let slot = seq as usize % FIFO_SLOTS;
        if s.slots[slot].is_some() || s.fifo_busy[slot] {
            s.link.check_alive();
            if let Some(why) = &s.link.broken {
                return Err(remote(&format!("irecv: {why}")));
            }
            return Ok(None);
        }
        for (i, b) in bufs.iter().enumerate() {
            let e = FifoEntry { addr: b.data, size: b.size as u64, rkey: keys[i], tag: b.tag, nreqs: n as u32, seq: seq.wrapping_add(1) };
            // SAFETY: our own mapping; the device reads it only after the post below,
            // and no earlier write from this slot is in flight (fifo_busy).
            unsafe { std::ptr::write(s.local.entry(slot, i), e) };
        }
        let src = s.local.entry(slot, 0) as u64;
        let sge = [Sge::new(src, (n * ENTRY_LEN) as u32, s.local.mr().lkey())];
        let (raddr, rkey) = s.remote_fifo;
        let wr = SendWr::new(SendOp::RdmaWrite { raddr: raddr + (slot * SLOT_LEN) as u64, rkey }, Payload::Sgl(&sge)).signaled();
        match s.link.qp.post_send(FIFO_WR | seq as u64, &wr) {
            Ok(()) => {}
            Err(err) if err.errno() as i32 == libc::ENOMEM => return Ok(None),
            Err(err) => return Err(system(format!("post the receive announcement: {err}"))),
        }
        s.fifo_busy[slot] = true;
        s.slots[slot] = Some(RecvSlot { seq, n, received: 0, sizes: [0; MAX_RECVS] });
        s.seq = seq.wrapping_add(1);
        Ok(Some(seq))
    }

    /// test: the received sizes once receive `seq` is complete (and forgotten).
    pub fn test(&self, seq: u32) -> Res<Option<([usize; MAX_RECVS], usize)>> {
        let mut g = self.inner.lock().unwrap();
        let s = &mut *g;
        s.progress();
        let slot = seq as usize % FIFO_SLOTS;
        match s.slots[slot] {
            Some(r) if r.seq == seq => {
                if r.received == r.n {
                    s.slots[slot] = None;
                    s.link.flush_acks();
                    return Ok(Some((r.sizes, r.n)));
                }
            }
            _ => return Err(usage(format!("test of receive request {seq}, which this comm does not have"))),
        }
        s.link.check_alive();
        if let Some(why) = &s.link.broken {
            return Err(remote(&format!("receive request failed: {why}")));
        }
        Ok(None)
    }

    pub fn with_link<T>(&self, f: impl FnOnce(&Link) -> T) -> T {
        f(&self.inner.lock().unwrap().link)
    }
}

impl RecvInner {
    fn progress(&mut self) {
        let (slots, busy, posted) = (&mut self.slots, &mut self.fifo_busy, &mut self.rq_posted);
        let mut bad = None;
        self.link.poll(|wc| {
            if wc.opcode == WcOpcode::RecvRdmaWithImm {
                *posted = posted.saturating_sub(1);
                let (seq16, i) = (wc.imm >> 8, (wc.imm & 0xff) as usize);
                let slot = seq16 as usize % FIFO_SLOTS;
                match &mut slots[slot] {
                    Some(r) if r.seq & 0xffff == seq16 && i < r.n => {
                        r.sizes[i] = wc.byte_len as usize;
                        r.received += 1;
                    }
                    _ => bad = Some(format!("a write with immediate {:#x} names no posted receive", wc.imm)),
                }
            } else if wc.wr_id & FIFO_WR != 0 {
                busy[(wc.wr_id & !FIFO_WR) as usize % FIFO_SLOTS] = false;
            }
        });
        if let Some(why) = bad {
            if self.link.broken.is_none() {
                crate::warn!("{why}");
                self.link.broken = Some(why);
            }
        }
        // Keep the receive queue full: every incoming WRITE WITH IMM consumes a WQE.
        let depth = crate::link::RQ_DEPTH.min(self.link.qp.cap().max_recv_wr);
        if self.rq_posted < depth / 2 {
            let want = (depth - self.rq_posted) as usize;
            let batch: Vec<(u64, &[Sge])> = (0..want).map(|_| (0u64, &[][..])).collect();
            match self.link.qp.post_recv_list(&batch) {
                Ok(()) => self.rq_posted += want as u32,
                Err(e) => {
                    if self.link.broken.is_none() {
                        let why = format!("repost receives: {e}");
                        crate::warn!("{why}");
                        self.link.broken = Some(why);
                    }
                }
            }
        }
    }
}
