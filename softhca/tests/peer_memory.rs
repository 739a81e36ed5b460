//! MRs in peer memory (GPU memory behind a dma-buf the CPU cannot map) end to end between
//! two softhca instances: every operation in both roles, large messages and the batching
//! of peer calls, bad rkeys and bounds, failing peer memory; and REG_DMABUF_MR's ways to
//! reach a buffer (resolver, mmap, neither).
//!
//! The peer memory here is [`TestPeer`]: a `Vec` behind a mutex at made-up device
//! addresses (0xd000_.... , not canonical x86-64 addresses: dereferencing one faults at
//! once), so softhca can only reach it through `PeerMemory`, exactly as with CUDA memory.
//! It counts calls and bytes. It is registered the way an application registers GPU
//! memory, through `Pd::reg_dmabuf_mr`: there is no dma-buf exporter on this machine, so
//! a memfd stands in for the dma-buf fd (`softhca::peer::emulate_dmabuf`, which makes
//! REG_DMABUF_MR take it as a dma-buf of exporter [`EXPORTER`]), and [`TestResolver`]
//! claims that exporter, as gdr's resolver claims `nv_dmabuf`.
//!
//! Expected peer call counts come from the batching rule (one call per message or per
//! 1 MiB segment, `softhca::peer::PEER_SEGMENT`), derived per test from the message
//! length alone: ceil(len / 1 MiB) for data that arrives in order, plus at most two
//! per go-back-N rewind for data that is sent (a rewind can step back into a segment
//! already left, and forward again).
//!
//! Addresses: 127.9.9.x hints, distinct per test (see common::bind_free).

mod common;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use common::*;
use nix::errno::Errno;
use provider::cqe::{WcFlags, WcOpcode, WcStatus};
use provider::wqe::{Payload, SendOp, Sge};
use provider::{Access, Mr};
use softhca::peer::{self, DmabufRequest, EmulatedDmabuf, PeerError, PeerMemory, PeerResolver, PEER_SEGMENT};

/// The exporter name [`TestResolver`] claims.
const EXPORTER: &str = "softhca_test_peer";
/// An exporter it claims but refuses (ENOMEM), to check the errno goes back to the caller.
const REFUSED: &str = "softhca_test_refused";
/// An exporter nobody claims: REG_DMABUF_MR maps it.
const MAPPABLE: &str = "softhca_test_map";
/// Where peer memory's device addresses begin.
const DEV_BASE: u64 = 0xd000_0000_0000_0000;

/// Peer memory a CPU pointer cannot reach: bytes at device addresses `base..`.
#[derive(Debug)]
struct TestPeer {
    name: String,
    base: u64,
    bytes: Mutex<Vec<u8>>,
    reads: AtomicU64,
    read_bytes: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    atomics: AtomicU64,
    /// Calls outside the buffer (must stay 0: the device checks bounds first).
    wild: AtomicU64,
    fail_reads: AtomicBool,
    fail_writes: AtomicBool,
    /// Staging buffers lent to the device, and given back.
    lent: AtomicU64,
    returned: Arc<AtomicU64>,
}

impl TestPeer {
    fn new(len: usize) -> Arc<TestPeer> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let n = NEXT.fetch_add(1, Relaxed);
        Arc::new(TestPeer {
            name: format!("test:{n}"),
            base: DEV_BASE + (n << 40),
            bytes: Mutex::new(vec![0; len]),
            reads: AtomicU64::new(0),
            read_bytes: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            write_bytes: AtomicU64::new(0),
            atomics: AtomicU64::new(0),
            wild: AtomicU64::new(0),
            fail_reads: AtomicBool::new(false),
            fail_writes: AtomicBool::new(false),
            lent: AtomicU64::new(0),
            returned: Arc::new(AtomicU64::new(0)),
        })
    }

    /// The byte range of `[addr, addr + len)` in the buffer, or an error (counted).
    fn range(&self, what: &'static str, addr: u64, len: usize) -> Result<std::ops::Range<usize>, PeerError> {
        let size = self.bytes.lock().unwrap().len();
        match addr.checked_sub(self.base).map(|o| o as usize) {
            Some(o) if o.checked_add(len).is_some_and(|e| e <= size) => Ok(o..o + len),
            _ => {
                self.wild.fetch_add(1, Relaxed);
                Err(PeerError { what, addr, len, why: "outside the buffer".into() })
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.bytes.lock().unwrap().clone()
    }

    fn fill(&self, off: usize, data: &[u8]) {
        self.bytes.lock().unwrap()[off..off + data.len()].copy_from_slice(data);
    }

    fn counts(&self) -> (u64, u64) {
        (self.reads.load(Relaxed), self.writes.load(Relaxed))
    }
}

impl PeerMemory for TestPeer {
    fn name(&self) -> &str {
        &self.name
    }

    fn read(&self, addr: u64, out: &mut [u8]) -> Result<(), PeerError> {
        if self.fail_reads.load(Relaxed) {
            return Err(PeerError { what: "read", addr, len: out.len(), why: "injected".into() });
        }
        let r = self.range("read", addr, out.len())?;
        self.reads.fetch_add(1, Relaxed);
        self.read_bytes.fetch_add(out.len() as u64, Relaxed);
        out.copy_from_slice(&self.bytes.lock().unwrap()[r]);
        Ok(())
    }

    fn write(&self, addr: u64, data: &[u8]) -> Result<(), PeerError> {
        if self.fail_writes.load(Relaxed) {
            return Err(PeerError { what: "write", addr, len: data.len(), why: "injected".into() });
        }
        let r = self.range("write", addr, data.len())?;
        self.writes.fetch_add(1, Relaxed);
        self.write_bytes.fetch_add(data.len() as u64, Relaxed);
        self.bytes.lock().unwrap()[r].copy_from_slice(data);
        Ok(())
    }

    fn atomic_u64(&self, addr: u64, compare: Option<u64>, swap_or_add: u64) -> Result<u64, PeerError> {
        let r = self.range("atomic", addr, 8)?;
        self.atomics.fetch_add(1, Relaxed);
        let mut b = self.bytes.lock().unwrap();
        let old = u64::from_ne_bytes(b[r.clone()].try_into().unwrap());
        let new = match compare {
            Some(c) if c == old => swap_or_add,
            Some(_) => old,
            None => old.wrapping_add(swap_or_add),
        };
        b[r].copy_from_slice(&new.to_ne_bytes());
        Ok(old)
    }

    /// Lends page-aligned heap memory (as CUDA would lend page-locked memory), counting
    /// what comes back.
    fn staging_buffer(&self, len: usize) -> Option<peer::HostBuffer> {
        let layout = std::alloc::Layout::from_size_align(len, 4096).ok()?;
        // SAFETY: a non-zero size.
        let ptr = std::ptr::NonNull::new(unsafe { std::alloc::alloc(layout) })?;
        self.lent.fetch_add(1, Relaxed);
        let (returned, addr) = (self.returned.clone(), ptr.as_ptr() as usize);
        // SAFETY: a fresh allocation of `len` bytes that only the release frees.
        Some(unsafe {
            peer::HostBuffer::from_raw(ptr, len, move || {
                returned.fetch_add(1, Relaxed);
                // SAFETY: allocated above with this layout, freed once.
                std::alloc::dealloc(addr as *mut u8, layout)
            })
        })
    }
}

/// Claims [`EXPORTER`] buffers: the memfd behind each (by inode) names its [`TestPeer`].
#[derive(Default)]
struct TestResolver {
    bufs: Mutex<Vec<(FileId, Arc<TestPeer>)>>,
}

/// A file's (device, inode).
type FileId = (u64, u64);

fn file_id(fd: std::os::fd::BorrowedFd<'_>) -> FileId {
    let st = nix::sys::stat::fstat(fd.as_raw_fd()).unwrap();
    (st.st_dev, st.st_ino)
}

impl PeerResolver for TestResolver {
    fn resolve(&self, req: &DmabufRequest<'_>) -> Result<Option<peer::Resolved>, Errno> {
        match req.exporter {
            REFUSED => return Err(Errno::ENOMEM),
            EXPORTER => {}
            _ => return Ok(None),
        }
        let id = file_id(req.fd);
        let bufs = self.bufs.lock().unwrap();
        let (_, p) = bufs.iter().find(|(i, _)| *i == id).ok_or(Errno::EINVAL)?;
        Ok(Some((p.clone() as Arc<dyn PeerMemory>, p.base + req.offset)))
    }
}

fn resolver() -> &'static Arc<TestResolver> {
    static R: OnceLock<Arc<TestResolver>> = OnceLock::new();
    R.get_or_init(|| {
        let r = Arc::new(TestResolver::default());
        peer::install_resolver(r.clone());
        r
    })
}

