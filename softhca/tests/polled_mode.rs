//! Polled mode (softhca/src/device/polled.rs): an application thread that calls
//! `Context::progress` runs the data path itself, and the engine thread stays out of the
//! way while it does; when the calls stop, the engine thread takes over again.
//!
//! Correctness only (no timing assertions): traffic driven by `progress` on both ends
//! completes with the right bytes, the calls do the work (the progress-step counter
//! moves), and a doorbell rung after the application stopped calling is still served.

mod common;

use std::time::Duration;

use common::*;
use provider::cqe::{WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp};
use provider::{Cq, Wc};

/// Polls `cq` for `n` completions, calling `progress` on both hosts in between.
fn drive(hosts: [&Host; 2], cq: &mut Cq, n: usize) -> Vec<Wc> {
    poll_for(cq, n, WAIT, || {
        for h in hosts {
            h.ctx.progress();
        }
    })
}

#[test]
fn progress_drives_writes_and_the_engine_takes_over_after() {
    for trap in [true, false] {
        let a = Host::at([127, 31, 1, 1], |c| c.doorbell_trap = trap);
        let b = Host::at([127, 31, 1, 2], |c| c.doorbell_trap = trap);
        assert!(a.ctx.progress_fd().is_some(), "softhca has a socket to block on");
        let (mut ea, mut eb) = connect(&a, &b, &Opts::default());
        let src = a.mem(1 << 20, all_access());
        let dst = b.mem(1 << 20, all_access());
        src.buf.fill_pattern(11);
        let before = (a.hca.device().counters(), b.hca.device().counters());
        // Many rounds of WRITE WITH IMM, each completed by progress calls alone.
        let mut rounds = 0u64;
        for len in [8usize, 4096, 100_000, 1 << 20] {
            for _ in 0..20 {
                eb.qp.post_recv(rounds, &[]).unwrap();
                let op = SendOp::RdmaWriteImm { raddr: dst.addr(), rkey: dst.mr.rkey(), imm: rounds as u32 };
                ea.qp.post_send(rounds, &signaled(op, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
                let r = drive([&a, &b], &mut eb.rcq, 1);
                assert_eq!((r[0].status, r[0].opcode, r[0].imm, r[0].byte_len as usize), (WcStatus::Success, WcOpcode::RecvRdmaWithImm, rounds as u32, len));
                let s = drive([&a, &b], &mut ea.scq, 1);
                assert_eq!(s[0].status, WcStatus::Success, "{s:?}");
                assert_eq!(&dst.buf.read()[..len], &src.buf.read()[..len], "{len} B, round {rounds}");
                rounds += 1;
            }
        }
        let after = (a.hca.device().counters(), b.hca.device().counters());
        assert!(after.0.progress_steps > before.0.progress_steps, "the sender's calls stepped: {:?}", after.0);
        assert!(after.1.progress_steps > before.1.progress_steps, "the receiver's calls stepped: {:?}", after.1);
        // No more calls: once the polled window has passed, the engine threads serve a
        // new doorbell by themselves (through the trap where it is in use).
        std::thread::sleep(softhca::device::polled::WINDOW + Duration::from_millis(20));
        let op = SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() };
        src.buf.fill_pattern(12);
        ea.qp.post_send(rounds, &signaled(op, Payload::Sgl(&[src.sge(0, 4096)]))).unwrap();
        let s = wait(&mut ea.scq, 1);
        assert_eq!(s[0].status, WcStatus::Success, "{s:?}");
        assert_eq!(&dst.buf.read()[..4096], &src.buf.read()[..4096]);
    }
}
