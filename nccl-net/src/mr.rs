//! Memory handles: a registration on the device of the comm it was made for.
//!
//! NCCL hands regMr a pointer and a length, and promises (the plugin contract, net.h)
//! to keep the buffer allocated until it calls deregMr with the handle. [`NcclBuffer`]
//! is that promise as a type: made once in regMr, where the promise is given, and then
//! owned by the registration, which deregMr drops.

use provider::{DeviceMemory, DeviceMr, Mr, OwnedMr, StableMemory};

/// A buffer NCCL registered: host memory (`NCCL_PTR_HOST`) or a CUDA device pointer
/// (`NCCL_PTR_CUDA`, registered on the peer-memory path).
pub struct NcclBuffer {
    addr: u64,
    len: usize,
}

impl NcclBuffer {
    /// # Safety
    /// `[addr, addr + len)` must be a buffer NCCL passed to regMr (host memory when it is
    /// registered as [`StableMemory`], device memory when as [`DeviceMemory`]), which it
    /// keeps allocated, and does not reuse for anything else, until the handle made from
    /// it is given to deregMr: the handle owns the value and drops it there.
    pub unsafe fn new(addr: u64, len: usize) -> NcclBuffer {
        NcclBuffer { addr, len }
    }
}

// SAFETY: NcclBuffer::new's contract: the bytes stay allocated at this address until
// the handle (the only owner of the value) is dropped in deregMr; the address does not
// depend on where the value is. NCCL and its kernels read and write the buffer while it
// is registered, as the device does: the plugin never reads it through the registration.
unsafe impl StableMemory for NcclBuffer {
    fn stable_ptr(&mut self) -> *mut u8 {
        self.addr as *mut u8
    }
    fn stable_len(&self) -> usize {
        self.len
    }
}

// SAFETY: as above, for a CUDA device pointer NCCL registered as NCCL_PTR_CUDA.
unsafe impl DeviceMemory for NcclBuffer {
    fn device_addr(&self) -> u64 {
        self.addr
    }
    fn device_len(&self) -> usize {
        self.len
    }
}

/// How a handle's memory is registered.
pub enum Registration {
    /// regMr of host memory.
    Host(OwnedMr<NcclBuffer>),
    /// regMr of a CUDA pointer (peer memory).
    Device(DeviceMr<NcclBuffer>),
    /// regMrDmaBuf: the kernel holds the dma-buf.
    DmaBuf(Mr),
}

/// What regMr hands NCCL (through [`crate::live`]).
pub struct MrHandle {
    pub reg: Registration,
    /// The device index, so that a handle is only used on comms of its device.
    pub dev: usize,
}

impl MrHandle {
    /// The registration's keys and range.
    pub fn mr(&self) -> &Mr {
        match &self.reg {
            Registration::Host(m) => m.mr(),
            Registration::Device(m) => m.mr(),
            Registration::DmaBuf(m) => m,
        }
    }
}

// SAFETY: an Mr is a handle number and keys; destroying it is an ioctl on the
// device's fd, which may come from any thread; an NcclBuffer is an address and a
// length that the plugin never dereferences.
unsafe impl Send for MrHandle {}
// SAFETY: as above; nothing in it is mutated after creation.
unsafe impl Sync for MrHandle {}
