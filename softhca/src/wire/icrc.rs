//! The RoCEv2 invariant CRC (ICRC): a CRC-32 over every part of the packet that no router or
//! switch may change, appended as the last four bytes of the UDP payload.
//!
//! The CRC covers, in order (IBA Annex A17, RoCEv2):
//!
//! 1. eight bytes of `0xff`, standing in for the InfiniBand LRH that RoCE does not have;
//! 2. the IP header with its variant fields set to all ones (IPv4: type of service, TTL,
//!    header checksum; IPv6: traffic class, flow label, hop limit);
//! 3. the UDP header with its checksum set to all ones;
//! 4. the BTH with its variant byte (FECN, BECN and the six reserved bits next to them,
//!    byte 4) set to all ones;
//! 5. everything after the BTH up to the ICRC: extension headers, payload and pad bytes.
//!
//! The CRC is the ordinary CRC-32 (IEEE 802.3 polynomial, reflected, initial value and final
//! XOR all ones), and its four bytes go on the wire least significant first. (Wireshark and
//! scapy display the trailer as a big-endian number, i.e. byte-swapped relative to the CRC
//! value this module returns.)
//!
//! softhca sends its RoCEv2 payload through an ordinary UDP socket, so it never sees the IP
//! and UDP headers that the kernel wraps around it, and neither does the receiving softhca.
//! Both sides therefore *reconstruct* them. That works only because every IPv4 field that is
//! not masked is predictable. The Linux kernel builds an IPv4 UDP datagram as: version/IHL
//! `0x45`, no options, total length = 20 + 8 + payload, identification **0**, flags **DF**,
//! fragment offset 0, protocol 17. The zero identification holds only when the sending socket
//! is unconnected (`sendto`) and has `IP_MTU_DISCOVER = IP_PMTUDISC_DO`: a connected socket,
//! or one left at the default `IP_PMTUDISC_WANT`, gets a per-socket or hashed identification
//! that the receiver cannot know. (Checked on this project's machines by capturing on `lo`;
//! see `softhca/tests/wire_capture.rs`, which re-checks it against the running kernel.)
//! For IPv6 every unmasked field (payload length, next header 17, addresses) is known.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use super::bth;

/// Length of the ICRC trailer in bytes.
pub const ICRC_LEN: usize = 4;
/// Length of a UDP header.
pub const UDP_HEADER_LEN: usize = 8;
/// Length of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Length of an IPv6 header.
pub const IPV6_HEADER_LEN: usize = 40;
/// IP protocol / next-header number of UDP.
pub const IPPROTO_UDP: u8 = 17;
/// The IPv4 flags/fragment-offset word of an unfragmentable datagram (DF set, offset 0).
pub const IPV4_FLAGS_DF: u16 = 0x4000;
/// TTL (IPv4) and hop limit (IPv6) that Linux uses by default. Masked out of the ICRC; used
/// only where a whole header is rebuilt, e.g. for capture files.
pub const DEFAULT_TTL: u8 = 64;

const MASKED_LRH: [u8; 8] = [0xff; 8];

/// The UDP flow a RoCEv2 packet travels on: enough to rebuild the headers the ICRC covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoints {
    /// Sender's address and UDP source port.
    pub src: SocketAddr,
    /// Receiver's address and UDP destination port (4791 for RoCEv2).
    pub dst: SocketAddr,
}

impl Endpoints {
    /// The flow from `src` to `dst`.
    pub const fn new(src: SocketAddr, dst: SocketAddr) -> Endpoints {
        Endpoints { src, dst }
    }

    /// The same flow in the other direction, addresses and ports swapped. That is the reply
    /// flow when both sides send from the socket they receive on (softhca hosts use port
    /// 4791 for both); RoCEv2 itself only fixes the destination port.
    pub const fn reversed(&self) -> Endpoints {
        Endpoints {
            src: self.dst,
            dst: self.src,
        }
    }

    /// Whether the kernel carries this flow in IPv4: both addresses are IPv4 or IPv4-mapped
    /// IPv6 (`::ffff:a.b.c.d`, the form of a RoCEv2 GID for an IPv4 address).
    pub fn is_ipv4(&self) -> bool {
        matches!(ip_pair(self.src.ip(), self.dst.ip()), IpPair::V4(..))
    }

