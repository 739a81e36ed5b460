//! Reliability under a lossy wire: both instances drop, duplicate and reorder their
//! transmitted packets (1 % and 10 %), and 256 MiB of RDMA WRITEs (1 MiB each) must
//! arrive intact, together with READs, SENDs and atomics whose duplicates must not be
//! executed twice. And READs with 16 outstanding (`bench read-bw -t 16`): go-back-N
//! sends READ requests again that the responder has already served, which must not eat
//! into its `max_dest_rd_atomic`.
//!
//! `DOORBELL_FAULT_MIB` sets the volume (default 256 MiB per test).
//!
//! Addresses: 127.1.2.x (hints, see common::bind_free).

mod common;

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp, SendWr};
use softhca::device::FaultSpec;

const CHUNK: usize = 1 << 20;
const SLOTS: usize = 16;

fn volume_mib() -> usize {
    std::env::var("DOORBELL_FAULT_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

fn lossy(ip: u8, p: f64, seed: u64) -> Host {
    Host::at([127, 1, 2, ip], |c| c.fault = Some(FaultSpec::new(p, p, p, seed)))
}

fn run(ip: u8, p: f64) {
    let a = lossy(ip, p, ip as u64);
    let b = lossy(ip + 1, p, ip as u64 + 1000);
    let o = Opts { mtu: 5, timeout: 12, retry_cnt: 7, cq: 1024, ..Default::default() };
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let src = a.mem(SLOTS * CHUNK, all_access());
    let dst = b.mem(SLOTS * CHUNK, all_access());
    let back = a.mem(CHUNK, all_access());
    let counter = b.mem(64, all_access());
    let result = a.mem(64, all_access());
    let mut adds = 0u64;
    let rounds = volume_mib().div_ceil(SLOTS);
    for round in 0..rounds {
        src.buf.fill_pattern(round as u64 * 7 + ip as u64);
        dst.buf.write(0, &vec![0u8; SLOTS * CHUNK]);
        let want = src.buf.read();
        // 16 x 1 MiB WRITEs, 4 posted at a time, the last of each four signaled.
        for group in 0..SLOTS / 4 {
            let wrs: Vec<(u64, SendWr)> = (0..4)
                .map(|k| {
                    let s = group * 4 + k;
                    let sgl = Box::leak(Box::new([src.sge(s * CHUNK, CHUNK)]));
                    let w = wr(SendOp::RdmaWrite { raddr: dst.addr() + (s * CHUNK) as u64, rkey: dst.mr.rkey() }, Payload::Sgl(sgl));
                    (s as u64, if k == 3 { w.with_flags(provider::opcode::FmCeSe::CQ_UPDATE) } else { w })
                })
                .collect();
            ea.qp.post_send_list(&wrs).unwrap();
        }
        let wcs = wait(&mut ea.scq, SLOTS / 4);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "round {round}: {wcs:?}");
        let got = dst.buf.read();
        if got != want {
            let first = (0..got.len()).find(|&i| got[i] != want[i]).unwrap();
            panic!("round {round}: first wrong byte at {first} ({:?})", b.hca.device().counters());
        }
        // A READ back of one slot, a SEND of 100 KiB over the start of slot 0, and an
        // atomic add.
        let slot = round % SLOTS;
        ea.qp.post_send(100, &signaled(SendOp::RdmaRead { raddr: dst.addr() + (slot * CHUNK) as u64, rkey: dst.mr.rkey() },
                                       Payload::Sgl(&[back.sge(0, CHUNK)]))).unwrap();
        eb.qp.post_recv(200, &[dst.sge(0, 200 << 10)]).unwrap();
        // Fenced: it must not overwrite what the READ before it returns.
        let sgl = [src.sge(CHUNK, 100 << 10)];
        let send = signaled(SendOp::Send, Payload::Sgl(&sgl)).with_flags(provider::opcode::FmCeSe::FENCE);
        ea.qp.post_send(101, &send).unwrap();
        ea.qp.post_send(102, &signaled(SendOp::FetchAdd { raddr: counter.addr(), rkey: counter.mr.rkey(), add: round as u64 + 1 },
                                       Payload::Sgl(&[result.sge(0, 8)]))).unwrap();
        let wcs = wait(&mut ea.scq, 3);
        assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "round {round}: {wcs:?}");
        assert!(back.buf.read() == want[slot * CHUNK..(slot + 1) * CHUNK], "round {round}: READ data");
        let rc = wait(&mut eb.rcq, 1)[0];
        assert_eq!((rc.status, rc.byte_len), (WcStatus::Success, 100 << 10));
        assert!(dst.buf.read()[..100 << 10] == want[CHUNK..CHUNK + (100 << 10)], "round {round}: SEND data");
        assert_eq!(result.buf.read_u64(0), adds, "round {round}: atomic result");
        adds += round as u64 + 1;
        assert_eq!(counter.buf.read_u64(0), adds, "round {round}: an atomic ran twice or not at all");
    }
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    eprintln!("p={p}: requester {ca:?}\nresponder {cb:?}");
    if p > 0.0 {
        assert!(ca.fault_dropped > 0 && ca.fault_duplicated > 0 && ca.fault_reordered > 0);
        assert!(cb.fault_dropped > 0 && cb.duplicates_received > 0 && ca.retransmits > 0);
    }
    assert_eq!(ca.rx_bad_icrc + cb.rx_bad_icrc, 0);
}

