//! `doorbell flow serve`: the long-lived owner of a steering session.
//!
//! DevX objects belong to the process that made them, and softhca runs inside that
//! process, so the flow tables, the rules, their counters and the raw packet QPs the
//! rules deliver to must all live in one process for the whole experiment. `serve`
//! is that process: it opens the device (softhca with its Ethernet port on `--port`),
//! creates `--qps` receive QPs and table 0, and answers `add`/`del`/`list`/`stats`
//! from other shells over a unix socket (newline-delimited JSON, [`super::proto`]).
//!
//! Table layout: a rule's group is chosen by (priority, set of fields matched), since a
//! group has one mask. Groups are tried in order of their first flow index, so the
//! index space of each table is cut into bands by priority: priority `p` (0 first,
//! 15 last) owns [`GROUPS_PER_PRIO`] group slots of [`GROUP_SIZE`] entries each, i.e.
//! up to 4 different field sets per priority and 16,384 rules per field set.

use std::collections::BTreeMap;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _, Result};
use devx::flow::{FlowCounter, FlowGroup, FlowRule, FlowTable, Match, Rule, Target};
use devx::DevxContext;
use serde_json::{json, Value};

use super::proto::{RuleSpec, To};
use super::rawrx::RawRx;
use super::syntax;

/// log2 of each table's entries.
pub const LOG_SIZE: u8 = 20;
/// Priorities 0..PRIOS.
pub const PRIOS: u8 = 16;
pub const GROUPS_PER_PRIO: u32 = 4;
pub const GROUP_SIZE: u32 = 1 << 14;
const _: () = assert!(PRIOS as u32 * GROUPS_PER_PRIO * GROUP_SIZE == 1 << LOG_SIZE);

struct Group {
    g: FlowGroup,
    /// Slot in the table's index space (start = slot * GROUP_SIZE).
    slot: u32,
    prio: u8,
    mask: Vec<u8>,
    /// Used entry offsets inside the group.
    used: std::collections::BTreeSet<u32>,
}

struct Table {
    t: FlowTable,
    groups: Vec<Group>,
}

struct Installed {
    spec: RuleSpec,
    m: Match,
    /// Field order: the entry is deleted before its counter is freed and its group is
    /// destroyed.
    rule: Option<FlowRule>,
    counter: Option<FlowCounter>,
    index: u32,
}

/// One receive QP and what its poller counted.
pub struct Sink {
    pub rx: RawRx,
    pub frames: u64,
    pub bytes: u64,
    pub errors: u64,
}

/// Fields drop in order: the QPs (and their MRs) before the PD they use; rules,
/// groups and tables are emptied in order by `Drop` first.
pub struct Server {
    sinks: Arc<Mutex<Vec<Sink>>>,
    tables: BTreeMap<u32, Table>,
    rules: BTreeMap<u32, Installed>,
    next_id: u32,
    qpns: Vec<(u32, u32)>,
    _pd: provider::Pd,
    d: DevxContext,
}

impl Server {
    /// Opens `dev` (None: the embedded softhca) with `qps` receive QPs of `rq` WQEs
    /// and table 0.
    pub fn new(dev: Option<&str>, qps: u32, rq: u32) -> Result<Server> {
        let d = DevxContext::open(dev).with_context(|| format!("open {} with DevX", dev.unwrap_or("softhca0")))?;
        let pd = d.context().alloc_pd().context("alloc_pd")?;
        let mut sinks = Vec::new();
        let mut qpns = Vec::new();
        for i in 0..qps {
            let rx = RawRx::new(&d, &pd, rq.next_power_of_two(), 0x80_0000 + i)?;
            qpns.push((rx.qpn, rx.tirn));
            sinks.push(Sink { rx, frames: 0, bytes: 0, errors: 0 });
        }
        let mut s = Server { d, _pd: pd, tables: BTreeMap::new(), rules: BTreeMap::new(), next_id: 1,
                             sinks: Arc::new(Mutex::new(sinks)), qpns };
        s.table(0)?;
        Ok(s)
    }

    /// The receive QPs' (qpn, tirn), by index.
    pub fn qps(&self) -> &[(u32, u32)] {
        &self.qpns
    }

    pub fn sinks(&self) -> Arc<Mutex<Vec<Sink>>> {
        self.sinks.clone()
    }

    /// Table `n` (level n), created on first use.
    fn table(&mut self, n: u32) -> Result<&mut Table> {
        if n > 63 {
            bail!("table {n}: tables are 0..=63 (the level)");
        }
        if !self.tables.contains_key(&n) {
            let t = FlowTable::new(&self.d, n as u8, LOG_SIZE, None).with_context(|| format!("create table {n}"))?;
            self.tables.insert(n, Table { t, groups: Vec::new() });
        }
        Ok(self.tables.get_mut(&n).expect("inserted"))
    }

