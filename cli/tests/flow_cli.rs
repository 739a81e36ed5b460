//! `doorbell flow` end to end: a `flow serve` session in network namespace a (softhca's
//! Ethernet port on the veth there, two receive QPs, a rule of table 1 from a --rules
//! file), frames sent from namespace b by `doorbell bench steer-send` (AF_PACKET, exact
//! counts), and the CLI's add/list/stats/del against it:
//! - each rule's counter, each QP's frames and the port's drop counter are the exact
//!   numbers of frames sent to that rule's port (60-byte frames: 60 bytes each); frames
//!   that table 0's last rule forwards reach table 1's rule; the CQE carries the
//!   delivering rule's flow tag;
//! - `del` removes only that rule: its port's frames are then unsteered, the other
//!   rules keep counting, and a second del of it fails;
//! - errors: a bad match is refused before any server is asked, a QP the session does
//!   not have by the server, both with a non-zero exit and the reason;
//! - a rule added and another deleted while a paced stream runs to three ports change
//!   only their own flows: the untouched rule counts every frame of its port, and the
//!   two changed ports' frames add up exactly over the old rule, the new one and the
//!   misses (nothing lost, nothing counted twice);
//! - frames scapy builds and sends (TCP/IPv4, UDP/IPv6, 802.1Q-tagged UDP, ARP) reach
//!   exactly the rule and QP that names them, with its tag.
//!
//! SKIP when not root or without `ip`.

use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use testkit::Need;

const BIN: &str = env!("CARGO_BIN_EXE_doorbell");

fn sh(cmd: &str) -> bool {
    Command::new("sh").arg("-c").arg(cmd).status().is_ok_and(|s| s.success())
}

/// Root and `ip`, or a SKIP line saying which is missing.
fn root_and_ip() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        testkit::skip(Need::Root, "network namespaces, a veth and RAW_PACKET QPs need root");
        return false;
    }
    if !sh("command -v ip >/dev/null") {
        testkit::skip(Need::Tool, "ip missing (apt-get install iproute2)");
        return false;
    }
    true
}

struct Link {
    ns_a: String,
    ns_b: String,
}

impl Drop for Link {
    fn drop(&mut self) {
        sh(&format!("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null", self.ns_a, self.ns_b));
    }
}

const MAC_A: &str = "02:00:00:7b:00:01";
const IP_A: &str = "10.123.0.1";
const IP_B: &str = "10.123.0.2";

/// Namespaces of their own for test `n` of this process (the tests run in parallel).
fn link(n: u32) -> Link {
    let tag = std::process::id() % 100000 * 10 + n;
    let l = Link { ns_a: format!("fca{tag}"), ns_b: format!("fcb{tag}") };
    let ok = sh(&format!(
        "set -e; ip netns add {a}; ip netns add {b}; \
         for n in {a} {b}; do ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1; done; \
         ip link add {a} address {MAC_A} type veth peer name {b} address 02:00:00:7b:00:02; \
         ip link set {a} netns {a}; ip link set {b} netns {b}; \
         ip -n {a} addr add {IP_A}/24 dev {a}; ip -n {b} addr add {IP_B}/24 dev {b}; \
         ip -n {a} link set {a} up; ip -n {b} link set {b} up; ip -n {a} link set lo up; ip -n {b} link set lo up",
        a = l.ns_a, b = l.ns_b
    ));
    assert!(ok, "setting up the namespaces failed");
    l
}

struct Session {
    child: Child,
    sock: PathBuf,
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new(BIN).args(["flow", "--socket"]).arg(&self.sock).arg("stop").output();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Session {
    fn flow(&self, args: &[&str]) -> Output {
        Command::new(BIN).args(["flow", "--socket"]).arg(&self.sock).args(args).output().expect("run doorbell flow")
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.flow(args);
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "flow {args:?}: {}\n{out}", String::from_utf8_lossy(&o.stderr));
        out
    }

