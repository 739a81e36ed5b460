//! Stock libmlx5's DevX on softhca: `tests/c/devx_rc.c`, built here with
//! `cc ... -libverbs -lmlx5` and run under libdoorbell_preload.so, opens the device
//! with MLX5DV_CONTEXT_FLAGS_DEVX, queries the general capability page through
//! mlx5dv_devx_general_cmd, makes a CQ and an RC QP with mlx5dv_devx_obj_create over
//! mlx5dv_devx_umem_reg memory and a mlx5dv_devx_alloc_uar page, moves the QP to RTS
//! with PRM commands, writes its WQEs and polls its CQEs itself against a verbs QP of
//! the same device (SEND both ways, RDMA WRITE, data compared), and queries the verbs
//! QP with mlx5dv_devx_qp_query, and queries the DevX QP asynchronously
//! (mlx5dv_devx_obj_query_async). Every check is the C program's "CHECK name PASS" line.
//!
//! SKIP when cc, the headers or the libraries are missing.

#[path = "../../softhca/preload/tests/common/mod.rs"]
mod common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Every check the program makes, in order.
const CHECKS: &[&str] = &[
    "mlx5dv_is_supported", "open_devx", "query_hca_cap", "caps_match_query_device", "devx_cq_qp_created",
    "devx_send_cqe", "verbs_recv", "send_data", "devx_recv_cqe", "recv_data", "verbs_send", "devx_write_cqe",
    "write_data", "qp_query_verbs_qp", "obj_query_devx_qp", "obj_query_async", "umem_busy", "destroy_qp", "destroy_cq", "umem_dereg",
];

fn build() -> Option<PathBuf> {
    build_with("devx_rc", &[])
}

/// The program built with extra `-D` flags, as `name`.
fn build_with(name: &str, defines: &[&str]) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let src = dir.join("tests/c/devx_rc.c");
    // rc_pair.h: the CHECK-line reporting and the verbs RC connect of the other stock tests.
    let inc = dir.join("../softhca/preload/tests/c");
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("libmlx5_devx");
    std::fs::create_dir_all(&out_dir).expect("temp dir");
    let exe = out_dir.join(name);
    let mut args: Vec<std::ffi::OsString> =
        ["-std=gnu11", "-O1", "-Wall", "-Werror", "-Wno-unused-function"].iter().map(Into::into).collect();
    args.extend(defines.iter().map(Into::into));
    args.extend(["-I".into(), inc.clone().into_os_string(), src.clone().into_os_string(), "-o".into(),
                 exe.clone().into_os_string(), "-libverbs".into(), "-lmlx5".into()]);
    testkit::cc(&src, args)?;
    Some(exe)
}

#[test]
fn stock_libmlx5_devx_rc_qp_against_a_verbs_qp() {
    let Some(exe) = build() else { return };
    let done = common::spawn(common::stock(&exe, &[]), "devx_rc").wait_until(Instant::now() + Duration::from_secs(120));
    let passed: Vec<&str> = done.stdout.lines().filter_map(|l| l.strip_prefix("CHECK ")?.strip_suffix(" PASS")).collect();
    let failed: Vec<&str> = done.stdout.lines().filter(|l| l.starts_with("CHECK ") && !l.ends_with(" PASS")).collect();
    assert!(failed.is_empty() && done.ok(), "failed checks {failed:?}\n{}", done.report());
    assert_eq!(passed, CHECKS, "{}", done.report());
}

/// (attribute id, optional) of each attribute of a built call, from its bytes
/// (`ib_uverbs_attr`: u16 attr_id @0, u16 flags @4, MANDATORY = 1; after the 24-byte header).
fn shape(bytes: &[u8]) -> Vec<(u16, bool)> {
    let n = u16::from_ne_bytes([bytes[6], bytes[7]]) as usize;
    (0..n)
        .map(|i| {
            let o = 24 + 16 * i;
            (u16::from_ne_bytes([bytes[o], bytes[o + 1]]), u16::from_ne_bytes([bytes[o + 4], bytes[o + 5]]) & 1 == 0)
        })
        .collect()
}

