//! Events: CQ arming and completion events, and async events.
//!
//! # Seeing every arm
//!
//! Arming (`ibv_req_notify_cq` in libmlx5, no kernel command): the application writes the
//! arm word `sn << 28 | cmd << 24 | ci` to word 1 of the CQ doorbell record, then stores
//! `(arm word << 32 | cqn)` big-endian at offset 0x20 of a UAR page. On a ConnectX that
//! store is an MMIO write: the device receives every one, in order, whatever the number
//! of CQs that arm through the same register and of threads that store. softhca's UAR
//! page is memory, and the register holds only the last store: two CQs armed back to back
//! leave one value there, and a thread reading it later sees one arm (the other CQ never
//! fired: `ib_send_bw -e` hung). Reading the record word instead is per CQ, but a store
//! of the value already there (a fresh record is 0, and the first arm word, sn 0, "next
//! CQE", ci 0, is 0 too) changes nothing a reader can see.
//!
//! So the record word is a mailbox the device empties: at creation the device writes
//! [`ARM_TAKEN`] into it (a value no provider writes: bits 31:30 are reserved, and
//! all-ones reads the same in both byte orders), and each time it finds another value
//! there it takes it with an atomic swap back to [`ARM_TAKEN`] (`mem::take_u32`). Every
//! arm store after that is a change, seen exactly once: by the swap that follows it, or,
//! if the same CQ is armed again before the device looked, merged with the later arm
//! (which supersedes it, as it would on the device: the later command carries the newer
//! consumer index and sequence number). No arm is lost or taken twice, for any number of
//! CQs on a UAR page and any number of storing threads. The register store itself carries
//! nothing the record did not: every provider (libmlx5, UCX's and DPDK's mlx5 code,
//! doorbell's) writes the record first; the store is what wakes the engine (the doorbell
//! trap, [`super::trap`]) and its cqn only repeats which record changed. Trapping every
//! UAR store instead would make each doorbell a fault while the engine is busy too.
//!
//! libmlx5 and the others only ever write the arm word, never read it back, so the marker
//! is invisible to them. A record the device cannot write (mlx5_ib pins it without write
//! access, so a read-only page is legal) keeps the old sampling: a change of the record word or
//! a new register value naming the CQ arms it, and the first arm of such a CQ may be
//! missed; [`CqCtx::mailbox`] says which one a CQ uses.
//!
//! # The arm rules (what a ConnectX does)
//!
//! An armed CQ generates one event, then is disarmed until the next arm command:
//! - "next CQE" (`MLX5_CQ_DB_REQ_NOT`) fires for any CQE, "next solicited"
//!   (`MLX5_CQ_DB_REQ_NOT_SOL`) for a solicited or error CQE;
//! - a CQE already in the ring at arm time fires at once if it is at or after the
//!   consumer index the arm word carries and no event has covered it yet: an event
//!   covers every CQE written before it fired. Both halves are what software relies on:
//!   the kernel's `ib_req_notify_cq(IB_CQ_REPORT_MISSED_EVENTS)` on mlx5 looks only at
//!   its software list, so a CQE written between the last empty poll and the arm must
//!   fire from the device; and perftest's `-e` loops re-arm right after taking an event
//!   and before polling the CQE that caused it (consumer index still before it), then
//!   poll once: an event for that CQE again would make them poll an empty CQ and post
//!   past the queue depth ("Couldn't post send");
//! - the sequence number: software advances `sn` for each event it takes
//!   (`mlx5_cq_event`), so an arm command with the `sn` of the last event fired was
//!   issued before that event was seen (or repeats one that was): it is stale and
//!   ignored. (An arm repeated with the same word after the event once armed the CQ again
//!   and a second event followed: `data_path::sq_sig_all_and_completion_events`.)
//!
//! The event is one record with the CQ's user handle on its completion channel, counted
//! in `comp_events_reported` for DESTROY_CQ.

use std::sync::atomic::Ordering;

use crate::objects::{Cq, Qp, Srq};
use crate::pages::DevicePages;

use super::counters::Counters;
use super::cqe::{Arm, CqCtx};
use super::mem;

