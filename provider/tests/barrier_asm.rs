//! The fences of `provider/src/barrier.rs` as the compiler emits them, per architecture,
//! against the instructions of rdma-core's util/udma_barrier.h (commit 05e55372):
//!
//! | fence (rdma-core macro)                 | x86-64            | aarch64   |
//! |-----------------------------------------|-------------------|-----------|
//! | to_device (udma_to_device_barrier)      | none (compiler)   | dmb oshst |
//! | from_device (udma_from_device_barrier)  | lfence; see below | dmb oshld |
//! | wc_start (mmio_wc_start)                | sfence            | dsb st    |
//! | wc_flush (mmio_flush_writes)            | sfence            | dsb st    |
//!
//! barrier.rs is compiled on its own (rustc `--emit asm`) inside a wrapper exporting one
//! function per fence, and each function's body is searched for the instruction. On
//! x86-64 `from_device` is deliberately no instruction (an acquire fence; the CQE ring
//! is write-back memory, whose loads x86 does not reorder), which the test pins too.
//! The aarch64 half needs the target's standard library (`rustup target add
//! aarch64-unknown-linux-gnu`) and skips without it.

use std::path::{Path, PathBuf};
use std::process::Command;

const FENCES: [&str; 4] = ["to_device", "from_device", "wc_start", "wc_flush"];

/// The assembly of each fence's wrapper for `target`, or why it could not be made.
fn fence_asm(target: &str) -> Result<Vec<(&'static str, String)>, String> {
    let barrier = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/barrier.rs");
    let dir = std::env::temp_dir().join(format!("barrier_asm.{}.{target}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let mut src = format!("#[path = {:?}]\nmod barrier;\n", barrier.display().to_string());
    // A distinct store before each fence keeps identical bodies (wc_start and
    // wc_flush are one instruction) from being merged into one symbol.
    for (n, f) in FENCES.iter().enumerate() {
        src += &format!(
            "#[no_mangle]\npub unsafe extern \"C\" fn fence_{f}(p: *mut u32) {{ unsafe {{ p.write_volatile({n}) }}; barrier::{f}() }}\n"
        );
    }
    let lib = dir.join("fences.rs");
    std::fs::write(&lib, src).map_err(|e| e.to_string())?;
    let out: PathBuf = dir.join("fences.s");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let r = Command::new(&rustc)
        .args(["--edition", "2021", "--crate-type", "staticlib", "--emit", "asm", "-C", "opt-level=3", "-A", "warnings", "--target", target, "-o"])
        .arg(&out)
        .arg(&lib)
        .output()
        .map_err(|e| format!("cannot run {rustc}: {e}"))?;
    if !r.status.success() {
        return Err(String::from_utf8_lossy(&r.stderr).into_owned());
    }
    let s = std::fs::read_to_string(&out).map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&dir);
    FENCES
        .iter()
        .map(|f| {
            let label = format!("fence_{f}:");
            let start = s.lines().position(|l| l.trim() == label).ok_or(format!("no {label} in the assembly"))?;
            // The body: up to the function's end marker.
            let body: Vec<String> = s
                .lines()
                .skip(start + 1)
                .take_while(|l| !l.contains(".cfi_endproc") && !l.trim_start().starts_with(".Lfunc_end"))
                .filter(|l| !l.trim_start().starts_with('.') && !l.trim_start().starts_with("//") && !l.trim_start().starts_with('#'))
                .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
                .filter(|l| !l.is_empty())
                .collect();
            Ok((*f, body.join("\n")))
        })
        .collect()
}

fn body<'a>(asm: &'a [(&str, String)], f: &str) -> &'a str {
    &asm.iter().find(|(n, _)| *n == f).unwrap().1
}

#[test]
fn x86_64_fences() {
    let asm = fence_asm("x86_64-unknown-linux-gnu").expect("the host target compiles");
    for f in ["wc_start", "wc_flush"] {
        assert!(body(&asm, f).lines().any(|l| l == "sfence"), "{f}: {}", body(&asm, f));
    }
    for f in ["to_device", "from_device"] {
        let b = body(&asm, f);
        assert!(!b.contains("fence"), "{f} emits a fence instruction: {b}");
    }
}

#[test]
fn aarch64_fences_are_rdma_cores() {
    let target = "aarch64-unknown-linux-gnu";
    let asm = match fence_asm(target) {
        Ok(a) => a,
        Err(e) if e.contains("can't find crate for `std`") || e.contains("can't find crate for `core`") => {
            testkit::skip(testkit::Need::Tool, format!("no standard library for {target} (rustup target add {target})"));
            return;
        }
        Err(e) => panic!("compiling barrier.rs for {target}: {e}"),
    };
    for (f, insn) in [("to_device", "dmb oshst"), ("from_device", "dmb oshld"), ("wc_start", "dsb st"), ("wc_flush", "dsb st")] {
        let b = body(&asm, f);
        assert!(b.lines().any(|l| l == insn), "{f} lacks `{insn}`: {b}");
    }
}
