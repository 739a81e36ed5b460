//! Direct all-gather: a peer writes the blocks it gathers straight into our receive
//! buffer, at their final place, instead of into a staging slot that we then copy out.
//!
//! Why: in halving-doubling's all-gather every block a rank receives is copied from
//! its slot into the receive buffer, which is half the bytes of the call (measured on
//! softhca: skipping those copies made 1, 2 and 4 MiB calls 6, 12 and 11 % faster;
//! docs/benchmarks-history.md, "Direct all-gather"). NCCL gets the same effect from user
//! buffer registration.
//!
//! How: the receiver must say, for every call, where its buffer is. At the start of a
//! call whose plan has direct actions ([`crate::plan::Action::direct_in`]), each rank
//! writes an [`Announcement`] (the buffer's address, length and remote key, or "not
//! this time") into a two-entry mailbox that each peer keeps for it, with an immediate that
//! names the call ([`crate::stream::imm::announce`]). A sending action marked
//! [`crate::plan::Action::direct_out`] waits for its receiver's announcement of the
//! same call, then writes to `address + its own store offset` (the plans are built so
//! that a block has the same offset at every rank; a write that would not fit in the
//! announced length is an error, the sign of ranks that disagree on the count) or, if
//! the receiver said no, to the slot as usual. Either way the message keeps its place in the stream's sequence and
//! takes a credit, so the stream accounting is unchanged; the receiving action then
//! either finds the data in place or copies it from the slot, as it announced.
//!
//! Calls are numbered by the plans that have direct actions, which every rank's plan
//! has or none has ([`crate::plan::Plan::has_direct`]); a rank announces to the peers
//! its direct inputs come from, and nobody else.
//!
//! Why two entries suffice: say we (rank `q`) hold peer `p`'s announcement of call
//! `k` in entry `k % 2`. We read it during call `k`, because we send `p` direct
//! messages in it (that is why `p` announced to us). `p` writes the entry again when it
//! starts call `k + 2`, after finishing call `k + 1`; an all-reduce result depends on
//! every rank's contribution, so that needs something we sent in call `k + 1`, which
//! we started after finishing call `k`. The same chain shows that `p`'s write of
//! announcement `k` has completed before `p` reuses its source.
//!
//! Why it is safe for the receiver's memory: a peer writes block `b` only once it has
//! the reduced block, which needs our contribution to it, which we send after our last
//! use of that range of the receive buffer (the partial results kept there during the
//! reduce-scatter). A receiver that cannot take direct writes (in place, where the
//! range is still the contribution of blocks not reduced yet; or a transport without
//! remote keys for application memory) announces "no". The registration lasts for
//! the call ([`crate::transport::Transport::reg_user`]): after a failure the transport
//! first stops its QPs ([`crate::transport::Transport::abandon`]) and the engine then
//! drops the registration, so a late write fails at the writer instead of landing in
//! memory given back; after a call that succeeded every write into it was an input of
//! that call and has arrived, and the next call registers (and announces) again.
//! Ranks whose plans disagree (different counts) would break that; the length in the
//! announcement turns the writes that would leave the buffer into errors, and the
//! reduce-scatter's length checks catch the rest before the all-gather starts.

/// Bytes per mailbox entry: address (8), length (8), remote key (4), flags (4),
/// little-endian.
pub const ENTRY: usize = 24;
/// Entries per peer (by call parity).
pub const ENTRIES: usize = 2;
/// Mailbox bytes per peer.
pub const PER_PEER: usize = ENTRY * ENTRIES;

/// Where the entry for call `call` (by parity) starts in one peer's mailbox: the same
/// in the mailboxes peers write and in the sources of our own announcements.
pub fn entry_offset(call: u64) -> u64 {
    (call % ENTRIES as u64) * ENTRY as u64
}
/// The channel id under which a link publishes its mailbox (never in an immediate).
pub const MAILBOX: crate::stream::Channel = crate::stream::Channel(0xff);
/// Call numbers travel modulo 2^26 ([`crate::stream::imm::COUNT_BITS`]).
const CALL_MASK: u64 = (1 << crate::stream::imm::COUNT_BITS) - 1;

/// A receiver's word on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement {
    /// The call's number (low bits).
    pub call: u32,
    /// The receive buffer; `None`: send to the slots.
    pub target: Option<Target>,
}

/// Where a receiver takes direct writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub addr: u64,
    /// Bytes: a sender checks every write against it, so that ranks that disagree on
    /// the count get an error rather than writes past the buffer.
    pub len: u64,
    pub rkey: u32,
}