fn memfd(name: &std::ffi::CStr) -> OwnedFd {
    nix::sys::memfd::memfd_create(name, nix::sys::memfd::MemFdCreateFlag::MFD_CLOEXEC).unwrap()
}

/// An MR in peer memory ("GPU memory"): `len` bytes at offset [`PeerBuf::OFFSET`] of a
/// buffer with a guard page on each side.
struct PeerBuf {
    mr: Mr,
    peer: Arc<TestPeer>,
    iova: u64,
    len: usize,
    _emu: EmulatedDmabuf,
    _fd: OwnedFd,
}

impl PeerBuf {
    const OFFSET: usize = 4096;

    /// Registered through REG_DMABUF_MR with the device address as iova (what perftest
    /// and NCCL do), or `iova` when given.
    fn new(h: &Host, len: usize, access: Access, iova: Option<u64>) -> PeerBuf {
        let r = resolver();
        let size = Self::OFFSET + len + 4096;
        let peer = TestPeer::new(size);
        let fd = memfd(c"peer");
        r.bufs.lock().unwrap().push((file_id(fd.as_fd()), peer.clone()));
        let emu = peer::emulate_dmabuf(fd.as_fd(), EXPORTER, size as u64).unwrap();
        let iova = iova.unwrap_or(peer.base + Self::OFFSET as u64);
        let mr = h.pd.reg_dmabuf_mr(fd.as_fd(), Self::OFFSET as u64, len, iova, access).expect("reg_dmabuf_mr");
        assert_eq!(mr.addr(), iova);
        PeerBuf { mr, peer, iova, len, _emu: emu, _fd: fd }
    }

    fn sge(&self, off: usize, len: usize) -> Sge {
        Sge::new(self.iova + off as u64, len as u32, self.mr.lkey())
    }

    /// The MR's bytes, copied back (what the GPU side of a check does).
    fn read(&self) -> Vec<u8> {
        self.peer.snapshot()[Self::OFFSET..Self::OFFSET + self.len].to_vec()
    }

    /// The whole buffer, guard pages included.
    fn whole(&self) -> Vec<u8> {
        self.peer.snapshot()
    }

    fn write(&self, off: usize, data: &[u8]) {
        self.peer.fill(Self::OFFSET + off, data);
    }

    fn read_u64(&self, off: usize) -> u64 {
        u64::from_ne_bytes(self.read()[off..off + 8].try_into().unwrap())
    }
}

/// A deterministic pattern of `len` bytes.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Messages needed to move `len` bytes in segments: ceil(len / 1 MiB), at least 1.
fn segments(len: usize) -> u64 {
    len.div_ceil(PEER_SEGMENT).max(1) as u64
}

/// Go-back-N rewinds `h`'s requesters made (each may re-read up to two segments).
fn rewinds(h: &Host) -> u64 {
    let c = h.hca.device().counters();
    c.seq_naks_received + c.ack_timeouts + c.rnr_naks_received + c.tail_probes
}

/// The two ends of every test: a on one host, b on the other.
fn hosts(ip: u8) -> (Host, Host) {
    (Host::new([127, 9, 9, ip]), Host::new([127, 9, 9, ip + 1]))
}

const SIZES: [usize; 6] = [1, 1023, 1025, 3 * 1024 + 17, 1 << 20, (4 << 20) + 5];