    /// The ICRC of `roce` (BTH up to, not including, the ICRC) on this flow.
    /// [`icrc_pieces`] for this flow.
    pub fn icrc_pieces(&self, pieces: &[&[u8]]) -> u32 {
        icrc_pieces(self.src.ip(), self.dst.ip(), self.src.port(), self.dst.port(), pieces)
    }

    pub fn icrc(&self, roce: &[u8]) -> u32 {
        icrc(
            self.src.ip(),
            self.dst.ip(),
            self.src.port(),
            self.dst.port(),
            roce,
        )
    }
}

/// The address family the datagram travels in, after unmapping IPv4-mapped IPv6 addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IpPair {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// An IPv6 socket sending to `::ffff:a.b.c.d` emits IPv4, so such addresses count as IPv4;
/// a genuinely mixed pair cannot occur on one socket and is treated as IPv6 with the IPv4
/// side mapped.
pub(crate) fn ip_pair(src: IpAddr, dst: IpAddr) -> IpPair {
    fn v4(ip: IpAddr) -> Option<Ipv4Addr> {
        match ip {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(a) => a.to_ipv4_mapped(),
        }
    }
    fn v6(ip: IpAddr) -> Ipv6Addr {
        match ip {
            IpAddr::V4(a) => a.to_ipv6_mapped(),
            IpAddr::V6(a) => a,
        }
    }
    match (v4(src), v4(dst)) {
        (Some(s), Some(d)) => IpPair::V4(s, d),
        _ => IpPair::V6(v6(src), v6(dst)),
    }
}

/// The IPv4 header Linux emits for a UDP datagram of `udp_len` bytes (see the module doc),
/// with type of service, TTL and checksum already set to ones.
fn masked_ipv4_header(src: Ipv4Addr, dst: Ipv4Addr, udp_len: usize) -> [u8; IPV4_HEADER_LEN] {
    // Lengths beyond 16 bits cannot be sent; wrapping keeps this total and panic-free.
    let total_len = (IPV4_HEADER_LEN + udp_len) as u16;
    let mut h = [0u8; IPV4_HEADER_LEN];
    h[0] = 0x45; // version 4, IHL 5: no options
    h[1] = 0xff; // type of service (masked)
    h[2..4].copy_from_slice(&total_len.to_be_bytes());
    // h[4..6]: identification 0
    h[6..8].copy_from_slice(&IPV4_FLAGS_DF.to_be_bytes());
    h[8] = 0xff; // TTL (masked)
    h[9] = IPPROTO_UDP;
    h[10] = 0xff; // header checksum (masked)
    h[11] = 0xff;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    h
}

/// The IPv6 header for a UDP datagram of `udp_len` bytes with traffic class, flow label and
/// hop limit already set to ones.
fn masked_ipv6_header(src: Ipv6Addr, dst: Ipv6Addr, udp_len: usize) -> [u8; IPV6_HEADER_LEN] {
    let payload_len = (udp_len as u16).to_be_bytes();
    let mut h = [0u8; IPV6_HEADER_LEN];
    // Version 6, then traffic class and flow label as ones.
    h[..4].copy_from_slice(&[0x6f, 0xff, 0xff, 0xff]);
    h[4..6].copy_from_slice(&payload_len);
    h[6] = IPPROTO_UDP;
    h[7] = 0xff; // hop limit (masked)
    h[8..24].copy_from_slice(&src.octets());
    h[24..40].copy_from_slice(&dst.octets());
    h
}

/// The ICRC of a RoCEv2 packet sent from `src:udp_src_port` to `dst:udp_dst_port` through a
/// Linux UDP socket (unconnected, `IP_PMTUDISC_DO`), where `roce_payload_without_icrc` is the
/// UDP payload from the BTH up to, not including, the ICRC.
///
/// Append the result with `to_le_bytes()`. Never panics; a payload shorter than a BTH is
/// masked as far as it goes.
pub fn icrc(
    src: IpAddr,
    dst: IpAddr,
    udp_src_port: u16,
    udp_dst_port: u16,
    roce_payload_without_icrc: &[u8],
) -> u32 {
    icrc_pieces(src, dst, udp_src_port, udp_dst_port, &[roce_payload_without_icrc])
}

/// The cache key of [`header_state`]: everything the masked LRH, IP and UDP headers
/// depend on.
type HeaderKey = (IpAddr, IpAddr, u16, u16, usize);

