//! The out-of-band exchange of the benchmarks: newline-terminated ASCII lines over one
//! TCP connection. The format is doorbell's own (perftest's is not followed), so a
//! doorbell client needs a doorbell server.
//!
//! ```text
//! client -> server   hello doorbell-bench 1 <Params::encode()>
//! server -> client   ok mtu=<code>            (or: error <why>; both ends use the smaller MTU)
//! client -> server   qp <i> <lid> <qpn> <psn> <rkey> <src> <dst> <gid>   one per QP, hex
//! server -> client   qp ...                                               (same, its QPs)
//! client -> server   ready                    (after its QPs reached RTS)
//! server -> client   ready                    (after its QPs reached RTS)
//! then for each message size:
//! client -> server   go <size>
//! server -> client   go-ok                    (receives posted, buffers filled)
//!                    ... the test runs ...
//! client -> server   stop <count>...          (-D runs: per-QP work requests, lets the
//!                                               server's waiting loops end)
//! client -> server   counts <c0> <c1> ...     (per-QP operations completed)
//! client -> server   row <text>               (the result line, printed by both ends)
//! either -> other    verify ok | verify fail <why>   (--check: the end that checks)
//! client -> server   done
//! ```
//!
//! `src` is where a peer reads (RDMA READ source), `dst` where it writes (WRITE, atomics);
//! `gid` is 32 hex digits in byte order.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};

/// One end of the exchange.
pub struct Oob {
    s: TcpStream,
    /// Bytes received and not yet returned as lines.
    inbox: Vec<u8>,
}

/// What a peer needs to reach one QP and its memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInfo {
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    /// Where the peer reads from.
    pub src: u64,
    /// Where the peer writes to.
    pub dst: u64,
    pub gid: [u8; 16],
}

impl QpInfo {
    pub fn encode(&self, idx: usize) -> String {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}")).collect();
        format!("qp {idx} {:x} {:x} {:x} {:x} {:x} {:x} {gid}", self.lid, self.qpn, self.psn, self.rkey, self.src, self.dst)
    }

    pub fn decode(line: &str, idx: usize) -> Result<QpInfo> {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() != 9 || f[0] != "qp" || f[1] != idx.to_string() {
            bail!("expected QP {idx}, got {line:?}");
        }
        let h = |s: &str| u64::from_str_radix(s, 16).map_err(|_| anyhow!("bad hex {s:?} in {line:?}"));
        let g = f[8];
        if g.len() != 32 {
            bail!("bad GID in {line:?}");
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&g[2 * i..2 * i + 2], 16).map_err(|_| anyhow!("bad GID in {line:?}"))?;
        }
        Ok(QpInfo {
            lid: h(f[2])? as u16,
            qpn: h(f[3])? as u32 & 0xff_ffff,
            psn: h(f[4])? as u32 & 0xff_ffff,
            rkey: h(f[5])? as u32,
            src: h(f[6])?,
            dst: h(f[7])?,
            gid,
        })
    }
}

/// Listens on `port` (0: any free port) on every IPv4 address.
pub fn listen(port: u16) -> Result<TcpListener> {
    // std sets SO_REUSEADDR on Unix listeners.
    TcpListener::bind(("0.0.0.0", port)).with_context(|| format!("couldn't listen to port {port}"))
}

impl Oob {
    /// Waits for one client.
    pub fn accept(l: &TcpListener) -> Result<Oob> {
        let (s, _) = l.accept().context("accept")?;
        Oob::from_stream(s)
    }

