//! Inline data: the payload copied into the WQE itself instead of gathered by DMA.
//! The header and the size rule are the `prm` crate's; the wrapping copy into the
//! ring is the provider's.
//!
//! Layout: a 4-byte big-endian header `INLINE_SEG | byte_count` (`struct
//! mlx5_wqe_inl_data_seg`), immediately followed by the bytes, the whole thing padded
//! to a multiple of 16 bytes. The header always starts on a 16-byte boundary, but the
//! bytes may run past the end of the SQ buffer: the device continues at the start of
//! the ring, so the copy must wrap too ([`copy_wrapping`]).

pub use prm::wqe::inline::{inline_ds, InlineHeader, INLINE_HDR_SIZE, INLINE_SEG};

use super::DS_SIZE;

/// Copies `src` into the ring `buf` starting at byte `offset`, continuing at the
/// start of `buf` when the end is reached. Returns the offset after the last byte
/// (`buf.len()` wraps to 0).
///
/// Panics if `offset > buf.len()` or `src` is longer than `buf` (a WQE never is: the
/// writer checks that the whole WQE fits in the ring first).
#[inline(always)]
pub fn copy_wrapping(buf: &mut [u8], offset: usize, src: &[u8]) -> usize {
    let room = buf.len() - offset;
    if src.len() < room {
        buf[offset..offset + src.len()].copy_from_slice(src);
        offset + src.len()
    } else {
        let (head, tail) = src.split_at(room);
        buf[offset..].copy_from_slice(head);
        buf[..tail.len()].copy_from_slice(tail);
        tail.len()
    }
}

/// Writes an inline segment gathering `data` into the SQ ring `buf` (the whole SQ
/// buffer, a power-of-two multiple of 16 bytes) at byte `offset` (16-byte aligned),
/// wrapping at the end of the buffer, and zero-fills the padding up to the next
/// 16-byte boundary. Returns the DS count (see [`inline_ds`]); nothing is written
/// when the total length is zero.
///
/// The caller bounds the total length by the QP's inline limit; this function only
/// requires that the segment is not longer than `buf`.
pub fn write_inline(buf: &mut [u8], offset: usize, data: &[&[u8]]) -> u32 {
    debug_assert!(offset & (DS_SIZE as usize - 1) == 0 && offset < buf.len());
    let len: usize = data.iter().map(|d| d.len()).sum();
    if len == 0 {
        return 0;
    }
    buf[offset..offset + INLINE_HDR_SIZE as usize]
        .copy_from_slice(&InlineHeader::new(len as u32).to_bytes());
    let mut at = offset + INLINE_HDR_SIZE as usize;
    for chunk in data {
        at = copy_wrapping(buf, at, chunk);
    }
    // The padding stays inside the 16-byte unit holding the last byte, which never
    // straddles the end of the ring (the ring is a multiple of 16 bytes).
    let pad = (DS_SIZE as usize - at % DS_SIZE as usize) % DS_SIZE as usize;
    buf[at..at + pad].fill(0);
    inline_ds(len as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_wraps() {
        let mut buf = [0u8; 8];
        assert_eq!(copy_wrapping(&mut buf, 5, &[1, 2, 3, 4, 5]), 2);
        assert_eq!(buf, [4, 5, 0, 0, 0, 1, 2, 3]);
        assert_eq!(copy_wrapping(&mut buf, 2, &[9, 9, 9, 9, 9, 9]), 0);
        assert_eq!(buf, [4, 5, 9, 9, 9, 9, 9, 9]);
        assert_eq!(copy_wrapping(&mut buf, 8, &[7]), 1);
        assert_eq!(buf[0], 7);
    }

    #[test]
    fn inline_golden_single_unit() {
        let mut buf = [0xeeu8; 32];
        let ds = write_inline(&mut buf, 16, &[&[1, 2, 3], &[4, 5]]);
        assert_eq!(ds, 1);
        assert_eq!(&buf[..16], &[0xee; 16]);
        assert_eq!(
            &buf[16..],
            &[0x80, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn inline_zero_length_writes_nothing() {
        let mut buf = [0xeeu8; 32];
        assert_eq!(write_inline(&mut buf, 0, &[&[], &[]]), 0);
        assert_eq!(buf, [0xee; 32]);
    }

    #[test]
    fn inline_wraps_and_pads() {
        // Header in the last unit, data running over the end into unit 0.
        let mut buf = [0xeeu8; 32];
        let data: Vec<u8> = (1..=20).collect();
        let ds = write_inline(&mut buf, 16, &[&data]);
        assert_eq!(ds, 2);
        let mut expect = [0u8; 32];
        expect[16..20].copy_from_slice(&[0x80, 0, 0, 20]);
        expect[20..32].copy_from_slice(&data[..12]);
        expect[0..8].copy_from_slice(&data[12..]);
        // bytes 8..16 are padding, zeroed
        assert_eq!(buf, expect);
    }
}
