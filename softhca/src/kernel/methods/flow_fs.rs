//! The kernel's own steering tables (mlx5_core's fs_core as mlx5_ib's `flow_db` uses it):
//! one auto-grouped NIC RX table per bypass priority, made on the first rule and
//! destroyed with the last, groups made per match mask and destroyed when empty, one
//! FTE per rule, all through the firmware's flow commands with uid 0 (the kernel's), so
//! the firmware's checks apply and a refused step undoes the steps before it.
//!
//! As fs_core: a table of priority `p` is at level `p` (each bypass priority holds one
//! level, and the bypass namespace is the first of the NIC RX root; the leftovers
//! namespace, the last, is at [`LEFTOVERS_LEVEL`] here). Its size is
//! `min(2^log_max_ft_size, 2^16)` entries; the first [`MAX_TYPES`] masks get groups of
//! `size / (MAX_TYPES + 1)` indexes placed first-fit, later masks groups of one; an
//! entry takes its group's lowest free index. A value with bits outside its mask is
//! EINVAL (`check_valid_spec`), a full table ENOSPC. Tables miss to the next level (the
//! engine's default miss, as fs_core chains priorities); no root is set (the engine
//! starts at the lowest level, which is fs_core's root).
//!
//! Not as fs_core: a second rule with a value already in its group is EEXIST here;
//! fs_core merges it into the existing FTE (adding its destination) when the actions
//! do not conflict.

use std::collections::{BTreeMap, BTreeSet};

use nix::errno::Errno;

use prm::bits::{View, ViewMut};
use prm::cmd::flow::entry::{action, dest_type, DeleteFteIn, DestFormat, FlowContext, FlowCounterList, SetFteIn,
                            DEST_ENTRY_BYTES};
use prm::cmd::flow::group::{CreateFlowGroupIn, CreateFlowGroupOut, DestroyFlowGroupIn};
use prm::cmd::flow::matching::FteMatchParam;
use prm::cmd::flow::table::{CreateFlowTableIn, CreateFlowTableOut, DestroyFlowTableIn, FlowTableContext,
                            TABLE_TYPE_NIC_RX};
use prm::cmd::header::{MboxIn, MboxOut};
use prm::cmd::opcode as op;

use crate::hca::Hca;
use crate::kernel::Result;

/// `MLX5_FS_MAX_TYPES`: groups of the full size an auto-grouped table makes.
pub(crate) const MAX_TYPES: u32 = 6;
/// `MLX5_FS_MAX_ENTRIES`.
pub(crate) const MAX_ENTRIES: u32 = 1 << 16;
/// The leftovers namespace's table (ALL_DEFAULT/MC_DEFAULT flows): after every bypass
/// priority and the kernel's own namespaces; the engine's highest level.
pub(crate) const LEFTOVERS_LEVEL: u8 = crate::device::steer::MAX_FT_LEVEL;
/// `LEFTOVERS_RULE_NUM`: the leftovers table's entries and groups.
pub(crate) const LEFTOVERS_RULES: u32 = 2;

/// Bytes of an `fte_match_param`.
pub(crate) const MATCH_BYTES: usize = FteMatchParam::BYTES;

/// Which of mlx5_ib's `flow_db` priorities a table serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum PrioKey {
    /// A bypass priority (`ib_prio_to_core_prio`, or the multicast priority).
    Bypass(u32),
    /// `MLX5_IB_FLOW_LEFTOVERS_PRIO`.
    Leftovers,
}

impl PrioKey {
    fn level(self) -> u8 {
        match self {
            PrioKey::Bypass(p) => p as u8,
            PrioKey::Leftovers => LEFTOVERS_LEVEL,
        }
    }

    /// (entries, groups of full size) of the table (`get_flow_table`).
    fn shape(self) -> (u32, u32) {
        let max = 1u32 << crate::device::steer::LOG_MAX_FT_SIZE;
        match self {
            PrioKey::Bypass(_) => (max.min(MAX_ENTRIES), MAX_TYPES),
            PrioKey::Leftovers => (LEFTOVERS_RULES, LEFTOVERS_RULES),
        }
    }
}

/// A rule's match: `fte_match_param` criteria and value, and `match_criteria_enable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MatchSpec {
    pub enable: u8,
    pub criteria: Vec<u8>,
    pub value: Vec<u8>,
}