/// Entries of the per-thread [`header_state`] cache (direct-mapped by length and port).
const HEADER_CACHE: usize = 16;

thread_local! {
    static HEADERS: std::cell::RefCell<[Option<(HeaderKey, crc32fast::Hasher)>; HEADER_CACHE]> =
        const { std::cell::RefCell::new([const { None }; HEADER_CACHE]) };
}

/// The CRC state after the masked LRH, IP header and UDP header of a datagram of
/// `udp_len` bytes on this flow.
///
/// Why cached: these 36 bytes (56 for IPv6) are the same for every packet of a flow with
/// the same length, which on a bulk transfer is nearly every packet (MTU-sized middles,
/// ACKs); built and hashed per packet they cost a few percent of the ICRC's time, in
/// several short CRC updates. A small per-thread table keyed by the flow and the length
/// keeps the state after them, so a packet's CRC starts with one clone.
fn header_state(src: IpAddr, dst: IpAddr, udp_src_port: u16, udp_dst_port: u16, udp_len: usize) -> crc32fast::Hasher {
    let key: HeaderKey = (src, dst, udp_src_port, udp_dst_port, udp_len);
    let slot = (udp_len ^ (udp_len >> 4) ^ udp_src_port as usize) % HEADER_CACHE;
    let hit = HEADERS.with(|c| match &c.borrow()[slot] {
        Some((k, h)) if *k == key => Some(h.clone()),
        _ => None,
    });
    if let Some(h) = hit {
        return h;
    }
    let mut crc = crc32fast::Hasher::new();
    let mut pre = [0u8; MASKED_LRH.len() + IPV6_HEADER_LEN + UDP_HEADER_LEN];
    pre[..MASKED_LRH.len()].copy_from_slice(&MASKED_LRH);
    let mut at = MASKED_LRH.len();
    match ip_pair(src, dst) {
        IpPair::V4(s, d) => {
            pre[at..at + IPV4_HEADER_LEN].copy_from_slice(&masked_ipv4_header(s, d, udp_len));
            at += IPV4_HEADER_LEN;
        }
        IpPair::V6(s, d) => {
            pre[at..at + IPV6_HEADER_LEN].copy_from_slice(&masked_ipv6_header(s, d, udp_len));
            at += IPV6_HEADER_LEN;
        }
    }
    let udp = &mut pre[at..at + UDP_HEADER_LEN];
    udp[0..2].copy_from_slice(&udp_src_port.to_be_bytes());
    udp[2..4].copy_from_slice(&udp_dst_port.to_be_bytes());
    udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    udp[6..8].copy_from_slice(&[0xff, 0xff]); // checksum stays masked
    at += UDP_HEADER_LEN;
    crc.update(&pre[..at]);
    HEADERS.with(|c| c.borrow_mut()[slot] = Some((key, crc.clone())));
    crc
}

/// The BTH with its variant byte masked, gathered from the front of `pieces` (which may
/// hold less than a whole BTH, or split it). Returns the bytes and how many were taken.
fn masked_bth(pieces: &[&[u8]]) -> ([u8; bth::HEADER_LEN], usize) {
    let mut b = [0u8; bth::HEADER_LEN];
    let mut at = 0;
    for p in pieces {
        let k = p.len().min(bth::HEADER_LEN - at);
        b[at..at + k].copy_from_slice(&p[..k]);
        at += k;
        if at == bth::HEADER_LEN {
            break;
        }
    }
    if at > bth::VARIANT_BYTE {
        b[bth::VARIANT_BYTE] = 0xff;
    }
    (b, at)
}

