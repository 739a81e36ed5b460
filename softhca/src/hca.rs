//! One software HCA: its identity, its RoCEv2 socket, its device memory, and the
//! device-wide tables both halves share (QPN -> QP, CQN -> CQ, MKey -> MR).
//!
//! The kernel half adds and removes table entries as objects are created and destroyed
//! (through any of the uverbs files opened on this HCA); the device half looks them up to
//! execute work and to answer packets from other HCAs.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

use uverbs::sys::mlx5::ClockInfo;
use zerocopy::IntoBytes;

use crate::config::{self, Config};
use crate::device::Device;
use crate::kernel::File;
use crate::objects::{Cq, Kind, LiveCounts, Mr, Pd, Qp};
use crate::pages::{DevicePages, CLOCK_INFO_PAGE, CLOCK_PAGE};

/// UAR pages in the shared memory file (after the clock pages, see `pages`).
const UAR_PAGES: u32 = 4094;
/// QPNs and CQNs are 24-bit numbers chosen by the firmware; these are where ours start.
const FIRST_QPN: u32 = 0x108;
const FIRST_CQN: u32 = 0x400;
/// SRQ numbers start above 0 (a CQE's `srqn` 0 means "no SRQ" to libmlx5 with CQE version 0).
const FIRST_SRQN: u32 = 0x100;
const MAX_NUM: u32 = 0x00ff_ffff;
/// MKey indexes 0 and 1 are never used: key 0x100 (index 1, variant 0) is the
/// "invalid lkey" that ends a receive WQE's scatter list.
const FIRST_MKEY_INDEX: u32 = 2;
/// mlx5 reports clock timestamps with 41 significant bits of cycles.
const CLOCK_MASK: u64 = (1 << 41) - 1;
const CLOCK_SHIFT: u32 = 23;

/// Why a key check failed (the device half turns these into CQE syndromes or NAKs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// No MR has this key (never registered, deregistered, or a stale variant).
    NoSuchKey,
    /// The MR belongs to another PD than the QP.
    WrongPd,
    /// The range is not inside the MR.
    OutOfBounds,
    /// The MR does not allow this access.
    AccessDenied,
    /// The key checked, but the MR's peer memory failed the read or write (its
    /// exporter's copy engine reported an error, see [`crate::peer::PeerError`]): the
    /// failed DMA of a real NIC.
    PeerFault,
}

/// The access a key check asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Local read (send gather, RDMA WRITE source).
    LocalRead,
    /// Local write (receive scatter, RDMA READ destination).
    LocalWrite,
    RemoteRead,
    RemoteWrite,
    RemoteAtomic,
}

/// A cycling allocator of numbers in `[min, max]` that skips numbers in use.
#[derive(Debug)]
struct NumberPool {
    next: u32,
    min: u32,
    max: u32,
    used: BTreeSet<u32>,
}

impl NumberPool {
    fn new(min: u32, max: u32) -> NumberPool {
        NumberPool { next: min, min, max, used: BTreeSet::new() }
    }

    fn alloc(&mut self) -> Option<u32> {
        let span = (self.max - self.min) as usize + 1;
        if self.used.len() >= span {
            return None;
        }
        loop {
            let n = self.next;
            self.next = if n >= self.max { self.min } else { n + 1 };
            if self.used.insert(n) {
                return Some(n);
            }
        }
    }

    fn free(&mut self, n: u32) {
        self.used.remove(&n);
    }
}

/// mlx5 memory keys: `index << 8 | variant`, the index reused lowest-first and the
/// variant byte advancing on every allocation, so a stale key does not match a new MR.
#[derive(Debug)]
struct KeyPool {
    used: BTreeSet<u32>,
    variant: u8,
}

impl KeyPool {
    fn alloc(&mut self) -> Option<u32> {
        let mut index = FIRST_MKEY_INDEX;
        for &u in self.used.range(FIRST_MKEY_INDEX..) {
            if u != index {
                break;
            }
            index += 1;
        }
        if index > MAX_NUM {
            return None;
        }
        self.used.insert(index);
        self.variant = self.variant.wrapping_add(1);
        Some(index << 8 | self.variant as u32)
    }

    fn free(&mut self, key: u32) {
        self.used.remove(&(key >> 8));
    }
}

#[derive(Debug)]
struct Ids {
    qpn: NumberPool,
    cqn: NumberPool,
    srqn: NumberPool,
    pdn: NumberPool,
    /// XRC domains; 0 is never one (a basic SRQ's and a non-XRC QP's `xrcd` field).
    xrcdn: NumberPool,
    mkey: KeyPool,
}

