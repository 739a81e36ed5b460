//! A whole RoCEv2 UDP payload: BTH, the extension headers its opcode implies, payload, pad
//! to a 4-byte multiple, and the ICRC.
//!
//! ```text
//!  BTH | [DETH | XRCETH] [RETH] [AtomicETH] [AETH] [AtomicAckETH] [ImmDt] [IETH] | payload | pad | ICRC
//! ```
//!
//! [`RocePacket`] is the `Repr` of that whole: `parse` never panics on any input and says
//! why it rejected one; `emit` refuses a packet whose headers do not match its opcode, so
//! softhca cannot put a packet on the wire that a real HCA would drop as malformed.

use super::icrc::{Endpoints, ICRC_LEN};
use super::opcode::ExtHeaders;
use super::{aeth, atomic_ack_eth, atomic_eth, bth, deth, ieth, immdt, reth, xrceth, Error, Result};

/// One RoCEv2 packet, borrowing its payload.
///
/// Each `Option` holds the extension header of that kind; exactly the ones that
/// `bth.opcode.ext_headers()` names must be `Some`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RocePacket<'a> {
    /// Base transport header. `emit` ignores `bth.pad_count` and writes the pad the payload
    /// needs; `parse` reports what the packet carried.
    pub bth: bth::Repr,
    /// Datagram ETH (UD).
    pub deth: Option<deth::Repr>,
    /// XRC ETH (XRC requests).
    pub xrceth: Option<xrceth::Repr>,
    /// RDMA ETH (WRITE first/only, READ request).
    pub reth: Option<reth::Repr>,
    /// Atomic ETH (compare-swap, fetch-add).
    pub atomic_eth: Option<atomic_eth::Repr>,
    /// ACK ETH (acknowledges, READ responses first/last/only).
    pub aeth: Option<aeth::Repr>,
    /// Atomic ACK ETH (atomic acknowledge).
    pub atomic_ack_eth: Option<atomic_ack_eth::Repr>,
    /// Immediate data.
    pub immdt: Option<immdt::Repr>,
    /// Invalidate ETH.
    pub ieth: Option<ieth::Repr>,
    /// Payload, without pad.
    pub payload: &'a [u8],
}

/// Bytes of pad that bring `payload_len` to a multiple of four.
pub const fn pad_len(payload_len: usize) -> usize {
    (4 - payload_len % 4) % 4
}

