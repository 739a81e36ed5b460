//! Connection setup: listen, connect and accept, none of which blocks.
//!
//! listen binds a TCP socket on the device's own address (the IPv4 address in its
//! RoCE GID: for softhca `127.0.0.N`, the instance's "host") and puts that address in
//! the handle. connect and accept then trade [`ConnInfo`] over it (the sender's first:
//! QPN, PSN, GID, MTU and the address and rkey of its FIFO; then the receiver's), move
//! their QPs to RTS, and the sender sends one byte to say its QP is ready for the
//! receiver's first FIFO write. Each call does what it can without waiting and
//! returns a NULL comm until the exchange is complete, as NCCL requires; the state of
//! a connect in progress lives in the handle's bytes [`STAGE_OFFSET`]`..+8` (NCCL
//! passes the same handle again), that of an accept in the listen comm.

use std::io::{ErrorKind, Read};
use std::net::{IpAddr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use crate::comm::{system, usage, Fail, Region, RecvComm, Res, SendComm};
use crate::device::Dev;
use crate::link::{ConnInfo, Link, CONN_INFO_LEN};
use crate::live::Live;

/// The handle's magic ("dbnh").
pub const HANDLE_MAGIC: u32 = 0x6462_6e68;
/// Where a connect in progress keeps its state pointer inside the handle.
pub const STAGE_OFFSET: usize = 64;
/// The byte the sender sends when its QP is ready.
const READY: u8 = 0x5a;

/// The listener's address, read from a handle.
pub fn handle_addr(h: &[u8; crate::sys::NCCL_NET_HANDLE_MAXSIZE]) -> Res<SocketAddr> {
    let magic = u32::from_le_bytes(h[0..4].try_into().unwrap());
    if magic != HANDLE_MAGIC {
        return Err(usage(format!("connect with a handle whose magic is {magic:#x}, not doorbell's {HANDLE_MAGIC:#x} (a handle from another plugin?)")));
    }
    let port = u16::from_le_bytes(h[6..8].try_into().unwrap());
    let ip6 = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).unwrap());
    let ip = match h[4] {
        4 => IpAddr::V4(ip6.to_ipv4_mapped().unwrap_or(std::net::Ipv4Addr::UNSPECIFIED)),
        _ => IpAddr::V6(ip6),
    };
    Ok(SocketAddr::new(ip, port))
}

fn write_handle(h: &mut [u8; crate::sys::NCCL_NET_HANDLE_MAXSIZE], a: SocketAddr) {
    h.fill(0);
    h[0..4].copy_from_slice(&HANDLE_MAGIC.to_le_bytes());
    let (fam, ip) = match a.ip() {
        IpAddr::V4(v) => (4u8, v.to_ipv6_mapped()),
        IpAddr::V6(v) => (6u8, v),
    };
    h[4] = fam;
    h[6..8].copy_from_slice(&a.port().to_le_bytes());
    h[8..24].copy_from_slice(&ip.octets());
}

