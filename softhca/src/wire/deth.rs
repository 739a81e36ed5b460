//! Datagram Extended Transport Header (8 bytes), carried by every UD packet: the Q_Key the
//! receiving QP checks and the sender's QPN, which becomes the `src_qp` of the completion.
//!
//! ```text
//!  0..4    Q_Key
//!  byte 4  reserved
//!  5..8    source QP (24 bits)
//! ```

use super::{be, Error, Result, U24_MAX};

mod field {
    use core::ops::Range;
    pub const QKEY: Range<usize> = 0..4;
    pub const RESV8: usize = 4;
    pub const SRC_QPN: Range<usize> = 5..8;
}

/// Length of a DETH in bytes.
pub const HEADER_LEN: usize = field::SRC_QPN.end;

header_view!("DETH", "a");

impl<T: AsRef<[u8]>> Packet<T> {
    /// Queue key.
    pub fn qkey(&self) -> u32 {
        be::u32(&self.buffer.as_ref()[field::QKEY])
    }

    /// The reserved byte.
    pub fn resv8(&self) -> u8 {
        self.buffer.as_ref()[field::RESV8]
    }

    /// Source QPN (24 bits).
    pub fn src_qpn(&self) -> u32 {
        be::u24(&self.buffer.as_ref()[field::SRC_QPN])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the Q_Key.
    pub fn set_qkey(&mut self, value: u32) {
        be::put_u32(&mut self.buffer.as_mut()[field::QKEY], value);
    }

    /// Sets the reserved byte.
    pub fn set_resv8(&mut self, value: u8) {
        self.buffer.as_mut()[field::RESV8] = value;
    }

    /// Sets the source QPN (low 24 bits of `value`).
    pub fn set_src_qpn(&mut self, value: u32) {
        be::put_u24(&mut self.buffer.as_mut()[field::SRC_QPN], value);
    }
}

/// The meaning of a DETH. The reserved byte is ignored on parse and zeroed on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Q_Key.
    pub qkey: u32,
    /// Source QPN (24 bits).
    pub src_qpn: u32,
}

impl Repr {
    /// Reads a DETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        Ok(Repr {
            qkey: packet.qkey(),
            src_qpn: packet.src_qpn(),
        })
    }

    /// Checks the source QPN fits 24 bits.
    pub fn check(&self) -> Result<()> {
        if self.src_qpn > U24_MAX {
            return Err(Error::FieldOverflow {
                field: "DETH src QPN",
                value: self.src_qpn.into(),
            });
        }
        Ok(())
    }

    /// Bytes `emit` writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes every DETH byte (the QPN truncated to 24 bits).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_qkey(self.qkey);
        packet.set_resv8(0);
        packet.set_src_qpn(self.src_qpn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Q_Key 0x11111111 (the value ibv_ud_pingpong uses), source QP 0xabcdef.
    static GOLDEN: [u8; 8] = [0x11, 0x11, 0x11, 0x11, 0x00, 0xab, 0xcd, 0xef];

    const REPR: Repr = Repr {
        qkey: 0x1111_1111,
        src_qpn: 0xab_cdef,
    };

    #[test]
    fn deconstruct_construct() {
        let p = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(p.qkey(), 0x1111_1111);
        assert_eq!(p.resv8(), 0);
        assert_eq!(p.src_qpn(), 0xab_cdef);
        let mut buf = [0xffu8; 8];
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_qkey(0x1111_1111);
        p.set_resv8(0);
        p.set_src_qpn(0xab_cdef);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn parse_emit() {
        let mut dirty = GOLDEN;
        dirty[4] = 0x5a; // reserved byte is ignored
        assert_eq!(
            Repr::parse(&Packet::new_checked(&dirty[..]).unwrap()),
            Ok(REPR)
        );
        let mut buf = [0xffu8; 8];
        assert_eq!(REPR.buffer_len(), 8);
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
        assert!(Repr {
            src_qpn: 1 << 24,
            ..REPR
        }
        .check()
        .is_err());
    }

    #[test]
    fn truncated() {
        for n in 0..HEADER_LEN {
            assert!(matches!(
                Packet::new_checked(&GOLDEN[..n]),
                Err(Error::Truncated { what: "DETH", needed: 8, available }) if available == n
            ));
        }
    }
}
