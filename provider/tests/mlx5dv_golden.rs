//! Golden bytes from the installed `<infiniband/mlx5dv.h>`.
//!
//! `tests/c/mlx5dv_golden.c` is compiled with the system `cc` and run; it prints
//! the header's constants and struct layouts, the bytes its inline setters
//! (`mlx5dv_set_ctrl_seg`, `mlx5dv_set_data_seg`, `mlx5dv_set_dgram_seg` and the
//! SSSE3 variants) produce for a table of inputs, CQEs decoded by its getters, whole
//! send WQEs composed from its setters, and (when libibverbs links) the
//! `ibv_wc_status_str` texts. Every record carries its inputs; this test rebuilds the
//! same thing with the Rust builders and compares byte for byte.
//!
//! Without `cc` or the header the tests print `SKIP: ...` and pass.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use provider::cqe::{
    is_sw_owned, Cqe64, CqeOpcode, ErrStatus, Syndrome, SyndromeStatus, WcFlags,
    WcOpcode, WcStatus,
};
use provider::opcode::{FmCeSe, WqeOpcode};
use provider::wqe::{
    data_seg, write_send_wqe, CtrlSeg, DataSeg, DatagramSeg, Payload,
    SendOp, SendWr, Sge, SqRing, UdDest, INVALID_LKEY,
};

/// The reference program's output, split into records, or `None` when it cannot be
/// built here (the reason has been printed).
fn reference() -> Option<&'static Vec<Vec<String>>> {
    static OUT: OnceLock<Option<Vec<Vec<String>>>> = OnceLock::new();
    OUT.get_or_init(build_and_run).as_ref()
}

fn build_and_run() -> Option<Vec<Vec<String>>> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/mlx5dv_golden.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("mlx5dv_golden");
    std::fs::create_dir_all(&dir).expect("create temp dir");
    let exe = dir.join("mlx5dv_golden");

    let mut common: Vec<String> = vec!["-std=gnu11".into(), "-O1".into(), "-Wall".into()];
    if cfg!(target_arch = "x86_64") {
        // enables the header's SSSE3 setters (mlx5dv_x86_set_*), compared too
        common.push("-mssse3".into());
    }
    common.extend([
        src.display().to_string(),
        "-o".into(),
        exe.display().to_string(),
    ]);
    // With libibverbs for ibv_wc_status_str; without it if the library is missing.
    let attempts: [&[&str]; 2] = [&["-DHAVE_IBVERBS", "-libverbs"], &[]];
    let mut errors = String::new();
    let mut built = false;
    for extra in attempts {
        let mut args = common.clone();
        // libraries after the sources
        args.extend(extra.iter().map(|s| s.to_string()));
        match Command::new("cc").args(&args).output() {
            Err(e) => {
                testkit::skip(testkit::Need::Tool, format!("cannot run cc ({e}) (apt-get install gcc libibverbs-dev)"));
                return None;
            }
            Ok(o) if o.status.success() => {
                built = true;
                break;
            }
            Ok(o) => errors.push_str(&String::from_utf8_lossy(&o.stderr)),
        }
    }
    if !built {
        if errors.contains("mlx5dv.h") || errors.contains("verbs.h") {
            testkit::skip(testkit::Need::Tool, "infiniband/mlx5dv.h not found (apt-get install libibverbs-dev)");
            return None;
        }
        panic!("compiling {} failed:\n{errors}", src.display());
    }
    let out = Command::new(&exe).output().expect("run reference program");
    assert!(
        out.status.success(),
        "reference program failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    Some(
        text.lines()
            .map(|l| l.split_whitespace().map(str::to_owned).collect())
            .collect(),
    )
}

macro_rules! reference_or_skip {
    () => {
        match reference() {
            Some(r) => r,
            None => return,
        }
    };
}

/// Records of one kind.
fn records<'a>(all: &'a [Vec<String>], kind: &str) -> Vec<&'a [String]> {
    all.iter()
        .filter(|r| r.first().map(String::as_str) == Some(kind))
        .map(|r| &r[1..])
        .collect()
}