/// One software HCA.
#[derive(Debug)]
pub struct Hca {
    config: Config,
    socket: UdpSocket,
    pages: Arc<DevicePages>,
    device: Device,
    live: Arc<LiveCounts>,
    qps: RwLock<BTreeMap<u32, Arc<Qp>>>,
    cqs: RwLock<BTreeMap<u32, Arc<Cq>>>,
    /// XRC SRQs ([`Hca::xrc_srq`]).
    xrc_srqs: RwLock<BTreeMap<u32, Arc<crate::objects::Srq>>>,
    /// MKey index -> MR.
    mrs: RwLock<BTreeMap<u32, Arc<Mr>>>,
    /// Bumped under `mrs`' write lock by every change to it ([`Hca::mr_generation`]).
    mr_generation: AtomicU64,
    ids: Mutex<Ids>,
    next_file: AtomicU64,
    cap_net_raw: bool,
    dump_fill_mkey: u32,
    /// The firmware's objects ([`Hca::firmware`]).
    firmware: Mutex<crate::firmware::Objects>,
    /// The shared XRC domains by inode (the uverbs device's `xrcd_tree`).
    xrcds: Mutex<BTreeMap<(u64, u64), Arc<crate::kernel::methods::xrcd::Xrcd>>>,
    /// The IOMMU domain of the device, when one is set ([`Hca::confine_dma`]).
    dma_window: std::sync::OnceLock<std::ops::Range<u64>>,
    /// The kernel's steering tables (mlx5_ib's `flow_db`, [`Hca::flow_db`]).
    flow_db: Mutex<crate::kernel::methods::flow_fs::FlowDb>,
}

/// The capability number of CAP_NET_RAW (linux/capability.h).
const CAP_NET_RAW: u32 = 13;

