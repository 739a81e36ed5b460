//! Host staging for peer memory: how the data path batches its accesses to MR bytes it
//! can only reach through a [`crate::peer::PeerMemory`] (GPU memory behind a dma-buf).
//!
//! A host MR is read and written per packet, in place (see [`super::mkey`]). A call into
//! peer memory is a CUDA copy, tens of microseconds of fixed cost, so the data path never
//! makes one per packet; it moves whole messages, or [`PEER_SEGMENT`]s of longer ones,
//! between peer memory and a host buffer of the QP, and packetizes from or assembles into
//! that buffer. The cost beside the peer call is what host memory costs: outgoing packets
//! refer to the staging buffer in place, incoming payloads are copied into it once.
//!
//! - [`OutStage`], outgoing data: the requester's SEND/WRITE payload (one per QP,
//!   `Requester::out_stage`) and the READ responder's response data
//!   (`Responder::read_stage`). The segment holding the next packet is read in one peer
//!   call (one per gather entry in peer memory) and kept for the following packets and
//!   for retransmissions of the same work request or READ; it is forgotten when the WQE
//!   retires or the READ's response has gone out, so a later request re-reads memory.
//!   Packets refer to the staged bytes in place, as to host memory (no copy).
//! - [`InStage`], incoming data: RDMA WRITE and SEND payloads at the responder
//!   (`Responder::in_stage`) and READ responses at the requester (`Requester::in_stage`).
//!   Packets are appended while they continue the staged run (same key, next address,
//!   less than a segment); anything else writes the run out first with one peer write.
//!   The responder flushes at the end of every message, before its CQE and before the ACK
//!   that covers its last packet is queued, and before an RNR NAK; the requester when
//!   the READ's last response has arrived, before the WQE can complete. A QP that goes
//!   to ERR writes out what it staged (`QpCtx::enter_error`): bytes of packets already
//!   acknowledged (ACKs of middle packets are not held back) are never dropped. The
//!   staged run always belongs to the message in progress, so a flush that fails is
//!   NAKed at the current PSN, inside that message.
//!
//! Duplicates and go-back-N need nothing special: a duplicate SEND/WRITE packet is only
//! acknowledged again (no data moves), retransmitted packets after a sequence NAK or RNR
//! NAK continue the staged run where it stopped, and a retransmitted request packet is
//! built from the kept segment (or the segment is read again).

use std::sync::Arc;

use crate::hca::{Access, Hca, KeyError};
use crate::objects::{Loc, Pd};
use crate::peer::{HostBuffer, PeerMemory, PEER_SEGMENT};

use super::mkey::{self, KeyCache};
use super::link::copy::{Copies, Payload};
use super::tx::MemRef;
use super::wqe::Sge;

/// One segment of staging memory, allocated when first needed and kept for the QP's life:
/// lent by the peer memory it is first needed for ([`PeerMemory::staging_buffer`]:
/// page-locked memory, for CUDA), or else from the heap.
#[derive(Debug, Default)]
struct SegBuf {
    lent: Option<HostBuffer>,
    heap: Vec<u8>,
}

impl SegBuf {
    /// The segment's memory, allocated now if need be (asking `lender` for the memory to
    /// borrow it from).
    fn get(&mut self, lender: impl FnOnce() -> Option<Arc<dyn PeerMemory>>) -> &mut [u8] {
        if self.lent.is_none() && self.heap.is_empty() {
            match lender().and_then(|m| m.staging_buffer(PEER_SEGMENT)).filter(|b| b.len() >= PEER_SEGMENT) {
                Some(b) => self.lent = Some(b),
                None => self.heap = vec![0; PEER_SEGMENT],
            }
        }
        match &mut self.lent {
            Some(b) => &mut b.as_mut_slice()[..PEER_SEGMENT],
            None => &mut self.heap[..],
        }
    }

    /// What `get` allocated (empty before).
    fn slice(&self) -> &[u8] {
        match &self.lent {
            Some(b) => &b.as_slice()[..PEER_SEGMENT],
            None => &self.heap,
        }
    }
}

/// Outgoing bytes of one message or READ stream, one segment at a time.
///
/// Packets are sent from the staged segment without a copy ([`super::tx::Tx::send_mem`]
/// with a reference into `buf`), exactly as host memory is: a packet costs the same
/// either way. Such references are valid until the step's flush, so the buffer is never
/// refilled in a step whose packets refer to it: [`OutStage::bytes`] answers `None`
/// then, and the caller sends the rest in the next step (at most one step of delay per
/// segment).
#[derive(Debug, Default)]
pub struct OutStage {
    /// What is staged: the owner's identity (two words) and the segment's start offset.
    tag: Option<(u64, u64, u64)>,
    buf: SegBuf,
    /// The last step that referred to `buf` (0: none).
    used: u64,
}

