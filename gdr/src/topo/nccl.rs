//! NCCL's view of the same tree: the path type between each GPU and NIC and whether
//! NCCL uses GPUDirect RDMA on it, following NCCL 2.28 (the version PyTorch ships on the
//! H200 machine; `src/graph/xml.cc`, `topo.cc`, `paths.cc`).
//!
//! How NCCL builds its tree (`ncclTopoGetXmlFromSys`): from a device's real sysfs path it
//! steps up two elements at a time, so a PCIe switch (upstream port plus downstream
//! port) becomes one `PCI` node named after its upstream port, and it stops at the first
//! element that is not a bus id (the host bridge, `pci0000:10`), where it attaches to a
//! `CPU` node keyed by the `numa_node` of the topmost PCI node (one CPU node per NUMA
//! node: every root complex of a socket lands on the same CPU node). Broadcom PEX Gen4
//! and Gen5 switches (vendor 0x1000, device 0xc010 / 0xc030) show up as two switch
//! levels inside one chip; `ncclTopoFlattenBcmSwitches` merges the lower level into the
//! upper one. CPU nodes are joined to each other by `SYS` links.
//!
//! Path types (`ncclTopoSetPaths`, breadth-first over links): the first PCI link is
//! `PIX`, a PCI-to-PCI hop makes it `PXB`, a hop through a CPU node `PHB`, a CPU-to-CPU
//! link `SYS`; the type of a path is the worst of its hops. So NCCL has no `NODE`: two
//! root complexes of one socket are `PHB` to NCCL where nvidia-smi says `NODE`, and
//! devices straight below root ports (no switch) are `PHB` even when nvidia-smi says
//! `PIX` (two functions of one device).
//!
//! PXN (`ncclTopoComputePaths`): when a GPU's own path to a NIC goes through the CPU
//! (worse than `PXN`) and the GPU closest to that NIC is at `PXB` or better and joined
//! to it by NVLink, NCCL sends through that GPU instead: the path becomes `PXN`, and the
//! GDR check uses the relay GPU's distance. (NCCL also takes PXN when the relay has more
//! bandwidth to the NIC; with equal PCIe links, as on the boards modelled here, only the
//! rule above applies.) `NCCL_PXN_DISABLE=1` turns it off.
//!
//! The GDR decision (`ncclTopoCheckGdr`), once for reads (the NIC reads GPU memory:
//! sends) and once for writes (the NIC writes GPU memory: receives):
//! 1. both the NIC and the GPU must support GDR (assumed here; `doorbell gdr verify`
//!    checks it);
//! 2. reads only: `NCCL_NET_GDR_READ=0` disables them; unset (-2), they are disabled on
//!    GPUs older than compute capability 8.0 unless the GPU has an NVLink peer (or is the
//!    only GPU); any other value enables them;
//! 3. the distance (path type) must be at most the GDR level: `NCCL_NET_GDR_LEVEL`, a
//!    path type name (`PIX`, `PXB`, `PHB`, `SYS`, ...) or an old-style number (0 LOC,
//!    1 PIX, 2 PXB, 3 PHB, 4 and up SYS), default `PXB`. (NCCL 2.29 raises the default to
//!    `P2C` with `NCCL_NET_GDR_C2C=1`, which only differs on Grace C2C systems.)

use std::fmt::{self, Write as _};

use super::pci::{Bridge, PciDevice, PciId};
use super::smi::nvlinks_between;
use super::Topology;

/// NCCL's path types, in its order (`topoPathTypeStr` of NCCL 2.28): smaller is closer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathType {
    Loc = 0,
    Nvl = 1,
    Nvb = 2,
    C2c = 3,
    Pix = 4,
    Pxb = 5,
    P2c = 6,
    Pxn = 7,
    Phb = 8,
    Sys = 9,
    Net = 10,
    Dis = 11,
}

const NAMES: [&str; 12] = ["LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"];
const ALL: [PathType; 12] = [
    PathType::Loc, PathType::Nvl, PathType::Nvb, PathType::C2c, PathType::Pix, PathType::Pxb,
    PathType::P2c, PathType::Pxn, PathType::Phb, PathType::Sys, PathType::Net, PathType::Dis,
];

impl PathType {
    pub fn name(self) -> &'static str {
        NAMES[self as usize]
    }
}

impl fmt::Display for PathType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// C's `strtoll(s, NULL, 0)` as NCCL uses it for its integer settings: optional blanks
/// and sign, `0x` hex, leading-0 octal or decimal, stopping at the first other
/// character; no digits at all is 0.
pub fn strtoll0(s: &str) -> i64 {
    let t = s.trim_start();
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.starts_with('0') {
        (8, t)
    } else {
        (10, t)
    };
    let end = digits.find(|c: char| !c.is_digit(radix)).unwrap_or(digits.len());
    let v = i64::from_str_radix(&digits[..end], radix).unwrap_or(0);
    if neg { -v } else { v }
}

