//! Streams: one-way, in-order sequences of messages between two ranks, with a ring of
//! staging slots at the receiver and credits flowing back.
//!
//! A link (one RC QP between two ranks) carries several *channels*; each channel in
//! each direction is a stream. The sender of stream `s` writes message `k` with RDMA
//! WRITE WITH IMM into slot `k % nslots` of the receiver's staging region for `s`; the
//! immediate names the channel and carries `k` (mod 2^16), and the receiver gets one
//! receive completion per message, in order (RC delivers in order). When the receiver
//! has consumed messages (reduced or copied them out), it returns a *credit*: a
//! zero-byte WRITE WITH IMM whose immediate carries the consumed count. The sender
//! writes message `k` only when `k - credited < nslots`, so it never overwrites a
//! slot the receiver has not consumed; and since a credit for message `k` proves the
//! write of `k` finished, the sender's own staging slot `k % nslots` is free again too.
//!
//! *Piggybacked credits.* Where a link carries streams both ways that belong together
//! (a tree's up and down channels, a recursive doubling step's channel, a two-rank
//! ring lane), every data message also carries the sender's consumed count of the
//! paired stream coming the other way ([`Channel::reverse`]). A rank that both sends
//! and receives on a pair then returns credits for free, and an explicit credit (a
//! message and its ACK on the wire, and perhaps a wake-up) is only needed when it
//! consumes without sending. Counts only grow and RC delivers a link's messages in
//! order, so whichever carries a count, the sender applies the newest one.
//!
//! Channels: 0..3 ring lanes, 4..7 the two trees (up and down), 8..15 recursive
//! doubling's steps.
//!
//! Immediate layout (host order; the wire carries it big-endian): `bit 31` credit
//! flag, `bits 30..27` channel; a credit's `bit 26` is clear and `bits 25..0` are the
//! count; with `bit 26` set it is an announcement instead (see [`crate::direct`]),
//! `bits 25..0` its call number, and the channel bits zero; a data message's `bit 26`
//! says whether `bits 25..16` carry a piggybacked count (mod 2^10), and `bits 15..0`
//! are its sequence number. Slots per stream stay below 2^9 so all three
//! wrap unambiguously ([`MAX_SLOTS`]).

use std::collections::VecDeque;

/// Channels a link can carry.
pub const MAX_CHANNELS: usize = 16;
/// Most slots per stream: a piggybacked count (10 bits) must tell apart every value
/// between the sender's credited and sent counts.
pub const MAX_SLOTS: usize = 1 << 9;
/// Ring channels (parallel rings, each with its own slots): 0..RING_LANES_MAX.
pub const RING_LANES_MAX: usize = 4;
/// Recursive doubling's channels: `DOUBLING_BASE + step`, up to [`DOUBLING_STEPS_MAX`]
/// steps (256 ranks).
const DOUBLING_BASE: u8 = RING_LANES_MAX as u8 + 4;
pub const DOUBLING_STEPS_MAX: usize = MAX_CHANNELS - DOUBLING_BASE as usize;

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
    /// Recursive doubling, step `j` (the exchange with rank `r ^ 2^j`).
    pub const fn doubling(j: usize) -> Channel {
        Channel(DOUBLING_BASE + j as u8)
    }
    /// The channel that carries the other direction of the same exchange on a link:
    /// a tree's down channel for its up channel and back; a ring lane or a doubling
    /// step uses one channel both ways.
    pub const fn reverse(self) -> Channel {
        let t = RING_LANES_MAX as u8;
        if self.0 >= t && self.0 < t + 4 {
            Channel(self.0 ^ 1)
        } else {
            self
        }
    }

    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is a ring lane (or broadcast's chain, which uses them).
    pub const fn is_ring(self) -> bool {
        (self.0 as usize) < RING_LANES_MAX
    }
}

/// The immediate-data encoding.
pub mod imm {
    use super::Channel;

