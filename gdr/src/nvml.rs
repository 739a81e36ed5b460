//! NVML (libnvidia-ml), loaded at run time through nvml-wrapper: what nvidia-smi itself
//! asks for the topology matrix and sysfs cannot say.
//!
//! - the NVML index of each GPU (nvidia-smi's `GPU0`, `GPU1`, ...; not necessarily PCI
//!   bus order) and its name;
//! - the CUDA compute capability (NCCL's GDR read rule depends on it);
//! - NVLinks: for each link, `nvmlDeviceGetNvLinkState` and, when active,
//!   `nvmlDeviceGetNvLinkRemotePciInfo_v2` (the bus id at the other end: another GPU,
//!   or an NVSwitch on HGX boards), which fill the `NV#` cells;
//! - `nvmlDeviceGetNumaNodeId`: the GPU's own NUMA node on C2C systems (`GPU NUMA ID`).
//!
//! The PCI placement still comes from sysfs ([`crate::topo::sysfs`]): NVML gives the
//! bus id, sysfs the bridges above it.
//!
//! nvml-wrapper loads the library with `dlopen` and reports a missing library or symbol
//! as an error, so a machine without the NVIDIA driver gets [`NvmlError::Unavailable`].

use std::ffi::OsStr;

use nvml_wrapper::Nvml;

use crate::topo::facts::{GpuFacts, NVSWITCH};
use crate::topo::pci::normalize_bus_id;

/// NVML's NVLink limit per GPU (`NVML_NVLINK_MAX_LINKS`).
pub const MAX_LINKS: u32 = 18;

/// Why NVML gave nothing.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    /// The library cannot be loaded or initialised (no NVIDIA driver here).
    #[error("NVML unavailable ({0}; libnvidia-ml.so.1 comes with the NVIDIA driver)")]
    Unavailable(String),
    /// A query failed.
    #[error("NVML {call}: {err}")]
    Call { call: &'static str, err: nvml_wrapper::error::NvmlError },
}

/// Loads and initialises NVML: the driver's soname first, then the development link.
pub fn open() -> Result<Nvml, NvmlError> {
    let mut first = None;
    for lib in ["libnvidia-ml.so.1", "libnvidia-ml.so"] {
        match Nvml::builder().lib_path(OsStr::new(lib)).init() {
            Ok(n) => return Ok(n),
            Err(e) => {
                first.get_or_insert_with(|| e.to_string());
            }
        }
    }
    Err(NvmlError::Unavailable(first.unwrap_or_default()))
}

/// The facts NVML has about every GPU, in NVML index order. Links whose far end is no
/// GPU of this machine are links to NVSwitches.
pub fn gpu_facts(nvml: &Nvml) -> Result<Vec<GpuFacts>, NvmlError> {
    let count = nvml.device_count().map_err(|err| NvmlError::Call { call: "nvmlDeviceGetCount", err })?;
    let mut out = Vec::new();
    for index in 0..count {
        let d = nvml.device_by_index(index).map_err(|err| NvmlError::Call { call: "nvmlDeviceGetHandleByIndex", err })?;
        let pci = d.pci_info().map_err(|err| NvmlError::Call { call: "nvmlDeviceGetPciInfo", err })?;
        let Some(bus_id) = normalize_bus_id(&pci.bus_id) else {
            return Err(NvmlError::Unavailable(format!("GPU {index}: NVML bus id {:?} is no PCI address", pci.bus_id)));
        };
        let mut nvlinks = Vec::new();
        for link in 0..MAX_LINKS {
            let l = d.link_wrapper_for(link);
            // Links past the GPU's last answer an error (InvalidArg / NotSupported).
            if !l.is_active().unwrap_or(false) {
                continue;
            }
            let remote = l.remote_pci_info().ok().and_then(|p| normalize_bus_id(&p.bus_id));
            nvlinks.push(remote.unwrap_or_else(|| NVSWITCH.to_string()));
        }
        out.push(GpuFacts {
            bus_id,
            index: Some(index),
            name: d.name().ok(),
            compute_capability: d.cuda_compute_capability().ok().map(|c| (c.major.max(0) as u32, c.minor.max(0) as u32)),
            nvlinks,
            // A node number, never NVML's -1 seen through the wrapper's unsigned type.
            gpu_numa_id: d.numa_node_id().ok().filter(|&n| n < 1 << 16),
        });
    }
    let gpus: Vec<String> = out.iter().map(|f| f.bus_id.clone()).collect();
    for f in &mut out {
        for r in &mut f.nvlinks {
            if !gpus.contains(r) {
                *r = NVSWITCH.to_string();
            }
        }
    }
    Ok(out)
}
