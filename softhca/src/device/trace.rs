//! Packet capture (`DOORBELL_PCAP`) and the tracing targets of the device half.
//!
//! Capture: every datagram the instance sends (after fault injection, so what really left)
//! and receives (before any check) is appended to a pcap file through
//! [`crate::wire::pcap::PcapWriter`], framed as Ethernet/IP/UDP so Wireshark's RoCEv2
//! dissector decodes it. `{addr}` in the path is replaced by the instance's address; a
//! second instance in the same process given the same path writes `path.<addr>` instead.
//!
//! Tracing: one RDMA WRITE can be followed through every layer with
//! `RUST_LOG=provider=trace,softhca=trace` (or the targets one by one):
//!
//! | target              | level | what                                                   |
//! |---------------------|-------|--------------------------------------------------------|
//! | `provider::post`    | TRACE | verb -> WQE (qpn, pi, wr_id, ds, op)                    |
//! | `provider::doorbell`| TRACE | doorbell record + UAR/BlueFlame write                   |
//! | `softhca::doorbell` | TRACE | the device sees a new SQ producer counter               |
//! | `softhca::wqe`      | TRACE | WQE fetched and decoded (index, opcode, len, PSNs)      |
//! | `softhca::tx`       | TRACE | each packet sent (opcode, dest QPN, PSN, length)        |
//! | `softhca::rx`       | TRACE | each packet received (opcode, dest QPN, PSN, length)    |
//! | `softhca::responder`| TRACE | remote write / read / atomic into memory                |
//! | `softhca::ack`      | TRACE/DEBUG | ACKs, NAKs, RNR, timeouts, retransmission         |
//! | `softhca::cqe`      | TRACE | CQE written (cqn, opcode, wqe_counter, owner)           |
//! | `softhca::events`   | TRACE | CQ armed, completion event                              |
//! | `softhca::qp`       | DEBUG | QP state changes seen by the device                     |
//! | `softhca::fault`    | TRACE | injected drops, duplicates, reorders                    |
//! | `provider::poll`    | TRACE | CQE turned into a work completion                       |

use std::collections::HashSet;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::wire::pcap::PcapWriter;
use crate::wire::Endpoints;

/// Environment variable naming the capture file.
pub const PCAP_ENV: &str = "DOORBELL_PCAP";

static TAKEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// The file an instance at `addr` captures to.
pub fn capture_path(template: &Path, addr: IpAddr) -> PathBuf {
    let s = template.to_string_lossy();
    if s.contains("{addr}") {
        return PathBuf::from(s.replace("{addr}", &addr.to_string()));
    }
    let mut taken = TAKEN.lock().unwrap_or_else(|p| p.into_inner());
    let set = taken.get_or_insert_with(HashSet::new);
    let p = template.to_path_buf();
    if set.insert(p.clone()) {
        return p;
    }
    PathBuf::from(format!("{s}.{addr}"))
}

/// The capture file, shared between the pcap writer and the engine's explicit flushes.
#[derive(Clone)]
struct SharedFile(Arc<Mutex<BufWriter<File>>>);

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

/// An open capture.
pub struct Capture {
    w: PcapWriter<SharedFile>,
    file: SharedFile,
    path: PathBuf,
    failed: bool,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capture").field("path", &self.path).finish()
    }
}

impl Capture {
    pub fn open(path: PathBuf) -> Option<Capture> {
        let file = match File::create(&path) {
            Ok(f) => SharedFile(Arc::new(Mutex::new(BufWriter::new(f)))),
            Err(e) => {
                tracing::warn!(target: "softhca::trace", path = %path.display(), "pcap: {e}");
                return None;
            }
        };
        match PcapWriter::new(file.clone()) {
            Ok(w) => Some(Capture { w, file, path, failed: false }),
            Err(e) => {
                tracing::warn!(target: "softhca::trace", path = %path.display(), "pcap: {e}");
                None
            }
        }
    }

    /// Appends one UDP payload that travelled on `ep`.
    pub fn packet(&mut self, ep: &Endpoints, roce: &[u8]) {
        if self.failed {
            return;
        }
        let ts = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        if let Err(e) = self.w.write_roce(ts, ep, roce) {
            tracing::warn!(target: "softhca::trace", path = %self.path.display(), "pcap: {e}; capture stopped");
            self.failed = true;
        }
    }

    /// Pushes buffered packets to the file (when the engine goes idle, and at exit).
    pub fn flush(&mut self) {
        let _ = self.file.flush();
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.flush();
    }
}