/// The `NCCL_*` settings the decision depends on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `NCCL_NET_GDR_LEVEL` as given.
    pub gdr_level: Option<String>,
    /// `NCCL_NET_GDR_READ` as given.
    pub gdr_read: Option<String>,
    /// `NCCL_PXN_DISABLE` as given.
    pub pxn_disable: Option<String>,
}

impl Settings {
    /// From this process's environment.
    pub fn from_env() -> Settings {
        let get = |k: &str| std::env::var(k).ok();
        Settings { gdr_level: get("NCCL_NET_GDR_LEVEL"), gdr_read: get("NCCL_NET_GDR_READ"), pxn_disable: get("NCCL_PXN_DISABLE") }
    }

    /// The GDR level NCCL uses (`ncclGetLevel`): a path type name up to `SYS` (exact,
    /// case-sensitive), else an old-style number (a value starting with a digit), else
    /// the default `PXB`. Also whether the setting took effect.
    pub fn level(&self) -> (PathType, bool) {
        const OLD: [PathType; 6] = [PathType::Loc, PathType::Pix, PathType::Pxb, PathType::Phb, PathType::Sys, PathType::Sys];
        if let Some(s) = &self.gdr_level {
            if let Some(i) = NAMES[..=PathType::Sys as usize].iter().position(|n| n == s) {
                return (ALL[i], true);
            }
            if s.as_bytes().first().is_some_and(u8::is_ascii_digit) {
                let old = strtoll0(s).clamp(0, OLD.len() as i64 - 1);
                return (OLD[old as usize], true);
            }
        }
        (PathType::Pxb, false)
    }

    /// `NCCL_NET_GDR_READ` as NCCL reads it (unset or empty: -2).
    pub fn read(&self) -> i64 {
        self.gdr_read.as_deref().filter(|s| !s.is_empty()).map_or(-2, strtoll0)
    }

    /// Whether PXN is on (`NCCL_PXN_DISABLE` is not 1).
    pub fn pxn(&self) -> bool {
        self.pxn_disable.as_deref().filter(|s| !s.is_empty()).map_or(0, strtoll0) != 1
    }
}

/// Where NCCL puts a device: the CPU node and the PCI switch nodes above it, top first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    /// The CPU node's NUMA id (`None` for NCCL's `-1`).
    pub cpu: Option<u32>,
    /// NCCL `PCI` nodes from the CPU down to the device's parent, after BCM flattening.
    pub switches: Vec<Bridge>,
}

/// NCCL's `getBcmGen`: 4 or 5 for a Broadcom PEX switch at `level` (0 upper, 1 lower).
pub fn bcm_gen(id: &PciId, level: u64) -> u32 {
    let p = id.packed() & 0xffff_ffff_ffff_f000;
    if p == 0x1000_c010_1000_a000 {
        4
    } else if p == (0x1000_c030_1000_0000 | (level * 0x1000)) {
        5
    } else {
        0
    }
}

/// NCCL's place of `d` (see the module docs).
pub fn place(d: &PciDevice) -> Place {
    // Index of the device in its full path (host bridge at 0); its NCCL parent is two up.
    let depth = d.ancestors.len();
    let mut idx: Vec<usize> = Vec::new();
    let mut k = depth;
    while k >= 3 {
        k -= 2;
        idx.push(k);
    }
    idx.reverse();
    let top_numa = match idx.first() {
        Some(&i) => d.ancestors[i].numa_node,
        None => d.numa_node,
    };
    let mut switches: Vec<Bridge> = idx.iter().map(|&i| d.ancestors[i].clone()).collect();
    // ncclTopoFlattenBcmSwitches: a Gen4/Gen5 upper switch absorbs a lower switch of the
    // same generation directly below it; a flattened switch is not flattened again.
    let mut i = 0;
    while i + 1 < switches.len() {
        let gen = bcm_gen(&switches[i].id, 0);
        if gen != 0 && bcm_gen(&switches[i + 1].id, 1) == gen {
            switches.remove(i + 1);
        }
        i += 1;
    }
    Place { cpu: top_numa, switches }
}

/// The path type between two devices through the PCI tree (no NVLink).
pub fn pci_path(a: &Place, b: &Place) -> PathType {
    if a.cpu != b.cpu {
        return PathType::Sys;
    }
    let common = a.switches.iter().zip(b.switches.iter()).take_while(|(x, y)| x.name == y.name).count();
    if common == 0 {
        PathType::Phb
    } else if a.switches.len() == common && b.switches.len() == common {
        PathType::Pix
    } else {
        PathType::Pxb
    }
}

