//! Connecting a QP to its peer with named options: INIT -> RTR -> RTS in one call.
//!
//! [`Qp::connect`] is `pp_connect_ctx` of rdma-core's `ibv_rc_pingpong` (and of
//! `ibv_uc_pingpong` for UC QPs): RTR towards the remote QP with the path MTU, the
//! remote PSN and the responder's resources, then RTS with our PSN and the requester's
//! timers. [`ConnectOptions::default`] holds that program's values, so a connect with
//! defaults behaves as the stock tool does; each field says what it sets.

use super::attr::{Ah, QpAttr, QpState, Remote};
use super::{Qp, QpType};
use crate::error::{invalid, Result};

/// Path MTU (`enum ibv_mtu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Mtu {
    /// 256 bytes.
    M256 = 1,
    /// 512 bytes.
    M512 = 2,
    /// 1024 bytes (ibv_rc_pingpong's default).
    M1024 = 3,
    /// 2048 bytes.
    M2048 = 4,
    /// 4096 bytes.
    M4096 = 5,
}

impl Mtu {
    /// The `ibv_mtu` code (1 = 256 .. 5 = 4096), as QP attributes and port queries
    /// carry it.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// From an `ibv_mtu` code (a port's `active_mtu`, say).
    pub const fn from_code(code: u8) -> Option<Mtu> {
        Some(match code {
            1 => Mtu::M256,
            2 => Mtu::M512,
            3 => Mtu::M1024,
            4 => Mtu::M2048,
            5 => Mtu::M4096,
            _ => return None,
        })
    }

    /// Bytes of payload per packet.
    pub const fn bytes(self) -> u32 {
        128 << self.code()
    }

    /// From a size in bytes (256, 512, 1024, 2048 or 4096), as `ibv_rc_pingpong -m`.
    pub const fn from_bytes(bytes: u32) -> Option<Mtu> {
        Some(match bytes {
            256 => Mtu::M256,
            512 => Mtu::M512,
            1024 => Mtu::M1024,
            2048 => Mtu::M2048,
            4096 => Mtu::M4096,
            _ => return None,
        })
    }
}

/// How [`Qp::connect`] sets the QP up; `Default` is `ibv_rc_pingpong`'s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectOptions {
    /// Local port (`-i`, default 1).
    pub port: u8,
    /// Local GID index the packets are sent from (`-g`). `None`: the port's default
    /// RoCE GID ([`crate::Context::default_gid`]); softhca and RoCE need a GRH, so there
    /// is no "no GID" choice.
    pub sgid_index: Option<u8>,
    /// Path MTU (`-m`, default 1024).
    pub mtu: Mtu,
    /// Our first packet sequence number (the peer's `Remote::psn` for its RTR).
    pub psn: u32,
    /// Local ACK timeout, 4.096 us * 2^timeout (14: about 67 ms). RC only.
    pub timeout: u8,
    /// Retransmissions before a WQE fails with RETRY_EXC_ERR (7). RC only.
    pub retry_cnt: u8,
    /// RNR NAK retries before RNR_RETRY_EXC_ERR; 7 = retry for ever. RC only.
    pub rnr_retry: u8,
    /// The RNR NAK delay we ask the peer to wait when we have no receive posted
    /// (12: 0.64 ms, IBTA table 45). RC only.
    pub min_rnr_timer: u8,
    /// READs and atomics we keep outstanding as requester (1). RC only.
    pub max_rd_atomic: u8,
    /// Incoming READs and atomics we serve at once as responder (1). RC only.
    pub max_dest_rd_atomic: u8,
    /// Service level (`-l`, 0).
    pub sl: u8,
    /// GRH hop limit. ibv_rc_pingpong uses 1 (one subnet); this provider's positional
    /// `to_rtr` always used 64, the Linux default for routed RoCE, which is kept.
    pub hop_limit: u8,
    /// GRH traffic class (0).
    pub traffic_class: u8,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        ConnectOptions {
            port: 1,
            sgid_index: None,
            mtu: Mtu::M1024,
            psn: 0,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 12,
            max_rd_atomic: 1,
            max_dest_rd_atomic: 1,
            sl: 0,
            hop_limit: 64,
            traffic_class: 0,
        }
    }
}

impl Qp {
    /// INIT -> RTR -> RTS towards `remote` (`pp_connect_ctx`): RC gets the responder's
    /// and requester's resources and timers from `opts`; UC only the path and PSNs
    /// (it has no ACKs, retries or reads). The QP must be in INIT ([`Qp::to_init`]),
    /// with receives posted if the peer may send at once.
    pub fn connect(&self, remote: &Remote, opts: &ConnectOptions) -> Result<()> {
        let rc = match self.qp_type {
            QpType::Rc => true,
            QpType::Uc => false,
            QpType::Ud => return invalid("connect", "UD QPs are not connected (use to_init and the UD RTR/RTS)"),
        };
        let sgid_index = match opts.sgid_index {
            Some(i) => i,
            None => self.pd.ctx.default_gid(opts.port)?.gid_index as u8,
        };
        let ah = Ah {
            dgid: remote.gid,
            sgid_index,
            hop_limit: opts.hop_limit,
            traffic_class: opts.traffic_class,
            sl: opts.sl,
            port: opts.port,
            flow_label: 0,
        };
        self.modify(&QpAttr {
            state: Some(QpState::Rtr),
            ah: Some(ah),
            path_mtu: Some(opts.mtu.code()),
            dest_qpn: Some(remote.qpn),
            rq_psn: Some(remote.psn),
            max_dest_rd_atomic: rc.then_some(opts.max_dest_rd_atomic),
            min_rnr_timer: rc.then_some(opts.min_rnr_timer),
            ..Default::default()
        })?;
        self.modify(&QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(opts.psn),
            timeout: rc.then_some(opts.timeout),
            retry_cnt: rc.then_some(opts.retry_cnt),
            rnr_retry: rc.then_some(opts.rnr_retry),
            max_rd_atomic: rc.then_some(opts.max_rd_atomic),
            ..Default::default()
        })
    }
}
