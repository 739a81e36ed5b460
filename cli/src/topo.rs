//! `doorbell topo [-m]`: the GPU/NIC matrix `nvidia-smi topo -m` prints (with `-m`) or
//! the tree NCCL builds (without), then NCCL's path type and GPUDirect RDMA decision for
//! every GPU-NIC pair.
//!
//! Sources: the PCI tree under `$SYSFS_PATH` (default `/sys`); NVML for GPU indices,
//! names, compute capabilities and NVLinks when libnvidia-ml loads, or a facts file
//! (`--gpus FILE` or `DOORBELL_TOPO_GPUS=FILE`, format in `gdr::topo::facts`) instead;
//! this process's softhca instance where `DOORBELL_SOFTHCA_PCI` places it; `NCCL_NET_GDR_LEVEL`,
//! `NCCL_NET_GDR_READ` and `NCCL_PXN_DISABLE` for the decisions.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use gdr::topo::{self, nccl, smi, sysfs, tree, Topology};

/// Environment variable naming a GPU facts file (used instead of NVML).
pub const GPUS_ENV: &str = "DOORBELL_TOPO_GPUS";

#[derive(clap::Args)]
pub struct Args {
    /// Print the matrix exactly as `nvidia-smi topo -m` does.
    #[arg(short = 'm', long = "matrix")]
    matrix: bool,
    /// GPU facts (NVML index, name, compute capability, NVLinks) from this file instead of
    /// NVML; default: $DOORBELL_TOPO_GPUS.
    #[arg(long, value_name = "FILE")]
    gpus: Option<PathBuf>,
}

pub fn run(a: &Args) -> Result<()> {
    let root = sysfs::root();
    let soft_name = provider::device::soft_name();
    let spec = softhca::config::pci_path_from_env();
    let found = sysfs::read(&root, spec.as_deref().map(|s| (soft_name.as_str(), s))).map_err(anyhow::Error::msg)?;
    let mut notes = found.notes;
    if spec.is_none() {
        notes.push(format!("{soft_name} (softhca) is in no PCI tree: set {}=BUS-ID or a sysfs path to place it", softhca::config::PCI_ENV));
    }
    let facts_file = a.gpus.clone().or_else(|| std::env::var_os(GPUS_ENV).map(PathBuf::from));
    let mut from_nvml = false;
    let facts = match facts_file {
        Some(f) => {
            let text = std::fs::read_to_string(&f).with_context(|| format!("GPU facts file {}", f.display()))?;
            notes.push(format!("GPU facts from {}", f.display()));
            topo::facts::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", f.display()))?
        }
        None => match gdr::nvml::open().map_err(|e| e.to_string()).and_then(|n| gdr::nvml::gpu_facts(&n).map_err(|e| e.to_string())) {
            Ok(f) => {
                notes.push("GPU indices, names and NVLinks from NVML; PCI paths from sysfs".into());
                from_nvml = true;
                f
            }
            Err(e) => {
                notes.push(format!("{e}: GPUs in PCI bus order, no NV# cells, compute capability unknown"));
                Vec::new()
            }
        },
    };
    let mut t = Topology { nics: found.nics, numa_nodes: found.numa_nodes, notes, ..Topology::default() };
    let gpus = if from_nvml { t.keep_listed(found.gpus, &facts) } else { found.gpus };
    let mut t = t.with_gpu_facts(gpus, &facts);
    if root != std::path::Path::new("/sys") {
        t.notes.push(format!("sysfs root {} (SYSFS_PATH)", root.display()));
    }
    let body = if a.matrix { smi::render(&t) } else { tree::render(&t) };
    print!("{body}");
    println!();
    print!("{}", nccl::render(&t, &nccl::Settings::from_env()));
    for n in &t.notes {
        println!("note: {n}");
    }
    Ok(())
}
