//! Transmitting: packets are built during an engine step and leave together in
//! `sendmmsg` batches on the instance's unconnected UDP sockets (`sendto` semantics: each
//! datagram names its destination, which keeps the IPv4 identification at 0 as the ICRC
//! assumes; see `crate::wire::icrc`): the port-4791 one, or the one bound to the QP's
//! UDP source port ([`super::sport`]), which is chosen when the packet is built because
//! the ICRC covers it. Fault injection and capture happen here, on the way out.
//!
//! Per-packet cost is what limits bandwidth, so:
//! - **No payload copy.** A request or READ response packet whose payload lies in one
//!   registered region is queued as headers (a pooled buffer) + a reference to the
//!   application memory + pad and ICRC; `sendmmsg` gathers the pieces with one iovec
//!   each, and the ICRC is computed once over the same pieces
//!   ([`crate::wire::Endpoints::icrc_pieces`]). The reference is only valid under the
//!   engine lock (a deregistration waits for it), so every packet queued in a step leaves
//!   in that step's flush; one that fault injection holds back across flushes gets its
//!   payload copied first ([`Tx::flush`]). Inline data, UD payloads (a UD send completes
//!   before the flush, so the application may reuse its buffer) and packets whose
//!   payload spans registered regions are copied into the buffer as before.
//! - **UDP segmentation offload.** Consecutive packets to the same loopback destination
//!   with the same length (the last of a run may be shorter), e.g. the middle packets of
//!   a long RDMA WRITE, go as one `sendmmsg` entry with `UDP_SEGMENT`: the kernel handles
//!   up to [`GSO_MAX_SEGS`] datagrams (at most [`GSO_MAX_BYTES`]) with the cost of one.
//!   On loopback the receiving softhca gets them unsplit (`UDP_GRO`, see `super::rx`).
//!   Only for loopback peers, because the kernel numbers the IPv4 identification of GSO
//!   segments 0, 1, 2, ...: a peer that checks the ICRC against the real IP header (rxe,
//!   a ConnectX) would reject all but the first, while softhca rebuilds the header with
//!   identification 0 anyway. `DOORBELL_UDP_GSO=0` turns it off; a kernel that refuses it
//!   turns it off at the first error.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;

use crate::wire::packet::pad_len;
use crate::wire::{Endpoints, RocePacket};

use super::counters::{step_add, Counters};
use super::link::copy::RemoteRef;
use super::link::{Peers, Pushed, Wire, INLINE_MAX};
use super::fault::{Injector, Verdict};
use super::mem;
use super::sport::SourcePorts;
use super::trace::Capture;

/// `sendmmsg` entries per call.
const BATCH: usize = 64;
/// Header buffers kept for reuse.
const POOL: usize = 1024;
/// Packets held for same-host peers whose lane is full (beyond: dropped and counted).
const BACKLOG: usize = 16384;
/// Most datagrams and bytes in one segmented `sendmmsg` entry: the kernel allows 64
/// segments, and as many bytes as one UDP datagram carries (IPv4: 65535 less the 20-byte
/// IP and 8-byte UDP headers; IPv6 allows 20 more, unused). The full limit rather than a
/// round 60 KiB because 15 MTU-sized packets (4112 bytes with a 4096-byte MTU) fit in it
/// and only 14 in 60 KiB: a 128 KiB RDMA WRITE (32 packets: the first, 30 middle ones,
/// the last) leaves in 4 datagrams instead of 5, and the receiver takes 4 off its socket.
pub const GSO_MAX_SEGS: usize = 64;
pub const GSO_MAX_BYTES: usize = 65535 - 20 - 8;
/// `SOL_UDP` options (linux/udp.h).
pub const SOL_UDP: libc::c_int = 17;
pub const UDP_SEGMENT: libc::c_int = 103;
pub const UDP_GRO: libc::c_int = 104;
/// The environment variable that turns segmentation offload off (`0`).
pub const GSO_ENV: &str = "DOORBELL_UDP_GSO";

/// Payload bytes that stay in application memory until the datagram leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRef {
    pub addr: u64,
    pub len: usize,
    /// The bytes are the application's registered memory (a send WQE's payload or a READ
    /// target), which stay put until the operation completes: a same-host peer may copy
    /// them later ([`super::link`]). `false`: a staging buffer of the data path, reused
    /// after the flush, whose bytes must travel inline.
    pub app: bool,
}

