//! The flow steering commands onto the device half's steering engine
//! ([`crate::device::steer`]): CREATE/DESTROY/QUERY_FLOW_TABLE, SET_FLOW_TABLE_ROOT,
//! CREATE/DESTROY_FLOW_GROUP, SET/QUERY/DELETE_FLOW_TABLE_ENTRY, ALLOC/DEALLOC/
//! QUERY_FLOW_COUNTER.
//!
//! What is there: NIC RX tables (`table_type` 0) of any level up to
//! [`steer::MAX_FT_LEVEL`] and `log_size` up to [`steer::LOG_MAX_FT_SIZE`], with a
//! default or a forward miss; groups over the outer L2-L4 match set
//! (`match_criteria_enable` 0 or OUTER_HEADERS); entries with the actions ALLOW,
//! DROP, FWD_DEST (to TIRs and to flow tables) and COUNT, and a flow tag; created and
//! modified (op_mod 1 under `modify_enable_mask`); single flow counters. Everything
//! else a ConnectX has (other table types, misc/inner match sets, reformat,
//! header rewrite, VLAN push/pop, extended destinations, bulk counters, dumps to
//! memory, sw_owner tables) is BAD_PARAM with a syndrome of its own, and the
//! capability bits ([`super::caps`]) do not advertise it.
//!
//! Each object is recorded with the uid that made it; another uid's object is
//! BAD_PARAM (as everywhere in this firmware). A command is checked whole before the
//! engine changes, and the engine's change is itself all or nothing, so a refused
//! command leaves no part of a rule behind.
//!
//! Where the engine refuses (see [`steer::SteerError`]): a table, group or entry the
//! command acts on that does not exist is BAD_RES; one a context names (a miss table,
//! a destination table, a counter) is BAD_PARAM; a group range outside its table or
//! overlapping another, an entry index in no group, a value outside its group's
//! criteria, two entries with one value in a group: BAD_PARAM; a destroy of a table
//! that still has groups (or is a root, or a miss or destination of another), of a
//! group with entries, of a counter an entry counts into: RES_BUSY (EBUSY through
//! mlx5_cmd_exec, as every busy destroy here).
//!
//! TIR destinations: TIRs are the raw-packet firmware objects (another part of the
//! firmware); until they exist here, [`tir_exists`] is the hook that says whether a
//! TIR number names one, and accepts any.

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use prm::bits::{View, ViewMut};
use prm::cmd::flow::counter::*;
use prm::cmd::flow::entry::{self as fte, action, dest_type, modify_mask, DestFormat, FlowContext, FlowCounterList};
use prm::cmd::flow::entry::{DeleteFteIn, QueryFteOut, SetFteIn, DEST_ENTRY_BYTES};
use prm::cmd::flow::group::*;
use prm::cmd::flow::matching::{criteria, FteMatchParam};
use prm::cmd::flow::table::*;
use prm::cmd::status::{BAD_RES_ERR, RES_BUSY};

use super::status::{syndrome, Outcome};
use super::{bad_param, Cmd, R};
use crate::device::steer::{self, Action, Dest, Key, Miss, SteerError, Steering};