    /// Installs a rule; returns its id.
    pub fn add(&mut self, spec: RuleSpec) -> Result<u32> {
        if spec.prio >= PRIOS {
            bail!("priority {}: priorities are 0..{PRIOS} (0 is tried first)", spec.prio);
        }
        let m = syntax::parse(&spec.matches).map_err(|e| anyhow!("{e}"))?;
        // The firmware refuses a second entry of the same value in a group (BAD_PARAM);
        // say which rule it is.
        if let Some((id, _)) = self.rules.iter().find(|(_, r)| r.spec.table == spec.table && r.spec.prio == spec.prio && r.m == m) {
            bail!("rule {id} already matches exactly this in table {} at priority {}", spec.table, spec.prio);
        }
        let target = match spec.action.to {
            To::Qp(i) => {
                let (_, tirn) = *self.qpns.get(i as usize)
                    .ok_or_else(|| anyhow!("qp {i}: this session has {} QPs (flow serve --qps)", self.qpns.len()))?;
                Target::Tir(tirn)
            }
            To::Drop => Target::Drop,
            To::Pass => Target::Allow,
            To::Table(t) => {
                if t <= spec.table {
                    bail!("--to-table {t}: a rule forwards to a table of a higher number (level) than its own ({})", spec.table);
                }
                Target::Table(self.table(t)?.t.id)
            }
        };
        let counter = if spec.action.count { Some(FlowCounter::new(&self.d).context("alloc flow counter")?) } else { None };
        let d = self.d.clone();
        let table = self.table(spec.table)?;
        let mask = m.mask().to_vec();
        let gi = match table.groups.iter().position(|g| g.prio == spec.prio && g.mask == mask) {
            Some(i) => i,
            None => {
                let band = spec.prio as u32 * GROUPS_PER_PRIO;
                let Some(slot) = (band..band + GROUPS_PER_PRIO).find(|s| table.groups.iter().all(|g| g.slot != *s)) else {
                    bail!("priority {}: already {GROUPS_PER_PRIO} different field sets in table {}; use another priority",
                          spec.prio, spec.table);
                };
                let start = slot * GROUP_SIZE;
                let g = FlowGroup::new(&d, &table.t, start, start + GROUP_SIZE - 1, &m).context("create flow group")?;
                table.groups.push(Group { g, slot, prio: spec.prio, mask, used: Default::default() });
                table.groups.len() - 1
            }
        };
        let grp = &mut table.groups[gi];
        let Some(off) = (0..GROUP_SIZE).find(|o| !grp.used.contains(o)) else {
            bail!("group of priority {} full ({GROUP_SIZE} rules)", spec.prio);
        };
        let index = grp.slot * GROUP_SIZE + off;
        let rule = Rule { target, flow_tag: spec.action.tag, counters: counter.iter().map(|c| c.id).collect() };
        let r = FlowRule::new(&d, &table.t, &grp.g, index, &m, &rule);
        let r = match r {
            Ok(r) => r,
            Err(e) => {
                let empty = grp.used.is_empty();
                if empty {
                    table.groups.remove(gi);
                }
                return Err(anyhow!("set flow table entry: {e}"));
            }
        };
        grp.used.insert(off);
        let id = self.next_id;
        self.next_id += 1;
        let spec = RuleSpec { matches: syntax::show(&m), ..spec };
        self.rules.insert(id, Installed { spec, m, rule: Some(r), counter, index });
        Ok(id)
    }

    /// Deletes rule `id` (and its group when it was the last of it).
    pub fn del(&mut self, id: u32) -> Result<()> {
        let Some(mut ins) = self.rules.remove(&id) else { bail!("no rule {id}") };
        drop(ins.rule.take());
        drop(ins.counter.take());
        if let Some(t) = self.tables.get_mut(&ins.spec.table) {
            let slot = ins.index / GROUP_SIZE;
            if let Some(gi) = t.groups.iter().position(|g| g.slot == slot) {
                t.groups[gi].used.remove(&(ins.index % GROUP_SIZE));
                if t.groups[gi].used.is_empty() {
                    t.groups.remove(gi);
                }
            }
        }
        Ok(())
    }

