//! Flow steering: the classifier a ConnectX runs on every received frame.
//!
//! The firmware's flow commands (`firmware/flow/`) build the state here: flow
//! tables with a type, a level and a miss behaviour; flow groups, each a range of a
//! table's flow indexes with one mask over the outer L2-L4 match set; entries
//! (FTEs) with a value under their group's mask and an [`Action`]. A received frame
//! is parsed once into a [`Key`] ([`key`]), then, from the root table of NIC RX:
//! - the table's groups are tried in order of their first flow index (the group
//!   order is the priority, as mlx5's `fs_core` creates groups in priority order);
//! - in each group, one hash lookup of `key & mask`: the cost is one lookup per
//!   group, whatever the number of entries (the common exact-match case);
//! - the first entry found acts: it counts (every counter it names, packets and
//!   bytes exact), then drops, forwards to a TIR/QP (the [`Verdict`]), or forwards
//!   to a table of a higher level, where classification goes on;
//! - a table where nothing matches applies its miss: [`Miss::Table`] goes to that
//!   table, [`Miss::Default`] to the next table of a higher level of the same type
//!   (mlx5's namespace chaining), and past the last one the frame is a
//!   [`Verdict::Miss`] (the vport's default, which the caller decides).
//!
//! Updates are atomic per command: every change takes the write lock and is
//! checked whole before anything changes, so a frame is classified either before
//! or after a rule is added or removed, and never sees half of one; frames of other
//! flows match the same entries before and after. Counters are atomics shared with
//! the entries, so classification runs under the read lock.
//!
//! The steering errors ([`SteerError`]) are the refusals a ConnectX answers with a
//! status; the firmware turns each into its status and syndrome.

pub mod key;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

pub use key::{Key, KEY_BYTES};

/// Where an entry forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// A TIR (the PRM's destination for receive queues on NIC RX).
    Tir(u32),
    /// A QP directly: what the kernel half's own rules name (mlx5_ib reaches a raw
    /// QP through its TIR; see the kernel half's `qp_tir`).
    Qp(u32),
    /// Another flow table (of a higher level, same type).
    Table(u32),
}

/// What an entry does.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Action {
    pub drop: bool,
    /// Forward destinations; the first TIR/QP/table one decides (softhca does not
    /// replicate a frame to several queues).
    pub dests: Vec<Dest>,
    /// Counter ids the entry adds to.
    pub counters: Vec<u32>,
    /// Reported with a delivered frame (the CQE's `flow_table_metadata`).
    pub flow_tag: u32,
}

/// How a table treats a frame that matches none of its entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    Default,
    Table(u32),
}

/// What classification decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Deliver { dest: Dest, flow_tag: u32 },
    Drop,
    /// No entry took it, and the miss chain ended: the vport's default.
    Miss,
}

/// Why a steering change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteerError {
    /// No such table / group / entry / counter.
    NoTable,
    NoGroup,
    NoEntry,
    NoCounter,
    /// A group's range is outside its table or overlaps another group's.
    GroupRange,
    /// An entry index in no group (or not in the group its context names).
    EntryIndex,
    /// An entry value with bits outside its group's mask.
    ValueOutsideCriteria,
    /// Another entry of the group has the same value.
    DuplicateValue,
    /// An entry already at that index (create), or none (modify).
    EntryExists,
    /// A forward to a table of a lower or equal level, another type, or itself.
    BadTableDest,
    /// A table with groups, a group with entries, a counter an entry uses, a table
    /// another table or entry points at, or a root table.
    Busy,
    /// Limits: table size, level.
    Limit,
}