impl Target {
    /// The address for `bytes` at byte offset `off` of the buffer, or why they do not
    /// fit in it.
    pub fn place(&self, off: u64, bytes: u64) -> Result<u64, String> {
        match off.checked_add(bytes) {
            Some(end) if end <= self.len => Ok(self.addr + off),
            _ => Err(format!("a direct write of {bytes} B at offset {off} does not fit the receive buffer of {} B: do the ranks pass the same count?", self.len)),
        }
    }
}

impl Announcement {
    /// The mailbox entry.
    pub fn encode(target: Option<Target>) -> [u8; ENTRY] {
        let mut b = [0u8; ENTRY];
        if let Some(t) = target {
            b[..8].copy_from_slice(&t.addr.to_le_bytes());
            b[8..16].copy_from_slice(&t.len.to_le_bytes());
            b[16..20].copy_from_slice(&t.rkey.to_le_bytes());
            b[20..].copy_from_slice(&1u32.to_le_bytes());
        }
        b
    }

    /// From a mailbox entry, for call `call`.
    pub fn decode(call: u32, b: &[u8; ENTRY]) -> Announcement {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("four bytes"));
        let target = (u32_at(20) & 1 == 1).then(|| Target { addr: u64_at(0), len: u64_at(8), rkey: u32_at(16) });
        Announcement { call, target }
    }
}

/// The announcements received, per link and call parity.
#[derive(Debug, Default)]
pub struct Announced {
    entries: Vec<[Option<Announcement>; ENTRIES]>,
}

impl Announced {
    pub fn new(links: usize) -> Announced {
        Announced { entries: vec![[None; ENTRIES]; links] }
    }

    /// Records `a`, received on `link`.
    pub fn put(&mut self, link: usize, a: Announcement) {
        self.entries[link][a.call as usize % ENTRIES] = Some(a);
    }

    /// The announcement of call `call` on `link`, if it has arrived.
    pub fn get(&self, link: usize, call: u64) -> Option<Announcement> {
        self.entries[link][(call % ENTRIES as u64) as usize].filter(|a| a.call as u64 == call & CALL_MASK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mailbox entry's bytes.
    #[test]
    fn entry_golden() {
        let t = Target { addr: 0x7f00_1234_5678, len: 0x10_0000, rkey: 0xabcd_0102 };
        let b = Announcement::encode(Some(t));
        #[rustfmt::skip]
        assert_eq!(b, [
            0x78, 0x56, 0x34, 0x12, 0x00, 0x7f, 0, 0, // address
            0, 0, 0x10, 0, 0, 0, 0, 0,                // length
            0x02, 0x01, 0xcd, 0xab,                   // rkey
            1, 0, 0, 0,                               // flags: open
        ]);
        assert_eq!(Announcement::decode(5, &b), Announcement { call: 5, target: Some(t) });
        assert_eq!(Announcement::encode(None), [0; ENTRY]);
        assert_eq!(Announcement::decode(6, &[0; ENTRY]).target, None);
    }

    #[test]
    fn writes_stay_inside_the_buffer() {
        let t = Target { addr: 0x10_0000, len: 4096, rkey: 1 };
        assert_eq!(t.place(0, 4096), Ok(0x10_0000));
        assert_eq!(t.place(4000, 96), Ok(0x10_0000 + 4000));
        assert!(t.place(4000, 97).unwrap_err().contains("does not fit the receive buffer of 4096 B"));
        assert!(t.place(u64::MAX, 2).is_err(), "no wrap-around");
    }

    #[test]
    fn calls_by_parity() {
        let mut t = Announced::new(2);
        assert_eq!(t.get(1, 3), None);
        let a3 = Announcement { call: 3, target: None };
        t.put(1, a3);
        assert_eq!(t.get(1, 3), Some(a3));
        assert_eq!(t.get(0, 3), None, "per link");
        assert_eq!(t.get(1, 5), None, "call 5 has not been announced, only 3 of its parity");
        // The peer one call ahead: both entries live at once.
        let open = Target { addr: 0x1000, len: 64, rkey: 7 };
        t.put(1, Announcement { call: 4, target: Some(open) });
        assert_eq!(t.get(1, 3), Some(a3));
        assert_eq!(t.get(1, 4).and_then(|a| a.target), Some(open));
        // Call numbers wrap at 2^26 on the wire.
        t.put(0, Announcement { call: 2, target: None });
        assert!(t.get(0, (1 << 26) + 2).is_some());
    }
}
