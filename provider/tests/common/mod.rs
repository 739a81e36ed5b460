//! What the provider's integration tests share: a QP connected to itself on the
//! embedded softhca, with registered memory, and completion helpers.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use provider::qp::attr::Remote;
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, ConnectOptions, Context, Cq, MemoryRegion, Mtu, Pd, Qp, QpInit, QpType, Wc};

/// Long enough that only a lost completion reaches it (a bug fails, never hangs).
pub const WAIT: Duration = Duration::from_secs(30);
pub const BUF: usize = 64 * 1024;

/// A QP connected to itself on the embedded softhca, with one registered buffer.
pub struct Loop {
    pub qp: Qp,
    pub cq: Cq,
    pub mr: MemoryRegion,
    pub base: u64,
    pub pd: Pd,
    pub ctx: Arc<Context>,
}

impl Loop {
    pub fn new(qp_type: QpType, cap: QpCap) -> Loop {
        let ctx = Context::open(None).expect("embedded softhca");
        let pd = ctx.alloc_pd().unwrap();
        let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
        let mr = pd.alloc_mr(BUF, access).unwrap();
        let base = mr.addr();
        let cq = ctx.create_cq(256, None).unwrap();
        let qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type, sq_sig_all: false, send_ops: None }).unwrap();
        let gid = ctx.default_gid(1).unwrap();
        let remote = Remote { qpn: qp.qpn(), psn: 0, gid: gid.raw() };
        let init_access = if qp_type == QpType::Uc { Access::REMOTE_WRITE } else { access };
        qp.to_init(1, init_access).unwrap();
        qp.connect(&remote, &ConnectOptions { mtu: Mtu::M1024, ..Default::default() }).unwrap();
        Loop { qp, cq, mr, base, pd, ctx }
    }

    pub fn sge(&self, off: u64, len: u32) -> Sge {
        Sge::new(self.base + off, len, self.mr.lkey())
    }

    /// A signaled 8-byte RDMA WRITE from the buffer's start to `8 * (k + 1)` past its
    /// middle (one WQEBB).
    pub fn write(&self, sge: &[Sge; 1], k: u64) -> SendWr<'static> {
        let sgl: &'static [Sge] = Box::leak(Box::new(*sge));
        SendWr::new(SendOp::RdmaWrite { raddr: self.base + BUF as u64 / 2 + 8 * (k + 1), rkey: self.mr.rkey() }, Payload::Sgl(sgl)).signaled()
    }

    /// Waits for `n` completions and returns their wr_ids, checking each succeeded.
    pub fn completions(&mut self, n: usize) -> Vec<u64> {
        self.wcs(n).iter().map(|w| {
            assert_eq!(w.status, provider::cqe::WcStatus::Success, "{w:?}");
            w.wr_id
        }).collect()
    }

    /// Waits for `n` completions, whatever their status.
    pub fn wcs(&mut self, n: usize) -> Vec<Wc> {
        let mut out = Vec::new();
        let mut wc = [Wc::default(); 16];
        while out.len() < n {
            let want = (n - out.len()).min(wc.len());
            let got = self.cq.poll_wait(&mut wc[..want], WAIT);
            assert!(got > 0, "only {} of {n} completions arrived: {out:?}", out.len());
            out.extend_from_slice(&wc[..got]);
        }
        out
    }

    /// Posts the marker and checks that the completions are the first `posted` ids of
    /// `ids`, then the marker's.
    pub fn expect_completed(&mut self, ids: &[u64], posted: usize) {
        let sge = [self.sge(0, 8)];
        let marker = self.write(&sge, 0);
        self.qp.post_send(MARKER, &marker).expect("the marker is a valid request");
        let mut want: Vec<u64> = ids[..posted].to_vec();
        want.push(MARKER);
        assert_eq!(self.completions(want.len()), want, "completions after the error");
    }
}

/// The wr_id of [`Loop::expect_completed`]'s marker request.
pub const MARKER: u64 = 0xfeed;
