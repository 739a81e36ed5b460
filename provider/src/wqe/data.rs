//! Scatter/gather lists: the verbs-side [`Sge`], and receive WQEs written from them.
//!
//! The 16-byte data segment itself (`struct mlx5_wqe_data_seg`) is [`DataSeg`], from
//! the `prm` crate. A receive WQE with fewer entries than its slots ends its list with
//! [`DataSeg::terminator`] (lkey [`INVALID_LKEY`]).

pub use prm::wqe::data::{DataSeg, INVALID_LKEY};

/// One scatter/gather element, laid out like `struct ibv_sge` so a verbs
/// compatibility layer can reinterpret an `ibv_sge` array.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    /// The first byte's address, as the MR names it.
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// The local key of the MR that covers the bytes.
    pub lkey: u32,
}

impl Sge {
    /// An SGE of `length` bytes at `addr` under `lkey`.
    pub const fn new(addr: u64, length: u32, lkey: u32) -> Self {
        Self { addr, length, lkey }
    }
}

/// The data segment gathering (or scattering to) one [`Sge`].
#[inline(always)]
pub const fn data_seg(sge: &Sge) -> DataSeg {
    DataSeg::new(sge.length, sge.lkey, sge.addr)
}

/// Writes a receive WQE: one data segment per non-empty `sgl` entry, then a
/// terminator if slots remain. Returns the number of data segments written (without
/// the terminator), or `None` if the non-empty entries do not fit in `wqe`.
///
/// Zero-length entries are skipped, as libmlx5 does, so they never reach the device.
pub fn write_recv_wqe(wqe: &mut [[u8; 16]], sgl: &[Sge]) -> Option<usize> {
    let mut n = 0;
    for sge in sgl.iter().filter(|s| s.length != 0) {
        data_seg(sge).write(wqe.get_mut(n)?);
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
