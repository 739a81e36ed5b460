//! What one end of a benchmark allocates: device context, PD, one registered buffer
//! split into per-QP areas, one CQ (optionally on a completion channel) and the RC QPs;
//! and how the QPs are connected to the peer's.
//!
//! Buffer layout: QP `q` owns two areas of `area` bytes at `base + 2 * q * area`: the
//! *send* area (what this end sends or writes from, and what the peer reads) and the
//! *receive* area (where sends land and the peer writes or applies atomics). The buffer
//! is host memory, or GPU memory with `--use-cuda` (see `memory`).

use std::sync::Arc;

use anyhow::{bail, Context as _, Result};
use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::{Access, CompChannel, Context, Cq, Mr, Pd, Qp, QpInit, QpType};
use uverbs::sys::verbs::{link_layer, port_state};

use super::memory::Memory;
use super::opts::{Opts, Params, Verb};
use super::oob::QpInfo;

/// One end's resources. Fields drop in order: QPs, CQ, channel, then the memory with
/// its MR.
pub struct Res {
    pub qps: Vec<Qp>,
    pub cq: Cq,
    pub channel: Option<CompChannel>,
    /// The buffer with its registration ([`Res::mr`]).
    pub mem: Memory,
    /// `mem.addr()`: what work requests name as byte 0 of the buffer.
    base: u64,
    #[allow(dead_code)]
    pub pd: Pd,
    pub ctx: Arc<Context>,
    /// Bytes of each area (a whole number of pages).
    pub area: usize,
    pub port: u8,
    pub lid: u16,
    pub gid: [u8; 16],
    pub gid_index: u32,
    /// The port's active MTU (`ibv_mtu` code).
    pub active_mtu: u8,
    pub link_layer: u8,
    /// Our starting PSN per QP.
    pub psns: Vec<u32>,
    /// Outstanding RDMA READs/atomics allowed per QP, both directions.
    pub rd_atomic: u8,
    /// Inline bytes each QP can carry (0: never inline).
    pub max_inline: u32,
    /// Receives posted and not yet completed, per QP.
    pub rx_posted: Vec<u32>,
    pub rx_depth: u32,
    /// `--polled`: waits step the device (see [`super::wait::Watchdog::idle`]).
    pub polled: bool,
}

/// The area size for a run's parameters.
pub fn area_size(p: &Params) -> usize {
    let mut need = p.max_size() as usize;
    if p.test.verb() == Verb::Atomic {
        need = need.max(8 * p.tx_depth as usize);
    }
    need.max(64).div_ceil(4096) * 4096
}

impl Res {
    /// The registration of the whole buffer.
    pub fn mr(&self) -> &Mr {
        self.mem.mr()
    }

    /// Opens the device and creates everything for `p` (QPs in INIT).
    pub fn new(o: &Opts, p: &Params) -> Result<Res> {
        let ctx = Context::open(o.dev.as_deref()).context("open device")?;
        let port = o.ib_port;
        let pa = ctx.query_port(port).with_context(|| format!("query port {port}"))?;
        let l = pa.legacy_resp;
        if l.state != port_state::ACTIVE {
            bail!("port {port} is not active (state {})", l.state);
        }
        let (gid, gid_index) = match o.gid_index {
            Some(i) => (ctx.query_gid(port, i).with_context(|| format!("GID index {i}"))?.raw(), i),
            None => {
                let g = ctx.default_gid(port)?;
                (g.raw(), g.gid_index)
            }
        };
        let channel = if o.events { Some(ctx.create_comp_channel()?) } else { None };
        let pd = ctx.alloc_pd()?;
        let area = area_size(p);
        let nq = p.qps as usize;
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
        let mem = Memory::new(o, &ctx, &pd, 2 * area * nq, area, access)?;
        let base = mem.addr();
        let rx_depth = if p.needs_recv() { p.rx_depth } else { 0 };
        let cqe = p.qps * (p.tx_depth + 2) + p.qps * rx_depth + 16;
        let cq = ctx.create_cq(cqe, channel.as_ref())?;
        let dev_rd = ctx.device_attr().base.max_qp_rd_atom.clamp(1, 16) as u8;
        let mut qps = Vec::with_capacity(nq);
        let mut psns = Vec::with_capacity(nq);
        for _ in 0..nq {
            let init = QpInit {
                send_cq: &cq,
                recv_cq: &cq,
                cap: QpCap {
                    // One more than the window: -D runs may post a last signaled request.
                    max_send_wr: p.tx_depth + 1,
                    max_recv_wr: rx_depth,
                    max_send_sge: 1,
                    max_recv_sge: 1,
                    max_inline_data: p.inline,
                },
                qp_type: QpType::Rc,
                sq_sig_all: false,
                send_ops: None,
            };
            let qp = pd.create_qp(&init)?;
            qp.to_init(port, access)?;
            qps.push(qp);
            psns.push(rand::random::<u32>() & 0xff_ffff);
        }
        let max_inline = if p.inline == 0 { 0 } else { qps[0].cap().max_inline_data.min(p.inline) };
        Ok(Res {
            qps,
            cq,
            channel,
            mem,
            base,
            pd,
            ctx,
            area,
            port,
            lid: l.lid,
            gid,
            gid_index,
            active_mtu: l.active_mtu,
            link_layer: l.link_layer,
            psns,
            rd_atomic: dev_rd,
            max_inline,
            rx_posted: vec![0; nq],
            rx_depth,
            polled: o.polled,
        })
    }

