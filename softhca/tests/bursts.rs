//! Burst records on the same-host path (softhca/src/device/link/burst.rs): long SENDs and
//! WRITEs leave as runs of packets in one record each, the responder still sees (and
//! counts) every packet the IBA's packetization makes of them, the bytes land, and an
//! error in the middle of a run is found at its packet. Over UDP nothing changes.
//!
//! Addresses: 127.1.40.x (hints, see common::bind_free).

mod common;

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp};

const MTU: usize = 4096;

/// Request packets of a message of `len` bytes at `MTU` (IBA 9.7.2: one per MTU, at
/// least one).
fn packets(len: usize) -> u64 {
    len.div_ceil(MTU).max(1) as u64
}

fn long_messages_go_as_bursts_and_land() {
    let a = Host::new([127, 1, 40, 1]);
    let b = Host::new([127, 1, 40, 2]);
    let (mut ea, mut eb) = connect(&a, &b, &Opts { mtu: 5, ..Default::default() });
    let sizes = [2 * MTU, (1 << 20) + 123, 300_000, MTU + 1];
    let cap = (1 << 20) + MTU;
    let src = a.mem(cap, all_access());
    let dst = b.mem(cap, all_access());
    let mut expected_packets = 0;
    for (i, &len) in sizes.iter().enumerate() {
        let seed = 7 + i as u64;
        src.buf.fill_pattern(seed);
        dst.buf.write(0, &vec![0xee; cap]);
        let send = i % 2 == 1;
        if send {
            eb.qp.post_recv(seed, &[dst.sge(0, cap)]).unwrap();
        }
        let op = if send { SendOp::Send } else { SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() } };
        ea.qp.post_send(seed, &signaled(op, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
        let wc = wait(&mut ea.scq, 1)[0];
        assert_eq!((wc.status, wc.wr_id), (WcStatus::Success, seed), "{len} B: {wc:?}");
        if send {
            let rc = wait(&mut eb.rcq, 1)[0];
            assert_eq!((rc.status, rc.byte_len as usize), (WcStatus::Success, len), "{len} B: {rc:?}");
        }
        let (want, got) = (src.buf.read(), dst.buf.read());
        assert!(got[..len] == want[..len], "{len} B: the bytes landed");
        assert!(got[len..].iter().all(|&x| x == 0xee), "{len} B: nothing written past the message");
        expected_packets += packets(len);
    }
    until_idle(&a);
    until_idle(&b);
    let (ca, cb) = (a.hca.device().counters(), b.hca.device().counters());
    if ca.local_tx_packets == 0 {
        // UDP: one datagram per packet, no bursts.
        assert_eq!((ca.local_bursts, cb.local_bursts), (0, 0), "{ca:?}");
        return;
    }
    // Every packet the responder took, in bursts or not, is counted once; a retransmission
    // adds its packets again.
    let resent = ca.retransmits + ca.tail_probes;
    assert!(cb.local_rx_packets >= expected_packets && cb.local_rx_packets <= expected_packets + resent,
            "responder took {} packets, {expected_packets} sent ({resent} again): {cb:?}", cb.local_rx_packets);
    assert!(ca.local_bursts >= sizes.len() as u64, "each message went as at least one burst: {ca:?}");
    assert!(ca.local_bursts * 4 <= expected_packets, "runs of several packets each: {ca:?}");
    // One ACK per run at most (plus the few that duplicates get), not one per 16 packets.
    assert!(cb.acks_sent <= ca.local_bursts + resent + sizes.len() as u64, "{cb:?}");
    assert_eq!(ca.local_burst_dropped, 0, "{ca:?}");
}

/// A SEND of 16 packets (a burst on the same-host path) into a receive buffer that ends inside packet 11: the
/// receiver completes with a local length error, the sender with remote invalid request
/// (as a ConnectX: the responder NAKs at the packet that overflows), and memory outside
/// the receive buffer is untouched.
fn send_overflowing_in_the_middle_of_a_run() {
    let a = Host::new([127, 1, 40, 11]);
    let b = Host::new([127, 1, 40, 12]);
    let (mut ea, mut eb) = connect(&a, &b, &Opts { mtu: 5, timeout: 17, ..Default::default() });
    let src = a.mem(16 * MTU, all_access());
    let dst = b.mem(32 * MTU, all_access());
    src.buf.fill_pattern(3);
    dst.buf.write(0, &vec![0x5a; 32 * MTU]);
    // A one-packet WRITE first: the sender learns of the same-host path at its first
    // flush, and only then builds bursts.
    ea.qp.post_send(9, &signaled(SendOp::RdmaWrite { raddr: dst.addr() + (31 * MTU) as u64, rkey: dst.mr.rkey() },
                                 Payload::Sgl(&[src.sge(0, 8)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    dst.buf.write(31 * MTU, &[0x5a; 8]);
    let room = 10 * MTU + 500;
    eb.qp.post_recv(1, &[dst.sge(0, room)]).unwrap();
    ea.qp.post_send(2, &signaled(SendOp::Send, Payload::Sgl(&[src.sge(0, 16 * MTU)]))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.wr_id), (WcStatus::RemInvReqErr, 2), "{wc:?}");
    let rc = wait(&mut eb.rcq, 1)[0];
    assert_eq!((rc.status, rc.wr_id), (WcStatus::LocLenErr, 1), "{rc:?}");
    let got = dst.buf.read();
    assert!(got[room..].iter().all(|&x| x == 0x5a), "bytes past the receive buffer changed");
    let ca = a.hca.device().counters();
    if ca.local_tx_packets > 0 {
        assert!(ca.local_bursts >= 1, "the SEND went as a burst: {ca:?}");
    }
}

on_both_wires!(long_messages_go_as_bursts_and_land, send_overflowing_in_the_middle_of_a_run);
