//! The BTH opcode byte: which transport a packet belongs to, what operation it performs, and
//! therefore which extension headers follow the BTH.
//!
//! The IBA splits the byte in two: the top three bits name the transport service (RC, UC, RD,
//! UD, and two later additions, CNP and XRC) and the low five bits the operation within it.
//! [`Opcode`] lists the opcodes of RC, UC, UD and XRC (XRC's are RC's operations with
//! transport bits 101, its requests with an XRCETH); anything else is rejected by
//! `Opcode::try_from` so that a receive path drops it the way an HCA drops an opcode its
//! QP type does not allow. (XRC packets reach XRC QPs only: requests the target, responses
//! the initiator; see `crate::device`'s delivery.)

use bitflags::bitflags;

use super::Error;

/// The transport service named by an opcode byte's top three bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected (`000`).
    Rc,
    /// Unreliable Connected (`001`).
    Uc,
    /// Reliable Datagram (`010`).
    Rd,
    /// Unreliable Datagram (`011`).
    Ud,
    /// Congestion Notification Packet (`100`, RoCEv2 annex).
    Cnp,
    /// Extended Reliable Connected (`101`).
    Xrc,
    /// `110` and `111`: reserved for manufacturers.
    Vendor,
}

impl Transport {
    /// Classifies any opcode byte, known to softhca or not.
    pub const fn of_byte(byte: u8) -> Transport {
        match byte >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Vendor,
        }
    }
}

bitflags! {
    /// The extension headers that follow a BTH, one flag each.
    ///
    /// On the wire they appear in the order the flags are declared here (DETH, RETH,
    /// AtomicETH, AETH, AtomicAckETH, ImmDt, IETH); no opcode carries both RETH and AtomicETH.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct ExtHeaders: u8 {
        /// Datagram ETH (8 B): Q_Key and source QPN of a UD packet.
        const DETH = 1 << 0;
        /// RDMA ETH (16 B): remote virtual address, R_Key, DMA length.
        const RETH = 1 << 1;
        /// Atomic ETH (28 B): address, R_Key, swap/add and compare operands.
        const ATOMIC_ETH = 1 << 2;
        /// ACK ETH (4 B): syndrome and MSN of a response.
        const AETH = 1 << 3;
        /// Atomic ACK ETH (8 B): the original value an atomic found in memory.
        const ATOMIC_ACK_ETH = 1 << 4;
        /// Immediate data (4 B).
        const IMMDT = 1 << 5;
        /// Invalidate ETH (4 B): the R_Key a SEND with invalidate revokes.
        const IETH = 1 << 6;
        /// XRC ETH (4 B): the XRC SRQ an XRC request is for. On the wire it comes right
        /// after the BTH (where DETH would be: no opcode carries both), ahead of RETH.
        const XRCETH = 1 << 7;
    }
}

impl ExtHeaders {
    /// Total length in bytes of the headers in this set.
    pub const fn byte_len(self) -> usize {
        let b = self.bits();
        let mut n = 0;
        if b & Self::DETH.bits() != 0 {
            n += super::deth::HEADER_LEN;
        }
        if b & Self::RETH.bits() != 0 {
            n += super::reth::HEADER_LEN;
        }
        if b & Self::ATOMIC_ETH.bits() != 0 {
            n += super::atomic_eth::HEADER_LEN;
        }
        if b & Self::AETH.bits() != 0 {
            n += super::aeth::HEADER_LEN;
        }
        if b & Self::ATOMIC_ACK_ETH.bits() != 0 {
            n += super::atomic_ack_eth::HEADER_LEN;
        }
        if b & Self::IMMDT.bits() != 0 {
            n += super::immdt::HEADER_LEN;
        }
        if b & Self::IETH.bits() != 0 {
            n += super::ieth::HEADER_LEN;
        }
        if b & Self::XRCETH.bits() != 0 {
            n += super::xrceth::HEADER_LEN;
        }
        n
    }
}

