//! What the tests that put softhca's Ethernet port on a veth share (raw_port.rs,
//! flow_stock.rs): two network namespaces joined by a veth pair, softhca's end `a` and
//! the Linux stack's end `b`, a way to run a program on softhca in `a` and a python3
//! script in `b`, and a wait on a process's output. The including test declares
//! `mod pcommon` (softhca/preload/tests/common) at its root.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn sh(cmd: &str) -> bool {
    Command::new("sh").arg("-c").arg(cmd).status().is_ok_and(|s| s.success())
}

/// Two namespaces joined by a veth pair: softhca's end (`a`, 10.NET.N.1) and the host
/// side (`b`, 10.NET.N.2), with fixed MACs (02:00:00:NET:N:01 and :02); removed on drop.
pub struct Link {
    pub ns_a: String,
    pub ns_b: String,
    pub if_a: String,
    pub if_b: String,
    pub ip_a: String,
    pub ip_b: String,
    pub mac_a: String,
    pub mac_b: String,
}

impl Link {
    /// Link `n` of this process; `prefix` names its namespaces and interfaces (one per
    /// test file, so that parallel test binaries never meet), `net` (two decimal
    /// digits, written into the MACs as they are) its addresses.
    pub fn new(prefix: &str, net: u8, n: u8) -> Link {
        let tag = format!("{}{n}", std::process::id() % 10000);
        let l = Link {
            ns_a: format!("{prefix}a{tag}"),
            ns_b: format!("{prefix}b{tag}"),
            if_a: format!("{prefix}a{tag}"),
            if_b: format!("{prefix}b{tag}"),
            ip_a: format!("10.{net}.{n}.1"),
            ip_b: format!("10.{net}.{n}.2"),
            mac_a: format!("02:00:00:{net}:{n:02x}:01"),
            mac_b: format!("02:00:00:{net}:{n:02x}:02"),
        };
        let ok = sh(&format!(
            "set -e; ip netns add {na}; ip netns add {nb}; \
             ip link add {ia} address {ma} type veth peer name {ib} address {mb}; \
             ip link set {ia} netns {na}; ip link set {ib} netns {nb}; \
             ip -n {na} addr add {pa}/24 dev {ia}; ip -n {nb} addr add {pb}/24 dev {ib}; \
             ip -n {na} link set {ia} up; ip -n {nb} link set {ib} up; \
             ip -n {na} link set lo up; ip -n {nb} link set lo up",
            na = l.ns_a, nb = l.ns_b, ia = l.if_a, ib = l.if_b, ma = l.mac_a, mb = l.mac_b, pa = l.ip_a, pb = l.ip_b
        ));
        assert!(ok, "setting up the namespaces failed");
        l
    }

    /// The test program in namespace a under the preload, softhca's port on the veth
    /// there, the test-only fan-out on or off.
    pub fn softhca(&self, exe: &Path, args: &[&str], fanout: bool) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_a, "env"])
            .arg(format!("LD_PRELOAD={}", crate::pcommon::preload().display()))
            .arg(format!("DOORBELL_ETH_IF={}", self.if_a))
            .arg(format!("DOORBELL_SOFTHCA_ADDR={}", self.ip_a))
            .arg(format!("DOORBELL_ETH_TEST_FANOUT={}", u8::from(fanout)))
            .arg(exe)
            .args(args)
            .env_remove("RUST_LOG");
        c
    }

    /// A python3 script in namespace b.
    pub fn python(&self, script: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns_b, "python3", "-c", script]).args(args);
        c
    }

    pub fn mac_hex(mac: &str) -> String {
        mac.replace(':', "")
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        sh(&format!("ip netns del {} 2>/dev/null; ip netns del {} 2>/dev/null", self.ns_a, self.ns_b));
    }
}

/// Waits (up to a generous deadline that only turns a hang into a failure) until
/// `p`'s output satisfies `done`.
pub fn wait_output(p: &crate::pcommon::Proc, what: &str, mut done: impl FnMut(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = p.stdout_so_far();
        if done(&out) {
            return out;
        }
        assert!(Instant::now() < deadline, "{what}: not seen; output so far:\n{out}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