/// The ICRC a packet carries in its last four bytes, if it has four bytes.
pub fn carried_icrc(buf: &[u8]) -> Option<u32> {
    let at = buf.len().checked_sub(ICRC_LEN)?;
    let b = &buf[at..];
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

impl<'a> RocePacket<'a> {
    /// A packet with no extension headers; set the ones the opcode needs.
    pub const fn new(bth: bth::Repr, payload: &'a [u8]) -> RocePacket<'a> {
        RocePacket {
            bth,
            deth: None,
            xrceth: None,
            reth: None,
            atomic_eth: None,
            aeth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            payload,
        }
    }

    /// The extension headers present.
    pub fn ext_headers(&self) -> ExtHeaders {
        let mut h = ExtHeaders::empty();
        h.set(ExtHeaders::DETH, self.deth.is_some());
        h.set(ExtHeaders::XRCETH, self.xrceth.is_some());
        h.set(ExtHeaders::RETH, self.reth.is_some());
        h.set(ExtHeaders::ATOMIC_ETH, self.atomic_eth.is_some());
        h.set(ExtHeaders::AETH, self.aeth.is_some());
        h.set(ExtHeaders::ATOMIC_ACK_ETH, self.atomic_ack_eth.is_some());
        h.set(ExtHeaders::IMMDT, self.immdt.is_some());
        h.set(ExtHeaders::IETH, self.ieth.is_some());
        h
    }

    /// Bytes of BTH and extension headers.
    pub fn header_len(&self) -> usize {
        bth::HEADER_LEN + self.ext_headers().byte_len()
    }

    /// Bytes of pad `emit` appends to the payload.
    pub fn pad_len(&self) -> usize {
        pad_len(self.payload.len())
    }

    /// Bytes `emit` writes: the whole UDP payload including the ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload.len() + self.pad_len() + ICRC_LEN
    }

    /// Checks the packet can be emitted: headers match the opcode, no payload where the opcode
    /// forbids one, every value fits its field.
    pub fn check(&self) -> Result<()> {
        let opcode = self.bth.opcode;
        if self.ext_headers() != opcode.ext_headers() {
            return Err(Error::HeaderMismatch(opcode));
        }
        if !opcode.has_payload() && !self.payload.is_empty() {
            return Err(Error::UnexpectedPayload {
                opcode,
                len: self.payload.len(),
            });
        }
        bth::Repr {
            pad_count: 0,
            ..self.bth
        }
        .check()?;
        if let Some(d) = &self.deth {
            d.check()?;
        }
        if let Some(a) = &self.aeth {
            a.check()?;
        }
        if let Some(x) = &self.xrceth {
            x.check()?;
        }
        Ok(())
    }

    /// Writes the packet, pad and ICRC for the flow `ep` into the front of `buf`, and returns
    /// the bytes written ([`RocePacket::buffer_len`]).
    pub fn emit(&self, buf: &mut [u8], ep: &Endpoints) -> Result<usize> {
        self.check()?;
        let len = self.buffer_len();
        if buf.len() < len {
            return Err(Error::Truncated {
                what: "output buffer",
                needed: len,
                available: buf.len(),
            });
        }
        let buf = &mut buf[..len];
        let pad = self.pad_len();
        let mut at = self.write_headers(buf, pad);
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();
        buf[at..at + pad].fill(0);
        at += pad;
        let crc = ep.icrc(&buf[..at]);
        buf[at..].copy_from_slice(&crc.to_le_bytes());
        Ok(len)
    }

    /// Writes only the BTH and extension headers into `buf`, for a packet whose payload
    /// (`payload_len` bytes, ignoring `self.payload`) travels separately, as `emit` would
    /// write them (pad count included). Returns the header length. The caller appends the
    /// payload, [`pad_len`] zero bytes and the ICRC (see `Endpoints::icrc_pieces`).
    pub fn emit_headers(&self, buf: &mut [u8], payload_len: usize) -> Result<usize> {
        let opcode = self.bth.opcode;
        if self.ext_headers() != opcode.ext_headers() {
            return Err(Error::HeaderMismatch(opcode));
        }
        if !opcode.has_payload() && payload_len != 0 {
            return Err(Error::UnexpectedPayload { opcode, len: payload_len });
        }
        let with = RocePacket { payload: &[], ..*self };
        with.check()?;
        let len = self.header_len();
        if buf.len() < len {
            return Err(Error::Truncated { what: "output buffer", needed: len, available: buf.len() });
        }
        Ok(self.write_headers(buf, pad_len(payload_len)))
    }

    /// Writes the BTH (with `pad` as its pad count) and the extension headers, in wire
    /// order (as documented on `ExtHeaders`), into the front of `buf`, which the caller
    /// has checked holds them. Returns the header length.
    fn write_headers(&self, buf: &mut [u8], pad: usize) -> usize {
        let bth = bth::Repr { pad_count: pad as u8, ..self.bth };
        bth.emit(&mut bth::Packet::new_unchecked(&mut buf[..bth::HEADER_LEN]));
        let mut at = bth::HEADER_LEN;
        macro_rules! put {
            // Each field of `ExtHeaders` is named after its header's module.
            ($($h:ident),*) => {$(
                if let Some(r) = &self.$h {
                    r.emit(&mut $h::Packet::new_unchecked(&mut buf[at..]));
                    at += $h::HEADER_LEN;
                }
            )*};
        }
        put!(deth, xrceth, reth, atomic_eth, aeth, atomic_ack_eth, immdt, ieth);
        at
    }

    /// [`RocePacket::emit`] into a new vector.
    pub fn to_vec(&self, ep: &Endpoints) -> Result<Vec<u8>> {
        let mut v = vec![0; self.buffer_len()];
        self.emit(&mut v, ep)?;
        Ok(v)
    }

    /// Parses a UDP payload received on the flow `ep`, checking its ICRC first (a corrupted
    /// packet is reported as such rather than as whatever its corruption looks like).
    pub fn parse(buf: &'a [u8], ep: &Endpoints) -> Result<RocePacket<'a>> {
        let body = Self::body(buf)?;
        let computed = ep.icrc(body);
        let received = carried_icrc(buf).unwrap_or_default();
        if computed != received {
            return Err(Error::BadIcrc { received, computed });
        }
        Self::parse_body(body)
    }

    /// Parses a UDP payload without checking its ICRC (for captures whose addresses are not
    /// known, or that were taken after the ICRC was checked).
    pub fn parse_without_icrc(buf: &'a [u8]) -> Result<RocePacket<'a>> {
        Self::parse_body(Self::body(buf)?)
    }

    /// Parses the headers of a packet whose payload travels apart from them (the same-host
    /// path, `crate::device::link`): `buf` holds exactly the BTH and the extension headers
    /// its opcode names (as [`RocePacket::emit_headers`] wrote them); `payload` is empty.
    pub fn parse_headers(buf: &'a [u8]) -> Result<RocePacket<'a>> {
        let (pkt, rest) = Self::parse_ext(buf)?;
        if !rest.is_empty() {
            return Err(Error::UnexpectedPayload { opcode: pkt.bth.opcode, len: rest.len() });
        }
        Ok(pkt)
    }

    /// Everything but the ICRC, once the packet is long enough to hold a BTH and an ICRC.
    fn body(buf: &[u8]) -> Result<&[u8]> {
        const MIN: usize = bth::HEADER_LEN + ICRC_LEN;
        if buf.len() < MIN {
            return Err(Error::Truncated {
                what: "RoCEv2 packet",
                needed: MIN,
                available: buf.len(),
            });
        }
        Ok(&buf[..buf.len() - ICRC_LEN])
    }

    fn parse_body(body: &'a [u8]) -> Result<RocePacket<'a>> {
        let (mut pkt, rest) = Self::parse_ext(body)?;
        let bth = pkt.bth;
        if !bth.opcode.has_payload() && !rest.is_empty() {
            return Err(Error::UnexpectedPayload {
                opcode: bth.opcode,
                len: rest.len(),
            });
        }
        let pad = usize::from(bth.pad_count);
        let Some(payload_len) = rest.len().checked_sub(pad) else {
            return Err(Error::BadPadCount {
                pad: bth.pad_count,
                available: rest.len(),
            });
        };
        pkt.payload = &rest[..payload_len];
        Ok(pkt)
    }

    /// The BTH and the extension headers at the front of `body`, and what follows them.
    fn parse_ext(body: &'a [u8]) -> Result<(RocePacket<'a>, &'a [u8])> {
        let bth = bth::Repr::parse(&bth::Packet::new_checked(body)?)?;
        let ext = bth.opcode.ext_headers();
        let mut pkt = RocePacket::new(bth, &[]);
        let mut rest = &body[bth::HEADER_LEN..];

        // Each step parses one header from the front of `rest` and moves past it.
        macro_rules! take {
            ($flag:expr, $module:ident, $slot:ident) => {
                if ext.contains($flag) {
                    let p = $module::Packet::new_checked(rest)?;
                    pkt.$slot = Some($module::Repr::parse(&p)?);
                    rest = &rest[$module::HEADER_LEN..];
                }
            };
        }
        take!(ExtHeaders::DETH, deth, deth);
        take!(ExtHeaders::XRCETH, xrceth, xrceth);
        take!(ExtHeaders::RETH, reth, reth);
        take!(ExtHeaders::ATOMIC_ETH, atomic_eth, atomic_eth);
        take!(ExtHeaders::AETH, aeth, aeth);
        take!(ExtHeaders::ATOMIC_ACK_ETH, atomic_ack_eth, atomic_ack_eth);
        take!(ExtHeaders::IMMDT, immdt, immdt);
        take!(ExtHeaders::IETH, ieth, ieth);
        Ok((pkt, rest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, IethRepr, ImmDtRepr, Opcode,
        RethRepr, Syndrome,
    };
    use rand::{rngs::SmallRng, Rng, SeedableRng};
    use std::net::{IpAddr, Ipv6Addr, SocketAddr};

    fn v4(src: [u8; 4], sport: u16, dst: [u8; 4]) -> Endpoints {
        Endpoints::new(
            SocketAddr::new(IpAddr::from(src), sport),
            SocketAddr::new(IpAddr::from(dst), 4791),
        )
    }

    /// A packet of `opcode` with every header it needs, filled with recognisable values.
    fn sample(opcode: Opcode, payload: &[u8]) -> RocePacket<'_> {
        let mut p = RocePacket::new(BthRepr::new(opcode, 0x00ab_cdef, 0x0012_3456), payload);
        let ext = opcode.ext_headers();
        let some = |f| ext.contains(f);
        p.deth = some(ExtHeaders::DETH).then_some(DethRepr {
            qkey: 0x1111_1111,
            src_qpn: 0x99,
        });
        p.xrceth = some(ExtHeaders::XRCETH).then_some(crate::wire::XrcEthRepr { xrc_srqn: 0x2a17 });
        p.reth = some(ExtHeaders::RETH).then_some(RethRepr {
            va: 0x7fff_0000_1000,
            rkey: 0xabc,
            dma_len: 4096,
        });
        p.atomic_eth = some(ExtHeaders::ATOMIC_ETH).then_some(AtomicEthRepr {
            va: 0x1000,
            rkey: 7,
            swap_add: 1,
            compare: 2,
        });
        p.aeth = some(ExtHeaders::AETH).then_some(AethRepr {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 3,
        });
        p.atomic_ack_eth = some(ExtHeaders::ATOMIC_ACK_ETH).then_some(AtomicAckEthRepr {
            orig_data: u64::MAX,
        });
        p.immdt = some(ExtHeaders::IMMDT).then_some(ImmDtRepr { imm: 0x0102_0304 });
        p.ieth = some(ExtHeaders::IETH).then_some(IethRepr { rkey: 0x55 });
        if !opcode.has_payload() {
            p.payload = &[];
        }
        p
    }

    // Golden packets built by scapy 2.8.0 (scapy.contrib.roce), whole UDP payloads with ICRC.
    // ACK: IP 127.0.0.3 -> 127.0.0.2, id 0, DF; UDP 50000 -> 4791;
    //      BTH(opcode=0x11, dqpn=0xabc, psn=1) / AETH(syndrome=0x1f, msn=0x102)
    const SCAPY_ACK: &str = "1100ffff00000abc000000011f000102f41f6f80";
    // SEND ONLY: IP 127.0.0.2 -> 127.0.0.3; UDP 49152 -> 4791;
    //      BTH(opcode=4, solicited=1, padcount=3, dqpn=0x11, psn=7, ackreq=1) / "hello" + 3 pad
    const SCAPY_SEND5: &str = "04b0ffff000000118000000768656c6c6f000000e426dd04";
    // UD SEND ONLY over IPv6: fe80::1 -> fe80::2; UDP 49153 -> 4791;
    //      BTH(opcode=0x64, dqpn=0xffffff, psn=0x42, pkey=0x8001)
    //      / DETH(qkey 0x11111111, src QP 0x123) / "datagram"
    const SCAPY_UD6: &str = "6400800100ffffff000000421111111100000123646174616772616da90a656e";

    fn unhex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn emit_matches_scapy_ack() {
        let ep = v4([127, 0, 0, 3], 50000, [127, 0, 0, 2]);
        let mut p = RocePacket::new(BthRepr::new(Opcode::RcAcknowledge, 0xabc, 1), &[]);
        p.aeth = Some(AethRepr {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 0x102,
        });
        let bytes = p.to_vec(&ep).unwrap();
        assert_eq!(bytes, unhex(SCAPY_ACK));
        assert_eq!(RocePacket::parse(&bytes, &ep), Ok(p));
    }

    #[test]
    fn emit_matches_scapy_send_with_pad() {
        let ep = v4([127, 0, 0, 2], 49152, [127, 0, 0, 3]);
        let mut bth = BthRepr::new(Opcode::RcSendOnly, 0x11, 7);
        bth.solicited = true;
        bth.ack_req = true;
        let p = RocePacket::new(bth, b"hello");
        assert_eq!(p.pad_len(), 3);
        assert_eq!(p.buffer_len(), 12 + 5 + 3 + 4);
        let bytes = p.to_vec(&ep).unwrap();
        assert_eq!(bytes, unhex(SCAPY_SEND5));
        let parsed = RocePacket::parse(&bytes, &ep).unwrap();
        assert_eq!(parsed.payload, b"hello");
        assert_eq!(parsed.bth.pad_count, 3);
        assert_eq!(
            parsed,
            RocePacket {
                bth: BthRepr {
                    pad_count: 3,
                    ..bth
                },
                ..p
            }
        );
    }

    #[test]
    fn emit_matches_scapy_ud_over_ipv6() {
        let ip = |s: &str| IpAddr::V6(s.parse::<Ipv6Addr>().unwrap());
        let ep = Endpoints::new(
            SocketAddr::new(ip("fe80::1"), 49153),
            SocketAddr::new(ip("fe80::2"), 4791),
        );
        assert!(!ep.is_ipv4());
        let mut bth = BthRepr::new(Opcode::UdSendOnly, 0xff_ffff, 0x42);
        bth.pkey = 0x8001;
        let mut p = RocePacket::new(bth, b"datagram");
        p.deth = Some(DethRepr {
            qkey: 0x1111_1111,
            src_qpn: 0x123,
        });
        let bytes = p.to_vec(&ep).unwrap();
        assert_eq!(bytes, unhex(SCAPY_UD6));
        assert_eq!(RocePacket::parse(&bytes, &ep), Ok(p));
    }

    #[test]
    fn every_opcode_round_trips() {
        let ep = v4([127, 0, 0, 5], 40000, [127, 0, 0, 6]);
        for opcode in Opcode::ALL {
            for len in [0usize, 1, 2, 3, 4, 7, 256] {
                let data: Vec<u8> = (0..len as u8).collect();
                let p = sample(opcode, &data);
                let bytes = p.to_vec(&ep).unwrap();
                assert_eq!(bytes.len() % 4, 0, "{opcode:?}");
                assert_eq!(bytes.len(), p.buffer_len());
                let back = RocePacket::parse(&bytes, &ep).unwrap();
                let expect_pad = pad_len(p.payload.len()) as u8;
                assert_eq!(back.bth.pad_count, expect_pad);
                assert_eq!(
                    back,
                    RocePacket {
                        bth: BthRepr {
                            pad_count: expect_pad,
                            ..p.bth
                        },
                        ..p
                    },
                    "{opcode:?} len {len}"
                );
            }
        }
    }

    #[test]
    fn header_offsets_follow_wire_order() {
        // RDMA WRITE ONLY WITH IMM: BTH, RETH at 12, ImmDt at 28, payload at 32.
        let ep = v4([1, 1, 1, 1], 1, [2, 2, 2, 2]);
        let p = sample(Opcode::RcRdmaWriteOnlyWithImm, b"abcd");
        let b = p.to_vec(&ep).unwrap();
        assert_eq!(&b[12..20], &0x7fff_0000_1000u64.to_be_bytes());
        assert_eq!(&b[28..32], &[1, 2, 3, 4]);
        assert_eq!(&b[32..36], b"abcd");
        // ATOMIC ACK: AETH at 12, AtomicAckETH at 16.
        let b = sample(Opcode::RcAtomicAcknowledge, &[])
            .to_vec(&ep)
            .unwrap();
        assert_eq!(b[12], 0x1f);
        assert_eq!(&b[16..24], &[0xff; 8]);
        assert_eq!(b.len(), 12 + 4 + 8 + 4);
        // UD SEND ONLY WITH IMM: DETH at 12, ImmDt at 20.
        let b = sample(Opcode::UdSendOnlyWithImm, b"x").to_vec(&ep).unwrap();
        assert_eq!(&b[12..16], &[0x11; 4]);
        assert_eq!(&b[20..24], &[1, 2, 3, 4]);
        assert_eq!(b[24], b'x');
    }

    #[test]
    fn bad_icrc_is_reported() {
        let ep = v4([127, 0, 0, 3], 50000, [127, 0, 0, 2]);
        let good = unhex(SCAPY_ACK);
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x02;
            let r = RocePacket::parse(&b, &ep);
            if i == 4 {
                // Byte 4 (FECN, BECN, Resv6a) is variant: the ICRC does not cover it.
                assert!(r.is_ok(), "{r:?}");
            } else {
                assert!(matches!(r, Err(Error::BadIcrc { .. })), "byte {i}: {r:?}");
            }
        }
        // The wrong flow also fails.
        assert!(matches!(
            RocePacket::parse(&good, &ep.reversed()),
            Err(Error::BadIcrc { .. })
        ));
        // BECN set in flight: still valid.
        let mut b = good.clone();
        b[4] |= 0x40;
        assert!(RocePacket::parse(&b, &ep).unwrap().bth.becn);
    }

    #[test]
    fn truncation_at_every_length_is_an_error() {
        let ep = v4([9, 9, 9, 9], 9, [8, 8, 8, 8]);
        for opcode in Opcode::ALL {
            let bytes = sample(opcode, b"payload!").to_vec(&ep).unwrap();
            for n in 0..bytes.len() {
                assert!(
                    RocePacket::parse(&bytes[..n], &ep).is_err(),
                    "{opcode:?} {n}"
                );
                let r = RocePacket::parse_without_icrc(&bytes[..n]);
                // Without the ICRC check a cut packet can still be well-formed (a shorter
                // payload), but never when it is cut inside the headers.
                if n < 12 + opcode.ext_headers_len() + ICRC_LEN {
                    assert!(
                        matches!(r, Err(Error::Truncated { .. })),
                        "{opcode:?} {n}: {r:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn structural_errors() {
        let ep = v4([127, 0, 0, 2], 49152, [127, 0, 0, 3]);
        // Recompute the ICRC after tampering so that the structural check is what fails.
        let reseal = |mut b: Vec<u8>| {
            let n = b.len() - 4;
            let crc = ep.icrc(&b[..n]);
            b[n..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let send = unhex(SCAPY_SEND5);
        let mut b = send.clone();
        b[0] = 0x15;
        assert_eq!(
            RocePacket::parse(&reseal(b), &ep),
            Err(Error::BadOpcode(0x15))
        );
        let mut b = send.clone();
        b[0] = 0x30; // reserved in the UC column (UC has SEND and WRITE only)
        assert_eq!(
            RocePacket::parse(&reseal(b), &ep),
            Err(Error::BadOpcode(0x30))
        );
        let mut b = send.clone();
        b[0] = 0x24; // UC SEND ONLY: the same headers as RC's
        assert_eq!(RocePacket::parse(&reseal(b), &ep).map(|p| p.bth.opcode), Ok(Opcode::UcSendOnly));
        let mut b = send.clone();
        b[1] = (b[1] & 0xf0) | 0x02;
        assert_eq!(
            RocePacket::parse(&reseal(b), &ep),
            Err(Error::BadVersion(2))
        );
        // ACK with pad count 1 but nothing after the AETH.
        let mut b = unhex(SCAPY_ACK);
        b[1] |= 0x10;
        let ack_ep = v4([127, 0, 0, 3], 50000, [127, 0, 0, 2]);
        let n = b.len() - 4;
        let crc = ack_ep.icrc(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            RocePacket::parse(&b, &ack_ep),
            Err(Error::BadPadCount {
                pad: 1,
                available: 0
            })
        );
        // ACK followed by stray bytes.
        let mut b = unhex(SCAPY_ACK);
        b.splice(16..16, [0u8; 4]);
        let n = b.len() - 4;
        let crc = ack_ep.icrc(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            RocePacket::parse(&b, &ack_ep),
            Err(Error::UnexpectedPayload {
                opcode: Opcode::RcAcknowledge,
                len: 4
            })
        );
        // Reserved AETH syndrome.
        let mut b = unhex(SCAPY_ACK);
        b[12] = 0x40;
        let n = b.len() - 4;
        let crc = ack_ep.icrc(&b[..n]);
        b[n..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            RocePacket::parse(&b, &ack_ep),
            Err(Error::BadSyndrome(0x40))
        );
    }

    #[test]
    fn emit_refuses_inconsistent_packets() {
        let ep = v4([1, 2, 3, 4], 5, [6, 7, 8, 9]);
        let mut buf = [0u8; 128];
        // Missing RETH.
        let p = RocePacket::new(BthRepr::new(Opcode::RcRdmaWriteFirst, 1, 1), b"x");
        assert_eq!(
            p.emit(&mut buf, &ep),
            Err(Error::HeaderMismatch(Opcode::RcRdmaWriteFirst))
        );
        // Extra AETH.
        let mut p = sample(Opcode::RcSendOnly, b"x");
        p.aeth = Some(AethRepr {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 0,
        });
        assert!(matches!(
            p.emit(&mut buf, &ep),
            Err(Error::HeaderMismatch(_))
        ));
        // Payload on a READ request.
        let mut p = sample(Opcode::RcRdmaReadRequest, &[]);
        p.payload = b"no";
        assert!(matches!(
            p.emit(&mut buf, &ep),
            Err(Error::UnexpectedPayload { len: 2, .. })
        ));
        // PSN over 24 bits.
        let mut p = sample(Opcode::RcSendOnly, b"x");
        p.bth.psn = 1 << 24;
        assert!(matches!(
            p.emit(&mut buf, &ep),
            Err(Error::FieldOverflow { .. })
        ));
        // Short output buffer.
        let p = sample(Opcode::RcSendOnly, b"x");
        assert_eq!(
            p.emit(&mut buf[..19], &ep),
            Err(Error::Truncated {
                what: "output buffer",
                needed: 20,
                available: 19
            })
        );
        // A stale pad count in the BTH is ignored, not an error.
        let mut p = sample(Opcode::RcSendOnly, b"xyzw");
        p.bth.pad_count = 3;
        assert_eq!(p.emit(&mut buf, &ep), Ok(20));
        assert_eq!(buf[1] & 0x30, 0);
    }

    /// An XRC SEND ONLY of 4 bytes, byte by byte: BTH (opcode 0xa4), then the XRCETH
    /// (reserved byte, XRC SRQ 0x2a17) where the IBA puts it, then the payload; an XRC
    /// RDMA WRITE ONLY has the XRCETH ahead of its RETH; an XRC ACK has none.
    #[test]
    fn xrceth_follows_the_bth() {
        let ep = v4([127, 0, 0, 1], 4791, [127, 0, 0, 2]);
        let mut p = RocePacket::new(BthRepr::new(Opcode::XrcSendOnly, 0x12, 0x34), &[1, 2, 3, 4]);
        p.xrceth = Some(crate::wire::XrcEthRepr { xrc_srqn: 0x2a17 });
        let b = p.to_vec(&ep).unwrap();
        assert_eq!(b[0], 0xa4);
        assert_eq!(&b[12..16], &[0x00, 0x00, 0x2a, 0x17]);
        assert_eq!(&b[16..20], &[1, 2, 3, 4]);
        assert_eq!(RocePacket::parse(&b, &ep).unwrap(), p);
        let w = sample(Opcode::XrcRdmaWriteOnly, &[9; 8]);
        let b = w.to_vec(&ep).unwrap();
        assert_eq!((&b[12..16], b[16..24] == 0x7fff_0000_1000u64.to_be_bytes()), (&[0, 0, 0x2a, 0x17][..], true));
        assert_eq!(Opcode::XrcAcknowledge.ext_headers(), ExtHeaders::AETH);
        let mut bare = p;
        bare.xrceth = None;
        assert_eq!(bare.to_vec(&ep), Err(crate::wire::Error::HeaderMismatch(Opcode::XrcSendOnly)));
    }

    #[test]
    fn random_input_never_panics() {
        let ep = v4([127, 0, 0, 1], 1234, [127, 0, 0, 2]);
        let mut rng = SmallRng::seed_from_u64(0x5eed);
        let mut ok = 0;
        for i in 0..20_000 {
            let len = rng.gen_range(0..96);
            let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if len > 1 && i % 2 == 0 {
                // Steer half the inputs past the opcode and version checks.
                b[0] = Opcode::ALL[rng.gen_range(0..Opcode::ALL.len())].to_byte();
                b[1] &= 0xf0;
            }
            if len >= 16 && i % 4 == 0 {
                let n = b.len() - 4;
                let crc = ep.icrc(&b[..n]);
                b[n..].copy_from_slice(&crc.to_le_bytes());
            }
            if RocePacket::parse(&b, &ep).is_ok() {
                ok += 1;
            }
            let _ = RocePacket::parse_without_icrc(&b);
        }
        assert!(
            ok > 100,
            "only {ok} random packets parsed; steering is broken"
        );
    }

    #[test]
    fn headers_and_pieces_equal_emit() {
        let ep = v4([127, 0, 0, 5], 4791, [127, 0, 0, 6]);
        for opcode in Opcode::ALL {
            for len in [0usize, 1, 3, 4, 7, 256] {
                let data: Vec<u8> = (0..len as u8).collect();
                let p = sample(opcode, &data);
                let whole = p.to_vec(&ep).unwrap();
                let mut h = [0u8; 64];
                let n = p.emit_headers(&mut h, p.payload.len()).unwrap();
                let pad = [0u8; 3];
                let pad = &pad[..pad_len(p.payload.len())];
                let crc = ep.icrc_pieces(&[&h[..n], p.payload, pad]);
                let mut v = h[..n].to_vec();
                v.extend_from_slice(p.payload);
                v.extend_from_slice(pad);
                v.extend_from_slice(&crc.to_le_bytes());
                assert_eq!(v, whole, "{opcode:?} len {len}");
            }
        }
        let ack = sample(Opcode::RcAcknowledge, &[]);
        assert!(ack.emit_headers(&mut [0u8; 64], 4).is_err(), "no payload allowed");
        assert!(ack.emit_headers(&mut [0u8; 4], 0).is_err(), "short buffer");
    }
}
