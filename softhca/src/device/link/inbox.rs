//! The inbox: one shared-memory file per instance, where same-host peers leave packets.
//!
//! Layout (every offset a multiple of the page size, all integers native-endian: the file
//! never leaves the host):
//!
//! ```text
//! 0                 InboxHeader                   (one page)
//! PAGE + i*LANE     LaneHeader of lane i          (one page)
//! ... + PAGE        the lane's ring, RING bytes
//! ```
//!
//! Each lane is a single-producer, single-consumer byte ring: one peer instance (its
//! owner, claimed with a compare-and-swap on [`LaneHeader::owner`]) appends records, this
//! instance's data path takes them. Positions (`tail`, `head`) count bytes since the lane
//! was created and never wrap; the offset in the ring is `pos % RING`. A record never
//! straddles the end of the ring: one that does not fit in what is left is preceded by a
//! pad record (or, when fewer than [`RecordHead`]'s bytes are left, by nothing: both
//! sides skip such a tail).
//!
//! Ordering: the producer writes a record's bytes with plain stores, then publishes it
//! with a release store of `tail`; the consumer loads `tail` with acquire, so the bytes
//! are visible, and releases `head` once it no longer reads them, which the producer's
//! acquire load of `head` pairs with before it writes over that space.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// "doorbell" "link" "v1", as a magic number.
pub const MAGIC: u64 = 0x6462_6c6e_6b76_3031;
/// Bumped on any layout change: a peer with another version is not used. (2: burst
/// records, and the record head's `seg`, `split` and `count`.)
pub const VERSION: u32 = 2;
pub const PAGE: usize = 4096;
/// Peers that can send to one instance at once (one lane each); more fall back to UDP.
pub const LANES: usize = 16;
/// Bytes of ring per lane: 1000 full-MTU packets inline, or 50000 references.
pub const RING: usize = 4 << 20;
/// Bytes of one lane: its header page and its ring.
pub const LANE: usize = PAGE + RING;
/// Size of the whole file (sparse: untouched ring pages take no memory).
pub const FILE_LEN: usize = PAGE + LANES * LANE;

/// The first page.
#[repr(C)]
pub struct InboxHeader {
    pub magic: AtomicU64,
    pub version: AtomicU32,
    /// The process that owns the inbox (a peer checks it is alive).
    pub owner_pid: AtomicU32,
    /// The owner's address of this mapping (a peer reads it with `process_vm_readv` to
    /// learn whether cross-process copies are allowed between the two).
    pub self_addr: AtomicU64,
    /// Non-zero while the owner's data path is running and will look at the lanes again
    /// without being woken; zero while it may sleep on its socket (see [`super::Inbox`]).
    pub awake: AtomicU32,
    _pad: u32,
    /// Bit i set: lane i has been claimed at least once (the consumer looks only there).
    pub claimed: AtomicU64,
}

/// A lane's page.
#[repr(C)]
pub struct LaneHeader {
    /// `pid << 32 | serial` of the producer; 0: free.
    pub owner: AtomicU64,
    /// The producer's address (the packets' source): see [`source`].
    pub src: [AtomicU64; 3],
    /// Bytes published (producer).
    pub tail: AtomicU64,
    _gap: [u64; 11],
    /// Bytes consumed (consumer), on its own cache line.
    pub head: AtomicU64,
}

/// What a record holds.
pub mod kind {
    /// Skip to the end of the ring.
    pub const PAD: u32 = 1;
    /// A whole RoCEv2 UDP payload (headers, payload, pad, ICRC).
    pub const INLINE: u32 = 2;
    /// The headers of a packet whose payload is `remote_len` bytes at `addr` in process
    /// `pid` (the sender's registered memory), to be copied from there.
    pub const REMOTE: u32 = 3;
    /// A run of `count` (at least 2) consecutive request packets of one SEND or RDMA WRITE
    /// message, as REMOTE but for the whole run: the packet bytes are the headers of the
    /// run's first packet (`split` bytes) and then those of its last; the packets between
    /// are the message's middle packets (no extension headers but the XRCETH, AckReq
    /// clear), every packet but the last carries `seg` bytes (the path MTU), the last
    /// the rest of `remote_len`. See `super::burst`.
    pub const BURST: u32 = 4;
}

