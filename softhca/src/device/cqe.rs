//! Writing CQEs the way a ConnectX does, and the device's side of each CQ: its producer
//! index and overrun detection.
//!
//! The layouts written are the `prm` crate's [`Cqe64`] and, for error CQEs (opcode 13
//! requester, 14 responder), [`ErrCqe`](prm::cqe::ErrCqe): the same definitions the
//! provider polls with. A 128-byte CQE holds the 64-byte one in its second half. Fields
//! set: `flags_rqpn` (GRH place, RoCE packet type, source QP: [`recv_flags_rqpn`]), `srqn_uidx` (the QP's user index with
//! CQE version 1), immediate, `byte_cnt`, timestamp, `sop_drop_qpn` (requester: the WQE
//! opcode echoed in the top byte), `wqe_counter`, `op_own`; error CQEs set
//! `vendor_err_synd` and `syndrome` instead of the data fields.
//!
//! Ownership and ordering: entry `pi` is written on lap `pi / entries` with owner bit
//! `(pi / entries) & 1` (= `!!(pi & entries)`), which is what the consumer expects at
//! that index. The body is stored first, then `op_own` with a release store, so a
//! consumer that sees the new `op_own` and issues an acquire fence reads the whole body.
//! Before writing, the consumer index is read from the CQ doorbell record with an
//! acquire load; a full ring (`pi - ci == entries`) is an overrun: the CQE is not written.

use std::net::IpAddr;
use std::sync::Arc;

use prm::cqe::{roce_flags_rqpn, Cqe64, CqeOpcode, GrhIn, RocePacketType, Syndrome};
use prm::dbrec::{CQ_ARM_DB, CQ_CI_MASK, CQ_SET_CI};
use zerocopy::byteorder::big_endian::{U16, U32, U64};

use crate::objects::Cq;

use super::mem;

/// CQE opcodes (the `op_own` high nibble): [`CqeOpcode`]'s numbers as bytes.
pub mod opcode {
    use super::CqeOpcode;
    pub const REQ: u8 = CqeOpcode::Req as u8;
    pub const RESP_WR_IMM: u8 = CqeOpcode::RespWrImm as u8;
    pub const RESP_SEND: u8 = CqeOpcode::RespSend as u8;
    pub const RESP_SEND_IMM: u8 = CqeOpcode::RespSendImm as u8;
    pub const REQ_ERR: u8 = CqeOpcode::ReqErr as u8;
    pub const RESP_ERR: u8 = CqeOpcode::RespErr as u8;
}

/// Error syndromes (`mlx5_err_cqe.syndrome`): [`Syndrome`]'s numbers as bytes.
pub mod syndrome {
    use super::Syndrome;
    pub const LOCAL_LENGTH: u8 = Syndrome::LocalLengthErr as u8;
    pub const LOCAL_QP_OP: u8 = Syndrome::LocalQpOpErr as u8;
    pub const LOCAL_PROT: u8 = Syndrome::LocalProtErr as u8;
    pub const WR_FLUSH: u8 = Syndrome::WrFlushErr as u8;
    pub const BAD_RESP: u8 = Syndrome::BadRespErr as u8;
    pub const LOCAL_ACCESS: u8 = Syndrome::LocalAccessErr as u8;
    pub const REMOTE_INVAL_REQ: u8 = Syndrome::RemoteInvalReqErr as u8;
    pub const REMOTE_ACCESS: u8 = Syndrome::RemoteAccessErr as u8;
    pub const REMOTE_OP: u8 = Syndrome::RemoteOpErr as u8;
    pub const TRANSPORT_RETRY_EXC: u8 = Syndrome::TransportRetryExcErr as u8;
    pub const RNR_RETRY_EXC: u8 = Syndrome::RnrRetryExcErr as u8;
}

/// The vendor syndrome softhca reports with each syndrome (`ibv_wc.vendor_err`): values
/// commonly seen from ConnectX adapters where known, else 0.
pub fn vendor_err(syndrome: u8) -> u8 {
    match syndrome {
        self::syndrome::WR_FLUSH => 0xf9,
        self::syndrome::TRANSPORT_RETRY_EXC => 0x81,
        self::syndrome::RNR_RETRY_EXC => 0x82,
        self::syndrome::REMOTE_ACCESS => 0x88,
        self::syndrome::REMOTE_INVAL_REQ => 0x8a,
        self::syndrome::REMOTE_OP => 0x89,
        self::syndrome::LOCAL_PROT => 0x56,
        self::syndrome::LOCAL_QP_OP => 0x68,
        self::syndrome::LOCAL_LENGTH => 0x57,
        _ => 0,
    }
}

