//! Question 1.2 of the study notes, run: every NVML call the question lists, on every
//! GPU, with what the driver answers, including the calls it refuses.
//!
//! ```text
//! cargo run --release -p gdr --example nvml_query            # read-only
//! cargo run --release -p gdr --example nvml_query -- --reset # also nvmlDeviceResetNvLinkErrorCounters
//! ```
//!
//! For each GPU: the basics a reader of `nvidia-smi -q` expects (name, UUID, PCI bus id,
//! memory, BAR1, temperature, power, clocks, PCIe link), then for every NVLink index
//! `0..NVML_NVLINK_MAX_LINKS` the version, each capability, the state, each error counter
//! and the remote end's PCI identity; then `nvmlDeviceGetP2PStatus` for every ordered pair
//! of GPUs (a GPU with itself included, which is the only pair a one-GPU machine has) and
//! every P2P capability index, printed as `nvidia-smi topo -p2p` abbreviates them.
//!
//! A call the driver refuses prints NVML's error name (`NVML_ERROR_NOT_SUPPORTED` for
//! NVLink calls on a GPU without links), so the output says which calls a machine
//! supports, not only the values of those that work. `nvmlDeviceResetNvLinkErrorCounters`
//! changes state (and needs root), so it is called only with `--reset`.
//!
//! Without libnvidia-ml (no NVIDIA driver) it prints one line and exits with status 3.
//!
//! NVML reaches the kernel driver through ioctls on `/dev/nvidiactl` and `/dev/nvidiaN`
//! (see docs/questions.md, section 1.2).

mod common;

use std::fmt::Display;

use nvml_wrapper::enum_wrappers::device::{
    Clock, P2pCapabilitiesIndex, P2pStatus, TemperatureSensor,
};
use nvml_wrapper::enum_wrappers::nv_link::{Capability, ErrorCounter};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::struct_wrappers::device::PciInfo;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::NVML_FI_DEV_NVLINK_LINK_COUNT;
use nvml_wrapper::{cuda_driver_version_major, cuda_driver_version_minor, Device, Nvml};

/// `NVML_NVLINK_MAX_LINKS` of nvml.h (18 since Hopper; nvml-wrapper-sys 0.10 has the same
/// value): the link indices NVML accepts.
const NVLINK_MAX_LINKS: u32 = 18;

const CAPABILITIES: [(Capability, &str); 6] = [
    (Capability::P2p, "NVML_NVLINK_CAP_P2P_SUPPORTED"),
    (Capability::SysMemAccess, "NVML_NVLINK_CAP_SYSMEM_ACCESS"),
    (Capability::P2pAtomics, "NVML_NVLINK_CAP_P2P_ATOMICS"),
    (Capability::SysMemAtomics, "NVML_NVLINK_CAP_SYSMEM_ATOMICS"),
    (Capability::SliBridge, "NVML_NVLINK_CAP_SLI_BRIDGE"),
    (Capability::ValidLink, "NVML_NVLINK_CAP_VALID"),
];

const COUNTERS: [(ErrorCounter, &str); 4] = [
    (ErrorCounter::DlReplay, "NVML_NVLINK_ERROR_DL_REPLAY"),
    (ErrorCounter::DlRecovery, "NVML_NVLINK_ERROR_DL_RECOVERY"),
    (ErrorCounter::DlCrcFlit, "NVML_NVLINK_ERROR_DL_CRC_FLIT"),
    (ErrorCounter::DlCrcData, "NVML_NVLINK_ERROR_DL_CRC_DATA"),
];

const P2P_INDICES: [(P2pCapabilitiesIndex, &str); 5] = [
    (P2pCapabilitiesIndex::Read, "read"),
    (P2pCapabilitiesIndex::Write, "write"),
    (P2pCapabilitiesIndex::NvLink, "nvlink"),
    (P2pCapabilitiesIndex::Atomics, "atomics"),
    (P2pCapabilitiesIndex::Prop, "prop"),
];

