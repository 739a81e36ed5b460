//! The builders' bytes at the PRM offsets of the kernel's mlx5_ifc.h
//! (set_fte_in.flow_context at bit 0x200, flow_context.match_value at 0x200,
//! fte_match_set_lyr_2_4.udp_dport at 0xf0, dst_ipv4_dst_ipv6 at 0x180;
//! create_flow_group_in.match_criteria at 0x200, match_criteria_enable at 0x1f8).

use super::*;

#[test]
fn match_mask_and_value() {
    let m = Match::new().udp_dport(4791).dst_ip("10.0.0.2".parse().unwrap());
    let (mask, value) = (m.mask(), m.value());
    assert_eq!(&value[0x1e..0x20], &[0x12, 0xb7], "udp_dport");
    assert_eq!(&mask[0x1e..0x20], &[0xff, 0xff]);
    assert_eq!(value[0x10], 17, "ip_protocol implied");
    assert_eq!(&value[0x3c..0x40], &[10, 0, 0, 2]);
    assert_eq!(&mask[0x30..0x3c], &[0; 12], "only the IPv4 dword of the union");
    // ip_version 4 at bit 0x93..0x97: byte 0x12 bits 3..6 of the MSB-first numbering
    assert_eq!(value[0x12], 0x08);
    assert_eq!(mask[0x12] & 0x1e, 0x1e);
    assert!(value.iter().zip(mask.iter()).all(|(v, m)| v & !m == 0), "value inside its mask");
}

#[test]
fn set_fte_bytes() {
    let m = Match::new().udp_dport(53);
    let b = set_fte_in(5, 9, 3, &m, &Rule { target: Target::Tir(0x44), flow_tag: 1, counters: vec![0x77] });
    assert_eq!(b.len(), 0x340 + 16);
    assert_eq!(&b[0..2], &[0x09, 0x36]);
    assert_eq!(&b[0x14..0x18], &[0, 0, 0, 5]);
    assert_eq!(&b[0x20..0x24], &[0, 0, 0, 3]);
    assert_eq!(&b[0x44..0x48], &[0, 0, 0, 9], "group_id");
    assert_eq!(&b[0x4c..0x50], &[0, 0, 0, 0x0c], "FWD_DEST | COUNT");
    assert_eq!(&b[0x80 + 0x1e..0x80 + 0x20], &[0, 53]);
    assert_eq!(&b[0x340..], &[2, 0, 0, 0x44, 0, 0, 0, 0, 0, 0, 0, 0x77, 0, 0, 0, 0]);
    let g = create_group_in(5, 0, 15, &m);
    assert_eq!(g[0x3f], 1, "OUTER_HEADERS");
    assert_eq!(&g[0x40 + 0x1e..0x40 + 0x20], &[0xff, 0xff]);
    assert_eq!(&g[0x24..0x28], &[0, 0, 0, 15]);
}
