//! Reading the PCI tree from sysfs, rooted at `$SYSFS_PATH` as libibverbs does (default
//! `/sys`), so that tests run on captured and synthetic trees.
//!
//! What is read, as NCCL reads it: the real path of each device (`bus/pci/devices/*` and
//! `class/infiniband/*/device` are links into `devices/pci*/...`), every element of that
//! path up to the host bridge with its `vendor`, `device`, `subsystem_vendor`,
//! `subsystem_device` and `numa_node`, the device's `class`, `numa_node` and
//! `local_cpulist`, and `devices/system/node/node*/cpulist`.

use std::fs;
use std::path::{Path, PathBuf};

use super::cpuset::CpuSet;
use super::pci::{is_bus_id, normalize_bus_id, parse_hex, Bridge, PciDevice, PciId};
use super::{natural_cmp, Nic};

/// The sysfs root: `$SYSFS_PATH` or `/sys`.
pub fn root() -> PathBuf {
    uverbs::discovery::sysfs_root()
}

/// What sysfs says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// GPUs in PCI bus order.
    pub gpus: Vec<PciDevice>,
    /// RDMA NICs, in nvidia-smi's order (by name).
    pub nics: Vec<Nic>,
    pub numa_nodes: Vec<(u32, CpuSet)>,
    /// Devices skipped and why.
    pub notes: Vec<String>,
}

