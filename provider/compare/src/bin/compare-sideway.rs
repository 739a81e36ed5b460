//! libibverbs + libmlx5 through the `sideway` crate (its own static shim,
//! rdma-core-mummy, resolves libibverbs at run time), on softhca under
//! libdoorbell_preload.so. See the crate docs for the variants.
//!
//! The measured calls are sideway's API as its examples use it: a post builds the
//! request inside the guard (`start_post_send`, `construct_wr`, `setup_write`,
//! `setup_inline_data`/`setup_sge`, `post`); `BasicQueuePair`'s guard collects the
//! request in `Vec`s and calls `ibv_post_send`, `ExtendedQueuePair`'s calls the
//! `ibv_wr_*` functions. A poll is `BasicCompletionQueue::start_poll` (one
//! `ibv_poll_cq` into a fresh `Vec` of poll-batch entries, here 1) and the poller's first
//! `next`.

use std::sync::Arc;
use std::time::Instant;

use bench_compare::{args, backoff, check_target, report_lat, settle, wait_byte, Variant, BUF, DATA, FILL, GID_INDEX, MARK, MARK_OFF, RADDR_OFF};
use sideway::ibverbs::address::AddressHandleAttribute;
use sideway::ibverbs::completion::{BasicCompletionQueue, GenericCompletionQueue, WorkCompletionStatus};
use sideway::ibverbs::device::DeviceList;
use sideway::ibverbs::queue_pair::{
    BasicQueuePair, ExtendedQueuePair, PostSendGuard, QueuePair, QueuePairAttribute, QueuePairState, SendOperationFlags, SetInlineData, SetScatterGatherEntry,
    WorkRequestFlags,
};
use sideway::ibverbs::AccessFlags;

/// One request posted through sideway's API on `qp`, unsignaled unless `flags` says so.
#[inline(always)]
fn post_one<Q: QueuePair>(qp: &mut Q, wr_id: u64, flags: WorkRequestFlags, raddr: u64, rkey: u32, sge: Option<(u32, u64)>, data: &[u8]) -> bool {
    let mut guard = qp.start_post_send();
    let h = guard.construct_wr(wr_id, flags).setup_write(rkey, raddr);
    match sge {
        // SAFETY: the gather entry lies in the registered buffer, which main keeps alive.
        Some((lkey, addr)) => unsafe { h.setup_sge(lkey, addr, 8) },
        None => h.setup_inline_data(data),
    }
    guard.post().is_ok()
}

/// [`post_one`] on a `BasicQueuePair` (its guard calls `ibv_post_send`).
#[no_mangle]
#[inline(never)]
pub fn cmp_post(qp: &mut BasicQueuePair, wr_id: u64, flags: WorkRequestFlags, raddr: u64, rkey: u32, sge: Option<(u32, u64)>, data: &[u8]) -> bool {
    post_one(qp, wr_id, flags, raddr, rkey, sge, data)
}

/// [`post_one`] on an `ExtendedQueuePair` (its guard calls `ibv_wr_start` .. `ibv_wr_complete`).
#[no_mangle]
#[inline(never)]
pub fn cmp_wr(qp: &mut ExtendedQueuePair, wr_id: u64, flags: WorkRequestFlags, raddr: u64, rkey: u32, sge: Option<(u32, u64)>, data: &[u8]) -> bool {
    post_one(qp, wr_id, flags, raddr, rkey, sge, data)
}

/// One poll for one completion: (wr_id, status) or None when the CQ is empty.
#[no_mangle]
#[inline(never)]
pub fn cmp_poll(cq: &BasicCompletionQueue) -> Option<(u64, u32)> {
    poll1(cq)
}

/// The body of [`cmp_poll`], for the waits outside the measurement (which must not count).
#[inline(always)]
fn poll1(cq: &BasicCompletionQueue) -> Option<(u64, u32)> {
    let mut p = cq.start_poll().ok()?;
    p.next().map(|wc| (wc.wr_id(), wc.status()))
}

