//! `--use-cuda N [--use-cuda-dmabuf]`: the benchmark's buffers in GPU memory, as
//! perftest's `--use_cuda=N` and `--use_cuda_dmabuf` put them.
//!
//! perftest allocates each buffer with `cuMemAlloc` rounded up to 64 KiB (the GPU's page)
//! and registers it in one of two ways, and so does this:
//! - with `--use-cuda-dmabuf`, as a dma-buf MR: the range is exported with
//!   `cuMemGetHandleForAddressRange` from its host-page-aligned base and registered with
//!   `ibv_reg_dmabuf_mr(fd, offset = ptr - base, len, iova = ptr)`. The iova is the device
//!   pointer, so work requests name GPU memory by its CUDA address. softhca takes this
//!   path: its kernel half hands the fd (NVIDIA's `nv_dmabuf`, which the CPU cannot map)
//!   to the CUDA peer resolver that `gdr` installs, and the device half then reaches the
//!   bytes with CUDA copies, a message or segment at a time (docs/gdr.md);
//! - without it, `ibv_reg_mr` on the device pointer, which a kernel driver can only pin
//!   through the legacy peer-memory client (nvidia-peermem). softhca has no peer-memory
//!   client (it cannot pin GPU memory), so there the registration is refused up front
//!   with the flag to add.
//!
//! `--use-cuda-bus-id BUS` names the GPU by PCI address instead (perftest's
//! `--use_cuda_bus_id`). Each end chooses its own memory; `--local` gives the server the
//! client's flags, so both ends' buffers are on the same GPU. The client, when its
//! buffers are on a GPU, also measures cudaMemcpy on it (`cuda_memcpy`).
//!
//! What perftest refuses with device memory is refused here too: inline sends (the CPU
//! cannot read the buffer) and write-lat (its CPU polls the buffer). atomic-bw (whose
//! check reads results in the buffer) and the other latency tests are left to host
//! memory as well: what GPU memory changes is bandwidth. `--check` works: patterns are
//! staged through pinned host memory with CUDA copies before a size runs and compared
//! after it.
//!
//! Where CUDA is not usable (no driver, or `cuInit` fails) `--use-cuda` stops at once
//! with one line and exit status [`EXIT_NO_DRIVER`], what `doorbell gdr verify` does.

use std::cell::RefCell;

use anyhow::{bail, Result};
use gdr::buffer::{DmabufExport, GpuBuffer};
use gdr::caps::{self, Verdict};
use gdr::cuda::Gpu;
use gdr::pinned::PinnedHost;
use nix::errno::Errno;
use provider::{Access, Context, DeviceMemory, DeviceMr, Mr, Pd};

use super::opts::{Opts, Params, Test};

/// Exit status when `--use-cuda` is given where CUDA is not usable (`gdr verify`'s).
pub const EXIT_NO_DRIVER: i32 = 3;

/// The tests that run on GPU memory.
pub const GPU_TESTS: [Test; 3] = [Test::WriteBw, Test::ReadBw, Test::SendBw];

/// Flag combinations that cannot work, refused before anything is opened.
pub fn check_flags(test: Test, o: &Opts) -> Result<()> {
    let cuda = o.use_cuda.is_some() || o.use_cuda_bus_id.is_some();
    if o.use_cuda_dmabuf && !cuda {
        bail!("--use-cuda-dmabuf needs --use-cuda N (a CUDA dma-buf needs CUDA memory)");
    }
    if cuda && !GPU_TESTS.contains(&test) {
        bail!(
            "--use-cuda is for write-bw, read-bw and send-bw: {} has the CPU {} GPU memory it cannot read",
            test.name(),
            if test == Test::AtomicBw { "check atomic results in" } else { "poll" }
        );
    }
    Ok(())
}

/// The client's parameters against GPU memory on its side: nothing it sends may go
/// inline, since inline data is read by the CPU at post time (perftest refuses the
/// same).
pub fn check_params(o: &Opts, p: &Params) -> Result<()> {
    if o.use_cuda.is_some() && p.inline > 0 && p.sizes.iter().any(|&s| s > 0 && s <= p.inline as u64) {
        bail!("GPU memory cannot be sent inline (the CPU cannot read it): give -I 0 or a size above {}", p.inline);
    }
    Ok(())
}

