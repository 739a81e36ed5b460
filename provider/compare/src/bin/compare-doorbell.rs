//! doorbell's provider on the embedded softhca: the reference column of
//! provider/benches/compare.sh. See the crate docs for the variants.

use std::time::{Duration, Instant};

use bench_compare::{args, backoff, check_target, report_lat, settle, wait_byte, Variant, BUF, DATA, FILL, MARK, MARK_OFF, RADDR_OFF};
use provider::cqe::WcStatus;
use provider::{Access, ConnectOptions, Context, Cq, Payload, Qp, QpCap, QpInit, QpType, Remote, SendOp, SendWr, Wc};

/// One post as an application makes it (the request built once, outside).
#[no_mangle]
#[inline(never)]
pub fn cmp_post(qp: &mut Qp, wr: &SendWr<'_>) -> provider::Result<()> {
    qp.post_send(0x1234, wr)
}

/// One poll for one completion.
#[no_mangle]
#[inline(never)]
pub fn cmp_poll(cq: &mut Cq, wc: &mut [Wc; 1]) -> usize {
    cq.poll(wc)
}

fn wait_one(cq: &mut Cq) -> Result<Wc, String> {
    let mut wc = [Wc::default(); 1];
    if cq.poll_wait(&mut wc, Duration::from_secs(600)) != 1 {
        return Err("no completion in 600 s".into());
    }
    if wc[0].status != WcStatus::Success {
        return Err(format!("completion {:?}", wc[0]));
    }
    Ok(wc[0])
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (v, n) = args("compare-doorbell", false)?;
    let ctx = Context::open(None)?;
    let pd = ctx.alloc_pd()?;
    let mut mr = pd.alloc_mr(BUF, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    mr.fill(FILL);
    mr[..8].copy_from_slice(&DATA);
    let base = mr.addr();
    let mut cq = ctx.create_cq(n + 16, None)?;
    let cap = QpCap { max_send_wr: n + 2, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 8 };
    let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None })?;
    let gid = ctx.default_gid(1)?;
    qp.to_init(1, Access::REMOTE_WRITE)?;
    qp.connect(&Remote { qpn: qp.qpn(), psn: 0, gid: gid.raw() }, &ConnectOptions::default())?;

    let op = SendOp::RdmaWrite { raddr: base + RADDR_OFF as u64, rkey: mr.rkey() };
    let chunks: [&[u8]; 1] = [&DATA];
    let sge = [mr.sge(..8)];
    let payload = if v.inline() { Payload::Inline(&chunks) } else { Payload::Sgl(&sge) };
    let wr = SendWr::new(op, payload);
    match v {
        Variant::Inline | Variant::Sge => {
            for _ in 0..n {
                cmp_post(&mut qp, &wr)?;
            }
            // One signaled WRITE retires the unsignaled ones before it.
            qp.post_send(1, &wr.signaled())?;
            wait_one(&mut cq)?;
        }
        Variant::Poll => {
            let signaled = wr.signaled();
            for i in 0..n {
                qp.post_send(u64::from(i), &signaled)?;
            }
            let mark = [MARK; 8];
            let mark_chunks: [&[u8]; 1] = [&mark];
            let last = SendWr::new(SendOp::RdmaWrite { raddr: base + MARK_OFF as u64, rkey: mr.rkey() }, Payload::Inline(&mark_chunks));
            qp.post_send(u64::from(n), &last.signaled())?;
            // SAFETY: the MR lives until the end of main.
            unsafe { wait_byte(mr.ptr().add(MARK_OFF), MARK) };
            settle();
            let mut wc = [Wc::default(); 1];
            let mut misses = 0u32;
            for i in 0..n {
                let mut spins = 0;
                while cmp_poll(&mut cq, &mut wc) != 1 {
                    misses += 1;
                    backoff(&mut spins);
                }
                if wc[0].status != WcStatus::Success || wc[0].wr_id != u64::from(i) {
                    return Err(format!("poll {i}: {:?}", wc[0]).into());
                }
            }
            wait_one(&mut cq)?;
            println!("poll misses: {misses}");
        }
        Variant::Lat => {
            let signaled = wr.signaled();
            let mut t = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let t0 = Instant::now();
                qp.post_send(1, &signaled)?;
                wait_one(&mut cq)?;
                t.push(t0.elapsed());
            }
            report_lat(t);
        }
        Variant::WrInline | Variant::WrSge => unreachable!("refused by args"),
    }
    // SAFETY: the MR lives until the end of main; every WRITE has completed.
    unsafe { check_target(mr.ptr()) }?;
    println!("doorbell {v:?} x {n}: ok");
    Ok(())
}