/// The arm doorbell's offset in a UAR page.
pub const ARM_REG: usize = prm::uar::CQ_ARM_OFFSET;

/// Delivers an async event for an SRQ (counted for DESTROY_SRQ).
pub fn srq_event(srq: &Srq, event_type: u32) {
    if let Some(f) = &srq.event_file {
        srq.events_reported.fetch_add(1, Ordering::SeqCst);
        if !f.post(srq.user_handle, event_type) {
            srq.events_reported.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

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

/// The arm word's value while no arm command waits in it: all ones, which no provider
/// writes (bits 31:30 of the arm word are reserved) and which reads the same in either
/// byte order.
pub const ARM_TAKEN: u32 = u32::MAX;

/// `ci` and `covered` (both 24-bit indexes): the later one.
fn later(ci: u32, covered: u32) -> u32 {
    if after(covered, ci) { covered } else { ci }
}

/// The next arm command of `cq`, if one arrived since the last call.
fn next_arm(cq: &mut CqCtx, pages: &DevicePages) -> Option<u32> {
    let addr = cq.cq.db_addr + 4 * prm::dbrec::CQ_ARM_DB as u64;
    if cq.mailbox {
        // SAFETY: the CQ doorbell record was checked mapped at CREATE_CQ and found
        // writable when the marker went in (`CqCtx::new`); it stays until the destroy hook,
        // which waits for the engine lock our caller holds.
        return unsafe { mem::take_u32(addr, ARM_TAKEN) };
    }
    // Sampling, for a record the device cannot write (see the module docs).
    // SAFETY: as above, read only.
    let word = unsafe { mem::load_be32_acquire(addr) };
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
    arm
}

/// Applies one arm command. Returns whether it armed the CQ.
fn arm(cq: &mut CqCtx, word: u32, counters: &Counters) -> bool {
    let d = prm::dbrec::CqArm::decode(word);
    counters.cq_arms.fetch_add(1, Ordering::Relaxed);
    if cq.fired_sn == Some(d.sn) {
        counters.cq_arms_stale.fetch_add(1, Ordering::Relaxed);
        tracing::trace!(target: "softhca::events", cqn = cq.cq.cqn, sn = d.sn, ci = d.ci, "stale arm (its event was delivered): ignored");
        return false;
    }
    tracing::trace!(target: "softhca::events", cqn = cq.cq.cqn, sn = d.sn, ci = d.ci, solicited = d.solicited_only, "cq armed");
    cq.armed = Some(Arm { sn: d.sn, ci: d.ci, solicited_only: d.solicited_only });
    true
}

/// Looks for new arm commands and fires an armed CQ whose condition holds. Returns
/// whether anything happened.
pub fn check(cq: &mut CqCtx, pages: &DevicePages, counters: &Counters) -> bool {
    let mut work = false;
    if let Some(w) = next_arm(cq, pages) {
        work = true;
        arm(cq, w, counters);
    }
    if let Some(a) = cq.armed {
        // The first CQE that may fire: at or after the armed consumer index, and not
        // covered by an earlier event.
        let from = later(a.ci, cq.covered);
        let fire = if a.solicited_only {
            cq.last_solicited.is_some_and(|s| after(s, from))
        } else {
            after(cq.pi, from)
        };
        if fire {
            cq.armed = None;
            cq.fired_sn = Some(a.sn);
            cq.covered = cq.pi;
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
            tracing::trace!(target: "softhca::events", cqn = cq.cq.cqn, sn = a.sn, pi = cq.pi, "completion event");
        }
    }
    work
}

#[cfg(test)]
mod tests {
    use super::{after, later};

    #[test]
    fn later_index() {
        assert_eq!(later(3, 5), 5);
        assert_eq!(later(5, 3), 5);
        assert_eq!(later(0xff_fffe, 1), 1);
        assert_eq!(later(2, 2), 2);
    }

    #[test]
    fn index_order() {
        assert!(after(1, 0));
        assert!(!after(0, 0));
        assert!(!after(0, 1));
        assert!(after(0, 0xff_ffff));
        assert!(after(5, 0xff_fffe));
    }
}
