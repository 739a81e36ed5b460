//! Sending from a QP's own UDP source port.
//!
//! A ConnectX puts each QP's packets on the wire from the source port in its context
//! (`ads.udp_sport`, see [`crate::wire::udp_sport`]), so an ECMP fabric spreads QPs over
//! its paths. An instance's packets leave through sockets, and a socket sends from the
//! port it is bound to: the instance keeps its port-4791 socket (everything it receives
//! arrives there, since RoCEv2 packets always go *to* 4791) and opens, the first time a
//! port is wanted, one more socket bound to (its address, that port), used only to send.
//!
//! Such a port may be taken (another program's socket): the packets then leave from 4791
//! as before, and that is logged once per instance. So are ports past [`MAX_SOCKETS`]
//! (an instance with thousands of QPs would otherwise hold thousands of descriptors).
//! [`SPORT_ENV`]`=0` sends everything from 4791.
//!
//! The socket must carry the same options as the main one (`IP_PMTUDISC_DO`, see
//! [`crate::config::bind_roce_socket_at`]), or the kernel would number the IPv4
//! identification and the ICRC, computed for identification 0, would not match.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};

use crate::wire::udp_sport::is_roce_sport;

/// The environment variable that turns per-QP source ports off (`0`).
pub const SPORT_ENV: &str = "DOORBELL_UDP_SPORT";
/// At most this many extra sockets per instance.
pub const MAX_SOCKETS: usize = 256;
/// Send buffer of each extra socket, as the main one's.
const SNDBUF: libc::c_int = 4 << 20;

/// The instance's send-only sockets, one per source port in use.
#[derive(Debug)]
pub struct SourcePorts {
    ip: IpAddr,
    /// The main socket's port (4791): the fallback.
    main: u16,
    enabled: bool,
    /// A port that could not be bound maps to None (tried once).
    socks: HashMap<u16, Option<UdpSocket>>,
    warned: bool,
}

impl SourcePorts {
    /// For an instance whose main socket is `local`.
    pub fn new(local: SocketAddr) -> SourcePorts {
        SourcePorts::with(local, !crate::config::switched_off(SPORT_ENV))
    }

    pub fn with(local: SocketAddr, enabled: bool) -> SourcePorts {
        SourcePorts { ip: local.ip(), main: local.port(), enabled, socks: HashMap::new(), warned: false }
    }

    /// The port a packet that wants source port `want` leaves from: `want` when it is a
    /// RoCEv2 source port and a socket holds it (opened now if need be), else the main
    /// socket's.
    pub fn port_for(&mut self, want: u16) -> u16 {
        if !self.enabled || want == self.main || !is_roce_sport(want) {
            return self.main;
        }
        if let Some(s) = self.socks.get(&want) {
            return if s.is_some() { want } else { self.main };
        }
        if self.socks.len() >= MAX_SOCKETS {
            self.warn_once(want, "too many source ports in use".into());
            return self.main;
        }
        let s = match crate::config::bind_roce_socket_at(self.ip, want) {
            Ok(s) => {
                let fd = s.as_raw_fd();
                // SAFETY: setsockopt on a socket we own with a pointer to a live c_int.
                unsafe {
                    libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, (&SNDBUF as *const libc::c_int).cast(),
                                     std::mem::size_of::<libc::c_int>() as libc::socklen_t);
                }
                tracing::debug!(target: "softhca::tx", ip = %self.ip, port = want, "source-port socket");
                Some(s)
            }
            Err(e) => {
                self.warn_once(want, e.to_string());
                None
            }
        };
        let got = if s.is_some() { want } else { self.main };
        self.socks.insert(want, s);
        got
    }

    /// The descriptor that sends from `port` (one [`Self::port_for`] returned), or None
    /// for the main socket's port.
    pub fn fd(&self, port: u16) -> Option<RawFd> {
        self.socks.get(&port).and_then(|s| s.as_ref()).map(|s| s.as_raw_fd())
    }

    fn warn_once(&mut self, port: u16, why: String) {
        if !self.warned {
            self.warned = true;
            tracing::warn!(target: "softhca::tx", ip = %self.ip, port, "cannot send from UDP source port {port} ({why}); \
                           such packets leave from {} (logged once)", self.main);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket holding some free port of the RoCEv2 range on `ip`.
    fn hold(ip: IpAddr, from: u16) -> (u16, UdpSocket) {
        (from..=u16::MAX).find_map(|p| UdpSocket::bind((ip, p)).ok().map(|s| (p, s))).expect("a free port")
    }

    #[test]
    fn free_ports_get_a_socket_taken_or_invalid_ones_fall_back() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let mut p = SourcePorts::with(SocketAddr::new(ip, 4791), true);
        // Someone else's port: 4791, and not tried again.
        let (taken, _other) = hold(ip, 0xf000);
        assert_eq!(p.port_for(taken), 4791, "taken");
        assert_eq!((p.fd(taken), p.port_for(taken)), (None, 4791));
        // A free one: its own socket, bound there, reused.
        let (free, probe) = hold(ip, taken + 1);
        drop(probe);
        assert_eq!(p.port_for(free), free);
        let fd = p.fd(free).expect("a socket for it");
        assert_eq!(p.port_for(free), free);
        assert_eq!(p.fd(free), Some(fd));
        assert!(UdpSocket::bind((ip, free)).is_err(), "held by the instance now");
        // No port set, or one outside the range: 4791.
        assert_eq!(p.port_for(0), 4791);
        assert_eq!(p.port_for(0x1234), 4791);
        let off = &mut SourcePorts::with(SocketAddr::new(ip, 4791), false);
        assert_eq!(off.port_for(free + 1), 4791, "switched off");
    }
}
