//! Send WQEs as the device reads them: the device half's decoder of the mlx5 send WQE
//! format, reading every segment through the `prm` crate's layouts (the same ones the
//! provider writes with), so the offsets exist once; libmlx5's golden bytes in
//! `provider/tests/mlx5dv_golden.rs` and stock libmlx5 traffic in the preload tests
//! are the outside check that both halves read the format as a ConnectX does.
//!
//! Format facts the decoder acts on (layouts in `prm::wqe`):
//! - The SQ is a ring of 64-byte basic blocks (WQEBBs). A WQE starts on a WQEBB, is
//!   `ds` 16-byte units long (6-bit field) and may run past the end of the ring into
//!   its start.
//! - Control segment ([`CtrlSeg`]), then for RDMA WRITE, WRITE_IMM, READ and atomics
//!   the remote address segment ([`RaddrSeg`]), for CMP_AND_SWP / FETCH_AND_ADD the
//!   atomic segment ([`AtomicSeg`]) after it, for UD the datagram segment
//!   ([`DatagramSeg`]).
//! - Then the payload: data segments ([`DataSeg`]; a byte count of 0 means 2^31) or
//!   an inline segment ([`InlineHeader`] followed by the bytes, padded to 16).

use prm::opcode::{FmCeSe, WqeOpcode};
use prm::wqe::{AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineHeader, RaddrSeg, DS_SIZE, INLINE_HDR_SIZE};
use zerocopy::{FromBytes, Immutable, KnownLayout};

/// Bytes in a send WQE basic block.
pub const WQEBB: usize = prm::wqe::WQEBB_SIZE as usize;
/// The largest WQE the 6-bit `ds` field can describe.
pub const MAX_WQE_BYTES: usize = prm::wqe::MAX_DS as usize * DS_SIZE as usize;
/// The longest message (`log_max_msg` 30).
pub const MAX_MSG: u64 = 1 << 30;
/// Inline segment marker in a segment's first word.
pub const INLINE_BIT: u32 = prm::wqe::INLINE_SEG;
/// The lkey that ends a receive WQE's scatter list.
pub const INVALID_LKEY: u32 = prm::wqe::INVALID_LKEY;

/// The segment of type `T` at the start of `b`, or `None` when `b` is too short.
fn seg<T: FromBytes + KnownLayout + Immutable>(b: &[u8]) -> Option<&T> {
    T::ref_from_prefix(b).ok().map(|(t, _)| t)
}

/// The control segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ctrl {
    pub opmod: u8,
    pub wqe_index: u16,
    pub opcode: u8,
    pub qpn: u32,
    pub ds: u8,
    pub signature: u8,
    pub fm_ce_se: u8,
    /// The immediate as a big-endian number (its bytes are what the wire carries).
    pub imm: u32,
}

impl Ctrl {
    /// Decodes the first 16 bytes of a WQE.
    pub fn parse(b: &[u8; 16]) -> Ctrl {
        let c = CtrlSeg::view(b);
        Ctrl {
            opmod: c.opmod(),
            wqe_index: c.wqe_index(),
            opcode: c.opcode_raw(),
            qpn: c.qpn(),
            ds: c.ds(),
            signature: c.signature,
            fm_ce_se: c.fm_ce_se,
            imm: c.imm(),
        }
    }

    /// WQEBBs the WQE occupies (at least one, so a broken WQE still moves the ring on).
    pub fn wqebbs(&self) -> u16 {
        ((self.ds as u16 * 16).div_ceil(WQEBB as u16)).max(1)
    }

    pub fn signaled(&self) -> bool {
        FmCeSe::from_bits_retain(self.fm_ce_se).contains(FmCeSe::CQ_UPDATE)
    }

    pub fn solicited(&self) -> bool {
        FmCeSe::from_bits_retain(self.fm_ce_se).contains(FmCeSe::SOLICITED)
    }

    pub fn fence(&self) -> bool {
        FmCeSe::from_bits_retain(self.fm_ce_se).fences()
    }
}