impl MatchSpec {
    pub(crate) fn new() -> MatchSpec {
        MatchSpec { enable: 0, criteria: vec![0; MATCH_BYTES], value: vec![0; MATCH_BYTES] }
    }
}

/// Where a rule sends what it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RuleDest {
    Tir(u32),
    Table(u32),
}

/// A rule's actions (`mlx5_flow_act` with its destinations).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RuleAct {
    pub drop: bool,
    pub dests: Vec<RuleDest>,
    pub counters: Vec<u32>,
    pub flow_tag: Option<u32>,
}

#[derive(Debug)]
struct Group {
    id: u32,
    start: u32,
    size: u32,
    enable: u8,
    criteria: Vec<u8>,
    /// Offsets in use, with their values.
    used: BTreeMap<u32, Vec<u8>>,
}

#[derive(Debug)]
struct Prio {
    table: u32,
    size: u32,
    full_groups: u32,
    /// Sorted by start index.
    groups: Vec<Group>,
    /// Rules in the table (`mlx5_ib_flow_prio.refcount`).
    refcount: u32,
}

/// The kernel's tables of one HCA (`mlx5_ib_dev.flow_db`), behind the HCA's lock.
#[derive(Debug, Default)]
pub(crate) struct FlowDb {
    prios: BTreeMap<PrioKey, Prio>,
}

/// One installed rule: where its FTE is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Rule {
    pub prio: PrioKey,
    pub table: u32,
    pub group: u32,
    pub index: u32,
}

fn inbox(opcode: u16, bytes: usize) -> Vec<u8> {
    let mut b = vec![0u8; bytes];
    if let Ok(mut v) = ViewMut::<MboxIn>::new(&mut b) {
        v.set(MboxIn::opcode, opcode);
    }
    b
}

fn exec(hca: &Hca, b: &[u8], out: usize) -> Result<Vec<u8>> {
    hca.firmware().kernel_cmd(b, out, None)
}

fn create_table(hca: &Hca, level: u8, log_size: u8) -> Result<u32> {
    let mut b = inbox(op::CREATE_FLOW_TABLE, CreateFlowTableIn::BYTES);
    if let Ok(mut v) = ViewMut::<CreateFlowTableIn>::new(&mut b) {
        v.set(CreateFlowTableIn::table_type, TABLE_TYPE_NIC_RX);
        v.sub_mut(CreateFlowTableIn::flow_table_context)
            .set(FlowTableContext::level, level)
            .set(FlowTableContext::log_size, log_size);
    }
    let out = exec(hca, &b, CreateFlowTableOut::BYTES)?;
    View::<CreateFlowTableOut>::new(&out).map(|v| v.get(CreateFlowTableOut::table_id)).map_err(|_| Errno::EIO)
}

fn destroy_table(hca: &Hca, table: u32) -> Result<()> {
    let mut b = inbox(op::DESTROY_FLOW_TABLE, DestroyFlowTableIn::BYTES);
    if let Ok(mut v) = ViewMut::<DestroyFlowTableIn>::new(&mut b) {
        v.set(DestroyFlowTableIn::table_type, TABLE_TYPE_NIC_RX).set(DestroyFlowTableIn::table_id, table);
    }
    exec(hca, &b, MboxOut::BYTES).map(|_| ())
}

fn create_group(hca: &Hca, table: u32, start: u32, end: u32, enable: u8, criteria: &[u8]) -> Result<u32> {
    let mut b = inbox(op::CREATE_FLOW_GROUP, CreateFlowGroupIn::BYTES);
    if let Ok(mut v) = ViewMut::<CreateFlowGroupIn>::new(&mut b) {
        v.set(CreateFlowGroupIn::table_type, TABLE_TYPE_NIC_RX)
            .set(CreateFlowGroupIn::table_id, table)
            .set(CreateFlowGroupIn::start_flow_index, start)
            .set(CreateFlowGroupIn::end_flow_index, end)
            .set(CreateFlowGroupIn::match_criteria_enable, enable);
    }
    let at = CreateFlowGroupIn::match_criteria.off() / 8;
    b[at..at + MATCH_BYTES].copy_from_slice(criteria);
    let out = exec(hca, &b, CreateFlowGroupOut::BYTES)?;
    View::<CreateFlowGroupOut>::new(&out).map(|v| v.get(CreateFlowGroupOut::group_id)).map_err(|_| Errno::EIO)
}

