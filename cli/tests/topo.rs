//! `doorbell topo` end to end on the fixture trees under gdr/tests/fixtures (SYSFS_PATH),
//! with an empty GPU facts file so that NVML, where present, does not add this
//! machine's GPUs' facts to a fixture's GPUs.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../gdr/tests/fixtures")
}

fn doorbell(root: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_doorbell"));
    c.arg("topo").args(args).env("SYSFS_PATH", fixtures().join(root)).env("DOORBELL_TOPO_GPUS", "/dev/null");
    for k in ["DOORBELL_SOFTHCA_PCI", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_PXN_DISABLE"] {
        c.env_remove(k);
    }
    c.envs(env.iter().copied());
    c.output().expect("spawn doorbell")
}

#[test]
fn matrix_on_the_h200_capture_is_nvidia_smis() {
    // The bytes `nvidia-smi topo -m` printed on the machine the tree was captured on.
    let probe = std::fs::read_to_string(fixtures().join("h200-cmd/probe.txt")).unwrap();
    let start = probe.find("$ nvidia-smi topo -m\n").unwrap() + "$ nvidia-smi topo -m\n".len();
    let smi = &probe[start..start + probe[start..].find("[exit 0]\n").unwrap()];
    let out = doorbell("h200", &["-m"], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with(smi), "{stdout}");
    // Then the NCCL section, after a blank line.
    assert!(stdout[smi.len()..].starts_with("\nNCCL (2.28 rules"), "{stdout}");
}

#[test]
fn softhca_placed_by_configuration_and_gdr_level_override() {
    let out = doorbell("h200", &["-m"], &[("DOORBELL_SOFTHCA_PCI", "/sys/devices/pci0000:00"), ("NCCL_NET_GDR_LEVEL", "PHB")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.contains("GPU0\t X \tPHB\t0-15\t0\t\tN/A\nNIC0\tPHB\t X \t\t\t\t\n"), "{s}");
    assert!(s.contains("  NIC0: softhca0\n"), "{s}");
    assert!(s.contains("GPU 0 / NIC 0 (softhca0): path PHB, GDR level PHB \u{2192} GDR on (read and write)"), "{s}");
}

#[test]
fn tree_view_on_the_dgx_tree() {
    let facts = fixtures().join("dgx-gpus.txt");
    let out = doorbell("dgx", &["--gpus", facts.to_str().unwrap()], &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8(out.stdout).unwrap();
    assert!(s.starts_with("CPU/0 (NUMA node 0, CPUs 0-55,112-167)\n"), "{s}");
    assert!(s.contains("    GPU0 0000:13:00.0 NVIDIA H100 80GB HBM3\n"), "{s}");
    assert!(s.contains("GPU 2 / NIC 0 (mlx5_0): path PXN (PCI PHB; via GPU 0, at PIX), GDR level PXB \u{2192} GDR on (read and write)"), "{s}");
}

#[test]
fn bad_placement_is_a_clear_error() {
    let out = doorbell("h200", &["-m"], &[("DOORBELL_SOFTHCA_PCI", "0000:99:00.0")]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("doorbell: DOORBELL_SOFTHCA_PCI=0000:99:00.0: "), "{err}");
    let out = doorbell("no-such-tree", &["-m"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sysfs root"));
}

#[test]
fn matches_live_nvidia_smi() {
    // On a GPU machine: this machine's sysfs and NVML against nvidia-smi itself.
    let smi = match Command::new("nvidia-smi").args(["topo", "-m"]).output() {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        _ => {
            testkit::skip(testkit::Need::Gpu, "nvidia-smi topo -m does not run here (run this test on a GPU machine)");
            return;
        }
    };
    let mut c = Command::new(env!("CARGO_BIN_EXE_doorbell"));
    c.args(["topo", "-m"]);
    for k in ["SYSFS_PATH", "DOORBELL_TOPO_GPUS", "DOORBELL_SOFTHCA_PCI"] {
        c.env_remove(k);
    }
    let out = c.output().expect("spawn doorbell");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ours = String::from_utf8(out.stdout).unwrap();
    assert!(ours.starts_with(&smi), "nvidia-smi:\n{smi}\ndoorbell:\n{ours}");
}
