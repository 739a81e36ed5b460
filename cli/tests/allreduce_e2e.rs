//! `doorbell allreduce` and `doorbell launch` as a user runs them: separate processes,
//! each its own softhca host on 127.0.0.N (or a network namespace's address), the
//! TCP bootstrap, torchrun-style and mpirun-style launches, and a rank killed in
//! the middle of a long all-reduce.
//!
//! Every child runs under a deadline after which it is killed (and is killed when its
//! handle drops, so a failing test leaves no rank behind), so a hang fails the test
//! instead of blocking it.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{command, free_port, start, Done};

const BIN: &str = env!("CARGO_BIN_EXE_doorbell");

fn run(args: &[&str], limit: Duration) -> Done {
    common::spawn(args).wait(limit)
}

/// The table's data rows: (size, #wrong out-of-place, #wrong in-place).
fn table_rows(stdout: &str) -> Vec<(usize, String, String)> {
    stdout
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("Rank"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 12).then(|| (f[0].parse().unwrap(), f[7].to_string(), f[11].to_string()))
        })
        .collect()
}

fn assert_pass(o: &Done, n: usize, count: usize) {
    assert!(o.status.success(), "exit {:?}\nstdout:\n{}\nstderr:\n{}", o.status, o.stdout, o.stderr);
    let expected = n * (n + 1) / 2;
    for r in 0..n {
        let line = format!("Rank {r} PASS: count={count} expected={expected}.0 first={expected}.0 last={expected}.0");
        assert!(o.stdout.contains(&line), "missing {line:?} in:\n{}", o.stdout);
    }
}

#[test]
fn allreduce_starts_four_ranks_by_itself() {
    let o = run(&["allreduce", "--count", "65536", "-b", "8", "-e", "1M", "-f", "16", "-n", "2", "-w", "1"], Duration::from_secs(240));
    assert_pass(&o, 4, 65536);
    let rows = table_rows(&o.stdout);
    assert_eq!(rows.iter().map(|r| r.0).collect::<Vec<_>>(), vec![8, 128, 2048, 32768, 524288, 1048576], "{}", o.stdout);
    for (size, a, b) in rows {
        assert_eq!((a.as_str(), b.as_str()), ("0", "0"), "wrong elements at {size} B:\n{}", o.stdout);
    }
    assert!(o.stdout.contains("size") && o.stdout.contains("busbw") && o.stdout.contains("#wrong"));
    // Four ranks on fewer CPUs (and nobody restricted this process): pinned in blocks.
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as usize;
    let allowed = std::thread::available_parallelism().map_or(online, |n| n.get());
    let pinned = o.stdout.contains("# placement: more ranks than CPUs, ranks pinned in blocks (rank 0 on CPU ");
    assert_eq!(pinned, allowed == online && online < 4, "{online} CPUs online, {allowed} allowed:\n{}", o.stdout);
}

/// Counter `name` of a "rank R softhca counters: a: 1, b: 2, ..." line, which lists the
/// non-zero counters only (absent: 0). The whole name is matched: `tx_packets` is not the
/// tail of `local_tx_packets` (a bare `find` once read the one for the other).
fn counter(line: &str, name: &str) -> u64 {
    let Some(at) = line.find(&format!(" {name}: ")) else { return 0 };
    line[at + name.len() + 3..].split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap()
}

#[test]
fn counters_are_printed_per_rank_when_asked() {
    let mut cmd = command(BIN);
    cmd.args(["allreduce", "--nranks", "2", "--count", "0", "-b", "256K", "-e", "256K", "-n", "1", "-w", "0"]).env("DOORBELL_COUNTERS", "1");
    let o = start(cmd).wait(Duration::from_secs(120));
    assert!(o.status.success(), "exit {:?}\nstderr:\n{}", o.status, o.stderr);
    for r in 0..2 {
        let line = o.stderr.lines().find(|l| l.starts_with(&format!("rank {r} softhca counters: "))).unwrap_or_else(|| panic!("no counters for rank {r}:\n{}", o.stderr));
        let field = |name: &str| counter(line, name);
        // At least the 128 KiB each rank sends of a 256 KiB ring all-reduce, in
        // 4096-byte packets, and the ACKs its peer's packets asked for.
        // On either path (between two processes of one host: the same-host one).
        let sent = field("tx_packets") + field("local_tx_packets");
        assert!(sent >= 32 && field("dma_write_bytes") >= 128 << 10 && field("acks_sent") >= 1, "{line}");
    }
}

