//! The topology model on fixture trees: the H200 machine's captured sysfs (against the
//! `nvidia-smi topo -m` captured on the same machine) and a synthetic DGX-like tree whose
//! expected matrix and NCCL decisions are derived by hand below.

use std::path::PathBuf;

use gdr::topo::facts::{self, GpuFacts};
use gdr::topo::nccl::{self, PathType, Settings};
use gdr::topo::{smi, sysfs, tree, Topology};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn topology(root: &str, softhca: Option<&str>, facts: &[GpuFacts]) -> Topology {
    let found = sysfs::read(&fixture(root), softhca.map(|s| ("softhca0", s))).unwrap();
    Topology { nics: found.nics, numa_nodes: found.numa_nodes, ..Topology::default() }.with_gpu_facts(found.gpus, facts)
}

fn dgx_facts() -> Vec<GpuFacts> {
    facts::parse(&std::fs::read_to_string(fixture("dgx-gpus.txt")).unwrap()).unwrap()
}

/// The block `nvidia-smi topo -m` printed on the H200 machine (gdr/tools/probe-gpu-node.sh).
fn captured_nvidia_smi() -> String {
    let probe = std::fs::read_to_string(fixture("h200-cmd/probe.txt")).unwrap();
    let start = probe.find("$ nvidia-smi topo -m\n").unwrap() + "$ nvidia-smi topo -m\n".len();
    let len = probe[start..].find("[exit 0]\n").unwrap();
    probe[start..start + len].to_string()
}

#[test]
fn h200_matrix_is_what_nvidia_smi_printed() {
    // One GPU (0000:00:06.0) straight on the host bridge pci0000:00 of a VM, numa_node -1,
    // local_cpulist 0-15, one NUMA node: nvidia-smi printed CPU affinity 0-15, NUMA
    // affinity 0 (the node whose CPUs the GPU is local to) and GPU NUMA ID N/A.
    let t = topology("h200", None, &[]);
    assert_eq!(t.gpus.len(), 1);
    assert_eq!(t.gpus[0].pci.bus_id, "0000:00:06.0");
    assert!(t.nics.is_empty(), "the machine has no RDMA NIC (/sys/class/infiniband is empty)");
    assert_eq!(smi::render(&t), captured_nvidia_smi());
}

#[test]
fn h200_with_softhca_on_the_host_bridge() {
    // softhca placed directly below the GPU's host bridge: GPU and NIC share pci0000:00
    // and no bridge below it, which nvidia-smi calls PHB; NCCL attaches both straight to
    // the CPU node (no switch) and calls the path PHB as well.
    let t = topology("h200", Some("/sys/devices/pci0000:00"), &[]);
    assert_eq!(t.nics.len(), 1);
    assert!(t.nics[0].software);
    let out = smi::render(&t);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "\t\x1b[4mGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m");
    assert_eq!(lines[1], "GPU0\t X \tPHB\t0-15\t0\t\tN/A");
    assert_eq!(lines[2], "NIC0\tPHB\t X \t\t\t\t");
    assert!(out.ends_with("\nNIC Legend:\n\n  NIC0: softhca0\n\n"), "{out:?}");

    let d = nccl::decide(&t, &Settings::default());
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].path, PathType::Phb);
    assert!(!d[0].read.enabled && !d[0].write.enabled, "PHB > PXB, the default level");
    for (level, on) in [("PHB", true), ("SYS", true), ("3", true), ("PXB", false), ("2", false), ("PIX", false)] {
        let s = Settings { gdr_level: Some(level.into()), ..Settings::default() };
        let d = nccl::decide(&t, &s);
        assert_eq!((d[0].read.enabled, d[0].write.enabled), (on, on), "NCCL_NET_GDR_LEVEL={level}");
    }
    let text = nccl::render(&t, &Settings::default());
    assert!(text.contains("GPU 0 / NIC 0 (softhca0): path PHB, GDR level PXB \u{2192} GDR off (read and write): distance PHB > PXB"), "{text}");
    assert!(text.contains("NCCL INFO GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 8 > 5)"), "{text}");
}