/// `flags_rqpn` of a receive CQE for a packet that came from `src` (see
/// [`prm::cqe::flags_rqpn`]): the RoCE v2 packet type of its IP version, and for UD the
/// GRH reported as scattered to the buffer (a ConnectX writes it there; RC and UC
/// report none). `src_qp` is the sender's QPN (UD: the DETH's; RC/UC: the connected
/// peer's).
pub fn recv_flags_rqpn(ud: bool, src: Option<IpAddr>, src_qp: u32) -> u32 {
    let ty = match src.map(|a| a.to_canonical()) {
        Some(IpAddr::V6(_)) => RocePacketType::Ipv6,
        _ => RocePacketType::Ipv4,
    };
    roce_flags_rqpn(if ud { GrhIn::Buffer } else { GrhIn::None }, ty, src_qp)
}

/// The fields of one CQE.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cqe {
    pub opcode: u8,
    pub qpn: u32,
    /// Requester CQEs: the WQE opcode echoed in `sop_drop_qpn[31:24]`.
    pub wqe_opcode: u8,
    pub wqe_counter: u16,
    pub uidx: u32,
    pub byte_cnt: u32,
    pub imm: u32,
    /// Responder CQEs: the sender's QPN, GRH place and RoCE packet type
    /// ([`recv_flags_rqpn`]).
    pub flags_rqpn: u32,
    pub timestamp: u64,
    pub solicited: bool,
    /// Error CQEs: the syndrome.
    pub syndrome: u8,
    /// Raw packet receive CQEs: the parser's L2/L3/L4 OK bits and header types
    /// ([`super::port::frame`]).
    pub hds_ip_ext: u8,
    pub l4_hdr_type_etc: u8,
    /// Raw packet receive CQEs: the steering rule's flow tag, which a ConnectX writes in
    /// `sop_drop_qpn` instead of the QP number.
    pub flow_tag: Option<u32>,
}

impl Cqe {
    /// The CQE with `op_own` still zero (it is stored last, by [`CqCtx::write`]; see
    /// [`Cqe::op_own`]).
    pub fn body(&self) -> Cqe64 {
        let mut c = Cqe64::zeroed();
        c.set_srqn_uidx(self.uidx);
        c.wqe_counter = U16::new(self.wqe_counter);
        if self.is_error() {
            let e = c.as_err_mut();
            e.vendor_err_synd = vendor_err(self.syndrome);
            e.syndrome = self.syndrome;
            c.set_sop_drop_qpn(self.wqe_opcode, self.qpn);
        } else {
            c.flags_rqpn = U32::new(self.flags_rqpn);
            c.imm_inval_pkey = U32::new(self.imm);
            c.byte_cnt = U32::new(self.byte_cnt);
            c.timestamp = U64::new(self.timestamp);
            c.hds_ip_ext = self.hds_ip_ext;
            c.l4_hdr_type_etc = self.l4_hdr_type_etc;
            let top = if self.opcode == opcode::REQ { self.wqe_opcode } else { 0 };
            c.set_sop_drop_qpn(top, self.flow_tag.unwrap_or(self.qpn));
        }
        c
    }

    /// `op_own` for lap parity `owner`.
    pub fn op_own(&self, owner: bool) -> u8 {
        Cqe64::make_op_own(self.opcode, self.solicited, owner)
    }

    pub fn is_error(&self) -> bool {
        self.opcode == opcode::REQ_ERR || self.opcode == opcode::RESP_ERR
    }
}

/// Why a CQE was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqError {
    /// No such CQ (destroyed).
    Gone,
    /// The ring is full (or was overrun before).
    Overrun,
}

/// An armed request for one completion event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arm {
    /// The arm sequence number the command carried (2 bits).
    pub sn: u8,
    /// Consumer index at arming: the event fires for a CQE at an index at or after it.
    pub ci: u32,
    pub solicited_only: bool,
}

