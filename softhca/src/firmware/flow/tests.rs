//! The flow commands with mailboxes built by hand: statuses are the PRM's
//! (`prm::cmd::status`), the errnos those of Linux's `cmd_status_to_err`, the
//! traffic checks go through the engine the commands programmed. A fuzzer at the
//! end throws mutated flow mailboxes at the firmware and checks that what the
//! outboxes announced is exactly what exists, and that refused commands left
//! nothing behind.

use nix::errno::Errno;
use prm::bits::{Layout, View, ViewMut};
use prm::cmd::flow::counter::*;
use prm::cmd::flow::entry::*;
use prm::cmd::flow::group::*;
use prm::cmd::flow::matching::{criteria, FteMatchParam, FteMatchSetLyr24 as L};
use prm::cmd::flow::table::*;
use prm::cmd::header::MboxIn;
use prm::cmd::hca_cap::{cap_type, FlowTableNicCap, FlowTablePropLayout as P, QueryHcaCapIn, QueryHcaCapOut};
use prm::cmd::opcode as op;
use prm::cmd::status as st;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::flow_syndrome as fs;
use crate::device::steer::{Dest, Verdict};
use crate::firmware::status::syndrome as syn;
use crate::firmware::Outcome;
use crate::hca::Hca;

const OUT: usize = 0x1100;