/// One gather/scatter entry as the WQE names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

/// The operation of a send WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Nop,
    Send { imm: Option<u32> },
    Write { raddr: u64, rkey: u32, imm: Option<u32> },
    Read { raddr: u64, rkey: u32 },
    CmpSwap { raddr: u64, rkey: u32, swap: u64, compare: u64 },
    FetchAdd { raddr: u64, rkey: u32, add: u64 },
}

impl Op {
    /// READ and atomics: operations whose response carries data back.
    pub fn is_read_or_atomic(&self) -> bool {
        matches!(self, Op::Read { .. } | Op::CmpSwap { .. } | Op::FetchAdd { .. })
    }

    pub fn is_atomic(&self) -> bool {
        matches!(self, Op::CmpSwap { .. } | Op::FetchAdd { .. })
    }
}

/// Where the payload comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Data {
    Sgl(Vec<Sge>),
    Inline(Vec<u8>),
    /// Inline segments and memory pointers in one WQE, in order (UCX puts its header
    /// inline and the payload behind a pointer; the PRM allows any mix of the two kinds
    /// of data segment). The requester gathers the pointers' bytes when it fetches the WQE
    /// and keeps the whole payload as [`Data::Inline`].
    Mixed(Vec<Piece>),
}

/// One data segment of a [`Data::Mixed`] payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Inline(Vec<u8>),
    Sge(Sge),
}

