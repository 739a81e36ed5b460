//! The CPU harness: two processes load `libnccl-net-doorbell.so` with dlopen and drive
//! its `ncclNetPlugin_v10` table the way NCCL's proxy threads do (listen, the handle to
//! the other rank, connect/accept called until they return a comm, regMr, isend and
//! irecv answered with "no request yet" and called again, test polled until done),
//! over each process's own softhca instance. No GPU, no NCCL.
//!
//! Each test re-runs this binary twice as the receiving and the sending rank
//! (`NCCL_NET_HARNESS_ROLE`); the receiver prints its listen handle, which the parent
//! hands to the sender. Expected values come from the plugin contract
//! (`ncclNet_v10_t` in NCCL's net_v10.h): a completed receive reports the bytes the
//! peer sent, each buffer of a grouped receive the bytes of the send with its tag,
//! the contents are the sender's pattern, and bad arguments get a non-zero result.

mod common;

use std::ffi::{c_int, c_void};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::ptr::null_mut;
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nccl_net_doorbell::sys::*;

const ROLE: &str = "NCCL_NET_HARNESS_ROLE";
const HANDLE: &str = "NCCL_NET_HARNESS_HANDLE";
/// The longest any single wait may take before the harness calls it a hang.
const HANG: Duration = Duration::from_secs(60);

/// The plugin, loaded.
struct Net {
    lib: libloading::Library,
    t: &'static ncclNet_v10_t,
}

impl Net {
    fn load() -> Net {
        let path = common::plugin();
        // SAFETY: loading the plugin runs no constructors of note; the table is a
        // static of the library, which stays loaded as long as `_lib`.
        unsafe {
            let lib = libloading::Library::new(&path).unwrap_or_else(|e| panic!("dlopen {}: {e}", path.display()));
            let sym: libloading::Symbol<*const ncclNet_v10_t> = lib.get(b"ncclNetPlugin_v10\0").expect("ncclNetPlugin_v10");
            let t = &**sym;
            Net { lib, t }
        }
    }

    /// The v11 table of the same library (NCCL 2.28's first choice).
    fn v11(&self) -> &'static ncclNet_v11_t {
        // SAFETY: a static of the library, which stays loaded as long as `self`.
        unsafe {
            let sym: libloading::Symbol<*const ncclNet_v11_t> = self.lib.get(b"ncclNetPlugin_v11\0").expect("ncclNetPlugin_v11");
            &**sym
        }
    }

    fn init(&self) -> i32 {
        // SAFETY: no logger: the plugin prints its warnings to stderr.
        unsafe { (self.t.init)(None, None) }
    }

    fn reg(&self, comm: *mut c_void, buf: &mut [u8]) -> *mut c_void {
        let mut mh = null_mut();
        // SAFETY: the buffer outlives the registration (deregistered before it is dropped).
        let rc = unsafe { (self.t.regMr)(comm, buf.as_mut_ptr().cast(), buf.len(), NCCL_PTR_HOST, &mut mh) };
        assert_eq!(rc, 0, "regMr of {} bytes", buf.len());
        assert!(!mh.is_null());
        mh
    }

    fn dereg(&self, comm: *mut c_void, mh: *mut c_void) {
        // SAFETY: a handle from reg.
        assert_eq!(unsafe { (self.t.deregMr)(comm, mh) }, 0);
    }

    /// isend, called again while it answers "no request" (as NCCL's proxy does).
    fn send(&self, comm: *mut c_void, buf: *mut u8, size: usize, tag: i32, mh: *mut c_void) -> Result<*mut c_void, i32> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let mut req = null_mut();
            // SAFETY: buf/size lie in mh's registration (or the test wants the error).
            let rc = unsafe { (self.t.isend)(comm, buf.cast(), size, tag, mh, null_mut(), &mut req) };
            if rc != 0 {
                return Err(rc);
            }
            if !req.is_null() {
                return Ok(req);
            }
            assert!(start.elapsed() < HANG, "isend of {size} bytes (tag {tag}) got no request for {HANG:?}");
            backoff(&mut spins);
        }
    }

    /// irecv of `bufs` (pointer, size, tag, mhandle), called again while it answers
    /// "no request".
    fn recv(&self, comm: *mut c_void, bufs: &[(*mut u8, usize, i32, *mut c_void)]) -> Result<*mut c_void, i32> {
        let mut data: Vec<*mut c_void> = bufs.iter().map(|b| b.0.cast()).collect();
        let mut sizes: Vec<usize> = bufs.iter().map(|b| b.1).collect();
        let mut tags: Vec<c_int> = bufs.iter().map(|b| b.2).collect();
        let mut mhs: Vec<*mut c_void> = bufs.iter().map(|b| b.3).collect();
        let mut phs: Vec<*mut c_void> = vec![null_mut(); bufs.len()];
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            let mut req = null_mut();
            // SAFETY: arrays of bufs.len() entries.
            let rc = unsafe {
                (self.t.irecv)(comm, bufs.len() as c_int, data.as_mut_ptr(), sizes.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(),
                               phs.as_mut_ptr(), &mut req)
            };
            if rc != 0 {
                return Err(rc);
            }
            if !req.is_null() {
                return Ok(req);
            }
            assert!(start.elapsed() < HANG, "irecv got no request for {HANG:?}");
            backoff(&mut spins);
        }
    }

    /// One test call: Some(sizes) when done.
    fn test_once(&self, req: *mut c_void) -> Result<Option<[c_int; 8]>, i32> {
        let mut done = 0;
        let mut sizes = [-1 as c_int; 8];
        // SAFETY: sizes has room for maxRecvs (8) entries.
        let rc = unsafe { (self.t.test)(req, &mut done, sizes.as_mut_ptr()) };
        if rc != 0 {
            return Err(rc);
        }
        Ok((done != 0).then_some(sizes))
    }

    fn wait(&self, req: *mut c_void) -> Result<[c_int; 8], i32> {
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(s) = self.test_once(req)? {
                return Ok(s);
            }
            assert!(start.elapsed() < HANG, "request {req:p} not done after {HANG:?}");
            backoff(&mut spins);
        }
    }
}

/// Spin briefly, then give the CPU away (the machine running this may have two cores,
/// shared with softhca's device threads and the other rank).
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else if *spins < 4096 {
        std::thread::yield_now();
    } else {
        std::thread::sleep(Duration::from_micros(50));
    }
}

