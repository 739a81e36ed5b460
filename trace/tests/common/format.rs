//! A checker for the Chrome Trace Event format, written from the format's definition
//! ("Trace Event Format", the Google document catapult's docs/trace-event-format.md points
//! to), not from doorbell-trace's writer:
//!
//! - the JSON Object Format: an object whose `traceEvents` is an array of event objects;
//!   `displayTimeUnit`, if present, is "ms" or "ns";
//! - every event has a string `ph`; all but metadata have a string `name`, integer `pid`
//!   and `tid` and a numeric `ts` (microseconds);
//! - `X` (complete) has a numeric `dur` >= 0; `B`/`E` pair up per thread;
//! - `i`/`I` (instant) has an optional scope `s` of "g", "p" or "t";
//! - `s`/`t`/`f` (flow) have `id`, `cat` and `name`; the events of one flow share the
//!   three; a flow has one start and one finish and the start is not later than the
//!   finish; `bp`, if present, is "e"; a flow event binds to a slice of its own thread at
//!   its timestamp (here: an `X` enclosing it or an instant at the same time);
//! - `M` (metadata) is one of process_name, process_labels, process_sort_index,
//!   thread_name, thread_sort_index, with `args` holding `name` (or `sort_index`);
//! - `args`, if present, is an object.

#![allow(dead_code)]

use std::collections::HashMap;

use serde_json::Value;

fn num(e: &Value, k: &str) -> Result<f64, String> {
    e.get(k).and_then(Value::as_f64).ok_or_else(|| format!("{k} missing or not a number in {e}"))
}

/// Checks `doc`; the error says which rule failed and where.
pub fn check(doc: &Value) -> Result<(), String> {
    let obj = doc.as_object().ok_or("the document is not a JSON object")?;
    if let Some(u) = obj.get("displayTimeUnit") {
        if u != "ms" && u != "ns" {
            return Err(format!("displayTimeUnit {u} is neither \"ms\" nor \"ns\""));
        }
    }
    let evs = obj.get("traceEvents").and_then(Value::as_array).ok_or("traceEvents missing or not an array")?;
    // flow key (cat, name, id) -> [(phase, ts, pid, tid)]
    let mut flows: HashMap<(String, String, String), Vec<(String, f64, u64, u64)>> = HashMap::new();
    let mut slices: HashMap<(u64, u64), Vec<(f64, f64)>> = HashMap::new();
    let mut begins: HashMap<(u64, u64), i64> = HashMap::new();
    for e in evs {
        let ph = e.get("ph").and_then(Value::as_str).ok_or_else(|| format!("ph missing in {e}"))?;
        if let Some(a) = e.get("args") {
            if !a.is_object() {
                return Err(format!("args not an object in {e}"));
            }
        }
        if ph == "M" {
            let name = e.get("name").and_then(Value::as_str).ok_or_else(|| format!("metadata without name: {e}"))?;
            let key = match name {
                "process_name" | "thread_name" | "process_labels" => "name",
                "process_sort_index" | "thread_sort_index" => "sort_index",
                _ => return Err(format!("unknown metadata event {name}")),
            };
            if e.get("args").and_then(|a| a.get(key)).is_none() {
                return Err(format!("metadata {name} without args.{key}: {e}"));
            }
            e.get("pid").and_then(Value::as_u64).ok_or_else(|| format!("metadata without pid: {e}"))?;
            if name.starts_with("thread") {
                e.get("tid").and_then(Value::as_u64).ok_or_else(|| format!("thread metadata without tid: {e}"))?;
            }
            continue;
        }
        e.get("name").and_then(Value::as_str).ok_or_else(|| format!("name missing in {e}"))?;
        let pid = e.get("pid").and_then(Value::as_u64).ok_or_else(|| format!("pid missing in {e}"))?;
        let tid = e.get("tid").and_then(Value::as_u64).ok_or_else(|| format!("tid missing in {e}"))?;
        let ts = num(e, "ts")?;
        match ph {
            "X" => {
                let dur = num(e, "dur")?;
                if dur < 0.0 {
                    return Err(format!("negative dur in {e}"));
                }
                slices.entry((pid, tid)).or_default().push((ts, ts + dur));
            }
            "B" => *begins.entry((pid, tid)).or_default() += 1,
            "E" => *begins.entry((pid, tid)).or_default() -= 1,
            "i" | "I" => {
                if let Some(s) = e.get("s") {
                    if !["g", "p", "t"].iter().any(|x| s == x) {
                        return Err(format!("instant scope {s} not g/p/t in {e}"));
                    }
                }
                slices.entry((pid, tid)).or_default().push((ts, ts));
            }
            "s" | "t" | "f" => {
                let id = e.get("id").ok_or_else(|| format!("flow event without id: {e}"))?;
                let cat = e.get("cat").and_then(Value::as_str).ok_or_else(|| format!("flow event without cat: {e}"))?;
                let name = e["name"].as_str().unwrap_or("");
                if let Some(bp) = e.get("bp") {
                    if bp != "e" {
                        return Err(format!("bp {bp} is not \"e\" in {e}"));
                    }
                }
                flows.entry((cat.into(), name.into(), id.to_string())).or_default().push((ph.into(), ts, pid, tid));
            }
            "C" | "b" | "e" | "n" | "P" | "O" | "N" | "D" | "R" | "c" => {}
            _ => return Err(format!("unknown phase {ph} in {e}")),
        }
    }
    for ((pid, tid), n) in begins {
        if n != 0 {
            return Err(format!("B/E events of pid {pid} tid {tid} do not pair up"));
        }
    }
    for ((cat, name, id), steps) in &flows {
        let starts: Vec<_> = steps.iter().filter(|s| s.0 == "s").collect();
        let ends: Vec<_> = steps.iter().filter(|s| s.0 == "f").collect();
        if starts.len() != 1 || ends.len() != 1 {
            return Err(format!("flow {cat}/{name}/{id}: {} starts and {} finishes", starts.len(), ends.len()));
        }
        if starts[0].1 > ends[0].1 {
            return Err(format!("flow {cat}/{name}/{id} finishes ({}) before it starts ({})", ends[0].1, starts[0].1));
        }
        for s in steps {
            let bound = slices.get(&(s.2, s.3)).is_some_and(|v| v.iter().any(|&(a, b)| a <= s.1 && s.1 <= b));
            if !bound {
                return Err(format!("flow {cat}/{name}/{id}: its {} event at {} on pid {} tid {} binds to no slice", s.0, s.1, s.2, s.3));
            }
        }
    }
    Ok(())
}