fn destroy_group(hca: &Hca, table: u32, group: u32) -> Result<()> {
    let mut b = inbox(op::DESTROY_FLOW_GROUP, DestroyFlowGroupIn::BYTES);
    if let Ok(mut v) = ViewMut::<DestroyFlowGroupIn>::new(&mut b) {
        v.set(DestroyFlowGroupIn::table_type, TABLE_TYPE_NIC_RX)
            .set(DestroyFlowGroupIn::table_id, table)
            .set(DestroyFlowGroupIn::group_id, group);
    }
    exec(hca, &b, MboxOut::BYTES).map(|_| ())
}

/// SET_FLOW_TABLE_ENTRY (create) as `mlx5_cmd_set_fte` builds it.
fn set_fte(hca: &Hca, table: u32, group: u32, index: u32, value: &[u8], act: &RuleAct) -> Result<()> {
    let (nd, nc) = (act.dests.len(), act.counters.len());
    let mut b = inbox(op::SET_FLOW_TABLE_ENTRY, SetFteIn::BYTES + (nd + nc) * DEST_ENTRY_BYTES);
    let mut bits = if act.drop { action::DROP } else { 0 };
    if nd > 0 {
        bits |= action::FWD_DEST;
    }
    if nc > 0 {
        bits |= action::COUNT;
    }
    let mut v = ViewMut::<SetFteIn>::new(&mut b).map_err(|_| Errno::EIO)?;
    v.set(SetFteIn::table_type, TABLE_TYPE_NIC_RX).set(SetFteIn::table_id, table).set(SetFteIn::flow_index, index);
    v.sub_mut(SetFteIn::flow_context)
        .set(FlowContext::group_id, group)
        .set(FlowContext::flow_tag, act.flow_tag.unwrap_or(0))
        .set(FlowContext::action, bits)
        .set(FlowContext::destination_list_size, nd as u32)
        .set(FlowContext::flow_counter_list_size, nc as u32);
    let tail = v.tail_mut();
    for (i, d) in act.dests.iter().enumerate() {
        let (ty, id) = match *d {
            RuleDest::Tir(n) => (dest_type::TIR, n),
            RuleDest::Table(n) => (dest_type::FLOW_TABLE, n),
        };
        if let Ok(mut e) = ViewMut::<DestFormat>::new(&mut tail[i * DEST_ENTRY_BYTES..]) {
            e.set(DestFormat::destination_type, ty).set(DestFormat::destination_id, id);
        }
    }
    for (i, &c) in act.counters.iter().enumerate() {
        if let Ok(mut e) = ViewMut::<FlowCounterList>::new(&mut tail[(nd + i) * DEST_ENTRY_BYTES..]) {
            e.set(FlowCounterList::flow_counter_id, c);
        }
    }
    let at = SetFteIn::flow_context.off() / 8 + FlowContext::match_value.off() / 8;
    b[at..at + MATCH_BYTES].copy_from_slice(value);
    exec(hca, &b, MboxOut::BYTES).map(|_| ())
}

fn delete_fte(hca: &Hca, table: u32, index: u32) -> Result<()> {
    let mut b = inbox(op::DELETE_FLOW_TABLE_ENTRY, DeleteFteIn::BYTES);
    if let Ok(mut v) = ViewMut::<DeleteFteIn>::new(&mut b) {
        v.set(DeleteFteIn::table_type, TABLE_TYPE_NIC_RX).set(DeleteFteIn::table_id, table).set(DeleteFteIn::flow_index, index);
    }
    exec(hca, &b, MboxOut::BYTES).map(|_| ())
}

/// `check_valid_spec`: no value bit outside the criteria.
fn valid_spec(m: &MatchSpec) -> bool {
    m.value.iter().zip(&m.criteria).all(|(v, c)| v & !c == 0)
}

