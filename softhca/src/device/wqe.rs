//! Send WQEs as the device reads them: softhca's own decoder of the mlx5 send WQE format
//! (independent of the provider's writer, so the two check each other).
//!
//! Format facts used (all fields big-endian):
//! - The SQ is a ring of 64-byte basic blocks (WQEBBs). A WQE starts on a WQEBB, is
//!   `ds` 16-byte units long (6-bit field) and may run past the end of the ring into
//!   its start.
//! - Control segment, 16 bytes: word 0 = `opmod[31:24] | wqe_index[23:8] | opcode[7:0]`,
//!   word 1 = `qpn[31:8] | ds[5:0]`, byte 8 signature, byte 11 `fm_ce_se` (fence mode in
//!   bits 7:5, CQ update 0x08, solicited 0x02), bytes 12..16 immediate data.
//! - Remote address segment, 16 bytes: raddr u64, rkey u32, reserved — for RDMA WRITE,
//!   WRITE_IMM, READ and atomics.
//! - Atomic segment, 16 bytes: swap-or-add u64, compare u64 — after the remote address
//!   segment of CMP_AND_SWP / FETCH_AND_ADD.
//! - Then the payload: data segments (byte_count u32, lkey u32, addr u64; a byte count
//!   of 0 means 2^31) or an inline segment (`0x80000000 | length` followed by the bytes,
//!   padded to 16).
//! - Opcodes: NOP 0x00, SEND_INVAL 0x01, RDMA_WRITE 0x08, RDMA_WRITE_IMM 0x09, SEND 0x0a,
//!   SEND_IMM 0x0b, RDMA_READ 0x10, ATOMIC_CS 0x11, ATOMIC_FA 0x12.

/// Bytes in a send WQE basic block.
pub const WQEBB: usize = 64;
/// The largest WQE the 6-bit `ds` field can describe.
pub const MAX_WQE_BYTES: usize = 63 * 16;
/// The longest message (`log_max_msg` 30).
pub const MAX_MSG: u64 = 1 << 30;
/// Inline segment marker in a segment's first word.
pub const INLINE_BIT: u32 = 0x8000_0000;
/// The lkey that ends a receive WQE's scatter list.
pub const INVALID_LKEY: u32 = 0x100;

/// WQE opcodes.
pub mod opcode {
    pub const NOP: u8 = 0x00;
    pub const SEND_INVAL: u8 = 0x01;
    pub const RDMA_WRITE: u8 = 0x08;
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    pub const SEND: u8 = 0x0a;
    pub const SEND_IMM: u8 = 0x0b;
    pub const RDMA_READ: u8 = 0x10;
    pub const ATOMIC_CS: u8 = 0x11;
    pub const ATOMIC_FA: u8 = 0x12;
}

/// `fm_ce_se` bits.
pub mod flags {
    pub const SOLICITED: u8 = 0x02;
    pub const CQ_UPDATE: u8 = 0x08;
    /// Fence mode (any non-zero value fences).
    pub const FENCE_MASK: u8 = 0xe0;
}

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}
fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
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
        let w0 = be32(&b[0..4]);
        let w1 = be32(&b[4..8]);
        Ctrl {
            opmod: (w0 >> 24) as u8,
            wqe_index: (w0 >> 8) as u16,
            opcode: w0 as u8,
            qpn: w1 >> 8,
            ds: (w1 & 0x3f) as u8,
            signature: b[8],
            fm_ce_se: b[11],
            imm: be32(&b[12..16]),
        }
    }

    /// WQEBBs the WQE occupies (at least one, so a broken WQE still moves the ring on).
    pub fn wqebbs(&self) -> u16 {
        ((self.ds as u16 * 16).div_ceil(WQEBB as u16)).max(1)
    }

    pub fn signaled(&self) -> bool {
        self.fm_ce_se & flags::CQ_UPDATE != 0
    }

    pub fn solicited(&self) -> bool {
        self.fm_ce_se & flags::SOLICITED != 0
    }

    pub fn fence(&self) -> bool {
        self.fm_ce_se & flags::FENCE_MASK != 0
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
}

