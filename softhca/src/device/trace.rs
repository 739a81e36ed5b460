//! Packet capture (`DOORBELL_PCAP`) and the tracing targets of the device half.
//!
//! Capture: every datagram the instance sends (after fault injection, so what really left)
//! and receives (before any check) is appended to a pcap file through
//! [`crate::wire::pcap::PcapWriter`], framed as Ethernet/IP/UDP so Wireshark's RoCEv2
//! dissector decodes it. `{addr}` in the path is replaced by the instance's address; a
//! second instance in the same process given the same path writes `path.<addr>` instead.
//! The file holds every packet by the time the process exits normally; see [`Capture`]
//! for when buffered records reach it.
//!
//! Tracing: one RDMA WRITE can be followed through every layer with
//! `RUST_LOG=provider=trace,softhca=trace` (or the targets one by one):
//!
//! | target              | level | what (the fields that identify it)                      |
//! |---------------------|-------|--------------------------------------------------------|
//! | `provider::post`    | TRACE | verb -> WQE (`qpn`, `pi` = WQE index, wr_id, ds, op)   |
//! | `provider::doorbell`| TRACE | doorbell record + UAR/BlueFlame write (`qpn`, `pi` = new producer counter) |
//! | `softhca::doorbell` | TRACE | a trapped UAR store (`trap`, address, flags); `sq doorbell`: the device sees a new SQ producer counter (`qpn`, `pi`, `ci`) |
//! | `softhca::wqe`      | TRACE | WQE fetched and decoded (`qpn`, `index`, opcode, len, `psn`, `npsn`) |
//! | `softhca::tx`       | TRACE | each packet sent (`opcode`, `qpn` = dest QPN, `psn`, length) |
//! | `softhca::rx`       | TRACE | each packet received (`opcode`, `qpn` = dest QPN, `psn`, length) |
//! | `softhca::responder`| TRACE | remote write / read / atomic into memory (`qpn`, `psn`) |
//! | `softhca::ack`      | TRACE/DEBUG | ACKs (`ack sent`, `ack received`: `qpn`, `psn`), NAKs, RNR, timeouts, retransmission |
//! | `softhca::port`     | TRACE | a frame received on the Ethernet port (length, L3/L4 types, destination) and each raw receive |
//! | `softhca::steer`    | TRACE | steering: each flow table's hit (`table`, group, flow index, action) or miss, and the verdict |
//! | `softhca::cqe`      | TRACE | CQE written (cqn, opcode, `qpn`, `wqe_counter`, owner)  |
//! | `softhca::events`   | TRACE | CQ armed, completion event                              |
//! | `softhca::qp`       | DEBUG | QP state changes seen by the device                     |
//! | `softhca::fault`    | TRACE | injected drops, duplicates, reorders                    |
//! | `softhca::engine`   | DEBUG/TRACE | idle mode, sleeps and wake-ups, trap armed/disarmed |
//! | `softhca::device`   | TRACE | objects the device half learns of (MR, CQ, QP hooks)    |
//! | `provider::poll`    | TRACE | CQE turned into a work completion (`qpn`, `wqe_counter`, status) |
//!
//! The fields in backquotes are what `doorbell trace` (the doorbell-trace crate's
//! `flows` module) matches to draw its arrows from a post to its poll across both
//! processes: keep their names stable.

use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, Once, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::wire::pcap::PcapWriter;
use crate::wire::Endpoints;

/// Environment variable naming the capture file.
pub const PCAP_ENV: &str = "DOORBELL_PCAP";

/// Buffered bytes that make the next packet flush them.
pub const FLUSH_BYTES: usize = 256 << 10;
/// Age of the last flush that makes the next packet flush (a busy engine never idles).
pub const FLUSH_EVERY: Duration = Duration::from_millis(20);

static TAKEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// Every open capture of the process, for the exit hook.
static LIVE: Mutex<Vec<Weak<Mutex<Pending>>>> = Mutex::new(Vec::new());
static EXIT_HOOK: Once = Once::new();

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

/// Captured bytes on their way to the file.
struct Pending {
    file: File,
    buf: Vec<u8>,
    /// The first `whole` bytes of `buf` are complete records; the rest is the record the
    /// engine is writing (the pcap writer emits a record in several pieces).
    whole: usize,
    last_flush: Instant,
    /// The process that opened the file: a forked child inherits the buffer and the exit
    /// hook, and must not write the parent's records a second time.
    owner: u32,
}

