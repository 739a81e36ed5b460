//! Per-driver profiles: the driver data ("udata") each command needs.
//!
//! The core of every command is the same bytes on every device; what follows it is the
//! driver's. A [`Profile`] supplies that part, so one table of cases runs on rxe (which
//! wants almost nothing) and on an mlx5-style device (which wants real buffers for the
//! CQE ring, the QP buffer and the doorbell records).

use std::cell::Cell;

use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::{mlx5 as mlx5_ids, object};
use uverbs::sys::mlx5;
use uverbs::sys::verbs::QpCap;
use uverbs::{Device, Errno, Result};
use zerocopy::IntoBytes;

/// Page-aligned, zeroed, anonymous memory that stays mapped until dropped: what a
/// provider hands the device as CQE ring, QP buffer, doorbell record or MR.
#[derive(Debug)]
pub struct PageBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: plain anonymous memory owned by this value; the device accesses it only
// while the object that uses it lives, which the session guarantees.
unsafe impl Send for PageBuf {}

impl PageBuf {
    /// Maps `len` bytes rounded up to whole 4 KiB pages.
    pub fn new(len: usize) -> PageBuf {
        let len = len.max(1).div_ceil(4096) * 4096;
        // SAFETY: a fresh private anonymous mapping chosen by the kernel.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE,
                       libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert!(p != libc::MAP_FAILED, "mmap of {len} bytes failed");
        PageBuf { ptr: p.cast(), len }
    }

    /// The user address the device is given.
    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// Mapped length (whole pages).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a buffer has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The memory, for initialising it before the device sees it.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: ptr/len describe a live mapping exclusively owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for PageBuf {
    fn drop(&mut self) {
        // SAFETY: ptr/len describe a mapping this value created.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Driver data for one create command: the input bytes, the size of the driver
/// response buffer, and memory the created object will point at (kept alive by the
/// session until the end of the run).
#[derive(Debug, Default)]
pub struct DriverData {
    pub input: Vec<u8>,
    pub out_len: usize,
    pub keep: Vec<PageBuf>,
}

/// What a driver needs beyond the core command.
pub trait Profile {
    /// Short name used in expectations and reports: `rxe`, `mlx5`.
    fn name(&self) -> &'static str;
    /// GET_CONTEXT driver input, and the driver response size.
    fn context(&self) -> DriverData;
    /// Runs once on the main uverbs file right after its context exists (mlx5 with
    /// dynamic UARs allocates the UAR page its CQs and QPs will name).
    fn after_context(&self, _dev: &Device) -> Result<()> {
        Ok(())
    }
    /// ALLOC_PD driver response size.
    fn pd_out_len(&self) -> usize;
    /// Extended QUERY_DEVICE driver response size.
    fn query_device_out_len(&self) -> usize;
    /// CREATE_CQ driver data for `cqe` requested entries.
    fn cq(&self, cqe: u32) -> DriverData;
    /// CREATE_QP driver data for an RC QP with capabilities `cap` (no RQ when
    /// `max_recv_wr` is 0: a QP on an SRQ).
    fn qp(&self, cap: &QpCap) -> DriverData;
    /// CREATE_SRQ driver data for a basic SRQ of `max_wr` WQEs of `max_sge` entries.
    fn srq(&self, max_wr: u32, max_sge: u32) -> DriverData;
}

/// rxe (Soft-RoCE): no driver input at all; the driver writes the mmap info of the
/// CQ ring (16 bytes, `struct rxe_create_cq_resp`) and of the RQ and SQ (32 bytes,
/// `struct rxe_create_qp_resp`) and rejects smaller response buffers with EINVAL.
#[derive(Debug, Default)]
pub struct RxeProfile;

impl Profile for RxeProfile {
    fn name(&self) -> &'static str {
        "rxe"
    }
    fn context(&self) -> DriverData {
        DriverData::default()
    }
    fn pd_out_len(&self) -> usize {
        0
    }
    fn query_device_out_len(&self) -> usize {
        0
    }
    fn cq(&self, _cqe: u32) -> DriverData {
        DriverData { out_len: 16, ..Default::default() }
    }
    fn qp(&self, _cap: &QpCap) -> DriverData {
        DriverData { out_len: 32, ..Default::default() }
    }
    /// `struct rxe_create_srq_resp`: the ring's mmap info (16 bytes), `srq_num`, padding.
    fn srq(&self, _max_wr: u32, _max_sge: u32) -> DriverData {
        DriverData { out_len: 24, ..Default::default() }
    }
}

/// An mlx5-style device (a ConnectX, or softhca which answers like one): the driver
/// structs of `uverbs::sys::mlx5`, with real page-aligned buffers as libmlx5 would
/// allocate them.
#[derive(Debug)]
pub struct Mlx5Profile {
    /// Ask for dynamic UARs (`MLX5_LIB_CAP_DYN_UAR`, what rdma-core 44 does) and name
    /// an allocated UAR page in every CQ and QP; otherwise use static bfregs.
    pub dyn_uar: bool,
    uar_page: Cell<Option<u32>>,
    uidx: Cell<u32>,
}

impl Default for Mlx5Profile {
    fn default() -> Self {
        Mlx5Profile { dyn_uar: true, uar_page: Cell::new(None), uidx: Cell::new(1) }
    }
}

impl Mlx5Profile {
    /// A profile with static UARs (`dyn_uar` off).
    pub fn static_uars() -> Self {
        Mlx5Profile { dyn_uar: false, ..Default::default() }
    }
}

const CQE_SIZE: usize = 64;
const WQEBB: usize = 64;

impl Profile for Mlx5Profile {
    fn name(&self) -> &'static str {
        "mlx5"
    }

