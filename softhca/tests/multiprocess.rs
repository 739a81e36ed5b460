//! Two processes, two hosts: the test spawns itself as the peer (environment
//! `DOORBELL_MP_ROLE=peer`), the two exchange QPN, PSN, GID, rkey and address over the
//! child's stdin/stdout, and then move data both ways over RoCEv2 between two softhca
//! instances that share nothing but the wire.
//!
//! Parent (near 127.1.4.1): RDMA WRITE 1 MiB into the peer, then SEND "go". Peer (near
//! 127.1.4.2): checks every byte, RDMA WRITE_WITH_IMM 1 MiB back, RDMA READ the parent's
//! buffer and checks it, FETCH_AND_ADD on the parent's counter, then reports "MP ok".

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use provider::cqe::{WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp};

const ROLE: &str = "DOORBELL_MP_ROLE";
const LEN: usize = 1 << 20;

#[derive(Debug, Clone, Copy)]
struct Info {
    qpn: u32,
    psn: u32,
    gid: [u8; 16],
    rkey: u32,
    addr: u64,
}

impl Info {
    fn line(&self) -> String {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!("MP info {} {} {gid} {} {}", self.qpn, self.psn, self.rkey, self.addr)
    }

    fn parse(l: &str) -> Option<Info> {
        let f: Vec<&str> = l.strip_prefix("MP info ")?.split(' ').collect();
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = u8::from_str_radix(f.get(2)?.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Info { qpn: f[0].parse().ok()?, psn: f[1].parse().ok()?, gid, rkey: f[3].parse().ok()?, addr: f[4].parse().ok()? })
    }
}

/// Reads lines until one holds `MP `; the test harness prints its own text too, even on
/// the same line ("test two_processes ... MP info ...").
fn read_mp(r: &mut impl BufRead) -> String {
    let mut l = String::new();
    loop {
        l.clear();
        if r.read_line(&mut l).unwrap_or(0) == 0 {
            panic!("peer closed its output");
        }
        if let Some(at) = l.find("MP ") {
            return l[at..].trim_end().to_string();
        }
    }
}

fn pattern(seed: u64) -> Vec<u8> {
    let b = Buf::new(LEN);
    b.fill_pattern(seed);
    b.read()
}

fn peer() {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let parent = Info::parse(&read_mp(&mut input)).expect("parent info");
    let h = Host::new([127, 1, 4, 2]);
    let o = Opts::default();
    let mut e = End::new(&h, &o);
    let mem = h.mem(LEN, all_access());
    let back = h.mem(LEN, all_access());
    let mine = Info { qpn: e.qp.qpn(), psn: 0x4242, gid: h.gid(), rkey: mem.mr.rkey(), addr: mem.addr() };
    e.qp.post_recv(1, &[back.sge(0, 64)]).unwrap();
    e.connect(&o, parent.qpn, parent.gid, mine.psn, parent.psn);
    println!("{}", mine.line());
    std::io::stdout().flush().unwrap();
    // The parent's WRITE, then its SEND.
    let rc = wait(&mut e.rcq, 1)[0];
    assert_eq!((rc.status, rc.byte_len), (WcStatus::Success, 2));
    assert_eq!(&back.buf.read()[..2], b"go");
    assert!(mem.buf.read() == pattern(1), "peer: the parent's RDMA WRITE arrived wrong");
    // Back the other way.
    back.buf.fill_pattern(2);
    e.qp.post_send(10, &signaled(SendOp::RdmaWriteImm { raddr: parent.addr, rkey: parent.rkey, imm: 0xfeed }, Payload::Sgl(&[back.sge(0, LEN)]))).unwrap();
    e.qp.post_send(11, &signaled(SendOp::RdmaRead { raddr: parent.addr, rkey: parent.rkey }, Payload::Sgl(&[mem.sge(0, LEN)]))).unwrap();
    e.qp.post_send(12, &signaled(SendOp::FetchAdd { raddr: parent.addr + LEN as u64, rkey: parent.rkey, add: 5 }, Payload::Sgl(&[back.sge(0, 8)]))).unwrap();
    let wcs = wait(&mut e.scq, 3);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert!(mem.buf.read() == pattern(2), "peer: READ of the parent's buffer");
    assert_eq!(back.buf.read_u64(0), 35, "FETCH_AND_ADD returns the old value");
    println!("MP ok");
    std::io::stdout().flush().unwrap();
    // Stay until the parent has seen everything (it closes our stdin).
    let mut rest = String::new();
    let _ = input.read_line(&mut rest);
}

#[test]
fn two_processes() {
    if std::env::var_os(ROLE).is_some() {
        return peer();
    }
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "two_processes", "--nocapture", "--test-threads", "1"])
        .env(ROLE, "peer")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the peer");
    let guard = Instant::now();
    let h = Host::new([127, 1, 4, 1]);
    let o = Opts::default();
    let mut e = End::new(&h, &o);
    let mem = h.mem(LEN + 64, all_access());
    mem.buf.write(LEN, &35u64.to_ne_bytes());
    let src = h.mem(LEN, all_access());
    src.buf.fill_pattern(1);
    let mine = Info { qpn: e.qp.qpn(), psn: 0x77, gid: h.gid(), rkey: mem.mr.rkey(), addr: mem.addr() };
    let mut to_child = child.stdin.take().unwrap();
    writeln!(to_child, "{}", mine.line()).unwrap();
    to_child.flush().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        let mut r = BufReader::new(out);
        let _ = tx.send(read_mp(&mut r));
        let _ = tx.send(read_mp(&mut r));
        // Keep draining: the peer's harness still reports its result.
        let _ = std::io::copy(&mut r, &mut std::io::sink());
    });
    let recv = |what: &str| rx.recv_timeout(WAIT).unwrap_or_else(|_| panic!("peer silent: {what}"));
    let peer = Info::parse(&recv("info")).expect("peer info");
    e.qp.post_recv(7, &[]).unwrap();
    e.connect(&o, peer.qpn, peer.gid, mine.psn, peer.psn);
    e.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: peer.addr, rkey: peer.rkey }, Payload::Sgl(&[src.sge(0, LEN)]))).unwrap();
    e.qp.post_send(2, &signaled(SendOp::Send, Payload::Inline(&[b"go"]))).unwrap();
    let wcs = wait(&mut e.scq, 2);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    let rc = wait(&mut e.rcq, 1)[0];
    assert_eq!((rc.status, rc.opcode, rc.imm, rc.byte_len as usize), (WcStatus::Success, WcOpcode::RecvRdmaWithImm, 0xfeed, LEN));
    assert!(mem.buf.read()[..LEN] == pattern(2)[..], "parent: the peer's WRITE arrived wrong");
    assert_eq!(recv("result"), "MP ok");
    assert_eq!(mem.buf.read_u64(LEN), 40, "the peer's atomic");
    drop(to_child);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "peer exited with {st}");
            break;
        }
        if guard.elapsed() > WAIT * 2 {
            let _ = child.kill();
            panic!("peer did not exit");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let c = h.hca.device().counters();
    // Whichever path carried it (the same-host path by default between two processes).
    assert!(c.rx_packets + c.local_rx_packets > 0 && sent(&h.hca) > 0 && c.rx_bad_icrc == 0 && c.local_copy_errors == 0, "{c:?}");
}
