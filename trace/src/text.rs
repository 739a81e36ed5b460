//! `doorbell trace --text`: the call tree of each thread, in the study's diagram style
//! (`ibv_open_device -> ... -> ioctl(...)`): spans nest by their parent, the events inside
//! a span hang under it, each line with its duration (spans) or its offset.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::chrome::{label, merged};
use crate::jsonl::{Kind, Proc, Rec};

fn fields(r: &Rec) -> String {
    let mut s = String::new();
    for (k, v) in &r.fields {
        let v = match v {
            serde_json::Value::String(x) => x.clone(),
            x => x.to_string(),
        };
        let _ = write!(s, " {k}={v}");
    }
    s
}

fn dur(ns: u64) -> String {
    if ns >= 1_000_000 {
        format!("{:.3} ms", ns as f64 / 1e6)
    } else if ns >= 1000 {
        format!("{:.3} us", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// The text of every process's threads.
pub fn render(procs: &[Proc]) -> String {
    let recs = merged(procs);
    let t0 = recs.first().map(|r| r.ts).unwrap_or(0);
    let mut out = String::new();
    for p in procs {
        let mut by_thread: BTreeMap<u64, Vec<&Rec>> = BTreeMap::new();
        for r in recs.iter().filter(|r| r.pid == p.pid) {
            by_thread.entry(r.tid).or_default().push(r);
        }
        for (tid, rs) in by_thread {
            let tname = rs.first().map(|r| r.thread.as_str()).unwrap_or("");
            let _ = writeln!(out, "== pid {} ({}) thread {tid} {tname}", p.pid, p.argv.join(" "));
            // Nesting: a record lies inside an open span of the same thread whose interval
            // holds it. Spans are recorded at exit, so order them by start with the
            // longer first.
            let mut items: Vec<&Rec> = rs.clone();
            items.sort_by_key(|r| (r.ts, std::cmp::Reverse(r.end), r.kind == Kind::Event));
            let mut stack: Vec<u64> = Vec::new();
            for r in items {
                while stack.last().is_some_and(|&end| r.ts >= end && !(r.kind == Kind::Event && r.ts == end)) {
                    stack.pop();
                }
                let depth = stack.len();
                let arrow = if depth == 0 { String::new() } else { format!("{}-> ", "   ".repeat(depth - 1)) };
                match r.kind {
                    Kind::Span => {
                        let _ = writeln!(out, "{arrow}{}{} [{}] ({})", label(r), fields(r), r.target, dur(r.end - r.ts));
                        stack.push(r.end);
                    }
                    Kind::Event => {
                        // The whole message: the preload's decoded ioctl lines are long.
                        let what = if r.msg.is_empty() { label(r) } else { r.msg.clone() };
                        let _ = writeln!(out, "{arrow}{what}{} [{}] @{}", fields(r), r.target, dur(r.ts - t0));
                    }
                }
            }
        }
    }
    out
}
