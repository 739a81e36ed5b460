//! WQE size rules: how many DS units and WQEBBs a send WQE takes, and how big a QP's
//! WQEs and inline limit are.
//!
//! Per WQE: control segment (1 DS), then the operation's segments (remote address 1,
//! atomic 1) or the UD datagram segment (3), then either one data segment per
//! non-empty SGE or one inline segment ([`inline_ds`]). The WQE occupies
//! `ceil(ds / 4)` WQEBBs and the producer index advances by that many.
//!
//! Per QP (libmlx5's rule, which the kernel and stock tools expect to see reported
//! back): the largest header any allowed operation needs is the "overhead"; the WQE
//! stride is the larger of `overhead + 16 * max_send_sge` and
//! `overhead + align16(4 + max_inline_data)`, rounded up to a WQEBB; and the inline
//! limit reported to the user is `stride - overhead - 4`, i.e. whatever fits.

use super::inline::{inline_ds, INLINE_HDR_SIZE};
use super::{ctrl::MAX_DS, DS_SIZE, WQEBB_SIZE};
use crate::opcode::WqeOpcode;

/// Bytes of a control segment.
pub const CTRL_SIZE: u32 = 16;
/// Bytes of a remote-address segment.
pub const RADDR_SIZE: u32 = 16;
/// Bytes of an atomic segment.
pub const ATOMIC_SEG_SIZE: u32 = 16;
/// Bytes of a datagram segment.
pub const DATAGRAM_SIZE: u32 = 48;
/// Bytes of a data segment.
pub const DATA_SIZE: u32 = 16;
/// Bytes of an XRC segment (remote SRQ number).
pub const XRC_SIZE: u32 = 16;
/// The worst-case memory-window bind / local invalidate (UMR) WQE header libmlx5
/// reserves: control 16 + UMR control 48 + mkey context 64 + 64 bytes of KLM.
pub const UMR_OVERHEAD: u32 = 16 + 48 + 64 + 64;

/// The largest WQE the 6-bit DS field describes, in bytes.
pub const MAX_WQE_SIZE: u32 = MAX_DS as u32 * DS_SIZE;

/// Size of one WQE: its DS count (written into the control segment) and the WQEBBs
/// it occupies (the producer index advance).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WqeInfo {
    /// Number of WQEBBs, `ceil(ds / 4)`.
    pub wqebb_count: u16,
    /// Size in 16-byte units, at most 63.
    pub ds: u8,
}

impl WqeInfo {
    /// `None` if `ds` is zero or does not fit the 6-bit field.
    #[inline(always)]
    pub const fn from_ds(ds: u32) -> Option<Self> {
        if ds == 0 || ds > MAX_DS as u32 {
            return None;
        }
        Some(Self {
            wqebb_count: ds.div_ceil(WQEBB_SIZE / DS_SIZE) as u16,
            ds: ds as u8,
        })
    }

    /// Size in bytes, as the device reads it (`ds * 16`).
    pub const fn bytes(self) -> u32 {
        self.ds as u32 * DS_SIZE
    }
}

/// What follows the transport header segments of a send WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadLen {
    /// This many data segments (non-empty SGEs only; empty ones are not written).
    Sges(u32),
    /// One inline segment holding this many bytes (none at all for zero bytes).
    Inline(u32),
}

/// DS units of the segments between the control segment and the payload.
#[inline(always)]
pub const fn header_ds(opcode: WqeOpcode, datagram: bool) -> u32 {
    let mut ds = CTRL_SIZE / DS_SIZE;
    if datagram {
        ds += DATAGRAM_SIZE / DS_SIZE;
    }
    if opcode.has_raddr() {
        ds += RADDR_SIZE / DS_SIZE;
    }
    if opcode.has_atomic() {
        ds += ATOMIC_SEG_SIZE / DS_SIZE;
    }
    ds
}

/// Size of a send WQE for `opcode` on a QP with (`datagram = true`, UD) or without
/// a datagram segment, carrying `payload`. `None` if it exceeds [`MAX_WQE_SIZE`].
#[inline(always)]
pub const fn send_wqe_info(
    opcode: WqeOpcode,
    datagram: bool,
    payload: PayloadLen,
) -> Option<WqeInfo> {
    let payload_ds = match payload {
        PayloadLen::Sges(n) => n,
        PayloadLen::Inline(len) => {
            if len > MAX_WQE_SIZE {
                return None;
            }
            inline_ds(len)
        }
    };
    if payload_ds > MAX_DS as u32 {
        return None;
    }
    WqeInfo::from_ds(header_ds(opcode, datagram) + payload_ds)
}

