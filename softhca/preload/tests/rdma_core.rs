//! Stock rdma-core programs on softhca through libdoorbell_preload.so.
//!
//! Each test runs an unmodified binary (ibv_devices, ibv_devinfo, ibv_rc_pingpong) with
//! `LD_PRELOAD` set, once through the ioctl interface (what libibverbs uses on a current
//! kernel) and, where it matters, with every ioctl refused (`DOORBELL_PRELOAD_NO_IOCTL=1`)
//! so that libibverbs falls back to write() commands.
//!
//! The programs come from Debian's rdma-core packages (`apt-get install rdma-core
//! ibverbs-utils ibverbs-providers perftest`); a test whose program is missing prints
//! SKIP and passes. Every test runs its programs as separate processes, each with its own
//! softhca instance on its own 127.0.0.N, so the tests may run in parallel.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

mod common;

use common::{preload, tool};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    /// libibverbs' default: ioctl, legacy commands through INVOKE_WRITE.
    Ioctl,
    /// Every ioctl is ENOTTY: legacy write() commands.
    WriteOnly,
}

fn command(prog: &Path, args: &[&str], mode: Mode, trace: bool) -> Command {
    let mut c = Command::new(prog);
    c.args(args)
        .env("LD_PRELOAD", preload())
        .env_remove("DOORBELL_SOFTHCA_ADDR")
        .env_remove("DOORBELL_PRELOAD_STATIC_UARS")
        .env_remove("RUST_LOG");
    match mode {
        Mode::Ioctl => c.env_remove("DOORBELL_PRELOAD_NO_IOCTL"),
        Mode::WriteOnly => c.env("DOORBELL_PRELOAD_NO_IOCTL", "1"),
    };
    if trace {
        c.env("DOORBELL_PRELOAD_TRACE", "1");
    } else {
        c.env_remove("DOORBELL_PRELOAD_TRACE");
    }
    c
}

fn run(prog: &Path, args: &[&str], mode: Mode, trace: bool) -> (Output, String, String) {
    let out = command(prog, args, mode, trace).output().expect("run program");
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, so, se)
}

fn assert_contains(text: &str, needle: &str, what: &str) {
    assert!(text.contains(needle), "{what}: expected {needle:?} in:\n{text}");
}

/// `ibv_devices` lists softhca0 with its node GUID (Mellanox OUI, 03:00, then the last
/// three bytes of the instance's address 127.0.0.N).
#[test]
fn ibv_devices_lists_softhca0() {
    let Some(p) = tool("ibv_devices") else { return };
    let (out, so, se) = run(&p, &[], Mode::Ioctl, false);
    assert!(out.status.success(), "ibv_devices failed: {se}\n{so}");
    let line = so.lines().find(|l| l.contains("softhca0")).unwrap_or_else(|| panic!("softhca0 not listed:\n{so}"));
    let guid = line.split_whitespace().nth(1).expect("GUID column");
    assert_eq!(guid.len(), 16, "{line}");
    assert!(guid.starts_with("0002c9030000"), "GUID {guid} should be 0002c9030000xxxx (127.0.0.N)");
    assert_ne!(&guid[12..], "0000");
}

/// What `ibv_devinfo` must say in both modes.
fn check_devinfo(mode: Mode) {
    let Some(p) = tool("ibv_devinfo") else { return };
    let (out, so, se) = run(&p, &[], mode, false);
    assert!(out.status.success(), "{mode:?}: ibv_devinfo failed ({:?}): {se}\n{so}", out.status);
    for needle in ["hca_id:\tsofthca0", "transport:\t\t\tInfiniBand (0)", "fw_ver:\t\t\t\t16.35.1012",
                   "node_guid:\t\t\t0002:c903:0000:", "vendor_id:\t\t\t0x02c9", "vendor_part_id:\t\t\t4119",
                   "board_id:\t\t\tMT_0000000010", "phys_port_cnt:\t\t\t1", "state:\t\t\tPORT_ACTIVE (4)",
                   "active_mtu:\t\t4096 (5)", "link_layer:\t\tEthernet"] {
        assert_contains(&so, needle, &format!("{mode:?} ibv_devinfo"));
    }

    let (out, so, se) = run(&p, &["-v"], mode, false);
    assert!(out.status.success(), "{mode:?}: ibv_devinfo -v failed ({:?}): {se}\n{so}", out.status);
    for needle in ["max_qp:\t\t\t\t262144", "atomic_cap:\t\t\tATOMIC_HCA (1)", "num_comp_vectors:",
                   "gid_tbl_len:\t\t256", "pkey_tbl_len:\t\t1", "port_cap_flags:\t\t0x04010000",
                   "GID[  0]:\t\tfe80::202:c9ff:fe00:", "GID[  1]:\t\t::ffff:127.0.0.", ", RoCE v2"] {
        assert_contains(&so, needle, &format!("{mode:?} ibv_devinfo -v"));
    }
    // RoCE v2 rows only, as rxe's table (softhca sends nothing else).
    assert!(!so.contains("RoCE v1"), "{mode:?}: a RoCE v1 row:\n{so}");
    assert_eq!(so.matches("GID[").count(), 2, "{mode:?}: two filled GID rows:\n{so}");
}