fn num(s: &str) -> u64 {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("bad number {s:?}: {e}"))
}

fn bytes(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0, "odd hex string {s:?}");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn arr<const N: usize>(s: &str) -> [u8; N] {
    bytes(s)
        .try_into()
        .unwrap_or_else(|v: Vec<u8>| panic!("expected {N} bytes, got {}", v.len()))
}

/// The `ibv_wc` values the provider reports (status, opcode, flags) against verbs.h; the
/// mlx5 constants under them (opcodes, syndromes, control flags) are prm's, checked by
/// `prm/tests/mlx5dv_layout.rs`.
#[test]
fn constants_match_header() {
    let all = reference_or_skip!();
    let ours: BTreeMap<&str, u64> = [
        ("IBV_WC_SEND", WcOpcode::Send as u64),
        ("IBV_WC_RDMA_WRITE", WcOpcode::RdmaWrite as u64),
        ("IBV_WC_RDMA_READ", WcOpcode::RdmaRead as u64),
        ("IBV_WC_COMP_SWAP", WcOpcode::CompSwap as u64),
        ("IBV_WC_FETCH_ADD", WcOpcode::FetchAdd as u64),
        ("IBV_WC_BIND_MW", WcOpcode::BindMw as u64),
        ("IBV_WC_LOCAL_INV", WcOpcode::LocalInv as u64),
        ("IBV_WC_TSO", WcOpcode::Tso as u64),
        ("IBV_WC_RECV", WcOpcode::Recv as u64),
        (
            "IBV_WC_RECV_RDMA_WITH_IMM",
            WcOpcode::RecvRdmaWithImm as u64,
        ),
        ("IBV_WC_GRH", WcFlags::GRH.bits() as u64),
        ("IBV_WC_WITH_IMM", WcFlags::WITH_IMM.bits() as u64),
        ("IBV_WC_IP_CSUM_OK", WcFlags::IP_CSUM_OK.bits() as u64),
        ("IBV_WC_WITH_INV", WcFlags::WITH_INV.bits() as u64),
    ]
    .into_iter()
    .chain(WcStatus::ALL.iter().map(|s| (status_c_name(*s), *s as u64)))
    .collect();

    let theirs = records(all, "const");
    assert_eq!(theirs.len(), ours.len(), "constant tables differ in size");
    for r in theirs {
        let name = r[0].as_str();
        let value = num(&r[1]);
        assert_eq!(ours.get(name).copied(), Some(value), "{name}");
    }
}

fn status_c_name(s: WcStatus) -> &'static str {
    use WcStatus::*;
    match s {
        Success => "IBV_WC_SUCCESS",
        LocLenErr => "IBV_WC_LOC_LEN_ERR",
        LocQpOpErr => "IBV_WC_LOC_QP_OP_ERR",
        LocEecOpErr => "IBV_WC_LOC_EEC_OP_ERR",
        LocProtErr => "IBV_WC_LOC_PROT_ERR",
        WrFlushErr => "IBV_WC_WR_FLUSH_ERR",
        MwBindErr => "IBV_WC_MW_BIND_ERR",
        BadRespErr => "IBV_WC_BAD_RESP_ERR",
        LocAccessErr => "IBV_WC_LOC_ACCESS_ERR",
        RemInvReqErr => "IBV_WC_REM_INV_REQ_ERR",
        RemAccessErr => "IBV_WC_REM_ACCESS_ERR",
        RemOpErr => "IBV_WC_REM_OP_ERR",
        RetryExcErr => "IBV_WC_RETRY_EXC_ERR",
        RnrRetryExcErr => "IBV_WC_RNR_RETRY_EXC_ERR",
        LocRddViolErr => "IBV_WC_LOC_RDD_VIOL_ERR",
        RemInvRdReqErr => "IBV_WC_REM_INV_RD_REQ_ERR",
        RemAbortErr => "IBV_WC_REM_ABORT_ERR",
        InvEecnErr => "IBV_WC_INV_EECN_ERR",
        InvEecStateErr => "IBV_WC_INV_EEC_STATE_ERR",
        FatalErr => "IBV_WC_FATAL_ERR",
        RespTimeoutErr => "IBV_WC_RESP_TIMEOUT_ERR",
        GeneralErr => "IBV_WC_GENERAL_ERR",
        TmErr => "IBV_WC_TM_ERR",
        TmRndvIncomplete => "IBV_WC_TM_RNDV_INCOMPLETE",
    }
}

