//! The prm crate's layouts against the installed `<infiniband/mlx5dv.h>`.
//!
//! `tests/c/mlx5dv_layout.c` is compiled with the system `cc` and run; it prints the
//! header's struct sizes and field offsets for every WQE segment and CQE layout prm
//! defines, the doorbell record / UAR / WQE constants, and the bytes the header's own
//! `DEVX_SET` / `DEVX_SET64` / `DEVX_GET` produce on a test layout. This test
//! compares each record with the Rust definitions (`offset_of!` on the zerocopy
//! structs, the constants, and `prm::layout!` + `ViewMut::set` on the same field
//! list), so the header is the outside oracle for offsets and for the bit packing.
//! (rdma-core does not install `mlx5_ifc.h`, so the PRM mailbox offsets are checked
//! against values written down from it in `src/cmd/tests.rs` instead.)
//!
//! Without `cc` or the header the tests print `SKIP: ...` and pass.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use prm::bits::{Layout, View, ViewMut};
use prm::cqe::{Cqe64, ErrCqe};
use prm::opcode::{CqeOpcode, WqeOpcode};
use prm::wqe::{AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, EthSeg, InlineHeader, RaddrSeg};

/// The reference program's output as (kind, key) -> value text, or `None` when it
/// cannot be built here (the reason has been printed).
fn reference() -> Option<&'static BTreeMap<(String, String), String>> {
    static OUT: OnceLock<Option<BTreeMap<(String, String), String>>> = OnceLock::new();
    OUT.get_or_init(build_and_run).as_ref()
}

fn build_and_run() -> Option<BTreeMap<(String, String), String>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/mlx5dv_layout.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mlx5dv_layout");
    std::fs::create_dir_all(&dir).expect("create temp dir");
    let exe = dir.join("mlx5dv_layout");
    testkit::cc(&src, [
        std::ffi::OsStr::new("-std=gnu11"), "-O1".as_ref(), "-Wall".as_ref(), "-Werror".as_ref(), src.as_os_str(),
        "-o".as_ref(), exe.as_os_str(),
    ])?;
    let run = Command::new(&exe).output().expect("run reference program");
    assert!(run.status.success(), "reference program failed: {}", String::from_utf8_lossy(&run.stderr));
    let text = String::from_utf8(run.stdout).expect("utf-8 output");
    Some(
        text.lines()
            .map(|l| {
                let mut w = l.split_whitespace().map(str::to_owned);
                let (k, key, v) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
                ((k, key), v)
            })
            .collect(),
    )
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("bad number {s:?}: {e}"))
}

fn value(all: &BTreeMap<(String, String), String>, kind: &str, key: &str) -> String {
    all.get(&(kind.to_owned(), key.to_owned()))
        .unwrap_or_else(|| panic!("the reference program printed no {kind} {key}"))
        .clone()
}

macro_rules! reference_or_skip {
    () => {
        match reference() {
            Some(r) => r,
            None => return,
        }
    };
}

