//! An RC QP made entirely through DevX on one softhca instance (CQ and QP rings and
//! doorbell records in a UMEM, a DevX UAR page, PRM transition commands) carries
//! traffic with a verbs QP of doorbell's provider on another instance: a SEND each way,
//! the DevX side writing its own WQEs (prm's segment layouts) and reading its own CQEs.
//!
//! What must hold comes from outside the device half: the payload bytes arrive, the
//! CQEs have the opcodes and byte counts of the PRM (`prm::opcode::CqeOpcode`), the
//! verbs side sees IBV_WC_SUCCESS.

mod common;

use common::{wait, Buf, End, Host, Opts};
use nix::errno::Errno;
use prm::bits::{Layout, ViewMut};
use prm::cmd::cq::{CreateCqIn, Cqc};
use prm::cmd::header::MboxIn;
use prm::cmd::opcode as op;
use prm::cmd::qp::{self as q, Ads, CreateQpIn, Qpc, Rst2initQpIn};
use prm::opcode::{FmCeSe, WqeOpcode};
use prm::wqe::ctrl::CtrlSeg;
use prm::wqe::data::DataSeg;
use provider::wqe::{Payload, SendOp, Sge};
use provider::cqe::WcStatus;
use uverbs::cmd::{context, mr, pd};
use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::{mlx5 as ids, object};
use uverbs::sys::mlx5::{self as mlx5, AllocUcontextReqV2, AllocUcontextResp};
use uverbs::sys::verbs::ACCESS_LOCAL_WRITE;
use uverbs::Device;
use zerocopy::IntoBytes;

const UMEM_LEN: usize = 64 * 1024;
/// Where things live in the UMEM: the CQ ring (256 x 64 B), the WQ buffer (RQ of 64 x
/// 64 B, then SQ of 64 WQEBBs), the doorbell records.
const CQ_OFF: usize = 0;
const WQ_OFF: usize = 16 * 1024;
const SQ_OFF: usize = WQ_OFF + 64 * 64;
const CQ_DBR: usize = 48 * 1024;
const QP_DBR: usize = CQ_DBR + 64;
const LOG_CQ: u8 = 8;

fn inbox<L: Layout>(opcode: u16, f: impl FnOnce(&mut ViewMut<'_, L>)) -> Vec<u8> {
    let mut b = vec![0u8; L::BYTES];
    ViewMut::<MboxIn>::new(&mut b).unwrap().set(MboxIn::opcode, opcode);
    f(&mut ViewMut::new(&mut b).unwrap());
    b
}

fn id_of(out: &[u8]) -> u32 {
    u32::from_be_bytes([0, out[9], out[10], out[11]])
}

fn devx_create(dev: &Device, inb: &[u8]) -> (u32, u32) {
    let mut out = vec![0u8; 16];
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, ids::DEVX_OBJ_CREATE);
    let h = c.new_handle(ids::ATTR_DEVX_OBJ_CREATE_HANDLE);
    c.in_bytes(ids::ATTR_DEVX_OBJ_CREATE_CMD_IN, inb);
    c.out_bytes(ids::ATTR_DEVX_OBJ_CREATE_CMD_OUT, &mut out);
    let r = c.run(dev);
    assert_eq!(r, Ok(()), "create {:#x}: status {:#x} syndrome {:#x}", u16::from_be_bytes([inb[0], inb[1]]), out[0],
               u32::from_be_bytes([out[4], out[5], out[6], out[7]]));
    (c.handle_out(h), id_of(&out))
}

fn devx_modify(dev: &Device, handle: u32, inb: &[u8]) -> Result<(), Errno> {
    let mut out = vec![0u8; 16];
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, ids::DEVX_OBJ_MODIFY);
    c.handle(ids::ATTR_DEVX_OBJ_MODIFY_HANDLE, handle);
    c.in_bytes(ids::ATTR_DEVX_OBJ_MODIFY_CMD_IN, inb);
    c.out_bytes(ids::ATTR_DEVX_OBJ_MODIFY_CMD_OUT, &mut out);
    c.run(dev)
}

/// The DevX end: its context, memory and objects.
struct DevxEnd {
    dev: Device,
    umem: Buf,
    data: Buf,
    lkey: u32,
    /// The DevX UAR page mapped as libmlx5 maps it (mmap of the uverbs fd at the
    /// offset UAR_OBJ_ALLOC gave): stores there are what the device's doorbell trap
    /// watches, so a sleeping engine wakes.
    uar_map: uverbs::Mapping,
    qp_h: u32,
    qpn: u32,
    cq_ci: u32,
}

