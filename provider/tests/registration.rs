//! Safe registration on the embedded softhca: memory the region owns (`Pd::alloc_mr`)
//! and memory borrowed for the registration's lifetime (`Pd::reg_mr`), with SGEs for
//! sub-slices. The device is the judge: RDMA moves bytes between the regions, and an
//! access past a registration fails as on a ConnectX (local protection error),
//! so the registration covers exactly the bytes asked for.

mod common;

use common::{Loop, BUF};
use provider::cqe::WcStatus;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, QpType};

fn cap() -> QpCap {
    QpCap { max_send_wr: 16, max_recv_wr: 16, max_send_sge: 2, max_recv_sge: 2, max_inline_data: 32 }
}

#[test]
fn alloc_mr_is_zeroed_page_aligned_and_exactly_registered() {
    let mut l = Loop::new(QpType::Rc, cap());
    let len = 5000; // not a whole number of pages
    let mut r = l.pd.alloc_mr(len, Access::LOCAL_WRITE | Access::REMOTE_WRITE).unwrap();
    assert_eq!(r.len(), len);
    assert_eq!(r.mr().len(), len);
    assert_eq!(r.addr() % 4096, 0);
    assert_eq!(r.addr(), r.ptr() as u64);
    assert!(r.iter().all(|&b| b == 0));
    r[..16].copy_from_slice(b"doorbell-region!");

    // WRITE r[0..16] -> r[4096..4112] through SGEs for the sub-slices.
    let src = [r.sge(0..16)];
    assert_eq!((src[0].addr, src[0].length, src[0].lkey), (r.addr(), 16, r.lkey()));
    let w = SendWr::new(SendOp::RdmaWrite { raddr: r.addr() + 4096, rkey: r.rkey() }, Payload::Sgl(&src)).signaled();
    l.qp.post_send(1, &w).unwrap();
    assert_eq!(l.completions(1), [1]);
    assert_eq!(&r[4096..4112], b"doorbell-region!");

    // Gathering 8 bytes at len - 4: four of them past the registration (but inside
    // the mapping, which is whole pages): the requester's lkey check refuses it.
    assert!(r.get_sge(len - 4..len + 4).is_none());
    let past = [provider::wqe::Sge::new(r.addr() + len as u64 - 4, 8, r.lkey())];
    let w = SendWr::new(SendOp::RdmaWrite { raddr: r.addr() + 4096, rkey: r.rkey() }, Payload::Sgl(&past)).signaled();
    l.qp.post_send(2, &w).unwrap();
    let wc = l.wcs(1);
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::LocProtErr), "{wc:?}");
}

#[test]
fn sges_for_sub_slices() {
    let l = Loop::new(QpType::Rc, cap());
    let r = l.pd.alloc_mr(100, Access::LOCAL_WRITE).unwrap();
    let a = r.addr();
    assert_eq!(r.sge(..).addr, a);
    assert_eq!(r.sge(..).length, 100);
    assert_eq!((r.sge(10..).addr, r.sge(10..).length), (a + 10, 90));
    assert_eq!((r.sge(10..=19).addr, r.sge(10..=19).length), (a + 10, 10));
    assert_eq!(r.sge(100..).length, 0);
    assert!(r.get_sge(0..101).is_none());
    assert!(r.get_sge(101..).is_none());
    #[allow(clippy::reversed_empty_ranges)]
    let backwards = r.get_sge(20..10);
    assert!(backwards.is_none());
    assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| r.sge(50..101))).is_err());
    // The same rules on the bare registration.
    assert_eq!(r.mr().get_sge(0..8), Some(r.sge(0..8)));
}

#[test]
fn borrowed_buffer_is_written_by_the_device_and_returned() {
    let mut l = Loop::new(QpType::Rc, cap());
    let mut mine = vec![0u8; 256];
    {
        let mut b = l.pd.reg_mr(&mut mine, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).unwrap();
        assert_eq!(b.addr(), b.ptr() as u64);
        assert_eq!(b.len(), 256);
        b[200..208].copy_from_slice(b"borrowed");
        // The loop's region READs b[200..208] into its own bytes 0..8, then WRITEs its
        // bytes 8..16 (set below) into b[0..8]: both directions through the borrow.
        l.mr[8..16].copy_from_slice(b"returned");
        let into_loop = [l.mr.sge(0..8)];
        let from_loop = [l.mr.sge(8..16)];
        let read = SendWr::new(SendOp::RdmaRead { raddr: b.addr() + 200, rkey: b.rkey() }, Payload::Sgl(&into_loop)).signaled();
        let write = SendWr::new(SendOp::RdmaWrite { raddr: b.addr(), rkey: b.rkey() }, Payload::Sgl(&from_loop)).signaled();
        l.qp.post_send_list(&[(1, read), (2, write)]).unwrap();
        assert_eq!(l.completions(2), [1, 2]);
        assert_eq!(&l.mr[..8], b"borrowed");
        assert_eq!(&b[..8], b"returned");
        // Gather from the borrowed buffer with two SGEs of it.
        let two = [b.sge(0..4), b.sge(200..204)];
        let w = SendWr::new(SendOp::RdmaWrite { raddr: l.base + BUF as u64 / 2, rkey: l.mr.rkey() }, Payload::Sgl(&two)).signaled();
        l.qp.post_send(3, &w).unwrap();
        assert_eq!(l.completions(1), [3]);
        assert_eq!(&l.mr[BUF / 2..BUF / 2 + 8], b"retuborr");
    } // deregistered here; the borrow ends
    assert_eq!(&mine[..8], b"returned");
    assert_eq!(&mine[200..208], b"borrowed");
}

#[test]
fn remote_write_needs_local_write() {
    // The check ibv_reg_mr (and the kernel) make, on every registration kind.
    let l = Loop::new(QpType::Rc, cap());
    let e = l.pd.alloc_mr(64, Access::REMOTE_WRITE).unwrap_err();
    assert_eq!(e.errno(), nix::errno::Errno::EINVAL);
    let mut v = [0u8; 64];
    let e = l.pd.reg_mr(&mut v, Access::REMOTE_ATOMIC).unwrap_err();
    assert_eq!(e.errno(), nix::errno::Errno::EINVAL);
}