#[test]
fn launch_runs_non_power_of_two_worlds_every_algorithm() {
    for (n, algo) in [(3usize, "ring"), (5, "tree"), (6, "ring"), (7, "tree"), (2, "tree"), (8, "ring"), (4, "doubling"), (6, "doubling"), (8, "halving"), (5, "halving"), (4, "alltoall"), (8, "alltoall")] {
        let port = free_port().to_string();
        let nn = n.to_string();
        let o = run(
            &["launch", "--nproc-per-node", &nn, "--master-port", &port, "--", BIN, "allreduce", "--algo", algo, "--count", "1001", "-b", "4", "-e", "4K", "-f", "32", "-n", "1", "-w", "0", "-d", "all", "-o", "sum,max"],
            Duration::from_secs(240),
        );
        assert_pass(&o, n, 1001);
        let rows = table_rows(&o.stdout);
        assert_eq!(rows.len(), 3 * 10 * 2, "n={n}: {}", o.stdout);
        assert!(rows.iter().all(|r| r.1 == "0" && r.2 == "0"), "n={n} {algo}:\n{}", o.stdout);
    }
}

#[test]
fn launch_names_the_failed_rank_and_stops_the_others() {
    let o = run(&["launch", "--nproc-per-node", "3", "--", "sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 7; fi; exec sleep 60"], Duration::from_secs(30));
    assert!(!o.status.success());
    assert!(o.stderr.contains("rank 1") && o.stderr.contains("exit status 7"), "{}", o.stderr);
    let o = run(&["launch", "--nproc-per-node", "2", "--", "sh", "-c", "echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$MASTER_ADDR"], Duration::from_secs(30));
    assert!(o.status.success());
    assert!(o.stdout.contains("0/2/0/127.0.0.1") && o.stdout.contains("1/2/1/127.0.0.1"), "{}", o.stdout);
}

#[test]
fn runs_under_mpirun() {
    if Command::new("mpirun").arg("--version").output().is_err() {
        testkit::skip(testkit::Need::Tool, "mpirun not installed (apt-get install openmpi-bin)");
        return;
    }
    let mut cmd = command("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-np", "4", "-x", "DOORBELL_MASTER_PORT", BIN, "allreduce", "--count", "4096", "-b", "64", "-e", "64K", "-f", "32", "-n", "2", "-w", "1"])
        .env("DOORBELL_MASTER_PORT", free_port().to_string());
    let o = start(cmd).wait(Duration::from_secs(240));
    assert_pass(&o, 4, 4096);
    assert!(table_rows(&o.stdout).iter().all(|r| r.1 == "0" && r.2 == "0"), "{}", o.stdout);
}

#[test]
fn a_killed_rank_is_named_by_the_others() {
    killed_rank_is_named("ring");
}

/// All-to-all: every rank has a stream to every other, so all three survivors wait on
/// the dead one directly (the ring's only through their neighbours).
#[test]
fn a_killed_rank_is_named_by_the_others_alltoall() {
    killed_rank_is_named("alltoall");
}