/// Where a packet sits in its message, which is what PSN and MSN accounting needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Position {
    /// First packet of a multi-packet message.
    First,
    /// Neither first nor last.
    Middle,
    /// Last packet of a multi-packet message.
    Last,
    /// The whole message in one packet (this includes RDMA READ requests, atomics and
    /// acknowledges, which are never split).
    Only,
}

/// An RC, UC, UD or XRC opcode, with its IBA value as discriminant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Opcode {
    RcSendFirst = 0x00,
    RcSendMiddle = 0x01,
    RcSendLast = 0x02,
    RcSendLastWithImm = 0x03,
    RcSendOnly = 0x04,
    RcSendOnlyWithImm = 0x05,
    RcRdmaWriteFirst = 0x06,
    RcRdmaWriteMiddle = 0x07,
    RcRdmaWriteLast = 0x08,
    RcRdmaWriteLastWithImm = 0x09,
    RcRdmaWriteOnly = 0x0a,
    RcRdmaWriteOnlyWithImm = 0x0b,
    RcRdmaReadRequest = 0x0c,
    RcRdmaReadResponseFirst = 0x0d,
    RcRdmaReadResponseMiddle = 0x0e,
    RcRdmaReadResponseLast = 0x0f,
    RcRdmaReadResponseOnly = 0x10,
    RcAcknowledge = 0x11,
    RcAtomicAcknowledge = 0x12,
    RcCompareSwap = 0x13,
    RcFetchAdd = 0x14,
    // 0x15 is reserved in the RC column.
    RcSendLastWithInvalidate = 0x16,
    RcSendOnlyWithInvalidate = 0x17,
    // UC: SEND and RDMA WRITE only (no READ, atomics or acknowledges).
    UcSendFirst = 0x20,
    UcSendMiddle = 0x21,
    UcSendLast = 0x22,
    UcSendLastWithImm = 0x23,
    UcSendOnly = 0x24,
    UcSendOnlyWithImm = 0x25,
    UcRdmaWriteFirst = 0x26,
    UcRdmaWriteMiddle = 0x27,
    UcRdmaWriteLast = 0x28,
    UcRdmaWriteLastWithImm = 0x29,
    UcRdmaWriteOnly = 0x2a,
    UcRdmaWriteOnlyWithImm = 0x2b,
    UdSendOnly = 0x64,
    UdSendOnlyWithImm = 0x65,
    // XRC (IBA annex A14): RC's operations with transport bits 101; requests carry an
    // XRCETH after the BTH.
    XrcSendFirst = 0xa0,
    XrcSendMiddle = 0xa1,
    XrcSendLast = 0xa2,
    XrcSendLastWithImm = 0xa3,
    XrcSendOnly = 0xa4,
    XrcSendOnlyWithImm = 0xa5,
    XrcRdmaWriteFirst = 0xa6,
    XrcRdmaWriteMiddle = 0xa7,
    XrcRdmaWriteLast = 0xa8,
    XrcRdmaWriteLastWithImm = 0xa9,
    XrcRdmaWriteOnly = 0xaa,
    XrcRdmaWriteOnlyWithImm = 0xab,
    XrcRdmaReadRequest = 0xac,
    XrcRdmaReadResponseFirst = 0xad,
    XrcRdmaReadResponseMiddle = 0xae,
    XrcRdmaReadResponseLast = 0xaf,
    XrcRdmaReadResponseOnly = 0xb0,
    XrcAcknowledge = 0xb1,
    XrcAtomicAcknowledge = 0xb2,
    XrcCompareSwap = 0xb3,
    XrcFetchAdd = 0xb4,
    XrcSendLastWithInvalidate = 0xb6,
    XrcSendOnlyWithInvalidate = 0xb7,
}

/// What the IBA's opcode table says about one opcode. One table keeps every predicate below
/// consistent with every other.
struct Info {
    ext: ExtHeaders,
    payload: bool,
    position: Position,
    response: bool,
}