/// [`icrc`] over a packet given in pieces (headers, payload, pad), without assembling it:
/// `pieces` concatenated are the RoCEv2 packet up to the ICRC. The BTH may straddle pieces.
pub fn icrc_pieces(src: IpAddr, dst: IpAddr, udp_src_port: u16, udp_dst_port: u16, pieces: &[&[u8]]) -> u32 {
    let roce_len: usize = pieces.iter().map(|p| p.len()).sum();
    let udp_len = UDP_HEADER_LEN + roce_len + ICRC_LEN;
    let mut crc = header_state(src, dst, udp_src_port, udp_dst_port, udp_len);
    let (b, taken) = masked_bth(pieces);
    crc.update(&b[..taken]);
    // The rest: whatever of the pieces the BTH did not take.
    let mut skip = taken;
    for p in pieces {
        if skip >= p.len() {
            skip -= p.len();
            continue;
        }
        crc.update(&p[skip..]);
        skip = 0;
    }
    crc.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddrV4;

    fn ep(src: [u8; 4], sport: u16, dst: [u8; 4]) -> Endpoints {
        Endpoints::new(
            SocketAddr::V4(SocketAddrV4::new(src.into(), sport)),
            SocketAddr::V4(SocketAddrV4::new(dst.into(), 4791)),
        )
    }

    // Golden vector produced by scapy 2.8.0 (scapy.contrib.roce), independently of this code:
    //   IP(src="127.0.0.2", dst="127.0.0.3", id=0, flags="DF", ttl=64)
    //   / UDP(sport=49152, dport=4791)
    //   / BTH(opcode=0x0a, dqpn=0x123456, psn=0x654321, ackreq=1)
    //   / Raw(struct.pack("!QII", 0x1122334455667788, 0xaabbccdd, 8) + b"12345678")
    // scapy puts 66 e9 df 22 on the wire (its `icrc` field and Wireshark's "Invariant CRC"
    // both display those bytes read big-endian, 0x66e9df22); the CRC value is 0x22dfe966.
    const SCAPY_WRITE_ONLY: [u8; 36] = [
        0x0a, 0x00, 0xff, 0xff, 0x00, 0x12, 0x34, 0x56, 0x80, 0x65, 0x43, 0x21, // BTH
        0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // RETH VA
        0xaa, 0xbb, 0xcc, 0xdd, 0x00, 0x00, 0x00, 0x08, // RETH R_Key, DMA length
        b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'8',
    ];

    #[test]
    fn golden_vector_from_scapy() {
        let e = ep([127, 0, 0, 2], 49152, [127, 0, 0, 3]);
        assert!(e.is_ipv4());
        let crc = e.icrc(&SCAPY_WRITE_ONLY);
        assert_eq!(crc, 0x22df_e966);
        assert_eq!(crc.to_le_bytes(), [0x66, 0xe9, 0xdf, 0x22]);
    }

    #[test]
    fn ipv4_mapped_gids_count_as_ipv4() {
        let mapped = |ip: [u8; 4], port| {
            SocketAddr::new(IpAddr::V6(Ipv4Addr::from(ip).to_ipv6_mapped()), port)
        };
        let e = Endpoints::new(mapped([127, 0, 0, 2], 49152), mapped([127, 0, 0, 3], 4791));
        assert!(e.is_ipv4());
        assert_eq!(e.icrc(&SCAPY_WRITE_ONLY), 0x22df_e966);
    }

    #[test]
    fn variant_fields_do_not_change_the_crc_but_invariant_ones_do() {
        let e = ep([127, 0, 0, 2], 49152, [127, 0, 0, 3]);
        let base = e.icrc(&SCAPY_WRITE_ONLY);
        // FECN, BECN, Resv6a: variant.
        for v in [0x80u8, 0x40, 0x3f, 0xff] {
            let mut p = SCAPY_WRITE_ONLY;
            p[4] = v;
            assert_eq!(e.icrc(&p), base, "byte 4 = {v:#x}");
        }
        // Every other BTH bit, including Resv7 next to AckReq, is covered.
        for byte in (0..12).filter(|&b| b != 4) {
            let mut p = SCAPY_WRITE_ONLY;
            p[byte] ^= 0x01;
            assert_ne!(e.icrc(&p), base, "byte {byte}");
        }
        let mut p = SCAPY_WRITE_ONLY;
        *p.last_mut().unwrap() ^= 0x80;
        assert_ne!(e.icrc(&p), base);
        // Addresses and ports are covered.
        assert_ne!(
            ep([127, 0, 0, 2], 49153, [127, 0, 0, 3]).icrc(&SCAPY_WRITE_ONLY),
            base
        );
        assert_ne!(
            ep([127, 0, 0, 4], 49152, [127, 0, 0, 3]).icrc(&SCAPY_WRITE_ONLY),
            base
        );
        assert_ne!(e.reversed().icrc(&SCAPY_WRITE_ONLY), base);
    }

    #[test]
    fn short_input_does_not_panic() {
        let e = ep([10, 0, 0, 1], 1, [10, 0, 0, 2]);
        for n in 0..=SCAPY_WRITE_ONLY.len() {
            let _ = e.icrc(&SCAPY_WRITE_ONLY[..n]);
        }
        let huge = vec![0u8; 70_000];
        let _ = e.icrc(&huge);
    }

    #[test]
    fn masked_headers_layout() {
        let h = masked_ipv4_header([1, 2, 3, 4].into(), [5, 6, 7, 8].into(), 48);
        assert_eq!(
            h,
            [
                0x45, 0xff, 0x00, 0x44, 0x00, 0x00, 0x40, 0x00, 0xff, 0x11, 0xff, 0xff, 1, 2, 3, 4,
                5, 6, 7, 8
            ]
        );
        let h6 = masked_ipv6_header(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, 40);
        assert_eq!(h6[..8], [0x6f, 0xff, 0xff, 0xff, 0x00, 0x28, 0x11, 0xff]);
        assert_eq!(h6[23], 1);
        assert_eq!(h6[39], 1);
    }

    /// The header cache never hands one flow's or length's state to another: results
    /// for interleaved flows and lengths (many sharing a cache slot) match a CRC built
    /// from scratch.
    #[test]
    fn header_cache_matches_uncached() {
        fn reference(e: &Endpoints, roce: &[u8]) -> u32 {
            let udp_len = UDP_HEADER_LEN + roce.len() + ICRC_LEN;
            let mut crc = crc32fast::Hasher::new();
            crc.update(&MASKED_LRH);
            match ip_pair(e.src.ip(), e.dst.ip()) {
                IpPair::V4(s, d) => crc.update(&masked_ipv4_header(s, d, udp_len)),
                IpPair::V6(s, d) => crc.update(&masked_ipv6_header(s, d, udp_len)),
            }
            let mut udp = [0xffu8; UDP_HEADER_LEN];
            udp[0..2].copy_from_slice(&e.src.port().to_be_bytes());
            udp[2..4].copy_from_slice(&e.dst.port().to_be_bytes());
            udp[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            crc.update(&udp);
            let mut b = roce.to_vec();
            if b.len() > bth::VARIANT_BYTE {
                b[bth::VARIANT_BYTE] = 0xff;
            }
            crc.update(&b);
            crc.finalize()
        }
        let pkt: Vec<u8> = (0..600u32).map(|i| (i * 13 + 5) as u8).collect();
        let flows = [
            ep([127, 0, 0, 1], 4791, [127, 0, 0, 2]),
            ep([127, 0, 0, 2], 4791, [127, 0, 0, 1]),
            ep([127, 0, 0, 1], 4792, [127, 0, 0, 2]),
            Endpoints::new("[fe80::1]:4791".parse().unwrap(), "[fe80::2]:4791".parse().unwrap()),
        ];
        for round in 0..3 {
            for len in (0..600).step_by(7 + round) {
                for e in &flows {
                    let want = reference(e, &pkt[..len]);
                    assert_eq!(e.icrc(&pkt[..len]), want, "{e:?} len {len}");
                    assert_eq!(e.icrc_pieces(&[&pkt[..len.min(5)], &pkt[len.min(5)..len]]), want, "{e:?} len {len}");
                }
            }
        }
    }

    #[test]
    fn pieces_match_the_contiguous_crc() {
        let e = ep([127, 0, 0, 1], 4791, [127, 0, 0, 2]);
        let pkt: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = e.icrc(&pkt);
        for cut1 in [0usize, 1, 4, 5, 11, 12, 13, 40] {
            for cut2 in [cut1, cut1 + 1, 100, 299, 300] {
                let (a, rest) = pkt.split_at(cut1);
                let (b, c) = rest.split_at(cut2 - cut1);
                assert_eq!(e.icrc_pieces(&[a, b, c]), whole, "cuts {cut1} {cut2}");
            }
        }
        assert_eq!(e.icrc_pieces(&[&pkt[..3]]), e.icrc(&pkt[..3]), "shorter than a BTH");
        let v6 = Endpoints::new("[fe80::1]:5000".parse().unwrap(), "[fe80::2]:4791".parse().unwrap());
        assert_eq!(v6.icrc_pieces(&[&pkt[..20], &pkt[20..]]), v6.icrc(&pkt));
    }
}