/// The fixed front of every record; `bytes` bytes of packet follow it, and the record is
/// padded to a multiple of 8.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub struct RecordHead {
    /// Record length, this head included, a multiple of 8.
    pub len: u32,
    pub kind: u32,
    /// Packet bytes after the head.
    pub bytes: u32,
    pub pid: u32,
    pub addr: u64,
    pub remote_len: u64,
    /// BURST: payload bytes of every packet but the last.
    pub seg: u32,
    /// BURST: bytes of the first packet's headers (the last packet's follow).
    pub split: u16,
    /// BURST: packets in the run.
    pub count: u16,
}

pub const HEAD: usize = std::mem::size_of::<RecordHead>();

/// The space a record with `bytes` packet bytes takes.
pub const fn record_len(bytes: usize) -> usize {
    (HEAD + bytes + 7) & !7
}

/// The producer's address, packed into three words of the lane header: family (4 or 6)
/// and port in the first, the 16 address bytes (IPv4 in the first four) in the other two.
pub mod source {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    pub fn pack(a: SocketAddr) -> [u64; 3] {
        let (fam, ip) = match a.ip() {
            IpAddr::V4(v4) => {
                let mut b = [0u8; 16];
                b[..4].copy_from_slice(&v4.octets());
                (4u64, b)
            }
            IpAddr::V6(v6) => (6u64, v6.octets()),
        };
        [fam << 16 | a.port() as u64, u64::from_ne_bytes(ip[..8].try_into().unwrap()), u64::from_ne_bytes(ip[8..].try_into().unwrap())]
    }

    pub fn unpack(w: [u64; 3]) -> Option<SocketAddr> {
        let port = (w[0] & 0xffff) as u16;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&w[1].to_ne_bytes());
        b[8..].copy_from_slice(&w[2].to_ne_bytes());
        match w[0] >> 16 {
            4 => Some(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])), port)),
            6 => Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(b)), port)),
            _ => None,
        }
    }
}

/// A mapped inbox file, ours or a peer's.
pub struct Mapped {
    map: memmap2::MmapRaw,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped").field("addr", &self.map.as_ptr()).finish()
    }
}

// Layout facts the code relies on.
const _: () = assert!(std::mem::size_of::<InboxHeader>() <= PAGE);
const _: () = assert!(std::mem::size_of::<LaneHeader>() <= PAGE);
const _: () = assert!(std::mem::offset_of!(LaneHeader, head) % 64 == 0);
const _: () = assert!(HEAD == 40 && RING % 8 == 0 && LANES <= 64);
// `sweep` reads the magic and the owner with `pread`, at these offsets.
const _: () = assert!(std::mem::offset_of!(InboxHeader, magic) == 0 && std::mem::offset_of!(InboxHeader, owner_pid) == 12);

impl Mapped {
    /// Maps `file` (at least [`FILE_LEN`] bytes) shared, read-write.
    pub fn new(file: &std::fs::File) -> std::io::Result<Mapped> {
        let map = memmap2::MmapOptions::new().len(FILE_LEN).map_raw(file)?;
        Ok(Mapped { map })
    }

    pub fn base(&self) -> u64 {
        self.map.as_ptr() as u64
    }

    pub fn header(&self) -> &InboxHeader {
        // SAFETY: the mapping is FILE_LEN bytes, page-aligned, and lives as long as
        // `self`; InboxHeader is all atomics (valid for any bytes, shared with other
        // processes only through atomic accesses).
        unsafe { &*(self.map.as_ptr() as *const InboxHeader) }
    }

    pub fn lane(&self, i: usize) -> &LaneHeader {
        assert!(i < LANES);
        // SAFETY: lane i's header page lies inside the mapping (i < LANES), page-aligned;
        // all atomics, as for the header.
        unsafe { &*(self.map.as_ptr().add(PAGE + i * LANE) as *const LaneHeader) }
    }

    /// Lane i's ring.
    pub fn ring(&self, i: usize) -> *mut u8 {
        assert!(i < LANES);
        // SAFETY: in bounds of the mapping, as above.
        unsafe { self.map.as_mut_ptr().add(PAGE + i * LANE + PAGE) }
    }
}

