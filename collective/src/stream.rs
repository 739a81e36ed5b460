//! Streams: one-way, in-order sequences of messages between two ranks, with a ring of
//! staging slots at the receiver and credits flowing back.
//!
//! A link (one RC QP between two ranks) carries several *channels*; each channel in
//! each direction is a stream. The sender of stream `s` writes message `k` with RDMA
//! WRITE WITH IMM into slot `k % nslots` of the receiver's staging region for `s`; the
//! immediate names the channel and carries `k` (mod 2^27), and the receiver gets one
//! receive completion per message, in order (RC delivers in order). When the receiver
//! has consumed messages (reduced or copied them out), it returns a *credit*: a
//! zero-byte WRITE WITH IMM whose immediate carries the consumed count. The sender
//! writes message `k` only when `k - credited < nslots`, so it never overwrites a
//! slot the receiver has not consumed; and since a credit for message `k` proves the
//! write of `k` finished, the sender's own staging slot `k % nslots` is free again too.
//!
//! Immediate layout (host order; the wire carries it big-endian):
//! `bit 31` credit flag, `bits 30..27` channel, `bits 26..0` sequence or count.

use std::collections::VecDeque;

/// Channels a link can carry.
pub const MAX_CHANNELS: usize = 16;
/// Ring channels (parallel rings, each with its own slots): 0..RING_LANES_MAX.
pub const RING_LANES_MAX: usize = 4;

/// A channel id (4 bits in the immediate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Channel(pub u8);

impl Channel {
    /// Ring lane `l` (also used by broadcast's chain).
    pub const fn ring(l: usize) -> Channel {
        Channel(l as u8)
    }
    /// Tree `t` (0 or 1), child to parent (reduce).
    pub const fn tree_up(t: usize) -> Channel {
        Channel(RING_LANES_MAX as u8 + 2 * t as u8)
    }
    /// Tree `t`, parent to child (broadcast of the result).
    pub const fn tree_down(t: usize) -> Channel {
        Channel(RING_LANES_MAX as u8 + 2 * t as u8 + 1)
    }
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// The immediate-data encoding.
pub mod imm {
    use super::Channel;

    const CREDIT: u32 = 1 << 31;
    const CHAN_SHIFT: u32 = 27;
    /// Sequence numbers and counts travel modulo 2^27.
    pub const SEQ_BITS: u32 = 27;
    pub const SEQ_MASK: u32 = (1 << SEQ_BITS) - 1;

    /// A decoded immediate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Imm {
        /// Message `seq` (mod 2^27) of a stream.
        Data { ch: Channel, seq: u32 },
        /// The receiver has consumed `count` (mod 2^27) messages of the stream.
        Credit { ch: Channel, count: u32 },
    }

    pub const fn data(ch: Channel, seq: u64) -> u32 {
        ((ch.0 as u32 & 0xf) << CHAN_SHIFT) | (seq as u32 & SEQ_MASK)
    }

    pub const fn credit(ch: Channel, count: u64) -> u32 {
        CREDIT | ((ch.0 as u32 & 0xf) << CHAN_SHIFT) | (count as u32 & SEQ_MASK)
    }

    pub const fn decode(v: u32) -> Imm {
        let ch = Channel(((v >> CHAN_SHIFT) & 0xf) as u8);
        if v & CREDIT != 0 {
            Imm::Credit { ch, count: v & SEQ_MASK }
        } else {
            Imm::Data { ch, seq: v & SEQ_MASK }
        }
    }

    /// The full counter whose low bits are `low`, given that it is at least `base`
    /// and less than `base + 2^27`.
    pub const fn expand(base: u64, low: u32) -> u64 {
        base + ((low.wrapping_sub(base as u32)) & SEQ_MASK) as u64
    }
}

/// Streams as (peer rank, channel) pairs.
pub type StreamList = Vec<(usize, Channel)>;

/// Where a stream's slots live at the receiver (published through the bootstrap).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Region {
    pub addr: u64,
    pub rkey: u32,
    pub nslots: u32,
    pub slot_bytes: u32,
}

/// The sending end of a stream.
#[derive(Debug)]
pub struct OutStream {
    pub link: usize,
    pub peer: usize,
    pub ch: Channel,
    /// The receiver's slots.
    pub remote: Region,
    /// Our staging slots (the source of the writes), `nslots * slot_bytes` bytes.
    pub local_addr: u64,
    pub lkey: u32,
    /// Messages written.
    pub sent: u64,
    /// Messages the receiver has consumed (from credits).
    pub credited: u64,
}

impl OutStream {
    /// Whether message `sent` may be written now.
    #[inline]
    pub fn has_credit(&self) -> bool {
        self.sent - self.credited < self.remote.nslots as u64
    }

    /// Slot of the next message.
    #[inline]
    pub fn next_slot(&self) -> u64 {
        self.sent % self.remote.nslots as u64
    }

    /// Our staging address of the next message.
    #[inline]
    pub fn next_local(&self) -> u64 {
        self.local_addr + self.next_slot() * self.remote.slot_bytes as u64
    }