/// The provider's own layout, `ibv_sge` (the segment and CQE structs are prm's, checked
/// against mlx5dv.h by prm/tests/mlx5dv_layout.rs).
#[test]
fn layouts_match_header() {
    let all = reference_or_skip!();
    let sizes: BTreeMap<&str, usize> = [("ibv_sge", size_of::<Sge>())].into();
    let offsets: BTreeMap<&str, usize> =
        [("ibv_sge.addr", offset_of!(Sge, addr)), ("ibv_sge.length", offset_of!(Sge, length)), ("ibv_sge.lkey", offset_of!(Sge, lkey))].into();
    let theirs = records(all, "size");
    assert_eq!(theirs.len(), sizes.len());
    for r in theirs {
        assert_eq!(
            sizes.get(r[0].as_str()).copied(),
            Some(num(&r[1]) as usize),
            "sizeof {}",
            r[0]
        );
    }
    let theirs = records(all, "offset");
    assert_eq!(theirs.len(), offsets.len());
    for r in theirs {
        assert_eq!(
            offsets.get(r[0].as_str()).copied(),
            Some(num(&r[1]) as usize),
            "offsetof {}",
            r[0]
        );
    }
}

#[test]
fn ctrl_segments_match_mlx5dv_set_ctrl_seg() {
    let all = reference_or_skip!();
    let mut n = 0;
    for kind in ["ctrl", "ctrlx"] {
        for r in records(all, kind) {
            let [pi, opcode, opmod, qpn, fm, ds, sig, imm] = std::array::from_fn(|i| num(&r[i]));
            let expect: [u8; 16] = arr(&r[8]);
            let seg = CtrlSeg::from_raw(
                pi as u16,
                opcode as u8,
                opmod as u8,
                qpn as u32,
                fm as u8,
                ds as u8,
                sig as u8,
                imm as u32,
            );
            let mut slot = [0xeeu8; 16];
            seg.write(&mut slot);
            assert_eq!(slot, expect, "{kind} {r:?}");

            // The typed constructor gives the same bytes.
            let op = WqeOpcode::from_u8(opcode as u8).expect("known opcode");
            let typed = CtrlSeg::new(
                pi as u16,
                op,
                qpn as u32,
                ds as u8,
                FmCeSe::from_bits_retain(fm as u8),
            )
            .with_opmod(opmod as u8)
            .with_signature(sig as u8)
            .with_imm(imm as u32);
            assert_eq!(typed, seg);

            // And the reader gets the inputs back.
            let v = CtrlSeg::view(&expect);
            assert_eq!(
                (
                    v.wqe_index(),
                    v.opcode(),
                    v.opmod(),
                    v.qpn(),
                    v.ds(),
                    v.fm_ce_se().bits(),
                    v.signature,
                    v.imm()
                ),
                (
                    pi as u16,
                    Some(op),
                    opmod as u8,
                    qpn as u32,
                    ds as u8,
                    fm as u8,
                    sig as u8,
                    imm as u32
                )
            );
            n += 1;
        }
    }
    assert!(n >= 10);
    println!("checked {n} control segments");
}