/// softhca's syndromes for the flow commands (the high byte is the status, as in
/// [`super::status::syndrome`]).
pub mod flow_syndrome {
    /// BAD_PARAM: a table type other than NIC RX, or another vport.
    pub const TABLE_TYPE: u32 = 0x0300_0101;
    /// BAD_PARAM: a table feature softhca lacks (sw_owner, reformat, decap,
    /// termination table, a miss action other than default/forward).
    pub const TABLE_FEATURE: u32 = 0x0300_0102;
    /// BAD_PARAM: `log_size` above `log_max_ft_size`, or `level` above `max_ft_level`.
    pub const TABLE_LIMIT: u32 = 0x0300_0103;
    /// BAD_PARAM: a miss or destination table that does not exist, is another
    /// uid's or type's, or is not of a higher level.
    pub const BAD_TABLE_DEST: u32 = 0x0300_0104;
    /// BAD_PARAM: a group range outside the table or overlapping another group.
    pub const GROUP_RANGE: u32 = 0x0300_0105;
    /// BAD_PARAM: match criteria in a set softhca does not match on (misc, inner).
    pub const CRITERIA: u32 = 0x0300_0106;
    /// BAD_PARAM: an entry index in no group, or not in the group its context names.
    pub const ENTRY_INDEX: u32 = 0x0300_0107;
    /// BAD_PARAM: a match value with bits outside its group's criteria.
    pub const VALUE_OUTSIDE_CRITERIA: u32 = 0x0300_0108;
    /// BAD_PARAM: another entry of the group has the same match value.
    pub const DUPLICATE_VALUE: u32 = 0x0300_0109;
    /// BAD_PARAM: a create at an index that holds an entry, or a modify of none.
    pub const ENTRY_EXISTS: u32 = 0x0300_010a;
    /// BAD_PARAM: actions softhca does not execute, DROP with FWD_DEST, a
    /// destination list without FWD_DEST (or none with it), a counter list without
    /// COUNT (or none with it), extended destinations.
    pub const ACTION: u32 = 0x0300_010b;
    /// BAD_PARAM: a destination type other than TIR or flow table, or a TIR that
    /// does not exist.
    pub const DEST_TYPE: u32 = 0x0300_010c;
    /// BAD_PARAM: a counter that does not exist or is another uid's.
    pub const BAD_COUNTER: u32 = 0x0300_010d;
    /// BAD_PARAM: bulk counters, counter dumps to memory.
    pub const COUNTER_FEATURE: u32 = 0x0300_010e;
    /// BAD_INP_LEN: a destination list longer than the inbox.
    pub const DEST_LIST_LEN: u32 = 0x5000_0101;
}
use flow_syndrome as fs;

/// The flow objects' owners, beside the engine that holds the objects.
#[derive(Debug, Default)]
pub(crate) struct FlowObjs {
    pub(crate) steering: std::sync::Arc<Steering>,
    tables: HashMap<u32, u16>,
    groups: HashMap<u32, u16>,
    counters: HashMap<u32, u16>,
}

impl FlowObjs {
    pub(crate) fn owned_by(&self, uid: u16) -> bool {
        self.tables.values().chain(self.groups.values()).chain(self.counters.values()).any(|&u| u == uid)
    }
}

/// Whether TIR `tirn` exists (the raw-packet part of the firmware owns TIRs; this
/// is where it will answer). Until then any number is accepted.
pub(crate) fn tir_exists(_c: &Cmd<'_>, _tirn: u32) -> bool {
    true
}

fn no_res() -> Outcome {
    Outcome::err(BAD_RES_ERR, syndrome::NO_OBJECT)
}

/// The status of an engine refusal of a command acting on `target` objects.
fn engine_err(e: SteerError) -> Outcome {
    match e {
        SteerError::NoTable | SteerError::NoGroup | SteerError::NoEntry => no_res(),
        SteerError::NoCounter => bad_param(fs::BAD_COUNTER),
        SteerError::GroupRange => bad_param(fs::GROUP_RANGE),
        SteerError::EntryIndex => bad_param(fs::ENTRY_INDEX),
        SteerError::ValueOutsideCriteria => bad_param(fs::VALUE_OUTSIDE_CRITERIA),
        SteerError::DuplicateValue => bad_param(fs::DUPLICATE_VALUE),
        SteerError::EntryExists => bad_param(fs::ENTRY_EXISTS),
        SteerError::BadTableDest => bad_param(fs::BAD_TABLE_DEST),
        SteerError::Busy => Outcome::err(RES_BUSY, syndrome::IN_USE),
        SteerError::Limit => bad_param(fs::TABLE_LIMIT),
    }
}

/// The table a command acts on: BAD_RES if none, BAD_PARAM if another uid's; and
/// the command's `table_type` must be the table's.
fn own_table(c: &Cmd<'_>, id: u32, ty: u8) -> R<()> {
    match c.objs.flow.tables.get(&id) {
        None => Err(no_res()),
        Some(&u) if u != c.uid => Err(bad_param(syndrome::FOREIGN_OBJECT)),
        Some(_) if c.objs.flow.steering.table_type(id) != Some(ty) => Err(bad_param(fs::TABLE_TYPE)),
        Some(_) => Ok(()),
    }
}

