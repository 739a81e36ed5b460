//! `gdr::vgem::drm` against the installed DRM uapi headers (/usr/include/libdrm from
//! libdrm-dev), through a C program generated and built here: every struct's size, every
//! field's offset and size, the DRM_IOCTL_* request numbers and the PRIME flags.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use gdr::vgem::drm;

fn c_program() -> (String, Vec<String>) {
    let mut src = String::from("#include <stdio.h>\n#include <stddef.h>\n#include <fcntl.h>\n#include <drm.h>\n#include <drm_mode.h>\nint main(void) {\n");
    let mut expect = Vec::new();
    for (c, size, fields) in drm::layouts() {
        writeln!(src, "  printf(\"size {c} %zu\\n\", sizeof({c}));").unwrap();
        expect.push(format!("size {c} {size}"));
        for (f, off, fsize) in fields {
            writeln!(src, "  printf(\"field {c}.{f} %zu %zu\\n\", offsetof({c}, {f}), sizeof((({c} *)0)->{f}));").unwrap();
            expect.push(format!("field {c}.{f} {off} {fsize}"));
        }
    }
    let consts = drm::request_numbers().into_iter()
        .chain([("DRM_CLOEXEC", drm::CLOEXEC as u64), ("DRM_RDWR", drm::RDWR as u64)]);
    for (name, value) in consts {
        writeln!(src, "  printf(\"const {name} %llu\\n\", (unsigned long long)({name}));").unwrap();
        expect.push(format!("const {name} {value}"));
    }
    src.push_str("  return 0;\n}\n");
    (src, expect)
}

#[test]
fn drm_uapi_matches_installed_headers() {
    let inc = Path::new("/usr/include/libdrm");
    if !inc.join("drm_mode.h").exists() {
        testkit::skip(testkit::Need::Tool, "/usr/include/libdrm/drm_mode.h missing (apt-get install libdrm-dev; tests/vm/rxe-vm.sh --setup installs it)");
        return;
    }
    let (src, expect) = c_program();
    let dir = std::env::temp_dir().join(format!("gdr-vgem-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c, &src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).arg("-Wall").arg("-I").arg(inc).arg("-o").arg(&exe).arg(&c).output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(out.status.success(), "C build failed:\n{}\n{src}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let got = String::from_utf8(run.stdout).unwrap();
    let got: Vec<&str> = got.lines().collect();
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(got.len(), expect.len());
    let bad: Vec<String> = got.iter().zip(&expect).filter(|(g, e)| *g != e).map(|(g, e)| format!("  C: {g}\n  Rust: {e}")).collect();
    assert!(bad.is_empty(), "{} mismatches with the DRM uapi headers:\n{}", bad.len(), bad.join("\n"));
    // Sizes known independently of both (x86-64 / LP64): drm_version is 3 ints, 4 bytes of
    // padding and six 8-byte words; drm_mode_create_dumb six u32 and a u64; drm_prime_handle
    // three 32-bit words.
    let sizes: Vec<(&str, usize)> = drm::layouts().into_iter().map(|(c, s, _)| (c, s)).collect();
    assert_eq!(sizes, [("struct drm_version", 64), ("struct drm_gem_close", 8), ("struct drm_prime_handle", 12),
                       ("struct drm_mode_create_dumb", 32)]);
    eprintln!("checked {} lines against the headers", expect.len());
}
