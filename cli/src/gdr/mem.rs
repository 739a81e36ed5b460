//! The memory `doorbell gdr verify` registers and checks: GPU memory behind a dma-buf
//! MR (the point of the command), or host memory behind a plain MR (`--mem host`: the
//! same steps without a GPU, so the whole command runs in CI).
//!
//! Every access from this process goes through [`Mem::write`] and [`Mem::read_all`]
//! (CUDA copies for GPU memory), never through a pointer: the checks see what the
//! device put in memory, by the same path a GPU program would.

use std::fmt;

use anyhow::{anyhow, bail, Context as _, Result};
use provider::buf::DmaBuf;
use provider::{Access, Mr, Pd};

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
    Host(DmaBuf),
}

/// One buffer and its address as work requests name it.
pub struct Mem {
    backing: Backing,
    len: usize,
}

/// Access rights of every MR verify makes.
pub const ACCESS: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE).union(Access::REMOTE_READ).union(Access::REMOTE_ATOMIC);

impl Mem {
    /// `len` bytes of `kind` (GPU memory on `gpu`), zeroed.
    pub fn new(kind: Kind, len: usize, gpu: Option<&Gpu>) -> Result<Mem> {
        let backing = match kind {
            Kind::Gpu => {
                let gpu = gpu.ok_or_else(|| anyhow!("GPU memory needs a GPU"))?;
                Backing::Gpu(GpuBuffer::new(gpu, len).with_context(|| format!("allocate {len} bytes on GPU {}", gpu.ordinal()))?)
            }
            Kind::Host => Backing::Host(DmaBuf::new(len).map_err(|e| anyhow!("allocate {len} bytes of host memory: {e}"))?),
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

    /// Registers the whole buffer on `pd`; returns the MR and how it was registered.
    ///
    /// The MR must be dropped before this `Mem` (the callers keep it in a field
    /// declared earlier).
    pub fn register(&self, pd: &Pd) -> Result<(Mr, String)> {
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
                Ok((mr, how))
            }
            Backing::Host(b) => {
                // SAFETY: the callers drop the MR before this Mem (see the doc above), so
                // the memory outlives the registration.
                let mr = unsafe { pd.reg_mr_raw(b.as_ptr(), self.len, ACCESS) }.context("ibv_reg_mr of the host buffer")?;
                let how = format!("ibv_reg_mr(addr {:#x}, length {}), rkey {:#x}", b.addr(), self.len, mr.rkey());
                Ok((mr, how))
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
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), b.as_ptr().add(off), data.len()) };
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
                    *x = unsafe { std::ptr::read_volatile(b.as_ptr().add(i)) };
                }
                Ok(v)
            }
        }
    }
}