/// Where the next record goes and how much it consumes, for a ring position `pos` and a
/// record of `len` bytes: `(skip, at)`: bytes skipped to the end of the ring first (0 when
/// it fits), and the ring offset it is written at.
pub fn place(pos: u64, len: usize) -> (usize, usize) {
    let off = (pos % RING as u64) as usize;
    if off + len <= RING {
        (0, off)
    } else {
        (RING - off, 0)
    }
}

/// The producer side of one claimed lane of a peer's inbox.
#[derive(Debug)]
pub struct Producer {
    pub lane: usize,
    /// The consumer's `head` as last loaded (never ahead of the real one: it only grows).
    /// A push trusts it while it shows room and loads `head` again only when it does not:
    /// `head` is on the consumer's cache line, so a load per push was a cache miss per
    /// packet (the consumer had just moved it).
    seen_head: u64,
}

impl Producer {
    /// The producer of lane `lane` (just claimed).
    pub fn new(lane: usize) -> Producer {
        Producer { lane, seen_head: 0 }
    }

    /// Appends a record made of `head` (its `len` is set here) and `parts` (concatenated),
    /// and publishes it. Returns false, writing nothing, when the ring has no room.
    pub fn push(&mut self, inbox: &Mapped, mut head: RecordHead, parts: &[&[u8]]) -> bool {
        let bytes: usize = parts.iter().map(|p| p.len()).sum();
        let len = record_len(bytes);
        if len > RING / 2 {
            return false;
        }
        head.len = len as u32;
        head.bytes = bytes as u32;
        let lane = inbox.lane(self.lane);
        // Only we move the tail.
        let tail = lane.tail.load(Ordering::Relaxed);
        let (skip, at) = place(tail, len);
        let fits = |head_pos: u64| (tail - head_pos) as usize + skip + len <= RING;
        if !fits(self.seen_head) {
            // Pairs with the consumer's release of `head`: the space it freed is no longer
            // read. (A `seen_head` that shows room was loaded the same way, earlier.)
            self.seen_head = lane.head.load(Ordering::Acquire);
            if !fits(self.seen_head) {
                return false;
            }
        }
        let ring = inbox.ring(self.lane);
        // SAFETY: [at, at + len) and, when skipping, the skipped tail lie inside the ring
        // (`place`), in space the consumer has released (checked above) and that no one
        // else writes (we own the lane). The ring is shared memory: plain byte stores,
        // published by the release store of `tail` below.
        unsafe {
            if skip >= HEAD {
                let pad = RecordHead { len: skip as u32, kind: kind::PAD, ..Default::default() };
                std::ptr::copy_nonoverlapping(pad.as_bytes().as_ptr(), ring.add((tail % RING as u64) as usize), HEAD);
            }
            let mut p = ring.add(at);
            std::ptr::copy_nonoverlapping(head.as_bytes().as_ptr(), p, HEAD);
            p = p.add(HEAD);
            for part in parts {
                std::ptr::copy_nonoverlapping(part.as_ptr(), p, part.len());
                p = p.add(part.len());
            }
        }
        // Publishes the record's bytes (and the pad) to the consumer's acquire load.
        lane.tail.store(tail + (skip + len) as u64, Ordering::Release);
        true
    }
}

/// One record read from a lane: its head and its packet bytes (in the ring: valid until
/// the consumer releases them).
pub struct Record<'a> {
    pub head: RecordHead,
    pub bytes: &'a [u8],
}