#[test]
fn h200_softhca_placements_and_bad_ones() {
    // Beside the GPU (its bus id) or at the virtio NIC that carries softhca's packets:
    // every function of this VM is on the root bus, so both are PHB to the GPU.
    for spec in ["0000:00:06.0", "0000:00:03.0", "/sys/devices/pci0000:00/0000:00:03.0"] {
        let t = topology("h200", Some(spec), &[]);
        assert_eq!(smi::matrix(&t)[0][1], smi::Link::Phb, "{spec}");
        assert_eq!(nccl::decide(&t, &Settings::default())[0].path, PathType::Phb, "{spec}");
    }
    for spec in ["nonsense", "0000:99:00.0", "/sys/class/net"] {
        let e = sysfs::read(&fixture("h200"), Some(("softhca0", spec))).unwrap_err();
        assert!(e.starts_with("DOORBELL_SOFTHCA_PCI="), "{spec}: {e}");
    }
}

// The synthetic DGX-like tree (gdr/tools/make-dgx-fixture.sh writes it; its header draws
// it). Ancestors of each device, host bridge first:
//   GPU0 13:00.0  pci0000:10 / RP 10:01.0 / BCM USP 11:00.0 / DSP 12:00.0
//   NIC0 14:00.0  pci0000:10 / RP 10:01.0 / BCM USP 11:00.0 / DSP 12:01.0
//   GPU1 17:00.0  pci0000:10 / RP 10:01.0 / BCM USP 11:00.0 / DSP 12:02.0 / BCM USP 15:00.0 / DSP 16:00.0
//   GPU2 33:00.0  pci0000:30 / RP 30:01.0 / PLX USP 31:00.0 / DSP 32:00.0
//   GPU3 34:00.0  pci0000:30 / RP 30:01.0 / PLX USP 31:00.0 / DSP 32:01.0
//   NIC1 35:00.0  pci0000:30 / RP 30:02.0
//   GPU4..NIC3: the same shapes on pci0000:90 (PLX at both levels) and pci0000:b0, NUMA node 1.
//
// nvidia-smi, by the legend:
//   GPU0-NIC0: both one downstream port below switch 11:00.0: one switch, PIX.
//   GPU1-NIC0, GPU0-GPU1: GPU1 is three bridges below 11:00.0 (DSP, USP, DSP): PXB.
//   GPU2-GPU3: one switch (31:00.0): PIX.
//   GPU2-NIC1: only the host bridge pci0000:30 in common (different root ports): PHB.
//   pci0000:10 and pci0000:30 devices: same NUMA node, different host bridges: NODE.
//   NUMA node 0 against node 1: SYS.
const DGX_PCIE: [&str; 12] = [
    "GPU0\t X \tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tPIX\tNODE\tSYS\tSYS\t0-55,112-167\t0\t\tN/A",
    "GPU1\tPXB\t X \tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\tPXB\tNODE\tSYS\tSYS\t0-55,112-167\t0\t\tN/A",
    "GPU2\tNODE\tNODE\t X \tPIX\tSYS\tSYS\tSYS\tSYS\tNODE\tPHB\tSYS\tSYS\t0-55,112-167\t0\t\tN/A",
    "GPU3\tNODE\tNODE\tPIX\t X \tSYS\tSYS\tSYS\tSYS\tNODE\tPHB\tSYS\tSYS\t0-55,112-167\t0\t\tN/A",
    "GPU4\tSYS\tSYS\tSYS\tSYS\t X \tPXB\tNODE\tNODE\tSYS\tSYS\tPIX\tNODE\t56-111,168-223\t1\t\tN/A",
    "GPU5\tSYS\tSYS\tSYS\tSYS\tPXB\t X \tNODE\tNODE\tSYS\tSYS\tPXB\tNODE\t56-111,168-223\t1\t\tN/A",
    "GPU6\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\t X \tPIX\tSYS\tSYS\tNODE\tPHB\t56-111,168-223\t1\t\tN/A",
    "GPU7\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPIX\t X \tSYS\tSYS\tNODE\tPHB\t56-111,168-223\t1\t\tN/A",
    "NIC0\tPIX\tPXB\tNODE\tNODE\tSYS\tSYS\tSYS\tSYS\t X \tNODE\tSYS\tSYS\t\t\t\t",
    "NIC1\tNODE\tNODE\tPHB\tPHB\tSYS\tSYS\tSYS\tSYS\tNODE\t X \tSYS\tSYS\t\t\t\t",
    "NIC2\tSYS\tSYS\tSYS\tSYS\tPIX\tPXB\tNODE\tNODE\tSYS\tSYS\t X \tNODE\t\t\t\t",
    "NIC3\tSYS\tSYS\tSYS\tSYS\tNODE\tNODE\tPHB\tPHB\tSYS\tSYS\tNODE\t X \t\t\t\t",
];

