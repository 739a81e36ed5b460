//! Registration of memory the caller allocated (`Pd::reg_owned`, `reg_owned_range`) and
//! of shared borrows (`Pd::reg_mr_shared`), on the embedded softhca. The device is the
//! judge of what a registration covers (RDMA through it, protection errors past it); the
//! kernel's and ibv_reg_mr's rules (EINVAL for an empty range) are the expected errors.

mod common;

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use common::{Loop, BUF};
use memmap2::MmapMut;
use provider::cqe::WcStatus;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, QpType, StableMemory};

fn cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 32 }
}

const RW: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE).union(Access::REMOTE_READ);

/// WRITEs `n` bytes of the loop's buffer (from offset 0) to `raddr`/`rkey`; the status.
fn write_into(l: &mut Loop, raddr: u64, rkey: u32, n: u32) -> WcStatus {
    let sge = [l.sge(0, n)];
    let w = SendWr::new(SendOp::RdmaWrite { raddr, rkey }, Payload::Sgl(&sge)).signaled();
    l.qp.post_send(7, &w).unwrap();
    l.wcs(1)[0].status
}

/// A responder's refusal as the requester of a QP connected to itself sees it: the
/// responder half moves the QP to error first, so the WRITE may complete flushed.
fn assert_refused(s: WcStatus) {
    assert!(matches!(s, WcStatus::RemAccessErr | WcStatus::WrFlushErr), "{s:?}");
}

#[test]
fn owned_vec_keys_and_address_round_trip() {
    let mut l = Loop::new(QpType::Rc, cap());
    let v = vec![0u8; 300];
    let (ptr, cap_before) = (v.as_ptr(), v.capacity());
    let r = l.pd.reg_owned(v, RW).unwrap();
    assert_eq!(r.addr(), ptr as u64);
    assert_eq!(r.ptr() as *const u8, ptr);
    assert_eq!((r.len(), r.mr().len()), (300, 300));
    l.mr[..8].copy_from_slice(b"owned-mr");
    // Moving the region keeps the memory where it is (a Vec's buffer is on the heap).
    let r = Box::new(r);
    assert_eq!(write_into(&mut l, r.addr() + 292, r.rkey(), 8), WcStatus::Success);
    assert_eq!(&r[292..], b"owned-mr");
    let v = r.into_inner();
    assert_eq!((v.as_ptr(), v.capacity(), v.len()), (ptr, cap_before, 300));
    assert_eq!(&v[292..], b"owned-mr");
}

#[test]
fn owned_mmap_and_boxed_slice() {
    let mut l = Loop::new(QpType::Rc, cap());
    let m = MmapMut::map_anon(8192).unwrap();
    let r = l.pd.reg_owned(m, RW).unwrap();
    assert_eq!(r.addr() % 4096, 0);
    l.mr[..4].copy_from_slice(b"mmap");
    assert_eq!(write_into(&mut l, r.addr() + 8188, r.rkey(), 4), WcStatus::Success);
    let m = r.into_inner();
    assert_eq!(&m[8188..], b"mmap");

    let b: Box<[u8]> = vec![0u8; 64].into_boxed_slice();
    let r = l.pd.reg_owned(b, RW).unwrap();
    l.mr[..4].copy_from_slice(b"box!");
    assert_eq!(write_into(&mut l, r.addr(), r.rkey(), 4), WcStatus::Success);
    assert_eq!(&r.into_inner()[..4], b"box!");
}

#[test]
fn a_range_is_registered_and_the_rest_is_not() {
    let mut l = Loop::new(QpType::Rc, cap());
    let mut m = MmapMut::map_anon(3 * 4096).unwrap();
    m.fill(0xA5);
    let r = l.pd.reg_owned_range(m, 4096..8192, RW).unwrap();
    assert_eq!(r.addr(), r.get_ref().as_ptr() as u64 + 4096);
    assert_eq!((r.len(), r.mr().len()), (4096, 4096));
    l.mr[..16].fill(0x11);
    assert_eq!(write_into(&mut l, r.addr() + 4088, r.rkey(), 8), WcStatus::Success);
    // Eight bytes of which four are past the registration: the responder refuses it.
    assert_refused(write_into(&mut l, r.addr() + 4092, r.rkey(), 8));
    let m = r.into_inner();
    assert!(m[..4096].iter().all(|&b| b == 0xA5));
    assert!(m[4096 + 4088..8192].iter().all(|&b| b == 0x11));
    assert!(m[8192..].iter().all(|&b| b == 0xA5));
}