impl OutStage {
    /// Where the bytes `[off, off + len)` of the message `id` (`total` bytes long) are
    /// staged, reading the segment that holds them with `fill(segment start, segment
    /// buffer)` unless it is staged already; `Ok(None)` when that needs a refill and
    /// packets of this step (`step`) still refer to the buffer. Segments start at
    /// multiples of [`PEER_SEGMENT`], of which every path MTU is a divisor, so no packet
    /// straddles two. The answer may be queued with `Tx::send_mem` for this step.
    /// `lender` names the peer memory to ask for the buffer if there is none yet.
    #[allow(clippy::too_many_arguments)]
    pub fn bytes<E>(&mut self, step: u64, id: (u64, u64), off: u64, len: usize, total: u64,
                    lender: impl FnOnce() -> Option<Arc<dyn PeerMemory>>,
                    fill: impl FnOnce(u64, &mut [u8]) -> Result<(), E>) -> Result<Option<MemRef>, E> {
        debug_assert!(len <= PEER_SEGMENT, "packets are at most one MTU");
        let seg = PEER_SEGMENT as u64;
        let mut start = off / seg * seg;
        if off + len as u64 > start + seg {
            start = off; // an unaligned request (never made by the data path)
        }
        if self.tag != Some((id.0, id.1, start)) {
            if self.used == step {
                return Ok(None);
            }
            self.tag = None;
            let n = (total.saturating_sub(start)).min(seg) as usize;
            fill(start, &mut self.buf.get(lender)[..n])?;
            self.tag = Some((id.0, id.1, start));
        }
        self.used = step;
        let at = (off - start) as usize;
        Ok(Some(MemRef { addr: self.buf.slice()[at..at + len].as_ptr() as u64, len, app: false }))
    }

    /// Forgets the staged bytes of `id` (its WQE retired or its READ was served): a later
    /// message reads memory afresh.
    pub fn forget(&mut self, id: (u64, u64)) {
        if self.tag.is_some_and(|t| (t.0, t.1) == id) {
            self.tag = None;
        }
    }
}

/// Incoming bytes for peer memory, staged as one contiguous run of one MR.
#[derive(Debug)]
pub struct InStage {
    /// The MR key, access, and iova of the first staged byte.
    key: u32,
    access: Access,
    iova: u64,
    buf: SegBuf,
    /// Bytes staged.
    len: usize,
}

impl Default for InStage {
    fn default() -> InStage {
        InStage { key: 0, access: Access::LocalWrite, iova: 0, buf: SegBuf::default(), len: 0 }
    }
}

impl InStage {
    /// Whether nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Stages `data` for `[iova, iova + len)` of the MR `key` (the caller checked the
    /// key for `access`, and found peer memory). A run that `data` does not continue is
    /// written out first, as is a run that would outgrow a segment.
    #[allow(clippy::too_many_arguments)]
    pub fn append(&mut self, hca: &Hca, keys: &mut KeyCache, pd: &Pd, key: u32, iova: u64, access: Access, data: &[u8]) -> Result<(), KeyError> {
        if self.len > 0
            && (key != self.key || access != self.access || self.iova.wrapping_add(self.len as u64) != iova
                || self.len + data.len() > PEER_SEGMENT)
        {
            self.flush(hca, keys, pd)?;
        }
        if data.len() > PEER_SEGMENT {
            // Never from the data path (packets are at most one MTU): written directly.
            let Loc::Peer(addr) = keys.check(hca, key, pd, iova, data.len() as u64, access)? else { return Err(KeyError::NoSuchKey) };
            return mkey::peer_write(hca, key, addr, data);
        }
        if self.len == 0 {
            self.key = key;
            self.access = access;
            self.iova = iova;
        }
        let buf = self.buf.get(|| mkey::peer_memory_of(hca, key));
        buf[self.len..self.len + data.len()].copy_from_slice(data);
        self.len += data.len();
        Ok(())
    }

    /// Writes the staged run to peer memory with one call, checking its key again (the
    /// MR may have been deregistered between engine steps: nothing is written then).
    /// Empty afterwards, whatever the outcome.
    #[inline]
    pub fn flush(&mut self, hca: &Hca, keys: &mut KeyCache, pd: &Pd) -> Result<(), KeyError> {
        if self.len == 0 {
            return Ok(());
        }
        self.flush_run(hca, keys, pd)
    }