impl Opcode {
    /// Every opcode softhca knows, in numeric order.
    pub const ALL: [Opcode; 60] = [
        Opcode::RcSendFirst,
        Opcode::RcSendMiddle,
        Opcode::RcSendLast,
        Opcode::RcSendLastWithImm,
        Opcode::RcSendOnly,
        Opcode::RcSendOnlyWithImm,
        Opcode::RcRdmaWriteFirst,
        Opcode::RcRdmaWriteMiddle,
        Opcode::RcRdmaWriteLast,
        Opcode::RcRdmaWriteLastWithImm,
        Opcode::RcRdmaWriteOnly,
        Opcode::RcRdmaWriteOnlyWithImm,
        Opcode::RcRdmaReadRequest,
        Opcode::RcRdmaReadResponseFirst,
        Opcode::RcRdmaReadResponseMiddle,
        Opcode::RcRdmaReadResponseLast,
        Opcode::RcRdmaReadResponseOnly,
        Opcode::RcAcknowledge,
        Opcode::RcAtomicAcknowledge,
        Opcode::RcCompareSwap,
        Opcode::RcFetchAdd,
        Opcode::RcSendLastWithInvalidate,
        Opcode::RcSendOnlyWithInvalidate,
        Opcode::UcSendFirst,
        Opcode::UcSendMiddle,
        Opcode::UcSendLast,
        Opcode::UcSendLastWithImm,
        Opcode::UcSendOnly,
        Opcode::UcSendOnlyWithImm,
        Opcode::UcRdmaWriteFirst,
        Opcode::UcRdmaWriteMiddle,
        Opcode::UcRdmaWriteLast,
        Opcode::UcRdmaWriteLastWithImm,
        Opcode::UcRdmaWriteOnly,
        Opcode::UcRdmaWriteOnlyWithImm,
        Opcode::UdSendOnly,
        Opcode::UdSendOnlyWithImm,
        Opcode::XrcSendFirst,
        Opcode::XrcSendMiddle,
        Opcode::XrcSendLast,
        Opcode::XrcSendLastWithImm,
        Opcode::XrcSendOnly,
        Opcode::XrcSendOnlyWithImm,
        Opcode::XrcRdmaWriteFirst,
        Opcode::XrcRdmaWriteMiddle,
        Opcode::XrcRdmaWriteLast,
        Opcode::XrcRdmaWriteLastWithImm,
        Opcode::XrcRdmaWriteOnly,
        Opcode::XrcRdmaWriteOnlyWithImm,
        Opcode::XrcRdmaReadRequest,
        Opcode::XrcRdmaReadResponseFirst,
        Opcode::XrcRdmaReadResponseMiddle,
        Opcode::XrcRdmaReadResponseLast,
        Opcode::XrcRdmaReadResponseOnly,
        Opcode::XrcAcknowledge,
        Opcode::XrcAtomicAcknowledge,
        Opcode::XrcCompareSwap,
        Opcode::XrcFetchAdd,
        Opcode::XrcSendLastWithInvalidate,
        Opcode::XrcSendOnlyWithInvalidate,
    ];

