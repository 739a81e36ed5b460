//! How big a QP's queues are: libmlx5's formulas, so that the device (and anyone
//! comparing with stock rdma-core) sees the same geometry for the same request.

use crate::wqe::size::{max_inline_data, send_wqe_stride, sq_overhead, QpTransport, SendOps};
use crate::wqe::WQEBB_SIZE;

/// What the user asked for (`ibv_qp_cap`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QpCap {
    /// Send work requests outstanding at once.
    pub max_send_wr: u32,
    /// Receive work requests outstanding at once.
    pub max_recv_wr: u32,
    /// Gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter entries per receive work request.
    pub max_recv_sge: u32,
    /// Inline payload bytes per send work request.
    pub max_inline_data: u32,
}

/// The device limits from GET_CONTEXT that bound a QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest send WQE in bytes (the device's `max_desc_sz_sq`).
    pub max_sq_desc_sz: u32,
    /// Largest receive WQE in bytes.
    pub max_rq_desc_sz: u32,
    /// Most WQEBBs a send queue may have.
    pub max_send_wqebb: u32,
    /// Receive work requests outstanding at once.
    pub max_recv_wr: u32,
}

/// The computed geometry.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Geometry {
    /// Bytes of one send WQE slot (a multiple of 64).
    pub sq_stride: u32,
    /// WQEBBs in the SQ ring (a power of two).
    pub sq_wqe_cnt: u32,
    /// Send WRs that fit (`wq_size / stride`).
    pub sq_max_post: u32,
    /// Gather entries a send WQE has room for.
    pub sq_max_gs: u32,
    /// Inline bytes any WQE can carry (reported to the user and to the device).
    pub max_inline: u32,
    /// Receive WQEs in the RQ ring (a power of two), 0 for none.
    pub rq_wqe_cnt: u32,
    /// log2 of the receive WQE size.
    pub rq_wqe_shift: u32,
    /// Scatter entries a receive WQE has room for.
    pub rq_max_gs: u32,
    /// Bytes of the RQ (the SQ starts here in the QP buffer).
    pub rq_size: u32,
    /// Bytes of the SQ.
    pub sq_size: u32,
}

/// Why a request cannot be satisfied (libmlx5 answers EINVAL for all of these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooBig(pub String);