impl Pending {
    /// Writes the complete records to the file.
    fn flush(&mut self) -> io::Result<()> {
        self.last_flush = Instant::now();
        if self.whole == 0 || self.owner != std::process::id() {
            return Ok(());
        }
        let r = self.file.write_all(&self.buf[..self.whole]);
        self.buf.drain(..self.whole);
        self.whole = 0;
        r
    }
}

fn lock(p: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// The pcap writer's sink: appends to the shared buffer.
#[derive(Clone)]
struct SharedFile(Arc<Mutex<Pending>>);

impl Write for SharedFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        lock(&self.0).buf.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Flushes every open capture of this process: registered with `atexit` by the first
/// [`Capture::open`], so `exit()` (a return from `main`, `std::process::exit`) completes
/// the files of instances that are never dropped, such as the process's default one.
extern "C" fn flush_at_exit() {
    let live: Vec<_> = LIVE.lock().unwrap_or_else(|p| p.into_inner()).iter().filter_map(Weak::upgrade).collect();
    for p in live {
        // The engine holds the lock only while appending one record.
        let _ = lock(&p).flush();
    }
}

/// An open capture.
///
/// Records are buffered in memory and reach the file (only whole records, so the file is
/// always a valid pcap) when:
/// - the engine is about to sleep ([`Capture::flush`]): an idle instance's file is
///   complete;
/// - a packet finds [`FLUSH_BYTES`] buffered or the last flush [`FLUSH_EVERY`] ago: a
///   busy engine's file lags by little;
/// - the capture is dropped (the HCA is dropped and its engine stops);
/// - the process exits normally: an `atexit` hook flushes every open capture. That is
///   what completes a short program's file: its instance (the default one is a static)
///   is never dropped, and it may exit before its engine has gone idle. A process killed
///   by a signal, or ending with `_exit`, loses what was buffered.
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
        let pending = match File::create(&path) {
            Ok(file) => Pending { file, buf: Vec::new(), whole: 0, last_flush: Instant::now(), owner: std::process::id() },
            Err(e) => {
                tracing::warn!(target: "softhca::trace", path = %path.display(), "pcap: {e}");
                return None;
            }
        };
        let file = SharedFile(Arc::new(Mutex::new(pending)));
        let w = match PcapWriter::new(file.clone()) {
            Ok(w) => w,
            Err(e) => {
                tracing::warn!(target: "softhca::trace", path = %path.display(), "pcap: {e}");
                return None;
            }
        };
        {
            // The file header, at once: even a capture of nothing is a valid file.
            let mut p = lock(&file.0);
            p.whole = p.buf.len();
            if let Err(e) = p.flush() {
                tracing::warn!(target: "softhca::trace", path = %path.display(), "pcap: {e}");
                return None;
            }
        }
        let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|w| w.strong_count() > 0);
        live.push(Arc::downgrade(&file.0));
        drop(live);
        EXIT_HOOK.call_once(|| {
            // SAFETY: registers a function without arguments that touches only statics
            // and the captures they reach; atexit has no other preconditions.
            if unsafe { libc::atexit(flush_at_exit) } != 0 {
                tracing::warn!(target: "softhca::trace", "pcap: atexit failed: files may miss their last packets");
            }
        });
        Some(Capture { w, file, path, failed: false })
    }

    /// Appends one UDP payload that travelled on `ep`.
    pub fn packet(&mut self, ep: &Endpoints, roce: &[u8]) {
        if self.failed {
            return;
        }
        let ts = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let r = self.w.write_roce(ts, ep, roce);
        let mut p = lock(&self.file.0);
        let r = match r {
            Ok(()) => {
                p.whole = p.buf.len();
                if p.whole >= FLUSH_BYTES || p.last_flush.elapsed() >= FLUSH_EVERY {
                    p.flush().map_err(|e| e.to_string())
                } else {
                    Ok(())
                }
            }
            Err(e) => {
                let whole = p.whole;
                p.buf.truncate(whole);
                Err(e.to_string())
            }
        };
        if let Err(e) = r {
            tracing::warn!(target: "softhca::trace", path = %self.path.display(), "pcap: {e}; capture stopped");
            self.failed = true;
        }
    }

    /// Pushes buffered packets to the file (when the engine goes idle, and at exit).
    pub fn flush(&mut self) {
        if let Err(e) = lock(&self.file.0).flush() {
            tracing::warn!(target: "softhca::trace", path = %self.path.display(), "pcap: {e}");
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        self.flush();
    }
}