/// The device's context for one CQ.
#[derive(Debug)]
pub struct CqCtx {
    pub cq: Arc<Cq>,
    /// Producer index: CQEs written so far.
    pub pi: u32,
    /// Index + 1 of the last solicited or error CQE (for solicited-only arming).
    pub last_solicited: Option<u32>,
    /// The doorbell record's arm word is a mailbox the device empties (it took the
    /// marker at creation); otherwise arms are sampled (see `super::events`).
    pub mailbox: bool,
    /// Sampling only: the arm word last seen in the doorbell record.
    pub arm_word: u32,
    /// Sampling only: the 8-byte value last seen at the arm register (UAR page + 0x20).
    pub arm_reg: u64,
    pub armed: Option<Arm>,
    /// The sequence number of the last event fired: an arm command carrying it is stale.
    pub fired_sn: Option<u8>,
    /// The producer index when the last event fired: the CQEs before it are covered by
    /// an event and fire none again.
    pub covered: u32,
    /// An overrun happened: the CQ is in error and takes no more CQEs.
    pub overrun: bool,
    /// What `Cq::dev` last showed.
    published: (u32, Option<Arm>),
}

impl CqCtx {
    /// The device's side of a new CQ. `arm_reg` is the arm register's value now (so an
    /// earlier arm on a reused page is not taken for one of this CQ's when sampling).
    pub fn new(cq: Arc<Cq>, arm_reg: u64) -> CqCtx {
        let at = cq.db_addr + 4 * CQ_ARM_DB as u64;
        // A new CQ is disarmed whatever the record held: the marker goes in (through the
        // checked copy, so a page the device cannot write is found here, once, and not
        // by a fault on the engine thread).
        let mailbox = crate::uaccess::copy_to_user(at, &super::events::ARM_TAKEN.to_be_bytes()).is_ok();
        // Read through the checked copy too: CREATE_CQ found the page mapped, but nothing
        // pins it (the firmware fuzz test hands out addresses of memory other test
        // threads unmap; a raw load there crashed one run in five).
        let mut w = [0u8; 4];
        let arm_word = match crate::uaccess::copy_from_user(&mut w, at) {
            Ok(()) => {
                std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
                u32::from_be_bytes(w)
            }
            Err(_) => 0,
        };
        if !mailbox {
            tracing::debug!(target: "softhca::events", cqn = cq.cqn, "CQ doorbell record not writable: arm doorbells sampled");
        }
        CqCtx { cq, pi: 0, last_solicited: None, mailbox, arm_word, arm_reg, armed: None, fired_sn: None, covered: 0,
                overrun: false, published: (0, None) }
    }

    /// Mirrors the producer index and arming into `Cq::dev` when they changed.
    pub fn publish(&mut self) {
        let now = (self.pi, self.armed);
        if now != self.published {
            self.published = now;
            let mut d = self.cq.dev.lock().unwrap_or_else(|p| p.into_inner());
            d.producer_index = self.pi;
            d.armed = self.armed.map(|a| (a.sn as u32, a.ci));
            d.solicited_only = self.armed.is_some_and(|a| a.solicited_only);
        }
    }

    /// The consumer index the application published (24 bits).
    pub fn consumer_index(&self) -> u32 {
        // SAFETY: the CQ doorbell record is live while the CQ is (see `mem`). The acquire
        // pairs with the poller's release store of the index: its reads of the CQEs it
        // consumed happen before we overwrite those entries.
        unsafe { mem::load_be32_acquire(self.cq.db_addr + 4 * CQ_SET_CI as u64) & CQ_CI_MASK }
    }

    /// Whether the ring has room for one more CQE.
    pub fn has_room(&self) -> bool {
        !self.overrun && (self.pi.wrapping_sub(self.consumer_index()) & 0xff_ffff) < self.cq.entries
    }

