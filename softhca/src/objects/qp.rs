//! Queue pair: the HCA's QP context (QPC).
//!
//! The application owns the work queue buffer (`buf_addr`: receive queue at offset 0,
//! send queue at `sq_offset`, both made of fixed-size WQEs) and the doorbell record
//! (`db_addr`: receive counter at +0, send counter at +4, big-endian). The device half
//! fetches WQEs from there after a doorbell, executes them, and writes CQEs to the CQs.
//!
//! Written once by the kernel half at creation: everything except `attrs`, `dev` and the
//! event counter. `attrs` ([`QpAttrs`]) is the part MODIFY_QP changes: the kernel half
//! writes it under its mutex and then tells the device half
//! ([`crate::device::Device::qp_modified`]); the device half reads it (and moves the QP to
//! ERR on fatal errors, the one state change the hardware makes by itself).

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use uverbs::sys::verbs::QpCap;

use super::{AsyncEventFile, Cq, Live, Pd, Srq};

/// `enum ib_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum QpState {
    #[default]
    Reset = 0,
    Init = 1,
    Rtr = 2,
    Rts = 3,
    Sqd = 4,
    Sqe = 5,
    Err = 6,
}

impl QpState {
    /// Every state, in numeric order.
    pub const ALL: [QpState; 7] =
        [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts, QpState::Sqd, QpState::Sqe, QpState::Err];

    /// The state with this number, or None above ERR.
    pub fn from_u8(v: u8) -> Option<QpState> {
        QpState::ALL.get(v as usize).copied()
    }
}

/// `enum ib_uverbs_qp_type` values softhca knows about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum QpType {
    Rc = 2,
    Uc = 3,
    Ud = 4,
    RawPacket = 8,
    XrcIni = 9,
    XrcTgt = 10,
    Driver = 0xff,
}

impl QpType {
    /// The type with this number, or None.
    pub fn from_u32(v: u32) -> Option<QpType> {
        Some(match v {
            2 => QpType::Rc,
            3 => QpType::Uc,
            4 => QpType::Ud,
            8 => QpType::RawPacket,
            9 => QpType::XrcIni,
            10 => QpType::XrcTgt,
            0xff => QpType::Driver,
            _ => return None,
        })
    }

    /// Reliable or unreliable connected (RC, UC, XRC): one fixed remote QP.
    pub fn is_connected(self) -> bool {
        matches!(self, QpType::Rc | QpType::Uc | QpType::XrcIni | QpType::XrcTgt)
    }
}

/// The primary address path as the QPC keeps it (mlx5 `ads`). On RoCE the GRH fields are
/// always meaningful; `sl` becomes the Ethernet priority and `dlid` stays 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AddressVector {
    pub dgid: [u8; 16],
    /// 20 bits.
    pub flow_label: u32,
    /// RoCEv2 UDP source port of a connected QP's packets (`ads.udp_sport`; see
    /// [`crate::wire::udp_sport`]); 0 when none was set (the device then sends from 4791).
    pub udp_sport: u16,
    /// Index into the port's GID table of the source GID.
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    /// Service level / Ethernet priority (3 bits on RoCE).
    pub sl: u8,
    /// `enum ib_rate`; 0 means the port's rate.
    pub static_rate: u8,
    pub dlid: u16,
    pub src_path_bits: u8,
    /// Destination MAC, resolved when the address vector is set (as `ib_resolve_eth_dmac`
    /// does): the MAC inside a link-local GID, or the MAC of the softhca host an IP GID
    /// names; zero when neither applies.
    pub dmac: [u8; 6],
    /// softhca's wire: the address of the host the GID names, resolved when the address
    /// vector is set ([`crate::Config::peer_addr`]); None for a GID that names none.
    pub dest_ip: Option<std::net::IpAddr>,
}

/// The modifiable part of the QP context, in the hardware's terms: what QUERY_QP reads
/// back. Field widths follow the QPC: PSNs and the remote QPN are 24 bits, the ACK timeout
/// and the RNR timer 5 bits, the retry counters 3 bits; values are truncated as the
/// hardware would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpAttrs {
    pub state: QpState,
    /// SQD reached while send work is still draining (always false: softhca refuses SQD).
    pub sq_draining: bool,
    /// `enum ibv_mtu` (1 = 256 ... 5 = 4096); 0 before INIT->RTR.
    pub path_mtu: u8,
    /// `enum ib_mig_state` (0 migrated, 1 rearm, 2 armed).
    pub path_mig_state: u8,
    pub qkey: u32,
    /// Next expected receive PSN.
    pub rq_psn: u32,
    /// Next send PSN.
    pub sq_psn: u32,
    /// Remote QP number (connected QPs).
    pub dest_qpn: u32,
    /// Remote access the responder allows: `IB_UVERBS_ACCESS_REMOTE_{READ,WRITE,ATOMIC}`
    /// as the QPC holds them (read and atomic only once `max_dest_rd_atomic` is non-zero).
    pub access: u32,
    /// The access flags as last given by MODIFY_QP (mlx5 `atomic_rd_en`).
    pub access_requested: u32,
    /// The last `max_dest_rd_atomic` given (mlx5 `resp_depth`).
    pub resp_depth: u8,
    /// log2 of outstanding RDMA READ/atomic requests as initiator and as target.
    pub log_sra_max: u8,
    pub log_rra_max: u8,
    pub min_rnr_timer: u8,
    /// Local ACK timeout exponent (4.096 us * 2^timeout).
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub pkey_index: u16,
    /// Physical port, 0 before RESET->INIT.
    pub port: u8,
    pub av: AddressVector,
    pub en_sqd_async_notify: bool,
    /// Packet pacing rate (RAW_PACKET only).
    pub rate_limit: u32,
}

