//! What the three study examples share: the no-driver exit, checked CUDA calls, and the
//! way numbers are printed.
//!
//! Each example is built on machines without a GPU (CI, this repository's build machine),
//! so the first thing each does is ask whether the driver is there; without it it prints
//! one line on stderr, naming the example and what is missing, and exits with
//! [`EXIT_NO_DRIVER`]. `gdr/tests/examples_no_driver.rs` holds them to that.

#![allow(dead_code)] // each example uses a different part of this module

use std::ffi::CStr;
use std::fmt::Display;
use std::time::Duration;

use cudarc::driver::sys;

/// The exit status of an example that found no NVIDIA driver: distinct from 0 (ran),
/// 1 (a step failed) and 2 (bad arguments), so that a script can tell "not a GPU node"
/// from "broken".
pub const EXIT_NO_DRIVER: i32 = 3;

/// Prints `<example>: <why>` on stderr and exits with [`EXIT_NO_DRIVER`].
pub fn exit_no_driver(example: &str, why: impl Display) -> ! {
    let line = why.to_string().replace('\n', " ");
    eprintln!("{example}: {line}");
    std::process::exit(EXIT_NO_DRIVER);
}

/// Asks for the CUDA driver (`gdr::cuda::probe`) and exits through [`exit_no_driver`]
/// when it is absent; any other failure of `cuInit` is a failed step (exit 1).
pub fn require_cuda(example: &str) {
    match gdr::cuda::probe() {
        Ok(()) => {}
        Err(e @ gdr::Error::NoDriver) => exit_no_driver(example, e),
        Err(e) => {
            eprintln!("{example}: {e}");
            std::process::exit(1);
        }
    }
}

/// The driver's name for a result code (`CUDA_ERROR_INVALID_VALUE`), or its number.
pub fn cu_error_name(r: sys::CUresult) -> String {
    let mut p: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: cuGetErrorName writes a pointer to a static NUL-terminated string, or
    // leaves it null and returns CUDA_ERROR_INVALID_VALUE for an unknown code.
    let ok = unsafe { sys::cuGetErrorName(r, &mut p) };
    if ok == sys::CUresult::CUDA_SUCCESS && !p.is_null() {
        // SAFETY: non-null, static and NUL-terminated, as above.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    } else {
        format!("CUresult {}", r as u32)
    }
}

/// A driver call's result as `Result`, the error naming the call and the code.
pub fn cu(call: &str, r: sys::CUresult) -> Result<(), String> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(format!("{call}: {}", cu_error_name(r)))
    }
}

/// `cuDeviceGetAttribute`, or the error as text.
pub fn device_attribute(dev: sys::CUdevice, attr: sys::CUdevice_attribute) -> Result<i32, String> {
    let mut v = 0i32;
    // SAFETY: writes one int; `dev` came from the driver, `attr` is a valid enum value.
    cu("cuDeviceGetAttribute", unsafe {
        sys::cuDeviceGetAttribute(&mut v, attr, dev)
    })?;
    Ok(v)
}

/// `(free, total)` device memory of the current context, from `cuMemGetInfo`.
pub fn mem_info() -> Result<(usize, usize), String> {
    let (mut free, mut total) = (0usize, 0usize);
    // SAFETY: writes two size_t; a context is current (the caller bound one).
    cu("cuMemGetInfo", unsafe {
        sys::cuMemGetInfo_v2(&mut free, &mut total)
    })?;
    Ok((free, total))
}

/// Lower-case hex of `bytes`, two digits a byte.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a hex string made by [`hex`], or why it is not one.
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if s.len() % 2 != 0 {
        return Err(format!("odd number of hex digits ({})", s.len()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("not hex: {:?}", &s[i..i + 2]))
        })
        .collect()
}

/// A size in binary units, as the examples print sizes (`64 MiB`, `4 KiB`, `100 B`).
pub fn size(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{} {name}", bytes / unit);
        }
    }
    for (unit, name) in UNITS {
        if bytes >= unit {
            return format!("{:.1} {name}", bytes as f64 / unit as f64);
        }
    }
    format!("{bytes} B")
}

/// A duration in the unit that keeps three or four digits (`12.3 us`, `4.56 ms`).
pub fn dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.1} us")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.3} s", us / 1e6)
    }
}

/// Bytes over time in GB/s (10^9 bytes a second, as nvidia's bandwidth tests print).
pub fn gbps(bytes: usize, d: Duration) -> String {
    let s = d.as_secs_f64();
    if s <= 0.0 {
        return "-".into();
    }
    format!("{:.2} GB/s", bytes as f64 / s / 1e9)
}

/// Whether libcuda exports `name`. cudarc resolves each symbol at its first call and
/// panics when it is missing, so a call added in a recent driver (the `_v2` entry points
/// of CUDA 12.2 and later) is checked first.
pub fn has_cuda_symbol(name: &str) -> bool {
    // SAFETY: only after `require_cuda` (the library loads); looks a symbol up without
    // calling it.
    unsafe { sys::culib().get::<*const ()>(name.as_bytes()) }.is_ok()
}