/// RDMA WRITE into peer memory: host -> peer, and peer -> peer. The responder writes
/// each message with ceil(len / 1 MiB) peer calls (in-order data: exactly), the
/// requester reads each with as many (plus rewinds).
#[test]
fn write_into_and_from_peer_memory() {
    let (a, b) = hosts(1);
    let o = Opts::default();
    let (mut ea, _eb) = connect(&a, &b, &o);
    for (i, &len) in SIZES.iter().enumerate() {
        for from_peer in [false, true] {
            let seed = i as u64 * 2 + from_peer as u64 + 1;
            let data = pattern(len, seed);
            let dst = PeerBuf::new(&b, len + 128, all_access(), None);
            dst.write(0, &vec![0xa5; len + 128]);
            let guard_before = dst.whole();
            let host_src = a.mem(len, all_access());
            let peer_src = PeerBuf::new(&a, len, all_access(), None);
            let sge = if from_peer {
                peer_src.write(0, &data);
                peer_src.sge(0, len)
            } else {
                host_src.buf.write(0, &data);
                host_src.sge(0, len)
            };
            let rw0 = rewinds(&a);
            ea.qp.post_send(seed, &signaled(SendOp::RdmaWrite { raddr: dst.iova + 64, rkey: dst.mr.rkey() }, Payload::Sgl(&[sge]))).unwrap();
            let wc = wait(&mut ea.scq, 1)[0];
            assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::RdmaWrite), "{len} from_peer={from_peer}");
            let got = dst.read();
            assert!(got[64..64 + len] == data[..], "{len} from_peer={from_peer}: bytes differ");
            assert!(got[..64].iter().chain(&got[64 + len..]).all(|&x| x == 0xa5), "{len}: bytes beside the target changed");
            let whole = dst.whole();
            assert_eq!(whole[..PeerBuf::OFFSET], guard_before[..PeerBuf::OFFSET]);
            assert_eq!(whole[PeerBuf::OFFSET + len + 128..], guard_before[PeerBuf::OFFSET + len + 128..]);
            assert_eq!(dst.peer.counts(), (0, segments(len)), "{len}: responder's peer calls (reads, writes)");
            assert_eq!(dst.peer.write_bytes.load(Relaxed), len as u64);
            if from_peer {
                let (r, w) = peer_src.peer.counts();
                let bound = segments(len) + 2 * (rewinds(&a) - rw0);
                assert!(w == 0 && r >= segments(len) && r <= bound, "{len}: requester read {r} times, bound {bound}");
            }
            assert_eq!(dst.peer.wild.load(Relaxed) + peer_src.peer.wild.load(Relaxed), 0);
        }
    }
    let c = b.hca.device().counters();
    assert_eq!(c.peer_errors, 0, "{c:?}");
    assert!(c.peer_writes > 0 && c.peer_writes * 64 < c.rx_packets + c.local_rx_packets, "batched, never per packet: {c:?}");
}

