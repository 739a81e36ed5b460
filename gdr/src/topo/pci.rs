//! Where a device sits in the PCI tree: the chain of bridges from its host bridge down.
//!
//! This is what NCCL and nvidia-smi both work from. sysfs spells it as the device's real
//! path, `/sys/devices/pci0000:10/0000:10:01.0/0000:11:00.0/0000:12:00.0/0000:13:00.0`:
//! the host bridge (`pci0000:10`, one root complex), a root port (`0000:10:01.0`), then
//! for each PCIe switch its upstream port and one of its downstream ports, then the
//! device. [`PciDevice::ancestors`] keeps every element but the device, top first.

use std::fmt;

use super::cpuset::CpuSet;

/// The four identity registers NCCL packs into one 64-bit `pci.device`
/// (vendor << 48 | device << 32 | subsystem vendor << 16 | subsystem device).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PciId {
    pub vendor: u16,
    pub device: u16,
    pub subsystem_vendor: u16,
    pub subsystem_device: u16,
}

impl PciId {
    /// NCCL's packed form.
    pub fn packed(&self) -> u64 {
        (self.vendor as u64) << 48 | (self.device as u64) << 32 | (self.subsystem_vendor as u64) << 16 | self.subsystem_device as u64
    }
}

/// One element of a device's path above it: the host bridge or a PCI bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bridge {
    /// `pci0000:10` for the host bridge, the bus id (`0000:10:01.0`) for a bridge.
    pub name: String,
    /// Identity registers (zero for the host bridge, which has no function of its own).
    pub id: PciId,
    /// `numa_node` of the bridge (`None` for -1 or absent).
    pub numa_node: Option<u32>,
}

impl Bridge {
    /// Whether this is the host bridge (the root complex) rather than a PCI bridge.
    pub fn is_host_bridge(&self) -> bool {
        !is_bus_id(&self.name)
    }
}

/// A device in the PCI tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// Its bus id in sysfs form (`0000:13:00.0`); for a software device placed below a
    /// bridge, a label saying so.
    pub bus_id: String,
    /// Host bridge first, parent bridge last; never empty for a device read from sysfs.
    pub ancestors: Vec<Bridge>,
    /// Identity registers.
    pub id: PciId,
    /// `numa_node` (`None` for -1 or absent).
    pub numa_node: Option<u32>,
    /// `local_cpulist`.
    pub local_cpus: CpuSet,
}

impl PciDevice {
    /// The host bridge (root complex) name, `pci0000:10`; empty when unknown.
    pub fn host_bridge(&self) -> &str {
        self.ancestors.first().map_or("", |b| b.name.as_str())
    }
}

/// Whether `s` is a PCI bus id `DDDD:BB:DD.F` (hex digits), as NCCL's `checkBDFFormat`
/// tests the elements of a sysfs path.
pub fn is_bus_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && [0, 1, 2, 3, 5, 6, 8, 9, 11].iter().all(|&i| b[i].is_ascii_hexdigit())
}

/// A bus id in sysfs form: four-digit domain, lower case. NVML spells the domain with
/// eight digits and upper case (`00000000:1B:00.0`); sysfs `0000:1b:00.0`.
pub fn normalize_bus_id(s: &str) -> Option<String> {
    let s = s.trim();
    let (dom, rest) = s.split_once(':')?;
    let dom = u32::from_str_radix(dom, 16).ok()?;
    if dom > 0xffff {
        return None;
    }
    let id = format!("{dom:04x}:{}", rest.to_ascii_lowercase());
    is_bus_id(&id).then_some(id)
}

/// Parses a sysfs hex attribute (`0x10de`).
pub fn parse_hex(s: &str) -> Option<u32> {
    let s = s.trim();
    u32::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

impl fmt::Display for PciId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:04x}:{:04x} ({:04x}:{:04x})", self.vendor, self.device, self.subsystem_vendor, self.subsystem_device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids() {
        assert!(is_bus_id("0000:00:06.0"));
        assert!(!is_bus_id("pci0000:00"));
        assert!(!is_bus_id("0000:00:06"));
        assert_eq!(normalize_bus_id("00000000:1B:00.0").as_deref(), Some("0000:1b:00.0"));
        assert_eq!(normalize_bus_id("0000:00:06.0").as_deref(), Some("0000:00:06.0"));
        assert_eq!(normalize_bus_id("nonsense"), None);
        assert_eq!(parse_hex("0x10de\n"), Some(0x10de));
        let id = PciId { vendor: 0x1000, device: 0xc010, subsystem_vendor: 0x1000, subsystem_device: 0xa064 };
        assert_eq!(id.packed(), 0x1000_c010_1000_a064);
    }
}
