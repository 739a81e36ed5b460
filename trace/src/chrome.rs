//! The merged timeline as Chrome Trace Event JSON (the "JSON Object Format": a
//! `traceEvents` array and `displayTimeUnit`), which Perfetto and chrome://tracing open.
//!
//! - per process: `M` `process_name` (the program and its arguments) and, per thread,
//!   `M` `thread_name`;
//! - a span (each enter..exit): an `X` complete event, `dur` = its time entered;
//! - an event: an `i` instant event scoped to its thread (`s: "t"`), or, when an arrow
//!   starts or ends at it, an `X` of 1 ns (flows bind to slices, not instants);
//! - an arrow of [`crate::flows`]: an `s` (start) at the cause and an `f` (finish, with
//!   `bp: "e"`, binding to the enclosing slice) at the effect, sharing one `id` and the
//!   category `flow`.
//!
//! `args` are the record's fields, plus `message`. Timestamps are microseconds (the
//! format's unit) from the first record, with nanosecond fractions.

use serde_json::{json, Map, Value};

use crate::flows::{link, Flow};
use crate::jsonl::{Kind, Proc, Rec};

/// The duration of a record an arrow ends at (1 ns, in the format's microseconds).
pub const ARROW_END_DUR_US: f64 = 0.001;

/// Every record of every process, sorted by time.
pub fn merged(procs: &[Proc]) -> Vec<Rec> {
    let mut all: Vec<Rec> = procs.iter().flat_map(|p| p.recs.iter().cloned()).collect();
    all.sort_by_key(|r| (r.ts, r.pid, r.tid));
    all
}

fn args(r: &Rec) -> Value {
    let mut a: Map<String, Value> = r.fields.clone();
    if !r.msg.is_empty() {
        a.insert("message".into(), Value::String(r.msg.clone()));
    }
    Value::Object(a)
}

/// A record's display name: the message for events ("wqe", "tx"), the span's name.
pub fn label(r: &Rec) -> String {
    match r.kind {
        Kind::Span => r.name.clone(),
        Kind::Event if !r.msg.is_empty() => r.msg.chars().take(80).collect(),
        Kind::Event => r.name.clone(),
    }
}

/// The Chrome Trace Event document of `procs`.
pub fn document(procs: &[Proc]) -> Value {
    let recs = merged(procs);
    let flows = link(&recs);
    document_of(procs, &recs, &flows)
}

pub fn document_of(procs: &[Proc], recs: &[Rec], flows: &[Flow]) -> Value {
    let mut ev = Vec::new();
    events(procs, recs, flows, &mut |e| {
        ev.push(e);
        Ok(())
    })
    .expect("collecting cannot fail");
    json!({"traceEvents": ev, "displayTimeUnit": "ns"})
}

/// Writes the document of `procs` to `w` one event at a time (a long run's document is
/// never held whole in memory).
pub fn write(procs: &[Proc], w: &mut impl std::io::Write) -> std::io::Result<usize> {
    let recs = merged(procs);
    let flows = link(&recs);
    let mut n = 0;
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
    events(procs, &recs, &flows, &mut |e| {
        if n > 0 {
            w.write_all(b",\n")?;
        }
        n += 1;
        serde_json::to_writer(&mut *w, &e).map_err(std::io::Error::other)
    })?;
    w.write_all(b"\n]}\n")?;
    Ok(n)
}

/// Every event of the document, in order, to `emit`.
fn events(procs: &[Proc], recs: &[Rec], flows: &[Flow], emit: &mut dyn FnMut(Value) -> std::io::Result<()>) -> std::io::Result<()> {
    let t0 = recs.iter().map(|r| r.ts).min().unwrap_or(0);
    let us = |ns: u64| (ns.saturating_sub(t0)) as f64 / 1000.0;
    for p in procs {
        let mut name = if p.argv.is_empty() { p.exe.clone() } else { p.argv.join(" ") };
        if let Some(r) = &p.rank {
            name = format!("rank {r}: {name}");
        }
        emit(json!({"ph": "M", "name": "process_name", "pid": p.pid, "tid": 0, "args": {"name": name}}))?;
        let mut threads: Vec<(u64, &str)> = p.recs.iter().map(|r| (r.tid, r.thread.as_str())).collect();
        threads.sort();
        threads.dedup_by_key(|t| t.0);
        for (tid, tname) in threads {
            emit(json!({"ph": "M", "name": "thread_name", "pid": p.pid, "tid": tid, "args": {"name": tname}}))?;
        }
    }
    // Records an arrow starts or ends at are slices of one nanosecond rather than
    // instants: both viewers bind flow events to a slice enclosing the flow event's time
    // on its thread (Perfetto's JSON importer to the open slice, chrome://tracing to an
    // enclosing slice; neither to an instant).
    let mut ends = vec![false; recs.len()];
    for f in flows {
        ends[f.from] = true;
        ends[f.to] = true;
    }
    for (i, r) in recs.iter().enumerate() {
        let cat = r.target.clone();
        if r.kind == Kind::Event && ends[i] {
            emit(json!({"ph": "X", "name": label(r), "cat": cat, "pid": r.pid, "tid": r.tid,
                "ts": us(r.ts), "dur": ARROW_END_DUR_US, "args": args(r)}))?;
            continue;
        }
        match r.kind {
            Kind::Span => emit(json!({"ph": "X", "name": label(r), "cat": cat, "pid": r.pid, "tid": r.tid,
                "ts": us(r.ts), "dur": (r.end.saturating_sub(r.ts)) as f64 / 1000.0, "args": args(r)}))?,
            Kind::Event => emit(json!({"ph": "i", "s": "t", "name": label(r), "cat": cat, "pid": r.pid, "tid": r.tid,
                "ts": us(r.ts), "args": args(r)}))?,
        }
    }
    for (n, f) in flows.iter().enumerate() {
        let (a, b) = (&recs[f.from], &recs[f.to]);
        let name = format!("{} -> {}", a.target, b.target);
        emit(json!({"ph": "s", "id": n + 1, "name": name, "cat": "flow", "pid": a.pid, "tid": a.tid, "ts": us(a.ts)}))?;
        emit(json!({"ph": "f", "bp": "e", "id": n + 1, "name": name, "cat": "flow", "pid": b.pid, "tid": b.tid, "ts": us(b.ts)}))?;
    }
    Ok(())
}