#[test]
fn segment_and_cqe_layouts_match_header() {
    let all = reference_or_skip!();
    let sizes: [(&str, usize); 11] = [
        ("mlx5_wqe_ctrl_seg", size_of::<CtrlSeg>()),
        ("mlx5_wqe_raddr_seg", size_of::<RaddrSeg>()),
        ("mlx5_wqe_atomic_seg", size_of::<AtomicSeg>()),
        ("mlx5_wqe_data_seg", size_of::<DataSeg>()),
        ("mlx5_wqe_inl_data_seg", size_of::<InlineHeader>()),
        ("mlx5_wqe_datagram_seg", size_of::<DatagramSeg>()),
        ("mlx5_wqe_av", size_of::<DatagramSeg>()),
        ("mlx5_wqe_eth_seg", size_of::<EthSeg>()),
        ("mlx5_cqe64", size_of::<Cqe64>()),
        ("mlx5_err_cqe", size_of::<ErrCqe>()),
        ("mlx5_cqe64", prm::cqe::CQE_SIZE),
    ];
    for (name, ours) in sizes {
        assert_eq!(num(&value(all, "size", name)) as usize, ours, "sizeof(struct {name})");
    }
    let offsets: Vec<(&str, usize)> = vec![
        ("mlx5_wqe_ctrl_seg.opmod_idx_opcode", offset_of!(CtrlSeg, opmod_idx_opcode)),
        ("mlx5_wqe_ctrl_seg.qpn_ds", offset_of!(CtrlSeg, qpn_ds)),
        ("mlx5_wqe_ctrl_seg.signature", offset_of!(CtrlSeg, signature)),
        ("mlx5_wqe_ctrl_seg.fm_ce_se", offset_of!(CtrlSeg, fm_ce_se)),
        ("mlx5_wqe_ctrl_seg.imm", offset_of!(CtrlSeg, imm)),
        ("mlx5_wqe_raddr_seg.raddr", offset_of!(RaddrSeg, raddr)),
        ("mlx5_wqe_raddr_seg.rkey", offset_of!(RaddrSeg, rkey)),
        ("mlx5_wqe_raddr_seg.reserved", offset_of!(RaddrSeg, reserved)),
        ("mlx5_wqe_atomic_seg.swap_add", offset_of!(AtomicSeg, swap_add)),
        ("mlx5_wqe_atomic_seg.compare", offset_of!(AtomicSeg, compare)),
        ("mlx5_wqe_data_seg.byte_count", offset_of!(DataSeg, byte_count)),
        ("mlx5_wqe_data_seg.lkey", offset_of!(DataSeg, lkey)),
        ("mlx5_wqe_data_seg.addr", offset_of!(DataSeg, addr)),
        ("mlx5_wqe_av.key", offset_of!(DatagramSeg, key)),
        ("mlx5_wqe_av.dqp_dct", offset_of!(DatagramSeg, dqp_dct)),
        ("mlx5_wqe_av.stat_rate_sl", offset_of!(DatagramSeg, stat_rate_sl)),
        ("mlx5_wqe_av.fl_mlid", offset_of!(DatagramSeg, fl_mlid)),
        ("mlx5_wqe_av.rlid", offset_of!(DatagramSeg, rlid)),
        ("mlx5_wqe_av.rmac", offset_of!(DatagramSeg, rmac)),
        ("mlx5_wqe_av.tclass", offset_of!(DatagramSeg, tclass)),
        ("mlx5_wqe_av.hop_limit", offset_of!(DatagramSeg, hop_limit)),
        ("mlx5_wqe_av.grh_gid_fl", offset_of!(DatagramSeg, grh_gid_fl)),
        ("mlx5_wqe_av.rgid", offset_of!(DatagramSeg, rgid)),
        ("mlx5_wqe_eth_seg.cs_flags", offset_of!(EthSeg, cs_flags)),
        ("mlx5_wqe_eth_seg.mss", offset_of!(EthSeg, mss)),
        ("mlx5_wqe_eth_seg.inline_hdr_sz", offset_of!(EthSeg, inline_hdr_sz)),
        ("mlx5_wqe_eth_seg.inline_hdr_start", offset_of!(EthSeg, inline_hdr)),
        ("mlx5_cqe64.wqe_id", offset_of!(Cqe64, wqe_id)),
        ("mlx5_cqe64.ml_path", offset_of!(Cqe64, ml_path)),
        ("mlx5_cqe64.slid", offset_of!(Cqe64, slid)),
        ("mlx5_cqe64.flags_rqpn", offset_of!(Cqe64, flags_rqpn)),
        ("mlx5_cqe64.hds_ip_ext", offset_of!(Cqe64, hds_ip_ext)),
        ("mlx5_cqe64.l4_hdr_type_etc", offset_of!(Cqe64, l4_hdr_type_etc)),
        ("mlx5_cqe64.vlan_info", offset_of!(Cqe64, vlan_info)),
        ("mlx5_cqe64.srqn_uidx", offset_of!(Cqe64, srqn_uidx)),
        ("mlx5_cqe64.imm_inval_pkey", offset_of!(Cqe64, imm_inval_pkey)),
        ("mlx5_cqe64.app", offset_of!(Cqe64, app)),
        ("mlx5_cqe64.app_op", offset_of!(Cqe64, app_op)),
        ("mlx5_cqe64.app_info", offset_of!(Cqe64, app_info)),
        ("mlx5_cqe64.byte_cnt", offset_of!(Cqe64, byte_cnt)),
        ("mlx5_cqe64.timestamp", offset_of!(Cqe64, timestamp)),
        ("mlx5_cqe64.sop_drop_qpn", offset_of!(Cqe64, sop_drop_qpn)),
        ("mlx5_cqe64.wqe_counter", offset_of!(Cqe64, wqe_counter)),
        ("mlx5_cqe64.signature", offset_of!(Cqe64, signature)),
        ("mlx5_cqe64.op_own", offset_of!(Cqe64, op_own)),
        ("mlx5_err_cqe.srqn", offset_of!(ErrCqe, srqn)),
        ("mlx5_err_cqe.vendor_err_synd", offset_of!(ErrCqe, vendor_err_synd)),
        ("mlx5_err_cqe.syndrome", offset_of!(ErrCqe, syndrome)),
        ("mlx5_err_cqe.s_wqe_opcode_qpn", offset_of!(ErrCqe, s_wqe_opcode_qpn)),
        ("mlx5_err_cqe.wqe_counter", offset_of!(ErrCqe, wqe_counter)),
        ("mlx5_err_cqe.signature", offset_of!(ErrCqe, signature)),
        ("mlx5_err_cqe.op_own", offset_of!(ErrCqe, op_own)),
    ];
    for (name, ours) in offsets {
        assert_eq!(num(&value(all, "offset", name)) as usize, ours, "offsetof({name})");
    }
}

