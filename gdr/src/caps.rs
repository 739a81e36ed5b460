//! The checks NCCL makes before it uses GPUDirect RDMA, each answered with a verdict a
//! cluster engineer can act on.
//!
//! NCCL (src/init.cc `dmaBufSupported`, src/transport/net_ib/gdr.cc) uses DMA-BUF when
//! (a) the GPU says `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` and (b) the NIC's kernel
//! driver takes dma-buf registrations, which it learns by registering fd -1: the call
//! must fail, and the errno says why: EBADF means the kernel got as far as looking the
//! fd up (the method and the driver's `reg_user_mr_dmabuf` exist), EOPNOTSUPP or
//! EPROTONOSUPPORT that it did not. Otherwise it falls back to the legacy peer-memory
//! path when a peer-memory client is loaded: `/sys/kernel/mm/memory_peers/nv_mem/version`
//! or `.../nv_mem_nc/version` (the out-of-tree nv_peer_mem of MLNX_OFED) or
//! `/sys/module/nvidia_peermem/version` (the driver's nvidia-peermem.ko); with neither,
//! GPU buffers are staged through host memory. Whether a given GPU-NIC pair then uses
//! GDR also depends on their PCI distance (`NCCL_NET_GDR_LEVEL`), which `doorbell topo`
//! reports.
//!
//! `GPU_DIRECT_RDMA_SUPPORTED` (whether the GPU can be a PCIe peer at all) is reported
//! as perftest and the GPUDirect RDMA guide use it; the flush and ordering attributes
//! are informational (NCCL's GDR flush follows them).

use std::fmt;
use std::path::{Path, PathBuf};

use cudarc::driver::sys::CUdevice_attribute as Attr;
use nix::errno::Errno;

use crate::cuda::Gpu;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail,
    /// Facts that do not decide (reported for the record).
    Info,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Info => "INFO",
        })
    }
}

/// One check: what was asked, the verdict, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub verdict: Verdict,
    pub detail: String,
}

impl Check {
    pub fn new(name: impl Into<String>, verdict: Verdict, detail: impl Into<String>) -> Check {
        Check { name: name.into(), verdict, detail: detail.into() }
    }
}

/// The GPU's attributes NCCL and perftest look at.
pub fn gpu_checks(gpu: &Gpu) -> Vec<Check> {
    let mut v = Vec::new();
    let mut yes_no = |name: &str, attr: Attr, yes: &str, no: &str| {
        v.push(match gpu.attribute(attr) {
            Ok(1) => Check::new(name, Verdict::Pass, format!("= 1: {yes}")),
            Ok(x) => Check::new(name, Verdict::Fail, format!("= {x}: {no}")),
            Err(e) => Check::new(name, Verdict::Fail, format!("cannot be read: {e}")),
        })
    };
    yes_no(
        "GPU DMA_BUF_SUPPORTED",
        Attr::CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED,
        "the driver exports GPU memory as dma-bufs (NCCL's and perftest's --use_cuda_dmabuf path)",
        "no dma-buf export (needs the open kernel modules or a recent proprietary driver, and Linux >= 5.12); NCCL falls back to nvidia-peermem or host staging",
    );
    yes_no(
        "GPU GPU_DIRECT_RDMA_SUPPORTED",
        Attr::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED,
        "the GPU can be a PCIe peer of a NIC",
        "the GPU cannot be a PCIe peer of a NIC: no GPUDirect RDMA on this GPU",
    );
    let info = |name: &str, attr: Attr, what: &dyn Fn(i32) -> String| match gpu.attribute(attr) {
        Ok(x) => Check::new(name, Verdict::Info, format!("= {x}: {}", what(x))),
        Err(e) => Check::new(name, Verdict::Info, format!("cannot be read: {e}")),
    };
    v.push(info("GPU GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED", Attr::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, &|x| {
        if x == 1 { "cuMem* (VMM) allocations can be registered too (NCCL's cuMem path)".into() } else { "only cuMemAlloc memory".into() }
    }));
    v.push(info("GPU GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS", Attr::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS, &|x| {
        if x & 1 != 0 { "cuFlushGPUDirectRDMAWrites is available".into() } else { "no flush call: NCCL flushes with an RDMA READ".into() }
    }));
    v.push(info("GPU GPU_DIRECT_RDMA_WRITES_ORDERING", Attr::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WRITES_ORDERING, &|x| match x {
        0 => "no ordering guarantee for NIC writes seen by kernels (NONE)".into(),
        100 => "NIC writes are visible to this GPU's kernels in order (OWNER)".into(),
        200 => "NIC writes are visible in order to all devices (ALL_DEVICES)".into(),
        _ => "unknown value".into(),
    }));
    v
}

