//! Shared by the plugin's tests: building `libnccl-net-doorbell.so` and loading it the
//! way NCCL does (dlopen, then the `ncclNetPlugin_v10` table).

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// `target/release` (or the profile this test was built in): the test binary lives
/// in its `deps/`.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().and_then(|d| d.parent()).expect("target/<profile>/deps/<test>").to_path_buf()
}

/// Builds the plugin (`$CARGO build --release -p nccl-net`, once per test process) and
/// copies Cargo's `libnccl_net_doorbell.so` to the name NCCL looks for; returns that path.
pub fn plugin() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = target_dir();
        let built = dir.join("libnccl_net_doorbell.so");
        if std::env::var_os("NCCL_NET_HARNESS_ROLE").is_none() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
            let st = Command::new(cargo)
                .args(["build", "--release", "-p", "nccl-net"])
                .current_dir(env!("CARGO_MANIFEST_DIR"))
                .status()
                .expect("run cargo build");
            assert!(st.success(), "cargo build --release -p nccl-net failed");
        }
        let named = dir.join("libnccl-net-doorbell.so");
        if std::env::var_os("NCCL_NET_HARNESS_ROLE").is_none() {
            std::fs::copy(&built, &named).unwrap_or_else(|e| panic!("copy {} to {}: {e}", built.display(), named.display()));
        }
        named
    })
    .clone()
}
