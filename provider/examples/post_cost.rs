//! The doorbell half of the post-cost comparison in `provider/benches/side-by-side.sh`:
//! posts `N` RDMA WRITEs through `Qp::post_send` (WQE, doorbell record, BlueFlame copy)
//! on the embedded softhca, each from the function `doorbell_post_write`, which the
//! script measures with `valgrind --tool=callgrind --toggle-collect=doorbell_post_write`.
//!
//! ```text
//! post_cost inline|sge N
//! ```
//! `inline`: 8 bytes inline; `sge`: one 8-byte gather entry. The QP is connected to
//! itself and its send queue holds all `N` WQEs, so the measured calls never wait for
//! completions (the writes are unsignaled; one signaled WRITE at the end is waited for,
//! outside the measurement, to check they all executed). The C program
//! `provider/benches/c/post_cost.c` does the same with libmlx5.

use std::time::Duration;

use provider::{Access, ConnectOptions, Context, Payload, Qp, QpCap, QpInit, QpType, Remote, SendOp, SendWr, Wc};

/// The measured function: one RDMA WRITE, as an application posts it. Not inlined and
/// not mangled, so callgrind can find it by name.
#[no_mangle]
#[inline(never)]
pub fn doorbell_post_write(qp: &mut Qp, wr: &SendWr<'_>) -> provider::Result<()> {
    qp.post_send(0x1234, wr)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: post_cost inline|sge N";
    let inline = match args.get(1).map(String::as_str) {
        Some("inline") => true,
        Some("sge") => false,
        _ => return Err(usage.into()),
    };
    let n: u32 = args.get(2).and_then(|s| s.parse().ok()).ok_or(usage)?;

    let ctx = Context::open(None)?;
    let pd = ctx.alloc_pd()?;
    let mut mr = pd.alloc_mr(8192, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    mr.fill(7);
    let base = mr.addr();
    let mut cq = ctx.create_cq(16, None)?;
    let cap = QpCap { max_send_wr: n + 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 8 };
    let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None })?;
    let gid = ctx.default_gid(1)?;
    qp.to_init(1, Access::REMOTE_WRITE)?;
    qp.connect(&Remote { qpn: qp.qpn(), psn: 0, gid: gid.raw() }, &ConnectOptions::default())?;

    let op = SendOp::RdmaWrite { raddr: base + 4096, rkey: mr.rkey() };
    let data = [0x5au8; 8];
    let chunks: [&[u8]; 1] = [&data];
    let sge = [mr.sge(..8)];
    let payload = if inline { Payload::Inline(&chunks) } else { Payload::Sgl(&sge) };
    let wr = SendWr::new(op, payload);
    for _ in 0..n {
        doorbell_post_write(&mut qp, &wr)?;
    }
    // One signaled WRITE retires the unsignaled ones before it.
    qp.post_send(1, &wr.signaled())?;
    let mut wc = [Wc::default(); 1];
    if cq.poll_wait(&mut wc, Duration::from_secs(600)) != 1 || wc[0].status != provider::cqe::WcStatus::Success {
        return Err(format!("final completion: {:?}", wc[0]).into());
    }
    println!("doorbell post_cost {} x {n}: ok", if inline { "inline" } else { "sge" });
    Ok(())
}