    /// Connects to `host:port`, retrying for `patience` (the server may still be starting).
    pub fn connect(host: &str, port: u16, patience: Duration) -> Result<Oob> {
        let start = Instant::now();
        loop {
            let addrs: Vec<_> = (host, port).to_socket_addrs().with_context(|| format!("resolve {host}"))?.collect();
            let mut last = None;
            for a in &addrs {
                match TcpStream::connect_timeout(a, Duration::from_secs(5)) {
                    Ok(s) => return Oob::from_stream(s),
                    Err(e) => last = Some(e),
                }
            }
            if start.elapsed() >= patience {
                let e = last.map(|e| e.to_string()).unwrap_or_else(|| "no address".into());
                bail!("couldn't connect to {host}:{port}: {e}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn from_stream(s: TcpStream) -> Result<Oob> {
        s.set_nodelay(true)?;
        Ok(Oob { s, inbox: Vec::new() })
    }

    pub fn send(&mut self, line: &str) -> Result<()> {
        debug_assert!(!line.contains('\n'));
        self.s.write_all(format!("{line}\n").as_bytes()).context("out-of-band send")
    }

    /// A whole line from the inbox, if there is one.
    fn take_line(&mut self) -> Result<Option<String>> {
        let Some(pos) = self.inbox.iter().position(|&b| b == b'\n') else { return Ok(None) };
        let mut line: Vec<u8> = self.inbox.drain(..=pos).collect();
        line.pop();
        let line = String::from_utf8(line).map_err(|_| anyhow!("peer sent a non-UTF-8 line"))?;
        if let Some(why) = line.strip_prefix("error ") {
            bail!("peer: {why}");
        }
        Ok(Some(line))
    }

    /// One read from the socket into the inbox.
    fn fill(&mut self) -> Result<()> {
        let mut tmp = [0u8; 4096];
        match self.s.read(&mut tmp) {
            Ok(0) => bail!("peer closed the out-of-band connection"),
            Ok(n) => {
                self.inbox.extend_from_slice(&tmp[..n]);
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The next line (without its newline); an error when the peer closed.
    pub fn recv(&mut self) -> Result<String> {
        loop {
            if let Some(l) = self.take_line()? {
                return Ok(l);
            }
            self.fill().context("out-of-band receive")?;
        }
    }

    /// The next line, which must start with `word`; returns the rest.
    pub fn expect(&mut self, word: &str) -> Result<String> {
        let l = self.recv()?;
        match l.strip_prefix(word) {
            Some(rest) if rest.is_empty() || rest.starts_with(' ') => Ok(rest.trim_start().to_string()),
            _ => bail!("out-of-band: expected {word:?}, got {l:?}"),
        }
    }

    /// A complete line if one has arrived, without blocking.
    pub fn try_recv(&mut self) -> Result<Option<String>> {
        if let Some(l) = self.take_line()? {
            return Ok(Some(l));
        }
        self.s.set_nonblocking(true)?;
        let mut tmp = [0u8; 4096];
        let mut closed = false;
        let r = loop {
            match self.s.read(&mut tmp) {
                Ok(0) => {
                    closed = true;
                    break Ok(());
                }
                Ok(n) => self.inbox.extend_from_slice(&tmp[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.s.set_nonblocking(false)?;
        r.context("out-of-band receive")?;
        match self.take_line()? {
            None if closed => bail!("peer closed the out-of-band connection"),
            l => Ok(l),
        }
    }

    /// Tells the peer why this end gives up (best effort).
    pub fn send_error(&mut self, why: &str) {
        let _ = self.send(&format!("error {}", why.replace('\n', " ")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_info_round_trip() {
        let q = QpInfo { lid: 0, qpn: 0x1234, psn: 0xabcdef, rkey: 0x1fff00, src: 0x7f00_0000_1000, dst: 0x7f00_0000_2000, gid: [7; 16] };
        assert_eq!(QpInfo::decode(&q.encode(3), 3).unwrap(), q);
        assert!(QpInfo::decode(&q.encode(3), 2).is_err());
    }

    #[test]
    fn lines_blocking_and_not() {
        let l = listen(0).unwrap();
        let port = l.local_addr().unwrap().port();
        let t = std::thread::spawn(move || {
            let mut c = Oob::connect("127.0.0.1", port, Duration::from_secs(5)).unwrap();
            c.send("hello world").unwrap();
            c.send("second").unwrap();
            c.expect("ack").unwrap();
            c.send("third").unwrap();
        });
        let mut s = Oob::accept(&l).unwrap();
        assert_eq!(s.recv().unwrap(), "hello world");
        s.send("ack").unwrap();
        let mut got = vec![];
        let start = Instant::now();
        while got.len() < 2 && start.elapsed() < Duration::from_secs(5) {
            if let Some(x) = s.try_recv().unwrap() {
                got.push(x);
            }
        }
        assert_eq!(got, ["second", "third"]);
        t.join().unwrap();
    }
}
