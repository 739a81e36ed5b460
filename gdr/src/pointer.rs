//! What CUDA says about an address (`cuPointerGetAttribute`): whether it is device
//! memory, which allocation it is in, and whose it is.
//!
//! The resolver uses this to check the iova convention (the iova of a GPU dma-buf MR is
//! the device address of its first byte, as perftest and NCCL register it) before
//! softhca copies to an address a caller merely claimed.

use std::ffi::c_void;

use cudarc::driver::sys;

use crate::error::{CudaCall, Result};

/// The attributes of one address that matter for peer copies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtrInfo {
    /// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` is `CU_MEMORYTYPE_DEVICE`.
    pub device: bool,
    /// `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR`: the allocation's first byte.
    pub range_start: u64,
    /// `CU_POINTER_ATTRIBUTE_RANGE_SIZE`: the allocation's length.
    pub range_size: u64,
    /// `CU_POINTER_ATTRIBUTE_CONTEXT`, as an integer (0: none, as for memory mapped with
    /// the virtual memory API, `cuMemCreate`/`cuMemMap`, which belongs to no context).
    pub context: usize,
    /// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL`.
    pub ordinal: i32,
}

impl PtrInfo {
    /// Whether `[addr, addr + len)` lies inside the allocation, its end rounded up to
    /// the host page `page` (a dma-buf is made of whole host pages, so an MR over a
    /// small allocation may end in the rest of its last page).
    pub fn covers(&self, addr: u64, len: u64, page: u64) -> bool {
        let Some(end) = addr.checked_add(len) else { return false };
        let Some(range_end) = self.range_start.checked_add(self.range_size).and_then(|e| e.checked_next_multiple_of(page)) else {
            return false;
        };
        addr >= self.range_start && end <= range_end
    }
}

/// `cuPointerGetAttribute` of one attribute into a `T`.
///
/// # Safety
/// `T` must be the type the driver writes for `attr` (documented per attribute).
unsafe fn get<T: Default>(addr: u64, attr: sys::CUpointer_attribute) -> Result<T> {
    let mut v = T::default();
    // SAFETY: the driver writes one value of the attribute's type, which the caller
    // guarantees `T` is, into `v`.
    unsafe { sys::cuPointerGetAttribute((&mut v as *mut T).cast::<c_void>(), attr, addr) }
        .result()
        .call("cuPointerGetAttribute")?;
    Ok(v)
}

/// Queries `addr`. An address CUDA does not know (host memory never registered, an
/// address of another process) is an error (`CUDA_ERROR_INVALID_VALUE`).
pub fn query(addr: u64) -> Result<PtrInfo> {
    crate::cuda::probe()?;
    use sys::CUpointer_attribute as A;
    // SAFETY (each call): the types are the documented ones: MEMORY_TYPE an unsigned
    // int holding a CUmemorytype, RANGE_START_ADDR a CUdeviceptr (u64), RANGE_SIZE a
    // size_t, CONTEXT a CUcontext (a pointer, read as usize), DEVICE_ORDINAL an int.
    // SAFETY: see "SAFETY (each call)" above.
    let mem_type: u32 = unsafe { get(addr, A::CU_POINTER_ATTRIBUTE_MEMORY_TYPE) }?;
    // SAFETY: as above.
    let range_start: u64 = unsafe { get(addr, A::CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) }?;
    // SAFETY: as above.
    let range_size: usize = unsafe { get(addr, A::CU_POINTER_ATTRIBUTE_RANGE_SIZE) }?;
    // Not every kind of device memory has a context to report: treat a refusal as none.
    // SAFETY: as above.
    let context: usize = unsafe { get(addr, A::CU_POINTER_ATTRIBUTE_CONTEXT) }.unwrap_or(0);
    // SAFETY: as above.
    let ordinal: i32 = unsafe { get(addr, A::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) }?;
    Ok(PtrInfo {
        device: mem_type == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32,
        range_start,
        range_size: range_size as u64,
        context,
        ordinal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An allocation of 0x20000 bytes at 0x7000_0000_0000 (hand-picked numbers):
    /// covers its own first and last byte, not one byte before or after, and an
    /// overflowing length is refused rather than wrapped. One of 1000 bytes covers the
    /// rest of its 4 KiB page (what a dma-buf of it spans), not the next page.
    #[test]
    fn covers_is_inclusive_of_the_allocation_only() {
        let p = PtrInfo { device: true, range_start: 0x7000_0000_0000, range_size: 0x20000, context: 1, ordinal: 0 };
        assert!(p.covers(0x7000_0000_0000, 0x20000, 4096));
        assert!(p.covers(0x7000_0001_0000, 0x10000, 4096));
        assert!(p.covers(0x7000_0001_ffff, 1, 4096));
        assert!(!p.covers(0x7000_0001_ffff, 2, 4096));
        assert!(!p.covers(0x6fff_ffff_ffff, 1, 4096));
        assert!(!p.covers(0x7000_0000_1000, u64::MAX, 4096));
        let small = PtrInfo { range_size: 1000, ..p };
        assert!(small.covers(0x7000_0000_0000, 4096, 4096));
        assert!(!small.covers(0x7000_0000_0000, 4097, 4096));
    }
}