#[test]
fn dgx_matrix_derived_by_hand() {
    let t = topology("dgx", None, &[]);
    let out = smi::render(&t);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "\t\x1b[4mGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tNIC0\tNIC1\tNIC2\tNIC3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m");
    for (i, want) in DGX_PCIE.iter().enumerate() {
        assert_eq!(lines[1 + i], *want, "row {i}");
    }
    assert!(out.ends_with("\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n  NIC2: mlx5_2\n  NIC3: mlx5_3\n\n"));

    // With NVML's facts (18 NVLinks per GPU, all to NVSwitches) every GPU pair is NV18,
    // as nvidia-smi shows on an H100 HGX board; the NIC cells do not change.
    let t = topology("dgx", None, &dgx_facts());
    let out = smi::render(&t);
    for (i, line) in out.lines().skip(1).take(12).enumerate() {
        let cells: Vec<&str> = line.split('\t').collect();
        let want: Vec<&str> = DGX_PCIE[i].split('\t').collect();
        for j in 1..=12 {
            let expect = if i < 8 && j <= 8 && i + 1 != j { "NV18" } else { want[j] };
            assert_eq!(cells[j], expect, "row {i} column {j}");
        }
        assert_eq!(cells[13..], want[13..], "row {i} affinity");
    }
}

/// (path, GDR on) for GPU g and NIC n: one row per NIC, one column per GPU.
fn gdr_table(t: &Topology, s: &Settings) -> Vec<Vec<(PathType, bool, bool)>> {
    let d = nccl::decide(t, s);
    (0..t.nics.len())
        .map(|n| (0..t.gpus.len()).map(|g| {
            let p = d.iter().find(|p| p.gpu == g && p.nic == n).unwrap();
            (p.path, p.read.enabled, p.write.enabled)
        }).collect())
        .collect()
}

// NCCL's tree for the DGX fixture: it steps up two path elements at a time, so each
// switch is one PCI node named by its upstream port; pci0000:10 and pci0000:30 both hang
// off CPU node 0 (numa_node 0), pci0000:90 and pci0000:b0 off CPU node 1.
//   GPU0, NIC0 -> PCI 11:00.0 -> CPU 0. GPU1 -> PCI 15:00.0 -> PCI 11:00.0, but both are
//     Broadcom PEX Gen4 (1000:c010, subsystem 1000:a0xx): flattened, GPU1 -> PCI 11:00.0.
//   GPU2, GPU3 -> PCI 31:00.0 -> CPU 0; NIC1 is two elements below the host bridge
//     (root port, device) -> CPU 0 directly.
//   GPU4, NIC2 -> PCI 91:00.0; GPU5 -> PCI 95:00.0 -> PCI 91:00.0 (PLX: not flattened).
// Hence: GPU0/GPU1-NIC0 PIX (nvidia-smi: PIX/PXB), GPU4-NIC2 PIX, GPU5-NIC2 PXB,
// GPU2/3-NIC1 PHB, devices of different root complexes of one socket PHB (nvidia-smi:
// NODE, NCCL has no NODE), other socket SYS.
use PathType::{Phb, Pix, Pxb, Pxn, Sys};