    /// The RC opcode of an XRC one (same operation); others as they are.
    const fn rc_twin(self) -> Opcode {
        use Opcode::*;
        match self {
            XrcSendFirst => RcSendFirst,
            XrcSendMiddle => RcSendMiddle,
            XrcSendLast => RcSendLast,
            XrcSendLastWithImm => RcSendLastWithImm,
            XrcSendOnly => RcSendOnly,
            XrcSendOnlyWithImm => RcSendOnlyWithImm,
            XrcRdmaWriteFirst => RcRdmaWriteFirst,
            XrcRdmaWriteMiddle => RcRdmaWriteMiddle,
            XrcRdmaWriteLast => RcRdmaWriteLast,
            XrcRdmaWriteLastWithImm => RcRdmaWriteLastWithImm,
            XrcRdmaWriteOnly => RcRdmaWriteOnly,
            XrcRdmaWriteOnlyWithImm => RcRdmaWriteOnlyWithImm,
            XrcRdmaReadRequest => RcRdmaReadRequest,
            XrcRdmaReadResponseFirst => RcRdmaReadResponseFirst,
            XrcRdmaReadResponseMiddle => RcRdmaReadResponseMiddle,
            XrcRdmaReadResponseLast => RcRdmaReadResponseLast,
            XrcRdmaReadResponseOnly => RcRdmaReadResponseOnly,
            XrcAcknowledge => RcAcknowledge,
            XrcAtomicAcknowledge => RcAtomicAcknowledge,
            XrcCompareSwap => RcCompareSwap,
            XrcFetchAdd => RcFetchAdd,
            XrcSendLastWithInvalidate => RcSendLastWithInvalidate,
            XrcSendOnlyWithInvalidate => RcSendOnlyWithInvalidate,
            other => other,
        }
    }

    const fn info(self) -> Info {
        use Opcode::*;
        if matches!(self.transport(), Transport::Xrc) {
            let rc = self.rc_twin().info();
            let ext = if rc.response { rc.ext } else { rc.ext.union(ExtHeaders::XRCETH) };
            return Info { ext, ..rc };
        }
        use Position::*;
        const NONE: ExtHeaders = ExtHeaders::empty();
        const RETH: ExtHeaders = ExtHeaders::RETH;
        const AETH: ExtHeaders = ExtHeaders::AETH;
        const IMM: ExtHeaders = ExtHeaders::IMMDT;
        const RETH_IMM: ExtHeaders = ExtHeaders::RETH.union(ExtHeaders::IMMDT);
        const AETH_ATOMIC_ACK: ExtHeaders = ExtHeaders::AETH.union(ExtHeaders::ATOMIC_ACK_ETH);
        const DETH_IMM: ExtHeaders = ExtHeaders::DETH.union(ExtHeaders::IMMDT);
        let (ext, payload, position, response) = match self {
            RcSendFirst => (NONE, true, First, false),
            RcSendMiddle => (NONE, true, Middle, false),
            RcSendLast => (NONE, true, Last, false),
            RcSendLastWithImm => (IMM, true, Last, false),
            RcSendOnly => (NONE, true, Only, false),
            RcSendOnlyWithImm => (IMM, true, Only, false),
            RcRdmaWriteFirst => (RETH, true, First, false),
            RcRdmaWriteMiddle => (NONE, true, Middle, false),
            RcRdmaWriteLast => (NONE, true, Last, false),
            RcRdmaWriteLastWithImm => (IMM, true, Last, false),
            RcRdmaWriteOnly => (RETH, true, Only, false),
            RcRdmaWriteOnlyWithImm => (RETH_IMM, true, Only, false),
            RcRdmaReadRequest => (RETH, false, Only, false),
            RcRdmaReadResponseFirst => (AETH, true, First, true),
            RcRdmaReadResponseMiddle => (NONE, true, Middle, true),
            RcRdmaReadResponseLast => (AETH, true, Last, true),
            RcRdmaReadResponseOnly => (AETH, true, Only, true),
            RcAcknowledge => (AETH, false, Only, true),
            RcAtomicAcknowledge => (AETH_ATOMIC_ACK, false, Only, true),
            RcCompareSwap => (ExtHeaders::ATOMIC_ETH, false, Only, false),
            RcFetchAdd => (ExtHeaders::ATOMIC_ETH, false, Only, false),
            RcSendLastWithInvalidate => (ExtHeaders::IETH, true, Last, false),
            RcSendOnlyWithInvalidate => (ExtHeaders::IETH, true, Only, false),
            UcSendFirst => (NONE, true, First, false),
            UcSendMiddle => (NONE, true, Middle, false),
            UcSendLast => (NONE, true, Last, false),
            UcSendLastWithImm => (IMM, true, Last, false),
            UcSendOnly => (NONE, true, Only, false),
            UcSendOnlyWithImm => (IMM, true, Only, false),
            UcRdmaWriteFirst => (RETH, true, First, false),
            UcRdmaWriteMiddle => (NONE, true, Middle, false),
            UcRdmaWriteLast => (NONE, true, Last, false),
            UcRdmaWriteLastWithImm => (IMM, true, Last, false),
            UcRdmaWriteOnly => (RETH, true, Only, false),
            UcRdmaWriteOnlyWithImm => (RETH_IMM, true, Only, false),
            UdSendOnly => (ExtHeaders::DETH, true, Only, false),
            UdSendOnlyWithImm => (DETH_IMM, true, Only, false),
            // Handled above from the RC twin.
            _ => (NONE, false, Only, false),
        };
        Info {
            ext,
            payload,
            position,
            response,
        }
    }

