//! What a ConnectX's receive parser reports about an Ethernet frame in a raw packet
//! CQE: the L3 and L4 header types (`l4_hdr_type_etc`) and the L2/L3/L4 "OK" bits
//! (`hds_ip_ext`), as mlx5e reads them back (`get_cqe_l3_hdr_type`,
//! `get_cqe_l4_hdr_type`, `CQE_L4_HDR_TYPE_*` in the kernel's en.h / mlx5dv.h's
//! `MLX5_CQE_L*_OK`), and whether a frame is RoCEv2 for a given address.
//!
//! The parser looks through one 802.1Q tag; IPv4 options are honoured, IPv6 extension
//! headers are not followed (the L4 type is NONE then). L3 OK: a well-formed IPv4
//! header whose checksum verifies (IPv6 has none: well-formed is OK); L4 OK: the TCP
//! or UDP checksum over the pseudo-header verifies (a zero UDP checksum over IPv4
//! means "none" and is OK). A fragment other than the first carries no L4 header.

use std::net::IpAddr;

/// `hds_ip_ext` bits (`MLX5_CQE_L2_OK` ...).
pub mod ok {
    pub const L2: u8 = 1 << 0;
    pub const L3: u8 = 1 << 1;
    pub const L4: u8 = 1 << 2;
}

/// `l4_hdr_type_etc[3:2]` (`MLX5_CQE_L3_HDR_TYPE_*`).
pub mod l3 {
    pub const NONE: u8 = 0x0;
    pub const IPV6: u8 = 0x1;
    pub const IPV4: u8 = 0x2;
}

/// `l4_hdr_type_etc[6:4]` (`CQE_L4_HDR_TYPE_*`).
pub mod l4 {
    pub const NONE: u8 = 0x0;
    pub const TCP_NO_ACK: u8 = 0x1;
    pub const UDP: u8 = 0x2;
    pub const TCP_ACK_NO_DATA: u8 = 0x3;
    pub const TCP_ACK_AND_DATA: u8 = 0x4;
}

pub const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const ETH_P_8021Q: u16 = 0x8100;

/// The parser's verdict on one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameInfo {
    pub l3: u8,
    pub l4: u8,
    /// `hds_ip_ext`.
    pub ok: u8,
    /// The outer IP destination and UDP destination port, when there are.
    pub dst_ip: Option<IpAddr>,
    pub udp_dport: Option<u16>,
}

impl FrameInfo {
    /// `l4_hdr_type_etc` as the CQE carries it (no VLAN stripped: bit 0 clear).
    pub fn l4_hdr_type_etc(&self) -> u8 {
        (self.l4 << 4) | (self.l3 << 2)
    }

    /// Whether this is RoCEv2 (UDP to 4791) addressed to `addr`.
    pub fn is_roce_to(&self, addr: IpAddr) -> bool {
        self.udp_dport == Some(crate::config::ROCE_V2_PORT) && self.dst_ip.map(|a| a.to_canonical()) == Some(addr.to_canonical())
    }
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// The 16-bit ones' complement sum of `b` (odd length padded with zero), unfolded.
fn sum16(b: &[u8]) -> u32 {
    b.chunks(2).map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32).sum()
}

fn fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Whether the L4 checksum of `seg` verifies against the pseudo-header of `src`, `dst`.
fn l4_ok(proto: u8, src: &[u8], dst: &[u8], seg: &[u8]) -> bool {
    let pseudo = sum16(src) + sum16(dst) + proto as u32 + seg.len() as u32;
    fold(pseudo + sum16(seg)) == 0xffff
}