/// The byte at offset `i` of message `k`.
fn pattern(k: usize, i: usize) -> u8 {
    (i.wrapping_mul(7).wrapping_add(k * 13) % 251) as u8
}

fn fill(buf: &mut [u8], k: usize) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(k, i);
    }
}

fn check(buf: &[u8], k: usize, what: &str) {
    if let Some(i) = (0..buf.len()).find(|&i| buf[i] != pattern(k, i)) {
        panic!("{what}: byte {i} is {:#x}, the sender wrote {:#x}", buf[i], pattern(k, i));
    }
}

fn now_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()
}

/// The receiving rank's start: init, listen, print the handle, accept (after `delay`,
/// so that the sender's connect runs while the listener is not accepting yet).
fn recv_setup(net: &Net, delay: Duration) -> *mut c_void {
    assert_eq!(net.init(), 0, "init");
    let mut n = 0;
    // SAFETY: a writable int.
    assert_eq!(unsafe { (net.t.devices)(&mut n) }, 0);
    assert!(n >= 1, "no device");
    let mut handle = [0u8; NCCL_NET_HANDLE_MAXSIZE];
    let mut lcomm = null_mut();
    // SAFETY: a 128-byte handle and an out-pointer.
    assert_eq!(unsafe { (net.t.listen)(0, handle.as_mut_ptr().cast(), &mut lcomm) }, 0, "listen");
    let hex: String = handle.iter().map(|b| format!("{b:02x}")).collect();
    println!("\nHANDLE {hex}");
    std::thread::sleep(delay);
    let start = Instant::now();
    let mut spins = 0;
    let mut rcomm = null_mut();
    loop {
        // SAFETY: a live listen comm.
        assert_eq!(unsafe { (net.t.accept)(lcomm, &mut rcomm, null_mut()) }, 0, "accept");
        if !rcomm.is_null() {
            break;
        }
        assert!(start.elapsed() < HANG, "accept: no connection");
        backoff(&mut spins);
    }
    // SAFETY: a live listen comm, closed once.
    assert_eq!(unsafe { (net.t.closeListen)(lcomm) }, 0);
    rcomm
}

/// The sending rank's start: init, connect until it returns a comm. Returns the comm
/// and how many calls answered "not yet".
fn send_setup(net: &Net) -> (*mut c_void, usize) {
    assert_eq!(net.init(), 0, "init");
    let hex = std::env::var(HANDLE).expect("handle");
    let mut handle = [0u8; NCCL_NET_HANDLE_MAXSIZE];
    for (i, b) in handle.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    let mut scomm = null_mut();
    let mut nulls = 0;
    let start = Instant::now();
    let mut spins = 0;
    loop {
        let mut cfg = ncclNetCommConfig_v10_t { trafficClass: -1 };
        // SAFETY: the same 128-byte handle on every call, as NCCL passes it.
        let rc = unsafe { (net.t.connect)(0, &mut cfg, handle.as_mut_ptr().cast(), &mut scomm, null_mut()) };
        assert_eq!(rc, 0, "connect");
        if !scomm.is_null() {
            return (scomm, nulls);
        }
        nulls += 1;
        assert!(start.elapsed() < HANG, "connect: no connection");
        backoff(&mut spins);
    }
}

/// Sizes from 0 B to 16 MiB.
const SIZES: [usize; 9] = [0, 1, 3, 4096, 65_535, 65_536, 1 << 20, 3 << 20, 16 << 20];
const DEPTH: usize = 32;
const SMALL: usize = 64 << 10;
const GROUP: usize = 8;
const GROUP_ROUNDS: usize = 4;
const CHURN: usize = 40;
const BW_SIZE: usize = 2 << 20;
const BW_DEPTH: usize = 4;
const BW_ROUNDS: usize = 8;
const LAT_ITERS: usize = 200;

fn recv_transfers(net: &Net) {
    let rc = recv_setup(net, Duration::from_millis(700));
    // 1. One message of each size into a larger receive buffer.
    let mut big = vec![0u8; (16 << 20) + 4096];
    let mh = net.reg(rc, &mut big);
    for (k, &size) in SIZES.iter().enumerate() {
        big.fill(0xee);
        let req = net.recv(rc, &[(big.as_mut_ptr(), big.len(), k as i32, mh)]).expect("irecv");
        let sizes = net.wait(req).expect("test");
        assert_eq!(sizes[0] as usize, size, "received size of message {k}");
        check(&big[..size], k, &format!("message {k} of {size} bytes"));
        assert_eq!(big[size], 0xee, "byte past the end of message {k}");
    }
    // 2. DEPTH receives outstanding, completed in reverse order of posting.
    let mut bufs: Vec<Vec<u8>> = (0..DEPTH).map(|_| vec![0u8; SMALL]).collect();
    let mhs: Vec<*mut c_void> = bufs.iter_mut().map(|b| net.reg(rc, b)).collect();
    let reqs: Vec<*mut c_void> = (0..DEPTH).map(|i| net.recv(rc, &[(bufs[i].as_mut_ptr(), SMALL, 100 + i as i32, mhs[i])]).expect("irecv")).collect();
    let mut left: Vec<usize> = (0..DEPTH).rev().collect();
    let start = Instant::now();
    while !left.is_empty() {
        left.retain(|&i| match net.test_once(reqs[i]).expect("test") {
            Some(s) => {
                assert_eq!(s[0] as usize, SMALL - i, "size of outstanding receive {i}");
                check(&bufs[i][..SMALL - i], 100 + i, &format!("outstanding receive {i}"));
                false
            }
            None => true,
        });
        assert!(start.elapsed() < HANG);
        std::thread::yield_now();
    }
    for (b, m) in bufs.iter().zip(&mhs) {
        let _ = b;
        net.dereg(rc, *m);
    }
    // 3. Grouped receives: GROUP buffers with tags 200.., sent in reverse tag order
    // with different sizes; each buffer reports the bytes of the send with its tag.
    let mut gbufs: Vec<Vec<u8>> = (0..GROUP).map(|_| vec![0u8; 16 << 10]).collect();
    let gmhs: Vec<*mut c_void> = gbufs.iter_mut().map(|b| net.reg(rc, b)).collect();
    for round in 0..GROUP_ROUNDS {
        let list: Vec<_> = (0..GROUP).map(|i| (gbufs[i].as_mut_ptr(), 16 << 10, 200 + i as i32, gmhs[i])).collect();
        let req = net.recv(rc, &list).expect("grouped irecv");
        let sizes = net.wait(req).expect("test");
        for i in 0..GROUP {
            assert_eq!(sizes[i] as usize, (i + 1) * 1000 + round, "round {round}: size of grouped buffer {i}");
            check(&gbufs[i][..sizes[i] as usize], 1000 * round + i, &format!("round {round}, grouped buffer {i}"));
        }
    }
    for m in gmhs {
        net.dereg(rc, m);
    }
    // 4. Registration churn: a fresh buffer registered for each message, then dropped.
    for k in 0..CHURN {
        let mut b = vec![0u8; 8192];
        let m = net.reg(rc, &mut b);
        let req = net.recv(rc, &[(b.as_mut_ptr(), b.len(), 300, m)]).expect("irecv");
        let s = net.wait(req).expect("test");
        assert_eq!(s[0], 4096);
        check(&b[..4096], 5000 + k, "churn message");
        net.dereg(rc, m);
    }
    for _ in 0..200 {
        let mut b = vec![0u8; 4096];
        let m = net.reg(rc, &mut b);
        net.dereg(rc, m);
    }
    // 5. A send larger than the posted receive: the sender's isend fails, then it
    // sends a fitting one, which arrives here.
    big.fill(0);
    let req = net.recv(rc, &[(big.as_mut_ptr(), 1024, 400, mh)]).expect("irecv");
    let s = net.wait(req).expect("test");
    assert_eq!(s[0], 1024);
    check(&big[..1024], 400, "message after the oversized send");
    // 6. Throughput (printed, for orientation): BW_ROUNDS rounds of BW_DEPTH receives.
    for _ in 0..BW_ROUNDS {
        let reqs: Vec<_> = (0..BW_DEPTH).map(|i| net.recv(rc, &[(big[i * BW_SIZE..].as_mut_ptr(), BW_SIZE, 500, mh)]).expect("irecv")).collect();
        for r in reqs {
            assert_eq!(net.wait(r).expect("test")[0] as usize, BW_SIZE);
        }
    }
    // 7. Small-message cycle time (printed): announce, 8-byte write, completion.
    for _ in 0..LAT_ITERS {
        let r = net.recv(rc, &[(big.as_mut_ptr(), 8, 600, mh)]).expect("irecv");
        assert_eq!(net.wait(r).expect("test")[0], 8);
    }
    bad_calls(net, rc, mh, false);
    net.dereg(rc, mh);
    // SAFETY: a live comm, closed once.
    assert_eq!(unsafe { (net.t.closeRecv)(rc) }, 0);
    println!("RECV DONE");
}

