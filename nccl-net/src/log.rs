//! Log lines go to NCCL's logger (kept at init), so they appear in `NCCL_DEBUG` output
//! with NCCL's prefix and filtering; before init, or in a program that passed no
//! logger, warnings go to stderr.

use std::ffi::{c_int, CString};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::sys::{ncclDebugLogger_t, NCCL_LOG_INFO, NCCL_LOG_TRACE, NCCL_LOG_WARN, NCCL_NET};

/// NCCL's logger as an address (0: none).
static LOGGER: AtomicUsize = AtomicUsize::new(0);

/// Keeps NCCL's logger for every later line.
pub fn set_logger(f: ncclDebugLogger_t) {
    LOGGER.store(f.map_or(0, |f| f as usize), Ordering::Release);
}

fn emit(level: c_int, file: &'static str, line: u32, msg: &str) {
    let p = LOGGER.load(Ordering::Acquire);
    if p == 0 {
        if level == NCCL_LOG_WARN || std::env::var_os("DOORBELL_NCCL_DEBUG").is_some() {
            eprintln!("NET/doorbell {file}:{line} {msg}");
        }
        return;
    }
    // SAFETY: p was stored from a non-null ncclDebugLogger_t by set_logger, and
    // function pointers and usize have the same size.
    let f: unsafe extern "C" fn(c_int, std::ffi::c_ulong, *const std::ffi::c_char, c_int, *const std::ffi::c_char, ...) =
        unsafe { std::mem::transmute(p) };
    let text = CString::new(format!("NET/doorbell : {msg}").replace('\0', " ")).unwrap_or_default();
    let file = CString::new(file).unwrap_or_default();
    // SAFETY: NCCL's logger takes a printf format; "%s" with one NUL-terminated string
    // consumes exactly the one argument passed.
    unsafe { f(level, NCCL_NET, file.as_ptr(), line as c_int, c"%s".as_ptr(), text.as_ptr()) };
}

/// A warning (`NCCL_DEBUG=WARN` shows it).
pub fn warn(file: &'static str, line: u32, msg: &str) {
    emit(NCCL_LOG_WARN, file, line, msg)
}

/// An info line (`NCCL_DEBUG=INFO`).
pub fn info(file: &'static str, line: u32, msg: &str) {
    emit(NCCL_LOG_INFO, file, line, msg)
}

/// A trace line (`NCCL_DEBUG=TRACE`, in NCCL builds with tracing).
pub fn trace(file: &'static str, line: u32, msg: &str) {
    emit(NCCL_LOG_TRACE, file, line, msg)
}

/// `warn!("...", args)`: a warning with this file and line.
#[macro_export]
macro_rules! warn {
    ($($t:tt)*) => { $crate::log::warn(file!(), line!(), &format!($($t)*)) };
}

/// `info!("...", args)`.
#[macro_export]
macro_rules! info {
    ($($t:tt)*) => { $crate::log::info(file!(), line!(), &format!($($t)*)) };
}

/// Forwards doorbell's own diagnostics (the provider's and softhca's `tracing` events:
/// a failed deregistration, a device thread's error) to NCCL's logger: warnings and
/// errors always, everything down to debug with `DOORBELL_NCCL_DEBUG` set. Installed
/// by init as this library's global subscriber (the library's `tracing` is its own
/// copy, so the host program's subscriber, if any, is not affected).
pub struct ToNccl {
    verbose: bool,
}

impl ToNccl {
    /// Installs the forwarder (once; later calls do nothing).
    pub fn install() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let verbose = std::env::var_os("DOORBELL_NCCL_DEBUG").is_some();
            let _ = tracing::subscriber::set_global_default(ToNccl { verbose });
        });
    }
}

struct Fields(String);

impl tracing::field::Visit for Fields {
    fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
        use std::fmt::Write;
        if f.name() == "message" {
            let _ = write!(self.0, "{v:?} ");
        } else {
            let _ = write!(self.0, "{}={v:?} ", f.name());
        }
    }
}

impl tracing::Subscriber for ToNccl {
    fn enabled(&self, m: &tracing::Metadata<'_>) -> bool {
        *m.level() <= if self.verbose { tracing::Level::DEBUG } else { tracing::Level::WARN }
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, e: &tracing::Event<'_>) {
        let m = e.metadata();
        let mut f = Fields(format!("{}: ", m.target()));
        e.record(&mut f);
        let level = if *m.level() <= tracing::Level::WARN { NCCL_LOG_WARN } else { NCCL_LOG_INFO };
        emit(level, m.file().unwrap_or("doorbell"), m.line().unwrap_or(0), f.0.trim_end());
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}
