//! The 32-byte Ethernet segment of raw-packet (and IPoIB) send WQEs, after the
//! control segment: checksum offload flags, LSO segment size and the inline L2
//! header the device needs before it can gather the rest.
//!
//! Layout (big-endian, `struct mlx5_wqe_eth_seg`): bytes 0..4 reserved, 4
//! `cs_flags`, 5 reserved, 6..8 `mss`, 8..12 reserved, 12..14 `inline_hdr_sz`,
//! 14..32 the first `inline_hdr_sz` bytes of the packet (longer headers continue in
//! the following 16-byte units). Not executed by softhca yet; defined here so raw
//! Ethernet QPs have one definition when they come.

use zerocopy::byteorder::big_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// `cs_flags`: compute the L3 (IPv4 header) checksum (`MLX5_ETH_WQE_L3_CSUM`).
pub const ETH_L3_CSUM: u8 = 0x40;
/// `cs_flags`: compute the L4 (TCP/UDP) checksum (`MLX5_ETH_WQE_L4_CSUM`).
pub const ETH_L4_CSUM: u8 = 0x80;

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
pub struct EthSeg {
    pub rsvd0: U32,
    pub cs_flags: u8,
    pub rsvd1: u8,
    pub mss: U16,
    pub rsvd2: U32,
    pub inline_hdr_sz: U16,
    /// The first 18 bytes of the inline header (`inline_hdr_start` + `inline_hdr`).
    pub inline_hdr: [u8; 18],
}

const _: () = assert!(core::mem::size_of::<EthSeg>() == 32);

impl EthSeg {
    /// An Ethernet segment with checksum flags, LSO segment size and the first bytes
    /// of an inline header of `inline_hdr_sz` bytes (copy up to 18 here; the rest goes
    /// in the units that follow).
    pub fn new(cs_flags: u8, mss: u16, inline_hdr_sz: u16, head: &[u8]) -> Self {
        let mut s = EthSeg { cs_flags, mss: U16::new(mss), inline_hdr_sz: U16::new(inline_hdr_sz), ..Default::default() };
        let n = head.len().min(s.inline_hdr.len());
        s.inline_hdr[..n].copy_from_slice(&head[..n]);
        s
    }

    #[inline(always)]
    pub fn view(src: &[u8; 32]) -> &Self {
        zerocopy::transmute_ref!(src)
    }

    #[inline(always)]
    pub fn write(&self, dst: &mut [u8; 32]) {
        *dst = zerocopy::transmute!(*self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-derived from the layout: flags at 4, mss at 6..8, header size at 12..14,
    /// header bytes from 14.
    #[test]
    fn golden() {
        let mut out = [0xeeu8; 32];
        EthSeg::new(ETH_L3_CSUM | ETH_L4_CSUM, 1448, 14, &[0xaa; 14]).write(&mut out);
        let mut want = [0u8; 32];
        want[4] = 0xc0;
        want[6..8].copy_from_slice(&[0x05, 0xa8]);
        want[12..14].copy_from_slice(&[0, 14]);
        want[14..28].fill(0xaa);
        assert_eq!(out, want);
        assert_eq!(EthSeg::view(&out).mss.get(), 1448);
    }
}
