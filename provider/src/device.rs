//! Which device to open: the embedded softhca by default, a kernel device when named.

use uverbs::discovery::{self, DeviceInfo};
use uverbs::Device;

use crate::error::{Error, Result};

/// One openable device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceEntry {
    /// This process's software HCA (created on first open).
    Soft {
        /// Its name (`softhca0`).
        name: String,
    },
    /// A kernel uverbs device found in sysfs.
    Kernel(DeviceInfo),
}

impl DeviceEntry {
    /// The device name users pass to `-d`.
    pub fn name(&self) -> &str {
        match self {
            DeviceEntry::Soft { name } => name,
            DeviceEntry::Kernel(d) => &d.name,
        }
    }
}

/// The name of the embedded software HCA.
pub fn soft_name() -> String {
    std::env::var("DOORBELL_SOFTHCA_NAME").unwrap_or_else(|_| "softhca0".into())
}

/// Every device this process can open: softhca first, then the kernel's.
pub fn list() -> Vec<DeviceEntry> {
    let mut v = vec![DeviceEntry::Soft { name: soft_name() }];
    v.extend(discovery::list().into_iter().map(DeviceEntry::Kernel));
    v
}

/// Opens a device by name; `None` (or `DOORBELL_DEVICE` unset) means the embedded
/// softhca, which is what runs everywhere without hardware.
pub fn open(name: Option<&str>) -> Result<Device> {
    let env = std::env::var("DOORBELL_DEVICE").ok();
    let name = name.or(env.as_deref());
    let soft = soft_name();
    match name {
        None => open_soft(&soft),
        Some(n) if n == soft || n == "softhca" => open_soft(&soft),
        Some(n) => discovery::open(n).map_err(|e| match e {
            nix::errno::Errno::ENODEV => Error::NoDevice(n.to_string()),
            errno => Error::Device { op: "open", errno },
        }),
    }
}

fn open_soft(name: &str) -> Result<Device> {
    let hca = softhca::default_hca().map_err(|e| Error::Invalid { op: "open softhca", why: e.to_string() })?;
    Ok(Device::from_endpoint(Box::new(hca.open()), name))
}