    /// Everything `list` and `stats` show.
    pub fn state(&self) -> Value {
        let rules: Vec<Value> = self.rules.iter().map(|(id, r)| {
            let q = r.counter.as_ref().map(|c| c.query(false));
            if let Some(Err(e)) = &q {
                tracing::warn!(rule = id, "query flow counter: {e}");
            }
            let c = q.and_then(|q| q.ok());
            json!({
                "id": id, "table": r.spec.table, "prio": r.spec.prio, "match": r.spec.matches,
                "action": r.spec.action.to_json(), "index": r.index,
                "packets": c.map(|c| c.0), "bytes": c.map(|c| c.1),
            })
        }).collect();
        let sinks = self.sinks.lock().unwrap_or_else(|p| p.into_inner());
        let qps: Vec<Value> = sinks.iter().enumerate().map(|(i, s)| json!({
            "qp": i, "qpn": s.rx.qpn, "tirn": s.rx.tirn, "frames": s.frames, "bytes": s.bytes, "errors": s.errors,
            "last_tag": s.rx.last_flow_tag,
        })).collect();
        drop(sinks);
        let port = if self.d.device().is_kernel() {
            Value::Null
        } else {
            match softhca::default_hca() {
                Ok(h) => {
                    let c = h.device().counters();
                    json!({"rx_frames": c.eth_rx_frames, "unsteered": c.eth_rx_unsteered, "steer_dropped": c.eth_rx_steer_dropped,
                           "no_rq": c.eth_rx_no_rq, "no_recv": c.eth_rx_no_recv})
                }
                Err(_) => Value::Null,
            }
        };
        json!({"ok": true, "rules": rules, "qps": qps, "port": port})
    }

    /// Answers one request line.
    pub fn handle(&mut self, line: &str, stop: &AtomicBool) -> Value {
        let r = (|| -> Result<Value> {
            let v: Value = serde_json::from_str(line).context("request is not JSON")?;
            match v["op"].as_str().unwrap_or("") {
                "add" => {
                    let spec = RuleSpec::from_json(&v)?;
                    let id = self.add(spec)?;
                    Ok(json!({"ok": true, "id": id}))
                }
                "del" => {
                    let id = v["id"].as_u64().ok_or_else(|| anyhow!("del wants an id"))?;
                    self.del(id as u32)?;
                    Ok(json!({"ok": true}))
                }
                "list" | "stats" => Ok(self.state()),
                "stop" => {
                    stop.store(true, Ordering::Release);
                    Ok(json!({"ok": true}))
                }
                op => bail!("unknown op {op:?}"),
            }
        })();
        r.unwrap_or_else(|e| json!({"ok": false, "error": format!("{e:#}")}))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // Entries before their groups, groups before their tables, higher tables (the
        // forward targets) last.
        let ids: Vec<u32> = self.rules.keys().copied().collect();
        for id in ids {
            let _ = self.del(id);
        }
        while let Some((_, mut t)) = self.tables.pop_first() {
            t.groups.clear();
        }
    }
}

/// The poller: drains every sink, spinning briefly after work and then sleeping longer
/// and longer (up to 1 ms), so it leaves the engine and port threads their CPU.
pub fn spawn_poller(sinks: Arc<Mutex<Vec<Sink>>>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("flow-poll".into())
        .spawn(move || {
            let mut idle = 0u32;
            while !stop.load(Ordering::Acquire) {
                let mut got = 0;
                {
                    let mut s = sinks.lock().unwrap_or_else(|p| p.into_inner());
                    for k in s.iter_mut() {
                        let p = k.rx.poll(256);
                        k.frames += p.frames;
                        k.bytes += p.bytes;
                        k.errors += p.errors;
                        got += p.frames + p.errors;
                    }
                }
                if got > 0 {
                    idle = 0;
                } else {
                    idle = idle.saturating_add(1);
                    if idle < 64 {
                        std::hint::spin_loop();
                    } else if idle < 256 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(u64::from((idle - 256).min(1000)).max(20)));
                    }
                }
            }
        })
        .expect("spawn poller")
}

/// Serves requests on `path` until a `stop` request or `stop` set by a signal. Each
/// connection has its own thread (a refreshing `flow stats` keeps its connection open
/// while other shells add and delete rules); requests take the server's lock one at a
/// time, so each is atomic with respect to the others.
pub fn serve(s: Arc<Mutex<Server>>, path: &Path, stop: &Arc<AtomicBool>) -> Result<()> {
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            bail!("{} is in use: another `doorbell flow serve` runs (use --socket)", path.display());
        }
        std::fs::remove_file(path).with_context(|| format!("remove stale {}", path.display()))?;
    }
    let l = UnixListener::bind(path).with_context(|| format!("bind {}", path.display()))?;
    l.set_nonblocking(true)?;
    println!("READY {}", path.display());
    let _ = std::io::stdout().flush();
    while !stop.load(Ordering::Acquire) {
        match l.accept() {
            Ok((c, _)) => {
                c.set_nonblocking(false)?;
                let (s, stop) = (s.clone(), stop.clone());
                std::thread::spawn(move || {
                    let Ok(mut w) = c.try_clone() else { return };
                    for line in BufReader::new(c).lines() {
                        let Ok(line) = line else { break };
                        if line.trim().is_empty() {
                            continue;
                        }
                        let answer = s.lock().unwrap_or_else(|p| p.into_inner()).handle(&line, &stop);
                        if writeln!(w, "{answer}").is_err() {
                            break;
                        }
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(e.into()),
        }
    }
    let _ = std::fs::remove_file(path);
    Ok(())
}