#[test]
fn data_segments_match_mlx5dv_set_data_seg() {
    let all = reference_or_skip!();
    let mut n = 0;
    for kind in ["data", "datax"] {
        for r in records(all, kind) {
            let (len, lkey, addr) = (num(&r[0]) as u32, num(&r[1]) as u32, num(&r[2]));
            let expect: [u8; 16] = arr(&r[3]);
            let mut slot = [0u8; 16];
            DataSeg::new(len, lkey, addr).write(&mut slot);
            assert_eq!(slot, expect, "{kind} {r:?}");
            data_seg(&Sge::new(addr, len, lkey)).write(&mut slot);
            assert_eq!(slot, expect);
            let v = DataSeg::view(&expect);
            assert_eq!((v.byte_count(), v.lkey(), v.addr()), (len, lkey, addr));
            if lkey == INVALID_LKEY && len == 0 && addr == 0 {
                DataSeg::terminator().write(&mut slot);
                assert_eq!(slot, expect, "receive-list terminator");
            }
            n += 1;
        }
    }
    assert!(n >= 6);
    println!("checked {n} data segments");
}

#[test]
fn datagram_segments_match_mlx5dv_set_dgram_seg() {
    let all = reference_or_skip!();
    let rows = records(all, "dgram");
    assert!(rows.len() >= 3);
    for r in &rows {
        let key = num(&r[0]);
        let [dqp, ext, srsl, flm, rlid] = std::array::from_fn(|i| num(&r[1 + i]));
        let rmac: [u8; 6] = arr(&r[6]);
        let [tclass, hop, grh] = std::array::from_fn(|i| num(&r[7 + i]));
        let rgid: [u8; 16] = arr(&r[10]);
        let expect: [u8; 48] = arr(&r[11]);
        let seg = DatagramSeg::from_raw(
            key,
            dqp as u32,
            ext as u8,
            srsl as u8,
            flm as u8,
            rlid as u16,
            rmac,
            tclass as u8,
            hop as u8,
            grh as u32,
            rgid,
        );
        let mut out = [0u8; 48];
        seg.write(&mut out);
        assert_eq!(out, expect, "{r:?}");

        // A UD row (extended AV, Q_Key in the upper half) via the per-WR path.
        if ext == 1 && key as u32 == 0 {
            let template = DatagramSeg::from_raw(
                0,
                0,
                0,
                srsl as u8,
                flm as u8,
                rlid as u16,
                rmac,
                tclass as u8,
                hop as u8,
                grh as u32,
                rgid,
            );
            DatagramSeg::for_ud(&template, dqp as u32, (key >> 32) as u32).write(&mut out);
            assert_eq!(out, expect, "for_ud {r:?}");
            let v = DatagramSeg::view(&expect);
            assert_eq!(
                (v.qkey(), v.dqpn(), v.is_extended()),
                ((key >> 32) as u32, dqp as u32, true)
            );
        }
    }
    println!("checked {} datagram segments", rows.len());
}

#[test]
fn cqe_views_match_mlx5dv_getters() {
    let all = reference_or_skip!();
    let rows = records(all, "cqe");
    assert!(rows.len() >= 20);
    for r in &rows {
        let raw: [u8; 64] = arr(&r[0]);
        let [owner, opcode, se, format, sop_drop_qpn, wqe_counter, byte_cnt, srqn_uidx, imm, synd, vend, s_wqe] =
            std::array::from_fn(|i| num(&r[1 + i]));
        let c = Cqe64::view(&raw);
        assert_eq!(
            (c.owner(), c.opcode_raw(), c.se(), c.format()),
            (owner as u8, opcode as u8, se as u8, format as u8),
            "{}",
            r[0]
        );
        assert_eq!(c.sop_drop_qpn.get(), sop_drop_qpn as u32);
        assert_eq!(c.qpn(), sop_drop_qpn as u32 & 0xff_ffff);
        assert_eq!(c.send_wqe_opcode_raw(), (sop_drop_qpn >> 24) as u8);
        assert_eq!(c.wqe_counter(), wqe_counter as u16);
        assert_eq!(c.byte_cnt(), byte_cnt as u32);
        assert_eq!(c.srqn_uidx.get(), srqn_uidx as u32);
        assert_eq!(c.srqn_uidx(), srqn_uidx as u32 & 0xff_ffff);
        assert_eq!(c.imm_inval_pkey(), imm as u32);

        let e = c.as_err();
        assert_eq!(
            (e.syndrome_raw(), e.vendor_err(), e.s_wqe_opcode_qpn.get()),
            (synd as u8, vend as u8, s_wqe as u32)
        );
        assert_eq!(
            e.status(),
            Syndrome::from_u8(synd as u8).map_or(WcStatus::GeneralErr, Syndrome::wc_status)
        );
        assert_eq!(
            c.opcode().map(|o| o as u8),
            CqeOpcode::from_nibble(opcode as u8).map(|o| o as u8)
        );

        // Ownership against the rule stated with the header's getters.
        for ncqe in [1u32, 4, 256] {
            for ci in [
                0,
                1,
                ncqe - 1,
                ncqe,
                ncqe + 1,
                2 * ncqe - 1,
                2 * ncqe,
                0x00ff_ffff,
                u32::MAX,
            ] {
                let expect = opcode != 0xf && owner == u64::from(ci & ncqe != 0);
                assert_eq!(
                    is_sw_owned(c.op_own, ci, ncqe),
                    expect,
                    "op_own {:#x} ci {ci} ncqe {ncqe}",
                    c.op_own
                );
            }
        }
    }
    println!("checked {} CQEs", rows.len());
}

