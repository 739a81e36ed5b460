//! `doorbell bench idle`: how much CPU an idle softhca instance burns. The process
//! opens the device, then also connects two RC QPs to each other (receives posted, CQ
//! armed on a completion channel) and sleeps; the CPU time the process used meanwhile
//! (user + system, every thread, from getrusage) is reported as % of one core.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::wqe::Sge;
use provider::{Access, Context, QpInit, QpType};

use super::report;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Seconds measured in each phase.
    #[arg(long = "secs", default_value_t = 5.0)]
    pub secs: f64,
    /// RDMA device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    pub dev: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u8,
}

/// CPU seconds this process has used (all threads, user + system).
fn cpu_secs() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a rusage.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn threads() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Threads:")).map(|l| l[8..].trim().to_string()))
        .unwrap_or_else(|| "?".into())
}

/// % of one core used while sleeping `secs`.
fn measure(secs: f64) -> (f64, f64) {
    let c0 = cpu_secs();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let wall = t0.elapsed().as_secs_f64();
    let used = cpu_secs() - c0;
    (100.0 * used / wall, wall)
}

pub fn run(a: &Args) -> Result<()> {
    if !(0.1..=3600.0).contains(&a.secs) {
        bail!("--secs must be 0.1..3600");
    }
    let ctx = Context::open(a.dev.as_deref())?;
    println!("{}", report::DASHES);
    println!("{:>20}Idle CPU of {} (getrusage, all threads)", "", ctx.name());
    println!("{}", report::DASHES);
    // Let start-up work (threads, sockets) settle first.
    std::thread::sleep(Duration::from_millis(200));
    let (pct, wall) = measure(a.secs);
    println!(" device open, no objects          : {pct:6.3} % of one core over {wall:.1} s ({} threads)", threads());

    let port = a.ib_port;
    let gid = ctx.default_gid(port)?;
    let chan = ctx.create_comp_channel()?;
    let pd = ctx.alloc_pd()?;
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let mr = pd.alloc_mr(1 << 16, access)?;
    let mut cq = ctx.create_cq(256, Some(&chan))?;
    let cap = QpCap { max_send_wr: 64, max_recv_wr: 64, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let init = QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None };
    let mut a_qp = pd.create_qp(&init)?;
    let mut b_qp = pd.create_qp(&init)?;
    let (pa, pb) = (rand::random::<u32>() & 0xff_ffff, rand::random::<u32>() & 0xff_ffff);
    let mtu = ctx.query_port(port)?.legacy_resp.active_mtu;
    let rd = ctx.device_attr().base.max_qp_rd_atom.clamp(1, 16) as u8;
    let g = gid.raw();
    for (qp, peer, my_psn, peer_psn) in [(&a_qp, b_qp.qpn(), pa, pb), (&b_qp, a_qp.qpn(), pb, pa)] {
        qp.to_init(port, access)?;
        qp.to_rtr(&Remote { qpn: peer, psn: peer_psn, gid: g }, port, gid.gid_index as u8, mtu, rd)?;
        qp.to_rts(my_psn, 14, 7, 7, rd)?;
    }
    let sge = [mr.sge(..4096)];
    for qp in [&mut a_qp, &mut b_qp] {
        let list: Vec<(u64, &[Sge])> = (0..32).map(|i| (i, &sge[..])).collect();
        qp.post_recv_list(&list)?;
    }
    cq.req_notify(false);
    std::thread::sleep(Duration::from_millis(200));
    let (pct2, wall2) = measure(a.secs);
    println!(" 2 connected RC QPs, CQ armed     : {pct2:6.3} % of one core over {wall2:.1} s ({} threads)", threads());
    println!("{}", report::DASHES);
    drop(a_qp);
    drop(b_qp);
    drop(cq);
    drop(mr);
    Ok(())
}