/// QP transport, for the per-QP overhead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpTransport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Unreliable datagram (a datagram segment in every send WQE).
    Ud,
    /// XRC send side (an XRC segment naming the remote SRQ).
    XrcSend,
}

/// Which operation classes the QP may post, for the per-QP overhead. The default
/// for `ibv_create_qp` without send-ops flags is [`SendOps::all`] for RC/UC/XRC and
/// [`SendOps::send_only`] for UD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SendOps {
    /// The transport has RDMA READ/WRITE (a remote address segment).
    pub rdma: bool,
    /// The transport has atomics (an atomic segment).
    pub atomic: bool,
    /// Memory-window bind, local invalidate or UMR.
    pub umr: bool,
}

impl SendOps {
    /// RC and XRC: every segment kind.
    pub const fn all() -> Self {
        Self {
            rdma: true,
            atomic: true,
            umr: true,
        }
    }

    /// UD and raw packet: SENDs only.
    pub const fn send_only() -> Self {
        Self {
            rdma: false,
            atomic: false,
            umr: false,
        }
    }

    /// What `ibv_create_qp` (no send-ops flags) allows on `transport`.
    pub const fn default_for(transport: QpTransport) -> Self {
        match transport {
            QpTransport::Ud => Self::send_only(),
            _ => Self::all(),
        }
    }
}

const fn max(a: u32, b: u32) -> u32 {
    if a > b {
        a
    } else {
        b
    }
}

const fn align_up(v: u32, a: u32) -> u32 {
    v.div_ceil(a) * a
}

/// Bytes of header every WQE of such a QP may need before its payload.
pub const fn sq_overhead(transport: QpTransport, ops: SendOps) -> u32 {
    let mut size = CTRL_SIZE;
    if ops.rdma {
        size = max(size, CTRL_SIZE + RADDR_SIZE);
    }
    if ops.atomic {
        size = max(size, CTRL_SIZE + RADDR_SIZE + ATOMIC_SEG_SIZE);
    }
    if ops.umr {
        size = max(size, UMR_OVERHEAD);
    }
    match transport {
        QpTransport::Rc | QpTransport::Uc => size,
        QpTransport::Ud => size + DATAGRAM_SIZE,
        QpTransport::XrcSend => size + XRC_SIZE,
    }
}

/// The SQ's WQE stride in bytes (a multiple of 64) for the requested capabilities.
/// The caller compares it with the device's `max_sq_desc_sz`.
pub const fn send_wqe_stride(overhead: u32, max_send_sge: u32, max_inline_data: u32) -> u32 {
    let gather = overhead + max_send_sge * DATA_SIZE;
    let inline = if max_inline_data == 0 {
        0
    } else {
        overhead + align_up(INLINE_HDR_SIZE + max_inline_data, DS_SIZE)
    };
    align_up(max(gather, inline), WQEBB_SIZE)
}

