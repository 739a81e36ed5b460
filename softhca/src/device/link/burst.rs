//! Burst records: a run of consecutive request packets of one message as one record of
//! the same-host path.
//!
//! Why: a 1 MiB RDMA WRITE is 256 packets of a 4 KiB MTU, and on the same-host path most
//! of a packet's cost is the bookkeeping around it, not its bytes (those are one
//! `process_vm_readv` of the whole run anyway, [`super::copy`]): the requester building
//! each header, the lane push, the receiver's parse. A ConnectX looping traffic back does
//! that per packet in hardware; softhca does it per run. A burst record carries the
//! headers of the run's first and last packets and one reference to the run's payload
//! (contiguous in the sender's registered memory), and the receiver hands the QP the
//! very packets the run stands for: the first, the middle ones (PSNs in between, the
//! message's MIDDLE opcode, full MTU payloads, AckReq clear), the last. So every check
//! of the responder (PSN order, opcode sequence, key, bounds, access, RNR) runs per
//! packet as before, and a bad packet in the middle of a run is found at that packet.
//!
//! What the requester promises by sending one: the packets are PSN-consecutive, of one
//! RC (or XRC) SEND or WRITE, none but the last ends the message; the last packet's
//! AckReq is set when any packet of the run would have asked for an ACK (ACKs are
//! cumulative, so one ACK per run answers them all). Only where the packet would have
//! gone by reference anyway: a known same-host peer that may read our memory, neither
//! capture nor fault injection on (both turn the same-host path off). A burst that
//! cannot go into the peer's inbox after all (the peer vanished by the flush) is dropped,
//! as a packet lost on the wire, and the transport sends it again (by then as ordinary
//! packets over UDP, if the peer is gone for good); retransmissions on the same-host path
//! are bursts again.

use crate::wire::{Opcode, RocePacket};

use super::copy::RemoteRef;
use super::inbox::RecordHead;
use crate::device::psn;

/// Most packets in one burst (the record's `count` is 16 bits; the congestion window
/// caps runs well below).
pub const MAX_PACKETS: u32 = u16::MAX as u32;

/// A burst record, parsed and checked for consistency.
#[derive(Debug)]
pub struct Run<'a> {
    first: RocePacket<'a>,
    last: RocePacket<'a>,
    middle: Opcode,
    count: u32,
    seg: usize,
    src: RemoteRef,
}

/// The MIDDLE opcode of the message a run's first packet belongs to (RC or XRC SEND or
/// WRITE, a packet that does not end it), or None.
pub fn middle_of(op: Opcode) -> Option<Opcode> {
    if op.ends_message() || !op.has_payload() || op.is_response() {
        return None;
    }
    let rc = op.rc_equivalent();
    let middle = match rc {
        Opcode::RcSendFirst | Opcode::RcSendMiddle => Opcode::RcSendMiddle,
        Opcode::RcRdmaWriteFirst | Opcode::RcRdmaWriteMiddle => Opcode::RcRdmaWriteMiddle,
        _ => return None,
    };
    match op.transport() {
        crate::wire::Transport::Rc => Some(middle),
        crate::wire::Transport::Xrc => middle.to_xrc(),
        _ => None,
    }
}

/// Whether `last` may end a run that `middle`'s message is in: the same operation's
/// MIDDLE or one of its LAST opcodes.
fn may_end(middle: Opcode, last: Opcode) -> bool {
    if last == middle {
        return true;
    }
    let send = middle.rc_equivalent() == Opcode::RcSendMiddle;
    last.transport() == middle.transport() && last.is_last() && !last.is_response()
        && matches!(last.rc_equivalent(), Opcode::RcSendLast | Opcode::RcSendLastWithImm | Opcode::RcSendLastWithInvalidate) == send
        && (send || matches!(last.rc_equivalent(), Opcode::RcRdmaWriteLast | Opcode::RcRdmaWriteLastWithImm))
}

