//! The recording layer: every event and span of the driver's targets to `DIR/<pid>.jsonl`.
//!
//! Each event is formatted into one JSON line on the thread that emits it (the format is
//! [`crate::jsonl`]'s) and appended to a per-process buffer. The buffer reaches the file
//! when it holds [`FLUSH_BYTES`] (so memory stays bounded however long the run), every
//! [`FLUSH_EVERY`] (a background thread, so a program stopped by Ctrl-C or blocked in a
//! wait still leaves what it did) and at exit (an `atexit` hook). A forked
//! child that keeps running the same image notices the fork (a `pthread_atfork` handler)
//! and starts its own file instead of writing its parent's buffer twice.

use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use crate::jsonl::{escape, escape_into};

/// Buffered bytes that make the next record flush them to the file.
pub const FLUSH_BYTES: usize = 1 << 20;

/// The background flush's period: what a process killed by a signal can lose.
pub const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// The targets recorded, all at TRACE: every layer's (see the table in
/// softhca/src/device/trace.rs) and the preload shim's decoded kernel calls.
pub const TARGETS: &[&str] = &["provider", "softhca", "uverbs", "devx", "doorbell_preload", "collective", "gdr", "doorbell"];

/// The per-layer filter of [`RecordLayer`]: [`TARGETS`] at TRACE, nothing else.
pub fn targets() -> Targets {
    Targets::new().with_targets(TARGETS.iter().map(|t| (*t, LevelFilter::TRACE)))
}

struct Sink {
    dir: PathBuf,
    file: Option<File>,
    buf: Vec<u8>,
    pid: u32,
}

impl Sink {
    fn open(&mut self) {
        self.pid = std::process::id();
        let path = self.dir.join(format!("{}.jsonl", self.pid));
        self.file = OpenOptions::new().create(true).append(true).open(&path).ok();
        if self.file.is_none() {
            eprintln!("doorbell-trace: cannot create {}: tracing off in this process", path.display());
        }
        let exe = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default();
        let mut l = format!("{{\"k\":\"proc\",\"pid\":{},\"exe\":\"{}\",\"argv\":[", self.pid, escape(&exe));
        for (i, a) in std::env::args_os().enumerate() {
            let _ = write!(l, "{}\"{}\"", if i > 0 { "," } else { "" }, escape(&a.to_string_lossy()));
        }
        l.push(']');
        // A launcher's rank (torchrun's / doorbell allreduce's RANK, mpirun's), to name
        // the process's track.
        if let Some(r) = ["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK"].iter().find_map(|k| std::env::var(k).ok()) {
            let _ = write!(l, ",\"rank\":\"{}\"", escape(&r));
        }
        l.push_str("}\n");
        self.buf.extend_from_slice(l.as_bytes());
    }

    fn flush(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.write_all(&self.buf);
        }
        self.buf.clear();
    }
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);
static FORKED: AtomicBool = AtomicBool::new(false);
static HOOKS: Once = Once::new();
/// The process whose background flusher runs (a forked child has none until it starts
/// its own).
static FLUSHER_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Starts this process's background flusher unless it runs already.
fn start_flusher() {
    let pid = std::process::id();
    if FLUSHER_PID.swap(pid, Ordering::Relaxed) == pid {
        return;
    }
    let r = std::thread::Builder::new().name("doorbell-trace-flush".into()).spawn(|| loop {
        std::thread::sleep(FLUSH_EVERY);
        let mut g = SINK.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = g.as_mut() {
            if s.pid == std::process::id() && !s.buf.is_empty() {
                s.flush();
            }
        }
    });
    if r.is_err() {
        FLUSHER_PID.store(0, Ordering::Relaxed);
    }
}

extern "C" fn flush_at_exit() {
    if let Ok(mut s) = SINK.lock() {
        if let Some(s) = s.as_mut() {
            s.flush();
        }
    }
}

extern "C" fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

fn append(line: &str) {
    let mut g = SINK.lock().unwrap_or_else(|p| p.into_inner());
    let Some(s) = g.as_mut() else { return };
    if FORKED.swap(false, Ordering::Relaxed) {
        // The parent's records are the parent's to write.
        s.buf.clear();
        s.open();
        drop(g);
        start_flusher();
        return append(line);
    }
    s.buf.extend_from_slice(line.as_bytes());
    if s.buf.len() >= FLUSH_BYTES {
        s.flush();
    }
}

/// Writes what is buffered (tests, and programs that end with `_exit`).
pub fn flush() {
    flush_at_exit();
}

/// The recording layer, if [`crate::DIR_ENV`] names a directory (created if missing).
pub fn layer_from_env() -> Option<RecordLayer> {
    let dir = std::env::var_os(crate::DIR_ENV).filter(|d| !d.is_empty())?;
    RecordLayer::new(Path::new(&dir))
}

/// See the module documentation. Give it [`targets`] as its per-layer filter.
pub struct RecordLayer(());

impl RecordLayer {
    pub fn new(dir: &Path) -> Option<RecordLayer> {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("doorbell-trace: {}: {e}: tracing off", dir.display());
            return None;
        }
        let mut s = Sink { dir: dir.to_path_buf(), file: None, buf: Vec::with_capacity(FLUSH_BYTES + 4096), pid: 0 };
        s.open();
        s.file.as_ref()?;
        *SINK.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
        start_flusher();
        HOOKS.call_once(|| {
            // SAFETY: both handlers take no arguments and touch only statics; atexit and
            // pthread_atfork have no other preconditions.
            unsafe {
                libc::atexit(flush_at_exit);
                libc::pthread_atfork(None, None, Some(after_fork_in_child));
            }
        });
        Some(RecordLayer(()))
    }
}