/// The address a device's peers reach it at: the IPv4 (or IPv6) address in its GID.
fn dev_ip(dev: &Dev) -> IpAddr {
    let v6 = Ipv6Addr::from(dev.gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// Writes what is left of `buf` from `*sent`; true when all of it is out.
fn push(s: &mut TcpStream, buf: &[u8], sent: &mut usize) -> Res<bool> {
    while *sent < buf.len() {
        match send_nosignal(s, &buf[*sent..]) {
            Ok(0) => return Err(remote_gone("write")),
            Ok(n) => *sent += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(system(format!("connection setup: send to the peer: {e}"))),
        }
    }
    Ok(true)
}

/// `send(MSG_NOSIGNAL)`: a peer that went away gives EPIPE, not the SIGPIPE that
/// would kill a host program which, unlike Python, does not ignore it.
pub fn send_nosignal(s: &TcpStream, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: a valid socket and buffer.
    let r = unsafe { libc::send(s.as_raw_fd(), buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// Reads into what is left of `buf` from `*got`; true when it is full.
fn pull(s: &mut TcpStream, buf: &mut [u8], got: &mut usize) -> Res<bool> {
    while *got < buf.len() {
        match s.read(&mut buf[*got..]) {
            Ok(0) => return Err(remote_gone("read")),
            Ok(n) => *got += n,
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => return Ok(false),
            Err(e) => return Err(system(format!("connection setup: receive from the peer: {e}"))),
        }
    }
    Ok(true)
}

fn remote_gone(what: &str) -> Fail {
    crate::warn!("connection setup: the peer closed the socket ({what})");
    Fail(crate::sys::NCCL_REMOTE_ERROR)
}

/// A listening comm.
pub struct ListenComm {
    pub dev: usize,
    listener: TcpListener,
    accept: Mutex<Option<Accepting>>,
}

struct Accepting {
    stream: TcpStream,
    peer_info: [u8; CONN_INFO_LEN],
    got: usize,
    /// After the peer's info: our QP (connected), our info, and the wait for READY.
    built: Option<(Link, Region, ConnInfo, [u8; CONN_INFO_LEN])>,
    sent: usize,
    ready: [u8; 1],
    ready_got: usize,
}

/// listen: a listening socket on the device's address, written into `handle`.
pub fn listen(devi: usize, dev: &Dev, handle: &mut [u8; crate::sys::NCCL_NET_HANDLE_MAXSIZE]) -> Res<ListenComm> {
    let ip = dev_ip(dev);
    let listener = TcpListener::bind(SocketAddr::new(ip, 0))
        .map_err(|e| system(format!("listen on {ip} (the address in {}'s GID): {e}", dev.name.to_string_lossy())))?;
    listener.set_nonblocking(true).map_err(|e| system(format!("listen: {e}")))?;
    let a = listener.local_addr().map_err(|e| system(format!("listen: {e}")))?;
    write_handle(handle, a);
    crate::info!("listening on {a} for {}", dev.name.to_string_lossy());
    Ok(ListenComm { dev: devi, listener, accept: Mutex::new(None) })
}

impl ListenComm {
    /// accept: `Ok(None)` until a sender has connected and the QPs are set up.
    pub fn accept(&self, dev: &'static Dev) -> Res<Option<RecvComm>> {
        let mut g = self.accept.lock().unwrap();
        if g.is_none() {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    stream.set_nonblocking(true).map_err(|e| system(format!("accept: {e}")))?;
                    let _ = stream.set_nodelay(true);
                    *g = Some(Accepting { stream, peer_info: [0; CONN_INFO_LEN], got: 0, built: None, sent: 0, ready: [0], ready_got: 0 });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => return Ok(None),
                Err(e) => return Err(system(format!("accept: {e}"))),
            }
        }
        let a = g.as_mut().unwrap();
        let r = step_accept(a, dev);
        match r {
            Ok(Some(())) => {
                let a = g.take().unwrap();
                let (link, local, _, _) = a.built.unwrap();
                let peer = ConnInfo::decode(&a.peer_info).map_err(usage)?;
                let mut link = link;
                link.stream = a.stream;
                Ok(Some(RecvComm::new(link, local, (peer.fifo_addr, peer.fifo_rkey))))
            }
            Ok(None) => Ok(None),
            Err(e) => {
                *g = None;
                Err(e)
            }
        }
    }
}

fn step_accept(a: &mut Accepting, dev: &'static Dev) -> Res<Option<()>> {
    if a.built.is_none() {
        if !pull(&mut a.stream, &mut a.peer_info, &mut a.got)? {
            return Ok(None);
        }
        let peer = ConnInfo::decode(&a.peer_info).map_err(|e| usage(format!("accept: {e}")))?;
        let s2 = a.stream.try_clone().map_err(|e| system(format!("accept: {e}")))?;
        let mut link = Link::new(dev, s2, true).map_err(|e| system(format!("accept: {e}")))?;
        let local = Region::new(&link, RecvComm::LOCAL_LEN)?;
        link.connect(&peer).map_err(|e| system(format!("accept: {e}")))?;
        let mine = link.info(0, 0);
        a.built = Some((link, local, mine, mine.encode()));
    }
    let (_, _, _, out) = a.built.as_ref().unwrap();
    let out = *out;
    if !push(&mut a.stream, &out, &mut a.sent)? {
        return Ok(None);
    }
    if !pull(&mut a.stream, &mut a.ready, &mut a.ready_got)? {
        return Ok(None);
    }
    if a.ready[0] != READY {
        return Err(usage(format!("accept: the sender answered {:#x} instead of its ready byte", a.ready[0])));
    }
    Ok(Some(()))
}

/// A connect in progress (pointed at from the handle).
pub struct Connecting {
    state: Mutex<ConnectState>,
}

// One per connect in progress, so the size difference costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
enum ConnectState {
    /// The TCP connect was started.
    Tcp(Option<TcpStream>),
    /// Our info goes out, the receiver's comes in, then READY goes out.
    Exchange { link: Option<Link>, fifo: Option<Region>, out: [u8; CONN_INFO_LEN], sent: usize, peer: [u8; CONN_INFO_LEN], got: usize, connected: bool, ready_sent: usize },
}

/// The live connects in progress (their addresses sit in NCCL's handle bytes).
pub static CONNECTING: Live<Connecting> = Live::new();

/// Starts a connect to the listener at `addr`.
pub fn start_connect(addr: SocketAddr) -> Res<Connecting> {
    use nix::sys::socket::{connect, socket, AddressFamily, SockFlag, SockType, SockaddrStorage};
    let fam = if addr.is_ipv4() { AddressFamily::Inet } else { AddressFamily::Inet6 };
    let fd: OwnedFd = socket(fam, SockType::Stream, SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC, None)
        .map_err(|e| system(format!("connect: socket: {e}")))?;
    match connect(fd.as_raw_fd(), &SockaddrStorage::from(addr)) {
        Ok(()) | Err(nix::errno::Errno::EINPROGRESS) | Err(nix::errno::Errno::EINTR) => {}
        Err(e) => return Err(system(format!("connect to {addr}: {e}"))),
    }
    let stream = TcpStream::from(fd);
    Ok(Connecting { state: Mutex::new(ConnectState::Tcp(Some(stream))) })
}

impl Connecting {
    /// One step; `Some(comm)` when connected.
    pub fn step(&self, dev: &'static Dev) -> Res<Option<SendComm>> {
        let mut g = self.state.lock().unwrap();
        if let ConnectState::Tcp(s) = &mut *g {
            let stream = s.as_ref().unwrap();
            let mut p = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            // SAFETY: one valid pollfd, no wait.
            let r = unsafe { libc::poll(&mut p, 1, 0) };
            if r <= 0 {
                return Ok(None);
            }
            let err = nix::sys::socket::getsockopt(stream, nix::sys::socket::sockopt::SocketError).unwrap_or(0);
            if err != 0 {
                let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                return Err(system(format!("connect to the listener{peer}: {}", std::io::Error::from_raw_os_error(err))));
            }
            let stream = s.take().unwrap();
            let _ = stream.set_nodelay(true);
            let link = Link::new(dev, stream, false).map_err(|e| system(format!("connect: {e}")))?;
            let fifo = Region::new(&link, SendComm::FIFO_LEN)?;
            let out = link.info(fifo.mr().addr(), fifo.mr().rkey()).encode();
            *g = ConnectState::Exchange { link: Some(link), fifo: Some(fifo), out, sent: 0, peer: [0; CONN_INFO_LEN], got: 0, connected: false, ready_sent: 0 };
        }
        let ConnectState::Exchange { link, fifo, out, sent, peer, got, connected, ready_sent } = &mut *g else { unreachable!() };
        let l = link.as_mut().unwrap();
        if !push(&mut l.stream, out, sent)? {
            return Ok(None);
        }
        if !pull(&mut l.stream, peer, got)? {
            return Ok(None);
        }
        if !*connected {
            let info = ConnInfo::decode(peer).map_err(|e| usage(format!("connect: {e}")))?;
            l.connect(&info).map_err(|e| system(format!("connect: {e}")))?;
            *connected = true;
        }
        if !push(&mut l.stream, &[READY], ready_sent)? {
            return Ok(None);
        }
        Ok(Some(SendComm::new(link.take().unwrap(), fifo.take().unwrap())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trip_and_layout() {
        let mut h = [0xffu8; crate::sys::NCCL_NET_HANDLE_MAXSIZE];
        let a: SocketAddr = "127.0.0.2:4242".parse().unwrap();
        write_handle(&mut h, a);
        assert_eq!(handle_addr(&h).unwrap(), a);
        // Layout (this module's doc): magic, family 4, port LE at 6, the IPv4-mapped
        // address at 8..24, and a zero stage pointer for the connecting side.
        assert_eq!(&h[0..4], &HANDLE_MAGIC.to_le_bytes());
        assert_eq!(h[4], 4);
        assert_eq!(&h[6..8], &4242u16.to_le_bytes());
        assert_eq!(&h[8..24], &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 2]);
        assert!(h[STAGE_OFFSET..STAGE_OFFSET + 8].iter().all(|&b| b == 0));
        let v6: SocketAddr = "[fe80::1]:7".parse().unwrap();
        write_handle(&mut h, v6);
        assert_eq!(handle_addr(&h).unwrap(), v6);
    }

    #[test]
    fn foreign_handle_is_refused() {
        let h = [0u8; crate::sys::NCCL_NET_HANDLE_MAXSIZE];
        assert!(handle_addr(&h).is_err());
    }

    #[test]
    fn conn_info_round_trip() {
        let i = ConnInfo { qpn: 0x123456, psn: 0xabcdef, mtu: 5, gid: [7; 16], fifo_addr: 0x7f00_1234_5000, fifo_rkey: 0xdead };
        assert_eq!(ConnInfo::decode(&i.encode()).unwrap(), i);
        let mut bad = i.encode();
        bad[0] ^= 1;
        assert!(ConnInfo::decode(&bad).is_err());
    }
}
