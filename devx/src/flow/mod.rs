//! Flow steering through DevX: NIC RX flow tables, groups, rules and counters as
//! firmware objects ([`crate::Obj`]), with a match builder over the outer L2-L4 set.
//!
//! A [`Match`] names the fields a rule compares (dmac, smac, ethertype, VLAN, IP
//! version and protocol, IPv4/IPv6 source and destination, TCP/UDP ports) with their
//! values; the same match gives the group's mask ([`Match::mask`]: all ones in
//! every named field) and the entry's value ([`Match::value`]), so a group made from
//! a match accepts every rule that names the same fields. The builders return
//! inboxes ([`create_table_in`], [`create_group_in`], [`set_fte_in`],
//! [`alloc_counter_in`], [`query_counter_in`]); [`FlowTable`], [`FlowGroup`],
//! [`FlowRule`] and [`FlowCounter`] create them on a [`DevxContext`] and destroy them
//! on drop (the kernel derives the destroy command from the create).

#[cfg(test)]
mod tests;

use std::net::IpAddr;

use prm::bits::{View, ViewMut};
use prm::cmd::flow::counter::{AllocFlowCounterIn, AllocFlowCounterOut, QueryFlowCounterIn, QueryFlowCounterOut, TrafficCounter};
use prm::cmd::flow::entry::{action, dest_type, DestFormat, FlowContext, FlowCounterList, SetFteIn, DEST_ENTRY_BYTES};
use prm::cmd::flow::group::{CreateFlowGroupIn, CreateFlowGroupOut};
use prm::cmd::flow::matching::{criteria, FteMatchParam, FteMatchSetLyr24 as L, IPV4_IN_UNION};
use prm::cmd::flow::table::{miss_action, CreateFlowTableIn, CreateFlowTableOut, FlowTableContext, TABLE_TYPE_NIC_RX};
use prm::cmd::header::MboxOut;
use prm::cmd::opcode as op;

use crate::cmd::{inbox, view};
use crate::{DevxContext, Obj, Result};

/// Bytes of one outer header match set.
pub const SET_BYTES: usize = L::BYTES;

/// Fields to match and their values (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Match {
    pub dmac: Option<[u8; 6]>,
    pub smac: Option<[u8; 6]>,
    pub ethertype: Option<u16>,
    /// A customer VLAN tag with this id.
    pub vlan: Option<u16>,
    pub ip_protocol: Option<u8>,
    pub src_ip: Option<IpAddr>,
    pub dst_ip: Option<IpAddr>,
    pub udp_sport: Option<u16>,
    pub udp_dport: Option<u16>,
    pub tcp_sport: Option<u16>,
    pub tcp_dport: Option<u16>,
}

impl Match {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn dmac(mut self, m: [u8; 6]) -> Self {
        self.dmac = Some(m);
        self
    }
    pub fn smac(mut self, m: [u8; 6]) -> Self {
        self.smac = Some(m);
        self
    }
    pub fn ethertype(mut self, t: u16) -> Self {
        self.ethertype = Some(t);
        self
    }
    pub fn vlan(mut self, vid: u16) -> Self {
        self.vlan = Some(vid & 0xfff);
        self
    }
    pub fn ip_protocol(mut self, p: u8) -> Self {
        self.ip_protocol = Some(p);
        self
    }
    pub fn src_ip(mut self, a: IpAddr) -> Self {
        self.src_ip = Some(a);
        self
    }
    pub fn dst_ip(mut self, a: IpAddr) -> Self {
        self.dst_ip = Some(a);
        self
    }
    /// UDP destination port (implies ip_protocol 17).
    pub fn udp_dport(mut self, p: u16) -> Self {
        self.udp_dport = Some(p);
        self.ip_protocol = Some(17);
        self
    }
    pub fn udp_sport(mut self, p: u16) -> Self {
        self.udp_sport = Some(p);
        self.ip_protocol = Some(17);
        self
    }
    /// TCP destination port (implies ip_protocol 6).
    pub fn tcp_dport(mut self, p: u16) -> Self {
        self.tcp_dport = Some(p);
        self.ip_protocol = Some(6);
        self
    }
    pub fn tcp_sport(mut self, p: u16) -> Self {
        self.tcp_sport = Some(p);
        self.ip_protocol = Some(6);
        self
    }

