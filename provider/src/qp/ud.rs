//! UD QPs: their state changes (no path, no remote QP: an INIT with the Q_Key, RTR and
//! RTS with a send PSN, as ibv_ud_pingpong makes them) and what a UD receive looks
//! like: the first 40 bytes of the receive buffer get the packet's GRH (on RoCE v2 over
//! IPv4, the IPv4 header in its last 20 bytes), the payload follows, and the CQE's
//! byte count includes the 40.

use super::{Qp, QpAttr, QpState, QpType};
use crate::error::{invalid, Result};

/// Bytes at the start of every UD receive buffer that hold the GRH.
pub const GRH_BYTES: usize = 40;

impl Qp {
    /// RESET -> INIT -> RTR -> RTS for a UD QP on `port` with `qkey` and send PSN `psn`.
    pub fn ud_to_rts(&self, port: u8, qkey: u32, psn: u32) -> Result<()> {
        if self.qp_type != QpType::Ud {
            return invalid("modify_qp", format!("ud_to_rts on a {:?} QP", self.qp_type));
        }
        self.modify(&QpAttr { state: Some(QpState::Init), pkey_index: Some(0), port: Some(port), qkey: Some(qkey), ..Default::default() })?;
        self.modify(&QpAttr { state: Some(QpState::Rtr), ..Default::default() })?;
        self.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(psn), ..Default::default() })
    }
}