impl QpAttrs {
    /// Outstanding RDMA READ/atomic operations this QP may issue.
    pub fn max_rd_atomic(&self) -> u32 {
        1 << self.log_sra_max
    }

    /// Outstanding RDMA READ/atomic operations this QP accepts as target.
    pub fn max_dest_rd_atomic(&self) -> u32 {
        1 << self.log_rra_max
    }

    /// Path MTU in bytes, or None before it is set.
    pub fn mtu_bytes(&self) -> Option<u32> {
        uverbs::sys::verbs::mtu::bytes(self.path_mtu)
    }
}

/// A view of the device half's per-QP progress, mirrored by the engine after each step
/// in which it changed (the device's working state lives in `crate::device::qp`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QpDevState {
    /// Send WQEs (in 64-byte basic blocks) the HCA has consumed.
    pub sq_consumer: u32,
    /// Receive WQEs the HCA has consumed.
    pub rq_consumer: u32,
}

/// The firmware objects behind a RAW_PACKET QP (mlx5_ib's `mlx5_ib_raw_packet_qp`):
/// an SQ sending through a TIS when the QP has a send queue, an RQ fed by a direct TIR
/// when it has a receive queue. The numbers are the ones the create response reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RawQueues {
    pub sqn: Option<u32>,
    pub tisn: Option<u32>,
    pub rqn: Option<u32>,
    pub tirn: Option<u32>,
}

/// A queue pair (`struct ib_qp` + mlx5 QPC).
#[derive(Debug)]
pub struct Qp {
    /// The QP number (24 bits) the wire and the CQEs carry.
    pub qpn: u32,
    pub qp_type: QpType,
    /// The PD (an XRC target QP has none: a placeholder PD 0 that no MR is in).
    pub pd: Arc<Pd>,
    /// The CQs (none on an XRC target QP: its receives complete on the XRC SRQ's CQ).
    pub send_cq: Option<Arc<Cq>>,
    pub recv_cq: Option<Arc<Cq>>,
    /// The XRC domain of an XRC target QP; 0 otherwise.
    pub xrcd: u32,
    /// Echoed in async events for this QP.
    pub user_handle: u64,
    /// Every send WQE produces a CQE (`sq_sig_all`).
    pub sq_sig_all: bool,
    /// `ib_uverbs_qp_create_flags` accepted at creation (without SQ_SIG_ALL).
    pub create_flags: u32,
    /// `MLX5_QP_FLAG_*` accepted at creation.
    pub mlx5_flags: u32,
    /// The capabilities the create command reported back.
    pub cap: QpCap,
    /// The WQ buffer: RQ at offset 0, SQ at `sq_offset`.
    pub buf_addr: u64,
    pub sq_offset: u64,
    /// A separate SQ buffer (RAW_PACKET only; 0 otherwise).
    pub sq_buf_addr: u64,
    /// The firmware queues a RAW_PACKET QP is made of (None for every other type).
    pub raw: Option<RawQueues>,
    /// Doorbell record: RQ counter at +0, SQ counter at +4.
    pub db_addr: u64,
    /// Receive WQEs in the RQ (power of two or 0) and log2 of their size.
    pub rq_wqe_count: u32,
    pub rq_wqe_shift: u32,
    /// Scatter entries per receive WQE (`rq.max_gs`).
    pub rq_max_gs: u32,
    /// 64-byte send basic blocks in the SQ (power of two or 0).
    pub sq_wqe_count: u32,
    /// The user index CQEs carry instead of the QPN when the context uses CQE version 1;
    /// 0xffffff otherwise.
    pub uidx: u32,
    /// UAR page the provider rings this QP's send doorbell on.
    pub uar_page: u32,
    /// The static bfreg allocated for the QP (legacy UAR mode), to release on destroy.
    pub(crate) bfregn: Option<u32>,
    /// The SRQ this QP takes receive WQEs from (it has no RQ of its own then).
    pub srq: Option<Arc<Srq>>,
    /// Where async events for this QP go.
    pub event_file: Option<Arc<AsyncEventFile>>,
    /// Async events delivered for this QP (DESTROY_QP reports it). Device half increments.
    pub events_reported: AtomicU32,
    /// The modifiable context. Kernel half writes (MODIFY_QP); device half reads, and sets
    /// ERR on fatal errors.
    pub attrs: Mutex<QpAttrs>,
    /// The device half's state.
    pub dev: Mutex<QpDevState>,
    pub(crate) _live: Live,
}

impl Qp {
    /// A copy of the current attributes.
    pub fn attrs(&self) -> QpAttrs {
        *self.attrs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.attrs().state
    }
}
