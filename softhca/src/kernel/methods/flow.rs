//! Flow steering through verbs: `IB_USER_VERBS_EX_CMD_CREATE_FLOW` and `DESTROY_FLOW`
//! (drivers/infiniband/core/uverbs_cmd.c `ib_uverbs_ex_create_flow`, its spec
//! conversion `kern_spec_to_ib_spec`) and mlx5_ib's `mlx5_ib_create_flow`
//! (drivers/infiniband/hw/mlx5/fs.c: `parse_flow_attr` into an `fte_match_param`, the
//! table of the flow's priority, one FTE forwarding to the QP's TIR), checked in the
//! kernel's order with its errnos. The rule goes into the kernel's tables
//! ([`super::flow_fs`]) through the firmware's commands. The ioctl
//! `UVERBS_METHOD_FLOW_DESTROY` destroys the same object.
//!
//! What softhca's caps make of mlx5_ib's choices: `ft_field_support.outer_ip_version`
//! is 0, so an IPv4/IPv6 spec matches the ethertype; there are no NIC TX, sniffer or
//! counters objects, so EGRESS flows and SNIFFER flows are EOPNOTSUPP and a COUNT or
//! HANDLE action names no object (EINVAL); fields that land in the misc sets (IPv6 flow
//! label, VXLAN VNI, GRE protocol/key) are refused by the firmware (EINVAL), as are
//! inner headers; MPLS fields are EOPNOTSUPP (no `ft_field_support` bit). A QP without
//! a TIR (a UD QP, a RAW_PACKET QP without a receive queue) has TIR number 0 in
//! mlx5_ib's rule, which the firmware refuses: EINVAL. DONT_TRAP's FWD_NEXT_PRIO is a
//! software-only bit above the 16-bit action field, so the FTE forwards to the TIR.

use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::{FromBytes, IntoBytes};

use prm::bits::ViewMut;
use prm::cmd::flow::matching::{criteria, FteMatchParam as P, FteMatchSetLyr24 as L, FteMatchSetMisc as M,
                               IPV4_IN_UNION};
use uverbs::sys::flow::{self as f, CreateFlow, CreateFlowResp, DestroyFlow, EthFilter, FlowSpecHdr, GreFilter,
                        Ipv4Filter, Ipv6Filter, MplsFilter, TcpUdpFilter, TunnelFilter};

use super::flow_fs::{MatchSpec, PrioKey, Rule, RuleAct, RuleDest};
use crate::hca::Hca;
use crate::kernel::uobject::{ObjType, Uobj};
use crate::kernel::write::WCall;
use crate::kernel::Result;
use crate::objects::QpType;

/// `MLX5_BY_PASS_NUM_REGULAR_PRIOS`: a flow's priority is below it (else ENOMEM).
const NUM_REGULAR_PRIOS: u16 = 16;
/// `MLX5_IB_FLOW_MCAST_PRIO` (`MLX5_BY_PASS_NUM_PRIOS - 1`): multicast-only flows.
const MCAST_PRIO: u32 = 32;

/// `ETH_P_IP`, `ETH_P_IPV6`.
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86dd;
const IPPROTO_TCP: u8 = 6;
const IPPROTO_UDP: u8 = 17;
const IPPROTO_GRE: u8 = 47;

/// A flow object (`struct ib_flow` with mlx5_ib's handler): its rules and its QP.
#[derive(Debug)]
pub(crate) struct UFlow {
    /// The QP it steers to (None: a DevX destination, or a drop).
    pub qpn: Option<u32>,
    pub rules: Vec<Rule>,
    /// The mlx5dv matcher it was made through (its `usecnt` counts the flow).
    pub matcher: Option<Arc<super::flow_matcher::FlowMatcher>>,
}

/// A spec after `kern_spec_to_ib_spec`: filters zero-extended to the kernel's filter
/// size (the rest of the uapi struct zero).
#[derive(Debug, Clone)]
enum Spec {
    Filter { ty: u32, val: Vec<u8>, mask: Vec<u8> },
    Tag(u32),
    Drop,
}

