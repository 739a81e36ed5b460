//! ACK Extended Transport Header (4 bytes): the responder's verdict on a request.
//!
//! ```text
//!  byte 0  syndrome: resv(7) type(6:5) value(4:0)
//!            type 00 ACK      value = credit code (end-to-end flow control)
//!            type 01 RNR NAK  value = RNR timer code (how long to wait before retrying)
//!            type 10 reserved
//!            type 11 NAK      value = NAK code (0..=4 defined)
//!  1..4    MSN: message sequence number (24 bits)
//! ```

use core::time::Duration;

use super::{be, Error, Result, U24_MAX};

mod field {
    use core::ops::Range;
    pub const SYNDROME: usize = 0;
    pub const MSN: Range<usize> = 1..4;
}

/// Length of an AETH in bytes.
pub const HEADER_LEN: usize = field::MSN.end;

const TYPE_MASK: u8 = 0xe0;
const VALUE_MASK: u8 = 0x1f;
const TYPE_ACK: u8 = 0x00;
const TYPE_RNR_NAK: u8 = 0x20;
const TYPE_NAK: u8 = 0x60;

/// Credits per AETH credit code 0..=30 (IBA "AETH credit encoding"): roughly logarithmic, so
/// five bits can advertise anything from 0 to 32768 receive WQEs. Code 31 means "invalid":
/// the responder does not do end-to-end flow control (it has an SRQ, or chooses not to) and
/// the requester may send without limit.
const CREDITS: [u32; 31] = [
    0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768,
];

/// RNR NAK timer per code 0..=31, in microseconds (IBA "RNR NAK timer field encoding"). Code 0
/// is the longest delay (655.36 ms), not the shortest; codes 1..=31 rise from 10 µs to
/// 491.52 ms.
const RNR_MICROS: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// An AETH credit code (5 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CreditCode(u8);

impl CreditCode {
    /// Code 31: no end-to-end credit limit.
    pub const UNLIMITED: CreditCode = CreditCode(31);

    /// A credit code, if `code` fits five bits.
    pub const fn new(code: u8) -> Option<CreditCode> {
        if code <= VALUE_MASK {
            Some(CreditCode(code))
        } else {
            None
        }
    }

    /// The largest code that does not advertise more than `credits` receive WQEs. Rounding
    /// down keeps the requester from overrunning the receive queue.
    pub fn from_credits(credits: u32) -> CreditCode {
        let code = CREDITS.iter().rposition(|&c| c <= credits).unwrap_or(0);
        CreditCode(code as u8)
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The number of credits, or `None` for [`CreditCode::UNLIMITED`].
    pub fn credits(self) -> Option<u32> {
        CREDITS.get(usize::from(self.0)).copied()
    }
}

/// An RNR NAK timer code (5 bits): how long the requester waits before retrying after the
/// responder had no receive WQE ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RnrTimer(u8);

impl RnrTimer {
    /// A timer code, if `code` fits five bits.
    pub const fn new(code: u8) -> Option<RnrTimer> {
        if code <= VALUE_MASK {
            Some(RnrTimer(code))
        } else {
            None
        }
    }

    /// The shortest code whose delay is at least `micros` (code 0, 655.36 ms, when nothing
    /// shorter is long enough). Rounding up honours a QP's `min_rnr_timer`.
    pub fn from_micros(micros: u32) -> RnrTimer {
        (1u8..=31)
            .find(|&c| RNR_MICROS[usize::from(c)] >= micros)
            .map_or(RnrTimer(0), RnrTimer)
    }

    /// The 5-bit code.
    pub const fn code(self) -> u8 {
        self.0
    }

    /// The delay in microseconds.
    pub const fn micros(self) -> u32 {
        RNR_MICROS[(self.0 & VALUE_MASK) as usize]
    }

    /// The delay.
    pub const fn duration(self) -> Duration {
        Duration::from_micros(self.micros() as u64)
    }
}

/// Why a responder NAKed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum NakCode {
    /// The PSN was ahead of the expected one: a packet was lost; resend from the ACKed PSN.
    PsnSequenceError = 0,
    /// Malformed or unsupported request (the requester completes with a remote invalid
    /// request error).
    InvalidRequest = 1,
    /// R_Key, bounds or access rights check failed.
    RemoteAccessError = 2,
    /// The responder could not complete the request for an internal reason.
    RemoteOperationalError = 3,
    /// Invalid RD request (reliable datagram only).
    InvalidRdRequest = 4,
}

