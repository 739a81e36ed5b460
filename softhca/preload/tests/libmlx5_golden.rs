//! Golden bytes from the reference provider: the send WQEs the installed libmlx5 writes
//! for `ibv_post_send`, rebuilt with doorbell's `provider::wqe::write_send_wqe` from the
//! same inputs (QPN, producer index, opcode, flags, addresses, keys, immediate, atomic
//! operands, inline bytes), compared byte for byte.
//!
//! `tests/c/libmlx5_wqe_dump.c` (built here with `cc ... -libverbs -lmlx5`) runs on
//! softhca under libdoorbell_preload.so, connects one RC QP to itself, posts every
//! opcode doorbell supports (SEND, SEND_WITH_IMM, RDMA_WRITE, RDMA_WRITE_WITH_IMM,
//! RDMA_READ, ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD) with scatter/gather lists (one
//! of them with an empty entry), inline data (one and two entries), signaled and
//! unsignaled, solicited, fenced, WQEs of two basic blocks, and WQEs that wrap around
//! the end of the send queue (data segments and inline bytes continuing at its start),
//! and prints each WQE as libmlx5 left it in the queue (found with
//! `mlx5dv_init_obj(MLX5DV_OBJ_QP)`) right after posting, with its inputs and the
//! doorbell record's SQ counter. Before each post it fills the WQE's basic blocks with
//! 0xa5, so bytes libmlx5 does not write are visible as 0xa5.
//!
//! Known differences, masked here and nowhere else (each masked byte must be 0xa5 in
//! libmlx5's WQE, i.e. really left untouched by it, and 0 in doorbell's):
//! * **inline padding**: the bytes after the last inline byte up to the next 16-byte
//!   boundary. libmlx5 copies the data and leaves the rest of the last 16-byte unit as
//!   it was; doorbell zeroes it. The device reads only `byte_count` bytes.
//! * **fetch-and-add's compare field** (bytes 8..16 of the atomic segment, WQE bytes
//!   40..48): libmlx5 writes only the add operand; doorbell writes zero. The device
//!   ignores the field for fetch-and-add.
//!
//! Only the WQE's own `ds x 16` bytes are compared (the rest of its last basic block is
//! not part of it); doorbell must not write anything outside them. Requests of one basic
//! block are also built with `write_small_send_wqe`, the post path's fast lane, which
//! must give the same bytes.
//!
//! SKIP when cc, the headers or the libraries are missing.

mod common;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use provider::opcode::FmCeSe;
use provider::wqe::{write_send_wqe, write_small_send_wqe, Payload, SendOp, SendWr, Sge, SqRing};

/// The byte libmlx5's WQE blocks are filled with before each post.
const FILL_C: u8 = 0xa5;
/// The byte doorbell's ring is filled with (different, so an unwritten byte on either
/// side shows up as a difference).
const FILL_RUST: u8 = 0x5a;

/// Builds the C program; None (after a SKIP line) when the toolchain or rdma-core's
/// development files are missing.
fn build() -> Option<PathBuf> {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/libmlx5_wqe_dump.c");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("libmlx5_golden");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let exe = dir.join("libmlx5_wqe_dump");
    testkit::cc(&src, [
        std::ffi::OsStr::new("-std=gnu11"), "-O1".as_ref(), "-Wall".as_ref(), "-Werror".as_ref(), src.as_os_str(),
        "-o".as_ref(), exe.as_os_str(), "-libverbs".as_ref(), "-lmlx5".as_ref(),
    ])?;
    Some(exe)
}

fn hex(s: &str) -> Vec<u8> {
    assert!(s.len() & 1 == 0, "odd hex {s:?}");
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn h64(s: &str) -> u64 {
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("hex {s:?}: {e}"))
}

/// One `key=value` record.
struct Rec(HashMap<String, String>);

impl Rec {
    fn parse(line: &str) -> Rec {
        Rec(line.split_whitespace().skip(1).filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.into(), v.into())).collect())
    }
    fn s(&self, k: &str) -> &str {
        self.0.get(k).unwrap_or_else(|| panic!("field {k} missing"))
    }
    fn n(&self, k: &str) -> u64 {
        self.s(k).parse().unwrap_or_else(|e| panic!("{k}={}: {e}", self.s(k)))
    }
    fn x(&self, k: &str) -> u64 {
        h64(self.s(k))
    }
    fn flag(&self, k: &str) -> bool {
        self.n(k) != 0
    }
}