    /// The opcode byte as it appears in the BTH.
    pub const fn to_byte(self) -> u8 {
        self as u8
    }

    /// The transport service (top three bits).
    pub const fn transport(self) -> Transport {
        Transport::of_byte(self as u8)
    }

    /// The UC opcode of an RC SEND or RDMA WRITE opcode (same operation, UC transport
    /// bits), for the requester of a UC QP; None for anything UC lacks.
    pub fn to_uc(self) -> Option<Opcode> {
        if self.transport() != Transport::Rc || self.operation() > 0x0b {
            return None;
        }
        Opcode::try_from(0x20 | self.operation()).ok()
    }

    /// The RC opcode with the same operation as this UC one (the responder executes a UC
    /// SEND or WRITE packet as the RC one, minus acknowledgement); other opcodes as they are.
    pub fn rc_equivalent(self) -> Opcode {
        match self.transport() {
            Transport::Uc => Opcode::try_from(self.operation()).unwrap_or(self),
            Transport::Xrc => self.rc_twin(),
            _ => self,
        }
    }

    /// The XRC opcode of an RC one (same operation, XRC transport bits), for an XRC
    /// initiator's requests and an XRC target's responses; None for anything not RC.
    pub fn to_xrc(self) -> Option<Opcode> {
        if self.transport() != Transport::Rc {
            return None;
        }
        Opcode::try_from(0xa0 | self.operation()).ok()
    }

    /// Carries an XRC ETH.
    pub const fn has_xrceth(self) -> bool {
        self.info().ext.contains(ExtHeaders::XRCETH)
    }

    /// The operation within the transport (low five bits).
    pub const fn operation(self) -> u8 {
        self as u8 & 0x1f
    }

    /// The extension headers that follow the BTH, in wire order as [`ExtHeaders`] documents.
    pub const fn ext_headers(self) -> ExtHeaders {
        self.info().ext
    }

    /// Bytes between the BTH and the payload.
    pub const fn ext_headers_len(self) -> usize {
        self.info().ext.byte_len()
    }

    /// Carries an RDMA ETH.
    pub const fn has_reth(self) -> bool {
        self.info().ext.contains(ExtHeaders::RETH)
    }

    /// Carries an ACK ETH.
    pub const fn has_aeth(self) -> bool {
        self.info().ext.contains(ExtHeaders::AETH)
    }

    /// Carries an Atomic ETH.
    pub const fn has_atomic_eth(self) -> bool {
        self.info().ext.contains(ExtHeaders::ATOMIC_ETH)
    }

    /// Carries an Atomic ACK ETH.
    pub const fn has_atomic_ack_eth(self) -> bool {
        self.info().ext.contains(ExtHeaders::ATOMIC_ACK_ETH)
    }

    /// Carries immediate data.
    pub const fn has_immdt(self) -> bool {
        self.info().ext.contains(ExtHeaders::IMMDT)
    }