    fn flush_run(&mut self, hca: &Hca, keys: &mut KeyCache, pd: &Pd) -> Result<(), KeyError> {
        let run = &self.buf.slice()[..self.len];
        let r = match keys.check(hca, self.key, pd, self.iova, self.len as u64, self.access) {
            Ok(Loc::Peer(addr)) => mkey::peer_write(hca, self.key, addr, run),
            // The key names host memory now: not the MR the bytes were staged for.
            Ok(Loc::Host(_)) => Err(KeyError::NoSuchKey),
            Err(e) => Err(e),
        };
        if let Err(e) = r {
            tracing::debug!(target: "softhca::peer", key = %format_args!("{:#x}", self.key), iova = %format_args!("{:#x}", self.iova),
                            len = self.len, ?e, "staged write failed");
        }
        self.len = 0;
        r
    }
}

/// [`mkey::scatter`] for data that arrives in packets (receive WQEs, READ responses):
/// host pieces are written at once, peer pieces staged in `stage`.
pub fn scatter(hca: &Hca, keys: &mut KeyCache, pd: &Pd, sges: &[Sge], offset: u64, data: Payload<'_>, stage: &mut InStage, copies: &mut Copies) -> Result<(), KeyError> {
    let mut held = Vec::new();
    mkey::pieces(sges, offset, data.len(), |s, off, at, n| {
        if s.lkey == hca.dump_fill_mkey() {
            return Ok(());
        }
        let piece = data.slice(at, n);
        match keys.check(hca, s.lkey, pd, s.addr + off, n as u64, Access::LocalWrite)? {
            // SAFETY: the key check just confirmed [addr, addr + n) lies inside a live MR of
            // this PD that allows local writes, under the engine lock (which the caller
            // holds until `copies` is flushed).
            Loc::Host(addr) => unsafe { piece.write_to(addr, copies) },
            Loc::Peer(_) => {
                let bytes = piece.bytes(&mut held, copies).ok_or(KeyError::PeerFault)?;
                stage.append(hca, keys, pd, s.lkey, s.addr + off, Access::LocalWrite, bytes)?
            }
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A segment is read once for all the packets inside it, again only for another
    /// segment or another owner, and not at all after `forget` until asked again; never
    /// refilled in a step that referred to it.
    #[test]
    fn out_stage_reads_each_segment_once() {
        let seg = PEER_SEGMENT as u64;
        let total = 2 * seg + 100;
        let mut st = OutStage::default();
        let mut fills = Vec::new();
        type Fills = Vec<((u64, u64), u64, usize)>;
        fn get(st: &mut OutStage, fills: &mut Fills, step: u64, id: (u64, u64), off: u64, len: usize, total: u64) -> Option<Vec<u8>> {
            let m = st.bytes(step, id, off, len, total, || None, |start, buf| {
                fills.push((id, start, buf.len()));
                for (i, b) in buf.iter_mut().enumerate() {
                    *b = ((start + i as u64) % 251) as u8;
                }
                Ok::<(), ()>(())
            }).unwrap()?;
            // SAFETY: `bytes` answered a range of the stage's own buffer, unchanged until
            // the next call.
            Some(unsafe { std::slice::from_raw_parts(m.addr as *const u8, m.len) }.to_vec())
        }
        // One step per packet: every refill is allowed.
        for k in 0..(total / 4096 + 1) {
            let off = k * 4096;
            let len = (total - off).min(4096) as usize;
            let got = get(&mut st, &mut fills, k + 1, (1, 7), off, len, total).unwrap();
            let want: Vec<u8> = (0..len as u64).map(|i| ((off + i) % 251) as u8).collect();
            assert_eq!(got, want, "packet at {off}");
        }
        // Three segments (1 MiB, 1 MiB, 100 bytes), each read once.
        assert_eq!(fills, vec![((1, 7), 0, PEER_SEGMENT), ((1, 7), seg, PEER_SEGMENT), ((1, 7), 2 * seg, 100)]);
        // The last segment is still staged for a retransmission; another owner reads, in
        // a new step; in the same step it must wait.
        get(&mut st, &mut fills, 1000, (1, 7), 2 * seg, 100, total).unwrap();
        assert_eq!(fills.len(), 3);
        assert_eq!(get(&mut st, &mut fills, 1000, (2, 7), 2 * seg, 100, total), None);
        assert_eq!(fills.len(), 3);
        get(&mut st, &mut fills, 1001, (2, 7), 2 * seg, 100, total).unwrap();
        assert_eq!(fills.len(), 4);
        st.forget((2, 7));
        get(&mut st, &mut fills, 1002, (2, 7), 2 * seg, 100, total).unwrap();
        assert_eq!(fills.len(), 5);
    }
}