impl Spec {
    fn ty(&self) -> u32 {
        match self {
            Spec::Filter { ty, .. } => *ty,
            Spec::Tag(_) => f::SPEC_ACTION_TAG,
            Spec::Drop => f::SPEC_ACTION_DROP,
        }
    }
}

/// `offsetof(struct ib_flow_*_filter, real_sz)`: the bytes of a filter the kernel takes.
fn ib_filter_size(ty: u32) -> Option<usize> {
    Some(match ty & !f::SPEC_INNER {
        f::SPEC_ETH => 16,
        f::SPEC_IPV4 => 12,
        // ib_flow_ipv6_filter has no trailing reserved byte.
        f::SPEC_IPV6 => 39,
        f::SPEC_TCP | f::SPEC_UDP => 4,
        f::SPEC_VXLAN_TUNNEL => 4,
        f::SPEC_ESP => 8,
        f::SPEC_GRE => 8,
        f::SPEC_MPLS => 4,
        _ => return None,
    })
}

/// Reads a zero-extended `T` from a filter's bytes.
fn filter<T: FromBytes + IntoBytes>(b: &[u8]) -> T {
    let mut v = T::new_zeroed();
    let n = b.len().min(std::mem::size_of::<T>());
    v.as_mut_bytes()[..n].copy_from_slice(&b[..n]);
    v
}

/// `kern_spec_to_ib_spec` of one spec (its bytes, `hdr.size` long).
fn convert(c: &WCall<'_>, hdr: &FlowSpecHdr, b: &[u8]) -> Result<Spec> {
    if hdr.reserved != 0 {
        return Err(Errno::EINVAL);
    }
    let word = |at: usize| b.get(at..at + 4).map_or(0, |w| u32::from_ne_bytes(w.try_into().unwrap()));
    if hdr.ty >= f::SPEC_ACTION_TAG {
        return match hdr.ty {
            f::SPEC_ACTION_TAG if hdr.size == 16 => Ok(Spec::Tag(word(8))),
            f::SPEC_ACTION_DROP if hdr.size == 8 => Ok(Spec::Drop),
            f::SPEC_ACTION_HANDLE if hdr.size != 16 => Err(Errno::EOPNOTSUPP),
            // softhca makes no flow action and no counters objects: the lookup fails.
            f::SPEC_ACTION_HANDLE => c.st.table.lookup(word(8) as i64, ObjType::FlowAction).map_err(|_| Errno::EINVAL)
                .and(Err(Errno::EINVAL)),
            f::SPEC_ACTION_COUNT if hdr.size == 16 => c.st.table.lookup(word(8) as i64, ObjType::Counters)
                .map_err(|_| Errno::EINVAL).and(Err(Errno::EINVAL)),
            _ => Err(Errno::EINVAL),
        };
    }
    let size = (hdr.size as usize).checked_sub(std::mem::size_of::<FlowSpecHdr>()).ok_or(Errno::EINVAL)? / 2;
    if size % 4 != 0 || hdr.ty == f::SPEC_INNER | f::SPEC_VXLAN_TUNNEL {
        return Err(Errno::EINVAL);
    }
    let real = ib_filter_size(hdr.ty).ok_or(Errno::EINVAL)?;
    let (val, mask) = (&b[8..8 + size], &b[8 + size..8 + 2 * size]);
    // spec_filter_size: a longer filter is fine when the mask's extra bytes are zero.
    let n = if size > real {
        if mask[real..].iter().any(|&x| x != 0) {
            return Err(Errno::EINVAL);
        }
        real
    } else {
        size
    };
    if n == 0 {
        return Err(Errno::EINVAL);
    }
    let (val, mask) = (val[..n].to_vec(), mask[..n].to_vec());
    match hdr.ty & !f::SPEC_INNER {
        f::SPEC_IPV6 => {
            let (v, m): (Ipv6Filter, Ipv6Filter) = (filter(&val), filter(&mask));
            if u32::from_be(m.flow_label) >= 1 << 20 || u32::from_be(v.flow_label) >= 1 << 20 {
                return Err(Errno::EINVAL);
            }
        }
        f::SPEC_VXLAN_TUNNEL => {
            let (v, m): (TunnelFilter, TunnelFilter) = (filter(&val), filter(&mask));
            if u32::from_be(m.tunnel_id) >= 1 << 24 || u32::from_be(v.tunnel_id) >= 1 << 24 {
                return Err(Errno::EINVAL);
            }
        }
        _ => {}
    }
    Ok(Spec::Filter { ty: hdr.ty, val, mask })
}