/// With `--use-cuda`, makes sure CUDA is usable: where it is not (no driver, which
/// cudarc would panic on, or a failing `cuInit`), prints one line and exits with
/// [`EXIT_NO_DRIVER`]. A GPU number past the count is an ordinary error, when the GPU is
/// opened.
pub fn require_driver(o: &Opts) {
    let flag = match (&o.use_cuda, &o.use_cuda_bus_id) {
        (Some(n), _) => format!("--use-cuda {n}"),
        (None, Some(b)) => format!("--use-cuda-bus-id {b}"),
        (None, None) => return,
    };
    if let Err(e) = gdr::cuda::probe() {
        eprintln!("doorbell: {flag}: CUDA is not usable here: {e}");
        std::process::exit(EXIT_NO_DRIVER);
    }
}

/// A PCI address as sysfs spells it (and `Gpu::pci_bus_id` returns it): lower case,
/// a 4-digit domain (`0000:` when none is given; the driver's 8-digit one shortened),
/// so that every spelling `cuDeviceGetByPCIBusId` accepts compares equal.
pub fn normalize_bus_id(s: &str) -> String {
    let s = s.trim().to_lowercase();
    match s.split(':').collect::<Vec<_>>()[..] {
        [bus, devfn] => format!("0000:{bus:0>2}:{devfn}"),
        [dom, bus, devfn] => format!("{:0>4}:{bus:0>2}:{devfn}", &dom[dom.len().saturating_sub(4)..]),
        _ => s,
    }
}

/// `--use-cuda-bus-id` turned into `--use-cuda N` (the GPU whose PCI address it is), so
/// that the rest of the run, and the `--local` server, only know ordinals. Needs CUDA
/// ([`require_driver`] first).
pub fn resolve_bus_id(o: &Opts) -> Result<Option<Opts>> {
    let Some(bus) = &o.use_cuda_bus_id else { return Ok(None) };
    let want = normalize_bus_id(bus);
    let mut seen = Vec::new();
    for i in 0..gdr::cuda::device_count() {
        let id = Gpu::open(i)?.pci_bus_id()?;
        if normalize_bus_id(&id) == want {
            let mut r = o.clone();
            r.use_cuda = Some(i);
            r.use_cuda_bus_id = None;
            return Ok(Some(r));
        }
        seen.push(format!("GPU {i} at {id}"));
    }
    bail!("no GPU at PCI address {bus} (the CUDA driver sees: {})", if seen.is_empty() { "none".into() } else { seen.join(", ") })
}

/// GPU memory and its registration, owned together.
pub enum GpuMr {
    /// A dma-buf MR (declared first: deregistered before the memory is freed).
    DmaBuf { mr: Mr, mem: GpuMem },
    /// The device pointer registered on the peer-memory path; the region owns the memory.
    Peer(DeviceMr<GpuMem>),
}

impl GpuMr {
    pub fn mr(&self) -> &Mr {
        match self {
            GpuMr::DmaBuf { mr, .. } => mr,
            GpuMr::Peer(m) => m.mr(),
        }
    }

    pub fn mem(&self) -> &GpuMem {
        match self {
            GpuMr::DmaBuf { mem, .. } => mem,
            GpuMr::Peer(m) => m.get_ref(),
        }
    }
}

// SAFETY: the buffer is a cuMemAlloc allocation of at least `len` bytes (GpuBuffer),
// freed only when the GpuMem is dropped; its device pointer does not move with the value.
unsafe impl DeviceMemory for GpuMem {
    fn device_addr(&self) -> u64 {
        self.buf.device_ptr()
    }
    fn device_len(&self) -> usize {
        self.len
    }
}

/// The GPU side of one end: the device buffer, how it is registered, and a pinned
/// staging buffer through which the CPU fills and reads it (and which the cudaMemcpy
/// reference copies from and to).
pub struct GpuMem {
    /// The dma-buf of the buffer (`--use-cuda-dmabuf`). Kept open until the MR is gone:
    /// perftest closes it right after registering (the kernel holds its own reference),
    /// and keeping it costs nothing and asks less of the device.
    dmabuf: Option<DmabufExport>,
    staging: RefCell<PinnedHost>,
    buf: GpuBuffer,
    /// Bytes the benchmark uses (the allocation is rounded up to 64 KiB).
    len: usize,
    /// For the header: `GPU 0 (NVIDIA H200, 0000:00:06.0)`.
    what: String,
}

