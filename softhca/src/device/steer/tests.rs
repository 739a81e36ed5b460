//! The engine on frames built by hand, byte by byte from the RFC/IEEE layouts
//! (Ethernet II, 802.1Q, IPv4 RFC 791, IPv6 RFC 8200, UDP RFC 768, TCP RFC 9293).

use super::*;
use prm::bits::{View, ViewMut};
use prm::cmd::flow::matching::FteMatchSetLyr24 as L;

const DMAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SMAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn eth(ty: u16, vlan: Option<u16>, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DMAC);
    f.extend_from_slice(&SMAC);
    if let Some(tci) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ty.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], frag: u16, l4: &[u8]) -> Vec<u8> {
    let len = (20 + l4.len()) as u16;
    let mut h = vec![0x45, 0xb8, 0, 0, 0, 1];
    h[2..4].copy_from_slice(&len.to_be_bytes());
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

fn ipv6(next: u8, src: [u8; 16], dst: [u8; 16], l4: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 255]);
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    h.extend_from_slice(l4);
    h
}

fn udp(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sport.to_be_bytes());
    u.extend_from_slice(&dport.to_be_bytes());
    u.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.resize(8 + payload, 0xab);
    u
}

fn tcp(sport: u16, dport: u16, flags: u16) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sport.to_be_bytes());
    t.extend_from_slice(&dport.to_be_bytes());
    t.extend_from_slice(&[0; 8]);
    t.extend_from_slice(&((5u16 << 12) | flags).to_be_bytes());
    t.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
    t
}

fn udp4(dst: [u8; 4], dport: u16) -> Vec<u8> {
    eth(0x0800, None, &ipv4(17, [10, 0, 0, 1], dst, 0, &udp(1234, dport, 10)))
}

/// A mask or value built through the PRM layout.
fn key(f: impl FnOnce(&mut ViewMut<'_, L>)) -> Key {
    let mut k = Key::default();
    f(&mut ViewMut::new(&mut k.0).unwrap());
    k
}

fn udp_dport_mask() -> Key {
    key(|v| {
        v.set(L::ethertype, 0xffff).set(L::ip_protocol, 0xff).set(L::udp_dport, 0xffff);
    })
}

fn udp_dport_value(p: u16) -> Key {
    key(|v| {
        v.set(L::ethertype, 0x0800).set(L::ip_protocol, 17).set(L::udp_dport, p);
    })
}

fn fwd(tir: u32, tag: u32) -> Action {
    Action { dests: vec![Dest::Tir(tir)], flow_tag: tag, ..Default::default() }
}

#[test]
fn parse_fills_the_prm_fields() {
    let f = eth(0x0800, Some(0x6005), &ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &udp(1234, 4791, 4)));
    let k = Key::parse(&f);
    let v = View::<L>::new(&k.0).unwrap();
    assert_eq!((v.get(L::dmac_47_16), v.get(L::dmac_15_0)), (0x0200_0000, 0x0001));
    assert_eq!((v.get(L::smac_47_16), v.get(L::smac_15_0)), (0x0200_0000, 0x0002));
    assert_eq!(v.get(L::ethertype), 0x0800, "the type after the tag");
    assert!(v.get(L::cvlan_tag) && !v.get(L::svlan_tag));
    assert_eq!((v.get(L::first_prio), v.get(L::first_cfi), v.get(L::first_vid)), (3, false, 5));
    assert_eq!((v.get(L::ip_version), v.get(L::ip_protocol), v.get(L::ttl_hoplimit)), (4, 17, 64));
    assert_eq!((v.get(L::ip_dscp), v.get(L::ip_ecn)), (0xb8 >> 2, 0));
    assert_eq!((v.get(L::udp_sport), v.get(L::udp_dport), v.get(L::l4_type)), (1234, 4791, 2));
    assert_eq!(&v.bytes(L::dst_ipv4_dst_ipv6)[12..], &[10, 0, 0, 2]);
    assert_eq!(&v.bytes(L::src_ipv4_src_ipv6)[..12], &[0; 12]);

    let t = Key::parse(&eth(0x86dd, None, &ipv6(6, [0xfe; 16], [0xfd; 16], &tcp(80, 443, 0x012))));
    let v = View::<L>::new(&t.0).unwrap();
    assert_eq!((v.get(L::ip_version), v.get(L::ip_protocol), v.get(L::ttl_hoplimit)), (6, 6, 255));
    assert_eq!((v.get(L::tcp_sport), v.get(L::tcp_dport), v.get(L::tcp_flags)), (80, 443, 0x12));
    assert_eq!(v.bytes(L::dst_ipv4_dst_ipv6), &[0xfd; 16]);
    assert_eq!(v.get(L::udp_dport), 0);

    // a non-first fragment has no L4 header to parse
    let fr = Key::parse(&eth(0x0800, None, &ipv4(17, [1; 4], [2; 4], 0x0010, &udp(1, 2, 0))));
    let v = View::<L>::new(&fr.0).unwrap();
    assert!(v.get(L::frag));
    assert_eq!(v.get(L::udp_dport), 0);
    // truncated frames never panic
    for n in 0..f.len() {
        let _ = Key::parse(&f[..n]);
    }
}