/// The criteria and value buffers of one header set (outer or inner) or of the misc set.
struct Sets<'a> {
    m: &'a mut MatchSpec,
}

impl Sets<'_> {
    fn hdr(&mut self, inner: bool, crit: bool) -> ViewMut<'_, L> {
        let set = if inner { P::inner_headers } else { P::outer_headers };
        let b = if crit { &mut self.m.criteria } else { &mut self.m.value };
        let at = set.off() / 8;
        ViewMut::new(&mut b[at..at + L::BYTES]).expect("one match set")
    }

    fn misc(&mut self, crit: bool) -> ViewMut<'_, M> {
        let b = if crit { &mut self.m.criteria } else { &mut self.m.value };
        let at = P::misc_parameters.off() / 8;
        ViewMut::new(&mut b[at..at + M::BYTES]).expect("one match set")
    }

    /// Sets a header field in the criteria to `c` and in the value to `v`.
    fn set<T: prm::bits::Value>(&mut self, inner: bool, fl: prm::bits::Field<L, T>, c: T, v: T) {
        self.hdr(inner, true).set(fl, c);
        self.hdr(inner, false).set(fl, v);
    }

    fn set_misc<T: prm::bits::Value>(&mut self, fl: prm::bits::Field<M, T>, c: T, v: T) {
        self.misc(true).set(fl, c);
        self.misc(false).set(fl, v);
    }

    fn bytes(&mut self, inner: bool, fl: prm::bits::Bytes<L>, range: std::ops::Range<usize>, c: &[u8], v: &[u8]) {
        self.hdr(inner, true).bytes_mut(fl)[range.clone()].copy_from_slice(c);
        self.hdr(inner, false).bytes_mut(fl)[range].copy_from_slice(v);
    }

    fn mac(&mut self, inner: bool, hi: prm::bits::Field<L, u32>, lo: prm::bits::Field<L, u16>, c: [u8; 6], v: [u8; 6]) {
        let split = |m: [u8; 6]| (u32::from_be_bytes([m[0], m[1], m[2], m[3]]), u16::from_be_bytes([m[4], m[5]]));
        let ((ch, cl), (vh, vl)) = (split(c), split(v));
        self.set(inner, hi, ch, vh);
        self.set(inner, lo, cl, vl);
    }

    /// `set_proto`: an IP protocol once; a second, different one is EINVAL.
    fn proto(&mut self, inner: bool, mask: u8, val: u8) -> Result<()> {
        if mask == 0 {
            return Ok(());
        }
        let (em, ev) = (self.hdr(inner, true).get(L::ip_protocol), self.hdr(inner, false).get(L::ip_protocol));
        if em == 0 {
            self.set(inner, L::ip_protocol, mask, val);
            return Ok(());
        }
        if mask != em || val != ev { Err(Errno::EINVAL) } else { Ok(()) }
    }

    /// `set_tos`: ECN in the low two bits, DSCP above.
    fn tos(&mut self, inner: bool, mask: u8, val: u8) {
        self.set(inner, L::ip_ecn, mask & 3, val & 3);
        self.set(inner, L::ip_dscp, mask >> 2, val >> 2);
    }
}

/// What `parse_flow_attr` builds besides the match.
#[derive(Debug, Default)]
struct Parsed {
    drop: bool,
    flow_tag: Option<u32>,
}