    /// The receiver's address of the next message.
    #[inline]
    pub fn next_remote(&self) -> u64 {
        self.remote.addr + self.next_slot() * self.remote.slot_bytes as u64
    }

    /// Applies a credit immediate.
    #[inline]
    pub fn credit(&mut self, low: u32) -> Result<(), String> {
        let c = imm::expand(self.credited, low);
        if c > self.sent {
            return Err(format!("channel {}: credit for {c} messages but only {} sent", self.ch.0, self.sent));
        }
        self.credited = c;
        Ok(())
    }
}

/// The receiving end of a stream.
#[derive(Debug)]
pub struct InStream {
    pub link: usize,
    pub peer: usize,
    pub ch: Channel,
    /// Our slots, which the peer writes.
    pub region: Region,
    /// Byte lengths of messages that arrived and are not consumed yet, oldest first.
    pub arrived: VecDeque<u32>,
    /// Messages that arrived.
    pub received: u64,
    /// Messages consumed.
    pub consumed: u64,
    /// Consumed count last sent back as a credit.
    pub reported: u64,
}

impl InStream {
    pub fn new(link: usize, peer: usize, ch: Channel, region: Region) -> InStream {
        InStream { link, peer, ch, region, arrived: VecDeque::with_capacity(region.nslots as usize), received: 0, consumed: 0, reported: 0 }
    }

    /// Records the arrival of message `seq` (low bits) of `len` bytes.
    #[inline]
    pub fn arrive(&mut self, seq: u32, len: u32) -> Result<(), String> {
        if seq != (self.received as u32 & imm::SEQ_MASK) {
            return Err(format!("channel {}: message {seq} arrived, expected {}", self.ch.0, self.received as u32 & imm::SEQ_MASK));
        }
        if self.received - self.consumed >= self.region.nslots as u64 {
            return Err(format!("channel {}: message {} overran {} slots", self.ch.0, self.received, self.region.nslots));
        }
        if len > self.region.slot_bytes {
            return Err(format!("channel {}: message of {len} B exceeds the {} B slot", self.ch.0, self.region.slot_bytes));
        }
        self.arrived.push_back(len);
        self.received += 1;
        Ok(())
    }

    /// Address of the oldest unconsumed message.
    #[inline]
    pub fn head_addr(&self) -> u64 {
        self.region.addr + (self.consumed % self.region.nslots as u64) * self.region.slot_bytes as u64
    }

    /// Marks the oldest message consumed; returns whether a credit is due (at least
    /// `threshold` consumed since the last report).
    #[inline]
    pub fn consume(&mut self, threshold: u64) -> bool {
        self.arrived.pop_front();
        self.consumed += 1;
        self.consumed - self.reported >= threshold
    }
}

#[cfg(test)]
mod tests {
    use super::imm::{self, Imm};
    use super::*;

    #[test]
    fn immediates_round_trip() {
        for ch in [Channel::ring(0), Channel::ring(3), Channel::tree_up(1), Channel::tree_down(1)] {
            for seq in [0u64, 1, 12345, (1 << 27) - 1, 1 << 27, (5 << 27) + 9] {
                assert_eq!(imm::decode(imm::data(ch, seq)), Imm::Data { ch, seq: seq as u32 & imm::SEQ_MASK });
                assert_eq!(imm::decode(imm::credit(ch, seq)), Imm::Credit { ch, count: seq as u32 & imm::SEQ_MASK });
            }
        }
        assert_eq!(Channel::tree_down(1).index(), 7);
    }

    #[test]
    fn counters_expand_across_wraps() {
        assert_eq!(imm::expand(0, 5), 5);
        let base = (3u64 << 27) - 2;
        assert_eq!(imm::expand(base, 1), (3 << 27) + 1);
        assert_eq!(imm::expand(base, imm::SEQ_MASK - 1), base);
    }

    #[test]
    fn credits_bound_the_sender() {
        let region = Region { addr: 0x1000, rkey: 1, nslots: 2, slot_bytes: 64 };
        let mut o = OutStream { link: 0, peer: 1, ch: Channel(0), remote: region, local_addr: 0x9000, lkey: 2, sent: 0, credited: 0 };
        assert!(o.has_credit());
        o.sent = 2;
        assert!(!o.has_credit());
        assert_eq!(o.next_remote(), 0x1000);
        o.credit(1).unwrap();
        assert!(o.has_credit());
        assert!(o.credit(3).is_err(), "credit beyond what was sent");
        let mut i = InStream::new(0, 1, Channel(0), region);
        i.arrive(0, 64).unwrap();
        assert!(i.arrive(0, 8).is_err(), "out of sequence");
        i.arrive(1, 8).unwrap();
        assert!(i.arrive(2, 8).is_err(), "overrun");
        assert_eq!(i.head_addr(), 0x1000);
        assert!(!i.consume(2));
        assert_eq!(i.head_addr(), 0x1040);
        assert!(i.consume(2));
    }
}
