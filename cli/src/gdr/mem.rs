//! The memory `doorbell gdr verify` registers and checks: GPU memory behind a dma-buf
//! MR (the point of the command), or host memory behind a plain MR (`--mem host`: the
//! same steps without a GPU, so the whole command runs in CI).
//!
//! Every access from this process goes through [`Mem::write`] and [`Mem::read_all`]
//! (CUDA copies for GPU memory), never through a pointer: the checks see what the
//! device put in memory, by the same path a GPU program would.

use std::fmt;

use anyhow::{anyhow, bail, Context as _, Result};
use provider::{Access, MemoryRegion, Mr, Pd};

use gdr::buffer::GpuBuffer;
use gdr::cuda::Gpu;

/// Which memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// CUDA device memory, registered as a dma-buf MR (ibv_reg_dmabuf_mr).
    Gpu,
    /// Host memory, registered with ibv_reg_mr.
    Host,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Gpu => "gpu",
            Kind::Host => "host",
        })
    }
}

impl Kind {
    /// How the report names it.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Gpu => "GPU memory",
            Kind::Host => "host memory",
        }
    }
}

enum Backing {
    Gpu(GpuBuffer),
    /// Host pages and their registration, made together ([`Pd::alloc_mr`]).
    Host(MemoryRegion),
}

/// The registration [`Mem::register`] hands out: a dma-buf MR of GPU memory, or the
/// host memory's own registration, borrowed (so it cannot outlive the memory).
pub enum MemMr<'m> {
    Gpu(Mr),
    Host(&'m Mr),
}

impl std::ops::Deref for MemMr<'_> {
    type Target = Mr;
    fn deref(&self) -> &Mr {
        match self {
            MemMr::Gpu(mr) => mr,
            MemMr::Host(mr) => mr,
        }
    }
}

/// One buffer and its address as work requests name it.
pub struct Mem {
    backing: Backing,
    len: usize,
}

/// Access rights of every MR verify makes.
pub const ACCESS: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE).union(Access::REMOTE_READ).union(Access::REMOTE_ATOMIC);

impl Mem {
    /// `len` bytes of `kind` (GPU memory on `gpu`), zeroed; host memory is registered
    /// on `pd` at once (GPU memory by [`Mem::register`]).
    pub fn new(kind: Kind, len: usize, gpu: Option<&Gpu>, pd: &Pd) -> Result<Mem> {
        let backing = match kind {
            Kind::Gpu => {
                let gpu = gpu.ok_or_else(|| anyhow!("GPU memory needs a GPU"))?;
                Backing::Gpu(GpuBuffer::new(gpu, len).with_context(|| format!("allocate {len} bytes on GPU {}", gpu.ordinal()))?)
            }
            Kind::Host => Backing::Host(pd.alloc_mr(len, ACCESS).with_context(|| format!("allocate and register {len} bytes of host memory"))?),
        };
        Ok(Mem { backing, len })
    }

    pub fn kind(&self) -> Kind {
        match self.backing {
            Backing::Gpu(_) => Kind::Gpu,
            Backing::Host(_) => Kind::Host,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// The address of byte 0 as work requests and peers name it: the device pointer
    /// (the MR's iova) or the process address.
    pub fn addr(&self) -> u64 {
        match &self.backing {
            Backing::Gpu(b) => b.device_ptr(),
            Backing::Host(b) => b.addr(),
        }
    }

    /// The registration of the whole buffer on `pd` (GPU memory: a new dma-buf MR;
    /// host memory: the one made with it in [`Mem::new`]) and how it was registered.
    pub fn register(&self, pd: &Pd) -> Result<(MemMr<'_>, String)> {
        match &self.backing {
            Backing::Gpu(b) => {
                let e = b.export_dmabuf(0, self.len).context("export the GPU buffer as a dma-buf")?;
                let mr = pd
                    .reg_dmabuf_mr(e.fd(), e.offset, self.len, e.iova, ACCESS)
                    .context("ibv_reg_dmabuf_mr of the GPU buffer")?;
                let how = format!(
                    "dma-buf of {} B (cuMemGetHandleForAddressRange), ibv_reg_dmabuf_mr(offset {}, length {}, iova {:#x}), rkey {:#x}",
                    e.size,
                    e.offset,
                    self.len,
                    e.iova,
                    mr.rkey()
                );
                // The registration holds its own reference: the fd is closed here.
                drop(e);
                Ok((MemMr::Gpu(mr), how))
            }
            Backing::Host(b) => {
                let how = format!("ibv_reg_mr(addr {:#x}, length {}), rkey {:#x}", b.addr(), self.len, b.rkey());
                Ok((MemMr::Host(b.mr()), how))
            }
        }
    }

    /// Copies `data` to byte `off` (no transfer may be in flight on these bytes).
    pub fn write(&self, off: usize, data: &[u8]) -> Result<()> {
        if off.checked_add(data.len()).is_none_or(|end| end > self.len) {
            bail!("{} bytes at {off} are outside the {}-byte buffer", data.len(), self.len);
        }
        match &self.backing {
            Backing::Gpu(b) => Ok(b.copy_from_host(off, data)?),
            Backing::Host(b) => {
                // SAFETY: in bounds (checked); no device access to these bytes is in flight
                // (the steps only write between transfers).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.ptr().add(off), data.len()) };
                Ok(())
            }
        }
    }

    /// Fills the whole buffer with `byte`.
    pub fn fill(&self, byte: u8) -> Result<()> {
        self.write(0, &vec![byte; self.len])
    }

    /// A copy of the whole buffer, as the device left it.
    pub fn read_all(&self) -> Result<Vec<u8>> {
        match &self.backing {
            Backing::Gpu(b) => Ok(b.to_vec()?),
            Backing::Host(b) => {
                let mut v = vec![0u8; self.len];
                // SAFETY: `len` bytes of the mapping; read with volatile loads, as the
                // device may have written them from another thread (its completion was
                // seen before this call, which orders the writes).
                for (i, x) in v.iter_mut().enumerate() {
                    // SAFETY: see the SAFETY comment before the loop.
                    *x = unsafe { std::ptr::read_volatile(b.ptr().add(i)) };
                }
                Ok(v)
            }
        }
    }
}