/// One packet and byte counter.
#[derive(Debug, Default)]
pub struct Counter {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl Counter {
    fn add(&self, bytes: usize) {
        self.packets.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

#[derive(Debug)]
struct Entry {
    value: Key,
    action: Action,
    /// The counters, resolved when the entry was set.
    counters: Vec<Arc<Counter>>,
}

#[derive(Debug)]
struct Group {
    start: u32,
    end: u32,
    mask: Key,
    /// Masked value -> flow index.
    by_value: HashMap<Key, u32>,
    entries: BTreeMap<u32, Entry>,
}

#[derive(Debug)]
struct Table {
    ty: u8,
    level: u8,
    log_size: u8,
    miss: Miss,
    /// By id; `order` keeps them by start index.
    groups: HashMap<u32, Group>,
    order: Vec<u32>,
}

#[derive(Debug, Default)]
struct State {
    tables: BTreeMap<u32, Table>,
    counters: HashMap<u32, Arc<Counter>>,
    roots: HashMap<u8, u32>,
    next_table: u32,
    next_group: u32,
    next_counter: u32,
}

/// Limits the firmware advertises (`flow_table_properties_nic_receive`).
pub const LOG_MAX_FT_SIZE: u8 = 20;
pub const MAX_FT_LEVEL: u8 = 63;

/// The steering state of one HCA.
#[derive(Debug, Default)]
pub struct Steering {
    s: RwLock<State>,
}

/// A table as QUERY_FLOW_TABLE reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableInfo {
    pub ty: u8,
    pub level: u8,
    pub log_size: u8,
    pub miss: Miss,
}

/// An entry as QUERY_FLOW_TABLE_ENTRY reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryInfo {
    pub group: u32,
    pub value: Key,
    pub action: Action,
}

impl Steering {
    pub fn new() -> Self {
        Self::default()
    }

    fn w(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.s.write().unwrap_or_else(|e| e.into_inner())
    }
    fn r(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.s.read().unwrap_or_else(|e| e.into_inner())
    }

    /// CREATE_FLOW_TABLE.
    pub fn create_table(&self, ty: u8, level: u8, log_size: u8, miss: Miss) -> Result<u32, SteerError> {
        if log_size > LOG_MAX_FT_SIZE || level > MAX_FT_LEVEL {
            return Err(SteerError::Limit);
        }
        let mut s = self.w();
        if let Miss::Table(t) = miss {
            check_table_dest(&s, ty, level, t)?;
        }
        s.next_table += 1;
        let id = s.next_table;
        s.tables.insert(id, Table { ty, level, log_size, miss, groups: HashMap::new(), order: Vec::new() });
        Ok(id)
    }

    /// DESTROY_FLOW_TABLE: refused while it has groups, is a root, or something
    /// points at it.
    pub fn destroy_table(&self, id: u32) -> Result<(), SteerError> {
        let mut s = self.w();
        let t = s.tables.get(&id).ok_or(SteerError::NoTable)?;
        if !t.groups.is_empty() || s.roots.values().any(|&r| r == id) || referenced(&s, id) {
            return Err(SteerError::Busy);
        }
        s.tables.remove(&id);
        Ok(())
    }

    pub fn query_table(&self, id: u32) -> Result<TableInfo, SteerError> {
        let s = self.r();
        let t = s.tables.get(&id).ok_or(SteerError::NoTable)?;
        Ok(TableInfo { ty: t.ty, level: t.level, log_size: t.log_size, miss: t.miss })
    }

    /// The table type of a table, for the firmware's check of `table_type`.
    pub fn table_type(&self, id: u32) -> Option<u8> {
        self.r().tables.get(&id).map(|t| t.ty)
    }

    /// SET_FLOW_TABLE_ROOT: where classification of `ty` starts.
    pub fn set_root(&self, ty: u8, id: u32) -> Result<(), SteerError> {
        let mut s = self.w();
        if s.tables.get(&id).ok_or(SteerError::NoTable)?.ty != ty {
            return Err(SteerError::NoTable);
        }
        s.roots.insert(ty, id);
        Ok(())
    }

    /// The root of a type: the one SET_FLOW_TABLE_ROOT named, else the lowest-level
    /// table of that type (the first one created among equals), as mlx5's root
    /// namespace connects its first table.
    fn root(s: &State, ty: u8) -> Option<u32> {
        if let Some(&r) = s.roots.get(&ty) {
            return Some(r);
        }
        s.tables.iter().filter(|(_, t)| t.ty == ty).min_by_key(|(id, t)| (t.level, **id)).map(|(id, _)| *id)
    }

    /// CREATE_FLOW_GROUP: `start..=end` in the table, disjoint from its groups.
    pub fn create_group(&self, table: u32, start: u32, end: u32, mask: Key) -> Result<u32, SteerError> {
        let mut s = self.w();
        let t = s.tables.get(&table).ok_or(SteerError::NoTable)?;
        let size = 1u64 << t.log_size;
        if start > end || end as u64 >= size {
            return Err(SteerError::GroupRange);
        }
        if t.groups.values().any(|g| start <= g.end && g.start <= end) {
            return Err(SteerError::GroupRange);
        }
        s.next_group += 1;
        let id = s.next_group;
        let t = s.tables.get_mut(&table).expect("checked");
        t.groups.insert(id, Group { start, end, mask, by_value: HashMap::new(), entries: BTreeMap::new() });
        t.order.push(id);
        let groups = &t.groups;
        t.order.sort_by_key(|g| groups[g].start);
        Ok(id)
    }