/// One direction's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub enabled: bool,
    /// The distance compared with the level (the relay's, for PXN); `None` when the
    /// check stopped before comparing.
    pub distance: Option<PathType>,
    /// Why, in words.
    pub reason: String,
}

/// The result for one GPU-NIC pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub gpu: usize,
    pub nic: usize,
    /// The PCI path type.
    pub pci: PathType,
    /// The path NCCL uses (`PXN` when relayed).
    pub path: PathType,
    /// The relay GPU for PXN.
    pub via: Option<usize>,
    /// Read (NIC reads GPU memory: sends) and write (NIC writes it: receives).
    pub read: Decision,
    pub write: Decision,
}

/// The decision for every GPU-NIC pair.
pub fn decide(t: &Topology, s: &Settings) -> Vec<Pair> {
    let gp: Vec<Place> = t.gpus.iter().map(|g| place(&g.pci)).collect();
    let np: Vec<Place> = t.nics.iter().map(|n| place(&n.pci)).collect();
    let (level, _) = s.level();
    let mut out = Vec::new();
    for (n, nplace) in np.iter().enumerate() {
        let pci: Vec<PathType> = gp.iter().map(|g| pci_path(g, nplace)).collect();
        // The NIC's local GPU: the closest one (the first of equals).
        let local = (0..pci.len()).min_by_key(|&g| pci[g]);
        for g in 0..t.gpus.len() {
            let mut path = pci[g];
            let mut via = None;
            if let Some(l) = local.filter(|&l| l != g && s.pxn()) {
                if pci[l] <= PathType::Pxb && nvlinks_between(&t.gpus[g], &t.gpus[l]) > 0 && pci[g] > PathType::Pxn {
                    path = PathType::Pxn;
                    via = Some(l);
                }
            }
            let distance = via.map_or(path, |l| pci[l]);
            let check = |read: bool| -> Decision {
                if read {
                    let r = s.read();
                    if r == 0 {
                        return Decision { enabled: false, distance: None, reason: "NCCL_NET_GDR_READ=0".into() };
                    }
                    let cc = t.gpus[g].compute_capability;
                    if r < 0 && cc.is_some_and(|(major, minor)| major * 10 + minor < 80) {
                        let nvlink = t.gpus.len() == 1 || (0..t.gpus.len()).any(|o| o != g && nvlinks_between(&t.gpus[g], &t.gpus[o]) > 0);
                        if !nvlink {
                            let (a, b) = cc.unwrap_or_default();
                            return Decision {
                                enabled: false,
                                distance: None,
                                reason: format!("compute capability {a}.{b} < 8.0 without NVLink: reads off unless NCCL_NET_GDR_READ=1"),
                            };
                        }
                    }
                }
                if distance > level {
                    Decision { enabled: false, distance: Some(distance), reason: format!("distance {distance} > {level}") }
                } else {
                    Decision { enabled: true, distance: Some(distance), reason: format!("distance {distance} <= {level}") }
                }
            };
            out.push(Pair { gpu: g, nic: n, pci: pci[g], path, via, read: check(true), write: check(false) });
        }
    }
    out
}

/// The words for a pair's outcome.
fn outcome(p: &Pair) -> String {
    match (p.read.enabled, p.write.enabled) {
        (true, true) => "GDR on (read and write)".into(),
        (false, false) if p.read.reason == p.write.reason => format!("GDR off (read and write): {}", p.write.reason),
        (false, false) => format!("GDR off (read: {}; write: {})", p.read.reason, p.write.reason),
        (false, true) => format!("GDR on for write (NIC writes GPU memory: receives), off for read (sends): {}", p.read.reason),
        (true, false) => format!("GDR on for read (sends), off for write (receives): {}", p.write.reason),
    }
}

