//! The doorbell trap (softhca/src/device/trap.rs): an idle engine sleeps with the
//! application's UAR pages write-protected, and a doorbell store wakes it.
//!
//! Correctness only (no timing assertions): work posted after the engine went idle is
//! executed, with the trap and with the timed fallback (`Config::doorbell_trap = false`,
//! what `DOORBELL_DOORBELL_TRAP=0` sets), on many QPs at once, for CQ arming, and for the
//! punched clock page. Where the kernel lacks userfaultfd write-protection of shmem, the
//! trap-mode tests still check the data path (the HCA falls back by itself) and say so.

mod common;

use std::time::{Duration, Instant};

use common::*;
use provider::cqe::WcStatus;
use provider::wqe::{Payload, SendOp};

/// The trap half of a trap-mode test is skipped (the data path still runs): recorded as a
/// skip, which fails under `DOORBELL_REQUIRE_ALL=1` (CI's kernel has the feature).
fn note(why: &str) {
    testkit::skip(testkit::Need::Kernel, format!("{why} (a kernel with userfaultfd write-protection of shmem, as root)"));
}

fn host(ip: [u8; 4], trap: bool) -> Host {
    Host::at(ip, |c| c.doorbell_trap = trap)
}

fn write_after_idle(trap: bool, ips: ([u8; 4], [u8; 4])) {
    let (a, b) = (host(ips.0, trap), host(ips.1, trap));
    let active = a.hca.device().doorbell_trap();
    if trap && !active {
        note("userfaultfd write-protection unavailable: the HCA uses the timed backoff");
    }
    assert!(trap || !active, "Config::doorbell_trap = false must turn the trap off");
    let o = Opts::default();
    let (mut ea, _eb) = connect(&a, &b, &o);
    let src = a.mem(1 << 20, all_access());
    let dst = b.mem(1 << 20, all_access());
    src.buf.fill_pattern(7);
    for (round, len) in [8usize, 4096, 100_000, 1 << 20].into_iter().enumerate() {
        until_idle(&a);
        until_idle(&b);
        let before = a.hca.device().counters();
        let op = SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() };
        ea.qp.post_send(round as u64, &signaled(op, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
        let wc = wait(&mut ea.scq, 1);
        assert_eq!(wc[0].status, WcStatus::Success, "{wc:?}");
        assert_eq!(&dst.buf.read()[..len], &src.buf.read()[..len], "round {round}");
        let after = a.hca.device().counters();
        if active {
            assert!(after.trap_faults > before.trap_faults, "the doorbell of round {round} trapped: {after:?}");
        } else {
            assert_eq!(after.trap_faults, 0);
        }
    }
}

#[test]
fn doorbell_after_idle_is_served_by_the_trap() {
    write_after_idle(true, ([127, 30, 1, 1], [127, 30, 1, 2]));
}

#[test]
fn doorbell_after_idle_is_served_without_the_trap() {
    write_after_idle(false, ([127, 30, 2, 1], [127, 30, 2, 2]));
}

#[test]
fn trap_on_one_side_only() {
    let (a, b) = (host([127, 30, 3, 1], true), host([127, 30, 3, 2], false));
    let o = Opts::default();
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let ma = a.mem(8192, all_access());
    let mb = b.mem(8192, all_access());
    for i in 0..5u64 {
        until_idle(&a);
        eb.qp.post_recv(i, &[mb.sge(0, 8192)]).unwrap();
        ea.qp.post_send(i, &signaled(SendOp::Send, Payload::Sgl(&[ma.sge(0, 100 + i as usize)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        assert_eq!(wait(&mut eb.rcq, 1)[0].byte_len, 100 + i as u32);
        until_idle(&b);
        ea.qp.post_recv(i, &[ma.sge(4096, 4096)]).unwrap();
        eb.qp.post_send(i, &signaled(SendOp::Send, Payload::Sgl(&[mb.sge(0, 50)]))).unwrap();
        assert_eq!(wait(&mut eb.scq, 1)[0].status, WcStatus::Success);
        assert_eq!(wait(&mut ea.rcq, 1)[0].byte_len, 50);
    }
}

#[test]
fn many_qps_after_idle() {
    const N: usize = 24;
    let (a, b) = (host([127, 30, 4, 1], true), host([127, 30, 4, 2], true));
    let o = Opts { cap: provider::qp::QpCap { max_send_wr: 8, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 }, cq: 16, ..Opts::default() };
    let mut pairs: Vec<(End, End)> = (0..N).map(|_| connect(&a, &b, &o)).collect();
    let src = a.mem(N * 4096, all_access());
    let dst = b.mem(N * 4096, all_access());
    src.buf.fill_pattern(11);
    for round in 0..3u64 {
        until_idle(&a);
        for (i, (ea, _)) in pairs.iter_mut().enumerate() {
            let op = SendOp::RdmaWrite { raddr: dst.addr() + (i * 4096) as u64, rkey: dst.mr.rkey() };
            ea.qp.post_send(round, &signaled(op, Payload::Sgl(&[src.sge(i * 4096, 4096)]))).unwrap();
        }
        for (ea, _) in pairs.iter_mut() {
            assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        }
        assert_eq!(dst.buf.read(), src.buf.read(), "round {round}");
        // One at a time, each after idleness, on a different QP (a different UAR page for
        // some of them).
        for (i, (ea, _)) in pairs.iter_mut().enumerate().step_by(7) {
            until_idle(&a);
            let op = SendOp::RdmaWrite { raddr: dst.addr() + (i * 4096) as u64, rkey: dst.mr.rkey() };
            ea.qp.post_send(99, &signaled(op, Payload::Sgl(&[src.sge(i * 4096, 64)]))).unwrap();
            assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        }
    }
}

#[test]
fn cq_arm_through_the_trap() {
    let (a, b) = (host([127, 30, 5, 1], true), host([127, 30, 5, 2], true));
    let o = Opts::default();
    let mut ea = End::new(&a, &o);
    let ch = b.ctx.create_comp_channel().unwrap();
    let mut eb = End::with_recv_events(&b, &o, &ch);
    ea.connect(&o, eb.qp.qpn(), b.gid(), 100, 200);
    eb.connect(&o, ea.qp.qpn(), a.gid(), 200, 100);
    let src = a.mem(4096, all_access());
    let dst = b.mem(4096, all_access());
    for i in 0..6u64 {
        eb.qp.post_recv(i, &[dst.sge(0, 4096)]).unwrap();
    }
    for i in 0..3u64 {
        until_idle(&b);
        let before = b.hca.device().counters();
        // The arm doorbell (a UAR store) lands on a protected page.
        eb.rcq.req_notify(false);
        if b.hca.device().doorbell_trap() {
            let after = b.hca.device().counters();
            assert!(after.trap_faults > before.trap_faults, "the arm store trapped: {after:?}");
        }
        until_idle(&a);
        ea.qp.post_send(i, &wr(SendOp::Send, Payload::Sgl(&[src.sge(0, 10 + i as usize)]))).unwrap();
        let h = ch.get_event(Some(Duration::from_secs(10))).expect("completion event");
        assert_eq!(h, eb.rcq.user_handle());
        eb.rcq.ack_event();
        assert_eq!(wait(&mut eb.rcq, 1)[0].byte_len, 10 + i as u32);
    }
}

/// Reads the free-running timer from a mapping of the clock page (big-endian high word,
/// then low word; mlx5's `internal_timer_h/l`).
fn read_clock(p: *const u8) -> u64 {
    // SAFETY: `p` is a live read-only mapping of the clock page (at least 8 bytes).
    let (h, l) = unsafe { (std::ptr::read_volatile(p.cast::<u32>()), std::ptr::read_volatile(p.add(4).cast::<u32>())) };
    (u32::from_be(h) as u64) << 32 | u32::from_be(l) as u64
}

#[test]
fn clock_page_is_fresh_after_idle() {
    for (trap, ip) in [(true, [127, 30, 6, 1]), (false, [127, 30, 6, 2])] {
        let a = host(ip, trap);
        let off = uverbs::sys::mlx5::mmap_pgoff(uverbs::sys::mlx5::MMAP_CORE_CLOCK, 0) * 4096;
        let m = a.ctx.device().mmap(4096, libc::PROT_READ, off).expect("map the clock page");
        let khz = a.hca.config().core_clock_khz;
        let mut last = read_clock(m.as_ptr());
        for _ in 0..3 {
            until_idle(&a);
            let t = Instant::now();
            std::thread::sleep(Duration::from_millis(30));
            let now = read_clock(m.as_ptr());
            // At least most of the 30 ms (the fallback refreshes every <= 2 ms while idle;
            // the trap refreshes on the read itself).
            let ms = (now.wrapping_sub(last)) as f64 / khz as f64;
            assert!((25.0..60_000.0).contains(&ms), "trap {trap}: the clock moved {ms:.1} ms in {:?}", t.elapsed());
            last = now;
        }
        if a.hca.device().doorbell_trap() {
            assert!(a.hca.device().counters().trap_clock_faults > 0, "reads after idleness trapped");
        }
    }
}

/// A UAR page mapped by the mmap system call on a program's fd of the device page file
/// (what UCX's bistro hooks or `syscall(SYS_mmap, ...)` do under the preload), never
/// through the kernel half: the trap finds the mapping in /proc/self/maps and protects
/// it, so a store there faults (the kernel's userfaultfd reports it) like a doorbell on
/// a mapping the kernel half made.
#[test]
fn a_uar_mapped_past_the_kernel_half_traps() {
    let a = host([127, 30, 7, 1], true);
    if !a.hca.device().doorbell_trap() {
        note("userfaultfd write-protection unavailable: nothing to trap");
        return;
    }
    let pages = a.hca.pages();
    let fd = pages.user_fd(true).expect("an fd of the device page file");
    let page = pages.alloc().expect("a free UAR page");
    a.hca.device().expect_mappings(&[page], false);
    use std::os::fd::AsRawFd;
    // SAFETY: a new shared mapping of one page of the file at an address the kernel
    // picks; unmapped at the end of the test.
    let p = unsafe {
        libc::syscall(libc::SYS_mmap, 0usize, 4096usize, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED,
                      fd.as_raw_fd(), page as usize * 4096) as *mut u64
    };
    assert!(p as isize > 0 && p as isize != -1, "mmap: {}", std::io::Error::last_os_error());
    for round in 0..3u64 {
        until_idle(&a);
        let before = a.hca.device().counters();
        assert!(before.trap_found >= 1, "the mapping was found: {before:?}");
        // SAFETY: an aligned 8-byte store into our live shared mapping (the BlueFlame
        // register's offset, where a doorbell goes).
        unsafe { std::ptr::write_volatile(p.add(0x800 / 8), round + 1) };
        let after = a.hca.device().counters();
        assert!(after.trap_faults > before.trap_faults, "round {round}: the store trapped: {after:?}");
        assert_eq!(pages.read_u64(page, 0x800), round + 1, "the store landed in the device page");
    }
    // SAFETY: unmapping the test's own mapping.
    unsafe { libc::munmap(p.cast(), 4096) };
}
