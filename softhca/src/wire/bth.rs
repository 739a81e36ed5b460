//! Base Transport Header (12 bytes), the first header of every RoCEv2 payload.
//!
//! ```text
//!  byte 0   opcode
//!  byte 1   SE(7) M(6) PadCnt(5:4) TVer(3:0)
//!  2..4     P_Key
//!  byte 4   FECN(7) BECN(6) Resv6a(5:0)     <- variant: masked to ones for the ICRC
//!  5..8     destination QP (24 bits)
//!  byte 8   AckReq(7) Resv7(6:0)
//!  9..12    PSN (24 bits)
//! ```

use super::{be, Error, Opcode, Result, U24_MAX};

mod field {
    use core::ops::Range;
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1;
    pub const PKEY: Range<usize> = 2..4;
    pub const FECN_BECN: usize = 4;
    pub const DEST_QPN: Range<usize> = 5..8;
    pub const ACK_REQ: usize = 8;
    pub const PSN: Range<usize> = 9..12;
}

/// Length of a BTH in bytes.
pub const HEADER_LEN: usize = field::PSN.end;
/// Offset of the byte holding FECN, BECN and Resv6a; the ICRC treats it as all ones.
pub const VARIANT_BYTE: usize = field::FECN_BECN;

const SE: u8 = 0x80;
const MIG_REQ: u8 = 0x40;
const PAD_SHIFT: u8 = 4;
const PAD_MASK: u8 = 0x3;
const TVER_MASK: u8 = 0x0f;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const RESV6A: u8 = 0x3f;
const ACK_REQ: u8 = 0x80;
const RESV7: u8 = 0x7f;

/// The default partition key (full membership of the default partition).
pub const DEFAULT_PKEY: u16 = 0xffff;

header_view!("BTH", "a");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The raw opcode byte (see [`Opcode::try_from`]).
    pub fn opcode(&self) -> u8 {
        self.buffer.as_ref()[field::OPCODE]
    }

    /// Solicited Event: the responder should raise a completion event.
    pub fn solicited(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & SE != 0
    }

    /// MigReq: path migration state.
    pub fn mig_req(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & MIG_REQ != 0
    }

    /// PadCnt: bytes (0..=3) appended to the payload to reach a 4-byte multiple.
    pub fn pad_count(&self) -> u8 {
        (self.buffer.as_ref()[field::FLAGS] >> PAD_SHIFT) & PAD_MASK
    }

    /// TVer: transport header version, 0 for every IBA release so far.
    pub fn tver(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] & TVER_MASK
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        be::u16(&self.buffer.as_ref()[field::PKEY])
    }

    /// Forward explicit congestion notification.
    pub fn fecn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & FECN != 0
    }

    /// Backward explicit congestion notification.
    pub fn becn(&self) -> bool {
        self.buffer.as_ref()[field::FECN_BECN] & BECN != 0
    }

    /// The six reserved bits after FECN/BECN.
    pub fn resv6a(&self) -> u8 {
        self.buffer.as_ref()[field::FECN_BECN] & RESV6A
    }

    /// Destination queue pair number (24 bits).
    pub fn dest_qpn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::DEST_QPN])
    }

    /// AckReq: the requester asks for an acknowledge of this packet.
    pub fn ack_req(&self) -> bool {
        self.buffer.as_ref()[field::ACK_REQ] & ACK_REQ != 0
    }

    /// The seven reserved bits after AckReq.
    pub fn resv7(&self) -> u8 {
        self.buffer.as_ref()[field::ACK_REQ] & RESV7
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::PSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn set_bits(&mut self, at: usize, mask: u8, value: u8) {
        let b = &mut self.buffer.as_mut()[at];
        *b = (*b & !mask) | (value & mask);
    }

    /// Sets the opcode byte.
    pub fn set_opcode(&mut self, value: u8) {
        self.buffer.as_mut()[field::OPCODE] = value;
    }

    /// Sets SE.
    pub fn set_solicited(&mut self, value: bool) {
        self.set_bits(field::FLAGS, SE, if value { SE } else { 0 });
    }

    /// Sets MigReq.
    pub fn set_mig_req(&mut self, value: bool) {
        self.set_bits(field::FLAGS, MIG_REQ, if value { MIG_REQ } else { 0 });
    }

    /// Sets PadCnt (low two bits of `value`).
    pub fn set_pad_count(&mut self, value: u8) {
        self.set_bits(field::FLAGS, PAD_MASK << PAD_SHIFT, value << PAD_SHIFT);
    }

    /// Sets TVer (low four bits of `value`).
    pub fn set_tver(&mut self, value: u8) {
        self.set_bits(field::FLAGS, TVER_MASK, value);
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, value: u16) {
        be::put_u16(&mut self.buffer.as_mut()[field::PKEY], value);
    }

    /// Sets FECN.
    pub fn set_fecn(&mut self, value: bool) {
        self.set_bits(field::FECN_BECN, FECN, if value { FECN } else { 0 });
    }

    /// Sets BECN.
    pub fn set_becn(&mut self, value: bool) {
        self.set_bits(field::FECN_BECN, BECN, if value { BECN } else { 0 });
    }

    /// Sets Resv6a (low six bits of `value`).
    pub fn set_resv6a(&mut self, value: u8) {
        self.set_bits(field::FECN_BECN, RESV6A, value);
    }

    /// Sets the destination QPN (low 24 bits of `value`).
    pub fn set_dest_qpn(&mut self, value: u32) {
        be::put_u24(&mut self.buffer.as_mut()[field::DEST_QPN], value);
    }

    /// Sets AckReq.
    pub fn set_ack_req(&mut self, value: bool) {
        self.set_bits(field::ACK_REQ, ACK_REQ, if value { ACK_REQ } else { 0 });
    }

    /// Sets Resv7 (low seven bits of `value`).
    pub fn set_resv7(&mut self, value: u8) {
        self.set_bits(field::ACK_REQ, RESV7, value);
    }

    /// Sets the PSN (low 24 bits of `value`).
    pub fn set_psn(&mut self, value: u32) {
        be::put_u24(&mut self.buffer.as_mut()[field::PSN], value);
    }
}

