//! An RC QP made entirely through DevX, carrying traffic with the provider's data
//! path code.
//!
//! Everything a verbs QP gets from the kernel is made here by PRM commands: the CQE
//! ring and the QP's work queues live in [`Umem`]s, so do both doorbell records; the
//! doorbells are rung on a DevX [`Uar`]; CREATE_CQ and CREATE_QP name them by id and
//! the QP goes RESET -> INIT -> RTR -> RTS with the PRM transition commands. What is
//! *not* new is the data path: send WQEs are written by `provider::wqe::write_send_wqe`
//! (the same bytes a verbs QP posts), receive WQEs by `write_recv_wqe`, CQEs are read
//! through `prm::cqe` and translated by the provider's `Completion`/`ErrStatus`, and
//! the doorbell hand-off and its fences are `provider::doorbell`'s.
//!
//! Data buffers are registered as verbs MRs on a verbs PD ([`RcQp::new`] takes the
//! PD): its number goes into the QP context, so the MR keys are valid on this QP as
//! on any QP of that PD (a DevX QP and a verbs one are the same firmware object).
//!
//! Single-threaded by construction (`&mut self` for posting and polling); every send
//! must be signaled (the CQE is what frees its slots).

use std::sync::atomic::{AtomicU8, Ordering};

use prm::cmd::cq::CreateCqOut;
use prm::cmd::qp::{mtu, CreateQpOut, Init2rtrQpOut, Rst2initQpOut, Rtr2rtsQpOut};
use prm::cqe::{is_sw_owned, Cqe64, CQE_SIZE};
use provider::cqe::{Completion, CqeOpcode, ErrStatus, WcOpcode, WcStatus};
use provider::opcode::FmCeSe;
use provider::wqe::{write_recv_wqe, write_send_wqe, SendWr, Sge, SqRing, WQEBB_SIZE};
use provider::{barrier, doorbell, Pd, Wc};

use crate::cmd::cq::{create_cq_in, CqParams, UmemRef};
use crate::cmd::outbox;
use crate::cmd::qp::{
    create_qp_in, init2rtr_in, query_qp_in, queried_qpc, rst2init_in, rtr2rts_in, Init2Rtr, QpKind, QpParams,
    RocePath, Rst2Init, Rtr2Rts,
};
use crate::error::{Error, Result};
use crate::umem::access;
use crate::{DevxContext, Obj, Uar, Umem};


/// The sizes of a DevX RC QP (or, with [`RcQp::new_ud`], a UD one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RcConfig {
    /// log2 of the send queue's WQEBBs.
    pub log_sq_size: u8,
    /// log2 of the receive queue's WQEs.
    pub log_rq_size: u8,
    /// Scatter entries per receive WQE (the stride is the next power of two of
    /// `16 * max_recv_sge`).
    pub max_recv_sge: u8,
    /// log2 of the CQ's entries (one CQ for both queues).
    pub log_cq_size: u8,
    /// The port.
    pub port: u8,
}

impl Default for RcConfig {
    fn default() -> RcConfig {
        RcConfig { log_sq_size: 6, log_rq_size: 6, max_recv_sge: 2, log_cq_size: 8, port: 1 }
    }
}

/// What the other side of the connection is (exchanged out of band).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peer {
    pub qpn: u32,
    /// Its first send PSN: our receive PSN.
    pub psn: u32,
    pub gid: [u8; 16],
}

/// How to reach the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectParams {
    /// Our first send PSN.
    pub psn: u32,
    /// The local GID index to send from (default 1: the IPv4-mapped RoCEv2 GID of softhca
    /// and rxe; a ConnectX with RoCE v1 rows has it at 3).
    pub sgid_index: u8,
    /// `prm::cmd::qp::mtu`.
    pub mtu: u8,
    pub retry_count: u8,
    pub rnr_retry: u8,
    /// 4.096 us << ack_timeout.
    pub ack_timeout: u8,
    /// RNR NAK timer code.
    pub min_rnr_nak: u8,
    /// log2 of the reads/atomics outstanding in each direction.
    pub log_rd_atomic: u8,
}

impl Default for ConnectParams {
    fn default() -> ConnectParams {
        ConnectParams { psn: 0, sgid_index: 1, mtu: mtu::MTU_1024, retry_count: 7, rnr_retry: 7, ack_timeout: 14,
                        min_rnr_nak: 12, log_rd_atomic: 4 }
    }
}