#[test]
fn doorbell_uar_and_wqe_constants_match_header() {
    let all = reference_or_skip!();
    let consts: [(&str, u64); 13] = [
        ("MLX5_RCV_DBR", prm::dbrec::RCV_DBR as u64),
        ("MLX5_SND_DBR", prm::dbrec::SND_DBR as u64),
        ("MLX5_CQ_DOORBELL", prm::uar::CQ_ARM_OFFSET as u64),
        ("MLX5_CQ_DB_REQ_NOT_SOL", prm::dbrec::CQ_DB_REQ_NOT_SOL as u64),
        ("MLX5_CQ_DB_REQ_NOT", prm::dbrec::CQ_DB_REQ_NOT as u64),
        ("MLX5_SEND_WQE_BB", prm::wqe::WQEBB_SIZE as u64),
        ("MLX5_SEND_WQE_SHIFT", prm::wqe::WQEBB_SHIFT as u64),
        ("MLX5_INLINE_SEG", prm::wqe::INLINE_SEG as u64),
        ("MLX5_INVALID_LKEY", prm::wqe::INVALID_LKEY as u64),
        ("MLX5_EXTENDED_UD_AV", prm::wqe::EXTENDED_UD_AV as u64),
        ("MLX5_ETH_WQE_L3_CSUM", prm::wqe::eth::ETH_L3_CSUM as u64),
        ("MLX5_ETH_WQE_L4_CSUM", prm::wqe::eth::ETH_L4_CSUM as u64),
        ("MLX5_CQE_OWNER_MASK", 1),
    ];
    for (name, ours) in consts {
        assert_eq!(num(&value(all, "const", name)), ours, "{name}");
    }
}

