//! The data path end to end between two softhca instances in one process, driven through
//! doorbell's provider: every RC opcode, message sizes around the MTU up to 4 MiB, several
//! SGEs, inline data, signaled and unsignaled WQEs, SQ wrap-around, many QPs at once, and
//! completion events. Every byte is checked.
//!
//! Addresses: 127.1.1.x hints, distinct per test, so tests run in parallel (see
//! common::bind_free).

mod common;

use std::time::{Duration, Instant};

use common::*;
use provider::cqe::{WcFlags, WcOpcode, WcStatus};
use provider::opcode::FmCeSe;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Send,
    SendImm,
    Write,
    WriteImm,
    Read,
}

const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xa5;

/// Moves `len` bytes with one WQE of `kind` (a -> b, or b -> a for READ), then checks the
/// completions on both sides and every byte of the destination and its guard bytes.
fn transfer(a: &Host, b: &Host, ea: &mut End, eb: &mut End, kind: Kind, len: usize, seed: u64) {
    let src_host = if kind == Kind::Read { b } else { a };
    let dst_host = if kind == Kind::Read { a } else { b };
    let src = src_host.mem(len.max(1), all_access());
    let dst = dst_host.mem(len + 2 * GUARD, all_access());
    src.buf.fill_pattern(seed);
    dst.buf.write(0, &vec![GUARD_BYTE; len + 2 * GUARD]);
    let imm = 0x1234_5600 | (seed as u32 & 0xff);
    let recv = matches!(kind, Kind::Send | Kind::SendImm | Kind::WriteImm);
    if recv {
        let sge = if kind == Kind::WriteImm { vec![] } else { vec![dst.sge(GUARD, len + GUARD)] };
        eb.qp.post_recv(seed, &sge).unwrap();
    }
    let remote = dst.addr() + GUARD as u64;
    let op = match kind {
        Kind::Send => SendOp::Send,
        Kind::SendImm => SendOp::SendImm { imm },
        Kind::Write => SendOp::RdmaWrite { raddr: remote, rkey: dst.mr.rkey() },
        Kind::WriteImm => SendOp::RdmaWriteImm { raddr: remote, rkey: dst.mr.rkey(), imm },
        Kind::Read => SendOp::RdmaRead { raddr: src.addr(), rkey: src.mr.rkey() },
    };
    let local = if kind == Kind::Read { dst.sge(GUARD, len) } else { src.sge(0, len) };
    let sgl = [local];
    let payload = Payload::Sgl(if len == 0 { &[] } else { &sgl });
    ea.qp.post_send(seed, &signaled(op, payload)).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!(wc.status, WcStatus::Success, "{kind:?} {len}: {wc:?}");
    assert_eq!(wc.wr_id, seed);
    let want_op = match kind {
        Kind::Send | Kind::SendImm => WcOpcode::Send,
        Kind::Write | Kind::WriteImm => WcOpcode::RdmaWrite,
        Kind::Read => WcOpcode::RdmaRead,
    };
    assert_eq!(wc.opcode, want_op, "{kind:?} {len}");
    if kind == Kind::Read {
        assert_eq!(wc.byte_len as usize, len);
    }
    if recv {
        let rc = wait(&mut eb.rcq, 1)[0];
        assert_eq!(rc.status, WcStatus::Success, "{kind:?} {len}: {rc:?}");
        assert_eq!(rc.wr_id, seed);
        assert_eq!(rc.byte_len as usize, len, "{kind:?}");
        assert_eq!(rc.opcode, if kind == Kind::WriteImm { WcOpcode::RecvRdmaWithImm } else { WcOpcode::Recv });
        let with_imm = kind != Kind::Send;
        assert_eq!(rc.flags.contains(WcFlags::WITH_IMM), with_imm, "{kind:?}: {rc:?}");
        if with_imm {
            assert_eq!(rc.imm, imm);
        }
        assert_eq!(rc.qp_num, eb.qp.qpn());
    }
    let got = dst.buf.read();
    let want = src.buf.read();
    assert!(got[..GUARD].iter().all(|&x| x == GUARD_BYTE), "{kind:?} {len}: bytes before the target changed");
    assert!(got[GUARD + len..].iter().all(|&x| x == GUARD_BYTE), "{kind:?} {len}: bytes after the target changed");
    if got[GUARD..GUARD + len] != want[..len] {
        let first = (0..len).find(|&i| got[GUARD + i] != want[i]).unwrap();
        panic!("{kind:?} {len}: first wrong byte at {first}");
    }
}

