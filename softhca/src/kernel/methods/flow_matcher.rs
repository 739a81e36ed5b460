//! mlx5dv's raw flow steering (drivers/infiniband/hw/mlx5/fs.c):
//! `MLX5_IB_METHOD_FLOW_MATCHER_CREATE`/`DESTROY` (a mask, a criteria-enable byte, a
//! flow type with its priority, a namespace) and `MLX5_IB_METHOD_CREATE_FLOW` on
//! `UVERBS_OBJECT_FLOW` (a match value under a matcher, forwarding to a RAW_PACKET
//! QP's TIR, a DevX TIR or a DevX flow table, or dropping; a DevX flow counter; a flow
//! tag), checked in the kernel's order (`get_dests`' refusals are all EINVAL, as the
//! handler makes them), installed as `raw_fs_rule_add` does: in the kernel's table of
//! the matcher's priority ([`super::flow_fs`]), grouped by the matcher's mask.
//!
//! softhca has only the NIC RX bypass namespace: matchers of NIC TX, FDB, RDMA RX/TX
//! are made (FDB is EINVAL without switchdev mode, as on a NIC in legacy mode) but
//! their flows are EOPNOTSUPP (no namespace); so is `DEFAULT_MISS` (its
//! FWD_NEXT_NS forward is not modelled). No flow action objects exist, so a flow
//! action array names no object. The matcher's mask and a flow's value are the
//! `fte_match_param` mlx5_ib copies; bytes past softhca's 512 must be zero.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use nix::errno::Errno;

use prm::bits::View;
use prm::cmd::flow::counter::DeallocFlowCounterIn;
use prm::cmd::flow::matching::{criteria, FteMatchParam as P, FteMatchSetLyr24 as L, IPV4_IN_UNION};
use prm::cmd::flow::table::DestroyFlowTableIn;
use prm::cmd::header::MboxIn;
use prm::cmd::opcode as op;
use prm::cmd::tir::DestroyTirIn;
use uverbs::sys::ids::mlx5 as ids;

use super::flow::UFlow;
use super::flow_fs::{MatchSpec, PrioKey, RuleAct, RuleDest, MATCH_BYTES};
use crate::kernel::ioctl::Call;
use crate::kernel::uobject::Uobj;
use crate::kernel::Result;
use crate::objects::QpType;

/// The namespace a matcher's flows go to (`mlx5_ib_ft_type_to_namespace`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ns {
    Bypass,
    Egress,
    FdbBypass,
    RdmaRx,
    RdmaTx,
}

/// `struct mlx5_ib_flow_matcher`.
#[derive(Debug)]
pub(crate) struct FlowMatcher {
    /// `matcher_mask`, `sizeof(struct mlx5_ib_match_params)` bytes.
    mask: Vec<u8>,
    flow_type: u8,
    priority: u16,
    enable: u8,
    ns: Ns,
    /// Flows made through it (`usecnt`): the matcher's destroy is EBUSY meanwhile.
    pub usecnt: AtomicU32,
}

fn ft_type_ns(t: u64) -> Result<Ns> {
    Ok(match t {
        ids::FLOW_TABLE_TYPE_NIC_RX => Ns::Bypass,
        ids::FLOW_TABLE_TYPE_NIC_TX => Ns::Egress,
        ids::FLOW_TABLE_TYPE_FDB => Ns::FdbBypass,
        ids::FLOW_TABLE_TYPE_RDMA_RX => Ns::RdmaRx,
        ids::FLOW_TABLE_TYPE_RDMA_TX => Ns::RdmaTx,
        _ => return Err(Errno::EINVAL),
    })
}

/// Reads an input attribute of at most `sizeof(struct mlx5_ib_match_params)` bytes
/// into a buffer of that size.
fn params(c: &Call<'_>, id: u16) -> Result<Vec<u8>> {
    let b = c.b.in_buf(id).ok_or(Errno::EINVAL)?;
    let mut v = vec![0u8; ids::MATCH_PARAMS_BYTES as usize];
    let n = b.len().min(v.len());
    b.read(0, &mut v[..n])?;
    Ok(v)
}

