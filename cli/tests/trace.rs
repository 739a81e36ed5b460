//! `doorbell trace` end to end: one 8-byte RDMA WRITE between two processes gives the
//! whole chain with its arrows across the two pids, and a stock ib_write_bw pair gives
//! both processes' tracks; every output passes the Chrome Trace Event format checker.

mod common;

#[path = "../../trace/tests/common/format.rs"]
mod format;

#[path = "../../softhca/preload/tests/common/mod.rs"]
#[allow(dead_code)]
mod stock;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

fn out_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("doorbell-trace-cli.{}.{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn load(path: &PathBuf) -> Value {
    let doc: Value = serde_json::from_slice(&std::fs::read(path).expect("trace file")).expect("trace is JSON");
    format::check(&doc).unwrap_or_else(|e| panic!("{}: not a valid Chrome trace: {e}", path.display()));
    doc
}

type Key = (u64, u64, String);

fn key(e: &Value) -> Key {
    (e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap(), e["ts"].to_string())
}

#[test]
fn one_write_gives_the_whole_chain_across_both_processes() {
    let dir = out_dir("write");
    let json = dir.join("trace.json");
    let d = common::spawn(&["trace", "-o", json.to_str().unwrap(), "--text", "--svg", dir.join("t.svg").to_str().unwrap(),
                            "--", common::bin(), "bench", "write-lat", "--local", "-s", "8", "-n", "1"])
        .wait_ok(Duration::from_secs(60));
    let doc = load(&json);
    let evs = doc["traceEvents"].as_array().unwrap();
    let pids: std::collections::BTreeSet<u64> = evs.iter().filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2, "write-lat --local is two processes: {pids:?}");
    // The records at each (pid, tid, ts) and the arrows between them.
    let at: HashMap<Key, &Value> = evs.iter().filter(|e| e["ph"] == "i" || e["ph"] == "X").map(|e| (key(e), e)).collect();
    let mut starts: HashMap<String, Key> = HashMap::new();
    let mut next: HashMap<Key, Vec<Key>> = HashMap::new();
    for e in evs.iter().filter(|e| e["ph"] == "s") {
        starts.insert(e["id"].to_string(), key(e));
    }
    for e in evs.iter().filter(|e| e["ph"] == "f") {
        next.entry(starts[&e["id"].to_string()].clone()).or_default().push(key(e));
    }
    // Both sides write once: follow each post.
    let posts: Vec<&Value> = evs.iter().filter(|e| e["cat"] == "provider::post").collect();
    assert_eq!(posts.len(), 2, "one post per side");
    let want = ["provider::post", "provider::doorbell", "softhca::doorbell", "softhca::wqe", "softhca::tx", "softhca::rx",
                "softhca::responder", "softhca::ack", "softhca::tx", "softhca::rx", "softhca::ack", "softhca::cqe", "provider::poll"];
    // The process each step runs in: the requester's (A) or the responder's (B).
    let side = "AAAAABBBBAAAA";
    for p in posts {
        let mut k = key(p);
        let mut chain = vec![p];
        while let Some(n) = next.get(&k) {
            assert_eq!(n.len(), 1, "one arrow out of {}", at[&k]);
            k = n[0].clone();
            chain.push(at[&k]);
        }
        let cats: Vec<&str> = chain.iter().map(|e| e["cat"].as_str().unwrap()).collect();
        assert_eq!(cats, want, "the chain from {p}");
        let a = p["pid"].as_u64().unwrap();
        for (e, s) in chain.iter().zip(side.chars()) {
            assert_eq!(e["pid"].as_u64().unwrap() == a, s == 'A', "{e} on the wrong side");
        }
        // Times only go forward along the chain (one host, one monotonic clock).
        for w in chain.windows(2) {
            assert!(w[0]["ts"].as_f64() <= w[1]["ts"].as_f64(), "{} after {}", w[0], w[1]);
        }
        // What the wire carries: IBTA's RDMA WRITE Only with the 8 bytes of -s 8, its ACK.
        assert_eq!(chain[4]["args"]["opcode"], "RcRdmaWriteOnly");
        assert_eq!(chain[4]["args"]["len"], 8);
        assert_eq!(chain[5]["args"]["psn"], chain[4]["args"]["psn"]);
        assert_eq!(chain[6]["args"]["len"], 8);
        assert_eq!(chain[8]["args"]["opcode"], "RcAcknowledge");
        assert_eq!(chain[11]["args"]["wqe_counter"], chain[3]["args"]["index"]);
        assert_eq!(chain[12]["args"]["status"], "Success");
    }
    // docs/trace.md's table of the 13 steps says the same.
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/trace.md")).unwrap();
    let documented: Vec<&str> = doc.lines()
        .filter(|l| l.starts_with("| ") && l.split('|').nth(1).is_some_and(|c| c.trim().parse::<u32>().is_ok()))
        .map(|l| l.split('|').nth(3).unwrap().trim().trim_matches('`'))
        .collect();
    assert_eq!(documented, want, "docs/trace.md's steps");
    // --text: each thread's records with their layer.
    assert!(d.stdout.contains("[provider::post]") && d.stdout.contains("write into memory"), "{}", d.stdout);
    let svg = std::fs::read_to_string(dir.join("t.svg")).unwrap();
    // Records are dots, arrows polylines (plotters' SVG backend).
    assert!(svg.starts_with("<svg") && svg.contains("<circle") && svg.contains("<polyline"), "an SVG with records and arrows");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stock_ib_write_bw_gives_both_processes_tracks() {
    let Some(bw) = stock::tool("ib_write_bw") else { return };
    let lib = stock::preload();
    let dir = out_dir("bw");
    let json = dir.join("trace.json");
    let port = common::free_port();
    // Server, then (once it listens: /proc/net/tcp{,6} state 0A) the client.
    let script = format!(
        "{bw} -d softhca0 -n 20 -s 4096 -p {port} & \
         while ! grep -qi ':{port:04X} [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2>/dev/null; do sleep 0.05; done; \
         {bw} -d softhca0 -n 20 -s 4096 -p {port} 127.0.0.1 && wait",
        bw = bw.display()
    );
    common::spawn(&["trace", "-o", json.to_str().unwrap(), "--preload", lib.to_str().unwrap(), "--", "sh", "-c", &script])
        .wait_ok(Duration::from_secs(90));
    let doc = load(&json);
    let evs = doc["traceEvents"].as_array().unwrap();
    let bw_pids: Vec<u64> = evs.iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"].as_str().unwrap().contains("ib_write_bw"))
        .map(|e| e["pid"].as_u64().unwrap()).collect();
    assert_eq!(bw_pids.len(), 2, "server and client: {bw_pids:?}");
    for pid in bw_pids {
        let of = |cat: &str| evs.iter().filter(|e| e["pid"] == pid && e["cat"] == cat).count();
        // The preload shim's decoded kernel calls and the device's packets, per process.
        assert!(of("doorbell_preload") > 0, "pid {pid}: no decoded ioctl/write");
        assert!(of("softhca::tx") > 0 && of("softhca::rx") > 0, "pid {pid}: no packets");
        assert!(evs.iter().any(|e| e["pid"] == pid && e["cat"] == "doorbell_preload"
                    && e["args"]["message"].as_str().is_some_and(|m| m.contains("GET_CONTEXT") || m.contains("CREATE_QP") || m.contains("QP.CREATE"))),
                "pid {pid}: the context / QP commands");
    }
    // Arrows between the two processes (packets one way, ACKs the other).
    let pid_of: HashMap<String, u64> = evs.iter().filter(|e| e["ph"] == "s").map(|e| (e["id"].to_string(), e["pid"].as_u64().unwrap())).collect();
    assert!(evs.iter().any(|e| e["ph"] == "f" && pid_of[&e["id"].to_string()] != e["pid"].as_u64().unwrap()), "a cross-process arrow");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The ranks of an all-reduce: each a process track named by its rank, with packets and
/// arrows between ranks.
fn check_ranks(json: &PathBuf, n: usize) {
    let doc = load(json);
    let evs = doc["traceEvents"].as_array().unwrap();
    for r in 0..n {
        let want = format!("rank {r}: ");
        let pid = evs.iter()
            .find(|e| e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"].as_str().unwrap().starts_with(&want))
            .unwrap_or_else(|| panic!("no track named {want}..."))["pid"].as_u64().unwrap();
        assert!(evs.iter().any(|e| e["pid"] == pid && e["cat"] == "softhca::tx"), "rank {r} sent nothing");
    }
    let pid_of: HashMap<String, u64> = evs.iter().filter(|e| e["ph"] == "s").map(|e| (e["id"].to_string(), e["pid"].as_u64().unwrap())).collect();
    assert!(evs.iter().any(|e| e["ph"] == "f" && pid_of[&e["id"].to_string()] != e["pid"].as_u64().unwrap()), "a cross-rank arrow");
}

#[test]
fn allreduce_ranks_each_get_a_track() {
    let dir = out_dir("ar");
    let json = dir.join("trace.json");
    common::spawn(&["trace", "-o", json.to_str().unwrap(), "--", common::bin(), "allreduce", "--nranks", "2", "--count", "1024", "--no-table"])
        .wait_ok(Duration::from_secs(120));
    check_ranks(&json, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mpirun_children_are_traced_without_the_preload() {
    if std::process::Command::new("mpirun").arg("--version").output().is_err() {
        testkit::skip(testkit::Need::Tool, "mpirun not installed (apt-get install openmpi-bin)");
        return;
    }
    let dir = out_dir("mpi");
    let json = dir.join("trace.json");
    let mut cmd = common::command(common::bin());
    cmd.args(["trace", "-o", json.to_str().unwrap(), "--", "mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
              "-x", "DOORBELL_MASTER_PORT", common::bin(), "allreduce", "--count", "1024", "--no-table"])
        .env("DOORBELL_MASTER_PORT", common::free_port().to_string());
    common::start(cmd).wait_ok(Duration::from_secs(180));
    check_ranks(&json, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