    /// DESTROY_FLOW_GROUP: refused while it has entries.
    pub fn destroy_group(&self, table: u32, group: u32) -> Result<(), SteerError> {
        let mut s = self.w();
        let t = s.tables.get_mut(&table).ok_or(SteerError::NoTable)?;
        let g = t.groups.get(&group).ok_or(SteerError::NoGroup)?;
        if !g.entries.is_empty() {
            return Err(SteerError::Busy);
        }
        t.groups.remove(&group);
        t.order.retain(|&g| g != group);
        Ok(())
    }

    /// SET_FLOW_TABLE_ENTRY: creates (`modify` false) or replaces the entry at
    /// `index`. `group` is the group the context names, checked against the one
    /// that holds the index when given. Nothing changes unless all of it is valid.
    pub fn set_entry(
        &self,
        table: u32,
        index: u32,
        group: Option<u32>,
        value: Key,
        action: Action,
        modify: bool,
    ) -> Result<(), SteerError> {
        let mut s = self.w();
        let t = s.tables.get(&table).ok_or(SteerError::NoTable)?;
        let gid = *t
            .groups
            .iter()
            .find(|(_, g)| g.start <= index && index <= g.end)
            .map(|(id, _)| id)
            .ok_or(SteerError::EntryIndex)?;
        if group.is_some_and(|g| g != gid) {
            return Err(SteerError::EntryIndex);
        }
        let g = &t.groups[&gid];
        if value.outside(&g.mask) {
            return Err(SteerError::ValueOutsideCriteria);
        }
        match (g.entries.contains_key(&index), modify) {
            (true, false) | (false, true) => return Err(SteerError::EntryExists),
            _ => {}
        }
        if g.by_value.get(&value).is_some_and(|&i| i != index) {
            return Err(SteerError::DuplicateValue);
        }
        for d in &action.dests {
            if let Dest::Table(to) = *d {
                check_table_dest(&s, t.ty, t.level, to)?;
            }
        }
        let counters = action
            .counters
            .iter()
            .map(|c| s.counters.get(c).cloned().ok_or(SteerError::NoCounter))
            .collect::<Result<Vec<_>, _>>()?;
        let g = s.tables.get_mut(&table).and_then(|t| t.groups.get_mut(&gid)).expect("checked");
        if let Some(old) = g.entries.remove(&index) {
            g.by_value.remove(&old.value);
        }
        g.by_value.insert(value, index);
        g.entries.insert(index, Entry { value, action, counters });
        Ok(())
    }

    /// DELETE_FLOW_TABLE_ENTRY.
    pub fn delete_entry(&self, table: u32, index: u32) -> Result<(), SteerError> {
        let mut s = self.w();
        let t = s.tables.get_mut(&table).ok_or(SteerError::NoTable)?;
        let g = t.groups.values_mut().find(|g| g.start <= index && index <= g.end).ok_or(SteerError::EntryIndex)?;
        let e = g.entries.remove(&index).ok_or(SteerError::NoEntry)?;
        g.by_value.remove(&e.value);
        Ok(())
    }

    /// QUERY_FLOW_TABLE_ENTRY.
    pub fn query_entry(&self, table: u32, index: u32) -> Result<EntryInfo, SteerError> {
        let s = self.r();
        let t = s.tables.get(&table).ok_or(SteerError::NoTable)?;
        for (&id, g) in &t.groups {
            if let Some(e) = g.entries.get(&index) {
                return Ok(EntryInfo { group: id, value: e.value, action: e.action.clone() });
            }
        }
        Err(SteerError::NoEntry)
    }

    /// ALLOC_FLOW_COUNTER.
    pub fn alloc_counter(&self) -> u32 {
        let mut s = self.w();
        s.next_counter += 1;
        let id = s.next_counter;
        s.counters.insert(id, Arc::default());
        id
    }

    /// DEALLOC_FLOW_COUNTER: refused while an entry counts into it.
    pub fn dealloc_counter(&self, id: u32) -> Result<(), SteerError> {
        let mut s = self.w();
        let c = s.counters.get(&id).ok_or(SteerError::NoCounter)?;
        // The map's reference plus one per entry that holds it.
        if Arc::strong_count(c) > 1 {
            return Err(SteerError::Busy);
        }
        s.counters.remove(&id);
        Ok(())
    }