/// MLX5_IB_METHOD_FLOW_MATCHER_CREATE.
pub(crate) fn matcher_create(c: &mut Call<'_>) -> Result<()> {
    let mask = params(c, ids::ATTR_FLOW_MATCHER_MATCH_MASK)?;
    let flow_type = c.b.enum_id(ids::ATTR_FLOW_MATCHER_FLOW_TYPE).ok_or(Errno::EINVAL)?;
    let priority = if flow_type == ids::FLOW_TYPE_NORMAL {
        c.b.copy_from::<u16>(ids::ATTR_FLOW_MATCHER_FLOW_TYPE)?
    } else {
        0
    };
    let enable: u8 = c.b.copy_from(ids::ATTR_FLOW_MATCHER_MATCH_CRITERIA)?;
    // mlx5_ib_matcher_ns
    let (ft, fl) = (ids::ATTR_FLOW_MATCHER_FT_TYPE, ids::ATTR_FLOW_MATCHER_FLOW_FLAGS);
    if c.b.is_valid(ft) && c.b.is_valid(fl) {
        return Err(Errno::EINVAL);
    }
    let ns = if c.b.is_valid(ft) {
        ft_type_ns(c.b.get_const(ft, u32::MAX as u64)?)?
    } else if c.b.get_flags32(fl, uverbs::sys::flow::ATTR_FLAGS_EGRESS as u64)? != 0 {
        Ns::Egress
    } else {
        Ns::Bypass
    };
    // FDB needs the e-switch in switchdev (offloads) mode; softhca's is legacy.
    if ns == Ns::FdbBypass {
        return Err(Errno::EINVAL);
    }
    let m = FlowMatcher { mask, flow_type, priority, enable, ns, usecnt: AtomicU32::new(0) };
    c.fill_new(ids::ATTR_FLOW_MATCHER_CREATE_HANDLE, Uobj::FlowMatcher(Arc::new(m)))
}

/// A DevX object's destination, from its destroy inbox (`is_flow_dest`).
fn devx_dest(o: &Uobj) -> Option<RuleDest> {
    let Uobj::Devx(d) = o else { return None };
    let b = &d.dinbox;
    match View::<MboxIn>::new(b).ok()?.get(MboxIn::opcode) {
        op::DESTROY_TIR => Some(RuleDest::Tir(View::<DestroyTirIn>::new(b).ok()?.get(DestroyTirIn::tirn))),
        op::DESTROY_FLOW_TABLE => Some(RuleDest::Table(View::<DestroyFlowTableIn>::new(b).ok()?.get(DestroyFlowTableIn::table_id))),
        _ => None,
    }
}

/// A DevX flow counter's id plus `offset` (`is_flow_counter`; softhca's counters are
/// single, so any offset is past the bulk).
fn devx_counter(o: &Uobj, offset: u32) -> Option<u32> {
    let Uobj::Devx(d) = o else { return None };
    let b = &d.dinbox;
    if View::<MboxIn>::new(b).ok()?.get(MboxIn::opcode) != op::DEALLOC_FLOW_COUNTER || offset != 0 {
        return None;
    }
    Some(View::<DeallocFlowCounterIn>::new(b).ok()?.get(DeallocFlowCounterIn::flow_counter_id))
}

/// `get_dests`: (destination, the QP, flags).
fn get_dests(c: &Call<'_>, m: &FlowMatcher) -> Result<(Option<RuleDest>, Option<u32>, u32)> {
    let dest_devx = c.b.obj(ids::ATTR_CREATE_FLOW_DEST_DEVX);
    let dest_qp = c.b.obj(ids::ATTR_CREATE_FLOW_DEST_QP);
    let flags = c.b.get_flags32(ids::ATTR_CREATE_FLOW_FLAGS,
                                (ids::CREATE_FLOW_FLAGS_DEFAULT_MISS | ids::CREATE_FLOW_FLAGS_DROP) as u64)?;
    if flags & ids::CREATE_FLOW_FLAGS_DEFAULT_MISS != 0 && flags & ids::CREATE_FLOW_FLAGS_DROP != 0 {
        return Err(Errno::EINVAL);
    }
    if m.ns == Ns::Bypass && ((dest_devx.is_some() && (dest_qp.is_some() || flags != 0)) || (dest_qp.is_some() && flags != 0)) {
        return Err(Errno::EINVAL);
    }
    if m.ns == Ns::FdbBypass && !(dest_devx.is_some() || flags & ids::CREATE_FLOW_FLAGS_DROP != 0) {
        return Err(Errno::EINVAL);
    }
    if m.ns == Ns::RdmaRx && dest_devx.is_some() == dest_qp.is_some() {
        return Err(Errno::EINVAL);
    }
    let mut dest = None;
    let mut qpn = None;
    if let Some(o) = dest_devx {
        let d = devx_dest(o).ok_or(Errno::EINVAL)?;
        if matches!(m.ns, Ns::FdbBypass | Ns::RdmaRx) && !matches!(d, RuleDest::Table(_)) {
            return Err(Errno::EINVAL);
        }
        dest = Some(d);
    } else if let Some(o) = dest_qp {
        let Uobj::Qp(q) = o else { return Err(Errno::EINVAL) };
        if q.qp_type != QpType::RawPacket {
            return Err(Errno::EINVAL);
        }
        dest = Some(RuleDest::Tir(q.raw.and_then(|r| r.tirn).unwrap_or(0)));
        qpn = Some(q.qpn);
    }
    if matches!(dest, Some(RuleDest::Tir(_))) && matches!(m.ns, Ns::Egress | Ns::RdmaTx) {
        return Err(Errno::EINVAL);
    }
    Ok((dest, qpn, flags))
}

