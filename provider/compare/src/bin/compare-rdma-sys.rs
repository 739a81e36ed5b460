//! libibverbs + libmlx5 through the `rdma-sys` crate (bindgen bindings; verbs.h's inline
//! `ibv_post_send`, `ibv_poll_cq` and `ibv_wr_*` as the crate's Rust copies), run on
//! softhca under libdoorbell_preload.so. See the crate docs for the variants. The calls
//! are the C program provider/benches/c/post_cost.c's, so this column tells what the
//! Rust binding itself adds (nothing is expected: the copies are `#[inline]` jumps
//! through the same function pointers).

use std::ptr::{null_mut, NonNull};
use std::time::Instant;

use bench_compare::{args, backoff, check_target, report_lat, settle, wait_byte, Variant, BUF, DATA, FILL, GID_INDEX, MARK, MARK_OFF, RADDR_OFF};
use rdma_sys::*;

/// Everything a run needs; raw pointers owned by libibverbs, freed at exit.
struct Res {
    qp: *mut ibv_qp,
    qpx: *mut ibv_qp_ex,
    cq: *mut ibv_cq,
    mr: *mut ibv_mr,
    buf: *mut u8,
}

/// One `ibv_post_send` of a request built once outside.
///
/// # Safety
/// `qp` is a live QP of this process, `wr` a valid request list whose buffers live.
#[no_mangle]
#[inline(never)]
pub unsafe fn cmp_post(qp: *mut ibv_qp, wr: *mut ibv_send_wr) -> i32 {
    let mut bad = null_mut();
    // SAFETY: the caller's contract.
    unsafe { ibv_post_send(qp, wr, &mut bad) }
}

/// One request through the `ibv_wr_*` API (the calls are the request).
///
/// # Safety
/// `qpx` is the extended view of a live QP created with RDMA_WRITE in its send_ops_flags;
/// a gather entry lies in a registered, live buffer.
#[no_mangle]
#[inline(never)]
pub unsafe fn cmp_wr(qpx: *mut ibv_qp_ex, raddr: u64, rkey: u32, sge: Option<(u32, u64)>) -> i32 {
    // SAFETY: the caller's contract; DATA is static.
    unsafe {
        ibv_wr_start(qpx);
        (*qpx).wr_id = 0x1234;
        (*qpx).wr_flags = 0;
        ibv_wr_rdma_write(qpx, rkey, raddr);
        match sge {
            Some((lkey, addr)) => ibv_wr_set_sge(qpx, lkey, addr, 8),
            None => ibv_wr_set_inline_data(qpx, DATA.as_ptr() as *mut _, DATA.len()),
        }
        ibv_wr_complete(qpx)
    }
}

/// One `ibv_poll_cq` for one completion.
///
/// # Safety
/// `cq` is a live CQ; `wc` points to one writable `ibv_wc`.
#[no_mangle]
#[inline(never)]
pub unsafe fn cmp_poll(cq: *mut ibv_cq, wc: *mut ibv_wc) -> i32 {
    // SAFETY: the caller's contract.
    unsafe { ibv_poll_cq(cq, 1, wc) }
}

fn check<T>(p: *mut T, what: &str) -> Result<*mut T, String> {
    NonNull::new(p).map(NonNull::as_ptr).ok_or_else(|| format!("{what} failed: {}", std::io::Error::last_os_error()))
}

fn rc(r: i32, what: &str) -> Result<(), String> {
    if r == 0 {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", std::io::Error::from_raw_os_error(r)))
    }
}