fn send_transfers(net: &Net) {
    let (sc, nulls) = send_setup(net);
    // The receiver accepted only after 700 ms: connect must have answered "not yet".
    assert!(nulls > 0, "connect returned a comm before the peer accepted");
    let mut big = vec![0u8; 16 << 20];
    let mh = net.reg(sc, &mut big);
    for (k, &size) in SIZES.iter().enumerate() {
        fill(&mut big[..size], k);
        let req = net.send(sc, big.as_mut_ptr(), size, k as i32, mh).expect("isend");
        let s = net.wait(req).expect("test");
        assert_eq!(s[0] as usize, size, "send size reported for message {k}");
    }
    let mut bufs: Vec<Vec<u8>> = (0..DEPTH).map(|i| {
        let mut b = vec![0u8; SMALL];
        fill(&mut b[..SMALL - i], 100 + i);
        b
    }).collect();
    let mhs: Vec<*mut c_void> = bufs.iter_mut().map(|b| net.reg(sc, b)).collect();
    let reqs: Vec<*mut c_void> = (0..DEPTH).map(|i| net.send(sc, bufs[i].as_mut_ptr(), SMALL - i, 100 + i as i32, mhs[i]).expect("isend")).collect();
    // Completion polled out of order: odd requests first, then the even ones backwards.
    let order: Vec<usize> = (0..DEPTH).filter(|i| i % 2 == 1).chain((0..DEPTH).filter(|i| i % 2 == 0).rev()).collect();
    for i in order {
        let s = net.wait(reqs[i]).expect("test");
        assert_eq!(s[0] as usize, SMALL - i);
    }
    for m in mhs {
        net.dereg(sc, m);
    }
    let mut gbufs: Vec<Vec<u8>> = (0..GROUP).map(|_| vec![0u8; 16 << 10]).collect();
    let gmhs: Vec<*mut c_void> = gbufs.iter_mut().map(|b| net.reg(sc, b)).collect();
    for round in 0..GROUP_ROUNDS {
        let mut reqs = Vec::new();
        for i in (0..GROUP).rev() {
            let size = (i + 1) * 1000 + round;
            fill(&mut gbufs[i][..size], 1000 * round + i);
            reqs.push(net.send(sc, gbufs[i].as_mut_ptr(), size, 200 + i as i32, gmhs[i]).expect("isend"));
        }
        for r in reqs {
            net.wait(r).expect("test");
        }
    }
    for m in gmhs {
        net.dereg(sc, m);
    }
    for k in 0..CHURN {
        let mut b = vec![0u8; 4096];
        fill(&mut b, 5000 + k);
        let m = net.reg(sc, &mut b);
        let req = net.send(sc, b.as_mut_ptr(), 4096, 300, m).expect("isend");
        net.wait(req).expect("test");
        net.dereg(sc, m);
    }
    fill(&mut big[..2048], 400);
    // NCCL_INVALID_USAGE (5): the send is larger than the 1024-byte receive.
    assert_eq!(net.send(sc, big.as_mut_ptr(), 2048, 400, mh), Err(5), "oversized isend");
    let req = net.send(sc, big.as_mut_ptr(), 1024, 400, mh).expect("isend");
    net.wait(req).expect("test");
    let start = Instant::now();
    for _ in 0..BW_ROUNDS {
        let reqs: Vec<_> = (0..BW_DEPTH).map(|i| net.send(sc, big[i * BW_SIZE..].as_mut_ptr(), BW_SIZE, 500, mh).expect("isend")).collect();
        for r in reqs {
            net.wait(r).expect("test");
        }
    }
    let t = start.elapsed().as_secs_f64();
    println!("\nBANDWIDTH {:.2} GB/s ({} x {} MiB in {:.1} ms)", (BW_ROUNDS * BW_DEPTH * BW_SIZE) as f64 / t / 1e9, BW_ROUNDS * BW_DEPTH, BW_SIZE >> 20, t * 1e3);
    let start = Instant::now();
    for _ in 0..LAT_ITERS {
        let r = net.send(sc, big.as_mut_ptr(), 8, 600, mh).expect("isend");
        net.wait(r).expect("test");
    }
    println!("\nLATENCY {:.1} us per 8-byte message (irecv announced, isend, both completed)", start.elapsed().as_secs_f64() * 1e6 / LAT_ITERS as f64);
    bad_calls(net, sc, mh, true);
    net.dereg(sc, mh);
    // SAFETY: a live comm, closed once.
    assert_eq!(unsafe { (net.t.closeSend)(sc) }, 0);
    println!("SEND DONE");
}

