//! Inline data: the payload copied into the WQE itself instead of gathered by DMA.
//!
//! Layout: a 4-byte big-endian header `INLINE_SEG | byte_count` (`struct
//! mlx5_wqe_inl_data_seg`), immediately followed by the bytes, the whole thing padded
//! to a multiple of 16 bytes. The header always starts on a 16-byte boundary, but the
//! bytes may run past the end of the SQ buffer: the device continues at the start of
//! the ring, so a writer's copy must wrap too (the provider's `wqe::inline` does).

use zerocopy::byteorder::big_endian::U32;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::DS_SIZE;

/// The header bit that marks inline data (`MLX5_INLINE_SEG`).
pub const INLINE_SEG: u32 = 0x8000_0000;

/// Size of the inline header in bytes.
pub const INLINE_HDR_SIZE: u32 = 4;

/// The 4-byte inline header.
#[repr(C)]
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    FromBytes,
    IntoBytes,
    KnownLayout,
    Immutable,
    Unaligned,
)]
pub struct InlineHeader {
    pub byte_count: U32,
}

const _: () = assert!(core::mem::size_of::<InlineHeader>() == INLINE_HDR_SIZE as usize);

impl InlineHeader {
    /// `len` must fit in 31 bits (it is at most the QP's inline limit, < 1 KiB).
    #[inline(always)]
    pub const fn new(len: u32) -> Self {
        Self {
            byte_count: U32::new(INLINE_SEG | len),
        }
    }

    /// The 4 header bytes as they appear in the WQE.
    #[inline(always)]
    pub const fn to_bytes(self) -> [u8; 4] {
        self.byte_count.get().to_be_bytes()
    }

    /// Parses a header; `None` if the inline bit is clear (then the 16 bytes are a
    /// data segment, whose byte count never has bit 31 set).
    pub fn parse(bytes: [u8; 4]) -> Option<u32> {
        let v = u32::from_be_bytes(bytes);
        (v & INLINE_SEG != 0).then_some(v & !INLINE_SEG)
    }
}

/// DS units taken by `len` bytes of inline data, header and padding included.
/// Zero bytes take no segment at all: libmlx5 then writes no header, and the WQE
/// carries no payload.
#[inline(always)]
pub const fn inline_ds(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        (len + INLINE_HDR_SIZE).div_ceil(DS_SIZE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_golden() {
        assert_eq!(InlineHeader::new(150).to_bytes(), [0x80, 0x00, 0x00, 0x96]);
        assert_eq!(InlineHeader::parse([0x80, 0, 1, 0]), Some(256));
        assert_eq!(InlineHeader::parse([0x00, 0, 1, 0]), None);
    }

    #[test]
    fn ds_rule() {
        assert_eq!(inline_ds(0), 0);
        assert_eq!(inline_ds(1), 1);
        assert_eq!(inline_ds(12), 1);
        assert_eq!(inline_ds(13), 2);
        assert_eq!(inline_ds(28), 2);
        assert_eq!(inline_ds(29), 3);
        assert_eq!(inline_ds(150), 10);
    }
}
