//! One end's verbs resources for `doorbell gdr verify`: device, PD, one CQ and a few RC
//! QPs, connected to the peer's with the benchmarks' out-of-band line format
//! ([`crate::bench::oob::QpInfo`]).
//!
//! QP 0 carries the steps that must succeed; each bad-input step gets a QP of its own,
//! because a remote access error moves the requester's QP to the error state.

use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use provider::cqe::WcStatus;
use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::{Context, Cq, Pd, Qp, QpInit, QpType, Wc};
use uverbs::sys::verbs::{link_layer, port_state};

use crate::bench::oob::QpInfo;

use super::mem::ACCESS;

/// QPs per end: the good path, the out-of-bounds write, the wrong-rkey write.
pub const QPS: usize = 3;
/// Inline bytes asked of each QP (the inline steps send fewer).
pub const INLINE: u32 = 64;

pub struct Link {
    // Fields drop in order: QPs before the CQ, the CQ before the PD (which holds the
    // device context).
    pub qps: Vec<Qp>,
    pub cq: Cq,
    pub pd: Pd,
    port: u8,
    gid: [u8; 16],
    gid_index: u32,
    lid: u16,
    pub mtu: u8,
    link_layer: u8,
    psns: Vec<u32>,
    rd_atomic: u8,
}

impl Link {
    /// Opens `dev` (None: the embedded softhca) and creates PD, CQ and QPs in INIT.
    pub fn new(dev: Option<&str>, port: u8) -> Result<Link> {
        let ctx = Context::open(dev).with_context(|| format!("open device {}", dev.unwrap_or("(default)")))?;
        let pa = ctx.query_port(port).with_context(|| format!("query port {port}"))?;
        let l = pa.legacy_resp;
        if l.state != port_state::ACTIVE {
            bail!("port {port} of {} is not active (state {})", ctx.name(), l.state);
        }
        let g = ctx.default_gid(port).context("the port's GID")?;
        let pd = ctx.alloc_pd()?;
        let cq = ctx.create_cq(64, None)?;
        let rd_atomic = ctx.device_attr().base.max_qp_rd_atom.clamp(1, 16) as u8;
        let mut qps = Vec::with_capacity(QPS);
        for _ in 0..QPS {
            let init = QpInit {
                send_cq: &cq,
                recv_cq: &cq,
                cap: QpCap { max_send_wr: 16, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: INLINE },
                qp_type: QpType::Rc,
                sq_sig_all: false,
                send_ops: None,
            };
            let qp = pd.create_qp(&init).context("create an RC QP")?;
            qp.to_init(port, ACCESS)?;
            qps.push(qp);
        }
        let psns = (0..QPS).map(|_| rand::random::<u32>() & 0xff_ffff).collect();
        Ok(Link {
            qps,
            cq,
            pd,
            port,
            gid: g.raw(),
            gid_index: g.gid_index,
            lid: l.lid,
            mtu: l.active_mtu,
            link_layer: l.link_layer,
            psns,
            rd_atomic,
        })
    }

    /// What the peer needs to reach QP `q` and memory at `addr` with `rkey`.
    pub fn info(&self, q: usize, rkey: u32, addr: u64) -> QpInfo {
        QpInfo { lid: self.lid, qpn: self.qps[q].qpn(), psn: self.psns[q], rkey, src: addr, dst: addr, gid: self.gid }
    }

    /// INIT -> RTR -> RTS towards the peer's QPs, at the smaller of both MTUs.
    pub fn connect(&self, remote: &[QpInfo], mtu: u8) -> Result<()> {
        if remote.iter().any(|r| r.gid == [0; 16]) && self.link_layer == link_layer::ETHERNET {
            bail!("the peer has no GID (RoCE needs one)");
        }
        for (q, (qp, r)) in self.qps.iter().zip(remote).enumerate() {
            let rem = Remote { qpn: r.qpn, psn: r.psn, gid: r.gid };
            qp.to_rtr(&rem, self.port, self.gid_index as u8, mtu, self.rd_atomic).with_context(|| format!("QP {q} to RTR"))?;
            qp.to_rts(self.psns[q], 14, 7, 7, self.rd_atomic).with_context(|| format!("QP {q} to RTS"))?;
        }
        Ok(())
    }

    /// The next completion, or an error after `limit` without one.
    pub fn wait(&mut self, limit: Duration) -> Result<Wc> {
        let start = Instant::now();
        let mut wc = [Wc::default()];
        let mut spins = 0u32;
        loop {
            if self.cq.poll(&mut wc) == 1 {
                return Ok(wc[0]);
            }
            spins = spins.wrapping_add(1);
            if spins % 64 == 0 {
                // softhca's engine threads share the CPU with this poller.
                std::thread::yield_now();
                if start.elapsed() > limit {
                    bail!("no completion within {limit:?}");
                }
            }
        }
    }

    /// The next completion, which must be `wr_id` and succeed.
    pub fn wait_ok(&mut self, wr_id: u64, limit: Duration) -> Result<Wc> {
        let wc = self.wait(limit)?;
        if wc.status != WcStatus::Success {
            bail!("completion with error: {} ({}), vendor error {:#x}", wc.status.as_str(), wc.status as u32, wc.vendor_err);
        }
        if wc.wr_id != wr_id {
            bail!("completion of work request {:#x}, expected {wr_id:#x}", wc.wr_id);
        }
        Ok(wc)
    }
}
