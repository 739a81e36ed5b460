//! A stock rdma-core program whose mmap bypasses libdoorbell_preload.so (as UCX's bistro
//! hooks do) still gets its doorbells seen: `tests/c/mmap_bypass.c` defines mmap itself
//! and forwards it to `syscall(SYS_mmap)`, so libmlx5 maps its UAR and clock pages on the
//! uverbs fd (the device page memfd) without softhca's kernel half knowing; the doorbell
//! trap finds those mappings in /proc/self/maps (softhca/src/device/trap_scan.rs).
//! Without that, the RDMA WRITE rung after idleness never completes (the engine sleeps
//! on its armed trap) and the clock page is stale. (On a kernel without userfaultfd
//! write-protection of shmem the HCA uses its timed backoff and the checks pass anyway.)

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The checks mmap_bypass prints, in order.
const CHECKS: [&str; 6] = ["hooked", "write_0", "write_1", "write_2", "send", "clock"];

fn build() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let src = dir.join("mmap_bypass.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mmap_bypass");
    testkit::cc(&src, [
        src.as_os_str(), "-o".as_ref(), exe.as_os_str(), "-Wall".as_ref(), "-Wextra".as_ref(), "-Werror".as_ref(),
        "-Wno-unused-function".as_ref(), "-O1".as_ref(), "-rdynamic".as_ref(), "-libverbs".as_ref(),
    ])?;
    Some(exe)
}

#[test]
fn doorbells_on_uar_pages_mapped_past_the_preload_are_seen() {
    let Some(exe) = build() else { return };
    let done = common::spawn(common::stock(&exe, &[]), "mmap_bypass").wait_until(Instant::now() + Duration::from_secs(120));
    let report = done.report();
    let mut problems = Vec::new();
    for name in CHECKS {
        match done.stdout.lines().find_map(|l| l.strip_prefix(&format!("CHECK {name} "))) {
            Some("PASS") => {}
            Some(v) => problems.push(format!("{name}: {v}")),
            None => problems.push(format!("{name}: no result line")),
        }
    }
    assert!(problems.is_empty(), "mmap_bypass:\n  {}\n{report}", problems.join("\n  "));
    assert!(done.ok(), "{report}");
    eprint!("{}", done.stdout);
}
