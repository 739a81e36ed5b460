//! A RAW_PACKET QP through stock libibverbs + libmlx5 (`tests/c/raw_qp.c`, built here
//! with `cc ... -libverbs -lmlx5`, run under libdoorbell_preload.so): created (as root:
//! CAP_NET_RAW), its TIR/TIS/RQ/SQ numbers read back through mlx5dv_init_obj, moved
//! through INIT, RTR, RTS, ERR and RESET, destroyed; and refused with EPERM in a child
//! that dropped CAP_NET_RAW (`capsh --drop=cap_net_raw`), as ib_uverbs refuses it.
//! SKIP when cc, the rdma-core headers, root or capsh are missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CHECKS: &[&str] = &[
    "create", "dv_init", "handles", "qpn_is_sqn", "rqn_differs", "query_reset", "to_init", "query_init", "to_rtr",
    "to_rts", "query_rts", "rts_to_rtr_refused", "to_err", "to_reset", "to_init_again", "destroy", "destroy_cq",
];

fn build() -> Option<PathBuf> {
    if !Path::new("/usr/include/infiniband/mlx5dv.h").exists() {
        testkit::skip(testkit::Need::Tool, "infiniband/mlx5dv.h missing (apt-get install libibverbs-dev)");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/raw_qp.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("raw_qp");
    testkit::cc(&src, [
        std::ffi::OsStr::new("-Wall"), "-Wextra".as_ref(), "-Werror".as_ref(), "-Wno-unused-function".as_ref(),
        "-O1".as_ref(), "-o".as_ref(), exe.as_os_str(), src.as_os_str(), "-libverbs".as_ref(), "-lmlx5".as_ref(),
    ])?;
    Some(exe)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(mut c: Command, name: &str, checks: &[&str]) {
    c.env("LD_PRELOAD", common::preload()).env_remove("DOORBELL_SOFTHCA_ADDR").env_remove("RUST_LOG");
    // A hang is killed at the deadline and fails below.
    let done = common::spawn(c, name).wait_until(Instant::now() + Duration::from_secs(120));
    let report = done.report();
    for check in checks {
        let line = done.stdout.lines().find_map(|l| l.strip_prefix(&format!("CHECK {check} ")));
        assert_eq!(line, Some("PASS"), "{check}\n{report}");
    }
    assert!(done.ok(), "{report}");
}

#[test]
fn raw_qp_lifecycle_as_root() {
    if !is_root() {
        testkit::skip(testkit::Need::Root, "RAW_PACKET QPs need CAP_NET_RAW");
        return;
    }
    let Some(exe) = build() else { return };
    let mut c = Command::new(&exe);
    c.arg("create");
    run(c, "raw_qp create", CHECKS);
}

#[test]
fn raw_qp_eperm_without_cap_net_raw() {
    if !is_root() {
        testkit::skip(testkit::Need::Root, "needs root to drop CAP_NET_RAW from");
        return;
    }
    let Some(capsh) = ["/usr/sbin/capsh", "/sbin/capsh", "/usr/bin/capsh"].into_iter().map(Path::new).find(|p| p.exists())
    else {
        testkit::skip(testkit::Need::Tool, "capsh missing (apt-get install libcap2-bin)");
        return;
    };
    let Some(exe) = build() else { return };
    let mut c = Command::new(capsh);
    // The bounding set and the effective set both lose it, so the child cannot regain it.
    c.arg("--drop=cap_net_raw").arg("--").arg("-c").arg(format!("exec {} eperm", exe.display()));
    run(c, "raw_qp eperm", &["eperm"]);
}
