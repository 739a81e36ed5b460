//! Reliability under a lossy wire: both instances drop, duplicate and reorder their
//! transmitted packets (1 % and 10 %), and 256 MiB of RDMA WRITEs (1 MiB each) must
//! arrive intact, together with READs, SENDs and atomics whose duplicates must not be
//! executed twice.
//!
//! `DOORBELL_FAULT_MIB` sets the volume (default 256 MiB per test).
//!
//! Addresses: 127.1.2.x.

mod common;

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp, SendWr};
use softhca::device::FaultSpec;
use softhca::Config;

const CHUNK: usize = 1 << 20;
const SLOTS: usize = 16;

fn volume_mib() -> usize {
    std::env::var("DOORBELL_FAULT_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256)
}

fn lossy(ip: u8, p: f64, seed: u64) -> Host {
    let mut cfg = Config::for_addr(std::net::IpAddr::from([127, 1, 2, ip]));
    cfg.fault = Some(FaultSpec::new(p, p, p, seed));
    Host::with_config(cfg)
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
