//! One skip helper for the whole test suite.
//!
//! A test that cannot run here (no GPU, no VM, a tool or a kernel feature missing) calls
//! [`skip`] and returns. A bare `eprintln!("SKIP: ...")` is invisible: libtest captures a
//! passing test's output, so CI's "ok, 0 ignored" holds whether the test ran or not.
//! [`skip`] therefore
//! - writes `SKIP [test]: reason` straight to the process's stderr (`std::io::stderr()`
//!   is not captured by libtest; only the `print!` family is), so `cargo test` shows it;
//! - appends one line to the skip log ([`log_path`]), which `.ci/run` prints as a summary
//!   at the end of the run;
//! - under `DOORBELL_REQUIRE_ALL=1` (set by `.ci/run`) panics unless the skip's [`Need`]
//!   is on [`ALLOWED`], the short list of what CI genuinely cannot provide. Under
//!   `DOORBELL_REQUIRE_VM=1` a [`Need::Vm`] skip fails as well (the older, VM-only switch).
//!
//! The reason should say what is missing and how to get it: `"tshark not installed (apt-get
//! install tshark)"`.

use std::fmt;
use std::io::Write;
use std::path::PathBuf;

/// What a skipping test lacks; decides whether CI may skip it ([`ALLOWED`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// An NVIDIA GPU and its driver (or NVML, nvidia-smi).
    Gpu,
    /// A machine *without* a CUDA driver (the no-driver path cannot be shown on a GPU node).
    NoGpu,
    /// The rxe VM of tests/vm/rxe-vm.sh.
    Vm,
    /// Root or a capability (network namespaces, packet capture).
    Root,
    /// A program or package (tshark, dumpcap, mpirun, cc, scapy, rdma-core's tools).
    Tool,
    /// A kernel feature (userfaultfd write-protection, a module).
    Kernel,
    /// Something the build left out (a cargo feature, a binary not built).
    Build,
    /// The environment chose otherwise (a variable forcing a setting the test varies).
    Env,
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            Need::Gpu => "gpu",
            Need::NoGpu => "no-gpu",
            Need::Vm => "vm",
            Need::Root => "root",
            Need::Tool => "tool",
            Need::Kernel => "kernel",
            Need::Build => "build",
            Need::Env => "env",
        };
        f.write_str(s)
    }
}

/// What CI may skip under `DOORBELL_REQUIRE_ALL=1`, each with the reason it cannot run there.
/// Everything else CI provides (`.ci/run` installs the tools, runs as root, sets up the VM).
pub const ALLOWED: &[(Need, &str)] = &[
    (Need::Gpu, "the CI machine has no NVIDIA GPU; these run on the GPU node (docs/gdr.md)"),
    (Need::NoGpu, "only skips on a GPU node, where CI does not run; the CI machine has no libcuda"),
];

/// Whether `need` is on [`ALLOWED`].
pub fn allowed(need: Need) -> bool {
    ALLOWED.iter().any(|(n, _)| *n == need)
}

fn env_is_1(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// Whether a skip of `need` must fail the test in this run.
pub fn must_fail(need: Need) -> bool {
    (env_is_1("DOORBELL_REQUIRE_ALL") && !allowed(need)) || (need == Need::Vm && env_is_1("DOORBELL_REQUIRE_VM"))
}

/// The skip log: `$DOORBELL_SKIP_LOG` when set (`.ci/run` sets it), otherwise
/// `skips.log` in the profile directory above the test binary (`target/release/skips.log`
/// for `target/release/deps/NAME-HASH`).
pub fn log_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("DOORBELL_SKIP_LOG") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let dir = if dir.file_name().is_some_and(|n| n == "deps") { dir.parent()? } else { dir };
    Some(dir.join("skips.log"))
}

/// The running test's name: libtest names each test's thread after it.
fn test_name() -> String {
    let t = std::thread::current();
    let name = t.name().unwrap_or("?");
    let exe = std::env::current_exe().ok().and_then(|e| e.file_name().map(|n| n.to_string_lossy().into_owned()));
    // NAME-HASH: the hash says nothing to a reader.
    let bin = exe.map(|e| e.rsplit_once('-').map_or(e.clone(), |(b, _)| b.to_string())).unwrap_or_default();
    format!("{bin}::{name}")
}

