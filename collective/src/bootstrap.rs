//! Bootstrap: how ranks find each other before any QP exists, and how they learn
//! that one of them died afterwards.
//!
//! Rank 0 listens on `MASTER_ADDR:MASTER_PORT` (TCP); every other rank connects
//! (retrying until rank 0 is up) and says who it is. Then:
//! * **all-gather**: each rank sends a blob (its connection info: QPNs, PSNs, GID,
//!   staging addresses and rkeys), rank 0 collects all `n` and sends the table to
//!   everyone;
//! * **barrier**: everyone reports, rank 0 answers when all have (used once the QPs
//!   are connected, so nobody writes to a QP that is not ready yet);
//! * **liveness**: afterwards the connections stay open and a monitor thread on each
//!   rank watches them. A rank whose connection drops without having said DONE has
//!   died: rank 0 tells every other rank (ABORT naming the rank), and a rank whose
//!   connection to rank 0 drops blames rank 0. The engine checks the [`Watch`] while
//!   it waits, so a dead peer turns into an error naming it instead of a hang.
//! * **shutdown**: each rank says DONE when its communicator is dropped; rank 0
//!   answers FIN to all once everyone is done, so no rank tears down its QPs while
//!   another still needs them.
//!
//! Every wait has a deadline. Frames are `u32 length (LE) | u8 kind | payload`.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

const MAGIC: u32 = 0x6462_6c6c; // "dbll"
const VERSION: u32 = 1;
const MAX_FRAME: usize = 64 << 20;

const HELLO: u8 = 1;
const BLOB: u8 = 2;
const TABLE: u8 = 3;
const BARRIER: u8 = 4;
const GO: u8 = 5;
const DONE: u8 = 6;
const FIN: u8 = 7;
const ABORT: u8 = 8;

/// The rendezvous every rank takes part in: gather everyone's blob, and a barrier.
pub trait Exchange {
    /// Sends `blob`; returns every rank's blob, indexed by rank.
    fn all_gather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>>;
    /// Returns once every rank has called it.
    fn barrier(&mut self) -> Result<()>;
}

/// The first failure anyone reported: which rank, and why.
#[derive(Debug, Default)]
pub struct Watch {
    flag: AtomicBool,
    failed: Mutex<Option<(usize, String)>>,
}

impl Watch {
    pub fn new() -> Arc<Watch> {
        Arc::new(Watch::default())
    }

    /// Records that `rank` failed (the first report wins).
    pub fn fail(&self, rank: usize, why: impl Into<String>) {
        let mut f = self.failed.lock().unwrap();
        if f.is_none() {
            *f = Some((rank, why.into()));
            self.flag.store(true, Ordering::Release);
        }
    }

    /// The failure, if any (one atomic load when there is none).
    #[inline]
    pub fn failed(&self) -> Option<(usize, String)> {
        if !self.flag.load(Ordering::Acquire) {
            return None;
        }
        self.failed.lock().unwrap().clone()
    }
}

fn write_frame(s: &mut TcpStream, kind: u8, payload: &[u8]) -> io::Result<()> {
    let mut b = Vec::with_capacity(5 + payload.len());
    b.extend_from_slice(&(payload.len() as u32 + 1).to_le_bytes());
    b.push(kind);
    b.extend_from_slice(payload);
    s.write_all(&b)
}

fn read_frame(s: &mut TcpStream) -> io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h)?;
    let len = u32::from_le_bytes(h) as usize;
    if len == 0 || len > MAX_FRAME {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("bad frame length {len}")));
    }
    let mut b = vec![0u8; len];
    s.read_exact(&mut b)?;
    let kind = b.remove(0);
    Ok((kind, b))
}