    /// Writes one CQE at the producer index.
    pub fn write(&mut self, cqe: &Cqe) -> Result<u32, CqError> {
        if !self.has_room() {
            self.overrun = true;
            return Err(CqError::Overrun);
        }
        let cq = &self.cq;
        let idx = self.pi & (cq.entries - 1);
        let slot = cq.buf_addr + idx as u64 * cq.cqe_size as u64 + (cq.cqe_size as u64 - 64);
        let owner = self.pi & cq.entries != 0;
        let body = cqe.body();
        let body = body.as_bytes();
        // SAFETY: slot..slot+64 is entry `idx` of the CQ ring given at CREATE_CQ (checked
        // writable, alive until the destroy hook, which waits for the engine lock we
        // hold). The consumer does not read the entry before its op_own changes.
        unsafe {
            mem::write(slot, &body[..63]);
            mem::store_u8_release(slot + 63, cqe.op_own(owner));
        }
        let at = self.pi;
        self.pi = self.pi.wrapping_add(1);
        if cqe.solicited || cqe.is_error() {
            self.last_solicited = Some(self.pi);
        }
        tracing::trace!(target: "softhca::cqe", cqn = cq.cqn, opcode = cqe.opcode, qpn = cqe.qpn,
                        wqe_counter = cqe.wqe_counter, owner, index = at, byte_cnt = cqe.byte_cnt,
                        syndrome = cqe.syndrome, "cqe");
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts() {
        let c = Cqe { opcode: opcode::REQ, qpn: 0x10abcd, wqe_opcode: 0x08, wqe_counter: 0x1234, uidx: 3,
                      byte_cnt: 99, timestamp: 0x0102030405060708, ..Default::default() };
        let b = *c.body().as_bytes();
        assert_eq!(&b[56..60], &[0x08, 0x10, 0xab, 0xcd]);
        assert_eq!(&b[60..62], &[0x12, 0x34]);
        assert_eq!(&b[32..36], &[0, 0, 0, 3]);
        assert_eq!(&b[44..48], &[0, 0, 0, 99]);
        assert_eq!(&b[48..56], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(c.op_own(true), 0x01);
        let e = Cqe { opcode: opcode::REQ_ERR, qpn: 0x108, wqe_opcode: 0x0a, wqe_counter: 7,
                      syndrome: syndrome::TRANSPORT_RETRY_EXC, ..Default::default() };
        let b = *e.body().as_bytes();
        assert_eq!((b[54], b[55]), (0x81, 0x15));
        assert_eq!(&b[56..60], &[0x0a, 0, 0x01, 0x08]);
        assert_eq!(e.op_own(false), 0xd0);
        let r = Cqe { opcode: opcode::RESP_SEND_IMM, imm: 0x11223344, solicited: true, ..Default::default() };
        assert_eq!(&r.body().as_bytes()[36..40], &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(r.op_own(true), 0x33);
    }

    /// `flags_rqpn` of receive CQEs, decoded with the readers' own formulas: libmlx5
    /// (rdma-core providers/mlx5/cq.c, `handle_responder`) sets IBV_WC_GRH when
    /// `(flags_rqpn >> 28) & 3` is non-zero and returns `(flags_rqpn >> 24) & 0xf` as
    /// `wc->sl` and the low 24 bits as `wc->src_qp`; mlx5_ib (linux
    /// drivers/infiniband/hw/mlx5/cq.c, `handle_responder`) takes `(flags_rqpn >> 24) & 3`
    /// as the RoCE packet type, `MLX5_CQE_ROCE_L3_HEADER_TYPE_{GRH,IPV6,IPV4}` = 0, 1, 2
    /// (include/linux/mlx5/device.h), and names grh value 1 `MLX5_GRH_IN_BUFFER`.
    #[test]
    fn receive_flags_as_libmlx5_and_mlx5_ib_read_them() {
        let word = |ud, src: &str, qpn| {
            let c = Cqe { opcode: opcode::RESP_SEND, flags_rqpn: recv_flags_rqpn(ud, Some(src.parse().unwrap()), qpn), ..Default::default() };
            let b = c.body();
            let b = b.as_bytes();
            u32::from_be_bytes([b[24], b[25], b[26], b[27]])
        };
        let grh = |w: u32| (w >> 28) & 3;
        let sl = |w: u32| (w >> 24) & 0xf;
        let roce_type = |w: u32| (w >> 24) & 3;
        // UD over IPv4: GRH in the buffer (1), RoCE v2 over IPv4 (2).
        let w = word(true, "10.0.0.1", 0xab_cdef);
        assert_eq!((grh(w), sl(w), roce_type(w), w & 0xff_ffff), (1, 2, 2, 0xab_cdef));
        // UD over IPv6: RoCE v2 over IPv6 (1); a v4-mapped address is IPv4 on the wire.
        let w = word(true, "fd00::1", 7);
        assert_eq!((grh(w), sl(w), roce_type(w), w & 0xff_ffff), (1, 1, 1, 7));
        assert_eq!(roce_type(word(true, "::ffff:10.0.0.1", 7)), 2);
        // RC/UC: no GRH (IBV_WC_GRH clear), still the packet type.
        let w = word(false, "10.0.0.1", 0x12_3456);
        assert_eq!((grh(w), sl(w), w & 0xff_ffff), (0, 2, 0x12_3456));
    }
}
