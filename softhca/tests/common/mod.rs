//! Shared helpers of the data-path tests: two softhca instances ("hosts") on loopback
//! addresses, driven through doorbell's provider exactly as an application would.
//!
//! Addresses: each test names its hosts by a hint `[127, x, y, z]`, unique inside its
//! test binary, and [`bind_free`] binds the first free one of `127.x.y.z`,
//! `127.(x+1).y.z`, ... . So two runs of the same tests at once (two `cargo test`
//! processes, or a test binary and its re-run) never fail with "Address already in use":
//! the second finds the address taken and moves on. Tests address their peers by the
//! hosts' real GIDs and addresses (`Host::gid`, `Host::addr`), never by the hint.
#![allow(dead_code)]

use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use provider::opcode::FmCeSe;
use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, CompChannel, Context, Cq, OwnedMr, Pd, Qp, QpAttr, QpInit, QpState, QpType, StableMemory, Wc};
use softhca::device::link::Wire;
use softhca::{Config, Hca};

thread_local! {
    /// The path the hosts this thread creates use, and the instances made under it
    /// ([`with_wire`]).
    static WIRE: std::cell::RefCell<Option<(Wire, Vec<Arc<Hca>>)>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with every host it creates forced onto `wire` (`DOORBELL_WIRE=udp` or
/// `local`), then checks that every instance that sent anything sent it on that path:
/// a same-host test that quietly fell back to UDP would prove nothing.
pub fn with_wire(wire: Wire, f: impl FnOnce()) {
    eprintln!("wire: {wire:?}");
    WIRE.with(|w| *w.borrow_mut() = Some((wire, Vec::new())));
    f();
    let made = WIRE.with(|w| w.borrow_mut().take()).map(|(_, v)| v).unwrap_or_default();
    for h in made {
        let c = h.device().counters();
        match wire {
            Wire::Udp => assert_eq!(c.local_tx_packets, 0, "{}: the same-host path was used under DOORBELL_WIRE=udp", h.config().addr),
            _ => assert_eq!(c.tx_packets, 0, "{}: packets went over UDP under DOORBELL_WIRE=local: {c:?}", h.config().addr),
        }
    }
}

/// Packets an instance sent on either path.
pub fn sent(h: &Hca) -> u64 {
    let c = h.device().counters();
    c.tx_packets + c.local_tx_packets
}

/// Makes each named test function (a plain `fn name()`, no `#[test]`) into two tests,
/// `name::udp` and `name::local`, one per wire ([`with_wire`]).
#[macro_export]
macro_rules! on_both_wires {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn udp() {
                $crate::common::with_wire(softhca::device::link::Wire::Udp, super::$name)
            }
            #[test]
            fn local() {
                $crate::common::with_wire(softhca::device::link::Wire::Local, super::$name)
            }
        }
    )*};
}

/// How long any single wait may take before the test fails (a bug must fail, not hang).
pub const WAIT: Duration = Duration::from_secs(30);

/// Installs a tracing subscriber once when `RUST_LOG` is set.
pub fn trace() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt().with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer().try_init();
    }
}

/// A fresh instance at the next free 127.0.0.N (or, when DOORBELL_SOFTHCA_ADDR pins the
/// address for the whole process, one bound to an ephemeral port of it).
pub fn hca() -> Arc<Hca> {
    match softhca::config::forced_addr().unwrap() {
        None => Hca::new_default().expect("softhca instance"),
        Some(a) => Hca::with_socket(Config::for_addr(a), UdpSocket::bind((a, 0)).unwrap()).unwrap(),
    }
}