/// The NCCL section printed under the matrix.
pub fn render(t: &Topology, s: &Settings) -> String {
    let mut o = String::new();
    let (level, set) = s.level();
    let _ = writeln!(o, "NCCL (2.28 rules: src/graph/paths.cc ncclTopoCheckGdr):");
    let _ = match (&s.gdr_level, set) {
        (None, _) => writeln!(o, "  NCCL_NET_GDR_LEVEL unset: GDR level {level} (default)"),
        (Some(v), true) => writeln!(o, "  NCCL_NET_GDR_LEVEL={v}: GDR level {level}"),
        (Some(v), false) => writeln!(o, "  NCCL_NET_GDR_LEVEL={v} is no level NCCL knows: GDR level {level} (default)"),
    };
    let _ = match s.read() {
        -2 if s.gdr_read.is_none() => writeln!(o, "  NCCL_NET_GDR_READ unset: GDR for reads (sends) on compute capability 8.0 and newer, older GPUs only with NVLink"),
        0 => writeln!(o, "  NCCL_NET_GDR_READ={}: GDR for reads (sends) off", s.gdr_read.as_deref().unwrap_or("")),
        r if r < 0 => writeln!(o, "  NCCL_NET_GDR_READ={r}: as unset"),
        _ => writeln!(o, "  NCCL_NET_GDR_READ={}: GDR for reads (sends) on", s.gdr_read.as_deref().unwrap_or("")),
    };
    if !s.pxn() {
        let _ = writeln!(o, "  NCCL_PXN_DISABLE=1: no PXN");
    }
    let _ = writeln!(o, "  (GPU and NIC taken to support GDR; `doorbell gdr verify` checks that)");
    let _ = writeln!(o, "  (under each pair, what NCCL logs for its read check, then its write check, once where both log the same)");
    if t.gpus.iter().any(|g| g.compute_capability.is_none()) && s.read() < 0 {
        let _ = writeln!(o, "  (compute capability unknown without NVML: taken as 8.0 or newer)");
    }
    if t.gpus.is_empty() || t.nics.is_empty() {
        let _ = writeln!(o, "  no GPU-NIC pair ({} GPU(s), {} NIC(s))", t.gpus.len(), t.nics.len());
    }
    for p in decide(t, s) {
        let nic = &t.nics[p.nic];
        let path = match p.via {
            Some(v) => format!("{} (PCI {}; via GPU {v}, at {})", p.path, p.pci, p.read.distance.or(p.write.distance).map_or("?", PathType::name)),
            None => p.path.to_string(),
        };
        let _ = writeln!(o, "GPU {} / NIC {} ({}): path {path}, GDR level {level} \u{2192} {}", p.gpu, p.nic, nic.name, outcome(&p));
        let mut logged: Vec<String> = Vec::new();
        for (d, read) in [(&p.read, 1), (&p.write, 0)] {
            let Some(dist) = d.distance else { continue };
            let (dn, ln) = (dist as u32, level as u32);
            let line = if d.enabled {
                format!("    NCCL INFO GPU Direct RDMA Enabled for GPU {} / HCA {:x} (distance {dn} <= {ln}), read {read} mode Default", p.gpu, p.nic)
            } else {
                format!("    NCCL INFO GPU Direct RDMA Disabled for GPU {} / HCA {:x} (distance {dn} > {ln})", p.gpu, p.nic)
            };
            if !logged.contains(&line) {
                let _ = writeln!(o, "{line}");
                logged.push(line);
            }
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_like_nccl() {
        let lv = |v: &str| Settings { gdr_level: Some(v.into()), ..Settings::default() }.level();
        assert_eq!(Settings::default().level(), (PathType::Pxb, false));
        assert_eq!(lv("PHB"), (PathType::Phb, true));
        assert_eq!(lv("SYS"), (PathType::Sys, true));
        assert_eq!(lv("phb"), (PathType::Pxb, false), "names are case-sensitive");
        assert_eq!(lv("NET"), (PathType::Pxb, false), "only up to SYS");
        assert_eq!(lv("0"), (PathType::Loc, true));
        assert_eq!(lv("1"), (PathType::Pix, true));
        assert_eq!(lv("3"), (PathType::Phb, true));
        assert_eq!(lv("9"), (PathType::Sys, true));
        let rd = |v: &str| Settings { gdr_read: Some(v.into()), ..Settings::default() }.read();
        assert_eq!(Settings::default().read(), -2);
        assert_eq!(rd("1"), 1);
        assert_eq!(rd("0"), 0);
        assert_eq!(rd("yes"), 0, "strtoll of a word is 0");
        assert_eq!(rd("0x10"), 16);
        assert_eq!(rd(""), -2);
        assert!(Settings::default().pxn());
        assert!(!Settings { pxn_disable: Some("1".into()), ..Settings::default() }.pxn());
    }

    #[test]
    fn bcm_generations() {
        let id = |d: u16, sd: u16| PciId { vendor: 0x1000, device: d, subsystem_vendor: 0x1000, subsystem_device: sd };
        assert_eq!(bcm_gen(&id(0xc010, 0xa064), 0), 4);
        assert_eq!(bcm_gen(&id(0xc010, 0xa064), 1), 4);
        assert_eq!(bcm_gen(&id(0xc030, 0x0064), 0), 5);
        assert_eq!(bcm_gen(&id(0xc030, 0x1064), 1), 5);
        assert_eq!(bcm_gen(&id(0xc030, 0x1064), 0), 0);
        assert_eq!(bcm_gen(&PciId { vendor: 0x10b5, device: 0x9797, ..PciId::default() }, 0), 0);
    }
}
