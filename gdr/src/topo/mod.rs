//! The GPU/NIC topology: the matrix `nvidia-smi topo -m` prints, and the path type and
//! GPUDirect RDMA decision NCCL makes for every GPU-NIC pair.
//!
//! Three separate steps, so that the model can be tested on trees that are not this
//! machine's:
//! 1. facts: [`sysfs::read`] walks the PCI tree under `$SYSFS_PATH` (default `/sys`) the
//!    way NCCL does (the device's real path, every bridge up to the host bridge,
//!    `numa_node`, `local_cpulist`), finds the GPUs (vendor 0x10de, class 0x0300xx or
//!    0x0302xx), the RDMA NICs (`class/infiniband/*/device`) and this process's softhca
//!    instance where `DOORBELL_SOFTHCA_PCI` places it; [`crate::nvml`] (or a
//!    [`facts`] file) adds names, NVML indices, compute capabilities and NVLinks;
//! 2. model: [`Topology`] holds the result and nothing else; [`smi`] and [`nccl`] are pure
//!    functions of it (and, for NCCL, of the `NCCL_*` settings passed in);
//! 3. rendering: [`smi::render`] prints nvidia-smi's bytes, [`nccl::render`] the
//!    per-pair section and [`tree::render`] the tree NCCL builds.

pub mod cpuset;
pub mod facts;
pub mod nccl;
pub mod pci;
pub mod smi;
pub mod sysfs;
pub mod tree;

pub use cpuset::CpuSet;
pub use facts::GpuFacts;
pub use pci::{Bridge, PciDevice, PciId};

/// One GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gpu {
    pub pci: PciDevice,
    /// Product name (NVML), if known.
    pub name: Option<String>,
    /// CUDA compute capability (major, minor), if known.
    pub compute_capability: Option<(u32, u32)>,
    /// The remote end of each active NVLink: a bus id or [`facts::NVSWITCH`].
    pub nvlinks: Vec<String>,
    /// The GPU's own NUMA node (`GPU NUMA ID`), if it has one.
    pub gpu_numa_id: Option<u32>,
}

/// One RDMA NIC.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nic {
    /// The verbs device name (`mlx5_0`, `softhca0`).
    pub name: String,
    pub pci: PciDevice,
    /// A softhca instance placed by configuration rather than a device found in sysfs.
    pub software: bool,
}

/// Everything the matrix and NCCL's decisions are computed from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// In nvidia-smi's order (NVML index; PCI bus order without NVML).
    pub gpus: Vec<Gpu>,
    /// In nvidia-smi's order (by name, numbers compared as numbers).
    pub nics: Vec<Nic>,
    /// NUMA nodes and their CPUs (`devices/system/node/node*/cpulist`).
    pub numa_nodes: Vec<(u32, CpuSet)>,
    /// Things the reader should know (where facts came from, what was skipped).
    pub notes: Vec<String>,
}

impl Topology {
    /// Puts GPUs found in sysfs in nvidia-smi's order and gives them their facts: GPUs
    /// with an NVML index first, by index, then the others in bus order. Facts for a GPU
    /// that sysfs does not have are reported in `notes` and dropped.
    pub fn with_gpu_facts(mut self, pci_gpus: Vec<PciDevice>, facts: &[GpuFacts]) -> Topology {
        let mut gpus: Vec<(Option<u32>, Gpu)> = pci_gpus
            .into_iter()
            .map(|pci| {
                let f = facts.iter().find(|f| f.bus_id == pci.bus_id);
                let gpu = Gpu {
                    name: f.and_then(|f| f.name.clone()),
                    compute_capability: f.and_then(|f| f.compute_capability),
                    nvlinks: f.map(|f| f.nvlinks.clone()).unwrap_or_default(),
                    gpu_numa_id: f.and_then(|f| f.gpu_numa_id),
                    pci,
                };
                (f.and_then(|f| f.index), gpu)
            })
            .collect();
        for f in facts {
            if !gpus.iter().any(|(_, g)| g.pci.bus_id == f.bus_id) {
                self.notes.push(format!("GPU {} (index {:?}) is not in the PCI tree under sysfs: left out", f.bus_id, f.index));
            }
        }
        gpus.sort_by(|(ia, a), (ib, b)| match (ia, ib) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a.pci.bus_id.cmp(&b.pci.bus_id),
        });
        self.gpus = gpus.into_iter().map(|(_, g)| g).collect();
        self
    }

    /// Keeps only the GPUs NVML lists (nvidia-smi shows no other): a GPU in sysfs that
    /// NVML does not see (bound to another driver, hidden from a container) is noted and
    /// left out. Call before [`Topology::with_gpu_facts`] when the facts come from NVML.
    pub fn keep_listed(&mut self, pci_gpus: Vec<PciDevice>, facts: &[GpuFacts]) -> Vec<PciDevice> {
        let (keep, drop): (Vec<PciDevice>, Vec<PciDevice>) = pci_gpus.into_iter().partition(|g| facts.iter().any(|f| f.bus_id == g.bus_id));
        for g in drop {
            self.notes.push(format!("GPU {} is in sysfs but NVML does not list it: left out, as nvidia-smi does", g.bus_id));
        }
        keep
    }

    /// The NUMA node a device belongs to: its `numa_node`, or else the one node whose CPUs
    /// it is local to (virtual machines often say -1 for a device on a one-node guest).
    pub fn numa_of(&self, d: &PciDevice) -> Option<u32> {
        d.numa_node.or_else(|| {
            let mut nodes = self.numa_nodes.iter().filter(|(_, cpus)| cpus.intersects(&d.local_cpus));
            match (nodes.next(), nodes.next()) {
                (Some((n, _)), None) => Some(*n),
                _ => None,
            }
        })
    }
}

/// Orders names as nvidia-smi lists NICs: runs of digits compare as numbers
/// (`mlx5_2` before `mlx5_10`, `mlx5_9` before `mlx5_bond_0`).
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    fn chunks(s: &str) -> Vec<(bool, &str)> {
        let mut v = Vec::new();
        let mut start = 0;
        let b = s.as_bytes();
        for i in 1..=b.len() {
            if i == b.len() || b[i].is_ascii_digit() != b[start].is_ascii_digit() {
                v.push((b[start].is_ascii_digit(), &s[start..i]));
                start = i;
            }
        }
        v
    }
    let (ca, cb) = (chunks(a), chunks(b));
    for (x, y) in ca.iter().zip(cb.iter()) {
        let o = match (x, y) {
            ((true, p), (true, q)) => p.parse::<u128>().unwrap_or(0).cmp(&q.parse::<u128>().unwrap_or(0)).then(p.cmp(q)),
            ((_, p), (_, q)) => p.cmp(q),
        };
        if o.is_ne() {
            return o;
        }
    }
    ca.len().cmp(&cb.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nics_in_natural_order() {
        let mut v = vec!["mlx5_10", "mlx5_bond_0", "mlx5_2", "mlx5_0", "mlx5_9"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, ["mlx5_0", "mlx5_2", "mlx5_9", "mlx5_10", "mlx5_bond_0"]);
    }
}
