//! The Ethernet port: whole frames between softhca and the host's network, the data
//! plane of raw packet QPs.
//!
//! `DOORBELL_ETH_IF=veth0` ([`crate::config::ETH_IF_ENV`]) attaches the port to that
//! interface through an AF_PACKET socket (`socket.rs`); without it there is no port
//! (raw packet QPs then send into nothing: their WQEs complete, the frames are
//! counted as `eth_tx_dropped`).
//!
//! Transmit (`raw_sq.rs`): a raw packet QP's send WQE (control segment, Ethernet
//! segment with the inline L2 headers, data segments or inline data) becomes one
//! frame written to the socket.
//!
//! Receive: every frame from the socket goes to `receive`, the steering hook. A
//! RoCEv2 frame (UDP 4791) addressed to this instance is left alone: the host's UDP
//! stack already hands it to the RDMA transport through the instance's UDP socket,
//! which is the "UDP 4791 to the RDMA transport" rule of a ConnectX. Everything else
//! is steering's to place; steering's verdict "deliver to TIR n" is
//! `deliver_to_tir`, which fills a receive WQE of the RQ behind the TIR and writes
//! the CQE (`raw_rq.rs`). A frame no rule takes (a miss of the NIC RX root table)
//! goes, in tests only, to a fan-out (`DOORBELL_ETH_TEST_FANOUT=1`,
//! [`crate::config::ETH_TEST_FANOUT_ENV`]) that delivers it to every raw packet QP
//! that can receive; without it it is counted as `eth_rx_unsteered` and dropped.

pub mod frame;
mod raw_rq;
mod raw_sq;
mod socket;

use crate::device::steer::{Dest, Steering, Verdict};
use prm::cmd::flow::table::TABLE_TYPE_NIC_RX;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;

use super::counters::step_add;
use super::qp::{Env, QpCtx};
use super::Shared;
use crate::objects::{QpState, QpType};

pub use raw_sq::MIN_FRAME;

/// An open port: the socket, the frames the receive thread queued, and that thread.
pub(crate) struct Port {
    pub sock: Arc<socket::PacketSocket>,
    queue: socket::Queue,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// This instance's address: RoCEv2 frames to it are the UDP socket's.
    local: IpAddr,
    /// The NIC RX flow tables (the firmware's flow commands program them).
    steering: Option<Arc<Steering>>,
    /// TEST-ONLY (`DOORBELL_ETH_TEST_FANOUT`): frames steering misses go to every
    /// receiving raw packet QP, for the port tests that install no rule.
    test_fanout: bool,
    /// Frames taken off the queue this step (reused).
    batch: VecDeque<Vec<u8>>,
}

impl std::fmt::Debug for Port {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Port").field("ifindex", &self.sock.ifindex).field("test_fanout", &self.test_fanout).finish_non_exhaustive()
    }
}