fn expect(s: &mut TcpStream, kind: u8, peer: usize, what: &str) -> Result<Vec<u8>> {
    match read_frame(s) {
        Ok((k, p)) if k == kind => Ok(p),
        Ok((ABORT, p)) => {
            let (r, why) = decode_abort(&p);
            Err(Error::PeerFailed { rank: r, why })
        }
        Ok((k, _)) => Err(Error::Protocol { rank: peer, why: format!("bootstrap frame {k} while waiting for {what}") }),
        Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
            Err(Error::Timeout { rank: peer, after: Duration::ZERO, what: format!("bootstrap {what}") })
        }
        Err(e) => Err(Error::PeerFailed { rank: peer, why: format!("bootstrap connection lost while waiting for {what}: {e}") }),
    }
}

fn decode_abort(p: &[u8]) -> (usize, String) {
    if p.len() < 4 {
        return (0, "abort".into());
    }
    (u32::from_le_bytes(p[..4].try_into().unwrap()) as usize, String::from_utf8_lossy(&p[4..]).into_owned())
}

fn encode_abort(rank: usize, why: &str) -> Vec<u8> {
    let mut v = (rank as u32).to_le_bytes().to_vec();
    v.extend_from_slice(why.as_bytes());
    v
}

fn resolve(addr: &str, port: u16) -> Result<SocketAddr> {
    (addr, port)
        .to_socket_addrs()
        .map_err(|e| Error::Bootstrap(format!("cannot resolve {addr}:{port}: {e}")))?
        .next()
        .ok_or_else(|| Error::Bootstrap(format!("{addr}:{port} resolves to nothing")))
}

enum Role {
    /// Rank 0: the connection of rank `i + 1` at index `i`.
    Root(Vec<TcpStream>),
    Leaf(TcpStream),
}

/// One rank's side of the TCP rendezvous.
pub struct TcpBootstrap {
    rank: usize,
    size: usize,
    timeout: Duration,
    role: Role,
}

impl TcpBootstrap {
    /// Rank 0 accepts `size - 1` connections on `addr:port`; other ranks connect to
    /// it. Fails after `timeout` naming a rank that did not show up.
    pub fn connect(rank: usize, size: usize, addr: &str, port: u16, timeout: Duration) -> Result<TcpBootstrap> {
        if size == 0 || rank >= size {
            return Err(Error::Invalid(format!("rank {rank} outside a world of {size}")));
        }
        let sa = resolve(addr, port)?;
        let deadline = Instant::now() + timeout;
        let role = if rank == 0 {
            Role::Root(Self::accept_all(sa, size, deadline, timeout)?)
        } else {
            let mut s = Self::dial(sa, deadline, timeout)?;
            let mut hello = Vec::new();
            for v in [MAGIC, VERSION, rank as u32, size as u32] {
                hello.extend_from_slice(&v.to_le_bytes());
            }
            write_frame(&mut s, HELLO, &hello).map_err(|e| Error::Bootstrap(format!("hello to {sa}: {e}")))?;
            Role::Leaf(s)
        };
        tracing::debug!(target: "collective::bootstrap", rank, size, %sa, "bootstrap connected");
        Ok(TcpBootstrap { rank, size, timeout, role })
    }

