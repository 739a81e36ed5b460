//! `doorbell gdr verify` as a cluster engineer runs it: without a CUDA driver (every CI
//! machine) it says so in one line and exits 3; `--mem host` runs the whole command (the
//! capability checks, both passes, every step, the child peer process) on host memory;
//! a device that cannot be opened gives FAIL lines and exit 1.

mod common;

use std::time::Duration;

use common::spawn;

/// The step titles of one pass on host memory, as `gdr/steps.rs` prints them (the
/// sizes are that file's constants: 2 MiB + 4093 B at 4099, 1 MiB + 333333 B into
/// 1 MiB + 500000 B at 1 MiB + 12345, ...).
const HOST_STEPS: [&str; 8] = [
    "RDMA WRITE into host memory (2101245 B at offset 4099)",
    "RDMA READ of host memory (the same 2101245 B back)",
    "SEND into a receive buffer in host memory (1381909 B into 1548576 B at offset 1060921)",
    "inline SEND into host memory (50 B)",
    "inline RDMA WRITE into host memory (37 B at offset 3145628)",
    "atomics on host memory (fetch-and-add, compare-and-swap hit and miss, at offset 8000)",
    "RDMA WRITE past the end of the host memory MR is refused",
    "RDMA WRITE to host memory with a wrong rkey is refused",
];

fn has_driver(stdout: &str) -> bool {
    !stdout.contains("CUDA is not usable here")
}

#[test]
fn no_driver_is_one_line_and_status_3() {
    let d = spawn(&["gdr", "verify"]).wait(Duration::from_secs(120));
    if has_driver(&d.stdout) {
        // A GPU node: the command ran; it must have come to its summary.
        assert!(d.stdout.contains("\nsummary: "), "status {:?}\n{}\n{}", d.status, d.stdout, d.stderr);
        testkit::skip(testkit::Need::NoGpu, "a CUDA driver is present, so the no-driver path cannot be shown here (run on a machine without libcuda)");
        return;
    }
    assert_eq!(d.status.code(), Some(3), "stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "one line, got:\n{}", d.stdout);
    assert!(lines[0].starts_with("doorbell gdr verify: CUDA is not usable here: no CUDA driver: libcuda.so.1 could not be loaded"), "{}", lines[0]);
    assert!(!d.stderr.contains("panicked"), "{}", d.stderr);
    // The same with an explicit GPU and device: the driver is looked for first.
    let d = spawn(&["gdr", "verify", "--gpu", "3", "-d", "softhca0"]).wait(Duration::from_secs(60));
    assert_eq!(d.status.code(), Some(3), "{}", d.stdout);
}

#[test]
fn host_memory_runs_every_step_of_both_passes() {
    let d = spawn(&["gdr", "verify", "--mem", "host"]).wait_ok(Duration::from_secs(240));
    let out = &d.stdout;
    for title in HOST_STEPS {
        let passes = out.lines().filter(|l| l.starts_with(&format!("PASS  {title}: "))).count();
        assert_eq!(passes, 2, "{title:?} should PASS once per pass:\n{out}");
    }
    // The bad-input steps say how the write completed and that memory is unchanged.
    assert_eq!(out.matches("completed with REM_ACCESS_ERR").count(), 4, "{out}");
    assert_eq!(out.matches("no byte of the buffer changed (copied back)").count(), 6, "{out}");
    assert!(out.contains("PASS  NIC ibv_reg_dmabuf_mr(fd = -1): EBADF"), "{out}");
    assert!(out.contains("INFO  GPU attributes: not checked (--mem host)"), "{out}");
    // 2 passes x (2 registrations + 8 steps) + the NIC probe.
    assert!(out.contains("\nsummary: 21 PASS, 0 FAIL"), "{out}");
    assert!(!out.contains("FAIL  "), "{out}");
}

#[test]
fn a_device_that_cannot_be_opened_fails_with_status_1() {
    let d = spawn(&["gdr", "verify", "--mem", "host", "-d", "no_such_dev9"]).wait(Duration::from_secs(120));
    assert_eq!(d.status.code(), Some(1), "stdout:\n{}\nstderr:\n{}", d.stdout, d.stderr);
    assert!(d.stdout.contains("FAIL  NIC ibv_reg_dmabuf_mr(fd = -1): cannot open the device"), "{}", d.stdout);
    assert!(d.stdout.lines().any(|l| l.starts_with("FAIL  pass: ") && l.contains("no_such_dev9")), "{}", d.stdout);
    assert!(!d.stderr.contains("panicked"), "{}", d.stderr);
}

/// The checks are not vacuous: a peer that writes one byte later than announced fails
/// the WRITE (the target's copy differs) and the READ back (the peer's copy differs) in
/// both passes, the other steps still pass, and the status is 1.
#[test]
fn a_misplaced_write_is_caught() {
    let d = spawn(&["gdr", "verify", "--mem", "host", "--fault", "shift-write"]).wait(Duration::from_secs(240));
    let out = &d.stdout;
    assert_eq!(d.status.code(), Some(1), "{out}\n{}", d.stderr);
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL  ")).collect();
    assert_eq!(fails.len(), 4, "{out}");
    for pair in fails.chunks(2) {
        assert!(pair[0].starts_with(&format!("FAIL  {}: the buffer: ", HOST_STEPS[0])) && pair[0].contains("byte(s) differ"), "{}", pair[0]);
        assert!(pair[1].starts_with(&format!("FAIL  {}: peer: the data read back: ", HOST_STEPS[1])), "{}", pair[1]);
    }
    assert_eq!(out.lines().filter(|l| l.starts_with(&format!("PASS  {}: ", HOST_STEPS[2]))).count(), 2, "{out}");
    assert!(out.contains("\nsummary: 17 PASS, 4 FAIL"), "{out}");
}

/// A "bad" write that the MR does accept fails the bad-input step, and the report says
/// which bytes it changed (the last 64 of the buffer, where it wrote 0xab).
#[test]
fn an_accepted_bad_write_is_caught() {
    let d = spawn(&["gdr", "verify", "--mem", "host", "--fault", "in-bounds"]).wait(Duration::from_secs(240));
    let out = &d.stdout;
    assert_eq!(d.status.code(), Some(1), "{out}\n{}", d.stderr);
    let want = format!("FAIL  {}: peer: the write completed with success (0), expected REM_ACCESS_ERR (10); in the buffer ", HOST_STEPS[6]);
    let fails: Vec<&str> = out.lines().filter(|l| l.starts_with("FAIL  ")).collect();
    assert_eq!(fails.len(), 2, "{out}");
    for f in fails {
        assert!(f.starts_with(&want), "{f}");
        // 3 MiB - 64 = 3145664: the write's first byte.
        assert!(f.contains("byte(s) differ, the first at offset 3145664: 0xab"), "{f}");
    }
}