#[test]
fn dgx_nccl_paths_and_default_gdr() {
    let t = topology("dgx", None, &[]);
    let paths: Vec<Vec<PathType>> = gdr_table(&t, &Settings::default()).iter().map(|r| r.iter().map(|c| c.0).collect()).collect();
    assert_eq!(paths, vec![
        //   GPU0 GPU1 GPU2 GPU3 GPU4 GPU5 GPU6 GPU7
        vec![Pix, Pix, Phb, Phb, Sys, Sys, Sys, Sys], // NIC0 mlx5_0
        vec![Phb, Phb, Phb, Phb, Sys, Sys, Sys, Sys], // NIC1 mlx5_1
        vec![Sys, Sys, Sys, Sys, Pix, Pxb, Phb, Phb], // NIC2 mlx5_2
        vec![Sys, Sys, Sys, Sys, Phb, Phb, Phb, Phb], // NIC3 mlx5_3
    ]);
    // Default level PXB: GDR where the path is PIX or PXB, in both directions (compute
    // capability unknown: taken as 8.0 or newer, so reads follow the same rule).
    for (n, row) in gdr_table(&t, &Settings::default()).iter().enumerate() {
        for (g, &(p, r, w)) in row.iter().enumerate() {
            assert_eq!((r, w), (p <= Pxb, p <= Pxb), "GPU {g} NIC {n}");
        }
    }
    let on = |s: &Settings| -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = nccl::decide(&t, s).iter().filter(|p| p.write.enabled).map(|p| (p.gpu, p.nic)).collect();
        v.sort();
        v
    };
    assert_eq!(on(&Settings::default()), vec![(0, 0), (1, 0), (4, 2), (5, 2)]);
    let level = |l: &str| Settings { gdr_level: Some(l.into()), ..Settings::default() };
    // PIX: GPU5 (PXB) drops out.
    assert_eq!(on(&level("PIX")), vec![(0, 0), (1, 0), (4, 2)]);
    assert_eq!(on(&level("1")), vec![(0, 0), (1, 0), (4, 2)], "old-style 1 = PIX");
    // PHB: every pair on the same socket.
    let same_socket: Vec<(usize, usize)> = {
        let mut v = Vec::new();
        for g in 0..8 {
            for n in 0..4 {
                if (g < 4) == (n < 2) {
                    v.push((g, n));
                }
            }
        }
        v.sort();
        v
    };
    assert_eq!(on(&level("PHB")), same_socket);
    assert_eq!(on(&level("SYS")).len(), 32);
    assert_eq!(on(&level("4")).len(), 32, "old-style 4 = SYS");
    assert!(on(&level("LOC")).is_empty());
    assert_eq!(on(&level("pxb")), on(&Settings::default()), "unknown name: default");
}

#[test]
fn dgx_gdr_reads_follow_nccl_net_gdr_read_and_compute_capability() {
    let t = topology("dgx", None, &[]);
    let s = Settings { gdr_read: Some("0".into()), ..Settings::default() };
    let d = nccl::decide(&t, &s);
    let p = d.iter().find(|p| p.gpu == 0 && p.nic == 0).unwrap();
    assert!(!p.read.enabled && p.write.enabled, "reads off, writes by distance");
    assert!(nccl::render(&t, &s).contains("GPU 0 / NIC 0 (mlx5_0): path PIX, GDR level PXB \u{2192} GDR on for write"));

    // Volta (7.0) without NVLink: reads off by default, on with NCCL_NET_GDR_READ=1.
    let mut volta = facts::parse(&std::fs::read_to_string(fixture("dgx-gpus.txt")).unwrap()).unwrap();
    for f in &mut volta {
        f.compute_capability = Some((7, 0));
        f.nvlinks.clear();
    }
    let t = topology("dgx", None, &volta);
    let p = nccl::decide(&t, &Settings::default()).into_iter().find(|p| p.gpu == 0 && p.nic == 0).unwrap();
    assert!(!p.read.enabled && p.write.enabled);
    let s = Settings { gdr_read: Some("1".into()), ..Settings::default() };
    let p = nccl::decide(&t, &s).into_iter().find(|p| p.gpu == 0 && p.nic == 0).unwrap();
    assert!(p.read.enabled && p.write.enabled);
    // Volta with NVLink peers: reads on by default.
    for f in &mut volta {
        f.nvlinks = vec![facts::NVSWITCH.into(); 6];
    }
    let t = topology("dgx", None, &volta);
    let p = nccl::decide(&t, &Settings::default()).into_iter().find(|p| p.gpu == 0 && p.nic == 0).unwrap();
    assert!(p.read.enabled);
}