/// Where a frame's L4 segment is: (protocol, pseudo-header source, destination,
/// segment start, segment end), for an unfragmented IPv4 or IPv6 frame.
fn l4_span(frame: &[u8]) -> Option<(u8, std::ops::Range<usize>, std::ops::Range<usize>, usize, usize)> {
    let mut ethertype = be16(frame, 12)?;
    let mut at = ETH_HLEN;
    if ethertype == ETH_P_8021Q {
        ethertype = be16(frame, 16)?;
        at += 4;
    }
    match ethertype {
        ETH_P_IP => {
            let ihl = (*frame.get(at)? & 0xf) as usize * 4;
            let total = be16(frame, at + 2)? as usize;
            if ihl < 20 || total < ihl || frame.len() < at + total || be16(frame, at + 6)? & 0x3fff != 0 {
                return None;
            }
            Some((frame[at + 9], at + 12..at + 16, at + 16..at + 20, at + ihl, at + total))
        }
        ETH_P_IPV6 => {
            let plen = be16(frame, at + 4)? as usize;
            if frame.len() < at + 40 + plen {
                return None;
            }
            Some((frame[at + 6], at + 8..at + 24, at + 24..at + 40, at + 40, at + 40 + plen))
        }
        _ => None,
    }
}

/// Writes the finished TCP or UDP checksum into `frame`: what a sender's NIC does for
/// a frame its stack handed over with checksum offload (a veth passes such frames on
/// with only the pseudo-header sum in the field; a wire carries the finished one).
pub fn finish_l4_checksum(frame: &mut [u8]) {
    let Some((proto, src, dst, start, end)) = l4_span(frame) else { return };
    let field = match proto {
        17 if end - start >= 8 => start + 6,
        6 if end - start >= 20 => start + 16,
        _ => return,
    };
    frame[field..field + 2].fill(0);
    let seg = &frame[start..end];
    let sum = sum16(&frame[src]) + sum16(&frame[dst]) + proto as u32 + seg.len() as u32 + sum16(seg);
    let mut c = !fold(sum);
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
}

