//! The host side of the port: an AF_PACKET socket bound to one interface, and the
//! thread that waits on it.
//!
//! The thread blocks in `poll` on the socket and moves every frame it receives into
//! the port's queue, then wakes the engine (its eventfd), which takes the frames in
//! its next step: the engine keeps its own idling rules (busy briefly after work, then
//! asleep), and no core spins for a quiet interface. Frames the host itself sends
//! (`PACKET_OUTGOING`) are not received: they are not on the wire towards the port.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use crate::device::Shared;

const ETH_P_ALL: u16 = 0x0003;
/// `PACKET_IGNORE_OUTGOING` (linux/if_packet.h, Linux 4.20).
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
/// `sll_pkttype` of a frame this host sent.
const PACKET_OUTGOING: u8 = 4;
/// `PACKET_AUXDATA`: a `tpacket_auxdata` with every frame.
const PACKET_AUXDATA: libc::c_int = 8;
/// `tp_status` bits: the L4 checksum is not finished (a checksum-offloaded frame from
/// the host's stack); a VLAN tag was taken off (and its TPID is given).
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;

/// `struct tpacket_auxdata` (linux/if_packet.h).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Auxdata {
    tp_status: u32,
    tp_len: u32,
    tp_snaplen: u32,
    tp_mac: u16,
    tp_net: u16,
    tp_vlan_tci: u16,
    tp_vlan_tpid: u16,
}
/// Frames kept for the engine at most; more are dropped (a full receive ring).
pub const QUEUE_MAX: usize = 4096;
/// The largest frame taken (a 9000-byte MTU plus headers and a VLAN tag).
const FRAME_MAX: usize = 9018 + 4;
/// How often the waiting thread checks that the port still exists.
const POLL_MS: libc::c_int = 200;

/// The frames waiting for the engine, shared with the receive thread.
pub type Queue = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// The receive buffer the port asks for (the kernel doubles it for its bookkeeping).
const RCVBUF_BYTES: libc::c_int = 8 << 20;

#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    pub ifindex: u32,
}

impl PacketSocket {
    /// A packet socket for every protocol on interface `name`.
    pub fn open(name: &str) -> io::Result<PacketSocket> {
        let cname = std::ffi::CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a NUL-terminated name.
        let ifindex = unsafe { libc::if_nametoindex(cname.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, (ETH_P_ALL.to_be()) as i32) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain data; zero is a valid start.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: binding a live socket to a filled sockaddr_ll of its size.
        let r = unsafe {
            libc::bind(fd.as_raw_fd(), (&sll as *const libc::sockaddr_ll).cast(), std::mem::size_of::<libc::sockaddr_ll>() as u32)
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let one: libc::c_int = 1;
        // SAFETY: int options from a live local. Older kernels refuse the first: the
        // receive loop filters by packet type as well.
        unsafe {
            libc::setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, (&one as *const libc::c_int).cast(), 4);
            libc::setsockopt(fd.as_raw_fd(), libc::SOL_PACKET, PACKET_AUXDATA, (&one as *const libc::c_int).cast(), 4);
        }
        // The port's receive ring. The kernel's default (rmem_default, about 208 KiB:
        // some 270 minimum-size frames at their skb truesize) overflows when the port
        // thread loses its CPU for a few tens of milliseconds on a shared machine, which
        // a NIC's own ring of thousands of descriptors would absorb. SO_RCVBUFFORCE
        // (CAP_NET_ADMIN) goes past rmem_max; without the capability, SO_RCVBUF takes
        // what rmem_max allows.
        let bytes: libc::c_int = RCVBUF_BYTES;
        // SAFETY: int options from a live local.
        unsafe {
            if libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, (&bytes as *const libc::c_int).cast(), 4) != 0 {
                libc::setsockopt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, (&bytes as *const libc::c_int).cast(), 4);
            }
        }
        Ok(PacketSocket { fd, ifindex })
    }

    /// Puts one whole frame on the wire.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: sending from a live buffer of its length on a bound socket.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), libc::MSG_DONTWAIT) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// One received frame that came from the wire, as the wire carried it, or None
    /// when none is waiting: a VLAN tag the host took off is put back, and a checksum
    /// the sending stack left to offload is finished.
    fn recv(&self, buf: &mut [u8]) -> Option<Vec<u8>> {
        loop {
            // SAFETY: sockaddr_ll and msghdr are plain data.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut cbuf = [0u64; 16];
            let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
            // SAFETY: as above.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&mut sll as *mut libc::sockaddr_ll).cast();
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&cbuf);
            // SAFETY: every pointer in `msg` names a live local buffer of the given size.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
            if n < 0 {
                return None;
            }
            if sll.sll_pkttype == PACKET_OUTGOING {
                continue;
            }
            let mut aux = Auxdata::default();
            // SAFETY: walking the control messages recvmsg wrote into `cbuf`, reading
            // an auxdata record only from a cmsg of that type and at least its size.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::SOL_PACKET && (*c).cmsg_type == PACKET_AUXDATA
                        && (*c).cmsg_len as usize >= libc::CMSG_LEN(std::mem::size_of::<Auxdata>() as u32) as usize {
                        aux = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<Auxdata>());
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            let n = n as usize;
            let mut f = Vec::with_capacity(n + 4);
            if aux.tp_status & TP_STATUS_VLAN_VALID != 0 && n >= 12 {
                let tpid = if aux.tp_status & TP_STATUS_VLAN_TPID_VALID != 0 { aux.tp_vlan_tpid } else { 0x8100 };
                f.extend_from_slice(&buf[..12]);
                f.extend_from_slice(&tpid.to_be_bytes());
                f.extend_from_slice(&aux.tp_vlan_tci.to_be_bytes());
                f.extend_from_slice(&buf[12..n]);
            } else {
                f.extend_from_slice(&buf[..n]);
            }
            if aux.tp_status & TP_STATUS_CSUMNOTREADY != 0 {
                super::frame::finish_l4_checksum(&mut f);
            }
            return Some(f);
        }
    }
}

/// Starts the thread that feeds `queue` from `sock` and wakes the engine (`shared`);
/// it ends when `stop` is set or the device is gone.
pub(crate) fn spawn(sock: Arc<PacketSocket>, queue: Queue, shared: Weak<Shared>, stop: Arc<AtomicBool>, name: String)
    -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new().name(name).spawn(move || {
        let mut buf = vec![0u8; FRAME_MAX];
        while !stop.load(Ordering::Acquire) {
            let mut p = libc::pollfd { fd: sock.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd.
            let r = unsafe { libc::poll(&mut p, 1, POLL_MS) };
            if r <= 0 {
                continue;
            }
            let mut got = false;
            while let Some(f) = sock.recv(&mut buf) {
                let mut q = queue.lock().unwrap_or_else(|p| p.into_inner());
                if q.len() < QUEUE_MAX {
                    q.push_back(f);
                    got = true;
                }
            }
            if got {
                let Some(s) = shared.upgrade() else { break };
                s.wake();
            }
        }
    })
}
