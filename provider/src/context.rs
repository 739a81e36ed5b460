//! The device context: what `ibv_open_device` + `mlx5_alloc_context` set up.
//!
//! Opening sends GET_CONTEXT with the same mlx5 request libmlx5 sends (16 bfregs,
//! 4 low-latency, DEVX, CQE version 1, 4K and dynamic UARs), retrying with the shorter
//! requests libmlx5 falls back to; then allocates the async event fd and the UAR pages
//! the answer asks for, and caches the device and port attributes.

use std::os::fd::{AsRawFd, OwnedFd};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

use uverbs::cmd::{context as ctxcmd, port as portcmd};
use uverbs::sys::mlx5::{AllocUcontextReqV2, AllocUcontextResp, QueryDeviceResp as Mlx5DeviceResp, ALLOC_UCTX_DEVX, LIB_CAP_4K_UAR, LIB_CAP_DYN_UAR};
use uverbs::sys::verbs::{ExQueryDeviceResp, GidEntry, QueryPortRespEx};
use uverbs::Device;
use zerocopy::IntoBytes;

use crate::dbrec::DbrecPool;
use crate::error::{Error, Op, Result};
use crate::qp::QpShared;
use crate::uar::{SharedUarPool, UarPool};

/// An open device context.
pub struct Context {
    pub(crate) dev: Device,
    ucontext: AllocUcontextResp,
    /// Whether the GET_CONTEXT that succeeded asked for DevX (the kernel refuses the
    /// flag rather than ignoring it, so success means a DevX uid was made).
    devx: bool,
    num_comp_vectors: u32,
    async_fd: OwnedFd,
    pub(crate) uars: SharedUarPool,
    pub(crate) dbrecs: Arc<DbrecPool>,
    attr: ExQueryDeviceResp,
    mlx5_attr: Mlx5DeviceResp,
    /// User indexes handed to QPs (CQE version 1 finds a QP by it).
    pub(crate) uidx: Mutex<Vec<bool>>,
    /// Live QPs by the number CQEs name them with (user index or QPN), for pollers.
    qps: RwLock<HashMap<u32, Arc<QpShared>>>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("dev", &self.dev).finish_non_exhaustive()
    }
}

/// The request libmlx5 44 sends, and the two shorter ones it retries with.
fn ucontext_requests() -> [(AllocUcontextReqV2, usize); 6] {
    let full = AllocUcontextReqV2 {
        total_num_bfregs: 16,
        num_low_latency_bfregs: 4,
        flags: ALLOC_UCTX_DEVX,
        max_cqe_version: 1,
        lib_caps: LIB_CAP_4K_UAR | LIB_CAP_DYN_UAR,
        ..Default::default()
    };
    let no_devx = AllocUcontextReqV2 { flags: 0, ..full };
    [(full, 32), (full, 24), (full, 16), (no_devx, 32), (no_devx, 24), (no_devx, 16)]
}

impl Context {
    /// Opens a device by name (`None`: the embedded softhca).
    pub fn open(name: Option<&str>) -> Result<Arc<Context>> {
        Context::from_device(crate::device::open(name)?)
    }

    /// Creates the context on an open device.
    pub fn from_device(dev: Device) -> Result<Arc<Context>> {
        let _span = tracing::debug_span!("provider::open", dev = dev.name()).entered();
        let mut resp = AllocUcontextResp::default();
        let mut last = nix::errno::Errno::EINVAL;
        let mut info = None;
        let mut devx = false;
        for (req, len) in ucontext_requests() {
            match ctxcmd::get_context_ioctl(&dev, &req.as_bytes()[..len], resp.as_mut_bytes()) {
                Ok(i) => {
                    info = Some(i);
                    // `flags` sits at offset 8, inside even the shortest (16-byte)
                    // request, so every retried length carries it.
                    devx = req.flags & ALLOC_UCTX_DEVX != 0;
                    break;
                }
                Err(e) => last = e,
            }
        }
        let info = info.ok_or(Error::Device { op: "get_context", errno: last })?;
        if resp.cqe_version > 1 {
            return Err(Error::Invalid { op: "get_context", why: format!("unsupported CQE version {}", resp.cqe_version) });
        }
        let async_fd = ctxcmd::alloc_async_fd(&dev).op("alloc async fd")?;
        let uars = UarPool::new(&dev, &resp)?;
        let mut mlx5_attr = Mlx5DeviceResp::default();
        let attr = ctxcmd::query_device_ex(&dev, mlx5_attr.as_mut_bytes())
            .or_else(|_| ctxcmd::query_device(&dev).map(|base| ExQueryDeviceResp { base, ..Default::default() }))
            .op("query_device")?;
        tracing::debug!(tot_bfregs = resp.tot_bfregs, bf_reg_size = resp.bf_reg_size, cqe_version = resp.cqe_version,
                        "context open");
        Ok(Arc::new(Context {
            dbrecs: DbrecPool::new(resp.cache_line_size.max(8) as usize),
            dev,
            ucontext: resp,
            devx,
            num_comp_vectors: info.num_comp_vectors,
            async_fd,
            uars: Mutex::new(uars),
            attr,
            mlx5_attr,
            uidx: Mutex::new(Vec::new()),
            qps: RwLock::new(HashMap::new()),
        }))
    }

