//! Stock libibverbs' `ibv_reg_dmabuf_mr` on softhca, through libdoorbell_preload.so,
//! with a real dma-buf: `tests/c/dmabuf_write.c` (built here with `cc ... -libverbs`,
//! DRM uapi from libdrm-dev's headers) runs inside the QEMU guest of tests/vm/rxe-vm.sh,
//! the only place with vgem. It makes NCCL's dma-buf probe (fd -1 must fail with EBADF),
//! registers 32 KiB of a vgem buffer, RDMA WRITEs into it from a second QP and checks the
//! bytes through its own mapping, RDMA READs from it, SENDs into a receive buffer in it,
//! does a FETCH_AND_ADD on it, then writes across the MR's end and checks that the
//! completion is REMOTE_ACCESS_ERR and that no byte changed.
//!
//! SKIP when cc or the headers are missing, or when the VM is not set up; with
//! `DOORBELL_REQUIRE_VM=1` (CI) a missing VM fails instead.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn vm_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vm/rxe-vm.sh")
}

/// `Ok(())` when `rxe-vm.sh --check` says the VM can run, else its reason.
fn vm_available() -> Result<(), String> {
    let out = Command::new(vm_script()).arg("--check").output().map_err(|e| format!("cannot run {}: {e}", vm_script().display()))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Err(text.strip_prefix("rxe-vm: unavailable: ").unwrap_or(&text).to_string())
}

/// Builds dmabuf_write.c where the guest sees it (the target directory, not the host's
/// /tmp, which the guest does not share); None after a SKIP line.
fn build() -> Option<PathBuf> {
    for h in ["/usr/include/infiniband/verbs.h", "/usr/include/libdrm/drm_mode.h"] {
        if !Path::new(h).exists() {
            testkit::skip(testkit::Need::Tool, format!("{h} missing (apt-get install libibverbs-dev libdrm-dev; tests/vm/rxe-vm.sh --setup installs both)"));
            return None;
        }
    }
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/c/dmabuf_write.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dmabuf_write");
    let out = match Command::new("cc").args(["-Wall", "-O1", "-I/usr/include/libdrm", "-o"]).arg(&exe).arg(&src).arg("-libverbs").output() {
        Ok(o) => o,
        Err(e) => {
            testkit::skip(testkit::Need::Tool, format!("cannot run cc ({e}) (apt-get install gcc)"));
            return None;
        }
    };
    assert!(out.status.success(), "building {}:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    Some(exe)
}

#[test]
fn ibv_reg_dmabuf_mr_on_a_vgem_buffer_in_the_guest() {
    let Some(exe) = build() else { return };
    if let Err(reason) = vm_available() {
        testkit::skip(testkit::Need::Vm, format!("rxe VM unavailable: {reason} (run tests/vm/rxe-vm.sh --setup)"));
        return;
    }
    let lib = common::preload();
    // rxe0 holds UDP port 4791 on every address of the guest's initial network namespace
    // (Linux 6.1's rdma_rxe opens its socket at module load): the program, and the
    // softhca instance the preload library starts in it, get a namespace of their own.
    let out = Command::new(vm_script())
        .args(["--", "unshare", "--net", "sh", "-c", "ip link set lo up && exec env LD_PRELOAD=\"$1\" \"$2\"", "sh"])
        .arg(&lib).arg(&exe)
        .output().expect("run rxe-vm.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let mut problems = Vec::new();
    for name in ["nccl_probe", "register", "write", "read", "send", "fetch_add", "oob_write"] {
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