/// What the NIC probe's errno means, by NCCL's rule.
pub fn nic_dmabuf_verdict(r: Result<(), Errno>) -> Check {
    let name = "NIC ibv_reg_dmabuf_mr(fd = -1)";
    match r {
        Err(Errno::EBADF) => Check::new(name, Verdict::Pass, "EBADF: the kernel looked the fd up, so it takes dma-buf MRs (NCCL: DMA-BUF supported)"),
        Err(e @ (Errno::EOPNOTSUPP | Errno::EPROTONOSUPPORT)) => Check::new(
            name,
            Verdict::Fail,
            format!("{}: no dma-buf MRs on this device or kernel (NCCL: DMA-BUF not supported; needs Linux >= 5.12 and a driver with reg_user_mr_dmabuf)", e.desc_name()),
        ),
        Err(e) => Check::new(name, Verdict::Pass, format!("{}: not EOPNOTSUPP/EPROTONOSUPPORT, which NCCL counts as supported", e.desc_name())),
        Ok(()) => Check::new(name, Verdict::Fail, "the registration of fd -1 succeeded: the device does not check dma-buf fds"),
    }
}

trait ErrnoName {
    fn desc_name(&self) -> String;
}

impl ErrnoName for Errno {
    fn desc_name(&self) -> String {
        format!("{self:?} ({})", self.desc())
    }
}

/// NCCL's NIC probe on `pd`'s device: REG_DMABUF_MR of fd -1, offset, length and iova
/// 0, no access flags. An MR that were (wrongly) created is destroyed again.
pub fn nic_dmabuf_probe(pd: &provider::Pd) -> Check {
    let r = uverbs::cmd::mr::reg_dmabuf_mr(pd.context().device(), pd.handle(), 0, 0, 0, -1, 0);
    nic_dmabuf_verdict(match r {
        Ok(mr) => {
            let _ = uverbs::cmd::mr::destroy_mr_ioctl(pd.context().device(), mr.handle);
            Ok(())
        }
        Err(e) => Err(e),
    })
}

/// A loaded peer-memory client (the legacy GPUDirect RDMA path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerMemClient {
    /// The file NCCL tests, relative to the sysfs root.
    pub path: &'static str,
    /// What it is.
    pub what: &'static str,
    /// Its content (the module's version).
    pub version: String,
}

/// The files NCCL's `ncclIbGdrSupport` tests, in its order, relative to the sysfs root.
pub const PEERMEM_FILES: &[(&str, &str)] = &[
    ("kernel/mm/memory_peers/nv_mem/version", "nv_peer_mem (MLNX_OFED's out-of-tree module)"),
    ("kernel/mm/memory_peers/nv_mem_nc/version", "nv_peer_mem, non-contiguous variant"),
    ("module/nvidia_peermem/version", "nvidia-peermem (the NVIDIA driver's module)"),
];

/// The sysfs root: `SYSFS_PATH` when set (rdma-core's variable; tests point it at a
/// fixture tree), else `/sys`.
pub fn sysfs_root() -> PathBuf {
    std::env::var_os("SYSFS_PATH").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/sys"))
}

/// The peer-memory clients loaded under `root`.
pub fn peermem_clients(root: &Path) -> Vec<PeerMemClient> {
    PEERMEM_FILES
        .iter()
        .filter_map(|&(path, what)| {
            let p = root.join(path);
            // NCCL only tests access(F_OK); the content is read for the report.
            p.exists().then(|| PeerMemClient { path, what, version: std::fs::read_to_string(&p).unwrap_or_default().trim().to_string() })
        })
        .collect()
}

/// The peer-memory check as reported (never FAIL: DMA-BUF does not need it).
pub fn peermem_check(root: &Path) -> Check {
    let name = "legacy peer memory (nvidia-peermem / nv_peer_mem)";
    let found = peermem_clients(root);
    if found.is_empty() {
        return Check::new(name, Verdict::Info, format!("not loaded (none of {} under {}): NCCL's legacy GDR path is off; DMA-BUF does not need it",
            PEERMEM_FILES.iter().map(|f| f.0).collect::<Vec<_>>().join(", "), root.display()));
    }
    let list: Vec<String> = found
        .iter()
        .map(|c| format!("{} ({}{})", c.what, c.path, if c.version.is_empty() { String::new() } else { format!(", version {}", c.version) }))
        .collect();
    Check::new(name, Verdict::Info, format!("loaded: {}: NCCL can register GPU memory with plain ibv_reg_mr", list.join("; ")))
}

