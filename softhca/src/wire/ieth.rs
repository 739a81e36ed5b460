//! Invalidate Extended Transport Header (4 bytes): the R_Key that a SEND_LAST/ONLY_WITH_
//! INVALIDATE asks the responder to invalidate once the message has landed.

use super::{be, Result};

mod field {
    use core::ops::Range;
    pub const RKEY: Range<usize> = 0..4;
}

/// Length of an IETH in bytes.
pub const HEADER_LEN: usize = field::RKEY.end;

header_view!("IETH", "an");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The R_Key to invalidate.
    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the R_Key to invalidate.
    pub fn set_rkey(&mut self, value: u32) {
        be::put_u32(&mut self.buffer.as_mut()[field::RKEY], value);
    }
}

/// The meaning of an IETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The R_Key to invalidate.
    pub rkey: u32,
}

impl Repr {
    /// Reads an IETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            rkey: packet.rkey(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_rkey(self.rkey);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    static GOLDEN: [u8; 4] = [0x00, 0x01, 0x86, 0xa0];

    #[test]
    fn deconstruct_construct() {
        assert_eq!(Packet::new_checked(&GOLDEN[..]).unwrap().rkey(), 100_000);
        let mut buf = [0u8; 4];
        Packet::new_unchecked(&mut buf[..]).set_rkey(100_000);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let repr = Repr { rkey: 100_000 };
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
                Err(Error::Truncated { what: "IETH", needed: 4, available }) if available == n
            ));
        }
    }
}
