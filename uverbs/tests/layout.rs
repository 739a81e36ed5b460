//! Every ABI struct and constant in `uverbs::sys` against the installed uapi headers
//! (/usr/include/rdma from libibverbs-dev), through a C program generated and built
//! here: sizes, every field's offset and size, and every constant's value.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

const HEADERS: &[&str] = &[
    "rdma/rdma_user_ioctl_cmds.h",
    "rdma/ib_user_verbs.h",
    "rdma/ib_user_ioctl_verbs.h",
    "rdma/ib_user_ioctl_cmds.h",
    "rdma/mlx5-abi.h",
    "rdma/mlx5_user_ioctl_cmds.h",
    "rdma/mlx5_user_ioctl_verbs.h",
    // rdma-core's: the flow spec and attribute numbers have no uapi names.
    "infiniband/verbs.h",
];

fn c_program() -> (String, Vec<String>) {
    let mut src = String::from("#include <stdio.h>\n#include <stddef.h>\n");
    for h in HEADERS {
        writeln!(src, "#include <{h}>").unwrap();
    }
    src.push_str("int main(void) {\n");
    // Expected lines, in the order the program prints them.
    let mut expect = Vec::new();
    for l in uverbs::sys::layouts() {
        writeln!(src, "  printf(\"size {} %zu\\n\", sizeof({}));", l.c_name, l.c_name).unwrap();
        expect.push(format!("size {} {}", l.c_name, l.size));
        for (path, off, size) in l.fields {
            writeln!(src, "  printf(\"field {}.{} %zu %zu\\n\", offsetof({}, {}), sizeof((({} *)0)->{}));",
                     l.c_name, path, l.c_name, path, l.c_name, path).unwrap();
            expect.push(format!("field {}.{} {} {}", l.c_name, path, off, size));
        }
    }
    for c in uverbs::sys::consts() {
        writeln!(src, "  printf(\"const {} %llu\\n\", (unsigned long long)({}));", c.c_expr, c.c_expr).unwrap();
        expect.push(format!("const {} {}", c.c_expr, c.value));
    }
    src.push_str("  return 0;\n}\n");
    (src, expect)
}

#[test]
fn abi_matches_installed_headers() {
    if !Path::new("/usr/include/rdma/ib_user_verbs.h").exists() {
        testkit::skip(testkit::Need::Tool, "/usr/include/rdma missing (apt-get install libibverbs-dev)");
        return;
    }
    let (src, expect) = c_program();
    let dir = std::env::temp_dir().join(format!("uverbs-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let c = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&c, &src).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc).arg("-Wall").arg("-o").arg(&exe).arg(&c).output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(out.status.success(), "C build failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    let got = String::from_utf8(run.stdout).unwrap();
    let got: Vec<&str> = got.lines().collect();
    assert_eq!(got.len(), expect.len());
    let bad: Vec<String> = got.iter().zip(&expect)
        .filter(|(g, e)| *g != e)
        .map(|(g, e)| format!("  C: {g}\n  Rust: {e}"))
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    assert!(bad.is_empty(), "{} mismatches with the uapi headers:\n{}", bad.len(), bad.join("\n"));
    eprintln!("checked {} lines against the headers", expect.len());
}
