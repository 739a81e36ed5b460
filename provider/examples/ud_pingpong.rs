//! `ibv_ud_pingpong` on the doorbell provider: one UD QP each side, SENDs of `size`
//! bytes through an address handle (Q_Key 0x11111111), received 40 bytes into the
//! buffer behind the GRH. Same options, exchange and output as the stock program, so
//! either end can be the stock one:
//!
//! ```text
//! cargo run --release -p provider --example ud_pingpong -- -g 1            # server
//! cargo run --release -p provider --example ud_pingpong -- -g 1 127.0.0.1  # client
//! ```

#[path = "support/pp.rs"]
mod pp;

use pp::{Dest, Opts, Res, RECV_WRID, SEND_WRID};
use provider::qp::ud::GRH_BYTES;
use provider::qp::{Ah, QpCap};
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, AddressHandle, Context, QpInit, QpType, Wc};

const QKEY: u32 = 0x1111_1111;

fn main() -> Res<()> {
    // The installed ibv_ud_pingpong (rdma-core 44) sends 1024 bytes unless told
    // otherwise (its usage text says 2048; its result line for `-n 5` says 10240 bytes).
    let o = Opts::parse(Opts { size: 1024, ..Opts::default() })?;
    let size = o.size as usize;
    let ctx = Context::open(o.dev.as_deref())?;
    let mtu = 1usize << (ctx.query_port(o.ib_port)?.legacy_resp.active_mtu + 7);
    if size > mtu {
        return Err(format!("Requested size larger than port MTU ({mtu})").into());
    }
    let chan = if o.events { Some(ctx.create_comp_channel()?) } else { None };
    let pd = ctx.alloc_pd()?;
    let buf = pd.alloc_mr(size + GRH_BYTES, Access::LOCAL_WRITE)?;
    let mut cq = ctx.create_cq(o.rx_depth + 1, chan.as_ref())?;
    let cap = QpCap { max_send_wr: 1, max_recv_wr: o.rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Ud, sq_sig_all: false, send_ops: None })?;
    let inline = qp.cap().max_inline_data as usize >= size;

    let rsge = [buf.sge(..)];
    let post_recv = |qp: &mut provider::Qp, n: u32| (0..n).take_while(|_| qp.post_recv(RECV_WRID, &rsge).is_ok()).count() as u32;
    let mut routs = post_recv(&mut qp, o.rx_depth);
    if routs < o.rx_depth {
        return Err(format!("Couldn't post receive ({routs})").into());
    }
    if o.events {
        cq.req_notify(false);
    }
    let lid = ctx.query_port(o.ib_port)?.legacy_resp.lid;
    let (gid, sgid_index) = pp::local_gid(&ctx, &o)?;
    let me = Dest { lid, qpn: qp.qpn(), psn: pp::psn(), gid };
    // ibv_ud_pingpong's local line has a colon before the GID.
    println!("  local address:  LID {:#06x}, QPN {:#08x}, PSN {:#08x}: GID {}", me.lid, me.qpn, me.psn, std::net::Ipv6Addr::from(gid));

    let mut ah: Option<AddressHandle> = None;
    let rem = pp::exchange(&o, &[me], |rem| {
        qp.modify(&provider::QpAttr { state: Some(provider::QpState::Init), pkey_index: Some(0), port: Some(o.ib_port), qkey: Some(QKEY), ..Default::default() })?;
        qp.modify(&provider::QpAttr { state: Some(provider::QpState::Rtr), ..Default::default() })?;
        qp.modify(&provider::QpAttr { state: Some(provider::QpState::Rts), sq_psn: Some(me.psn), ..Default::default() })?;
        let attr = Ah { dgid: rem[0].gid, sgid_index, hop_limit: 1, sl: o.sl, port: o.ib_port, ..Default::default() };
        ah = Some(pd.create_ah(&attr).map_err(|e| format!("Failed to create AH: {e}"))?);
        Ok(())
    })?;
    println!("{}", rem[0].address_line(false));
    let ah = ah.expect("connected");

    // SAFETY: the send reads its bytes at post time (inline) or through the MR.
    let bytes = [unsafe { std::slice::from_raw_parts(buf.ptr().add(GRH_BYTES) as *const u8, size) }];
    let ssge = [buf.sge(GRH_BYTES..)];
    let payload = if inline { Payload::Inline(&bytes) } else { Payload::Sgl(&ssge) };
    let wr = SendWr::new(SendOp::Send, payload).signaled().to_ud(ah.dest(rem[0].qpn, QKEY));
    let mut pending = RECV_WRID;
    let start = std::time::Instant::now();
    if o.host.is_some() {
        qp.post_send(SEND_WRID, &wr).map_err(|e| format!("Couldn't post send: {e}"))?;
        pending |= SEND_WRID;
    }
    let (mut rcnt, mut scnt) = (0u32, 0u32);
    let mut wcs = [Wc::default(); 2];
    while rcnt < o.iters || scnt < o.iters {
        let n = pp::wait_wcs(&mut cq, chan.as_ref(), &mut wcs)?;
        for wc in &wcs[..n] {
            pp::check_status(wc)?;
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= 1 {
                        routs += post_recv(&mut qp, o.rx_depth - routs);
                        if routs < o.rx_depth {
                            return Err(format!("Couldn't post receive ({routs})").into());
                        }
                    }
                    rcnt += 1;
                }
                id => return Err(format!("Completion for unknown wr_id {id}").into()),
            }
            pending &= !wc.wr_id;
            if scnt < o.iters && pending == 0 {
                qp.post_send(SEND_WRID, &wr).map_err(|e| format!("Couldn't post send: {e}"))?;
                pending = RECV_WRID | SEND_WRID;
            }
        }
    }
    pp::report(o.size as u64 * o.iters as u64 * 2, o.iters as u64, start.elapsed());
    Ok(())
}