impl Port {
    /// Attaches to interface `name` (see the module doc).
    pub fn open(name: &str, local: IpAddr, steering: Option<Arc<Steering>>, test_fanout: bool, shared: Weak<Shared>) -> std::io::Result<Port> {
        let sock = Arc::new(socket::PacketSocket::open(name)?);
        let queue: socket::Queue = Arc::new(Mutex::new(VecDeque::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = socket::spawn(sock.clone(), queue.clone(), shared, stop.clone(), format!("shca-eth-{name}"))?;
        tracing::info!(target: "softhca::port", ifname = name, ifindex = sock.ifindex, test_fanout, "ethernet port up");
        Ok(Port { sock, queue, stop, thread: Some(thread), local, steering, test_fanout, batch: VecDeque::new() })
    }
}

impl Drop for Port {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The raw packet QP behind each TIR (the device's copy of the TIR -> RQ link; the
/// firmware's table is not taken under the engine lock).
pub(crate) type Tirs = BTreeMap<u32, u32>;

/// A receive step: every queued frame through the steering hook.
pub(crate) fn receive(port: &mut Port, qps: &mut BTreeMap<u32, QpCtx>, tirs: &Tirs, env: &mut Env<'_>) {
    {
        let mut q = port.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.is_empty() {
            return;
        }
        std::mem::swap(&mut *q, &mut port.batch);
    }
    env.work = true;
    while let Some(f) = port.batch.pop_front() {
        step_add(&env.counters.eth_rx_frames, 1);
        step_add(&env.counters.eth_rx_bytes, f.len() as u64);
        let info = frame::classify(&f);
        if info.is_roce_to(port.local) {
            // The UDP socket's: the host stack delivers it to the RDMA transport.
            continue;
        }
        tracing::trace!(target: "softhca::port", len = f.len(), l3 = info.l3, l4 = info.l4, dst = ?info.dst_ip,
                        udp_dport = ?info.udp_dport, "frame received");
        // NIC RX steering: the flow tables' verdict places the frame.
        let verdict = port.steering.as_ref().map_or(Verdict::Miss, |s| s.classify(TABLE_TYPE_NIC_RX, &f));
        tracing::trace!(target: "softhca::steer", verdict = ?verdict, "steered");
        match verdict {
            Verdict::Deliver { dest: Dest::Tir(tirn), flow_tag } => {
                deliver_to_tir(qps, tirs, env, tirn, &f, &info, flow_tag);
                continue;
            }
            Verdict::Deliver { dest: Dest::Qp(qpn), flow_tag } => {
                // A rule of the kernel half's names the QP; its TIR leads to the RQ.
                match tirs.iter().find(|(_, q)| **q == qpn).map(|(t, _)| *t) {
                    Some(tirn) => {
                        deliver_to_tir(qps, tirs, env, tirn, &f, &info, flow_tag);
                    }
                    None => {
                        env.counters.eth_rx_no_rq.fetch_add(1, Ordering::Relaxed);
                    }
                }
                continue;
            }
            Verdict::Drop => {
                env.counters.eth_rx_steer_dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            // classify follows table forwards itself; a Table verdict cannot come back.
            Verdict::Deliver { dest: Dest::Table(_), .. } | Verdict::Miss => {}
        }
        if port.test_fanout {
            // TEST-ONLY: every raw packet QP whose RQ is ready gets a copy.
            let targets: Vec<u32> = tirs.keys().copied().collect();
            for tirn in targets {
                deliver_to_tir(qps, tirs, env, tirn, &f, &info, 0);
            }
        } else {
            env.counters.eth_rx_unsteered.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Steering's verdict "deliver to TIR `tirn`" for `frame` (parsed as `info`), with the
/// flow tag of the matching rule (0 for none): the frame goes into the next receive WQE
/// of the RQ behind the TIR, and a CQE reports it. Returns whether an RQ took it.
pub(crate) fn deliver_to_tir(qps: &mut BTreeMap<u32, QpCtx>, tirs: &Tirs, env: &mut Env<'_>, tirn: u32, frame: &[u8],
                             info: &frame::FrameInfo, flow_tag: u32) -> bool {
    let Some(q) = tirs.get(&tirn).and_then(|qpn| qps.get_mut(qpn)) else {
        env.counters.eth_rx_no_rq.fetch_add(1, Ordering::Relaxed);
        return false;
    };
    // The RQ is RDY from RESET->INIT until ERR or RESET.
    if !matches!(q.state, QpState::Init | QpState::Rtr | QpState::Rts) {
        env.counters.eth_rx_no_rq.fetch_add(1, Ordering::Relaxed);
        return false;
    }
    q.raw_receive(env, frame, info, flow_tag)
}

/// The per-QP part of a step for a raw packet QP: its SQ (RDY from RESET->INIT on) or,
/// in ERR, the flush.
pub(crate) fn step_qp(q: &mut QpCtx, port: Option<&Port>, env: &mut Env<'_>) {
    debug_assert_eq!(q.qp.qp_type, QpType::RawPacket);
    match q.state {
        QpState::Init | QpState::Rtr | QpState::Rts => q.raw_send(env, port.map(|p| &*p.sock)),
        QpState::Err => q.flush(env),
        _ => {}
    }
}
