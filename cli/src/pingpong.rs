//! `doorbell pingpong [host]`: ibv_rc_pingpong's test on the doorbell provider, with
//! its flags, its out-of-band exchange and its output, so either end can be the stock
//! program (on softhca through the preload shim).
//!
//! Exchange (TCP, default port 18515): each end sends one 52-byte message,
//! `"%04x:%06x:%06x:%s"` of LID, QPN, PSN and the GID as 32 hex digits in byte order,
//! NUL-terminated. The client connects and writes first; the server reads, moves its QP
//! to RTR and RTS, answers, then waits for the client's `"done"` (5 bytes with the NUL);
//! the client moves to RTR/RTS after the answer.
//!
//! Data: SENDs of `size` bytes, signaled, inline when the QP's inline limit allows;
//! the client sends first and each end sends again once its last send completed and
//! the peer's message arrived. `rx-depth` receives stay posted.
//!
//! `-c`: the server checks that the first byte of every page of each message is zero
//! (ibv_rc_pingpong's convention, so either end may be stock) and echoes messages
//! from the same buffer, as the stock server does; the client sends a full pattern from
//! one buffer, receives into another that it poisons before each round trip, and
//! checks that every byte came back.
//!
//! Differences from ibv_rc_pingpong: without `-g` on an Ethernet port the port's
//! IPv4-mapped RoCE v2 GID is used (RoCE cannot work without a GID); a hidden
//! `--timeout` ends a stalled run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use provider::cqe::{WcOpcode, WcStatus};
use provider::qp::attr::{Ah, QpAttr, QpState};
use provider::qp::QpCap;
use provider::wqe::{Payload, SendOp, SendWr, Sge};
use provider::{Access, Context, QpInit, QpType, Wc};
use uverbs::sys::verbs::{link_layer, mtu as ibmtu};

use crate::bench::pattern::{self, End};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Server to connect to (none: act as the server).
    host: Option<String>,
    /// Listen on / connect to this TCP port.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    port: u16,
    /// RDMA device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    ib_port: u8,
    /// Size of the message exchanged.
    #[arg(short = 's', long = "size", default_value_t = 4096)]
    size: u32,
    /// Path MTU.
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    mtu: u32,
    /// Number of receives to keep posted.
    #[arg(short = 'r', long = "rx-depth", default_value_t = 500)]
    rx_depth: u32,
    /// Number of exchanges.
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    iters: u64,
    /// Service level.
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    sl: u8,
    /// Sleep on CQ events instead of busy polling.
    #[arg(short = 'e', long = "events")]
    events: bool,
    /// Local GID index (default: the IPv4-mapped RoCE v2 GID on Ethernet).
    #[arg(short = 'g', long = "gid-idx", allow_negative_numbers = true)]
    gid_idx: Option<i32>,
    /// Validate received buffers.
    #[arg(short = 'c', long = "chk")]
    chk: bool,
    /// Give up after this many seconds without a completion (0: never).
    #[arg(long, hide = true, default_value_t = 0)]
    timeout: u64,
    /// Use an RC QP made entirely through DevX (`devx::rc`: CQ and QP rings and
    /// doorbell records in UMEMs, a DevX UAR, PRM state transitions) instead of a
    /// verbs QP; the peer cannot tell.
    #[arg(long, conflicts_with = "events")]
    devx: bool,
}

/// The QP and CQ of the test: the provider's verbs objects, or a DevX RC QP.
enum Rc {
    Verbs { qp: Box<provider::Qp>, cq: provider::Cq },
    Devx(Box<devx::rc::RcQp>),
}

impl Rc {
    fn qpn(&self) -> u32 {
        match self {
            Rc::Verbs { qp, .. } => qp.qpn(),
            Rc::Devx(d) => d.qpn(),
        }
    }

    fn post_recv_list(&mut self, list: &[(u64, &[Sge])]) -> Result<()> {
        match self {
            Rc::Verbs { qp, .. } => qp.post_recv_list(list).map_err(|e| anyhow!("{e}")),
            Rc::Devx(d) => list.iter().try_for_each(|(id, sgl)| d.post_recv(*id, sgl)).map_err(|e| anyhow!("{e}")),
        }
    }

    fn post_send(&mut self, wr_id: u64, wr: &SendWr<'_>) -> Result<()> {
        match self {
            Rc::Verbs { qp, .. } => qp.post_send(wr_id, wr).map_err(|e| anyhow!("{e}")),
            Rc::Devx(d) => d.post_send(wr_id, wr).map_err(|e| anyhow!("{e}")),
        }
    }

