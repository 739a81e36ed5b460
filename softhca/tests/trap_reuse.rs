//! The doorbell trap across instances: an address one instance's application unmapped
//! and another instance's application mapped again belongs to the second instance only.
//!
//! softhca does not see munmap, so the first instance's engine still lists the range. If
//! it lifted (or set) the write-protection there, it would change the second instance's
//! page: with the protection lifted, a doorbell store there no longer wakes the second
//! engine, which sleeps through it. In CI this was a completion that never came (a 30 s
//! timeout in `errors.rs`, whose tests create and drop instances two at a time); here
//! about one run in 60 of that binary. See `softhca/src/device/trap_owners.rs`.
//!
//! Its own test binary: the test finds the mappings in `/proc/self/maps` by comparing
//! snapshots, which other tests in the same process would disturb.

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp};

/// Start addresses of the application's UAR mappings of any softhca instance (shared,
/// write-only, from the device memory file).
fn uar_mappings() -> BTreeSet<u64> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .filter(|l| l.contains(softhca::pages::MEMFD_NAME) && l.split_whitespace().nth(1) == Some("-w-s"))
        .filter_map(|l| u64::from_str_radix(l.split('-').next()?, 16).ok())
        .collect()
}

/// Runs a closure when dropped (also when the test fails).
struct Defer<F: FnMut()>(F);

impl<F: FnMut()> Drop for Defer<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// One attempt: returns false when the second instance's mappings did not reuse an
/// address of the first one's (nothing was tested).
fn attempt(k: u8) -> bool {
    // Instance A: a context with a QP (its UAR pages mapped), its engine armed.
    let before = uar_mappings();
    let a = Host::new([127, 31, k, 1]);
    let ea = End::new(&a, &Opts::default());
    let a_pages: BTreeSet<u64> = uar_mappings().difference(&before).copied().collect();
    until_idle(&a);
    // A's application unmaps its UAR pages without a word to softhca (as any application
    // may: the device never sees munmap), and is never heard of again. A's engine sleeps
    // on, its ranges still listed as protected.
    for &p in &a_pages {
        // SAFETY: A's UAR pages, one page each; A's context is leaked below, so nothing
        // uses or unmaps them again.
        assert_eq!(unsafe { libc::munmap(p as *mut libc::c_void, 4096) }, 0);
    }
    let addr_a = a.addr();
    let hca_a = a.hca.clone();
    std::mem::forget((ea, a));
    let gone = uar_mappings();

    // Instances B and C, connected; B's UAR pages may land where A's were.
    let b = Host::new([127, 31, k, 2]);
    let c = Host::new([127, 31, k, 3]);
    let o = Opts::default();
    let (mut eb, _ec) = connect(&b, &c, &o);
    let reused: Vec<u64> = uar_mappings().difference(&gone).filter(|p| a_pages.contains(p)).copied().collect();
    if reused.is_empty() {
        return false;
    }
    let src = b.mem(4096, all_access());
    let dst = c.mem(4096, all_access());
    src.buf.fill_pattern(k as u64);
    until_idle(&b);
    until_idle(&c);

    // A's engine wakes for datagrams and stays busy (its trap disarmed) while B works:
    // it must not lift B's protection.
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        let s = std::net::UdpSocket::bind((c.addr(), 0)).unwrap();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                s.send_to(b"not a RoCE packet", (addr_a, 4791)).unwrap();
                std::thread::sleep(Duration::from_micros(50));
            }
        })
    };
    let _stop = Defer(|| {
        stop.store(true, Ordering::Relaxed);
    });
    wait_until("A busy with datagrams", || hca_a.device().counters().rx_packets >= 10);

    // Both of B's UAR pages: the CQ arm (the context's page) and the send doorbell (the
    // QP's page). Each store lands on a page B's engine protected, so each traps.
    let before = b.hca.device().counters();
    eb.rcq.req_notify(false);
    let after = b.hca.device().counters();
    assert!(after.trap_faults > before.trap_faults, "the CQ arm on a reused address did not trap: {reused:x?} {after:?}");
    until_idle(&b);
    let before = b.hca.device().counters();
    let op = SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() };
    eb.qp.post_send(1, &signaled(op, Payload::Sgl(&[src.sge(0, 4096)]))).unwrap();
    let after = b.hca.device().counters();
    assert!(after.trap_faults > before.trap_faults, "the doorbell on a reused address did not trap: {reused:x?} {after:?}");
    let wc = wait_for(&mut eb.scq, 1, Duration::from_secs(10));
    assert_eq!(wc[0].status, WcStatus::Success);
    assert_eq!(dst.buf.read(), src.buf.read());
    drop(_stop);
    flood.join().unwrap();
    true
}

#[test]
fn a_reused_uar_address_stays_protected_for_its_new_owner() {
    if !Host::new([127, 31, 0, 1]).hca.device().doorbell_trap() {
        testkit::skip(testkit::Need::Kernel, "userfaultfd write-protection of shmem unavailable, no doorbell trap (a kernel with CONFIG_PTE_MARKER_UFFD_WP, run as root or vm.unprivileged_userfaultfd=1)");
        return;
    }
    // Each attempt leaks instance A (its context must never unmap its pages again).
    assert!((1..=5u8).any(attempt), "in 5 attempts no UAR page was mapped again at an address another instance had used");
}
