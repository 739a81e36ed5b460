//! `doorbell flow serve|add|del|list|stats|stop`: flow steering rules on the device,
//! in a readable match syntax ([`syntax`]), through the devx crate's flow API.
//!
//! A session is one `flow serve` process (see [`server`] for why it has to be one
//! process): it owns the tables, rules, counters and the raw packet QPs that rules
//! deliver to, and the other subcommands talk to it over a unix socket.

mod proto;
mod rawrx;
mod server;
pub mod syntax;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};

use proto::{Action, Client, RuleSpec, To};

const MATCH_HELP: &str = "MATCH: FIELD=VALUE terms, all of which must hold ('any' matches every frame):
  eth.dst=MAC eth.src=MAC eth.type=ipv4|ipv6|arp|0x88b5 vlan=ID ip.proto=udp|tcp|icmp|N
  ipv4.src=A ipv4.dst=A ipv6.src=A ipv6.dst=A (ip.src/ip.dst: either family)
  udp.sport=P udp.dport=P tcp.sport=P tcp.dport=P (imply ip.proto)
Every field is matched exactly: a rule costs one hash lookup in its group whatever the
number of rules. Priority 0 is tried first; within a priority, rules naming different
field sets sit in different groups (at most 4 field sets per priority and table).";

#[derive(clap::Args)]
#[command(after_help = MATCH_HELP)]
pub struct Args {
    /// The session's socket (default: $DOORBELL_FLOW_SOCK, else /tmp/doorbell-flow-UID.sock).
    #[arg(long, global = true)]
    socket: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Sub,
}

#[derive(Subcommand)]
enum Sub {
    /// Own a steering session: open the device, create receive QPs and table 0, load
    /// --rules, and serve add/del/list/stats until `flow stop` or Ctrl-C (rules, QPs
    /// and counters die with this process).
    Serve(ServeArgs),
    /// Install a rule: `flow add --prio 1 'ipv4.dst=10.0.0.2 udp.dport=9000' --to-qp 0 --count`.
    #[command(after_help = MATCH_HELP)]
    Add(AddArgs),
    /// Delete rules by id (as `add` printed them and `list` shows them).
    Del {
        #[arg(required = true)]
        ids: Vec<u32>,
    },
    /// The rules, with their counters, and the receive QPs.
    List,
    /// Counters live: per rule packets, bytes and rates, per QP frames, the port's
    /// unsteered/dropped frames; refreshed every --interval (--once: one snapshot).
    Stats(StatsArgs),
    /// End the session (`flow serve` exits, destroying everything).
    Stop,
}

#[derive(clap::Args)]
struct ServeArgs {
    /// The Ethernet interface softhca's port attaches to (sets DOORBELL_ETH_IF).
    #[arg(long)]
    port: Option<String>,
    /// The device (default: the embedded softhca).
    #[arg(short = 'd', long = "ib-dev")]
    dev: Option<String>,
    /// Receive QPs (RAW_PACKET) rules can deliver to: --to-qp 0..N-1.
    #[arg(long, default_value_t = 1)]
    qps: u32,
    /// Receive WQEs per QP (a power of two).
    #[arg(long, default_value_t = 4096)]
    rq_size: u32,
    /// Rules to install first: one `flow add`'s arguments per line (# comments).
    #[arg(long)]
    rules: Option<PathBuf>,
}

#[derive(Parser, Debug, Clone, PartialEq, Eq)]
#[command(no_binary_name = true)]
pub struct AddArgs {
    /// The match (see below); quote it as one argument.
    #[arg(value_name = "MATCH")]
    matches: String,
    /// The table (its level; 0 is where every frame starts).
    #[arg(long, default_value_t = 0)]
    table: u32,
    /// Priority 0..15, 0 tried first.
    #[arg(long, default_value_t = 0)]
    prio: u8,
    /// Deliver to the session's receive QP N.
    #[arg(long, value_name = "N", group = "target")]
    to_qp: Option<u32>,
    /// Drop the frame.
    #[arg(long, group = "target")]
    drop: bool,
    /// Continue to table N (higher than this rule's).
    #[arg(long, value_name = "N", group = "target")]
    to_table: Option<u32>,
    /// Let the frame go on (to the next table or the port default): with --count or --tag.
    #[arg(long, group = "target")]
    pass: bool,
    /// Count the rule's packets and bytes (a flow counter).
    #[arg(long)]
    count: bool,
    /// Flow tag reported in the CQE (24 bits).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..1 << 24))]
    tag: u32,
}

