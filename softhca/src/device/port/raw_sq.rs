//! A raw packet QP's send queue: each send WQE becomes one Ethernet frame.
//!
//! The WQE, as libmlx5's `mlx5_post_send` builds it for IBV_QPT_RAW_PACKET: the
//! control segment (opcode SEND), the Ethernet segment ([`prm::wqe::eth::EthSeg`]:
//! checksum flags, MSS, `inline_hdr_sz`, then that many bytes of the frame's start from
//! byte 14 of the segment on, continuing into the 16-byte units that follow; the
//! segment takes `ceil((14 + inline_hdr_sz) / 16)` units), then data segments or
//! inline data with the rest of the frame. The frame is the inline bytes followed by
//! the gathered data; one shorter than 60 bytes is padded with zeros to 60, as the
//! MAC pads it (the FCS is the interface's).
//!
//! Errors, completed as a requester error CQE and moving the QP to ERR (the flush then
//! completes what follows): an opcode other than SEND or NOP (TSO is not advertised),
//! a WQE too short to hold the Ethernet segment, or inline headers or segments that
//! run past `ds`: LOCAL_QP_OP_ERR; a frame shorter than an Ethernet header (14
//! bytes) or one the interface refuses as too long (EMSGSIZE): LOCAL_LENGTH_ERR; a
//! data segment outside its key: LOCAL_PROT_ERR. softhca reports `eth_min_inline`
//! NONE (libmlx5 then inlines no header), so a WQE with fewer inline bytes than a
//! header is legal: only the frame as a whole must hold one. Checksum offload flags
//! are ignored (`IBV_DEVICE_RAW_IP_CSUM` is not advertised, so libmlx5 refuses
//! IBV_SEND_IP_CSUM itself).

use std::sync::atomic::Ordering::Relaxed;

use prm::opcode::WqeOpcode;
use prm::wqe::eth::EthSeg;

use super::socket::PacketSocket;
use crate::device::counters::step_add;
use crate::device::cqe::{opcode as cqe_op, syndrome, Cqe};
use crate::device::mkey;
use crate::device::qp::{Env, QpCtx};
use crate::device::wqe::{self, Ctrl, Data, Piece, WqeError};

/// The shortest frame on the wire, without its FCS.
pub const MIN_FRAME: usize = 60;

/// Where the inline headers start inside the Ethernet segment.
const INLINE_AT: usize = 14;

/// What a raw send WQE asks for.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RawSend {
    Nop,
    Frame { head: Vec<u8>, data: Data },
}

/// Decodes a raw packet QP's send WQE (`wqe`: its `ds * 16` bytes, unwrapped); the
/// error is the CQE syndrome.
pub(crate) fn parse(ctrl: &Ctrl, wqe: &[u8]) -> Result<RawSend, u8> {
    let ds = ctrl.ds as usize;
    if ds == 0 || wqe.len() < ds * 16 {
        return Err(syndrome::LOCAL_QP_OP);
    }
    match WqeOpcode::from_u8(ctrl.opcode) {
        Some(WqeOpcode::Nop) => return Ok(RawSend::Nop),
        Some(WqeOpcode::Send) => {}
        _ => return Err(syndrome::LOCAL_QP_OP),
    }
    // Control segment plus at least the Ethernet segment's first unit.
    if ds < 2 {
        return Err(syndrome::LOCAL_QP_OP);
    }
    let mut eth = [0u8; 32];
    let n = (wqe.len() - 16).min(32);
    eth[..n].copy_from_slice(&wqe[16..16 + n]);
    let inl = EthSeg::view(&eth).inline_hdr_sz.get() as usize;
    let units = (INLINE_AT + inl).div_ceil(16);
    if 1 + units > ds {
        return Err(syndrome::LOCAL_QP_OP);
    }
    let head = wqe[16 + INLINE_AT..16 + INLINE_AT + inl].to_vec();
    let data = wqe::parse_payload(&wqe[16 + units * 16..ds * 16]).map_err(|e| match e {
        WqeError::Length(_) => syndrome::LOCAL_LENGTH,
        _ => syndrome::LOCAL_QP_OP,
    })?;
    Ok(RawSend::Frame { head, data })
}

impl QpCtx {
    /// Reads the SQ doorbell record and sends every frame it publishes (`sock`: the
    /// port, None when there is none).
    pub(crate) fn raw_send(&mut self, env: &mut Env<'_>, sock: Option<&PacketSocket>) {
        if self.qp.sq_wqe_count == 0 {
            return;
        }
        let pi = self.load_sq_pi();
        if pi != self.sq_pi {
            env.counters.sq_doorbells.fetch_add(1, Relaxed);
            self.sq_pi = pi;
            env.work = true;
        }
        while self.sq_ci != self.sq_pi {
            let index = self.sq_ci;
            let ctrl = self.read_ctrl(index);
            let n = ctrl.wqebbs().min(self.sq_pi.wrapping_sub(index));
            let mut b = vec![0u8; n as usize * wqe::WQEBB];
            self.read_sq(index, &mut b);
            self.sq_ci = self.sq_ci.wrapping_add(n);
            env.counters.wqes_fetched.fetch_add(1, Relaxed);
            let sent = match parse(&ctrl, &b) {
                Ok(RawSend::Nop) => Ok(()),
                Ok(RawSend::Frame { head, data }) => self.emit(env, sock, head, &data),
                Err(s) => Err(s),
            };
            if let Err(s) = sent {
                tracing::debug!(target: "softhca::port", qpn = self.qpn(), index, opcode = ctrl.opcode, syndrome = s, "raw send error");
                self.complete_send_error(env, index, ctrl.opcode, s);
                self.enter_error(env, None);
                return;
            }
            if ctrl.signaled() || self.qp.sq_sig_all {
                let cqe = Cqe { opcode: cqe_op::REQ, wqe_opcode: ctrl.opcode, wqe_counter: index, ..Default::default() };
                self.complete(env, true, cqe);
            }
        }
    }

