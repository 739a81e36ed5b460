//! The memory behind one end's MR: host pages (the default) or GPU memory
//! (`--use-cuda`), and the CPU's way to fill and inspect it between runs.
//!
//! Host memory is touched in place. GPU memory cannot be reached by the CPU at all (a
//! CUDA device pointer is an address the CPU faults on), so the same calls go through
//! a pinned staging buffer and a CUDA copy; either way they run only between sizes,
//! when no transfer is in flight.

use anyhow::{Context as _, Result};
use provider::buf::DmaBuf;
use provider::{Access, Context, Mr, Pd};

use super::gpu::GpuMem;
use super::opts::Opts;

pub enum Memory {
    Host(DmaBuf),
    Gpu(GpuMem),
}

impl Memory {
    /// `len` bytes of the kind `o` asks for; GPU memory gets a staging buffer of
    /// `stage` bytes (the largest piece filled or inspected at once).
    pub fn new(o: &Opts, len: usize, stage: usize) -> Result<Memory> {
        match o.use_cuda {
            None => Ok(Memory::Host(DmaBuf::new(len).map_err(|e| anyhow::anyhow!("allocate {len} bytes: {e}"))?)),
            Some(n) => Ok(Memory::Gpu(GpuMem::new(n, len, stage, o.use_cuda_dmabuf).with_context(|| format!("GPU {n} memory"))?)),
        }
    }

    /// The address work requests use for byte 0: the process address of host memory,
    /// the device address (the MR's iova) of GPU memory.
    pub fn addr(&self) -> u64 {
        match self {
            Memory::Host(b) => b.addr(),
            Memory::Gpu(g) => g.addr(),
        }
    }

    /// Bytes the benchmark uses.
    pub fn len(&self) -> usize {
        match self {
            Memory::Host(b) => b.len(),
            Memory::Gpu(g) => g.len(),
        }
    }

    /// The CPU pointer to byte 0 (host memory only).
    pub fn host_ptr(&self) -> Option<*mut u8> {
        match self {
            Memory::Host(b) => Some(b.as_ptr()),
            Memory::Gpu(_) => None,
        }
    }

    pub fn gpu(&self) -> Option<&GpuMem> {
        match self {
            Memory::Host(_) => None,
            Memory::Gpu(g) => Some(g),
        }
    }

    /// Registers the whole buffer with `access`.
    ///
    /// # Safety
    /// The MR must be dropped before this memory (the owner declares it first).
    pub unsafe fn register(&self, ctx: &Context, pd: &Pd, access: Access) -> Result<Mr> {
        match self {
            // SAFETY: the caller drops the MR before the buffer is unmapped.
            Memory::Host(b) => Ok(unsafe { pd.reg_mr_raw(b.as_ptr(), b.len(), access) }?),
            // SAFETY: as above.
            Memory::Gpu(g) => unsafe { g.register(ctx, pd, access) },
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
                f(unsafe { std::slice::from_raw_parts_mut(b.as_ptr().add(off), len) });
                Ok(())
            }
            Memory::Gpu(g) => g.fill(off, len, f),
        }
    }

    /// Lets `f` read bytes `off..off + len` (as [`Memory::fill`]).
    pub fn inspect<R>(&self, off: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        anyhow::ensure!(off.checked_add(len).is_some_and(|e| e <= self.len()), "read of {len} bytes at {off} past the buffer");
        match self {
            // SAFETY: as in `fill`.
            Memory::Host(b) => Ok(f(unsafe { std::slice::from_raw_parts(b.as_ptr().add(off), len) })),
            Memory::Gpu(g) => g.inspect(off, len, f),
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
        let m = Memory::Host(DmaBuf::new(8192).unwrap());
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
