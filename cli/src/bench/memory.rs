//! The memory behind one end's MR: host pages (the default) or GPU memory
//! (`--use-cuda`), and the CPU's way to fill and inspect it between runs.
//!
//! Host memory is touched in place. GPU memory cannot be reached by the CPU at all (a
//! CUDA device pointer is an address the CPU faults on), so the same calls go through
//! a pinned staging buffer and a CUDA copy; either way they run only between sizes,
//! when no transfer is in flight.

use anyhow::{Context as _, Result};
use provider::{Access, Context, MemoryRegion, Mr, Pd};

use super::gpu::{GpuMem, GpuMr};
use super::opts::Opts;

/// The memory and its registration, owned together.
pub enum Memory {
    /// Host pages registered with `ibv_reg_mr`, freed after deregistration.
    Host(MemoryRegion),
    /// GPU memory and its MR, owned together.
    Gpu(GpuMr),
}

impl Memory {
    /// `len` bytes of the kind `o` asks for, registered on `pd` with `access`; GPU
    /// memory gets a staging buffer of `stage` bytes (the largest piece filled or
    /// inspected at once).
    pub fn new(o: &Opts, ctx: &Context, pd: &Pd, len: usize, stage: usize, access: Access) -> Result<Memory> {
        match o.use_cuda {
            None => Ok(Memory::Host(pd.alloc_mr(len, access).with_context(|| format!("register {len} bytes of host memory"))?)),
            Some(n) => {
                let mem = GpuMem::new(n, len, stage, o.use_cuda_dmabuf).with_context(|| format!("GPU {n} memory"))?;
                Ok(Memory::Gpu(mem.register(ctx, pd, access)?))
            }
        }
    }

    /// The registration covering the whole buffer.
    pub fn mr(&self) -> &Mr {
        match self {
            Memory::Host(r) => r.mr(),
            Memory::Gpu(g) => g.mr(),
        }
    }

    /// The address work requests use for byte 0: the process address of host memory,
    /// the device address (the MR's iova) of GPU memory.
    pub fn addr(&self) -> u64 {
        match self {
            Memory::Host(b) => b.addr(),
            Memory::Gpu(g) => g.mem().addr(),
        }
    }

    /// Bytes the benchmark uses.
    pub fn len(&self) -> usize {
        match self {
            Memory::Host(b) => b.len(),
            Memory::Gpu(g) => g.mem().len(),
        }
    }

    /// The CPU pointer to byte 0 (host memory only).
    pub fn host_ptr(&self) -> Option<*mut u8> {
        match self {
            Memory::Host(b) => Some(b.ptr()),
            Memory::Gpu(_) => None,
        }
    }

    pub fn gpu(&self) -> Option<&GpuMem> {
        match self {
            Memory::Host(_) => None,
            Memory::Gpu(g) => Some(g.mem()),
        }
    }

    /// Lets `f` write bytes `off..off + len` (bounds checked; the caller makes sure no
    /// transfer touches them meanwhile).
    pub fn fill(&self, off: usize, len: usize, f: impl FnOnce(&mut [u8])) -> Result<()> {
        anyhow::ensure!(off.checked_add(len).is_some_and(|e| e <= self.len()), "fill of {len} bytes at {off} past the buffer");
        match self {
            Memory::Host(b) => {
                // SAFETY: in bounds (checked above) of memory this buffer owns; nothing is
                // in flight between sizes, which is when the benchmark calls this.
                f(unsafe { std::slice::from_raw_parts_mut(b.ptr().add(off), len) });
                Ok(())
            }
            Memory::Gpu(g) => g.mem().fill(off, len, f),
        }
    }

    /// Lets `f` read bytes `off..off + len` (as [`Memory::fill`]).
    pub fn inspect<R>(&self, off: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        anyhow::ensure!(off.checked_add(len).is_some_and(|e| e <= self.len()), "read of {len} bytes at {off} past the buffer");
        match self {
            // SAFETY: as in `fill`.
            Memory::Host(b) => Ok(f(unsafe { std::slice::from_raw_parts(b.ptr().add(off), len) })),
            Memory::Gpu(g) => g.mem().inspect(off, len, f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Host memory is filled and read in place, at the offset asked, and a range past
    /// the end (or one whose end overflows) is an error, not a write.
    #[test]
    fn host_fill_and_inspect_in_bounds_only() {
        let ctx = Context::open(None).expect("embedded softhca");
        let pd = ctx.alloc_pd().unwrap();
        let m = Memory::Host(pd.alloc_mr(8192, Access::LOCAL_WRITE).unwrap());
        assert_eq!(m.mr().len(), 8192);
        assert_eq!((m.len(), m.addr()), (8192, m.host_ptr().unwrap() as u64));
        m.fill(4096, 3, |b| b.copy_from_slice(&[1, 2, 3])).unwrap();
        // SAFETY: in bounds of the 8192-byte buffer, nothing else touches it.
        assert_eq!(unsafe { std::slice::from_raw_parts(m.host_ptr().unwrap().add(4095), 5) }, [0, 1, 2, 3, 0]);
        assert_eq!(m.inspect(4096, 3, |b| b.to_vec()).unwrap(), [1, 2, 3]);
        assert!(m.fill(8190, 3, |_| panic!("must not run")).is_err());
        assert!(m.inspect(usize::MAX, 2, |_| panic!("must not run")).is_err());
        m.fill(8192, 0, |b| assert!(b.is_empty())).unwrap();
    }
}