/// Page-aligned, zeroed memory the device may access, shared by its clones (an MR's
/// [`OwnedMr`] holds one, the test another to read and write the bytes between
/// operations) and never given back to the allocator.
///
/// Why never: the device half reads a CQ's or QP's ring and doorbell record (and a DevX
/// UMEM) until that object's destroy, and a test's objects are destroyed when its device
/// file closes, which can come after the test's other locals have dropped (locals drop
/// in reverse order of declaration, and on a panic). Freed there, a ring would be a use
/// after free in the device half: its reads see the allocator's free-list pointers as
/// producer counters and WQEs, and its writes (CQEs, doorbell records) land in whatever
/// the allocator handed out next, possibly to another test's thread. CI saw a SIGSEGV
/// once each in a kernel_half and a flow_verbs test, both of which dropped rings before
/// their file: a read at a kernel-range address inside libc's memcpy, what a clobbered
/// heap pointer gives; neither reproduced in 80 reruns, so the cause is inferred. A real
/// kernel pins such pages (`ib_umem_get`), so the device never writes to memory the
/// program has reused; leaking the few hundred KiB a test binary allocates is the
/// in-process equivalent.
/// Being never freed, a clone is just a second copy of the address: no count of owners.
#[derive(Clone)]
pub struct Buf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the buffer is plain memory that lives for the rest of the process (an address
// only; the bytes are read and written by copies); tests touch it from the thread that
// runs the operations on it.
unsafe impl Send for Buf {}
// SAFETY: as above.
unsafe impl Sync for Buf {}

// SAFETY: the allocation stays at `ptr` (len bytes, zeroed at first) for the rest of the
// process, so at least as long as this value; the other clones only read and write it
// between the operations that use the MR, as a program does with registered memory.
unsafe impl StableMemory for Buf {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    fn stable_len(&self) -> usize {
        self.len
    }
}

impl Buf {
    pub fn new(len: usize) -> Buf {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Buf { ptr, len }
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes now (the device writes them concurrently only while an operation on them
    /// is outstanding; tests read after its completion).
    pub fn read(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.len];
        // SAFETY: our allocation of `len` bytes; volatile-free copy is fine after the CQE's
        // acquire ordering.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr, v.as_mut_ptr(), self.len) };
        v
    }

    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: inside our allocation.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) };
    }

    /// Fills the buffer with a seed-dependent pseudo-random pattern (8 bytes per step,
    /// fast enough in debug builds for hundreds of MiB).
    pub fn fill_pattern(&self, seed: u64) {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let words = self.len / 8;
        // SAFETY: our allocation is page aligned and holds `words` whole u64s.
        let w = unsafe { std::slice::from_raw_parts_mut(self.ptr.cast::<u64>(), words) };
        for v in w.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = x;
        }
        for i in words * 8..self.len {
            // SAFETY: inside our allocation.
            unsafe { *self.ptr.add(i) = (x >> (i % 8)) as u8 };
        }
    }

    pub fn read_u64(&self, off: usize) -> u64 {
        let b = self.read();
        u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
    }
}

/// Registered memory: the MR and the test each hold a clone of the buffer, and either may
/// be dropped first.
pub struct Mem {
    pub mr: OwnedMr<Buf>,
    pub buf: Buf,
}

impl Mem {
    pub fn addr(&self) -> u64 {
        self.buf.addr()
    }
    pub fn sge(&self, off: usize, len: usize) -> Sge {
        Sge::new(self.addr() + off as u64, len as u32, self.mr.lkey())
    }
}

/// One softhca instance with a context and a PD.
pub struct Host {
    pub pd: Pd,
    pub ctx: Arc<Context>,
    pub hca: Arc<Hca>,
}

/// Binds the RoCEv2 port (UDP 4791) on the first free address of `127.x.y.z`,
/// `127.(x+1).y.z`, ... (second octet 1..=254, wrapping) for `hint = [127, x, y, z]`, and
/// returns the address and the bound socket (bound here, so nobody can take it between
/// the check and the use). See the module docs.
pub fn bind_free(hint: [u8; 4]) -> (IpAddr, UdpSocket) {
    let start = hint[1].max(1) as u32;
    let mut last = None;
    for i in 0..254u32 {
        let second = (1 + (start - 1 + i) % 254) as u8;
        let ip = IpAddr::V4(Ipv4Addr::new(127, second, hint[2], hint[3]));
        match softhca::config::bind_roce_socket(ip) {
            Ok(s) => return (ip, s),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => last = Some(e),
            Err(e) => panic!("bind {ip}:4791: {e}"),
        }
    }
    panic!("no free 127.*.{}.{} address: {last:?}", hint[2], hint[3]);
}

impl Host {
    /// An instance on a free address near `hint` (see [`bind_free`]).
    pub fn new(hint: [u8; 4]) -> Host {
        Host::at(hint, |_| {})
    }

    /// An instance on a free address near `hint`, its configuration adjusted by `f`.
    pub fn at(hint: [u8; 4], f: impl FnOnce(&mut Config)) -> Host {
        let (ip, sock) = bind_free(hint);
        let mut cfg = Config::for_addr(ip);
        f(&mut cfg);
        Host::with_socket(cfg, sock)
    }