impl Data {
    /// Total payload bytes.
    pub fn len(&self) -> u64 {
        match self {
            Data::Sgl(s) => s.iter().map(|s| s.len as u64).sum(),
            Data::Inline(b) => b.len() as u64,
            Data::Mixed(p) => p.iter().map(|p| match p {
                Piece::Inline(b) => b.len() as u64,
                Piece::Sge(s) => s.len as u64,
            }).sum(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a WQE cannot be executed; the requester reports it in an error CQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeError {
    /// Unknown or unsupported opcode (LOCAL_QP_OP_ERR).
    Opcode(u8),
    /// `ds` too small for the opcode's segments, or segments that overrun it
    /// (LOCAL_QP_OP_ERR).
    Layout(&'static str),
    /// A length the operation cannot have (LOCAL_LENGTH_ERR).
    Length(&'static str),
}

/// Decodes a whole WQE: `wqe` holds its `ds * 16` bytes, already unwrapped from the ring.
pub fn parse(ctrl: &Ctrl, wqe: &[u8]) -> Result<(Op, Data), WqeError> {
    let ds = ctrl.ds as usize;
    if ds == 0 || wqe.len() < ds * 16 {
        return Err(WqeError::Layout("ds is 0 or beyond the doorbell"));
    }
    let body = &wqe[16..ds * 16];
    let imm = ctrl.imm;
    const SHORT: WqeError = WqeError::Layout("segments larger than ds");
    let (op, rest) = match WqeOpcode::from_u8(ctrl.opcode) {
        Some(WqeOpcode::Nop) => (Op::Nop, &body[..0]),
        Some(WqeOpcode::Send) => (Op::Send { imm: None }, body),
        Some(WqeOpcode::SendImm) => (Op::Send { imm: Some(imm) }, body),
        Some(o @ (WqeOpcode::RdmaWrite | WqeOpcode::RdmaWriteImm | WqeOpcode::RdmaRead)) => {
            let r = seg::<RaddrSeg>(body).ok_or(SHORT)?;
            let (raddr, rkey) = (r.raddr(), r.rkey());
            let op = match o {
                WqeOpcode::RdmaWrite => Op::Write { raddr, rkey, imm: None },
                WqeOpcode::RdmaWriteImm => Op::Write { raddr, rkey, imm: Some(imm) },
                _ => Op::Read { raddr, rkey },
            };
            (op, &body[size_of::<RaddrSeg>()..])
        }
        Some(o @ (WqeOpcode::AtomicCs | WqeOpcode::AtomicFa)) => {
            let r = seg::<RaddrSeg>(body).ok_or(SHORT)?;
            let at = &body[size_of::<RaddrSeg>()..];
            let a = seg::<AtomicSeg>(at).ok_or(SHORT)?;
            let (raddr, rkey) = (r.raddr(), r.rkey());
            let op = if o == WqeOpcode::AtomicCs {
                Op::CmpSwap { raddr, rkey, swap: a.swap_add(), compare: a.compare() }
            } else {
                Op::FetchAdd { raddr, rkey, add: a.swap_add() }
            };
            (op, &at[size_of::<AtomicSeg>()..])
        }
        _ => return Err(WqeError::Opcode(ctrl.opcode)),
    };
    let data = parse_payload(rest)?;
    match (&op, &data) {
        (Op::Read { .. }, Data::Inline(_) | Data::Mixed(_)) => return Err(WqeError::Layout("inline data on an RDMA READ")),
        (o, d) if o.is_atomic() => {
            if matches!(d, Data::Inline(_) | Data::Mixed(_)) {
                return Err(WqeError::Layout("inline data on an atomic"));
            }
            if d.len() != 8 {
                return Err(WqeError::Length("atomic result buffer is not 8 bytes"));
            }
        }
        _ => {}
    }
    if data.len() > MAX_MSG {
        return Err(WqeError::Length("message longer than 1 GiB"));
    }
    Ok((op, data))
}

/// Data segments, inline segments, or a mix, filling `rest` (whole 16-byte units).
pub(crate) fn parse_payload(rest: &[u8]) -> Result<Data, WqeError> {
    let mut sges = Vec::new();
    let mut inline: Option<Vec<u8>> = None;
    let mut pieces = Vec::new();
    let mut at = 0;
    while let Some(d) = seg::<DataSeg>(&rest[at..]) {
        let head = d.byte_count().to_be_bytes();
        if let Some(len) = InlineHeader::parse(head) {
            let len = len as usize;
            let start = at + INLINE_HDR_SIZE as usize;
            let end = start + len;
            if end > rest.len() {
                return Err(WqeError::Layout("inline data larger than ds"));
            }
            inline.get_or_insert_with(Vec::new).extend_from_slice(&rest[start..end]);
            pieces.push(Piece::Inline(rest[start..end].to_vec()));
            at += (INLINE_HDR_SIZE as usize + len).div_ceil(DS_SIZE as usize) * DS_SIZE as usize;
        } else {
            let s = Sge { len: d.length() as u32, lkey: d.lkey(), addr: d.addr() };
            sges.push(s);
            pieces.push(Piece::Sge(s));
            at += size_of::<DataSeg>();
        }
    }
    match inline {
        Some(b) if sges.is_empty() => Ok(Data::Inline(b)),
        Some(_) => Ok(Data::Mixed(pieces)),
        None => Ok(Data::Sgl(sges)),
    }
}

/// Where a UD send goes: the parts of the datagram segment (address vector,
/// [`DatagramSeg`]) the device uses: Q_Key, destination QP, destination GID, and the UDP
/// source port, which RoCE v2 keeps in the `rlid` field (libmlx5 `mlx5_ah_set_udp_sport`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdAv {
    pub qkey: u32,
    pub dqpn: u32,
    pub dgid: [u8; 16],
    pub sport: u16,
}

/// Decodes a UD send WQE: control, datagram segment, payload. Only SEND and
/// SEND_WITH_IMM exist on UD.
pub fn parse_ud(ctrl: &Ctrl, wqe: &[u8]) -> Result<(Op, Data, UdAv), WqeError> {
    let ds = ctrl.ds as usize;
    if ds == 0 || wqe.len() < ds * 16 {
        return Err(WqeError::Layout("ds is 0 or beyond the doorbell"));
    }
    let op = match WqeOpcode::from_u8(ctrl.opcode) {
        Some(WqeOpcode::Send) => Op::Send { imm: None },
        Some(WqeOpcode::SendImm) => Op::Send { imm: Some(ctrl.imm) },
        _ => return Err(WqeError::Opcode(ctrl.opcode)),
    };
    let body = &wqe[16..ds * 16];
    let d = seg::<DatagramSeg>(body).ok_or(WqeError::Layout("UD WQE without its datagram segment"))?;
    let av = UdAv { qkey: d.qkey(), dqpn: d.dqpn(), dgid: d.rgid, sport: d.rlid.get() };
    let data = parse_payload(&body[size_of::<DatagramSeg>()..])?;
    if data.len() > MAX_MSG {
        return Err(WqeError::Length("message longer than 1 GiB"));
    }
    Ok((op, data, av))
}

/// A receive WQE's scatter list: data segments up to `max` or the terminator.
pub fn parse_recv(wqe: &[u8], max: usize) -> Vec<Sge> {
    let mut v = Vec::new();
    for chunk in wqe.chunks_exact(size_of::<DataSeg>()).take(max) {
        let Some(d) = seg::<DataSeg>(chunk) else { break };
        if d.is_terminator() {
            break;
        }
        let w = d.byte_count();
        let len = if w == 0 { 1 << 31 } else { w & !INLINE_BIT };
        v.push(Sge { len, lkey: d.lkey(), addr: d.addr() });
    }
    v
}

/// The 16-bit WQE index field of a control segment's first word (used in tests).
pub fn wqe_index_of(first8: &[u8]) -> u16 {
    u16::from_be_bytes([first8[1], first8[2]])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The golden control segment of ABI-NOTES (mlx5dv_set_ctrl_seg).
    #[test]
    fn golden_ctrl() {
        let b = [0x00, 0x12, 0x34, 0x08, 0xab, 0xcd, 0xef, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0];
        let c = Ctrl::parse(&b);
        assert_eq!((c.opmod, c.wqe_index, c.opcode, c.qpn, c.ds), (0, 0x1234, WqeOpcode::RdmaWrite as u8, 0xabcdef, 3));
        assert!(c.signaled() && !c.solicited() && !c.fence());
        assert_eq!(c.wqebbs(), 1);
        assert_eq!(wqe_index_of(&b), 0x1234);
    }

    fn seg(words: &[u8]) -> [u8; 16] {
        let mut s = [0u8; 16];
        s[..words.len()].copy_from_slice(words);
        s
    }

    #[test]
    fn write_with_two_sges_and_inline_send() {
        let mut w = Vec::new();
        w.extend(seg(&[0, 0, 0, 0x09, 0, 0, 1, 4, 0, 0, 0, 0x0a, 0x11, 0x22, 0x33, 0x44]));
        let mut r = [0u8; 16];
        r[..8].copy_from_slice(&0x7f00_1234_5678u64.to_be_bytes());
        r[8..12].copy_from_slice(&0xabcdu32.to_be_bytes());
        w.extend(r);
        for (len, key, addr) in [(100u32, 7u32, 0x1000u64), (5, 8, 0x2000)] {
            let mut d = [0u8; 16];
            d[..4].copy_from_slice(&len.to_be_bytes());
            d[4..8].copy_from_slice(&key.to_be_bytes());
            d[8..].copy_from_slice(&addr.to_be_bytes());
            w.extend(d);
        }
        let c = Ctrl::parse(w[..16].try_into().unwrap());
        assert!(c.solicited() && c.signaled());
        let (op, data) = parse(&c, &w).unwrap();
        assert_eq!(op, Op::Write { raddr: 0x7f00_1234_5678, rkey: 0xabcd, imm: Some(0x1122_3344) });
        assert_eq!(data, Data::Sgl(vec![Sge { addr: 0x1000, len: 100, lkey: 7 }, Sge { addr: 0x2000, len: 5, lkey: 8 }]));
        // A byte count of 0 means 2 GiB: longer than any message.
        w[48..52].copy_from_slice(&[0, 0, 0, 0]);
        assert_eq!(parse(&c, &w), Err(WqeError::Length("message longer than 1 GiB")));

        let mut s = Vec::new();
        s.extend(seg(&[0, 0, 1, 0x0a, 0, 0, 1, 3]));
        let mut inl = vec![0x80, 0, 0, 20];
        inl.extend(1..=20u8);
        inl.resize(32, 0);
        s.extend(inl);
        let c = Ctrl::parse(s[..16].try_into().unwrap());
        let (op, data) = parse(&c, &s).unwrap();
        assert_eq!(op, Op::Send { imm: None });
        assert_eq!(data, Data::Inline((1..=20).collect()));
    }

    /// UCX's UD and RC sends: a 24-byte inline header segment, then a pointer to the
    /// payload (the `ucx_perftest -t tag_bw` WQE softhca once refused). PRM layout: the
    /// inline segment's byte count has bit 31 set and is followed by the bytes, padded to
    /// 16; a pointer segment is byte count, lkey, address, all big-endian.
    #[test]
    fn inline_header_then_pointer() {
        let mut s = Vec::new();
        // SEND, ds = 1 ctrl + 2 inline (4 + 24 bytes, padded to 32) + 1 pointer.
        s.extend(seg(&[0, 0, 1, 0x0a, 0, 0, 1, 4]));
        let mut inl = vec![0x80, 0, 0, 24];
        inl.extend(100..124u8);
        inl.resize(32, 0);
        s.extend(inl);
        let mut d = [0u8; 16];
        d[..4].copy_from_slice(&4072u32.to_be_bytes());
        d[4..8].copy_from_slice(&0x302u32.to_be_bytes());
        d[8..].copy_from_slice(&0x7f69_af67_9000u64.to_be_bytes());
        s.extend(d);
        let c = Ctrl::parse(s[..16].try_into().unwrap());
        let (op, data) = parse(&c, &s).unwrap();
        assert_eq!(op, Op::Send { imm: None });
        assert_eq!(data.len(), 24 + 4072);
        assert_eq!(data, Data::Mixed(vec![Piece::Inline((100..124).collect()), Piece::Sge(Sge { addr: 0x7f69_af67_9000, len: 4072, lkey: 0x302 })]));
    }

    #[test]
    fn rejects() {
        let c = Ctrl::parse(&seg(&[0, 0, 0, 0x08, 0, 0, 1, 1]));
        assert_eq!(parse(&c, &[0u8; 16]), Err(WqeError::Layout("segments larger than ds")));
        let c = Ctrl::parse(&seg(&[0, 0, 0, 0x2a, 0, 0, 1, 1]));
        assert_eq!(parse(&c, &[0u8; 16]), Err(WqeError::Opcode(0x2a)));
        let c = Ctrl::parse(&seg(&[0, 0, 0, 0x0a, 0, 0, 1, 0]));
        assert!(matches!(parse(&c, &[0u8; 16]), Err(WqeError::Layout(_))));
        let mut w = seg(&[0, 0, 0, 0x0a, 0, 0, 1, 2]).to_vec();
        w.extend(seg(&[0x80, 0, 0, 40]));
        let c = Ctrl::parse(w[..16].try_into().unwrap());
        assert_eq!(parse(&c, &w), Err(WqeError::Layout("inline data larger than ds")));
    }

    #[test]
    fn recv_list_stops_at_terminator() {
        let mut w = Vec::new();
        w.extend(seg(&[0, 0, 0, 64, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0x10, 0]));
        w.extend(seg(&[0, 0, 0, 0, 0, 0, 1, 0]));
        w.extend(seg(&[0, 0, 0, 64, 0, 0, 0, 9]));
        assert_eq!(parse_recv(&w, 4), vec![Sge { addr: 0x1000, len: 64, lkey: 9 }]);
        assert_eq!(parse_recv(&w[..16], 1).len(), 1);
    }
}
