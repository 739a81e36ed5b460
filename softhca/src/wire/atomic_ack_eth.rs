//! Atomic Acknowledge Extended Transport Header (8 bytes): the value an atomic operation found
//! at the target address before it acted, returned to the requester after the AETH of an
//! ATOMIC_ACKNOWLEDGE.

use super::{be, Result};

mod field {
    use core::ops::Range;
    pub const ORIG_DATA: Range<usize> = 0..8;
}

/// Length of an AtomicAckETH in bytes.
pub const HEADER_LEN: usize = field::ORIG_DATA.end;

header_view!("AtomicAckETH", "an");

impl<T: AsRef<[u8]>> Packet<T> {
    /// The original remote data.
    pub fn orig_data(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::ORIG_DATA])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the original remote data.
    pub fn set_orig_data(&mut self, value: u64) {
        be::put_u64(&mut self.buffer.as_mut()[field::ORIG_DATA], value);
    }
}

/// The meaning of an AtomicAckETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// The original remote data.
    pub orig_data: u64,
}

impl Repr {
    /// Reads an AtomicAckETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            orig_data: packet.orig_data(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_orig_data(self.orig_data);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    static GOLDEN: [u8; 8] = [0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a];

    #[test]
    fn deconstruct_construct() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.orig_data(), 0x8000_0000_0000_002a);
        let mut buf = [0u8; 8];
        Packet::new_unchecked(&mut buf[..]).set_orig_data(0x8000_0000_0000_002a);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let repr = Repr {
            orig_data: 0x8000_0000_0000_002a,
        };
        assert_eq!(
            Repr::parse(&Packet::new_checked(&GOLDEN[..]).unwrap()),
            Ok(repr)
        );
        let mut buf = [0xeeu8; 8];
        assert_eq!(repr.buffer_len(), 8);
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated { what: "AtomicAckETH", needed: 8, available }) if available == n
            ));
        }
    }
}
