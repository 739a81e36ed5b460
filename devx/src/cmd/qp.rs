//! CREATE_QP (RC and UD) with the work queues and doorbell record in UMEMs, every
//! state transition, and QUERY_QP.
//!
//! The transition builders set what mlx5_ib's `__mlx5_ib_modify_qp` sets for the
//! same verbs transition (`to_mlx5_st`, `mlx5_set_path`, the RTR/RTS attribute
//! mapping of `qp.c`), so a DevX QP and a verbs QP moved with the same parameters
//! end up with the same context.

use prm::bits::{View, ViewMut};
use prm::cmd::opcode;
use prm::cmd::qp::{
    pm_state, st, Ads, CreateQpIn, Init2rtrQpIn, Qp2errIn, Qp2rstIn, Qpc, QueryQpIn, QueryQpOut, Rst2initQpIn,
    Rtr2rtsQpIn, Rts2rtsQpIn,
};

use super::cq::UmemRef;
use super::{inbox, view};

/// The service types a DevX QP can have here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpKind {
    Rc,
    Ud,
}

impl QpKind {
    fn st(self) -> u8 {
        match self {
            QpKind::Rc => st::RC,
            QpKind::Ud => st::UD,
        }
    }
}

/// What a DevX QP is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpParams {
    pub kind: QpKind,
    pub pd: u32,
    pub cqn_snd: u32,
    pub cqn_rcv: u32,
    /// The UAR page the QP's doorbells are rung on.
    pub uar_page: u32,
    /// Reported in this QP's CQEs (CQE version 1).
    pub user_index: u32,
    /// log2 of the number of send WQEBBs.
    pub log_sq_size: u8,
    /// log2 of the number of receive WQEs.
    pub log_rq_size: u8,
    /// Receive WQE stride is `16 << log_rq_stride` bytes.
    pub log_rq_stride: u8,
    /// The RQ then the SQ (at `(1 << log_rq_size) << (log_rq_stride + 4)`), as a
    /// verbs QP's buffer is laid out.
    pub wq: UmemRef,
    /// The doorbell record: RQ counter at +0, SQ counter at +4.
    pub dbr: UmemRef,
}

/// The CREATE_QP inbox.
pub fn create_qp_in(p: &QpParams) -> Vec<u8> {
    let mut b = inbox::<CreateQpIn>(opcode::CREATE_QP, 0);
    let mut v = view::<CreateQpIn>(&mut b);
    v.set(CreateQpIn::wq_umem_valid, true)
        .set(CreateQpIn::wq_umem_id, p.wq.id)
        .set(CreateQpIn::wq_umem_offset, p.wq.offset);
    let mut q = v.sub_mut(CreateQpIn::qpc);
    q.set(Qpc::st, p.kind.st())
        .set(Qpc::pm_state, pm_state::MIGRATED)
        .set(Qpc::pd, p.pd)
        .set(Qpc::uar_page, p.uar_page)
        .set(Qpc::user_index, p.user_index)
        .set(Qpc::log_sq_size, p.log_sq_size)
        .set(Qpc::log_rq_size, p.log_rq_size)
        .set(Qpc::log_rq_stride, p.log_rq_stride)
        .set(Qpc::cqn_snd, p.cqn_snd)
        .set(Qpc::cqn_rcv, p.cqn_rcv)
        .set(Qpc::log_page_size, 0)
        .set(Qpc::dbr_umem_valid, true)
        .set(Qpc::dbr_umem_id, p.dbr.id)
        .set(Qpc::dbr_addr, p.dbr.offset);
    b
}

/// RST2INIT's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rst2Init {
    /// The physical port (1-based).
    pub port: u8,
    pub pkey_index: u16,
    /// RC: remote access the QP allows.
    pub remote_read: bool,
    pub remote_write: bool,
    pub remote_atomic: bool,
    /// UD: the queue key.
    pub qkey: u32,
}

/// The RST2INIT_QP inbox.
pub fn rst2init_in(qpn: u32, p: &Rst2Init) -> Vec<u8> {
    let mut b = inbox::<Rst2initQpIn>(opcode::RST2INIT_QP, 0);
    let mut v = view::<Rst2initQpIn>(&mut b);
    v.set(Rst2initQpIn::qpn, qpn);
    let mut q = v.sub_mut(Rst2initQpIn::qpc);
    q.set(Qpc::rre, p.remote_read).set(Qpc::rwe, p.remote_write).set(Qpc::rae, p.remote_atomic);
    q.set(Qpc::q_key, p.qkey);
    q.sub_mut(Qpc::primary_address_path).set(Ads::vhca_port_num, p.port).set(Ads::pkey_index, p.pkey_index);
    b
}

/// The RoCE address of the remote side (`mlx5_set_path` for a RoCE port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RocePath {
    pub port: u8,
    /// The remote GID (IPv4-mapped or IPv6).
    pub rgid: [u8; 16],
    /// The next hop's MAC address.
    pub rmac: [u8; 6],
    /// The local GID table index (`src_addr_index`).
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    /// The RoCEv2 UDP source port.
    pub udp_sport: u16,
    /// Ethernet priority (service level).
    pub sl: u8,
}