/// The meaning of a BTH. TVer is absent because only version 0 exists: `parse` rejects any
/// other and `emit` writes 0. Reserved bits are ignored on parse and written as zero, as the
/// IBA asks of senders and receivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Opcode.
    pub opcode: Opcode,
    /// SE.
    pub solicited: bool,
    /// MigReq.
    pub mig_req: bool,
    /// PadCnt (0..=3). [`super::RocePacket::emit`] derives it from the payload length.
    pub pad_count: u8,
    /// P_Key.
    pub pkey: u16,
    /// FECN.
    pub fecn: bool,
    /// BECN.
    pub becn: bool,
    /// Destination QPN (24 bits).
    pub dest_qpn: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN (24 bits).
    pub psn: u32,
}

impl Repr {
    /// A BTH with the default P_Key and every flag clear.
    pub const fn new(opcode: Opcode, dest_qpn: u32, psn: u32) -> Repr {
        Repr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qpn,
            ack_req: false,
            psn,
        }
    }

    /// Reads and validates a BTH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        let opcode = Opcode::try_from(packet.opcode())?;
        if packet.tver() != 0 {
            return Err(Error::BadVersion(packet.tver()));
        }
        Ok(Repr {
            opcode,
            solicited: packet.solicited(),
            mig_req: packet.mig_req(),
            pad_count: packet.pad_count(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qpn: packet.dest_qpn(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// Checks every value fits its field, so that `emit` does not silently truncate.
    pub fn check(&self) -> Result<()> {
        if self.dest_qpn > U24_MAX {
            return Err(Error::FieldOverflow {
                field: "BTH dest QPN",
                value: self.dest_qpn.into(),
            });
        }
        if self.psn > U24_MAX {
            return Err(Error::FieldOverflow {
                field: "BTH PSN",
                value: self.psn.into(),
            });
        }
        if self.pad_count > PAD_MASK {
            return Err(Error::FieldOverflow {
                field: "BTH pad count",
                value: self.pad_count.into(),
            });
        }
        Ok(())
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes every BTH byte. Values wider than their field are truncated; call
    /// [`Repr::check`] first where that matters.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_opcode(self.opcode.to_byte());
        packet.buffer.as_mut()[field::FLAGS] = 0;
        packet.set_solicited(self.solicited);
        packet.set_mig_req(self.mig_req);
        packet.set_pad_count(self.pad_count);
        packet.set_tver(0);
        packet.set_pkey(self.pkey);
        packet.buffer.as_mut()[field::FECN_BECN] = 0;
        packet.set_fecn(self.fecn);
        packet.set_becn(self.becn);
        packet.set_dest_qpn(self.dest_qpn);
        packet.buffer.as_mut()[field::ACK_REQ] = 0;
        packet.set_ack_req(self.ack_req);
        packet.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RDMA WRITE ONLY, SE, pad 3, P_Key 0xffff, BECN, QPN 0x123456, AckReq, PSN 0xabcdef.
    // Byte 1 = SE(0x80) | pad 3 << 4 (0x30) = 0xb0; byte 4 = BECN = 0x40; byte 8 = 0x80.
    static GOLDEN: [u8; 12] = [
        0x0a, 0xb0, 0xff, 0xff, 0x40, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef,
    ];

    fn golden_repr() -> Repr {
        Repr {
            opcode: Opcode::RcRdmaWriteOnly,
            solicited: true,
            mig_req: false,
            pad_count: 3,
            pkey: 0xffff,
            fecn: false,
            becn: true,
            dest_qpn: 0x12_3456,
            ack_req: true,
            psn: 0xab_cdef,
        }
    }

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.opcode(), 0x0a);
        assert!(p.solicited());
        assert!(!p.mig_req());
        assert_eq!(p.pad_count(), 3);
        assert_eq!(p.tver(), 0);
        assert_eq!(p.pkey(), 0xffff);
        assert!(!p.fecn());
        assert!(p.becn());
        assert_eq!(p.resv6a(), 0);
        assert_eq!(p.dest_qpn(), 0x12_3456);
        assert!(p.ack_req());
        assert_eq!(p.resv7(), 0);
        assert_eq!(p.psn(), 0xab_cdef);
    }

    #[test]
    fn construct() {
        let mut buf = [0xa5u8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_opcode(0x0a);
        p.set_solicited(true);
        p.set_mig_req(false);
        p.set_pad_count(3);
        p.set_tver(0);
        p.set_pkey(0xffff);
        p.set_fecn(false);
        p.set_becn(true);
        p.set_resv6a(0);
        p.set_dest_qpn(0x12_3456);
        p.set_ack_req(true);
        p.set_resv7(0);
        p.set_psn(0xab_cdef);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(golden_repr()));
    }

    #[test]
    fn emit() {
        let mut buf = [0xffu8; 12];
        let repr = golden_repr();
        assert_eq!(repr.buffer_len(), 12);
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated {
                    what: "BTH",
                    needed: 12,
                    available: n
                })
            );
        }
        // A longer buffer is fine: the BTH is a prefix.
        let long = [GOLDEN.as_slice(), &[1, 2, 3]].concat();
        assert!(Packet::new_checked(&long[..]).is_ok());
    }

    #[test]
    fn parse_rejects_bad_opcode_and_version() {
        let mut b = GOLDEN;
        b[0] = 0x15;
        let p = Packet::new_unchecked(&b[..]);
        assert_eq!(Repr::parse(&p), Err(Error::BadOpcode(0x15)));
        let mut b = GOLDEN;
        b[1] |= 0x01;
        let p = Packet::new_unchecked(&b[..]);
        assert_eq!(Repr::parse(&p), Err(Error::BadVersion(1)));
    }

    #[test]
    fn reserved_bits_ignored_on_parse_and_zeroed_on_emit() {
        let mut b = GOLDEN;
        b[4] |= 0x3f;
        b[8] |= 0x7f;
        let p = Packet::new_unchecked(&b[..]);
        assert_eq!(p.resv6a(), 0x3f);
        assert_eq!(p.resv7(), 0x7f);
        let repr = Repr::parse(&p).unwrap();
        assert_eq!(repr, golden_repr());
        let mut out = [0u8; 12];
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, GOLDEN);
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut buf = [0xffu8; 12];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_pad_count(0);
        assert_eq!(p.tver(), 0xf);
        assert!(p.solicited() && p.mig_req());
        p.set_dest_qpn(0x0100_0002); // bit 24 dropped
        assert_eq!(p.dest_qpn(), 2);
        assert_eq!(p.resv6a(), 0x3f);
        assert!(p.fecn() && p.becn());
    }

    #[test]
    fn check_rejects_wide_values() {
        let mut r = golden_repr();
        assert_eq!(r.check(), Ok(()));
        r.psn = 0x100_0000;
        assert!(matches!(r.check(), Err(Error::FieldOverflow { .. })));
        let mut r = golden_repr();
        r.dest_qpn = 0x100_0000;
        assert!(matches!(r.check(), Err(Error::FieldOverflow { .. })));
        let mut r = golden_repr();
        r.pad_count = 4;
        assert!(matches!(r.check(), Err(Error::FieldOverflow { .. })));
    }
}