/// A table a context names (miss, destination): the issuer's, else BAD_PARAM. The
/// kernel (uid 0) names any uid's (mlx5_ib's FTEs forward to DevX tables).
fn named_table(c: &Cmd<'_>, id: u32) -> R<()> {
    match c.objs.flow.tables.get(&id) {
        Some(&u) if u == c.uid || c.uid == 0 => Ok(()),
        _ => Err(bad_param(fs::BAD_TABLE_DEST)),
    }
}

fn nic_rx(ty: u8, other_vport: bool) -> R<()> {
    if ty != TABLE_TYPE_NIC_RX || other_vport {
        return Err(bad_param(fs::TABLE_TYPE));
    }
    Ok(())
}

pub(super) fn create_table(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateFlowTableIn>()?;
    nic_rx(inp.get(CreateFlowTableIn::table_type), inp.get(CreateFlowTableIn::other_vport))?;
    let ctx = inp.sub(CreateFlowTableIn::flow_table_context);
    type X = FlowTableContext;
    if ctx.get(X::sw_owner) || ctx.get(X::reformat_en) || ctx.get(X::decap_en) || ctx.get(X::termination_table) {
        return Err(bad_param(fs::TABLE_FEATURE));
    }
    let (level, log_size) = (ctx.get(X::level), ctx.get(X::log_size));
    if level > steer::MAX_FT_LEVEL || log_size > steer::LOG_MAX_FT_SIZE {
        return Err(bad_param(fs::TABLE_LIMIT));
    }
    let miss = match ctx.get(X::table_miss_action) {
        miss_action::DEFAULT => Miss::Default,
        miss_action::FWD => {
            let t = ctx.get(X::table_miss_id);
            named_table(c, t)?;
            Miss::Table(t)
        }
        _ => return Err(bad_param(fs::TABLE_FEATURE)),
    };
    let id = c.objs.flow.steering.create_table(TABLE_TYPE_NIC_RX, level, log_size, miss).map_err(engine_err)?;
    c.objs.flow.tables.insert(id, c.uid);
    c.output::<CreateFlowTableOut>()?.set(CreateFlowTableOut::table_id, id);
    Ok(())
}

pub(super) fn destroy_table(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<DestroyFlowTableIn>()?;
    nic_rx(inp.get(DestroyFlowTableIn::table_type), inp.get(DestroyFlowTableIn::other_vport))?;
    let id = inp.get(DestroyFlowTableIn::table_id);
    own_table(c, id, TABLE_TYPE_NIC_RX)?;
    c.objs.flow.steering.destroy_table(id).map_err(engine_err)?;
    c.objs.flow.tables.remove(&id);
    Ok(())
}

pub(super) fn query_table(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<QueryFlowTableIn>()?;
    let id = inp.get(QueryFlowTableIn::table_id);
    own_table(c, id, inp.get(QueryFlowTableIn::table_type))?;
    let t = c.objs.flow.steering.query_table(id).map_err(engine_err)?;
    let mut out = c.output::<QueryFlowTableOut>()?;
    let mut ctx = out.sub_mut(QueryFlowTableOut::flow_table_context);
    ctx.set(FlowTableContext::level, t.level).set(FlowTableContext::log_size, t.log_size);
    if let Miss::Table(m) = t.miss {
        ctx.set(FlowTableContext::table_miss_action, miss_action::FWD).set(FlowTableContext::table_miss_id, m);
    }
    Ok(())
}

pub(super) fn set_root(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<SetFlowTableRootIn>()?;
    nic_rx(inp.get(SetFlowTableRootIn::table_type), inp.get(SetFlowTableRootIn::other_vport))?;
    if inp.get(SetFlowTableRootIn::underlay_qpn) != 0 {
        return Err(bad_param(fs::TABLE_FEATURE));
    }
    let id = inp.get(SetFlowTableRootIn::table_id);
    own_table(c, id, TABLE_TYPE_NIC_RX)?;
    c.objs.flow.steering.set_root(TABLE_TYPE_NIC_RX, id).map_err(engine_err)
}

/// The outer header set of a match parameter, refusing criteria in the others.
fn outer_mask(enable: u8, m: View<'_, FteMatchParam>) -> R<Key> {
    if enable & !criteria::OUTER_HEADERS != 0 {
        return Err(bad_param(fs::CRITERIA));
    }
    if enable == 0 {
        return Ok(Key::default());
    }
    Key::from_bytes(m.sub(FteMatchParam::outer_headers).as_bytes()).ok_or_else(super::internal)
}