/// Wrong handles, unregistered memory and bad counts get error codes, not crashes.
fn bad_calls(net: &Net, comm: *mut c_void, mh: *mut c_void, sender: bool) {
    let junk = 0x1234_5678usize as *mut c_void;
    let mut done = 0;
    let mut sizes = [0 as c_int; 8];
    let t = net.t;
    // SAFETY: every pointer argument is either valid or one the plugin must reject
    // without dereferencing (it checks them against its live objects).
    unsafe {
        assert_ne!((t.test)(junk, &mut done, sizes.as_mut_ptr()), 0, "test of a junk request");
        assert_ne!((t.deregMr)(comm, junk), 0, "deregMr of a junk handle");
        assert_ne!((t.closeSend)(junk), 0, "closeSend of a junk comm");
        assert_ne!((t.closeRecv)(junk), 0, "closeRecv of a junk comm");
        assert_ne!((t.closeListen)(junk), 0, "closeListen of a junk comm");
        let mut props = std::mem::zeroed::<ncclNetProperties_v10_t>();
        assert_ne!((t.getProperties)(99, &mut props), 0, "getProperties of device 99");
        let mut b = vec![0u8; 64];
        let mut other = null_mut();
        assert_ne!((t.regMr)(junk, b.as_mut_ptr().cast(), 64, NCCL_PTR_HOST, &mut other), 0, "regMr on a junk comm");
        let mut req = null_mut();
        if sender {
            assert_ne!((t.isend)(junk, b.as_mut_ptr().cast(), 64, 1, mh, null_mut(), &mut req), 0, "isend on a junk comm");
            assert_ne!((t.isend)(comm, b.as_mut_ptr().cast(), 64, 1, junk, null_mut(), &mut req), 0, "isend with a junk handle");
            // Memory outside mh's registration (a separate allocation): unregistered.
            assert_ne!((t.isend)(comm, b.as_mut_ptr().cast(), 64, 1, mh, null_mut(), &mut req), 0, "isend of unregistered memory");
            assert_ne!((t.isend)(comm, b.as_mut_ptr().cast(), 64, 1, null_mut(), null_mut(), &mut req), 0, "isend without a handle");
        } else {
            let mut data = [b.as_mut_ptr() as *mut c_void; 9];
            let mut sz = [64usize; 9];
            let mut tags = [1 as c_int; 9];
            let mut mhs = [mh; 9];
            let mut phs = [null_mut(); 9];
            assert_ne!((t.irecv)(comm, 9, data.as_mut_ptr(), sz.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(), phs.as_mut_ptr(), &mut req), 0,
                       "irecv of 9 buffers (maxRecvs is 8)");
            assert_ne!((t.irecv)(comm, 1, data.as_mut_ptr(), sz.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(), phs.as_mut_ptr(), &mut req), 0,
                       "irecv into unregistered memory");
            mhs[0] = junk;
            assert_ne!((t.irecv)(comm, 1, data.as_mut_ptr(), sz.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(), phs.as_mut_ptr(), &mut req), 0,
                       "irecv with a junk handle");
            assert_ne!((t.irecv)(junk, 1, data.as_mut_ptr(), sz.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(), phs.as_mut_ptr(), &mut req), 0,
                       "irecv on a junk comm");
        }
        assert!(req.is_null(), "a failed call returned a request");
    }
}

/// Both ranks stream 1 MiB messages until `ROLE`'s victim is killed by the parent;
/// the survivor reports when its call failed.
fn stream(net: &Net, receiver: bool) {
    let comm = if receiver { recv_setup(net, Duration::ZERO) } else { send_setup(net).0 };
    let mut b = vec![0u8; 1 << 20];
    let mh = net.reg(comm, &mut b);
    let deadline = Instant::now() + Duration::from_secs(90);
    for k in 0.. {
        let r = if receiver {
            net.recv(comm, &[(b.as_mut_ptr(), b.len(), 7, mh)]).and_then(|q| poll_until_error(net, q, deadline))
        } else {
            net.send(comm, b.as_mut_ptr(), b.len(), 7, mh).and_then(|q| poll_until_error(net, q, deadline))
        };
        if let Err(rc) = r {
            println!("FAILED {rc} AT {}", now_ms());
            return;
        }
        if k == 20 {
            println!("STREAMING");
        }
        assert!(Instant::now() < deadline, "the peer was not killed");
    }
}

fn poll_until_error(net: &Net, req: *mut c_void, deadline: Instant) -> Result<(), i32> {
    let mut spins = 0;
    loop {
        if net.test_once(req)?.is_some() {
            return Ok(());
        }
        if Instant::now() > deadline {
            println!("HUNG");
            std::process::exit(3);
        }
        backoff(&mut spins);
    }
}

