//! Finding real RDMA devices: sysfs (`SYSFS_PATH`-relocatable, as libibverbs does) and
//! the character devices under /dev/infiniband.
//!
//! Software devices (softhca) are not in sysfs unless a preload shim generated a tree;
//! the provider lists them next to these.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::sys::verbs::{RDMA_DRIVER_MLX5, RDMA_DRIVER_RXE, RDMA_DRIVER_UNKNOWN};

/// One uverbs device found in sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The verbs device name (`ibdev`), e.g. `mlx5_0` or `rxe0`.
    pub name: String,
    /// The uverbs node name, e.g. `uverbs0`.
    pub uverbs: String,
    /// `/dev/infiniband/uverbsN`.
    pub dev_path: PathBuf,
    /// `major:minor` from sysfs `dev`.
    pub devnum: (u32, u32),
    /// Per-device uverbs ABI version (`abi_version` of the uverbs node).
    pub abi_version: u32,
    /// `node_guid` as printed by sysfs (`xxxx:xxxx:xxxx:xxxx`).
    pub node_guid: String,
    /// `node_type`, e.g. `1: CA`.
    pub node_type: String,
    /// Kernel driver behind the device, from the `device/driver` link or the name.
    pub driver: String,
}

impl DeviceInfo {
    /// The `enum rdma_driver_id` to put in ioctl headers for this device.
    pub fn driver_id(&self) -> u32 {
        match self.driver.as_str() {
            "mlx5_core" | "mlx5" => RDMA_DRIVER_MLX5,
            "rxe" | "rdma_rxe" => RDMA_DRIVER_RXE,
            _ => RDMA_DRIVER_UNKNOWN,
        }
    }
}

/// The sysfs root: `$SYSFS_PATH` or `/sys`.
pub fn sysfs_root() -> PathBuf {
    std::env::var_os("SYSFS_PATH").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/sys"))
}

fn read_trim(p: &Path) -> io::Result<String> {
    Ok(fs::read_to_string(p)?.trim().to_string())
}

fn driver_of(ibdev_dir: &Path, name: &str) -> String {
    if let Ok(link) = fs::read_link(ibdev_dir.join("device/driver")) {
        if let Some(n) = link.file_name() {
            return n.to_string_lossy().into_owned();
        }
    }
    // rxe has no bus device; its parent is the netdev. Fall back to the name.
    if name.starts_with("rxe") { "rxe".into() } else if name.starts_with("mlx5") { "mlx5_core".into() } else { String::new() }
}

/// Lists uverbs devices under `root` (a sysfs tree) whose char device lives in `dev_dir`.
pub fn list_in(root: &Path, dev_dir: &Path) -> io::Result<Vec<DeviceInfo>> {
    let class = root.join("class/infiniband_verbs");
    let abi: u32 = read_trim(&class.join("abi_version"))?.parse().map_err(|_| io::Error::other("bad abi_version"))?;
    if abi != crate::sys::write::IB_USER_VERBS_ABI_VERSION {
        return Err(io::Error::other(format!("uverbs ABI version {abi}, expected 6")));
    }
    let mut out = Vec::new();
    for ent in fs::read_dir(&class)? {
        let ent = ent?;
        let uverbs = ent.file_name().to_string_lossy().into_owned();
        if !uverbs.starts_with("uverbs") {
            continue;
        }
        let d = ent.path();
        let Ok(name) = read_trim(&d.join("ibdev")) else { continue };
        let dev = read_trim(&d.join("dev")).unwrap_or_default();
        let devnum = dev.split_once(':')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .unwrap_or((0, 0));
        let abi_version = read_trim(&d.join("abi_version")).ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        let ib = root.join("class/infiniband").join(&name);
        out.push(DeviceInfo {
            dev_path: dev_dir.join(&uverbs),
            node_guid: read_trim(&ib.join("node_guid")).unwrap_or_default(),
            node_type: read_trim(&ib.join("node_type")).unwrap_or_default(),
            driver: driver_of(&ib, &name),
            name,
            uverbs,
            devnum,
            abi_version,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Lists the kernel's uverbs devices. A machine without RDMA support has no
/// `class/infiniband_verbs`: that is an empty list, not an error.
pub fn list() -> Vec<DeviceInfo> {
    list_in(&sysfs_root(), Path::new("/dev/infiniband")).unwrap_or_default()
}

/// Opens a kernel device by verbs name.
pub fn open(name: &str) -> crate::Result<crate::Device> {
    let info = list().into_iter().find(|d| d.name == name).ok_or(nix::errno::Errno::ENODEV)?;
    crate::Device::open_path(&info.dev_path, &info.name, info.driver_id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_generated_tree() {
        let t = std::env::temp_dir().join(format!("uverbs-sysfs-{}", std::process::id()));
        let v = t.join("class/infiniband_verbs/uverbs3");
        fs::create_dir_all(&v).unwrap();
        fs::write(t.join("class/infiniband_verbs/abi_version"), "6\n").unwrap();
        fs::write(v.join("ibdev"), "mlx5_7\n").unwrap();
        fs::write(v.join("dev"), "231:195\n").unwrap();
        fs::write(v.join("abi_version"), "1\n").unwrap();
        let ib = t.join("class/infiniband/mlx5_7");
        fs::create_dir_all(&ib).unwrap();
        fs::write(ib.join("node_guid"), "0002:c903:0000:0001\n").unwrap();
        fs::write(ib.join("node_type"), "1: CA\n").unwrap();
        let l = list_in(&t, Path::new("/dev/infiniband")).unwrap();
        fs::remove_dir_all(&t).unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].name, "mlx5_7");
        assert_eq!(l[0].devnum, (231, 195));
        assert_eq!(l[0].abi_version, 1);
        assert_eq!(l[0].dev_path, Path::new("/dev/infiniband/uverbs3"));
        assert_eq!(l[0].driver_id(), RDMA_DRIVER_MLX5);
        assert_eq!(l[0].node_guid, "0002:c903:0000:0001");
    }

    #[test]
    fn wrong_abi_is_an_error() {
        let t = std::env::temp_dir().join(format!("uverbs-sysfs-abi-{}", std::process::id()));
        fs::create_dir_all(t.join("class/infiniband_verbs")).unwrap();
        fs::write(t.join("class/infiniband_verbs/abi_version"), "5\n").unwrap();
        let r = list_in(&t, Path::new("/dev/infiniband"));
        fs::remove_dir_all(&t).unwrap();
        assert!(r.is_err());
    }
}