#[test]
fn dgx_pxn_with_nvlink() {
    // With every GPU on the NVSwitches, a GPU whose own path to a NIC goes through a CPU
    // (PHB, SYS) relays through the NIC's local GPU when that one is at PXB or better:
    // NIC0's local GPU is GPU0 (PIX), NIC2's GPU4 (PIX); NIC1's and NIC3's best are PHB,
    // so nobody relays to them.
    let t = topology("dgx", None, &dgx_facts());
    let tab = gdr_table(&t, &Settings::default());
    let paths: Vec<Vec<PathType>> = tab.iter().map(|r| r.iter().map(|c| c.0).collect()).collect();
    assert_eq!(paths, vec![
        vec![Pix, Pix, Pxn, Pxn, Pxn, Pxn, Pxn, Pxn],
        vec![Phb, Phb, Phb, Phb, Sys, Sys, Sys, Sys],
        vec![Pxn, Pxn, Pxn, Pxn, Pix, Pxb, Pxn, Pxn],
        vec![Sys, Sys, Sys, Sys, Phb, Phb, Phb, Phb],
    ]);
    // PXN checks the relay's distance (PIX): GDR on for every PXN pair.
    for (n, row) in tab.iter().enumerate() {
        for (g, &(p, r, w)) in row.iter().enumerate() {
            assert_eq!((r, w), (p <= Pxn, p <= Pxn), "GPU {g} NIC {n}");
        }
    }
    let d = nccl::decide(&t, &Settings::default());
    assert_eq!(d.iter().find(|p| p.gpu == 6 && p.nic == 2).unwrap().via, Some(4));
    // NCCL_PXN_DISABLE=1: back to the PCI paths.
    let s = Settings { pxn_disable: Some("1".into()), ..Settings::default() };
    let d = nccl::decide(&t, &s);
    assert!(d.iter().all(|p| p.via.is_none() && p.path == p.pci));
}

#[test]
fn dgx_tree_is_nccls() {
    let t = topology("dgx", None, &dgx_facts());
    let out = tree::render(&t);
    assert!(out.contains("PCI/0000:11:00.0 switch 1000:c010 (1000:a064), Broadcom PEX Gen4: lower level flattened"), "{out}");
    assert!(!out.contains("PCI/0000:15:00.0"), "the lower BCM level is merged: {out}");
    assert!(out.contains("PCI/0000:95:00.0"), "the PLX lower level stays: {out}");
    // NIC1 hangs off CPU node 0 directly (two elements below its host bridge).
    let cpu0 = out.split("CPU/1").next().unwrap();
    assert!(cpu0.starts_with("CPU/0 (NUMA node 0, CPUs 0-55,112-167)\n  NIC1 0000:35:00.0 mlx5_1\n"), "{out}");
}

#[test]
fn only_gpus_nvml_lists_stay() {
    let found = sysfs::read(&fixture("dgx"), None).unwrap();
    let mut f = dgx_facts();
    f.retain(|g| g.bus_id != "0000:33:00.0");
    let mut t = Topology::default();
    let kept = t.keep_listed(found.gpus, &f);
    assert_eq!(kept.len(), 7);
    assert!(kept.iter().all(|g| g.bus_id != "0000:33:00.0"));
    assert_eq!(t.notes.len(), 1);
    assert!(t.notes[0].contains("0000:33:00.0"));
}

