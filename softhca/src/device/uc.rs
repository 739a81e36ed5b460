//! Unreliable Connected: the responder's rules for UC packets (the requester sends UC
//! SEND and RDMA WRITE through the RC path with UC opcodes, never sets AckReq, and
//! completes each WQE once its last packet has left: `super::requester`).
//!
//! IBTA's UC responder (chapter 9.7.x, "UC responder"): no acknowledgement of any kind
//! and no retransmission, so nothing is a duplicate. A packet at the expected PSN is
//! executed as the RC one would be ([`Opcode::rc_equivalent`]), except that what would
//! make an RC responder NAK (a bad rkey or length, no receive WQE, a continuation of no
//! message) drops the message instead, silently, and the QP stays where it is. A packet
//! at any other PSN means packets were lost: the message in progress is dropped (a SEND's
//! receive WQE is not consumed and serves the next message; bytes of a WRITE already
//! placed stay), and the responder resynchronizes on the next packet that starts a
//! message (first or only), whatever its PSN; packets of a dropped message until then
//! are discarded. A receive WQE that fails locally (the SEND is longer than its buffers,
//! a bad lkey) completes in error and the QP goes to ERR, as for RC.
//!
//! Counted in `uc_dropped`.

use std::sync::atomic::Ordering::Relaxed;

use crate::wire::RocePacket;

use super::psn;
use super::qp::{Env, QpCtx};

impl QpCtx {
    /// A UC request packet (the caller checked the QP's state).
    pub(super) fn on_uc_request(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>) {
        let p = pkt.bth.psn;
        let mut rc = *pkt;
        rc.bth.opcode = pkt.bth.opcode.rc_equivalent();
        let op = rc.bth.opcode;
        if p != self.resp.epsn || (op.starts_message() && self.resp.cur.is_some()) {
            if self.resp.cur.take().is_some() {
                env.counters.uc_dropped.fetch_add(1, Relaxed);
                tracing::debug!(target: "softhca::responder", qpn = self.qp.qpn, psn = p, expected = self.resp.epsn,
                                "UC: message in progress dropped");
            }
            if !op.starts_message() {
                // Inside a message whose start we did not take: discard it, and follow
                // its PSNs so that its remaining packets are discarded the same way.
                env.counters.uc_dropped.fetch_add(1, Relaxed);
                self.resp.epsn = psn::add(p, 1);
                return;
            }
            self.resp.epsn = p;
        }
        use crate::wire::Opcode::*;
        match op {
            RcSendFirst | RcSendMiddle | RcSendLast | RcSendLastWithImm | RcSendOnly | RcSendOnlyWithImm => self.recv_send(&rc, env),
            RcRdmaWriteFirst | RcRdmaWriteMiddle | RcRdmaWriteLast | RcRdmaWriteLastWithImm | RcRdmaWriteOnly
            | RcRdmaWriteOnlyWithImm => self.recv_write(&rc, env),
            _ => self.uc_drop(env, "not a UC request"),
        }
    }

    /// Drops the UC message the packet at the expected PSN belongs to (what RC would
    /// NAK): nothing is sent, the QP stays, the packet's PSN is consumed.
    pub(super) fn uc_drop(&mut self, env: &mut Env<'_>, why: &str) {
        env.counters.uc_dropped.fetch_add(1, Relaxed);
        tracing::debug!(target: "softhca::responder", qpn = self.qp.qpn, psn = self.resp.epsn, why, "UC: message dropped");
        self.resp.cur = None;
        self.resp.epsn = psn::add(self.resp.epsn, 1);
    }
}
