//! The conformance table on both sides of the "one rule": the real kernel (ib_uverbs +
//! rdma_rxe in the QEMU guest of tests/vm/rxe-vm.sh) and softhca (in-process). Each
//! must give every case its expected result, so they give each other's results too.
//!
//! The VM part skips, saying why, when the VM is not set up here; with
//! `DOORBELL_REQUIRE_VM=1` (CI) it fails instead.

use std::path::PathBuf;
use std::process::Command;

use conformance::{compare, parse_lines, table};

const BIN: &str = env!("CARGO_BIN_EXE_uverbs-conformance");

fn vm_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vm/rxe-vm.sh")
}

fn vm_required() -> bool {
    std::env::var("DOORBELL_REQUIRE_VM").is_ok_and(|v| v == "1")
}

/// `Ok(())` when `rxe-vm.sh --check` says the VM can run, else the reason it gives.
fn vm_available() -> Result<(), String> {
    let out = Command::new(vm_script()).arg("--check").output()
        .map_err(|e| format!("cannot run {}: {e}", vm_script().display()))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let reason = text.strip_prefix("rxe-vm: unavailable: ").unwrap_or(&text);
    let reason = reason.split(" (run tests/vm/rxe-vm.sh --setup)").next().unwrap_or(reason);
    Err(reason.to_string())
}

#[test]
fn rxe_in_the_vm_matches_the_table() {
    if let Err(reason) = vm_available() {
        if vm_required() {
            panic!("DOORBELL_REQUIRE_VM=1 but the rxe VM is unavailable: {reason} (run tests/vm/rxe-vm.sh --setup)");
        }
        eprintln!("SKIP: rxe VM unavailable: {reason} (run tests/vm/rxe-vm.sh --setup)");
        return;
    }
    let out = Command::new(vm_script())
        .args(["--", BIN, "--device", "rxe0"])
        .output()
        .expect("run rxe-vm.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines = parse_lines(&text);
    let cases = table::cases();
    let problems = compare(&lines, &cases);

    // uverbs' own discovery against the guest's real sysfs and /dev.
    let discovery = lines.iter().find(|(n, _)| n == "discovery").map(|(_, r)| r.as_str());
    assert_eq!(discovery, Some("OK"), "discovery of rxe0 in the guest failed:\n{text}\n{stderr}");

    assert!(problems.is_empty(), "rxe disagrees with the table in {} cases:\n  {}\n--- guest output ---\n{text}\n{stderr}",
            problems.len(), problems.join("\n  "));
    assert!(out.status.success(), "uverbs-conformance exited {:?} in the guest:\n{text}\n{stderr}", out.status);
    assert_eq!(lines.len(), cases.len() + 1, "one line per case plus discovery");
    eprintln!("rxe0: {} cases as expected", cases.len());
}

#[cfg(feature = "softhca")]
#[test]
fn softhca_matches_the_table() {
    let profile = conformance::Mlx5Profile::default();
    let results = conformance::softhca_target::run_on_softhca(&profile).expect("open softhca");
    let text: Vec<String> = results.iter().map(|r| r.to_string()).collect();
    let lines = parse_lines(&text.join("\n"));
    let problems = compare(&lines, &table::cases());
    assert!(problems.is_empty(), "softhca disagrees with the table (that is, with Linux 6.1) in {} cases:\n  {}",
            problems.len(), problems.join("\n  "));
    eprintln!("softhca0: {} cases as expected", results.len());
}

#[cfg(not(feature = "softhca"))]
#[test]
fn softhca_matches_the_table() {
    eprintln!("SKIP: softhca run not built: enable the `softhca` feature of the conformance crate \
               (needs softhca::default_hca and Hca::open)");
}
