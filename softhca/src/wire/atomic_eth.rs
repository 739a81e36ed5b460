//! Atomic Extended Transport Header (28 bytes), carried by COMPARE_SWAP and FETCH_ADD.
//!
//! ```text
//!  0..8    virtual address (8-byte aligned)
//!  8..12   R_Key
//!  12..20  swap data (COMPARE_SWAP) or add data (FETCH_ADD)
//!  20..28  compare data (COMPARE_SWAP; ignored by FETCH_ADD)
//! ```

use super::{be, Result};

mod field {
    use core::ops::Range;
    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const SWAP_ADD: Range<usize> = 12..20;
    pub const COMPARE: Range<usize> = 20..28;
}

/// Length of an AtomicETH in bytes.
pub const HEADER_LEN: usize = field::COMPARE.end;

header_view!("AtomicETH", "an");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Remote virtual address of the 8-byte target.
    pub fn va(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::VA])
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }

    /// Swap value (compare-and-swap) or addend (fetch-and-add).
    pub fn swap_add(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::SWAP_ADD])
    }

    /// Compare value (compare-and-swap).
    pub fn compare(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::COMPARE])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the remote virtual address.
    pub fn set_va(&mut self, value: u64) {
        be::put_u64(&mut self.buffer.as_mut()[field::VA], value);
    }

    /// Sets the R_Key.
    pub fn set_rkey(&mut self, value: u32) {
        be::put_u32(&mut self.buffer.as_mut()[field::RKEY], value);
    }

    /// Sets the swap/add operand.
    pub fn set_swap_add(&mut self, value: u64) {
        be::put_u64(&mut self.buffer.as_mut()[field::SWAP_ADD], value);
    }

    /// Sets the compare operand.
    pub fn set_compare(&mut self, value: u64) {
        be::put_u64(&mut self.buffer.as_mut()[field::COMPARE], value);
    }
}

/// The meaning of an AtomicETH. Alignment of `va` is the responder's check (it NAKs with an
/// invalid request), not a wire-format one, so `parse` accepts any value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Remote virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// Swap or add operand.
    pub swap_add: u64,
    /// Compare operand.
    pub compare: u64,
}

impl Repr {
    /// Reads an AtomicETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            va: packet.va(),
            rkey: packet.rkey(),
            swap_add: packet.swap_add(),
            compare: packet.compare(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes every AtomicETH byte.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_swap_add(self.swap_add);
        packet.set_compare(self.compare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    static GOLDEN: [u8; 28] = [
        0x00, 0x00, 0x55, 0x55, 0x00, 0x00, 0x10, 0x08, // VA
        0x00, 0x00, 0x12, 0x34, // R_Key
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // swap/add
        0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8, // compare
    ];

    const REPR: Repr = Repr {
        va: 0x5555_0000_1008,
        rkey: 0x1234,
        swap_add: 0x0102_0304_0506_0708,
        compare: 0xf1f2_f3f4_f5f6_f7f8,
    };

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.va(), 0x5555_0000_1008);
        assert_eq!(p.rkey(), 0x1234);
        assert_eq!(p.swap_add(), 0x0102_0304_0506_0708);
        assert_eq!(p.compare(), 0xf1f2_f3f4_f5f6_f7f8);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 28];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_va(0x5555_0000_1008);
        p.set_rkey(0x1234);
        p.set_swap_add(0x0102_0304_0506_0708);
        p.set_compare(0xf1f2_f3f4_f5f6_f7f8);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(REPR));
        let mut buf = [0xeeu8; 28];
        assert_eq!(REPR.buffer_len(), 28);
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated { what: "AtomicETH", needed: 28, available }) if available == n
            ));
        }
    }
}
