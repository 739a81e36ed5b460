//! Capture files of softhca's wire traffic, for Wireshark and tshark.
//!
//! softhca only ever holds the UDP payload (BTH .. ICRC); the kernel adds the IP and UDP
//! headers and `lo` has no real Ethernet. To make a capture that decodes exactly like one
//! taken on a NIC, each packet is wrapped in the frame it would have travelled in: an
//! Ethernet II header with locally administered MACs derived from the IP addresses, the IP
//! header the kernel emits (IPv4: identification 0, DF, TTL 64; IPv6: hop limit 64), and a
//! UDP header with a correct checksum. Framing and pcap encoding are done by the `etherparse`
//! and `pcap-file` crates.

use std::io::Write;
use std::net::IpAddr;
use std::time::Duration;

use etherparse::{IpHeaders, IpNumber, Ipv4Header, Ipv6FlowLabel, Ipv6Header, PacketBuilder};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter as RawPcapWriter};
use pcap_file::{DataLink, Endianness};

use super::icrc::{ip_pair, Endpoints, IpPair, DEFAULT_TTL};

/// Why a packet could not be written to a capture.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    /// The pcap encoder or the underlying writer failed.
    #[error("pcap: {0}")]
    Pcap(#[from] pcap_file::PcapError),
    /// The packet cannot be framed (too large for IP).
    #[error("cannot frame RoCEv2 packet: {0}")]
    Frame(String),
}

/// A locally administered unicast MAC (`02:00:` + the address's last four bytes), so that
/// each softhca host shows up with a stable, distinct MAC.
pub fn mac_for(ip: IpAddr) -> [u8; 6] {
    let tail = match ip_pair(ip, ip) {
        IpPair::V4(a, _) => a.octets(),
        IpPair::V6(a, _) => {
            let o = a.octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    [0x02, 0x00, tail[0], tail[1], tail[2], tail[3]]
}

/// The Ethernet frame that carries `roce` (a whole UDP payload, ICRC included) on `ep`.
pub fn ethernet_frame(ep: &Endpoints, roce: &[u8]) -> Result<Vec<u8>, PcapError> {
    let frame_err = |e: &dyn std::fmt::Display| PcapError::Frame(e.to_string());
    let ip = match ip_pair(ep.src.ip(), ep.dst.ip()) {
        IpPair::V4(s, d) => {
            // The builder fills in total length and checksum.
            let mut h = Ipv4Header::new(0, DEFAULT_TTL, IpNumber::UDP, s.octets(), d.octets())
                .map_err(|e| frame_err(&e))?;
            h.identification = 0;
            h.dont_fragment = true;
            h.more_fragments = false;
            IpHeaders::Ipv4(h, Default::default())
        }
        IpPair::V6(s, d) => IpHeaders::Ipv6(
            Ipv6Header {
                traffic_class: 0,
                flow_label: Ipv6FlowLabel::ZERO,
                payload_length: 0, // filled in by the builder
                next_header: IpNumber::UDP,
                hop_limit: DEFAULT_TTL,
                source: s.octets(),
                destination: d.octets(),
            },
            Default::default(),
        ),
    };
    let builder = PacketBuilder::ethernet2(mac_for(ep.src.ip()), mac_for(ep.dst.ip()))
        .ip(ip)
        .udp(ep.src.port(), ep.dst.port());
    let mut frame = Vec::with_capacity(builder.size(roce.len()));
    builder.write(&mut frame, roce).map_err(|e| frame_err(&e))?;
    Ok(frame)
}

/// Writes RoCEv2 packets to a classic pcap stream (link type Ethernet, microsecond stamps,
/// this machine's byte order like libpcap writes).
pub struct PcapWriter<W: Write> {
    inner: RawPcapWriter<W>,
}

impl<W: Write> PcapWriter<W> {
    /// Starts a capture by writing the pcap file header to `writer`.
    pub fn new(writer: W) -> Result<PcapWriter<W>, PcapError> {
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            endianness: Endianness::native(),
            ..Default::default()
        };
        Ok(PcapWriter {
            inner: RawPcapWriter::with_header(writer, header)?,
        })
    }

    /// Appends one packet: `roce` is the UDP payload as sent or received (BTH .. ICRC),
    /// `timestamp` the time since the Unix epoch.
    pub fn write_roce(
        &mut self,
        timestamp: Duration,
        ep: &Endpoints,
        roce: &[u8],
    ) -> Result<(), PcapError> {
        let frame = ethernet_frame(ep, roce)?;
        let len = u32::try_from(frame.len()).map_err(|e| PcapError::Frame(e.to_string()))?;
        self.inner
            .write_packet(&PcapPacket::new(timestamp, len, &frame))?;
        Ok(())
    }

    /// Ends the capture and returns the writer.
    pub fn into_inner(self) -> W {
        self.inner.into_writer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr};

    fn ep() -> Endpoints {
        Endpoints::new(
            SocketAddr::new(Ipv4Addr::new(127, 0, 0, 2).into(), 49152),
            SocketAddr::new(Ipv4Addr::new(127, 0, 0, 3).into(), 4791),
        )
    }

    #[test]
    fn ipv4_frame_matches_the_kernel_header() {
        let roce = [0xaau8; 40];
        let f = ethernet_frame(&ep(), &roce).unwrap();
        assert_eq!(f.len(), 14 + 20 + 8 + 40);
        assert_eq!(&f[..12], &[2, 0, 127, 0, 0, 3, 2, 0, 127, 0, 0, 2]);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        // The first captured datagram on `lo` of this size (see icrc.rs) read:
        // 45 00 00 3c 00 00 40 00 40 11 <csum> 7f 00 00 02 7f 00 00 03.
        let ip = &f[14..34];
        assert_eq!(
            &ip[..10],
            &[0x45, 0x00, 0x00, 0x44, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11]
        );
        assert_eq!(&ip[12..], &[127, 0, 0, 2, 127, 0, 0, 3]);
        // One's-complement sum over a header with a correct checksum is 0xffff.
        let sum = ip
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum::<u32>();
        let folded = (sum & 0xffff) + (sum >> 16);
        assert_eq!(folded, 0xffff);
        let udp = &f[34..42];
        assert_eq!(&udp[..6], &[0xc0, 0x00, 0x12, 0xb7, 0x00, 0x30]);
        assert_eq!(&f[42..], &roce[..]);
    }

    #[test]
    fn ipv6_frame() {
        let e = Endpoints::new(
            "[fe80::1]:1000".parse().unwrap(),
            "[fe80::2]:4791".parse().unwrap(),
        );
        let f = ethernet_frame(&e, &[0u8; 16]).unwrap();
        assert_eq!(&f[12..14], &[0x86, 0xdd]);
        assert_eq!(&f[14..22], &[0x60, 0, 0, 0, 0x00, 0x18, 0x11, 0x40]);
        assert_eq!(f.len(), 14 + 40 + 8 + 16);
        assert_eq!(mac_for(e.dst.ip()), [2, 0, 0, 0, 0, 2]);
    }

    #[test]
    fn pcap_stream_layout() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write_roce(Duration::new(1_700_000_000, 5_000), &ep(), &[0u8; 20])
            .unwrap();
        let bytes = w.into_inner();
        // 24-byte global header + 16-byte record header + frame.
        assert_eq!(bytes.len(), 24 + 16 + 14 + 20 + 8 + 20);
        let magic = u32::from_ne_bytes(bytes[..4].try_into().unwrap());
        assert_eq!(magic, 0xa1b2_c3d4);
        let linktype = u32::from_ne_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!(linktype, 1);
    }
}