pub(super) fn create_group(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<CreateFlowGroupIn>()?;
    type G = CreateFlowGroupIn;
    nic_rx(inp.get(G::table_type), inp.get(G::other_vport))?;
    let table = inp.get(G::table_id);
    own_table(c, table, TABLE_TYPE_NIC_RX)?;
    if inp.get(G::match_definer_id) != 0 || inp.get(G::source_eswitch_owner_vhca_id_valid) {
        return Err(bad_param(fs::CRITERIA));
    }
    let mask = outer_mask(inp.get(G::match_criteria_enable), inp.sub(G::match_criteria))?;
    let id = c
        .objs
        .flow
        .steering
        .create_group(table, inp.get(G::start_flow_index), inp.get(G::end_flow_index), mask)
        .map_err(engine_err)?;
    c.objs.flow.groups.insert(id, c.uid);
    c.output::<CreateFlowGroupOut>()?.set(CreateFlowGroupOut::group_id, id);
    Ok(())
}

pub(super) fn destroy_group(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<DestroyFlowGroupIn>()?;
    nic_rx(inp.get(DestroyFlowGroupIn::table_type), inp.get(DestroyFlowGroupIn::other_vport))?;
    let (table, group) = (inp.get(DestroyFlowGroupIn::table_id), inp.get(DestroyFlowGroupIn::group_id));
    own_table(c, table, TABLE_TYPE_NIC_RX)?;
    match c.objs.flow.groups.get(&group) {
        None => return Err(no_res()),
        Some(&u) if u != c.uid => return Err(bad_param(syndrome::FOREIGN_OBJECT)),
        _ => {}
    }
    c.objs.flow.steering.destroy_group(table, group).map_err(engine_err)?;
    c.objs.flow.groups.remove(&group);
    Ok(())
}

/// Actions softhca executes.
const ACTIONS: u16 = action::ALLOW | action::DROP | action::FWD_DEST | action::COUNT;

/// The action of a flow context and its lists (in `tail`), checked whole.
fn parse_action(c: &Cmd<'_>, fc: View<'_, FlowContext>, tail: &[u8]) -> R<Action> {
    type F = FlowContext;
    let act = fc.get(F::action);
    let (nd, nc) = (fc.get(F::destination_list_size) as usize, fc.get(F::flow_counter_list_size) as usize);
    let fwd = act & action::FWD_DEST != 0;
    let count = act & action::COUNT != 0;
    let drop = act & action::DROP != 0;
    if act & !ACTIONS != 0 || fc.get(F::extended_destination) || (drop && fwd) || fwd != (nd > 0) || count != (nc > 0) {
        return Err(bad_param(fs::ACTION));
    }
    let lists = fte::destinations(tail, nd)
        .zip(fte::counters(tail, nd, nc))
        .ok_or(Outcome::err(prm::cmd::status::BAD_INP_LEN_ERR, fs::DEST_LIST_LEN))?;
    let mut dests = Vec::with_capacity(nd);
    for d in lists.0 {
        let id = d.get(DestFormat::destination_id);
        if d.get(DestFormat::packet_reformat) {
            return Err(bad_param(fs::ACTION));
        }
        dests.push(match d.get(DestFormat::destination_type) {
            dest_type::TIR if tir_exists(c, id) => Dest::Tir(id),
            dest_type::FLOW_TABLE => {
                named_table(c, id)?;
                Dest::Table(id)
            }
            _ => return Err(bad_param(fs::DEST_TYPE)),
        });
    }
    let mut counters = Vec::with_capacity(nc);
    for id in lists.1 {
        // The kernel (uid 0) counts into any uid's counter (mlx5_ib's DevX counters).
        if !c.objs.flow.counters.get(&id).is_some_and(|&u| u == c.uid || c.uid == 0) {
            return Err(bad_param(fs::BAD_COUNTER));
        }
        counters.push(id);
    }
    Ok(Action { drop, dests, counters, flow_tag: fc.get(F::flow_tag) })
}