fn wc_zeroed() -> ibv_wc {
    // SAFETY: ibv_wc is plain C data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

fn wait_one(cq: *mut ibv_cq) -> Result<ibv_wc, String> {
    let mut wc = wc_zeroed();
    let mut spins = 0;
    loop {
        // SAFETY: as cmp_poll.
        match unsafe { ibv_poll_cq(cq, 1, &mut wc) } {
            0 => backoff(&mut spins),
            1 if wc.status == ibv_wc_status::IBV_WC_SUCCESS => return Ok(wc),
            1 => return Err(format!("completion status {}", wc.status)),
            e => return Err(format!("ibv_poll_cq: {e}")),
        }
    }
}

/// verbs.h's `ibv_create_qp_ex` for an extended request, open-coded: rdma-sys 0.3.0's
/// copy of `verbs_get_ctx` compares `ibv_context::abi_compat` with `u32::MAX`, where
/// rdma-core's marker `__VERBS_ABI_IS_EXTENDED` is `UINTPTR_MAX`, so on a 64-bit host
/// every `verbs_get_ctx_op` inline of the crate (`ibv_create_qp_ex` with more than the
/// PD in `comp_mask`, `ibv_create_cq_ex`, `ibv_query_device_ex`, ...) answers EOPNOTSUPP.
///
/// # Safety
/// `ctx` is an open device context, `ia` a filled request.
unsafe fn create_qp_ex(ctx: *mut ibv_context, ia: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    // SAFETY: (the caller's contract) ctx is live; a context whose abi_compat is the
    // extended marker is the `context` member of a `struct verbs_context` (verbs.h's
    // container_of), whose `sz` says how many of its leading ops exist.
    unsafe {
        if (*ctx).abi_compat as usize != usize::MAX {
            return null_mut();
        }
        let vc = ctx.cast::<u8>().sub(std::mem::offset_of!(verbs_context, context)).cast::<verbs_context>();
        if (*vc).sz < std::mem::size_of::<verbs_context>() - std::mem::offset_of!(verbs_context, create_qp_ex) {
            return null_mut();
        }
        match (*vc).create_qp_ex {
            Some(f) => f(ctx, ia),
            None => null_mut(),
        }
    }
}

/// Opens the first device, makes a PD, an MR over a fresh buffer, a CQ and an RC QP
/// connected to itself (post_cost.c's steps, same attributes).
fn setup(n: u32, ex: bool) -> Result<Res, String> {
    // SAFETY: plain libibverbs calls in their documented order; every pointer passed is
    // either returned by an earlier call and checked non-null, or a local that outlives the call.
    unsafe {
        let mut num = 0;
        let list = check(ibv_get_device_list(&mut num), "ibv_get_device_list")?;
        if num == 0 {
            return Err("no RDMA device".into());
        }
        let ctx = check(ibv_open_device(*list), "ibv_open_device")?;
        let pd = check(ibv_alloc_pd(ctx), "ibv_alloc_pd")?;
        let layout = std::alloc::Layout::from_size_align(BUF, 4096).unwrap();
        let buf = check(std::alloc::alloc(layout), "alloc")?;
        std::ptr::write_bytes(buf, FILL, BUF);
        std::ptr::copy_nonoverlapping(DATA.as_ptr(), buf, DATA.len());
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE;
        let mr = check(ibv_reg_mr(pd, buf.cast(), BUF, access.0 as _), "ibv_reg_mr")?;
        let cq = check(ibv_create_cq(ctx, (n + 16) as i32, null_mut(), null_mut(), 0), "ibv_create_cq")?;
        let cap = ibv_qp_cap { max_send_wr: n + 2, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 8 };
        let mut ia: ibv_qp_init_attr_ex = std::mem::zeroed();
        ia.send_cq = cq;
        ia.recv_cq = cq;
        ia.cap = cap;
        ia.qp_type = ibv_qp_type::IBV_QPT_RC;
        ia.pd = pd;
        ia.comp_mask = ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD.0;
        if ex {
            ia.comp_mask |= ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.0;
            ia.send_ops_flags = ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_RDMA_WRITE.0 as u64;
        }
        let qp = if ex { create_qp_ex(ctx, &mut ia) } else { ibv_create_qp(pd, (&mut ia as *mut ibv_qp_init_attr_ex).cast()) };
        let qp = check(qp, "create QP")?;
        let qpx = if ex { check(ibv_qp_to_qp_ex(qp), "ibv_qp_to_qp_ex")? } else { null_mut() };

        let mut gid: ibv_gid = std::mem::zeroed();
        rc(ibv_query_gid(ctx, 1, GID_INDEX as i32, &mut gid), "ibv_query_gid")?;
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;
        let m = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_PKEY_INDEX
            | ibv_qp_attr_mask::IBV_QP_PORT
            | ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS;
        rc(ibv_modify_qp(qp, &mut a, m.0 as i32), "modify to INIT")?;
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        a.path_mtu = ibv_mtu::IBV_MTU_1024;
        a.dest_qp_num = (*qp).qp_num;
        a.max_dest_rd_atomic = 1;
        a.min_rnr_timer = 12;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = gid;
        a.ah_attr.grh.sgid_index = GID_INDEX;
        a.ah_attr.grh.hop_limit = 1;
        a.ah_attr.port_num = 1;
        let m = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_AV
            | ibv_qp_attr_mask::IBV_QP_PATH_MTU
            | ibv_qp_attr_mask::IBV_QP_DEST_QPN
            | ibv_qp_attr_mask::IBV_QP_RQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
            | ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
        rc(ibv_modify_qp(qp, &mut a, m.0 as i32), "modify to RTR")?;
        let mut a: ibv_qp_attr = std::mem::zeroed();
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        a.timeout = 14;
        a.retry_cnt = 7;
        a.rnr_retry = 7;
        a.max_rd_atomic = 1;
        let m = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_TIMEOUT
            | ibv_qp_attr_mask::IBV_QP_RETRY_CNT
            | ibv_qp_attr_mask::IBV_QP_RNR_RETRY
            | ibv_qp_attr_mask::IBV_QP_SQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC;
        rc(ibv_modify_qp(qp, &mut a, m.0 as i32), "modify to RTS")?;
        Ok(Res { qp, qpx, cq, mr, buf })
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (v, n) = args("compare-rdma-sys", true)?;
    let r = setup(n, matches!(v, Variant::WrInline | Variant::WrSge))?;
    // SAFETY: r.mr is the live MR registered in setup.
    let (lkey, rkey) = unsafe { ((*r.mr).lkey, (*r.mr).rkey) };
    let raddr = r.buf as u64 + RADDR_OFF as u64;
    let mut sge = ibv_sge { addr: if v.inline() { DATA.as_ptr() as u64 } else { r.buf as u64 }, length: 8, lkey };
    // SAFETY: ibv_send_wr is plain C data; zero is its empty value.
    let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = 0x1234;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
    wr.send_flags = if v.inline() { ibv_send_flags::IBV_SEND_INLINE.0 } else { 0 };
    wr.wr.rdma = rdma_t { remote_addr: raddr, rkey };
    let signaled = ibv_send_flags::IBV_SEND_SIGNALED.0;
    match v {
        Variant::Inline | Variant::Sge => {
            for _ in 0..n {
                // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
                rc(unsafe { cmp_post(r.qp, &mut wr) }, "cmp_post")?;
            }
            wr.send_flags |= signaled;
            // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
            rc(unsafe { cmp_post(r.qp, &mut wr) }, "final ibv_post_send")?;
            wait_one(r.cq)?;
        }
        Variant::WrInline | Variant::WrSge => {
            let s = if v == Variant::WrSge { Some((lkey, r.buf as u64)) } else { None };
            for _ in 0..n {
                // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
                rc(unsafe { cmp_wr(r.qpx, raddr, rkey, s) }, "cmp_wr")?;
            }
            // The extended QP takes ibv_post_send too; one signaled WRITE retires the rest.
            wr.send_flags |= signaled;
            // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
            rc(unsafe { cmp_post(r.qp, &mut wr) }, "final ibv_post_send")?;
            wait_one(r.cq)?;
        }
        Variant::Poll => {
            wr.send_flags |= signaled;
            for i in 0..n {
                wr.wr_id = u64::from(i);
                // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
                rc(unsafe { cmp_post(r.qp, &mut wr) }, "ibv_post_send")?;
            }
            let mark = [MARK; 8];
            let mut msge = ibv_sge { addr: mark.as_ptr() as u64, length: 8, lkey };
            wr.wr_id = u64::from(n);
            wr.sg_list = &mut msge;
            wr.wr.rdma = rdma_t { remote_addr: r.buf as u64 + MARK_OFF as u64, rkey };
            // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
            rc(unsafe { cmp_post(r.qp, &mut wr) }, "last ibv_post_send")?;
            // SAFETY: the buffer is never freed.
            unsafe { wait_byte(r.buf.add(MARK_OFF), MARK) };
            settle();
            let mut wc = wc_zeroed();
            let mut misses = 0u32;
            for i in 0..n {
                let mut spins = 0;
                loop {
                    // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
                    match unsafe { cmp_poll(r.cq, &mut wc) } {
                        1 => break,
                        0 => {
                            misses += 1;
                            backoff(&mut spins);
                        }
                        e => return Err(format!("poll {i}: ibv_poll_cq {e}").into()),
                    }
                }
                if wc.status != ibv_wc_status::IBV_WC_SUCCESS || wc.wr_id != u64::from(i) {
                    return Err(format!("poll {i}: status {} wr_id {}", wc.status, wc.wr_id).into());
                }
            }
            wait_one(r.cq)?;
            println!("poll misses: {misses}");
        }
        Variant::Lat => {
            wr.send_flags |= signaled;
            let mut t = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let t0 = Instant::now();
                // SAFETY: r holds the live QP/CQ from setup; wr, its gather list and wc are locals alive across the call.
                rc(unsafe { cmp_post(r.qp, &mut wr) }, "ibv_post_send")?;
                wait_one(r.cq)?;
                t.push(t0.elapsed());
            }
            report_lat(t);
        }
    }
    // SAFETY: the buffer is never freed; every WRITE has completed.
    unsafe { check_target(r.buf) }?;
    println!("rdma-sys {v:?} x {n}: ok");
    Ok(())
}