/// The inline limit a QP with this stride and overhead reports (and enforces):
/// everything after the header and the 4-byte inline header.
pub const fn max_inline_data(stride: u32, overhead: u32) -> u32 {
    stride.saturating_sub(overhead + INLINE_HDR_SIZE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use WqeOpcode::*;

    fn info(op: WqeOpcode, ud: bool, p: PayloadLen) -> (u8, u16) {
        let i = send_wqe_info(op, ud, p).unwrap();
        (i.ds, i.wqebb_count)
    }

    #[test]
    fn per_opcode_sizes() {
        use PayloadLen::*;
        // ctrl only
        assert_eq!(info(Nop, false, Sges(0)), (1, 1));
        // ctrl + n data
        assert_eq!(info(Send, false, Sges(1)), (2, 1));
        assert_eq!(info(SendImm, false, Sges(3)), (4, 1));
        assert_eq!(info(SendInval, false, Sges(4)), (5, 2));
        // ctrl + raddr + n data
        assert_eq!(info(RdmaWrite, false, Sges(1)), (3, 1));
        assert_eq!(info(RdmaWriteImm, false, Sges(2)), (4, 1));
        assert_eq!(info(RdmaRead, false, Sges(3)), (5, 2));
        assert_eq!(info(RdmaWrite, false, Sges(0)), (2, 1));
        // ctrl + raddr + atomic + 1 data
        assert_eq!(info(AtomicCs, false, Sges(1)), (4, 1));
        assert_eq!(info(AtomicFa, false, Sges(1)), (4, 1));
        // UD: ctrl + datagram + payload
        assert_eq!(info(Send, true, Sges(0)), (4, 1));
        assert_eq!(info(Send, true, Sges(1)), (5, 2));
        assert_eq!(info(SendImm, true, Inline(12)), (5, 2));
        // inline
        assert_eq!(info(Send, false, Inline(0)), (1, 1));
        assert_eq!(info(Send, false, Inline(12)), (2, 1));
        assert_eq!(info(Send, false, Inline(44)), (4, 1));
        assert_eq!(info(Send, false, Inline(45)), (5, 2));
        assert_eq!(info(RdmaWrite, false, Inline(28)), (4, 1));
        assert_eq!(info(RdmaWrite, false, Inline(150)), (12, 3));
        // limits: 63 DS max
        assert_eq!(info(Send, false, Sges(62)), (63, 16));
        assert_eq!(send_wqe_info(Send, false, Sges(63)), None);
        assert_eq!(info(RdmaWrite, false, Sges(61)), (63, 16));
        assert_eq!(send_wqe_info(RdmaWrite, false, Sges(62)), None);
        assert_eq!(info(Send, false, Inline(62 * 16 - 4)), (63, 16));
        assert_eq!(send_wqe_info(Send, false, Inline(62 * 16 - 3)), None);
        assert_eq!(send_wqe_info(Send, false, Inline(u32::MAX)), None);
        assert_eq!(send_wqe_info(Send, false, Sges(u32::MAX)), None);
    }

    #[test]
    fn qp_overhead_and_inline_limit() {
        let rc = sq_overhead(QpTransport::Rc, SendOps::default_for(QpTransport::Rc));
        assert_eq!(rc, 192);
        let ud = sq_overhead(QpTransport::Ud, SendOps::default_for(QpTransport::Ud));
        assert_eq!(ud, 64);
        assert_eq!(
            sq_overhead(
                QpTransport::Rc,
                SendOps {
                    rdma: true,
                    atomic: true,
                    umr: false
                }
            ),
            48
        );
        assert_eq!(
            sq_overhead(
                QpTransport::Rc,
                SendOps {
                    rdma: true,
                    atomic: false,
                    umr: false
                }
            ),
            32
        );
        assert_eq!(sq_overhead(QpTransport::XrcSend, SendOps::all()), 208);

        // RC, 1 SGE, 64 B inline: max(208, 192 + 80) = 272 -> 320; limit 124.
        let stride = send_wqe_stride(rc, 1, 64);
        assert_eq!(stride, 320);
        assert_eq!(max_inline_data(stride, rc), 124);
        // RC, 1 SGE, no inline: 208 -> 256; the leftover is still usable inline.
        let stride = send_wqe_stride(rc, 1, 0);
        assert_eq!(stride, 256);
        assert_eq!(max_inline_data(stride, rc), 60);
        // UD, 1 SGE, 0 inline: 80 -> 128; limit 60.
        assert_eq!(send_wqe_stride(ud, 1, 0), 128);
        assert_eq!(max_inline_data(128, ud), 60);
        // Any inline length up to the limit fits in the stride for every opcode.
        for (transport, ops) in [
            (QpTransport::Rc, SendOps::all()),
            (
                QpTransport::Rc,
                SendOps {
                    rdma: true,
                    atomic: false,
                    umr: false,
                },
            ),
            (QpTransport::Ud, SendOps::send_only()),
        ] {
            let ov = sq_overhead(transport, ops);
            for (sge, inl) in [(1, 0), (1, 64), (4, 220), (16, 512)] {
                let stride = send_wqe_stride(ov, sge, inl);
                let lim = max_inline_data(stride, ov);
                assert!(lim >= inl);
                let ud = transport == QpTransport::Ud;
                let op = if ud {
                    SendImm
                } else if ops.rdma {
                    RdmaWriteImm
                } else {
                    Send
                };
                let i = send_wqe_info(op, ud, PayloadLen::Inline(lim)).unwrap();
                assert!(i.bytes() <= stride, "{transport:?} {sge} {inl}");
            }
        }
    }
}
