//! Receiving: `recvmmsg` batches from the instance's UDP socket, without blocking (the
//! engine blocks in `ppoll` when idle, so an arriving packet wakes it at once).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

/// Datagrams per `recvmmsg` call.
pub const BATCH: usize = 32;
/// Receive buffer per datagram: a 4096-byte MTU packet with every header fits, with room
/// for jumbo frames; longer datagrams are truncated and dropped.
pub const BUF: usize = 9216;

/// The receive side of one instance.
pub struct Rx {
    bufs: Vec<Box<[u8]>>,
    addrs: Vec<libc::sockaddr_storage>,
    lens: Vec<usize>,
    flags: Vec<i32>,
    n: usize,
    /// Reused `recvmmsg` arguments (their pointers are refreshed on every call).
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

// SAFETY: the raw pointers inside `iovs`/`hdrs` only ever point into this value's own
// buffers and are rewritten before each use; nothing else aliases them.
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
            n: 0,
            iovs: Vec::with_capacity(BATCH),
            hdrs: Vec::with_capacity(BATCH),
        }
    }

    /// Receives what is queued, up to one batch, without blocking. Returns the count.
    pub fn recv(&mut self, sock: &UdpSocket) -> usize {
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
            self.hdrs.push(libc::mmsghdr { msg_hdr: h, msg_len: 0 });
        }
        // SAFETY: every header points at an iovec over one of our buffers and at one of our
        // address slots, all alive and exclusively ours for the duration of the call.
        let n = unsafe {
            libc::recvmmsg(sock.as_raw_fd(), self.hdrs.as_mut_ptr(), BATCH as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut())
        };
        if n <= 0 {
            self.n = 0;
            return 0;
        }
        let n = n as usize;
        for (i, h) in self.hdrs.iter().enumerate().take(n) {
            self.lens[i] = h.msg_len as usize;
            self.flags[i] = h.msg_hdr.msg_flags;
        }
        self.n = n;
        n
    }

    /// Datagram `i` of the last batch and its sender (None if it was truncated).
    pub fn get(&self, i: usize) -> Option<(&[u8], SocketAddr)> {
        if i >= self.n || self.flags[i] & libc::MSG_TRUNC != 0 {
            return None;
        }
        let src = from_sockaddr(&self.addrs[i])?;
        Some((&self.bufs[i][..self.lens[i].min(BUF)], src))
    }
}
