//! The matrix of `nvidia-smi topo -m`, computed from the PCI tree, and its exact bytes.
//!
//! nvidia-smi's legend defines the cells; here is how each is read off the tree (the
//! ancestors of a device are the bridges above it, [`PciDevice::ancestors`]):
//! - `SYS`: different NUMA nodes (the path crosses the SMP interconnect, QPI/UPI/xGMI);
//! - `NODE`: same NUMA node, different host bridges (root complexes);
//! - `PHB`: same host bridge, and the deepest bridge both devices are below is the host
//!   bridge itself (different root ports);
//! - `PIX`: below a common PCI bridge, each device at most one bridge further down: the
//!   two sit on one PCIe switch (the switch's downstream ports are the "single bridge"),
//!   or are functions of one device;
//! - `PXB`: below a common PCI bridge but further apart: more than one switch level;
//! - `NV#`: GPUs joined by # NVLinks (only known through NVML or a facts file). On
//!   NVSwitch boards every GPU's links go to the switches and nvidia-smi shows each pair
//!   as the links both have to them (`NV18` on an H100 HGX board).
//!
//! The layout, byte for byte as nvidia-smi 580 writes it (see
//! `gdr/tests/fixtures/h200-cmd/probe.txt`, and a GB200 capture with NICs): a header of
//! tab-separated column names underlined with ANSI (`\t\x1b[4mGPU0\t...\tGPU NUMA ID\x1b[0m`),
//! one row per GPU (`GPU0\t X \tNV18\t...\t0-15\t0\t\tN/A`: the self cell is ` X `, two
//! tabs before the GPU NUMA ID), one row per NIC with the affinity cells empty
//! (`NIC0\t...\t X \t\t\t\t`), then the legend, then, when there are NICs, the NIC legend
//! (`  NIC0: mlx5_0`) and a blank line.

use std::fmt::{self, Write as _};

use super::facts::NVSWITCH;
use super::pci::PciDevice;
use super::{Gpu, Topology};

/// One cell of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// The diagonal.
    Itself,
    /// `NV#`: this many NVLinks.
    Nv(usize),
    Pix,
    Pxb,
    Phb,
    Node,
    Sys,
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Link::Itself => f.write_str(" X "),
            Link::Nv(n) => write!(f, "NV{n}"),
            Link::Pix => f.write_str("PIX"),
            Link::Pxb => f.write_str("PXB"),
            Link::Phb => f.write_str("PHB"),
            Link::Node => f.write_str("NODE"),
            Link::Sys => f.write_str("SYS"),
        }
    }
}

/// The PCIe part of a cell: how two devices are connected through the PCI tree.
pub fn pcie_link(t: &Topology, a: &PciDevice, b: &PciDevice) -> Link {
    if a.host_bridge() != b.host_bridge() || a.host_bridge().is_empty() {
        // Unknown NUMA nodes on both sides: a one-node machine that does not say so.
        return if t.numa_of(a) == t.numa_of(b) { Link::Node } else { Link::Sys };
    }
    let common = a.ancestors.iter().zip(b.ancestors.iter()).take_while(|(x, y)| x.name == y.name).count();
    if common <= 1 {
        return Link::Phb;
    }
    if a.ancestors.len() - common <= 1 && b.ancestors.len() - common <= 1 {
        Link::Pix
    } else {
        Link::Pxb
    }
}

/// How many NVLinks join two GPUs as nvidia-smi counts them: direct links between them,
/// or, when both have links to NVSwitches, the smaller of the two switch link counts.
pub fn nvlinks_between(a: &Gpu, b: &Gpu) -> usize {
    let direct = a.nvlinks.iter().filter(|r| **r == b.pci.bus_id).count();
    let sw = |g: &Gpu| g.nvlinks.iter().filter(|r| *r == NVSWITCH).count();
    direct + sw(a).min(sw(b))
}

/// The cell between GPU `i` and GPU `j`.
pub fn gpu_gpu(t: &Topology, i: usize, j: usize) -> Link {
    if i == j {
        return Link::Itself;
    }
    let (a, b) = (&t.gpus[i], &t.gpus[j]);
    match nvlinks_between(a, b) {
        0 => pcie_link(t, &a.pci, &b.pci),
        n => Link::Nv(n),
    }
}

/// The full matrix: GPUs first, then NICs, in both directions.
pub fn matrix(t: &Topology) -> Vec<Vec<Link>> {
    let devs: Vec<&PciDevice> = t.gpus.iter().map(|g| &g.pci).chain(t.nics.iter().map(|n| &n.pci)).collect();
    let ng = t.gpus.len();
    (0..devs.len())
        .map(|i| {
            (0..devs.len())
                .map(|j| match (i == j, i < ng && j < ng) {
                    (true, _) => Link::Itself,
                    (false, true) => gpu_gpu(t, i, j),
                    (false, false) => pcie_link(t, devs[i], devs[j]),
                })
                .collect()
        })
        .collect()
}

/// nvidia-smi's `CPU Affinity` of a GPU: its `local_cpulist`, or its NUMA node's CPUs.
pub fn cpu_affinity(t: &Topology, g: &Gpu) -> String {
    if !g.pci.local_cpus.is_empty() {
        return g.pci.local_cpus.to_string();
    }
    t.numa_of(&g.pci)
        .and_then(|n| t.numa_nodes.iter().find(|(m, _)| *m == n))
        .map(|(_, c)| c.to_string())
        .unwrap_or_else(|| "N/A".into())
}

/// nvidia-smi's `NUMA Affinity`: the device's NUMA node (see [`Topology::numa_of`]).
pub fn numa_affinity(t: &Topology, g: &Gpu) -> String {
    t.numa_of(&g.pci).map_or_else(|| "N/A".into(), |n| n.to_string())
}

/// The legend nvidia-smi prints under every matrix.
pub const LEGEND: &str = "\
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
";

/// `nvidia-smi topo -m`'s output for this topology.
pub fn render(t: &Topology) -> String {
    let m = matrix(t);
    let names: Vec<String> =
        (0..t.gpus.len()).map(|i| format!("GPU{i}")).chain((0..t.nics.len()).map(|i| format!("NIC{i}"))).collect();
    let mut s = String::new();
    let _ = writeln!(s, "\t\x1b[4m{}\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m", names.join("\t"));
    for (i, row) in m.iter().enumerate() {
        s.push_str(&names[i]);
        for c in row {
            let _ = write!(s, "\t{c}");
        }
        match t.gpus.get(i) {
            Some(g) => {
                let gnuma = g.gpu_numa_id.map_or_else(|| "N/A".into(), |n| n.to_string());
                let _ = writeln!(s, "\t{}\t{}\t\t{gnuma}", cpu_affinity(t, g), numa_affinity(t, g));
            }
            None => s.push_str("\t\t\t\t\n"),
        }
    }
    s.push('\n');
    s.push_str(LEGEND);
    if !t.nics.is_empty() {
        s.push_str("\nNIC Legend:\n\n");
        for (i, n) in t.nics.iter().enumerate() {
            let _ = writeln!(s, "  NIC{i}: {}", n.name);
        }
        s.push('\n');
    }
    s
}