fn sizes(mtu: usize) -> Vec<usize> {
    vec![0, 1, mtu - 1, mtu, mtu + 1, 3 * mtu + 17, 65536 + 5, 4 << 20]
}

fn all_kinds_all_sizes(ip: u8, mtu_code: u8) {
    let a = Host::new([127, 1, 1, ip]);
    let b = Host::new([127, 1, 1, ip + 1]);
    let o = Opts { mtu: mtu_code, ..Default::default() };
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let mtu = 128usize << mtu_code;
    let mut seed = 1;
    for len in sizes(mtu) {
        for kind in [Kind::Send, Kind::SendImm, Kind::Write, Kind::WriteImm, Kind::Read] {
            transfer(&a, &b, &mut ea, &mut eb, kind, len, seed);
            seed += 1;
        }
    }
    let c = a.hca.device().counters();
    assert_eq!(c.rx_bad_icrc + c.rx_malformed, 0, "{c:?}");
}

fn every_opcode_every_size_mtu_1024() {
    all_kinds_all_sizes(1, 3);
}

fn every_opcode_every_size_mtu_4096() {
    all_kinds_all_sizes(3, 5);
}

fn every_opcode_every_size_mtu_256() {
    all_kinds_all_sizes(5, 1);
}

/// QPs addressed by link-local GIDs (index 0, RoCE v1, and 1, RoCE v2: `fe80::` + the
/// modified EUI-64 of the MAC, as `ibv_rc_pingpong -g 0` uses them): the GID names the
/// instance whose MAC it holds (see softhca::config), and everything works as with the
/// IPv4-mapped GIDs.
fn link_local_gids_connect_two_instances() {
    let a = Host::new([127, 1, 1, 19]);
    let b = Host::new([127, 1, 1, 20]);
    let o = Opts::default();
    let (ga, gb) = (a.hca.config().link_local_gid(), b.hca.config().link_local_gid());
    assert_eq!(ga[..2], [0xfe, 0x80]);
    for sgid_index in [0u8, 1] {
        let (mut ea, mut eb) = (End::new(&a, &o), End::new(&b, &o));
        ea.connect_from(&o, sgid_index, eb.qp.qpn(), gb, 0x100, 0x200);
        eb.connect_from(&o, sgid_index, ea.qp.qpn(), ga, 0x200, 0x100);
        let mut seed = 40 + 10 * sgid_index as u64;
        for len in [0, 1, 4096, 70_000] {
            for kind in [Kind::Send, Kind::SendImm, Kind::Write, Kind::WriteImm, Kind::Read] {
                transfer(&a, &b, &mut ea, &mut eb, kind, len, seed);
                seed += 1;
            }
        }
        let counter = b.mem(64, all_access());
        let result = a.mem(64, all_access());
        let op = SendOp::FetchAdd { raddr: counter.addr(), rkey: counter.mr.rkey(), add: 5 };
        ea.qp.post_send(9, &signaled(op, Payload::Sgl(&[result.sge(0, 8)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        assert_eq!((counter.buf.read_u64(0), result.buf.read_u64(0)), (5, 0));
    }
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    assert_eq!((ca.rx_wrong_peer, cb.rx_wrong_peer, ca.tx_errors, cb.tx_errors), (0, 0, 0, 0), "{ca:?}\n{cb:?}");
}

fn several_sges_both_ways() {
    let a = Host::new([127, 1, 1, 7]);
    let b = Host::new([127, 1, 1, 8]);
    let o = Opts::default();
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let src = a.mem(8192, all_access());
    src.buf.fill_pattern(99);
    let want = src.buf.read();
    // Gather 3 pieces (3000 bytes) into a SEND scattered over 4 receive SGEs.
    let gather = [src.sge(10, 1000), src.sge(3000, 1500), src.sge(6000, 500)];
    let expect: Vec<u8> = [&want[10..1010], &want[3000..4500], &want[6000..6500]].concat();
    let dst = b.mem(8192, all_access());
    let scatter = [dst.sge(0, 100), dst.sge(1000, 2000), dst.sge(4000, 10), dst.sge(5000, 2000)];
    eb.qp.post_recv(1, &scatter).unwrap();
    ea.qp.post_send(2, &signaled(SendOp::Send, Payload::Sgl(&gather))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let rc = wait(&mut eb.rcq, 1)[0];
    assert_eq!((rc.status, rc.byte_len), (WcStatus::Success, 3000));
    let got = dst.buf.read();
    let scattered: Vec<u8> = [&got[0..100], &got[1000..3000], &got[4000..4010], &got[5000..5890]].concat();
    assert_eq!(scattered, expect);
    assert!(got[5890..].iter().all(|&x| x == 0));

    // WRITE gathering 4 SGEs (a 2-WQEBB WQE), READ scattering into 3.
    let gather4 = [src.sge(0, 1), src.sge(100, 2047), src.sge(4096, 1), src.sge(5000, 3000)];
    let expect4: Vec<u8> = [&want[0..1], &want[100..2147], &want[4096..4097], &want[5000..8000]].concat();
    ea.qp.post_send(3, &signaled(SendOp::RdmaWrite { raddr: dst.addr() + 11, rkey: dst.mr.rkey() }, Payload::Sgl(&gather4))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(&dst.buf.read()[11..11 + expect4.len()], &expect4[..]);
    let back = a.mem(8192, all_access());
    let sc3 = [back.sge(1, 3), back.sge(500, 2000), back.sge(4000, 4000)];
    ea.qp.post_send(4, &signaled(SendOp::RdmaRead { raddr: dst.addr() + 11, rkey: dst.mr.rkey() }, Payload::Sgl(&sc3))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 6003));
    let b2 = back.buf.read();
    let read: Vec<u8> = [&b2[1..4], &b2[500..2500], &b2[4000..8000]].concat();
    assert_eq!(read, dst.buf.read()[11..11 + 6003].to_vec());
}

fn inline_sends_and_writes_wrap_the_sq() {
    let a = Host::new([127, 1, 1, 9]);
    let b = Host::new([127, 1, 1, 10]);
    let o = Opts {
        cap: QpCap { max_send_wr: 4, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 200 },
        ..Default::default()
    };
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let max = ea.qp.cap().max_inline_data as usize;
    assert!(max >= 200, "inline limit {max}");
    let dst = b.mem(1 << 16, all_access());
    let mut off = 0usize;
    let mut expect = vec![0u8; 1 << 16];
    // Many inline WQEs of varying size through a small SQ: WQEs and inline data wrap.
    for i in 0..200usize {
        let len = (i * 37) % (max + 1);
        let data: Vec<u8> = (0..len).map(|k| (i * 7 + k) as u8).collect();
        let chunks: [&[u8]; 2] = [&data[..len / 3], &data[len / 3..]];
        if i % 2 == 0 {
            let wr = signaled(SendOp::RdmaWrite { raddr: dst.addr() + off as u64, rkey: dst.mr.rkey() }, Payload::Inline(&chunks));
            ea.qp.post_send(i as u64, &wr).unwrap();
            expect[off..off + len].copy_from_slice(&data);
            off += len;
            let wc = wait(&mut ea.scq, 1)[0];
            assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, i as u64));
        } else {
            eb.qp.post_recv(i as u64, &[dst.sge(60000, 1024)]).unwrap();
            ea.qp.post_send(i as u64, &signaled(SendOp::Send, Payload::Inline(&chunks))).unwrap();
            assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
            let rc = wait(&mut eb.rcq, 1)[0];
            assert_eq!((rc.status, rc.byte_len as usize), (WcStatus::Success, len));
            assert_eq!(&dst.buf.read()[60000..60000 + len], &data[..]);
        }
    }
    assert_eq!(&dst.buf.read()[..off], &expect[..off]);
}

fn atomics() {
    let a = Host::new([127, 1, 1, 11]);
    let b = Host::new([127, 1, 1, 12]);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let target = b.mem(64, all_access());
    target.buf.write(8, &100u64.to_ne_bytes());
    let res = a.mem(64, all_access());
    let raddr = target.addr() + 8;
    let rkey = target.mr.rkey();
    // FETCH_AND_ADD: returns 100, memory 105.
    ea.qp.post_send(1, &signaled(SendOp::FetchAdd { raddr, rkey, add: 5 }, Payload::Sgl(&[res.sge(0, 8)]))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.opcode, wc.byte_len), (WcStatus::Success, WcOpcode::FetchAdd, 8));
    assert_eq!(res.buf.read_u64(0), 100);
    assert_eq!(target.buf.read_u64(8), 105);
    // CMP_AND_SWP that fails: returns 105, memory unchanged.
    ea.qp.post_send(2, &signaled(SendOp::CompareSwap { raddr, rkey, compare: 7, swap: 1 }, Payload::Sgl(&[res.sge(8, 8)]))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::CompSwap));
    assert_eq!(res.buf.read_u64(8), 105);
    assert_eq!(target.buf.read_u64(8), 105);
    // CMP_AND_SWP that succeeds.
    ea.qp.post_send(3, &signaled(SendOp::CompareSwap { raddr, rkey, compare: 105, swap: u64::MAX - 1 }, Payload::Sgl(&[res.sge(16, 8)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(res.buf.read_u64(16), 105);
    assert_eq!(target.buf.read_u64(8), u64::MAX - 1);
    // A chain of 100 adds, unsignaled but the last, with several outstanding at once.
    let wrs: Vec<(u64, SendWr)> = (0..100u64)
        .map(|i| {
            let w = wr(SendOp::FetchAdd { raddr: target.addr() + 16, rkey, add: i }, Payload::Sgl(std::slice::from_ref(Box::leak(Box::new(res.sge(24, 8))))));
            (i, if i == 99 { w.with_flags(FmCeSe::CQ_UPDATE) } else { w })
        })
        .collect();
    for chunk in wrs.chunks(10) {
        ea.qp.post_send_list(chunk).unwrap();
    }
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, 99));
    assert_eq!(target.buf.read_u64(16), (0..100).sum::<u64>());
    assert_eq!(res.buf.read_u64(24), (0..99).sum::<u64>());
}

fn unsignaled_wqes_and_sq_wrap_around() {
    let a = Host::new([127, 1, 1, 13]);
    let b = Host::new([127, 1, 1, 14]);
    // A 16-entry CQ: its ring wraps ~30 times, so both owner-bit parities are exercised.
    let o = Opts {
        cap: QpCap { max_send_wr: 8, max_recv_wr: 8, max_send_sge: 4, max_recv_sge: 1, max_inline_data: 0 },
        cq: 15,
        ..Default::default()
    };
    let (mut ea, _eb) = connect(&a, &b, &o);
    let src = a.mem(1 << 16, all_access());
    src.buf.fill_pattern(5);
    let dst = b.mem(1 << 20, all_access());
    let want = src.buf.read();
    let mut expect = vec![0u8; 1 << 20];
    let mut posted = 0u64;
    let mut signaled_ids = Vec::new();
    let mut outstanding = 0;
    // 2000 WRITEs of 1..4 SGEs (1 or 2 WQEBBs each) through an 8-WQE SQ; every 4th is
    // signaled, and only signaled completions free SQ space.
    for i in 0..2000u64 {
        let n = (i % 4) as usize + 1;
        let sgl: Vec<Sge> = (0..n).map(|k| src.sge((i as usize * 131 + k * 977) % 60000, 17 + k)).collect();
        let len: usize = sgl.iter().map(|s| s.length as usize).sum();
        let off = (i as usize * 523) % ((1 << 20) - 100);
        let mut data = Vec::new();
        for s in &sgl {
            let o = (s.addr - src.addr()) as usize;
            data.extend_from_slice(&want[o..o + s.length as usize]);
        }
        expect[off..off + len].copy_from_slice(&data);
        let sig = i % 4 == 3;
        let w = wr(SendOp::RdmaWrite { raddr: dst.addr() + off as u64, rkey: dst.mr.rkey() }, Payload::Sgl(&sgl));
        let w = if sig { w.with_flags(FmCeSe::CQ_UPDATE) } else { w };
        loop {
            match ea.qp.post_send(i, &w) {
                Ok(()) => break,
                Err(_) => {
                    let wc = wait(&mut ea.scq, 1)[0];
                    assert_eq!(wc.status, WcStatus::Success);
                    signaled_ids.push(wc.wr_id);
                    outstanding -= 1;
                }
            }
        }
        posted += 1;
        if sig {
            outstanding += 1;
        }
    }
    for wc in wait(&mut ea.scq, outstanding) {
        assert_eq!(wc.status, WcStatus::Success);
        signaled_ids.push(wc.wr_id);
    }
    assert_eq!(posted, 2000);
    assert_eq!(signaled_ids, (0..2000).filter(|i| i % 4 == 3).collect::<Vec<_>>());
    // Overlapping writes land in posting order.
    assert!(dst.buf.read() == expect, "destination differs");
    quiet(&mut ea.scq, Duration::from_millis(20));
}

fn sixteen_qps_at_once() {
    let a = Host::new([127, 1, 1, 15]);
    let b = Host::new([127, 1, 1, 16]);
    let o = Opts { mtu: 4, ..Default::default() };
    let pairs: Vec<(End, End)> = (0..16).map(|_| connect(&a, &b, &o)).collect();
    let len = 256 << 10;
    let srcs: Vec<Mem> = (0..16).map(|i| {
        let m = a.mem(len, all_access());
        m.buf.fill_pattern(1000 + i);
        m
    }).collect();
    let dsts: Vec<Mem> = (0..16).map(|_| b.mem(2 * len, all_access())).collect();
    let mut pairs = pairs;
    for (i, (ea, eb)) in pairs.iter_mut().enumerate() {
        eb.qp.post_recv(i as u64, &[dsts[i].sge(len, len)]).unwrap();
        ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dsts[i].addr(), rkey: dsts[i].mr.rkey() }, Payload::Sgl(&[srcs[i].sge(0, len)]))).unwrap();
        ea.qp.post_send(2, &signaled(SendOp::Send, Payload::Sgl(&[srcs[i].sge(0, len)]))).unwrap();
    }
    for (i, (ea, eb)) in pairs.iter_mut().enumerate() {
        let wcs = wait(&mut ea.scq, 2);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
        assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), vec![1, 2]);
        let rc = wait(&mut eb.rcq, 1)[0];
        assert_eq!((rc.status, rc.wr_id, rc.byte_len as usize), (WcStatus::Success, i as u64, len));
        let got = dsts[i].buf.read();
        let want = srcs[i].buf.read();
        assert!(got[..len] == want[..], "qp {i}: write");
        assert!(got[len..] == want[..], "qp {i}: send");
    }
}

