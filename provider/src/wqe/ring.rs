//! The send queue ring as the WQE writers see it: a power-of-two number of 64-byte
//! WQEBBs, addressed by the 16-bit producer index and by 16-byte DS slot.
//!
//! Every access masks its index, so a WQE that runs past the last WQEBB continues at
//! the first one, exactly as the device reads it.

use core::marker::PhantomData;
use core::ptr::NonNull;

use super::{DS_SIZE, WQEBB_SIZE};

/// Largest ring the 16-bit WQE index can address without aliasing.
pub const MAX_WQE_CNT: u32 = 1 << 16;

/// A borrowed SQ buffer of `wqe_cnt` WQEBBs (`wqe_cnt` a power of two, at most
/// [`MAX_WQE_CNT`]).
///
/// Holds a raw base pointer rather than a slice so that a QP can build one over its
/// DMA buffer for each post without re-deriving a slice, and so that slot access is a
/// mask and an add with no bounds check.
pub struct SqRing<'a> {
    base: NonNull<u8>,
    /// `len - 1`, with `len = wqe_cnt * 64` a power of two.
    byte_mask: usize,
    _buf: PhantomData<&'a mut [u8]>,
}

// SAFETY: SqRing is an exclusive borrow of a byte buffer, like `&mut [u8]`.
unsafe impl Send for SqRing<'_> {}
// SAFETY: shared access only reads through `&self`, like `&[u8]`.
unsafe impl Sync for SqRing<'_> {}

impl<'a> SqRing<'a> {
    /// Wraps a whole SQ buffer. `None` unless its length is `64 * wqe_cnt` with
    /// `wqe_cnt` a power of two no larger than [`MAX_WQE_CNT`].
    pub fn new(buf: &'a mut [u8]) -> Option<Self> {
        let len = buf.len();
        let wqe_cnt = len / WQEBB_SIZE as usize;
        if !len.is_power_of_two() || wqe_cnt == 0 || wqe_cnt > MAX_WQE_CNT as usize {
            return None;
        }
        Some(Self {
            base: NonNull::from(buf).cast(),
            byte_mask: len - 1,
            _buf: PhantomData,
        })
    }

    /// Wraps the SQ buffer at `base`.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of `wqe_cnt * 64` bytes for `'a`, and
    /// nothing else (CPU or device) may access those bytes while the ring is alive,
    /// except that the device may read WQEs the caller has already posted and will
    /// not overwrite (the QP's overflow check guarantees that). `wqe_cnt` must be a
    /// power of two no larger than [`MAX_WQE_CNT`].
    pub unsafe fn from_raw_parts(base: NonNull<u8>, wqe_cnt: u32) -> Self {
        debug_assert!(wqe_cnt.is_power_of_two() && wqe_cnt <= MAX_WQE_CNT);
        Self {
            base,
            byte_mask: wqe_cnt as usize * WQEBB_SIZE as usize - 1,
            _buf: PhantomData,
        }
    }

    /// Number of WQEBBs in the ring.
    #[inline(always)]
    pub fn wqe_cnt(&self) -> u32 {
        ((self.byte_mask + 1) / WQEBB_SIZE as usize) as u32
    }

    /// Ring size in bytes.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.byte_mask + 1
    }

    /// Always false: a ring holds at least one WQEBB.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Number of DS slots in the ring.
    #[inline(always)]
    pub fn ds_cnt(&self) -> u32 {
        self.wqe_cnt() * (WQEBB_SIZE / DS_SIZE)
    }

    /// Byte offset of WQE index `pi` (the index wraps with the ring).
    #[inline(always)]
    pub fn wqe_offset(&self, pi: u16) -> usize {
        (pi as usize * WQEBB_SIZE as usize) & self.byte_mask
    }

    /// The 16-byte slot `ds` (counted from the start of the ring, taken modulo the ring).
    #[inline(always)]
    pub fn slot_mut(&mut self, ds: u32) -> &mut [u8; 16] {
        let off = (ds as usize * DS_SIZE as usize) & self.byte_mask;
        // SAFETY: `off` is a multiple of 16 below `len` and `len` is a multiple of 16,
        // so `off..off + 16` lies inside the buffer this ring exclusively borrows for
        // 'a; `&mut self` prevents overlapping borrows; `[u8; 16]` has alignment 1.
        unsafe { &mut *self.base.as_ptr().add(off).cast::<[u8; 16]>() }
    }

    /// The whole WQEBB at WQE index `pi` (the index wraps with the ring). The first
    /// WQEBB of a WQE never wraps, which is why the control segment and the
    /// transport segments after it are written through this.
    #[inline(always)]
    pub fn wqebb_mut(&mut self, pi: u16) -> &mut [u8; 64] {
        let off = self.wqe_offset(pi);
        // SAFETY: `off` is a multiple of 64 below `len`, which is a multiple of 64, so
        // the 64 bytes are inside the exclusively borrowed buffer; alignment is 1.
        unsafe { &mut *self.base.as_ptr().add(off).cast::<[u8; 64]>() }
    }

    /// The ring as one byte slice (for wrapping copies of inline data).
    #[inline(always)]
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: the ring exclusively borrows `len` bytes at `base` for 'a.
        unsafe { core::slice::from_raw_parts_mut(self.base.as_ptr(), self.len()) }
    }

    /// The ring as one byte slice, read-only.
    #[inline(always)]
    pub fn as_bytes(&self) -> &[u8] {
        // SAFETY: as for `as_bytes_mut`; `&self` only hands out shared access.
        unsafe { core::slice::from_raw_parts(self.base.as_ptr(), self.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        let mut buf = [0u8; 256];
        let ring = SqRing::new(&mut buf).unwrap();
        assert_eq!((ring.wqe_cnt(), ring.ds_cnt(), ring.len()), (4, 16, 256));
        assert_eq!(ring.wqe_offset(5), 64);
        assert_eq!(ring.wqe_offset(0xffff), 192);
        assert!(SqRing::new(&mut [0u8; 192]).is_none());
        assert!(SqRing::new(&mut [0u8; 32]).is_none());
        assert!(SqRing::new(&mut []).is_none());
    }

    #[test]
    fn slots_wrap() {
        let mut buf = [0u8; 128];
        let mut ring = SqRing::new(&mut buf).unwrap();
        *ring.slot_mut(8) = [1; 16];
        *ring.slot_mut(7) = [2; 16];
        ring.wqebb_mut(3)[0] = 3;
        assert_eq!(&buf[..16], &[1; 16]);
        assert_eq!(&buf[112..], &[2; 16]);
        assert_eq!(buf[64], 3);
    }

    /// The whole ring as bytes (what the BlueFlame copy reads), in place.
    #[test]
    fn byte_views_are_the_ring() {
        let mut buf: [u8; 128] = core::array::from_fn(|i| i as u8);
        let mut ring = SqRing::new(&mut buf).unwrap();
        assert!(!ring.is_empty());
        ring.as_bytes_mut()[127] = 0xaa;
        let bytes = ring.as_bytes();
        assert_eq!((bytes.len(), bytes[1], bytes[64], bytes[127]), (128, 1, 64, 0xaa));
    }
}