/// Whether this process has CAP_NET_RAW in its effective set (RAW_PACKET QPs, privileged
/// Q_Keys).
fn has_cap_net_raw() -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else { return false };
    status.lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .map(|caps| caps & (1 << CAP_NET_RAW) != 0)
        .unwrap_or(false)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hca {
    /// An HCA at `config.addr`, binding its RoCEv2 socket there.
    pub fn new(config: Config) -> io::Result<Arc<Hca>> {
        let socket = config::bind_roce_socket(config.addr)?;
        Hca::with_socket(config, socket)
    }

    /// An HCA at the default address (see [`crate::config`]).
    pub fn new_default() -> io::Result<Arc<Hca>> {
        let (addr, socket) = config::bind_default()?;
        Hca::with_socket(Config::for_addr(addr), socket)
    }

    /// Confines the queues the firmware places to `window`, as an IOMMU domain confines a
    /// device's DMA: a ring or doorbell record outside it is BAD_ADDRESS at create. A
    /// kernel-owned (uid 0) command names raw addresses the firmware must trust, as a
    /// ConnectX trusts mlx5_core's; a test that fuzzes such commands sets the window to
    /// the memory it owns, so that no mutated address makes the device half read memory
    /// the test never promised to keep (another thread's heap, trimmed under it).
    /// Set once; later calls are ignored.
    #[cfg(test)]
    pub(crate) fn confine_dma(&self, window: std::ops::Range<u64>) {
        let _ = self.dma_window.set(window);
    }

    /// Whether `[addr, addr + len)` lies in the device's DMA window (always, without one).
    pub(crate) fn dma_reachable(&self, addr: u64, len: u64) -> bool {
        match self.dma_window.get() {
            None => true,
            Some(w) => addr >= w.start && addr.checked_add(len).is_some_and(|end| end <= w.end),
        }
    }

    /// An HCA with the default configuration on a socket of its own at an ephemeral
    /// loopback port, for unit tests that drive the kernel or device half directly.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Arc<Hca> {
        Hca::with_socket(Config::default(), UdpSocket::bind("127.0.0.1:0").unwrap()).unwrap()
    }

    /// An HCA using an already bound RoCEv2 socket.
    pub fn with_socket(config: Config, socket: UdpSocket) -> io::Result<Arc<Hca>> {
        let pages = Arc::new(DevicePages::new(UAR_PAGES)?);
        let mut mkey = KeyPool { used: BTreeSet::new(), variant: 0 };
        let dump_fill_mkey = mkey.alloc().ok_or_else(|| io::Error::from(io::ErrorKind::OutOfMemory))?;
        let hca = Hca {
            config,
            socket,
            pages: pages.clone(),
            device: Device::new(pages.clone())?,
            live: Arc::new(LiveCounts::default()),
            qps: RwLock::new(BTreeMap::new()),
            cqs: RwLock::new(BTreeMap::new()),
            xrc_srqs: RwLock::new(BTreeMap::new()),
            mrs: RwLock::new(BTreeMap::new()),
            mr_generation: AtomicU64::new(0),
            ids: Mutex::new(Ids {
                qpn: NumberPool::new(FIRST_QPN, MAX_NUM),
                cqn: NumberPool::new(FIRST_CQN, MAX_NUM),
                srqn: NumberPool::new(FIRST_SRQN, MAX_NUM),
                pdn: NumberPool::new(1, MAX_NUM),
                xrcdn: NumberPool::new(1, MAX_NUM),
                mkey,
            }),
            next_file: AtomicU64::new(1),
            cap_net_raw: has_cap_net_raw(),
            dump_fill_mkey,
            firmware: Mutex::default(),
            xrcds: Mutex::default(),
            dma_window: std::sync::OnceLock::new(),
            flow_db: Mutex::default(),
        };
        hca.init_clock();
        tracing::debug!(target: "softhca", addr = %hca.config.addr, name = %hca.config.name, "hca up");
        let hca = Arc::new(hca);
        hca.device.start(&hca)?;
        Ok(hca)
    }

    /// Opens a new uverbs file on this HCA (open("/dev/infiniband/uverbsN")).
    pub fn open(self: &Arc<Self>) -> File {
        File::new(self.clone(), self.next_file.fetch_add(1, Ordering::Relaxed))
    }

    /// The HCA's firmware: PRM commands on firmware objects ([`crate::firmware`]).
    /// The kernel's steering tables, shared by every file of the HCA (`dev->flow_db`
    /// under its lock).
    pub(crate) fn flow_db(&self) -> std::sync::MutexGuard<'_, crate::kernel::methods::flow_fs::FlowDb> {
        lock(&self.flow_db)
    }

    pub fn firmware(&self) -> crate::firmware::Firmware<'_> {
        crate::firmware::Firmware::new(self, &self.firmware)
    }

    /// The instance's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The RoCEv2 socket bound at `config.addr:4791` (for the device half).
    pub fn socket(&self) -> &UdpSocket {
        &self.socket
    }

    /// The device memory behind UAR and clock mmaps.
    pub fn pages(&self) -> &Arc<DevicePages> {
        &self.pages
    }

    /// The device half's hooks.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Objects alive right now, by kind.
    pub fn live(&self) -> &LiveCounts {
        &self.live
    }

    pub(crate) fn live_counts(&self) -> &Arc<LiveCounts> {
        &self.live
    }

    /// Objects alive right now (contexts, PDs, MRs, CQs, QPs, AHs, UARs and event files of
    /// every file): 0 once every file is closed and every event fd's last user is gone.
    pub fn live_objects(&self) -> usize {
        self.live.total()
    }

    /// Live objects of one kind.
    pub fn live_of(&self, kind: Kind) -> usize {
        self.live.get(kind)
    }

    /// Whether the process may create RAW_PACKET QPs and use privileged Q_Keys.
    pub fn cap_net_raw(&self) -> bool {
        self.cap_net_raw
    }

    /// The MKey reported as `dump_fill_mkey`: scattering to it discards the data.
    pub fn dump_fill_mkey(&self) -> u32 {
        self.dump_fill_mkey
    }

    /// The QP with this number.
    pub fn qp(&self, qpn: u32) -> Option<Arc<Qp>> {
        self.qps.read().unwrap_or_else(|p| p.into_inner()).get(&qpn).cloned()
    }

    /// Every live QP.
    pub fn qps(&self) -> Vec<Arc<Qp>> {
        self.qps.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The CQ with this number.
    pub fn cq(&self, cqn: u32) -> Option<Arc<Cq>> {
        self.cqs.read().unwrap_or_else(|p| p.into_inner()).get(&cqn).cloned()
    }

    /// Every live CQ.
    pub fn cqs(&self) -> Vec<Arc<Cq>> {
        self.cqs.read().unwrap_or_else(|p| p.into_inner()).values().cloned().collect()
    }

    /// The MR whose lkey or rkey is exactly `key`.
    pub fn mr_by_key(&self, key: u32) -> Option<Arc<Mr>> {
        let mrs = self.mrs.read().unwrap_or_else(|p| p.into_inner());
        mrs.get(&(key >> 8)).filter(|mr| mr.span.lkey == key || mr.span.rkey == key).cloned()
    }

    /// Checks a key for an access of `len` bytes at `iova` on behalf of a QP in `pd`, and
    /// returns the MR and the address of the first byte: a process address, or for an MR
    /// in peer memory (`mr.span.peer`) a device address of its `crate::peer::PeerMemory`.
    pub fn check_key(&self, key: u32, pd: &Pd, iova: u64, len: u64, access: Access) -> Result<(Arc<Mr>, u64), KeyError> {
        let mr = self.mr_by_key(key).ok_or(KeyError::NoSuchKey)?;
        let addr = mr.span.check(key, pd.pdn, iova, len, access)?;
        Ok((mr, addr))
    }

    /// A number that changes whenever an MR is registered or deregistered: a translation
    /// made at one value is what [`Hca::check_key`] would still give while the value is
    /// the same (see `crate::device::mkey::KeyCache`).
    pub fn mr_generation(&self) -> u64 {
        self.mr_generation.load(Ordering::Relaxed)
    }

    // ---- kernel half: numbers and table entries -------------------------------------

    pub(crate) fn alloc_pdn(&self) -> Option<u32> {
        lock(&self.ids).pdn.alloc()
    }

    pub(crate) fn free_pdn(&self, pdn: u32) {
        lock(&self.ids).pdn.free(pdn)
    }

    /// The shared XRC domains, locked (OPEN_XRCD and the last close of a domain).
    pub(crate) fn xrcd_table(&self) -> std::sync::MutexGuard<'_, BTreeMap<(u64, u64), Arc<crate::kernel::methods::xrcd::Xrcd>>> {
        lock(&self.xrcds)
    }

    pub(crate) fn alloc_xrcdn(&self) -> Option<u32> {
        lock(&self.ids).xrcdn.alloc()
    }

    pub(crate) fn free_xrcdn(&self, xrcdn: u32) {
        lock(&self.ids).xrcdn.free(xrcdn)
    }

    pub(crate) fn alloc_qpn(&self) -> Option<u32> {
        lock(&self.ids).qpn.alloc()
    }

    pub(crate) fn free_qpn(&self, qpn: u32) {
        lock(&self.ids).qpn.free(qpn)
    }

    pub(crate) fn alloc_cqn(&self) -> Option<u32> {
        lock(&self.ids).cqn.alloc()
    }

    pub(crate) fn free_cqn(&self, cqn: u32) {
        lock(&self.ids).cqn.free(cqn)
    }

    pub(crate) fn alloc_srqn(&self) -> Option<u32> {
        lock(&self.ids).srqn.alloc()
    }

    pub(crate) fn free_srqn(&self, srqn: u32) {
        lock(&self.ids).srqn.free(srqn)
    }

    pub(crate) fn alloc_mkey(&self) -> Option<u32> {
        lock(&self.ids).mkey.alloc()
    }

    pub(crate) fn free_mkey(&self, key: u32) {
        lock(&self.ids).mkey.free(key)
    }

    pub(crate) fn insert_qp(&self, qp: &Arc<Qp>) {
        self.qps.write().unwrap_or_else(|p| p.into_inner()).insert(qp.qpn, qp.clone());
        self.device.qp_created(qp);
    }

    pub(crate) fn remove_qp(&self, qp: &Arc<Qp>) {
        self.qps.write().unwrap_or_else(|p| p.into_inner()).remove(&qp.qpn);
        self.device.qp_destroyed(qp);
        self.free_qpn(qp.qpn);
    }

    /// XRC SRQs by number, for the device half's XRC targets (the XRCETH names one).
    pub(crate) fn xrc_srq(&self, srqn: u32) -> Option<Arc<crate::objects::Srq>> {
        self.xrc_srqs.read().unwrap_or_else(|p| p.into_inner()).get(&srqn).cloned()
    }

    pub(crate) fn insert_xrc_srq(&self, srq: &Arc<crate::objects::Srq>) {
        self.xrc_srqs.write().unwrap_or_else(|p| p.into_inner()).insert(srq.srqn, srq.clone());
    }

    pub(crate) fn remove_xrc_srq(&self, srqn: u32) {
        self.xrc_srqs.write().unwrap_or_else(|p| p.into_inner()).remove(&srqn);
    }

    pub(crate) fn insert_cq(&self, cq: &Arc<Cq>) {
        self.cqs.write().unwrap_or_else(|p| p.into_inner()).insert(cq.cqn, cq.clone());
        self.device.cq_created(cq);
    }

    pub(crate) fn remove_cq(&self, cq: &Arc<Cq>) {
        self.cqs.write().unwrap_or_else(|p| p.into_inner()).remove(&cq.cqn);
        self.device.cq_destroyed(cq);
        self.free_cqn(cq.cqn);
    }

    pub(crate) fn insert_mr(&self, mr: &Arc<Mr>) {
        let mut mrs = self.mrs.write().unwrap_or_else(|p| p.into_inner());
        mrs.insert(mr.span.lkey >> 8, mr.clone());
        self.mr_generation.fetch_add(1, Ordering::Relaxed);
        drop(mrs);
        self.device.mr_registered(mr);
    }

    pub(crate) fn remove_mr(&self, mr: &Arc<Mr>) {
        // Out of the table first, then the hook: once it returns no engine step can still
        // be using the MR's memory (see crate::device).
        let mut mrs = self.mrs.write().unwrap_or_else(|p| p.into_inner());
        mrs.remove(&(mr.span.lkey >> 8));
        self.mr_generation.fetch_add(1, Ordering::Relaxed);
        drop(mrs);
        self.device.mr_deregistered(mr);
        self.free_mkey(mr.span.lkey);
    }

    // ---- clock -------------------------------------------------------------------------

    /// Nanoseconds since the epoch.
    fn now_ns() -> u64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
    }

    /// The free-running timer now, as CQE timestamps carry it.
    pub fn clock_cycles(&self) -> u64 {
        self.cycles_at(Self::now_ns()) & CLOCK_MASK
    }

    /// The free-running timer value for `ns`.
    fn cycles_at(&self, ns: u64) -> u64 {
        ((ns as u128 * self.config.core_clock_khz as u128) / 1_000_000) as u64
    }

    /// Writes the current timer value into the clock page (big-endian high word at +0,
    /// low word at +4, as `internal_timer_h/l`). The device half calls this to keep the
    /// clock moving; the kernel half calls it when the page is mapped and at creation.
    pub fn update_clock(&self) {
        let cycles = self.cycles_at(Self::now_ns());
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&((cycles >> 32) as u32).to_be_bytes());
        b[4..].copy_from_slice(&(cycles as u32).to_be_bytes());
        self.pages.write_u64(CLOCK_PAGE, 0, u64::from_ne_bytes(b));
    }

    fn init_clock(&self) {
        self.update_clock();
        let ns = Self::now_ns();
        // ns = cycles * mult >> shift, for the configured frequency.
        let mult = ((1_000_000u128 << CLOCK_SHIFT) / self.config.core_clock_khz.max(1) as u128) as u32;
        let info = ClockInfo {
            sign: 0,
            resv: 0,
            nsec: ns,
            cycles: self.cycles_at(ns) & CLOCK_MASK,
            frac: 0,
            mult,
            shift: CLOCK_SHIFT,
            mask: CLOCK_MASK,
            overflow_period: ((CLOCK_MASK as u128 * mult as u128) >> CLOCK_SHIFT) as u64 / 2,
        };
        let mut page = [0u8; 64];
        page[..std::mem::size_of::<ClockInfo>()].copy_from_slice(info.as_bytes());
        self.pages.write_bytes(CLOCK_INFO_PAGE, 0, &page);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_pool_cycles_and_skips_used() {
        let mut p = NumberPool::new(5, 7);
        assert_eq!((p.alloc(), p.alloc(), p.alloc(), p.alloc()), (Some(5), Some(6), Some(7), None));
        p.free(6);
        assert_eq!(p.alloc(), Some(6));
        p.free(5);
        p.free(7);
        assert_eq!(p.alloc(), Some(7));
        assert_eq!(p.alloc(), Some(5));
    }

    #[test]
    fn mkeys_reuse_lowest_index_with_a_new_variant() {
        let mut k = KeyPool { used: BTreeSet::new(), variant: 0 };
        let a = k.alloc().unwrap();
        let b = k.alloc().unwrap();
        assert_eq!((a >> 8, b >> 8), (2, 3));
        k.free(a);
        let c = k.alloc().unwrap();
        assert_eq!(c >> 8, 2);
        assert_ne!(c, a, "the variant byte changes");
        assert_ne!(c & 0xff, 0);
    }
}
