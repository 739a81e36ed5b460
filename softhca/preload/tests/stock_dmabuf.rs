//! Stock libibverbs' `ibv_reg_dmabuf_mr` on softhca, through libdoorbell_preload.so,
//! with real dma-bufs of the two kinds softhca reaches differently. Both programs (built
//! here with `cc ... -libverbs`; the verbs parts they share are in `tests/c/rc_pair.h`)
//! make NCCL's dma-buf probe (fd -1 must fail with EBADF), register 32 KiB of a 64 KiB
//! buffer, RDMA WRITE into it from a second QP and check the bytes, RDMA READ from it,
//! SEND into a receive buffer in it, do a FETCH_AND_ADD and an inline WRITE on it, then
//! write across the MR's end, and (from a fresh QP pair) inside it with a wrong rkey, and
//! check that each completion is REMOTE_ACCESS_ERR and that no byte changed.
//!
//! - `tests/c/dmabuf_write.c`: a vgem buffer (CPU-mappable; DRM uapi from libdrm-dev's
//!   headers), checked through its own mapping. It runs inside the QEMU guest of
//!   tests/vm/rxe-vm.sh, the only place with vgem. SKIP when cc or the headers are
//!   missing, or when the VM is not set up; with `DOORBELL_REQUIRE_VM=1` (CI) a missing
//!   VM fails instead.
//! - `tests/c/cuda_dmabuf_write.c`: CUDA device memory (cuMemAlloc, exported with
//!   cuMemGetHandleForAddressRange, registered with iova = device pointer), which the
//!   CPU cannot map: gdr's resolver in the shim reaches it with CUDA copies, and the
//!   program checks it with cuMemcpyDtoH. It loads libcuda at run time, so it is built
//!   and run on every machine: without a driver it still opens softhca0 and makes the
//!   probe, then says SKIP (exit 77), which the test checks; on a GPU machine without
//!   cargo or rdma-core, gdr/tools/stock-cuda-check.sh runs it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;


