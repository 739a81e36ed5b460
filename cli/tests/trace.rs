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

/// The QPN of each `local address:` line ibv_rc_pingpong prints (`QPN 0x000012`).
fn printed_qpns(out: &str) -> Vec<u64> {
    out.lines()
        .filter(|l| l.trim_start().starts_with("local address:"))
        .filter_map(|l| l.split("QPN ").nth(1)?.split(',').next().and_then(|q| u64::from_str_radix(q.trim().trim_start_matches("0x"), 16).ok()))
        .collect()
}

/// `KEY=0xHEX` or `KEY=DEC` after `-> ok {` in a decoded line.
fn answer(line: &str, key: &str) -> Option<u64> {
    let ans = line.split("-> ok {").nth(1)?;
    let v = ans.split([' ', '}']).find_map(|w| w.strip_prefix(&format!("{key}=")))?;
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The rxe guest (tests/vm/rxe-vm.sh, the real Linux kernel with Soft-RoCE): `doorbell
/// trace --passthrough` around a stock ibv_rc_pingpong pair records the uverbs calls
/// that libibverbs and librxe make on the real /dev/infiniband/uverbs0 with the kernel's
/// answers. Checked against what the kernel and the programs say themselves: the QPN the
/// kernel returned for QP.CREATE is the one each ibv_rc_pingpong prints as its local
/// address, the RTR transition names the peer's, and GET_CONTEXT's completion vector
/// count is the guest's possible CPUs (rxe's `num_comp_vectors`).
#[test]
fn rxe_guest_passthrough_decodes_the_kernels_answers() {
    if let Err(reason) = testkit::vm::available() {
        testkit::skip(testkit::Need::Vm, format!("rxe VM unavailable: {reason} (run tests/vm/rxe-vm.sh --setup)"));
        return;
    }
    let Some(pp) = stock::tool("ibv_rc_pingpong") else { return };
    let lib = stock::preload();
    // The guest's /tmp is its own: the trace comes back on stdout after a marker.
    let inner = format!(
        "{pp} -d rxe0 -g 1 -n 4 -p 18515 & \
         while ! grep -qi ':4853 [0-9A-F:]* 0A' /proc/net/tcp /proc/net/tcp6 2>/dev/null; do sleep 0.05; done; \
         {pp} -d rxe0 -g 1 -n 4 -p 18515 10.1.1.1 && wait",
        pp = pp.display()
    );
    let script = "cpus=$(cat /sys/devices/system/cpu/possible); echo \"POSSIBLE $cpus\"; \
                  \"$1\" trace --passthrough --preload \"$2\" -o /tmp/t.json -- sh -c \"$3\"; rc=$?; \
                  echo ===JSON; cat /tmp/t.json; exit $rc";
    let out = std::process::Command::new(testkit::vm::script())
        .args(["--", "sh", "-c", script, "sh", common::bin(), lib.to_str().unwrap(), &inner])
        .output().expect("run rxe-vm.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let report = format!("--- stdout ---\n{}\n--- stderr ---\n{}", stdout.split("===JSON").next().unwrap_or(""), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the traced pair in the guest failed ({:?})\n{report}", out.status);
    let (text, json) = stdout.split_once("===JSON\n").unwrap_or_else(|| panic!("no trace printed\n{report}"));
    let doc: Value = serde_json::from_str(json).expect("trace is JSON");
    format::check(&doc).unwrap_or_else(|e| panic!("not a valid Chrome trace: {e}"));
    let evs = doc["traceEvents"].as_array().unwrap();
    // `0-1`: two possible CPUs.
    let possible = text.lines().find_map(|l| l.strip_prefix("POSSIBLE ")).expect("POSSIBLE line");
    let ncpu: u64 = possible.trim().split(',').map(|r| match r.split_once('-') {
        Some((a, b)) => b.parse::<u64>().unwrap() - a.parse::<u64>().unwrap() + 1,
        None => 1,
    }).sum();
    let printed = printed_qpns(text);
    assert_eq!(printed.len(), 2, "two local address lines\n{report}");
    let pids: Vec<u64> = evs.iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"].as_str().unwrap().contains("ibv_rc_pingpong"))
        .map(|e| e["pid"].as_u64().unwrap()).collect();
    assert_eq!(pids.len(), 2, "server and client tracks: {pids:?}");
    let mut created = Vec::new();
    let mut peers = Vec::new();
    for &pid in &pids {
        // The decoded lines of this process, in time order.
        let mut lines: Vec<(f64, &str)> = evs.iter()
            .filter(|e| e["pid"] == pid && e["cat"] == "doorbell_preload")
            .filter_map(|e| Some((e["ts"].as_f64()?, e["args"]["message"].as_str()?)))
            .collect();
        lines.sort_by(|a, b| a.0.total_cmp(&b.0));
        let find = |what: &str| lines.iter().position(|(_, l)| l.contains(what))
            .unwrap_or_else(|| panic!("pid {pid}: no {what} line in\n{:#?}", lines.iter().map(|l| l.1).collect::<Vec<_>>()));
        assert!(lines.iter().any(|(_, l)| l.starts_with("open /dev/infiniband/uverbs0")), "pid {pid}: the real device opened");
        let ctx = find("DEVICE.GET_CONTEXT");
        assert_eq!(answer(lines[ctx].1, "NUM_COMP_VECTORS"), Some(ncpu), "{}", lines[ctx].1);
        // rdma_driver_id RDMA_DRIVER_RXE (rdma/ib_user_ioctl_verbs.h).
        assert!(lines[ctx].1.contains(" driver=14 "), "{}", lines[ctx].1);
        let qp = find("QP.CREATE");
        assert!(ctx < qp, "the context comes first");
        let qpn = answer(lines[qp].1, "RESP_QP_NUM").unwrap_or_else(|| panic!("no QPN answered: {}", lines[qp].1));
        assert!(answer(lines[qp].1, "HANDLE").is_some(), "{}", lines[qp].1);
        // The PD the QP is made on is the handle the kernel answered ALLOC_PD with.
        let pd = find("ALLOC_PD");
        let pd_handle = answer(lines[pd].1, "pd_handle").unwrap_or_else(|| panic!("no pd_handle answered: {}", lines[pd].1));
        assert!(pd < qp && lines[qp].1.contains(&format!("[PD={pd_handle},")), "{}\n{}", lines[pd].1, lines[qp].1);
        created.push(qpn);
        // INIT, RTR (naming the peer's QPN), RTS, each answered ok, after the create.
        let mut last = qp;
        for to in ["-> INIT", "-> RTR", "-> RTS"] {
            // Through the ioctl (INVOKE_WRITE) or, on a kernel without it, write().
            let i = lines.iter().position(|(_, l)| (l.contains("INVOKE_WRITE(MODIFY_QP)") || l.starts_with("write ") && l.contains(" MODIFY_QP "))
                                                   && (l.contains(&format!("{to}]")) || l.contains(&format!("{to} "))))
                .unwrap_or_else(|| panic!("pid {pid}: no MODIFY_QP {to}"));
            assert!(i > last, "pid {pid}: MODIFY_QP {to} out of order");
            let res = lines[i].1.rsplit("-> ").next().unwrap();
            assert!(res == "ok" || res.parse::<usize>().is_ok(), "pid {pid}: the kernel refused: {}", lines[i].1);
            if to == "-> RTR" {
                let d = lines[i].1.split("dest_qpn=0x").nth(1).and_then(|v| u64::from_str_radix(v.split([' ', ']']).next()?, 16).ok());
                peers.push(d.unwrap_or_else(|| panic!("no dest_qpn: {}", lines[i].1)));
            }
            last = i;
        }
    }
    let mut a = created.clone();
    let mut b = printed.clone();
    a.sort();
    b.sort();
    assert_eq!(a, b, "the kernel's QPNs are the ones ibv_rc_pingpong prints");
    assert_eq!(peers, [created[1], created[0]], "each side's RTR names the other's QPN");
}

/// docs/trace-driver-path.md's excerpts are cut from real runs by
/// docs/gen/trace-excerpts.sh; `--check` makes the runs again and fails when an excerpt
/// no longer matches what the code records (numbers aside). Without the rxe VM the
/// guest's excerpt is left out of the check (and the test says so through testkit).
#[test]
fn driver_path_doc_excerpts_match_the_code() {
    let Some(pp) = stock::tool("ibv_rc_pingpong") else { return };
    if std::process::Command::new("python3").arg("--version").output().is_err() {
        testkit::skip(testkit::Need::Tool, "python3 not installed (apt-get install python3): docs/gen/trace-excerpts.sh needs it");
        return;
    }
    let lib = stock::preload();
    let vm = testkit::vm::available();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut cmd = std::process::Command::new(format!("{root}/docs/gen/trace-excerpts.sh"));
    cmd.arg("--check").env("DOORBELL", common::bin()).env("PRELOAD", &lib).env("IBV_RC_PINGPONG", &pp)
        .env("PORT", common::free_port().to_string());
    if vm.is_err() {
        cmd.arg("--no-vm");
    }
    let out = cmd.output().expect("run docs/gen/trace-excerpts.sh");
    assert!(out.status.success(), "docs/gen/trace-excerpts.sh --check ({:?}); regenerate with docs/gen/trace-excerpts.sh:\n{}{}",
            out.status, String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if let Err(reason) = vm {
        testkit::skip(testkit::Need::Vm, format!("rxe VM unavailable: {reason}: the rxe excerpt was not checked (run tests/vm/rxe-vm.sh --setup)"));
    }
}
