//! The devices the plugin offers NCCL: this process's softhca instance first, then
//! every kernel RDMA device under /dev/infiniband that opens, each with the facts
//! getProperties reports, found once at init.
//!
//! `DOORBELL_NCCL_DEVICES=name,name` restricts the list (e.g. `softhca0`, or `mlx5_0`
//! alone, so that both ranks pick devices that can talk to each other).

use std::ffi::CString;
use std::sync::{Arc, OnceLock};

use provider::{Context, Pd};

use crate::sys::{NCCL_PTR_CUDA, NCCL_PTR_DMABUF, NCCL_PTR_HOST};

/// The variable that restricts the device list.
pub const DEVICES_ENV: &str = "DOORBELL_NCCL_DEVICES";
/// `DOORBELL_NCCL_GDR=1`: offer GPU memory (CUDA and dma-buf pointers) on softhca.
pub const GDR_ENV: &str = "DOORBELL_NCCL_GDR";
/// Port used on every device.
pub const PORT: u8 = 1;

/// One device, opened.
pub struct Dev {
    pub name: CString,
    pub ctx: Arc<Context>,
    pub pd: Pd,
    /// The embedded softhca (GPU memory through gdr).
    pub soft: bool,
    /// Drive softhca's data path from NCCL's proxy thread (polled mode, as doorbell's
    /// collective does): every isend/irecv/test steps the device once. See
    /// [`polled_wanted`]; never on hardware.
    pub polled: bool,
    pub gid: [u8; 16],
    pub sgid_index: u8,
    /// `ibv_mtu` code used on connections (the smaller of both ends wins).
    pub mtu: u8,
    pub guid: u64,
    /// Mbit/s.
    pub speed: i32,
    pub max_qp: i32,
    pub pci_path: Option<CString>,
    pub ptr_support: i32,
}

// SAFETY: a provider Context is a file descriptor plus mappings whose mutable parts
// sit behind its own locks; Pd is a handle in an Arc. The plugin shares them between
// NCCL's proxy threads only through those (every QP and CQ lives in one comm, under
// that comm's mutex).
unsafe impl Send for Dev {}
// SAFETY: as above.
unsafe impl Sync for Dev {}

static DEVICES: OnceLock<Vec<Dev>> = OnceLock::new();

/// The devices (opened at the first call).
pub fn all() -> &'static [Dev] {
    DEVICES.get_or_init(discover)
}

/// Device `i`, if it exists.
pub fn get(i: i32) -> Option<&'static Dev> {
    usize::try_from(i).ok().and_then(|i| all().get(i))
}

fn wanted(name: &str) -> bool {
    match std::env::var(DEVICES_ENV) {
        Ok(v) if !v.trim().is_empty() => v.split(',').any(|n| n.trim() == name),
        _ => true,
    }
}

fn discover() -> Vec<Dev> {
    let gpu = gdr::cuda::probe().is_ok();
    let mut out = Vec::new();
    for entry in provider::device::list() {
        let name = entry.name().to_string();
        if !wanted(&name) {
            continue;
        }
        let soft = matches!(entry, provider::device::DeviceEntry::Soft { .. });
        match open(&name, soft, gpu) {
            Ok(d) => {
                crate::info!("device {} : {} (gid index {}, mtu code {}, {} Mb/s{}{})", out.len(), name, d.sgid_index, d.mtu, d.speed,
                             if d.ptr_support & NCCL_PTR_DMABUF != 0 { ", GPU memory through dma-buf" } else { "" },
                             match (d.soft, d.polled) {
                                 (false, _) => "",
                                 (true, true) => ", stepped on NCCL's proxy thread (polled)",
                                 (true, false) => ", softhca's own engine thread",
                             });
                out.push(d);
            }
            Err(e) => crate::info!("device {name} skipped: {e}"),
        }
    }
    out
}