impl FlowDb {
    /// `get_flow_table` + `mlx5_add_flow_rules`: installs one rule, making its table and
    /// group when needed; on a refusal nothing of it stays.
    pub(crate) fn add_rule(&mut self, hca: &Hca, key: PrioKey, m: &MatchSpec, act: &RuleAct) -> Result<Rule> {
        if !valid_spec(m) {
            return Err(Errno::EINVAL);
        }
        let made_table = !self.prios.contains_key(&key);
        if made_table {
            let (size, full_groups) = key.shape();
            let table = create_table(hca, key.level(), size.next_power_of_two().ilog2() as u8)?;
            self.prios.insert(key, Prio { table, size: size.next_power_of_two(), full_groups, groups: Vec::new(), refcount: 0 });
        }
        let r = self.add_in(hca, key, m, act);
        if r.is_err() {
            self.put(hca, key);
        }
        r
    }

    fn add_in(&mut self, hca: &Hca, key: PrioKey, m: &MatchSpec, act: &RuleAct) -> Result<Rule> {
        let p = self.prios.get_mut(&key).ok_or(Errno::EINVAL)?;
        let same = |g: &Group| g.enable == m.enable && g.criteria == m.criteria;
        if p.groups.iter().filter(|g| same(g)).any(|g| g.used.values().any(|v| *v == m.value)) {
            return Err(Errno::EEXIST);
        }
        // An existing group of this mask with room, else a new one (`create_autogroup`).
        let (gi, made_group) = match p.groups.iter().position(|g| same(g) && (g.used.len() as u32) < g.size) {
            Some(i) => (i, false),
            None => {
                let full = p.size / (p.full_groups + 1);
                let n_full = p.groups.iter().filter(|g| g.size == full).count() as u32;
                let size = if n_full < p.full_groups && full > 0 { full } else { 1 };
                let mut start = 0u32;
                let mut at = p.groups.len();
                for (i, g) in p.groups.iter().enumerate() {
                    if start + size > g.start {
                        start = g.start + g.size;
                    } else {
                        at = i;
                        break;
                    }
                }
                if start + size > p.size {
                    return Err(Errno::ENOSPC);
                }
                let id = create_group(hca, p.table, start, start + size - 1, m.enable, &m.criteria)?;
                p.groups.insert(at, Group { id, start, size, enable: m.enable, criteria: m.criteria.clone(), used: BTreeMap::new() });
                (at, true)
            }
        };
        let g = &mut p.groups[gi];
        let free: BTreeSet<u32> = g.used.keys().copied().collect();
        let off = (0..g.size).find(|o| !free.contains(o)).ok_or(Errno::ENOSPC)?;
        let index = g.start + off;
        // TIR 0 is none (TIR numbers start at 1): a ConnectX refuses the FTE with
        // BAD_PARAM; softhca's firmware does not check TIR numbers yet
        // (`firmware::flow::tir_exists`), so the refusal is made here, in its place.
        let r = if act.dests.contains(&RuleDest::Tir(0)) { Err(Errno::EINVAL) }
                else { set_fte(hca, p.table, g.id, index, &m.value, act) };
        if let Err(e) = r {
            if made_group {
                let _ = destroy_group(hca, p.table, g.id);
                p.groups.remove(gi);
            }
            return Err(e);
        }
        g.used.insert(off, m.value.clone());
        p.refcount += 1;
        Ok(Rule { prio: key, table: p.table, group: g.id, index })
    }

    /// `put_flow_table`: the table goes with its last rule.
    fn put(&mut self, hca: &Hca, key: PrioKey) {
        if let Some(p) = self.prios.get(&key) {
            if p.refcount == 0 && p.groups.is_empty() {
                let _ = destroy_table(hca, p.table);
                self.prios.remove(&key);
            }
        }
    }

    /// `mlx5_del_flow_rules` + `put_flow_table`: the FTE, its group when empty, the
    /// table when it held the last rule.
    pub(crate) fn del_rule(&mut self, hca: &Hca, r: &Rule) -> Result<()> {
        let Some(p) = self.prios.get_mut(&r.prio) else { return Ok(()) };
        delete_fte(hca, r.table, r.index)?;
        if let Some(gi) = p.groups.iter().position(|g| g.id == r.group) {
            let g = &mut p.groups[gi];
            g.used.remove(&(r.index - g.start));
            if g.used.is_empty() {
                let _ = destroy_group(hca, p.table, g.id);
                p.groups.remove(gi);
            }
        }
        p.refcount = p.refcount.saturating_sub(1);
        self.put(hca, r.prio);
        Ok(())
    }

    /// Tables the kernel holds (for tests).
    #[cfg(test)]
    pub(crate) fn tables(&self) -> usize {
        self.prios.len()
    }
}