#[test]
fn gpus_follow_nvml_indices() {
    // NVML's order is not always bus order; nvidia-smi numbers GPUs by NVML index.
    let mut f = dgx_facts();
    for x in &mut f {
        x.index = x.index.map(|i| 7 - i);
    }
    let t = topology("dgx", None, &f);
    assert_eq!(t.gpus[0].pci.bus_id, "0000:b4:00.0");
    assert_eq!(t.gpus[7].pci.bus_id, "0000:13:00.0");
    let out = smi::render(&t);
    let gpu0 = out.lines().nth(1).unwrap();
    // Bus 0000:b4:00.0's row (GPU7 in bus order): NV18 to every GPU, PHB to NIC3 (which
    // has its own root port on the same host bridge), NODE to NIC2 (other host bridge).
    assert!(gpu0.starts_with("GPU0\t X \tNV18\t"), "{gpu0}");
    assert!(gpu0.contains("\tSYS\tSYS\tNODE\tPHB\t56-111,168-223\t1\t\tN/A"), "{gpu0}");
}

#[test]
fn nvml_present_or_a_clear_error() {
    match gdr::nvml::open() {
        Err(gdr::nvml::NvmlError::Unavailable(why)) => {
            assert!(!why.is_empty());
            testkit::skip(testkit::Need::Gpu, format!("NVML absent ({why}); the NVML half runs on a GPU machine"));
        }
        Err(e) => panic!("open gives only Unavailable: {e}"),
        Ok(nvml) => {
            // Every GPU NVML lists is in this machine's PCI tree, found by its bus id.
            let facts = gdr::nvml::gpu_facts(&nvml).unwrap();
            let found = sysfs::read(&sysfs::root(), None).unwrap();
            for f in &facts {
                assert!(found.gpus.iter().any(|g| g.bus_id == f.bus_id), "NVML GPU {} not in sysfs", f.bus_id);
                assert!(f.name.is_some());
            }
            let mut t = Topology::default();
            assert_eq!(t.keep_listed(found.gpus, &facts).len(), facts.len());
        }
    }
}

#[test]
fn softhca_on_the_dgx_tree() {
    // Below switch downstream port 12:01.0 (where mlx5_0 sits): as close to GPU0 as
    // mlx5_0 is, PIX for both tools, and NCCL enables GDR at the default level.
    let t = topology("dgx", Some("0000:12:01.0"), &[]);
    let s = t.nics.iter().position(|n| n.software).unwrap();
    assert_eq!(t.nics[s].name, "softhca0");
    assert_eq!(t.nics[s].pci.bus_id, "below 0000:12:01.0");
    let m = smi::matrix(&t);
    assert_eq!(m[0][8 + s], smi::Link::Pix);
    assert_eq!(m[8][8 + s], smi::Link::Pix, "mlx5_0 and softhca0 share the downstream port");
    let p = nccl::decide(&t, &Settings::default()).into_iter().find(|p| p.gpu == 0 && p.nic == s).unwrap();
    assert_eq!(p.path, Pix);
    assert!(p.read.enabled && p.write.enabled);

    // Beside mlx5_1, which sits straight on root port 30:02.0: nvidia-smi calls the two
    // functions PIX (one bridge, the root port, above both), NCCL sees no switch and
    // attaches both to the CPU node, so GPU2 is PHB from either.
    let t = topology("dgx", Some("0000:35:00.0"), &[]);
    let s = t.nics.iter().position(|n| n.software).unwrap();
    let m = smi::matrix(&t);
    assert_eq!(m[8 + 1][8 + s], smi::Link::Pix);
    assert_eq!(m[2][8 + s], smi::Link::Phb);
    let p = nccl::decide(&t, &Settings::default()).into_iter().find(|p| p.gpu == 2 && p.nic == s).unwrap();
    assert_eq!(p.path, Phb);
    assert!(!p.write.enabled);
}