/// A DevX RC QP with its own CQ. Fields drop in order: the QP before the CQ it uses,
/// both before the UMEMs they name, those before the UAR.
pub struct RcQp {
    qp: Obj,
    cq: Obj,
    wq: Umem,
    qp_dbr: Umem,
    cq_buf: Umem,
    cq_dbr: Umem,
    uar: Uar,
    devx: DevxContext,
    cfg: RcConfig,
    pdn: u32,
    sq_pi: u16,
    sq_tail: u16,
    /// Per SQ slot: the wr_id and the producer index after the WQE.
    sq_wrid: Vec<(u64, u16)>,
    rq_head: u32,
    rq_tail: u32,
    rq_wrid: Vec<u64>,
    rq_stride_log: u8,
    ci: u32,
    bf_offset: usize,
    bf_size: usize,
}

fn log2_ceil(n: u32) -> u8 {
    n.max(1).next_power_of_two().trailing_zeros() as u8
}

impl RcQp {
    /// Creates the CQ and the QP (in RESET) on `pd`'s protection domain.
    pub fn new(devx: &DevxContext, pd: &Pd, cfg: RcConfig) -> Result<RcQp> {
        RcQp::create(devx, pd, cfg, QpKind::Rc)
    }

    /// The same queues as a UD QP (send WRs then carry a [`provider::wqe::UdDest`];
    /// receive buffers start with the 40-byte GRH area). Move it to RTS with
    /// [`RcQp::activate_ud`].
    pub fn new_ud(devx: &DevxContext, pd: &Pd, cfg: RcConfig) -> Result<RcQp> {
        RcQp::create(devx, pd, cfg, QpKind::Ud)
    }

    fn create(devx: &DevxContext, pd: &Pd, cfg: RcConfig, kind: QpKind) -> Result<RcQp> {
        let uar = devx.alloc_uar(false)?;
        let eqn = devx.query_eqn(0)?;

        let ncqe = 1usize << cfg.log_cq_size;
        let cq_buf = devx.reg_umem(ncqe * CQE_SIZE, access::LOCAL_WRITE)?;
        for i in 0..ncqe {
            // SAFETY: entry i is inside the ring; nothing reads it yet (the CQ does
            // not exist). op_own = INVALID << 4 with owner 0, as libmlx5 initialises.
            unsafe { *cq_buf.as_ptr().add(i * CQE_SIZE + CQE_SIZE - 1) = prm::cqe::owner::CQE_INIT_OP_OWN };
        }
        let cq_dbr = devx.reg_umem(prm::dbrec::DBREC_SIZE, access::LOCAL_WRITE)?;
        let mut out = outbox::<CreateCqOut>();
        let cq = devx.create_obj(
            &create_cq_in(&CqParams {
                log_cq_size: cfg.log_cq_size,
                cqe_128: false,
                uar_page: uar.page_id(),
                c_eqn: eqn as u8,
                buf: UmemRef { id: cq_buf.id(), offset: 0 },
                dbr: UmemRef { id: cq_dbr.id(), offset: 0 },
            }),
            &mut out,
        )?;

        let rq_stride_log = log2_ceil(16 * cfg.max_recv_sge as u32).max(4);
        let rq_bytes = (1usize << cfg.log_rq_size) << rq_stride_log;
        let sq_bytes = (1usize << cfg.log_sq_size) * WQEBB_SIZE as usize;
        let wq = devx.reg_umem(rq_bytes + sq_bytes, access::LOCAL_WRITE)?;
        let qp_dbr = devx.reg_umem(prm::dbrec::DBREC_SIZE, access::LOCAL_WRITE)?;
        let mut out = outbox::<CreateQpOut>();
        let qp = devx.create_obj(
            &create_qp_in(&QpParams {
                kind,
                pd: pd.pdn(),
                cqn_snd: cq.id(),
                cqn_rcv: cq.id(),
                uar_page: uar.page_id(),
                user_index: 0,
                log_sq_size: cfg.log_sq_size,
                log_rq_size: cfg.log_rq_size,
                log_rq_stride: rq_stride_log - 4,
                wq: UmemRef { id: wq.id(), offset: 0 },
                dbr: UmemRef { id: qp_dbr.id(), offset: 0 },
            }),
            &mut out,
        )?;
        let bf_size = devx.context().ucontext().bf_reg_size as usize / 2;
        tracing::debug!(target: "devx", qpn = qp.id(), cqn = cq.id(), uar = uar.page_id(), eqn, "DevX RC QP created");
        Ok(RcQp {
            qp,
            cq,
            wq,
            qp_dbr,
            cq_buf,
            cq_dbr,
            uar,
            devx: devx.clone(),
            cfg,
            pdn: pd.pdn(),
            sq_pi: 0,
            sq_tail: 0,
            sq_wrid: vec![(0, 0); 1 << cfg.log_sq_size],
            rq_head: 0,
            rq_tail: 0,
            rq_wrid: vec![0; 1 << cfg.log_rq_size],
            rq_stride_log,
            ci: 0,
            bf_offset: 0,
            bf_size,
        })
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qp.id()
    }