    /// Writes the set, with the values (`mask` false) or all-ones masks. An IP
    /// address also sets `ip_version` (and its mask).
    fn write(&self, mask: bool, s: &mut ViewMut<'_, L>) {
        let mac = |m: [u8; 6]| -> (u32, u16) {
            if mask {
                (u32::MAX, u16::MAX)
            } else {
                (u32::from_be_bytes([m[0], m[1], m[2], m[3]]), u16::from_be_bytes([m[4], m[5]]))
            }
        };
        let v16 = |v: u16| if mask { u16::MAX } else { v };
        if let Some(m) = self.dmac {
            let (hi, lo) = mac(m);
            s.set(L::dmac_47_16, hi).set(L::dmac_15_0, lo);
        }
        if let Some(m) = self.smac {
            let (hi, lo) = mac(m);
            s.set(L::smac_47_16, hi).set(L::smac_15_0, lo);
        }
        if let Some(t) = self.ethertype {
            s.set(L::ethertype, v16(t));
        }
        if let Some(vid) = self.vlan {
            s.set(L::cvlan_tag, true).set(L::first_vid, if mask { 0xfff } else { vid });
        }
        if let Some(p) = self.ip_protocol {
            s.set(L::ip_protocol, if mask { 0xff } else { p });
        }
        for (a, f) in [(self.src_ip, L::src_ipv4_src_ipv6), (self.dst_ip, L::dst_ipv4_dst_ipv6)] {
            let Some(a) = a else { continue };
            let ver = match a {
                IpAddr::V4(v4) => {
                    s.bytes_mut(f)[IPV4_IN_UNION].copy_from_slice(&if mask { [0xff; 4] } else { v4.octets() });
                    4
                }
                IpAddr::V6(v6) => {
                    s.bytes_mut(f).copy_from_slice(&if mask { [0xff; 16] } else { v6.octets() });
                    6
                }
            };
            s.set(L::ip_version, if mask { 0xf } else { ver });
        }
        for (v, f) in [(self.udp_sport, L::udp_sport), (self.udp_dport, L::udp_dport), (self.tcp_sport, L::tcp_sport), (self.tcp_dport, L::tcp_dport)] {
            if let Some(p) = v {
                s.set(f, v16(p));
            }
        }
    }

    /// The group mask: all ones in every field this match names.
    pub fn mask(&self) -> [u8; SET_BYTES] {
        let mut b = [0u8; SET_BYTES];
        self.write(true, &mut ViewMut::new(&mut b).expect("one set"));
        b
    }

    /// The entry value.
    pub fn value(&self) -> [u8; SET_BYTES] {
        let mut b = [0u8; SET_BYTES];
        self.write(false, &mut ViewMut::new(&mut b).expect("one set"));
        b
    }
}

/// Where a rule sends what it matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Tir(u32),
    Table(u32),
    Drop,
    /// Count (or tag) only: the frame goes on to the vport's default.
    Allow,
}

/// A rule's action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub target: Target,
    pub flow_tag: u32,
    pub counters: Vec<u32>,
}

/// CREATE_FLOW_TABLE of a NIC RX table; `miss` a table to go to on a miss (else the
/// next level's).
pub fn create_table_in(level: u8, log_size: u8, miss: Option<u32>) -> Vec<u8> {
    let mut b = inbox::<CreateFlowTableIn>(op::CREATE_FLOW_TABLE, 0);
    let mut v = view::<CreateFlowTableIn>(&mut b);
    v.set(CreateFlowTableIn::table_type, TABLE_TYPE_NIC_RX);
    let mut c = v.sub_mut(CreateFlowTableIn::flow_table_context);
    c.set(FlowTableContext::level, level).set(FlowTableContext::log_size, log_size);
    if let Some(m) = miss {
        c.set(FlowTableContext::table_miss_action, miss_action::FWD).set(FlowTableContext::table_miss_id, m);
    }
    b
}

/// CREATE_FLOW_GROUP of flow indexes `start..=end` with `m`'s fields as criteria.
pub fn create_group_in(table: u32, start: u32, end: u32, m: &Match) -> Vec<u8> {
    let mut b = inbox::<CreateFlowGroupIn>(op::CREATE_FLOW_GROUP, 0);
    let mask = m.mask();
    let mut v = view::<CreateFlowGroupIn>(&mut b);
    v.set(CreateFlowGroupIn::table_type, TABLE_TYPE_NIC_RX)
        .set(CreateFlowGroupIn::table_id, table)
        .set(CreateFlowGroupIn::start_flow_index, start)
        .set(CreateFlowGroupIn::end_flow_index, end);
    if mask.iter().any(|&x| x != 0) {
        v.set(CreateFlowGroupIn::match_criteria_enable, criteria::OUTER_HEADERS);
    }
    let at = CreateFlowGroupIn::match_criteria.off() / 8 + FteMatchParam::outer_headers.off() / 8;
    b[at..at + SET_BYTES].copy_from_slice(&mask);
    b
}