impl Data {
    /// Total payload bytes.
    pub fn len(&self) -> u64 {
        match self {
            Data::Sgl(s) => s.iter().map(|s| s.len as u64).sum(),
            Data::Inline(b) => b.len() as u64,
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
    let need = |n: usize| if body.len() < n { Err(WqeError::Layout("segments larger than ds")) } else { Ok(()) };
    let raddr = |b: &[u8]| (be64(&b[0..8]), be32(&b[8..12]));
    let (op, rest) = match ctrl.opcode {
        opcode::NOP => (Op::Nop, &body[..0]),
        opcode::SEND => (Op::Send { imm: None }, body),
        opcode::SEND_IMM => (Op::Send { imm: Some(imm) }, body),
        opcode::RDMA_WRITE | opcode::RDMA_WRITE_IMM | opcode::RDMA_READ => {
            need(16)?;
            let (raddr, rkey) = raddr(&body[..16]);
            let op = match ctrl.opcode {
                opcode::RDMA_WRITE => Op::Write { raddr, rkey, imm: None },
                opcode::RDMA_WRITE_IMM => Op::Write { raddr, rkey, imm: Some(imm) },
                _ => Op::Read { raddr, rkey },
            };
            (op, &body[16..])
        }
        opcode::ATOMIC_CS | opcode::ATOMIC_FA => {
            need(32)?;
            let (raddr, rkey) = raddr(&body[..16]);
            let a = be64(&body[16..24]);
            let b = be64(&body[24..32]);
            let op = if ctrl.opcode == opcode::ATOMIC_CS {
                Op::CmpSwap { raddr, rkey, swap: a, compare: b }
            } else {
                Op::FetchAdd { raddr, rkey, add: a }
            };
            (op, &body[32..])
        }
        other => return Err(WqeError::Opcode(other)),
    };
    let data = parse_payload(rest)?;
    match (&op, &data) {
        (Op::Read { .. }, Data::Inline(_)) => return Err(WqeError::Layout("inline data on an RDMA READ")),
        (o, d) if o.is_atomic() => {
            if matches!(d, Data::Inline(_)) {
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

/// Data segments or one inline segment filling `rest` (whole 16-byte units).
fn parse_payload(rest: &[u8]) -> Result<Data, WqeError> {
    let mut sges = Vec::new();
    let mut inline: Option<Vec<u8>> = None;
    let mut at = 0;
    while at + 16 <= rest.len() {
        let w = be32(&rest[at..at + 4]);
        if w & INLINE_BIT != 0 {
            let len = (w & !INLINE_BIT) as usize;
            let end = at + 4 + len;
            if end > rest.len() {
                return Err(WqeError::Layout("inline data larger than ds"));
            }
            inline.get_or_insert_with(Vec::new).extend_from_slice(&rest[at + 4..end]);
            at += (4 + len).div_ceil(16) * 16;
        } else {
            let len = if w == 0 { 1 << 31 } else { w };
            sges.push(Sge { len, lkey: be32(&rest[at + 4..at + 8]), addr: be64(&rest[at + 8..at + 16]) });
            at += 16;
        }
    }
    match inline {
        Some(b) if sges.is_empty() => Ok(Data::Inline(b)),
        Some(_) => Err(WqeError::Layout("inline and gather segments mixed")),
        None => Ok(Data::Sgl(sges)),
    }
}

/// Where a UD send goes: the parts of the datagram segment (address vector) the device
/// uses. Layout (48 bytes after the control segment): Q_Key at 0..4, `ext | dqpn` at
/// 8..12, traffic class 26, hop limit 27, destination GID 32..48.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdAv {
    pub qkey: u32,
    pub dqpn: u32,
    pub dgid: [u8; 16],
}

/// Decodes a UD send WQE: control, datagram segment, payload. Only SEND and
/// SEND_WITH_IMM exist on UD.
pub fn parse_ud(ctrl: &Ctrl, wqe: &[u8]) -> Result<(Op, Data, UdAv), WqeError> {
    let ds = ctrl.ds as usize;
    if ds == 0 || wqe.len() < ds * 16 {
        return Err(WqeError::Layout("ds is 0 or beyond the doorbell"));
    }
    let op = match ctrl.opcode {
        opcode::SEND => Op::Send { imm: None },
        opcode::SEND_IMM => Op::Send { imm: Some(ctrl.imm) },
        other => return Err(WqeError::Opcode(other)),
    };
    let body = &wqe[16..ds * 16];
    if body.len() < 48 {
        return Err(WqeError::Layout("UD WQE without its datagram segment"));
    }
    let mut dgid = [0u8; 16];
    dgid.copy_from_slice(&body[32..48]);
    let av = UdAv { qkey: be32(&body[0..4]), dqpn: be32(&body[8..12]) & 0x00ff_ffff, dgid };
    let data = parse_payload(&body[48..])?;
    if data.len() > MAX_MSG {
        return Err(WqeError::Length("message longer than 1 GiB"));
    }
    Ok((op, data, av))
}

/// A receive WQE's scatter list: data segments up to `max` or the terminator.
pub fn parse_recv(wqe: &[u8], max: usize) -> Vec<Sge> {
    let mut v = Vec::new();
    for seg in wqe.chunks_exact(16).take(max) {
        let lkey = be32(&seg[4..8]);
        if lkey == INVALID_LKEY {
            break;
        }
        let w = be32(&seg[0..4]);
        let len = if w == 0 { 1 << 31 } else { w & !INLINE_BIT };
        v.push(Sge { len, lkey, addr: be64(&seg[8..16]) });
    }
    v
}

/// The 16-bit WQE index field of a control segment's first word (used in tests).
pub fn wqe_index_of(first8: &[u8]) -> u16 {
    be16(&first8[1..3])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The golden control segment of ABI-NOTES (mlx5dv_set_ctrl_seg).
    #[test]
    fn golden_ctrl() {
        let b = [0x00, 0x12, 0x34, 0x08, 0xab, 0xcd, 0xef, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0];
        let c = Ctrl::parse(&b);
        assert_eq!((c.opmod, c.wqe_index, c.opcode, c.qpn, c.ds), (0, 0x1234, opcode::RDMA_WRITE, 0xabcdef, 3));
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
