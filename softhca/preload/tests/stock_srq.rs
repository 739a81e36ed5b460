//! A shared receive queue through stock libibverbs + libmlx5 (`tests/c/srq_limit.c`,
//! built here with `cc ... -libverbs`, run under libdoorbell_preload.so): what
//! ibv_srq_pingpong does not reach. Each CHECK line is one expectation from the verbs,
//! the IB spec or mlx5_ib (see the program's header): ibv_query_srq's max_wr and limit,
//! EINVAL for a resize and for a limit at the WQE count, receives in posting order
//! naming their WQE and QP, one IBV_EVENT_SRQ_LIMIT_REACHED when an armed limit is
//! crossed and the limit disarmed after it, a too-long SEND failing only its own WQE
//! (the QP's flush leaves the SRQ's others), EBUSY destroying an SRQ a QP uses, and
//! receive keys checked against the SRQ's PD rather than the QP's.
//! SKIP when cc or the rdma-core headers are missing.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const CHECKS: &[&str] = &[
    "query_after_create", "resize_refused", "limit_too_big", "arm_limit", "limit_reads_back", "receive_0",
    "no_event_at_limit", "receive_1", "limit_event", "limit_disarmed", "one_event", "length_error", "length_error_requester", "last_wqe_reached", "srq_survives_flush",
    "destroy_busy", "destroy", "srq_pd",
];

fn build() -> Option<PathBuf> {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        testkit::skip(testkit::Need::Tool, "infiniband/verbs.h missing (apt-get install libibverbs-dev)");
        return None;
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/srq_limit.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("srq_limit");
    // rc_pair.h's helpers this program does not use are not warnings here.
    testkit::cc(&src, [
        std::ffi::OsStr::new("-Wall"), "-Wextra".as_ref(), "-Werror".as_ref(), "-Wno-unused-function".as_ref(),
        "-O1".as_ref(), "-o".as_ref(), exe.as_os_str(), src.as_os_str(), "-libverbs".as_ref(),
    ])?;
    Some(exe)
}

#[test]
fn srq_limit_event_and_errnos() {
    let Some(exe) = build() else { return };
    let mut c = Command::new(&exe);
    c.env("LD_PRELOAD", common::preload()).env_remove("DOORBELL_SOFTHCA_ADDR").env_remove("RUST_LOG");
    // A hang is killed at the deadline and fails below.
    let done = common::spawn(c, "srq_limit").wait_until(Instant::now() + Duration::from_secs(120));
    let report = done.report();
    for name in CHECKS {
        let line = done.stdout.lines().find_map(|l| l.strip_prefix(&format!("CHECK {name} ")));
        assert_eq!(line, Some("PASS"), "{name}\n{report}");
    }
    assert!(done.ok(), "{report}");
}
