//! A small RDMA WRITE bandwidth test on one RC QP (the shape of perftest's
//! `ib_write_bw`, not its wire protocol): the client writes `iters` messages of `size`
//! bytes into the server's buffer, keeping `-t` (default 128) in flight and signaling
//! every 16th, then sends one SEND saying it is done; the server checks that the last
//! message's bytes arrived. Addresses go over TCP in the pingpong format, followed by
//! one `"%08x:%016x"` line with the buffer's rkey and address.
//!
//! ```text
//! cargo run --release -p provider --example write_bw -- -g 1            # server
//! cargo run --release -p provider --example write_bw -- -g 1 127.0.0.1  # client
//! ```

#[path = "support/pp.rs"]
mod pp;

use std::io::{Read, Write};

use pp::{Dest, Opts, Res};
use provider::qp::{Ah, QpCap};
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, Context, QpAttr, QpInit, QpState, QpType, Wc};

const SIGNAL_EVERY: u32 = 16;

fn main() -> Res<()> {
    // -r is the number of WRITEs in flight here.
    let o = Opts::parse(Opts { size: 65536, iters: 1000, rx_depth: 128, ..Opts::default() })?;
    let (size, depth) = (o.size as usize, o.rx_depth.max(SIGNAL_EVERY));
    let ctx = Context::open(o.dev.as_deref())?;
    let pd = ctx.alloc_pd()?;
    let buf = pd.alloc_mr(size, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    let mut cq = ctx.create_cq(depth + 2, None)?;
    let cap = QpCap { max_send_wr: depth, max_recv_wr: 1, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None })?;
    qp.to_init(o.ib_port, Access::REMOTE_WRITE)?;
    qp.post_recv(1, &[buf.sge(0..0)])?;
    let (gid, sgid_index) = pp::local_gid(&ctx, &o)?;
    let me = Dest { lid: ctx.query_port(o.ib_port)?.legacy_resp.lid, qpn: qp.qpn(), psn: pp::psn(), gid };
    println!("{}", me.address_line(true));
    let rem = pp::exchange(&o, &[me], |rem| {
        let ah = Ah { dgid: rem[0].gid, sgid_index, hop_limit: 1, port: o.ib_port, ..Default::default() };
        qp.modify(&QpAttr {
            state: Some(QpState::Rtr), ah: Some(ah), path_mtu: Some(o.mtu_code()?), dest_qpn: Some(rem[0].qpn),
            rq_psn: Some(rem[0].psn), max_dest_rd_atomic: Some(1), min_rnr_timer: Some(12), ..Default::default()
        })?;
        Ok(qp.to_rts(me.psn, 14, 7, 7, 1)?)
    })?;
    println!("{}", rem[0].address_line(false));
    // The buffer's key and address, on a second connection to the same port.
    let key_line = format!("{:08x}:{:016x}", buf.rkey(), buf.addr());
    let (rkey, raddr) = if let Some(host) = &o.host {
        let m = read_key_line(host, o.port)?;
        let t = std::str::from_utf8(&m)?;
        (u32::from_str_radix(&t[..8], 16)?, u64::from_str_radix(&t[9..25], 16)?)
    } else {
        let l = std::net::TcpListener::bind(("0.0.0.0", o.port))?;
        l.accept()?.0.write_all(key_line.as_bytes())?;
        (0, 0)
    };

    let start = std::time::Instant::now();
    let mut wcs = [Wc::default(); 16];
    if o.host.is_some() {
        // SAFETY: nothing uses the buffer but the WRITEs, which read it.
        unsafe { std::slice::from_raw_parts_mut(buf.ptr(), size) }.iter_mut().enumerate().for_each(|(i, b)| *b = (i % 251) as u8);
        let sgl = [buf.sge(..)];
        let (mut posted, mut done) = (0u32, 0u32);
        while done < o.iters {
            while posted < o.iters && posted - done < depth {
                let mut wr = SendWr::new(SendOp::RdmaWrite { raddr, rkey }, Payload::Sgl(&sgl));
                if posted % SIGNAL_EVERY == SIGNAL_EVERY - 1 || posted == o.iters - 1 {
                    wr = wr.signaled();
                }
                qp.post_send(posted as u64, &wr)?;
                posted += 1;
            }
            let n = pp::wait_wcs(&mut cq, None, &mut wcs)?;
            for wc in &wcs[..n] {
                if wc.status != provider::cqe::WcStatus::Success {
                    return Err(format!("WRITE {} failed: {}", wc.wr_id, wc.status.as_str()).into());
                }
                done = wc.wr_id as u32 + 1;
            }
        }
        qp.post_send(u64::MAX, &SendWr::new(SendOp::Send, Payload::NONE).signaled())?;
        pp::wait_wcs(&mut cq, None, &mut wcs[..1])?;
    } else {
        let n = pp::wait_wcs(&mut cq, None, &mut wcs[..1])?;
        if n != 1 || wcs[0].status != provider::cqe::WcStatus::Success {
            return Err(format!("the client's done message failed: {:?}", wcs[0]).into());
        }
        if buf.iter().enumerate().any(|(i, &b)| b != (i % 251) as u8) {
            return Err("invalid data in the written buffer".into());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let bytes = o.size as u64 * o.iters as u64;
    println!(" #bytes     #iterations    BW average[MB/sec]");
    println!(" {:<10} {:<14} {:.2}", o.size, o.iters, bytes as f64 / secs / 1e6);
    Ok(())
}

/// The server opens its second listener only after the exchange, and a connection
/// that reached the first one as it closed is reset: retry briefly.
fn read_key_line(host: &str, port: u16) -> Res<[u8; 25]> {
    let mut last = None;
    for _ in 0..200 {
        let mut m = [0u8; 25];
        match std::net::TcpStream::connect((host, port)).and_then(|mut s| s.read_exact(&mut m)) {
            Ok(()) => return Ok(m),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    Err(format!("Couldn't read the server's key from {host}:{port}: {last:?}").into())
}
