//! `ibv_srq_pingpong` on the doorbell provider: `num_qp` RC QPs that all receive from
//! one shared receive queue, ping-ponging `size`-byte SENDs. Speaks the stock program's
//! exchange (always 256 addresses each way, unused ones zero) and options, so either
//! end can be the stock program:
//!
//! ```text
//! cargo run --release -p provider --example srq_pingpong -- -g 1 -q 4            # server
//! cargo run --release -p provider --example srq_pingpong -- -g 1 -q 4 127.0.0.1  # client
//! ```

#[path = "support/pp.rs"]
mod pp;

use pp::{Dest, Opts, Res, RECV_WRID, SEND_WRID};
use provider::qp::{Ah, QpCap};
use provider::wqe::{Payload, SendOp, SendWr};
use provider::{Access, Context, QpAttr, QpInit, QpState, QpType, SrqAttr, Wc};

/// The stock program's `MAX_QP`: how many addresses each side sends.
const MAX_QP: usize = 256;

fn main() -> Res<()> {
    let o = Opts::parse(Opts { num_qp: 16, ..Opts::default() })?;
    let (nqp, size) = (o.num_qp as usize, o.size as usize);
    if o.num_qp > o.rx_depth || nqp > MAX_QP {
        return Err(format!("rx_depth {} is too small for {} QPs -- must have at least one receive per QP.", o.rx_depth, o.num_qp).into());
    }
    let mtu = o.mtu_code()?;
    let ctx = Context::open(o.dev.as_deref())?;
    let chan = if o.events { Some(ctx.create_comp_channel()?) } else { None };
    let pd = ctx.alloc_pd()?;
    let buf = pd.alloc_mr(size, Access::LOCAL_WRITE)?;
    let mut cq = ctx.create_cq(o.rx_depth + o.num_qp, chan.as_ref())?;
    let srq = pd.create_srq(&SrqAttr { max_wr: o.rx_depth, max_sge: 1, srq_limit: 0 })?;
    let cap = QpCap { max_send_wr: 1, max_send_sge: 1, ..Default::default() };
    let init = QpInit { send_cq: &cq, recv_cq: &cq, cap, qp_type: QpType::Rc, sq_sig_all: false, send_ops: None };
    let mut qps = (0..nqp).map(|_| pd.create_qp_with_srq(&init, &srq)).collect::<Result<Vec<_>, _>>()?;
    for qp in &qps {
        qp.to_init(o.ib_port, Access::empty())?;
    }
    let inline = qps[0].cap().max_inline_data as usize >= size;

    let sge = [buf.sge(..)];
    let post_recv = |n: u32| -> u32 { (0..n).take_while(|_| srq.post_recv(RECV_WRID, &sge).is_ok()).count() as u32 };
    let mut routs = post_recv(o.rx_depth);
    if routs < o.rx_depth {
        return Err(format!("Couldn't post receive ({routs})").into());
    }
    if o.events {
        cq.req_notify(false);
    }

    let lid = ctx.query_port(o.ib_port)?.legacy_resp.lid;
    let (gid, sgid_index) = pp::local_gid(&ctx, &o)?;
    let mut mine = vec![Dest::default(); MAX_QP];
    for (d, qp) in mine.iter_mut().zip(&qps) {
        *d = Dest { lid, qpn: qp.qpn(), psn: pp::psn(), gid };
        println!("{}", d.address_line(true));
    }
    let connect = |rem: &[Dest]| -> Res<()> {
        for (i, qp) in qps.iter().enumerate() {
            // As the stock program: a GRH when the remote (first) GID has an interface id.
            let ah = (rem[0].gid[8..] != [0; 8]).then_some(Ah { dgid: rem[0].gid, sgid_index, hop_limit: 1, sl: o.sl, port: o.ib_port, ..Default::default() });
            let ah = ah.unwrap_or(Ah { sl: o.sl, port: o.ib_port, ..Default::default() });
            qp.modify(&QpAttr {
                state: Some(QpState::Rtr), path_mtu: Some(mtu), dest_qpn: Some(rem[i].qpn), rq_psn: Some(rem[i].psn),
                max_dest_rd_atomic: Some(1), min_rnr_timer: Some(12), ah: Some(ah), ..Default::default()
            }).map_err(|e| format!("Failed to modify QP[{i}] to RTR: {e}"))?;
            qp.to_rts(mine[i].psn, 14, 7, 7, 1).map_err(|e| format!("Failed to modify QP[{i}] to RTS: {e}"))?;
        }
        Ok(())
    };
    let rem = pp::exchange(&o, &mine, connect)?;
    for d in &rem[..nqp] {
        println!("{}", d.address_line(false));
    }

    // SAFETY: the send reads the buffer at post time only (inline) or through the MR.
    let bytes = [unsafe { std::slice::from_raw_parts(buf.ptr() as *const u8, size) }];
    let wr = SendWr::new(SendOp::Send, if inline { Payload::Inline(&bytes) } else { Payload::Sgl(&sge) }).signaled();
    let mut pending = vec![RECV_WRID; nqp];
    let start = std::time::Instant::now();
    if o.host.is_some() {
        for (i, qp) in qps.iter_mut().enumerate() {
            qp.post_send(SEND_WRID, &wr).map_err(|e| format!("Couldn't post send: {e}"))?;
            pending[i] |= SEND_WRID;
        }
    }
    let (mut rcnt, mut scnt, mut bad) = (0u32, 0u32, 0usize);
    let mut wcs = vec![Wc::default(); (o.rx_depth + o.num_qp) as usize];
    while rcnt < o.iters || scnt < o.iters {
        let n = pp::wait_wcs(&mut cq, chan.as_ref(), &mut wcs)?;
        for wc in &wcs[..n] {
            pp::check_status(wc)?;
            let i = qps.iter().position(|q| q.qpn() == wc.qp_num).ok_or(format!("Couldn't find QPN {:06x}", wc.qp_num))?;
            match wc.wr_id {
                SEND_WRID => scnt += 1,
                RECV_WRID => {
                    routs -= 1;
                    if routs <= o.num_qp {
                        routs += post_recv(o.rx_depth - routs);
                        if routs < o.rx_depth {
                            return Err(format!("Couldn't post receive ({routs})").into());
                        }
                    }
                    if o.chk {
                        // SAFETY: the message is complete; the peer sends nothing more on
                        // this QP until we answer.
                        bad += pp::bad_pages(unsafe { std::slice::from_raw_parts(buf.ptr(), size) });
                    }
                    rcnt += 1;
                }
                id => return Err(format!("Completion for unknown wr_id {id}").into()),
            }
            pending[i] &= !wc.wr_id;
            if scnt < o.iters && pending[i] == 0 {
                qps[i].post_send(SEND_WRID, &wr).map_err(|e| format!("Couldn't post send: {e}"))?;
                pending[i] = RECV_WRID | SEND_WRID;
            }
        }
    }
    pp::report(o.size as u64 * o.iters as u64 * 2, o.iters as u64, start.elapsed());
    if bad > 0 {
        return Err(format!("invalid data in {bad} received page(s)").into());
    }
    Ok(())
}