/// One built packet: `buf` (headers, and the payload when copied), then `mem` (the payload
/// in application memory) if any, then `tail` (pad and ICRC).
#[derive(Debug)]
pub struct OutPkt {
    pub buf: Vec<u8>,
    mem: Option<MemRef>,
    tail: [u8; 8],
    tail_len: u8,
    /// The ICRC in `tail` is computed (skipped for a same-host peer; see [`Tx::seal`]).
    sealed: bool,
    pub dst: SocketAddr,
    /// The UDP source port it leaves from (the ICRC was computed for it).
    pub src: u16,
    /// A run of packets for a same-host peer ([`super::link::burst`]): `buf` holds the
    /// first packet's headers and then the last's, `mem` the run's payload.
    burst: Option<BurstShape>,
}

/// How a burst's bytes are cut ([`super::link::inbox::RecordHead`]'s fields of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BurstShape {
    split: u16,
    count: u16,
    seg: u32,
}

impl OutPkt {
    /// UDP payload length.
    pub fn wire_len(&self) -> usize {
        self.buf.len() + self.mem.map_or(0, |m| m.len) + self.tail_len as usize
    }

    fn mem_bytes(&self) -> &[u8] {
        match self.mem {
            // SAFETY: a queued packet's reference was checked inside a live MR under the
            // engine lock, which is held until the flush that sends (or copies) it.
            Some(m) => unsafe { mem::slice(m.addr, m.len) },
            None => &[],
        }
    }

    /// The whole datagram, contiguous (capture).
    fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.wire_len());
        v.extend_from_slice(&self.buf);
        v.extend_from_slice(self.mem_bytes());
        v.extend_from_slice(&self.tail[..self.tail_len as usize]);
        v
    }

    /// Copies the payload into `buf`, ending the reference to application memory.
    fn own(&mut self) {
        if self.mem.is_some() {
            let m = self.mem_bytes().to_vec();
            self.buf.extend_from_slice(&m);
            self.mem = None;
        }
    }

    /// A copy (fault injection's duplicate), owning its bytes.
    fn duplicate(&self) -> OutPkt {
        let mut buf = self.buf.clone();
        buf.extend_from_slice(self.mem_bytes());
        OutPkt { buf, mem: None, tail: self.tail, tail_len: self.tail_len, sealed: self.sealed, dst: self.dst, src: self.src, burst: None }
    }
}

/// The transmit side of one instance.
#[derive(Debug)]
pub struct Tx {
    local: SocketAddr,
    /// Sockets for the other source ports.
    ports: SourcePorts,
    queue: Vec<OutPkt>,
    /// Reused by `flush`: the packets a same-host pass leaves for the socket.
    rest: Vec<OutPkt>,
    wire: Vec<OutPkt>,
    pool: Vec<Vec<u8>>,
    held: Option<OutPkt>,
    fault: Option<Injector>,
    /// Segmentation offload to loopback peers is in use.
    gso: bool,
    /// Same-host peers ([`super::link`]); None when the path is off (capture, faults, or
    /// `DOORBELL_WIRE=udp`).
    peers: Option<Peers>,
    /// Packets for same-host peers whose lane was full, owning their bytes, in order; the
    /// next flushes push them first (the inbox's equivalent of a socket send buffer).
    backlog: std::collections::VecDeque<OutPkt>,
    /// Reused `sendmmsg` arguments.
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    addrs: Vec<(libc::sockaddr_storage, libc::socklen_t)>,
    cmsgs: Vec<[u64; 4]>,
    /// (first packet, packets, segment size) of each `sendmmsg` entry.
    groups: Vec<(usize, usize, usize)>,
}

// SAFETY: the raw pointers inside `iovs`/`hdrs` point into this value's own vectors and
// queued packets, are rewritten before each use and never outlive a `flush`.
unsafe impl Send for Tx {}