impl AddArgs {
    /// The rule, checked locally first (the match's syntax) so errors need no server.
    pub fn spec(&self) -> Result<RuleSpec> {
        let m = syntax::parse(&self.matches).map_err(|e| anyhow!("{e}"))?;
        let to = match (self.to_qp, self.drop, self.to_table, self.pass) {
            (Some(q), ..) => To::Qp(q),
            (_, true, ..) => To::Drop,
            (_, _, Some(t), _) => To::Table(t),
            (.., true) => To::Pass,
            _ if self.count || self.tag != 0 => To::Pass,
            _ => bail!("no action: give --to-qp N, --drop, --to-table N, or --pass/--count"),
        };
        if self.prio >= server::PRIOS {
            bail!("--prio {}: priorities are 0..{}", self.prio, server::PRIOS);
        }
        Ok(RuleSpec { table: self.table, prio: self.prio, matches: syntax::show(&m),
                      action: Action { to, count: self.count, tag: self.tag } })
    }
}

/// Splits a rules-file line into words: whitespace separates, '...' and "..." quote.
pub fn split_words(line: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut inw = false;
    let mut q: Option<char> = None;
    for c in line.chars() {
        match (q, c) {
            (Some(x), c) if c == x => q = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                q = Some(c);
                inw = true;
            }
            (None, c) if c.is_whitespace() => {
                if inw {
                    out.push(std::mem::take(&mut cur));
                    inw = false;
                }
            }
            (None, c) => {
                cur.push(c);
                inw = true;
            }
        }
    }
    if q.is_some() {
        bail!("unterminated quote");
    }
    if inw {
        out.push(cur);
    }
    Ok(out)
}

/// The rules of a rules file, with their line numbers in errors.
pub fn parse_rules(text: &str) -> Result<Vec<RuleSpec>> {
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words = split_words(line).with_context(|| format!("line {}", i + 1))?;
        let a = AddArgs::try_parse_from(words).map_err(|e| anyhow!("line {}: {}", i + 1, e.to_string().trim()))?;
        v.push(a.spec().with_context(|| format!("line {}", i + 1))?);
    }
    Ok(v)
}

fn socket_path(a: &Args) -> PathBuf {
    a.socket.clone().or_else(|| std::env::var_os("DOORBELL_FLOW_SOCK").map(PathBuf::from)).unwrap_or_else(|| {
        // SAFETY: getuid has no preconditions.
        PathBuf::from(format!("/tmp/doorbell-flow-{}.sock", unsafe { libc::getuid() }))
    })
}

static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    SIGNALLED.store(true, Ordering::Release);
}

pub fn run(a: &Args) -> Result<()> {
    let path = socket_path(a);
    match &a.cmd {
        Sub::Serve(s) => serve(s, &path),
        Sub::Add(add) => {
            let spec = add.spec()?;
            let v = Client::connect(&path)?.call(&spec.to_json())?;
            println!("rule {}", v["id"]);
            Ok(())
        }
        Sub::Del { ids } => {
            let mut c = Client::connect(&path)?;
            for id in ids {
                c.call(&json!({"op": "del", "id": id}))?;
                println!("deleted rule {id}");
            }
            Ok(())
        }
        Sub::List => {
            let v = Client::connect(&path)?.call(&json!({"op": "list"}))?;
            print!("{}", render(&v, None));
            Ok(())
        }
        Sub::Stats(s) => stats(s, &path),
        Sub::Stop => {
            Client::connect(&path)?.call(&json!({"op": "stop"}))?;
            Ok(())
        }
    }
}