impl DevxEnd {
    fn new(h: &Host) -> DevxEnd {
        let dev = Device::from_endpoint(Box::new(h.hca.open()), "softhca0");
        let req = AllocUcontextReqV2 {
            total_num_bfregs: 16,
            num_low_latency_bfregs: 4,
            flags: mlx5::ALLOC_UCTX_DEVX,
            max_cqe_version: 1,
            lib_caps: mlx5::LIB_CAP_4K_UAR | mlx5::LIB_CAP_DYN_UAR,
            ..Default::default()
        };
        let mut resp = AllocUcontextResp::default();
        context::get_context_ioctl(&dev, req.as_bytes(), resp.as_mut_bytes()).unwrap();
        let mut pdn = [0u8; 4];
        let pd_h = pd::alloc_pd(&dev, &mut pdn).unwrap();
        let pdn = u32::from_ne_bytes(pdn);
        // Payload memory, registered by the verbs in the same PD.
        let data = Buf::new(8192);
        let m = mr::reg_mr(&dev, pd_h, data.addr(), 8192, data.addr(), ACCESS_LOCAL_WRITE).unwrap();
        // The UMEM, with every CQE marked invalid (op_own 0xf0) as libmlx5 does.
        let umem = Buf::new(UMEM_LEN);
        for i in 0..1usize << LOG_CQ {
            umem.write(CQ_OFF + i * 64 + 63, &[0xf0]);
        }
        let mut umem_id = 0u32;
        let mut c = Ioctl::new(object::MLX5_DEVX_UMEM, ids::DEVX_UMEM_REG);
        c.new_handle(ids::ATTR_DEVX_UMEM_REG_HANDLE);
        c.in_value(ids::ATTR_DEVX_UMEM_REG_ADDR, umem.addr());
        c.in_value(ids::ATTR_DEVX_UMEM_REG_LEN, UMEM_LEN as u64);
        c.in_value(ids::ATTR_DEVX_UMEM_REG_ACCESS, ACCESS_LOCAL_WRITE);
        c.out_struct(ids::ATTR_DEVX_UMEM_REG_OUT_ID, &mut umem_id);
        c.run(&dev).unwrap();
        // A DevX UAR (UAR_OBJ_ALLOC, non-cached) and the EQ of vector 0.
        let (mut off, mut len, mut uar) = (0u64, 0u32, 0u32);
        let mut c = Ioctl::new(object::MLX5_UAR, ids::UAR_OBJ_ALLOC);
        c.new_handle(ids::ATTR_UAR_OBJ_ALLOC_HANDLE);
        c.in_const(ids::ATTR_UAR_OBJ_ALLOC_TYPE, ids::UAR_ALLOC_TYPE_NC as u64);
        c.out_struct(ids::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &mut off);
        c.out_struct(ids::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &mut len);
        c.out_struct(ids::ATTR_UAR_OBJ_ALLOC_PAGE_ID, &mut uar);
        c.run(&dev).unwrap();
        let uar_map = dev.mmap(len as usize, libc::PROT_WRITE, off).expect("mmap of the DevX UAR");
        let mut eqn = 0u32;
        let mut c = Ioctl::new(object::MLX5_DEVX, ids::DEVX_QUERY_EQN);
        c.in_value(ids::ATTR_DEVX_QUERY_EQN_USER_VEC, 0u32);
        c.out_struct(ids::ATTR_DEVX_QUERY_EQN_DEV_EQN, &mut eqn);
        c.run(&dev).unwrap();
        let cq_in = inbox::<CreateCqIn>(op::CREATE_CQ, |v| {
            v.set(CreateCqIn::cq_umem_id, umem_id).set(CreateCqIn::cq_umem_offset, CQ_OFF as u64);
            v.sub_mut(CreateCqIn::cq_context)
                .set(Cqc::log_cq_size, LOG_CQ)
                .set(Cqc::uar_page, uar)
                .set(Cqc::c_eqn, eqn as u8)
                .set(Cqc::dbr_umem_id, umem_id)
                .set(Cqc::dbr_addr, CQ_DBR as u64);
        });
        let (_cq_h, cqn) = devx_create(&dev, &cq_in);
        let qp_in = inbox::<CreateQpIn>(op::CREATE_QP, |v| {
            v.set(CreateQpIn::wq_umem_id, umem_id).set(CreateQpIn::wq_umem_offset, WQ_OFF as u64);
            v.sub_mut(CreateQpIn::qpc)
                .set(Qpc::st, q::st::RC)
                .set(Qpc::pm_state, q::pm_state::MIGRATED)
                .set(Qpc::pd, pdn)
                .set(Qpc::uar_page, uar)
                .set(Qpc::log_rq_size, 6)
                .set(Qpc::log_rq_stride, 2)
                .set(Qpc::log_sq_size, 6)
                .set(Qpc::cqn_snd, cqn)
                .set(Qpc::cqn_rcv, cqn)
                .set(Qpc::user_index, 7)
                .set(Qpc::dbr_umem_id, umem_id)
                .set(Qpc::dbr_addr, QP_DBR as u64);
        });
        let (qp_h, qpn) = devx_create(&dev, &qp_in);
        DevxEnd { dev, umem, data, lkey: m.lkey, uar_map, qp_h, qpn, cq_ci: 0 }
    }

