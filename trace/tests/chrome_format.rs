//! The writer's output against the format checker, and the checker against broken
//! documents (so that it can fail).

mod common;

use common::format::check;
use doorbell_trace::chrome::document;
use doorbell_trace::jsonl::{Kind, Proc, Rec};
use serde_json::{json, Map, Value};

fn rec(pid: u32, tid: u64, ts: u64, target: &str, msg: &str, fields: Value) -> Rec {
    let fields: Map<String, Value> = fields.as_object().cloned().unwrap_or_default();
    Rec { pid, kind: Kind::Event, ts, end: ts, tid, thread: format!("t{tid}"), target: target.into(), name: "ev".into(),
          msg: msg.into(), fields, id: None, parent: None }
}

/// One WRITE from pid 1 to pid 2 as the layers log it (field names of the table in
/// softhca/src/device/trace.rs), and a span around the post.
fn two_procs() -> Vec<Proc> {
    let (q, psn) = (264, 0xabcdef);
    let a = vec![
        Rec { kind: Kind::Span, end: 1500, name: "provider::post_send".into(), ..rec(1, 1, 900, "provider::qp", "", json!({})) },
        rec(1, 1, 1000, "provider::post", "wqe", json!({"qpn": q, "pi": 0})),
        rec(1, 1, 1100, "provider::doorbell", "blueflame", json!({"qpn": q, "pi": 1})),
        rec(1, 2, 2000, "softhca::doorbell", "sq doorbell", json!({"qpn": q, "pi": 1, "ci": 0})),
        rec(1, 2, 2100, "softhca::wqe", "wqe", json!({"qpn": q, "index": 0, "psn": psn, "npsn": 1})),
        rec(1, 2, 2200, "softhca::tx", "tx", json!({"qpn": q, "psn": psn, "opcode": "RcRdmaWriteOnly"})),
        rec(1, 2, 5000, "softhca::rx", "rx", json!({"qpn": q, "psn": psn, "opcode": "RcAcknowledge"})),
        rec(1, 2, 5100, "softhca::ack", "ack received", json!({"qpn": q, "psn": psn})),
        rec(1, 2, 5200, "softhca::cqe", "cqe", json!({"qpn": q, "wqe_counter": 0})),
        rec(1, 1, 6000, "provider::poll", "wc", json!({"qpn": q, "wqe_counter": 0})),
    ];
    let b = vec![
        rec(2, 7, 3000, "softhca::rx", "rx", json!({"qpn": q, "psn": psn, "opcode": "RcRdmaWriteOnly"})),
        rec(2, 7, 3100, "softhca::responder", "write into memory", json!({"qpn": q, "psn": psn})),
        rec(2, 7, 3200, "softhca::ack", "ack sent", json!({"qpn": q, "psn": psn})),
        rec(2, 7, 3300, "softhca::tx", "tx", json!({"qpn": q, "psn": psn, "opcode": "RcAcknowledge"})),
    ];
    vec![Proc { pid: 1, exe: "a".into(), argv: vec!["a".into()], rank: None, recs: a }, Proc { pid: 2, exe: "b".into(), argv: vec!["b".into()], rank: Some("1".into()), recs: b }]
}

#[test]
fn writer_output_is_valid_and_links_the_whole_chain() {
    let doc = document(&two_procs());
    check(&doc).unwrap();
    let evs = doc["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = evs.iter().filter(|e| e["ph"] == "s").map(|e| e["name"].as_str().unwrap()).collect();
    let want = [
        "provider::post -> provider::doorbell",
        "provider::doorbell -> softhca::doorbell",
        "softhca::doorbell -> softhca::wqe",
        "softhca::wqe -> softhca::tx",
        "softhca::tx -> softhca::rx",
        "softhca::rx -> softhca::responder",
        "softhca::responder -> softhca::ack",
        "softhca::ack -> softhca::tx",
        "softhca::tx -> softhca::rx",
        "softhca::rx -> softhca::ack",
        "softhca::ack -> softhca::cqe",
        "softhca::cqe -> provider::poll",
    ];
    assert_eq!(names, want);
    let x = evs.iter().find(|e| e["ph"] == "X" && e["name"] == "provider::post_send").unwrap();
    assert_eq!(x["dur"], json!(0.6));
    // Arrow ends are slices (flows bind to slices), the others instants.
    let post = evs.iter().find(|e| e["cat"] == "provider::post").unwrap();
    assert_eq!((&post["ph"], &post["dur"]), (&json!("X"), &json!(0.001)));
    assert!(evs.iter().any(|e| e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 2 && e["args"]["name"] == "t7"));
    assert!(evs.iter().any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 2 && e["args"]["name"] == "rank 1: b"));
}

