//! Transmitting: packets are built into pooled buffers during an engine step and leave
//! together in `sendmmsg` batches on the instance's unconnected UDP socket (`sendto`
//! semantics: each datagram names its destination, which keeps the IPv4 identification
//! at 0 as the ICRC assumes; see `crate::wire::icrc`). Fault injection and capture happen
//! here, on the way out.

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering::Relaxed;

use crate::wire::{Endpoints, RocePacket};

use super::counters::Counters;
use super::fault::{Injector, Verdict};
use super::trace::Capture;

/// Datagrams per `sendmmsg` call.
const BATCH: usize = 64;
/// Buffers kept for reuse.
const POOL: usize = 256;

/// One built packet.
#[derive(Debug)]
pub struct OutPkt {
    pub buf: Vec<u8>,
    pub dst: SocketAddr,
}

/// The transmit side of one instance.
#[derive(Debug)]
pub struct Tx {
    local: SocketAddr,
    queue: Vec<OutPkt>,
    wire: Vec<OutPkt>,
    pool: Vec<Vec<u8>>,
    held: Option<OutPkt>,
    fault: Option<Injector>,
}

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

impl Tx {
    pub fn new(local: SocketAddr, fault: Option<Injector>) -> Tx {
        Tx { local, queue: Vec::new(), wire: Vec::new(), pool: Vec::new(), held: None, fault }
    }

    /// Packets built and not yet flushed.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Builds `pkt` (headers, payload, pad, ICRC for the flow to `dst`) into a buffer and
    /// queues it. A packet that cannot be built is counted and dropped.
    pub fn send(&mut self, pkt: &RocePacket<'_>, dst: SocketAddr, counters: &Counters) {
        let mut buf = self.pool.pop().unwrap_or_default();
        // `emit` writes every byte, so a reused buffer needs no zeroing.
        let n = pkt.buffer_len();
        if buf.len() < n {
            buf.resize(n, 0);
        }
        buf.truncate(n);
        let ep = Endpoints::new(self.local, dst);
        match pkt.emit(&mut buf, &ep) {
            Ok(n) => {
                buf.truncate(n);
                tracing::trace!(target: "softhca::tx", opcode = ?pkt.bth.opcode, qpn = pkt.bth.dest_qpn, psn = pkt.bth.psn,
                                len = pkt.payload.len(), ack_req = pkt.bth.ack_req, %dst, "tx");
                self.queue.push(OutPkt { buf, dst });
            }
            Err(e) => {
                counters.tx_errors.fetch_add(1, Relaxed);
                tracing::warn!(target: "softhca::tx", opcode = ?pkt.bth.opcode, "cannot build packet: {e}");
                self.recycle(buf);
            }
        }
    }

    fn recycle(&mut self, buf: Vec<u8>) {
        if self.pool.len() < POOL {
            self.pool.push(buf);
        }
    }

    /// Applies faults and hands everything queued to the socket. Returns the datagrams
    /// sent.
    pub fn flush(&mut self, sock: &UdpSocket, counters: &Counters, mut capture: Option<&mut Capture>) -> usize {
        if self.queue.is_empty() && self.held.is_none() {
            return 0;
        }
        let mut wire = std::mem::take(&mut self.wire);
        let mut held = self.held.take();
        for p in self.queue.drain(..) {
            let v = self.fault.as_mut().map_or(Verdict::Send, |f| f.verdict());
            match v {
                Verdict::Send => wire.push(p),
                Verdict::Drop => {
                    counters.fault_dropped.fetch_add(1, Relaxed);
                    tracing::trace!(target: "softhca::fault", dst = %p.dst, "drop");
                    if self.pool.len() < POOL {
                        self.pool.push(p.buf);
                    }
                    continue;
                }
                Verdict::Duplicate => {
                    counters.fault_duplicated.fetch_add(1, Relaxed);
                    tracing::trace!(target: "softhca::fault", dst = %p.dst, "duplicate");
                    wire.push(OutPkt { buf: p.buf.clone(), dst: p.dst });
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
        // Held across this flush: it goes out at the next one (or now, with nothing after).
        if let Some(h) = held {
            if wire.is_empty() {
                wire.push(h);
            } else {
                self.held = Some(h);
            }
        }
        let sent = self.sendmmsg(sock, &wire, counters);
        if let Some(c) = capture.as_mut() {
            for p in &wire {
                c.packet(&Endpoints::new(self.local, p.dst), &p.buf);
            }
        }
        for p in wire.drain(..) {
            if self.pool.len() < POOL {
                self.pool.push(p.buf);
            }
        }
        self.wire = wire;
        sent
    }

    /// Sends `pkts` in `sendmmsg` batches; a datagram the kernel refuses is counted and
    /// skipped (the transport retransmits). Returns how many went out.
    fn sendmmsg(&self, sock: &UdpSocket, pkts: &[OutPkt], counters: &Counters) -> usize {
        let fd = sock.as_raw_fd();
        let mut sent = 0;
        let mut at = 0;
        while at < pkts.len() {
            let chunk = &pkts[at..(at + BATCH).min(pkts.len())];
            let mut addrs: Vec<(libc::sockaddr_storage, libc::socklen_t)> = chunk.iter().map(|p| to_sockaddr(&p.dst)).collect();
            let mut iovs: Vec<libc::iovec> = chunk
                .iter()
                .map(|p| libc::iovec { iov_base: p.buf.as_ptr() as *mut libc::c_void, iov_len: p.buf.len() })
                .collect();
            let mut hdrs: Vec<libc::mmsghdr> = (0..chunk.len())
                .map(|i| {
                    // SAFETY: msghdr is plain old data; zero is a valid starting value.
                    let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                    h.msg_name = std::ptr::addr_of_mut!(addrs[i].0).cast();
                    h.msg_namelen = addrs[i].1;
                    h.msg_iov = std::ptr::addr_of_mut!(iovs[i]);
                    h.msg_iovlen = 1;
                    libc::mmsghdr { msg_hdr: h, msg_len: 0 }
                })
                .collect();
            // SAFETY: `hdrs` points at `addrs` and `iovs`, which point at buffers owned by
            // `pkts`; all outlive the call, and the kernel only reads them.
            let n = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), hdrs.len() as libc::c_uint, libc::MSG_DONTWAIT) };
            if n <= 0 {
                let e = std::io::Error::last_os_error();
                counters.tx_errors.fetch_add(1, Relaxed);
                tracing::debug!(target: "softhca::tx", dst = %chunk[0].dst, "sendmmsg: {e}");
                at += 1;
                continue;
            }
            let n = n as usize;
            for p in &chunk[..n] {
                counters.tx_bytes.fetch_add(p.buf.len() as u64, Relaxed);
            }
            counters.tx_packets.fetch_add(n as u64, Relaxed);
            sent += n;
            at += n;
        }
        sent
    }
}