    /// The CQ number.
    pub fn cqn(&self) -> u32 {
        self.cq.id()
    }

    /// The PD number the QP was created on.
    pub fn pdn(&self) -> u32 {
        self.pdn
    }

    /// The QP object (for raw commands: QUERY_QP, RTS2RTS...).
    pub fn obj(&self) -> &Obj {
        &self.qp
    }

    /// RESET -> INIT -> RTR -> RTS towards `peer`, with the PRM commands.
    pub fn connect(&mut self, peer: &Peer, p: &ConnectParams) -> Result<()> {
        let qpn = self.qpn();
        let mut out = outbox::<Rst2initQpOut>();
        self.qp.modify(
            &rst2init_in(qpn, &Rst2Init { port: self.cfg.port, pkey_index: 0, remote_read: true, remote_write: true,
                                          remote_atomic: true, qkey: 0 }),
            &mut out,
        )?;
        let mut out = outbox::<Init2rtrQpOut>();
        self.qp.modify(
            &init2rtr_in(qpn, &Init2Rtr {
                mtu: p.mtu,
                log_msg_max: 30,
                remote_qpn: peer.qpn,
                next_rcv_psn: peer.psn,
                min_rnr_nak: p.min_rnr_nak,
                log_rra_max: p.log_rd_atomic,
                path: RocePath { port: self.cfg.port, rgid: peer.gid, sgid_index: p.sgid_index, hop_limit: 64,
                                 udp_sport: 0xc000 | (qpn as u16 & 0x3fff), ..Default::default() },
            }),
            &mut out,
        )?;
        let mut out = outbox::<Rtr2rtsQpOut>();
        self.qp.modify(
            &rtr2rts_in(qpn, &Rtr2Rts { next_send_psn: p.psn, retry_count: p.retry_count, rnr_retry: p.rnr_retry,
                                        ack_timeout: p.ack_timeout, log_sra_max: p.log_rd_atomic }),
            &mut out,
        )?;
        Ok(())
    }

    /// A UD QP's RESET -> INIT (port, `qkey`) -> RTR -> RTS (`psn`), with the PRM
    /// commands. As mlx5_ib's `__mlx5_ib_modify_qp` does for a UD QP, every context
    /// carries MTU 4096 and a 4 KiB largest message (`log_msg_max` 12): a UD QP has no
    /// path MTU of its own, and without them the device would cut datagrams at 256.
    pub fn activate_ud(&mut self, qkey: u32, psn: u32) -> Result<()> {
        use prm::bits::ViewMut;
        use prm::cmd::qp::{Init2rtrQpIn, Qpc, Rst2initQpIn};
        let qpn = self.qpn();
        let mut b = rst2init_in(qpn, &Rst2Init { port: self.cfg.port, pkey_index: 0, remote_read: false,
                                                 remote_write: false, remote_atomic: false, qkey });
        ViewMut::<Rst2initQpIn>::new(&mut b).expect("built with this layout's size").sub_mut(Rst2initQpIn::qpc)
            .set(Qpc::mtu, mtu::MTU_4096).set(Qpc::log_msg_max, 12);
        self.qp.modify(&b, &mut outbox::<Rst2initQpOut>())?;
        let mut b = crate::cmd::inbox::<Init2rtrQpIn>(prm::cmd::opcode::INIT2RTR_QP, 0);
        let mut v = ViewMut::<Init2rtrQpIn>::new(&mut b).expect("built with this layout's size");
        // The Q_Key again, flagged in opt_param_mask (MLX5_QP_OPTPAR_Q_KEY), as mlx5_ib
        // sends it when the verbs' INIT->RTR carries IB_QP_QKEY: a firmware may take
        // the field from any transition that carries it.
        v.set(Init2rtrQpIn::qpn, qpn).set(Init2rtrQpIn::opt_param_mask, prm::cmd::qp::optpar::Q_KEY);
        v.sub_mut(Init2rtrQpIn::qpc).set(Qpc::mtu, mtu::MTU_4096).set(Qpc::log_msg_max, 12).set(Qpc::q_key, qkey);
        self.qp.modify(&b, &mut outbox::<Init2rtrQpOut>())?;
        self.qp.modify(
            &rtr2rts_in(qpn, &Rtr2Rts { next_send_psn: psn, retry_count: 0, rnr_retry: 0, ack_timeout: 0, log_sra_max: 0 }),
            &mut outbox::<Rtr2rtsQpOut>(),
        )?;
        Ok(())
    }