/// Records that the calling test is skipped for `why` (what is missing and how to get
/// it), lacking `need`. The caller returns afterwards. Panics (failing the test) when
/// [`must_fail`] says this run may not skip it.
pub fn skip(need: Need, why: impl fmt::Display) {
    let test = test_name();
    let why = why.to_string().replace('\n', " | ");
    // Straight to the process's stderr, past libtest's capture.
    let _ = writeln!(std::io::stderr(), "SKIP [{test}] ({need}): {why}");
    if let Some(path) = log_path() {
        // One write per line with O_APPEND: lines from parallel tests do not interleave.
        if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            let _ = f.write_all(format!("{test}\t{need}\t{why}\n").as_bytes());
        }
    }
    if must_fail(need) {
        panic!(
            "{test} would skip ({need}: {why}), but this run requires every test to run \
             (DOORBELL_REQUIRE_ALL=1 / DOORBELL_REQUIRE_VM=1) and {need} is not on testkit::ALLOWED"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_gpu_kinds_are_allowed() {
        // The allow-list is the promise CI makes: anything else it must be able to run.
        for n in [Need::Vm, Need::Root, Need::Tool, Need::Kernel, Need::Build, Need::Env] {
            assert!(!allowed(n), "{n} must not be allowed");
        }
        assert!(allowed(Need::Gpu) && allowed(Need::NoGpu));
    }

    /// Every skip goes through [`skip`]: a test printing its own `SKIP` line (hidden by
    /// libtest when the test passes, never logged, never enforced) is refused here.
    #[test]
    fn no_test_prints_its_own_skip_line() {
        fn walk(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                let name = e.file_name();
                if p.is_dir() {
                    if name != "target" && name != ".git" && name != "testkit" {
                        walk(&p, out);
                    }
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push(p);
                }
            }
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let mut files = Vec::new();
        walk(root, &mut files);
        assert!(files.len() > 50, "found only {} .rs files under {}", files.len(), root.display());
        let mut bad = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                // The macro on this line or, with the text on a line of its own, on one of
                // the two before (`writeln!(\n stderr,\n "SKIP..."`).
                let printing = |l: &str| ["println!(", "eprintln!(", "writeln!("].iter().any(|m| l.contains(m));
                let before = lines[i.saturating_sub(2)..i].iter().any(|l| printing(l));
                let printing = printing(line) || (before && line.trim_start().starts_with('"'));
                if printing && (line.contains("\"SKIP") || line.contains("NOTE: skipped")) {
                    bad.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(bad.is_empty(), "skips printed by hand (use testkit::skip):\n{}", bad.join("\n"));
    }

    #[test]
    fn a_skip_is_logged_with_its_test_and_need() {
        let dir = std::env::temp_dir().join(format!("testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join("skips.log");
        // The environment is process-wide; this is the only test that sets it.
        std::env::set_var("DOORBELL_SKIP_LOG", &log);
        std::env::remove_var("DOORBELL_REQUIRE_ALL");
        skip(Need::Gpu, "no GPU\n(second line)");
        let text = std::fs::read_to_string(&log).unwrap();
        std::env::remove_var("DOORBELL_SKIP_LOG");
        let _ = std::fs::remove_dir_all(&dir);
        let line = text.lines().last().unwrap();
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 3, "{line}");
        assert!(cols[0].ends_with("tests::a_skip_is_logged_with_its_test_and_need"), "{line}");
        assert_eq!(cols[1], "gpu");
        assert_eq!(cols[2], "no GPU | (second line)");

        // CI mode: an allowed skip passes, any other fails. (Same test: the environment
        // is shared by the threads of this binary.)
        std::env::set_var("DOORBELL_SKIP_LOG", "/dev/null");
        std::env::set_var("DOORBELL_REQUIRE_ALL", "1");
        let gpu = std::panic::catch_unwind(|| skip(Need::Gpu, "no GPU"));
        let tool = std::panic::catch_unwind(|| skip(Need::Tool, "tshark missing"));
        std::env::remove_var("DOORBELL_REQUIRE_ALL");
        std::env::set_var("DOORBELL_REQUIRE_VM", "1");
        let vm = std::panic::catch_unwind(|| skip(Need::Vm, "no VM"));
        std::env::remove_var("DOORBELL_REQUIRE_VM");
        std::env::remove_var("DOORBELL_SKIP_LOG");
        assert!(gpu.is_ok(), "an allowed GPU skip failed under DOORBELL_REQUIRE_ALL=1");
        assert!(tool.is_err(), "a tool skip passed under DOORBELL_REQUIRE_ALL=1");
        assert!(vm.is_err(), "a VM skip passed under DOORBELL_REQUIRE_VM=1");
    }
}

/// The QEMU guest with the real kernel RDMA stack (`tests/vm/rxe-vm.sh`), as every test
/// that runs something inside it finds and checks it.
pub mod vm {
    use std::path::PathBuf;
    use std::process::Command;

    /// The runner script, from the workspace root (this crate sits one level below it).
    pub fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vm/rxe-vm.sh")
    }

    /// `Ok(())` when `rxe-vm.sh --check` says the guest can run here, else the reason it
    /// gives (without its "run --setup" hint, which the caller's skip line adds).
    pub fn available() -> Result<(), String> {
        let out = Command::new(script())
            .arg("--check")
            .output()
            .map_err(|e| format!("cannot run {}: {e}", script().display()))?;
        if out.status.success() {
            return Ok(());
        }
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let reason = text.strip_prefix("rxe-vm: unavailable: ").unwrap_or(&text);
        let reason = reason.split(" (run tests/vm/rxe-vm.sh --setup)").next().unwrap_or(reason);
        Err(reason.to_string())
    }
}

/// Compiles a C test program: runs `cc` with `args` (sources, `-o`, flags and libraries,
/// in the order cc needs them) and returns `Some(())` once it built. When cc cannot run,
/// or the compiler's complaint is about rdma-core's development files (verbs.h,
/// mlx5dv.h, or a library it cannot find), it skips with the package to install and
/// returns None; any other failure is a bug in the test program and panics with cc's
/// output. `what` names the program in messages.
pub fn cc<I, S>(what: &std::path::Path, args: I) -> Option<()>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let out = match std::process::Command::new("cc").args(args).output() {
        Ok(o) => o,
        Err(e) => {
            skip(Need::Tool, format!("cannot run cc ({e}) (apt-get install gcc libibverbs-dev)"));
            return None;
        }
    };
    if out.status.success() {
        return Some(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("mlx5dv.h") || err.contains("verbs.h") || err.contains("cannot find -l") {
        skip(Need::Tool, format!("rdma-core development files missing (apt-get install libibverbs-dev ibverbs-providers)\n{err}"));
        return None;
    }
    panic!("compiling {} failed:\n{err}", what.display());
}
