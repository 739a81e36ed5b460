//! QP attributes and state changes (`ibv_modify_qp`, `ibv_query_qp`).
//!
//! [`QpAttr`] holds optional fields; the attribute mask sent to the device is derived
//! from which fields are set, so a mask can never disagree with the values.

use uverbs::cmd::qp as qpcmd;
use uverbs::sys::verbs::{qp_attr, qp_state, ModifyQp, QpDest, QueryQpResp};

use super::Qp;
use crate::error::{Op, Result};

/// `enum ibv_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpState {
    /// Just created, or reset: no work is processed.
    Reset,
    /// Receives may be posted; port, P_Key and access set.
    Init,
    /// Ready to receive: the path and the remote QP are known.
    Rtr,
    /// Ready to send.
    Rts,
    /// Send queue drained.
    Sqd,
    /// Send queue error (UD and UC).
    Sqe,
    /// Error: work requests are flushed.
    Err,
}

impl QpState {
    fn code(self) -> u8 {
        match self {
            QpState::Reset => qp_state::RESET,
            QpState::Init => qp_state::INIT,
            QpState::Rtr => qp_state::RTR,
            QpState::Rts => qp_state::RTS,
            QpState::Sqd => qp_state::SQD,
            QpState::Sqe => qp_state::SQE,
            QpState::Err => qp_state::ERR,
        }
    }

    /// From the device's numeric state.
    pub fn from_code(c: u8) -> Option<QpState> {
        Some(match c {
            qp_state::RESET => QpState::Reset,
            qp_state::INIT => QpState::Init,
            qp_state::RTR => QpState::Rtr,
            qp_state::RTS => QpState::Rts,
            qp_state::SQD => QpState::Sqd,
            qp_state::SQE => QpState::Sqe,
            qp_state::ERR => QpState::Err,
            _ => return None,
        })
    }
}

/// An address vector: where the remote QP lives (RoCE: a GID and a source GID index).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ah {
    /// The destination GID (on RoCE, the IPv6 or IPv4-mapped address).
    pub dgid: [u8; 16],
    /// Which entry of our GID table to send from.
    pub sgid_index: u8,
    /// IPv6 hop limit / IPv4 TTL.
    pub hop_limit: u8,
    /// IPv6 traffic class / IPv4 DSCP and ECN.
    pub traffic_class: u8,
    /// IPv6 flow label (20 bits).
    pub flow_label: u32,
    /// Service level (RoCE: the 802.1p priority).
    pub sl: u8,
    /// The local port.
    pub port: u8,
}

/// Attributes to change; unset fields are left as they are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpAttr {
    /// The state to move to (`IBV_QP_STATE`).
    pub state: Option<QpState>,
    /// The state the caller believes the QP is in (`IBV_QP_CUR_STATE`).
    pub cur_state: Option<QpState>,
    /// Remote access the QP allows (`IBV_QP_ACCESS_FLAGS`).
    pub access: Option<crate::mr::Access>,
    /// Which P_Key table entry (`IBV_QP_PKEY_INDEX`).
    pub pkey_index: Option<u16>,
    /// The port (`IBV_QP_PORT`).
    pub port: Option<u8>,
    /// The Q_Key UD datagrams must carry (`IBV_QP_QKEY`).
    pub qkey: Option<u32>,
    /// The path to the remote QP (`IBV_QP_AV`).
    pub ah: Option<Ah>,
    /// `ibv_mtu` code: 1 = 256 .. 5 = 4096.
    pub path_mtu: Option<u8>,
    /// ACK timeout exponent: 4.096 us x 2^timeout (`IBV_QP_TIMEOUT`).
    pub timeout: Option<u8>,
    /// Retransmissions before RETRY_EXC_ERR (`IBV_QP_RETRY_CNT`).
    pub retry_cnt: Option<u8>,
    /// RNR retries before RNR_RETRY_EXC_ERR; 7 is infinite (`IBV_QP_RNR_RETRY`).
    pub rnr_retry: Option<u8>,
    /// The first PSN expected from the peer (`IBV_QP_RQ_PSN`).
    pub rq_psn: Option<u32>,
    /// READs and atomics we may have outstanding (`IBV_QP_MAX_QP_RD_ATOMIC`).
    pub max_rd_atomic: Option<u8>,
    /// The RNR NAK delay we ask senders to wait (`IBV_QP_MIN_RNR_TIMER`).
    pub min_rnr_timer: Option<u8>,
    /// The first PSN we send (`IBV_QP_SQ_PSN`).
    pub sq_psn: Option<u32>,
    /// READs and atomics the peer may have outstanding at us (`IBV_QP_MAX_DEST_RD_ATOMIC`).
    pub max_dest_rd_atomic: Option<u8>,
    /// The remote QP number (`IBV_QP_DEST_QPN`).
    pub dest_qpn: Option<u32>,
}

