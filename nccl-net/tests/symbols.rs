//! The plugin exports what NCCL looks up, under the name NCCL looks for.
//!
//! NCCL 2.28 (`src/plugin/plugin_open.cc`) turns `NCCL_NET_PLUGIN=doorbell` into
//! `dlopen("libnccl-net-doorbell.so")` and then (`src/plugin/net.cc`) looks up
//! `ncclNetPlugin_v11`, `_v10`, ... `_v6` in it with dlsym. The expected lists below
//! come from there, not from the plugin.

mod common;

use std::process::Command;

#[test]
fn exports_the_plugin_tables() {
    let so = common::plugin();
    let out = match Command::new("nm").args(["-D", "--defined-only"]).arg(&so).output() {
        Ok(o) => o,
        Err(e) => {
            testkit::skip(testkit::Need::Tool, format!("nm not runnable: {e} (apt-get install binutils)"));
            return;
        }
    };
    assert!(out.status.success(), "nm failed: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // "ADDRESS TYPE NAME": data symbols (D/d/R) named ncclNetPlugin_vN.
    let mut tables: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 3 && f[2].starts_with("nccl")).then(|| {
                assert!(matches!(f[1], "D" | "R" | "B"), "{} is not a data symbol: {l}", f[2]);
                f[2].to_string()
            })
        })
        .collect();
    tables.sort();
    assert_eq!(tables, ["ncclNetPlugin_v10", "ncclNetPlugin_v11", "ncclNetPlugin_v8", "ncclNetPlugin_v9"]);
    // No collective-network or GIN tables: NCCL would then try to use them.
    assert!(!text.contains("ncclCollNetPlugin") && !text.contains("ncclGinPlugin"));
}

#[test]
fn soname_is_the_name_nccl_opens() {
    let so = common::plugin();
    assert_eq!(so.file_name().unwrap(), "libnccl-net-doorbell.so");
    let out = match Command::new("readelf").arg("-d").arg(&so).output() {
        Ok(o) => o,
        Err(e) => {
            testkit::skip(testkit::Need::Tool, format!("readelf not runnable: {e} (apt-get install binutils)"));
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libnccl-net-doorbell.so]"), "{text}");
}