/// SET_FLOW_TABLE_ENTRY (create) at `index` of `group`.
pub fn set_fte_in(table: u32, group: u32, index: u32, m: &Match, r: &Rule) -> Vec<u8> {
    let nd = usize::from(matches!(r.target, Target::Tir(_) | Target::Table(_)));
    let mut b = inbox::<SetFteIn>(op::SET_FLOW_TABLE_ENTRY, (nd + r.counters.len()) * DEST_ENTRY_BYTES);
    let mut act = match r.target {
        Target::Tir(_) | Target::Table(_) => action::FWD_DEST,
        Target::Drop => action::DROP,
        Target::Allow => action::ALLOW,
    };
    if !r.counters.is_empty() {
        act |= action::COUNT;
    }
    let mut v = view::<SetFteIn>(&mut b);
    v.set(SetFteIn::table_type, TABLE_TYPE_NIC_RX).set(SetFteIn::table_id, table).set(SetFteIn::flow_index, index);
    let mut fc = v.sub_mut(SetFteIn::flow_context);
    fc.set(FlowContext::group_id, group)
        .set(FlowContext::flow_tag, r.flow_tag)
        .set(FlowContext::action, act)
        .set(FlowContext::destination_list_size, nd as u32)
        .set(FlowContext::flow_counter_list_size, r.counters.len() as u32);
    let tail = v.tail_mut();
    match r.target {
        Target::Tir(id) | Target::Table(id) => {
            let ty = if matches!(r.target, Target::Tir(_)) { dest_type::TIR } else { dest_type::FLOW_TABLE };
            ViewMut::<DestFormat>::new(&mut tail[..DEST_ENTRY_BYTES])
                .expect("sized above")
                .set(DestFormat::destination_type, ty)
                .set(DestFormat::destination_id, id);
        }
        _ => {}
    }
    for (i, &c) in r.counters.iter().enumerate() {
        ViewMut::<FlowCounterList>::new(&mut tail[(nd + i) * DEST_ENTRY_BYTES..])
            .expect("sized above")
            .set(FlowCounterList::flow_counter_id, c);
    }
    let at = SetFteIn::flow_context.off() / 8 + FlowContext::match_value.off() / 8 + FteMatchParam::outer_headers.off() / 8;
    b[at..at + SET_BYTES].copy_from_slice(&m.value());
    b
}

pub fn alloc_counter_in() -> Vec<u8> {
    inbox::<AllocFlowCounterIn>(op::ALLOC_FLOW_COUNTER, 0)
}

/// QUERY_FLOW_COUNTER of one counter, cleared after reading when `clear`.
pub fn query_counter_in(id: u32, clear: bool) -> Vec<u8> {
    let mut b = inbox::<QueryFlowCounterIn>(op::QUERY_FLOW_COUNTER, 0);
    view::<QueryFlowCounterIn>(&mut b).set(QueryFlowCounterIn::flow_counter_id, id).set(QueryFlowCounterIn::clear, clear);
    b
}

/// (packets, bytes) from a QUERY_FLOW_COUNTER outbox of one counter.
pub fn parse_counter(out: &[u8]) -> Option<(u64, u64)> {
    let t = View::<TrafficCounter>::new(out.get(QueryFlowCounterOut::BYTES..)?).ok()?;
    Some((t.get(TrafficCounter::packets), t.get(TrafficCounter::octets)))
}

fn id24_at_0x48(out: &[u8]) -> u32 {
    u32::from_be_bytes([0, out[9], out[10], out[11]])
}

/// A NIC RX flow table.
pub struct FlowTable {
    pub obj: Obj,
    pub id: u32,
}

impl FlowTable {
    pub fn new(ctx: &DevxContext, level: u8, log_size: u8, miss: Option<u32>) -> Result<FlowTable> {
        let mut out = vec![0u8; CreateFlowTableOut::BYTES];
        let obj = ctx.create_obj(&create_table_in(level, log_size, miss), &mut out)?;
        Ok(FlowTable { obj, id: id24_at_0x48(&out) })
    }
}

/// A flow group of a table.
pub struct FlowGroup {
    pub obj: Obj,
    pub id: u32,
}

impl FlowGroup {
    pub fn new(ctx: &DevxContext, table: &FlowTable, start: u32, end: u32, criteria: &Match) -> Result<FlowGroup> {
        let mut out = vec![0u8; CreateFlowGroupOut::BYTES];
        let obj = ctx.create_obj(&create_group_in(table.id, start, end, criteria), &mut out)?;
        Ok(FlowGroup { obj, id: id24_at_0x48(&out) })
    }
}

/// One entry (deleted on drop).
pub struct FlowRule {
    pub obj: Obj,
}

impl FlowRule {
    pub fn new(ctx: &DevxContext, table: &FlowTable, group: &FlowGroup, index: u32, m: &Match, r: &Rule) -> Result<FlowRule> {
        let mut out = vec![0u8; MboxOut::BYTES];
        Ok(FlowRule { obj: ctx.create_obj(&set_fte_in(table.id, group.id, index, m, r), &mut out)? })
    }
}

/// A packet and byte counter.
pub struct FlowCounter {
    pub obj: Obj,
    pub id: u32,
}

impl FlowCounter {
    pub fn new(ctx: &DevxContext) -> Result<FlowCounter> {
        let mut out = vec![0u8; AllocFlowCounterOut::BYTES];
        let obj = ctx.create_obj(&alloc_counter_in(), &mut out)?;
        let id = View::<AllocFlowCounterOut>::new(&out).map(|v| v.get(AllocFlowCounterOut::flow_counter_id)).unwrap_or(0);
        Ok(FlowCounter { obj, id })
    }

    /// (packets, bytes), zeroed after reading when `clear`.
    pub fn query(&self, clear: bool) -> Result<(u64, u64)> {
        let mut out = vec![0u8; QueryFlowCounterOut::BYTES + TrafficCounter::BYTES];
        self.obj.query(&query_counter_in(self.id, clear), &mut out)?;
        Ok(parse_counter(&out).unwrap_or((0, 0)))
    }
}
