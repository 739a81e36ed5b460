//! Receiving: `recvmmsg` batches from the instance's UDP socket, without blocking (the
//! engine blocks in `ppoll` when idle, so an arriving packet wakes it at once).
//!
//! With `UDP_GRO` on the socket (see `super::tx`: loopback peers send runs of equal-size
//! packets as one segmented datagram), one received message may hold several RoCEv2
//! packets of `gso_size` bytes each (the last one possibly shorter); the kernel says so
//! in a `UDP_GRO` control message. [`Rx::get`] hands out each message with its segment
//! size, and the engine walks the segments.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

use super::tx::{SOL_UDP, UDP_GRO};

/// Messages per `recvmmsg` call.
pub const BATCH: usize = 16;
/// Receive buffer per message: a coalesced run of packets (at most 64 KiB), or one packet
/// (a 4096-byte MTU packet with every header fits many times over).
pub const BUF: usize = 65536;
/// Control buffer per message (one `UDP_GRO` int, room to spare).
const CMSG_BUF: usize = 64;

/// The receive side of one instance.
pub struct Rx {
    bufs: Vec<Box<[u8]>>,
    addrs: Vec<libc::sockaddr_storage>,
    lens: Vec<usize>,
    flags: Vec<i32>,
    /// Segment size of each message (its length when it is one packet).
    segs: Vec<usize>,
    ctrl: Vec<[u64; CMSG_BUF / 8]>,
    n: usize,
    /// Reused `recvmmsg` arguments, built once (see [`Rx::recv`]).
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside `iovs`/`hdrs` only ever point into this value's own
// heap buffers (which never move or resize once built); nothing else aliases them.
unsafe impl Send for Rx {}

impl std::fmt::Debug for Rx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rx").field("n", &self.n).finish()
    }
}

/// A C socket address as a Rust one.
pub fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let sin = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), sin6.sin6_flowinfo, sin6.sin6_scope_id)))
        }
        _ => None,
    }
}

/// Asks the kernel to hand over coalesced runs of packets (`UDP_GRO`). Returns whether it
/// accepted.
pub fn enable_gro(sock: &UdpSocket) -> bool {
    let one: libc::c_int = 1;
    // SAFETY: setsockopt on a live socket with a pointer to a c_int and its size.
    unsafe {
        libc::setsockopt(sock.as_raw_fd(), SOL_UDP, UDP_GRO, (&one as *const libc::c_int).cast(),
                         std::mem::size_of::<libc::c_int>() as libc::socklen_t) == 0
    }
}

impl Default for Rx {
    fn default() -> Rx {
        Rx::new()
    }
}

impl Rx {
    pub fn new() -> Rx {
        Rx {
            bufs: (0..BATCH).map(|_| vec![0u8; BUF].into_boxed_slice()).collect(),
            // SAFETY: sockaddr_storage is plain old data; zero is valid.
            addrs: (0..BATCH).map(|_| unsafe { std::mem::zeroed() }).collect(),
            lens: vec![0; BATCH],
            flags: vec![0; BATCH],
            segs: vec![0; BATCH],
            ctrl: vec![[0; CMSG_BUF / 8]; BATCH],
            n: 0,
            iovs: Vec::with_capacity(BATCH),
            hdrs: Vec::with_capacity(BATCH),
        }
    }

    /// Receives what is queued, up to one batch, without blocking. Returns the count of
    /// messages.
    ///
    /// The `recvmmsg` arguments are built on the first call and afterwards only have the
    /// fields the kernel overwrites reset: in polled mode most calls find nothing (the
    /// application polls while it waits), so the call's own cost matters.
    pub fn recv(&mut self, sock: &UdpSocket) -> usize {
        if self.hdrs.len() != BATCH {
            self.build_hdrs();
        }
        for h in self.hdrs.iter_mut() {
            h.msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_hdr.msg_controllen = CMSG_BUF;
            h.msg_hdr.msg_flags = 0;
            h.msg_len = 0;
        }
        // SAFETY: every header points at an iovec over one of our buffers, at one of our
        // address slots and at one of our control buffers (heap allocations owned by this
        // value that never move or resize after `build_hdrs`), all alive and exclusively
        // ours for the duration of the call.
        let n = unsafe {
            libc::recvmmsg(sock.as_raw_fd(), self.hdrs.as_mut_ptr(), BATCH as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if n <= 0 {
            self.n = 0;
            return 0;
        }
        let n = n as usize;
        for i in 0..n {
            let h = &self.hdrs[i];
            let len = h.msg_len as usize;
            self.lens[i] = len;
            self.flags[i] = h.msg_hdr.msg_flags;
            self.segs[i] = gro_size(&h.msg_hdr).filter(|&s| s > 0).unwrap_or(len);
        }
        self.n = n;
        n
    }

    /// Points one `recvmmsg` header per message at its buffer, address slot and control
    /// buffer (all heap allocations of fixed size: the pointers stay valid when the `Rx`
    /// itself moves).
    fn build_hdrs(&mut self) {
        self.iovs.clear();
        for b in self.bufs.iter_mut() {
            self.iovs.push(libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() });
        }
        self.hdrs.clear();
        for i in 0..BATCH {
            // SAFETY: msghdr is plain old data; zero is a valid starting value.
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_name = std::ptr::addr_of_mut!(self.addrs[i]).cast();
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = std::ptr::addr_of_mut!(self.iovs[i]);
            h.msg_iovlen = 1;
            h.msg_control = std::ptr::addr_of_mut!(self.ctrl[i]).cast();
            h.msg_controllen = CMSG_BUF;
            self.hdrs.push(libc::mmsghdr { msg_hdr: h, msg_len: 0 });
        }
    }

    /// Message `i` of the last batch, its segment size and its sender (None if it was
    /// truncated or has no usable sender): the packets are its `chunks(segment size)`.
    pub fn get(&self, i: usize) -> Option<(&[u8], usize, SocketAddr)> {
        if i >= self.n || self.flags[i] & libc::MSG_TRUNC != 0 {
            return None;
        }
        let src = from_sockaddr(&self.addrs[i])?;
        let len = self.lens[i].min(BUF);
        Some((&self.bufs[i][..len], self.segs[i].max(1), src))
    }
}

/// The segment size a `UDP_GRO` control message reports, if any.
fn gro_size(h: &libc::msghdr) -> Option<usize> {
    if h.msg_control.is_null() || h.msg_controllen == 0 {
        return None;
    }
    // SAFETY: `h` describes a control buffer the kernel filled (msg_controllen says how
    // much); CMSG_FIRSTHDR/CMSG_NXTHDR stay inside it and return null at its end, and the
    // int is read unaligned from inside the message the header describes.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == SOL_UDP && (*c).cmsg_type == UDP_GRO
                && (*c).cmsg_len >= libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(v).ok();
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    None
}
