//! `doorbell devinfo` against stock `ibv_devinfo` running on the same softhca through
//! the preload shim: the two outputs must be identical, line for line.

#[path = "../../softhca/preload/tests/common/mod.rs"]
mod stock;

use std::process::Command;

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().expect("spawn");
    assert!(out.status.success(), "{cmd:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn devinfo_matches_stock_ibv_devinfo() {
    if Command::new("ibv_devinfo").arg("--help").output().is_err() {
        eprintln!("SKIP: ibv_devinfo not installed (apt-get install ibverbs-utils)");
        return;
    }
    let exe = env!("CARGO_BIN_EXE_doorbell");
    let lib = stock::preload();
    // A fixed address, so both processes describe the same host (GUID and GIDs
    // derive from it) whatever other tests hold meanwhile.
    let addr = "127.0.0.231";
    for verbose in [false, true] {
        let mut ours = Command::new(exe);
        ours.arg("devinfo").env("DOORBELL_SOFTHCA_ADDR", addr);
        let mut theirs = Command::new(exe);
        theirs.arg("softhca").arg("--preload").arg(&lib).args(["--", "ibv_devinfo"]).env("DOORBELL_SOFTHCA_ADDR", addr);
        if verbose {
            ours.arg("-v");
            theirs.arg("-v");
        }
        let (a, b) = (run(&mut ours), run(&mut theirs));
        assert!(a.contains("hca_id:\tsofthca0") && a.contains("PORT_ACTIVE"), "unexpected output:\n{a}");
        for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
            assert_eq!(x, y, "line {} differs (verbose={verbose})", i + 1);
        }
        assert_eq!(a.lines().count(), b.lines().count(), "line counts differ (verbose={verbose})");
    }
}