    /// RST2INIT, INIT2RTR, RTR2RTS towards `remote_qpn` at `remote_gid`, from the
    /// IPv4-mapped RoCE v2 GID (index 1), with the fields mlx5_ib fills.
    fn connect(&self, remote_qpn: u32, remote_gid: [u8; 16], my_psn: u32, their_psn: u32) {
        for opc in [op::RST2INIT_QP, op::INIT2RTR_QP, op::RTR2RTS_QP] {
            let mut b = vec![0u8; Rst2initQpIn::BYTES];
            {
                let mut v = ViewMut::<Rst2initQpIn>::new(&mut b).unwrap();
                v.set(Rst2initQpIn::opcode, opc).set(Rst2initQpIn::qpn, self.qpn);
                let mut c = v.sub_mut(Rst2initQpIn::qpc);
                match opc {
                    op::RST2INIT_QP => {
                        c.set(Qpc::rwe, true).set(Qpc::rre, true);
                        c.sub_mut(Qpc::primary_address_path).set(Ads::vhca_port_num, 1);
                    }
                    op::INIT2RTR_QP => {
                        c.set(Qpc::mtu, q::mtu::MTU_1024)
                            .set(Qpc::log_msg_max, 30)
                            .set(Qpc::remote_qpn, remote_qpn)
                            .set(Qpc::next_rcv_psn, their_psn)
                            .set(Qpc::log_rra_max, 4)
                            .set(Qpc::min_rnr_nak, 1);
                        let mut p = c.sub_mut(Qpc::primary_address_path);
                        p.set(Ads::vhca_port_num, 1).set(Ads::src_addr_index, softhca::config::IP_GID_INDEX).set(Ads::hop_limit, 64);
                        p.bytes_mut(Ads::rgid_rip)[..16].copy_from_slice(&remote_gid);
                    }
                    _ => {
                        c.set(Qpc::next_send_psn, my_psn).set(Qpc::retry_count, 7).set(Qpc::rnr_retry, 7)
                            .set(Qpc::log_sra_max, 4);
                        c.sub_mut(Qpc::primary_address_path).set(Ads::ack_timeout, 12);
                    }
                }
            }
            assert_eq!(devx_modify(&self.dev, self.qp_h, &b), Ok(()), "transition {opc:#x}");
        }
    }

    /// Publishes a doorbell record word (big-endian, after the WQE writes).
    fn dbr(&self, off: usize, v: u32) {
        std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
        self.umem.write(off, &v.to_be_bytes());
    }

    /// Posts receive WQE `idx` over `len` bytes of the payload buffer at `at`.
    fn post_recv(&self, idx: u32, at: usize, len: u32) {
        let mut slot = [0u8; 16];
        DataSeg::new(len, self.lkey, self.data.addr() + at as u64).write(&mut slot);
        let wqe = WQ_OFF + (idx as usize % 64) * 64;
        self.umem.write(wqe, &slot);
        DataSeg::terminator().write(&mut slot);
        self.umem.write(wqe + 16, &slot);
        self.dbr(QP_DBR, idx + 1);
    }

