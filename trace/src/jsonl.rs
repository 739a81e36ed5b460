//! The record files' format, defined once: `DIR/<pid>.jsonl`, one JSON object a line.
//!
//! | `k`    | keys                                                                      |
//! |--------|---------------------------------------------------------------------------|
//! | `proc` | `pid`, `exe`, `argv`, `rank` (a launcher's RANK, if set): the first line of every file |
//! | `ev`   | `ts` (CLOCK_MONOTONIC ns), `tid`, `thread`, `target`, `level`, `name` (the callsite), `msg`, `fields`, `span` (the enclosing span's id, if any) |
//! | `span` | `ts` (entered), `end` (exited), `tid`, `thread`, `target`, `level`, `name`, `id`, `parent`, `msg`, `fields`: one line per enter/exit |

use std::path::Path;

use serde_json::{Map, Value};

/// JSON string escaping (RFC 8259 section 7).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    escape_into(&mut o, s);
    o
}

/// [`escape`], appending to `o` (the recording layer's lines are built in place).
pub fn escape_into(o: &mut String, s: &str) {
    if !s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        o.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            '\r' => o.push_str("\\r"),
            '\t' => o.push_str("\\t"),
            c if (c as u32) < 0x20 => o.push_str(&format!("\\u{:04x}", c as u32)),
            c => o.push(c),
        }
    }
}

/// One record of one process.
#[derive(Debug, Clone)]
pub struct Rec {
    pub pid: u32,
    pub kind: Kind,
    pub ts: u64,
    /// Spans: the exit time.
    pub end: u64,
    pub tid: u64,
    pub thread: String,
    pub target: String,
    pub name: String,
    pub msg: String,
    pub fields: Map<String, Value>,
    pub id: Option<u64>,
    pub parent: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Event,
    Span,
}

impl Rec {
    pub fn u64(&self, k: &str) -> Option<u64> {
        self.fields.get(k).and_then(Value::as_u64)
    }
    pub fn str(&self, k: &str) -> Option<&str> {
        self.fields.get(k).and_then(Value::as_str)
    }
}

/// A process's file: its `proc` line and its records.
#[derive(Debug, Clone)]
pub struct Proc {
    pub pid: u32,
    pub exe: String,
    pub argv: Vec<String>,
    pub rank: Option<String>,
    pub recs: Vec<Rec>,
}

/// Reads every `*.jsonl` of `dir`; a malformed line (a process killed mid-write) is
/// skipped.
pub fn read_dir(dir: &Path) -> std::io::Result<Vec<Proc>> {
    let mut procs = Vec::new();
    let mut paths: Vec<_> = std::fs::read_dir(dir)?.filter_map(|e| e.ok()).map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect();
    paths.sort();
    for p in paths {
        let text = std::fs::read_to_string(&p)?;
        let mut proc: Option<Proc> = None;
        for line in text.lines() {
            let Ok(Value::Object(o)) = serde_json::from_str::<Value>(line) else { continue };
            let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
            let n = |k: &str| o.get(k).and_then(Value::as_u64);
            match o.get("k").and_then(Value::as_str) {
                Some("proc") if proc.is_none() => {
                    let argv = o.get("argv").and_then(Value::as_array)
                        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()).unwrap_or_default();
                    let rank = o.get("rank").and_then(Value::as_str).map(str::to_owned);
                    proc = Some(Proc { pid: n("pid").unwrap_or(0) as u32, exe: s("exe"), argv, rank, recs: Vec::new() });
                }
                Some(k @ ("ev" | "span")) => {
                    let Some(pr) = proc.as_mut() else { continue };
                    let kind = if k == "ev" { Kind::Event } else { Kind::Span };
                    let ts = n("ts").unwrap_or(0);
                    pr.recs.push(Rec {
                        pid: pr.pid,
                        kind,
                        ts,
                        end: n("end").unwrap_or(ts),
                        tid: n("tid").unwrap_or(0),
                        thread: s("thread"),
                        target: s("target"),
                        name: s("name"),
                        msg: s("msg"),
                        fields: o.get("fields").and_then(Value::as_object).cloned().unwrap_or_default(),
                        id: if kind == Kind::Span { n("id") } else { n("span") },
                        parent: n("parent"),
                    });
                }
                _ => {}
            }
        }
        if let Some(p) = proc {
            procs.push(p);
        }
    }
    Ok(procs)
}