impl NakCode {
    /// A NAK code, if `code` is one of the five defined.
    pub const fn new(code: u8) -> Option<NakCode> {
        match code {
            0 => Some(NakCode::PsnSequenceError),
            1 => Some(NakCode::InvalidRequest),
            2 => Some(NakCode::RemoteAccessError),
            3 => Some(NakCode::RemoteOperationalError),
            4 => Some(NakCode::InvalidRdRequest),
            _ => None,
        }
    }
}

/// A decoded AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledge, advertising receive credits.
    Ack {
        /// Credit code.
        credits: CreditCode,
    },
    /// Receiver not ready: retry after the timer.
    RnrNak {
        /// Timer code.
        timer: RnrTimer,
    },
    /// Negative acknowledge.
    Nak(NakCode),
}

impl Syndrome {
    /// Decodes a syndrome byte, rejecting the reserved encodings (bit 7 set, type `10`, NAK
    /// codes above 4).
    pub const fn from_byte(byte: u8) -> Result<Syndrome> {
        let value = byte & VALUE_MASK;
        match byte & TYPE_MASK {
            TYPE_ACK => Ok(Syndrome::Ack {
                credits: CreditCode(value),
            }),
            TYPE_RNR_NAK => Ok(Syndrome::RnrNak {
                timer: RnrTimer(value),
            }),
            TYPE_NAK => match NakCode::new(value) {
                Some(code) => Ok(Syndrome::Nak(code)),
                None => Err(Error::BadSyndrome(byte)),
            },
            _ => Err(Error::BadSyndrome(byte)),
        }
    }

    /// Encodes the syndrome byte.
    pub const fn to_byte(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => TYPE_ACK | credits.0,
            Syndrome::RnrNak { timer } => TYPE_RNR_NAK | timer.0,
            Syndrome::Nak(code) => TYPE_NAK | code as u8,
        }
    }

    /// An ACK without end-to-end credit limit.
    pub const ACK_UNLIMITED: Syndrome = Syndrome::Ack {
        credits: CreditCode::UNLIMITED,
    };
}

header_view!("AETH", "an");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The raw syndrome byte (see [`Syndrome::from_byte`]).
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::MSN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the raw syndrome byte.
    pub fn set_syndrome(&mut self, value: u8) {
        self.buffer.as_mut()[field::SYNDROME] = value;
    }

    /// Sets the MSN (low 24 bits of `value`).
    pub fn set_msn(&mut self, value: u32) {
        be::put_u24(&mut self.buffer.as_mut()[field::MSN], value);
    }
}

/// The meaning of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Decoded syndrome.
    pub syndrome: Syndrome,
    /// MSN (24 bits).
    pub msn: u32,
}