/// CLOCK_MONOTONIC in nanoseconds: one clock for every process of the host, unlike
/// `Instant`, whose origin is private.
pub fn now_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Appends `"tid":N,"thread":"name"`, computed once per thread (gettid is a system call).
fn thread_part(out: &mut String) {
    thread_local! {
        static PART: RefCell<Option<String>> = const { RefCell::new(None) };
    }
    PART.with(|p| {
        let mut p = p.borrow_mut();
        let part = p.get_or_insert_with(|| {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() };
            let cur = std::thread::current();
            let name = cur.name().map(str::to_owned).unwrap_or_else(|| format!("thread-{tid}"));
            format!("\"tid\":{tid},\"thread\":\"{}\"", escape(&name))
        });
        out.push_str(part);
    })
}

/// Fields as a JSON object's members (without braces); `message` kept apart.
#[derive(Default)]
struct Fields {
    json: String,
    message: Option<String>,
}

impl Fields {
    fn key(&mut self, f: &Field) {
        if !self.json.is_empty() {
            self.json.push(',');
        }
        self.json.push('"');
        escape_into(&mut self.json, f.name());
        self.json.push_str("\":");
    }

    fn string(&mut self, v: &str) {
        self.json.push('"');
        escape_into(&mut self.json, v);
        self.json.push('"');
    }
}

impl Visit for Fields {
    fn record_u64(&mut self, f: &Field, v: u64) {
        self.key(f);
        let _ = write!(self.json, "{v}");
    }
    fn record_i64(&mut self, f: &Field, v: i64) {
        self.key(f);
        let _ = write!(self.json, "{v}");
    }
    fn record_bool(&mut self, f: &Field, v: bool) {
        self.key(f);
        let _ = write!(self.json, "{v}");
    }
    fn record_f64(&mut self, f: &Field, v: f64) {
        self.key(f);
        if v.is_finite() {
            let _ = write!(self.json, "{v}");
        } else {
            let _ = write!(self.json, "\"{v}\"");
        }
    }
    fn record_str(&mut self, f: &Field, v: &str) {
        if f.name() == "message" {
            self.message = Some(v.to_owned());
            return;
        }
        self.key(f);
        self.string(v);
    }
    fn record_debug(&mut self, f: &Field, v: &dyn fmt::Debug) {
        let s = format!("{v:?}");
        if f.name() == "message" {
            self.message = Some(s);
            return;
        }
        self.key(f);
        self.string(&s);
    }
}

/// What a span keeps between its creation and its exit.
struct SpanData {
    fields: Fields,
    entered: Vec<u64>,
}

/// Appends the callsite's `"target","level","name"`.
fn meta_part(l: &mut String, m: &tracing::Metadata<'_>) {
    l.push_str(",\"target\":\"");
    escape_into(l, m.target());
    let _ = write!(l, "\",\"level\":\"{}\",\"name\":\"", m.level());
    escape_into(l, m.name());
    l.push('"');
}

/// Appends `,"msg":...,"fields":{...}}` and the newline.
fn tail(l: &mut String, fields: &Fields) {
    if let Some(m) = &fields.message {
        l.push_str(",\"msg\":\"");
        escape_into(l, m);
        l.push('"');
    }
    l.push_str(",\"fields\":{");
    l.push_str(&fields.json);
    l.push_str("}}\n");
}

impl<S> Layer<S> for RecordLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanData { fields, entered: Vec::new() });
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(d) = span.extensions_mut().get_mut::<SpanData>() {
                values.record(&mut d.fields);
            }
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(d) = span.extensions_mut().get_mut::<SpanData>() {
                d.entered.push(now_ns());
            }
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let end = now_ns();
        let Some(span) = ctx.span(id) else { return };
        let parent = span.parent().map(|p| p.id().into_u64());
        let mut l = String::with_capacity(256);
        {
            let mut ext = span.extensions_mut();
            let Some(d) = ext.get_mut::<SpanData>() else { return };
            let Some(start) = d.entered.pop() else { return };
            let _ = write!(l, "{{\"k\":\"span\",\"ts\":{start},\"end\":{end},");
            thread_part(&mut l);
            meta_part(&mut l, span.metadata());
            let _ = write!(l, ",\"id\":{}", id.into_u64());
            if let Some(p) = parent {
                let _ = write!(l, ",\"parent\":{p}");
            }
            tail(&mut l, &d.fields);
        }
        append(&l);
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let ts = now_ns();
        let mut fields = Fields { json: String::with_capacity(160), message: None };
        event.record(&mut fields);
        let mut l = String::with_capacity(256 + fields.json.len());
        let _ = write!(l, "{{\"k\":\"ev\",\"ts\":{ts},");
        thread_part(&mut l);
        meta_part(&mut l, event.metadata());
        if let Some(s) = ctx.event_span(event) {
            let _ = write!(l, ",\"span\":{}", s.id().into_u64());
        }
        tail(&mut l, &fields);
        append(&l);
    }
}