impl GpuMem {
    /// `len` bytes on GPU `ordinal`, exported as a dma-buf when `dmabuf`, with `stage`
    /// bytes of pinned staging memory.
    pub fn new(ordinal: usize, len: usize, stage: usize, dmabuf: bool) -> Result<GpuMem> {
        let gpu = Gpu::open(ordinal)?;
        let name = gpu.name().unwrap_or_else(|_| "?".into());
        let bus = gpu.pci_bus_id().unwrap_or_else(|_| "?".into());
        if dmabuf {
            // perftest's check before it exports (cuda_memory_init).
            if let Some(c) = caps::gpu_checks(&gpu).into_iter().find(|c| c.name == "GPU DMA_BUF_SUPPORTED" && c.verdict != Verdict::Pass) {
                bail!("GPU {ordinal} ({name}) cannot export dma-bufs: DMA_BUF_SUPPORTED {}", c.detail);
            }
        }
        // Also installs gdr's peer resolver into this process's softhca.
        let buf = GpuBuffer::new(&gpu, len)?;
        let dmabuf = if dmabuf { Some(buf.export_dmabuf(0, len)?) } else { None };
        let staging = RefCell::new(PinnedHost::new(&gpu, stage)?);
        Ok(GpuMem { what: format!("GPU {ordinal} ({name}, {bus})"), dmabuf, staging, buf, len })
    }