fn main() {
    let mut reset = false;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "--reset" => reset = true,
            _ => {
                eprintln!("nvml_query: unknown argument {a:?} (usage: nvml_query [--reset])");
                std::process::exit(2);
            }
        }
    }
    let nvml = match Nvml::init() {
        Ok(n) => n,
        Err(e) => common::exit_no_driver(
            "nvml_query",
            format!(
                "no NVML: nvmlInit failed ({}: {e}); is the NVIDIA driver installed?",
                error_name(&e)
            ),
        ),
    };

    println!("# nvml_query: the NVML calls of question 1.2");
    show("nvmlSystemGetDriverVersion", nvml.sys_driver_version());
    show("nvmlSystemGetNVMLVersion", nvml.sys_nvml_version());
    show(
        "nvmlSystemGetCudaDriverVersion",
        nvml.sys_cuda_driver_version().map(|v| {
            format!(
                "{}.{} ({v})",
                cuda_driver_version_major(v),
                cuda_driver_version_minor(v)
            )
        }),
    );
    let count = match nvml.device_count() {
        Ok(n) => n,
        Err(e) => {
            eprintln!("nvml_query: nvmlDeviceGetCount_v2: {}: {e}", error_name(&e));
            std::process::exit(1);
        }
    };
    println!("{:<52} {count}", "nvmlDeviceGetCount_v2");

    let mut devices = Vec::new();
    for i in 0..count {
        match nvml.device_by_index(i) {
            Ok(d) => devices.push(d),
            Err(e) => {
                eprintln!(
                    "nvml_query: nvmlDeviceGetHandleByIndex_v2({i}): {}: {e}",
                    error_name(&e)
                );
                std::process::exit(1);
            }
        }
    }
    for (i, dev) in devices.iter().enumerate() {
        println!();
        println!("## GPU {i}");
        basics(dev);
        nvlinks(dev, reset);
    }
    println!();
    p2p(&devices);
}

/// What `nvidia-smi -q` shows first: identity, memory, thermals, power, clocks, PCIe.
fn basics(dev: &Device) {
    show("nvmlDeviceGetName", dev.name());
    show("nvmlDeviceGetUUID", dev.uuid());
    show(
        "nvmlDeviceGetPciInfo_v3 busId",
        dev.pci_info().map(|p| pci(&p)),
    );
    show(
        "nvmlDeviceGetCudaComputeCapability",
        dev.cuda_compute_capability()
            .map(|c| format!("{}.{}", c.major, c.minor)),
    );
    show(
        "nvmlDeviceGetArchitecture",
        dev.architecture().map(|a| format!("{a:?}")),
    );
    show(
        "nvmlDeviceGetMemoryInfo_v2 (total/used/free)",
        dev.memory_info().map(|m| {
            format!(
                "{} / {} / {} MiB",
                m.total >> 20,
                m.used >> 20,
                m.free >> 20
            )
        }),
    );
    show(
        "nvmlDeviceGetBAR1MemoryInfo (total/used/free)",
        dev.bar1_memory_info().map(|m| {
            format!(
                "{} / {} / {} MiB",
                m.total >> 20,
                m.used >> 20,
                m.free >> 20
            )
        }),
    );
    show(
        "nvmlDeviceGetTemperature (GPU)",
        dev.temperature(TemperatureSensor::Gpu)
            .map(|t| format!("{t} C")),
    );
    show(
        "nvmlDeviceGetPerformanceState",
        dev.performance_state().map(|p| format!("{p:?}")),
    );
    show(
        "nvmlDeviceGetPowerUsage",
        dev.power_usage()
            .map(|mw| format!("{:.1} W", mw as f64 / 1000.0)),
    );
    show(
        "nvmlDeviceGetEnforcedPowerLimit",
        dev.enforced_power_limit()
            .map(|mw| format!("{:.1} W", mw as f64 / 1000.0)),
    );
    for (clock, name) in [
        (Clock::Graphics, "graphics"),
        (Clock::SM, "SM"),
        (Clock::Memory, "memory"),
    ] {
        show(
            &format!("nvmlDeviceGetClockInfo ({name})"),
            dev.clock_info(clock).map(|c| format!("{c} MHz")),
        );
        show(
            &format!("nvmlDeviceGetMaxClockInfo ({name})"),
            dev.max_clock_info(clock).map(|c| format!("{c} MHz")),
        );
    }
    show(
        "nvmlDeviceGetCurrPcieLinkGeneration/Width",
        dev.current_pcie_link_gen().and_then(|g| {
            dev.current_pcie_link_width()
                .map(|w| format!("Gen{g} x{w}"))
        }),
    );
    show(
        "nvmlDeviceGetMaxPcieLinkGeneration/Width",
        dev.max_pcie_link_gen()
            .and_then(|g| dev.max_pcie_link_width().map(|w| format!("Gen{g} x{w}"))),
    );
    show(
        "nvmlDeviceGetCpuAffinity",
        dev.cpu_affinity(16).map(|m| cpu_list(&m)),
    );
    show("nvmlDeviceGetNumaNodeId", dev.numa_node_id());
}