#[test]
fn exact_match_delivers_and_others_miss() {
    let s = Steering::new();
    let t = s.create_table(0, 0, 10, Miss::Default).unwrap();
    let g = s.create_group(t, 0, 1023, udp_dport_mask()).unwrap();
    for i in 0..1000u32 {
        s.set_entry(t, i, Some(g), udp_dport_value(10000 + i as u16), fwd(100 + i, i), false).unwrap();
    }
    assert_eq!(s.classify(0, &udp4([10, 0, 0, 2], 10007)), Verdict::Deliver { dest: Dest::Tir(107), flow_tag: 7 });
    assert_eq!(s.classify(0, &udp4([10, 0, 0, 9], 10999)), Verdict::Deliver { dest: Dest::Tir(1099), flow_tag: 999 });
    assert_eq!(s.classify(0, &udp4([10, 0, 0, 2], 4791)), Verdict::Miss);
    let tcpf = eth(0x0800, None, &ipv4(6, [1; 4], [2; 4], 0, &tcp(5, 10007, 2)));
    assert_eq!(s.classify(0, &tcpf), Verdict::Miss, "ip_protocol is in the mask");
}

#[test]
fn groups_are_priorities_and_drop_and_count() {
    let s = Steering::new();
    let t = s.create_table(0, 0, 4, Miss::Default).unwrap();
    // created second but with lower indexes: tried first
    let g_port = s.create_group(t, 8, 15, udp_dport_mask()).unwrap();
    let dmac_mask = key(|v| {
        v.set(L::dmac_47_16, u32::MAX).set(L::dmac_15_0, u16::MAX);
    });
    let g_mac = s.create_group(t, 0, 7, dmac_mask).unwrap();
    let c = s.alloc_counter();
    let dmac_val = key(|v| {
        v.set(L::dmac_47_16, 0x0200_0000).set(L::dmac_15_0, 1);
    });
    s.set_entry(t, 0, Some(g_mac), dmac_val, Action { drop: true, counters: vec![c], ..Default::default() }, false).unwrap();
    s.set_entry(t, 8, Some(g_port), udp_dport_value(53), fwd(5, 0), false).unwrap();
    let f = udp4([10, 0, 0, 2], 53);
    assert_eq!(s.classify(0, &f), Verdict::Drop, "the dmac group has the lower indexes");
    assert_eq!(s.classify(0, &f), Verdict::Drop);
    assert_eq!(s.query_counter(c, false).unwrap(), (2, 2 * f.len() as u64));
    assert_eq!(s.query_counter(c, true).unwrap(), (2, 2 * f.len() as u64));
    assert_eq!(s.query_counter(c, false).unwrap(), (0, 0), "clear");
    assert_eq!(s.dealloc_counter(c), Err(SteerError::Busy));
    s.delete_entry(t, 0).unwrap();
    assert_eq!(s.classify(0, &f), Verdict::Deliver { dest: Dest::Tir(5), flow_tag: 0 });
    s.dealloc_counter(c).unwrap();
}

#[test]
fn misses_follow_the_table_chain() {
    let s = Steering::new();
    let t2 = s.create_table(0, 5, 4, Miss::Default).unwrap();
    let t1 = s.create_table(0, 1, 4, Miss::Table(t2)).unwrap();
    let t0 = s.create_table(0, 0, 4, Miss::Default).unwrap();
    s.set_root(0, t0).unwrap();
    let g2 = s.create_group(t2, 0, 3, udp_dport_mask()).unwrap();
    s.set_entry(t2, 0, Some(g2), udp_dport_value(7), fwd(2, 22), false).unwrap();
    // t0 (empty) -> default -> t1 (empty) -> its miss -> t2
    assert_eq!(s.classify(0, &udp4([1; 4], 7)), Verdict::Deliver { dest: Dest::Tir(2), flow_tag: 22 });
    assert_eq!(s.classify(0, &udp4([1; 4], 8)), Verdict::Miss);
    // a forward to a table of a lower level is refused, to a higher one works
    let g0 = s.create_group(t0, 0, 0, udp_dport_mask()).unwrap();
    let to_t1 = Action { dests: vec![Dest::Table(t1)], ..Default::default() };
    s.set_entry(t0, 0, Some(g0), udp_dport_value(7), to_t1.clone(), false).unwrap();
    let g1 = s.create_group(t1, 0, 0, Key::default()).unwrap();
    let back = Action { dests: vec![Dest::Table(t0)], ..Default::default() };
    assert_eq!(s.set_entry(t1, 0, Some(g1), Key::default(), back, false), Err(SteerError::BadTableDest));
    s.set_entry(t1, 0, Some(g1), Key::default(), Action { drop: true, ..Default::default() }, false).unwrap();
    assert_eq!(s.classify(0, &udp4([1; 4], 7)), Verdict::Drop, "t0 -> t1's match-all drop");
    assert_eq!(s.destroy_table(t1), Err(SteerError::Busy), "t1 has a group and t0 forwards to it");
    assert_eq!(s.destroy_table(t0), Err(SteerError::Busy));
}