    /// The device address of byte 0 (the MR's iova, as perftest and NCCL register it).
    pub fn addr(&self) -> u64 {
        self.buf.device_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// `GPU 0 (NVIDIA H200, 0000:00:06.0), dma-buf MR`, for the header.
    pub fn describe(&self) -> String {
        match &self.dmabuf {
            Some(_) => format!("{}, dma-buf MR", self.what),
            None => format!("{}, ibv_reg_mr on the device pointer (peer memory)", self.what),
        }
    }

    /// Registers the buffer, which the result owns: a dma-buf MR with the device
    /// address as iova, or `ibv_reg_mr` on the device pointer, which only a kernel with
    /// nvidia-peermem can pin.
    pub fn register(self, ctx: &Context, pd: &Pd, access: Access) -> Result<GpuMr> {
        let softhca = ctx.name() == provider::device::soft_name();
        match &self.dmabuf {
            Some(d) => {
                let mr = pd.reg_dmabuf_mr(d.fd(), d.offset, self.len, d.iova, access).map_err(|e| {
                    let why = if e.errno() == Errno::EOPNOTSUPP {
                        if softhca {
                            "softhca refused the dma-buf: no peer-memory resolver took it (softhca reaches GPU memory through gdr's CUDA resolver)"
                        } else {
                            "the device or its kernel driver does not take dma-buf MRs (rdma-core and Linux 5.12 or later, and a driver that supports them)"
                        }
                    } else {
                        "ibv_reg_dmabuf_mr failed"
                    };
                    anyhow::anyhow!("register GPU memory as a dma-buf MR: {why}: {e}")
                })?;
                Ok(GpuMr::DmaBuf { mr, mem: self })
            }
            None if softhca => bail!(
                "{} cannot register GPU memory with ibv_reg_mr: that is the legacy peer-memory path (nvidia-peermem pins the pages for a kernel driver), and softhca cannot pin GPU memory; add --use-cuda-dmabuf",
                ctx.name()
            ),
            None => {
                // The kernel, not the CPU, resolves the address (through nvidia-peermem).
                pd.reg_device(self, access).map(GpuMr::Peer).map_err(|provider::RegError { error: e, .. }| {
                    let peermem = caps::peermem_clients(&caps::sysfs_root());
                    let loaded = match peermem.first() {
                        Some(c) => format!("loaded: {}", c.what),
                        None => "not loaded".into(),
                    };
                    anyhow::anyhow!("ibv_reg_mr on GPU memory failed: {e} (it needs a peer-memory module such as nvidia-peermem, {loaded}; or add --use-cuda-dmabuf)")
                })
            }
        }
    }

    /// Fills bytes `off..off + len` through the staging buffer: `f` writes the staging
    /// copy, then one `cuMemcpyHtoD`.
    pub fn fill(&self, off: usize, len: usize, f: impl FnOnce(&mut [u8])) -> Result<()> {
        let mut st = self.staging.borrow_mut();
        anyhow::ensure!(len <= st.len() && off + len <= self.len, "GPU fill of {len} bytes at {off}: out of range");
        f(&mut st.as_mut_slice()[..len]);
        if len > 0 {
            // SAFETY: in bounds of our allocation (checked above); called between sizes,
            // when no transfer is in flight.
            unsafe { st.copy_to_device(self.addr() + off as u64, len) }?;
        }
        Ok(())
    }

    /// Reads bytes `off..off + len` through the staging buffer (one `cuMemcpyDtoH`).
    pub fn inspect<R>(&self, off: usize, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let mut st = self.staging.borrow_mut();
        anyhow::ensure!(len <= st.len() && off + len <= self.len, "GPU read of {len} bytes at {off}: out of range");
        if len > 0 {
            // SAFETY: as in `fill`.
            unsafe { st.copy_from_device(self.addr() + off as u64, len) }?;
        }
        Ok(f(&st.as_slice()[..len]))
    }

    /// The pinned staging buffer (the cudaMemcpy reference copies through it).
    pub fn staging(&self) -> std::cell::RefMut<'_, PinnedHost> {
        self.staging.borrow_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct T {
        #[command(flatten)]
        o: Opts,
    }

    fn opts(args: &[&str]) -> Opts {
        T::parse_from(std::iter::once("x").chain(args.iter().copied())).o
    }

    /// perftest's rules (perftest_parameters.c): the dma-buf flag needs the CUDA flag,
    /// and device memory is refused when a message would go inline (size <= inline
    /// size); here also the tests whose CPU reads the buffer during the run.
    #[test]
    fn refused_combinations() {
        assert!(check_flags(Test::WriteBw, &opts(&["--use-cuda-dmabuf"])).unwrap_err().to_string().contains("needs --use-cuda"));
        for t in GPU_TESTS {
            check_flags(t, &opts(&["--use-cuda", "0", "--use-cuda-dmabuf"])).unwrap();
        }
        for t in [Test::WriteLat, Test::ReadLat, Test::SendLat, Test::AtomicBw] {
            let e = check_flags(t, &opts(&["--use-cuda", "0"])).unwrap_err().to_string();
            assert!(e.starts_with("--use-cuda is for write-bw, read-bw and send-bw"), "{e}");
        }
        let inline = |args: &[&str]| {
            let o = opts(args);
            check_params(&o, &Params::from_opts(Test::SendBw, &o).unwrap())
        };
        assert!(inline(&["--use-cuda", "0", "-I", "64", "-s", "64"]).is_err());
        assert!(inline(&["--use-cuda", "0", "-I", "64", "-s", "65"]).is_ok());
        assert!(inline(&["--use-cuda", "0", "-s", "8"]).is_ok()); // bw tests default to 0 inline
        assert!(inline(&["-I", "64", "-s", "64"]).is_ok()); // host memory
        assert!(check_flags(Test::ReadLat, &opts(&["--use_cuda_bus_id=0000:00:06.0"])).is_err());
        check_flags(Test::ReadBw, &opts(&["--use-cuda-bus-id", "06.0", "--use-cuda-dmabuf"])).unwrap();
        assert!(T::try_parse_from(["x", "--use-cuda", "0", "--use-cuda-bus-id", "0000:00:06.0"]).is_err());
    }

    /// The spellings of one address that cuDeviceGetByPCIBusId accepts
    /// (`[domain]:[bus]:[device].[function]`, domain optional, hex in either case) and
    /// the driver's own 8-digit domain (`00000000:00:06.0`, cuDeviceGetPCIBusId's, as
    /// gdr/tests/fixtures/h200-cmd/probe.txt's nvidia-smi prints it) all become sysfs's
    /// `0000:00:06.0`.
    #[test]
    fn bus_id_spellings() {
        for s in ["0000:00:06.0", "00000000:00:06.0", "00:06.0", "0:00:06.0", " 0000:00:06.0\n"] {
            assert_eq!(normalize_bus_id(s), "0000:00:06.0", "{s:?}");
        }
        assert_eq!(normalize_bus_id("0000:9A:00.0"), "0000:9a:00.0");
        assert_ne!(normalize_bus_id("0000:00:07.0"), normalize_bus_id("0000:00:06.0"));
    }
}
