//! The out-of-band address exchange of libibverbs' example programs (ibv_rc_pingpong,
//! ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong): before the QPs connect, each
//! side sends its LID, QPN, PSN and GID over TCP as one NUL-padded 52-byte text message,
//! `"%04x:%06x:%06x:%s"` with the GID as 32 hex digits in byte order (the programs'
//! `gid_to_wire_gid`). Speaking it lets a program built on this crate meet the stock
//! ones in either role. The TCP connection itself is the program's.

use crate::error::{Error, Result};

/// Bytes of one message, the NUL included.
pub const WIRE_LEN: usize = 52;

/// One end's address as exchanged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dest {
    /// The port's LID (0 on RoCE).
    pub lid: u16,
    /// The QP number to connect to.
    pub qpn: u32,
    /// The first packet sequence number the QP sends (the peer's `rq_psn`).
    pub psn: u32,
    /// The GID to address (all zero: no GRH, InfiniBand by LID).
    pub gid: [u8; 16],
}

impl Dest {
    /// The message (QPN and PSN keep their 24 bits).
    pub fn to_wire(self) -> [u8; WIRE_LEN] {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        let s = format!("{:04x}:{:06x}:{:06x}:{gid}", self.lid, self.qpn & 0xff_ffff, self.psn & 0xff_ffff);
        let mut m = [0u8; WIRE_LEN];
        m[..s.len()].copy_from_slice(s.as_bytes());
        m
    }

    /// Parses a message (up to its NUL): EINVAL-kind [`Error::Invalid`] for anything
    /// that is not four ':'-separated hex fields ending in a 32-digit GID.
    pub fn from_wire(m: &[u8]) -> Result<Dest> {
        let end = m.iter().position(|&b| b == 0).unwrap_or(m.len());
        let text = String::from_utf8_lossy(&m[..end]);
        let bad = || Error::Invalid { op: "oob", why: format!("couldn't parse remote address {text:?}") };
        let f: Vec<&str> = text.splitn(4, ':').collect();
        if f.len() != 4 || f[3].len() != 32 || !f[3].is_ascii() {
            return Err(bad());
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&f[3][2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        let h = |x: &str| u32::from_str_radix(x, 16).map_err(|_| bad());
        Ok(Dest { lid: u16::try_from(h(f[0])?).map_err(|_| bad())?, qpn: h(f[1])?, psn: h(f[2])?, gid })
    }

    /// The line the programs print for an address: `"  local address:  LID 0x%04x, QPN
    /// 0x%06x, PSN 0x%06x, GID %s"` (the remote line has one space fewer after the colon).
    pub fn address_line(&self, local: bool) -> String {
        let who = if local { "local address: " } else { "remote address:" };
        format!("  {who} LID {:#06x}, QPN {:#08x}, PSN {:#08x}, GID {}", self.lid, self.qpn, self.psn, std::net::Ipv6Addr::from(self.gid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes ibv_rc_pingpong sends for QPN 0x11a, PSN 0x3b2c1d and ::ffff:127.0.0.2
    /// (libibverbs/examples: sprintf of "%04x:%06x:%06x:%s" after gid_to_wire_gid).
    #[test]
    fn wire_message_is_rc_pingpongs() {
        let gid = std::net::Ipv6Addr::from([0, 0, 0, 0, 0, 0xffff, 0x7f00, 2]).octets();
        let d = Dest { lid: 0, qpn: 0x11a, psn: 0x3b2c1d, gid };
        let w = d.to_wire();
        assert_eq!(&w[..51], b"0000:00011a:3b2c1d:00000000000000000000ffff7f000002");
        assert_eq!(w[51], 0);
        assert_eq!(Dest::from_wire(&w).unwrap(), d);
    }

    /// C's "0x%04x" and "0x%06x" count digits only; Rust's `#` width counts the prefix.
    #[test]
    fn address_lines_are_rc_pingpongs() {
        let gid = std::net::Ipv6Addr::from([0, 0, 0, 0, 0, 0xffff, 0x7f00, 2]).octets();
        let d = Dest { lid: 0, qpn: 0x11a, psn: 0x3b2c1d, gid };
        assert_eq!(d.address_line(true), "  local address:  LID 0x0000, QPN 0x00011a, PSN 0x3b2c1d, GID ::ffff:127.0.0.2");
        assert_eq!(d.address_line(false), "  remote address: LID 0x0000, QPN 0x00011a, PSN 0x3b2c1d, GID ::ffff:127.0.0.2");
    }

    #[test]
    fn malformed_messages_are_refused() {
        for m in [&b"0000:00011a:3b2c1d"[..], b"0000:00011a:3b2c1d:0000", b"zz00:00011a:3b2c1d:00000000000000000000ffff7f000002",
                  b"0000:00011a:3b2c1d:0000000000000000000000ffff7f0000g2", b"10000:00011a:3b2c1d:00000000000000000000ffff7f000002"] {
            assert!(Dest::from_wire(m).is_err(), "{}", String::from_utf8_lossy(m));
        }
    }
}
