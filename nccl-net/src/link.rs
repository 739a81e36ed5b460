//! One RC connection: a QP and its CQ on a device, the TCP socket the connection was
//! set up over (kept open: its end-of-file is how a dead peer process shows up while
//! nothing of ours is in flight on the QP), and the first error seen.
//!
//! QP parameters: ACK timeout 2^14 * 4.096 us = 67 ms with 7 retries, so a peer that
//! stops acknowledging fails our outstanding writes after about half a second
//! (`DOORBELL_ACK_TIMEOUT` changes the exponent); RNR retries forever (7), as a
//! WRITE WITH IMM only needs a receive WQE, which the receiver keeps posted.

use std::os::fd::AsRawFd;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use provider::cqe::WcStatus;
use provider::qp::attr::Remote;
use provider::qp::{QpCap, QpInit, QpType};
use provider::{Access, Cq, Qp, Wc};

use crate::device::{Dev, PORT};

/// ACK timeout exponent and retry count (see the module doc).
pub const ACK_TIMEOUT: u8 = 14;
pub const RETRY_CNT: u8 = 7;
/// Send and receive WQEs per QP, and CQ entries (both queues share the CQ).
pub const SQ_DEPTH: u32 = 512;
pub const RQ_DEPTH: u32 = 512;
pub const CQ_DEPTH: u32 = 2048;
/// How often a comm with work outstanding looks at its socket for the peer's exit.
const ALIVE_EVERY: Duration = Duration::from_millis(1);

/// What one side tells the other over TCP (fixed size, little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    pub qpn: u32,
    pub psn: u32,
    pub mtu: u8,
    pub gid: [u8; 16],
    /// The sender's FIFO (where the receiver announces its buffers); zero from a receiver.
    pub fifo_addr: u64,
    pub fifo_rkey: u32,
}

/// Bytes of a [`ConnInfo`] on the wire.
pub const CONN_INFO_LEN: usize = 48;
const CONN_MAGIC: u32 = 0x6462_6e31; // "dbn1"

impl ConnInfo {
    pub fn encode(&self) -> [u8; CONN_INFO_LEN] {
        let mut b = [0u8; CONN_INFO_LEN];
        b[0..4].copy_from_slice(&CONN_MAGIC.to_le_bytes());
        b[4..8].copy_from_slice(&self.qpn.to_le_bytes());
        b[8..12].copy_from_slice(&self.psn.to_le_bytes());
        b[12] = self.mtu;
        b[16..32].copy_from_slice(&self.gid);
        b[32..40].copy_from_slice(&self.fifo_addr.to_le_bytes());
        b[40..44].copy_from_slice(&self.fifo_rkey.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8; CONN_INFO_LEN]) -> Result<ConnInfo, String> {
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        if u32_at(0) != CONN_MAGIC {
            return Err(format!("the peer sent connection data with magic {:#x}, not doorbell's {CONN_MAGIC:#x}", u32_at(0)));
        }
        Ok(ConnInfo {
            qpn: u32_at(4),
            psn: u32_at(8),
            mtu: b[12],
            gid: b[16..32].try_into().unwrap(),
            fifo_addr: u64::from_le_bytes(b[32..40].try_into().unwrap()),
            fifo_rkey: u32_at(40),
        })
    }
}

/// A QP with its CQ and socket.
pub struct Link {
    // Field order is drop order: the QP before its CQ.
    pub qp: Qp,
    pub cq: Cq,
    pub stream: TcpStream,
    pub dev: &'static Dev,
    pub psn: u32,
    /// The first failure (completion error, peer gone); every later call reports it.
    pub broken: Option<String>,
    pub peer: String,
    last_alive: Instant,
    /// When the peer said it closes its comm ([`BYE`]).
    peer_closing: Option<Instant>,
    pub wcs: Vec<Wc>,
}

/// The byte a comm sends over its socket when it is closed: the peer's outstanding
/// requests then get [`BYE_GRACE`] to complete (their ACKs may still be on the way)
/// before they fail, where a vanished peer (end of file without it) fails them at once.
pub const BYE: u8 = b'B';
pub const BYE_GRACE: Duration = Duration::from_secs(1);

