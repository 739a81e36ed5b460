//! Unreliable Datagram: SEND and SEND_WITH_IMM, one packet per message (at most the
//! path MTU), no acknowledgements, no retransmission.
//!
//! Requester: each WQE carries its destination (Q_Key, QPN, GID) and its UDP source port
//! in its datagram segment; it leaves as a UD SEND ONLY packet with a DETH (Q_Key,
//! source QPN) and completes as soon as it is sent. A Q_Key with its top bit set means "use the QP's own Q_Key".
//! Responder: a packet whose Q_Key differs from the QP's, or that finds no receive WQE, is
//! silently dropped (counted). The receive buffer gets the 40-byte GRH area first — for
//! RoCEv2 over IPv4 the IPv4 header sits in its last 20 bytes — then the payload; the CQE
//! reports 40 + length bytes, the source QPN, the GRH as in the buffer and the RoCE v2
//! packet type of the IP version (see `cqe::recv_flags_rqpn`).

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering::Relaxed;

use crate::config::ROCE_V2_PORT;
use crate::wire::{BthRepr, DethRepr, ImmDtRepr, Opcode, RocePacket};

use super::counters::step_add;
use super::cqe::{opcode as cqe_op, recv_flags_rqpn, syndrome, Cqe};
use super::mkey;
use super::psn;
use super::qp::{destination, staging, Env, QpCtx};
use super::wqe::{Data, Op};

/// Bytes of GRH space at the start of every UD receive buffer.
pub const GRH_LEN: usize = 40;

/// The GRH area for a datagram from `src` to `dst` carrying `udp_payload` bytes: zeros,
/// then (IPv4) the IPv4 header the packet travelled with.
fn grh(src: IpAddr, dst: IpAddr, udp_payload: usize) -> [u8; GRH_LEN] {
    let mut g = [0u8; GRH_LEN];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let h = &mut g[20..];
            h[0] = 0x45;
            let total = (20 + 8 + udp_payload).min(u16::MAX as usize) as u16;
            h[2..4].copy_from_slice(&total.to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = 17;
            h[12..16].copy_from_slice(&s.octets());
            h[16..20].copy_from_slice(&d.octets());
            let sum = h.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum::<u32>();
            let sum = (sum & 0xffff) + (sum >> 16);
            let sum = (sum & 0xffff) + (sum >> 16);
            h[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        }
        (s, d) => {
            // IPv6: version, payload length, next header UDP, hop limit, addresses.
            let v6 = |a: IpAddr| match a {
                IpAddr::V6(a) => a.octets(),
                IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            };
            g[0] = 0x60;
            g[4..6].copy_from_slice(&((8 + udp_payload).min(u16::MAX as usize) as u16).to_be_bytes());
            g[6] = 17;
            g[7] = 64;
            g[8..24].copy_from_slice(&v6(s));
            g[24..40].copy_from_slice(&v6(d));
        }
    }
    g
}