    fn poll(&mut self, wcs: &mut [Wc]) -> usize {
        match self {
            Rc::Verbs { cq, .. } => cq.poll(wcs),
            Rc::Devx(d) => {
                let mut n = 0;
                while n < wcs.len() {
                    match d.poll() {
                        Some(wc) => wcs[n] = wc,
                        None => break,
                    }
                    n += 1;
                }
                n
            }
        }
    }
}

const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
use provider::oob::{Dest, WIRE_LEN as MSG_SIZE};

fn mtu_code(bytes: u32) -> Result<u8> {
    Ok(match bytes {
        256 => ibmtu::MTU_256,
        512 => ibmtu::MTU_512,
        1024 => ibmtu::MTU_1024,
        2048 => ibmtu::MTU_2048,
        4096 => ibmtu::MTU_4096,
        _ => bail!("invalid MTU {bytes}"),
    })
}

pub fn run(a: &Args) -> Result<()> {
    let mtu = mtu_code(a.mtu)?;
    if a.rx_depth < 2 {
        bail!("rx-depth must be at least 2");
    }
    if a.iters == 0 {
        bail!("iters must be at least 1");
    }
    let client = a.host.is_some();
    let size = a.size as usize;
    let page = provider::buf::page_size();
    let region = size.max(1).div_ceil(page) * page;
    // The client with -c receives into a second buffer so it can check the echo.
    let split = client && a.chk;
    let ctx = Context::open(a.dev.as_deref()).context("couldn't get context")?;
    let chan = if a.events { Some(ctx.create_comp_channel().context("couldn't create completion channel")?) } else { None };
    let pd = ctx.alloc_pd().context("couldn't allocate PD")?;
    // The work buffer and its registration, owned together (ibv_rc_pingpong's
    // memalign + ibv_reg_mr).
    let buf = pd.alloc_mr(if split { 2 * region } else { region }, Access::LOCAL_WRITE).context("couldn't register MR")?;
    let send_addr = buf.addr();
    let recv_addr = if split { buf.addr() + region as u64 } else { buf.addr() };
    // SAFETY: nothing else uses the fresh buffer yet.
    unsafe {
        std::ptr::write_bytes(buf.ptr(), 0x7b, buf.len());
        if a.chk {
            if split {
                fill_client(buf.ptr(), size, page);
                pattern::poison(buf.ptr().add(region), size, End::Client, 0);
            } else {
                for i in (0..size).step_by(page) {
                    *buf.ptr().add(i) = 0;
                }
            }
        }
    }

    let mut rc = if a.devx {
        let d = devx::DevxContext::new(ctx.clone()).context("DevX")?;
        let log = |n: u32| n.max(2).next_power_of_two().trailing_zeros() as u8;
        let cfg = devx::rc::RcConfig {
            log_sq_size: 2,
            log_rq_size: log(a.rx_depth),
            max_recv_sge: 1,
            log_cq_size: log(a.rx_depth + 2),
            port: a.ib_port,
        };
        Rc::Devx(Box::new(devx::rc::RcQp::new(&d, &pd, cfg).context("couldn't create the DevX QP")?))
    } else {
        let cq = ctx.create_cq(a.rx_depth + 1, chan.as_ref()).context("couldn't create CQ")?;
        let cap = QpCap { max_send_wr: 1, max_recv_wr: a.rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        let qp = pd
            .create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None })
            .context("couldn't create QP")?;
        qp.to_init(a.ib_port, Access::empty()).context("failed to modify QP to INIT")?;
        Rc::Verbs { qp: Box::new(qp), cq }
    };
    let inline = matches!(&rc, Rc::Verbs { qp, .. } if qp.cap().max_inline_data as usize >= size);

    let recv_sge = [Sge::new(recv_addr, a.size, buf.lkey())];
    let post_recvs = |rc: &mut Rc, n: u32| -> Result<u32> {
        let list: Vec<(u64, &[Sge])> = (0..n).map(|_| (RECV_WRID, &recv_sge[..])).collect();
        rc.post_recv_list(&list).map(|()| n).map_err(|e| anyhow!("couldn't post receive: {e}"))
    };
    let mut routs = post_recvs(&mut rc, a.rx_depth)?;
    if let (true, Rc::Verbs { cq, .. }) = (a.events, &mut rc) {
        cq.req_notify(false);
    }

    let pa = ctx.query_port(a.ib_port).context("couldn't get port info")?.legacy_resp;
    if pa.link_layer != link_layer::ETHERNET && pa.lid == 0 {
        bail!("couldn't get local LID");
    }
    let (gid, sgid_index) = match a.gid_idx {
        Some(i) if i >= 0 => (ctx.query_gid(a.ib_port, i as u32).with_context(|| format!("can't read sgid of index {i}"))?.raw(), i as u8),
        _ if pa.link_layer == link_layer::ETHERNET => {
            let g = ctx.default_gid(a.ib_port)?;
            (g.raw(), g.gid_index as u8)
        }
        _ => ([0u8; 16], 0),
    };
    let me = Dest { lid: pa.lid, qpn: rc.qpn(), psn: rand::random::<u32>() & 0xff_ffff, gid };
    println!("{}", me.address_line(true));
    std::io::stdout().flush()?;

    let connect = |rc: &mut Rc, rem: &Dest| -> Result<()> {
        let global = rem.gid != [0u8; 16];
        if !global && pa.link_layer == link_layer::ETHERNET {
            bail!("the remote end has no GID (run it with -g)");
        }
        let qp = match rc {
            Rc::Verbs { qp, .. } => qp,
            Rc::Devx(d) => {
                let p = devx::rc::ConnectParams {
                    psn: me.psn, sgid_index, mtu, retry_count: 7, rnr_retry: 7, ack_timeout: 14, min_rnr_nak: 12,
                    log_rd_atomic: 0,
                };
                let peer = devx::rc::Peer { qpn: rem.qpn, psn: rem.psn, gid: rem.gid };
                return d.connect(&peer, &p).context("failed to move the DevX QP to RTS");
            }
        };
        qp.modify(&QpAttr {
            state: Some(QpState::Rtr),
            path_mtu: Some(mtu),
            dest_qpn: Some(rem.qpn),
            rq_psn: Some(rem.psn),
            max_dest_rd_atomic: Some(1),
            min_rnr_timer: Some(12),
            ah: Some(Ah { dgid: rem.gid, sgid_index, hop_limit: 1, sl: a.sl, port: a.ib_port, ..Default::default() }),
            ..Default::default()
        })
        .context("failed to modify QP to RTR")?;
        qp.to_rts(me.psn, 14, 7, 7, 1).context("failed to modify QP to RTS")?;
        Ok(())
    };

    let rem = if let Some(host) = &a.host {
        let mut s = connect_tcp(host, a.port)?;
        s.write_all(&me.to_wire()).context("couldn't send local address")?;
        let mut m = [0u8; MSG_SIZE];
        s.read_exact(&mut m).context("couldn't read remote address")?;
        s.write_all(b"done\0").context("couldn't send \"done\"")?;
        let rem = Dest::from_wire(&m)?;
        println!("{}", rem.address_line(false));
        connect(&mut rc, &rem)?;
        rem
    } else {
        let l = TcpListener::bind(("0.0.0.0", a.port)).with_context(|| format!("couldn't listen to port {}", a.port))?;
        let (mut s, _) = l.accept().context("accept() failed")?;
        let mut m = [0u8; MSG_SIZE];
        s.read_exact(&mut m).context("couldn't read remote address")?;
        let rem = Dest::from_wire(&m)?;
        connect(&mut rc, &rem).context("couldn't connect to remote QP")?;
        s.write_all(&me.to_wire()).context("couldn't send local address")?;
        let mut done = [0u8; 5];
        s.read_exact(&mut done).context("couldn't read \"done\"")?;
        println!("{}", rem.address_line(false));
        rem
    };
    let _ = rem;

    let send_sge = [Sge::new(send_addr, a.size, buf.lkey())];
    let inline_data: [&[u8]; 1];
    let payload = if inline && size > 0 {
        // SAFETY: the send bytes are read at post time only; with `split` nothing
        // writes them, without it the echo semantics are exactly ibv_rc_pingpong's.
        inline_data = [unsafe { std::slice::from_raw_parts(send_addr as *const u8, size) }];
        Payload::Inline(&inline_data)
    } else {
        Payload::Sgl(&send_sge)
    };
    let wr = SendWr::new(SendOp::Send, payload).signaled();

    let start = Instant::now();
    let mut pending = RECV_WRID;
    if client {
        rc.post_send(SEND_WRID, &wr).map_err(|e| anyhow!("couldn't post send: {e}"))?;
        pending |= SEND_WRID;
    }
    let (mut rcnt, mut scnt) = (0u64, 0u64);
    let mut wcs = [Wc::default(); 2];
    let mut last_progress = Instant::now();
    let mut spins = 0u32;
    let mut bad_pages = 0u64;
    let mut bad_echo: Option<String> = None;
    while rcnt < a.iters || scnt < a.iters {
        let n = if let Some(ch) = &chan {
            loop {
                match ch.get_event(Some(Duration::from_millis(500))) {
                    Ok(_) => break,
                    Err(e) if e.errno() == nix::errno::Errno::ETIMEDOUT => {
                        if a.timeout > 0 && last_progress.elapsed() > Duration::from_secs(a.timeout) {
                            bail!("no completion event for {} s", a.timeout);
                        }
                    }
                    Err(e) => bail!("failed to get cq_event: {e}"),
                }
            }
            let Rc::Verbs { cq, .. } = &mut rc else { unreachable!("--events excludes --devx") };
            cq.ack_event();
            cq.req_notify(false);
            cq.poll(&mut wcs)
        } else {
            let n = rc.poll(&mut wcs);
            if n == 0 {
                spins = spins.wrapping_add(1);
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                    if a.timeout > 0 && spins % 256 == 0 && last_progress.elapsed() > Duration::from_secs(a.timeout) {
                        bail!("no completion for {} s ({rcnt} received, {scnt} sent)", a.timeout);
                    }
                }
                continue;
            }
            n
        };
        spins = 0;
        last_progress = Instant::now();
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                bail!("Failed status {} ({}) for wr_id {}", wc.status.as_str(), wc.status as u32, wc.wr_id);
            }
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    if wc.opcode != WcOpcode::Recv {
                        bail!("receive completion with opcode {:?}", wc.opcode);
                    }
                    routs -= 1;
                    if routs <= 1 {
                        routs += post_recvs(&mut rc, a.rx_depth - routs)?;
                    }
                    rcnt += 1;
                    if a.chk {
                        if wc.byte_len as usize != size && bad_echo.is_none() {
                            bad_echo = Some(format!("message {rcnt}: {} bytes, expected {size}", wc.byte_len));
                        }
                        // SAFETY: the message is complete and the peer sends nothing
                        // more until we answer.
                        unsafe {
                            if split {
                                let p = recv_addr as *mut u8;
                                if let Err(e) = check_echo(p, buf.ptr(), size) {
                                    bad_echo.get_or_insert(format!("message {rcnt}: {e}"));
                                }
                                pattern::poison(p, size, End::Client, 0);
                            } else {
                                bad_pages += (0..size).step_by(page).filter(|&i| *(recv_addr as *const u8).add(i) != 0).count() as u64;
                            }
                        }
                    }
                }
                id => bail!("completion for unknown wr_id {id}"),
            }
            pending &= !wc.wr_id;
            if scnt < a.iters && pending == 0 {
                rc.post_send(SEND_WRID, &wr).map_err(|e| anyhow!("couldn't post send: {e}"))?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    let usec = start.elapsed().as_secs_f64() * 1e6;
    let bytes = a.size as u64 * a.iters * 2;
    println!("{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec", usec / 1e6, bytes as f64 * 8.0 / usec);
    println!("{} iters in {:.2} seconds = {:.2} usec/iter", a.iters, usec / 1e6, usec / a.iters as f64);
    drop(rc);
    drop(buf);
    if bad_pages > 0 {
        bail!("invalid data in {bad_pages} page(s) of received messages");
    }
    if let Some(e) = bad_echo {
        bail!("invalid data: {e}");
    }
    Ok(())
}