fn open(name: &str, soft: bool, gpu: bool) -> Result<Dev, String> {
    let ctx = Context::open(Some(name)).map_err(|e| format!("open: {e}"))?;
    let pd = ctx.alloc_pd().map_err(|e| format!("alloc_pd: {e}"))?;
    let g = ctx.default_gid(PORT).map_err(|e| e.to_string())?;
    let port = ctx.query_port(PORT).map_err(|e| e.to_string())?.legacy_resp;
    let mtu = port.active_mtu.clamp(1, 5);
    let attr = ctx.device_attr().base;
    let pci_path = if soft { soft_pci_path() } else { kernel_pci_path(name) };
    // GPU memory: only on softhca, which reaches it through gdr's resolver and lands a
    // peer's write in GPU memory before its completion (so iflush has nothing to do).
    // A real NIC would need the RDMA READ flush NCCL's IB transport does, not written.
    // GPU memory is opt-in (DOORBELL_NCCL_GDR=1). softhca reaches it with CUDA copies
    // made on the thread that steps the device, NCCL's proxy thread; a program thread
    // that makes a blocking CUDA call while a collective runs (a first kernel launch under
    // lazy module loading, a synchronous device-to-host copy such as `loss.item()`) holds
    // a driver lock those copies need while it waits for NCCL's kernel, which waits for
    // the copies: both deadlocked on the H200 (docs/nccl.md). A NIC's DMA takes no driver
    // lock; this is the emulation's limit. Programs that make no such call while a
    // collective is in flight (nccl-tests) run GDRDMA correctly with the opt-in.
    let gdr_wanted = softhca::config::switched_on(GDR_ENV);
    if soft && gpu && !gdr_wanted {
        crate::info!("{name}: GPU memory not offered (NCCL stages through host memory); {GDR_ENV}=1 offers it, at the risk of a deadlock described in docs/nccl.md");
    }
    let ptr_support = if soft && gpu && gdr_wanted {
        gdr::install();
        NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF
    } else {
        NCCL_PTR_HOST
    };
    Ok(Dev {
        name: CString::new(name).map_err(|e| e.to_string())?,
        gid: g.raw(),
        sgid_index: g.gid_index as u8,
        mtu,
        guid: attr.node_guid,
        speed: speed_mbps(port.active_width, port.active_speed),
        max_qp: attr.max_qp.min(i32::MAX as u32) as i32,
        pci_path,
        ptr_support,
        polled: soft && polled_wanted(),
        soft,
        ctx,
        pd,
    })
}

/// The variable that chooses polled mode (`1`/`0`, as softhca's switches read).
pub const POLLED_ENV: &str = "DOORBELL_POLLED";

/// Machines with at most this many CPUs drive softhca from NCCL's proxy thread by default.
pub const POLLED_MAX_CPUS: usize = 4;

/// Polled mode or softhca's own engine thread. `DOORBELL_POLLED` decides when set; unset,
/// the CPU count does. With few CPUs a separate engine thread competes with NCCL's proxy
/// thread and the ranks for the same cores (the 2-CPU CI machine), so the proxy thread
/// steps the device itself. With many, the engine thread is a NIC of its own that moves
/// data while the proxy thread serves NCCL: on the 16-CPU H200 machine, under MPS,
/// nccl-tests' all_reduce_perf gave 3.1 to 4.0 GB/s busbw with the thread against 2.5 to
/// 2.9 polled, and 8 B in 19 to 20 us against 24 (docs/nccl.md, run F).
pub fn polled_wanted() -> bool {
    let v = std::env::var(POLLED_ENV).ok();
    if softhca::config::is_on(v.as_deref()) {
        return true;
    }
    if softhca::config::is_off(v.as_deref()) {
        return false;
    }
    std::thread::available_parallelism().map_or(true, |n| n.get() <= POLLED_MAX_CPUS)
}

/// Port speed from the IB width and speed codes (`ibv_port_attr`): lanes times the
/// per-lane rate.
pub fn speed_mbps(width: u8, speed: u8) -> i32 {
    let lanes = match width {
        1 => 1,
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 1,
    };
    let lane_mbps = match speed {
        1 => 2_500,
        2 => 5_000,
        4 | 8 => 10_000,
        16 => 14_000,
        32 => 25_000,
        64 => 50_000,
        128 => 100_000,
        _ => 10_000,
    };
    lanes * lane_mbps
}

/// A kernel device's PCI function: its `device` link in sysfs, resolved (what NCCL's
/// IB transport reports).
fn kernel_pci_path(name: &str) -> Option<CString> {
    let p = uverbs::discovery::sysfs_root().join("class/infiniband").join(name).join("device");
    let real = std::fs::canonicalize(p).ok()?;
    CString::new(real.to_string_lossy().into_owned()).ok()
}

/// The variable that gives softhca's `pciPath` (a sysfs device path).
pub const PCI_PATH_ENV: &str = "DOORBELL_NCCL_PCI_PATH";

/// softhca is in no PCI tree: by default no path, and NCCL attaches the NIC to the
/// first CPU ("network path ... attaching to first CPU"). `DOORBELL_NCCL_PCI_PATH` gives
/// one (resolved). `DOORBELL_SOFTHCA_PCI` (which `doorbell topo` uses) is not taken
/// over: it usually names the GPU itself, and NCCL would then file the NIC under the
/// GPU's own PCI node.
fn soft_pci_path() -> Option<CString> {
    let spec = std::env::var(PCI_PATH_ENV).ok().filter(|s| !s.trim().is_empty())?;
    let real = std::fs::canonicalize(spec.trim()).ok()?;
    CString::new(real.to_string_lossy().into_owned()).ok()
}
