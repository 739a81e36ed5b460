//! Immediate Data (4 bytes), carried by the `*_WITH_IMMEDIATE` opcodes and delivered to the
//! responder's completion.
//!
//! The verbs API treats immediate data as four opaque bytes in network order (`__be32`);
//! [`Repr::imm`] is those bytes read big-endian, so `imm.to_be_bytes()` gives them back
//! unchanged.

use super::{be, Result};

mod field {
    use core::ops::Range;
    pub const IMM: Range<usize> = 0..4;
}

/// Length of an ImmDt in bytes.
pub const HEADER_LEN: usize = field::IMM.end;

header_view!("ImmDt", "an");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The immediate data, read big-endian.
    pub fn imm(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::IMM])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the immediate data, written big-endian.
    pub fn set_imm(&mut self, value: u32) {
        be::put_u32(&mut self.buffer.as_mut()[field::IMM], value);
    }
}

/// The meaning of an ImmDt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The immediate data, read big-endian.
    pub imm: u32,
}

impl Repr {
    /// Reads an ImmDt.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr { imm: packet.imm() })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_imm(self.imm);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    static GOLDEN: [u8; 4] = [0xca, 0xfe, 0xf0, 0x0d];

    #[test]
    fn deconstruct_construct() {
        assert_eq!(Packet::new_checked(&GOLDEN[..]).unwrap().imm(), 0xcafe_f00d);
        let mut buf = [0u8; 4];
        Packet::new_unchecked(&mut buf[..]).set_imm(0xcafe_f00d);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let repr = Repr { imm: 0xcafe_f00d };
        assert_eq!(
            Repr::parse(&Packet::new_checked(&GOLDEN[..]).unwrap()),
            Ok(repr)
        );
        let mut buf = [0u8; 4];
        assert_eq!(repr.buffer_len(), 4);
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated { what: "ImmDt", needed: 4, available }) if available == n
            ));
        }
    }
}
