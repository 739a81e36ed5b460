//! The responder CQE's `flags_rqpn` word: where the GRH went, which RoCE packet type
//! arrived, and the source QP.
//!
//! | bits    | field                                                                |
//! |---------|----------------------------------------------------------------------|
//! | 31..30  | reserved                                                             |
//! | 29..28  | grh: 0 none, 1 scattered to the receive buffer, 2 in the CQE           |
//! | 27..24  | InfiniBand: the packet's SL; RoCE: bits 25..24 the packet type          |
//! | 23..0   | source QP (UD)                                                        |
//!
//! On RoCE the SL nibble carries the L3 header type instead: 0 GRH (RoCE v1), 1 IPv6
//! (RoCE v2), 2 IPv4 (RoCE v2). mlx5_ib (drivers/infiniband/hw/mlx5/cq.c,
//! `handle_responder`) reads it as `roce_packet_type` on every Ethernet-port QP and turns
//! it into `wc->network_hdr_type`; its enum is `MLX5_CQE_ROCE_L3_HEADER_TYPE_*` in
//! include/linux/mlx5/device.h. libmlx5 (providers/mlx5/cq.c, `handle_responder`)
//! does not know about RoCE here and hands the nibble out as `wc->sl`, and sets
//! IBV_WC_GRH when the two grh bits are non-zero; the kernel's names for those two
//! values are `MLX5_GRH_IN_BUFFER` and `MLX5_GRH_IN_CQE`.
//!
//! A UD receive on RoCE always has a GRH (the IP header stands in for it), written to
//! the first 40 bytes of the receive buffer; an RC or UC receive scatters no GRH.

/// Where the GRH of a received packet is (`flags_rqpn[29:28]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum GrhIn {
    /// No GRH reported (RC, UC).
    None = 0,
    /// In the first 40 bytes of the receive buffer (`MLX5_GRH_IN_BUFFER`).
    Buffer = 1,
    /// In the CQE (`MLX5_GRH_IN_CQE`).
    Cqe = 2,
}

/// The L3 header a RoCE packet arrived with (`flags_rqpn[25:24]`,
/// `MLX5_CQE_ROCE_L3_HEADER_TYPE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum RocePacketType {
    /// A GRH straight after the Ethernet header: RoCE v1.
    Grh = 0,
    /// RoCE v2 over IPv6.
    Ipv6 = 1,
    /// RoCE v2 over IPv4.
    Ipv4 = 2,
}

impl RocePacketType {
    pub const fn from_bits(v: u8) -> Option<RocePacketType> {
        match v {
            0 => Some(RocePacketType::Grh),
            1 => Some(RocePacketType::Ipv6),
            2 => Some(RocePacketType::Ipv4),
            _ => None,
        }
    }
}

/// The word for a receive on a RoCE port from `src_qp`.
pub const fn roce_flags_rqpn(grh: GrhIn, ty: RocePacketType, src_qp: u32) -> u32 {
    (grh as u32) << 28 | (ty as u32) << 24 | (src_qp & 0x00ff_ffff)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-derived from the bit table: UD over IPv4 from QP 0xabcdef is grh 1 (bit
    /// 28), type 2 (bit 25).
    #[test]
    fn words() {
        assert_eq!(roce_flags_rqpn(GrhIn::Buffer, RocePacketType::Ipv4, 0xab_cdef), 0x12ab_cdef);
        assert_eq!(roce_flags_rqpn(GrhIn::Buffer, RocePacketType::Ipv6, 0x1ff_ffff), 0x11ff_ffff);
        assert_eq!(roce_flags_rqpn(GrhIn::None, RocePacketType::Ipv4, 0x42), 0x0200_0042);
        assert_eq!(roce_flags_rqpn(GrhIn::Cqe, RocePacketType::Grh, 0), 0x2000_0000);
        assert_eq!(RocePacketType::from_bits(3), None);
    }
}
