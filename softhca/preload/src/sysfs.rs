//! The sysfs tree libibverbs reads (under `SYSFS_PATH`) to find softhca.
//!
//! What is read and why (rdma-core 44, sysfs mode):
//! - `class/infiniband_verbs/abi_version`: the uverbs ABI, must be 3..6; we say 6.
//! - `class/infiniband_verbs/uverbs0/{ibdev,dev,abi_version}`: the device's name, the
//!   char device number (`major:minor`, compared with `fstat(fd).st_rdev` at open) and
//!   the driver ABI (libmlx5 accepts exactly 1).
//! - `class/infiniband/<name>/node_type` ("1: CA"), `node_guid` (ibv_get_device_guid,
//!   ibv_devices), `board_id` (ibv_devinfo), `device/modalias` (how libmlx5 claims the
//!   device: `pci:v000015B3d00001017...`, upper-case hex).
//! - `ports/1/gids/N`, `ports/1/gid_attrs/{types,ndevs}/N`, `ports/1/pkeys/N`: the GID and
//!   P_Key tables, read when the device has no ioctl support (QUERY_GID_ENTRY) and by
//!   ibv_query_pkey always.
//!
//! The rest (`fw_ver`, `hca_type`, `hw_rev`, `node_desc`, `sys_image_guid`, the port's
//! `state`/`rate`/`link_layer`...) is not read by libibverbs but by scripts and tools
//! (`ibstat`, `show_gids`) that look at sysfs directly; it is written the way mlx5_ib
//! presents a ConnectX-5 port running RoCE.
//!
//! Files are written the way sysfs presents them: one value and a newline. Empty GID
//! rows have an all-zero `gids/N` and no `types/N` (the kernel fails that read).
//!
//! The layout is the kernel's: `class/infiniband/<name>` and
//! `class/infiniband_verbs/uverbs0` are symbolic links into the PCI function's directory
//! under `devices/`, whose `infiniband/<name>` and `infiniband_verbs/uverbs0` each have a
//! `device` link back to it. The function ([`PCI_BUS`]/[`PCI_FUNCTION`], a PCI domain no
//! host has) carries what tools read of a ConnectX (UCX's topology code, `lspci`-like
//! scripts): `vendor`, `device`, `subsystem_*`, `class`, `revision`, `modalias`,
//! `numa_node`, `local_cpulist` and `local_cpus`, the PCIe link's speed and width, a `driver` link named
//! `mlx5_core`, and `net/<netdev>`, a link to the instance's network interface in
//! the real `/sys/class/net`. Programs that read `/sys/class/infiniband...` (or the
//! function's `/sys/devices/...` path) directly, not through `SYSFS_PATH`, are led here by
//! the path hooks ([`crate::shim::sys_redirect`]).

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;

use softhca::Config;

/// `major:minor` of `/dev/infiniband/uverbs0` on Linux (IB_UVERBS_MAJOR 231, base minor 192).
pub const UVERBS_MAJOR: u32 = 231;
pub const UVERBS_MINOR: u32 = 192;
/// The uverbs device name.
pub const UVERBS_NAME: &str = "uverbs0";
/// PCI identity libmlx5 matches: Mellanox, ConnectX-5 (0x1017), Ethernet controller class.
pub const PCI_VENDOR: u16 = 0x15b3;
/// The PCI bus directory (`pci<domain>:<bus>`, as the kernel names a root bus) and the
/// function's (`<domain>:<bus>:<dev>.<fn>`), in domain 0xd00b, which no real host uses
/// (domains are 0 on most machines, a few more on large ones, 0x10000 and up behind VMD).
pub const PCI_BUS: &str = "pcid00b:00";
pub const PCI_FUNCTION: &str = "d00b:00:00.0";

fn guid(b: &[u8; 8]) -> String {
    format!("{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}:{:02x}{:02x}", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7])
}

fn gid(g: &[u8; 16]) -> String {
    g.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect::<Vec<_>>().join(":")
}

/// The port's `rate` text ("100 Gb/sec (4X EDR)") for its width and speed codes.
fn rate(width: u8, speed: u8) -> String {
    let (lanes, w) = match width {
        2 => (4, "4X"),
        4 => (8, "8X"),
        8 => (12, "12X"),
        16 => (2, "2X"),
        _ => (1, "1X"),
    };
    // Nominal Gb/s per lane, as the kernel prints them.
    let (lane, name) = match speed {
        2 => (5.0, "DDR"),
        4 => (10.0, "QDR"),
        8 => (10.0, "FDR10"),
        16 => (14.0, "FDR"),
        32 => (25.0, "EDR"),
        64 => (50.0, "HDR"),
        128 => (100.0, "NDR"),
        _ => (2.5, "SDR"),
    };
    let total: f64 = lane * lanes as f64;
    if total.fract() == 0.0 {
        format!("{} Gb/sec ({w} {name})", total as u64)
    } else {
        format!("{total:.1} Gb/sec ({w} {name})")
    }
}