    /// QUERY_FLOW_COUNTER: (packets, bytes), zeroed after reading when `clear`.
    pub fn query_counter(&self, id: u32, clear: bool) -> Result<(u64, u64), SteerError> {
        let s = self.r();
        let c = s.counters.get(&id).ok_or(SteerError::NoCounter)?;
        Ok(if clear {
            (c.packets.swap(0, Ordering::Relaxed), c.bytes.swap(0, Ordering::Relaxed))
        } else {
            (c.packets.load(Ordering::Relaxed), c.bytes.load(Ordering::Relaxed))
        })
    }

    /// How many tables, groups, entries and counters exist.
    pub fn counts(&self) -> (usize, usize, usize, usize) {
        let s = self.r();
        let groups = s.tables.values().map(|t| t.groups.len()).sum();
        let entries = s.tables.values().flat_map(|t| t.groups.values()).map(|g| g.entries.len()).sum();
        (s.tables.len(), groups, entries, s.counters.len())
    }

    /// Classifies one frame of table type `ty` (NIC RX: 0) from its root.
    pub fn classify(&self, ty: u8, frame: &[u8]) -> Verdict {
        self.classify_key(ty, &Key::parse(frame), frame.len())
    }

    /// Classifies a parsed frame of `len` bytes.
    pub fn classify_key(&self, ty: u8, key: &Key, len: usize) -> Verdict {
        let s = self.r();
        let Some(mut at) = Self::root(&s, ty) else { return Verdict::Miss };
        // Levels only grow along forwards and misses, so this ends; the bound is a
        // second guard.
        for _ in 0..=MAX_FT_LEVEL as usize + 1 {
            let Some(t) = s.tables.get(&at) else { return Verdict::Miss };
            let hit = t.order.iter().find_map(|gid| {
                let g = &t.groups[gid];
                g.by_value.get(&key.masked(&g.mask)).map(|i| (*gid, *i, &g.entries[i]))
            });
            let next = match hit {
                Some((group, index, e)) => {
                    tracing::trace!(target: "softhca::steer", table = at, level = t.level, group, index,
                                    drop = e.action.drop, dest = ?e.action.dests.first(), flow_tag = e.action.flow_tag,
                                    counters = e.counters.len(), "flow entry hit");
                    for c in &e.counters {
                        c.add(len);
                    }
                    if e.action.drop {
                        return Verdict::Drop;
                    }
                    match e.action.dests.first() {
                        Some(&Dest::Table(to)) => Some(to),
                        Some(&dest) => return Verdict::Deliver { dest, flow_tag: e.action.flow_tag },
                        // Count-only (or ALLOW) entries end classification here: the
                        // vport's default takes the frame.
                        None => return Verdict::Miss,
                    }
                }
                None => {
                    tracing::trace!(target: "softhca::steer", table = at, level = t.level, miss = ?t.miss, "table miss");
                    match t.miss {
                        Miss::Table(to) => Some(to),
                        Miss::Default => next_level(&s, t.ty, t.level, at),
                    }
                }
            };
            match next {
                Some(n) => at = n,
                None => return Verdict::Miss,
            }
        }
        Verdict::Miss
    }
}

/// The table after `at` in its type's chain: the lowest level above `level` (and
/// among tables of the same level, the next id).
fn next_level(s: &State, ty: u8, level: u8, at: u32) -> Option<u32> {
    s.tables
        .iter()
        .filter(|(id, t)| t.ty == ty && (t.level > level || (t.level == level && **id > at)))
        .min_by_key(|(id, t)| (t.level, **id))
        .map(|(id, _)| *id)
}

fn check_table_dest(s: &State, ty: u8, level: u8, to: u32) -> Result<(), SteerError> {
    let t = s.tables.get(&to).ok_or(SteerError::BadTableDest)?;
    if t.ty != ty || t.level <= level {
        return Err(SteerError::BadTableDest);
    }
    Ok(())
}

/// Whether a table's miss or an entry forwards to `id`.
fn referenced(s: &State, id: u32) -> bool {
    s.tables.values().any(|t| {
        t.miss == Miss::Table(id)
            || t.groups.values().flat_map(|g| g.entries.values()).any(|e| e.action.dests.contains(&Dest::Table(id)))
    })
}