fn killed_rank_is_named(algo: &str) {
    let n = 4;
    let port = free_port().to_string();
    let mut ranks: Vec<Option<common::Proc>> = (0..n)
        .map(|r| {
            let mut cmd = command(BIN);
            cmd.args(["allreduce", "--count", "1024", "-b", "16M", "-e", "16M", "-n", "100000", "-w", "0", "-c", "0", "--algo", algo])
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", n.to_string())
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .env("DOORBELL_TIMEOUT", "20");
            Some(start(cmd))
        })
        .collect();
    // Wait until rank 2 has passed the example: the sweep (16 MiB x 100000) is next.
    let deadline = Instant::now() + Duration::from_secs(120);
    let passed = |p: &common::Proc| p.stdout().lines().any(|l| l.starts_with("Rank 2 PASS") || l.starts_with("Rank 3 PASS"));
    while !passed(ranks[2].as_ref().unwrap()) {
        assert!(Instant::now() < deadline, "rank 2 never passed the example");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(ranks[2].take()); // SIGKILL, and reaped
    let killed = Instant::now();
    // The bound: a rank waits at most DOORBELL_TIMEOUT (20 s, set above; collective::comm)
    // for a peer before it gives up, so every rank must have failed by then, plus slack
    // for a loaded machine (process exit, teardown). Without the bound a rank that only
    // noticed after minutes, or hung until the harness killed it, would pass.
    let bound = Duration::from_secs(20 + 15);
    for (r, p) in ranks.into_iter().enumerate() {
        let Some(p) = p else { continue };
        let o = p.wait(bound.saturating_sub(killed.elapsed()) + Duration::from_millis(1));
        let took = killed.elapsed();
        assert!(took <= bound, "rank {r} took {took:?} to fail after rank 2 was killed (bound {bound:?})");
        assert!(!o.status.success(), "rank {r} exited successfully after rank 2 was killed");
        assert!(o.stderr.contains("rank 2"), "rank {r} does not name rank 2:\n{}", o.stderr);
    }
}

/// The seed's two-machine setup: two network namespaces joined by a veth pair with
/// 10.x addresses, each softhca bound to its namespace's address.
#[test]
fn two_hosts_in_network_namespaces() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip(testkit::Need::Root, "two-host test needs root (ip netns)");
        return;
    }
    let tag = format!("db{}", std::process::id() % 100000);
    let (ns0, ns1) = (format!("{tag}a"), format!("{tag}b"));
    let (v0, v1) = (format!("{tag}v0"), format!("{tag}v1"));
    let sh = |c: &str| Command::new("sh").args(["-c", c]).stdout(Stdio::null()).stderr(Stdio::piped()).output().map(|o| (o.status.success(), String::from_utf8_lossy(&o.stderr).into_owned()));
    struct Cleanup(String);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = Command::new("sh").args(["-c", &self.0]).stderr(Stdio::null()).status();
        }
    }
    let _cleanup = Cleanup(format!("ip netns del {ns0}; ip netns del {ns1}; ip link del {v0}"));
    let setup = format!(
        "set -e; ip netns add {ns0}; ip netns add {ns1}; ip link add {v0} type veth peer name {v1}; \
         ip link set {v0} netns {ns0}; ip link set {v1} netns {ns1}; \
         ip -n {ns0} addr add 10.231.0.1/24 dev {v0}; ip -n {ns0} addr add 10.231.0.11/24 dev {v0}; \
         ip -n {ns1} addr add 10.231.0.2/24 dev {v1}; ip -n {ns1} addr add 10.231.0.12/24 dev {v1}; \
         ip -n {ns0} link set lo up; ip -n {ns1} link set lo up; ip -n {ns0} link set {v0} up; ip -n {ns1} link set {v1} up"
    );
    match sh(&setup) {
        Ok((true, _)) => {}
        Ok((false, e)) => {
            testkit::skip(testkit::Need::Root, format!("cannot build the namespaces: {e}"));
            return;
        }
        Err(e) => {
            testkit::skip(testkit::Need::Tool, format!("no sh/ip: {e} (apt-get install iproute2)"));
            return;
        }
    }
    let port = "29577";
    // Torchrun style, one rank per host, as in the seed: `doorbell launch` on each host.
    let hosts = [(ns0.as_str(), "10.231.0.1", 0), (ns1.as_str(), "10.231.0.2", 1)];
    let kids: Vec<common::Proc> = hosts
        .iter()
        .map(|(ns, addr, node)| {
            let mut cmd = command("ip");
            cmd.args(["netns", "exec", ns, BIN, "launch", "--nnodes", "2", "--node-rank", &node.to_string(), "--nproc-per-node", "1", "--master-addr", "10.231.0.1", "--master-port", port, "--", BIN, "allreduce", "--count", "1048576", "-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"])
                .env("DOORBELL_SOFTHCA_ADDR", addr);
            start(cmd)
        })
        .collect();
    let outs: Vec<Done> = kids.into_iter().map(|c| c.wait(Duration::from_secs(240))).collect();
    for o in &outs {
        assert!(o.status.success(), "stdout:\n{}\nstderr:\n{}", o.stdout, o.stderr);
    }
    let all = format!("{}{}", outs[0].stdout, outs[1].stdout);
    for r in 0..2 {
        assert!(all.contains(&format!("Rank {r} PASS: count=1048576 expected=3.0 first=3.0 last=3.0")), "{all}");
    }
    assert!(outs[0].stdout.contains("10.231.0.1"), "rank 0 runs on the namespace address:\n{}", outs[0].stdout);
    // Four ranks, two per host, each with its own address on its host.
    let ranks = [(ns0.as_str(), "10.231.0.1"), (ns0.as_str(), "10.231.0.11"), (ns1.as_str(), "10.231.0.2"), (ns1.as_str(), "10.231.0.12")];
    let kids: Vec<common::Proc> = ranks
        .iter()
        .enumerate()
        .map(|(r, (ns, addr))| {
            let mut cmd = command("ip");
            cmd.args(["netns", "exec", ns, BIN, "allreduce", "--count", "100000", "--no-table"])
                .env("DOORBELL_SOFTHCA_ADDR", addr)
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "4")
                .env("MASTER_ADDR", "10.231.0.1")
                .env("MASTER_PORT", "29578")
                .env("DOORBELL_COUNTERS", "1");
            start(cmd)
        })
        .collect();
    let outs: Vec<Done> = kids.into_iter().map(|c| c.wait(Duration::from_secs(240))).collect();
    let all: String = outs.iter().map(|o| o.stdout.as_str()).collect();
    for (r, o) in outs.iter().enumerate() {
        assert!(o.status.success(), "rank {r}: {}", o.stderr);
    }
    for r in 0..4 {
        assert!(all.contains(&format!("Rank {r} PASS: count=100000 expected=10.0")), "{all}");
    }
    // Both paths at once: ranks of one namespace talk through the same-host path, ranks
    // of different namespaces RoCEv2 over the veth pair.
    let (mut udp, mut local) = (0, 0);
    for (r, o) in outs.iter().enumerate() {
        let line = o.stderr.lines().find(|l| l.contains("softhca counters: ")).unwrap_or_else(|| panic!("rank {r}: no counters:\n{}", o.stderr));
        udp += counter(line, "tx_packets");
        local += counter(line, "local_tx_packets");
    }
    assert!(udp > 0 && local > 0, "both paths used: {udp} packets over UDP, {local} same-host");
}