/// Runs this test's role if this process is a rank; true if it was.
fn as_rank(test: &str) -> bool {
    let Ok(role) = std::env::var(ROLE) else { return false };
    let net = Net::load();
    match role.split_once(':') {
        Some(("recv", t)) if t == test && test.starts_with("transfers") => recv_transfers(&net),
        Some(("send", t)) if t == test && test.starts_with("transfers") => send_transfers(&net),
        Some(("nodev", t)) if t == test => {
            // DOORBELL_NCCL_DEVICES names no device: init succeeds with its log line and
            // devices() answers 0 (NCCL then skips the plugin).
            let rc = net.init();
            let mut n = -1;
            // SAFETY: a writable int.
            let drc = unsafe { (net.t.devices)(&mut n) };
            println!("\nINIT {rc} DEVICES {drc} {n}");
        }
        Some(("v11", t)) if t == test => {
            // v11's per-comm init: the context it returns, devices, finalize of it.
            let v = net.v11();
            let mut ctx = 0xdead_usize as *mut c_void;
            let mut cfg = ncclNetCommConfig_v11_t { trafficClass: -1 };
            // SAFETY: writable context and config; no logger (warnings go to stderr).
            let rc = unsafe { (v.init)(&mut ctx, 7, &mut cfg, None, None) };
            let mut n = -1;
            // SAFETY: a writable int.
            let drc = unsafe { (v.devices)(&mut n) };
            // SAFETY: ncclNetProperties_v11_t is plain C data: all-zero is a valid value.
            let mut props: ncclNetProperties_v11_t = unsafe { std::mem::zeroed() };
            // SAFETY: a writable v11 struct (device 0 may not exist: then an error).
            let prc = unsafe { (v.getProperties)(0, &mut props) };
            let multi = if prc == 0 { props.maxMultiRequestSize } else { -1 };
            // SAFETY: the context init returned.
            let frc = unsafe { (v.finalize)(ctx) };
            println!("\nV11 INIT {rc} CTX {} DEVICES {drc} {n} PROPS {prc} MULTI {multi} FINALIZE {frc}",
                     if ctx.is_null() { "null" } else if ctx as usize == 0xdead { "untouched" } else { "set" });
        }
        Some(("logger", t)) if t == test => logger_role(&net),
        Some(("recvstop", t)) if t == test => {
            let rc = recv_setup(&net, Duration::ZERO);
            let mut b = vec![0u8; 16 << 20];
            let mh = net.reg(rc, &mut b);
            let req = net.recv(rc, &[(b.as_mut_ptr(), b.len(), 9, mh)]).expect("irecv");
            // Let the announcement reach the sender (and its ACK come back) before the
            // parent freezes this process: test() steps the device meanwhile.
            let until = Instant::now() + Duration::from_millis(500);
            while Instant::now() < until {
                assert_eq!(net.test_once(req), Ok(None));
                std::thread::sleep(Duration::from_millis(1));
            }
            println!("\nPOSTED");
            // Stopped by the parent from here on; never returns.
            loop {
                std::thread::sleep(Duration::from_secs(1));
            }
        }
        Some(("sendstop", t)) if t == test => {
            let (sc, _) = send_setup(&net);
            let mut b = vec![0u8; 16 << 20];
            let mh = net.reg(sc, &mut b);
            let go = std::env::var("NCCL_NET_HARNESS_GO").unwrap();
            println!("\nREADY");
            while !std::path::Path::new(&go).exists() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let start = Instant::now();
            let r = net.send(sc, b.as_mut_ptr(), b.len(), 9, mh).and_then(|q| poll_until_error(&net, q, Instant::now() + Duration::from_secs(60)));
            match r {
                Err(rc) => println!("\nFAILED {rc} AFTER {}", start.elapsed().as_millis()),
                Ok(()) => println!("\nSENT"),
            }
        }
        Some((side, t)) if t == test => stream(&net, side == "recv"),
        _ => return false,
    }
    true
}

/// One rank: this binary, running only `test`, in `role`.
fn spawn(test: &str, role: &str, handle: Option<&str>) -> (Child, mpsc::Receiver<String>) {
    spawn_env(test, role, handle, &mut Vec::new())
}

fn spawn_env(test: &str, role: &str, handle: Option<&str>, env: &mut Vec<(&str, String)>) -> (Child, mpsc::Receiver<String>) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    for (k, v) in env.drain(..) {
        cmd.env(k, v);
    }
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env(ROLE, format!("{role}:{test}"));
    if let Some(h) = handle {
        cmd.env(HANDLE, h);
    }
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("spawn rank");
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let tag = role.to_string();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            println!("[{tag}] {line}");
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

fn wait_line(rx: &mpsc::Receiver<String>, prefix: &str, timeout: Duration) -> String {
    let end = Instant::now() + timeout;
    loop {
        let left = end.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            // libtest prints "test NAME ... " without a newline before the test's output.
            Ok(l) if l.contains(prefix) => return l[l.find(prefix).unwrap()..].to_string(),
            Ok(_) => {}
            Err(e) => panic!("no line starting with {prefix:?} within {timeout:?}: {e}"),
        }
    }
}