impl QpAttr {
    /// The wire form with its attribute mask.
    pub fn to_modify(&self, handle: u32) -> ModifyQp {
        let mut m = ModifyQp { qp_handle: handle, ..Default::default() };
        let mut mask = 0;
        macro_rules! set {
            ($field:ident, $bit:expr, $dst:ident, $conv:expr) => {
                if let Some(v) = self.$field {
                    mask |= $bit;
                    m.$dst = $conv(v);
                }
            };
        }
        set!(state, qp_attr::STATE, qp_state, QpState::code);
        set!(cur_state, qp_attr::CUR_STATE, cur_qp_state, QpState::code);
        set!(access, qp_attr::ACCESS_FLAGS, qp_access_flags, |a: crate::mr::Access| a.bits());
        set!(pkey_index, qp_attr::PKEY_INDEX, pkey_index, |v| v);
        set!(port, qp_attr::PORT, port_num, |v| v);
        set!(qkey, qp_attr::QKEY, qkey, |v| v);
        set!(path_mtu, qp_attr::PATH_MTU, path_mtu, |v| v);
        set!(timeout, qp_attr::TIMEOUT, timeout, |v| v);
        set!(retry_cnt, qp_attr::RETRY_CNT, retry_cnt, |v| v);
        set!(rnr_retry, qp_attr::RNR_RETRY, rnr_retry, |v| v);
        set!(rq_psn, qp_attr::RQ_PSN, rq_psn, |v| v);
        set!(max_rd_atomic, qp_attr::MAX_QP_RD_ATOMIC, max_rd_atomic, |v| v);
        set!(min_rnr_timer, qp_attr::MIN_RNR_TIMER, min_rnr_timer, |v| v);
        set!(sq_psn, qp_attr::SQ_PSN, sq_psn, |v| v);
        set!(max_dest_rd_atomic, qp_attr::MAX_DEST_RD_ATOMIC, max_dest_rd_atomic, |v| v);
        set!(dest_qpn, qp_attr::DEST_QPN, dest_qp_num, |v| v);
        if let Some(ah) = self.ah {
            mask |= qp_attr::AV;
            m.dest = QpDest {
                dgid: ah.dgid,
                flow_label: ah.flow_label,
                sgid_index: ah.sgid_index,
                hop_limit: ah.hop_limit,
                traffic_class: ah.traffic_class,
                sl: ah.sl,
                is_global: 1,
                port_num: ah.port,
                ..Default::default()
            };
        }
        m.attr_mask = mask;
        m
    }
}

/// The remote side of an RC connection, as exchanged out of band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remote {
    /// The remote QP number.
    pub qpn: u32,
    /// The remote QP's first send PSN (our `rq_psn`).
    pub psn: u32,
    /// The remote GID.
    pub gid: [u8; 16],
}