fn read_trim(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn hex16(dir: &Path, attr: &str) -> u16 {
    read_trim(&dir.join(attr)).and_then(|s| parse_hex(&s)).unwrap_or(0) as u16
}

fn numa_node(dir: &Path) -> Option<u32> {
    read_trim(&dir.join("numa_node")).and_then(|s| s.parse::<i64>().ok()).filter(|&n| n >= 0).map(|n| n as u32)
}

fn pci_id(dir: &Path) -> PciId {
    PciId {
        vendor: hex16(dir, "vendor"),
        device: hex16(dir, "device"),
        subsystem_vendor: hex16(dir, "subsystem_vendor"),
        subsystem_device: hex16(dir, "subsystem_device"),
    }
}

/// The PCI class code (`0x030200`) of a device directory.
fn class_of(dir: &Path) -> Option<u32> {
    read_trim(&dir.join("class")).and_then(|s| parse_hex(&s))
}

/// A tree rooted somewhere: paths are resolved as the kernel would, but inside `root`.
pub struct Tree {
    root: PathBuf,
    devices: PathBuf,
}

impl Tree {
    /// The tree under `root` (made absolute and free of links).
    pub fn new(root: &Path) -> Result<Tree, String> {
        let root = root.canonicalize().map_err(|e| format!("sysfs root {}: {e}", root.display()))?;
        let devices = root.join("devices");
        Ok(Tree { root, devices })
    }

    /// The elements of a real device path below `devices/`: host bridge first.
    fn elements(&self, real: &Path) -> Option<Vec<String>> {
        let rel = real.strip_prefix(&self.devices).ok()?;
        let v: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        (v.len() >= 2 && v[0].starts_with("pci") && v[1..].iter().all(|c| is_bus_id(c))).then_some(v)
    }

    /// The path elements `elems` (host bridge first) as bridges, with their registers.
    fn ancestors(&self, elems: &[String]) -> Vec<Bridge> {
        let mut dir = self.devices.clone();
        elems
            .iter()
            .map(|e| {
                dir.push(e);
                if is_bus_id(e) {
                    Bridge { name: e.clone(), id: pci_id(&dir), numa_node: numa_node(&dir) }
                } else {
                    Bridge { name: e.clone(), id: PciId::default(), numa_node: None }
                }
            })
            .collect()
    }

    /// The device at a real sysfs path, if it is a PCI function below a host bridge.
    pub fn device(&self, real: &Path) -> Option<PciDevice> {
        let elems = self.elements(real)?;
        let (last, above) = elems.split_last()?;
        Some(PciDevice {
            bus_id: last.clone(),
            ancestors: self.ancestors(above),
            id: pci_id(real),
            numa_node: numa_node(real),
            local_cpus: read_trim(&real.join("local_cpulist")).and_then(|s| CpuSet::parse(&s).ok()).unwrap_or_default(),
        })
    }

    /// Every GPU: NVIDIA (vendor 0x10de) 3D or VGA controllers (class 0x0302xx, 0x0300xx).
    pub fn gpus(&self) -> Vec<PciDevice> {
        let mut v = Vec::new();
        let Ok(rd) = fs::read_dir(self.root.join("bus/pci/devices")) else { return v };
        for e in rd.flatten() {
            let Ok(real) = e.path().canonicalize() else { continue };
            let is_gpu = hex16(&real, "vendor") == 0x10de && matches!(class_of(&real).map(|c| c >> 8), Some(0x0302 | 0x0300));
            if is_gpu {
                if let Some(d) = self.device(&real) {
                    v.push(d);
                }
            }
        }
        v.sort_by(|a, b| a.bus_id.cmp(&b.bus_id));
        v
    }

    /// Every RDMA device with a PCI function (`class/infiniband/*/device`); others (rxe,
    /// whose parent is a netdev) are noted and skipped, as nvidia-smi does not list them.
    pub fn nics(&self, notes: &mut Vec<String>) -> Vec<Nic> {
        let mut v = Vec::new();
        let Ok(rd) = fs::read_dir(self.root.join("class/infiniband")) else { return v };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            match e.path().join("device").canonicalize().ok().and_then(|real| self.device(&real)) {
                Some(pci) => v.push(Nic { name, pci, software: false }),
                None => notes.push(format!("{name}: no PCI device behind it, not in the matrix")),
            }
        }
        v.sort_by(|a, b| natural_cmp(&a.name, &b.name));
        v
    }

    /// NUMA nodes and their CPUs.
    pub fn numa_nodes(&self) -> Vec<(u32, CpuSet)> {
        let mut v = Vec::new();
        let Ok(rd) = fs::read_dir(self.devices.join("system/node")) else { return v };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Some(n) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) else { continue };
            let cpus = read_trim(&e.path().join("cpulist")).and_then(|s| CpuSet::parse(&s).ok()).unwrap_or_default();
            v.push((n, cpus));
        }
        v.sort_by_key(|(n, _)| *n);
        v
    }

    /// Places a software NIC named `name` where `spec` says (`DOORBELL_SOFTHCA_PCI`):
    /// - a PCI address or the sysfs path of an endpoint: the NIC is another function
    ///   beside that device (same bridges, NUMA node and CPUs), as if it shared its card;
    /// - a bridge (class 0x0604xx) or a host bridge (`/sys/devices/pci0000:00`): the NIC
    ///   is a device directly below it.
    ///
    /// A sysfs path beginning with `/sys/` is taken inside this tree's root.
    pub fn place_software_nic(&self, name: &str, spec: &str) -> Result<Nic, String> {
        let bad = |why: String| format!("{}={spec}: {why}", softhca::config::PCI_ENV);
        let path = if let Some(bdf) = normalize_bus_id(spec) {
            self.root.join("bus/pci/devices").join(bdf)
        } else if let Some(rest) = spec.strip_prefix("/sys/") {
            self.root.join(rest)
        } else if spec.starts_with('/') {
            PathBuf::from(spec)
        } else {
            return Err(bad("expected a PCI address (0000:00:06.0) or a sysfs device path (/sys/devices/pci0000:00/0000:00:06.0)".into()));
        };
        let real = path.canonicalize().map_err(|e| bad(format!("{}: {e}", path.display())))?;
        let rel = real.strip_prefix(&self.devices).map_err(|_| bad(format!("{} is not below {}", real.display(), self.devices.display())))?;
        let elems: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
        let not_pci = || bad(format!("{} is no PCI device or host bridge", real.display()));
        match elems.as_slice() {
            [hb] if hb.starts_with("pci") => {
                // Directly on the root complex: NUMA node and CPUs of its first device.
                let mut kids: Vec<PathBuf> = fs::read_dir(&real).map_err(|e| bad(e.to_string()))?.flatten().map(|e| e.path())
                    .filter(|p| p.file_name().is_some_and(|n| is_bus_id(&n.to_string_lossy()))).collect();
                kids.sort();
                let first = kids.first();
                Ok(Nic {
                    name: name.to_string(),
                    pci: PciDevice {
                        bus_id: format!("below {hb}"),
                        ancestors: self.ancestors(&elems),
                        id: PciId::default(),
                        numa_node: first.and_then(|p| numa_node(p)),
                        local_cpus: first.and_then(|p| read_trim(&p.join("local_cpulist"))).and_then(|s| CpuSet::parse(&s).ok()).unwrap_or_default(),
                    },
                    software: true,
                })
            }
            _ => {
                let dev = self.device(&real).ok_or_else(not_pci)?;
                let bridge = class_of(&real).is_some_and(|c| c >> 8 == 0x0604);
                let pci = if bridge {
                    let mut ancestors = dev.ancestors.clone();
                    ancestors.push(Bridge { name: dev.bus_id.clone(), id: dev.id, numa_node: dev.numa_node });
                    PciDevice { bus_id: format!("below {}", dev.bus_id), ancestors, id: PciId::default(), ..dev }
                } else {
                    PciDevice { id: PciId::default(), ..dev }
                };
                Ok(Nic { name: name.to_string(), pci, software: true })
            }
        }
    }
}

/// Reads the tree under `root`, adding the software NIC `(name, spec)` if given.
pub fn read(root: &Path, software_nic: Option<(&str, &str)>) -> Result<Found, String> {
    let tree = Tree::new(root)?;
    let mut notes = Vec::new();
    let mut nics = tree.nics(&mut notes);
    if let Some((name, spec)) = software_nic {
        nics.push(tree.place_software_nic(name, spec)?);
        nics.sort_by(|a, b| natural_cmp(&a.name, &b.name));
    }
    Ok(Found { gpus: tree.gpus(), nics, numa_nodes: tree.numa_nodes(), notes })
}
