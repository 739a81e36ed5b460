//! XRC Extended Transport Header (4 bytes): the XRC SRQ a request of an XRC initiator QP
//! is for.
//!
//! IBA vol. 1, 9.3.6 (XRC, the annex added in release 1.2.1): the XRCETH follows the BTH
//! of every XRC request (opcodes `0xA0 | operation`: SEND, RDMA WRITE, RDMA READ
//! request, atomics), ahead of the RETH / AtomicETH / ImmDt / IETH the operation has;
//! XRC responses (acknowledges and READ responses) carry none. Byte 0 is reserved, bytes
//! 1..4 the 24-bit XRC SRQ number. The target QP takes the receive WQE from that SRQ,
//! which must belong to the target QP's XRC domain.

use super::{be, Error, Result, U24_MAX};

mod field {
    use core::ops::Range;
    pub const RESERVED: usize = 0;
    pub const SRQN: Range<usize> = 1..4;
}

/// Length of an XRCETH in bytes.
pub const HEADER_LEN: usize = field::SRQN.end;

header_view!("XRCETH", "an");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The XRC SRQ number (24 bits).
    pub fn xrc_srqn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::SRQN])
    }

    /// The reserved byte.
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the XRC SRQ number (its low 24 bits).
    pub fn set_xrc_srqn(&mut self, value: u32) {
        be::put_u24(&mut self.buffer.as_mut()[field::SRQN], value);
    }

    /// Zeroes the reserved byte.
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[field::RESERVED] = 0;
    }
}

/// The meaning of an XRCETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The XRC SRQ number (24 bits).
    pub xrc_srqn: u32,
}

impl Repr {
    /// Reads an XRCETH (the reserved byte is ignored, as a receiver must).
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { xrc_srqn: packet.xrc_srqn() })
    }

    /// Checks the SRQ number fits its 24 bits.
    pub fn check(&self) -> Result<()> {
        if self.xrc_srqn > U24_MAX {
            return Err(Error::FieldOverflow { field: "XRCETH XRC SRQ number", value: self.xrc_srqn.into() });
        }
        Ok(())
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header, the reserved byte as zero.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.clear_reserved();
        packet.set_xrc_srqn(self.xrc_srqn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// XRC SRQ 0x00_2a17: reserved byte, then the number big-endian in 24 bits.
    static GOLDEN: [u8; 4] = [0x00, 0x00, 0x2a, 0x17];

    #[test]
    fn deconstruct_construct() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!((p.reserved(), p.xrc_srqn()), (0, 0x2a17));
        let mut buf = [0xffu8; 4];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.clear_reserved();
        p.set_xrc_srqn(0x2a17);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let repr = Repr { xrc_srqn: 0x2a17 };
        assert_eq!(Repr::parse(&Packet::new_checked(&GOLDEN[..]).unwrap()), Ok(repr));
        // A set reserved byte is ignored on receipt.
        assert_eq!(Repr::parse(&Packet::new_checked(&[0xff, 0x00, 0x2a, 0x17][..]).unwrap()), Ok(repr));
        let mut buf = [0xffu8; 4];
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
        assert!(Repr { xrc_srqn: 1 << 24 }.check().is_err());
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated { what: "XRCETH", needed: 4, available }) if available == n
            ));
        }
    }
}