/// An attribute of a traced call by the name the preload's trace gives it (the uapi
/// header's name without the method prefix) or its hex id (older traces).
fn attr_id(name: &str) -> u16 {
    use uverbs::sys::ids::mlx5 as m;
    if let Some(h) = name.strip_prefix("0x") {
        return u16::from_str_radix(h, 16).expect("a hex attribute id");
    }
    match name {
        // Every method's first attribute (the handle, or CMD_IN/USER_VEC) is 0x1000.
        "HANDLE" | "CMD_IN" | "USER_VEC" | "USER_IDX" => 0x1000,
        "DEV_IDX" => m::ATTR_DEVX_QUERY_UAR_DEV_IDX,
        "OUT_LEN" => m::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN,
        "WR_ID" => m::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID,
        "FD" => m::ATTR_DEVX_OBJ_QUERY_ASYNC_FD,
        "DEV_EQN" => m::ATTR_DEVX_QUERY_EQN_DEV_EQN,
        "ADDR" => m::ATTR_DEVX_UMEM_REG_ADDR,
        "LEN" => m::ATTR_DEVX_UMEM_REG_LEN,
        "ACCESS" => m::ATTR_DEVX_UMEM_REG_ACCESS,
        "OUT_ID" => m::ATTR_DEVX_UMEM_REG_OUT_ID,
        "PGSZ_BITMAP" => m::ATTR_DEVX_UMEM_REG_PGSZ_BITMAP,
        other => panic!("attribute {other:?} unknown to this test"),
    }
}

/// The attributes of the first traced ioctl of `method` (the preload's trace line:
/// `ioctl fd=N OBJ.METHOD [NAME=v, NAME out N B, NAME? ...]`): (id, optional), or None.
/// CMD_IN/CMD_OUT are 0x1000/0x1001 for DEVX_OTHER and 0x1001/0x1002 after a handle.
fn traced(stderr: &str, methods: &[&str]) -> Option<Vec<(u16, bool)>> {
    let line = stderr.lines().find(|l| methods.iter().any(|m| l.contains(&format!(" {m} ["))))?;
    let list = &line[line.find(" [")? + 2..line.find("] driver")?];
    let has_handle = list.split(", ").any(|i| i.starts_with("HANDLE"));
    Some(list.split(", ").map(|item| {
        let end = item.find(['=', ' ', '?']).unwrap_or(item.len());
        let name = &item[..end];
        let id = match (name, has_handle) {
            ("CMD_IN", true) => 0x1001,
            ("CMD_OUT", true) => 0x1002,
            ("CMD_OUT", false) => 0x1001,
            _ => attr_id(name),
        };
        (id, item[end..].starts_with('?'))
    }).collect())
}

/// What stock libmlx5 sends for mlx5dv_devx_umem_reg/dereg, mlx5dv_devx_query_eqn,
/// mlx5dv_devx_obj_create/modify/query/destroy, mlx5dv_devx_general_cmd,
/// mlx5dv_devx_create_cmd_comp and mlx5dv_devx_obj_query_async (seen through the preload's trace of the
/// C program) has the attributes, in the order and with the optional flags, that
/// doorbell's uverbs::cmd::devx builds.
#[test]
fn devx_ioctls_as_stock_libmlx5_sends_them() {
    let Some(exe) = build() else { return };
    let mut cmd = common::stock(&exe, &[]);
    cmd.env("DOORBELL_PRELOAD_TRACE", "1");
    let done = common::spawn(cmd, "devx_rc (traced)").wait_until(Instant::now() + Duration::from_secs(120));
    let mut id = 0u32;
    let a = uverbs::cmd::devx::UmemArgs { addr: 0x1000, len: 0x1000, access: 1, pgsz_bitmap: uverbs::cmd::devx::UMEM_PGSZ_ANY };
    let (ours, _) = uverbs::cmd::devx::umem_reg_call(&a, &mut id);
    let reg = ["MLX5_DEVX_UMEM.METHOD_0x1000", "MLX5_DEVX_UMEM.DEVX_UMEM_REG"];
    let theirs = traced(&done.stderr, &reg).unwrap_or_else(|| panic!("no UMEM_REG traced\n{}", done.report()));
    assert_eq!(shape(ours.as_bytes()), theirs, "UMEM_REG");
    let line = done.stderr.lines().find(|l| reg.iter().any(|m| l.contains(m))).unwrap();
    assert!(line.contains("?=0xfffffffffffff000"), "libmlx5's default page-size bitmap: {line}");
    let mut eqn = 0u32;
    let ours = uverbs::cmd::devx::query_eqn_call(0, &mut eqn);
    let theirs = traced(&done.stderr, &["MLX5_DEVX.DEVX_QUERY_EQN"]).expect("QUERY_EQN traced");
    assert_eq!(shape(ours.as_bytes()), theirs, "QUERY_EQN");

    // The DEVX_OBJ methods (create 0x1000, destroy 0x1001, modify 0x1002, query 0x1003)
    // and UMEM_DEREG (0x1001).
    use uverbs::cmd::devx as c;
    let (inb, mut out) = ([0u8; 16], [0u8; 16]);
    let (create, _) = c::obj_create_call(&inb, &mut out);
    let mut out2 = [0u8; 16];
    let mut out3 = [0u8; 16];
    let mut out4 = [0u8; 16];
    for (method, ours) in [
        (["MLX5_DEVX_OBJ.METHOD_0x1000", "MLX5_DEVX_OBJ.DEVX_OBJ_CREATE"], shape(create.as_bytes())),
        (["MLX5_DEVX_OBJ.METHOD_0x1001", "MLX5_DEVX_OBJ.DEVX_OBJ_DESTROY"], shape(c::obj_destroy_call(1).as_bytes())),
        (["MLX5_DEVX_OBJ.METHOD_0x1002", "MLX5_DEVX_OBJ.DEVX_OBJ_MODIFY"], shape(c::obj_modify_call(1, &inb, &mut out2).as_bytes())),
        (["MLX5_DEVX_OBJ.METHOD_0x1003", "MLX5_DEVX_OBJ.DEVX_OBJ_QUERY"], shape(c::obj_query_call(1, &inb, &mut out3).as_bytes())),
        (["MLX5_DEVX_UMEM.METHOD_0x1001", "MLX5_DEVX_UMEM.DEVX_UMEM_DEREG"], shape(c::umem_dereg_call(1).as_bytes())),
        (["MLX5_DEVX.DEVX_OTHER", "MLX5_DEVX.DEVX_OTHER"], shape(c::general_cmd_call(&inb, &mut out4).as_bytes())),
        (["MLX5_DEVX_OBJ.METHOD_0x1004", "MLX5_DEVX_OBJ.DEVX_OBJ_ASYNC_QUERY"],
         shape(c::obj_async_query_call(1, &inb, 0x110, 0x1234, 3).as_bytes())),
        (["MLX5_DEVX_ASYNC_CMD_FD.METHOD_0x1000", "MLX5_DEVX_ASYNC_CMD_FD.ALLOC"], shape(c::async_cmd_fd_alloc_call().0.as_bytes())),
    ] {
        let theirs = traced(&done.stderr, &method).unwrap_or_else(|| panic!("no {} traced\n{}", method[1], done.report()));
        assert_eq!(ours, theirs, "{}", method[1]);
    }
}