    /// Carries an Invalidate ETH.
    pub const fn has_ieth(self) -> bool {
        self.info().ext.contains(ExtHeaders::IETH)
    }

    /// Carries a Datagram ETH.
    pub const fn has_deth(self) -> bool {
        self.info().ext.contains(ExtHeaders::DETH)
    }

    /// May carry payload bytes after its headers (possibly zero of them, e.g. a zero-length
    /// SEND). Opcodes for which this is false must have nothing between headers and ICRC.
    pub const fn has_payload(self) -> bool {
        self.info().payload
    }

    /// Where the packet sits in its message.
    pub const fn position(self) -> Position {
        self.info().position
    }

    /// `*_FIRST`.
    pub const fn is_first(self) -> bool {
        matches!(self.position(), Position::First)
    }

    /// `*_MIDDLE`.
    pub const fn is_middle(self) -> bool {
        matches!(self.position(), Position::Middle)
    }

    /// `*_LAST*`.
    pub const fn is_last(self) -> bool {
        matches!(self.position(), Position::Last)
    }

    /// A single-packet message: `*_ONLY*`, RDMA READ request, atomics and acknowledges.
    pub const fn is_only(self) -> bool {
        matches!(self.position(), Position::Only)
    }

    /// First or only: this packet starts a message.
    pub const fn starts_message(self) -> bool {
        matches!(self.position(), Position::First | Position::Only)
    }

    /// Last or only: this packet completes a message.
    pub const fn ends_message(self) -> bool {
        matches!(self.position(), Position::Last | Position::Only)
    }

    /// Sent by a responder: RDMA READ responses and (atomic) acknowledges.
    pub const fn is_response(self) -> bool {
        self.info().response
    }

    /// Sent by a requester: everything that is not a response.
    pub const fn is_request(self) -> bool {
        !self.info().response
    }
}

impl TryFrom<u8> for Opcode {
    type Error = Error;

    fn try_from(byte: u8) -> Result<Opcode, Error> {
        Opcode::ALL
            .iter()
            .copied()
            .find(|op| op.to_byte() == byte)
            .ok_or(Error::BadOpcode(byte))
    }
}