/// `parse_flow_attr` of one spec.
fn parse(s: &mut Sets<'_>, out: &mut Parsed, spec: &Spec, prev_type: u32) -> Result<()> {
    let (ty, val, mask) = match spec {
        Spec::Tag(t) => {
            if *t >= 1 << 24 {
                return Err(Errno::EINVAL);
            }
            out.flow_tag = Some(*t);
            return Ok(());
        }
        Spec::Drop => {
            out.drop = true;
            return Ok(());
        }
        Spec::Filter { ty, val, mask } => (*ty, val, mask),
    };
    let inner = ty & f::SPEC_INNER != 0;
    match ty & !f::SPEC_INNER {
        f::SPEC_ETH => {
            let (v, m): (EthFilter, EthFilter) = (filter(val), filter(mask));
            s.mac(inner, L::dmac_47_16, L::dmac_15_0, m.dst_mac, v.dst_mac);
            s.mac(inner, L::smac_47_16, L::smac_15_0, m.src_mac, v.src_mac);
            if m.vlan_tag != 0 {
                let (mv, vv) = (u16::from_be(m.vlan_tag), u16::from_be(v.vlan_tag));
                s.set(inner, L::cvlan_tag, true, true);
                s.set(inner, L::first_vid, mv & 0xfff, vv & 0xfff);
                s.set(inner, L::first_cfi, (mv >> 12) & 1 != 0, (vv >> 12) & 1 != 0);
                s.set(inner, L::first_prio, (mv >> 13) as u8, (vv >> 13) as u8);
            }
            s.set(inner, L::ethertype, u16::from_be(m.ether_type), u16::from_be(v.ether_type));
        }
        f::SPEC_IPV4 => {
            let (v, m): (Ipv4Filter, Ipv4Filter) = (filter(val), filter(mask));
            // FIELDS_NOT_SUPPORTED(mask, tos): ttl and flags.
            if m.ttl != 0 || m.flags != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            s.set(inner, L::ethertype, 0xffff, ETH_P_IP);
            s.bytes(inner, L::src_ipv4_src_ipv6, IPV4_IN_UNION, &m.src_ip.to_ne_bytes(), &v.src_ip.to_ne_bytes());
            s.bytes(inner, L::dst_ipv4_dst_ipv6, IPV4_IN_UNION, &m.dst_ip.to_ne_bytes(), &v.dst_ip.to_ne_bytes());
            s.tos(inner, m.tos, v.tos);
            s.proto(inner, m.proto, v.proto)?;
        }
        f::SPEC_IPV6 => {
            let (v, m): (Ipv6Filter, Ipv6Filter) = (filter(val), filter(mask));
            if m.hop_limit != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            s.set(inner, L::ethertype, 0xffff, ETH_P_IPV6);
            s.bytes(inner, L::src_ipv4_src_ipv6, 0..16, &m.src_ip, &v.src_ip);
            s.bytes(inner, L::dst_ipv4_dst_ipv6, 0..16, &m.dst_ip, &v.dst_ip);
            s.tos(inner, m.traffic_class, v.traffic_class);
            s.proto(inner, m.next_hdr, v.next_hdr)?;
            let (ml, vl) = (u32::from_be(m.flow_label), u32::from_be(v.flow_label));
            if inner {
                s.set_misc(M::inner_ipv6_flow_label, ml, vl);
            } else {
                s.set_misc(M::outer_ipv6_flow_label, ml, vl);
            }
        }
        f::SPEC_ESP => return Err(Errno::EOPNOTSUPP),
        f::SPEC_TCP | f::SPEC_UDP => {
            let (v, m): (TcpUdpFilter, TcpUdpFilter) = (filter(val), filter(mask));
            let tcp = ty & !f::SPEC_INNER == f::SPEC_TCP;
            s.proto(inner, 0xff, if tcp { IPPROTO_TCP } else { IPPROTO_UDP })?;
            let (sp, dp) = if tcp { (L::tcp_sport, L::tcp_dport) } else { (L::udp_sport, L::udp_dport) };
            s.set(inner, sp, u16::from_be(m.src_port), u16::from_be(v.src_port));
            s.set(inner, dp, u16::from_be(m.dst_port), u16::from_be(v.dst_port));
        }
        f::SPEC_GRE => {
            let (v, m): (GreFilter, GreFilter) = (filter(val), filter(mask));
            if m.c_ks_res0_ver != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
            s.proto(inner, 0xff, IPPROTO_GRE)?;
            s.set(inner, L::ip_protocol, 0xff, IPPROTO_GRE);
            s.set_misc(M::gre_protocol, u16::from_be(m.protocol), u16::from_be(v.protocol));
            s.set_misc(M::gre_key, u32::from_be(m.key), u32::from_be(v.key));
        }
        f::SPEC_MPLS => {
            // check_mpls_supp_fields: softhca advertises no MPLS field (over UDP, GRE
            // or plain), so any mask bit is unsupported; a zero mask matches nothing.
            let _ = prev_type;
            let m: MplsFilter = filter(mask);
            if m.label != 0 {
                return Err(Errno::EOPNOTSUPP);
            }
        }
        f::SPEC_VXLAN_TUNNEL => {
            let (v, m): (TunnelFilter, TunnelFilter) = (filter(val), filter(mask));
            s.set_misc(M::vxlan_vni, u32::from_be(m.tunnel_id), u32::from_be(v.tunnel_id));
        }
        _ => return Err(Errno::EINVAL),
    }
    Ok(())
}