fn wait_exit(c: &mut Child, who: &str, timeout: Duration) -> std::process::ExitStatus {
    let end = Instant::now() + timeout;
    loop {
        if let Some(st) = c.try_wait().unwrap() {
            return st;
        }
        if Instant::now() > end {
            let _ = c.kill();
            panic!("{who} still running after {timeout:?}: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sizes, depth, grouped receives, tags, out-of-order completion, registration churn,
/// connect before accept, and bad calls, between two processes.
#[test]
fn transfers() {
    if as_rank("transfers") {
        return;
    }
    run_transfers("transfers", None);
}

/// The same over a wire that drops, duplicates and reorders 1 % of the packets each
/// (softhca's fault injection, in both ranks): RC retransmission must hide it.
#[test]
fn transfers_lossy() {
    if as_rank("transfers_lossy") {
        return;
    }
    run_transfers("transfers_lossy", Some("drop=0.01,dup=0.01,reorder=0.01,seed=7"));
}

fn run_transfers(test: &str, fault: Option<&str>) {
    common::plugin();
    let env = |v: &mut Vec<(&str, String)>| {
        if let Some(f) = fault {
            v.push(("DOORBELL_FAULT", f.to_string()));
        }
    };
    let mut e = Vec::new();
    env(&mut e);
    let (mut r, rrx) = spawn_env(test, "recv", None, &mut e);
    let h = wait_line(&rrx, "HANDLE ", Duration::from_secs(60));
    env(&mut e);
    let (mut s, _srx) = spawn_env(test, "send", Some(&h["HANDLE ".len()..]), &mut e);
    let ss = wait_exit(&mut s, "sender", Duration::from_secs(300));
    let rs = wait_exit(&mut r, "receiver", Duration::from_secs(60));
    assert!(ss.success() && rs.success(), "sender {ss}, receiver {rs}");
}

/// Kills one rank mid-stream; the other's call fails within `BOUND`.
fn killed(test: &str, victim: &str) {
    const BOUND: Duration = Duration::from_secs(10);
    common::plugin();
    let (mut r, rrx) = spawn(test, "recv", None);
    let h = wait_line(&rrx, "HANDLE ", Duration::from_secs(60));
    let (mut s, srx) = spawn(test, "send", Some(&h["HANDLE ".len()..]));
    wait_line(&rrx, "STREAMING", Duration::from_secs(120));
    wait_line(&srx, "STREAMING", Duration::from_secs(120));
    let (dead, alive, alive_rx) = if victim == "send" { (&mut s, &mut r, &rrx) } else { (&mut r, &mut s, &srx) };
    dead.kill().unwrap();
    let killed_at = now_ms();
    let _ = dead.wait();
    let line = wait_line(alive_rx, "FAILED ", BOUND + Duration::from_secs(5));
    let at: u128 = line.rsplit(' ').next().unwrap().parse().unwrap();
    let took = at.saturating_sub(killed_at);
    println!("the survivor's call failed {took} ms after the kill: {line}");
    assert!(took < BOUND.as_millis(), "took {took} ms");
    let st = wait_exit(alive, "survivor", Duration::from_secs(30));
    assert!(st.success(), "the survivor exited {st} after its failed call");
}

#[test]
fn sender_killed() {
    if as_rank("sender_killed") {
        return;
    }
    killed("sender_killed", "send");
}

#[test]
fn receiver_killed() {
    if as_rank("receiver_killed") {
        return;
    }
    killed("receiver_killed", "recv");
}

/// getProperties through all three tables: the values NCCL's shims would read, and
/// what softhca's configuration says they are (softhca/src/config.rs: port width 4X
/// at EDR, 25 Gb/s per lane = 100 Gb/s; node GUID 00:02:c9:03:00 + three address
/// bytes, in wire order).
#[test]
fn properties() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let net = Net::load();
    assert_eq!(net.init(), 0);
    let lib = &net.lib;
    // SAFETY: the tables are statics of the loaded library.
    let (v9, v8) = unsafe {
        let a: libloading::Symbol<*const ncclNet_v9_t> = lib.get(b"ncclNetPlugin_v9\0").unwrap();
        let b: libloading::Symbol<*const ncclNet_v8_t> = lib.get(b"ncclNetPlugin_v8\0").unwrap();
        (&**a, &**b)
    };
    // SAFETY: out-structs of the right version; names are 'static C strings.
    unsafe {
        assert_eq!(std::ffi::CStr::from_ptr(net.t.name).to_str().unwrap(), "doorbell");
        assert_eq!(std::ffi::CStr::from_ptr(v8.name).to_str().unwrap(), "doorbell");
        let mut p10 = std::mem::zeroed::<ncclNetProperties_v10_t>();
        let mut p9 = std::mem::zeroed::<ncclNetProperties_v9_t>();
        let mut p8 = std::mem::zeroed::<ncclNetProperties_v8_t>();
        assert_eq!((net.t.getProperties)(0, &mut p10), 0);
        assert_eq!((v9.getProperties)(0, &mut p9), 0);
        assert_eq!((v8.getProperties)(0, &mut p8), 0);
        let name = std::ffi::CStr::from_ptr(p10.name).to_str().unwrap().to_string();
        assert_eq!(name, std::env::var("DOORBELL_SOFTHCA_NAME").unwrap_or("softhca0".into()));
        assert_eq!(std::ffi::CStr::from_ptr(p8.name).to_str().unwrap(), name);
        assert_eq!(p10.speed, 100_000);
        assert_eq!(p10.maxRecvs, 8);
        assert_eq!(p10.port, 1);
        assert!(p10.ptrSupport & NCCL_PTR_HOST != 0);
        assert_eq!(p10.netDeviceType, 0);
        assert_eq!(p10.vProps.ndevs, 1);
        assert_eq!(p10.vProps.devs[0], 0);
        assert_eq!(p10.maxP2pBytes, 1 << 30);
        assert_eq!(&p10.guid.to_ne_bytes()[..5], &[0x00, 0x02, 0xc9, 0x03, 0x00]);
        for (a, b) in [(p9.guid, p10.guid), (p8.guid, p10.guid)] {
            assert_eq!(a, b);
        }
        assert_eq!((p8.speed, p8.maxRecvs, p8.ptrSupport, p8.port), (p10.speed, p10.maxRecvs, p10.ptrSupport, p10.port));
        assert_eq!((p9.speed, p9.maxRecvs, p9.ptrSupport, p9.maxP2pBytes), (p10.speed, p10.maxRecvs, p10.ptrSupport, p10.maxP2pBytes));
        // A handle that is not the plugin's (all zero): an error, no comm.
        let mut h = [0u8; NCCL_NET_HANDLE_MAXSIZE];
        let mut sc = null_mut();
        let mut cfg = ncclNetCommConfig_v10_t { trafficClass: -1 };
        assert_ne!((net.t.connect)(0, &mut cfg, h.as_mut_ptr().cast(), &mut sc, null_mut()), 0);
        assert!(sc.is_null());
        // A connect to a listener that went away: an error within the bound, no hang.
        let mut lc = null_mut();
        assert_eq!((net.t.listen)(0, h.as_mut_ptr().cast(), &mut lc), 0);
        assert_eq!((net.t.closeListen)(lc), 0);
        let start = Instant::now();
        let rc = loop {
            let rc = (net.t.connect)(0, &mut cfg, h.as_mut_ptr().cast(), &mut sc, null_mut());
            if rc != 0 || !sc.is_null() {
                break rc;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "connect to a closed listener never failed");
            std::thread::yield_now();
        };
        assert_ne!(rc, 0, "connect to a closed listener succeeded");
    }
}

/// With no device to offer, init succeeds, devices() answers 0 and one warning names
/// the cause: NCCL (net.cc, ncclNetPluginInit) skips a plugin with `ndev <= 0` and moves
/// on to its own transports. (A failing init would be skipped too, but NCCL 2.28.9 then
/// calls a NULL finalize: see api::init.)
#[test]
fn no_device_offers_zero_devices() {
    if as_rank("no_device_offers_zero_devices") {
        return;
    }
    common::plugin();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["no_device_offers_zero_devices", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, "nodev:no_device_offers_zero_devices")
        .env("DOORBELL_NCCL_DEVICES", "no-such-device")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    // ncclSuccess, zero devices, and one warning naming the cause.
    assert!(stdout.contains("INIT 0 DEVICES 0 0"), "{stdout}");
    assert_eq!(stderr.matches("no usable device").count(), 1, "{stderr}");
}

fn v11_role(test: &str, devices: Option<&str>) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"]).env(ROLE, format!("v11:{test}"));
    if let Some(d) = devices {
        cmd.env("DOORBELL_NCCL_DEVICES", d);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// v11 (net_v11.h; NCCL 2.28 takes it as it is) with no device: init succeeds and sets
/// the context to NULL, devices() answers 0, getProperties(0) is an error, finalize of
/// the NULL context succeeds. NULL because NCCL 2.28.9 (net.cc) calls finalize on
/// `comm->netContext` for every plugin whose init it tried, IB's (whose finalize frees
/// it) included, when IB's init fails before writing the context.
#[test]
fn v11_without_a_device() {
    let test = "v11_without_a_device";
    if as_rank(test) {
        return;
    }
    common::plugin();
    let stdout = v11_role(test, Some("no-such-device"));
    assert!(stdout.contains("V11 INIT 0 CTX null DEVICES 0 0 PROPS 4 MULTI -1 FINALIZE 0"), "{stdout}");
}

/// v11 with softhca: a non-NULL context, one device or more, maxMultiRequestSize 1
/// (what NCCL's compatibility layers report for tables without it: net_v10.cc).
#[test]
fn v11_with_softhca() {
    let test = "v11_with_softhca";
    if as_rank(test) {
        return;
    }
    common::plugin();
    let stdout = v11_role(test, Some("softhca0"));
    assert!(stdout.contains("V11 INIT 0 CTX set DEVICES 0 1 PROPS 0 MULTI 1 FINALIZE 0"), "{stdout}");
}

/// A receiver that stops answering (SIGSTOP: its process, softhca included, is frozen,
/// its socket stays open): the sender's write is never acknowledged, and test() fails
/// once the QP's retries are spent (ACK timeout 67 ms x 7 retries, link.rs), well
/// within 10 s.
#[test]
fn receiver_stopped() {
    let test = "receiver_stopped";
    if as_rank(test) {
        return;
    }
    common::plugin();
    let go = std::env::temp_dir().join(format!("nccl-net-go-{}", std::process::id()));
    let _ = std::fs::remove_file(&go);
    let (mut r, rrx) = spawn(test, "recvstop", None);
    let h = wait_line(&rrx, "HANDLE ", Duration::from_secs(60));
    let mut cmd_env = vec![("NCCL_NET_HARNESS_GO", go.to_string_lossy().into_owned())];
    let (mut s, srx) = spawn_env(test, "sendstop", Some(&h["HANDLE ".len()..]), &mut cmd_env);
    wait_line(&rrx, "POSTED", Duration::from_secs(60));
    wait_line(&srx, "READY", Duration::from_secs(60));
    // SAFETY: a signal to our own child.
    assert_eq!(unsafe { libc::kill(r.id() as i32, libc::SIGSTOP) }, 0);
    std::fs::write(&go, b"go").unwrap();
    let line = wait_line(&srx, "FAILED ", Duration::from_secs(20));
    let ms: u128 = line.rsplit(' ').next().unwrap().parse().unwrap();
    println!("the sender's test() failed {ms} ms after its isend: {line}");
    // The first transmission and RETRY_CNT (7) retries, each waiting the ACK timeout
    // 4.096 us * 2^14 = 67.1 ms: 8 * 67.1 = 537 ms. Not before that (the failure is the
    // QP's timeout, not something else), and well within 10 s (no hang).
    assert!((400..10_000).contains(&ms), "{ms} ms");
    let _ = r.kill();
    let _ = r.wait();
    assert!(wait_exit(&mut s, "sender", Duration::from_secs(30)).success());
    let _ = std::fs::remove_file(&go);
}

/// Lines NCCL's logger received: (level, subsystem flags, message).
static LOGGED: std::sync::Mutex<Vec<(c_int, std::ffi::c_ulong, String)>> = std::sync::Mutex::new(Vec::new());

/// A stand-in for NCCL's `ncclDebugLog(level, flags, file, line, fmt, ...)`. Rust cannot
/// define a variadic function; on x86-64 (System V) a variadic call passes its first
/// arguments in the same registers as a fixed one, so this reads the format and the
/// one `%s` argument the plugin passes as the fifth and sixth parameters.
#[cfg(target_arch = "x86_64")]
extern "C" fn fake_logger(level: c_int, flags: std::ffi::c_ulong, _file: *const std::ffi::c_char, _line: c_int,
                          fmt: *const std::ffi::c_char, arg: *const std::ffi::c_char) {
    // SAFETY: the plugin passes NUL-terminated strings for fmt and its %s argument.
    let (fmt, arg) = unsafe { (std::ffi::CStr::from_ptr(fmt), std::ffi::CStr::from_ptr(arg)) };
    assert_eq!(fmt.to_str().unwrap(), "%s", "the plugin must not pass its text as the format");
    LOGGED.lock().unwrap().push((level, flags, arg.to_string_lossy().into_owned()));
}

#[cfg(target_arch = "x86_64")]
fn logger_role(net: &Net) {
    type Logger = unsafe extern "C" fn(c_int, std::ffi::c_ulong, *const std::ffi::c_char, c_int, *const std::ffi::c_char, ...);
    // SAFETY: see fake_logger: the plugin always calls it with exactly six arguments.
    let f: Logger = unsafe { std::mem::transmute(fake_logger as extern "C" fn(_, _, _, _, _, _)) };
    // SAFETY: a logger NCCL's way; no profiler.
    assert_eq!(unsafe { (net.t.init)(Some(f), None) }, 0);
    let mut done = 0;
    // SAFETY: a junk request the plugin must reject.
    let rc = unsafe { (net.t.test)(0x4242usize as *mut c_void, &mut done, null_mut()) };
    assert_eq!(rc, NCCL_INVALID_ARGUMENT);
    let logged = LOGGED.lock().unwrap();
    // NCCL_LOG_WARN (2) in the NET subsystem (0x10), naming the cause.
    let warn = logged.iter().find(|(l, _, m)| *l == 2 && m.contains("0x4242") && m.contains("no request")).expect("the warning reached the logger");
    assert_eq!(warn.1, 0x10);
    assert!(warn.2.starts_with("NET/doorbell"), "{}", warn.2);
    // init's INFO line (NCCL_LOG_INFO = 3) named the device.
    assert!(logged.iter().any(|(l, _, m)| *l == 3 && m.contains("initialized: 1 device")), "{logged:?}");
    println!("\nLOGGER OK");
}

#[cfg(not(target_arch = "x86_64"))]
fn logger_role(_: &Net) {
    println!("\nLOGGER OK");
}

/// init keeps NCCL's logger: the plugin's warnings and info lines go to it, at NCCL's
/// levels, in the NET subsystem, with the text as a `%s` argument.
#[test]
fn errors_go_to_nccls_logger() {
    let test = "errors_go_to_nccls_logger";
    if as_rank(test) {
        return;
    }
    if !cfg!(target_arch = "x86_64") {
        testkit::skip(testkit::Need::Build, "the stand-in logger relies on the x86-64 calling convention (run on x86-64)");
        return;
    }
    common::plugin();
    let out = Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, format!("logger:{test}"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("LOGGER OK"), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
}

/// The v8 and v9 tables carry data too (their isend/irecv take `int` and `size_t`
/// sizes): one process, its softhca instance connected to itself, listen, connect
/// and accept called in turn from one thread (which only works if none of them
/// blocks), then a grouped receive of two buffers and two sends through each table.
#[test]
fn v8_and_v9_tables_carry_data() {
    if std::env::var_os(ROLE).is_some() {
        return;
    }
    let net = Net::load();
    assert_eq!(net.init(), 0);
    // SAFETY: statics of the loaded library.
    let (v9, v8) = unsafe {
        let a: libloading::Symbol<*const ncclNet_v9_t> = net.lib.get(b"ncclNetPlugin_v9\0").unwrap();
        let b: libloading::Symbol<*const ncclNet_v8_t> = net.lib.get(b"ncclNetPlugin_v8\0").unwrap();
        (&**a, &**b)
    };
    // SAFETY: every pointer is valid for the call; buffers outlive their registrations.
    unsafe {
        let mut h = [0u8; NCCL_NET_HANDLE_MAXSIZE];
        let (mut lc, mut sc, mut rc): (*mut c_void, *mut c_void, *mut c_void) = (null_mut(), null_mut(), null_mut());
        assert_eq!((v8.listen)(0, h.as_mut_ptr().cast(), &mut lc), 0);
        let start = Instant::now();
        while sc.is_null() || rc.is_null() {
            if sc.is_null() {
                assert_eq!((v8.connect)(0, h.as_mut_ptr().cast(), &mut sc, null_mut()), 0);
            }
            if rc.is_null() {
                assert_eq!((v8.accept)(lc, &mut rc, null_mut()), 0);
            }
            assert!(start.elapsed() < HANG, "loopback connection not set up");
            std::thread::yield_now();
        }
        assert_eq!((v8.closeListen)(lc), 0);
        let mut src = vec![0u8; 1 << 20];
        let mut dst = vec![0u8; 2 << 20];
        let (mut smh, mut rmh) = (null_mut(), null_mut());
        assert_eq!((v9.regMr)(sc, src.as_mut_ptr().cast(), src.len(), NCCL_PTR_HOST, &mut smh), 0);
        assert_eq!((v8.regMr)(rc, dst.as_mut_ptr().cast(), dst.len(), NCCL_PTR_HOST, &mut rmh), 0);
        for (round, use_v8) in [(0usize, true), (1, false), (2, true)] {
            fill(&mut src[..1000], 10 + round);
            fill(&mut src[4096..4096 + 300_000], 20 + round);
            dst.fill(0);
            let mut data: [*mut c_void; 2] = [dst.as_mut_ptr().cast(), dst[1 << 20..].as_mut_ptr().cast()];
            let mut tags = [5 as c_int, 6];
            let mut mhs = [rmh, rmh];
            let mut rreq: *mut c_void = null_mut();
            let mut s1: *mut c_void = null_mut();
            let mut s2: *mut c_void = null_mut();
            let t0 = Instant::now();
            while rreq.is_null() || s1.is_null() || s2.is_null() {
                if rreq.is_null() {
                    let rc_ = if use_v8 {
                        let mut sizes: [c_int; 2] = [1 << 20, 1 << 20];
                        (v8.irecv)(rc, 2, data.as_mut_ptr(), sizes.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(), &mut rreq)
                    } else {
                        let mut sizes = [1usize << 20, 1 << 20];
                        (v9.irecv)(rc, 2, data.as_mut_ptr(), sizes.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr(), &mut rreq)
                    };
                    assert_eq!(rc_, 0);
                }
                // Tag 6 first: the receiver's second buffer.
                if s2.is_null() {
                    let p = src[4096..].as_mut_ptr().cast();
                    let r = if use_v8 { (v8.isend)(sc, p, 300_000, 6, smh, &mut s2) } else { (v9.isend)(sc, p, 300_000, 6, smh, &mut s2) };
                    assert_eq!(r, 0);
                }
                if s1.is_null() {
                    let p = src.as_mut_ptr().cast();
                    let r = if use_v8 { (v8.isend)(sc, p, 1000, 5, smh, &mut s1) } else { (v9.isend)(sc, p, 1000, 5, smh, &mut s1) };
                    assert_eq!(r, 0);
                }
                assert!(t0.elapsed() < HANG);
                std::thread::yield_now();
            }
            let mut pending = vec![(s1, 1000), (s2, 300_000)];
            let mut rsizes = None;
            while !pending.is_empty() || rsizes.is_none() {
                pending.retain(|&(r, want)| {
                    let (mut done, mut size) = (0, -1);
                    assert_eq!((v8.test)(r, &mut done, &mut size), 0);
                    if done != 0 {
                        assert_eq!(size, want);
                    }
                    done == 0
                });
                if rsizes.is_none() {
                    let mut done = 0;
                    let mut sizes = [-1 as c_int; 8];
                    assert_eq!((v9.test)(rreq, &mut done, sizes.as_mut_ptr()), 0);
                    if done != 0 {
                        rsizes = Some(sizes);
                    }
                }
                assert!(t0.elapsed() < HANG);
                std::thread::yield_now();
            }
            let sizes = rsizes.unwrap();
            assert_eq!(&sizes[..2], &[1000, 300_000], "round {round}");
            check(&dst[..1000], 10 + round, "buffer of tag 5");
            check(&dst[1 << 20..(1 << 20) + 300_000], 20 + round, "buffer of tag 6");
        }
        // v8's int sizes: a negative one is refused.
        let mut req = null_mut();
        assert_ne!((v8.isend)(sc, src.as_mut_ptr().cast(), -1, 5, smh, &mut req), 0);
        assert_eq!((v8.deregMr)(sc, smh), 0);
        assert_eq!((v8.deregMr)(rc, rmh), 0);
        assert_eq!((v8.closeSend)(sc), 0);
        assert_eq!((v8.closeRecv)(rc), 0);
    }
}