    const CREDIT: u32 = 1 << 31;
    const CHAN_SHIFT: u32 = 27;
    /// Explicit credits carry the consumed count modulo 2^26.
    pub const COUNT_BITS: u32 = 26;
    const COUNT_MASK: u32 = (1 << COUNT_BITS) - 1;
    /// In a credit-flagged immediate: an announcement, not a credit.
    const ANNOUNCE: u32 = 1 << 26;
    /// Data: bit 26 set when bits 25..16 carry a piggybacked credit for the paired
    /// stream (its consumed count modulo 2^10).
    const PIGGY: u32 = 1 << 26;
    const PIGGY_SHIFT: u32 = 16;
    pub const PIGGY_BITS: u32 = 10;
    const PIGGY_MASK: u32 = (1 << PIGGY_BITS) - 1;
    /// Data sequence numbers travel modulo 2^16.
    pub const SEQ_BITS: u32 = 16;
    pub const SEQ_MASK: u32 = (1 << SEQ_BITS) - 1;

    /// A decoded immediate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Imm {
        /// Message `seq` (mod 2^16) of a stream, with the sender's consumed count (mod
        /// 2^10) of the paired stream in the other direction, if it has one.
        Data { ch: Channel, seq: u32, credit: Option<u32> },
        /// The receiver has consumed `count` (mod 2^26) messages of the stream.
        Credit { ch: Channel, count: u32 },
        /// The peer's receive buffer for its direct call `call` (mod 2^26) is in our
        /// mailbox ([`crate::direct`]).
        Announce { call: u32 },
    }

    pub const fn data(ch: Channel, seq: u64, credit: Option<u64>) -> u32 {
        let piggy = match credit {
            Some(c) => PIGGY | ((c as u32 & PIGGY_MASK) << PIGGY_SHIFT),
            None => 0,
        };
        ((ch.0 as u32 & 0xf) << CHAN_SHIFT) | piggy | (seq as u32 & SEQ_MASK)
    }

    pub const fn credit(ch: Channel, count: u64) -> u32 {
        CREDIT | ((ch.0 as u32 & 0xf) << CHAN_SHIFT) | (count as u32 & COUNT_MASK)
    }

    /// An announcement of direct call `call` (mod 2^26).
    pub const fn announce(call: u64) -> u32 {
        CREDIT | ANNOUNCE | (call as u32 & COUNT_MASK)
    }

    pub const fn decode(v: u32) -> Imm {
        let ch = Channel(((v >> CHAN_SHIFT) & 0xf) as u8);
        if v & (CREDIT | ANNOUNCE) == CREDIT | ANNOUNCE {
            Imm::Announce { call: v & COUNT_MASK }
        } else if v & CREDIT != 0 {
            Imm::Credit { ch, count: v & COUNT_MASK }
        } else {
            let credit = if v & PIGGY != 0 { Some((v >> PIGGY_SHIFT) & PIGGY_MASK) } else { None };
            Imm::Data { ch, seq: v & SEQ_MASK, credit }
        }
    }

    /// The full counter whose low `bits` bits are `low`, given that it is at least
    /// `base` and less than `base + 2^bits`.
    pub const fn expand(base: u64, low: u32, bits: u32) -> u64 {
        let mask = (1u32 << bits) - 1;
        base + ((low.wrapping_sub(base as u32)) & mask) as u64
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

    /// Applies a credit: the low `bits` bits of the receiver's consumed count (an
    /// explicit credit's [`imm::COUNT_BITS`], or a piggybacked [`imm::PIGGY_BITS`]).
    #[inline]
    pub fn credit(&mut self, low: u32, bits: u32) -> Result<(), String> {
        let c = imm::expand(self.credited, low, bits);
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

    /// Marks the oldest message consumed; returns whether a credit is due: half the
    /// slots (rounded up) consumed since the last report, so the sender gets slots back
    /// while the rest are still full, and one credit covers several messages.
    #[inline]
    pub fn consume(&mut self) -> bool {
        self.arrived.pop_front();
        self.consumed += 1;
        self.consumed - self.reported >= (self.region.nslots as u64).div_ceil(2)
    }
}

#[cfg(test)]
mod tests {
    use super::imm::{self, Imm};
    use super::*;

    #[test]
    fn immediates_round_trip() {
        for ch in [Channel::ring(0), Channel::ring(3), Channel::tree_up(1), Channel::tree_down(1)] {
            for seq in [0u64, 1, 12345, 65537, (1 << 27) - 1, 1 << 27, (5 << 27) + 9] {
                assert_eq!(imm::decode(imm::data(ch, seq, None)), Imm::Data { ch, seq: seq as u32 & imm::SEQ_MASK, credit: None });
                assert_eq!(imm::decode(imm::data(ch, seq, Some(seq + 3))), Imm::Data {
                    ch,
                    seq: seq as u32 & imm::SEQ_MASK,
                    credit: Some((seq as u32 + 3) & ((1 << imm::PIGGY_BITS) - 1)),
                });
                assert_eq!(imm::decode(imm::credit(ch, seq)), Imm::Credit { ch, count: seq as u32 & ((1 << imm::COUNT_BITS) - 1) });
            }
        }
        assert_eq!(Channel::tree_down(1).index(), 7);
        assert_eq!(Channel::tree_up(1).reverse(), Channel::tree_down(1));
        assert_eq!(Channel::tree_down(0).reverse(), Channel::tree_up(0));
        assert_eq!(Channel::ring(3).reverse(), Channel::ring(3));
        assert_eq!(Channel::doubling(2).reverse(), Channel::doubling(2));
    }

    /// The values on the wire (host order), so that a change of layout is a
    /// deliberate one.
    #[test]
    fn immediates_golden() {
        assert_eq!(imm::data(Channel::doubling(1), 0x1_2345, None), 0x4800_2345);
        assert_eq!(imm::data(Channel::ring(2), 7, Some(0x3ff)), 0x17ff_0007);
        assert_eq!(imm::credit(Channel::tree_down(0), (1 << 26) + 9), 0xa800_0009);
        assert_eq!(imm::announce((1 << 26) + 0x12_3456), 0x8412_3456);
        assert_eq!(imm::decode(0x8412_3456), Imm::Announce { call: 0x12_3456 });
        assert_eq!(imm::decode(0xa800_0009), Imm::Credit { ch: Channel::tree_down(0), count: 9 });
        for ch in 0..16 {
            // A credit never reads as an announcement, whatever its channel and count.
            let c = imm::credit(Channel(ch), u64::MAX);
            assert_eq!(imm::decode(c), Imm::Credit { ch: Channel(ch), count: (1 << imm::COUNT_BITS) - 1 });
        }
    }

    #[test]
    fn counters_expand_across_wraps() {
        assert_eq!(imm::expand(0, 5, imm::COUNT_BITS), 5);
        let base = (3u64 << 26) - 2;
        assert_eq!(imm::expand(base, 1, imm::COUNT_BITS), (3 << 26) + 1);
        assert_eq!(imm::expand(base, (1 << 26) - 2, imm::COUNT_BITS), base);
        assert_eq!(imm::expand(1022, 3, imm::PIGGY_BITS), 1027);
    }

    #[test]
    fn credits_bound_the_sender() {
        let region = Region { addr: 0x1000, rkey: 1, nslots: 2, slot_bytes: 64 };
        let mut o = OutStream { link: 0, peer: 1, ch: Channel(0), remote: region, local_addr: 0x9000, lkey: 2, sent: 0, credited: 0 };
        assert!(o.has_credit());
        o.sent = 2;
        assert!(!o.has_credit());
        assert_eq!(o.next_remote(), 0x1000);
        o.credit(1, imm::COUNT_BITS).unwrap();
        assert!(o.has_credit());
        assert!(o.credit(3, imm::COUNT_BITS).is_err(), "credit beyond what was sent");
        o.credit(2, imm::PIGGY_BITS).unwrap();
        assert_eq!(o.credited, 2);
        let mut i = InStream::new(0, 1, Channel(0), region);
        i.arrive(0, 64).unwrap();
        assert!(i.arrive(0, 8).is_err(), "out of sequence");
        i.arrive(1, 8).unwrap();
        assert!(i.arrive(2, 8).is_err(), "overrun");
        assert_eq!(i.head_addr(), 0x1000);
        assert!(i.consume(), "two slots: a credit for every message");
        assert_eq!(i.head_addr(), 0x1040);
        i.reported = 1;
        assert!(i.consume());
        let mut four = InStream::new(0, 1, Channel(0), Region { nslots: 4, ..region });
        for k in 0..3 {
            four.arrive(k, 8).unwrap();
        }
        assert!(!four.consume(), "four slots: a credit for every second message");
        assert!(four.consume());
    }
}