/// `is_valid_ethertype` for the outer or inner headers: an ethertype match next to an
/// IP spec must be the full mask and that IP version's type.
fn valid_ethertype(specs: &[Spec], inner: bool) -> bool {
    let bit = if inner { f::SPEC_INNER } else { 0 };
    let (mut has, mut full, mut eth_type, mut ip) = (false, true, 0u16, 0u32);
    for s in specs {
        if let Spec::Filter { ty, val, mask } = s {
            if *ty == f::SPEC_ETH | bit {
                let (v, m): (EthFilter, EthFilter) = (filter(val), filter(mask));
                if m.ether_type != 0 {
                    full = m.ether_type == 0xffff;
                    has = true;
                    eth_type = u16::from_be(v.ether_type);
                }
            } else if *ty == f::SPEC_IPV4 | bit || *ty == f::SPEC_IPV6 | bit {
                ip = *ty;
            }
        }
    }
    if !has || ip == 0 {
        return true;
    }
    // MPLS ethertypes pass only with ip_version matching, which softhca lacks.
    full && ((eth_type == ETH_P_IP && ip == f::SPEC_IPV4 | bit) || (eth_type == ETH_P_IPV6 && ip == f::SPEC_IPV6 | bit))
}

/// `flow_is_multicast_only`: the first spec pins a multicast IPv4 destination or a
/// multicast destination MAC.
fn multicast_only(ty: u32, specs: &[Spec]) -> bool {
    if ty != f::ATTR_NORMAL {
        return false;
    }
    match specs.first() {
        Some(Spec::Filter { ty: f::SPEC_IPV4, val, .. }) => {
            let v: Ipv4Filter = filter(val);
            v.dst_ip.to_ne_bytes()[0] & 0xf0 == 0xe0
        }
        Some(Spec::Filter { ty: f::SPEC_ETH, val, mask }) => {
            let (v, m): (EthFilter, EthFilter) = (filter(val), filter(mask));
            m.dst_mac[0] & 1 != 0 && v.dst_mac[0] & 1 != 0
        }
        _ => false,
    }
}

/// `get_match_criteria_enable`: a bit per set with a criteria bit.
fn criteria_enable(crit: &[u8]) -> u8 {
    let nz = |set: prm::bits::Sub<P, L>| crit[set.off() / 8..set.off() / 8 + L::BYTES].iter().any(|&b| b != 0);
    let nzb = |set: prm::bits::Bytes<P>| crit[set.off() / 8..(set.off() + set.bits()) / 8].iter().any(|&b| b != 0);
    let mut e = 0;
    if nz(P::outer_headers) {
        e |= criteria::OUTER_HEADERS;
    }
    if nzb(P::misc_parameters) {
        e |= criteria::MISC_PARAMETERS;
    }
    if nz(P::inner_headers) {
        e |= criteria::INNER_HEADERS;
    }
    if nzb(P::misc_parameters_2) {
        e |= criteria::MISC_PARAMETERS_2;
    }
    e
}