/// The C program's case rebuilt with doorbell's builder: libmlx5's bytes, doorbell's
/// bytes of the same length, the offsets of the known differences, and whether the post
/// path's fast lane (`write_small_send_wqe`) took the request too (its bytes are then
/// checked equal to the generic builder's).
struct Built {
    c: Vec<u8>,
    rust: Vec<u8>,
    mask: Vec<usize>,
    fast: bool,
}

fn rebuild(r: &Rec, wqe_cnt: u32) -> Built {
    let name = r.s("name");
    let sges: Vec<Sge> = match r.s("sges") {
        "-" => Vec::new(),
        list => list
            .split(',')
            .map(|e| {
                let v: Vec<&str> = e.split(':').collect();
                Sge::new(h64(v[0]), v[1].parse().unwrap(), u32::from_str_radix(v[2], 16).unwrap())
            })
            .collect(),
    };
    let data: Vec<Vec<u8>> = match r.s("data") {
        "-" => Vec::new(),
        d => d.split(',').map(|c| if c == "-" { Vec::new() } else { hex(c) }).collect(),
    };
    let (raddr, rkey) = (r.x("raddr"), r.x("rkey") as u32);
    let op = match r.s("op") {
        "SEND" => SendOp::Send,
        "SEND_IMM" => SendOp::SendImm { imm: r.x("imm") as u32 },
        "WRITE" => SendOp::RdmaWrite { raddr, rkey },
        "WRITE_IMM" => SendOp::RdmaWriteImm { raddr, rkey, imm: r.x("imm") as u32 },
        "READ" => SendOp::RdmaRead { raddr, rkey },
        "CAS" => SendOp::CompareSwap { raddr, rkey, compare: r.x("compare"), swap: r.x("swap") },
        "FAA" => SendOp::FetchAdd { raddr, rkey, add: r.x("add") },
        other => panic!("{name}: unknown op {other}"),
    };
    let chunks: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
    let inline = r.flag("inline") && !sges.is_empty();
    let payload = if inline { Payload::Inline(&chunks) } else { Payload::Sgl(&sges) };
    let mut flags = FmCeSe::empty();
    if r.flag("signaled") {
        flags |= FmCeSe::CQ_UPDATE;
    }
    if r.flag("solicited") {
        flags |= FmCeSe::SOLICITED;
    }
    if r.flag("fence") {
        flags |= FmCeSe::FENCE;
    }
    let wr = SendWr::new(op, payload).with_flags(flags);

    let pi = r.n("pi") as u16;
    let qpn = r.n("qpn") as u32;
    let mut ring = vec![FILL_RUST; wqe_cnt as usize * 64];
    let info = write_send_wqe(&mut SqRing::new(&mut ring).unwrap(), pi, qpn, &wr)
        .unwrap_or_else(|e| panic!("{name}: doorbell refused the WQE: {e}"));
    let c = hex(r.s("bytes"));
    assert_eq!(c.len(), info.bytes() as usize, "{name}: DS count (libmlx5 {} x 16, doorbell {})", c.len() / 16, info.ds);
    assert_eq!(r.n("db") as u16, pi.wrapping_add(info.wqebb_count), "{name}: SQ counter in the doorbell record after the post");

    // doorbell's WQE in ring order from the control segment, wrapping like libmlx5's dump;
    // everything else in the ring must still be the fill.
    let len = ring.len();
    let start = (pi as usize * 64) % len;
    let mut rust = Vec::with_capacity(c.len());
    for i in 0..c.len() {
        let at = (start + i) % len;
        rust.push(ring[at]);
        ring[at] = FILL_RUST;
    }
    assert!(ring.iter().all(|&b| b == FILL_RUST), "{name}: doorbell wrote outside its WQE");

    // The post path's fast lane, where it applies: the same bytes, nothing past them.
    let mut fast = false;
    let mut slot = [FILL_RUST; 64];
    if let Some(ds) = write_small_send_wqe(&mut slot, pi, qpn, &wr) {
        assert_eq!(ds, info.ds, "{name}: fast lane DS count");
        assert_eq!(slot[..rust.len()], rust[..], "{name}: fast lane bytes");
        assert!(slot[rust.len()..].iter().all(|&b| b == FILL_RUST), "{name}: fast lane wrote past its WQE");
        fast = true;
    }

    // The known differences, computed from the inputs.
    let mut mask = Vec::new();
    if inline {
        let hdr = match op {
            SendOp::Send | SendOp::SendImm { .. } => 16,
            _ => 32, // after the remote-address segment
        };
        let end = hdr + 4 + chunks.iter().map(|c| c.len()).sum::<usize>();
        mask.extend(end..end.next_multiple_of(16));
    }
    if let SendOp::FetchAdd { .. } = op {
        mask.extend(40..48);
    }
    Built { c, rust, mask, fast }
}