    /// The device name.
    pub fn name(&self) -> &str {
        self.dev.name()
    }

    /// The uverbs device underneath.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Polled mode: one step of a software device's data path in this thread (posted
    /// WQEs go out on the wire, arrived packets become CQEs), without waiting for the
    /// device's own thread. Returns whether it did anything; always false on hardware,
    /// which needs no help. See [`uverbs::Endpoint::progress`] for when it pays off.
    pub fn progress(&self) -> bool {
        self.dev.progress()
    }

    /// What to block on (readable: [`Context::progress`] has work) between calls, next
    /// to the completion channel; `None` on hardware.
    pub fn progress_fd(&self) -> Option<std::os::fd::RawFd> {
        self.dev.progress_fd()
    }

    /// Call right before blocking on [`Context::progress_fd`]: false means work already
    /// arrived (call [`Context::progress`] instead). See
    /// [`uverbs::Endpoint::before_progress_wait`].
    pub fn before_progress_wait(&self) -> bool {
        self.dev.before_progress_wait()
    }

    /// The mlx5 GET_CONTEXT answer.
    pub fn ucontext(&self) -> &AllocUcontextResp {
        &self.ucontext
    }

    /// Whether the device granted DevX to this context (GET_CONTEXT accepted the DEVX
    /// flag): PRM commands from userspace (the `devx` crate) need it.
    pub fn devx_granted(&self) -> bool {
        self.devx
    }

    /// Completion vectors the device offers.
    pub fn num_comp_vectors(&self) -> u32 {
        self.num_comp_vectors
    }

    /// The async event fd (port and QP events arrive here).
    pub fn async_fd(&self) -> i32 {
        self.async_fd.as_raw_fd()
    }

    /// Device attributes (extended query, cached at open).
    pub fn device_attr(&self) -> &ExQueryDeviceResp {
        &self.attr
    }

    /// The mlx5 part of the extended device query.
    pub fn mlx5_attr(&self) -> &Mlx5DeviceResp {
        &self.mlx5_attr
    }

    /// Port attributes (ioctl QUERY_PORT).
    pub fn query_port(&self, port: u8) -> Result<QueryPortRespEx> {
        portcmd::query_port_ioctl(&self.dev, port).op("query_port")
    }

    /// One GID table entry.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<GidEntry> {
        portcmd::query_gid_entry(&self.dev, port as u32, index).op("query_gid")
    }

    /// Every valid GID of every port.
    pub fn gid_table(&self) -> Result<Vec<GidEntry>> {
        let n = (0..self.attr.base.phys_port_cnt.max(1))
            .map(|p| self.query_port(p + 1).map(|a| a.legacy_resp.gid_tbl_len as usize))
            .sum::<Result<usize>>()?;
        portcmd::query_gid_table(&self.dev, n.max(1)).op("query_gid_table")
    }

    /// The first RoCEv2 GID of `port` with an IPv4-mapped address, as perftest picks it
    /// (falling back to the first RoCEv2 GID).
    pub fn default_gid(&self, port: u8) -> Result<GidEntry> {
        let t: Vec<GidEntry> = self.gid_table()?.into_iter().filter(|g| g.port_num == port as u32).collect();
        let v2 = |g: &&GidEntry| g.gid_type == uverbs::sys::verbs::GID_TYPE_ROCE_V2;
        let mapped = |g: &&GidEntry| g.raw()[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];
        t.iter().filter(v2).find(mapped).or_else(|| t.iter().find(v2)).or(t.first()).copied()
            .ok_or(Error::Invalid { op: "default_gid", why: format!("port {port} has no GID") })
    }

    /// A free user index for a QP (CQE version 1).
    pub(crate) fn alloc_uidx(&self) -> u32 {
        let mut t = self.uidx.lock().unwrap();
        let i = t.iter().position(|u| !u).unwrap_or(t.len());
        if i == t.len() {
            t.push(true);
        } else {
            t[i] = true;
        }
        i as u32
    }

    /// The key CQEs of this context use to name a QP.
    fn qp_key(&self, uidx: u32, qpn: u32) -> u32 {
        if self.ucontext.cqe_version == 1 { uidx } else { qpn }
    }

    pub(crate) fn register_qp(&self, uidx: u32, qpn: u32, s: Arc<QpShared>) {
        self.qps.write().unwrap().insert(self.qp_key(uidx, qpn), s);
    }

    pub(crate) fn unregister_qp(&self, uidx: u32, qpn: u32) {
        self.qps.write().unwrap().remove(&self.qp_key(uidx, qpn));
    }

    /// The QP a CQE names (by user index with CQE version 1, else by QPN).
    pub(crate) fn lookup_qp(&self, key: u32) -> Option<Arc<QpShared>> {
        self.qps.read().unwrap().get(&key).cloned()
    }

    /// Whether CQEs carry user indexes (CQE version 1).
    pub(crate) fn cqe_v1(&self) -> bool {
        self.ucontext.cqe_version == 1
    }

    pub(crate) fn free_uidx(&self, i: u32) {
        if let Some(u) = self.uidx.lock().unwrap().get_mut(i as usize) {
            *u = false;
        }
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        // Every object holds an Arc<Context>, so nothing uses the UAR pages any more.
        self.uars.get_mut().unwrap().destroy_all(&self.dev);
    }
}