/// The staging buffers come from the peer memory that first needs them
/// (`PeerMemory::staging_buffer`: page-locked memory for CUDA), one per staging role that
/// is used (the requester's outgoing one, the responder's incoming one), are kept for
/// later messages, and are given back when the QPs go.
#[test]
fn staging_buffers_are_lent_by_peer_memory_and_returned() {
    let (a, b) = hosts(25);
    let (ea, eb) = connect(&a, &b, &Opts::default());
    let mut ea = ea;
    let src = PeerBuf::new(&a, 3 << 20, all_access(), None);
    let dst = PeerBuf::new(&b, 3 << 20, all_access(), None);
    let data = pattern(3 << 20, 4);
    src.write(0, &data);
    for i in 0..3 {
        ea.qp.post_send(i, &signaled(SendOp::RdmaWrite { raddr: dst.iova, rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, 3 << 20)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    }
    assert!(dst.read() == data);
    assert_eq!((src.peer.lent.load(Relaxed), dst.peer.lent.load(Relaxed)), (1, 1), "one buffer each, kept");
    assert_eq!(src.peer.returned.load(Relaxed) + dst.peer.returned.load(Relaxed), 0);
    drop((ea, eb));
    assert_eq!((src.peer.returned.load(Relaxed), dst.peer.returned.load(Relaxed)), (1, 1), "given back with the QPs");
}

/// RDMA READ of peer memory (responder reads it) into host memory and into peer memory
/// (requester scatters the responses into it).
#[test]
fn read_from_and_into_peer_memory() {
    let (a, b) = hosts(3);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    for (i, &len) in SIZES.iter().enumerate() {
        for into_peer in [false, true] {
            let seed = 100 + i as u64 * 2 + into_peer as u64;
            let data = pattern(len, seed);
            let src = PeerBuf::new(&b, len + 64, all_access(), None);
            src.write(32, &data);
            let host_dst = a.mem(len, all_access());
            let peer_dst = PeerBuf::new(&a, len + 64, all_access(), None);
            let sge = if into_peer { peer_dst.sge(16, len) } else { host_dst.sge(0, len) };
            let dups0 = b.hca.device().counters().duplicates_received;
            ea.qp.post_send(seed, &signaled(SendOp::RdmaRead { raddr: src.iova + 32, rkey: src.mr.rkey() }, Payload::Sgl(&[sge]))).unwrap();
            let wc = wait(&mut ea.scq, 1)[0];
            assert_eq!((wc.status, wc.opcode, wc.byte_len as usize), (WcStatus::Success, WcOpcode::RdmaRead, len), "{len}");
            let got = if into_peer { peer_dst.read()[16..16 + len].to_vec() } else { host_dst.buf.read() };
            assert!(got == data, "{len} into_peer={into_peer}: bytes differ");
            let (r, w) = src.peer.counts();
            let bound = segments(len) + 2 * (b.hca.device().counters().duplicates_received - dups0);
            assert!(w == 0 && r >= segments(len) && r <= bound, "{len}: responder read {r} times, bound {bound}");
            if into_peer {
                assert_eq!(peer_dst.peer.counts(), (0, segments(len)), "{len}: requester's peer calls");
                let all = peer_dst.read();
                assert!(all[..16].iter().chain(&all[16 + len..]).all(|&x| x == 0), "{len}: bytes beside the target changed");
            }
        }
    }
}

/// SEND from peer memory into receive buffers in peer memory (one entry, two entries in
/// peer memory, and a host entry then a peer entry), with and without immediate data;
/// and inline data into peer memory (SEND and RDMA WRITE).
#[test]
fn send_into_peer_receive_buffers_and_inline_data() {
    let (a, b) = hosts(5);
    let (mut ea, mut eb) = connect(&a, &b, &Opts::default());
    for (i, &len) in SIZES.iter().enumerate() {
        for layout in 0..3 {
            let seed = 200 + i as u64 * 3 + layout;
            let data = pattern(len, seed);
            let src = PeerBuf::new(&a, len, all_access(), None);
            src.write(0, &data);
            let r1 = PeerBuf::new(&b, len, all_access(), Some(0x1_0000_0000 + seed * 0x100_0000));
            let r2 = PeerBuf::new(&b, len, all_access(), None);
            let h = b.mem(len, all_access());
            let half = len / 2;
            let sgl: Vec<Sge> = match layout {
                0 => vec![r1.sge(0, len)],
                1 => vec![r1.sge(0, half), r2.sge(0, len - half)],
                _ => vec![h.sge(0, half), r2.sge(0, len - half)],
            };
            eb.qp.post_recv(seed, &sgl).unwrap();
            let op = if layout == 1 { SendOp::SendImm { imm: seed as u32 } } else { SendOp::Send };
            ea.qp.post_send(seed, &signaled(op, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
            assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success, "{len}/{layout}");
            let rc = wait(&mut eb.rcq, 1)[0];
            assert_eq!((rc.status, rc.opcode, rc.byte_len as usize, rc.wr_id), (WcStatus::Success, WcOpcode::Recv, len, seed));
            assert_eq!(rc.flags.contains(WcFlags::WITH_IMM), layout == 1);
            let got: Vec<u8> = match layout {
                0 => r1.read(),
                1 => [&r1.read()[..half], &r2.read()[..len - half]].concat(),
                _ => [&h.buf.read()[..half], &r2.read()[..len - half]].concat(),
            };
            assert!(got == data, "{len}/{layout}: bytes differ");
            // Each peer entry receives its part in ceil(part / 1 MiB) writes (none for an
            // empty part: with len 1, the first half is empty).
            let calls = |n: usize| n.div_ceil(PEER_SEGMENT) as u64;
            let want: [(u64, u64); 2] = match layout {
                0 => [(0, calls(len)), (0, 0)],
                1 => [(0, calls(half)), (0, calls(len - half))],
                _ => [(0, 0), (0, calls(len - half))],
            };
            assert_eq!([r1.peer.counts(), r2.peer.counts()], want, "{len}/{layout}: peer calls of the receive entries");
        }
    }
    // Inline data: SEND into a peer receive buffer, and RDMA WRITE into peer memory.
    let dst = PeerBuf::new(&b, 4096, all_access(), None);
    let data = pattern(100, 7);
    eb.qp.post_recv(1, &[dst.sge(1000, 200)]).unwrap();
    ea.qp.post_send(1, &signaled(SendOp::Send, Payload::Inline(&[&data[..60], &data[60..]]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let rc = wait(&mut eb.rcq, 1)[0];
    assert_eq!((rc.status, rc.byte_len), (WcStatus::Success, 100));
    assert_eq!(&dst.read()[1000..1100], &data[..]);
    ea.qp.post_send(2, &signaled(SendOp::RdmaWrite { raddr: dst.iova + 3000, rkey: dst.mr.rkey() }, Payload::Inline(&[&data[..]]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!(&dst.read()[3000..3100], &data[..]);
    assert_eq!(dst.peer.counts(), (0, 2), "one write per inline message");
    let rest = dst.read();
    assert!(rest[..1000].iter().chain(&rest[1100..3000]).chain(&rest[3100..]).all(|&x| x == 0));
}

/// CAS and FAA on peer memory, with the original value scattered into peer memory and
/// into host memory at the requester.
#[test]
fn atomics_on_peer_memory() {
    let (a, b) = hosts(7);
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let target = PeerBuf::new(&b, 64, all_access(), Some(0x40_0000));
    target.write(8, &100u64.to_ne_bytes());
    let res = PeerBuf::new(&a, 64, all_access(), None);
    let hres = a.mem(64, all_access());
    let (raddr, rkey) = (target.iova + 8, target.mr.rkey());
    // FETCH_AND_ADD: returns 100, memory 105 (result into peer memory).
    ea.qp.post_send(1, &signaled(SendOp::FetchAdd { raddr, rkey, add: 5 }, Payload::Sgl(&[res.sge(0, 8)]))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!((wc.status, wc.opcode, wc.byte_len), (WcStatus::Success, WcOpcode::FetchAdd, 8));
    assert_eq!((res.read_u64(0), target.read_u64(8)), (100, 105));
    // CMP_AND_SWP that fails (result into host memory), then one that succeeds.
    ea.qp.post_send(2, &signaled(SendOp::CompareSwap { raddr, rkey, compare: 7, swap: 1 }, Payload::Sgl(&[hres.sge(0, 8)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!((hres.buf.read_u64(0), target.read_u64(8)), (105, 105));
    ea.qp.post_send(3, &signaled(SendOp::CompareSwap { raddr, rkey, compare: 105, swap: u64::MAX - 1 }, Payload::Sgl(&[res.sge(8, 8)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    assert_eq!((res.read_u64(8), target.read_u64(8)), (105, u64::MAX - 1));
    assert_eq!(target.peer.atomics.load(Relaxed), 3, "each atomic once");
    assert_eq!(res.peer.counts(), (0, 2), "each result into peer memory with one write");
}

/// The target is unchanged and the requester gets `want` when `op` (built from the
/// target) is posted towards peer memory on a fresh QP pair.
fn peer_error_case(a: &Host, b: &Host, op: impl Fn(&PeerBuf) -> SendOp, local: Option<&PeerBuf>, want: WcStatus, why: &str) {
    let (mut ea, _eb) = connect(a, b, &Opts::default());
    let target = PeerBuf::new(b, 4096, all_access(), None);
    target.write(0, &pattern(4096, 99));
    let before = target.whole();
    let src = a.mem(8192, all_access());
    let sge = match local {
        Some(p) => p.sge(0, 4096),
        None => src.sge(0, 4096),
    };
    let sgl = match op(&target) {
        SendOp::FetchAdd { .. } | SendOp::CompareSwap { .. } => vec![src.sge(0, 8)],
        _ => vec![sge],
    };
    ea.qp.post_send(1, &signaled(op(&target), Payload::Sgl(&sgl))).unwrap();
    let wc = wait(&mut ea.scq, 1)[0];
    assert_eq!(wc.status, want, "{why}: {wc:?}");
    assert!(target.whole() == before, "{why}: the target changed");
    assert_eq!(target.peer.wild.load(Relaxed), 0, "{why}: a peer access outside the MR");
}

/// A bad rkey or an access outside the MR, towards peer memory: REMOTE_ACCESS_ERR at the
/// requester, as for host memory (see tests/errors.rs), and no byte of the target changes
/// (copied back and compared); the device checks before any peer call.
#[test]
fn bad_rkey_and_out_of_bounds_into_peer_memory() {
    let (a, b) = hosts(9);
    let rem = WcStatus::RemAccessErr;
    peer_error_case(&a, &b, |t| SendOp::RdmaWrite { raddr: t.iova, rkey: t.mr.rkey() ^ 0x7700 }, None, rem, "WRITE, bad rkey");
    peer_error_case(&a, &b, |t| SendOp::RdmaWrite { raddr: t.iova + 4096 - 63, rkey: t.mr.rkey() }, None, rem, "WRITE past the end");
    peer_error_case(&a, &b, |t| SendOp::RdmaWrite { raddr: t.iova - 1, rkey: t.mr.rkey() }, None, rem, "WRITE before the start");
    peer_error_case(&a, &b, |t| SendOp::RdmaRead { raddr: t.iova + 1, rkey: t.mr.rkey() }, None, rem, "READ past the end");
    peer_error_case(&a, &b, |t| SendOp::RdmaRead { raddr: t.iova, rkey: t.mr.rkey() + 1 }, None, rem, "READ, bad rkey");
    peer_error_case(&a, &b, |t| SendOp::FetchAdd { raddr: t.iova + 4096, rkey: t.mr.rkey(), add: 1 }, None, rem, "atomic past the end");
    peer_error_case(&a, &b, |t| SendOp::CompareSwap { raddr: t.iova, rkey: t.mr.rkey() ^ 0x100, compare: 0, swap: 1 }, None, rem, "atomic, bad rkey");
    // Without REMOTE_WRITE on the MR.
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let ro = PeerBuf::new(&b, 4096, Access::LOCAL_WRITE | Access::REMOTE_READ, None);
    let src = a.mem(64, all_access());
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: ro.iova, rkey: ro.mr.rkey() }, Payload::Sgl(&[src.sge(0, 64)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, rem);
    assert_eq!(ro.peer.counts(), (0, 0));
    // A local gather entry outside its peer MR: LOCAL_PROT, nothing read.
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let lp = PeerBuf::new(&a, 4096, all_access(), None);
    let dst = b.mem(8192, all_access());
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dst.addr(), rkey: dst.mr.rkey() }, Payload::Sgl(&[lp.sge(8, 4096)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::LocProtErr);
    assert_eq!(lp.peer.counts(), (0, 0));
    assert_eq!(b.hca.device().counters().peer_errors + a.hca.device().counters().peer_errors, 0);
}

/// Peer memory whose copies fail: the work request completes with the syndrome of a
/// failed DMA, never a panic (LOCAL_PROT for the local side, REMOTE_ACCESS for a remote
/// WRITE or READ, REMOTE_OP for a SEND whose receive buffer fails, whose receive WQE
/// completes with LOCAL_PROT), and the failure is counted.
#[test]
fn failing_peer_memory_completes_in_error() {
    let (a, b) = hosts(11);
    let len = 64 << 10;
    let data = pattern(len, 5);
    // The responder's peer writes fail: WRITE -> REMOTE_ACCESS_ERR.
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let dst = PeerBuf::new(&b, len, all_access(), None);
    dst.peer.fail_writes.store(true, Relaxed);
    let src = a.mem(len, all_access());
    src.buf.write(0, &data);
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: dst.iova, rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::RemAccessErr);
    assert!(dst.read().iter().all(|&x| x == 0));
    assert_eq!(b.hca.device().counters().peer_errors, 1);
    // The responder's peer reads fail: READ -> REMOTE_ACCESS_ERR.
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let bad_src = PeerBuf::new(&b, len, all_access(), None);
    bad_src.peer.fail_reads.store(true, Relaxed);
    let hdst = a.mem(len, all_access());
    ea.qp.post_send(2, &signaled(SendOp::RdmaRead { raddr: bad_src.iova, rkey: bad_src.mr.rkey() }, Payload::Sgl(&[hdst.sge(0, len)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::RemAccessErr);
    assert_eq!(b.hca.device().counters().peer_errors, 2);
    // The requester's peer read fails: WRITE from it -> LOCAL_PROT, nothing arrives.
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let lsrc = PeerBuf::new(&a, len, all_access(), None);
    lsrc.peer.fail_reads.store(true, Relaxed);
    let hd = b.mem(len, all_access());
    ea.qp.post_send(3, &signaled(SendOp::RdmaWrite { raddr: hd.addr(), rkey: hd.mr.rkey() }, Payload::Sgl(&[lsrc.sge(0, len)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::LocProtErr);
    assert!(hd.buf.read().iter().all(|&x| x == 0));
    // The requester's peer write fails: READ into it -> LOCAL_PROT.
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let ldst = PeerBuf::new(&a, len, all_access(), None);
    ldst.peer.fail_writes.store(true, Relaxed);
    let hs = b.mem(len, all_access());
    ea.qp.post_send(4, &signaled(SendOp::RdmaRead { raddr: hs.addr(), rkey: hs.mr.rkey() }, Payload::Sgl(&[ldst.sge(0, len)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::LocProtErr);
    assert_eq!(a.hca.device().counters().peer_errors, 2);
    // A receive buffer whose writes fail: REMOTE_OP at the sender, LOCAL_PROT at the
    // receiver.
    let (mut ea, mut eb) = connect(&a, &b, &Opts::default());
    let rb = PeerBuf::new(&b, len, all_access(), None);
    rb.peer.fail_writes.store(true, Relaxed);
    eb.qp.post_recv(9, &[rb.sge(0, len)]).unwrap();
    ea.qp.post_send(5, &signaled(SendOp::Send, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::RemOpErr);
    let rc = wait(&mut eb.rcq, 1)[0];
    assert_eq!((rc.status, rc.wr_id), (WcStatus::LocProtErr, 9));
    assert_eq!(b.hca.device().counters().peer_errors, 3);
}

/// Several WRITEs in flight to one peer MR, and RNR: a WRITE_WITH_IMM whose last packet
/// finds no receive WQE is RNR-NAKed and retried; its bytes (staged before the NAK, and
/// written out then) all land, once.
#[test]
fn pipelined_writes_and_rnr_into_peer_memory() {
    let (a, b) = hosts(13);
    let o = Opts { min_rnr_timer: 1, ..Default::default() };
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let len = 256 << 10;
    let n = 16;
    let dst = PeerBuf::new(&b, n * len, all_access(), None);
    let src = a.mem(n * len, all_access());
    let data = pattern(n * len, 77);
    src.buf.write(0, &data);
    for i in 0..n {
        let sgl = [src.sge(i * len, len)];
        let w = signaled(SendOp::RdmaWrite { raddr: dst.iova + (i * len) as u64, rkey: dst.mr.rkey() }, Payload::Sgl(&sgl));
        ea.qp.post_send(i as u64, &w).unwrap();
    }
    let wcs = wait(&mut ea.scq, n);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert!(dst.read() == data, "pipelined WRITEs");
    assert_eq!(dst.peer.counts(), (0, n as u64), "one write per message");
    // RNR: no receive WQE yet.
    let imm_dst = PeerBuf::new(&b, len, all_access(), None);
    ea.qp.post_send(99, &signaled(SendOp::RdmaWriteImm { raddr: imm_dst.iova, rkey: imm_dst.mr.rkey(), imm: 42 }, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
    wait_until("an RNR NAK", || b.hca.device().counters().rnr_naks_sent > 0);
    eb.qp.post_recv(7, &[]).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    let rc = wait(&mut eb.rcq, 1)[0];
    assert_eq!((rc.status, rc.opcode, rc.imm, rc.byte_len as usize), (WcStatus::Success, WcOpcode::RecvRdmaWithImm, 42, len));
    assert!(imm_dst.read() == data[..len], "WRITE_WITH_IMM after RNR");
    let (_, w) = imm_dst.peer.counts();
    assert!((1..=2).contains(&w), "the staged part before the RNR NAK and the rest: {w} writes");
    assert_eq!(imm_dst.peer.write_bytes.load(Relaxed), len as u64, "every byte written once");
}

/// REG_DMABUF_MR's three ways: a resolver's (peer memory, above), a mapping for an
/// exporter nobody claims that supports mmap (the bytes are then reached by CPU pointer,
/// checked through our own mapping of the same file), EOPNOTSUPP for one that does not;
/// a resolver's refusal is the errno; the range rules hold for every way.
#[test]
fn reg_dmabuf_mr_ways_and_errors() {
    let (a, b) = hosts(15);
    resolver();
    // Mappable: a memfd of 3 pages, MR over the middle one at iova 0x5000_1000.
    let fd = memfd(c"mappable");
    nix::unistd::ftruncate(&fd, 3 * 4096).unwrap();
    let _emu = peer::emulate_dmabuf(fd.as_fd(), MAPPABLE, 3 * 4096).unwrap();
    let mr = b.pd.reg_dmabuf_mr(fd.as_fd(), 4096, 4096, 0x5000_1000, all_access()).unwrap();
    let (mut ea, _eb) = connect(&a, &b, &Opts::default());
    let src = a.mem(4096, all_access());
    let data = pattern(4096, 3);
    src.buf.write(0, &data);
    ea.qp.post_send(1, &signaled(SendOp::RdmaWrite { raddr: 0x5000_1000 + 100, rkey: mr.rkey() }, Payload::Sgl(&[src.sge(0, 3996)]))).unwrap();
    assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
    // SAFETY: a fresh shared read-only mapping of our own memfd, unmapped below.
    let view = unsafe { libc::mmap(std::ptr::null_mut(), 3 * 4096, libc::PROT_READ, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
    assert_ne!(view, libc::MAP_FAILED);
    // SAFETY: the mapping is 3 pages long.
    let bytes = unsafe { std::slice::from_raw_parts(view as *const u8, 3 * 4096) }.to_vec();
    // SAFETY: unmapping what we mapped.
    unsafe { libc::munmap(view, 3 * 4096) };
    assert!(bytes[4096 + 100..2 * 4096] == data[..3996], "the WRITE landed in the dma-buf's second page");
    assert!(bytes[..4096 + 100].iter().chain(&bytes[2 * 4096..]).all(|&x| x == 0));
    assert_eq!(b.hca.device().counters().peer_writes, 0, "a mapped dma-buf is host memory");
    // The MR's mapping of the buffer lives exactly as long as the MR (the kernel's
    // view of this process: /proc/self/maps names a memfd mapping `/memfd:NAME`).
    let maps = || std::fs::read_to_string("/proc/self/maps").unwrap().lines().filter(|l| l.contains("/memfd:mappable")).count();
    assert_eq!(maps(), 1, "the MR maps the dma-buf once");
    drop(mr);
    assert_eq!(maps(), 0, "deregistration unmaps the dma-buf");
    // Errors (errnos from the kernel's rules, see kernel::methods::mr).
    let errno = |r: provider::Result<Mr>| r.map(|_| ()).unwrap_err().errno();
    assert_eq!(errno(b.pd.reg_dmabuf_mr(fd.as_fd(), 8192, 8192, 0x2000, all_access())), Errno::EINVAL, "past the end");
    assert_eq!(errno(b.pd.reg_dmabuf_mr(fd.as_fd(), 0, 0, 0, all_access())), Errno::EINVAL, "no pages");
    assert_eq!(errno(b.pd.reg_dmabuf_mr(fd.as_fd(), 0, 4096, 0x10, all_access())), Errno::EINVAL, "page offsets differ");
    // Claimed by the resolver but refused: its errno.
    let rf = memfd(c"refused");
    let _e2 = peer::emulate_dmabuf(rf.as_fd(), REFUSED, 4096).unwrap();
    assert_eq!(errno(b.pd.reg_dmabuf_mr(rf.as_fd(), 0, 4096, 0, all_access())), Errno::ENOMEM);
    // Nobody claims it and it cannot be mapped (a pipe): EOPNOTSUPP.
    let (pr, _pw) = nix::unistd::pipe().unwrap();
    let _e3 = peer::emulate_dmabuf(pr.as_fd(), MAPPABLE, 4096).unwrap();
    assert_eq!(errno(b.pd.reg_dmabuf_mr(pr.as_fd(), 0, 4096, 0, all_access())), Errno::EOPNOTSUPP);
    // Peer memory: bounds checked against the dma-buf before the resolver is asked.
    let p = TestPeer::new(4096);
    let pf = memfd(c"peer-range");
    resolver().bufs.lock().unwrap().push((file_id(pf.as_fd()), p.clone()));
    let _e4 = peer::emulate_dmabuf(pf.as_fd(), EXPORTER, 4096).unwrap();
    assert_eq!(errno(b.pd.reg_dmabuf_mr(pf.as_fd(), 0, 8192, 0, all_access())), Errno::EINVAL);
    let ok = b.pd.reg_dmabuf_mr(pf.as_fd(), 0, 4096, 0x77_0000, all_access()).unwrap();
    let m = b.hca.mr_by_key(ok.lkey()).unwrap();
    assert_eq!((m.span.addr, m.span.iova, m.span.peer), (p.base, 0x77_0000, true));
    // A plain memfd that nobody emulates is no dma-buf.
    let plain = memfd(c"plain");
    assert_eq!(errno(b.pd.reg_dmabuf_mr(plain.as_fd(), 0, 4096, 0, all_access())), Errno::EINVAL);
}

/// Peer memory on a lossy wire (both instances drop, duplicate and reorder 2 % of their
/// packets): WRITEs, READs and SENDs between peer MRs arrive intact, in-order data is
/// still written with one call per segment (duplicates and retransmissions add none),
/// and a chain of fetch-and-adds on peer memory is executed exactly once each.
#[test]
fn peer_memory_on_a_lossy_wire() {
    use softhca::device::FaultSpec;
    let lossy = |ip: u8, seed: u64| Host::at([127, 9, 9, ip], |c| c.fault = Some(FaultSpec::new(0.02, 0.02, 0.02, seed)));
    let (a, b) = (lossy(17, 17), lossy(18, 1018));
    let o = Opts { mtu: 5, ..Default::default() };
    let (mut ea, mut eb) = connect(&a, &b, &o);
    let len = (3 << 20) + 4096 * 5 + 7;
    let data = pattern(len, 31);
    let src = PeerBuf::new(&a, len, all_access(), None);
    src.write(0, &data);
    for round in 0..3u64 {
        // WRITE a -> b.
        let dst = PeerBuf::new(&b, len, all_access(), None);
        ea.qp.post_send(round, &signaled(SendOp::RdmaWrite { raddr: dst.iova, rkey: dst.mr.rkey() }, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success, "round {round}");
        assert!(dst.read() == data, "round {round}: WRITE bytes");
        assert_eq!(dst.peer.counts(), (0, segments(len)), "round {round}: in-order data, one write per segment");
        // READ it back into a -> peer memory.
        let back = PeerBuf::new(&a, len, all_access(), None);
        ea.qp.post_send(10 + round, &signaled(SendOp::RdmaRead { raddr: dst.iova, rkey: dst.mr.rkey() }, Payload::Sgl(&[back.sge(0, len)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success, "round {round}");
        assert!(back.read() == data, "round {round}: READ bytes");
        assert_eq!(back.peer.counts(), (0, segments(len)), "round {round}: READ responses, one write per segment");
        // SEND a -> a receive buffer in peer memory.
        let rb = PeerBuf::new(&b, len, all_access(), None);
        eb.qp.post_recv(20 + round, &[rb.sge(0, len)]).unwrap();
        ea.qp.post_send(20 + round, &signaled(SendOp::Send, Payload::Sgl(&[src.sge(0, len)]))).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success, "round {round}");
        assert_eq!(wait(&mut eb.rcq, 1)[0].status, WcStatus::Success, "round {round}");
        assert!(rb.read() == data, "round {round}: SEND bytes");
        assert_eq!(rb.peer.counts(), (0, segments(len)));
    }
    // 200 fetch-and-adds on peer memory, 10 outstanding at a time.
    let ctr = PeerBuf::new(&b, 64, all_access(), None);
    let res = a.mem(64, all_access());
    for i in 0..200u64 {
        let w = wr(SendOp::FetchAdd { raddr: ctr.iova, rkey: ctr.mr.rkey(), add: i }, Payload::Sgl(std::slice::from_ref(Box::leak(Box::new(res.sge(0, 8))))));
        let w = if i % 10 == 9 { w.with_flags(provider::opcode::FmCeSe::CQ_UPDATE) } else { w };
        ea.qp.post_send(i, &w).unwrap();
        if i % 10 == 9 {
            assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        }
    }
    assert_eq!(ctr.read_u64(0), (0..200).sum::<u64>(), "each add executed once");
    assert_eq!(ctr.peer.atomics.load(Relaxed), 200);
    let c = a.hca.device().counters();
    assert!(c.fault_dropped > 0 && c.retransmits > 0, "the wire was lossy: {c:?}");
}

/// UD SENDs from peer memory into a receive buffer in peer memory (GRH and payload): one
/// peer read per message at the sender, and the GRH and payload written at the receiver
/// (one write each: a UD message is one packet).
#[test]
fn ud_send_between_peer_buffers() {
    use provider::wqe::{DatagramSeg, UdDest};
    use provider::{QpAttr, QpInit, QpState, QpType};
    let (a, b) = hosts(23);
    let ud_end = |h: &Host, qkey: u32| -> End {
        let scq = h.ctx.create_cq(64, None).unwrap();
        let rcq = h.ctx.create_cq(64, None).unwrap();
        let o = Opts::default();
        let qp = h.pd.create_qp(&QpInit { send_cq: &scq, recv_cq: &rcq, cap: o.cap, qp_type: QpType::Ud, sq_sig_all: false, send_ops: None }).unwrap();
        qp.modify(&QpAttr { state: Some(QpState::Init), pkey_index: Some(0), port: Some(1), qkey: Some(qkey), ..Default::default() }).unwrap();
        qp.modify(&QpAttr { state: Some(QpState::Rtr), ..Default::default() }).unwrap();
        qp.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(77), ..Default::default() }).unwrap();
        End { qp, scq, rcq }
    };
    let mut ea = ud_end(&a, 0x1111);
    let mut eb = ud_end(&b, 0x2222);
    let to_b = DatagramSeg::from_raw(0, 0, 1, 0, 0, 0xc000, [0; 6], 0, 64, (1 << 30) | (3 << 20), b.gid());
    let src = PeerBuf::new(&a, 4096, all_access(), None);
    let data = pattern(4096, 12);
    src.write(0, &data);
    let dst = PeerBuf::new(&b, 8192, all_access(), None);
    for (i, len) in [1usize, 100, 1024].into_iter().enumerate() {
        let off = i * 2048;
        eb.qp.post_recv(i as u64, &[dst.sge(off, 40 + len)]).unwrap();
        let sgl = [src.sge(0, len)];
        let wr = signaled(SendOp::Send, Payload::Sgl(&sgl)).to_ud(UdDest { av: &to_b, remote_qpn: eb.qp.qpn(), qkey: 0x2222 });
        ea.qp.post_send(i as u64, &wr).unwrap();
        assert_eq!(wait(&mut ea.scq, 1)[0].status, WcStatus::Success);
        let rc = wait(&mut eb.rcq, 1)[0];
        assert_eq!((rc.status, rc.byte_len as usize), (WcStatus::Success, 40 + len), "{rc:?}");
        let got = dst.read();
        assert_eq!(got[off + 20], 0x45, "IPv4 header in the GRH area");
        assert!(got[off + 40..off + 40 + len] == data[..len]);
    }
    assert_eq!(src.peer.counts(), (3, 0));
    assert_eq!(dst.peer.counts(), (0, 6));
}

/// Nothing acknowledged is dropped when the QP leaves the message half done: a requester
/// played by hand sends the first two packets of a three-packet WRITE into peer memory
/// with AckReq, gets them acknowledged (the bytes are staged, not yet written: one write
/// per message), and then the QP goes to ERR, moved by the application or by the device
/// (a request that starts a new message inside this one). The two packets' bytes land,
/// the third's place is untouched.
#[test]
fn acknowledged_staged_bytes_survive_the_qp_error() {
    use softhca::wire::{BthRepr, Endpoints, Opcode, RethRepr, RocePacket, Syndrome};
    use std::net::{IpAddr, SocketAddr};
    let b = Host::new([127, 9, 9, 27]);
    let o = Opts::default(); // MTU 1024
    for (case, hint) in [("application", 28u8), ("device", 29)] {
        let (ip, sock) = bind_free([127, 9, 9, hint]);
        sock.set_read_timeout(Some(WAIT)).unwrap();
        let e = End::new(&b, &o);
        let IpAddr::V4(v4) = ip else { unreachable!() };
        e.connect(&o, 0x4321, v4.to_ipv6_mapped().octets(), 0x55, 0);
        let to = SocketAddr::new(b.addr(), 4791);
        let ep = Endpoints::new(sock.local_addr().unwrap(), to);
        let dst = PeerBuf::new(&b, 3 * 1024, all_access(), None);
        let data = pattern(3 * 1024, 8);
        let send = |op: Opcode, psn: u32, payload: &[u8], reth: bool| {
            let mut bth = BthRepr::new(op, e.qp.qpn(), psn);
            bth.ack_req = true;
            let mut pkt = RocePacket::new(bth, payload);
            if reth {
                pkt.reth = Some(RethRepr { va: dst.iova, rkey: dst.mr.rkey(), dma_len: 3 * 1024 });
            }
            sock.send_to(&pkt.to_vec(&ep).unwrap(), to).unwrap();
        };
        send(Opcode::RcRdmaWriteFirst, 0, &data[..1024], true);
        send(Opcode::RcRdmaWriteMiddle, 1, &data[1024..2048], false);
        // Until the ACK of PSN 1.
        let mut buf = vec![0u8; 4096];
        loop {
            let (n, src) = sock.recv_from(&mut buf).expect("an ACK");
            let p = RocePacket::parse(&buf[..n], &Endpoints::new(src, sock.local_addr().unwrap())).unwrap();
            assert!(matches!(p.aeth.map(|a| a.syndrome), Some(Syndrome::Ack { .. })), "{case}: {p:?}");
            if p.bth.psn == 1 {
                break;
            }
        }
        assert_eq!(dst.peer.counts(), (0, 0), "{case}: acknowledged but still staged");
        match case {
            "application" => e.qp.modify(&provider::QpAttr { state: Some(provider::QpState::Err), ..Default::default() }).unwrap(),
            _ => send(Opcode::RcRdmaWriteFirst, 2, &data[..1024], true),
        }
        wait_until("the staged bytes written", || dst.peer.counts().1 == 1);
        let got = dst.read();
        assert!(got[..2048] == data[..2048], "{case}: the acknowledged bytes");
        assert!(got[2048..].iter().all(|&x| x == 0), "{case}: the third packet's place");
        assert_eq!(dst.peer.write_bytes.load(Relaxed), 2048);
    }
}