impl Link {
    /// A QP in INIT on `dev` (with `recvs` zero-length receive WQEs posted).
    pub fn new(dev: &'static Dev, stream: TcpStream, recvs: bool) -> Result<Link, String> {
        let cq = dev.ctx.create_cq(CQ_DEPTH, None).map_err(|e| format!("create_cq: {e}"))?;
        let init = QpInit {
            send_cq: &cq,
            recv_cq: &cq,
            cap: QpCap { max_send_wr: SQ_DEPTH, max_recv_wr: RQ_DEPTH, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            qp_type: QpType::Rc,
            sq_sig_all: false,
            send_ops: None,
        };
        let mut qp = dev.pd.create_qp(&init).map_err(|e| format!("create_qp: {e}"))?;
        qp.to_init(PORT, Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ).map_err(|e| format!("QP to INIT: {e}"))?;
        if recvs {
            let batch: Vec<(u64, &[provider::wqe::Sge])> = (0..RQ_DEPTH.min(qp.cap().max_recv_wr)).map(|_| (0u64, &[][..])).collect();
            qp.post_recv_list(&batch).map_err(|e| format!("post_recv: {e}"))?;
        }
        let peer = stream.peer_addr().map(|a| a.to_string()).unwrap_or_else(|_| "?".into());
        Ok(Link {
            qp,
            cq,
            stream,
            dev,
            psn: rand::random::<u32>() & 0xff_ffff,
            broken: None,
            peer,
            last_alive: Instant::now(),
            peer_closing: None,
            wcs: vec![Wc::default(); 64],
        })
    }

    /// What the peer needs to reach this QP.
    pub fn info(&self, fifo_addr: u64, fifo_rkey: u32) -> ConnInfo {
        ConnInfo { qpn: self.qp.qpn(), psn: self.psn, mtu: self.dev.mtu, gid: self.dev.gid, fifo_addr, fifo_rkey }
    }

    /// INIT -> RTR -> RTS towards the peer.
    pub fn connect(&mut self, peer: &ConnInfo) -> Result<(), String> {
        let remote = Remote { qpn: peer.qpn, psn: peer.psn, gid: peer.gid };
        let mtu = self.dev.mtu.min(peer.mtu).max(1);
        let timeout = std::env::var("DOORBELL_ACK_TIMEOUT").ok().and_then(|v| v.parse().ok()).unwrap_or(ACK_TIMEOUT).clamp(1, 31);
        self.qp.to_rtr(&remote, PORT, self.dev.sgid_index, mtu, 1).map_err(|e| format!("QP to RTR: {e}"))?;
        self.qp.to_rts(self.psn, timeout, RETRY_CNT, 7, 1).map_err(|e| format!("QP to RTS: {e}"))?;
        Ok(())
    }

    /// One device step on softhca (polled mode, as doorbell's collective does), then
    /// the completions, handed to `f` one by one. A failed completion breaks the link.
    pub fn poll(&mut self, mut f: impl FnMut(&Wc)) {
        if self.dev.polled {
            self.dev.ctx.progress();
        }
        loop {
            let n = self.cq.poll(&mut self.wcs);
            for i in 0..n {
                let wc = self.wcs[i];
                if wc.status != WcStatus::Success {
                    if self.broken.is_none() {
                        let why = format!("{:?} (vendor error {:#x}) on the QP to {}", wc.status, wc.vendor_err, self.peer);
                        crate::warn!("{why}");
                        self.broken = Some(why);
                    }
                    continue;
                }
                f(&wc);
            }
            if n < self.wcs.len() {
                break;
            }
        }
    }

    /// One more device step on softhca: acknowledgements of what the last poll turned
    /// into completions leave now instead of at the device thread's next turn (the
    /// peer's send completes only when it has them).
    pub fn flush_acks(&self) {
        if self.dev.polled {
            self.dev.ctx.progress();
        }
    }

    /// Whether the peer process is still there: its end of the socket closes when it
    /// exits (or closes this connection). Checked at most every millisecond.
    pub fn check_alive(&mut self) {
        if self.broken.is_some() || self.last_alive.elapsed() < ALIVE_EVERY {
            return;
        }
        self.last_alive = Instant::now();
        let mut b = [0u8; 1];
        // SAFETY: a valid socket and a 1-byte buffer; MSG_PEEK leaves the data queued.
        let r = unsafe { libc::recv(self.stream.as_raw_fd(), b.as_mut_ptr().cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT) };
        if r == 1 && b[0] == BYE {
            let since = *self.peer_closing.get_or_insert_with(Instant::now);
            if since.elapsed() > BYE_GRACE {
                let why = format!("the peer {} closed its comm with requests outstanding here", self.peer);
                crate::warn!("{why}");
                self.broken = Some(why);
            }
            return;
        }
        let why = if r == 0 {
            Some(format!("the peer {} closed its connection (its process exited or closed the comm) with requests outstanding", self.peer))
        } else if r < 0 {
            let e = std::io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => None,
                _ => Some(format!("the connection to the peer {} failed: {e}", self.peer)),
            }
        } else {
            None
        };
        if let Some(why) = why {
            crate::warn!("{why}");
            self.broken = Some(why);
        }
    }
}

impl Drop for Link {
    /// Tells the peer this side closes, and steps the device a few times so that the
    /// acknowledgements of the last data leave before the QP is destroyed.
    fn drop(&mut self) {
        let _ = crate::conn::send_nosignal(&self.stream, &[BYE]);
        if self.dev.polled {
            for _ in 0..10 {
                self.dev.ctx.progress();
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }
}