    /// An instance with configuration `cfg` on `sock`, already bound to `cfg.addr`:4791.
    pub fn with_socket(mut cfg: Config, sock: UdpSocket) -> Host {
        trace();
        let forced = WIRE.with(|w| w.borrow().as_ref().map(|(wire, _)| *wire));
        if let Some(w) = forced {
            cfg.wire = w;
        }
        let hca = Hca::with_socket(cfg, sock).expect("start the instance");
        WIRE.with(|w| {
            if let Some((_, v)) = w.borrow_mut().as_mut() {
                v.push(hca.clone());
            }
        });
        let dev = uverbs::Device::from_endpoint(Box::new(hca.open()), "softhca0");
        let ctx = Context::from_device(dev).expect("open context");
        let pd = ctx.alloc_pd().expect("alloc pd");
        Host { pd, ctx, hca }
    }

    pub fn gid(&self) -> [u8; 16] {
        self.hca.config().ip_gid()
    }

    /// The instance's address.
    pub fn addr(&self) -> IpAddr {
        self.hca.config().addr
    }

    pub fn mem(&self, len: usize, access: Access) -> Mem {
        let buf = Buf::new(len);
        let mr = self.pd.reg_owned(buf.clone(), access).expect("reg_mr");
        Mem { mr, buf }
    }
}

pub fn all_access() -> Access {
    Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC
}

/// Parameters of a connected pair of RC QPs.
#[derive(Debug, Clone, Copy)]
pub struct Opts {
    pub cap: QpCap,
    pub cq: u32,
    pub access: Access,
    pub mtu: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub min_rnr_timer: u8,
    pub rd_atomic: u8,
    pub sq_sig_all: bool,
}

impl Default for Opts {
    fn default() -> Opts {
        Opts {
            cap: QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 4, max_recv_sge: 4, max_inline_data: 128 },
            cq: 256,
            access: all_access(),
            mtu: 3, // 1024
            timeout: 12,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            rd_atomic: 16,
            sq_sig_all: false,
        }
    }
}

/// One end of a connection: the QP is dropped before its CQs.
pub struct End {
    pub qp: Qp,
    pub scq: Cq,
    pub rcq: Cq,
}

impl End {
    pub fn new(h: &Host, o: &Opts) -> End {
        End::build(h, o, None)
    }

    /// [`End::new`] whose receive CQ reports completion events on `ch`.
    pub fn with_recv_events(h: &Host, o: &Opts, ch: &CompChannel) -> End {
        End::build(h, o, Some(ch))
    }

    fn build(h: &Host, o: &Opts, recv_events: Option<&CompChannel>) -> End {
        let scq = h.ctx.create_cq(o.cq, None).expect("create send cq");
        let rcq = h.ctx.create_cq(o.cq, recv_events).expect("create recv cq");
        let qp = h.pd.create_qp(&QpInit {
            send_cq: &scq,
            recv_cq: &rcq,
            cap: o.cap,
            qp_type: QpType::Rc,
            sq_sig_all: o.sq_sig_all,
            send_ops: None,
        }).expect("create qp");
        End { qp, scq, rcq }
    }

    /// INIT -> RTR -> RTS towards `remote` (QPN, GID) with PSNs `my_psn` / `their_psn`,
    /// from the IPv4-mapped RoCE v2 GID ([`softhca::config::IP_GID_INDEX`]).
    pub fn connect(&self, o: &Opts, remote_qpn: u32, remote_gid: [u8; 16], my_psn: u32, their_psn: u32) {
        self.connect_from(o, softhca::config::IP_GID_INDEX, remote_qpn, remote_gid, my_psn, their_psn);
    }

    /// [`End::connect`] from source GID index `sgid_index`.
    pub fn connect_from(&self, o: &Opts, sgid_index: u8, remote_qpn: u32, remote_gid: [u8; 16], my_psn: u32, their_psn: u32) {
        self.qp.to_init(1, o.access).expect("INIT");
        let rtr = QpAttr {
            state: Some(QpState::Rtr),
            ah: Some(provider::qp::Ah { dgid: remote_gid, sgid_index, hop_limit: 64, port: 1, ..Default::default() }),
            path_mtu: Some(o.mtu),
            dest_qpn: Some(remote_qpn),
            rq_psn: Some(their_psn),
            max_dest_rd_atomic: Some(o.rd_atomic),
            min_rnr_timer: Some(o.min_rnr_timer),
            ..Default::default()
        };
        self.qp.modify(&rtr).expect("RTR");
        self.qp.to_rts(my_psn, o.timeout, o.retry_cnt, o.rnr_retry, o.rd_atomic).expect("RTS");
        let _ = Remote { qpn: remote_qpn, psn: their_psn, gid: remote_gid };
    }
}