    fn dial(sa: SocketAddr, deadline: Instant, timeout: Duration) -> Result<TcpStream> {
        loop {
            match TcpStream::connect_timeout(&sa, Duration::from_millis(500)) {
                Ok(s) => {
                    s.set_nodelay(true).ok();
                    s.set_read_timeout(Some(timeout)).ok();
                    return Ok(s);
                }
                Err(e) => {
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout { rank: 0, after: timeout, what: format!("rank 0 to listen on {sa} ({e})") });
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }

    fn accept_all(sa: SocketAddr, size: usize, deadline: Instant, timeout: Duration) -> Result<Vec<TcpStream>> {
        let listener = match TcpListener::bind(sa) {
            Ok(l) => l,
            // MASTER_ADDR may name this host by an address it cannot bind (a
            // hostname's public address behind NAT...): listen on every address.
            Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => {
                let any: SocketAddr = if sa.is_ipv4() { ([0, 0, 0, 0], sa.port()).into() } else { (std::net::Ipv6Addr::UNSPECIFIED, sa.port()).into() };
                TcpListener::bind(any).map_err(|e| Error::Bootstrap(format!("listen on {any}: {e}")))?
            }
            Err(e) => return Err(Error::Bootstrap(format!("listen on {sa}: {e}"))),
        };
        listener.set_nonblocking(true).map_err(|e| Error::io("listener", e))?;
        let mut slots: Vec<Option<TcpStream>> = (1..size).map(|_| None).collect();
        let mut missing = size - 1;
        while missing > 0 {
            match listener.accept() {
                Ok((mut s, from)) => {
                    s.set_nonblocking(false).ok();
                    s.set_nodelay(true).ok();
                    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
                    let Ok((HELLO, p)) = read_frame(&mut s) else {
                        tracing::warn!(target: "collective::bootstrap", %from, "ignoring a connection without a hello");
                        continue;
                    };
                    let w = |i: usize| u32::from_le_bytes(p.get(4 * i..4 * i + 4).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]));
                    if p.len() != 16 || w(0) != MAGIC || w(1) != VERSION {
                        tracing::warn!(target: "collective::bootstrap", %from, "ignoring a connection with a bad hello");
                        continue;
                    }
                    let (r, n) = (w(2) as usize, w(3) as usize);
                    if n != size {
                        return Err(Error::Bootstrap(format!("rank {r} (from {from}) believes the world has {n} ranks, rank 0 has {size}")));
                    }
                    if r == 0 || r >= size || slots[r - 1].is_some() {
                        return Err(Error::Bootstrap(format!("rank {r} (from {from}) is out of range or connected twice")));
                    }
                    s.set_read_timeout(Some(timeout)).ok();
                    slots[r - 1] = Some(s);
                    missing -= 1;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if Instant::now() >= deadline {
                        let absent: Vec<String> = slots.iter().enumerate().filter(|(_, s)| s.is_none()).map(|(i, _)| (i + 1).to_string()).collect();
                        return Err(Error::Timeout {
                            rank: slots.iter().position(|s| s.is_none()).unwrap_or(0) + 1,
                            after: timeout,
                            what: format!("rank(s) {} to connect to {sa}", absent.join(", ")),
                        });
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(Error::Bootstrap(format!("accept on {sa}: {e}"))),
            }
        }
        Ok(slots.into_iter().map(|s| s.unwrap()).collect())
    }

    pub fn rank(&self) -> usize {
        self.rank
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Hands the connections to a monitor thread that reports dead ranks to `watch`.
    pub fn into_monitor(self, watch: Arc<Watch>) -> Result<Monitor> {
        let stop = Arc::new(AtomicBool::new(false));
        let (rank, size) = (self.rank, self.size);
        let (thread, leaf) = match self.role {
            Role::Root(peers) => {
                let (w, st) = (watch.clone(), stop.clone());
                let t = std::thread::Builder::new()
                    .name("collective-monitor".into())
                    .spawn(move || root_monitor(peers, w, st))
                    .map_err(|e| Error::io("spawn monitor", e))?;
                (t, None)
            }
            Role::Leaf(s) => {
                let writer = s.try_clone().map_err(|e| Error::io("clone bootstrap socket", e))?;
                s.set_read_timeout(Some(Duration::from_millis(100))).ok();
                let (w, st) = (watch.clone(), stop.clone());
                let t = std::thread::Builder::new()
                    .name("collective-monitor".into())
                    .spawn(move || leaf_monitor(s, w, st))
                    .map_err(|e| Error::io("spawn monitor", e))?;
                (t, Some(writer))
            }
        };
        Ok(Monitor { rank, size, stop, leaf, thread: Some(thread), timeout: self.timeout })
    }
}

impl Exchange for TcpBootstrap {
    fn all_gather(&mut self, blob: &[u8]) -> Result<Vec<Vec<u8>>> {
        match &mut self.role {
            Role::Leaf(s) => {
                write_frame(s, BLOB, blob).map_err(|e| Error::PeerFailed { rank: 0, why: format!("bootstrap send: {e}") })?;
                let t = expect(s, TABLE, 0, "the rank table")?;
                let mut out = Vec::with_capacity(self.size);
                let mut p = &t[..];
                while p.len() >= 4 {
                    let l = u32::from_le_bytes(p[..4].try_into().unwrap()) as usize;
                    if p.len() < 4 + l {
                        break;
                    }
                    out.push(p[4..4 + l].to_vec());
                    p = &p[4 + l..];
                }
                if out.len() != self.size {
                    return Err(Error::Protocol { rank: 0, why: format!("table of {} entries for {} ranks", out.len(), self.size) });
                }
                Ok(out)
            }
            Role::Root(peers) => {
                let mut all = vec![blob.to_vec()];
                for (i, s) in peers.iter_mut().enumerate() {
                    all.push(expect(s, BLOB, i + 1, "connection info")?);
                }
                let mut t = Vec::new();
                for b in &all {
                    t.extend_from_slice(&(b.len() as u32).to_le_bytes());
                    t.extend_from_slice(b);
                }
                for (i, s) in peers.iter_mut().enumerate() {
                    write_frame(s, TABLE, &t).map_err(|e| Error::PeerFailed { rank: i + 1, why: format!("bootstrap send: {e}") })?;
                }
                Ok(all)
            }
        }
    }

    fn barrier(&mut self) -> Result<()> {
        match &mut self.role {
            Role::Leaf(s) => {
                write_frame(s, BARRIER, &[]).map_err(|e| Error::PeerFailed { rank: 0, why: format!("bootstrap send: {e}") })?;
                expect(s, GO, 0, "the barrier").map(|_| ())
            }
            Role::Root(peers) => {
                for (i, s) in peers.iter_mut().enumerate() {
                    expect(s, BARRIER, i + 1, "the barrier")?;
                }
                for (i, s) in peers.iter_mut().enumerate() {
                    write_frame(s, GO, &[]).map_err(|e| Error::PeerFailed { rank: i + 1, why: format!("bootstrap send: {e}") })?;
                }
                Ok(())
            }
        }
    }
}

/// The liveness monitor of one rank (see the module docs). Dropping it runs the
/// shutdown handshake.
pub struct Monitor {
    rank: usize,
    size: usize,
    stop: Arc<AtomicBool>,
    /// Leaf ranks: the write side of the connection to rank 0.
    leaf: Option<TcpStream>,
    thread: Option<JoinHandle<()>>,
    timeout: Duration,
}

impl Monitor {
    /// Says DONE and waits (up to the bootstrap timeout) until every rank has, so that
    /// QPs are torn down only when no peer needs them any more.
    pub fn finish(&mut self) {
        let Some(t) = self.thread.take() else { return };
        if let Some(s) = &mut self.leaf {
            let _ = write_frame(s, DONE, &[]);
        }
        self.stop.store(true, Ordering::Release);
        let deadline = Instant::now() + self.timeout;
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        if t.is_finished() {
            let _ = t.join();
        } else {
            tracing::warn!(target: "collective::bootstrap", rank = self.rank, size = self.size, "shutdown handshake timed out");
        }
        if let Some(s) = &self.leaf {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.finish();
    }
}

fn leaf_monitor(mut s: TcpStream, watch: Arc<Watch>, stop: Arc<AtomicBool>) {
    loop {
        match read_frame(&mut s) {
            Ok((ABORT, p)) => {
                let (r, why) = decode_abort(&p);
                watch.fail(r, why);
            }
            Ok((FIN, _)) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
            Err(e) => {
                if !stop.load(Ordering::Acquire) {
                    watch.fail(0, format!("its bootstrap connection closed ({e}): process exited or was killed"));
                }
                return;
            }
        }
    }
}

fn root_monitor(mut peers: Vec<TcpStream>, watch: Arc<Watch>, stop: Arc<AtomicBool>) {
    #[derive(Clone, Copy, PartialEq)]
    enum St {
        Live,
        Done,
        Gone,
    }
    let n = peers.len();
    let mut st = vec![St::Live; n];
    for s in &peers {
        s.set_read_timeout(Some(Duration::from_secs(1))).ok();
    }
    loop {
        let mut fds: Vec<libc::pollfd> = peers
            .iter()
            .zip(&st)
            .map(|(s, &x)| libc::pollfd { fd: if x == St::Gone { -1 } else { s.as_raw_fd() }, events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: fds is a live array of n pollfd structs; negative fds are ignored.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, 50) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            tracing::warn!(target: "collective::bootstrap", error = %e, "monitor poll failed");
            return;
        }
        for i in 0..n {
            if fds[i].revents == 0 || st[i] == St::Gone {
                continue;
            }
            match read_frame(&mut peers[i]) {
                Ok((DONE, _)) => st[i] = St::Done,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) => {
                    if st[i] == St::Live {
                        let why = format!("its bootstrap connection closed without a goodbye ({e}): process exited or was killed");
                        watch.fail(i + 1, why.clone());
                        let msg = encode_abort(i + 1, &why);
                        for (j, s) in peers.iter_mut().enumerate() {
                            if j != i && st[j] != St::Gone {
                                let _ = write_frame(s, ABORT, &msg);
                            }
                        }
                    }
                    st[i] = St::Gone;
                }
            }
        }
        if stop.load(Ordering::Acquire) && st.iter().all(|&x| x != St::Live) {
            for (s, &x) in peers.iter_mut().zip(&st) {
                if x == St::Done {
                    let _ = write_frame(s, FIN, &[]);
                }
            }
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free_port() -> u16 {
        TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
    }

    #[test]
    fn gather_barrier_and_shutdown() {
        let port = free_port();
        let n = 4;
        let hs: Vec<_> = (0..n)
            .map(|r| {
                std::thread::spawn(move || {
                    let mut b = TcpBootstrap::connect(r, n, "127.0.0.1", port, Duration::from_secs(10)).unwrap();
                    let t = b.all_gather(&[r as u8; 3]).unwrap();
                    assert_eq!(t, (0..n).map(|i| vec![i as u8; 3]).collect::<Vec<_>>());
                    b.barrier().unwrap();
                    let w = Watch::new();
                    let mut m = b.into_monitor(w.clone()).unwrap();
                    m.finish();
                    assert!(w.failed().is_none(), "rank {r}: {:?}", w.failed());
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
    }

    #[test]
    fn a_vanished_rank_is_named() {
        let port = free_port();
        let n = 3;
        let hs: Vec<_> = (0..n)
            .map(|r| {
                std::thread::spawn(move || {
                    let mut b = TcpBootstrap::connect(r, n, "127.0.0.1", port, Duration::from_secs(10)).unwrap();
                    b.all_gather(&[]).unwrap();
                    if r == 2 {
                        // Vanish without the goodbye: the socket closes.
                        drop(b);
                        return None;
                    }
                    let w = Watch::new();
                    let m = b.into_monitor(w.clone()).unwrap();
                    let deadline = Instant::now() + Duration::from_secs(10);
                    while w.failed().is_none() && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    drop(m);
                    w.failed()
                })
            })
            .collect();
        let res: Vec<_> = hs.into_iter().map(|h| h.join().unwrap()).collect();
        assert_eq!(res[0].as_ref().map(|f| f.0), Some(2), "rank 0 saw {:?}", res[0]);
        assert_eq!(res[1].as_ref().map(|f| f.0), Some(2), "rank 1 saw {:?}", res[1]);
        assert!(res[1].as_ref().unwrap().1.contains("killed"));
    }

    #[test]
    fn missing_rank_times_out_with_its_number() {
        let port = free_port();
        let e = TcpBootstrap::connect(0, 3, "127.0.0.1", port, Duration::from_millis(300)).err().unwrap();
        assert_eq!(e.failed_rank(), Some(1));
        assert!(e.to_string().contains("1, 2"), "{e}");
    }
}