    /// Builds the frame of one WQE and puts it on the wire.
    fn emit(&mut self, env: &mut Env<'_>, sock: Option<&PacketSocket>, mut frame: Vec<u8>, data: &Data) -> Result<(), u8> {
        let pd = &self.qp.pd;
        let mut gather = |frame: &mut Vec<u8>, sges: &[wqe::Sge]| -> Result<(), u8> {
            let len: u64 = sges.iter().map(|s| s.len as u64).sum();
            if len > 1 << 16 {
                return Err(syndrome::LOCAL_LENGTH);
            }
            let at = frame.len();
            frame.resize(at + len as usize, 0);
            mkey::gather(env.hca, env.keys, pd, sges, 0, &mut frame[at..]).map_err(|_| syndrome::LOCAL_PROT)
        };
        match data {
            Data::Sgl(s) => gather(&mut frame, s)?,
            Data::Inline(b) => frame.extend_from_slice(b),
            Data::Mixed(pieces) => {
                for p in pieces {
                    match p {
                        Piece::Inline(b) => frame.extend_from_slice(b),
                        Piece::Sge(s) => gather(&mut frame, std::slice::from_ref(s))?,
                    }
                }
            }
        }
        if frame.len() < super::frame::ETH_HLEN {
            return Err(syndrome::LOCAL_LENGTH);
        }
        if frame.len() < MIN_FRAME {
            frame.resize(MIN_FRAME, 0);
        }
        step_add(&env.counters.dma_read_bytes, frame.len() as u64);
        let Some(sock) = sock else {
            env.counters.eth_tx_dropped.fetch_add(1, Relaxed);
            return Ok(());
        };
        match sock.send(&frame) {
            Ok(()) => {
                step_add(&env.counters.eth_tx_frames, 1);
                step_add(&env.counters.eth_tx_bytes, frame.len() as u64);
                env.work = true;
                Ok(())
            }
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => Err(syndrome::LOCAL_LENGTH),
            Err(e) => {
                // Lost on the wire (a full interface queue): the WQE still completes.
                tracing::debug!(target: "softhca::port", qpn = self.qpn(), "frame dropped: {e}");
                env.counters.eth_tx_dropped.fetch_add(1, Relaxed);
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prm::opcode::FmCeSe;
    use prm::wqe::CtrlSeg;

    /// A raw send WQE as libmlx5 lays it out: ctrl, eth seg with `inl` header bytes of
    /// `frame`, then the rest inline.
    fn wqe(frame: &[u8], inl: usize) -> (Ctrl, Vec<u8>) {
        let units = (INLINE_AT + inl).div_ceil(16);
        let rest = &frame[inl..];
        let inline_units = (4 + rest.len()).div_ceil(16);
        let ds = 1 + units + inline_units;
        let mut b = vec![0u8; ds.div_ceil(4) * 64];
        let mut c = [0u8; 16];
        CtrlSeg::new(0, WqeOpcode::Send, 0x123, ds as u8, FmCeSe::CQ_UPDATE).write(&mut c);
        b[..16].copy_from_slice(&c);
        b[16 + 12..16 + 14].copy_from_slice(&(inl as u16).to_be_bytes());
        b[16 + INLINE_AT..16 + INLINE_AT + inl].copy_from_slice(&frame[..inl]);
        let at = 16 + units * 16;
        b[at..at + 4].copy_from_slice(&(0x8000_0000u32 | rest.len() as u32).to_be_bytes());
        b[at + 4..at + 4 + rest.len()].copy_from_slice(rest);
        (Ctrl::parse(&c), b)
    }

    #[test]
    fn inline_header_and_inline_rest() {
        let frame: Vec<u8> = (0..64u8).collect();
        for inl in [0, 14, 18, 30] {
            let (c, b) = wqe(&frame, inl);
            let RawSend::Frame { head, data } = parse(&c, &b).unwrap() else { panic!("nop") };
            assert_eq!(head, &frame[..inl]);
            assert_eq!(data, Data::Inline(frame[inl..].to_vec()), "inl {inl}");
        }
    }

    #[test]
    fn malformed() {
        let frame = [0u8; 64];
        let (mut c, b) = wqe(&frame, 18);
        c.ds = 1;
        assert_eq!(parse(&c, &b), Err(syndrome::LOCAL_QP_OP), "no eth segment");
        let (c, mut b) = wqe(&frame, 18);
        b[16 + 12..16 + 14].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(parse(&c, &b), Err(syndrome::LOCAL_QP_OP), "inline headers past ds");
        let (mut c, b) = wqe(&frame, 18);
        c.opcode = WqeOpcode::RdmaWrite as u8;
        assert_eq!(parse(&c, &b), Err(syndrome::LOCAL_QP_OP), "RDMA on a raw QP");
    }
}
