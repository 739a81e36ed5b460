//! `doorbell softhca [OPTIONS] [--] CMD [ARGS...]`: runs an unmodified rdma-core program
//! (ibv_devinfo, ibv_rc_pingpong, perftest...) on softhca.
//!
//! It finds `libdoorbell_preload.so` (next to this executable, where `cargo build` puts
//! it), appends it to `LD_PRELOAD` and execs the command. The library does the rest in
//! every process that loads it: it gives each process its own softhca instance, writes
//! a sysfs tree for it in a private directory and points `SYSFS_PATH` there (so any
//! `SYSFS_PATH` set here is replaced in the programs), makes the NETLINK_RDMA socket fail
//! so libibverbs reads that tree, and serves `/dev/infiniband/uverbs0`. See
//! docs/rdma-core-on-softhca.md.

use std::ffi::{OsStr, OsString};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _, Result};

/// The library's file name.
pub const PRELOAD_LIB: &str = "libdoorbell_preload.so";

#[derive(clap::Args)]
pub struct Args {
    /// Answer every ioctl with ENOTTY, like a kernel without the ioctl interface: all
    /// commands then travel as write() (sets DOORBELL_PRELOAD_NO_IOCTL=1).
    #[arg(long)]
    no_ioctl: bool,
    /// Log every intercepted ioctl/write/mmap with its answer to stderr
    /// (sets DOORBELL_PRELOAD_TRACE=1).
    #[arg(long)]
    trace: bool,
    /// The address of the instance (DOORBELL_SOFTHCA_ADDR); default: the first free
    /// 127.0.0.N, a different one for each process.
    #[arg(long, value_name = "IP")]
    addr: Option<String>,
    /// The preload library to use (default: next to this executable).
    #[arg(long, value_name = "PATH")]
    preload: Option<PathBuf>,
    /// The program to run and its arguments.
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true, value_name = "CMD")]
    cmd: Vec<OsString>,
}

/// Where the library is looked for, in order.
fn candidates() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(p) = std::env::var_os("DOORBELL_PRELOAD_LIB") {
        v.push(PathBuf::from(p));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            v.push(dir.join(PRELOAD_LIB));
            // target/<profile>/deps or examples: the library is one level up.
            if let Some(up) = dir.parent() {
                v.push(up.join(PRELOAD_LIB));
            }
        }
    }
    v
}

/// The preload library to use: `explicit`, else the first candidate that exists.
pub fn find_preload(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        if !p.is_file() {
            bail!("{}: no such file", p.display());
        }
        return Ok(p.canonicalize().unwrap_or_else(|_| p.to_path_buf()));
    }
    let tried = candidates();
    for p in &tried {
        if p.is_file() {
            return Ok(p.canonicalize().unwrap_or_else(|_| p.clone()));
        }
    }
    let list: Vec<String> = tried.iter().map(|p| p.display().to_string()).collect();
    bail!(
        "{PRELOAD_LIB} not found (looked at: {}).\n\
         Build it with `cargo build -p softhca-preload` (a plain `cargo build` in the doorbell \
         workspace builds it next to the doorbell binary), or pass --preload PATH.",
        list.join(", ")
    )
}

/// `LD_PRELOAD` with `lib` appended to `current` (unless already listed).
pub fn ld_preload_value(current: Option<&OsStr>, lib: &Path) -> OsString {
    let lib = lib.as_os_str();
    match current {
        Some(c) if !c.is_empty() => {
            let s = c.to_string_lossy();
            if s.split([' ', ':']).any(|e| OsStr::new(e) == lib) {
                return c.to_os_string();
            }
            let mut v = c.to_os_string();
            v.push(":");
            v.push(lib);
            v
        }
        _ => lib.to_os_string(),
    }
}

pub fn run(a: &Args) -> Result<()> {
    let lib = find_preload(a.preload.as_deref())?;
    let (prog, rest) = a.cmd.split_first().context("no command given")?;
    let mut cmd = Command::new(prog);
    cmd.args(rest);
    cmd.env("LD_PRELOAD", ld_preload_value(std::env::var_os("LD_PRELOAD").as_deref(), &lib));
    if a.no_ioctl {
        cmd.env("DOORBELL_PRELOAD_NO_IOCTL", "1");
    }
    if a.trace {
        cmd.env("DOORBELL_PRELOAD_TRACE", "1");
    }
    if let Some(addr) = &a.addr {
        cmd.env("DOORBELL_SOFTHCA_ADDR", addr);
    }
    // exec only returns on failure.
    let e = cmd.exec();
    bail!("cannot run {}: {e}", Path::new(prog).display())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ld_preload_is_appended_once() {
        let lib = Path::new("/x/libdoorbell_preload.so");
        assert_eq!(ld_preload_value(None, lib), OsString::from("/x/libdoorbell_preload.so"));
        assert_eq!(ld_preload_value(Some(OsStr::new("")), lib), OsString::from("/x/libdoorbell_preload.so"));
        assert_eq!(ld_preload_value(Some(OsStr::new("/a.so")), lib), OsString::from("/a.so:/x/libdoorbell_preload.so"));
        assert_eq!(ld_preload_value(Some(OsStr::new("/a.so /x/libdoorbell_preload.so")), lib),
                   OsString::from("/a.so /x/libdoorbell_preload.so"));
    }

    #[test]
    fn missing_library_says_how_to_build_it() {
        let e = find_preload(Some(Path::new("/nonexistent/libdoorbell_preload.so"))).unwrap_err();
        assert!(e.to_string().contains("no such file"));
    }
}