impl<'a> Run<'a> {
    /// The run a BURST record describes: `head` and its packet `bytes`. Errors name what
    /// is inconsistent (the record is then dropped as malformed, like a bad packet).
    pub fn parse(head: &RecordHead, bytes: &'a [u8]) -> Result<Run<'a>, String> {
        let split = head.split as usize;
        let count = head.count as u32;
        let seg = head.seg as usize;
        if split > bytes.len() || count < 2 || seg == 0 {
            return Err(format!("burst: split {split} of {} header bytes, {count} packets of {seg} B", bytes.len()));
        }
        let first = RocePacket::parse_headers(&bytes[..split]).map_err(|e| format!("burst first packet: {e}"))?;
        let last = RocePacket::parse_headers(&bytes[split..]).map_err(|e| format!("burst last packet: {e}"))?;
        let middle = middle_of(first.bth.opcode).ok_or_else(|| format!("burst starting with {:?}", first.bth.opcode))?;
        if !may_end(middle, last.bth.opcode) || last.reth.is_some() {
            return Err(format!("burst of {:?} ending with {:?}", first.bth.opcode, last.bth.opcode));
        }
        if last.bth.dest_qpn != first.bth.dest_qpn || psn::add(first.bth.psn, count - 1) != last.bth.psn {
            return Err(format!("burst from QP {} PSN {} to QP {} PSN {} is not {count} packets", first.bth.dest_qpn, first.bth.psn,
                               last.bth.dest_qpn, last.bth.psn));
        }
        let body = (count as u64 - 1) * seg as u64;
        let total = head.remote_len;
        if total <= body || total - body > seg as u64 {
            return Err(format!("burst of {count} packets of {seg} B carrying {total} B"));
        }
        let src = RemoteRef { pid: head.pid, addr: head.addr, len: total as usize };
        Ok(Run { first, last, middle, count, seg, src })
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Packet `i` of the run (below [`Run::count`]) and where its payload is.
    pub fn packet(&self, i: u32) -> (RocePacket<'a>, RemoteRef) {
        debug_assert!(i < self.count);
        let at = i as u64 * self.seg as u64;
        let len = if i + 1 == self.count { self.src.len - at as usize } else { self.seg };
        let payload = RemoteRef { pid: self.src.pid, addr: self.src.addr + at, len };
        let pkt = if i == 0 {
            self.first
        } else if i + 1 == self.count {
            self.last
        } else {
            let mut bth = self.first.bth;
            bth.opcode = self.middle;
            bth.psn = psn::add(self.first.bth.psn, i);
            bth.ack_req = false;
            bth.solicited = false;
            RocePacket { bth, xrceth: self.first.xrceth, ..RocePacket::new(bth, &[]) }
        };
        (pkt, payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{BthRepr, ImmDtRepr, RethRepr};

    fn headers(p: &RocePacket<'_>) -> Vec<u8> {
        let mut b = vec![0u8; p.header_len()];
        let n = p.emit_headers(&mut b, 4096).unwrap();
        b.truncate(n);
        b
    }

    fn record(first: &RocePacket<'_>, last: &RocePacket<'_>, count: u16, seg: u32, total: u64) -> (RecordHead, Vec<u8>) {
        let mut bytes = headers(first);
        let split = bytes.len() as u16;
        bytes.extend(headers(last));
        let head = RecordHead { kind: super::super::inbox::kind::BURST, pid: 7, addr: 0x1000, remote_len: total, seg, split, count,
                                ..Default::default() };
        (head, bytes)
    }

    /// A WRITE run expands into first (with its RETH), middles (MIDDLE opcode, PSNs in
    /// between, AckReq clear, full segments), last (its own opcode, AckReq and immediate),
    /// the payload references tiling the run.
    #[test]
    fn a_write_run_expands_into_its_packets() {
        let mut f = RocePacket::new(BthRepr::new(Opcode::RcRdmaWriteFirst, 0x12, psn::MASK - 1), &[]);
        f.reth = Some(RethRepr { va: 0x5000, rkey: 0x77, dma_len: 4 * 4096 + 100 });
        let mut l = RocePacket::new(BthRepr::new(Opcode::RcRdmaWriteLastWithImm, 0x12, 2), &[]);
        l.bth.ack_req = true;
        l.immdt = Some(ImmDtRepr { imm: 0xabcd });
        let (head, bytes) = record(&f, &l, 5, 4096, 4 * 4096 + 100);
        let run = Run::parse(&head, &bytes).unwrap();
        assert_eq!(run.count(), 5);
        let pkts: Vec<_> = (0..5).map(|i| run.packet(i)).collect();
        let ops: Vec<_> = pkts.iter().map(|(p, _)| p.bth.opcode).collect();
        use Opcode::*;
        assert_eq!(ops, [RcRdmaWriteFirst, RcRdmaWriteMiddle, RcRdmaWriteMiddle, RcRdmaWriteMiddle, RcRdmaWriteLastWithImm]);
        let psns: Vec<_> = pkts.iter().map(|(p, _)| p.bth.psn).collect();
        assert_eq!(psns, [psn::MASK - 1, psn::MASK, 0, 1, 2], "PSNs wrap");
        assert_eq!(pkts[0].0.reth, f.reth);
        assert!(pkts[1..4].iter().all(|(p, _)| p.reth.is_none() && p.immdt.is_none() && !p.bth.ack_req));
        assert_eq!((pkts[4].0.immdt, pkts[4].0.bth.ack_req), (l.immdt, true));
        let refs: Vec<_> = pkts.iter().map(|(_, r)| (r.addr, r.len)).collect();
        assert_eq!(refs, [(0x1000, 4096), (0x2000, 4096), (0x3000, 4096), (0x4000, 4096), (0x5000, 100)]);
        // Every expanded packet is a valid packet of its opcode (headers as the opcode wants).
        for (p, r) in &pkts {
            let mut b = vec![0u8; p.header_len()];
            p.emit_headers(&mut b, r.len).expect("consistent headers");
        }
    }

    /// XRC runs keep the XRCETH on every packet.
    #[test]
    fn an_xrc_send_run_keeps_its_xrceth() {
        let mut f = RocePacket::new(BthRepr::new(Opcode::XrcSendFirst, 9, 10), &[]);
        f.xrceth = Some(crate::wire::XrcEthRepr { xrc_srqn: 0x42 });
        let mut l = RocePacket::new(BthRepr::new(Opcode::XrcSendLast, 9, 12), &[]);
        l.xrceth = f.xrceth;
        let (head, bytes) = record(&f, &l, 3, 1024, 2048 + 1);
        let run = Run::parse(&head, &bytes).unwrap();
        let (mid, r) = run.packet(1);
        assert_eq!((mid.bth.opcode, mid.bth.psn, mid.xrceth, r.len), (Opcode::XrcSendMiddle, 11, f.xrceth, 1024));
        assert_eq!(run.packet(2).1.len, 1);
    }

    /// Inconsistent records are refused: PSNs that do not span `count`, a length that does
    /// not fit the segments, a run ending or starting where a message cannot, another QP.
    #[test]
    fn inconsistent_runs_are_refused() {
        let f = RocePacket::new(BthRepr::new(Opcode::RcSendMiddle, 3, 100), &[]);
        let l = RocePacket::new(BthRepr::new(Opcode::RcSendLast, 3, 103), &[]);
        let (h, b) = record(&f, &l, 4, 4096, 3 * 4096 + 1);
        assert!(Run::parse(&h, &b).is_ok());
        let bad = |f: &RocePacket<'_>, l: &RocePacket<'_>, count, seg, total| {
            let (h, b) = record(f, l, count, seg, total);
            Run::parse(&h, &b).unwrap_err()
        };
        bad(&f, &l, 3, 4096, 3 * 4096);
        bad(&f, &l, 4, 4096, 3 * 4096);
        bad(&f, &l, 4, 4096, 4 * 4096 + 1);
        bad(&f, &l, 4, 0, 1);
        bad(&f, &RocePacket::new(BthRepr::new(Opcode::RcRdmaWriteLast, 3, 103), &[]), 4, 4096, 4 * 4096);
        bad(&f, &RocePacket::new(BthRepr::new(Opcode::RcSendLast, 4, 103), &[]), 4, 4096, 4 * 4096);
        bad(&RocePacket::new(BthRepr::new(Opcode::RcSendOnly, 3, 100), &[]), &l, 4, 4096, 4 * 4096);
        bad(&RocePacket::new(BthRepr::new(Opcode::UcSendFirst, 3, 100), &[]), &l, 4, 4096, 4 * 4096);
        let (mut h, b) = record(&f, &l, 4, 4096, 4 * 4096);
        h.split = b.len() as u16 + 1;
        Run::parse(&h, &b).unwrap_err();
    }

    #[test]
    fn middle_opcodes() {
        use Opcode::*;
        assert_eq!(middle_of(RcSendFirst), Some(RcSendMiddle));
        assert_eq!(middle_of(RcRdmaWriteMiddle), Some(RcRdmaWriteMiddle));
        assert_eq!(middle_of(XrcRdmaWriteFirst), Some(XrcRdmaWriteMiddle));
        for op in [RcSendLast, RcSendOnly, RcRdmaWriteOnly, RcRdmaReadResponseFirst, UcSendFirst, RcRdmaReadRequest] {
            assert_eq!(middle_of(op), None, "{op:?}");
        }
    }
}
