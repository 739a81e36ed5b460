//! RoCEv2 wire formats: what softhca puts into, and reads out of, a UDP datagram on port 4791.
//!
//! The layout follows smoltcp's `wire` module, because that split keeps byte twiddling and
//! protocol meaning apart:
//!
//! - a `Packet<T: AsRef<[u8]>>` per header is a zero-copy *view* of a buffer, with the byte
//!   ranges of its fields in a private `field` module. `Packet::new_checked` checks the length
//!   once, so every getter and setter afterwards is infallible and never panics.
//!   (`new_unchecked` exists for callers that already checked; its accessors may panic on a
//!   short buffer.)
//! - a `Repr` per header is the *validated meaning* of those bytes: `Repr::parse` rejects what a
//!   receiver must reject, `Repr::emit` writes every field including the reserved ones (as zero),
//!   and `Repr::buffer_len` says how many bytes `emit` needs.
//!
//! [`packet::RocePacket`] strings the headers together into a whole UDP payload (BTH, the
//! extension headers its opcode implies, payload, pad, ICRC), and [`icrc()`] computes the
//! invariant CRC that the receiving HCA checks. [`pcap`] writes what was sent or received to a
//! capture file that Wireshark decodes.
//!
//! All multi-byte fields are big-endian ("network order") except the ICRC, which the IBA
//! defines as the CRC register's bytes in the order a little-endian machine stores them.