#[test]
fn lossy_wire_1_percent() {
    run(1, 0.01);
}

#[test]
fn lossy_wire_10_percent() {
    run(3, 0.10);
}

#[test]
fn clean_wire() {
    run(5, 0.0);
}

/// `DOORBELL_FAULT=drop=0.02,reorder=0.01 doorbell bench read-bw -q 4 -s 4097 -t 16`,
/// for a few fixed seeds: 16 READs of 4097 bytes (two packets) outstanding on each of
/// four QPs, every completion a success and every byte checked. Retransmitted READ
/// requests reach the responder as duplicates of READs it has served (and the requester
/// may have completed); a new READ after them must be served, not refused with a fatal
/// invalid-request NAK.
fn reads_outstanding(seed: u64) {
    const QPS: usize = 4;
    const DEPTH: usize = 16;
    const LEN: usize = 4097;
    const READS: u64 = 300; // per QP
    let spec = |s| FaultSpec::new(0.02, 0.0, 0.01, s);
    let hint = 10 + 2 * (seed % 8) as u8;
    let a = Host::at([127, 1, 2, hint], |c| c.fault = Some(spec(seed)));
    let b = Host::at([127, 1, 2, hint + 1], |c| c.fault = Some(spec(seed + 1000)));
    let o = Opts { mtu: 5, rd_atomic: DEPTH as u8, cq: 256, ..Default::default() };
    // Distinct contents for every (QP, slot) so a READ landing in the wrong place shows.
    let src = b.mem(QPS * DEPTH * LEN, all_access());
    src.buf.fill_pattern(seed);
    let want = src.buf.read();
    let dst = a.mem(QPS * DEPTH * LEN, all_access());
    let mut qps: Vec<(End, End)> = (0..QPS).map(|_| connect(&a, &b, &o)).collect();
    let at = |q: usize, slot: usize| (q * DEPTH + slot) * LEN;
    let post = |e: &mut End, q: usize, i: u64| {
        let slot = (i as usize) % DEPTH;
        let sgl = [dst.sge(at(q, slot), LEN)];
        let op = SendOp::RdmaRead { raddr: src.addr() + at(q, slot) as u64, rkey: src.mr.rkey() };
        e.qp.post_send(i, &signaled(op, Payload::Sgl(&sgl))).unwrap();
    };
    for (q, (ea, _)) in qps.iter_mut().enumerate() {
        for i in 0..DEPTH as u64 {
            post(ea, q, i);
        }
    }
    let mut done = [0u64; QPS];
    while done.iter().any(|&d| d < READS) {
        for (q, (ea, _)) in qps.iter_mut().enumerate() {
            if done[q] == READS {
                continue;
            }
            let wc = wait(&mut ea.scq, 1)[0];
            assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, done[q]), "seed {seed} QP {q}: {wc:?} ({:?})", b.hca.device().counters());
            let r = at(q, (done[q] as usize) % DEPTH);
            let got = dst.buf.read();
            assert!(got[r..r + LEN] == want[r..r + LEN], "seed {seed} QP {q}: READ {} returned wrong bytes", done[q]);
            dst.buf.write(r, &[0; LEN]);
            let next = done[q] + DEPTH as u64;
            if next < READS {
                post(ea, q, next);
            }
            done[q] += 1;
        }
    }
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    assert_eq!((ca.err_naks_received, cb.err_naks_sent, ca.error_cqes), (0, 0, 0), "seed {seed}: {ca:?}\n{cb:?}");
}

#[test]
fn reads_16_outstanding_on_a_lossy_wire() {
    for seed in [4, 15, 17, 100, 172] {
        reads_outstanding(seed);
    }
}
