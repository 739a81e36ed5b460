//! Every PRM layout this crate knows, by name and by opcode: what a tool that
//! builds or prints raw mailboxes (`doorbell devx cmd`, `doorbell devx caps`) walks.
//!
//! Nested layouts appear in [`Layout::FIELDS`] only by their PRM name
//! ([`Kind::Sub`]); [`fields_of`] resolves the name, so [`flatten`] can list every
//! scalar of a mailbox as a dotted path (`qpc.primary_address_path.udp_sport`) with
//! its absolute bit offset.

use prm::bits::{FieldInfo, Kind, Layout};
use prm::cmd::{cq, header, hca_cap, mkey, opcode as op, pd, qp, uar};

macro_rules! registry {
    ($($t:ty),* $(,)?) => {
        /// The fields of the layout the PRM calls `name`.
        pub fn fields_of(name: &str) -> Option<&'static [FieldInfo]> {
            $( if <$t as Layout>::NAME == name { return Some(<$t as Layout>::FIELDS); } )*
            None
        }
        /// The size in bytes of the layout the PRM calls `name`.
        pub fn bytes_of(name: &str) -> Option<usize> {
            $( if <$t as Layout>::NAME == name { return Some(<$t as Layout>::BYTES); } )*
            None
        }
    };
}

registry!(
    header::MboxIn, header::MboxOut, header::GeneralObjInCmdHdr, header::GeneralObjOutCmdHdr,
    hca_cap::QueryHcaCapIn, hca_cap::QueryHcaCapOut, hca_cap::HcaCapUnion, hca_cap::CmdHcaCap,
    hca_cap::RoceCap, hca_cap::AtomicCaps, hca_cap::CmdHcaCap2, hca_cap::FlowTableNicCap,
    hca_cap::FlowTablePropLayout,
    cq::Cqc, cq::CreateCqIn, cq::CreateCqOut, cq::DestroyCqIn,
    qp::Ads, qp::Qpc, qp::CreateQpIn, qp::CreateQpOut, qp::Rst2initQpIn, qp::Rst2initQpOut,
    qp::Init2rtrQpIn, qp::Init2rtrQpOut, qp::Rtr2rtsQpIn, qp::Rtr2rtsQpOut, qp::Rts2rtsQpIn,
    qp::Rts2rtsQpOut, qp::QueryQpIn, qp::QueryQpOut, qp::DestroyQpIn, qp::Qp2errIn, qp::Qp2rstIn,
    mkey::Mkc, mkey::CreateMkeyIn, mkey::CreateMkeyOut, mkey::DestroyMkeyIn, mkey::DestroyMkeyOut,
    pd::AllocPdIn, pd::AllocPdOut, pd::DeallocPdIn, pd::DeallocPdOut,
    uar::AllocUarIn, uar::AllocUarOut, uar::DeallocUarIn, uar::DeallocUarOut,
);

/// A command: its name and the PRM names of its inbox and outbox layouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmdInfo {
    pub opcode: u16,
    pub name: &'static str,
    pub inbox: &'static str,
    pub outbox: &'static str,
}

const CMDS: &[CmdInfo] = &[
    CmdInfo { opcode: op::QUERY_HCA_CAP, name: "QUERY_HCA_CAP", inbox: "query_hca_cap_in", outbox: "query_hca_cap_out" },
    CmdInfo { opcode: op::CREATE_MKEY, name: "CREATE_MKEY", inbox: "create_mkey_in", outbox: "create_mkey_out" },
    CmdInfo { opcode: op::DESTROY_MKEY, name: "DESTROY_MKEY", inbox: "destroy_mkey_in", outbox: "destroy_mkey_out" },
    CmdInfo { opcode: op::CREATE_CQ, name: "CREATE_CQ", inbox: "create_cq_in", outbox: "create_cq_out" },
    CmdInfo { opcode: op::DESTROY_CQ, name: "DESTROY_CQ", inbox: "destroy_cq_in", outbox: "mbox_out" },
    CmdInfo { opcode: op::CREATE_QP, name: "CREATE_QP", inbox: "create_qp_in", outbox: "create_qp_out" },
    CmdInfo { opcode: op::DESTROY_QP, name: "DESTROY_QP", inbox: "destroy_qp_in", outbox: "mbox_out" },
    CmdInfo { opcode: op::RST2INIT_QP, name: "RST2INIT_QP", inbox: "rst2init_qp_in", outbox: "rst2init_qp_out" },
    CmdInfo { opcode: op::INIT2RTR_QP, name: "INIT2RTR_QP", inbox: "init2rtr_qp_in", outbox: "init2rtr_qp_out" },
    CmdInfo { opcode: op::RTR2RTS_QP, name: "RTR2RTS_QP", inbox: "rtr2rts_qp_in", outbox: "rtr2rts_qp_out" },
    CmdInfo { opcode: op::RTS2RTS_QP, name: "RTS2RTS_QP", inbox: "rts2rts_qp_in", outbox: "rts2rts_qp_out" },
    CmdInfo { opcode: op::QP_2ERR, name: "2ERR_QP", inbox: "qp_2err_in", outbox: "mbox_out" },
    CmdInfo { opcode: op::QP_2RST, name: "2RST_QP", inbox: "qp_2rst_in", outbox: "mbox_out" },
    CmdInfo { opcode: op::QUERY_QP, name: "QUERY_QP", inbox: "query_qp_in", outbox: "query_qp_out" },
    CmdInfo { opcode: op::ALLOC_PD, name: "ALLOC_PD", inbox: "alloc_pd_in", outbox: "alloc_pd_out" },
    CmdInfo { opcode: op::DEALLOC_PD, name: "DEALLOC_PD", inbox: "dealloc_pd_in", outbox: "dealloc_pd_out" },
    CmdInfo { opcode: op::ALLOC_UAR, name: "ALLOC_UAR", inbox: "alloc_uar_in", outbox: "alloc_uar_out" },
    CmdInfo { opcode: op::DEALLOC_UAR, name: "DEALLOC_UAR", inbox: "dealloc_uar_in", outbox: "dealloc_uar_out" },
];