/// `_create_flow_rule` for the rule a flow of `specs` makes, with `tir` as the QP's.
fn build_rule(specs: &[Spec], tir: Option<u32>) -> Result<(MatchSpec, RuleAct)> {
    if !valid_ethertype(specs, false) || !valid_ethertype(specs, true) {
        return Err(Errno::EINVAL);
    }
    let mut m = MatchSpec::new();
    let mut parsed = Parsed::default();
    let mut prev = 0;
    for s in specs {
        parse(&mut Sets { m: &mut m }, &mut parsed, s, prev)?;
        prev = s.ty();
    }
    m.enable = criteria_enable(&m.criteria);
    let mut act = RuleAct { drop: parsed.drop, flow_tag: parsed.flow_tag, ..Default::default() };
    if !parsed.drop {
        // `raw_packet_qp.rq.tirn`: 0 where the QP has none.
        act.dests.push(RuleDest::Tir(tir.unwrap_or(0)));
    }
    Ok((m, act))
}

/// `struct mlx5_ib_create_flow`'s header (`ncounters_data`, `reserved`).
const UCMD_MIN: usize = 8;
/// `sizeof(struct mlx5_ib_flow_counters_data)`.
const COUNTERS_DATA: usize = 16;

/// EX_CREATE_FLOW.
pub(crate) fn create_flow(c: &mut WCall<'_>) -> Result<()> {
    // uverbs_request_start: the whole core struct.
    if c.core_in.len() < std::mem::size_of::<CreateFlow>() {
        return Err(Errno::ENOSPC);
    }
    let cmd: CreateFlow = c.core_in.read_prefix()?;
    let a = cmd.flow_attr;
    if cmd.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    if !c.hca.cap_net_raw() {
        return Err(Errno::EPERM);
    }
    if a.flags >= f::ATTR_FLAGS_RESERVED {
        return Err(Errno::EINVAL);
    }
    if a.flags & f::ATTR_FLAGS_DONT_TRAP != 0 && (a.ty == f::ATTR_ALL_DEFAULT || a.ty == f::ATTR_MC_DEFAULT) {
        return Err(Errno::EINVAL);
    }
    if a.num_of_specs > f::SPEC_SUPPORT_LAYERS
        || a.size as usize > a.num_of_specs as usize * f::FLOW_SPEC_UNION_BYTES
        || a.reserved != [0, 0]
    {
        return Err(Errno::EINVAL);
    }
    let base = std::mem::size_of::<CreateFlow>();
    let mut specs_bytes = vec![0u8; if a.num_of_specs > 0 { a.size as usize } else { 0 }];
    // uverbs_request_next, then uverbs_request_finish.
    if base + specs_bytes.len() > c.core_in.len() {
        return Err(Errno::ENOSPC);
    }
    c.core_in.read(base, &mut specs_bytes)?;
    if !c.core_in.is_cleared(base + specs_bytes.len()) {
        return Err(Errno::EOPNOTSUPP);
    }
    let handle = c.alloc(ObjType::Flow)?;
    let qp = match c.st.table.lookup(cmd.qp_handle as i64, ObjType::Qp) {
        Ok(Uobj::Qp(q)) => q,
        _ => return Err(Errno::EINVAL),
    };
    if qp.qp_type != QpType::Ud && qp.qp_type != QpType::RawPacket {
        return Err(Errno::EINVAL);
    }
    // The spec list: each spec whole inside what is left.
    let mut specs = Vec::with_capacity(a.num_of_specs as usize);
    let (mut at, mut left) = (0usize, specs_bytes.len());
    while specs.len() < a.num_of_specs as usize && left >= std::mem::size_of::<FlowSpecHdr>() {
        let hdr = FlowSpecHdr::read_from_prefix(&specs_bytes[at..]).map_err(|_| Errno::EINVAL)?.0;
        if left < hdr.size as usize {
            break;
        }
        specs.push(convert(c, &hdr, &specs_bytes[at..at + hdr.size as usize])?);
        left -= hdr.size as usize;
        at += hdr.size as usize;
    }
    if left != 0 || specs.len() != a.num_of_specs as usize {
        return Err(Errno::EINVAL);
    }
    // mlx5_ib_create_flow: the driver data, then the attributes.
    let inlen = c.udata.inp.len();
    if inlen > 0 {
        if inlen < UCMD_MIN {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut w = [0u8; 4];
        c.udata.inp.read(0, &mut w)?;
        let n = u32::from_ne_bytes(w);
        if n > 1 {
            return Err(Errno::EINVAL);
        }
        if !c.udata.inp.is_cleared(UCMD_MIN + COUNTERS_DATA * n as usize) {
            return Err(Errno::EOPNOTSUPP);
        }
    }
    if a.priority >= NUM_REGULAR_PRIOS {
        return Err(Errno::ENOMEM);
    }
    if a.flags & !(f::ATTR_FLAGS_DONT_TRAP | f::ATTR_FLAGS_EGRESS) != 0 {
        return Err(Errno::EINVAL);
    }
    let egress = a.flags & f::ATTR_FLAGS_EGRESS != 0;
    if egress && (a.ty == f::ATTR_ALL_DEFAULT || a.ty == f::ATTR_MC_DEFAULT) {
        return Err(Errno::EINVAL);
    }
    let dont_trap = a.flags & f::ATTR_FLAGS_DONT_TRAP != 0;
    let key = match a.ty {
        // No NIC TX namespace (softhca has no transmit tables).
        _ if egress => return Err(Errno::EOPNOTSUPP),
        f::ATTR_NORMAL if multicast_only(a.ty, &specs) && !dont_trap => PrioKey::Bypass(MCAST_PRIO),
        f::ATTR_NORMAL => PrioKey::Bypass(a.priority as u32 * 2 + u32::from(!dont_trap)),
        f::ATTR_ALL_DEFAULT | f::ATTR_MC_DEFAULT => PrioKey::Leftovers,
        // SNIFFER: no allow_sniffer_and_nic_rx_shared_tir; others: no namespace.
        _ => return Err(Errno::EOPNOTSUPP),
    };
    let tir = qp.raw.and_then(|r| r.tirn);
    let rules: Vec<(MatchSpec, RuleAct)> = match a.ty {
        f::ATTR_NORMAL => vec![build_rule(&specs, tir)?],
        _ => {
            // create_leftovers_rule: its own specs (the flow's are checked, then unused):
            // multicast destinations, and for ALL_DEFAULT unicast too.
            let mut v = Vec::new();
            for mc in [true, false] {
                if !mc && a.ty != f::ATTR_ALL_DEFAULT {
                    break;
                }
                let mut mask = [0u8; 16];
                mask[0] = 1;
                let mut val = [0u8; 16];
                val[0] = u8::from(mc);
                let s = Spec::Filter { ty: f::SPEC_ETH, val: val.to_vec(), mask: mask.to_vec() };
                v.push(build_rule(&[s], tir)?);
            }
            v
        }
    };
    let rules = install(c.hca, key, &rules)?;
    let flow = Arc::new(UFlow { qpn: Some(qp.qpn), rules, matcher: None });
    c.st.table.fill(handle, Uobj::Flow(flow));
    let resp = CreateFlowResp { comp_mask: 0, flow_handle: handle };
    c.response(resp.as_bytes())
}

/// Adds a flow's rules; on a refusal the ones already added go.
fn install(hca: &Hca, key: PrioKey, rules: &[(MatchSpec, RuleAct)]) -> Result<Vec<Rule>> {
    let mut db = hca.flow_db();
    let mut done = Vec::new();
    for (m, act) in rules {
        match db.add_rule(hca, key, m, act) {
            Ok(r) => done.push(r),
            Err(e) => {
                for r in done.iter().rev() {
                    let _ = db.del_rule(hca, r);
                }
                return Err(e);
            }
        }
    }
    Ok(done)
}

/// `mlx5_ib_destroy_flow`: every rule of the flow.
pub(crate) fn destroy(hca: &Hca, flow: &UFlow) -> Result<()> {
    let mut db = hca.flow_db();
    let mut first = Ok(());
    for r in &flow.rules {
        if let Err(e) = db.del_rule(hca, r) {
            first = first.and(Err(e));
        }
    }
    first
}

/// EX_DESTROY_FLOW: `struct ib_uverbs_destroy_flow`.
pub(crate) fn destroy_flow(c: &mut WCall<'_>) -> Result<()> {
    let cmd: DestroyFlow = c.request()?;
    if cmd.comp_mask != 0 {
        return Err(Errno::EINVAL);
    }
    let hca = c.hca.clone();
    c.st.destroy(&hca, cmd.flow_handle as i64, ObjType::Flow).map(|_| ())
}
