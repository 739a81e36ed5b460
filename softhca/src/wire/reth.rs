//! RDMA Extended Transport Header (16 bytes): where in the responder's memory an RDMA WRITE
//! or READ lands. It rides on the first (or only) packet of a WRITE and on READ requests.
//!
//! ```text
//!  0..8    virtual address
//!  8..12   R_Key
//!  12..16  DMA length (of the whole message, not of this packet)
//! ```

use super::{be, Result};

mod field {
    use core::ops::Range;
    pub const VA: Range<usize> = 0..8;
    pub const RKEY: Range<usize> = 8..12;
    pub const DMA_LEN: Range<usize> = 12..16;
}

/// Length of a RETH in bytes.
pub const HEADER_LEN: usize = field::DMA_LEN.end;

header_view!("RETH", "a");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Remote virtual address.
    pub fn va(&self) -> u64 {
        be::u64(&self.buffer.as_ref()[field::VA])
    }

    /// Remote key of the target memory region.
    pub fn rkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::RKEY])
    }

    /// Length of the whole RDMA message in bytes.
    pub fn dma_len(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::DMA_LEN])
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

    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, value: u32) {
        be::put_u32(&mut self.buffer.as_mut()[field::DMA_LEN], value);
    }
}

/// The meaning of a RETH. Every bit pattern is valid, so `parse` only checks the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Remote virtual address.
    pub va: u64,
    /// R_Key.
    pub rkey: u32,
    /// DMA length.
    pub dma_len: u32,
}

impl Repr {
    /// Reads a RETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            va: packet.va(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
        })
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes every RETH byte.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_va(self.va);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    static GOLDEN: [u8; 16] = [
        0x00, 0x00, 0x7f, 0x12, 0x34, 0x56, 0x78, 0x9a, // VA
        0xde, 0xad, 0xbe, 0xef, // R_Key
        0x00, 0x01, 0x00, 0x00, // DMA length 65536
    ];

    const REPR: Repr = Repr {
        va: 0x0000_7f12_3456_789a,
        rkey: 0xdead_beef,
        dma_len: 65536,
    };

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.va(), 0x0000_7f12_3456_789a);
        assert_eq!(p.rkey(), 0xdead_beef);
        assert_eq!(p.dma_len(), 0x1_0000);
    }

    #[test]
    fn construct() {
        let mut buf = [0u8; 16];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_va(0x0000_7f12_3456_789a);
        p.set_rkey(0xdead_beef);
        p.set_dma_len(0x1_0000);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(REPR));
        let mut buf = [0xeeu8; 16];
        assert_eq!(REPR.buffer_len(), 16);
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated { what: "RETH", needed: 16, available }) if available == n
            ));
        }
    }
}