/// Two connected ends on hosts `a` and `b`.
pub fn connect(a: &Host, b: &Host, o: &Opts) -> (End, End) {
    connect2(a, b, o, o)
}

/// Two connected ends with per-side options.
pub fn connect2(a: &Host, b: &Host, oa: &Opts, ob: &Opts) -> (End, End) {
    let ea = End::new(a, oa);
    let eb = End::new(b, ob);
    let (pa, pb) = (0x10_0000 + ea.qp.qpn() * 7 % 0xfff, 0xff_fff0 - eb.qp.qpn() % 0x100);
    ea.connect(oa, eb.qp.qpn(), b.gid(), pa, pb);
    eb.connect(ob, ea.qp.qpn(), a.gid(), pb, pa);
    (ea, eb)
}

/// Polls until `n` completions arrived; fails the test after [`WAIT`].
pub fn wait(cq: &mut Cq, n: usize) -> Vec<Wc> {
    wait_for(cq, n, WAIT)
}

pub fn wait_for(cq: &mut Cq, n: usize, limit: Duration) -> Vec<Wc> {
    poll_for(cq, n, limit, std::thread::yield_now)
}

/// Polls until `n` completions arrived, calling `between` before every poll (yield the
/// CPU, or drive the devices in polled mode); fails the test after `limit`.
pub fn poll_for(cq: &mut Cq, n: usize, limit: Duration, mut between: impl FnMut()) -> Vec<Wc> {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut wcs = [Wc::default(); 16];
    while out.len() < n {
        between();
        let k = cq.poll(&mut wcs[..(n - out.len()).min(16)]);
        out.extend_from_slice(&wcs[..k]);
        if k == 0 && start.elapsed() > limit {
            panic!("{} of {n} completions after {limit:?}: {out:?}", out.len());
        }
    }
    out
}

/// Polls `f` every millisecond until it holds; fails the test after [`WAIT`].
pub fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until `h`'s engine has had nothing to do for a while (with the trap: armed, and
/// sleeping on it), so the next doorbell finds it idle.
pub fn until_idle(h: &Host) {
    let busy = |c: &softhca::device::CounterSnapshot| (c.tx_packets, c.rx_packets, c.sq_doorbells, c.cqes, c.trap_faults);
    let start = Instant::now();
    let mut last = h.hca.device().counters();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let c = h.hca.device().counters();
        let armed = !h.hca.device().doorbell_trap() || c.trap_arms > 0;
        if busy(&c) == busy(&last) && armed {
            return;
        }
        last = c;
        assert!(start.elapsed() < WAIT, "engine never went idle: {last:?}");
    }
}

/// The opcode and PSN of every packet in a pcap file softhca wrote (`Config::pcap`), in
/// order; each frame must hold a RoCEv2 packet with a valid ICRC.
pub fn captured(path: &std::path::Path) -> Vec<(softhca::wire::Opcode, u32)> {
    use softhca::wire::{Endpoints, RocePacket};
    use std::net::SocketAddr;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut r = pcap_file::pcap::PcapReader::new(file).expect("a pcap file");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let f = p.expect("a whole record").data;
        // Ethernet 14 + IPv4 20 + UDP 8.
        let ip = &f[14..34];
        let src = SocketAddr::from(([ip[12], ip[13], ip[14], ip[15]], u16::from_be_bytes([f[34], f[35]])));
        let dst = SocketAddr::from(([ip[16], ip[17], ip[18], ip[19]], u16::from_be_bytes([f[36], f[37]])));
        let pkt = RocePacket::parse(&f[42..], &Endpoints::new(src, dst)).expect("a captured packet with a valid ICRC");
        out.push((pkt.bth.opcode, pkt.bth.psn));
    }
    out
}

/// Asserts nothing more arrives within `d`.
pub fn quiet(cq: &mut Cq, d: Duration) {
    let start = Instant::now();
    let mut wcs = [Wc::default(); 4];
    while start.elapsed() < d {
        let k = cq.poll(&mut wcs);
        assert_eq!(k, 0, "unexpected completion: {:?}", &wcs[..k]);
        std::thread::sleep(Duration::from_millis(1));
    }
}

pub fn wr<'a>(op: SendOp, payload: Payload<'a>) -> SendWr<'a> {
    SendWr::new(op, payload)
}

pub fn signaled<'a>(op: SendOp, payload: Payload<'a>) -> SendWr<'a> {
    SendWr::new(op, payload).with_flags(FmCeSe::CQ_UPDATE)
}
