//! Registration of device memory by address (`Pd::reg_device`, the peer-memory path),
//! on the embedded softhca. softhca pins no GPU memory, so an address no mapping covers
//! is refused as the kernel refuses it without a peer-memory client (EFAULT, from the
//! pin); for what a registration covers and when it goes, a private anonymous mapping
//! stands in for the device's memory (softhca reads host memory where a NIC would reach
//! the GPU's).

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::{Loop, BUF};
use memmap2::MmapMut;
use nix::errno::Errno;
use provider::cqe::WcStatus;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, DeviceMemory, QpType};

fn cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 32 }
}

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE).union(Access::REMOTE_READ);

/// An address and length that nothing backs: what a CUDA pointer is to a kernel without
/// nvidia-peermem. Counts its drops.
struct Unbacked {
    addr: u64,
    len: usize,
    drops: Rc<Cell<u32>>,
}

// SAFETY: the range is never dereferenced by anyone (no mapping covers it: the tests
// use it to see the registration refused), and both methods return constants.
unsafe impl DeviceMemory for Unbacked {
    fn device_addr(&self) -> u64 {
        self.addr
    }
    fn device_len(&self) -> usize {
        self.len
    }
}

impl Drop for Unbacked {
    fn drop(&mut self) {
        self.drops.set(self.drops.get() + 1);
    }
}

#[test]
fn refusals_give_the_memory_back() {
    let l = Loop::new(QpType::Rc, cap());
    let drops = Rc::new(Cell::new(0));
    // Below mmap_min_addr: never mapped, so the pin finds no mapping (EFAULT, as
    // get_user_pages fails on it).
    let e = l.pd.reg_device(Unbacked { addr: 0x1000, len: 8192, drops: drops.clone() }, RW).unwrap_err();
    assert!(matches!(e.error, provider::Error::Device { .. }), "{:?}", e.error);
    assert_eq!(e.error.errno(), Errno::EFAULT);
    assert_eq!((e.mem.addr, e.mem.len, drops.get()), (0x1000, 8192, 0));
    drop(e);
    assert_eq!(drops.get(), 1);
    // An empty range and a null pointer: refused before the device is asked (EINVAL,
    // ibv_reg_mr's rule for an empty range).
    for (addr, len) in [(0x1000, 0), (0, 4096)] {
        let e = l.pd.reg_device(Unbacked { addr, len, drops: drops.clone() }, RW).unwrap_err();
        assert_eq!(e.error.errno(), Errno::EINVAL, "{addr:#x}+{len}");
        assert_eq!((e.mem.addr, e.mem.len), (addr, len));
    }
    // Remote write without local write, as for every registration.
    let e = l.pd.reg_device(Unbacked { addr: 0x1000, len: 4096, drops: drops.clone() }, Access::REMOTE_WRITE).unwrap_err();
    assert_eq!(e.error.errno(), Errno::EINVAL);
    // `?` into the provider's error drops the memory.
    let before = drops.get();
    let f = || -> provider::Result<()> {
        l.pd.reg_device(Unbacked { addr: 0x1000, len: 4096, drops: drops.clone() }, RW)?;
        Ok(())
    };
    assert_eq!(f().unwrap_err().errno(), Errno::EFAULT);
    assert_eq!(drops.get(), before + 1);
}

/// A gather of 8 bytes at `addr` (key `lkey`) into the loop's buffer: the status.
fn gather(l: &mut Loop, addr: u64, lkey: u32) -> WcStatus {
    let sge = [Sge::new(addr, 8, lkey)];
    let w = SendWr::new(SendOp::RdmaWrite { raddr: l.base + BUF as u64 / 2, rkey: l.mr.rkey() }, Payload::Sgl(&sge)).signaled();
    l.qp.post_send(9, &w).unwrap();
    l.wcs(1)[0].status
}

/// The stand-in device memory: a private mapping of its own, which records when dropped
/// whether a gather through the registration of it (`key`, set once registered) still
/// works; it must not, the registration goes first.
struct Stand {
    map: MmapMut,
    l: Rc<RefCell<Loop>>,
    key: Rc<Cell<Option<(u64, u32)>>>,
    seen: Rc<RefCell<Vec<WcStatus>>>,
}

// SAFETY: the mapping is this value's own (no other part of the program reads or writes
// it, so a peer writing it disturbs nothing), stays at its address until the value is
// dropped (a moved MmapMut keeps its mapping), and is not handed to anyone else.
unsafe impl DeviceMemory for Stand {
    fn device_addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }
    fn device_len(&self) -> usize {
        self.map.len()
    }
}

impl Drop for Stand {
    fn drop(&mut self) {
        if let Some((addr, lkey)) = self.key.get() {
            let s = gather(&mut self.l.borrow_mut(), addr, lkey);
            self.seen.borrow_mut().push(s);
        }
    }
}

/// A loop, the pd, and the probes a [`Stand`] reports to.
fn setup() -> (Rc<RefCell<Loop>>, provider::Pd, Rc<Cell<Option<(u64, u32)>>>, Rc<RefCell<Vec<WcStatus>>>) {
    let l = Rc::new(RefCell::new(Loop::new(QpType::Rc, cap())));
    let pd = l.borrow().pd.clone();
    (l, pd, Rc::new(Cell::new(None)), Rc::new(RefCell::new(Vec::new())))
}

#[test]
fn keys_address_and_into_inner() {
    let (l, pd, key, seen) = setup();
    let map = MmapMut::map_anon(8192).unwrap();
    let at = map.as_ptr() as u64;
    let r = pd.reg_device(Stand { map, l: l.clone(), key, seen: seen.clone() }, RW).unwrap();
    assert_eq!((r.mr().addr(), r.mr().len()), (at, 8192));
    assert_eq!(r.get_ref().device_addr(), at);
    // A peer's WRITE lands in the memory at the registered address, also after the
    // region has moved.
    let r = Box::new(r);
    {
        let mut lb = l.borrow_mut();
        lb.mr[..8].copy_from_slice(b"peer-mem");
        let sge = [lb.sge(0, 8)];
        let w = SendWr::new(SendOp::RdmaWrite { raddr: at + 8184, rkey: r.mr().rkey() }, Payload::Sgl(&sge)).signaled();
        lb.qp.post_send(1, &w).unwrap();
        assert_eq!(lb.completions(1), [1]);
    }
    assert_eq!(&r.get_ref().map[8184..], b"peer-mem");
    let lkey = r.mr().lkey();
    assert_eq!(gather(&mut l.borrow_mut(), at, lkey), WcStatus::Success);
    // into_inner deregisters and gives the memory back: the key is dead, the bytes kept.
    let stand = r.into_inner();
    assert_eq!(&stand.map[8184..], b"peer-mem");
    assert_eq!(gather(&mut l.borrow_mut(), at, lkey), WcStatus::LocProtErr);
    drop(stand);
    assert!(seen.borrow().is_empty());
}

#[test]
fn the_registration_is_dropped_before_the_memory() {
    let (l, pd, key, seen) = setup();
    let stand = Stand { map: MmapMut::map_anon(4096).unwrap(), l: l.clone(), key: key.clone(), seen: seen.clone() };
    let r = pd.reg_device(stand, Access::LOCAL_WRITE).unwrap();
    key.set(Some((r.mr().addr(), r.mr().lkey())));
    // While registered, the gather works (so a memory dropped first would see Success).
    assert_eq!(gather(&mut l.borrow_mut(), r.mr().addr(), r.mr().lkey()), WcStatus::Success);
    drop(r);
    assert_eq!(seen.borrow().as_slice(), [WcStatus::LocProtErr]);
}