    /// The embedded softhca's counters, non-zero ones, one `name: value` per line (None
    /// on another device).
    pub fn softhca_counters(&self) -> Option<String> {
        softhca_counters(self.ctx.name())
    }

    /// Address of QP `q`'s send area.
    pub fn send_addr(&self, q: usize) -> u64 {
        self.base + (2 * q * self.area) as u64
    }

    /// Offset of QP `q`'s send area in the buffer.
    pub fn send_off(&self, q: usize) -> usize {
        2 * q * self.area
    }

    /// Offset of QP `q`'s receive area in the buffer.
    pub fn recv_off(&self, q: usize) -> usize {
        self.send_off(q) + self.area
    }

    /// Address of QP `q`'s receive area.
    pub fn recv_addr(&self, q: usize) -> u64 {
        self.send_addr(q) + self.area as u64
    }

    /// CPU pointer to QP `q`'s send area. Host memory only: the tests that use it
    /// (inline data, atomics, latency polling) are refused with GPU memory (`gpu`).
    pub fn send_ptr(&self, q: usize) -> *mut u8 {
        let base = self.mem.host_ptr().expect("a CPU pointer into GPU memory");
        // SAFETY: in bounds of the buffer (2 * area per QP).
        unsafe { base.add(2 * q * self.area) }
    }

    pub fn recv_ptr(&self, q: usize) -> *mut u8 {
        // SAFETY: in bounds of buf.
        unsafe { self.send_ptr(q).add(self.area) }
    }

    /// What the peer needs to reach QP `q`.
    pub fn info(&self, q: usize) -> QpInfo {
        QpInfo {
            lid: self.lid,
            qpn: self.qps[q].qpn(),
            psn: self.psns[q],
            rkey: self.mr().rkey(),
            src: self.send_addr(q),
            dst: self.recv_addr(q),
            gid: self.gid,
        }
    }

    /// INIT -> RTR -> RTS towards the peer's QPs.
    pub fn connect(&self, remote: &[QpInfo], mtu: u8) -> Result<()> {
        if remote.iter().any(|r| r.gid == [0; 16]) && self.link_layer == link_layer::ETHERNET {
            bail!("the peer has no GID (RoCE needs one)");
        }
        for (q, (qp, r)) in self.qps.iter().zip(remote).enumerate() {
            let rem = Remote { qpn: r.qpn, psn: r.psn, gid: r.gid };
            qp.to_rtr(&rem, self.port, self.gid_index as u8, mtu, self.rd_atomic)
                .with_context(|| format!("QP {q} to RTR"))?;
            qp.to_rts(self.psns[q], 14, 7, 7, self.rd_atomic).with_context(|| format!("QP {q} to RTS"))?;
        }
        Ok(())
    }

    /// Tops every QP's receive queue up to its depth with receives of a whole area.
    pub fn post_receives(&mut self) -> Result<()> {
        for q in 0..self.qps.len() {
            self.refill(q)?;
        }
        Ok(())
    }

    /// Tops QP `q`'s receive queue up to its depth.
    pub fn refill(&mut self, q: usize) -> Result<()> {
        let want = self.rx_depth.saturating_sub(self.rx_posted[q]);
        if want == 0 {
            return Ok(());
        }
        let sge = [provider::wqe::Sge::new(self.recv_addr(q), self.area as u32, self.mr().lkey())];
        let list: Vec<(u64, &[provider::wqe::Sge])> = (0..want).map(|_| ((q as u64) << 40, &sge[..])).collect();
        self.qps[q].post_recv_list(&list).with_context(|| format!("post {want} receives on QP {q}"))?;
        self.rx_posted[q] += want;
        Ok(())
    }
}

/// Non-zero counters of this process's softhca instance, if `dev` is it.
pub fn softhca_counters(dev: &str) -> Option<String> {
    if dev != provider::device::soft_name() {
        return None;
    }
    let snap = softhca::default_hca().ok()?.device().counters();
    let text = format!("{snap:#?}");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| l.contains(':') && !l.trim_end().ends_with(": 0,"))
        .map(|l| l.trim().trim_end_matches(',').to_string())
        .collect();
    Some(lines.join(", "))
}