#[test]
fn ibv_devinfo_through_ioctl() {
    check_devinfo(Mode::Ioctl);
}

#[test]
fn ibv_devinfo_through_write() {
    check_devinfo(Mode::WriteOnly);
}

/// The trace shows libibverbs/libmlx5's open sequence, and which interface carried it.
#[test]
fn trace_shows_the_path_taken() {
    let Some(p) = tool("ibv_devinfo") else { return };
    let (out, _, se) = run(&p, &[], Mode::Ioctl, true);
    assert!(out.status.success(), "{se}");
    for needle in ["socket(AF_NETLINK, NETLINK_RDMA) -> EPROTONOSUPPORT", "open /dev/infiniband/uverbs0",
                   "INVOKE_WRITE(QUERY_DEVICE) [WRITE_CMD only: the has-INVOKE_WRITE probe] driver=1 -> ENOSPC", "DEVICE.GET_CONTEXT",
                   "NUM_COMP_VECTORS=", "MLX5_UAR.UAR_OBJ_ALLOC", "ASYNC_EVENT.ALLOC [FD_HANDLE new] driver=1 -> ok",
                   "INVOKE_WRITE(EX_QUERY_DEVICE)", "DEVICE.QUERY_PORT", "close uverbs fd"] {
        assert_contains(&se, needle, "ioctl trace");
    }
    assert!(!se.contains("write fd="), "ioctl mode sends no write():\n{se}");

    let (out, _, se) = run(&p, &[], Mode::WriteOnly, true);
    assert!(out.status.success(), "{se}");
    for needle in ["INVOKE_WRITE(QUERY_DEVICE) [WRITE_CMD only: the has-INVOKE_WRITE probe] driver=1 -> ENOTTY", "write fd=", "GET_CONTEXT len=48",
                   "QUERY_PORT", "EX_QUERY_DEVICE", "(cmd 0 REGULAR_PAGE (static UAR), index 0) -> 0x"] {
        assert_contains(&se, needle, "write-only trace");
    }
    assert!(!se.contains("-> ok"), "no ioctl may succeed in write-only mode:\n{se}");
}

/// The char device looks right to tools that do not use libibverbs (coreutils `stat`
/// uses statx), and read() fails like on the kernel's uverbs file.
#[test]
fn char_device_node() {
    let (Some(stat), Some(bash)) = (tool("stat"), tool("bash")) else { return };
    let (out, so, se) = run(&stat, &["-L", "-c", "%F %t %T %a", "/dev/infiniband/uverbs0"], Mode::Ioctl, false);
    assert!(out.status.success(), "{se}");
    assert_eq!(so.trim(), "character special file e7 c0 666", "231:192 in hex");
    // open, dup (exec 4>&3), close the original, read through the dup (bash's read
    // builtin, in this process: the fd table does not survive exec), close.
    let script = "exec 3<>/dev/infiniband/uverbs0 || exit 10; exec 4>&3 || exit 11; exec 3>&-; \
                  if read -r x <&4; then exit 12; fi; exec 4>&-; echo done";
    let (out, so, se) = run(&bash, &["-c", script], Mode::Ioctl, false);
    assert!(out.status.success(), "{:?}: {so}{se}", out.status);
    assert_contains(&se, "Invalid argument", "read() of a uverbs fd");
    assert_contains(&so, "done", "bash");
}