/// Builds `tests/c/<name>.c` where the guest sees it (the target directory, not the
/// host's /tmp, which the guest does not share), with the headers in `headers` checked
/// first and `extra` passed to cc; None after a SKIP line.
fn build(name: &str, headers: &[&str], extra: &[&str]) -> Option<PathBuf> {
    for h in headers {
        if !Path::new(h).exists() {
            testkit::skip(testkit::Need::Tool, format!("{h} missing (apt-get install libibverbs-dev libdrm-dev; tests/vm/rxe-vm.sh --setup installs both)"));
            return None;
        }
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let mut args: Vec<std::ffi::OsString> = ["-Wall", "-Wextra", "-Werror", "-O1"].map(Into::into).to_vec();
    args.extend(extra.iter().map(Into::into));
    args.extend(["-o".into(), exe.clone().into_os_string(), src.clone().into_os_string(), "-libverbs".into()]);
    testkit::cc(&src, args)?;
    Some(exe)
}

#[test]
fn ibv_reg_dmabuf_mr_on_a_vgem_buffer_in_the_guest() {
    let Some(exe) = build("dmabuf_write", &["/usr/include/infiniband/verbs.h", "/usr/include/libdrm/drm_mode.h"], &["-I/usr/include/libdrm"])
    else {
        return;
    };
    if let Err(reason) = testkit::vm::available() {
        testkit::skip(testkit::Need::Vm, format!("rxe VM unavailable: {reason} (run tests/vm/rxe-vm.sh --setup)"));
        return;
    }
    let lib = common::preload();
    // rxe0 holds UDP port 4791 on every address of the guest's initial network namespace
    // (Linux 6.1's rdma_rxe opens its socket at module load): the program, and the
    // softhca instance the preload library starts in it, get a namespace of their own.
    let out = Command::new(testkit::vm::script())
        .args(["--", "unshare", "--net", "sh", "-c", "ip link set lo up && exec env LD_PRELOAD=\"$1\" \"$2\"", "sh"])
        .arg(&lib).arg(&exe)
        .output().expect("run rxe-vm.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut problems = Vec::new();
    for name in ["nccl_probe", "register", "write", "read", "send", "fetch_add", "inline_write", "oob_write", "bad_rkey"] {
        let line = text.lines().find_map(|l| l.strip_prefix(&format!("CHECK {name} ")));
        match line {
            Some("PASS") => {}
            Some(v) => problems.push(format!("{name}: {v}")),
            None => problems.push(format!("{name}: no result line")),
        }
    }
    assert!(problems.is_empty(), "dmabuf_write in the guest:\n  {}\n--- output ---\n{text}\n{stderr}", problems.join("\n  "));
    assert!(out.status.success(), "dmabuf_write exited {:?}:\n{text}\n{stderr}", out.status);
    eprint!("{text}");
}

/// The checks cuda_dmabuf_write prints, in order.
const CUDA_CHECKS: [&str; 9] = ["nccl_probe", "register", "write", "read", "send", "fetch_add", "inline_write", "oob_write", "bad_rkey"];

/// Whether this process can load NVIDIA's driver library, decided here rather than by
/// the program under test.
fn libcuda_loads() -> bool {
    // SAFETY: dlopen of a NUL-terminated name; the handle is closed right away (loading
    // libcuda runs no code that needs anything from us).
    unsafe {
        let h = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
    }
    true
}

#[test]
fn ibv_reg_dmabuf_mr_on_cuda_memory() {
    let Some(exe) = build("cuda_dmabuf_write", &["/usr/include/infiniband/verbs.h"], &[]) else { return };
    let done = common::spawn(common::stock(&exe, &[]), "cuda_dmabuf_write")
        .wait_until(std::time::Instant::now() + std::time::Duration::from_secs(120));
    let report = done.report();
    let out = &done.stdout;
    // Whatever the machine, softhca0 was opened through rdma-core's mlx5 provider and
    // NCCL's probe answered EBADF before any CUDA call.
    assert!(out.lines().any(|l| l.starts_with("USING ") && l.contains("mlx5")), "no mlx5 provider loaded\n{report}");
    assert!(out.contains("CHECK nccl_probe PASS\n"), "{report}");
    if !libcuda_loads() {
        assert_eq!(done.status.and_then(|s| s.code()), Some(77), "without libcuda the program must exit 77\n{report}");
        assert!(out.lines().any(|l| l.starts_with("SKIP: no libcuda.so.1")), "{report}");
        assert!(!out.contains("CHECK register"), "no GPU check may run without libcuda\n{report}");
        testkit::skip(testkit::Need::Gpu, "no libcuda.so.1: the GPU checks of cuda_dmabuf_write did not run (NVIDIA driver; gdr/tools/stock-cuda-check.sh runs them on a GPU machine)");
        return;
    }
    if done.status.and_then(|s| s.code()) == Some(77) && out.contains("SKIP: libcuda.so.1 loaded but cuInit found no CUDA device") {
        testkit::skip(testkit::Need::Gpu, "libcuda.so.1 is installed but cuInit finds no CUDA device (a machine with an NVIDIA GPU)");
        return;
    }
    let mut problems = Vec::new();
    for name in CUDA_CHECKS {
        match out.lines().find_map(|l| l.strip_prefix(&format!("CHECK {name} "))) {
            Some("PASS") => {}
            Some(v) => problems.push(format!("{name}: {v}")),
            None => problems.push(format!("{name}: no result line")),
        }
    }
    assert!(problems.is_empty(), "cuda_dmabuf_write:\n  {}\n{report}", problems.join("\n  "));
    assert!(done.ok(), "{report}");
    eprint!("{out}");
}

/// Whether this process may make a private mount namespace (root, and a container that
/// allows it): what `stock-cuda-check.sh --hide-system` needs.
fn can_unshare_mounts() -> bool {
    Command::new("unshare").args(["--mount", "true"]).output().is_ok_and(|o| o.status.success())
}

/// gdr/tools/stock-cuda-check.sh: `--pack` collects cuda_dmabuf_write, the shim and
/// rdma-core's libraries into a directory of a few MB, and that directory alone runs the
/// program: with this machine's rdma-core hidden (`--hide-system`: /etc/libibverbs.d
/// and the provider directory emptied, the system's libibverbs/libmlx5/libnl replaced by
/// /dev/null), every rdma-core library the program reports using is the packed one, and
/// softhca0 opens and answers NCCL's probe, as on the GPU machine, which has no
/// rdma-core at all. Without libcuda the run ends in the program's SKIP (exit 77).
#[test]
fn packed_directory_runs_without_the_systems_rdma_core() {
    for f in ["/usr/include/infiniband/verbs.h", "/usr/lib/x86_64-linux-gnu/libibverbs/libmlx5-rdmav34.so"] {
        if !Path::new(f).exists() {
            testkit::skip(testkit::Need::Tool, format!("{f} missing (apt-get install libibverbs-dev ibverbs-providers)"));
            return;
        }
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../gdr/tools/stock-cuda-check.sh");
    let lib = common::preload();
    let target_dir = lib.parent().and_then(Path::parent).expect("target dir above the profile dir");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("stock-cuda-pack");
    let pack = Command::new("bash").arg(&script).arg("--pack").arg(&dir).env("CARGO_TARGET_DIR", target_dir).output().expect("run the script");
    let pack_out = format!("{}{}", String::from_utf8_lossy(&pack.stdout), String::from_utf8_lossy(&pack.stderr));
    assert!(pack.status.success(), "stock-cuda-check.sh --pack: {}\n{pack_out}", pack.status);
    let mut total = 0;
    for f in ["cuda_dmabuf_write", "libdoorbell_preload.so", "lib/libibverbs.so.1", "lib/libmlx5-rdmav34.so", "lib/libnl-3.so.200"] {
        let m = std::fs::symlink_metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f} not packed ({e})\n{pack_out}"));
        assert!(m.file_type().is_file(), "{f} is not a plain file (the carried folder must hold no links)");
    }
    for e in std::fs::read_dir(&dir).unwrap().chain(std::fs::read_dir(dir.join("lib")).unwrap()) {
        let m = e.unwrap().metadata().unwrap();
        if m.is_file() {
            total += m.len();
        }
    }
    // A few MB: the stripped shim is about 2 MB, rdma-core's four libraries about 1.4 MB.
    assert!(total < 8 << 20, "the packed directory holds {total} bytes\n{pack_out}");

    let hide = can_unshare_mounts();
    let mut cmd = Command::new("bash");
    cmd.arg(&script);
    if hide {
        cmd.arg("--hide-system");
    } else {
        eprintln!("note: no private mount namespace here (needs root): the packed run is not isolated from the system's rdma-core");
    }
    let out = cmd.arg(&dir).env_remove("RDMAV_DRIVERS").env_remove("LD_LIBRARY_PATH").output().expect("run the script");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = format!("{}\n{text}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    if hide {
        assert!(text.contains("hidden: /etc/libibverbs.d (0 entries now)"), "{report}");
    }
    let using: Vec<&str> = text.lines().filter_map(|l| l.strip_prefix("USING ")).collect();
    let dir_s = dir.to_str().unwrap();
    for want in ["/lib/libibverbs.so.1", "/lib/libmlx5-rdmav34.so", "/lib/libnl-3.so.200", "/lib/libnl-route-3.so.200"] {
        assert!(using.contains(&format!("{dir_s}{want}").as_str()), "{dir_s}{want} not in use\n{report}");
    }
    if hide {
        assert!(using.iter().all(|p| p.starts_with(dir_s)), "a library from outside the packed directory\n{report}");
    }
    assert!(text.contains("CHECK nccl_probe PASS\n"), "{report}");
    let code = out.status.code();
    if libcuda_loads() {
        assert!(matches!(code, Some(0 | 77)), "{report}");
    } else {
        assert_eq!(code, Some(77), "{report}");
        assert!(text.contains("SKIP: no libcuda.so.1"), "{report}");
    }
}