/// The client's -c message: the pattern, with the first byte of every page zero.
///
/// # Safety
/// `p` must be valid for `size` bytes and not in use by the device.
unsafe fn fill_client(p: *mut u8, size: usize, page: usize) {
    // SAFETY: per the contract.
    unsafe {
        pattern::fill(p, size, End::Client, 0);
        for i in (0..size).step_by(page) {
            *p.add(i) = 0;
        }
    }
}

/// Compares the echo with what was sent.
///
/// # Safety
/// Both ranges must be valid for `size` bytes and quiescent.
unsafe fn check_echo(got: *const u8, sent: *const u8, size: usize) -> Result<(), String> {
    // SAFETY: per the contract.
    let (g, s) = unsafe { (std::slice::from_raw_parts(got, size), std::slice::from_raw_parts(sent, size)) };
    match g.iter().zip(s).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{} of {size} bytes differ; first at offset {i}: got {:#04x}, sent {:#04x}",
            g.iter().zip(s).filter(|(a, b)| a != b).count(),
            g[i],
            s[i]
        )),
    }
}

fn connect_tcp(host: &str, port: u16) -> Result<TcpStream> {
    let addrs = (host, port).to_socket_addrs().with_context(|| format!("{host} for port {port}"))?;
    let mut last = None;
    for a in addrs {
        match TcpStream::connect(a) {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(e),
        }
    }
    Err(anyhow!("couldn't connect to {host}:{port}: {}", last.map(|e| e.to_string()).unwrap_or_else(|| "no address".into())))
}