/// Declares a header module's `Packet<T>`: the smoltcp-style read/write view of a
/// fixed-size header over any byte buffer, with the constructors every header shares
/// (`new_unchecked`, `new_checked`, `check_len`, `into_inner`). The module defines
/// `HEADER_LEN` and adds its own field accessors in further `impl` blocks.
macro_rules! header_view {
    ($what:literal, $article:literal) => {
        #[doc = concat!("A read/write view of ", $article, " ", $what, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Packet<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> Packet<T> {
            /// Wraps a buffer without checking its length; accessors may panic if it is short.
            pub const fn new_unchecked(buffer: T) -> Packet<T> {
                Packet { buffer }
            }

            #[doc = concat!("Wraps a buffer after checking it holds a whole ", $what, ".")]
            pub fn new_checked(buffer: T) -> $crate::wire::Result<Packet<T>> {
                let packet = Self::new_unchecked(buffer);
                packet.check_len()?;
                Ok(packet)
            }

            #[doc = concat!("Checks the buffer holds a whole ", $what, ".")]
            pub fn check_len(&self) -> $crate::wire::Result<()> {
                $crate::wire::check_len($what, self.buffer.as_ref(), HEADER_LEN)
            }

            /// Returns the wrapped buffer.
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

pub mod aeth;
pub mod atomic_ack_eth;
pub mod atomic_eth;
pub mod bth;
pub mod deth;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod opcode;
pub mod packet;
pub mod pcap;
pub mod reth;
pub mod udp_sport;
pub mod xrceth;

pub use aeth::{CreditCode, NakCode, Packet as AethPacket, Repr as AethRepr, RnrTimer, Syndrome};
pub use atomic_ack_eth::{Packet as AtomicAckEthPacket, Repr as AtomicAckEthRepr};
pub use atomic_eth::{Packet as AtomicEthPacket, Repr as AtomicEthRepr};
pub use bth::{Packet as BthPacket, Repr as BthRepr};
pub use deth::{Packet as DethPacket, Repr as DethRepr};
pub use icrc::{icrc, Endpoints, ICRC_LEN};
pub use ieth::{Packet as IethPacket, Repr as IethRepr};
pub use immdt::{Packet as ImmDtPacket, Repr as ImmDtRepr};
pub use opcode::{ExtHeaders, Opcode, Position, Transport};
pub use packet::RocePacket;
pub use reth::{Packet as RethPacket, Repr as RethRepr};
pub use xrceth::{Packet as XrcEthPacket, Repr as XrcEthRepr};

/// The IANA-assigned UDP destination port of RoCEv2.
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// Why bytes could not be read as (or a value could not be written as) RoCEv2.
///
/// One enum for every header so that a receive path can bubble any of them up with `?` and
/// count drops by reason, the way a real HCA keeps per-reason drop counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The buffer ends before the header (or the packet) does.
    #[error("truncated {what}: need {needed} bytes, have {available}")]
    Truncated {
        /// Which header or part was cut short.
        what: &'static str,
        /// Bytes needed.
        needed: usize,
        /// Bytes present.
        available: usize,
    },
    /// The BTH opcode is reserved, or of a transport softhca does not speak (RD, CNP).
    #[error("unsupported BTH opcode {0:#04x}")]
    BadOpcode(u8),
    /// The BTH transport header version (TVer) is not 0, the only one defined.
    #[error("unsupported BTH transport header version {0}")]
    BadVersion(u8),
    /// The AETH syndrome uses a reserved encoding.
    #[error("reserved AETH syndrome {0:#04x}")]
    BadSyndrome(u8),
    /// The ICRC carried by the packet differs from the one computed over it.
    #[error("bad ICRC: packet carries {received:#010x}, computed {computed:#010x}")]
    BadIcrc {
        /// The value read from the last four bytes.
        received: u32,
        /// The value computed over the packet.
        computed: u32,
    },
    /// The BTH pad count is larger than the bytes between the headers and the ICRC.
    #[error("pad count {pad} exceeds the {available} bytes after the headers")]
    BadPadCount {
        /// BTH PadCnt.
        pad: u8,
        /// Bytes between the last extension header and the ICRC.
        available: usize,
    },
    /// Bytes follow the headers of an opcode that carries no payload.
    #[error("opcode {opcode:?} carries no payload but {len} bytes follow its headers")]
    UnexpectedPayload {
        /// The packet's opcode.
        opcode: Opcode,
        /// Bytes between the headers and the ICRC.
        len: usize,
    },
    /// A packet to emit lacks an extension header its opcode requires, or has one it forbids.
    #[error("extension headers do not match opcode {0:?}")]
    HeaderMismatch(Opcode),
    /// A value does not fit its field (e.g. a QPN or PSN above 24 bits).
    #[error("{field} value {value:#x} does not fit its field")]
    FieldOverflow {
        /// The field's name.
        field: &'static str,
        /// The value that did not fit.
        value: u64,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;

/// A 24-bit field's largest value (QPNs, PSNs, the MSN).
pub const U24_MAX: u32 = 0x00ff_ffff;

/// The length check shared by every header's `Packet::check_len`.
#[inline]
fn check_len(what: &'static str, buf: &[u8], needed: usize) -> Result<()> {
    if buf.len() < needed {
        Err(Error::Truncated {
            what,
            needed,
            available: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Big-endian readers and writers over fixed field ranges. Each takes the exact field slice,
/// so the length is fixed by the `field` module and the conversions cannot fail.
mod be {
    #[inline]
    pub(super) fn u16(b: &[u8]) -> u16 {
        u16::from_be_bytes([b[0], b[1]])
    }
    #[inline]
    pub(super) fn u24(b: &[u8]) -> u32 {
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
    #[inline]
    pub(super) fn u32(b: &[u8]) -> u32 {
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }
    #[inline]
    pub(super) fn u64(b: &[u8]) -> u64 {
        u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
    #[inline]
    pub(super) fn put_u16(b: &mut [u8], v: u16) {
        b[..2].copy_from_slice(&v.to_be_bytes());
    }
    /// Writes the low 24 bits; the top byte of `v` is dropped.
    #[inline]
    pub(super) fn put_u24(b: &mut [u8], v: u32) {
        b[..3].copy_from_slice(&v.to_be_bytes()[1..]);
    }
    #[inline]
    pub(super) fn put_u32(b: &mut [u8], v: u32) {
        b[..4].copy_from_slice(&v.to_be_bytes());
    }
    #[inline]
    pub(super) fn put_u64(b: &mut [u8], v: u64) {
        b[..8].copy_from_slice(&v.to_be_bytes());
    }
}