fn set_path(mut a: ViewMut<'_, Ads>, p: &RocePath) {
    a.set(Ads::vhca_port_num, p.port)
        .set(Ads::grh, true)
        .set(Ads::src_addr_index, p.sgid_index)
        .set(Ads::hop_limit, p.hop_limit)
        .set(Ads::tclass, p.traffic_class)
        .set(Ads::flow_label, p.flow_label)
        .set(Ads::udp_sport, p.udp_sport)
        .set(Ads::eth_prio, p.sl & 7)
        .set(Ads::rmac_47_32, u16::from_be_bytes([p.rmac[0], p.rmac[1]]))
        .set(Ads::rmac_31_0, u32::from_be_bytes([p.rmac[2], p.rmac[3], p.rmac[4], p.rmac[5]]));
    a.bytes_mut(Ads::rgid_rip).copy_from_slice(&p.rgid);
}

/// INIT2RTR's parameters (RC; a UD QP takes none but the port).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Init2Rtr {
    /// `prm::cmd::qp::mtu`.
    pub mtu: u8,
    /// log2 of the largest message (the general caps' `log_max_msg`).
    pub log_msg_max: u8,
    pub remote_qpn: u32,
    /// The first PSN expected from the remote side.
    pub next_rcv_psn: u32,
    /// The RNR NAK timer code (IB spec table).
    pub min_rnr_nak: u8,
    /// log2 of the RDMA reads/atomics the remote may have outstanding here.
    pub log_rra_max: u8,
    pub path: RocePath,
}

/// The INIT2RTR_QP inbox.
pub fn init2rtr_in(qpn: u32, p: &Init2Rtr) -> Vec<u8> {
    let mut b = inbox::<Init2rtrQpIn>(opcode::INIT2RTR_QP, 0);
    let mut v = view::<Init2rtrQpIn>(&mut b);
    v.set(Init2rtrQpIn::qpn, qpn);
    let mut q = v.sub_mut(Init2rtrQpIn::qpc);
    q.set(Qpc::mtu, p.mtu)
        .set(Qpc::log_msg_max, p.log_msg_max)
        .set(Qpc::remote_qpn, p.remote_qpn)
        .set(Qpc::next_rcv_psn, p.next_rcv_psn)
        .set(Qpc::min_rnr_nak, p.min_rnr_nak)
        .set(Qpc::log_rra_max, p.log_rra_max);
    set_path(q.sub_mut(Qpc::primary_address_path), &p.path);
    b
}

/// RTR2RTS's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rtr2Rts {
    pub next_send_psn: u32,
    /// Transport retries (0..=7).
    pub retry_count: u8,
    /// RNR retries (7: infinite).
    pub rnr_retry: u8,
    /// Local ACK timeout code: 4.096 us << ack_timeout.
    pub ack_timeout: u8,
    /// log2 of the RDMA reads/atomics this QP may have outstanding.
    pub log_sra_max: u8,
}

/// The RTR2RTS_QP inbox.
pub fn rtr2rts_in(qpn: u32, p: &Rtr2Rts) -> Vec<u8> {
    let mut b = inbox::<Rtr2rtsQpIn>(opcode::RTR2RTS_QP, 0);
    let mut v = view::<Rtr2rtsQpIn>(&mut b);
    v.set(Rtr2rtsQpIn::qpn, qpn);
    let mut q = v.sub_mut(Rtr2rtsQpIn::qpc);
    q.set(Qpc::next_send_psn, p.next_send_psn)
        .set(Qpc::retry_count, p.retry_count)
        .set(Qpc::rnr_retry, p.rnr_retry)
        .set(Qpc::log_sra_max, p.log_sra_max);
    q.sub_mut(Qpc::primary_address_path).set(Ads::ack_timeout, p.ack_timeout);
    b
}

/// The RTS2RTS_QP inbox: `opt_param_mask` says which context fields change (the
/// PRM's `MLX5_QP_OPTPAR_*` bits); `f` sets them.
pub fn rts2rts_in(qpn: u32, opt_param_mask: u32, f: impl FnOnce(&mut ViewMut<'_, Qpc>)) -> Vec<u8> {
    let mut b = inbox::<Rts2rtsQpIn>(opcode::RTS2RTS_QP, 0);
    let mut v = view::<Rts2rtsQpIn>(&mut b);
    v.set(Rts2rtsQpIn::qpn, qpn).set(Rts2rtsQpIn::opt_param_mask, opt_param_mask);
    f(&mut v.sub_mut(Rts2rtsQpIn::qpc));
    b
}

/// The 2ERR_QP inbox: any state to ERR (outstanding WQEs complete flushed).
pub fn qp_2err_in(qpn: u32) -> Vec<u8> {
    let mut b = inbox::<Qp2errIn>(opcode::QP_2ERR, 0);
    view::<Qp2errIn>(&mut b).set(Qp2errIn::qpn, qpn);
    b
}

/// The 2RST_QP inbox: any state to RESET.
pub fn qp_2rst_in(qpn: u32) -> Vec<u8> {
    let mut b = inbox::<Qp2rstIn>(opcode::QP_2RST, 0);
    view::<Qp2rstIn>(&mut b).set(Qp2rstIn::qpn, qpn);
    b
}

/// The QUERY_QP inbox.
pub fn query_qp_in(qpn: u32) -> Vec<u8> {
    let mut b = inbox::<QueryQpIn>(opcode::QUERY_QP, 0);
    view::<QueryQpIn>(&mut b).set(QueryQpIn::qpn, qpn);
    b
}

/// The QP context of a QUERY_QP answer.
pub fn queried_qpc(out: &[u8]) -> Option<View<'_, Qpc>> {
    View::<QueryQpOut>::new(out).ok().map(|v| v.sub(QueryQpOut::qpc))
}
