//! The comparison programs run once each, with a few posts, and must finish with every
//! completion a success and the written bytes in place (each program checks both and
//! prints `... : ok`); the numbers themselves are provider/benches/compare.sh's.
//!
//! The rdma-core programs need libibverbs, libclang (rdma-sys runs bindgen) and cmake
//! (sideway's rdma-mummy-sys builds a shim), so they are behind cargo features that this
//! test builds itself (`cargo build -p bench-compare --features rdma-sys,sideway`, same
//! profile and target directory): the default `cargo test --workspace` never compiles
//! them. They run under libdoorbell_preload.so (softhca), built the same way.

use std::path::{Path, PathBuf};
use std::process::Command;

use testkit::{skip, Need};

const N: &str = "64";

/// (target dir, profile dir, cargo's profile name) of this test build.
fn build_dirs() -> (PathBuf, PathBuf, String) {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe.parent().and_then(Path::parent).expect("<target>/<profile>/deps/<test>").to_path_buf();
    let target = profile_dir.parent().expect("<target>").to_path_buf();
    let name = profile_dir.file_name().expect("profile").to_string_lossy().into_owned();
    let profile = if name == "debug" { "dev".to_string() } else { name };
    (target, profile_dir, profile)
}

fn cargo_build(args: &[&str]) {
    let (target, _, profile) = build_dirs();
    let st = Command::new(env!("CARGO"))
        .args(["build", "-q", "--profile", &profile])
        .args(args)
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .status()
        .expect("run cargo");
    assert!(st.success(), "cargo build {args:?} failed: {st}");
}

/// Runs `prog VARIANT N` (under `preload` if given) and asserts it reported success.
fn run(prog: &Path, preload: Option<&Path>, variant: &str) {
    let mut c = Command::new(prog);
    c.args([variant, N]).env_remove("DOORBELL_DOORBELL_TRAP");
    if let Some(p) = preload {
        c.env("LD_PRELOAD", p);
    }
    let out = c.output().expect("run comparison program");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.lines().any(|l| l.ends_with(": ok")),
        "{} {variant} {N}: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        prog.display(),
        out.status
    );
    if variant == "lat" {
        assert!(stdout.contains("lat: t_typical_usec "), "no latency line: {stdout}");
    }
}

#[test]
fn doorbell_program_completes() {
    let prog = Path::new(env!("CARGO_BIN_EXE_compare-doorbell"));
    for v in ["inline", "sge", "poll", "lat"] {
        run(prog, None, v);
    }
}

fn on_path(name: &str) -> bool {
    std::env::var("PATH").unwrap_or_default().split(':').any(|d| Path::new(d).join(name).is_file())
}

#[test]
fn rdma_core_crate_programs_complete() {
    if !on_path("cmake") {
        return skip(Need::Tool, "cmake not installed (apt-get install cmake), which sideway's rdma-mummy-sys needs");
    }
    if !Path::new("/usr/include/infiniband/verbs.h").is_file() {
        return skip(Need::Tool, "libibverbs headers missing (apt-get install libibverbs-dev librdmacm-dev)");
    }
    if !Path::new("/usr/lib/x86_64-linux-gnu/libmlx5.so.1").exists() && !on_path("ibv_devinfo") {
        return skip(Need::Tool, "libmlx5 missing (apt-get install ibverbs-providers)");
    }
    cargo_build(&["-p", "softhca-preload"]);
    // Only these two: relinking compare-doorbell here would replace the file the other
    // test may be running.
    cargo_build(&["-p", "bench-compare", "--features", "rdma-sys,sideway", "--bin", "compare-rdma-sys", "--bin", "compare-sideway"]);
    let (_, dir, _) = build_dirs();
    let preload = dir.join("libdoorbell_preload.so");
    for (prog, variants) in [
        ("compare-rdma-sys", ["inline", "sge", "wr-inline", "wr-sge", "poll", "lat"]),
        ("compare-sideway", ["inline", "sge", "wr-inline", "wr-sge", "poll", "lat"]),
    ] {
        for v in variants {
            run(&dir.join(prog), Some(&preload), v);
        }
    }
}