    fn fails(&self, args: &[&str]) -> String {
        let o = self.flow(args);
        assert!(!o.status.success(), "flow {args:?} should fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }
}

/// The number after `key` on the line starting with `prefix` of `flow stats --once`.
fn field(stats: &str, prefix: &str, key: &str) -> u64 {
    let line = stats.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix:?} line in\n{stats}"));
    let w: Vec<&str> = line.split_whitespace().collect();
    let i = w.iter().position(|x| *x == key).unwrap_or_else(|| panic!("no {key} in {line}"));
    w[i + 1].parse().unwrap_or_else(|_| panic!("{key} in {line}"))
}

/// A rule's row: (packets, bytes, match -> action).
fn rule(stats: &str, id: u32) -> Option<(String, String, String)> {
    stats.lines().skip(1).find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        (w.first() == Some(&id.to_string().as_str())).then(|| (w[3].to_string(), w[4].to_string(), w[6..].join(" ")))
    })
}

fn send(l: &Link, dport: u16, n: u64) {
    let o = Command::new("ip")
        .args(["netns", "exec", &l.ns_b, BIN, "bench", "steer-send", "--if", &l.ns_b, "--dst-mac", MAC_A, "--src-ip", IP_B,
               "--dst-ip", IP_A, "--dport", &dport.to_string(), "--count", &n.to_string(), "--secs", "30"])
        .output()
        .unwrap();
    assert!(o.status.success(), "steer-send: {}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).starts_with(&format!("sent {n} frames")), "{}", String::from_utf8_lossy(&o.stdout));
}

/// Waits until the port took `n` more UDP frames than `since` (all of a burst arrived),
/// up to a deadline that only turns a hang into a failure.
fn settle(s: &Session, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let st = s.ok(&["stats", "--once"]);
        if done(&st) {
            // The poller may still be between CQEs and its counters: one more round.
            std::thread::sleep(Duration::from_millis(200));
            return s.ok(&["stats", "--once"]);
        }
        assert!(Instant::now() < deadline, "frames did not arrive:\n{st}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn add_send_stats_del() {
    if !root_and_ip() {
        return;
    }
    let l = link(0);
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let sock = tmp.join(format!("flow-{}.sock", std::process::id()));
    let rules = tmp.join(format!("flow-{}.rules", std::process::id()));
    std::fs::write(&rules, "# table 1: what table 0's last rule forwards\n--table 1 'udp.dport=9003' --to-qp 0 --count --tag 3\n").unwrap();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &l.ns_a, "env", &format!("DOORBELL_SOFTHCA_ADDR={IP_A}"), BIN, "flow", "--socket"])
        .arg(&sock)
        .args(["serve", "--port", &l.ns_a, "--qps", "2", "--rules"])
        .arg(&rules)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut head = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        head.push_str(&line);
        head.push('\n');
        if line.starts_with("READY") {
            break;
        }
    }
    let s = Session { child, sock };
    assert!(head.contains("qp 0: qpn") && head.contains("qp 1: qpn") && head.contains("1 rules installed") && head.contains("READY"),
            "serve said:\n{head}");

    // A refreshing `stats` holds its connection for the whole test: the other
    // commands must still be answered (one thread per connection).
    let mut watcher = Command::new(BIN).args(["flow", "--socket"]).arg(&s.sock).args(["stats", "--interval", "0.2"])
        .stdout(Stdio::null()).spawn().unwrap();

    // Errors: the syntax locally, a QP the session lacks at the server.
    let e = s.fails(&["add", "udp.dport=70000", "--to-qp", "0"]);
    assert!(e.contains("udp.dport=70000: out of range"), "{e}");
    let e = s.fails(&["add", "udp.dport=1", "--to-qp", "5"]);
    assert!(e.contains("qp 5: this session has 2 QPs"), "{e}");
    assert!(s.fails(&["add", "udp.dport=1"]).contains("no action"));

    assert_eq!(s.ok(&["add", "--prio", "1", &format!("ipv4.dst={IP_A} udp.dport=9000"), "--to-qp", "0", "--count"]), "rule 2\n");
    assert_eq!(s.ok(&["add", "--prio", "1", "udp.dport=9001", "--to-qp", "1", "--count", "--tag", "7"]), "rule 3\n");
    assert_eq!(s.ok(&["add", "--prio", "2", "udp.dport=9002", "--drop", "--count"]), "rule 4\n");
    assert_eq!(s.ok(&["add", "--prio", "15", &format!("ipv4.dst={IP_A} ip.proto=udp"), "--to-table", "1", "--count"]), "rule 5\n");
    let e = s.fails(&["add", "--prio", "1", "udp.dport=9001", "--drop"]);
    assert!(e.contains("rule 3 already matches exactly this"), "{e}");
    let list = s.ok(&["list"]);
    assert_eq!(rule(&list, 1).unwrap(), ("0".into(), "0".into(), "udp.dport=9003 -> --to-qp 0 --count --tag 3".into()));
    assert_eq!(rule(&list, 2).unwrap(), ("0".into(), "0".into(), format!("ipv4.dst={IP_A} udp.dport=9000 -> --to-qp 0 --count")));
    assert_eq!(rule(&list, 3).unwrap().2, "udp.dport=9001 -> --to-qp 1 --count --tag 7");
    assert_eq!(rule(&list, 4).unwrap().2, "udp.dport=9002 -> --drop --count");
    assert_eq!(rule(&list, 5).unwrap().2, format!("ip.proto=17 ipv4.dst={IP_A} -> --to-table 1 --count"));

    let rx0 = field(&s.ok(&["stats", "--once"]), "port:", "rx");
    for (port, n) in [(9000, 25), (9001, 13), (9002, 7), (9003, 5)] {
        send(&l, port, n);
    }
    let st = settle(&s, |st| field(st, "port:", "rx") >= rx0 + 50 && field(st, "qp 0 ", "frames") + field(st, "qp 1 ", "frames") >= 43);
    // 60-byte frames (18 bytes of UDP payload): bytes = 60 * packets.
    let counts = |st: &str, id| rule(st, id).map(|r| (r.0.parse::<u64>().unwrap(), r.1.parse::<u64>().unwrap()));
    assert_eq!(counts(&st, 2), Some((25, 1500)), "{st}");
    assert_eq!(counts(&st, 3), Some((13, 780)), "{st}");
    assert_eq!(counts(&st, 4), Some((7, 420)), "{st}");
    assert_eq!(counts(&st, 5), Some((5, 300)), "only the frames to 9003 miss table 0's other rules:\n{st}");
    assert_eq!(counts(&st, 1), Some((5, 300)), "table 1's rule takes what rule 5 forwards:\n{st}");
    assert_eq!(field(&st, "qp 0 ", "frames"), 30, "{st}");
    assert_eq!(field(&st, "qp 0 ", "bytes"), 1800, "{st}");
    assert_eq!(field(&st, "qp 0 ", "last_tag"), 3, "the last frame to QP 0 went to 9003, rule 1's tag:\n{st}");
    assert_eq!(field(&st, "qp 1 ", "frames"), 13, "{st}");
    assert_eq!(field(&st, "qp 1 ", "last_tag"), 7, "{st}");
    assert_eq!(field(&st, "port:", "steer_dropped"), 7, "{st}");

    // del removes only rule 3: frames to 9001 now take rule 5 to table 1 and miss there.
    assert_eq!(s.ok(&["del", "3"]), "deleted rule 3\n");
    let list = s.ok(&["list"]);
    assert!(rule(&list, 3).is_none() && [1, 2, 4, 5].iter().all(|&i| rule(&list, i).is_some()), "{list}");
    assert!(s.fails(&["del", "3"]).contains("no rule 3"));
    let unsteered1 = field(&st, "port:", "unsteered");
    send(&l, 9001, 4);
    send(&l, 9000, 3);
    let st = settle(&s, |st| field(st, "qp 0 ", "frames") >= 33 && field(st, "port:", "unsteered") >= unsteered1 + 4);
    assert_eq!(counts(&st, 2), Some((28, 1680)), "{st}");
    assert_eq!(counts(&st, 5), Some((9, 540)), "{st}");
    assert_eq!(counts(&st, 1), Some((5, 300)), "{st}");
    assert_eq!(counts(&st, 4), Some((7, 420)), "{st}");
    assert_eq!(field(&st, "qp 0 ", "frames"), 33, "{st}");
    assert_eq!(field(&st, "qp 0 ", "last_tag"), 0, "rule 2 has no tag:\n{st}");
    assert_eq!(field(&st, "qp 1 ", "frames"), 13, "rule 3 is gone: its QP gets nothing more\n{st}");
    assert_eq!(field(&st, "port:", "steer_dropped"), 7, "{st}");
    assert!(watcher.try_wait().unwrap().is_none(), "the refreshing stats client is still running");
    let _ = watcher.kill();
    let _ = watcher.wait();
}

