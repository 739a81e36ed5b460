//! The study examples (`gdr/examples/`) on a machine without an NVIDIA driver: each prints
//! exactly one line on stderr, naming itself and what is missing, nothing on stdout, and
//! exits with status 3, never a panic. That is the contract issue 20 sets for GPU tools
//! on CI machines ("one clear line and a distinct exit status"); 3 is the status the
//! examples document, distinct from 1 (a step failed) and 2 (bad arguments).
//!
//! `cargo test` builds examples, but `cargo test --test examples_no_driver` does not, so
//! the test builds them itself with the cargo that built it, into the same target
//! directory and profile (a no-op when they are fresh).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target directory and profile this test binary was built in: it lives in
/// `<target>/<profile>/deps/`.
fn target_and_profile() -> (PathBuf, String) {
    let exe = std::env::current_exe().expect("current_exe");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("<target>/<profile>/deps/<test>");
    let target = profile_dir.parent().expect("<target>").to_path_buf();
    let profile = profile_dir
        .file_name()
        .expect("profile")
        .to_string_lossy()
        .into_owned();
    (target, profile)
}

/// Builds the gdr examples and returns the directory holding them.
fn build_examples() -> PathBuf {
    let (target, profile) = target_and_profile();
    let mut cmd = Command::new(env!("CARGO"));
    cmd.args(["build", "-q", "-p", "gdr", "--examples", "--target-dir"])
        .arg(&target);
    // Cargo names the dev profile's directory "debug".
    let cargo_profile = if profile == "debug" {
        "dev"
    } else {
        profile.as_str()
    };
    cmd.args(["--profile", cargo_profile]);
    cmd.current_dir(env!("CARGO_MANIFEST_DIR"));
    let st = cmd.status().expect("running cargo build --examples");
    assert!(st.success(), "cargo build -p gdr --examples failed: {st}");
    target.join(&profile).join("examples")
}

/// Whether this machine has what the examples need (then their real output is the test:
/// run them by hand).
fn driver_present() -> Option<&'static str> {
    if gdr::cuda::probe().is_ok() {
        return Some("a CUDA driver is present");
    }
    if nvml_wrapper::Nvml::init().is_ok() {
        return Some("NVML is present");
    }
    None
}

/// Runs `example args` and checks the no-driver contract; `missing` is the phrase the
/// line must contain (what is absent).
fn check(dir: &Path, example: &str, args: &[&str], prefix: &str, missing: &str) {
    let out = Command::new(dir.join(example))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {example}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{example} {args:?}: status {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    assert!(
        stdout.is_empty(),
        "{example} {args:?}: printed on stdout: {stdout:?}"
    );
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{example} {args:?}: not one line on stderr: {stderr:?}"
    );
    assert!(
        lines[0].starts_with(&format!("{prefix}: ")),
        "{example}: line does not name it: {:?}",
        lines[0]
    );
    assert!(
        lines[0].contains(missing),
        "{example}: line does not say {missing:?}: {:?}",
        lines[0]
    );
    assert!(
        !stderr.contains("panicked"),
        "{example}: panicked: {stderr}"
    );
}

#[test]
fn each_example_says_no_driver_in_one_line_and_exits_3() {
    if let Some(why) = driver_present() {
        testkit::skip(
            testkit::Need::NoGpu,
            format!("{why} (run the examples themselves; this test is for machines without a GPU)"),
        );
        return;
    }
    let dir = build_examples();
    check(&dir, "nvml_query", &[], "nvml_query", "no NVML");
    check(&dir, "nvml_query", &["--reset"], "nvml_query", "no NVML");
    check(&dir, "cuda_ipc", &[], "cuda_ipc", "no CUDA driver");
    // The child half, as the parent starts it (handles are not looked at before the probe).
    check(
        &dir,
        "cuda_ipc",
        &["--child", "00", "00", "0", "64"],
        "cuda_ipc (child)",
        "no CUDA driver",
    );
    check(
        &dir,
        "unified_memory",
        &[],
        "unified_memory",
        "no CUDA driver",
    );
    check(
        &dir,
        "unified_memory",
        &["0", "64"],
        "unified_memory",
        "no CUDA driver",
    );
}

/// Bad arguments are status 2 with a usage line, before NVML is asked for anything.
#[test]
fn nvml_query_refuses_an_unknown_argument_with_status_2() {
    let dir = build_examples();
    let out = Command::new(dir.join("nvml_query"))
        .arg("--bogus")
        .output()
        .expect("running nvml_query");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(
        stderr.contains("usage: nvml_query [--reset]"),
        "stderr: {stderr:?}"
    );
}