#[test]
fn bad_input_changes_nothing() {
    let s = Steering::new();
    let t = s.create_table(0, 0, 3, Miss::Default).unwrap();
    let g = s.create_group(t, 0, 3, udp_dport_mask()).unwrap();
    assert_eq!(s.create_group(t, 3, 5, Key::default()), Err(SteerError::GroupRange), "overlap");
    assert_eq!(s.create_group(t, 4, 8, Key::default()), Err(SteerError::GroupRange), "past the table");
    assert_eq!(s.create_group(t, 6, 5, Key::default()), Err(SteerError::GroupRange), "start > end");
    assert_eq!(s.create_group(99, 0, 0, Key::default()), Err(SteerError::NoTable));
    assert_eq!(s.set_entry(t, 5, None, Key::default(), fwd(1, 0), false), Err(SteerError::EntryIndex));
    let g2 = s.create_group(t, 4, 7, Key::default()).unwrap();
    assert_eq!(s.set_entry(t, 1, Some(g2), udp_dport_value(1), fwd(1, 0), false), Err(SteerError::EntryIndex));
    let outside = key(|v| {
        v.set(L::udp_dport, 1).set(L::tcp_dport, 1);
    });
    assert_eq!(s.set_entry(t, 1, Some(g), outside, fwd(1, 0), false), Err(SteerError::ValueOutsideCriteria));
    let badc = Action { counters: vec![77], ..fwd(1, 0) };
    assert_eq!(s.set_entry(t, 1, Some(g), udp_dport_value(1), badc, false), Err(SteerError::NoCounter));
    assert_eq!(s.set_entry(t, 1, Some(g), udp_dport_value(1), fwd(1, 0), true), Err(SteerError::EntryExists), "modify of nothing");
    assert_eq!(s.counts(), (1, 2, 0, 0), "no entry half-installed");
    s.set_entry(t, 1, Some(g), udp_dport_value(1), fwd(1, 0), false).unwrap();
    assert_eq!(s.set_entry(t, 2, Some(g), udp_dport_value(1), fwd(2, 0), false), Err(SteerError::DuplicateValue));
    assert_eq!(s.set_entry(t, 1, Some(g), udp_dport_value(1), fwd(2, 0), false), Err(SteerError::EntryExists));
    s.set_entry(t, 1, Some(g), udp_dport_value(9), fwd(3, 0), true).unwrap();
    assert_eq!(s.classify(0, &udp4([1; 4], 1)), Verdict::Miss, "the modify replaced the value");
    assert_eq!(s.classify(0, &udp4([1; 4], 9)), Verdict::Deliver { dest: Dest::Tir(3), flow_tag: 0 });
    assert_eq!(s.destroy_group(t, g), Err(SteerError::Busy));
    assert_eq!(s.destroy_table(t), Err(SteerError::Busy));
    assert_eq!(s.delete_entry(t, 2), Err(SteerError::NoEntry));
    s.delete_entry(t, 1).unwrap();
    s.destroy_group(t, g).unwrap();
    s.destroy_group(t, g2).unwrap();
    s.destroy_table(t).unwrap();
    assert_eq!(s.counts(), (0, 0, 0, 0));
}

/// A rule added and removed while other flows stream through changes only its own
/// flow: every frame of the others is delivered where it was, none lost.
#[test]
fn updates_mid_stream_touch_only_their_flow() {
    let s = Arc::new(Steering::new());
    let t = s.create_table(0, 0, 8, Miss::Default).unwrap();
    let g = s.create_group(t, 0, 255, udp_dport_mask()).unwrap();
    for p in 0..16u16 {
        s.set_entry(t, p as u32, Some(g), udp_dport_value(p), fwd(p as u32, 0), false).unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (s, stop) = (s.clone(), stop.clone());
        std::thread::spawn(move || {
            let frames: Vec<_> = (0..16u16).map(|p| udp4([1; 4], p)).collect();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) || n < 10_000 {
                for (p, f) in frames.iter().enumerate() {
                    assert_eq!(s.classify(0, f), Verdict::Deliver { dest: Dest::Tir(p as u32), flow_tag: 0 });
                    n += 1;
                }
            }
            n
        })
    };
    for round in 0..2000u32 {
        s.set_entry(t, 100, Some(g), udp_dport_value(500), fwd(500, round), false).unwrap();
        assert_eq!(s.classify(0, &udp4([1; 4], 500)), Verdict::Deliver { dest: Dest::Tir(500), flow_tag: round });
        s.delete_entry(t, 100).unwrap();
        assert_eq!(s.classify(0, &udp4([1; 4], 500)), Verdict::Miss);
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reader.join().unwrap() >= 10_000);
}