impl Repr {
    /// Reads and validates an AETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            syndrome: Syndrome::from_byte(packet.syndrome())?,
            msn: packet.msn(),
        })
    }

    /// Checks the MSN fits 24 bits.
    pub fn check(&self) -> Result<()> {
        if self.msn > U24_MAX {
            return Err(Error::FieldOverflow {
                field: "AETH MSN",
                value: self.msn.into(),
            });
        }
        Ok(())
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header (the MSN truncated to 24 bits).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_syndrome(self.syndrome.to_byte());
        packet.set_msn(self.msn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deconstruct_construct() {
        // ACK, credit code 0x1f (unlimited), MSN 0x000102.
        let golden = [0x1f, 0x00, 0x01, 0x02];
        let p = Packet::new_checked(&golden[..]).unwrap();
        assert_eq!(p.syndrome(), 0x1f);
        assert_eq!(p.msn(), 0x102);
        let mut buf = [0u8; 4];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_syndrome(0x1f);
        p.set_msn(0x102);
        assert_eq!(buf, golden);
    }

    #[test]
    fn parse_emit_each_syndrome_kind() {
        // (bytes, repr): hand-encoded per the syndrome layout in the module doc.
        let cases = [
            (
                [0x00, 0x00, 0x00, 0x07],
                Syndrome::Ack {
                    credits: CreditCode(0),
                },
                7,
            ),
            ([0x1f, 0xff, 0xff, 0xff], Syndrome::ACK_UNLIMITED, 0xff_ffff),
            (
                [0x2e, 0x12, 0x34, 0x56], // RNR NAK, timer 14 (1.28 ms)
                Syndrome::RnrNak {
                    timer: RnrTimer(14),
                },
                0x12_3456,
            ),
            ([0x60, 0, 0, 1], Syndrome::Nak(NakCode::PsnSequenceError), 1),
            ([0x61, 0, 0, 2], Syndrome::Nak(NakCode::InvalidRequest), 2),
            (
                [0x62, 0, 0, 3],
                Syndrome::Nak(NakCode::RemoteAccessError),
                3,
            ),
            (
                [0x63, 0, 0, 4],
                Syndrome::Nak(NakCode::RemoteOperationalError),
                4,
            ),
            ([0x64, 0, 0, 5], Syndrome::Nak(NakCode::InvalidRdRequest), 5),
        ];
        for (bytes, syndrome, msn) in cases {
            let repr = Repr { syndrome, msn };
            assert_eq!(
                Repr::parse(&Packet::new_checked(&bytes[..]).unwrap()),
                Ok(repr),
                "{bytes:x?}"
            );
            let mut buf = [0u8; 4];
            assert_eq!(repr.buffer_len(), 4);
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            assert_eq!(buf, bytes);
        }
    }

    #[test]
    fn reserved_syndromes_are_rejected() {
        for s in [0x40u8, 0x5f, 0x65, 0x7f, 0x80, 0x9f, 0xe0, 0xff] {
            let b = [s, 0, 0, 0];
            assert_eq!(
                Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
                Err(Error::BadSyndrome(s)),
                "{s:#x}"
            );
        }
    }

    #[test]
    fn credit_table() {
        assert_eq!(CreditCode(0).credits(), Some(0));
        assert_eq!(CreditCode(4).credits(), Some(4));
        assert_eq!(CreditCode(5).credits(), Some(6));
        assert_eq!(CreditCode(0x10).credits(), Some(256));
        assert_eq!(CreditCode(0x1e).credits(), Some(32768));
        assert_eq!(CreditCode::UNLIMITED.credits(), None);
        assert_eq!(CreditCode::from_credits(0), CreditCode(0));
        assert_eq!(CreditCode::from_credits(5), CreditCode(4)); // rounds down to 4
        assert_eq!(CreditCode::from_credits(6), CreditCode(5));
        assert_eq!(CreditCode::from_credits(1000), CreditCode(19)); // 768
        assert_eq!(CreditCode::from_credits(u32::MAX), CreditCode(30));
        assert_eq!(CreditCode::new(32), None);
        assert_eq!((CreditCode::new(19).map(CreditCode::code), CreditCode::UNLIMITED.code()), (Some(19), 31));
        // The table grows strictly.
        assert!(CREDITS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn rnr_table() {
        assert_eq!(RnrTimer(0).micros(), 655_360);
        assert_eq!(RnrTimer(1).micros(), 10);
        assert_eq!(RnrTimer(12).micros(), 640);
        assert_eq!(RnrTimer(25).micros(), 61_440);
        assert_eq!(RnrTimer(31).micros(), 491_520);
        assert_eq!(RnrTimer(14).duration(), Duration::from_micros(1280));
        assert_eq!(RnrTimer::from_micros(0), RnrTimer(1));
        assert_eq!(RnrTimer::from_micros(100), RnrTimer(7)); // 120 µs
        assert_eq!(RnrTimer::from_micros(491_521), RnrTimer(0));
        assert_eq!(RnrTimer::new(32), None);
        assert_eq!((RnrTimer::new(14).map(RnrTimer::code), RnrTimer::from_micros(100).code()), (Some(14), 7));
        assert!(RNR_MICROS[1..].windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn truncated() {
        let b = [0u8; 4];
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&b[..n]),
                Err(Error::Truncated { what: "AETH", needed: 4, available }) if available == n
            ));
        }
        let mut r = Repr {
            syndrome: Syndrome::ACK_UNLIMITED,
            msn: 1 << 24,
        };
        assert!(r.check().is_err());
        r.msn -= 1;
        assert!(r.check().is_ok());
    }
}