impl QpCtx {
    /// Sends queued UD WQEs; each completes when it leaves.
    pub fn pump_ud(&mut self, env: &mut Env<'_>, budget: usize) {
        let mut sent = 0;
        while sent < budget {
            let r = &self.req;
            let Some(w) = r.wqes.get(r.tx_idx) else { break };
            if w.error.is_some() {
                break;
            }
            let idx = r.tx_idx;
            let (Some(av), Op::Send { imm }) = (w.ud, w.op) else {
                self.req.tx_idx += 1;
                continue;
            };
            // Resolved as the kernel resolves an AH's GID (a link-local one on softhca's
            // link, see Config::peer_addr).
            let Some(dst) = destination(env.hca.config().peer_addr(&av.dgid), &av.dgid) else {
                self.req.wqes[idx].error = Some(syndrome::LOCAL_QP_OP);
                break;
            };
            let len = w.len as usize;
            let buf = staging(env.scratch, len);
            let ok = match &w.data {
                Data::Sgl(s) => mkey::gather(env.hca, env.keys, &self.qp.pd, s, 0, buf).is_ok(),
                Data::Inline(b) => {
                    buf.copy_from_slice(b);
                    true
                }
                // Gathered into `Inline` when the WQE was fetched.
                Data::Mixed(_) => false,
            };
            if !ok {
                self.req.wqes[idx].error = Some(syndrome::LOCAL_PROT);
                break;
            }
            let qkey = if av.qkey & 0x8000_0000 != 0 { self.attrs.qkey } else { av.qkey };
            let op = if imm.is_some() { Opcode::UdSendOnlyWithImm } else { Opcode::UdSendOnly };
            let mut bth = BthRepr::new(op, av.dqpn, w.first_psn);
            bth.solicited = w.solicited;
            let mut pkt = RocePacket::new(bth, &env.scratch[..len]);
            pkt.deth = Some(DethRepr { qkey, src_qpn: self.qp.qpn });
            pkt.immdt = imm.map(|imm| ImmDtRepr { imm });
            env.tx.send(&pkt, SocketAddr::new(dst.ip(), ROCE_V2_PORT), av.sport, env.counters);
            step_add(&env.counters.dma_read_bytes, len as u64);
            let w = &mut self.req.wqes[idx];
            w.done = true;
            w.acked = w.npsn;
            self.req.tx_idx += 1;
            self.req.snd_max = psn::add(self.req.snd_max, 1);
            sent += 1;
            env.work = true;
        }
        self.retire(env);
    }

    /// A UD packet for this QP from `src`.
    pub fn on_ud(&mut self, pkt: &RocePacket<'_>, env: &mut Env<'_>, src: SocketAddr, dst: SocketAddr, wire_len: usize) {
        if !matches!(self.state, crate::objects::QpState::Rtr | crate::objects::QpState::Rts) {
            env.counters.rx_no_qp.fetch_add(1, Relaxed);
            return;
        }
        let Some(deth) = pkt.deth else { return };
        if deth.qkey != self.attrs.qkey {
            env.counters.rx_bad_qkey.fetch_add(1, Relaxed);
            return;
        }
        let Some(sges) = self.peek_recv() else {
            env.counters.rx_no_recv.fetch_add(1, Relaxed);
            return;
        };
        let g = grh(src.ip(), dst.ip(), wire_len);
        let total = (GRH_LEN + pkt.payload.len()) as u64;
        if total > mkey::capacity(&sges) {
            self.complete_recv_error(env, syndrome::LOCAL_LENGTH);
            return;
        }
        // The SRQ's PD for a WQE from an SRQ (see the responder's SEND).
        let pd = match &self.qp.srq {
            Some(s) => &s.pd,
            None => &self.qp.pd,
        };
        if mkey::scatter(env.hca, env.keys, pd, &sges, 0, &g).is_err() || mkey::scatter(env.hca, env.keys, pd, &sges, GRH_LEN as u64, pkt.payload).is_err() {
            self.complete_recv_error(env, syndrome::LOCAL_PROT);
            return;
        }
        step_add(&env.counters.dma_write_bytes, total);
        tracing::trace!(target: "softhca::responder", qpn = self.qp.qpn, src_qpn = deth.src_qpn, len = pkt.payload.len(), "UD receive");
        let imm = pkt.immdt.map(|i| i.imm);
        let cqe = Cqe {
            opcode: if imm.is_some() { cqe_op::RESP_SEND_IMM } else { cqe_op::RESP_SEND },
            wqe_counter: self.recv_index(),
            byte_cnt: total as u32,
            imm: imm.unwrap_or(0),
            flags_rqpn: recv_flags_rqpn(true, Some(src.ip()), deth.src_qpn),
            solicited: pkt.bth.solicited,
            ..Default::default()
        };
        self.consume_recv();
        self.complete(env, false, cqe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_grh_checksum() {
        let g = grh("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 100);
        let h = &g[20..];
        let sum: u32 = h.chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]]) as u32).sum();
        let folded = (sum & 0xffff) + (sum >> 16);
        assert_eq!(folded & 0xffff, 0xffff, "a valid header sums to all ones");
        assert_eq!(u16::from_be_bytes([h[2], h[3]]), 128);
        assert!(g[..20].iter().all(|&b| b == 0));
    }
}