/// Reads the record at `pos` of lane `i`, which the consumer knows is below the tail it
/// loaded with acquire. Returns the record (None for padding) and the position after it,
/// or None when the bytes are not a valid record (a peer that broke the format: the
/// caller drops the rest of the lane).
pub fn read(inbox: &Mapped, i: usize, pos: u64, tail: u64) -> Option<(Option<Record<'_>>, u64)> {
    let off = (pos % RING as u64) as usize;
    if RING - off < HEAD {
        return Some((None, pos + (RING - off) as u64));
    }
    let ring = inbox.ring(i);
    let mut head = RecordHead::default();
    // SAFETY: [off, off + HEAD) is inside the ring; the producer published these bytes
    // (pos < tail, acquire) and does not write them again until we release them.
    unsafe { std::ptr::copy_nonoverlapping(ring.add(off), head.as_mut_bytes().as_mut_ptr(), HEAD) };
    let len = head.len as usize;
    if len < HEAD || len % 8 != 0 || off + len > RING || pos + len as u64 > tail {
        return None;
    }
    if head.kind == kind::PAD {
        return Some((None, pos + len as u64));
    }
    if HEAD + head.bytes as usize > len {
        return None;
    }
    // SAFETY: as above, for the record's packet bytes, inside [off, off + len).
    let bytes = unsafe { std::slice::from_raw_parts(ring.add(off + HEAD), head.bytes as usize) };
    Some((Some(Record { head, bytes }), pos + len as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch() -> (std::fs::File, Mapped) {
        let f = tempfile_in_shm();
        f.set_len(FILE_LEN as u64).unwrap();
        let m = Mapped::new(&f).unwrap();
        (f, m)
    }

    fn tempfile_in_shm() -> std::fs::File {
        let fd = nix::sys::memfd::memfd_create(c"inbox-test", nix::sys::memfd::MemFdCreateFlag::empty()).unwrap();
        std::fs::File::from(fd)
    }

    /// Records come out as they went in, across many wraps of the ring, with pad records
    /// and too-short tails skipped, and a full ring refuses without writing.
    #[test]
    fn ring_round_trips_across_wraps() {
        let (_f, m) = scratch();
        let mut p = Producer::new(3);
        let lane = m.lane(3);
        let mut pushed = 0u64;
        let mut taken = 0u64;
        let mut pos = 0u64;
        // Lengths chosen so the ring ends are hit at every alignment.
        for round in 0..20_000u64 {
            let n = ((round * 7919) % 5000) as usize;
            let body: Vec<u8> = (0..n).map(|k| (round as usize + k) as u8).collect();
            let head = RecordHead { kind: kind::INLINE, pid: round as u32, addr: round, ..Default::default() };
            while !p.push(&m, head, &[&body[..n / 2], &body[n / 2..]]) {
                // Full: drain one record.
                let tail = lane.tail.load(Ordering::Acquire);
                assert!(pos < tail, "refused with an empty ring");
                let (rec, after) = read(&m, 3, pos, tail).expect("valid");
                if let Some(r) = rec {
                    assert_eq!(r.head.addr, taken);
                    let want: Vec<u8> = (0..r.bytes.len()).map(|k| (taken as usize + k) as u8).collect();
                    assert_eq!(r.bytes, &want[..]);
                    taken += 1;
                }
                pos = after;
                lane.head.store(pos, Ordering::Release);
            }
            pushed += 1;
        }
        let tail = lane.tail.load(Ordering::Acquire);
        while pos < tail {
            let (rec, after) = read(&m, 3, pos, tail).expect("valid");
            if let Some(r) = rec {
                assert_eq!(r.head.addr, taken);
                assert_eq!(r.head.pid, taken as u32);
                taken += 1;
            }
            pos = after;
        }
        assert_eq!((pushed, taken), (20_000, 20_000));
        assert!(tail > 10 * RING as u64, "the test wrapped the ring many times");
    }

    /// A record whose length is not a multiple of 8, runs past the ring or past the
    /// published tail is refused (a peer breaking the format loses its lane, nothing more).
    #[test]
    fn malformed_records_are_refused() {
        let (_f, m) = scratch();
        let ring = m.ring(0);
        for (len, tail) in [(12u32, 64u64), (64, 32), (0, 64), (RING as u32 + 8, u64::MAX)] {
            let h = RecordHead { len, kind: kind::INLINE, ..Default::default() };
            // SAFETY: the start of lane 0's ring, HEAD bytes.
            unsafe { std::ptr::copy_nonoverlapping(h.as_bytes().as_ptr(), ring, HEAD) };
            assert!(read(&m, 0, 0, tail).is_none(), "len {len} tail {tail}");
        }
    }

    #[test]
    fn source_addresses_pack_and_unpack() {
        for a in ["127.0.0.3:4791", "10.1.2.3:1", "[::1]:4791", "[fd00::1:2]:65535"] {
            let a: std::net::SocketAddr = a.parse().unwrap();
            assert_eq!(source::unpack(source::pack(a)), Some(a));
        }
        assert_eq!(source::unpack([0, 0, 0]), None);
    }
}