/// With static UARs (the preload's DOORBELL_PRELOAD_STATIC_UARS: tot_bfregs > 0, no
/// dynamic UAR objects) stock libmlx5 makes its DevX UAR by mapping a dynamic bfreg page
/// (mmap command 6 ALLOC_WC, index 0) and asking DEVX_QUERY_UAR for its device index
/// (user index 0): the path `devx::Uar` takes there too. Every check passes that way.
#[test]
fn stock_libmlx5_devx_on_static_uars() {
    let Some(exe) = build_with("devx_rc_bf", &["-DUAR_TYPE=MLX5DV_UAR_ALLOC_TYPE_BF"]) else { return };
    let mut cmd = common::stock(&exe, &[]);
    cmd.env("DOORBELL_PRELOAD_STATIC_UARS", "1").env("DOORBELL_PRELOAD_TRACE", "1");
    let done = common::spawn(cmd, "devx_rc_bf (static UARs)").wait_until(Instant::now() + Duration::from_secs(120));
    let failed: Vec<&str> = done.stdout.lines().filter(|l| l.starts_with("CHECK ") && !l.ends_with(" PASS")).collect();
    assert!(failed.is_empty() && done.ok(), "failed checks {failed:?}\n{}", done.report());
    let map = done.stderr.lines().position(|l| l.contains("(cmd 6 ALLOC_WC, index 0)")).expect("ALLOC_WC mmap traced");
    let q = done.stderr.lines().position(|l| l.contains("DEVX_QUERY_UAR [USER_IDX=0x0,")).expect("QUERY_UAR traced");
    assert!(map < q, "the page is mapped before its index is asked for");
    // doorbell's Uar on such a context maps the same offset and asks for the same index.
    let off = uverbs::sys::mlx5::mmap_pgoff(uverbs::sys::mlx5::MMAP_ALLOC_WC, 0) * provider::buf::page_size() as u64;
    assert!(done.stderr.contains(&format!("offset={off:#x} (cmd 6 ALLOC_WC")), "offset {off:#x}");
    let mut dev_idx = 0u32;
    let ours = uverbs::cmd::devx::query_uar_call(0, &mut dev_idx);
    assert_eq!(shape(ours.as_bytes()), traced(&done.stderr, &["MLX5_DEVX.DEVX_QUERY_UAR"]).expect("QUERY_UAR traced"));
}
