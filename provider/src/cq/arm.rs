//! Arming a CQ for one completion event (`ibv_req_notify_cq`): no kernel command, just
//! the arm word in the doorbell record and the arm doorbell in the UAR page.

use prm::dbrec;

use super::Cq;
use crate::uar_regs::UarRegs;
use crate::{barrier, doorbell};

impl Cq {
    /// Requests an event on the completion channel for the next CQE (or only the
    /// next solicited one).
    pub fn req_notify(&mut self, solicited_only: bool) {
        let word = dbrec::cq_arm_word(self.arm_sn, solicited_only, self.ci);
        // SAFETY: word 1 of the CQ's doorbell record is live while the CQ is.
        unsafe { doorbell::publish(self.inner.dbrec.word(dbrec::CQ_ARM_DB), word) };
        let db = dbrec::cq_arm_doorbell(word, self.inner.cqn);
        barrier::wc_start();
        // SAFETY: the CQ's UAR page is mapped while the CQ holds it; `cq_arm` is its
        // register at +0x20, written with one volatile store.
        unsafe { UarRegs::at(self.inner.uar.base()).cq_arm.write(db.to_be()) };
        barrier::wc_flush();
    }

    /// Records that an event for this CQ was consumed (`ibv_ack_cq_events` plus the
    /// mlx5 arm sequence bump): the next arm uses the next sequence number.
    pub fn ack_event(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }
}