/// Every NVLink call of question 1.2, for every link index NVML accepts.
fn nvlinks(dev: &Device, reset: bool) {
    println!("### NVLink (links 0..{NVLINK_MAX_LINKS}, NVML_NVLINK_MAX_LINKS)");
    // How many links the GPU has, through the field-value interface nvidia-smi uses.
    let links = dev
        .field_values_for(&[FieldId(NVML_FI_DEV_NVLINK_LINK_COUNT)])
        .map(|mut v| v.pop().map(|s| s.and_then(|s| s.value).map(|v| sample(&v))));
    match links {
        Ok(Some(v)) => show(
            "nvmlDeviceGetFieldValues (NVML_FI_DEV_NVLINK_LINK_COUNT)",
            v,
        ),
        Ok(None) => println!(
            "{:<52} (no sample returned)",
            "nvmlDeviceGetFieldValues (NVML_FI_DEV_NVLINK_LINK_COUNT)"
        ),
        Err(e) => show::<String>(
            "nvmlDeviceGetFieldValues (NVML_FI_DEV_NVLINK_LINK_COUNT)",
            Err(e),
        ),
    }
    for link in 0..NVLINK_MAX_LINKS {
        println!("link {link}:");
        let mut l = dev.link_wrapper_for(link);
        show("  nvmlDeviceGetNvLinkVersion", l.version());
        show(
            "  nvmlDeviceGetNvLinkState",
            l.is_active().map(|a| if a { "active" } else { "inactive" }),
        );
        for (cap, name) in CAPABILITIES {
            show(
                &format!("  nvmlDeviceGetNvLinkCapability {name}"),
                l.has_capability(cap),
            );
        }
        for (counter, name) in COUNTERS {
            show(
                &format!("  nvmlDeviceGetNvLinkErrorCounter {name}"),
                l.error_counter(counter),
            );
        }
        if reset {
            show(
                "  nvmlDeviceResetNvLinkErrorCounters",
                l.reset_error_counters().map(|()| "reset"),
            );
        }
        show(
            "  nvmlDeviceGetNvLinkRemotePciInfo_v2",
            l.remote_pci_info().map(|p| pci(&p)),
        );
    }
    if !reset {
        println!(
            "{:<52} not called (it zeroes the counters; pass --reset)",
            "nvmlDeviceResetNvLinkErrorCounters"
        );
    }
}

/// `nvmlDeviceGetP2PStatus` for every ordered pair and capability index, with the
/// common PCIe ancestor of distinct GPUs (what `nvidia-smi topo -m` prints for them).
fn p2p(devices: &[Device]) {
    println!("## nvmlDeviceGetP2PStatus (OK, CNS chipset, GNS GPU, TNS topology, DIS regkey, NS not supported, U unknown)");
    if devices.len() < 2 {
        println!("(one GPU: the only pair is the GPU with itself; P2P between two GPUs needs two)");
    }
    for (i, a) in devices.iter().enumerate() {
        for (j, b) in devices.iter().enumerate() {
            let mut cells = Vec::new();
            for (idx, name) in P2P_INDICES {
                let cell = match a.p2p_status(b, idx) {
                    Ok(s) => format!("{name}={}", p2p_abbrev(&s)),
                    Err(e) => format!("{name}={}", error_name(&e)),
                };
                cells.push(cell);
            }
            println!("GPU{i} -> GPU{j}: {}", cells.join(" "));
            if i != j {
                // Devices are handles: fetch a second one for the by-value argument.
                if let Ok(other) = b.index().and_then(|k| b.nvml().device_by_index(k)) {
                    show(
                        &format!("  nvmlDeviceGetTopologyCommonAncestor GPU{i} GPU{j}"),
                        a.topology_common_ancestor(other).map(|t| format!("{t:?}")),
                    );
                }
            }
        }
    }
}

/// One result line: the call, then its value or NVML's error name and meaning.
fn show<T: Display>(call: &str, r: Result<T, NvmlError>) {
    match r {
        Ok(v) => println!("{call:<52} {v}"),
        Err(e) => println!("{call:<52} {} ({e})", error_name(&e)),
    }
}

