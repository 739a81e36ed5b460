//! `doorbell topo` without `-m`: the tree NCCL builds (CPU nodes, PCI switch nodes after
//! collapsing and BCM flattening, GPUs and NICs), with nvidia-smi's names.

use std::fmt::Write as _;

use super::nccl::{bcm_gen, place, Place};
use super::pci::PciDevice;
use super::Topology;

/// The tree, one device per line, indented under its switches.
pub fn render(t: &Topology) -> String {
    struct Leaf<'a> {
        place: Place,
        label: String,
        pci: &'a PciDevice,
    }
    let mut leaves: Vec<Leaf> = Vec::new();
    for (i, g) in t.gpus.iter().enumerate() {
        let name = g.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default();
        leaves.push(Leaf { place: place(&g.pci), label: format!("GPU{i} {}{name}", g.pci.bus_id), pci: &g.pci });
    }
    for (i, n) in t.nics.iter().enumerate() {
        let soft = if n.software { " (softhca, placed by DOORBELL_SOFTHCA_PCI)" } else { "" };
        leaves.push(Leaf { place: place(&n.pci), label: format!("NIC{i} {} {}{soft}", n.pci.bus_id, n.name), pci: &n.pci });
    }
    leaves.sort_by(|a, b| {
        let key = |l: &Leaf| (l.place.cpu.map_or(-1, |c| c as i64), l.place.switches.iter().map(|s| s.name.clone()).collect::<Vec<_>>(), l.pci.bus_id.clone());
        key(a).cmp(&key(b))
    });
    let mut o = String::new();
    if leaves.is_empty() {
        o.push_str("no GPU and no RDMA NIC in the PCI tree\n");
    }
    let mut cpu: Option<Option<u32>> = None;
    let mut stack: Vec<String> = Vec::new();
    for l in &leaves {
        if cpu != Some(l.place.cpu) {
            cpu = Some(l.place.cpu);
            stack.clear();
            let (id, cpus) = match l.place.cpu {
                Some(n) => (n.to_string(), t.numa_nodes.iter().find(|(m, _)| *m == n).map(|(_, c)| c.to_string()).unwrap_or_default()),
                None => ("-1".to_string(), l.pci.local_cpus.to_string()),
            };
            let _ = writeln!(o, "CPU/{id} (NUMA node {id}, CPUs {cpus})");
        }
        let common = stack.iter().zip(l.place.switches.iter()).take_while(|(a, b)| **a == b.name).count();
        stack.truncate(common);
        for sw in &l.place.switches[common..] {
            let bcm = match bcm_gen(&sw.id, 0) {
                0 => String::new(),
                g => format!(", Broadcom PEX Gen{g}: lower level flattened"),
            };
            let _ = writeln!(o, "{}PCI/{} switch {}{bcm}", "  ".repeat(stack.len() + 1), sw.name, sw.id);
            stack.push(sw.name.clone());
        }
        let _ = writeln!(o, "{}{}", "  ".repeat(stack.len() + 1), l.label);
    }
    o
}
