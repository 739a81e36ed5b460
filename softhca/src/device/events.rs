//! Events: CQ arming and completion events, and async events.
//!
//! Arming (`ibv_req_notify_cq` in libmlx5, no kernel command): the application writes the
//! arm word `sn << 28 | solicited << 24 | ci` to word 1 of the CQ doorbell record, then
//! stores `(arm word << 32 | cqn)` big-endian at offset 0x20 of its UAR page. The engine
//! notices either change (a record word that differs from the last one seen, or a new
//! value at the register naming this CQ), and acts on each arm command once: the engine
//! often sees the record's new word before the register store lands, and the register
//! then repeats the same command. libmlx5 advances the sequence number `sn` only when it
//! takes an event (`ibv_get_cq_event`), so a command equal to the last one acted on asks
//! for nothing new and is ignored. (Acting on it twice armed the CQ again right after it
//! fired, and a second event followed: `data_path::sq_sig_all_and_completion_events`
//! caught it on a faster machine.) An armed CQ delivers exactly one event, as soon
//! as a CQE exists at an index at or after the armed consumer index (for solicited-only
//! arming: a solicited or error CQE): one record with the CQ's user handle on its
//! completion channel, counted in `comp_events_reported` for DESTROY_CQ.

use std::sync::atomic::Ordering;

use crate::objects::{Cq, Qp};
use crate::pages::DevicePages;

use super::counters::Counters;
use super::cqe::{Arm, CqCtx};
use super::mem;

/// The arm doorbell's offset in a UAR page.
pub const ARM_REG: usize = prm::uar::CQ_ARM_OFFSET;

/// Delivers an async event for a QP (counted for DESTROY_QP).
pub fn qp_event(qp: &Qp, event_type: u32) {
    if let Some(f) = &qp.event_file {
        // Counted before it can be read, so a reader never sees more events than reported.
        qp.events_reported.fetch_add(1, Ordering::SeqCst);
        if !f.post(qp.user_handle, event_type) {
            qp.events_reported.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Delivers an async event for a CQ (counted for DESTROY_CQ).
pub fn cq_event(cq: &Cq, event_type: u32) {
    if let Some(f) = &cq.event_file {
        cq.async_events_reported.fetch_add(1, Ordering::SeqCst);
        if !f.post(cq.user_handle, event_type) {
            cq.async_events_reported.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Whether 24-bit index `a` is strictly after `b` (within half the index space).
fn after(a: u32, b: u32) -> bool {
    let d = a.wrapping_sub(b) & 0xff_ffff;
    d != 0 && d < 0x80_0000
}

/// Looks for a new arm doorbell and fires an armed CQ whose condition holds. Returns
/// whether anything happened.
pub fn check(cq: &mut CqCtx, pages: &DevicePages, counters: &Counters) -> bool {
    let mut work = false;
    // SAFETY: the CQ doorbell record was checked mapped at CREATE_CQ and stays until the
    // destroy hook, which waits for the engine lock our caller holds.
    let word = unsafe { mem::load_be32_acquire(cq.cq.db_addr + 4 * prm::dbrec::CQ_ARM_DB as u64) };
    let mut arm = None;
    if word != cq.arm_word {
        cq.arm_word = word;
        arm = Some(word);
    }
    let reg = pages.read_u64(cq.cq.uar_page, ARM_REG);
    if reg != cq.arm_reg {
        cq.arm_reg = reg;
        let v = u64::from_be(reg);
        if v as u32 & prm::dbrec::CQ_CI_MASK == cq.cq.cqn {
            arm = Some((v >> 32) as u32);
        }
    }
    if let Some(w) = arm.filter(|&w| cq.accepted_arm != Some(w)) {
        cq.accepted_arm = Some(w);
        let d = prm::dbrec::CqArm::decode(w);
        let a = Arm { ci: d.ci, solicited_only: d.solicited_only };
        tracing::trace!(target: "softhca::events", cqn = cq.cq.cqn, sn = d.sn, ci = a.ci, solicited = a.solicited_only, "cq armed");
        cq.armed = Some(a);
        work = true;
    }
    if let Some(a) = cq.armed {
        let fire = if a.solicited_only {
            cq.last_solicited.is_some_and(|s| after(s, a.ci))
        } else {
            after(cq.pi, a.ci)
        };
        if fire {
            cq.armed = None;
            work = true;
            if let Some(ch) = &cq.cq.comp_channel {
                // Counted before the record can be read (DESTROY_CQ reports the count and
                // libibverbs waits until the application acknowledged that many).
                cq.cq.comp_events_reported.fetch_add(1, Ordering::SeqCst);
                counters.comp_events.fetch_add(1, Ordering::Relaxed);
                if !ch.notify(cq.cq.user_handle) {
                    cq.cq.comp_events_reported.fetch_sub(1, Ordering::SeqCst);
                    counters.comp_events.fetch_sub(1, Ordering::Relaxed);
                }
            }
            tracing::trace!(target: "softhca::events", cqn = cq.cq.cqn, pi = cq.pi, "completion event");
        }
    }
    work
}

#[cfg(test)]
mod tests {
    use super::after;

    #[test]
    fn index_order() {
        assert!(after(1, 0));
        assert!(!after(0, 0));
        assert!(!after(0, 1));
        assert!(after(0, 0xff_ffff));
        assert!(after(5, 0xff_fffe));
    }
}
