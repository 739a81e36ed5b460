//! The 16-byte data (scatter/gather pointer) segment, used by send WQEs (gather) and
//! receive WQEs (scatter).
//!
//! Layout (big-endian, `struct mlx5_wqe_data_seg`): bytes 0..4 byte count, 4..8
//! lkey, 8..16 virtual address. A receive WQE with fewer entries than its slots
//! ends its list with [`DataSeg::terminator`] (lkey [`INVALID_LKEY`]).

use zerocopy::byteorder::big_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The lkey that ends a receive WQE's scatter list (`MLX5_INVALID_LKEY`).
pub const INVALID_LKEY: u32 = 0x100;

/// One scatter/gather element, laid out like `struct ibv_sge` so a verbs
/// compatibility layer can reinterpret an `ibv_sge` array.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

impl Sge {
    pub const fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Self { addr, length, lkey }
    }
}

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
pub struct DataSeg {
    pub byte_count: U32,
    pub lkey: U32,
    pub addr: U64,
}

const _: () = assert!(core::mem::size_of::<DataSeg>() == 16);

impl DataSeg {
    #[inline(always)]
    pub const fn new(byte_count: u32, lkey: u32, addr: u64) -> Self {
        Self {
            byte_count: U32::new(byte_count),
            lkey: U32::new(lkey),
            addr: U64::new(addr),
        }
    }

    #[inline(always)]
    pub const fn from_sge(sge: &Sge) -> Self {
        Self::new(sge.length, sge.lkey, sge.addr)
    }

    /// The entry that ends a short receive scatter list: byte count 0, lkey
    /// [`INVALID_LKEY`], address 0.
    #[inline(always)]
    pub const fn terminator() -> Self {
        Self::new(0, INVALID_LKEY, 0)
    }

    /// Stores the segment into its 16-byte slot.
    #[inline(always)]
    pub fn write(&self, slot: &mut [u8; 16]) {
        *slot = zerocopy::transmute!(*self);
    }

    #[inline(always)]
    pub fn view(slot: &[u8; 16]) -> &Self {
        zerocopy::transmute_ref!(slot)
    }

    pub const fn byte_count(&self) -> u32 {
        self.byte_count.get()
    }

    pub const fn lkey(&self) -> u32 {
        self.lkey.get()
    }

    pub const fn addr(&self) -> u64 {
        self.addr.get()
    }

    /// Whether this entry ends a receive scatter list.
    pub const fn is_terminator(&self) -> bool {
        self.lkey.get() == INVALID_LKEY
    }
}

/// Writes a receive WQE: one data segment per non-empty `sgl` entry, then a
/// terminator if slots remain. Returns the number of data segments written (without
/// the terminator), or `None` if the non-empty entries do not fit in `wqe`.
///
/// Zero-length entries are skipped, as libmlx5 does, so they never reach the device.
pub fn write_recv_wqe(wqe: &mut [[u8; 16]], sgl: &[Sge]) -> Option<usize> {
    let mut n = 0;
    for sge in sgl.iter().filter(|s| s.length != 0) {
        DataSeg::from_sge(sge).write(wqe.get_mut(n)?);
        n += 1;
    }
    if let Some(slot) = wqe.get_mut(n) {
        DataSeg::terminator().write(slot);
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden() {
        let mut slot = [0u8; 16];
        DataSeg::new(0x0001_0000, 0xffff_ffff, 0x7fff_1234_5678_9abc).write(&mut slot);
        assert_eq!(
            slot,
            [
                0x00, 0x01, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff, 0x12, 0x34, 0x56, 0x78,
                0x9a, 0xbc
            ]
        );
        let v = DataSeg::view(&slot);
        assert_eq!(
            (v.byte_count(), v.lkey(), v.addr()),
            (0x10000, 0xffff_ffff, 0x7fff_1234_5678_9abc)
        );
        DataSeg::terminator().write(&mut slot);
        assert_eq!(slot, [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(DataSeg::view(&slot).is_terminator());
    }

    #[test]
    fn sge_matches_ibv_sge_layout() {
        assert_eq!(core::mem::size_of::<Sge>(), 16);
        assert_eq!(core::mem::offset_of!(Sge, length), 8);
        assert_eq!(core::mem::offset_of!(Sge, lkey), 12);
    }

    #[test]
    fn recv_wqe() {
        let mut wqe = [[0xaau8; 16]; 4];
        let sgl = [
            Sge::new(0x1000, 64, 7),
            Sge::new(0x2000, 0, 8),
            Sge::new(0x3000, 32, 9),
        ];
        assert_eq!(write_recv_wqe(&mut wqe, &sgl), Some(2));
        assert_eq!(*DataSeg::view(&wqe[0]), DataSeg::new(64, 7, 0x1000));
        assert_eq!(*DataSeg::view(&wqe[1]), DataSeg::new(32, 9, 0x3000));
        assert!(DataSeg::view(&wqe[2]).is_terminator());
        assert_eq!(wqe[3], [0xaa; 16], "only one terminator is written");

        let mut full = [[0u8; 16]; 2];
        assert_eq!(
            write_recv_wqe(&mut full, &sgl),
            Some(2),
            "no room for a terminator is fine"
        );
        let mut small = [[0u8; 16]; 1];
        assert_eq!(write_recv_wqe(&mut small, &sgl), None);
    }
}
