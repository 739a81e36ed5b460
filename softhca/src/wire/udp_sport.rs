//! The UDP source port of a RoCEv2 flow: the one field of the UDP header that carries
//! entropy, so that switches hashing the 5-tuple (ECMP) spread different QPs over
//! different paths while keeping each QP's packets in order on one.
//!
//! Linux fixes the rule in include/rdma/ib_verbs.h, and mlx5_ib and rxe both use it: the
//! 20-bit IPv6 flow label of the QP's path folds into the 14 low bits of a port in the
//! range reserved for RoCEv2 sources (0xC000-0xFFFF, `IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`
//! and `_MAX`); a path without a flow label gets one made from the product of the two
//! QPNs, which is symmetric, so both ends of a connection pick the same port.
//!
//! Where each QP type takes its port:
//! - RC/UC: mlx5_ib's `mlx5_set_path` writes it into the QP context's
//!   `primary_address_path.udp_sport` when a modify carries the address vector and the
//!   destination QPN (INIT->RTR); `mlx5dv_modify_qp_udp_sport` later rewrites that field
//!   with an RTS2RTS_QP command (optional-parameter bit `MLX5_QPC_OPT_MASK_32_UDP_SPORT`).
//! - UD: each WQE's address vector carries it, in the `rlid` field that RoCE does not
//!   otherwise use: libmlx5's `mlx5_ah_set_udp_sport` puts the flow label's port there, or
//!   a random one from the range when the AH has no flow label.

/// The first port of the RoCEv2 source range (`IB_ROCE_UDP_ENCAP_VALID_PORT_MIN`).
pub const SPORT_MIN: u16 = 0xc000;
/// The 20 bits of an IPv6 flow label (`IB_GRH_FLOWLABEL_MASK`).
pub const FLOW_LABEL_MASK: u32 = 0xf_ffff;

/// The flow label of a connection between QPs `lqpn` and `rqpn` whose path has none
/// (`rdma_calc_flow_label`): their 48-bit product folded to 20 bits.
pub const fn calc_flow_label(lqpn: u32, rqpn: u32) -> u32 {
    let mut v = lqpn as u64 * rqpn as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v as u32) & FLOW_LABEL_MASK
}

/// The source port for flow label `fl` (`rdma_flow_label_to_udp_sport`): its top six bits
/// folded onto its low fourteen, in the RoCEv2 source range.
pub const fn flow_label_to_udp_sport(fl: u32) -> u16 {
    let low = fl & 0x3fff;
    let high = fl & 0xf_c000;
    ((low ^ (high >> 14)) as u16) | SPORT_MIN
}

/// The source port of a connected QP `lqpn` talking to `rqpn` over a path with flow label
/// `fl` (`rdma_get_udp_sport`).
pub const fn udp_sport(fl: u32, lqpn: u32, rqpn: u32) -> u16 {
    let fl = fl & FLOW_LABEL_MASK;
    flow_label_to_udp_sport(if fl == 0 { calc_flow_label(lqpn, rqpn) } else { fl })
}

/// Whether `port` is one a RoCEv2 source may use (the reserved range).
pub const fn is_roce_sport(port: u16) -> bool {
    port >= SPORT_MIN
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Worked by hand from the ib_verbs.h definitions.
    #[test]
    fn by_hand() {
        // 2 * 3 = 6: no high bits to fold.
        assert_eq!(calc_flow_label(2, 3), 6);
        assert_eq!(udp_sport(0, 2, 3), 0xc006);
        // Symmetric: both ends of a connection compute the same port.
        assert_eq!(udp_sport(0, 0x1234, 0x99), udp_sport(0, 0x99, 0x1234));
        // 0x100000 * 1: bit 20 folds onto bit 0 (v ^ v >> 20 = 0x100001), masked to 1.
        assert_eq!(calc_flow_label(0x10_0000, 1), 1);
        // Flow label 0xfc001: the top six bits (0x3f) fold onto the low fourteen (1).
        assert_eq!(flow_label_to_udp_sport(0xf_c001), 0xc000 | (1 ^ 0x3f));
        // A given flow label wins over the QPNs.
        assert_eq!(udp_sport(5, 2, 3), 0xc005);
        assert!(is_roce_sport(udp_sport(0, 0xff_ffff, 0xff_ffff)));
    }
}