impl From<Opcode> for u8 {
    fn from(op: Opcode) -> u8 {
        op.to_byte()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_the_iba_table() {
        // Hand-written from the IBA opcode table (transport bits | operation).
        let expect: [(u8, Opcode); 37] = [
            (0x00, Opcode::RcSendFirst),
            (0x01, Opcode::RcSendMiddle),
            (0x02, Opcode::RcSendLast),
            (0x03, Opcode::RcSendLastWithImm),
            (0x04, Opcode::RcSendOnly),
            (0x05, Opcode::RcSendOnlyWithImm),
            (0x06, Opcode::RcRdmaWriteFirst),
            (0x07, Opcode::RcRdmaWriteMiddle),
            (0x08, Opcode::RcRdmaWriteLast),
            (0x09, Opcode::RcRdmaWriteLastWithImm),
            (0x0a, Opcode::RcRdmaWriteOnly),
            (0x0b, Opcode::RcRdmaWriteOnlyWithImm),
            (0x0c, Opcode::RcRdmaReadRequest),
            (0x0d, Opcode::RcRdmaReadResponseFirst),
            (0x0e, Opcode::RcRdmaReadResponseMiddle),
            (0x0f, Opcode::RcRdmaReadResponseLast),
            (0x10, Opcode::RcRdmaReadResponseOnly),
            (0x11, Opcode::RcAcknowledge),
            (0x12, Opcode::RcAtomicAcknowledge),
            (0x13, Opcode::RcCompareSwap),
            (0x14, Opcode::RcFetchAdd),
            (0x16, Opcode::RcSendLastWithInvalidate),
            (0x17, Opcode::RcSendOnlyWithInvalidate),
            (0x20, Opcode::UcSendFirst),
            (0x21, Opcode::UcSendMiddle),
            (0x22, Opcode::UcSendLast),
            (0x23, Opcode::UcSendLastWithImm),
            (0x24, Opcode::UcSendOnly),
            (0x25, Opcode::UcSendOnlyWithImm),
            (0x26, Opcode::UcRdmaWriteFirst),
            (0x27, Opcode::UcRdmaWriteMiddle),
            (0x28, Opcode::UcRdmaWriteLast),
            (0x29, Opcode::UcRdmaWriteLastWithImm),
            (0x2a, Opcode::UcRdmaWriteOnly),
            (0x2b, Opcode::UcRdmaWriteOnlyWithImm),
            (0x64, Opcode::UdSendOnly),
            (0x65, Opcode::UdSendOnlyWithImm),
        ];
        for (byte, op) in expect {
            assert_eq!(Opcode::try_from(byte), Ok(op));
            assert_eq!(op.to_byte(), byte);
        }
        // XRC: 0xa0 | the RC operation, for each of RC's 23 (IBA annex A14 opcode table).
        let xrc: [(u8, Opcode); 4] = [(0xa0, Opcode::XrcSendFirst), (0xa4, Opcode::XrcSendOnly),
                                      (0xb1, Opcode::XrcAcknowledge), (0xb7, Opcode::XrcSendOnlyWithInvalidate)];
        for (byte, op) in xrc {
            assert_eq!(Opcode::try_from(byte), Ok(op));
        }
        for rc in Opcode::ALL.iter().filter(|o| o.transport() == Transport::Rc) {
            let x = rc.to_xrc().expect("every RC operation has an XRC twin");
            assert_eq!(x.to_byte(), 0xa0 | rc.to_byte());
            assert_eq!(x.rc_equivalent(), *rc);
            assert_eq!(x.has_xrceth(), rc.is_request(), "{x:?}: requests carry an XRCETH, responses none");
            assert_eq!(x.ext_headers() - ExtHeaders::XRCETH, rc.ext_headers());
        }
    }

    #[test]
    fn unknown_opcodes_are_rejected() {
        for byte in [
            0x15u8, 0x18, 0x1f, 0x2c, 0x2d, 0x30, 0x40, 0x60, 0x63, 0x66, 0x81, 0xb5, 0xb8, 0xff,
        ] {
            assert_eq!(
                Opcode::try_from(byte),
                Err(Error::BadOpcode(byte)),
                "{byte:#x}"
            );
        }
        // Exactly 37 + 23 (XRC) of 256 byte values are accepted.
        let n = (0..=255u8).filter(|b| Opcode::try_from(*b).is_ok()).count();
        assert_eq!(n, 60);
    }

    #[test]
    fn uc_mapping() {
        use Opcode::*;
        assert_eq!(RcSendFirst.to_uc(), Some(UcSendFirst));
        assert_eq!(RcRdmaWriteOnlyWithImm.to_uc(), Some(UcRdmaWriteOnlyWithImm));
        assert_eq!(RcRdmaReadRequest.to_uc(), None);
        assert_eq!(RcFetchAdd.to_uc(), None);
        assert_eq!(UdSendOnly.to_uc(), None);
        assert_eq!(UcSendLastWithImm.rc_equivalent(), RcSendLastWithImm);
        assert_eq!(UcRdmaWriteFirst.rc_equivalent(), RcRdmaWriteFirst);
        assert_eq!(RcSendOnly.rc_equivalent(), RcSendOnly);
        assert_eq!(UcRdmaWriteOnly.ext_headers(), ExtHeaders::RETH);
        assert_eq!(UcSendOnlyWithImm.transport(), Transport::Uc);
        for op in Opcode::ALL.iter().filter(|o| o.transport() == Transport::Uc) {
            assert!(op.is_request() && !op.has_aeth(), "{op:?}");
        }
    }

    #[test]
    fn transport_class() {
        assert_eq!(Opcode::RcFetchAdd.transport(), Transport::Rc);
        assert_eq!(Opcode::UdSendOnly.transport(), Transport::Ud);
        assert_eq!(Opcode::UdSendOnlyWithImm.operation(), 0x05);
        assert_eq!(Transport::of_byte(0x24), Transport::Uc);
        assert_eq!(Transport::of_byte(0x4c), Transport::Rd);
        assert_eq!(Transport::of_byte(0x81), Transport::Cnp);
        assert_eq!(Transport::of_byte(0xa0), Transport::Xrc);
        assert_eq!(Transport::of_byte(0xc0), Transport::Vendor);
    }

    #[test]
    fn extension_headers() {
        use Opcode::*;
        assert_eq!(RcSendFirst.ext_headers(), ExtHeaders::empty());
        assert_eq!(RcSendLastWithImm.ext_headers(), ExtHeaders::IMMDT);
        assert_eq!(RcRdmaWriteFirst.ext_headers(), ExtHeaders::RETH);
        assert_eq!(RcRdmaWriteLastWithImm.ext_headers(), ExtHeaders::IMMDT);
        assert_eq!(
            RcRdmaWriteOnlyWithImm.ext_headers(),
            ExtHeaders::RETH | ExtHeaders::IMMDT
        );
        assert_eq!(RcRdmaWriteOnlyWithImm.ext_headers_len(), 20);
        assert!(RcRdmaReadRequest.has_reth() && !RcRdmaReadRequest.has_payload());
        assert!(RcRdmaReadResponseFirst.has_aeth());
        assert!(!RcRdmaReadResponseMiddle.has_aeth());
        assert!(RcRdmaReadResponseLast.has_aeth() && RcRdmaReadResponseOnly.has_aeth());
        assert_eq!(RcAcknowledge.ext_headers_len(), 4);
        assert!(RcAtomicAcknowledge.has_aeth() && RcAtomicAcknowledge.has_atomic_ack_eth());
        assert_eq!(RcAtomicAcknowledge.ext_headers_len(), 12);
        assert_eq!(RcCompareSwap.ext_headers_len(), 28);
        assert!(RcFetchAdd.has_atomic_eth() && !RcFetchAdd.has_payload());
        assert!(RcSendOnlyWithInvalidate.has_ieth() && RcSendLastWithInvalidate.has_ieth());
        assert_eq!(UdSendOnly.ext_headers(), ExtHeaders::DETH);
        assert_eq!(UdSendOnlyWithImm.ext_headers_len(), 12);
        // No opcode carries both RETH and AtomicETH, or both AETH and DETH.
        for op in Opcode::ALL {
            assert!(!(op.has_reth() && op.has_atomic_eth()), "{op:?}");
            assert!(!(op.has_aeth() && op.has_deth()), "{op:?}");
        }
    }

    #[test]
    fn position_and_direction() {
        use Opcode::*;
        assert!(RcSendFirst.is_first() && RcRdmaWriteFirst.is_first());
        assert!(RcRdmaReadResponseMiddle.is_middle());
        assert!(RcSendLastWithInvalidate.is_last() && RcRdmaWriteLastWithImm.is_last());
        for op in [RcRdmaReadRequest, RcAcknowledge, RcCompareSwap, UdSendOnly] {
            assert!(
                op.is_only() && op.starts_message() && op.ends_message(),
                "{op:?}"
            );
        }
        let responses: Vec<_> = Opcode::ALL.iter().filter(|o| o.is_response() && o.transport() == Transport::Rc).collect();
        assert_eq!(
            responses,
            [
                &RcRdmaReadResponseFirst,
                &RcRdmaReadResponseMiddle,
                &RcRdmaReadResponseLast,
                &RcRdmaReadResponseOnly,
                &RcAcknowledge,
                &RcAtomicAcknowledge
            ]
        );
        assert!(RcFetchAdd.is_request() && !RcFetchAdd.is_response());
    }
}