    /// The QP's state as QUERY_QP answers it (`prm::cmd::qp::state`).
    pub fn state(&self) -> Result<u8> {
        let mut out = outbox::<prm::cmd::qp::QueryQpOut>();
        self.qp.query(&query_qp_in(self.qpn()), &mut out)?;
        Ok(queried_qpc(&out).map(|q| q.get(prm::cmd::qp::Qpc::state)).unwrap_or(0xff))
    }

    fn sq_ring(&mut self) -> SqRing<'_> {
        let rq_bytes = (1usize << self.cfg.log_rq_size) << self.rq_stride_log;
        let sq_bytes = (1usize << self.cfg.log_sq_size) * WQEBB_SIZE as usize;
        // SAFETY: the SQ is the `sq_bytes` after the RQ in the WQ UMEM, which lives as
        // long as self; `&mut self` makes this the only writer. The device only reads
        // WQEs the doorbell record covers, which are not rewritten until completed.
        let sq = unsafe { std::slice::from_raw_parts_mut(self.wq.as_ptr().add(rq_bytes), sq_bytes) };
        SqRing::new(sq).expect("a power-of-two number of WQEBBs")
    }

    /// Posts one send WR. It is made signaled (its CQE frees its slots).
    pub fn post_send(&mut self, wr_id: u64, wr: &SendWr<'_>) -> Result<()> {
        let wqe_cnt = 1u16 << self.cfg.log_sq_size;
        let mut wr = *wr;
        wr.flags |= FmCeSe::CQ_UPDATE;
        let need = wr.wqe_info().map_err(|e| Error::Invalid { op: "devx post_send", why: e.to_string() })?.wqebb_count;
        if self.sq_pi.wrapping_sub(self.sq_tail) as u32 + need as u32 > wqe_cnt as u32 {
            return Err(Error::Os { op: "devx post_send", errno: nix::errno::Errno::ENOMEM });
        }
        let (pi, qpn) = (self.sq_pi, self.qpn());
        let mut ring = self.sq_ring();
        let info = write_send_wqe(&mut ring, pi, qpn, &wr)
            .map_err(|e| Error::Invalid { op: "devx post_send", why: e.to_string() })?;
        let off = ring.wqe_offset(pi);
        let first8: [u8; 8] = ring.as_bytes()[off..off + 8].try_into().expect("8 bytes");
        let next = pi.wrapping_add(info.wqebb_count as u16);
        self.sq_wrid[(pi & (wqe_cnt - 1)) as usize] = (wr_id, next);
        self.sq_pi = next;
        // SAFETY: word SND_DBR of our doorbell record UMEM is live while self is; the
        // BlueFlame register is in our mapped UAR page (0x800 + 0 or + bf_size, both
        // inside the page).
        unsafe {
            doorbell::publish(self.qp_dbr.as_ptr().cast::<u32>().add(prm::dbrec::SND_DBR), next as u32);
            doorbell::ring_db(self.uar.bf_reg().add(self.bf_offset), first8);
        }
        self.bf_offset ^= self.bf_size;
        Ok(())
    }

    /// Posts one receive WR.
    pub fn post_recv(&mut self, wr_id: u64, sgl: &[Sge]) -> Result<()> {
        let cnt = 1u32 << self.cfg.log_rq_size;
        if self.rq_head.wrapping_sub(self.rq_tail) >= cnt {
            return Err(Error::Os { op: "devx post_recv", errno: nix::errno::Errno::ENOMEM });
        }
        let idx = (self.rq_head & (cnt - 1)) as usize;
        let slots = 1usize << (self.rq_stride_log - 4);
        // SAFETY: receive WQE idx is inside the RQ at the start of the WQ UMEM;
        // `&mut self` makes this the only writer, and the device reads it only after
        // the doorbell record below covers it.
        let wqe = unsafe {
            std::slice::from_raw_parts_mut(self.wq.as_ptr().add(idx << self.rq_stride_log).cast::<[u8; 16]>(), slots)
        };
        write_recv_wqe(wqe, sgl)
            .ok_or_else(|| Error::Invalid { op: "devx post_recv", why: format!("{} SGEs exceed {slots}", sgl.len()) })?;
        self.rq_wrid[idx] = wr_id;
        self.rq_head = self.rq_head.wrapping_add(1);
        // SAFETY: word RCV_DBR of our doorbell record UMEM is live while self is.
        unsafe { doorbell::publish(self.qp_dbr.as_ptr().cast::<u32>().add(prm::dbrec::RCV_DBR), self.rq_head & 0xffff) };
        Ok(())
    }

    /// Polls one completion, as `ibv_poll_cq` would report it.
    pub fn poll(&mut self) -> Option<Wc> {
        let ncqe = 1u32 << self.cfg.log_cq_size;
        let idx = (self.ci & (ncqe - 1)) as usize;
        // SAFETY: entry idx is inside the CQE ring UMEM, alive while self is.
        let entry = unsafe { self.cq_buf.as_ptr().add(idx * CQE_SIZE) };
        // SAFETY: the owner byte is the entry's last; the device writes it
        // concurrently, hence the atomic load.
        let op_own = unsafe { AtomicU8::from_ptr(entry.add(CQE_SIZE - 1)) }.load(Ordering::Relaxed);
        if !is_sw_owned(op_own, self.ci, ncqe) {
            return None;
        }
        barrier::from_device();
        // SAFETY: the device finished this entry (owner checked, acquire fence taken)
        // and does not write it again before the consumer index passes it.
        let cqe = Cqe64::view(unsafe { &*(entry as *const [u8; CQE_SIZE]) });
        let wc = self.complete(cqe);
        self.ci = self.ci.wrapping_add(1);
        // SAFETY: word CQ_SET_CI of the CQ's doorbell record UMEM is live while self is.
        unsafe {
            doorbell::publish(self.cq_dbr.as_ptr().cast::<u32>().add(prm::dbrec::CQ_SET_CI),
                              self.ci & prm::dbrec::CQ_CI_MASK)
        };
        Some(wc)
    }

    /// Polls until a completion arrives or `timeout` passes (spinning briefly, then
    /// yielding: a software device may need this CPU).
    pub fn poll_wait(&mut self, timeout: std::time::Duration) -> Option<Wc> {
        let start = std::time::Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(wc) = self.poll() {
                return Some(wc);
            }
            if start.elapsed() > timeout {
                return None;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                self.devx.context().progress();
                std::thread::yield_now();
            }
        }
    }

    fn complete(&mut self, cqe: &Cqe64) -> Wc {
        let mut wc = Wc { qp_num: cqe.qpn(), ..Default::default() };
        let sq_mask = (1u16 << self.cfg.log_sq_size) - 1;
        match cqe.opcode() {
            Some(CqeOpcode::Req) => {
                let (id, next) = self.sq_wrid[(cqe.wqe_counter() & sq_mask) as usize];
                wc.wr_id = id;
                self.sq_tail = next;
                if let Some((op, flags)) = cqe.req_completion() {
                    wc.opcode = op;
                    wc.flags = flags;
                }
                if wc.opcode == WcOpcode::RdmaRead {
                    wc.byte_len = cqe.byte_cnt();
                }
            }
            Some(CqeOpcode::ReqErr) | Some(CqeOpcode::RespErr) => {
                let e = cqe.as_err();
                wc.status = e.status();
                wc.vendor_err = e.vendor_err();
                if cqe.opcode() == Some(CqeOpcode::ReqErr) {
                    let (id, next) = self.sq_wrid[(e.wqe_counter() & sq_mask) as usize];
                    wc.wr_id = id;
                    self.sq_tail = next;
                } else {
                    wc.opcode = WcOpcode::Recv;
                    wc.wr_id = self.take_recv();
                }
            }
            Some(_) => {
                let (op, flags) = cqe.resp_completion().unwrap_or((WcOpcode::Recv, Default::default()));
                wc.opcode = op;
                wc.flags = flags;
                wc.byte_len = cqe.byte_cnt();
                wc.imm = cqe.imm_inval_pkey();
                wc.src_qp = cqe.src_qp();
                wc.wr_id = self.take_recv();
            }
            None => wc.status = WcStatus::GeneralErr,
        }
        wc
    }

    fn take_recv(&mut self) -> u64 {
        let n = self.rq_wrid.len() as u32;
        let id = self.rq_wrid[(self.rq_tail & (n - 1)) as usize];
        self.rq_tail = self.rq_tail.wrapping_add(1);
        id
    }
}

impl std::fmt::Debug for RcQp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RcQp").field("qpn", &self.qpn()).field("cqn", &self.cqn()).field("uar", &self.uar.page_id())
            .finish_non_exhaustive()
    }
}