fn wait_one(cq: &BasicCompletionQueue) -> Result<(), String> {
    let mut spins = 0;
    loop {
        match poll1(cq) {
            None => backoff(&mut spins),
            Some((_, s)) if s == WorkCompletionStatus::Success as u32 => return Ok(()),
            Some((id, s)) => return Err(format!("completion wr_id {id} status {s}")),
        }
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (v, n) = args("compare-sideway", true)?;
    let ex = matches!(v, Variant::WrInline | Variant::WrSge);
    let list = DeviceList::new()?;
    let dev = list.iter().next().ok_or("no RDMA device")?;
    let ctx = dev.open()?;
    let pd = ctx.alloc_pd()?;
    let mut buf = vec![FILL; BUF];
    buf[..8].copy_from_slice(&DATA);
    let base = buf.as_mut_ptr();
    // SAFETY: buf outlives the MR (both live until the end of main) and is not moved.
    let mr = unsafe { pd.reg_mr(base as usize, BUF, AccessFlags::LocalWrite | AccessFlags::RemoteWrite)? };
    let mut cq: Arc<BasicCompletionQueue> = ctx.create_cq_builder().setup_cqe(n + 16).build()?;
    // One ibv_poll_cq for one CQE (sideway's default batch is 32 entries, and a dropped
    // poller loses those it has not handed out).
    Arc::get_mut(&mut cq).ok_or("CQ shared")?.setup_poll_batch(std::num::NonZeroU32::MIN);
    let mut b = pd.create_qp_builder();
    b.setup_max_send_wr(n + 2)
        .setup_max_recv_wr(1)
        .setup_max_send_sge(1)
        .setup_max_recv_sge(1)
        .setup_max_inline_data(8)
        .setup_send_cq(GenericCompletionQueue::from(Arc::clone(&cq)))
        .setup_recv_cq(GenericCompletionQueue::from(Arc::clone(&cq)));
    let gid = ctx.query_gid(1, GID_INDEX.into())?;
    let connect = |qp: &mut dyn FnMut(&QueuePairAttribute) -> Result<(), String>, qpn: u32| -> Result<(), String> {
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::Init).setup_pkey_index(0).setup_port(1).setup_access_flags(AccessFlags::RemoteWrite);
        qp(&a)?;
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::ReadyToReceive)
            .setup_path_mtu(sideway::ibverbs::device_context::Mtu::Mtu1024)
            .setup_dest_qp_num(qpn)
            .setup_rq_psn(0)
            .setup_max_dest_read_atomic(1)
            .setup_min_rnr_timer(12);
        let mut ah = AddressHandleAttribute::new();
        ah.setup_port(1).setup_grh_src_gid_index(GID_INDEX).setup_grh_dest_gid(&gid).setup_grh_hop_limit(1);
        a.setup_address_vector(&ah);
        qp(&a)?;
        let mut a = QueuePairAttribute::new();
        a.setup_state(QueuePairState::ReadyToSend).setup_sq_psn(0).setup_timeout(14).setup_retry_cnt(7).setup_rnr_retry(7).setup_max_read_atomic(1);
        qp(&a)
    };
    let raddr = base as u64 + RADDR_OFF as u64;
    let rkey = mr.rkey();
    let sge = if v.inline() { None } else { Some((mr.lkey(), base as u64)) };
    let none = WorkRequestFlags::none();
    let sig = WorkRequestFlags::Signaled;
    if ex {
        b.setup_send_ops_flags(SendOperationFlags::Write);
        let mut qp = b.build_ex()?;
        let qpn = qp.qp_number();
        connect(&mut |a| qp.modify(a).map_err(|e| e.to_string()), qpn)?;
        for _ in 0..n {
            if !cmp_wr(&mut qp, 0x1234, none, raddr, rkey, sge, &DATA) {
                return Err("cmp_post failed".into());
            }
        }
        if !cmp_wr(&mut qp, 1, sig, raddr, rkey, sge, &DATA) {
            return Err("final post failed".into());
        }
        wait_one(&cq)?;
    } else {
        let mut qp = b.build()?;
        let qpn = qp.qp_number();
        connect(&mut |a| qp.modify(a).map_err(|e| e.to_string()), qpn)?;
        match v {
            Variant::Inline | Variant::Sge => {
                for _ in 0..n {
                    if !cmp_post(&mut qp, 0x1234, none, raddr, rkey, sge, &DATA) {
                        return Err("cmp_post failed".into());
                    }
                }
                if !cmp_post(&mut qp, 1, sig, raddr, rkey, sge, &DATA) {
                    return Err("final post failed".into());
                }
                wait_one(&cq)?;
            }
            Variant::Poll => {
                for i in 0..n {
                    if !cmp_post(&mut qp, u64::from(i), sig, raddr, rkey, None, &DATA) {
                        return Err("post failed".into());
                    }
                }
                if !cmp_post(&mut qp, u64::from(n), sig, base as u64 + MARK_OFF as u64, rkey, None, &[MARK; 8]) {
                    return Err("last post failed".into());
                }
                // SAFETY: buf lives until the end of main.
                unsafe { wait_byte(base.add(MARK_OFF), MARK) };
                settle();
                let mut misses = 0u32;
                for i in 0..n {
                    let mut spins = 0;
                    let wc = loop {
                        match cmp_poll(&cq) {
                            Some(wc) => break wc,
                            None => {
                                misses += 1;
                                backoff(&mut spins);
                            }
                        }
                    };
                    match wc {
                        (id, s) if id == u64::from(i) && s == WorkCompletionStatus::Success as u32 => {}
                        (id, s) => return Err(format!("poll {i}: wr_id {id} status {s}").into()),
                    }
                }
                wait_one(&cq)?;
                println!("poll misses: {misses}");
            }
            Variant::Lat => {
                let mut t = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    let t0 = Instant::now();
                    if !cmp_post(&mut qp, 1, sig, raddr, rkey, None, &DATA) {
                        return Err("post failed".into());
                    }
                    wait_one(&cq)?;
                    t.push(t0.elapsed());
                }
                report_lat(t);
            }
            Variant::WrInline | Variant::WrSge => unreachable!(),
        }
    }
    // SAFETY: buf lives until the end of main; every WRITE has completed.
    unsafe { check_target(base) }?;
    drop(mr);
    drop(buf);
    println!("sideway {v:?} x {n}: ok");
    Ok(())
}
