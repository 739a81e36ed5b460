//! The RDMA transport: one RC QP per peer on a provider context (the embedded softhca
//! unless a device is named), one CQ for everything, and RDMA WRITE WITH IMM for data
//! and credits.
//!
//! * Receives: a WRITE WITH IMM consumes one receive WQE at the responder, so every QP
//!   keeps [`RQ_DEPTH`] receive WQEs with no scatter entries posted and reposts them
//!   in batches as their completions are polled.
//! * Sends: writes are unsignaled except every [`SIGNAL_EVERY`]th per QP, which
//!   lets the provider retire SQ entries; a full SQ is drained by polling (the
//!   events seen meanwhile are kept for the next `poll`). Errors complete even
//!   unsignaled WQEs, so a broken link always surfaces.
//! * Notifications (credits) are zero-byte WRITE WITH IMM to a 64-byte landing
//!   region each rank registers and publishes with its connection data.
//! * Writes straight from the application's buffers ([`Transport::reg_user`]) only
//!   on the embedded softhca, where a registration is a range of this process's
//!   addresses (no pinning), so registering the buffers for each call costs little; on
//!   a NIC every call would pin and unpin the pages, which NCCL leaves to an explicit
//!   `ncclCommRegister`. The registrations hold the call's borrows of the buffers and
//!   end with the call. Such writes are signaled, and [`Transport::settle`] waits for
//!   their completions (the peer's ACK) before the collective returns.
//! * Progress: on a software device (softhca) the transport drives the data path
//!   itself ([`Context::progress`], polled mode): every `poll` first runs a device step
//!   in this thread, so writes just posted leave at once and arrived packets turn into
//!   completions without waiting for the device's thread, and `wait` blocks on the
//!   device's socket as well as the completion channel. A message then costs one
//!   wake-up (the receiving rank's) instead of three (sender's device thread,
//!   receiver's device thread, receiver). `DOORBELL_POLLED=0` leaves everything to the
//!   device's thread. Hardware has nothing to drive; the calls are no-ops there.

use std::collections::HashMap;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use provider::cqe::{WcOpcode, WcStatus};
use provider::qp::attr::{QpAttr, QpState, Remote};
use provider::qp::{QpCap, QpInit, QpType};
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, CompChannel, Context, Cq, MemoryRegion, OwnedMr, Pd, Qp, Wc};

use super::{Event, Keys, Transport, UserMem, UserMr};
use crate::staging::Staging;
use crate::error::{Error, Result};

/// Receive WQEs kept posted per QP.
pub const RQ_DEPTH: u32 = 512;
/// Send WQEs per QP.
pub const SQ_DEPTH: u32 = 256;
/// One send in this many is signaled.
pub const SIGNAL_EVERY: u32 = 32;
/// ACK timeout exponent (4.096 us * 2^14 = 67 ms; `DOORBELL_ACK_TIMEOUT` overrides)
/// and retries: a dead peer is reported as retry-exceeded after about half a second.
pub const ACK_TIMEOUT: u8 = 14;
pub const RETRY_CNT: u8 = 7;
/// The variable that turns polled mode off (`0`).
pub const POLLED_ENV: &str = "DOORBELL_POLLED";

struct Link {
    qp: Qp,
    peer: usize,
    psn: u32,
    /// Sends since the last signaled one.
    unsignaled: u32,
    /// Signaled sends whose completion has not been polled yet.
    signaled_out: u32,
    /// A write from application memory was posted since the last settle.
    user_out: bool,
    /// Receive WQEs posted and not yet completed.
    rq_posted: u32,
    /// The peer's notification landing word.
    notify: (u64, u32),
    connected: bool,
}

/// RC QPs over a provider device.
pub struct RdmaTransport {
    // Field order is drop order: QPs, then MRs, then the CQ, PD and context.
    links: Vec<Link>,
    /// The staging mappings, registered (each MR is dropped before its mapping).
    mrs: Vec<OwnedMr<Staging>>,
    /// The word peers write their notifications into (registered memory it owns).
    notify_mr: MemoryRegion,
    cq: Cq,
    channel: CompChannel,
    /// The CQ is armed and its event not consumed yet.
    armed: bool,
    /// Polled mode: drive the device in `poll`, and block on this too in `wait`
    /// (None: the device progresses by itself).
    progress_fd: Option<RawFd>,
    _pd: Pd,
    ctx: Arc<Context>,
    port: u8,
    gid: [u8; 16],
    sgid_index: u8,
    mtu: u8,
    ack_timeout: u8,
    by_qpn: HashMap<u32, usize>,
    pending: Vec<Event>,
    wcs: Vec<Wc>,
    rank: usize,
}