#[test]
fn refusals_give_the_memory_back() {
    let l = Loop::new(QpType::Rc, cap());
    // Refused by the provider (remote write needs local write, as ibv_reg_mr says).
    let e = l.pd.reg_owned(vec![7u8; 100], Access::REMOTE_WRITE).unwrap_err();
    assert_eq!(e.error.errno(), nix::errno::Errno::EINVAL);
    assert_eq!(e.mem, vec![7u8; 100]);
    // A range outside the memory.
    let e = l.pd.reg_owned_range(vec![1u8; 10], 5..11, RW).unwrap_err();
    assert_eq!(e.error.errno(), nix::errno::Errno::EINVAL);
    assert_eq!(e.mem, vec![1u8; 10]);
    // Refused by the device: an empty Vec's dangling address is in no mapping (the pin
    // fails with EFAULT, as get_user_pages does).
    let e = l.pd.reg_owned(Vec::<u8>::new(), RW).unwrap_err();
    assert!(matches!(e.error, provider::Error::Device { .. }), "{:?}", e.error);
    assert_eq!(e.error.errno(), nix::errno::Errno::EFAULT);
    assert!(e.mem.is_empty());
    // `?` into the provider's error.
    let f = || -> provider::Result<()> {
        l.pd.reg_owned(vec![0u8; 4], Access::REMOTE_ATOMIC)?;
        Ok(())
    };
    assert_eq!(f().unwrap_err().errno(), nix::errno::Errno::EINVAL);
}

/// A gather of 8 bytes at `addr` (key `lkey`) into the loop's buffer: the status.
fn gather(l: &mut Loop, addr: u64, lkey: u32) -> WcStatus {
    let sge = [Sge::new(addr, 8, lkey)];
    let w = SendWr::new(SendOp::RdmaWrite { raddr: l.base + BUF as u64 / 2, rkey: l.mr.rkey() }, Payload::Sgl(&sge)).signaled();
    l.qp.post_send(9, &w).unwrap();
    l.wcs(1)[0].status
}

/// Memory that, when dropped, records whether a gather through the registration of it
/// (`key`, set once registered) still works: it must not, the registration goes first.
struct Probed {
    buf: Vec<u8>,
    l: Rc<RefCell<Loop>>,
    key: Rc<Cell<Option<(u64, u32)>>>,
    seen: Rc<RefCell<Vec<WcStatus>>>,
}

// SAFETY: the Vec's buffer, which the struct never reallocates.
unsafe impl StableMemory for Probed {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr()
    }
    fn stable_len(&self) -> usize {
        self.buf.len()
    }
}

impl Drop for Probed {
    fn drop(&mut self) {
        if let Some((addr, lkey)) = self.key.get() {
            let s = gather(&mut self.l.borrow_mut(), addr, lkey);
            self.seen.borrow_mut().push(s);
        }
    }
}

#[test]
fn the_registration_is_dropped_before_the_memory() {
    let l = Rc::new(RefCell::new(Loop::new(QpType::Rc, cap())));
    let (key, seen) = (Rc::new(Cell::new(None)), Rc::new(RefCell::new(Vec::new())));
    let mem = Probed { buf: vec![0u8; 64], l: l.clone(), key: key.clone(), seen: seen.clone() };
    let pd = l.borrow().pd.clone();
    let r = pd.reg_owned(mem, Access::LOCAL_WRITE).unwrap();
    key.set(Some((r.addr(), r.lkey())));
    // While registered, the gather works (so a memory dropped first would see Success).
    assert_eq!(gather(&mut l.borrow_mut(), r.addr(), r.lkey()), WcStatus::Success);
    drop(r);
    assert_eq!(seen.borrow().as_slice(), [WcStatus::LocProtErr]);
}

#[test]
fn shared_borrows_are_read_only() {
    let mut l = Loop::new(QpType::Rc, cap());
    let data = vec![3u8; 256];
    for bad in [Access::LOCAL_WRITE, Access::LOCAL_WRITE | Access::REMOTE_WRITE, Access::LOCAL_WRITE | Access::REMOTE_ATOMIC] {
        let e = l.pd.reg_mr_shared(&data, bad).unwrap_err();
        assert_eq!(e.errno(), nix::errno::Errno::EINVAL, "{bad:?}");
    }
    let s = l.pd.reg_mr_shared(&data, Access::REMOTE_READ).unwrap();
    let also = &data[..]; // other readers meanwhile
    assert_eq!((s.addr(), s.len()), (also.as_ptr() as u64, 256));
    // Gathered from (a WRITE into the loop's buffer), and read by a peer (RDMA READ).
    let sge = [s.sge(0..8)];
    let w = SendWr::new(SendOp::RdmaWrite { raddr: l.base + 64, rkey: l.mr.rkey() }, Payload::Sgl(&sge)).signaled();
    l.qp.post_send(1, &w).unwrap();
    let into = [l.sge(128, 8)];
    let rd = SendWr::new(SendOp::RdmaRead { raddr: s.addr() + 248, rkey: s.rkey() }, Payload::Sgl(&into)).signaled();
    l.qp.post_send(2, &rd).unwrap();
    assert_eq!(l.completions(2), [1, 2]);
    assert_eq!(&l.mr[64..72], &[3u8; 8]);
    assert_eq!(&l.mr[128..136], &[3u8; 8]);
    // A peer's WRITE into it is refused by the responder (no REMOTE_WRITE).
    assert_refused(write_into(&mut l, s.addr(), s.rkey(), 8));
    drop(s);
    assert_eq!(data, vec![3u8; 256]);
}