/// Whole WQEs composed from mlx5dv.h setters in libmlx5's layout, against
/// `write_send_wqe`.
#[test]
fn send_wqes_match_setter_composition() {
    let all = reference_or_skip!();
    let rows = records(all, "wqe");
    assert!(rows.len() >= 5);
    // The fixed address vector the C program uses for its UD rows.
    let mut rgid = [0u8; 16];
    rgid[10] = 0xff;
    rgid[11] = 0xff;
    rgid[12] = 127;
    rgid[15] = 3;
    let av = DatagramSeg::from_raw(
        0,
        0,
        0,
        0x20,
        0,
        0xc123,
        [0x02, 0, 0, 0, 0, 0x03],
        0x08,
        64,
        0x0010_0000,
        rgid,
    );
    for r in &rows {
        let kind = r[0].as_str();
        let [wqe_cnt, pi, qpn, fm, n] = std::array::from_fn(|i| num(&r[1 + i]));
        let sges: Vec<Sge> = (0..n as usize)
            .map(|k| {
                Sge::new(
                    num(&r[6 + 3 * k + 2]),
                    num(&r[6 + 3 * k]) as u32,
                    num(&r[6 + 3 * k + 1]) as u32,
                )
            })
            .collect();
        let expect = bytes(&r[6 + 3 * n as usize]);
        assert_eq!(expect.len(), wqe_cnt as usize * 64);

        let mut wr = SendWr::new(SendOp::Send, Payload::Sgl(&sges))
            .with_flags(FmCeSe::from_bits_retain(fm as u8));
        if kind == "ud" {
            wr = wr.to_ud(UdDest {
                av: &av,
                remote_qpn: 0x789,
                qkey: 0x1111_1111,
            });
        }
        let mut ring = vec![0xeeu8; expect.len()];
        let mut sq = SqRing::new(&mut ring).unwrap();
        let info = write_send_wqe(&mut sq, pi as u16, qpn as u32, &wr).unwrap();
        assert_eq!(ring, expect, "{kind} pi {pi:#x}");
        assert_eq!(
            info.ds as usize,
            1 + if kind == "ud" { 3 } else { 0 } + n as usize
        );
    }
    println!("checked {} whole WQEs", rows.len());
}

#[test]
fn status_names_match_ibv_wc_status_str() {
    let all = reference_or_skip!();
    let rows: Vec<&Vec<String>> = all.iter().filter(|r| r[0] == "status").collect();
    if rows.is_empty() {
        testkit::skip(testkit::Need::Tool, "libibverbs did not link; ibv_wc_status_str not compared (apt-get install libibverbs-dev)");
        return;
    }
    assert_eq!(rows.len(), WcStatus::ALL.len());
    for r in rows {
        let n = num(&r[1]) as u32;
        let text = r[2..].join(" ");
        assert_eq!(
            WcStatus::from_u32(n).expect("known status").to_string(),
            text,
            "status {n}"
        );
    }
}