fn serve(s: &ServeArgs, path: &std::path::Path) -> Result<()> {
    if let Some(p) = &s.port {
        // Before the device is first opened: softhca reads it when the instance starts.
        std::env::set_var(softhca::config::ETH_IF_ENV, p);
    }
    let rules = match &s.rules {
        Some(f) => parse_rules(&std::fs::read_to_string(f).with_context(|| format!("read {}", f.display()))?)
            .with_context(|| format!("{}", f.display()))?,
        None => Vec::new(),
    };
    let mut srv = server::Server::new(s.dev.as_deref(), s.qps, s.rq_size)?;
    for (i, (qpn, tirn)) in srv.qps().iter().enumerate() {
        println!("qp {i}: qpn {qpn:#x} tir {tirn:#x}");
    }
    let n = rules.len();
    for r in rules {
        srv.add(r.clone()).with_context(|| format!("rule {}", r.matches))?;
    }
    if n > 0 {
        println!("{n} rules installed");
    }
    let stop = Arc::new(AtomicBool::new(false));
    // SAFETY: the handler only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let watcher = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Acquire) {
                if SIGNALLED.load(Ordering::Acquire) {
                    stop.store(true, Ordering::Release);
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let poller = server::spawn_poller(srv.sinks(), stop.clone());
    let srv = Arc::new(std::sync::Mutex::new(srv));
    let r = server::serve(srv.clone(), path, &stop);
    stop.store(true, Ordering::Release);
    let _ = poller.join();
    let _ = watcher.join();
    // Connection threads may still hold a clone; the session ends with this process
    // either way, but destroy in order (rules, groups, tables) when we can.
    if let Ok(m) = Arc::try_unwrap(srv) {
        drop(m.into_inner().unwrap_or_else(|p| p.into_inner()));
    }
    r
}

#[derive(clap::Args)]
struct StatsArgs {
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// One snapshot, no refreshing.
    #[arg(long)]
    once: bool,
    /// Stop after this many refreshes.
    #[arg(long)]
    count: Option<u64>,
}

fn stats(s: &StatsArgs, path: &std::path::Path) -> Result<()> {
    let mut c = Client::connect(path)?;
    let mut prev: Option<(Value, Instant)> = None;
    let tty = nix::unistd::isatty(1).unwrap_or(false);
    let mut n = 0u64;
    loop {
        let v = c.call(&json!({"op": "stats"}))?;
        let now = Instant::now();
        let rates = prev.as_ref().map(|(p, t)| (p, now.duration_since(*t).as_secs_f64()));
        if tty && !s.once {
            print!("\x1b[H\x1b[2J");
        }
        print!("{}", render(&v, rates));
        n += 1;
        if s.once || s.count.is_some_and(|c| n >= c) {
            return Ok(());
        }
        if !tty {
            println!();
        }
        prev = Some((v, now));
        std::thread::sleep(Duration::from_secs_f64(s.interval.max(0.05)));
    }
}

fn rate(cur: &Value, prev: Option<(&Value, f64)>, pick: impl Fn(&Value) -> Option<u64>) -> String {
    match (pick(cur), prev.and_then(|(p, dt)| pick(p).map(|x| (x, dt)))) {
        (Some(c), Some((p, dt))) if dt > 0.0 => format!("{:.0}", c.saturating_sub(p) as f64 / dt),
        _ => "-".into(),
    }
}

/// The table `list` and `stats` print (with rates when the previous snapshot is given).
fn render(v: &Value, prev: Option<(&Value, f64)>) -> String {
    let mut s = String::new();
    let empty = Vec::new();
    let rules = v["rules"].as_array().unwrap_or(&empty);
    s.push_str(&format!("{:>5} {:>5} {:>4} {:>12} {:>14} {:>10}  {}\n", "rule", "table", "prio", "packets", "bytes", "pkt/s", "match -> action"));
    for r in rules {
        let id = r["id"].as_u64();
        let old = prev.and_then(|(p, dt)| p["rules"].as_array()?.iter().find(|x| x["id"].as_u64() == id).map(|x| (x, dt)));
        let action = Action::from_json(&r["action"]).map(|a| a.show()).unwrap_or_default();
        let num = |k: &str| r[k].as_u64().map_or("-".into(), |x| x.to_string());
        s.push_str(&format!("{:>5} {:>5} {:>4} {:>12} {:>14} {:>10}  {} -> {}\n", num("id"), num("table"), num("prio"), num("packets"),
                            num("bytes"), rate(r, old, |x| x["packets"].as_u64()), r["match"].as_str().unwrap_or(""), action));
    }
    for q in v["qps"].as_array().unwrap_or(&empty) {
        let i = q["qp"].as_u64();
        let old = prev.and_then(|(p, dt)| p["qps"].as_array()?.iter().find(|x| x["qp"].as_u64() == i).map(|x| (x, dt)));
        s.push_str(&format!("qp {} (qpn {:#x}): frames {} bytes {} errors {} last_tag {} frames/s {}\n", q["qp"],
                            q["qpn"].as_u64().unwrap_or(0), q["frames"], q["bytes"], q["errors"], q["last_tag"],
                            rate(q, old, |x| x["frames"].as_u64())));
    }
    let p = &v["port"];
    if !p.is_null() {
        s.push_str(&format!("port: rx {} unsteered {} steer_dropped {} no_rq {} no_recv {}\n", p["rx_frames"], p["unsteered"],
                            p["steer_dropped"], p["no_rq"], p["no_recv"]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(words: &[&str]) -> Result<RuleSpec> {
        AddArgs::try_parse_from(words.iter().map(|s| s.to_string())).map_err(|e| anyhow!("{e}"))?.spec()
    }

    #[test]
    fn add_arguments() {
        let r = add(&["--table", "0", "--prio", "1", "ipv4.dst=10.0.0.2 udp.dport=9000", "--to-qp", "2"]).unwrap();
        assert_eq!(r, RuleSpec { table: 0, prio: 1, matches: "ipv4.dst=10.0.0.2 udp.dport=9000".into(),
                                 action: Action { to: To::Qp(2), count: false, tag: 0 } });
        assert_eq!(add(&["udp.dport=1", "--drop"]).unwrap().action.to, To::Drop);
        let c = add(&["udp.dport=1", "--count"]).unwrap();
        assert_eq!(c.action, Action { to: To::Pass, count: true, tag: 0 }, "--count alone counts and lets the frame on");
        assert_eq!(add(&["any", "--to-table", "3", "--tag", "7"]).unwrap().action, Action { to: To::Table(3), count: false, tag: 7 });
        // Errors: no action, two targets, bad match, priority and tag out of range.
        assert!(add(&["udp.dport=1"]).unwrap_err().to_string().contains("no action"));
        assert!(add(&["udp.dport=1", "--drop", "--to-qp", "0"]).is_err(), "targets exclude each other");
        assert!(add(&["udp.dport=99999", "--drop"]).unwrap_err().to_string().contains("out of range"));
        assert!(add(&["udp.dport=1", "--drop", "--prio", "16"]).unwrap_err().to_string().contains("priorities"));
        assert!(add(&["udp.dport=1", "--drop", "--tag", "16777216"]).is_err());
        assert!(add(&["--drop"]).is_err(), "the match is required");
    }

    #[test]
    fn rules_files() {
        let text = "# a session\n\n--prio 1 'ipv4.dst=10.0.0.2 udp.dport=9000' --to-qp 0 --count\n  \"eth.type=arp\" --drop\n";
        let r = parse_rules(text).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].matches, "ipv4.dst=10.0.0.2 udp.dport=9000");
        assert_eq!(r[0].action, Action { to: To::Qp(0), count: true, tag: 0 });
        assert_eq!(r[1].matches, "eth.type=0x0806");
        let e = parse_rules("udp.dport=1 --drop\nudp.dport=x --drop\n").unwrap_err();
        assert!(format!("{e:#}").contains("line 2"), "{e:#}");
        assert!(parse_rules("'udp.dport=1 --drop\n").is_err(), "unterminated quote");
        assert_eq!(split_words(" a 'b c'  \"d\"e ").unwrap(), ["a", "b c", "de"]);
    }

    #[test]
    fn render_shows_counts_and_rates() {
        let v = json!({"rules": [{"id": 1, "table": 0, "prio": 1, "match": "udp.dport=9", "packets": 30, "bytes": 3000,
                                  "action": {"to": {"qp": 0}, "count": true, "tag": 0}}],
                       "qps": [{"qp": 0, "qpn": 0x108, "frames": 30, "bytes": 3000, "errors": 0, "last_tag": 5}],
                       "port": {"rx_frames": 40, "unsteered": 10, "steer_dropped": 0, "no_rq": 0, "no_recv": 0}});
        let old = json!({"rules": [{"id": 1, "packets": 10}], "qps": [{"qp": 0, "frames": 10}]});
        let t = render(&v, Some((&old, 2.0)));
        assert!(t.contains("udp.dport=9 -> --to-qp 0 --count"), "{t}");
        assert!(t.lines().nth(1).unwrap().split_whitespace().nth(5) == Some("10"), "(30-10)/2 s: {t}");
        assert!(t.contains("qp 0 (qpn 0x108): frames 30 bytes 3000 errors 0 last_tag 5 frames/s 10"), "{t}");
        assert!(t.contains("port: rx 40 unsteered 10"), "{t}");
    }
}