impl RdmaTransport {
    /// Opens `device` (`None`: the embedded softhca) and creates one QP per peer in
    /// `peers` (link `i` = `peers[i]`), in INIT with receives posted.
    pub fn new(device: Option<&str>, rank: usize, peers: &[usize]) -> Result<RdmaTransport> {
        let ctx = Context::open(device)?;
        let pd = ctx.alloc_pd()?;
        let ncq = (peers.len() as u32 * (RQ_DEPTH + SQ_DEPTH)).max(256);
        let channel = ctx.create_comp_channel()?;
        let cq = ctx.create_cq(ncq, Some(&channel))?;
        let port = 1u8;
        let g = ctx.default_gid(port)?;
        let mtu = path_mtu(ctx.query_port(port)?.legacy_resp.active_mtu, g.netdev_ifindex)?;
        let notify_mr = pd.alloc_mr(64, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
        let mut links = Vec::with_capacity(peers.len());
        let mut by_qpn = HashMap::new();
        for (i, &peer) in peers.iter().enumerate() {
            let init = QpInit {
                send_cq: &cq,
                recv_cq: &cq,
                cap: QpCap { max_send_wr: SQ_DEPTH, max_recv_wr: RQ_DEPTH, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
                qp_type: QpType::Rc,
                sq_sig_all: false,
                send_ops: None,
            };
            let mut qp = pd.create_qp(&init)?;
            qp.to_init(port, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
            let mut posted = 0;
            let batch: Vec<(u64, &[Sge])> = (0..RQ_DEPTH.min(qp.cap().max_recv_wr)).map(|_| (0u64, &[][..])).collect();
            qp.post_recv_list(&batch)?;
            posted += batch.len() as u32;
            by_qpn.insert(qp.qpn(), i);
            links.push(Link {
                qp,
                peer,
                psn: rand::random::<u32>() & 0xff_ffff,
                unsignaled: 0,
                signaled_out: 0,
                user_out: false,
                rq_posted: posted,
                notify: (0, 0),
                connected: false,
            });
        }
        tracing::debug!(target: "collective::rdma", rank, dev = ctx.name(), links = links.len(), "transport open");
        Ok(RdmaTransport {
            links,
            mrs: Vec::new(),
            notify_mr,
            cq,
            channel,
            armed: false,
            progress_fd: if polled_allowed() { ctx.progress_fd() } else { None },
            _pd: pd,
            ctx,
            port,
            gid: g.raw(),
            sgid_index: g.gid_index as u8,
            mtu,
            ack_timeout: std::env::var("DOORBELL_ACK_TIMEOUT").ok().and_then(|v| v.parse().ok()).unwrap_or(ACK_TIMEOUT).clamp(1, 31),
            by_qpn,
            pending: Vec::new(),
            wcs: vec![Wc::default(); 64],
            rank,
        })
    }

    /// The GID peers reach us at.
    pub fn gid(&self) -> [u8; 16] {
        self.gid
    }

    /// In polled mode, one device step in this thread (see the module doc).
    fn progress(&self) {
        if self.progress_fd.is_some() {
            self.ctx.progress();
        }
    }

    fn drain_cq(&mut self, out: &mut Vec<Event>) -> Result<()> {
        self.progress();
        loop {
            let n = self.cq.poll(&mut self.wcs);
            for i in 0..n {
                let wc = self.wcs[i];
                let Some(&link) = self.by_qpn.get(&wc.qp_num) else { continue };
                if wc.status != WcStatus::Success {
                    let l = &mut self.links[link];
                    l.signaled_out = l.signaled_out.saturating_sub(1);
                    let why = format!("{:?} (vendor error {:#x}) on the QP to rank {}", wc.status, wc.vendor_err, self.links[link].peer);
                    out.push(Event::Failed { link, why });
                    continue;
                }
                let l = &mut self.links[link];
                if matches!(wc.opcode, WcOpcode::RecvRdmaWithImm | WcOpcode::Recv) {
                    l.rq_posted = l.rq_posted.saturating_sub(1);
                    out.push(Event::Recv { link, imm: wc.imm, len: wc.byte_len });
                } else {
                    l.signaled_out = l.signaled_out.saturating_sub(1);
                }
            }
            if n < self.wcs.len() {
                break;
            }
        }
        // Top up receive queues that fell below half.
        for l in &mut self.links {
            if l.rq_posted < RQ_DEPTH / 2 {
                let want = (RQ_DEPTH - l.rq_posted) as usize;
                let batch: Vec<(u64, &[Sge])> = (0..want).map(|_| (0u64, &[][..])).collect();
                l.qp.post_recv_list(&batch)?;
                l.rq_posted += want as u32;
            }
        }
        Ok(())
    }

    /// Posts one send; `user` (a source in application memory) makes it signaled and
    /// remembered for [`Transport::settle`].
    /// [`RdmaTransport::drain_cq`] outside `poll`: what it reports waits in `pending` for
    /// the next `poll`.
    fn drain_to_pending(&mut self) -> Result<()> {
        let mut ev = std::mem::take(&mut self.pending);
        let r = self.drain_cq(&mut ev);
        self.pending = ev;
        r
    }

    fn post(&mut self, link: usize, op: SendOp, sge: Option<Sge>, user: bool) -> Result<()> {
        // Read only once the SQ is full: a clock read per post showed in the profile of
        // the 8 B all-reduce.
        let mut deadline: Option<Instant> = None;
        loop {
            let l = &mut self.links[link];
            let signal = user || l.unsignaled + 1 >= SIGNAL_EVERY;
            let sgl = sge.as_slice();
            let mut wr = SendWr::new(op, Payload::Sgl(sgl));
            if signal {
                wr = wr.signaled();
            }
            match l.qp.post_send(0, &wr) {
                Ok(()) => {
                    l.unsignaled = if signal { 0 } else { l.unsignaled + 1 };
                    l.signaled_out += signal as u32;
                    l.user_out |= user;
                    return Ok(());
                }
                Err(e) if e.errno() as i32 == libc::ENOMEM => {
                    // SQ full: retire completions, keeping what they report.
                    self.drain_to_pending()?;
                    let failed = self.pending.iter().find_map(|e| match e {
                        Event::Failed { link: fl, why } if *fl == link => Some(why.clone()),
                        _ => None,
                    });
                    if let Some(why) = failed {
                        return Err(Error::PeerFailed { rank: self.links[link].peer, why });
                    }
                    let now = Instant::now();
                    if now > *deadline.get_or_insert(now + Duration::from_secs(30)) {
                        return Err(Error::Timeout {
                            rank: self.links[link].peer,
                            after: Duration::from_secs(30),
                            what: "send queue space".into(),
                        });
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Whether `DOORBELL_POLLED` allows polled mode (anything but `0`, `false`, `off`, `no`).
fn polled_allowed() -> bool {
    !crate::switched_off(POLLED_ENV)
}

/// The `ibv_mtu` code to use: the port's active MTU, lowered to what the netdev
/// carrying the GID can take (a RoCEv2 packet adds up to 64 bytes of IP, UDP, BTH,
/// RETH, immediate and ICRC headers to its payload; a 1500-byte Ethernet link takes
/// 1024-byte payloads), or `DOORBELL_MTU` (256, 512, 1024, 2048 or 4096).
fn path_mtu(active: u8, ifindex: u32) -> Result<u8> {
    let code = |bytes: u32| -> u8 {
        match bytes {
            4096.. => 5,
            2048.. => 4,
            1024.. => 3,
            512.. => 2,
            _ => 1,
        }
    };
    if let Ok(v) = std::env::var("DOORBELL_MTU") {
        let b: u32 = v.parse().map_err(|_| Error::Invalid(format!("DOORBELL_MTU={v:?} is not a number")))?;
        return Ok(code(b));
    }
    let mut mtu = active.clamp(1, 5);
    if let Some(dev) = netdev_mtu(ifindex) {
        mtu = mtu.min(code(dev.saturating_sub(64)));
    }
    Ok(mtu)
}

/// The MTU of the interface with index `ifindex`, from sysfs.
fn netdev_mtu(ifindex: u32) -> Option<u32> {
    if ifindex == 0 {
        return None;
    }
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: the buffer has IF_NAMESIZE bytes, as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: if_indextoname wrote a NUL-terminated name into the buffer.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }.to_str().ok()?.to_owned();
    std::fs::read_to_string(format!("/sys/class/net/{name}/mtu")).ok()?.trim().parse().ok()
}

impl Transport for RdmaTransport {
    fn describe(&self) -> String {
        let g = self.gid;
        format!("rdma {} {}.{}.{}.{}", self.ctx.name(), g[12], g[13], g[14], g[15])
    }

    fn register(&mut self, mem: Staging) -> Result<Keys> {
        let mr = self._pd.reg_owned(mem, Access::LOCAL_WRITE | Access::REMOTE_WRITE).map_err(|e| e.error)?;
        let k = Keys { lkey: mr.lkey(), rkey: mr.rkey() };
        self.mrs.push(mr);
        Ok(k)
    }

    fn conn_info(&self, link: usize) -> Vec<u8> {
        let l = &self.links[link];
        let mut v = Vec::with_capacity(40);
        v.push(self.mtu);
        v.extend_from_slice(&l.qp.qpn().to_le_bytes());
        v.extend_from_slice(&l.psn.to_le_bytes());
        v.extend_from_slice(&self.gid);
        v.extend_from_slice(&self.notify_mr.addr().to_le_bytes());
        v.extend_from_slice(&self.notify_mr.rkey().to_le_bytes());
        v
    }

    fn connect(&mut self, link: usize, info: &[u8]) -> Result<()> {
        if info.len() != 37 {
            return Err(Error::Protocol { rank: self.links[link].peer, why: format!("connection info of {} bytes", info.len()) });
        }
        // Both ends use the smaller of their MTUs.
        let (peer_mtu, info) = (info[0], &info[1..]);
        let u32_at = |o: usize| u32::from_le_bytes(info[o..o + 4].try_into().unwrap());
        let remote = Remote { qpn: u32_at(0), psn: u32_at(4), gid: info[8..24].try_into().unwrap() };
        let notify = (u64::from_le_bytes(info[24..32].try_into().unwrap()), u32_at(32));
        let (port, sgid, mtu) = (self.port, self.sgid_index, self.mtu.min(peer_mtu).max(1));
        let l = &mut self.links[link];
        l.qp.to_rtr(&remote, port, sgid, mtu, 0)?;
        l.qp.to_rts(l.psn, self.ack_timeout, RETRY_CNT, 7, 0)?;
        l.notify = notify;
        l.connected = true;
        tracing::debug!(target: "collective::rdma", rank = self.rank, peer = l.peer, qpn = l.qp.qpn(), dest_qpn = remote.qpn, "connected");
        Ok(())
    }

    /// Only on the embedded softhca (module doc); for the call only.
    fn reg_user<'a>(&mut self, mem: UserMem<'a>) -> std::result::Result<UserMr<'a>, UserMem<'a>> {
        if self.ctx.progress_fd().is_none() {
            return Err(mem);
        }
        let (rank, len) = (self.rank, mem.len());
        let declined = |e: provider::Error| {
            // Memory the device will not take (a mapping it cannot read, say): the
            // engine sends through its staging instead.
            tracing::debug!(target: "collective::rdma", rank, len, error = %e, "user buffer not registered");
        };
        match mem {
            UserMem::Read(b) => match self._pd.reg_mr_shared(b, Access::empty()) {
                Ok(m) => {
                    let guard = Box::new(m);
                    let ptr = guard.as_ptr().cast_mut();
                    Ok(UserMr { keys: Keys { lkey: guard.lkey(), rkey: guard.rkey() }, ptr, len, guard })
                }
                Err(e) => {
                    declined(e);
                    Err(UserMem::Read(b))
                }
            },
            UserMem::Write(b, remote) => {
                let access = if remote { Access::LOCAL_WRITE | Access::REMOTE_WRITE } else { Access::LOCAL_WRITE };
                let (p, n) = (b.as_mut_ptr(), b.len());
                match self._pd.reg_mr(b, access) {
                    Ok(m) => {
                        let mut guard = Box::new(m);
                        let ptr = guard.as_mut_ptr();
                        Ok(UserMr { keys: Keys { lkey: guard.lkey(), rkey: guard.rkey() }, ptr, len, guard })
                    }
                    Err(e) => {
                        declined(e);
                        // SAFETY: `b` went into reg_mr, which failed and returned no
                        // registration holding it: the exclusive borrow for 'a is ours
                        // again, and this is the same slice (what the borrow checker
                        // cannot yet see through a conditional return).
                        Err(UserMem::Write(unsafe { std::slice::from_raw_parts_mut(p, n) }, remote))
                    }
                }
            }
        }
    }

    fn write_imm(&mut self, link: usize, src: u64, lkey: u32, len: u32, dst: u64, rkey: u32, imm: u32, user: bool) -> Result<()> {
        let sge = (len > 0).then(|| Sge::new(src, len, lkey));
        self.post(link, SendOp::RdmaWriteImm { raddr: dst, rkey, imm }, sge, user)
    }

    fn notify(&mut self, link: usize, imm: u32) -> Result<()> {
        let (raddr, rkey) = self.links[link].notify;
        self.post(link, SendOp::RdmaWriteImm { raddr, rkey, imm }, None, false)
    }

    /// Moves every QP that sent from application memory since the last settle to the
    /// error state. The device then flushes what is left on its send queue instead of
    /// reading (or retransmitting from) the buffers: softhca changes a QP's state under
    /// its engine lock, between two steps, so once this returns nothing reads them.
    fn abandon(&mut self) {
        for l in self.links.iter_mut().filter(|l| l.user_out) {
            if let Err(e) = l.qp.modify(&QpAttr { state: Some(QpState::Err), ..QpAttr::default() }) {
                tracing::warn!(target: "collective::rdma", rank = self.rank, peer = l.peer, error = %e, "QP to error failed");
            }
            l.user_out = false;
        }
        // The engine drops the call's registrations of application memory next: no
        // peer can write into it after that.
    }

    /// Polls until no link that sent from application memory has a signaled send
    /// outstanding: completions come in order, so the last user write is then
    /// acknowledged by the peer and will not be read again. What the polls bring
    /// (the peers' next messages) is kept for the next `poll`.
    ///
    /// A call that sent from application memory always steps the device once here,
    /// even with nothing outstanding: in polled mode the step that turned the last
    /// arrivals into completions held their ACKs back for the caller's next step, and
    /// the peer's own settle waits for them. Without this step they would leave only
    /// with our next call, or after the engine thread's window (10 ms). After a
    /// millisecond of polling it sleeps on the completion channel and the device's
    /// socket, like the engine's idle loop.
    fn settle(&mut self, timeout: Duration) -> Result<()> {
        if !self.links.iter().any(|l| l.user_out) {
            return Ok(());
        }
        let start = Instant::now();
        loop {
            self.drain_to_pending()?;
            if let Some(Event::Failed { link, why }) = self.pending.iter().find(|e| matches!(e, Event::Failed { .. })) {
                return Err(Error::PeerFailed { rank: self.links[*link].peer, why: why.clone() });
            }
            let Some(l) = self.links.iter().find(|l| l.user_out && l.signaled_out > 0) else {
                self.links.iter_mut().for_each(|l| l.user_out = false);
                return Ok(());
            };
            let waited = start.elapsed();
            if waited > timeout {
                return Err(Error::Timeout { rank: l.peer, after: timeout, what: "the acknowledgement of a write from the user buffer".into() });
            }
            if waited < Duration::from_millis(1) || !self.pending.is_empty() {
                std::thread::yield_now();
            } else {
                self.wait(Duration::from_millis(2))?;
            }
        }
    }

    fn poll(&mut self, out: &mut Vec<Event>) -> Result<()> {
        out.append(&mut self.pending);
        self.drain_cq(out)
    }

    /// Arms the CQ, checks once more for a CQE that beat the arm, then sleeps on
    /// the completion channel (and, in polled mode, the device's socket: the packet
    /// that will become our completion wakes us, and the next `poll` completes it).
    fn wait(&mut self, timeout: Duration) -> Result<()> {
        if !self.pending.is_empty() {
            return Ok(());
        }
        if !self.armed {
            self.cq.req_notify(false);
            self.armed = true;
            self.drain_to_pending()?;
            if !self.pending.is_empty() {
                return Ok(());
            }
        }
        // In polled mode a packet for us wakes us too (a negative fd is ignored); a
        // same-host record that came while its sender took us for awake is handled now.
        if self.progress_fd.is_some() && !self.ctx.before_progress_wait() {
            return Ok(());
        }
        let mut fds = [
            libc::pollfd { fd: self.channel.fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.progress_fd.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
        // SAFETY: two live pollfds, a valid timespec, no signal mask.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if r > 0 && fds[0].revents != 0 {
            self.channel.get_event(Some(Duration::ZERO))?;
            self.cq.ack_event();
            self.armed = false;
        }
        Ok(())
    }
}