impl Qp {
    /// `ibv_modify_qp`.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        let _span = tracing::debug_span!("provider::modify_qp", qpn = self.qpn).entered();
        let m = attr.to_modify(self.handle);
        tracing::debug!(target: "provider::qp", qpn = self.qpn, mask = format_args!("{:#x}", m.attr_mask),
                        state = ?attr.state, "modify_qp");
        let cmd = uverbs::write::WriteCmd::new(uverbs::sys::write::CMD_MODIFY_QP, zerocopy::IntoBytes::as_bytes(&m), &mut []);
        let mut cmd = cmd;
        cmd.run_invoke(&self.pd.ctx.dev).or_else(|e| match e {
            // A device without INVOKE_WRITE takes the plain write().
            nix::errno::Errno::EPROTONOSUPPORT | nix::errno::Errno::ENOTTY => qpcmd::modify_qp(&self.pd.ctx.dev, &m),
            e => Err(e),
        }).op("modify_qp")?;
        if attr.state == Some(QpState::Reset) {
            self.restart_rings();
        }
        Ok(())
    }

    /// After RESET the device counts both rings from 0 again; so does the QP, as
    /// libmlx5's `mlx5_modify_qp` does (`mlx5_init_qp_indices`, doorbell record zeroed).
    /// Without it the next post lands at the old producer index and the device, which
    /// starts at 0, runs the stale WQEs before it. (libmlx5 also removes the QP's
    /// unpolled CQEs from its CQs; here the caller polls them before reusing the QP.)
    fn restart_rings(&self) {
        use std::sync::atomic::Ordering;
        // SAFETY: both words of our doorbell record are live while self is; the device
        // only reads them, and nothing is posted during a modify (`&self` here, posting
        // takes `&mut self`).
        unsafe {
            std::ptr::write_volatile(self.dbrec.word(0), 0);
            std::ptr::write_volatile(self.dbrec.word(1), 0);
        }
        self.shared.sq_tail.store(0, Ordering::Release);
        self.shared.rq_tail.store(0, Ordering::Release);
        self.shared.restart.store(true, Ordering::Release);
    }

    /// `ibv_query_qp` of every attribute.
    pub fn query(&self) -> Result<QueryQpResp> {
        qpcmd::query_qp(&self.pd.ctx.dev, self.handle, 0x1fffff).op("query_qp")
    }

    /// RESET -> INIT on `port` with the given remote access.
    pub fn to_init(&self, port: u8, access: crate::mr::Access) -> Result<()> {
        self.modify(&QpAttr {
            state: Some(QpState::Init),
            pkey_index: Some(0),
            port: Some(port),
            access: Some(access),
            ..Default::default()
        })
    }

    /// INIT -> RTR towards `remote` through local GID `sgid_index`, with `mtu`
    /// (`ibv_mtu` code) and `max_dest_rd_atomic` incoming reads/atomics. The positional
    /// form; [`Qp::connect`] does RTR and RTS with named options.
    pub fn to_rtr(&self, remote: &Remote, port: u8, sgid_index: u8, mtu: u8, max_dest_rd_atomic: u8) -> Result<()> {
        self.modify(&QpAttr {
            state: Some(QpState::Rtr),
            ah: Some(Ah { dgid: remote.gid, sgid_index, hop_limit: 64, port, ..Default::default() }),
            path_mtu: Some(mtu),
            dest_qpn: Some(remote.qpn),
            rq_psn: Some(remote.psn),
            max_dest_rd_atomic: Some(max_dest_rd_atomic),
            min_rnr_timer: Some(12),
            ..Default::default()
        })
    }

    /// RTR -> RTS with our starting `psn`, the local ACK `timeout` (4.096 us * 2^t),
    /// `retry_cnt`, `rnr_retry` (7 = forever) and `max_rd_atomic` outstanding reads.
    /// The positional form; see [`Qp::connect`].
    pub fn to_rts(&self, psn: u32, timeout: u8, retry_cnt: u8, rnr_retry: u8, max_rd_atomic: u8) -> Result<()> {
        self.modify(&QpAttr {
            state: Some(QpState::Rts),
            sq_psn: Some(psn),
            timeout: Some(timeout),
            retry_cnt: Some(retry_cnt),
            rnr_retry: Some(rnr_retry),
            max_rd_atomic: Some(max_rd_atomic),
            ..Default::default()
        })
    }
}