/// What NCCL would do, from the three answers.
pub fn nccl_decision(gpu_dmabuf: bool, nic_dmabuf: bool, peermem: bool) -> Check {
    let name = "NCCL would use";
    let (v, d) = match (gpu_dmabuf && nic_dmabuf, peermem) {
        (true, _) => (Verdict::Info, "GPUDirect RDMA through DMA-BUF (NCCL_DMABUF_ENABLE=1, the default), subject to the GPU-NIC distance (NCCL_NET_GDR_LEVEL)"),
        (false, true) => (Verdict::Info, "GPUDirect RDMA through the legacy peer-memory module, subject to the GPU-NIC distance (NCCL_NET_GDR_LEVEL)"),
        (false, false) => (Verdict::Info, "no GPUDirect RDMA: GPU buffers staged through host memory"),
    };
    Check::new(name, v, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
    }

    /// The errno table of NCCL's ibDmaBufSupportInitOnce: only EOPNOTSUPP and
    /// EPROTONOSUPPORT mean "no"; EBADF (what Linux's ib_umem_dmabuf_get answers for fd
    /// -1 via dma_buf_get) and anything else mean "yes".
    #[test]
    fn nic_probe_errnos() {
        assert_eq!(nic_dmabuf_verdict(Err(Errno::EBADF)).verdict, Verdict::Pass);
        assert_eq!(nic_dmabuf_verdict(Err(Errno::EOPNOTSUPP)).verdict, Verdict::Fail);
        assert_eq!(nic_dmabuf_verdict(Err(Errno::EPROTONOSUPPORT)).verdict, Verdict::Fail);
        let other = nic_dmabuf_verdict(Err(Errno::EINVAL));
        assert_eq!(other.verdict, Verdict::Pass);
        assert!(other.detail.contains("EINVAL"), "{}", other.detail);
        assert_eq!(nic_dmabuf_verdict(Ok(())).verdict, Verdict::Fail);
    }

    /// The H200 node's captured sysfs has neither module (ls of both paths failed
    /// there, fixtures/h200-cmd/probe.txt), so nothing is found.
    #[test]
    fn h200_has_no_peermem() {
        assert_eq!(peermem_clients(&fixture("h200")), vec![]);
        let c = peermem_check(&fixture("h200"));
        assert_eq!(c.verdict, Verdict::Info);
        assert!(c.detail.starts_with("not loaded"), "{}", c.detail);
    }

    /// A synthetic tree with nvidia-peermem loaded (the version file as the module
    /// writes it, "1.0\n"), and one with MLNX_OFED's nv_mem as well: both are found, in
    /// NCCL's order, with their versions.
    #[test]
    fn peermem_trees() {
        let n = peermem_clients(&fixture("peermem-nvidia"));
        assert_eq!(n, vec![PeerMemClient { path: "module/nvidia_peermem/version", what: PEERMEM_FILES[2].1, version: "1.0".into() }]);
        let both = peermem_clients(&fixture("peermem-legacy"));
        assert_eq!(both.iter().map(|c| c.path).collect::<Vec<_>>(), vec!["kernel/mm/memory_peers/nv_mem/version", "module/nvidia_peermem/version"]);
        assert_eq!(both[0].version, "1.2-0");
        let c = peermem_check(&fixture("peermem-legacy"));
        assert!(c.detail.starts_with("loaded: nv_peer_mem"), "{}", c.detail);
    }

    /// NCCL's probe against softhca's kernel half, which keeps Linux's order: the fd is
    /// looked up (dma_buf_get(-1) is EBADF in Linux) before anything about the buffer, so
    /// the probe says "supported", as it does on a real mlx5 with Linux >= 5.12.
    #[test]
    fn nic_probe_on_softhca() {
        let ctx = provider::Context::open(None).expect("the embedded softhca opens");
        let pd = ctx.alloc_pd().unwrap();
        let c = nic_dmabuf_probe(&pd);
        assert_eq!(c.verdict, Verdict::Pass, "{c:?}");
        assert!(c.detail.starts_with("EBADF"), "{}", c.detail);
    }

    #[test]
    fn decision() {
        assert!(nccl_decision(true, true, false).detail.contains("DMA-BUF"));
        assert!(nccl_decision(true, false, true).detail.contains("legacy peer-memory"));
        assert!(nccl_decision(false, true, false).detail.contains("host memory"));
    }
}