/// What is known about `opcode` (None: a command without layouts here; it can still
/// be sent as raw bytes).
pub fn command(opcode: u16) -> Option<CmdInfo> {
    CMDS.iter().copied().find(|c| c.opcode == opcode)
}

/// A command by its PRM name (`QUERY_QP`, case-insensitive, `MLX5_CMD_OP_` optional).
pub fn command_by_name(name: &str) -> Option<CmdInfo> {
    let n = name.to_ascii_uppercase();
    let n = n.trim_start_matches("MLX5_CMD_OP_");
    CMDS.iter().copied().find(|c| c.name == n)
}

/// One scalar of a flattened layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flat {
    /// Dotted path from the top layout.
    pub path: String,
    /// Absolute bit offset.
    pub bit_off: usize,
    pub bits: usize,
}

/// Every named scalar of layout `name`, nested layouts expanded (reserved areas and
/// byte strings left out).
pub fn flatten(name: &str) -> Vec<Flat> {
    let mut v = Vec::new();
    walk(name, "", 0, &mut v);
    v
}

fn walk(name: &str, prefix: &str, base: usize, v: &mut Vec<Flat>) {
    let Some(fields) = fields_of(name) else { return };
    for f in fields.iter().filter(|f| !f.is_reserved()) {
        let path = if prefix.is_empty() { f.name.to_string() } else { format!("{prefix}.{}", f.name) };
        match f.kind {
            Kind::Scalar => v.push(Flat { path, bit_off: base + f.bit_off, bits: f.bits }),
            Kind::Sub(sub) => walk(sub, &path, base + f.bit_off, v),
            Kind::Bytes => {}
        }
    }
}

/// Reads `bits` bits at bit `off` of a big-endian PRM buffer (`DEVX_GET`; a 64-bit
/// field is a whole qword). None when the buffer is too short.
pub fn get_bits(b: &[u8], off: usize, bits: usize) -> Option<u64> {
    if (off + bits).div_ceil(8) > b.len() || bits == 0 || bits > 64 {
        return None;
    }
    let mut v: u64 = 0;
    for i in 0..bits {
        let bit = off + i;
        v = (v << 1) | ((b[bit / 8] >> (7 - bit % 8)) & 1) as u64;
    }
    Some(v)
}

/// Writes the low `bits` bits of `v` at bit `off` (`DEVX_SET`). False when the
/// buffer is too short or `v` does not fit.
pub fn set_bits(b: &mut [u8], off: usize, bits: usize, v: u64) -> bool {
    if (off + bits).div_ceil(8) > b.len() || bits == 0 || bits > 64 || (bits < 64 && v >> bits != 0) {
        return false;
    }
    for i in 0..bits {
        let bit = off + i;
        let one = (v >> (bits - 1 - i)) & 1 == 1;
        let m = 1u8 << (7 - bit % 8);
        if one { b[bit / 8] |= m } else { b[bit / 8] &= !m }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattened_paths_reach_nested_fields() {
        let f = flatten("create_qp_in");
        // create_qp_in.qpc @0xc0; qpc.primary_address_path @0xc0; ads.udp_sport @0x110
        let sport = f.iter().find(|x| x.path == "qpc.primary_address_path.udp_sport").unwrap();
        assert_eq!((sport.bit_off, sport.bits), (0xc0 + 0xc0 + 0x110, 16));
        // qpc.log_sq_size @0x51 (4)
        let sq = f.iter().find(|x| x.path == "qpc.log_sq_size").unwrap();
        assert_eq!((sq.bit_off, sq.bits), (0xc0 + 0x51, 4));
        assert!(f.iter().all(|x| !x.path.contains("reserved")));
    }

    #[test]
    fn raw_bits_as_devx_set_and_get() {
        let mut b = [0u8; 16];
        // DEVX_SET(qpc, .., log_sq_size @0x51 (4), 9): dword 2 bits 14..11
        assert!(set_bits(&mut b, 0x51, 4, 9));
        assert_eq!(u32::from_be_bytes(b[8..12].try_into().unwrap()), 9 << 11);
        assert_eq!(get_bits(&b, 0x51, 4), Some(9));
        assert!(!set_bits(&mut b, 0x51, 4, 16), "too wide");
        assert!(!set_bits(&mut b, 0x78, 16, 1), "past the end");
        assert!(set_bits(&mut b, 0x40, 64, u64::MAX));
        assert_eq!(get_bits(&b, 0x40, 64), Some(u64::MAX));
    }

    #[test]
    fn every_command_has_its_layouts() {
        for c in CMDS {
            assert!(fields_of(c.inbox).is_some() && fields_of(c.outbox).is_some(), "{}", c.name);
            assert_eq!(command(c.opcode), Some(*c));
        }
        assert_eq!(command_by_name("mlx5_cmd_op_query_qp").map(|c| c.opcode), Some(0x50b));
    }
}