/// The nvmlReturn_t name behind an nvml-wrapper error, as nvml.h spells it.
fn error_name(e: &NvmlError) -> &'static str {
    #[allow(deprecated)]
    match e {
        NvmlError::Uninitialized => "NVML_ERROR_UNINITIALIZED",
        NvmlError::InvalidArg => "NVML_ERROR_INVALID_ARGUMENT",
        NvmlError::NotSupported => "NVML_ERROR_NOT_SUPPORTED",
        NvmlError::NoPermission => "NVML_ERROR_NO_PERMISSION",
        NvmlError::AlreadyInitialized => "NVML_ERROR_ALREADY_INITIALIZED",
        NvmlError::NotFound => "NVML_ERROR_NOT_FOUND",
        NvmlError::InsufficientSize(_) => "NVML_ERROR_INSUFFICIENT_SIZE",
        NvmlError::InsufficientPower => "NVML_ERROR_INSUFFICIENT_POWER",
        NvmlError::DriverNotLoaded => "NVML_ERROR_DRIVER_NOT_LOADED",
        NvmlError::Timeout => "NVML_ERROR_TIMEOUT",
        NvmlError::IrqIssue => "NVML_ERROR_IRQ_ISSUE",
        NvmlError::LibraryNotFound => "NVML_ERROR_LIBRARY_NOT_FOUND",
        NvmlError::FunctionNotFound => "NVML_ERROR_FUNCTION_NOT_FOUND",
        NvmlError::CorruptedInfoROM => "NVML_ERROR_CORRUPTED_INFOROM",
        NvmlError::GpuLost => "NVML_ERROR_GPU_IS_LOST",
        NvmlError::ResetRequired => "NVML_ERROR_RESET_REQUIRED",
        NvmlError::OperatingSystem => "NVML_ERROR_OPERATING_SYSTEM",
        NvmlError::LibRmVersionMismatch => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        NvmlError::InUse => "NVML_ERROR_IN_USE",
        NvmlError::InsufficientMemory => "NVML_ERROR_MEMORY",
        NvmlError::NoData => "NVML_ERROR_NO_DATA",
        NvmlError::VgpuEccNotSupported => "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
        NvmlError::Unknown => "NVML_ERROR_UNKNOWN",
        NvmlError::LibloadingError(_) => "libnvidia-ml.so.1 not loadable",
        NvmlError::FailedToLoadSymbol(_) => "symbol missing from libnvidia-ml",
        NvmlError::UnexpectedVariant(_) => "value unknown to nvml-wrapper",
        _ => "nvml-wrapper error",
    }
}

/// A field value's number.
fn sample(v: &SampleValue) -> String {
    match v {
        SampleValue::F64(x) => x.to_string(),
        SampleValue::U32(x) => x.to_string(),
        SampleValue::U64(x) => x.to_string(),
        SampleValue::I64(x) => x.to_string(),
    }
}

/// `nvidia-smi topo -p2p`'s abbreviation and NVML's name for a P2P status.
fn p2p_abbrev(s: &P2pStatus) -> &'static str {
    match s {
        P2pStatus::Ok => "OK",
        P2pStatus::ChipsetNotSupported => "CNS",
        P2pStatus::GpuNotSupported => "GNS",
        P2pStatus::IohTopologyNotSupported => "TNS",
        P2pStatus::DisabledByRegkey => "DIS",
        P2pStatus::NotSupported => "NS",
        P2pStatus::Unknown => "U",
    }
}

/// A PCI identity as `nvidia-smi -q` prints it: bus id, then device and subsystem ids.
fn pci(p: &PciInfo) -> String {
    let sub = p
        .pci_sub_system_id
        .map(|s| format!(" subsys {s:08x}"))
        .unwrap_or_default();
    format!("{} (device {:08x}{sub})", p.bus_id, p.pci_device_id)
}

/// A CPU mask (64 CPUs a word, lowest first) as a cpulist, `0-15` style.
fn cpu_list(mask: &[std::ffi::c_ulong]) -> String {
    let bits = std::ffi::c_ulong::BITS as usize;
    let cpus: Vec<usize> = (0..mask.len() * bits)
        .filter(|&c| mask[c / bits] >> (c % bits) & 1 == 1)
        .collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < cpus.len() {
        let start = cpus[k];
        while k + 1 < cpus.len() && cpus[k + 1] == cpus[k] + 1 {
            k += 1;
        }
        out.push(if cpus[k] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[k])
        });
        k += 1;
    }
    if out.is_empty() {
        "(empty)".into()
    } else {
        out.join(",")
    }
}