    fn context(&self) -> DriverData {
        let mut lib_caps = mlx5::LIB_CAP_4K_UAR;
        if self.dyn_uar {
            lib_caps |= mlx5::LIB_CAP_DYN_UAR;
        }
        let req = mlx5::AllocUcontextReqV2 {
            total_num_bfregs: 16,
            num_low_latency_bfregs: 4,
            max_cqe_version: 1,
            lib_caps,
            ..Default::default()
        };
        DriverData {
            input: req.as_bytes().to_vec(),
            out_len: std::mem::size_of::<mlx5::AllocUcontextResp>(),
            keep: Vec::new(),
        }
    }

    fn after_context(&self, dev: &Device) -> Result<()> {
        if !self.dyn_uar {
            return Ok(());
        }
        // UAR_OBJ_ALLOC: write-combining (BlueFlame) first, then non-cached, as libmlx5.
        const ATTR_HANDLE: u16 = 0x1000;
        const ATTR_TYPE: u16 = 0x1001;
        const ATTR_MMAP_OFFSET: u16 = 0x1002;
        const ATTR_MMAP_LENGTH: u16 = 0x1003;
        const ATTR_PAGE_ID: u16 = 0x1004;
        let mut last = Errno::EOPNOTSUPP;
        for ty in [0u64, 1] {
            let (mut off, mut len, mut page) = (0u64, 0u32, 0u32);
            let mut c = Ioctl::new(object::MLX5_UAR, mlx5_ids::UAR_OBJ_ALLOC);
            c.new_handle(ATTR_HANDLE);
            c.in_const(ATTR_TYPE, ty);
            c.out_struct(ATTR_MMAP_OFFSET, &mut off);
            c.out_struct(ATTR_MMAP_LENGTH, &mut len);
            c.out_struct(ATTR_PAGE_ID, &mut page);
            match c.run(dev) {
                Ok(()) => {
                    self.uar_page.set(Some(page));
                    return Ok(());
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    fn pd_out_len(&self) -> usize {
        std::mem::size_of::<mlx5::AllocPdResp>()
    }

    fn query_device_out_len(&self) -> usize {
        std::mem::size_of::<mlx5::QueryDeviceResp>()
    }

    fn cq(&self, cqe: u32) -> DriverData {
        let entries = (cqe as usize + 1).next_power_of_two();
        let mut ring = PageBuf::new(entries * CQE_SIZE);
        // An empty CQE carries opcode 0xF (invalid) in the high nibble of op_own.
        for e in ring.bytes_mut().chunks_exact_mut(CQE_SIZE) {
            e[CQE_SIZE - 1] = 0xF0;
        }
        let db = PageBuf::new(8);
        let mut cmd = mlx5::CreateCq {
            buf_addr: ring.addr(),
            db_addr: db.addr(),
            cqe_size: CQE_SIZE as u32,
            ..Default::default()
        };
        if let Some(page) = self.uar_page.get() {
            cmd.flags |= mlx5::CREATE_CQ_FLAGS_UAR_PAGE_INDEX;
            cmd.uar_page_index = page as u16;
        }
        DriverData {
            input: cmd.as_bytes().to_vec(),
            out_len: std::mem::size_of::<mlx5::CreateCqResp>(),
            keep: vec![ring, db],
        }
    }

    fn qp(&self, cap: &QpCap) -> DriverData {
        // RQ: one WQE per receive, `max_recv_sge` 16-byte data segments, a power of two.
        let rq_stride = (16 * cap.max_recv_sge.max(1) as usize).next_power_of_two();
        // None without receives (mlx5_ib's `qp_has_rq`: then count and shift must be 0).
        let rq_wqe_count = if cap.max_recv_wr == 0 { 0 } else { (cap.max_recv_wr as usize).next_power_of_two() };
        // SQ: one 64-byte basic block per send (ctrl + raddr + one data segment or
        // 16 bytes of inline data fit in one).
        let sq_wqe_count = (cap.max_send_wr.max(1) as usize).next_power_of_two();
        let buf = PageBuf::new(rq_wqe_count * rq_stride + sq_wqe_count * WQEBB);
        let db = PageBuf::new(8);
        let uidx = self.uidx.get();
        self.uidx.set(uidx + 1);
        let mut cmd = mlx5::CreateQp {
            buf_addr: buf.addr(),
            db_addr: db.addr(),
            sq_wqe_count: sq_wqe_count as u32,
            rq_wqe_count: rq_wqe_count as u32,
            rq_wqe_shift: if rq_wqe_count == 0 { 0 } else { rq_stride.trailing_zeros() },
            uidx,
            ..Default::default()
        };
        if let Some(page) = self.uar_page.get() {
            cmd.flags |= mlx5::QP_FLAG_UAR_PAGE_INDEX;
            cmd.bfreg_index = page;
        }
        DriverData {
            input: cmd.as_bytes().to_vec(),
            out_len: std::mem::size_of::<mlx5::CreateQpResp>(),
            keep: vec![buf, db],
        }
    }
    /// `struct mlx5_ib_create_srq` as libmlx5 fills it: the WQE buffer
    /// (`roundup_pow_of_two(max_wr + 1)` WQEs of `16 + 16 * max_sge` bytes rounded up to
    /// a power of two, at least 32) and the doorbell record.
    fn srq(&self, max_wr: u32, max_sge: u32) -> DriverData {
        let count = (max_wr as usize + 1).next_power_of_two();
        let stride = (16 + 16 * max_sge as usize).next_power_of_two().max(32);
        let buf = PageBuf::new(count * stride);
        let db = PageBuf::new(8);
        let cmd = mlx5::CreateSrq { buf_addr: buf.addr(), db_addr: db.addr(), ..Default::default() };
        DriverData {
            input: cmd.as_bytes().to_vec(),
            out_len: std::mem::size_of::<mlx5::CreateSrqResp>(),
            keep: vec![buf, db],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_buffers_are_aligned_and_zeroed() {
        let mut b = PageBuf::new(100);
        assert_eq!(b.addr() % 4096, 0);
        assert_eq!(b.len(), 4096);
        assert!(b.bytes_mut().iter().all(|&x| x == 0));
    }

    #[test]
    fn mlx5_qp_data_names_the_buffers() {
        let p = Mlx5Profile::static_uars();
        let cap = QpCap { max_send_wr: 10, max_recv_wr: 3, max_send_sge: 1, max_recv_sge: 2, max_inline_data: 16 };
        let d = p.qp(&cap);
        assert_eq!(d.input.len(), 56);
        let cmd: mlx5::CreateQp = zerocopy::FromBytes::read_from_bytes(&d.input[..]).unwrap();
        assert_eq!(cmd.sq_wqe_count, 16);
        assert_eq!(cmd.rq_wqe_count, 4);
        assert_eq!(cmd.rq_wqe_shift, 5);
        assert_eq!(cmd.buf_addr, d.keep[0].addr());
        assert_eq!(cmd.db_addr, d.keep[1].addr());
        assert!(d.keep[0].len() >= 4 * 32 + 16 * 64);
        assert_eq!(cmd.flags, 0);
    }

    #[test]
    fn mlx5_cq_ring_is_initialised_invalid() {
        let p = Mlx5Profile::static_uars();
        let mut d = p.cq(15);
        let cmd: mlx5::CreateCq = zerocopy::FromBytes::read_from_bytes(&d.input[..]).unwrap();
        assert_eq!(cmd.cqe_size, 64);
        assert_eq!(cmd.buf_addr, d.keep[0].addr());
        let ring = d.keep[0].bytes_mut();
        assert_eq!(ring[63], 0xF0);
        assert_eq!(ring[16 * 64 - 1], 0xF0);
    }
}