/// `raw_fs_is_multicast`: the value and the mask pin a multicast destination MAC or
/// IPv4 address in the outer headers.
fn is_multicast(m: &FlowMatcher, value: &[u8]) -> bool {
    if m.enable & criteria::OUTER_HEADERS == 0 {
        return false;
    }
    let at = P::outer_headers.off() / 8;
    let dmac = at + L::dmac_47_16.off() / 8;
    if value[dmac] & 1 != 0 && m.mask[dmac] & 1 != 0 {
        return true;
    }
    let ip = at + L::dst_ipv4_dst_ipv6.off() / 8 + IPV4_IN_UNION.start;
    value[ip] & 0xf0 == 0xe0 && m.mask[ip] & 0xf0 == 0xe0
}

/// MLX5_IB_METHOD_CREATE_FLOW.
pub(crate) fn create_flow(c: &mut Call<'_>) -> Result<()> {
    if !c.hca.cap_net_raw() {
        return Err(Errno::EPERM);
    }
    let Some(Uobj::FlowMatcher(m)) = c.b.obj(ids::ATTR_CREATE_FLOW_MATCHER).cloned() else { return Err(Errno::EINVAL) };
    let (dest, qpn, flags) = get_dests(c, &m).map_err(|_| Errno::EINVAL)?;
    if flags & ids::CREATE_FLOW_FLAGS_DEFAULT_MISS != 0 {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut act = RuleAct { drop: flags & ids::CREATE_FLOW_FLAGS_DROP != 0, ..Default::default() };
    if let Some(o) = c.b.objs(ids::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX).first() {
        let off = ids::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX_OFFSET;
        let offset = if c.b.is_valid(off) {
            let b = c.b.in_buf(off).ok_or(Errno::EINVAL)?;
            if b.len() / 4 != 1 {
                return Err(Errno::EINVAL);
            }
            let mut w = [0u8; 4];
            b.read(0, &mut w)?;
            u32::from_ne_bytes(w)
        } else {
            0
        };
        act.counters.push(devx_counter(o, offset).ok_or(Errno::EINVAL)?);
    }
    let value = params(c, ids::ATTR_CREATE_FLOW_MATCH_VALUE)?;
    // No flow action object can exist: a FLOW_ACTIONS array failed its lookup.
    if c.b.is_valid(ids::ATTR_CREATE_FLOW_TAG) {
        let tag: u32 = c.b.copy_from(ids::ATTR_CREATE_FLOW_TAG)?;
        if tag >= 1 << 24 {
            return Err(Errno::EINVAL);
        }
        act.flow_tag = Some(tag);
    }
    // raw_fs_rule_add
    if m.flow_type != ids::FLOW_TYPE_NORMAL {
        return Err(Errno::EOPNOTSUPP);
    }
    if m.priority >= 16 {
        return Err(Errno::ENOMEM);
    }
    if m.ns != Ns::Bypass {
        return Err(Errno::EOPNOTSUPP);
    }
    let key = if is_multicast(&m, &value) { PrioKey::Bypass(32) } else { PrioKey::Bypass(m.priority as u32 * 2 + 1) };
    if let Some(d) = dest {
        act.dests.push(d);
    }
    // check_last_reserved: nothing past the match sets softhca knows.
    if value[MATCH_BYTES..].iter().chain(&m.mask[MATCH_BYTES..]).any(|&b| b != 0) {
        return Err(Errno::EINVAL);
    }
    let spec = MatchSpec { enable: m.enable, criteria: m.mask[..MATCH_BYTES].to_vec(), value: value[..MATCH_BYTES].to_vec() };
    let rule = c.hca.flow_db().add_rule(c.hca, key, &spec, &act)?;
    m.usecnt.fetch_add(1, Ordering::SeqCst);
    let flow = Arc::new(UFlow { qpn, rules: vec![rule], matcher: Some(m.clone()) });
    // From here the handle owns the rule: a later failure aborts it through destroy_hw.
    if let Err(e) = c.fill_new(ids::ATTR_CREATE_FLOW_HANDLE, Uobj::Flow(flow.clone())) {
        let _ = super::flow::destroy(c.hca, &flow);
        m.usecnt.fetch_sub(1, Ordering::SeqCst);
        return Err(e);
    }
    Ok(())
}