    /// Posts a signaled SEND of `len` bytes at `at` as WQE `pi`, then rings the UAR.
    fn post_send(&self, pi: u16, at: usize, len: u32) {
        let mut ctrl = [0u8; 16];
        CtrlSeg::new(pi, WqeOpcode::Send, self.qpn, 2, FmCeSe::CQ_UPDATE).write(&mut ctrl);
        let mut data = [0u8; 16];
        DataSeg::new(len, self.lkey, self.data.addr() + at as u64).write(&mut data);
        let wqe = SQ_OFF + (pi as usize % 64) * 64;
        self.umem.write(wqe, &ctrl);
        self.umem.write(wqe + 16, &data);
        self.dbr(QP_DBR + 4, pi as u32 + 1);
        // The doorbell: the control segment's first 8 bytes to the UAR page's BlueFlame
        // register, through the application's mapping of the page as libmlx5 writes it
        // (the doorbell record must be visible first: the Release fence in `dbr`).
        let word = u64::from_ne_bytes(ctrl[..8].try_into().unwrap());
        // SAFETY: the mapping is the UAR page (at least 4 KiB) and lives as long as
        // `self`; BF_OFFSET + 8 is inside it; a doorbell is one aligned 8-byte store.
        unsafe { std::ptr::write_volatile(self.uar_map.as_ptr().add(prm::uar::BF_OFFSET).cast::<u64>(), word) };
    }

    /// Waits for the next CQE of the DevX CQ: (opcode, byte count, wqe counter).
    fn poll(&mut self) -> (u8, u32, u16) {
        let idx = self.cq_ci as usize & ((1 << LOG_CQ) - 1);
        let owner = (self.cq_ci >> LOG_CQ) as u8 & 1;
        let at = CQ_OFF + idx * 64;
        common::wait_until("a DevX CQE", || {
            let op_own = self.umem.read()[at + 63];
            op_own >> 4 != 0xf && op_own & 1 == owner
        });
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let c = self.umem.read()[at..at + 64].to_vec();
        self.cq_ci += 1;
        self.dbr(CQ_DBR, self.cq_ci & 0xff_ffff);
        let byte_cnt = u32::from_be_bytes(c[44..48].try_into().unwrap());
        let wqe_counter = u16::from_be_bytes(c[60..62].try_into().unwrap());
        (c[63] >> 4, byte_cnt, wqe_counter)
    }
}

#[test]
fn devx_rc_qp_talks_to_a_verbs_qp() {
    let a = Host::new([127, 40, 13, 1]);
    let b = Host::new([127, 40, 13, 2]);
    let mut x = DevxEnd::new(&a);
    let o = Opts::default();
    let mut eb = End::new(&b, &o);
    let (pa, pb) = (0x1234, 0x5678);
    x.connect(eb.qp.qpn(), b.gid(), pa, pb);
    eb.connect(&o, x.qpn, a.gid(), pb, pa);

    // DevX -> verbs: a SEND of 100 bytes into a posted receive.
    let rbuf = b.mem(4096, common::all_access());
    eb.qp.post_recv(1, &[rbuf.sge(0, 4096)]).unwrap();
    let msg: Vec<u8> = (0..100u8).map(|i| i ^ 0x5a).collect();
    x.data.write(0, &msg);
    x.post_send(0, 0, 100);
    let (opc, _, wqe) = x.poll();
    assert_eq!((opc, wqe), (prm::opcode::CqeOpcode::Req as u8, 0), "requester CQE of WQE 0");
    let wc = wait(&mut eb.rcq, 1)[0];
    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 100));
    assert_eq!(&rbuf.buf.read()[..100], &msg[..]);

    // verbs -> DevX: into the DevX QP's receive WQE.
    x.post_recv(0, 4096, 4096);
    let src = b.mem(4096, common::all_access());
    src.buf.write(0, b"through the firmware and back");
    eb.qp.post_send(2, &common::signaled(SendOp::Send, Payload::Sgl(&[Sge::new(src.addr(), 29, src.mr.lkey())]))).unwrap();
    assert_eq!(wait(&mut eb.scq, 1)[0].status, WcStatus::Success);
    let (opc, len, _) = x.poll();
    assert_eq!((opc, len), (prm::opcode::CqeOpcode::RespSend as u8, 29), "responder CQE");
    assert_eq!(&x.data.read()[4096..4096 + 29], b"through the firmware and back");
    drop(eb);
    drop(x);
    assert_eq!(a.hca.firmware().counts().qp, 0);
}
