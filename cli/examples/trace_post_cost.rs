//! The post-path half of `trace/benches/trace-cost.sh`: provider/examples/post_cost.rs's
//! measured RDMA WRITE post (`doorbell_post_write`, counted by callgrind), but in a
//! process set up as the `doorbell` binary sets itself up: the same subscriber (RUST_LOG's
//! fmt layer, plus the recording layer when `DOORBELL_TRACE_DIR` is set), so the count
//! is what a post costs in doorbell with tracing off, on, or (built with the
//! `no-trace-points` feature) with the trace points compiled out.
//!
//! ```text
//! trace_post_cost N
//! ```
//! N unsignaled 8-byte inline RDMA WRITEs on a QP connected to itself, whose send queue
//! holds them all; one signaled WRITE at the end is waited for, outside the measurement.

use std::time::Duration;

use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, Context, Qp, QpInit, QpType, Wc};

/// The measured function. Not inlined and not mangled, so callgrind finds it by name.
#[no_mangle]
#[inline(never)]
pub fn doorbell_post_write(qp: &mut Qp, wr: &SendWr<'_>) -> provider::Result<()> {
    qp.post_send(0x1234, wr)
}

/// cli/src/main.rs's `init_tracing`, unchanged.
fn init_tracing() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    match doorbell_trace::layer_from_env() {
        None => tracing_subscriber::fmt().with_env_filter(EnvFilter::from_default_env()).with_writer(std::io::stderr).init(),
        Some(rec) => tracing_subscriber::registry()
            .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr).with_filter(EnvFilter::from_default_env()))
            .with(rec.with_filter(doorbell_trace::record::targets()))
            .init(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    init_tracing();
    let n: u32 = std::env::args().nth(1).and_then(|s| s.parse().ok()).ok_or("usage: trace_post_cost N")?;
    let ctx = Context::open(None)?;
    let pd = ctx.alloc_pd()?;
    let buf: &'static mut [u8] = Box::leak(vec![7u8; 8192].into_boxed_slice());
    let base = buf.as_ptr() as u64;
    let mr = pd.reg_mr(buf, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let mut cq = ctx.create_cq(16, None)?;
    let cap = QpCap { max_send_wr: n + 1, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 8 };
    let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None })?;
    let gid = ctx.default_gid(1)?;
    qp.to_init(1, Access::REMOTE_WRITE)?;
    qp.to_rtr(&Remote { qpn: qp.qpn(), psn: 0, gid: gid.raw() }, 1, gid.gid_index as u8, 3, 1)?;
    qp.to_rts(0, 14, 7, 7, 1)?;
    let data = [0x5au8; 8];
    let chunks: [&[u8]; 1] = [&data];
    let wr = SendWr::new(SendOp::RdmaWrite { raddr: base + 4096, rkey: mr.rkey() }, Payload::Inline(&chunks));
    for _ in 0..n {
        doorbell_post_write(&mut qp, &wr)?;
    }
    qp.post_send(1, &wr.signaled())?;
    let mut wc = [Wc::default(); 1];
    if cq.poll_wait(&mut wc, Duration::from_secs(600)) != 1 || wc[0].status != provider::cqe::WcStatus::Success {
        return Err(format!("final completion: {:?}", wc[0]).into());
    }
    println!("trace_post_cost x {n}: ok");
    Ok(())
}