/// Parses `frame` as a ConnectX's receive parser would (see the module doc).
pub fn classify(frame: &[u8]) -> FrameInfo {
    let mut info = FrameInfo::default();
    let Some(mut ethertype) = be16(frame, 12) else { return info };
    info.ok |= ok::L2;
    let mut at = ETH_HLEN;
    if ethertype == ETH_P_8021Q {
        let Some(t) = be16(frame, 16) else { return info };
        ethertype = t;
        at += 4;
    }
    let l3b = &frame[at.min(frame.len())..];
    let (proto, src, dst, seg): (u8, &[u8], &[u8], &[u8]) = match ethertype {
        ETH_P_IP => {
            let Some(&vihl) = l3b.first() else { return info };
            let ihl = (vihl & 0xf) as usize * 4;
            let Some(total) = be16(l3b, 2).map(|t| t as usize) else { return info };
            if vihl >> 4 != 4 || ihl < 20 || total < ihl || l3b.len() < total {
                return info;
            }
            info.l3 = l3::IPV4;
            let hdr = &l3b[..ihl];
            if fold(sum16(hdr)) == 0xffff {
                info.ok |= ok::L3;
            }
            info.dst_ip = Some(IpAddr::from(<[u8; 4]>::try_from(&hdr[16..20]).unwrap_or_default()));
            let frag = be16(hdr, 6).unwrap_or(0);
            if frag & 0x1fff != 0 {
                return info;
            }
            (hdr[9], &hdr[12..16], &hdr[16..20], &l3b[ihl..total])
        }
        ETH_P_IPV6 => {
            let Some(plen) = be16(l3b, 4).map(|p| p as usize) else { return info };
            if l3b.len() < 40 + plen || l3b[0] >> 4 != 6 {
                return info;
            }
            info.l3 = l3::IPV6;
            info.ok |= ok::L3;
            info.dst_ip = Some(IpAddr::from(<[u8; 16]>::try_from(&l3b[24..40]).unwrap_or_default()));
            (l3b[6], &l3b[8..24], &l3b[24..40], &l3b[40..40 + plen])
        }
        _ => return info,
    };
    match proto {
        17 if seg.len() >= 8 => {
            info.l4 = l4::UDP;
            info.udp_dport = be16(seg, 2);
            let none = info.l3 == l3::IPV4 && be16(seg, 6) == Some(0);
            if none || l4_ok(proto, src, dst, seg) {
                info.ok |= ok::L4;
            }
        }
        6 if seg.len() >= 20 => {
            let doff = (seg[12] >> 4) as usize * 4;
            let ack = seg[13] & 0x10 != 0;
            info.l4 = match (ack, seg.len() > doff) {
                (false, _) => l4::TCP_NO_ACK,
                (true, false) => l4::TCP_ACK_NO_DATA,
                (true, true) => l4::TCP_ACK_AND_DATA,
            };
            if l4_ok(proto, src, dst, seg) {
                info.ok |= ok::L4;
            }
        }
        _ => {}
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    // Frames built by scapy 2.8 (Ether()/IP()/UDP()/Raw(b"hello") and the like), whose
    // checksums scapy computed: the outside reference for the OK bits.
    const UDP4: &str = "02000000000102000000000208004500002100010000401166b70a0900020a09000113881770000d7cf568656c6c6f";
    const TCP_ACK: &str = "02000000000102000000000208004500002800010000400666bb0a0900020a090001000100020000000000000000501020007bbd0000";
    const TCP_SYN: &str = "02000000000102000000000208004500002800010000400666bb0a0900020a090001000100020000000000000000500220007bcb0000";
    const UDP6: &str = "02000000000102000000000286dd60000000000b1140fd000000000000000000000000000002fd00000000000000000000000000000113881770000b3c72686936";
    const ARP: &str = "ffffffffffff0200000000020806000108000604000102fc000000010a0900020000000000000a090001";

    #[test]
    fn scapy_frames() {
        let all = ok::L2 | ok::L3 | ok::L4;
        let u = classify(&hex(UDP4));
        assert_eq!((u.l3, u.l4, u.ok, u.udp_dport), (l3::IPV4, l4::UDP, all, Some(6000)));
        assert_eq!(u.l4_hdr_type_etc(), 0x28);
        let t = classify(&hex(TCP_ACK));
        assert_eq!((t.l3, t.l4, t.ok), (l3::IPV4, l4::TCP_ACK_NO_DATA, all));
        let s = classify(&hex(TCP_SYN));
        assert_eq!((s.l4, s.ok), (l4::TCP_NO_ACK, all));
        let v6 = classify(&hex(UDP6));
        assert_eq!((v6.l3, v6.l4, v6.ok), (l3::IPV6, l4::UDP, all));
        assert_eq!(v6.l4_hdr_type_etc(), 0x24);
        let a = classify(&hex(ARP));
        assert_eq!((a.l3, a.l4, a.ok), (l3::NONE, l4::NONE, ok::L2));
    }

    #[test]
    fn bad_checksums_clear_their_bit() {
        let mut f = hex(UDP4);
        f[ETH_HLEN + 10] ^= 1; // IPv4 header checksum
        assert_eq!(classify(&f).ok, ok::L2 | ok::L4);
        let mut f = hex(UDP4);
        *f.last_mut().unwrap() ^= 1; // payload under the UDP checksum
        assert_eq!(classify(&f).ok, ok::L2 | ok::L3);
    }

    #[test]
    fn finished_checksums_are_scapys() {
        for f in [UDP4, TCP_ACK, UDP6] {
            let want = hex(f);
            let mut g = want.clone();
            // A partial (offloaded) checksum: anything but the finished value.
            let (.., start, _) = l4_span(&g).unwrap();
            let field = start + if f == TCP_ACK { 16 } else { 6 };
            g[field] ^= 0x5a;
            finish_l4_checksum(&mut g);
            assert_eq!(g, want);
        }
    }

    #[test]
    fn roce_to_addr() {
        let mut f = hex(UDP4);
        f[ETH_HLEN + 20 + 2..ETH_HLEN + 20 + 4].copy_from_slice(&4791u16.to_be_bytes());
        let i = classify(&f);
        assert!(i.is_roce_to("10.9.0.1".parse().unwrap()));
        assert!(!i.is_roce_to("10.9.0.2".parse().unwrap()));
    }

    #[test]
    fn short_frames() {
        assert_eq!(classify(&[0u8; 10]), FrameInfo::default());
        let f = hex(UDP4);
        assert_eq!(classify(&f[..30]).l3, l3::NONE);
    }
}