fn put(dir: &Path, name: &str, value: &str) -> io::Result<()> {
    fs::write(dir.join(name), format!("{value}\n"))
}

fn mkdir(dir: &Path) -> io::Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o755).create(dir)
}

fn link(target: &str, at: &Path) -> io::Result<()> {
    std::os::unix::fs::symlink(target, at)
}

/// The CPUs online now (`/sys/devices/system/cpu/online`, a cpulist such as `0-15`): a
/// PCI function without a NUMA node has every online CPU local (`cpumask_of_pcibus`).
fn online_cpus() -> String {
    fs::read_to_string("/sys/devices/system/cpu/online").map(|s| s.trim().to_string()).ok()
        .filter(|s| !s.is_empty()).unwrap_or_else(|| "0".to_string())
}

/// The CPUs of a cpulist (`0-3,8`); None if it does not parse.
fn cpus_of(list: &str) -> Option<Vec<u32>> {
    let mut v = Vec::new();
    for r in list.trim().split(',') {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
        v.extend(a..=b.min(a + 65535));
    }
    Some(v)
}

/// `cpus` as the kernel prints a cpumask (`%*pb`, `local_cpus`): hexadecimal, in 32-bit
/// words separated by commas, most significant first, over `nbits` bits (`nr_cpu_ids`);
/// the first word has only the digits its bits need.
fn cpumask(cpus: &[u32], nbits: u32) -> String {
    let nbits = nbits.max(1);
    let nwords = nbits.div_ceil(32) as usize;
    let mut words = vec![0u32; nwords];
    for &c in cpus.iter().filter(|&&c| c < nbits) {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let top_bits = nbits - (nwords as u32 - 1) * 32;
    let top_digits = top_bits.div_ceil(4) as usize;
    let mut out = format!("{:0top_digits$x}", words[nwords - 1]);
    for w in words.iter().rev().skip(1) {
        out.push_str(&format!(",{w:08x}"));
    }
    out
}

/// `local_cpus` for the online CPUs, over the possible ones.
fn online_mask() -> String {
    let online = cpus_of(&online_cpus()).unwrap_or_else(|| vec![0]);
    let possible = fs::read_to_string("/sys/devices/system/cpu/possible").ok().and_then(|s| cpus_of(&s));
    let nbits = possible.as_ref().and_then(|p| p.iter().max()).or(online.iter().max()).map_or(1, |m| m + 1);
    cpumask(&online, nbits)
}

/// The host name, for `node_desc` ("<host> <device>", as mlx5_ib sets it).
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into our buffer.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".to_string();
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The name of the netdev with this index, if any.
fn ifname(index: u32) -> Option<String> {
    if index == 0 {
        return None;
    }
    let mut buf = [0u8; libc::IF_NAMESIZE];
    // SAFETY: if_indextoname writes at most IF_NAMESIZE bytes into our buffer.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr().cast()) };
    if p.is_null() {
        return None;
    }
    let n = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Writes the tree for one device described by `cfg` under `root`, which must not exist
/// yet (it is created with mode 0700, so nobody else can plant files in it).
pub fn write_tree(root: &Path, cfg: &Config) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(root)?;
    let pci = root.join("devices").join(PCI_BUS).join(PCI_FUNCTION);
    let verbs = root.join("class/infiniband_verbs");
    let uv = pci.join("infiniband_verbs").join(UVERBS_NAME);
    mkdir(&uv)?;
    mkdir(&verbs)?;
    mkdir(&root.join("class/infiniband"))?;
    put(&verbs, "abi_version", "6")?;
    link(&format!("../../devices/{PCI_BUS}/{PCI_FUNCTION}/infiniband_verbs/{UVERBS_NAME}"), &verbs.join(UVERBS_NAME))?;
    link(&format!("../../../{PCI_FUNCTION}"), &uv.join("device"))?;
    put(&uv, "ibdev", &cfg.name)?;
    put(&uv, "dev", &format!("{UVERBS_MAJOR}:{UVERBS_MINOR}"))?;
    put(&uv, "abi_version", "1")?;

    let ib = pci.join("infiniband").join(&cfg.name);
    mkdir(&ib)?;
    link(&format!("../../devices/{PCI_BUS}/{PCI_FUNCTION}/infiniband/{}", cfg.name), &root.join("class/infiniband").join(&cfg.name))?;
    link(&format!("../../../{PCI_FUNCTION}"), &ib.join("device"))?;
    put(&ib, "node_type", "1: CA")?;
    put(&ib, "node_guid", &guid(&cfg.node_guid))?;
    put(&ib, "sys_image_guid", &guid(&cfg.sys_image_guid))?;
    let (a, b, c) = cfg.fw_ver;
    put(&ib, "fw_ver", &format!("{a}.{b}.{c:04}"))?;
    put(&ib, "hca_type", &format!("MT{}", cfg.vendor_part_id))?;
    put(&ib, "hw_rev", &format!("{:#x}", cfg.hw_ver))?;
    put(&ib, "board_id", softhca::BOARD_ID)?;
    put(&ib, "node_desc", &format!("{} {}", hostname(), cfg.name))?;

    let dev_id = cfg.vendor_part_id as u16;
    put(&pci, "modalias", &format!("pci:v{:08X}d{:08X}sv{:08X}sd{:08X}bc02sc00i00", PCI_VENDOR, dev_id, PCI_VENDOR, 8))?;
    put(&pci, "vendor", &format!("{PCI_VENDOR:#06x}"))?;
    put(&pci, "device", &format!("{dev_id:#06x}"))?;
    put(&pci, "subsystem_vendor", &format!("{PCI_VENDOR:#06x}"))?;
    put(&pci, "subsystem_device", "0x0008")?;
    put(&pci, "class", "0x020000")?;
    put(&pci, "numa_node", "-1")?;
    put(&pci, "local_cpulist", &online_cpus())?;
    put(&pci, "local_cpus", &online_mask())?;
    put(&pci, "revision", "0x00")?;
    // A ConnectX-5's link: PCIe Gen3 x16 (the kernel's `pci_speed_string` text). UCX
    // estimates the PCIe bandwidth from these.
    for (w, v) in [("max_link_speed", "8.0 GT/s PCIe"), ("current_link_speed", "8.0 GT/s PCIe"), ("max_link_width", "16"), ("current_link_width", "16")] {
        put(&pci, w, v)?;
    }
    // The driver that owns the function, by the name scripts check (`basename $(readlink
    // device/driver)`).
    mkdir(&root.join("bus/pci/drivers/mlx5_core"))?;
    link("../../../bus/pci/drivers/mlx5_core", &pci.join("driver"))?;
    let netdev = ifname(cfg.netdev_ifindex);
    mkdir(&pci.join("net"))?;
    if let Some(n) = &netdev {
        link(&format!("/sys/class/net/{n}"), &pci.join("net").join(n))?;
    }

    let port = ib.join("ports/1");
    let gids = port.join("gids");
    let types = port.join("gid_attrs/types");
    let ndevs = port.join("gid_attrs/ndevs");
    let pkeys = port.join("pkeys");
    for d in [&gids, &types, &ndevs, &pkeys] {
        mkdir(d)?;
    }
    put(&port, "state", "4: ACTIVE")?;
    put(&port, "phys_state", "5: LinkUp")?;
    put(&port, "link_layer", "Ethernet")?;
    put(&port, "rate", &rate(cfg.active_width, cfg.active_speed))?;
    put(&port, "lid", "0x0")?;
    put(&port, "sm_lid", "0x0")?;
    put(&port, "lid_mask_count", "0")?;
    put(&port, "sm_sl", "0")?;
    // CM_SUP | IP_BASED_GIDS, as QUERY_PORT reports.
    put(&port, "cap_mask", "0x04010000")?;
    put(&pkeys, "0", "0xffff")?;
    for i in 0..cfg.gid_tbl_len {
        let row = cfg.gid(i).ok().flatten();
        let name = i.to_string();
        put(&gids, &name, &gid(&row.map(|g| g.gid).unwrap_or([0; 16])))?;
        if let Some(g) = row {
            let t = if g.gid_type == uverbs::sys::verbs::GID_TYPE_ROCE_V2 { "RoCE v2" } else { "IB/RoCE v1" };
            put(&types, &name, t)?;
            if let Some(n) = &netdev {
                put(&ndevs, &name, n)?;
            }
        }
    }
    Ok(())
}