/// libmlx5's sizing: `overhead` from the operations the QP may post, the WQE stride
/// from max(SGEs, inline), `wq_size = roundup_pow2(max_send_wr * stride)`; the RQ WQE
/// is `roundup_pow2(16 * max_recv_sge)` bytes, `rq_size = max(roundup_pow2(max_recv_wr)
/// * rwqe, 64)`.
pub fn compute(cap: &QpCap, transport: QpTransport, ops: SendOps, lim: &Limits, has_srq: bool) -> Result<Geometry, TooBig> {
    let ovh = sq_overhead(transport, ops);
    let mut g = Geometry::default();
    if cap.max_send_wr > 0 {
        if cap.max_send_sge > lim.max_sq_desc_sz.saturating_sub(ovh) / 16 {
            return Err(TooBig(format!("max_send_sge {} exceeds the device's WQE size", cap.max_send_sge)));
        }
        let stride = send_wqe_stride(ovh, cap.max_send_sge, cap.max_inline_data);
        if stride > lim.max_sq_desc_sz {
            return Err(TooBig(format!("send WQE of {stride} bytes exceeds max_sq_desc_sz {}", lim.max_sq_desc_sz)));
        }
        let wq_size = (cap.max_send_wr as u64 * stride as u64).next_power_of_two();
        let cnt = wq_size / WQEBB_SIZE as u64;
        if cnt > lim.max_send_wqebb as u64 {
            return Err(TooBig(format!("{} send WRs need {cnt} WQEBBs, device allows {}", cap.max_send_wr, lim.max_send_wqebb)));
        }
        g.sq_stride = stride;
        g.sq_wqe_cnt = cnt as u32;
        g.sq_size = wq_size as u32;
        g.sq_max_post = (wq_size / stride as u64) as u32;
        g.max_inline = max_inline_data(stride, ovh);
        g.sq_max_gs = (stride - ovh) / 16;
    }
    if cap.max_recv_wr > 0 && !has_srq {
        if cap.max_recv_wr > lim.max_recv_wr {
            return Err(TooBig(format!("max_recv_wr {} exceeds {}", cap.max_recv_wr, lim.max_recv_wr)));
        }
        let rwqe = (16 * cap.max_recv_sge.max(1)).next_power_of_two();
        if rwqe > lim.max_rq_desc_sz {
            return Err(TooBig(format!("receive WQE of {rwqe} bytes exceeds max_rq_desc_sz {}", lim.max_rq_desc_sz)));
        }
        let rq_size = (cap.max_recv_wr.next_power_of_two() * rwqe).max(64);
        g.rq_wqe_cnt = rq_size / rwqe;
        g.rq_wqe_shift = rwqe.trailing_zeros();
        g.rq_size = rq_size;
        g.rq_max_gs = rwqe / 16;
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIM: Limits = Limits { max_sq_desc_sz: 512, max_rq_desc_sz: 512, max_send_wqebb: 1 << 15, max_recv_wr: 1 << 15 };

    fn cap(send: u32, recv: u32, inline: u32) -> QpCap {
        QpCap { max_send_wr: send, max_recv_wr: recv, max_send_sge: 1, max_recv_sge: 1, max_inline_data: inline }
    }

    // Expected values are what stock libmlx5 44 sent to the kernel for these programs
    // (captured CREATE_QP driver data: sq_wqe_count, rq_wqe_count, rq_wqe_shift, and the
    // max_inline_data it put in the core capability).
    #[test]
    fn ibv_rc_pingpong() {
        let g = compute(&cap(1, 500, 0), QpTransport::Rc, SendOps::all(), &LIM, false).unwrap();
        assert_eq!((g.sq_wqe_cnt, g.rq_wqe_cnt, g.rq_wqe_shift, g.max_inline), (4, 512, 4, 60));
    }

    #[test]
    fn ib_write_lat_with_write_only_ops() {
        let ops = SendOps { rdma: true, atomic: false, umr: false };
        let g = compute(&cap(1, 1, 220), QpTransport::Rc, ops, &LIM, false).unwrap();
        assert_eq!((g.sq_wqe_cnt, g.rq_wqe_cnt, g.rq_wqe_shift, g.max_inline), (4, 4, 4, 220));
    }

    #[test]
    fn ib_write_bw_and_atomic_bw() {
        let rdma = SendOps { rdma: true, atomic: false, umr: false };
        let g = compute(&cap(128, 1, 0), QpTransport::Rc, rdma, &LIM, false).unwrap();
        assert_eq!((g.sq_wqe_cnt, g.rq_wqe_cnt, g.max_inline), (128, 4, 28));
        let atomic = SendOps { rdma: true, atomic: true, umr: false };
        let g = compute(&cap(128, 1, 0), QpTransport::Rc, atomic, &LIM, false).unwrap();
        assert_eq!((g.sq_wqe_cnt, g.max_inline), (128, 12));
    }

    #[test]
    fn ib_send_lat() {
        let g = compute(&cap(1, 512, 236), QpTransport::Rc, SendOps::send_only(), &LIM, false).unwrap();
        assert_eq!((g.sq_wqe_cnt, g.rq_wqe_cnt, g.rq_wqe_shift, g.max_inline), (4, 512, 4, 236));
    }

    #[test]
    fn limits_are_enforced() {
        assert!(compute(&cap(1, 1, 1000), QpTransport::Rc, SendOps::all(), &LIM, false).is_err());
        let mut c = cap(1, 1, 0);
        c.max_send_sge = 40;
        assert!(compute(&c, QpTransport::Rc, SendOps::all(), &LIM, false).is_err());
        assert!(compute(&cap(1 << 20, 1, 0), QpTransport::Rc, SendOps::all(), &LIM, false).is_err());
    }
}