#[test]
fn libmlx5_send_wqes_match_doorbells() {
    let Some(exe) = build() else { return };
    let Some(_) = common::tool("ibv_devices") else { return };
    let out = Command::new(&exe)
        .env("LD_PRELOAD", common::preload())
        .env_remove("DOORBELL_SOFTHCA_ADDR")
        .env_remove("DOORBELL_PRELOAD_NO_IOCTL")
        .env_remove("DOORBELL_PRELOAD_STATIC_UARS")
        .env_remove("DOORBELL_PRELOAD_TRACE")
        .output()
        .expect("run libmlx5_wqe_dump");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "libmlx5_wqe_dump failed ({}):\n{text}\n{}", out.status, String::from_utf8_lossy(&out.stderr));

    let mut lines = text.lines();
    let qp = Rec::parse(lines.next().expect("qp line"));
    let wqe_cnt = qp.n("wqe_cnt") as u32;
    assert_eq!(qp.n("stride"), 64);
    assert_eq!(qp.x("fill") as u8, FILL_C);

    let mut names = Vec::new();
    let mut masked_total = 0;
    let mut wrapped = 0;
    let mut fast = 0;
    let mut failures = String::new();
    for line in lines.filter(|l| l.starts_with("case ")) {
        let r = Rec::parse(line);
        let name = r.s("name").to_owned();
        let b = rebuild(&r, wqe_cnt);
        if (r.n("pi") as u32 % wqe_cnt) * 64 + b.c.len() as u32 > wqe_cnt * 64 {
            wrapped += 1;
        }
        for i in 0..b.c.len() {
            let ok = if b.mask.contains(&i) {
                // libmlx5 really left it alone, doorbell zeroed it.
                b.c[i] == FILL_C && b.rust[i] == 0
            } else {
                b.c[i] == b.rust[i]
            };
            if !ok {
                failures += &format!(
                    "{name}: byte {i} (segment {}, +{}): libmlx5 {:02x}, doorbell {:02x}{}\n  libmlx5  {}\n  doorbell {}\n",
                    i / 16,
                    i % 16,
                    b.c[i],
                    b.rust[i],
                    if b.mask.contains(&i) { " (masked: expected libmlx5 a5, doorbell 00)" } else { "" },
                    hexs(&b.c),
                    hexs(&b.rust)
                );
                break;
            }
        }
        masked_total += b.mask.len();
        fast += b.fast as usize;
        names.push(name);
    }
    assert!(failures.is_empty(), "WQE bytes differ:\n{failures}");
    for op in ["op=SEND ", "op=SEND_IMM ", "op=WRITE ", "op=WRITE_IMM ", "op=READ ", "op=CAS ", "op=FAA "] {
        assert!(text.contains(op), "no case with {op}");
    }
    assert!(wrapped >= 3, "cases that wrap around the end of the SQ: {wrapped}");
    assert!(names.len() >= 21, "{names:?}");
    // Every one-WQEBB case with one non-empty gather entry or inline chunk (8 here);
    // payload-less requests (send_no_sge) are the generic path's.
    assert!(fast >= 8, "cases the post path's fast lane takes: {fast}");
    eprintln!(
        "{} WQEs identical to libmlx5's ({wrapped} wrapping, {masked_total} masked bytes; {fast} also through the fast lane): {}",
        names.len(),
        names.join(" ")
    );
}

fn hexs(b: &[u8]) -> String {
    b.chunks(16).map(|c| c.iter().map(|x| format!("{x:02x}")).collect::<String>()).collect::<Vec<_>>().join(" ")
}
