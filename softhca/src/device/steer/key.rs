//! The match key: a received frame's outer L2-L4 fields in the PRM's own match
//! layout (`fte_match_set_lyr_2_4`, [`prm::cmd::flow::matching::FteMatchSetLyr24`]).
//!
//! A frame is parsed once into a [`Key`]; a flow group's mask and an entry's value
//! are the same 64 bytes as the firmware received them, so matching is
//! `key & mask == value` byte for byte, and a group's lookup is one hash of the
//! masked key. Parsing follows what a ConnectX reports: `ethertype` is the type
//! after the VLAN tags (the L3 type), `first_*` are the outermost tag's fields,
//! `cvlan_tag`/`svlan_tag` say which kind it was; L4 fields are parsed only for an
//! unfragmented (or first-fragment) IPv4 packet, or IPv6 whose next header is TCP
//! or UDP directly.

use prm::bits::ViewMut;
use prm::cmd::flow::matching::{FteMatchSetLyr24 as L, IPV4_IN_UNION, IP_VERSION_4, IP_VERSION_6, L4_TYPE_TCP, L4_TYPE_UDP};

/// Bytes of one match set.
pub const KEY_BYTES: usize = L::BYTES;

/// A frame's (or a mask's, or a value's) outer header match set.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key(pub [u8; KEY_BYTES]);

impl Default for Key {
    fn default() -> Self {
        Key([0; KEY_BYTES])
    }
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Key(")?;
        for b in self.0.iter() {
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

impl Key {
    /// Copies the first [`KEY_BYTES`] of a mailbox's match set; None when short.
    pub fn from_bytes(b: &[u8]) -> Option<Key> {
        Some(Key(b.get(..KEY_BYTES)?.try_into().ok()?))
    }

    /// `self & mask`.
    #[inline]
    pub fn masked(&self, mask: &Key) -> Key {
        let mut out = [0u8; KEY_BYTES];
        for (o, (a, m)) in out.iter_mut().zip(self.0.iter().zip(mask.0.iter())) {
            *o = a & m;
        }
        Key(out)
    }

    /// Whether a bit outside `mask` is set (an entry value outside its group's criteria).
    pub fn outside(&self, mask: &Key) -> bool {
        self.0.iter().zip(mask.0.iter()).any(|(v, m)| v & !m != 0)
    }

    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }

    fn view(&mut self) -> ViewMut<'_, L> {
        ViewMut::new(&mut self.0).expect("a key is one match set")
    }

    /// Parses an Ethernet frame (from the destination MAC on, no FCS). Whatever is
    /// truncated stays zero, as the fields a ConnectX could not parse.
    pub fn parse(frame: &[u8]) -> Key {
        let mut k = Key::default();
        if frame.len() < 14 {
            return k;
        }
        let be16 = |at: usize| u16::from_be_bytes([frame[at], frame[at + 1]]);
        let mut v = k.view();
        v.set(L::dmac_47_16, u32::from_be_bytes(frame[0..4].try_into().unwrap()))
            .set(L::dmac_15_0, be16(4))
            .set(L::smac_47_16, u32::from_be_bytes(frame[6..10].try_into().unwrap()))
            .set(L::smac_15_0, be16(10));
        let mut at = 12;
        let mut ty = be16(at);
        let mut first = true;
        // Up to two tags (QinQ); the first one's fields are the `first_*` ones.
        for _ in 0..2 {
            if ty != 0x8100 && ty != 0x88a8 {
                break;
            }
            if frame.len() < at + 6 {
                return k;
            }
            if first {
                let tci = be16(at + 2);
                v.set(if ty == 0x8100 { L::cvlan_tag } else { L::svlan_tag }, true)
                    .set(L::first_prio, (tci >> 13) as u8)
                    .set(L::first_cfi, tci & 0x1000 != 0)
                    .set(L::first_vid, tci & 0xfff);
                first = false;
            }
            at += 4;
            ty = be16(at);
        }
        v.set(L::ethertype, ty);
        let l3 = at + 2;
        let (proto, l4) = match ty {
            0x0800 if frame.len() >= l3 + 20 && frame[l3] >> 4 == 4 => {
                let ihl = (frame[l3] & 0xf) as usize * 4;
                let frag = be16(l3 + 6);
                let more = frag & 0x2000 != 0;
                let off = frag & 0x1fff;
                v.set(L::ip_version, IP_VERSION_4)
                    .set(L::ipv4_ihl, frame[l3] & 0xf)
                    .set(L::ip_dscp, frame[l3 + 1] >> 2)
                    .set(L::ip_ecn, frame[l3 + 1] & 3)
                    .set(L::frag, more || off != 0)
                    .set(L::ttl_hoplimit, frame[l3 + 8])
                    .set(L::ip_protocol, frame[l3 + 9]);
                v.bytes_mut(L::src_ipv4_src_ipv6)[IPV4_IN_UNION].copy_from_slice(&frame[l3 + 12..l3 + 16]);
                v.bytes_mut(L::dst_ipv4_dst_ipv6)[IPV4_IN_UNION].copy_from_slice(&frame[l3 + 16..l3 + 20]);
                (frame[l3 + 9], if off == 0 && ihl >= 20 { Some(l3 + ihl) } else { None })
            }
            0x86dd if frame.len() >= l3 + 40 && frame[l3] >> 4 == 6 => {
                let tc = ((be16(l3) >> 4) & 0xff) as u8;
                v.set(L::ip_version, IP_VERSION_6)
                    .set(L::ip_dscp, tc >> 2)
                    .set(L::ip_ecn, tc & 3)
                    .set(L::ttl_hoplimit, frame[l3 + 7])
                    .set(L::ip_protocol, frame[l3 + 6]);
                v.bytes_mut(L::src_ipv4_src_ipv6).copy_from_slice(&frame[l3 + 8..l3 + 24]);
                v.bytes_mut(L::dst_ipv4_dst_ipv6).copy_from_slice(&frame[l3 + 24..l3 + 40]);
                (frame[l3 + 6], Some(l3 + 40))
            }
            _ => return k,
        };
        let Some(l4) = l4 else { return k };
        match proto {
            6 if frame.len() >= l4 + 20 => {
                v.set(L::l4_type, L4_TYPE_TCP)
                    .set(L::tcp_sport, be16(l4))
                    .set(L::tcp_dport, be16(l4 + 2))
                    .set(L::tcp_flags, be16(l4 + 12) & 0x1ff);
            }
            17 if frame.len() >= l4 + 8 => {
                v.set(L::l4_type, L4_TYPE_UDP).set(L::udp_sport, be16(l4)).set(L::udp_dport, be16(l4 + 2));
            }
            _ => {}
        }
        k
    }
}