/// The error CQE's syndromes and the control segment's `fm_ce_se` flags against the
/// header's `MLX5_CQE_SYNDROME_*` and `MLX5_WQE_CTRL_*`.
#[test]
fn syndromes_and_ctrl_flags_match_header() {
    use prm::cqe::Syndrome;
    use prm::opcode::FmCeSe;
    let all = reference_or_skip!();
    let consts: [(&str, u64); 17] = [
        ("MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR", Syndrome::LocalLengthErr as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR", Syndrome::LocalQpOpErr as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_PROT_ERR", Syndrome::LocalProtErr as u64),
        ("MLX5_CQE_SYNDROME_WR_FLUSH_ERR", Syndrome::WrFlushErr as u64),
        ("MLX5_CQE_SYNDROME_MW_BIND_ERR", Syndrome::MwBindErr as u64),
        ("MLX5_CQE_SYNDROME_BAD_RESP_ERR", Syndrome::BadRespErr as u64),
        ("MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR", Syndrome::LocalAccessErr as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR", Syndrome::RemoteInvalReqErr as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR", Syndrome::RemoteAccessErr as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_OP_ERR", Syndrome::RemoteOpErr as u64),
        ("MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR", Syndrome::TransportRetryExcErr as u64),
        ("MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR", Syndrome::RnrRetryExcErr as u64),
        ("MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR", Syndrome::RemoteAbortedErr as u64),
        ("MLX5_WQE_CTRL_CQ_UPDATE", FmCeSe::CQ_UPDATE.bits() as u64),
        ("MLX5_WQE_CTRL_SOLICITED", FmCeSe::SOLICITED.bits() as u64),
        ("MLX5_WQE_CTRL_FENCE", FmCeSe::FENCE.bits() as u64),
        ("MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE", FmCeSe::INITIATOR_SMALL_FENCE.bits() as u64),
    ];
    for (name, ours) in consts {
        assert_eq!(num(&value(all, "const", name)), ours, "{name}");
    }
}

/// `Cqe64`'s accessors of `op_own` against the header's `mlx5dv_get_cqe_*` for every
/// value of the byte; inline scatter against `MLX5_INLINE_SCATTER_32/64`; the GRH flag
/// as libmlx5 reads it (cq.c: `(be32toh(cqe->flags_rqpn) >> 28) & 3` sets IBV_WC_GRH).
#[test]
fn cqe_accessors_match_header() {
    use prm::cqe::InlineScatter;
    let all = reference_or_skip!();
    let (s32, s64) = (num(&value(all, "const", "MLX5_INLINE_SCATTER_32")), num(&value(all, "const", "MLX5_INLINE_SCATTER_64")));
    for v in 0..=255u8 {
        let mut b = [0u8; 64];
        b[offset_of!(Cqe64, op_own)] = v;
        let c = Cqe64::view(&b);
        let ours = format!("{},{},{},{}", c.opcode_raw(), c.owner(), c.se(), c.format());
        assert_eq!(ours, value(all, "cqebits", &v.to_string()), "op_own {v:#x}: opcode,owner,se,format");
        let want = if v as u64 & s32 != 0 {
            InlineScatter::InCqe32
        } else if v as u64 & s64 != 0 {
            InlineScatter::InCqe64
        } else {
            InlineScatter::None
        };
        assert_eq!(c.inline_scatter(), want, "op_own {v:#x}");
    }
    // the 64-bit timestamp (`__be64 timestamp`), and the error CQE's SRQ number (24
    // bits, as libmlx5 masks `srqn_uidx`) and syndrome byte
    let mut b = [0u8; 64];
    let at = offset_of!(Cqe64, timestamp);
    b[at..at + 8].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
    assert_eq!(Cqe64::view(&b).timestamp(), 0x0102_0304_0506_0708);
    let mut b = [0u8; 64];
    let at = offset_of!(ErrCqe, srqn);
    b[at..at + 4].copy_from_slice(&[0xff, 0x12, 0x34, 0x56]);
    b[offset_of!(ErrCqe, syndrome)] = 0x15;
    let e = ErrCqe::view(&b);
    assert_eq!((e.srqn(), e.syndrome_raw()), (0x12_3456, 0x15));
    for (flags_rqpn, grh) in [(0u32, false), (0x0fff_ffff, false), (0x1000_0000, true), (0x2000_0000, true), (0xc000_0000, false)] {
        let mut b = [0u8; 64];
        let at = offset_of!(Cqe64, flags_rqpn);
        b[at..at + 4].copy_from_slice(&flags_rqpn.to_be_bytes());
        assert_eq!(Cqe64::view(&b).has_grh(), grh, "flags_rqpn {flags_rqpn:#x}");
    }
}

fn bytes<const N: usize>(hex: &str) -> [u8; N] {
    assert_eq!(hex.len(), 2 * N, "{hex}");
    core::array::from_fn(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
}

/// A datagram segment case: label, key, dqp_dct, ext, grh_gid_fl (the setter's inputs),
/// then what the readers must give: dqpn, extended, grh, sgid index, flow label.
type DgramRow = (&'static str, u64, u32, u8, u32, u32, bool, bool, u8, u32);

/// The readers of the WQE segments give back what the header's setters
/// (`mlx5dv_set_ctrl_seg`, `_dgram_seg`, `_data_seg`) were given, and the writers
/// write those bytes (softhca reads WQEs through these; the provider's golden tests
/// check the writers more widely).
#[test]
fn segment_readers_match_mlx5dv_setters() {
    let all = reference_or_skip!();
    let c: [u8; 16] = bytes(&value(all, "devx", "ctrlseg"));
    let v = CtrlSeg::view(&c);
    assert_eq!((v.wqe_index(), v.opcode_raw(), v.opmod(), v.qpn(), v.ds()), (0xbeef, 0x11, 0x08, 0x12_3456, 5));
    assert_eq!((v.fm_ce_se().bits(), v.signature, v.imm()), (0x88, 0x5a, 0xdead_beef));
    let mut slot = [0u8; 16];
    CtrlSeg::from_raw(0xbeef, 0x11, 0x08, 0x12_3456, 0x88, 5, 0x5a, 0xdead_beef).write(&mut slot);
    assert_eq!(slot, c);

    let mac = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
    let gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55];
    let rows: [DgramRow; 3] = [
        ("dgramseg1", 0x1111_2222_3333_4444, 0xab_cdef, 1, 0x4234_5678, 0xab_cdef, true, true, 0x23, 0x4_5678),
        ("dgramseg2", 0, 0x8000_0002, 1, 0, 2, true, false, 0, 0),
        ("dgramseg3", 0, 3, 0, 0x001f_ffff, 3, false, false, 1, 0xf_ffff),
    ];
    for (label, key, dqp, ext, gfl, dqpn, extended, grh, sgid, fl) in rows {
        let d: [u8; 48] = bytes(&value(all, "devx", label));
        let v = DatagramSeg::view(&d);
        assert_eq!((v.qkey(), v.dqpn(), v.is_extended()), ((key >> 32) as u32, dqpn, extended), "{label}");
        assert_eq!((v.grh(), v.sgid_index(), v.flow_label()), (grh, sgid, fl), "{label}");
        let (srsl, flm, rlid, tclass, hop) = if label == "dgramseg1" { (0x35, 0x80, 0x1234, 0x60, 64) } else { (0, 0, 0, 0, 0) };
        let mut out = [0u8; 48];
        DatagramSeg::from_raw(key, dqp, ext, srsl, flm, rlid, mac, tclass, hop, gfl, gid).write(&mut out);
        assert_eq!(out, d, "{label}");
    }

    let end: [u8; 16] = bytes(&value(all, "devx", "dataseg_end"));
    assert!(DataSeg::view(&end).is_terminator());
    assert_eq!(DataSeg::terminator(), *DataSeg::view(&end));
    let d: [u8; 16] = bytes(&value(all, "devx", "dataseg"));
    let v = DataSeg::view(&d);
    assert!(!v.is_terminator());
    assert_eq!((v.byte_count(), v.lkey(), v.addr()), (4096, 0x1234, 0x1122_3344_5566_7788));
}

/// Every WQE opcode and CQE opcode the header names decodes to the variant of that
/// name (and every variant is one of them).
#[test]
fn opcodes_match_header() {
    let all = reference_or_skip!();
    let wqe: [(&str, WqeOpcode); 20] = [
        ("MLX5_OPCODE_NOP", WqeOpcode::Nop),
        ("MLX5_OPCODE_SEND_INVAL", WqeOpcode::SendInval),
        ("MLX5_OPCODE_RDMA_WRITE", WqeOpcode::RdmaWrite),
        ("MLX5_OPCODE_RDMA_WRITE_IMM", WqeOpcode::RdmaWriteImm),
        ("MLX5_OPCODE_SEND", WqeOpcode::Send),
        ("MLX5_OPCODE_SEND_IMM", WqeOpcode::SendImm),
        ("MLX5_OPCODE_TSO", WqeOpcode::Tso),
        ("MLX5_OPCODE_RDMA_READ", WqeOpcode::RdmaRead),
        ("MLX5_OPCODE_ATOMIC_CS", WqeOpcode::AtomicCs),
        ("MLX5_OPCODE_ATOMIC_FA", WqeOpcode::AtomicFa),
        ("MLX5_OPCODE_ATOMIC_MASKED_CS", WqeOpcode::AtomicMaskedCs),
        ("MLX5_OPCODE_ATOMIC_MASKED_FA", WqeOpcode::AtomicMaskedFa),
        ("MLX5_OPCODE_FMR", WqeOpcode::Fmr),
        ("MLX5_OPCODE_LOCAL_INVAL", WqeOpcode::LocalInval),
        ("MLX5_OPCODE_CONFIG_CMD", WqeOpcode::ConfigCmd),
        ("MLX5_OPCODE_SET_PSV", WqeOpcode::SetPsv),
        ("MLX5_OPCODE_UMR", WqeOpcode::Umr),
        ("MLX5_OPCODE_TAG_MATCHING", WqeOpcode::TagMatching),
        ("MLX5_OPCODE_FLOW_TBL_ACCESS", WqeOpcode::FlowTblAccess),
        ("MLX5_OPCODE_MMO", WqeOpcode::Mmo),
    ];
    for (name, op) in wqe {
        let v = num(&value(all, "const", name));
        assert_eq!(op.as_u8() as u64, v, "{name}");
        assert_eq!(WqeOpcode::from_u8(v as u8), Some(op), "from_u8({name})");
    }
    let named: Vec<u8> = wqe.iter().map(|(_, op)| op.as_u8()).collect();
    assert!((0..=255u8).all(|v| WqeOpcode::from_u8(v).is_none() || named.contains(&v)), "an opcode the header lacks");
    let cqe: [(&str, CqeOpcode); 11] = [
        ("MLX5_CQE_REQ", CqeOpcode::Req),
        ("MLX5_CQE_RESP_WR_IMM", CqeOpcode::RespWrImm),
        ("MLX5_CQE_RESP_SEND", CqeOpcode::RespSend),
        ("MLX5_CQE_RESP_SEND_IMM", CqeOpcode::RespSendImm),
        ("MLX5_CQE_RESP_SEND_INV", CqeOpcode::RespSendInv),
        ("MLX5_CQE_RESIZE_CQ", CqeOpcode::ResizeCq),
        ("MLX5_CQE_NO_PACKET", CqeOpcode::NoPacket),
        ("MLX5_CQE_SIG_ERR", CqeOpcode::SigErr),
        ("MLX5_CQE_REQ_ERR", CqeOpcode::ReqErr),
        ("MLX5_CQE_RESP_ERR", CqeOpcode::RespErr),
        ("MLX5_CQE_INVALID", CqeOpcode::Invalid),
    ];
    for (name, op) in cqe {
        let v = num(&value(all, "const", name));
        assert_eq!(op as u64, v, "{name}");
        assert_eq!(CqeOpcode::from_nibble(v as u8), Some(op), "from_nibble({name})");
    }
    let named: Vec<u8> = cqe.iter().map(|(_, op)| *op as u8).collect();
    assert!((0..16u8).all(|v| CqeOpcode::from_nibble(v).is_none() || named.contains(&v)));
}

prm::layout! {
    /// The C program's `mlx5_ifc_pack_test_bits`, field for field.
    pub struct PackTest = pack_test {
        a: 0x1,
        b: 0x3,
        c: 0x4,
        d: 0x18,
        p: 0x20,
        e: 0x40,
        f: 0x5,
        g: 0xb,
        h: 0x10,
        i: 0x20,
        j: 0x8,
        k: 0x3,
        l: 0x1,
        m: 0x4,
        n: 0x10,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `layout!` + `ViewMut::set` pack bits exactly as the header's DEVX_SET does.
#[test]
fn bit_packing_matches_devx_set() {
    let all = reference_or_skip!();
    assert_eq!(num(&value(all, "const", "DEVX_ST_SZ_BYTES(pack_test)")) as usize, PackTest::BYTES);
    assert_eq!(num(&value(all, "const", "DEVX_BYTE_OFF.e")) as usize, PackTest::e.off() / 8);
    assert_eq!(num(&value(all, "const", "DEVX_BYTE_OFF.i")) as usize, PackTest::i.off() / 8);
    let mut b = [0u8; PackTest::BYTES];
    let mut v = ViewMut::<PackTest>::new(&mut b).unwrap();
    v.set(PackTest::a, true).set(PackTest::b, 5).set(PackTest::c, 0xf).set(PackTest::d, 0x12_3456);
    v.set(PackTest::e, 0x0102_0304_0506_0708).set(PackTest::f, 0x1b).set(PackTest::g, 0x5a5);
    v.set(PackTest::h, 0xbeef).set(PackTest::i, 0xcafe_f00d);
    assert_eq!(hex(&b), value(all, "devx", "set_all"));
    let mut v = ViewMut::<PackTest>::new(&mut b).unwrap();
    v.set(PackTest::b, 0xff).set(PackTest::g, 0xffff);
    assert_eq!(hex(&b), value(all, "devx", "masked"));
    let r = View::<PackTest>::new(&b).unwrap();
    assert_eq!(r.get(PackTest::c) as u64, num(&value(all, "devxget", "c")));
    assert_eq!(r.get(PackTest::g) as u64, num(&value(all, "devxget", "g")));
    assert_eq!(r.get(PackTest::d) as u64, num(&value(all, "devxget", "d")));

    let mut b = [0xffu8; PackTest::BYTES];
    let mut v = ViewMut::<PackTest>::new(&mut b).unwrap();
    v.set(PackTest::d, 0).set(PackTest::f, 2);
    // (k = 2 and m = 5 around l = 1: a wrong byte count in write_bits that wraps the
    // 128-bit shifts lands m's bits right but loses k's and l's)
    v.set(PackTest::a, false).set(PackTest::k, 2).set(PackTest::m, 5);
    assert_eq!(hex(&b), value(all, "devx", "clear"));
    let r = View::<PackTest>::new(&b).unwrap();
    assert_eq!(r.get(PackTest::k) as u64, num(&value(all, "devxget", "k")));
    assert_eq!(r.get(PackTest::m) as u64, num(&value(all, "devxget", "m")));
    assert_eq!(r.get(PackTest::j) as u64, num(&value(all, "devxget", "j")));
    assert!(!r.get(PackTest::a) && r.get(PackTest::l) && r.get(PackTest::c) == 0xf);
    assert_eq!(<PackTest as Layout>::NAME, "pack_test");
}