fn sq_sig_all_and_completion_events() {
    let a = Host::new([127, 1, 1, 17]);
    let b = Host::new([127, 1, 1, 18]);
    let o = Opts { sq_sig_all: true, ..Default::default() };
    let ea = End::new(&a, &o);
    let ch = b.ctx.create_comp_channel().unwrap();
    // (sq_sig_all applies to a's sends; b only receives.)
    let mut eb = End::with_recv_events(&b, &o, &ch);
    ea.connect(&o, eb.qp.qpn(), b.gid(), 100, 200);
    eb.connect(&o, ea.qp.qpn(), a.gid(), 200, 100);
    let mut ea = ea;
    let src = a.mem(4096, all_access());
    let dst = b.mem(4096, all_access());
    for i in 0..8 {
        eb.qp.post_recv(i, &[dst.sge(0, 4096)]).unwrap();
    }
    // Arm, send one: exactly one event with the CQ's handle.
    eb.rcq.req_notify(false);
    ea.qp.post_send(1, &wr(SendOp::Send, Payload::Sgl(&[src.sge(0, 10)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success, "sq_sig_all signals unflagged WQEs");
    let h = ch.get_event(Some(Duration::from_secs(10))).expect("completion event");
    assert_eq!(h, eb.rcq.user_handle());
    eb.rcq.ack_event();
    assert_eq!(wait(&mut eb.rcq, 1)[0].byte_len, 10);
    // Not re-armed: another completion gives no event.
    ea.qp.post_send(2, &wr(SendOp::Send, Payload::Sgl(&[src.sge(0, 11)]))).unwrap();
    wait(&mut ea.scq, 1);
    assert_eq!(wait(&mut eb.rcq, 1)[0].byte_len, 11);
    assert!(ch.get_event(Some(Duration::from_millis(50))).is_err(), "event without arming");
    // Solicited-only arming: an unsolicited SEND does not fire, a solicited one does.
    eb.rcq.req_notify(true);
    ea.qp.post_send(3, &wr(SendOp::Send, Payload::Sgl(&[src.sge(0, 12)]))).unwrap();
    wait(&mut ea.scq, 1);
    assert!(ch.get_event(Some(Duration::from_millis(50))).is_err(), "unsolicited SEND fired a solicited-only arm");
    ea.qp.post_send(4, &wr(SendOp::SendImm { imm: 9 }, Payload::Sgl(&[src.sge(0, 13)])).with_flags(FmCeSe::SOLICITED)).unwrap();
    wait(&mut ea.scq, 1);
    assert_eq!(ch.get_event(Some(Duration::from_secs(10))).unwrap(), eb.rcq.user_handle());
    eb.rcq.ack_event();
    let wcs = wait(&mut eb.rcq, 2);
    assert_eq!((wcs[0].byte_len, wcs[1].byte_len, wcs[1].imm), (12, 13, 9));
    // Arming when a CQE is already there fires at once. "Already there" is made sure of:
    // b only receives, so its CQE counter moving by one is this receive's CQE written
    // into the CQ (unpolled) before the arm; no completion comes after the arm.
    let cqes = b.hca.device().counters().cqes;
    ea.qp.post_send(5, &wr(SendOp::Send, Payload::Sgl(&[src.sge(0, 14)]))).unwrap();
    wait(&mut ea.scq, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.hca.device().counters().cqes == cqes {
        assert!(Instant::now() < deadline, "the receive CQE was never written");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(b.hca.device().counters().cqes, cqes + 1);
    eb.rcq.req_notify(false);
    assert_eq!(ch.get_event(Some(Duration::from_secs(10))).unwrap(), eb.rcq.user_handle());
    eb.rcq.ack_event();
    assert_eq!(b.hca.device().counters().comp_events, 3);
    drop(eb);
}

/// A receive CQE names the receive WQE it consumed: `wqe_counter` (struct mlx5_cqe64 in
/// mlx5dv.h, big-endian at byte 60) is the WQE's index in the receive queue, which
/// libmlx5 reads for SRQ receives (`srq->wrid[wqe_ctr]`) and mlx5dv users read for all.
/// Read from the CQ ring itself: the provider's poller uses its own RQ tail instead.
fn receive_cqes_carry_the_receive_wqe_index() {
    let a = Host::new([127, 1, 1, 71]);
    let b = Host::new([127, 1, 1, 72]);
    let (mut ea, mut eb) = connect(&a, &b, &Opts::default());
    let src = a.mem(4096, all_access());
    let dst = b.mem(4096, all_access());
    for i in 0..5u64 {
        eb.qp.post_recv(i, &[dst.sge(0, 64)]).unwrap();
    }
    for i in 0..5u64 {
        ea.qp.post_send(i, &signaled(SendOp::Send, Payload::Sgl(&[src.sge(0, 8)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    }
    let wcs = wait(&mut eb.rcq, 5);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let cq = b.hca.cq(eb.rcq.cqn()).expect("the receive CQ");
    let size = cq.cqe_size as usize;
    for i in 0..5usize {
        // A 128-byte CQE keeps the 64-byte CQE in its second half.
        let base = cq.buf_addr as usize + i * size + (size - 64);
        let mut cqe = [0u8; 64];
        // SAFETY: the CQE ring (`entries` CQEs of `cqe_size` bytes at buf_addr) is mapped
        // in this process while the CQ lives (`eb` holds it); the device wrote these CQEs
        // before their completions were polled.
        unsafe { std::ptr::copy_nonoverlapping(base as *const u8, cqe.as_mut_ptr(), 64) };
        assert_eq!(cqe[63] >> 4, 2, "CQE {i}: MLX5_CQE_RESP_SEND");
        assert_eq!(u16::from_be_bytes([cqe[60], cqe[61]]), i as u16, "CQE {i}: wqe_counter");
    }
}

/// Zero-length RDMA WRITE and READ: the responder validates neither R_Key nor VA (IBA
/// C9-88, as rxe's check_rkey skips them for a zero DMA length), so a garbage rkey and
/// address complete successfully.
fn zero_length_rdma_ignores_rkey_and_address() {
    let a = Host::new([127, 1, 1, 73]);
    let b = Host::new([127, 1, 1, 74]);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    for (id, op) in [(1u64, SendOp::RdmaWrite { raddr: 0x10, rkey: 0x00ab_cd77 }), (2, SendOp::RdmaRead { raddr: 0x10, rkey: 0x00ab_cd77 })] {
        ea.qp.post_send(id, &signaled(op, Payload::Sgl(&[]))).unwrap();
        let wc = wait(&mut ea.scq, 1)[0];
        assert_eq!((wc.status, wc.wr_id, wc.byte_len), (WcStatus::Success, id, 0), "{op:?}: {wc:?}");
    }
    assert_eq!(b.hca.device().counters().err_naks_sent, 0);
}

// Every test above runs on both wires: RoCEv2 over UDP and the same-host path.
on_both_wires!(
    every_opcode_every_size_mtu_1024,
    every_opcode_every_size_mtu_4096,
    every_opcode_every_size_mtu_256,
    link_local_gids_connect_two_instances,
    several_sges_both_ways,
    inline_sends_and_writes_wrap_the_sq,
    atomics,
    unsignaled_wqes_and_sq_wrap_around,
    sixteen_qps_at_once,
    sq_sig_all_and_completion_events,
    receive_cqes_carry_the_receive_wqe_index,
    zero_length_rdma_ignores_rkey_and_address,
);