/// Starts `flow serve` in `l`'s namespace a with `qps` receive QPs; waits for READY.
fn serve(l: &Link, qps: u32, name: &str) -> Session {
    let sock = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("flow-{}-{name}.sock", std::process::id()));
    let mut child = Command::new("ip")
        .args(["netns", "exec", &l.ns_a, "env", &format!("DOORBELL_SOFTHCA_ADDR={IP_A}"), BIN, "flow", "--socket"])
        .arg(&sock)
        .args(["serve", "--port", &l.ns_a, "--qps", &qps.to_string()])
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = String::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        head.push_str(&line);
        head.push('\n');
        if line.starts_with("READY") {
            return Session { child, sock };
        }
    }
    panic!("serve ended before READY:\n{head}");
}

#[test]
fn rule_changes_mid_stream_touch_only_their_flow() {
    if !root_and_ip() {
        return;
    }
    let l = link(1);
    let s = serve(&l, 2, "midstream");
    assert_eq!(s.ok(&["add", "--prio", "1", "udp.dport=9100", "--to-qp", "0", "--count"]), "rule 1\n");
    assert_eq!(s.ok(&["add", "--prio", "1", "udp.dport=9101", "--to-qp", "1", "--count"]), "rule 2\n");
    // Below them, every UDP datagram to this address that they leave: the changed ports'
    // frames while no rule of priority 1 takes them (a stray frame of the kernel's is
    // not UDP to IP_A, so it is not counted here).
    assert_eq!(s.ok(&["add", "--prio", "3", &format!("ipv4.dst={IP_A} ip.proto=udp"), "--drop", "--count"]), "rule 3\n");
    let rx0 = field(&s.ok(&["stats", "--once"]), "port:", "rx");
    // 3000 frames, ports 9100, 9101, 9102 in turn (1000 each), over 3 seconds.
    const N: u64 = 3000;
    let sender = Command::new("ip")
        .args(["netns", "exec", &l.ns_b, BIN, "bench", "steer-send", "--if", &l.ns_b, "--dst-mac", MAC_A, "--src-ip", IP_B,
               "--dst-ip", IP_A, "--dport", "9100", "--ports", "3", "--count", &N.to_string(), "--rate", "1000", "--secs", "60"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // The changes go in at a third and at two thirds of the stream, as the port sees it.
    let until_rx = |n: u64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while field(&s.ok(&["stats", "--once"]), "port:", "rx") < rx0 + n {
            assert!(Instant::now() < deadline, "the stream did not reach {n} frames");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    until_rx(N / 3);
    assert_eq!(s.ok(&["add", "--prio", "1", "udp.dport=9102", "--to-qp", "1", "--count"]), "rule 4\n");
    until_rx(2 * N / 3);
    assert_eq!(s.ok(&["del", "2"]), "deleted rule 2\n");
    let out = sender.wait_with_output().unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).starts_with(&format!("sent {N} frames")),
            "steer-send: {}", String::from_utf8_lossy(&out.stdout));
    let st = settle(&s, |st| field(st, "port:", "rx") >= rx0 + N && field(st, "qp 0 ", "frames") >= N / 3);
    let packets = |id| rule(&st, id).map(|r| r.0.parse::<u64>().unwrap());
    // The untouched rule saw its whole stream, and its QP got all of it.
    assert_eq!(packets(1), Some(N / 3), "{st}");
    assert_eq!(field(&st, "qp 0 ", "frames"), N / 3, "{st}");
    // Rule 2 is gone (its counter with it); QP 1 got what it took and what rule 4 took.
    assert_eq!(packets(2), None, "{st}");
    let (to_qp1, added, fallback) = (field(&st, "qp 1 ", "frames"), packets(4).unwrap(), packets(3).unwrap());
    // Both changes happened mid-stream: each changed flow saw frames on both sides...
    assert!(added > 0 && added < N / 3 && to_qp1 > added && to_qp1 - added < N / 3, "{st}");
    // ...and every frame of the two changed ports is accounted for exactly once: taken
    // by rule 2 before its delete or by rule 4 after its add (both into QP 1), or by
    // the priority-3 rule while neither held.
    assert_eq!(to_qp1 + fallback, 2 * N / 3, "{st}");
    assert_eq!(field(&st, "port:", "steer_dropped"), fallback, "{st}");
}

/// scapy in namespace b: `n` frames of each kind, built and sent with `sendp` on the veth
/// (scapy computes every length and checksum itself): TCP/IPv4 to port 9200, UDP/IPv6 to
/// fd00::1 port 9201, UDP/IPv4 with an 802.1Q tag (VLAN 5) to port 9202, and ARP
/// requests from a MAC of their own (namespace a's kernel answers the TCP segments, and
/// the ARP replies that brings from namespace b are not scapy's).
const SCAPY_SENDER: &str = r#"
import sys
from scapy.all import Ether, Dot1Q, IP, IPv6, TCP, UDP, ARP, Raw, sendp
ifname, mac_a, ip_a, ip_b, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
e = Ether(dst=mac_a)
frames = []
for i in range(n):
    frames.append(e/IP(src=ip_b, dst=ip_a)/TCP(sport=40000 + i, dport=9200, flags="S")/Raw(b"tcp"))
    frames.append(e/IPv6(src="fd00::2", dst="fd00::1")/UDP(sport=40000, dport=9201)/Raw(b"udp6-%d" % i))
    frames.append(e/Dot1Q(vlan=5)/IP(src=ip_b, dst=ip_a)/UDP(sport=40000, dport=9202)/Raw(b"vlan"))
    frames.append(Ether(dst="ff:ff:ff:ff:ff:ff", src="02:00:00:7b:00:99")/ARP(pdst=ip_a, psrc=ip_b))
sendp(frames, iface=ifname, verbose=False)
print("sent", len(frames))
"#;

#[test]
fn scapy_frames_reach_the_rule_that_names_them() {
    if !root_and_ip() {
        return;
    }
    if !sh("python3 -c 'import scapy' 2>/dev/null") {
        testkit::skip(Need::Tool, "python3 with scapy missing (pip install scapy)");
        return;
    }
    let l = link(2);
    let s = serve(&l, 3, "scapy");
    assert_eq!(s.ok(&["add", "--prio", "1", &format!("ipv4.dst={IP_A} tcp.dport=9200"), "--to-qp", "0", "--count", "--tag", "1"]), "rule 1\n");
    assert_eq!(s.ok(&["add", "--prio", "1", "ipv6.dst=fd00::1 udp.dport=9201", "--to-qp", "1", "--count", "--tag", "2"]), "rule 2\n");
    assert_eq!(s.ok(&["add", "--prio", "1", "vlan=5 udp.dport=9202", "--to-qp", "2", "--count", "--tag", "3"]), "rule 3\n");
    assert_eq!(s.ok(&["add", "--prio", "2", "eth.type=arp eth.src=02:00:00:7b:00:99", "--drop", "--count"]), "rule 4\n");
    // The same TCP port over UDP must not match rule 1 (ip_protocol is part of it).
    assert_eq!(s.ok(&["add", "--prio", "2", "udp.dport=9200", "--drop", "--count"]), "rule 5\n");
    const N: u64 = 5;
    let out = Command::new("ip")
        .args(["netns", "exec", &l.ns_b, "python3", "-c", SCAPY_SENDER, &l.ns_b, MAC_A, IP_A, IP_B, &N.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success() && String::from_utf8_lossy(&out.stdout).contains(&format!("sent {}", 4 * N)),
            "scapy: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let st = settle(&s, |st| {
        field(st, "qp 0 ", "frames") >= N && field(st, "qp 1 ", "frames") >= N && field(st, "qp 2 ", "frames") >= N
            && field(st, "port:", "steer_dropped") >= N
    });
    let packets = |id| rule(&st, id).map(|r| r.0.parse::<u64>().unwrap());
    for (id, qp, tag) in [(1, "qp 0 ", 1), (2, "qp 1 ", 2), (3, "qp 2 ", 3)] {
        assert_eq!(packets(id), Some(N), "rule {id}:\n{st}");
        assert_eq!(field(&st, qp, "frames"), N, "{qp}:\n{st}");
        assert_eq!(field(&st, qp, "last_tag"), tag, "{qp}:\n{st}");
    }
    // scapy's broadcast ARP requests, dropped by rule 4 only; rule 5 never matched.
    assert_eq!(packets(4), Some(N), "{st}");
    assert_eq!(packets(5), Some(0), "a TCP segment is not a UDP datagram:\n{st}");
    assert_eq!(field(&st, "port:", "steer_dropped"), N, "{st}");
}