fn broken(f: impl Fn(&mut Vec<Value>)) -> Result<(), String> {
    let mut doc = document(&two_procs());
    f(doc["traceEvents"].as_array_mut().unwrap());
    check(&doc)
}

#[test]
fn checker_rejects_what_the_format_forbids() {
    assert!(check(&json!([])).is_err(), "array format without an object");
    assert!(broken(|v| v.retain(|e| e["ph"] != "f")).unwrap_err().contains("0 finishes"));
    assert!(broken(|v| { let x = v.iter_mut().find(|e| e["ph"] == "X").unwrap(); x.as_object_mut().unwrap().remove("dur"); })
        .unwrap_err().contains("dur"));
    assert!(broken(|v| { let s = v.iter_mut().find(|e| e["ph"] == "s").unwrap(); s["ts"] = json!(1e9); })
        .unwrap_err().contains("before it starts"));
    assert!(broken(|v| { let f = v.iter_mut().find(|e| e["ph"] == "f").unwrap(); f["ts"] = json!(1e8); })
        .unwrap_err().contains("binds to no slice"));
    assert!(broken(|v| { v[0]["name"] = json!("process_colour"); }).unwrap_err().contains("unknown metadata"));
    assert!(broken(|v| { let i = v.iter_mut().find(|e| e["ph"] == "X").unwrap(); i["ts"] = json!("7"); })
        .unwrap_err().contains("ts"));
}

#[test]
fn recording_layer_writes_one_file_per_process() {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::Layer as _;
    let dir = std::env::temp_dir().join(format!("doorbell-trace-test.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let layer = doorbell_trace::RecordLayer::new(&dir).unwrap().with_filter(doorbell_trace::record::targets());
    let sub = tracing_subscriber::registry().with(layer);
    tracing::subscriber::with_default(sub, || {
        let s = tracing::trace_span!(target: "provider::qp", "post_send", qpn = 7u32);
        s.in_scope(|| tracing::trace!(target: "provider::post", qpn = 7u32, pi = 3u16, op = "write \"x\"", "wqe"));
        tracing::trace!(target: "someone_else", "not recorded");
    });
    doorbell_trace::record::flush();
    let procs = doorbell_trace::jsonl::read_dir(&dir).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0].pid, std::process::id());
    let r = &procs[0].recs;
    assert_eq!(r.len(), 2, "{r:?}");
    let ev = r.iter().find(|r| r.kind == Kind::Event).unwrap();
    assert_eq!((ev.target.as_str(), ev.msg.as_str(), ev.u64("qpn"), ev.u64("pi"), ev.str("op")),
               ("provider::post", "wqe", Some(7), Some(3), Some("write \"x\"")));
    let sp = r.iter().find(|r| r.kind == Kind::Span).unwrap();
    assert_eq!((sp.name.as_str(), sp.u64("qpn")), ("post_send", Some(7)));
    assert!(sp.ts <= ev.ts && ev.ts <= sp.end);
    assert_eq!(ev.id, sp.id, "the event names its span");
    // The monotonic clock the records carry is the host's CLOCK_MONOTONIC.
    let now = doorbell_trace::record::now_ns();
    assert!(ev.ts <= now && now - ev.ts < 60_000_000_000);
}
