//! A raw packet QP's receive queue: a frame steered to its TIR fills the next receive
//! WQE, and the CQE says what a ConnectX's parser found.
//!
//! The CQE (`MLX5_CQE_RESP_SEND`, as libmlx5's `handle_responder` reads it):
//! `byte_cnt` the frame's length (FCS not scattered), `wqe_counter` the RQ WQE,
//! `hds_ip_ext` the L2/L3/L4 OK bits and `l4_hdr_type_etc` the header types
//! ([`super::frame`]), and `sop_drop_qpn` the flow tag of the rule that steered it
//! (libmlx5's `mlx5_cq_read_flow_tag` reads its low 24 bits there; 0 for none). With
//! CQE version 1 the QP is named by its user index, as for every other CQE.
//! A frame longer than the WQE's buffers completes the WQE with LOCAL_LENGTH_ERR, one
//! outside the WQE's keys with LOCAL_PROT_ERR; with no WQE posted it is dropped
//! (counted `eth_rx_no_recv`), as an Ethernet RQ drops it.

use std::sync::atomic::Ordering::Relaxed;

use super::frame::FrameInfo;
use crate::device::counters::step_add;
use crate::device::cqe::{opcode as cqe_op, syndrome, Cqe};
use crate::device::mkey;
use crate::device::qp::{Env, QpCtx};

impl QpCtx {
    /// Places `frame` in the next receive WQE (see the module doc); whether one was
    /// posted.
    pub(crate) fn raw_receive(&mut self, env: &mut Env<'_>, frame: &[u8], info: &FrameInfo, flow_tag: u32) -> bool {
        let Some(sges) = self.peek_recv() else {
            env.counters.eth_rx_no_recv.fetch_add(1, Relaxed);
            return false;
        };
        if frame.len() as u64 > mkey::capacity(&sges) {
            self.complete_recv_error(env, syndrome::LOCAL_LENGTH);
            return true;
        }
        if mkey::scatter(env.hca, env.keys, &self.qp.pd, &sges, 0, frame).is_err() {
            self.complete_recv_error(env, syndrome::LOCAL_PROT);
            return true;
        }
        step_add(&env.counters.dma_write_bytes, frame.len() as u64);
        let cqe = Cqe {
            opcode: cqe_op::RESP_SEND,
            wqe_counter: self.recv_index(),
            byte_cnt: frame.len() as u32,
            hds_ip_ext: info.ok,
            l4_hdr_type_etc: info.l4_hdr_type_etc(),
            flow_tag: Some(flow_tag & 0xff_ffff),
            ..Default::default()
        };
        tracing::trace!(target: "softhca::port", qpn = self.qpn(), len = frame.len(), l3 = info.l3, l4 = info.l4, ok = info.ok, "raw receive");
        self.consume_recv();
        self.complete(env, false, cqe);
        true
    }
}