/// A socket address in C form.
pub fn to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in.
            unsafe { std::ptr::write(std::ptr::addr_of_mut!(ss).cast::<libc::sockaddr_in>(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and suitably aligned for sockaddr_in6.
            unsafe { std::ptr::write(std::ptr::addr_of_mut!(ss).cast::<libc::sockaddr_in6>(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// Whether `a` is a loopback address (127/8, ::1, or IPv4-mapped 127/8).
pub fn is_loopback(a: &SocketAddr) -> bool {
    match a.ip() {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// Whether the environment allows segmentation offload.
pub fn gso_allowed() -> bool {
    !crate::config::switched_off(GSO_ENV)
}

impl Tx {
    /// The transmit side for an instance at `local`; `gso`: may segment to loopback peers.
    pub fn new(local: SocketAddr, fault: Option<Injector>, gso: bool, peers: Option<Peers>) -> Tx {
        Tx {
            local,
            ports: SourcePorts::new(local),
            peers,
            backlog: std::collections::VecDeque::new(),
            queue: Vec::new(),
            rest: Vec::new(),
            wire: Vec::new(),
            pool: Vec::new(),
            held: None,
            fault,
            gso,
            iovs: Vec::new(),
            hdrs: Vec::new(),
            addrs: Vec::new(),
            cmsgs: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Packets built and not yet flushed.
    /// [`Peers::all_same_host`] (false without a same-host path).
    pub fn all_same_host(&self) -> bool {
        self.peers.as_ref().is_some_and(Peers::all_same_host)
    }

    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Whether everything queued is RC acknowledgements (ACKs and NAKs: no payload, no
    /// reference to application memory), so it may wait for the next flush.
    pub fn only_acks(&self) -> bool {
        self.held.is_none()
            && !self.queue.is_empty()
            && self.queue.iter().all(|p| p.mem.is_none() && p.buf.first() == Some(&(crate::wire::Opcode::RcAcknowledge as u8)))
    }

    /// A pooled buffer of exactly `n` bytes of unspecified content (the caller writes
    /// every byte: no zeroing of a reused buffer).
    fn take_buf(&mut self, n: usize) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_default();
        if b.len() < n {
            b.resize(n, 0);
        }
        b.truncate(n);
        b
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL {
            self.pool.push(buf);
        }
    }

    /// Where a packet that wants UDP source port `sport` leaves from (this instance's
    /// address, and `sport` or, failing that, 4791; see [`super::sport`]).
    fn source(&mut self, sport: u16) -> SocketAddr {
        SocketAddr::new(self.local.ip(), self.ports.port_for(sport))
    }

    /// Builds `pkt` (headers, payload, pad, ICRC for the flow from UDP source port `sport`
    /// to `dst`) into a buffer and queues it. A packet that cannot be built is counted and
    /// dropped.
    pub fn send(&mut self, pkt: &RocePacket<'_>, dst: SocketAddr, sport: u16, counters: &Counters) {
        // `emit` writes every byte.
        let mut buf = self.take_buf(pkt.buffer_len());
        let src = self.source(sport);
        let ep = Endpoints::new(src, dst);
        // A same-host peer needs no ICRC (as in `send_mem`): headers, payload and pad go in
        // `buf`, the ICRC's four bytes in `tail`, left for `seal` should the packet go over
        // UDP after all. Every ACK is built here.
        let local = self.peers.as_ref().is_some_and(|p| p.known(dst));
        let built = if local {
            pkt.emit_headers(&mut buf, pkt.payload.len()).map(|n| {
                let end = n + pkt.payload.len();
                buf[n..end].copy_from_slice(pkt.payload);
                buf[end..end + pkt.pad_len()].fill(0);
                end + pkt.pad_len()
            })
        } else {
            pkt.emit(&mut buf, &ep)
        };
        match built {
            Ok(n) => {
                buf.truncate(n);
                tracing::trace!(target: "softhca::tx", opcode = ?pkt.bth.opcode, qpn = pkt.bth.dest_qpn, psn = pkt.bth.psn,
                                len = pkt.payload.len(), ack_req = pkt.bth.ack_req, %dst, "tx");
                let tail_len = if local { crate::wire::icrc::ICRC_LEN as u8 } else { 0 };
                self.queue.push(OutPkt { buf, mem: None, tail: [0; 8], tail_len, sealed: !local, dst, src: src.port(), burst: None });
            }
            Err(e) => {
                counters.tx_errors.fetch_add(1, Relaxed);
                tracing::warn!(target: "softhca::tx", opcode = ?pkt.bth.opcode, "cannot build packet: {e}");
                self.recycle(buf);
            }
        }
    }

    /// Queues `pkt` (its `payload` field is ignored) with the payload `data`, which stays
    /// in application memory: no copy here; the kernel reads it once, in this step's
    /// flush.
    ///
    /// # Safety
    /// `data` must lie inside a registered MR whose key was checked for this access under
    /// the engine lock, which the caller holds until the next [`Tx::flush`] returns.
    pub unsafe fn send_mem(&mut self, pkt: &RocePacket<'_>, data: MemRef, dst: SocketAddr, sport: u16, counters: &Counters) {
        let mut buf = self.take_buf(pkt.header_len());
        let src = self.source(sport);
        let ep = Endpoints::new(src, dst);
        match pkt.emit_headers(&mut buf, data.len) {
            Ok(n) => {
                buf.truncate(n);
                let pad = pad_len(data.len);
                let mut tail = [0u8; 8];
                // A same-host peer needs no ICRC: computing it would read every payload
                // byte once more. Should the packet go over UDP after all, `seal` does it.
                let local = self.peers.as_ref().is_some_and(|p| p.known(dst));
                if !local {
                    // SAFETY: per this function's contract.
                    let payload = unsafe { mem::slice(data.addr, data.len) };
                    let crc = ep.icrc_pieces(&[&buf, payload, &[0u8; 3][..pad]]);
                    tail[pad..pad + 4].copy_from_slice(&crc.to_le_bytes());
                }
                tracing::trace!(target: "softhca::tx", opcode = ?pkt.bth.opcode, qpn = pkt.bth.dest_qpn, psn = pkt.bth.psn,
                                len = data.len, ack_req = pkt.bth.ack_req, %dst, "tx");
                self.queue.push(OutPkt { buf, mem: Some(data), tail, tail_len: (pad + 4) as u8, sealed: !local, dst, src: src.port(), burst: None });
            }
            Err(e) => {
                counters.tx_errors.fetch_add(1, Relaxed);
                tracing::warn!(target: "softhca::tx", opcode = ?pkt.bth.opcode, "cannot build packet: {e}");
                self.recycle(buf);
            }
        }
    }

    /// Whether a run of packets to `dst` may go as one burst record: `dst` is a known
    /// same-host peer that reads our memory by reference (capture and fault injection
    /// turn the same-host path off, so neither sees bursts).
    pub fn bursts_to(&self, dst: SocketAddr) -> bool {
        self.fault.is_none() && self.peers.as_ref().is_some_and(|p| p.known_by_ref(dst))
    }

    /// Queues a run of `count` request packets (at least 2) as one burst for `dst`
    /// ([`super::link::burst`]): `first` and `last` are the run's first and last packets
    /// (their `payload` fields ignored), every packet but the last carries `seg` bytes of
    /// `data`, which must be application memory (`data.app`). Only after
    /// [`Tx::bursts_to`] said yes for `dst`; a burst that finds no same-host path at the
    /// flush is dropped (the transport retransmits it).
    ///
    /// # Safety
    /// As [`Tx::send_mem`]: `data` lies inside a registered MR checked under the engine lock.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn send_burst(&mut self, first: &RocePacket<'_>, last: &RocePacket<'_>, count: u32, seg: usize, data: MemRef,
                             dst: SocketAddr, sport: u16, counters: &Counters) {
        debug_assert!(data.app && count >= 2 && count <= super::link::burst::MAX_PACKETS);
        let (a, b) = (first.header_len(), last.header_len());
        let mut buf = self.take_buf(a + b);
        let built = first.emit_headers(&mut buf[..a], seg).and_then(|n| {
            let last_len = data.len - (count as usize - 1) * seg;
            last.emit_headers(&mut buf[n..n + b], last_len).map(|m| (n, n + m))
        });
        match built {
            Ok((split, end)) => {
                buf.truncate(end);
                tracing::trace!(target: "softhca::tx", opcode = ?first.bth.opcode, qpn = first.bth.dest_qpn, psn = first.bth.psn, count,
                                len = data.len, ack_req = last.bth.ack_req, %dst, "tx burst");
                let src = self.source(sport).port();
                let shape = BurstShape { split: split as u16, count: count as u16, seg: seg as u32 };
                self.queue.push(OutPkt { buf, mem: Some(data), tail: [0; 8], tail_len: 0, sealed: true, dst, src, burst: Some(shape) });
            }
            Err(e) => {
                counters.tx_errors.fetch_add(1, Relaxed);
                tracing::warn!(target: "softhca::tx", opcode = ?first.bth.opcode, "cannot build burst: {e}");
                self.recycle(buf);
            }
        }
    }

    /// Memory is being deregistered: drops the bursts still in the backlog (they keep
    /// their reference), as packets lost on the wire, and returns what the deregistration
    /// must wait for: the same-host peers that have not taken our records referring to
    /// our memory yet.
    pub fn deregistering(&mut self, counters: &Counters) -> Vec<super::link::RefMark> {
        let before = self.backlog.len();
        self.backlog.retain(|p| p.burst.is_none());
        let dropped = before - self.backlog.len();
        if dropped > 0 {
            counters.local_burst_dropped.fetch_add(dropped as u64, Relaxed);
        }
        self.peers.as_ref().map(Peers::ref_marks).unwrap_or_default()
    }

    /// Drops everything queued (a step that panicked half-way: its references into
    /// application memory must not outlive the engine lock).
    pub fn abandon(&mut self) {
        let q = std::mem::take(&mut self.queue);
        for p in q {
            self.recycle(p.buf);
        }
    }

    /// Applies faults and hands everything queued to the socket. Returns the datagrams
    /// sent. Nothing queued still refers to application memory afterwards.
    pub fn flush(&mut self, sock: &UdpSocket, counters: &Counters, capture: Option<&mut Capture>) -> usize {
        self.flush_at(sock, counters, capture, std::time::Instant::now())
    }

    /// [`Tx::flush`] at `now` (the step's clock reading: a flush reads no clock of its own).
    pub fn flush_at(&mut self, sock: &UdpSocket, counters: &Counters, mut capture: Option<&mut Capture>, now: std::time::Instant) -> usize {
        if self.queue.is_empty() && self.held.is_none() && self.backlog.is_empty() {
            return 0;
        }
        let mut wire = std::mem::take(&mut self.wire);
        let mut held = self.held.take();
        // The queue's vector goes back empty at the end, keeping its capacity: the next
        // step's packets need no allocation.
        let mut queue = std::mem::take(&mut self.queue);
        if self.peers.is_some() {
            let mut rest = std::mem::take(&mut self.rest);
            self.hand_to_peers(sock, &mut queue, &mut rest, counters, now);
            // `queue` (drained) becomes the next flush's `rest`.
            std::mem::swap(&mut queue, &mut rest);
            self.rest = rest;
        }
        for p in queue.drain(..) {
            let v = self.fault.as_mut().map_or(Verdict::Send, |f| f.verdict());
            match v {
                Verdict::Send => wire.push(p),
                Verdict::Drop => {
                    counters.fault_dropped.fetch_add(1, Relaxed);
                    tracing::trace!(target: "softhca::fault", dst = %p.dst, "drop");
                    self.recycle(p.buf);
                    continue;
                }
                Verdict::Duplicate => {
                    counters.fault_duplicated.fetch_add(1, Relaxed);
                    tracing::trace!(target: "softhca::fault", dst = %p.dst, "duplicate");
                    wire.push(p.duplicate());
                    wire.push(p);
                }
                Verdict::Reorder => {
                    counters.fault_reordered.fetch_add(1, Relaxed);
                    tracing::trace!(target: "softhca::fault", dst = %p.dst, "reorder");
                    match held.replace(p) {
                        Some(prev) => wire.push(prev),
                        None => continue,
                    }
                    continue;
                }
            }
            // A held-back packet goes right after the next one.
            if let Some(h) = held.take() {
                wire.push(h);
            }
        }
        // Held across this flush: it goes out at the next one (or now, with nothing after),
        // owning its payload (the engine lock is released in between).
        if let Some(mut h) = held {
            if wire.is_empty() {
                wire.push(h);
            } else {
                h.own();
                self.held = Some(h);
            }
        }
        for p in wire.iter_mut() {
            self.seal(p);
        }
        let sent = self.sendmmsg(sock, &wire, counters);
        if let Some(c) = capture.as_mut() {
            for p in &wire {
                c.packet(&Endpoints::new(SocketAddr::new(self.local.ip(), p.src), p.dst), &p.bytes());
            }
        }
        for p in wire.drain(..) {
            if self.pool.len() < POOL {
                self.pool.push(p.buf);
            }
        }
        self.wire = wire;
        self.queue = queue;
        sent
    }

    /// Whether packets wait for room in a same-host peer's lane (the engine comes back
    /// for them soon, see `datapath::step`).
    pub fn backlogged(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// Computes the ICRC a packet built for a same-host peer skipped (it goes over UDP).
    fn seal(&self, p: &mut OutPkt) {
        if p.sealed {
            return;
        }
        let pad = p.tail_len as usize - 4;
        let src = SocketAddr::new(self.local.ip(), p.src);
        let crc = Endpoints::new(src, p.dst).icrc_pieces(&[&p.buf, p.mem_bytes(), &[0u8; 3][..pad]]);
        p.tail[pad..pad + 4].copy_from_slice(&crc.to_le_bytes());
        p.sealed = true;
    }

    /// Hands the packets of `queue` for same-host peers to their inboxes and moves the
    /// others to `rest` (for the socket), in order. Peers that may be asleep get one zero-length
    /// datagram each. Allocates nothing in the common case (every packet goes
    /// into an inbox): the handed packets' buffers go straight back to the pool, and
    /// both vectors are the transmit side's own, reused.
    fn hand_to_peers(&mut self, sock: &UdpSocket, queue: &mut Vec<OutPkt>, rest: &mut Vec<OutPkt>, counters: &Counters, now: std::time::Instant) {
        let Tx { peers, pool, backlog: self_backlog, .. } = self;
        let Some(peers) = peers.as_mut() else { return };
        let pid = peers.pid();
        let forced = peers.wire() == Wire::Local;
        let mut recycle = |buf: Vec<u8>| {
            if pool.len() < POOL {
                pool.push(buf);
            }
        };
        let mut backlog = std::mem::take(self_backlog);
        // Peers with a packet back in the backlog this flush (a handful: a linear scan).
        let mut waiting: Vec<SocketAddr> = Vec::new();
        for mut p in backlog.drain(..).chain(queue.drain(..)) {
            // Order per peer: nothing overtakes a packet still waiting for room.
            if waiting.contains(&p.dst) {
                if self_backlog.len() < BACKLOG {
                    // A burst keeps its reference: application memory, which stays put
                    // until the run is acknowledged (only the peer reads it).
                    if p.burst.is_none() {
                        p.own();
                    }
                    self_backlog.push_back(p);
                } else {
                    counters.local_tx_full.fetch_add(1, Relaxed);
                    recycle(p.buf);
                }
                continue;
            }
            let route = peers.route(p.dst, now);
            if let Some(b) = p.burst {
                let m = p.mem.expect("a burst's payload");
                let r = match route {
                    Some(true) => peers.push_burst(p.dst, &p.buf, b.split, b.count, b.seg, RemoteRef { pid, addr: m.addr, len: m.len }),
                    _ => Pushed::NoPath,
                };
                match r {
                    Pushed::Done => {
                        step_add(&counters.local_tx_packets, b.count as u64);
                        step_add(&counters.local_bursts, 1);
                        step_add(&counters.local_tx_ref_bytes, m.len as u64);
                        recycle(p.buf);
                    }
                    Pushed::Full if self_backlog.len() < BACKLOG => {
                        waiting.push(p.dst);
                        self_backlog.push_back(p);
                    }
                    _ => {
                        // Lost, as on a wire: the requester's timer sends it again.
                        counters.local_burst_dropped.fetch_add(1, Relaxed);
                        tracing::debug!(target: "softhca::link", dst = %p.dst, count = b.count, "burst without a same-host path: dropped");
                        recycle(p.buf);
                    }
                }
                continue;
            }
            let Some(refs) = route else {
                if forced {
                    counters.tx_errors.fetch_add(1, Relaxed);
                    tracing::warn!(target: "softhca::link", dst = %p.dst, "{}=local and no same-host path to the peer: dropped", super::link::WIRE_ENV);
                    recycle(p.buf);
                } else {
                    rest.push(p);
                }
                continue;
            };
            let r = match p.mem {
                Some(m) if m.app && refs && m.len > INLINE_MAX => {
                    let r = peers.push(p.dst, &[&p.buf], Some(RemoteRef { pid, addr: m.addr, len: m.len }));
                    if r == Pushed::Done {
                        step_add(&counters.local_tx_ref_bytes, m.len as u64);
                    }
                    r
                }
                _ => {
                    let r = peers.push(p.dst, &[&p.buf, p.mem_bytes(), &p.tail[..p.tail_len as usize]], None);
                    if r == Pushed::Done {
                        step_add(&counters.local_tx_inline_bytes, p.wire_len() as u64);
                    }
                    r
                }
            };
            match r {
                Pushed::Done => {
                    step_add(&counters.local_tx_packets, 1);
                    recycle(p.buf);
                }
                Pushed::Full if self_backlog.len() < BACKLOG => {
                    waiting.push(p.dst);
                    p.own();
                    self_backlog.push_back(p);
                }
                Pushed::Full => {
                    counters.local_tx_full.fetch_add(1, Relaxed);
                    recycle(p.buf);
                }
                Pushed::NoPath => rest.push(p),
            }
        }
        for dst in peers.to_wake() {
            let (ss, len) = to_sockaddr(&dst);
            // SAFETY: a zero-length datagram to a live socket address in C form.
            unsafe { libc::sendto(sock.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::addr_of!(ss).cast(), len) };
            counters.local_wakes.fetch_add(1, Relaxed);
        }
    }

    /// Groups `pkts` into `sendmmsg` entries: runs of equal-length packets from one source
    /// port to one loopback destination become one segmented entry (see the module docs).
    fn group(&mut self, pkts: &[OutPkt]) {
        self.groups.clear();
        let mut i = 0;
        while i < pkts.len() {
            let p = &pkts[i];
            let seg = p.wire_len();
            let mut n = 1;
            if self.gso && is_loopback(&p.dst) {
                let mut total = seg;
                while i + n < pkts.len() && n < GSO_MAX_SEGS {
                    let q = &pkts[i + n];
                    let l = q.wire_len();
                    if q.dst != p.dst || q.src != p.src || l > seg || l == 0 || total + l > GSO_MAX_BYTES {
                        break;
                    }
                    total += l;
                    n += 1;
                    if l < seg {
                        break; // only the last segment may be shorter
                    }
                }
            }
            self.groups.push((i, n, seg));
            i += n;
        }
    }

    /// Sends `pkts` in `sendmmsg` batches, each a run of entries from one source port
    /// through that port's socket; a datagram the kernel refuses is counted and skipped
    /// (the transport retransmits). Returns how many went out.
    fn sendmmsg(&mut self, sock: &UdpSocket, pkts: &[OutPkt], counters: &Counters) -> usize {
        self.group(pkts);
        let mut sent = 0;
        let mut g = 0;
        while g < self.groups.len() {
            let src = pkts[self.groups[g].0].src;
            let mut end = g + 1;
            while end < self.groups.len() && end - g < BATCH && pkts[self.groups[end].0].src == src {
                end += 1;
            }
            let fd = self.ports.fd(src).unwrap_or(sock.as_raw_fd());
            let chunk = g..end;
            let ng = chunk.len();
            // Arguments for this batch; every vector is sized first, so the pointers taken
            // below stay valid until the call returns.
            let npkts: usize = self.groups[chunk.clone()].iter().map(|&(_, n, _)| n).sum();
            self.iovs.clear();
            self.iovs.reserve(npkts * 3);
            self.addrs.clear();
            self.cmsgs.clear();
            self.cmsgs.resize(ng, [0; 4]);
            self.hdrs.clear();
            let mut iov_at = Vec::with_capacity(ng);
            for &(first, n, _) in &self.groups[chunk.clone()] {
                iov_at.push(self.iovs.len());
                for p in &pkts[first..first + n] {
                    self.iovs.push(libc::iovec { iov_base: p.buf.as_ptr() as *mut libc::c_void, iov_len: p.buf.len() });
                    if let Some(m) = p.mem {
                        self.iovs.push(libc::iovec { iov_base: m.addr as *mut libc::c_void, iov_len: m.len });
                    }
                    if p.tail_len > 0 {
                        self.iovs.push(libc::iovec { iov_base: p.tail.as_ptr() as *mut libc::c_void, iov_len: p.tail_len as usize });
                    }
                }
                self.addrs.push(to_sockaddr(&pkts[first].dst));
            }
            for (k, &(_, n, seg)) in self.groups[chunk.clone()].iter().enumerate() {
                let end = iov_at.get(k + 1).copied().unwrap_or(self.iovs.len());
                // SAFETY: msghdr is plain old data; zero is a valid starting value.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_name = std::ptr::addr_of_mut!(self.addrs[k].0).cast();
                h.msg_namelen = self.addrs[k].1;
                h.msg_iov = std::ptr::addr_of_mut!(self.iovs[iov_at[k]]);
                h.msg_iovlen = end - iov_at[k];
                if n > 1 {
                    let buf = std::ptr::addr_of_mut!(self.cmsgs[k]).cast::<libc::c_void>();
                    h.msg_control = buf;
                    // SAFETY: CMSG_SPACE only computes a size.
                    h.msg_controllen = unsafe { libc::CMSG_SPACE(std::mem::size_of::<u16>() as u32) } as usize;
                    // SAFETY: `buf` is 32 bytes, aligned to 8, at least CMSG_SPACE(2) (24);
                    // CMSG_FIRSTHDR/CMSG_DATA point inside it for a msghdr describing it.
                    unsafe {
                        let c = libc::CMSG_FIRSTHDR(&h);
                        (*c).cmsg_level = SOL_UDP;
                        (*c).cmsg_type = UDP_SEGMENT;
                        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<u16>() as u32) as usize;
                        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), seg as u16);
                    }
                }
                self.hdrs.push(libc::mmsghdr { msg_hdr: h, msg_len: 0 });
            }
            // SAFETY: `hdrs` points at `addrs`, `iovs` and `cmsgs`, which point at buffers
            // owned by `pkts` or, for `mem` pieces, at registered memory checked under the
            // engine lock our caller holds; all outlive the call, and the kernel only reads.
            let r = unsafe { libc::sendmmsg(fd, self.hdrs.as_mut_ptr(), ng as libc::c_uint, libc::MSG_DONTWAIT) };
            if r <= 0 {
                let e = std::io::Error::last_os_error();
                let (first, n, _) = self.groups[g];
                if n > 1 && e.raw_os_error() != Some(libc::EAGAIN) && e.raw_os_error() != Some(libc::ENOBUFS) {
                    // Segmentation refused (an old kernel, or a route that cannot): send
                    // these one by one from now on.
                    tracing::debug!(target: "softhca::tx", dst = %pkts[first].dst, "UDP_SEGMENT: {e}; segmentation off");
                    self.gso = false;
                    let rest: Vec<(usize, usize, usize)> = self.groups[g..].to_vec();
                    self.groups.truncate(g);
                    for (f, n, _) in rest {
                        for (i, p) in pkts.iter().enumerate().skip(f).take(n) {
                            self.groups.push((i, 1, p.wire_len()));
                        }
                    }
                    continue;
                }
                counters.tx_errors.fetch_add(n as u64, Relaxed);
                tracing::debug!(target: "softhca::tx", dst = %pkts[first].dst, "sendmmsg: {e}");
                g += 1;
                continue;
            }
            for &(first, n, _) in &self.groups[g..g + r as usize] {
                let bytes: usize = pkts[first..first + n].iter().map(|p| p.wire_len()).sum();
                step_add(&counters.tx_bytes, bytes as u64);
                step_add(&counters.tx_packets, n as u64);
                step_add(&counters.tx_datagrams, 1);
                sent += n;
            }
            g += r as usize;
        }
        sent
    }
}
