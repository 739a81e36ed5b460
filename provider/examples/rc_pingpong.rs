//! `ibv_rc_pingpong` (and with `--uc`, `ibv_uc_pingpong`) on the doorbell provider:
//! one connected QP each side ping-ponging `size`-byte SENDs. Same options, exchange
//! and output as the stock programs, so either end can be the stock one:
//!
//! ```text
//! cargo run --release -p provider --example rc_pingpong -- -g 1 -c            # server
//! cargo run --release -p provider --example rc_pingpong -- -g 1 -c 127.0.0.1  # client
//! ```
//!
//! `-c` as the stock programs do it: the first byte of every page of the buffer is 0
//! when sent and must be 0 when received (the rest is 0x7b).

#[path = "support/pp.rs"]
mod pp;

use pp::{Dest, Opts, Res, RECV_WRID, SEND_WRID};
use provider::qp::{Ah, QpCap};
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, Context, QpAttr, QpInit, QpState, QpType, Wc};

fn main() -> Res<()> {
    let o = Opts::parse(Opts::default())?;
    let size = o.size as usize;
    let mtu = o.mtu_code()?;
    let ctx = Context::open(o.dev.as_deref())?;
    let chan = if o.events { Some(ctx.create_comp_channel()?) } else { None };
    let pd = ctx.alloc_pd()?;
    let buf = pd.alloc_mr(size, Access::LOCAL_WRITE)?;
    // SAFETY: nothing uses the fresh buffer yet.
    let bytes = unsafe { std::slice::from_raw_parts_mut(buf.ptr(), size) };
    bytes.fill(0x7b);
    if o.chk {
        bytes.iter_mut().step_by(provider::buf::page_size()).for_each(|b| *b = 0);
    }
    let mut cq = ctx.create_cq(o.rx_depth + 1, chan.as_ref())?;
    let cap = QpCap { max_send_wr: 1, max_recv_wr: o.rx_depth, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp_type = if o.uc { QpType::Uc } else { QpType::Rc };
    let mut qp = pd.create_qp(&QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type, sq_sig_all: false, send_ops: None })?;
    qp.to_init(o.ib_port, Access::empty())?;
    let inline = qp.cap().max_inline_data as usize >= size;

    let sge = [buf.sge(..)];
    let post_recv = |qp: &mut provider::Qp, n: u32| (0..n).take_while(|_| qp.post_recv(RECV_WRID, &sge).is_ok()).count() as u32;
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
    println!("{}", me.address_line(true));
    let rem = pp::exchange(&o, &[me], |rem| {
        let ah = Ah { dgid: rem[0].gid, sgid_index, hop_limit: 1, sl: o.sl, port: o.ib_port, ..Default::default() };
        let rtr = QpAttr { state: Some(QpState::Rtr), ah: Some(ah), path_mtu: Some(mtu), dest_qpn: Some(rem[0].qpn), rq_psn: Some(rem[0].psn), ..Default::default() };
        if o.uc {
            // UC has no responder resources, ACK timer or retries.
            qp.modify(&rtr).map_err(|e| format!("Failed to modify QP to RTR: {e}"))?;
            qp.modify(&QpAttr { state: Some(QpState::Rts), sq_psn: Some(me.psn), ..Default::default() })
        } else {
            qp.modify(&QpAttr { max_dest_rd_atomic: Some(1), min_rnr_timer: Some(12), ..rtr }).map_err(|e| format!("Failed to modify QP to RTR: {e}"))?;
            qp.to_rts(me.psn, 14, 7, 7, 1)
        }
        .map_err(|e| format!("Failed to modify QP to RTS: {e}").into())
    })?;
    println!("{}", rem[0].address_line(false));

    // SAFETY: the send reads the buffer at post time (inline) or through the MR.
    let data = [unsafe { std::slice::from_raw_parts(buf.ptr() as *const u8, size) }];
    let wr = SendWr::new(SendOp::Send, if inline { Payload::Inline(&data) } else { Payload::Sgl(&sge) }).signaled();
    let mut pending = RECV_WRID;
    let start = std::time::Instant::now();
    if o.host.is_some() {
        qp.post_send(SEND_WRID, &wr).map_err(|e| format!("Couldn't post send: {e}"))?;
        pending |= SEND_WRID;
    }
    let (mut rcnt, mut scnt, mut bad) = (0u32, 0u32, 0usize);
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
                    if o.chk {
                        // SAFETY: the message is complete; the peer waits for our answer.
                        bad += pp::bad_pages(unsafe { std::slice::from_raw_parts(buf.ptr(), size) });
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
    if bad > 0 {
        return Err(format!("invalid data in {bad} received page(s)").into());
    }
    Ok(())
}