pub(super) fn set_entry(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<SetFteIn>()?;
    type S = SetFteIn;
    nic_rx(inp.get(S::table_type), inp.get(S::other_vport))?;
    let table = inp.get(S::table_id);
    own_table(c, table, TABLE_TYPE_NIC_RX)?;
    let index = inp.get(S::flow_index);
    let fc = inp.sub(S::flow_context);
    let group = match fc.get(FlowContext::group_id) {
        0 => None,
        g => Some(g),
    };
    let mut new = parse_action(c, fc, inp.tail())?;
    let mv = fc.sub(FlowContext::match_value);
    let st = &c.objs.flow.steering;
    match inp.get(S::op_mod) {
        fte::SET_FTE_OP_MOD_CREATE => {
            let value = Key::from_bytes(mv.sub(FteMatchParam::outer_headers).as_bytes()).ok_or_else(super::internal)?;
            // Values in the other sets cannot be under any group's criteria.
            if mv.as_bytes()[Key::default().0.len()..].iter().any(|&b| b != 0) {
                return Err(bad_param(fs::VALUE_OUTSIDE_CRITERIA));
            }
            st.set_entry(table, index, group, value, new, false).map_err(engine_err)
        }
        fte::SET_FTE_OP_MOD_MODIFY => {
            let old = st.query_entry(table, index).map_err(|_| bad_param(fs::ENTRY_EXISTS))?;
            let mask = inp.get(S::modify_enable_mask);
            if mask & !(modify_mask::ACTION | modify_mask::FLOW_TAG | modify_mask::DESTINATION_LIST | modify_mask::FLOW_COUNTERS) != 0 {
                return Err(bad_param(fs::ACTION));
            }
            let mut a = old.action.clone();
            if mask & modify_mask::ACTION != 0 {
                a.drop = new.drop;
            }
            if mask & modify_mask::FLOW_TAG != 0 {
                a.flow_tag = new.flow_tag;
            }
            if mask & modify_mask::DESTINATION_LIST != 0 {
                a.dests = std::mem::take(&mut new.dests);
            }
            if mask & modify_mask::FLOW_COUNTERS != 0 {
                a.counters = std::mem::take(&mut new.counters);
            }
            if a.drop && !a.dests.is_empty() {
                return Err(bad_param(fs::ACTION));
            }
            st.set_entry(table, index, group.or(Some(old.group)), old.value, a, true).map_err(engine_err)
        }
        _ => Err(bad_param(syndrome::BAD_OP_MOD)),
    }
}

pub(super) fn delete_entry(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<DeleteFteIn>()?;
    nic_rx(inp.get(DeleteFteIn::table_type), inp.get(DeleteFteIn::other_vport))?;
    let table = inp.get(DeleteFteIn::table_id);
    own_table(c, table, TABLE_TYPE_NIC_RX)?;
    c.objs.flow.steering.delete_entry(table, inp.get(DeleteFteIn::flow_index)).map_err(|e| match e {
        SteerError::EntryIndex => no_res(),
        e => engine_err(e),
    })
}