/// Lines of a trace that report a kernel call's result.
fn calls(trace: &str) -> Vec<&str> {
    trace.lines().filter(|l| l.contains("ioctl fd=") || l.contains("write fd=") || l.contains("mmap fd=")).collect()
}

/// `ibv_rc_pingpong` server and client, two processes, RoCE v2 GID 1 (::ffff:127.0.0.N),
/// with the kernel-call trace on: both sides must set up the connection (PD, MR, CQ, QP,
/// INIT -> RTR -> RTS, QPN/GID exchange), move the data (`-c`: ibv_rc_pingpong checks
/// the received pages) and exit 0. A side that hangs is killed at the deadline and the
/// test fails. (More ibv_rc_pingpong and perftest runs: tests/stock_traffic.rs.)
fn pingpong(mode: Mode) {
    let Some(p) = tool("ibv_rc_pingpong") else { return };
    let port = common::free_port();
    let ps = port.to_string();
    let args = ["-d", "softhca0", "-g", "1", "-n", "10", "-c", "-p", ps.as_str()];
    // stdbuf: pingpong's printf output is block-buffered into a pipe and would be lost
    // if the process had to be killed.
    let cmd = |extra: Option<&str>| {
        let mut a: Vec<&str> = args.to_vec();
        a.extend(extra);
        match tool("stdbuf") {
            Some(sb) => {
                let mut c = command(&sb, &["-oL"], mode, true);
                c.arg(&p).args(&a);
                c
            }
            None => command(&p, &a, mode, true),
        }
    };
    let pair = common::run_pair(
        (cmd(None), format!("ibv_rc_pingpong {mode:?} server")),
        (cmd(Some("127.0.0.1")), format!("ibv_rc_pingpong {mode:?} client")),
        port,
        Duration::from_secs(60),
    );
    let report = pair.report();
    for d in [&pair.server, &pair.client] {
        let (who, out, err) = (&d.what, &d.stdout, &d.stderr);
        // The control path, on both sides.
        assert_contains(out, "local address:  LID 0x0000, QPN 0x", &format!("{who}\n{report}"));
        assert_contains(out, "GID ::ffff:127.0.0.", &format!("{who}\n{report}"));
        assert_contains(out, "remote address: LID 0x0000, QPN 0x", &format!("{who}\n{report}"));
        let c = calls(err);
        let qp_create = c.iter().any(|l| (l.contains("QP.CREATE") || l.contains("CREATE_QP")) && !l.contains("-> E"));
        assert!(qp_create, "{who}: QP created\n{report}");
        for state in ["-> INIT", "-> RTR", "-> RTS"] {
            let ok = c.iter().any(|l| l.contains("MODIFY_QP") && l.contains(state) && !l.ends_with(|ch: char| ch.is_ascii_uppercase()));
            assert!(ok, "{who}: MODIFY_QP {state} succeeded\n{report}");
        }
        assert!(!out.contains("Failed") && !err.contains("Failed"), "{who}: {report}");
        // The data path: 10 exchanges of 4096 bytes each way, every page checked.
        assert_contains(out, "81920 bytes in", &report);
        assert_contains(out, "10 iters in", &report);
        assert!(!out.contains("invalid data"), "{who}: -c found bad data\n{report}");
    }
    pair.assert_ok();
}

#[test]
fn rc_pingpong_through_ioctl() {
    pingpong(Mode::Ioctl);
}

#[test]
fn rc_pingpong_through_write() {
    pingpong(Mode::WriteOnly);
}

/// `doorbell softhca CMD` (when the doorbell binary of this build is there).
#[test]
fn doorbell_softhca_runs_a_program() {
    let Some(p) = tool("ibv_devices") else { return };
    let lib = preload();
    let bin = lib.with_file_name("doorbell");
    if !bin.is_file() {
        testkit::skip(testkit::Need::Build, format!("{} not built (cargo build -p doorbell)", bin.display()));
        return;
    }
    let out = Command::new(&bin).arg("softhca").arg("--").arg(&p).env_remove("LD_PRELOAD").output().expect("run doorbell");
    let so = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{so}{}", String::from_utf8_lossy(&out.stderr));
    assert_contains(&so, "softhca0", "doorbell softhca ibv_devices");
    let out = Command::new(&bin).args(["softhca", "--preload", "/nonexistent/libdoorbell_preload.so", "true"])
        .output().expect("run doorbell");
    assert!(!out.status.success());
}
