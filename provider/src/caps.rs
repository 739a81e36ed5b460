//! Typed device and port attributes: the limits applications size queues by, without
//! the kernel's answer structs (those stay reachable as `Context::device_attr` and
//! `Context::query_port`, for tools that print everything).

use uverbs::sys::verbs::{link_layer, port_state, ExQueryDeviceResp, QueryPortRespEx};

use crate::context::Context;
use crate::error::Result;
use crate::qp::Mtu;

/// The device limits of `ibv_query_device` that sizing code needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Most QPs the device supports (`ibv_device_attr.max_qp`).
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Gather/scatter entries per work request.
    pub max_sge: u32,
    /// Most CQs.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// Most MRs.
    pub max_mr: u32,
    /// Largest MR in bytes.
    pub max_mr_size: u64,
    /// Most PDs.
    pub max_pd: u32,
    /// READs/atomics a QP serves at once as responder (`max_dest_rd_atomic` bound).
    pub max_qp_rd_atom: u32,
    /// READs/atomics a QP keeps outstanding as requester (`max_rd_atomic` bound).
    pub max_qp_init_rd_atom: u32,
    /// Most SRQs (0: no SRQ support).
    pub max_srq: u32,
    /// Most receive WQEs one SRQ may hold.
    pub max_srq_wr: u32,
    /// Physical ports (numbered from 1).
    pub phys_port_cnt: u8,
}

impl DeviceCaps {
    fn from_resp(r: &ExQueryDeviceResp) -> DeviceCaps {
        let b = &r.base;
        DeviceCaps {
            max_qp: b.max_qp,
            max_qp_wr: b.max_qp_wr,
            max_sge: b.max_sge,
            max_cq: b.max_cq,
            max_cqe: b.max_cqe,
            max_mr: b.max_mr,
            max_mr_size: b.max_mr_size,
            max_pd: b.max_pd,
            max_qp_rd_atom: b.max_qp_rd_atom,
            max_qp_init_rd_atom: b.max_qp_init_rd_atom,
            max_srq: b.max_srq,
            max_srq_wr: b.max_srq_wr,
            phys_port_cnt: b.phys_port_cnt,
        }
    }
}

/// `enum ibv_port_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortState {
    /// No link (`IBV_PORT_DOWN`).
    Down,
    /// Link up, not yet configured by the subnet manager (`IBV_PORT_INIT`).
    Init,
    /// Configured, not yet active (`IBV_PORT_ARMED`).
    Armed,
    /// Passing traffic (`IBV_PORT_ACTIVE`).
    Active,
    /// A value this provider does not name (NOP 0, ACTIVE_DEFER 5).
    Other(u8),
}

/// The port's link layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand: addressed by LID, no GID needed in the path.
    InfiniBand,
    /// RoCE (softhca's only kind).
    Ethernet,
    /// What older kernels report (treated as InfiniBand by rdma-core).
    Unspecified,
}

/// The parts of `ibv_query_port` a connection needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortAttr {
    /// The logical port state.
    pub state: PortState,
    /// `None` for a code outside 1..=5.
    pub max_mtu: Option<Mtu>,
    /// The path MTU the port runs (None: a code this crate does not know).
    pub active_mtu: Option<Mtu>,
    /// The port's LID (0 on Ethernet).
    pub lid: u16,
    /// Entries in the GID table.
    pub gid_tbl_len: u32,
    /// InfiniBand or Ethernet (RoCE).
    pub link_layer: LinkLayer,
    /// Largest message in bytes.
    pub max_msg_sz: u32,
}

impl PortAttr {
    fn from_resp(r: &QueryPortRespEx) -> PortAttr {
        let p = &r.legacy_resp;
        PortAttr {
            state: match p.state {
                port_state::DOWN => PortState::Down,
                port_state::INIT => PortState::Init,
                port_state::ARMED => PortState::Armed,
                port_state::ACTIVE => PortState::Active,
                s => PortState::Other(s),
            },
            max_mtu: Mtu::from_code(p.max_mtu),
            active_mtu: Mtu::from_code(p.active_mtu),
            lid: p.lid,
            gid_tbl_len: p.gid_tbl_len,
            link_layer: match p.link_layer {
                link_layer::INFINIBAND => LinkLayer::InfiniBand,
                link_layer::ETHERNET => LinkLayer::Ethernet,
                _ => LinkLayer::Unspecified,
            },
            max_msg_sz: p.max_msg_sz,
        }
    }
}

impl Context {
    /// The device's limits (from the query cached at open).
    pub fn caps(&self) -> DeviceCaps {
        DeviceCaps::from_resp(self.device_attr())
    }

    /// `port`'s state, MTUs and addressing (a QUERY_PORT each call).
    pub fn port(&self, port: u8) -> Result<PortAttr> {
        Ok(PortAttr::from_resp(&self.query_port(port)?))
    }
}