pub(super) fn query_entry(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<DeleteFteIn>()?;
    let table = inp.get(DeleteFteIn::table_id);
    own_table(c, table, inp.get(DeleteFteIn::table_type))?;
    let e = c.objs.flow.steering.query_entry(table, inp.get(DeleteFteIn::flow_index)).map_err(engine_err)?;
    let lists = e.action.dests.len() + e.action.counters.len();
    if c.outbox.len() < QueryFteOut::BYTES + lists * DEST_ENTRY_BYTES {
        return Err(Outcome::err(prm::cmd::status::BAD_OUTP_LEN_ERR, syndrome::OUTBOX_LEN));
    }
    let mut out = c.output::<QueryFteOut>()?;
    {
        let mut fc = out.sub_mut(QueryFteOut::flow_context);
        let mut act = 0;
        if e.action.drop {
            act |= action::DROP;
        }
        if !e.action.dests.is_empty() {
            act |= action::FWD_DEST;
        }
        if !e.action.counters.is_empty() {
            act |= action::COUNT;
        }
        if act == 0 {
            act = action::ALLOW;
        }
        fc.set(FlowContext::group_id, e.group)
            .set(FlowContext::flow_tag, e.action.flow_tag)
            .set(FlowContext::action, act)
            .set(FlowContext::destination_list_size, e.action.dests.len() as u32)
            .set(FlowContext::flow_counter_list_size, e.action.counters.len() as u32);
    }
    // The match value: the outer set at the start of match_value.
    let mv_at = QueryFteOut::flow_context.off() / 8 + FlowContext::match_value.off() / 8;
    c.outbox[mv_at..mv_at + e.value.0.len()].copy_from_slice(&e.value.0);
    let tail = &mut c.outbox[QueryFteOut::BYTES..];
    for (i, d) in e.action.dests.iter().enumerate() {
        let mut v = ViewMut::<DestFormat>::new(&mut tail[i * DEST_ENTRY_BYTES..]).map_err(|_| super::internal())?;
        let (ty, id) = match *d {
            Dest::Tir(t) | Dest::Qp(t) => (dest_type::TIR, t),
            Dest::Table(t) => (dest_type::FLOW_TABLE, t),
        };
        v.set(DestFormat::destination_type, ty).set(DestFormat::destination_id, id);
    }
    let base = e.action.dests.len();
    for (i, id) in e.action.counters.iter().enumerate() {
        ViewMut::<FlowCounterList>::new(&mut tail[(base + i) * DEST_ENTRY_BYTES..])
            .map_err(|_| super::internal())?
            .set(FlowCounterList::flow_counter_id, *id);
    }
    Ok(())
}

pub(super) fn alloc_counter(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<AllocFlowCounterIn>()?;
    if inp.get(AllocFlowCounterIn::flow_counter_bulk) != 0 || inp.get(AllocFlowCounterIn::flow_counter_bulk_log_size) != 0 {
        return Err(bad_param(fs::COUNTER_FEATURE));
    }
    let id = c.objs.flow.steering.alloc_counter();
    c.objs.flow.counters.insert(id, c.uid);
    c.output::<AllocFlowCounterOut>()?.set(AllocFlowCounterOut::flow_counter_id, id);
    Ok(())
}

fn own_counter(c: &Cmd<'_>, id: u32) -> R<()> {
    match c.objs.flow.counters.get(&id) {
        None => Err(no_res()),
        Some(&u) if u != c.uid => Err(bad_param(syndrome::FOREIGN_OBJECT)),
        _ => Ok(()),
    }
}

pub(super) fn dealloc_counter(c: &mut Cmd<'_>) -> R<()> {
    let id = c.input::<DeallocFlowCounterIn>()?.get(DeallocFlowCounterIn::flow_counter_id);
    own_counter(c, id)?;
    c.objs.flow.steering.dealloc_counter(id).map_err(engine_err)?;
    c.objs.flow.counters.remove(&id);
    Ok(())
}

pub(super) fn query_counter(c: &mut Cmd<'_>) -> R<()> {
    let inp = c.input::<QueryFlowCounterIn>()?;
    type Q = QueryFlowCounterIn;
    if inp.get(Q::dump_to_memory) || inp.get(Q::mkey) != 0 || inp.get(Q::address) != 0 {
        return Err(bad_param(fs::COUNTER_FEATURE));
    }
    let first = inp.get(Q::flow_counter_id);
    let n = inp.get(Q::num_of_counters).max(1);
    if c.outbox.len() < QueryFlowCounterOut::BYTES + n as usize * TrafficCounter::BYTES {
        return Err(Outcome::err(prm::cmd::status::BAD_OUTP_LEN_ERR, syndrome::OUTBOX_LEN));
    }
    // All of them exist and are the issuer's before any is read (and cleared).
    for id in (0..n).map(|i| first.wrapping_add(i)) {
        own_counter(c, id)?;
    }
    let clear = inp.get(Q::clear);
    for i in 0..n {
        let (p, b) = c.objs.flow.steering.query_counter(first.wrapping_add(i), clear).map_err(engine_err)?;
        let at = QueryFlowCounterOut::BYTES + i as usize * TrafficCounter::BYTES;
        ViewMut::<TrafficCounter>::new(&mut c.outbox[at..])
            .map_err(|_| super::internal())?
            .set(TrafficCounter::packets, p)
            .set(TrafficCounter::octets, b);
    }
    Ok(())
}
