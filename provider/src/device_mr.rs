//! Registration of another device's memory by address: GPU memory that the kernel's
//! peer-memory client (nvidia-peermem) pins for the NIC on `ibv_reg_mr`, the legacy
//! GPUDirect RDMA path that dma-buf MRs ([`crate::Pd::reg_dmabuf_mr`]) replace.
//!
//! The CPU never touches such memory (a CUDA device pointer is an address it faults
//! on), so a [`DeviceMr`] hands out no bytes, only the registration; it owns the value
//! that owns the allocation, so the allocation outlives the registration, which the
//! peer-memory client needs: it revokes the NIC's mapping when the memory is freed, but
//! a registration over freed memory is a dead MR.

use crate::error::Error;
use crate::mr::{Access, Mr};
use crate::owned_mr::RegError;
use crate::pd::Pd;

/// A value that owns `device_len()` bytes of another device's memory at
/// `device_addr()`, an address of this process's unified virtual address space.
///
/// # Safety
/// An implementation promises, for as long as the value lives: the range is memory of
/// a device (not host memory the program uses, which a registration could let peers
/// write), it stays allocated and is not handed to other owners, and both methods
/// return the same values every time, also after the value has been moved.
pub unsafe trait DeviceMemory {
    /// The first byte, as the device's driver names it (a CUDA device pointer).
    fn device_addr(&self) -> u64;

    /// How many bytes from [`DeviceMemory::device_addr`].
    fn device_len(&self) -> usize;
}

/// A registration of device memory `M`, owned with it. No bytes: the CPU cannot reach
/// them.
pub struct DeviceMr<M: DeviceMemory> {
    // Field order is drop order: deregister first, then free the memory.
    mr: Mr,
    mem: M,
}

impl Pd {
    /// `ibv_reg_mr` of all of `mem` (the peer-memory path), which the returned region
    /// owns until [`DeviceMr::into_inner`] or drop. Kernels without a peer-memory client
    /// for the device refuse it (EFAULT from the pin); softhca always does (it cannot
    /// pin GPU memory; register a dma-buf instead).
    pub fn reg_device<M: DeviceMemory>(&self, mem: M, access: Access) -> std::result::Result<DeviceMr<M>, RegError<M>> {
        let (addr, len) = (mem.device_addr(), mem.device_len());
        if addr == 0 || len == 0 {
            let error = Error::Invalid { op: "reg_mr", why: format!("device memory of {len} bytes at {addr:#x}") };
            return Err(RegError { error, mem });
        }
        // SAFETY: the range is device memory that `mem` keeps allocated while it lives
        // (DeviceMemory), and the region owns `mem` and drops the registration first; the
        // CPU is never given access through it.
        match unsafe { self.reg_mr_raw(addr as *mut u8, len, access) } {
            Ok(mr) => Ok(DeviceMr { mr, mem }),
            Err(error) => Err(RegError { error, mem }),
        }
    }
}

impl<M: DeviceMemory> DeviceMr<M> {
    /// The registration (keys, address, length).
    pub fn mr(&self) -> &Mr {
        &self.mr
    }

    /// The memory's owner (to copy to and from it with the device's own calls).
    pub fn get_ref(&self) -> &M {
        &self.mem
    }

    /// Deregisters and gives the memory back.
    pub fn into_inner(self) -> M {
        let DeviceMr { mr, mem } = self;
        drop(mr);
        mem
    }
}

impl<M: DeviceMemory> std::fmt::Debug for DeviceMr<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceMr").field("addr", &format_args!("{:#x}", self.mr.addr())).field("len", &self.mr.len())
            .field("lkey", &format_args!("{:#x}", self.mr.lkey())).finish()
    }
}