fn inbox<L: Layout>(opcode: u16, uid: u16, extra: usize, f: impl FnOnce(&mut ViewMut<'_, L>)) -> Vec<u8> {
    let mut b = vec![0u8; L::BYTES + extra];
    ViewMut::<MboxIn>::new(&mut b).unwrap().set(MboxIn::opcode, opcode).set(MboxIn::uid, uid);
    f(&mut ViewMut::new(&mut b).unwrap());
    b
}

fn exec(h: &Hca, inb: &[u8]) -> (Outcome, Vec<u8>) {
    let mut out = vec![0xa5u8; OUT];
    let o = h.firmware().exec(inb, &mut out);
    (o, out)
}

fn ok(h: &Hca, inb: &[u8]) -> Vec<u8> {
    let (o, out) = exec(h, inb);
    assert_eq!(o, Outcome::OK, "opcode {:#x}", u16::from_be_bytes([inb[0], inb[1]]));
    out
}

fn id24(out: &[u8]) -> u32 {
    u32::from_be_bytes([0, out[9], out[10], out[11]])
}

fn table_in(uid: u16, level: u8, log_size: u8, miss: Option<u32>) -> Vec<u8> {
    inbox::<CreateFlowTableIn>(op::CREATE_FLOW_TABLE, uid, 0, |v| {
        v.set(CreateFlowTableIn::table_type, TABLE_TYPE_NIC_RX);
        let mut c = v.sub_mut(CreateFlowTableIn::flow_table_context);
        c.set(FlowTableContext::level, level).set(FlowTableContext::log_size, log_size);
        if let Some(m) = miss {
            c.set(FlowTableContext::table_miss_action, miss_action::FWD).set(FlowTableContext::table_miss_id, m);
        }
    })
}

/// A group over `udp_dport` (+ ip_protocol).
fn group_in(uid: u16, table: u32, start: u32, end: u32) -> Vec<u8> {
    inbox::<CreateFlowGroupIn>(op::CREATE_FLOW_GROUP, uid, 0, |v| {
        v.set(CreateFlowGroupIn::table_id, table)
            .set(CreateFlowGroupIn::start_flow_index, start)
            .set(CreateFlowGroupIn::end_flow_index, end)
            .set(CreateFlowGroupIn::match_criteria_enable, criteria::OUTER_HEADERS);
        let mut m = v.sub_mut(CreateFlowGroupIn::match_criteria);
        m.sub_mut(FteMatchParam::outer_headers).set(L::ip_protocol, 0xff).set(L::udp_dport, 0xffff);
    })
}

#[derive(Clone, Default)]
struct Fte {
    op_mod: u16,
    mask: u8,
    group: u32,
    index: u32,
    dport: u16,
    action: u16,
    tag: u32,
    dests: Vec<(u8, u32)>,
    counters: Vec<u32>,
}

fn fte_in(uid: u16, table: u32, e: &Fte) -> Vec<u8> {
    let n = e.dests.len() + e.counters.len();
    inbox::<SetFteIn>(op::SET_FLOW_TABLE_ENTRY, uid, n * DEST_ENTRY_BYTES, |v| {
        v.set(SetFteIn::op_mod, e.op_mod).set(SetFteIn::modify_enable_mask, e.mask)
            .set(SetFteIn::table_id, table).set(SetFteIn::flow_index, e.index);
        let mut fc = v.sub_mut(SetFteIn::flow_context);
        fc.set(FlowContext::group_id, e.group).set(FlowContext::action, e.action).set(FlowContext::flow_tag, e.tag)
            .set(FlowContext::destination_list_size, e.dests.len() as u32)
            .set(FlowContext::flow_counter_list_size, e.counters.len() as u32);
        let mut mv = fc.sub_mut(FlowContext::match_value);
        mv.sub_mut(FteMatchParam::outer_headers).set(L::ip_protocol, 17).set(L::udp_dport, e.dport);
        let t = v.tail_mut();
        for (i, &(ty, id)) in e.dests.iter().enumerate() {
            ViewMut::<DestFormat>::new(&mut t[i * 8..]).unwrap().set(DestFormat::destination_type, ty).set(DestFormat::destination_id, id);
        }
        for (i, &id) in e.counters.iter().enumerate() {
            ViewMut::<FlowCounterList>::new(&mut t[(e.dests.len() + i) * 8..]).unwrap().set(FlowCounterList::flow_counter_id, id);
        }
    })
}

fn named<L: Layout>(opcode: u16, uid: u16, f: impl FnOnce(&mut ViewMut<'_, L>)) -> Vec<u8> {
    inbox::<L>(opcode, uid, 0, f)
}

fn udp_frame(dport: u16, payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    let ip_len = (20 + 8 + payload) as u16;
    f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&[0x30, 0x39]);
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.resize(f.len() + payload, 0);
    f
}

fn counter_of(h: &Hca, uid: u16, id: u32, clear: bool) -> (u64, u64) {
    let out = ok(h, &named::<QueryFlowCounterIn>(op::QUERY_FLOW_COUNTER, uid, |v| {
        v.set(QueryFlowCounterIn::flow_counter_id, id).set(QueryFlowCounterIn::clear, clear);
    }));
    let t = View::<TrafficCounter>::new(&out[QueryFlowCounterOut::BYTES..]).unwrap();
    (t.get(TrafficCounter::packets), t.get(TrafficCounter::octets))
}

#[test]
fn nic_flow_table_page_says_what_exists() {
    let h = Hca::for_tests();
    let inb = named::<QueryHcaCapIn>(op::QUERY_HCA_CAP, 0, |v| {
        v.set(QueryHcaCapIn::op_mod, cap_type::NIC_FLOW_TABLE << 1);
    });
    let out = ok(&h, &inb);
    let page = &out[QueryHcaCapOut::capability.off() / 8..];
    let nic = View::<FlowTableNicCap>::new(page).unwrap();
    let rx = nic.sub(FlowTableNicCap::flow_table_properties_nic_receive);
    assert!(rx.get(P::ft_support) && rx.get(P::flow_counter) && rx.get(P::flow_modify_en) && rx.get(P::modify_root));
    assert!(rx.get(P::identified_miss_table_mode));
    assert!(!rx.get(P::sw_owner) && !rx.get(P::flow_table_modify) && !rx.get(P::reformat) && !rx.get(P::decap));
    assert!(!rx.get(P::pop_vlan) && !rx.get(P::push_vlan));
    assert_eq!((rx.get(P::log_max_ft_size), rx.get(P::max_ft_level)), (20, 63));
    // transmit, sniffer and RDMA tables: nothing
    let tx = nic.sub(FlowTableNicCap::flow_table_properties_nic_transmit);
    assert!(tx.as_bytes().iter().all(|&b| b == 0));
    let rdma = nic.sub(FlowTableNicCap::flow_table_properties_nic_receive_rdma);
    assert!(rdma.as_bytes().iter().all(|&b| b == 0));
}

/// Table -> group -> entries (forward to a TIR with a tag and a counter; drop), the
/// frames they steer, the counters exact, then teardown in order.
#[test]
fn flow_commands_steer_frames() {
    let h = Hca::for_tests();
    let uid = 0;
    let t = id24(&ok(&h, &table_in(uid, 0, 4, None)));
    let g = id24(&ok(&h, &group_in(uid, t, 0, 7)));
    let c = u32::from_be_bytes(ok(&h, &named::<AllocFlowCounterIn>(op::ALLOC_FLOW_COUNTER, uid, |_| {}))[8..12].try_into().unwrap());
    let e = Fte {
        group: g, index: 0, dport: 4791, action: action::FWD_DEST | action::COUNT, tag: 0xbeef,
        dests: vec![(dest_type::TIR, 0x21)], counters: vec![c], ..Default::default()
    };
    ok(&h, &fte_in(uid, t, &e));
    ok(&h, &fte_in(uid, t, &Fte { group: g, index: 1, dport: 9, action: action::DROP, ..Default::default() }));
    let st_ = h.firmware().steering();
    let (f1, f2) = (udp_frame(4791, 100), udp_frame(4791, 7));
    assert_eq!(st_.classify(0, &f1), Verdict::Deliver { dest: Dest::Tir(0x21), flow_tag: 0xbeef });
    assert_eq!(st_.classify(0, &f2), Verdict::Deliver { dest: Dest::Tir(0x21), flow_tag: 0xbeef });
    assert_eq!(st_.classify(0, &udp_frame(9, 0)), Verdict::Drop);
    assert_eq!(st_.classify(0, &udp_frame(10, 0)), Verdict::Miss);
    assert_eq!(counter_of(&h, uid, c, true), (2, (f1.len() + f2.len()) as u64));
    assert_eq!(counter_of(&h, uid, c, false), (0, 0));

    // QUERY_FLOW_TABLE_ENTRY gives the entry back as it was set
    let out = ok(&h, &named::<DeleteFteIn>(op::QUERY_FLOW_TABLE_ENTRY, uid, |v| {
        v.set(DeleteFteIn::table_id, t).set(DeleteFteIn::flow_index, 0);
    }));
    let q = View::<QueryFteOut>::new(&out).unwrap();
    let fc = q.sub(QueryFteOut::flow_context);
    assert_eq!((fc.get(FlowContext::group_id), fc.get(FlowContext::flow_tag), fc.get(FlowContext::action)), (g, 0xbeef, 0xc));
    assert_eq!(fc.sub(FlowContext::match_value).sub(FteMatchParam::outer_headers).get(L::udp_dport), 4791);
    assert_eq!(&out[QueryFteOut::BYTES..QueryFteOut::BYTES + 16], &[2, 0, 0, 0x21, 0, 0, 0, 0, c.to_be_bytes()[0], c.to_be_bytes()[1], c.to_be_bytes()[2], c.to_be_bytes()[3], 0, 0, 0, 0]);

    // modify: only the tag
    ok(&h, &fte_in(uid, t, &Fte { op_mod: SET_FTE_OP_MOD_MODIFY, mask: modify_mask::FLOW_TAG, tag: 7, index: 0, group: g, ..e.clone() }));
    assert_eq!(st_.classify(0, &f1), Verdict::Deliver { dest: Dest::Tir(0x21), flow_tag: 7 });

    // busy destroys: EBUSY as mlx5_cmd_exec makes of RES_BUSY
    let dt = named::<DestroyFlowTableIn>(op::DESTROY_FLOW_TABLE, uid, |v| {
        v.set(DestroyFlowTableIn::table_id, t);
    });
    let dg = named::<DestroyFlowGroupIn>(op::DESTROY_FLOW_GROUP, uid, |v| {
        v.set(DestroyFlowGroupIn::table_id, t).set(DestroyFlowGroupIn::group_id, g);
    });
    let dc = named::<DeallocFlowCounterIn>(op::DEALLOC_FLOW_COUNTER, uid, |v| {
        v.set(DeallocFlowCounterIn::flow_counter_id, c);
    });
    for b in [&dt, &dg, &dc] {
        let (o, _) = exec(&h, b);
        assert_eq!((o.status, o.errno()), (st::RES_BUSY, Some(Errno::EBUSY)));
    }
    for i in [0, 1] {
        ok(&h, &named::<DeleteFteIn>(op::DELETE_FLOW_TABLE_ENTRY, uid, |v| {
            v.set(DeleteFteIn::table_id, t).set(DeleteFteIn::flow_index, i);
        }));
    }
    ok(&h, &dc);
    ok(&h, &dg);
    ok(&h, &dt);
    assert_eq!(st_.counts(), (0, 0, 0, 0));
    // gone: BAD_RES
    assert_eq!(exec(&h, &dt).0.status, st::BAD_RES_ERR);
}

/// Every refusal, its status and syndrome, and that nothing of a refused command
/// stays (the engine's counts do not move).
#[test]
fn flow_error_table() {
    let h = Hca::for_tests();
    let t = id24(&ok(&h, &table_in(0, 1, 3, None)));
    let g = id24(&ok(&h, &group_in(0, t, 0, 3)));
    let c = u32::from_be_bytes(ok(&h, &named::<AllocFlowCounterIn>(op::ALLOC_FLOW_COUNTER, 0, |_| {}))[8..12].try_into().unwrap());
    let st_ = h.firmware().steering();
    let before = st_.counts();
    let fwd = Fte { group: g, index: 0, dport: 1, action: action::FWD_DEST, dests: vec![(dest_type::TIR, 5)], ..Default::default() };
    let bp = st::BAD_PARAM_ERR;
    let mut tx = table_in(0, 0, 3, None);
    ViewMut::<CreateFlowTableIn>::new(&mut tx).unwrap().set(CreateFlowTableIn::table_type, TABLE_TYPE_NIC_TX);
    let mut sw = table_in(0, 0, 3, None);
    ViewMut::<CreateFlowTableIn>::new(&mut sw).unwrap().sub_mut(CreateFlowTableIn::flow_table_context).set(FlowTableContext::sw_owner, true);
    let mut misc = group_in(0, t, 4, 7);
    ViewMut::<CreateFlowGroupIn>::new(&mut misc).unwrap().set(CreateFlowGroupIn::match_criteria_enable, criteria::MISC_PARAMETERS);
    let mut outside = fte_in(0, t, &fwd);
    ViewMut::<SetFteIn>::new(&mut outside).unwrap().sub_mut(SetFteIn::flow_context).sub_mut(FlowContext::match_value)
        .sub_mut(FteMatchParam::outer_headers).set(L::tcp_dport, 80);
    let mut short = fte_in(0, t, &fwd);
    short.truncate(SetFteIn::BYTES + 4);
    let cases: Vec<(&str, Vec<u8>, u8, u32)> = vec![
        ("NIC TX table", tx, bp, fs::TABLE_TYPE),
        ("sw_owner table", sw, bp, fs::TABLE_FEATURE),
        ("log_size too big", table_in(0, 0, 21, None), bp, fs::TABLE_LIMIT),
        ("level too big", table_in(0, 64, 3, None), bp, fs::TABLE_LIMIT),
        ("miss to a missing table", table_in(0, 0, 3, Some(999)), bp, fs::BAD_TABLE_DEST),
        ("miss to a lower level", table_in(0, 0, 3, Some(t)).iter().copied().collect(), st::OK, 0),
        ("group in no table", group_in(0, 999, 0, 3), st::BAD_RES_ERR, syn::NO_OBJECT),
        ("group of another uid's table", group_in(1, t, 4, 7), bp, syn::FOREIGN_OBJECT),
        ("group overlapping", group_in(0, t, 3, 5), bp, fs::GROUP_RANGE),
        ("group past the table", group_in(0, t, 4, 8), bp, fs::GROUP_RANGE),
        ("misc criteria", misc, bp, fs::CRITERIA),
        ("entry outside every group", fte_in(0, t, &Fte { index: 5, group: 0, ..fwd.clone() }), bp, fs::ENTRY_INDEX),
        ("entry in another group", fte_in(0, t, &Fte { group: g + 100, ..fwd.clone() }), bp, fs::ENTRY_INDEX),
        ("value outside criteria", outside, bp, fs::VALUE_OUTSIDE_CRITERIA),
        ("drop and forward", fte_in(0, t, &Fte { action: action::DROP | action::FWD_DEST, ..fwd.clone() }), bp, fs::ACTION),
        ("forward without dests", fte_in(0, t, &Fte { dests: vec![], ..fwd.clone() }), bp, fs::ACTION),
        ("header rewrite", fte_in(0, t, &Fte { action: action::FWD_DEST | action::MOD_HDR, ..fwd.clone() }), bp, fs::ACTION),
        ("vport destination", fte_in(0, t, &Fte { dests: vec![(dest_type::VPORT, 0)], ..fwd.clone() }), bp, fs::DEST_TYPE),
        ("forward to a lower level", fte_in(0, t, &Fte { dests: vec![(dest_type::FLOW_TABLE, t)], ..fwd.clone() }), bp, fs::BAD_TABLE_DEST),
        ("count without counters", fte_in(0, t, &Fte { action: action::FWD_DEST | action::COUNT, ..fwd.clone() }), bp, fs::ACTION),
        ("missing counter", fte_in(0, t, &Fte { action: action::FWD_DEST | action::COUNT, counters: vec![c + 50], ..fwd.clone() }), bp, fs::BAD_COUNTER),
        ("list past the inbox", short, st::BAD_INP_LEN_ERR, fs::DEST_LIST_LEN),
        ("modify of nothing", fte_in(0, t, &Fte { op_mod: SET_FTE_OP_MOD_MODIFY, mask: modify_mask::FLOW_TAG, ..fwd.clone() }), bp, fs::ENTRY_EXISTS),
        ("op_mod 2", fte_in(0, t, &Fte { op_mod: 2, ..fwd.clone() }), bp, syn::BAD_OP_MOD),
        ("delete of no entry", named::<DeleteFteIn>(op::DELETE_FLOW_TABLE_ENTRY, 0, |v| {
            v.set(DeleteFteIn::table_id, t).set(DeleteFteIn::flow_index, 2);
        }), st::BAD_RES_ERR, syn::NO_OBJECT),
        ("bulk counters", named::<AllocFlowCounterIn>(op::ALLOC_FLOW_COUNTER, 0, |v| {
            v.set(AllocFlowCounterIn::flow_counter_bulk, 1);
        }), bp, fs::COUNTER_FEATURE),
        ("query of another uid's counter", named::<QueryFlowCounterIn>(op::QUERY_FLOW_COUNTER, 1, |v| {
            v.set(QueryFlowCounterIn::flow_counter_id, c);
        }), bp, syn::FOREIGN_OBJECT),
    ];
    for (name, inb, status, syndrome) in cases {
        let (o, out) = exec(&h, &inb);
        if status == st::OK {
            // a miss to a table of a higher level from level 0 is fine: undo it
            assert!(o.is_ok(), "{name}: {o:?}");
            ok(&h, &named::<DestroyFlowTableIn>(op::DESTROY_FLOW_TABLE, 0, |v| {
                v.set(DestroyFlowTableIn::table_id, id24(&out));
            }));
            continue;
        }
        assert_eq!((o.status, o.syndrome), (status, syndrome), "{name}");
        assert_eq!(out[0], status, "{name}: status in the outbox");
        assert_eq!(st_.counts(), before, "{name}: nothing half-installed");
    }
    // A good entry after all that, and a duplicate value at another index.
    ok(&h, &fte_in(0, t, &fwd));
    let (o, _) = exec(&h, &fte_in(0, t, &Fte { index: 1, ..fwd.clone() }));
    assert_eq!((o.status, o.syndrome), (bp, fs::DUPLICATE_VALUE));
    let (o, _) = exec(&h, &fte_in(0, t, &fwd));
    assert_eq!((o.status, o.syndrome), (bp, fs::ENTRY_EXISTS), "create over an entry");
}

/// Mutated flow mailboxes: the firmware never panics, every failure has its status
/// in the outbox and a syndrome, and the objects that exist are exactly those the
/// outboxes announced.
#[test]
fn flow_fuzz_20k_mailboxes() {
    let h = Hca::for_tests();
    let fw = h.firmware();
    let seed = 0xf10_u64;
    let mut rng = SmallRng::seed_from_u64(seed);
    let (mut tables, mut groups, mut counters): (Vec<u32>, Vec<(u32, u32)>, Vec<u32>) = Default::default();
    let mut out = vec![0u8; OUT];
    for i in 0..20_000 {
        let t = tables.get(rng.gen_range(0..tables.len().max(1))).copied().unwrap_or(1);
        let g = groups.get(rng.gen_range(0..groups.len().max(1))).copied().unwrap_or((t, 1));
        let c = counters.get(rng.gen_range(0..counters.len().max(1))).copied().unwrap_or(1);
        let base = rng.gen_range(0..16u32) * 4;
        let mut inb = match rng.gen_range(0..10) {
            0 => table_in(0, rng.gen_range(0..4), rng.gen_range(4..8), None),
            1 => group_in(0, t, base, base + 3),
            2 | 3 => fte_in(0, g.0, &Fte {
                group: g.1, index: rng.gen_range(0..64), dport: rng.gen_range(0..8),
                action: [action::DROP, action::FWD_DEST, action::FWD_DEST | action::COUNT][rng.gen_range(0..3)],
                dests: vec![(dest_type::TIR, 3)], counters: vec![c], ..Default::default()
            }),
            4 => named::<DeleteFteIn>(op::DELETE_FLOW_TABLE_ENTRY, 0, |v| {
                v.set(DeleteFteIn::table_id, g.0).set(DeleteFteIn::flow_index, rng.gen_range(0..64));
            }),
            5 => named::<DestroyFlowGroupIn>(op::DESTROY_FLOW_GROUP, 0, |v| {
                v.set(DestroyFlowGroupIn::table_id, g.0).set(DestroyFlowGroupIn::group_id, g.1);
            }),
            6 => named::<DestroyFlowTableIn>(op::DESTROY_FLOW_TABLE, 0, |v| {
                v.set(DestroyFlowTableIn::table_id, t);
            }),
            7 => named::<AllocFlowCounterIn>(op::ALLOC_FLOW_COUNTER, 0, |_| {}),
            8 => named::<DeallocFlowCounterIn>(op::DEALLOC_FLOW_COUNTER, 0, |v| {
                v.set(DeallocFlowCounterIn::flow_counter_id, c);
            }),
            _ => named::<QueryFlowCounterIn>(op::QUERY_FLOW_COUNTER, 0, |v| {
                v.set(QueryFlowCounterIn::flow_counter_id, c);
            }),
        };
        let mutated = rng.gen_ratio(1, 3);
        if mutated {
            for _ in 0..rng.gen_range(1..4) {
                match rng.gen_range(0..3) {
                    // the header's opcode and uid stay: the bookkeeping below follows uid 0
                    0 if inb.len() > 4 => {
                        let j = rng.gen_range(4..inb.len());
                        inb[j] ^= 1 << rng.gen_range(0..8);
                    }
                    1 => inb.truncate(rng.gen_range(4..=inb.len().max(4))),
                    _ => inb.extend((0..rng.gen_range(0..32)).map(|_| rng.gen::<u8>())),
                }
            }
        }
        let o = fw.exec(&inb, &mut out);
        assert_eq!(out[0], o.status, "iteration {i}");
        if !o.is_ok() {
            assert_ne!(o.syndrome, 0, "iteration {i}");
            continue;
        }
        let opcode = u16::from_be_bytes([inb[0], inb[1]]);
        let uid = u16::from_be_bytes([inb[2], inb[3]]);
        let at = |b: &[u8], bit: usize| u32::from_be_bytes(b[bit / 8..bit / 8 + 4].try_into().unwrap());
        assert_eq!(uid, 0);
        match opcode {
            op::CREATE_FLOW_TABLE => tables.push(id24(&out)),
            op::CREATE_FLOW_GROUP => groups.push((at(&inb, 0xa0) & 0xff_ffff, id24(&out))),
            op::ALLOC_FLOW_COUNTER => counters.push(at(&out, 0x40)),
            op::DESTROY_FLOW_TABLE => tables.retain(|&x| x != at(&inb, 0xa0) & 0xff_ffff),
            op::DESTROY_FLOW_GROUP => groups.retain(|&x| x.1 != at(&inb, 0xc0)),
            op::DEALLOC_FLOW_COUNTER => counters.retain(|&x| x != at(&inb, 0x40)),
            _ => {}
        }
    }
    let (nt, ng, _, nc) = fw.steering().counts();
    assert_eq!((nt, ng, nc), (tables.len(), groups.len(), counters.len()), "seed {seed:#x}: nothing leaked");
    assert!(!tables.is_empty() || !counters.is_empty(), "the fuzzer reached the commands");
}
