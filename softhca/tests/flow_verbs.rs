//! `IB_USER_VERBS_EX_CMD_CREATE_FLOW`/`DESTROY_FLOW` on softhca's kernel half, driven
//! as libibverbs' `ibv_cmd_create_flow` sends them (the spec list after
//! `ib_uverbs_create_flow`, libmlx5's empty driver data): the errnos of
//! `ib_uverbs_ex_create_flow` and `mlx5_ib_create_flow` for malformed commands and
//! specs, each leaving no steering object behind; then flows on a RAW_PACKET QP
//! steering hand-built frames (header layouts from RFC 791/768/793 and 802.3) to the
//! QP's TIR, by priority, with flow tags and drops, the QP EBUSY while a flow uses it
//! (`ib_destroy_qp_user`), and nothing left once the flows or the file are gone.

mod common;
use common::{hca, Buf};

use std::sync::Arc;

use nix::errno::Errno;
use softhca::device::steer::{Dest, Verdict};
use softhca::Hca;
use uverbs::cmd::{context, cq, pd, qp};
use uverbs::sys::flow::{self as f, CreateFlow, CreateFlowResp, DestroyFlow, EthFilter, FlowAttr, FlowSpecHdr,
                        Ipv4Filter, Ipv6Filter, TcpUdpFilter};
use uverbs::sys::ids::{destroy, object};
use uverbs::sys::mlx5::{self as mlx5, AllocUcontextReqV2, AllocUcontextResp, CreateCq, CreateQp};
use uverbs::sys::verbs::{QpCap, QPT_RAW_PACKET, QPT_RC, QPT_UD};
use uverbs::write::WriteCmd;
use uverbs::Device;
use zerocopy::IntoBytes;

/// `IB_USER_VERBS_EX_CMD_CREATE_FLOW`, `_DESTROY_FLOW` (rdma/ib_user_verbs.h).
const EX_CREATE_FLOW: u32 = 50;
const EX_DESTROY_FLOW: u32 = 51;

/// The queues of [`setup`]. Their rings and doorbell records are in `_mem`, which the
/// device reads and writes until the QPs and the CQ are destroyed, with the context:
/// drop the `Device` first. (Freed first, the device once wrote its CQ arm marker into
/// memory malloc had reused: "corrupted double-linked list" in about 1 run in 40.)
struct Qps {
    _mem: Vec<Buf>,
    ud: u32,
    rc: u32,
    raw: Option<(u32, u32)>,
}

fn open(h: &Arc<Hca>) -> Device {
    Device::from_endpoint(Box::new(h.open()), "softhca0")
}

/// A context, a PD, a CQ, and UD, RC and (with CAP_NET_RAW) RAW_PACKET QPs.
fn setup(h: &Arc<Hca>, dev: &Device) -> Qps {
    let req = AllocUcontextReqV2 {
        total_num_bfregs: 16, num_low_latency_bfregs: 4, max_cqe_version: 1, lib_caps: mlx5::LIB_CAP_4K_UAR,
        flags: mlx5::ALLOC_UCTX_DEVX,
        ..Default::default()
    };
    let mut resp = AllocUcontextResp::default();
    context::get_context_ioctl(dev, req.as_bytes(), resp.as_mut_bytes()).unwrap();
    let p = pd::alloc_pd(dev, &mut [0; 4]).unwrap();
    let mut mem = Vec::new();
    let ring = Buf::new(4096);
    let db = Buf::new(4096);
    let ccmd = CreateCq { buf_addr: ring.addr(), db_addr: db.addr(), cqe_size: 64, ..Default::default() };
    let (cqh, _) = cq::create_cq_ioctl(dev, &cq::CqArgs { cqe: 31, ..Default::default() }, ccmd.as_bytes(), &mut [0; 8]).unwrap();
    mem.extend([ring, db]);
    let mut mk = |ty: u8| {
        let buf = Buf::new(16 * 4096);
        let sq = Buf::new(4 * 4096);
        let db = Buf::new(4096);
        let cmd = CreateQp {
            buf_addr: buf.addr(), db_addr: db.addr(), sq_wqe_count: 16, rq_wqe_count: 16, rq_wqe_shift: 4,
            uidx: 0, sq_buf_addr: if ty == QPT_RAW_PACKET { sq.addr() } else { 0 }, ..Default::default()
        };
        let a = qp::QpArgs {
            pd: p, send_cq: cqh, recv_cq: cqh, qp_type: ty,
            cap: QpCap { max_send_wr: 4, max_recv_wr: 16, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 },
            ..Default::default()
        };
        let r = qp::create_qp_write(dev, &a, cmd.as_bytes(), &mut [0; 40]).unwrap();
        mem.extend([buf, sq, db]);
        (r.handle, r.qpn)
    };
    let ud = mk(QPT_UD).0;
    let rc = mk(QPT_RC).0;
    let raw = h.cap_net_raw().then(|| mk(QPT_RAW_PACKET));
    Qps { _mem: mem, ud, rc, raw }
}

/// One spec: header, value, mask (filters), or header and a word (actions).
fn spec<T: IntoBytes + zerocopy::Immutable>(ty: u32, val: &T, mask: &T) -> Vec<u8> {
    let size = 8 + 2 * std::mem::size_of::<T>();
    let mut v = FlowSpecHdr { ty, size: size as u16, reserved: 0 }.as_bytes().to_vec();
    v.extend_from_slice(val.as_bytes());
    v.extend_from_slice(mask.as_bytes());
    v
}

fn action(ty: u32, size: u16, word: u32) -> Vec<u8> {
    let mut v = FlowSpecHdr { ty, size, reserved: 0 }.as_bytes().to_vec();
    if size >= 16 {
        v.extend_from_slice(&word.to_ne_bytes());
        v.extend_from_slice(&[0; 4]);
    }
    v
}

fn udp_dport(port: u16) -> Vec<u8> {
    spec(f::SPEC_UDP, &TcpUdpFilter { dst_port: port.to_be(), src_port: 0 },
         &TcpUdpFilter { dst_port: 0xffff, src_port: 0 })
}

fn ipv4_dst(a: [u8; 4]) -> Vec<u8> {
    spec(f::SPEC_IPV4, &Ipv4Filter { dst_ip: u32::from_ne_bytes(a), ..Default::default() },
         &Ipv4Filter { dst_ip: u32::MAX, ..Default::default() })
}

/// An EX_CREATE_FLOW: the command with the specs (`size` their bytes) and `extra` after.
struct Flow {
    cmd: CreateFlow,
    specs: Vec<u8>,
    udata: Vec<u8>,
}

impl Flow {
    fn new(qp: u32, specs: &[Vec<u8>]) -> Flow {
        let bytes: Vec<u8> = specs.concat();
        let attr = FlowAttr { size: bytes.len() as u16, num_of_specs: specs.len() as u8, port: 1, ..Default::default() };
        Flow { cmd: CreateFlow { comp_mask: 0, qp_handle: qp, flow_attr: attr }, specs: bytes, udata: Vec::new() }
    }

    fn with(mut self, f: impl FnOnce(&mut Flow)) -> Flow {
        f(&mut self);
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = self.cmd.as_bytes().to_vec();
        b.extend_from_slice(&self.specs);
        b
    }

    fn run_bytes(&self, dev: &Device, core: &[u8]) -> Result<u32, Errno> {
        let mut resp = CreateFlowResp::default();
        WriteCmd::new(EX_CREATE_FLOW, core, resp.as_mut_bytes()).udata(&self.udata, &mut []).run_ex(dev)?;
        Ok(resp.flow_handle)
    }

    fn run(&self, dev: &Device) -> Result<u32, Errno> {
        self.run_bytes(dev, &self.bytes())
    }
}

fn destroy_flow(dev: &Device, handle: u32) -> Result<(), Errno> {
    let cmd = DestroyFlow { comp_mask: 0, flow_handle: handle };
    WriteCmd::new(EX_DESTROY_FLOW, cmd.as_bytes(), &mut []).run_ex(dev)
}

fn nothing_installed(h: &Hca) -> bool {
    h.firmware().steering().counts() == (0, 0, 0, 0)
}

#[test]
fn create_flow_refusals_have_the_kernels_errnos_and_leave_nothing() {
    let h = hca();
    let dev = open(&h);
    let q = setup(&h, &dev);
    let good = || vec![ipv4_dst([10, 0, 0, 1]), udp_dport(4000)];
    let eth = |val: EthFilter, mask: EthFilter| spec(f::SPEC_ETH, &val, &mask);
    let cases: Vec<(&str, Flow, Errno)> = vec![
        ("comp_mask", Flow::new(q.ud, &good()).with(|f| f.cmd.comp_mask = 1), Errno::EINVAL),
        ("flags at IB_FLOW_ATTR_FLAGS_RESERVED", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.flags = 1 << 3), Errno::EINVAL),
        ("DONT_TRAP on ALL_DEFAULT", Flow::new(q.ud, &good()).with(|f| {
            f.cmd.flow_attr.flags = f::ATTR_FLAGS_DONT_TRAP;
            f.cmd.flow_attr.ty = f::ATTR_ALL_DEFAULT;
        }), Errno::EINVAL),
        ("11 specs", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.num_of_specs = 11), Errno::EINVAL),
        ("size beyond num_of_specs unions", Flow::new(q.ud, &[udp_dport(1)]).with(|f| f.cmd.flow_attr.size = 89), Errno::EINVAL),
        ("reserved", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.reserved = [0, 1]), Errno::EINVAL),
        ("no such QP", Flow::new(77, &good()), Errno::EINVAL),
        ("an RC QP", Flow::new(q.rc, &good()), Errno::EINVAL),
        ("specs shorter than size", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.num_of_specs = 1), Errno::EINVAL),
        ("more specs than sent", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.num_of_specs = 3), Errno::EINVAL),
        ("spec reserved", Flow::new(q.ud, &[udp_dport(1)]).with(|f| f.specs[6] = 1), Errno::EINVAL),
        ("unknown filter type", Flow::new(q.ud, &[spec(0x22, &TcpUdpFilter::default(), &TcpUdpFilter::default())]), Errno::EINVAL),
        ("IPv4_EXT is rdma-core's, not the kernel's", Flow::new(q.ud, &[spec(f::SPEC_IPV4_EXT, &Ipv4Filter::default(), &Ipv4Filter::default())]), Errno::EINVAL),
        ("unknown action type", Flow::new(q.ud, &[action(0x1004, 16, 0)]), Errno::EINVAL),
        ("filter not a multiple of 4", Flow::new(q.ud, &[{
            let mut s = vec![0u8; 20];
            s[..8].copy_from_slice(FlowSpecHdr { ty: f::SPEC_UDP, size: 20, reserved: 0 }.as_bytes());
            s
        }]), Errno::EINVAL),
        ("header-only filter", Flow::new(q.ud, &[FlowSpecHdr { ty: f::SPEC_UDP, size: 8, reserved: 0 }.as_bytes().to_vec()]), Errno::EINVAL),
        ("longer filter with a mask beyond the kernel's", Flow::new(q.ud, &[{
            let mut s = spec(f::SPEC_TCP, &[0u32; 2], &[0u32, 1u32]);
            s[4..6].copy_from_slice(&24u16.to_ne_bytes());
            s
        }]), Errno::EINVAL),
        ("inner VXLAN", Flow::new(q.ud, &[spec(f::SPEC_VXLAN_TUNNEL | f::SPEC_INNER, &0u32, &0u32)]), Errno::EINVAL),
        ("IPv6 flow label of 21 bits", Flow::new(q.ud, &[spec(f::SPEC_IPV6, &Ipv6Filter::default(),
            &Ipv6Filter { flow_label: (1u32 << 20).to_be(), ..Default::default() })]), Errno::EINVAL),
        ("tag of 8 bytes", Flow::new(q.ud, &[action(f::SPEC_ACTION_TAG, 8, 0)]), Errno::EINVAL),
        ("drop of 16 bytes", Flow::new(q.ud, &[action(f::SPEC_ACTION_DROP, 16, 0)]), Errno::EINVAL),
        ("flow action handle of 8 bytes", Flow::new(q.ud, &[action(f::SPEC_ACTION_HANDLE, 8, 0)]), Errno::EOPNOTSUPP),
        ("no flow action object", Flow::new(q.ud, &[action(f::SPEC_ACTION_HANDLE, 16, 0)]), Errno::EINVAL),
        ("no counters object", Flow::new(q.ud, &[action(f::SPEC_ACTION_COUNT, 16, q.ud)]), Errno::EINVAL),
        // mlx5_ib_create_flow
        ("two counters data", Flow::new(q.ud, &good()).with(|f| f.udata = vec![2, 0, 0, 0, 0, 0, 0, 0]), Errno::EINVAL),
        ("driver data not cleared", Flow::new(q.ud, &good()).with(|f| { f.udata = vec![0; 16]; f.udata[12] = 1 }), Errno::EOPNOTSUPP),
        ("priority 16", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.priority = 16), Errno::ENOMEM),
        ("flag bit 0", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.flags = 1), Errno::EINVAL),
        ("EGRESS on MC_DEFAULT", Flow::new(q.ud, &good()).with(|f| {
            f.cmd.flow_attr.flags = f::ATTR_FLAGS_EGRESS;
            f.cmd.flow_attr.ty = f::ATTR_MC_DEFAULT;
        }), Errno::EINVAL),
        ("EGRESS: no NIC TX tables", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.flags = f::ATTR_FLAGS_EGRESS), Errno::EOPNOTSUPP),
        ("SNIFFER", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.ty = f::ATTR_SNIFFER), Errno::EOPNOTSUPP),
        ("type 4", Flow::new(q.ud, &good()).with(|f| f.cmd.flow_attr.ty = 4), Errno::EOPNOTSUPP),
        ("IPv4 TTL", Flow::new(q.ud, &[spec(f::SPEC_IPV4, &Ipv4Filter::default(), &Ipv4Filter { ttl: 0xff, ..Default::default() })]), Errno::EOPNOTSUPP),
        ("IPv6 hop limit", Flow::new(q.ud, &[spec(f::SPEC_IPV6, &Ipv6Filter::default(), &Ipv6Filter { hop_limit: 0xff, ..Default::default() })]), Errno::EOPNOTSUPP),
        ("ESP", Flow::new(q.ud, &[spec(f::SPEC_ESP, &[0u32; 2], &[u32::MAX; 2])]), Errno::EOPNOTSUPP),
        ("MPLS label", Flow::new(q.ud, &[spec(f::SPEC_MPLS, &0u32, &u32::MAX)]), Errno::EOPNOTSUPP),
        ("ethertype IPv6 with an IPv4 spec", Flow::new(q.ud, &[
            eth(EthFilter { ether_type: 0x86ddu16.to_be(), ..Default::default() }, EthFilter { ether_type: 0xffff, ..Default::default() }),
            ipv4_dst([10, 0, 0, 1])]), Errno::EINVAL),
        ("partial ethertype mask with an IPv4 spec", Flow::new(q.ud, &[
            eth(EthFilter { ether_type: 0x0800u16.to_be(), ..Default::default() }, EthFilter { ether_type: 0xff00u16.to_be(), ..Default::default() }),
            ipv4_dst([10, 0, 0, 1])]), Errno::EINVAL),
        ("IPv4 protocol TCP, then a UDP spec", Flow::new(q.ud, &[
            spec(f::SPEC_IPV4, &Ipv4Filter { proto: 6, ..Default::default() }, &Ipv4Filter { proto: 0xff, ..Default::default() }),
            udp_dport(1)]), Errno::EINVAL),
        ("tag of 25 bits", Flow::new(q.ud, &[udp_dport(1), action(f::SPEC_ACTION_TAG, 16, 1 << 24)]), Errno::EINVAL),
        // fs_core's check_valid_spec: a value bit outside the mask.
        ("value outside the mask", Flow::new(q.ud, &[eth(EthFilter { dst_mac: [2, 0, 0, 0, 0, 1], ..Default::default() },
            EthFilter { dst_mac: [0xff, 0xff, 0xff, 0xff, 0xff, 0], ..Default::default() })]), Errno::EINVAL),
        // The firmware's refusals: misc and inner criteria.
        ("IPv6 flow label (misc set)", Flow::new(q.ud, &[spec(f::SPEC_IPV6, &Ipv6Filter::default(),
            &Ipv6Filter { flow_label: 0xfffffu32.to_be(), ..Default::default() })]), Errno::EINVAL),
        ("inner headers", Flow::new(q.ud, &[spec(f::SPEC_UDP | f::SPEC_INNER, &TcpUdpFilter { dst_port: 5u16.to_be(), src_port: 0 },
            &TcpUdpFilter { dst_port: 0xffff, src_port: 0 })]), Errno::EINVAL),
        ("a UD QP has no TIR", Flow::new(q.ud, &good()), Errno::EINVAL),
    ];
    for (what, fl, want) in &cases {
        assert_eq!(fl.run(&dev), Err(*want), "{what}");
        assert!(nothing_installed(&h), "{what}: steering objects left");
    }
    // The request framing: the core struct whole (uverbs_request_start), the specs
    // whole (uverbs_request_next), nothing but zeros after (uverbs_request_finish).
    let fl = Flow::new(q.ud, &good());
    let b = fl.bytes();
    assert_eq!(fl.run_bytes(&dev, &b[..16]), Err(Errno::ENOSPC), "core struct cut");
    assert_eq!(fl.run_bytes(&dev, &b[..b.len() - 8]), Err(Errno::ENOSPC), "specs cut");
    let mut tail = b.clone();
    tail.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(fl.run_bytes(&dev, &tail), Err(Errno::EOPNOTSUPP), "non-zero bytes after the specs");
    // Driver data shorter than mlx5_ib_create_flow's 8 bytes (only the ioctl's
    // UHW_IN can carry 4; write() counts 8-byte words).
    let mut resp = CreateFlowResp::default();
    let r = WriteCmd::new(EX_CREATE_FLOW | 1 << 31, &b, resp.as_mut_bytes()).udata(&[0; 4], &mut []).run_invoke(&dev);
    assert_eq!(r, Err(Errno::EOPNOTSUPP), "4 bytes of driver data");
    assert_eq!(destroy_flow(&dev, 999), Err(Errno::ENOENT));
    assert_eq!(destroy_flow(&dev, 0), Err(Errno::EINVAL), "handle 0 is the PD");
    let bad = DestroyFlow { comp_mask: 1, flow_handle: 0 };
    assert_eq!(WriteCmd::new(EX_DESTROY_FLOW, bad.as_bytes(), &mut []).run_ex(&dev), Err(Errno::EINVAL));
    if !h.cap_net_raw() {
        eprintln!("no CAP_NET_RAW: every create is EPERM");
    }
    // The context first: its CQ and QPs (destroyed with it) use q's rings until then.
    drop(dev);
    drop(q);
}

/// A UDP/IPv4 frame to `dst:dport` (RFC 791 header without options, RFC 768).
fn udp_frame(dmac: [u8; 6], dst: [u8; 4], dport: u16) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&dmac);
    b.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x22]);
    b.extend_from_slice(&[0x08, 0x00]);
    b.extend_from_slice(&[0x45, 0, 0, 32, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 2]);
    b.extend_from_slice(&dst);
    b.extend_from_slice(&[0x30, 0x39]);
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    b
}

#[test]
fn flows_steer_frames_to_the_raw_qps_tir() {
    let h = hca();
    let dev = open(&h);
    let q = setup(&h, &dev);
    let Some((raw, _qpn)) = q.raw else {
        testkit::skip(testkit::Need::Root, "RAW_PACKET QPs need CAP_NET_RAW");
        return;
    };
    let steer = h.firmware().steering();
    let mac = [0x02, 0, 0, 0, 0, 0x11];
    let to = |port: u16| steer.classify(0, &udp_frame(mac, [10, 0, 0, 1], port));
    assert_eq!(to(4000), Verdict::Miss);
    // A UDP destination port, tagged, at priority 1.
    let f1 = Flow::new(raw, &[ipv4_dst([10, 0, 0, 1]), udp_dport(4000), action(f::SPEC_ACTION_TAG, 16, 0x1234)])
        .with(|f| f.cmd.flow_attr.priority = 1).run(&dev).unwrap();
    let Verdict::Deliver { dest: Dest::Tir(tir), flow_tag } = to(4000) else { panic!("{:?}", to(4000)) };
    assert_eq!(flow_tag, 0x1234);
    assert_eq!(to(4001), Verdict::Miss, "another port");
    assert_eq!(steer.classify(0, &udp_frame(mac, [10, 0, 0, 3], 4000)), Verdict::Miss, "another address");
    // The same match again is EEXIST, and leaves the first.
    let again = Flow::new(raw, &[ipv4_dst([10, 0, 0, 1]), udp_dport(4000)]).with(|f| f.cmd.flow_attr.priority = 1);
    assert_eq!(again.run(&dev), Err(Errno::EEXIST));
    // A drop of the whole address at priority 0 comes first (a lower number is a lower
    // level: mlx5_ib's table 2p+1).
    let f0 = Flow::new(raw, &[ipv4_dst([10, 0, 0, 1]), action(f::SPEC_ACTION_DROP, 8, 0)]).run(&dev).unwrap();
    assert_eq!(to(4000), Verdict::Drop);
    assert_eq!(to(9), Verdict::Drop);
    // Another port in the same table and mask: the same group, another entry.
    let (tables, groups, entries, _) = steer.counts();
    let f2 = Flow::new(raw, &[ipv4_dst([10, 0, 0, 1]), udp_dport(4002)]).with(|f| f.cmd.flow_attr.priority = 1).run(&dev).unwrap();
    let c = steer.counts();
    assert_eq!((c.0, c.1, c.2), (tables, groups, entries + 1));
    // The QP is in use.
    assert_eq!(qp::destroy_qp_write(&dev, raw), Err(Errno::EBUSY));
    destroy_flow(&dev, f0).unwrap();
    assert_eq!(to(4000), Verdict::Deliver { dest: Dest::Tir(tir), flow_tag: 0x1234 });
    assert_eq!(to(4002), Verdict::Deliver { dest: Dest::Tir(tir), flow_tag: 0 });
    assert_eq!(destroy_flow(&dev, f0), Err(Errno::ENOENT));
    destroy_flow(&dev, f1).unwrap();
    assert_eq!(to(4000), Verdict::Miss);
    // UVERBS_METHOD_FLOW_DESTROY destroys it too.
    let mut c = uverbs::ioctl::Ioctl::new(object::FLOW, destroy::FLOW_DESTROY);
    c.handle(destroy::ATTR_FLOW_HANDLE, f2);
    c.run(&dev).unwrap();
    assert_eq!(destroy_flow(&dev, f2), Err(Errno::ENOENT));
    assert!(nothing_installed(&h), "the last flow takes its group and table");
    // Ethertype and MAC specs; close() with the flow live removes it.
    let eth = spec(f::SPEC_ETH, &EthFilter { dst_mac: mac, ether_type: 0x0800u16.to_be(), ..Default::default() },
                   &EthFilter { dst_mac: [0xff; 6], ether_type: 0xffff, ..Default::default() });
    Flow::new(raw, &[eth]).run(&dev).unwrap();
    assert_eq!(to(1), Verdict::Deliver { dest: Dest::Tir(tir), flow_tag: 0 });
    assert_eq!(steer.classify(0, &udp_frame([0x02, 0, 0, 0, 0, 0x12], [10, 0, 0, 1], 1)), Verdict::Miss);
    drop(dev);
    drop(q);
    assert!(nothing_installed(&h), "close destroys the flows");
}

/// An outer-headers match set (the first 64 bytes of `fte_match_param`) with the
/// ethertype (bits 0x30..0x40), IP protocol (0x80..0x88) and UDP destination port
/// (0xf0..0x100) of `mlx5_ifc_fte_match_set_lyr_2_4_bits`.
fn outer(ethertype: u16, proto: u8, dport: u16) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[6..8].copy_from_slice(&ethertype.to_be_bytes());
    b[16] = proto;
    b[30..32].copy_from_slice(&dport.to_be_bytes());
    b
}

use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::mlx5 as m5;

struct Matcher<'a> {
    mask: Vec<u8>,
    enable: u8,
    ty: u8,
    prio: u16,
    ft_type: Option<u64>,
    flags: Option<u32>,
    _p: std::marker::PhantomData<&'a ()>,
}

impl Matcher<'_> {
    fn new(mask: Vec<u8>) -> Self {
        Matcher { mask, enable: 1, ty: m5::FLOW_TYPE_NORMAL, prio: 0, ft_type: None, flags: None, _p: Default::default() }
    }

    fn create(&self, dev: &Device) -> Result<u32, Errno> {
        let prio = self.prio.to_ne_bytes();
        let mut c = Ioctl::new(object::MLX5_FLOW_MATCHER, m5::FLOW_MATCHER_CREATE);
        let h = c.new_handle(m5::ATTR_FLOW_MATCHER_CREATE_HANDLE);
        c.in_bytes(m5::ATTR_FLOW_MATCHER_MATCH_MASK, &self.mask);
        c.in_enum(m5::ATTR_FLOW_MATCHER_FLOW_TYPE, self.ty, if self.ty == m5::FLOW_TYPE_NORMAL { &prio } else { &[] });
        c.in_value(m5::ATTR_FLOW_MATCHER_MATCH_CRITERIA, self.enable);
        if let Some(t) = self.ft_type {
            c.in_const(m5::ATTR_FLOW_MATCHER_FT_TYPE, t);
        }
        if let Some(f) = self.flags {
            c.in_value(m5::ATTR_FLOW_MATCHER_FLOW_FLAGS, f as u64);
        }
        c.run(dev)?;
        Ok(c.handle_out(h))
    }
}

#[derive(Default)]
struct DvFlow {
    value: Vec<u8>,
    qp: Option<u32>,
    devx: Option<u32>,
    tag: Option<u32>,
    flags: Option<u32>,
    actions: Option<Vec<u8>>,
    counters: Option<Vec<u8>>,
}

impl DvFlow {
    fn create(&self, dev: &Device, matcher: u32) -> Result<u32, Errno> {
        let mut c = Ioctl::new(object::FLOW, m5::CREATE_FLOW);
        let h = c.new_handle(m5::ATTR_CREATE_FLOW_HANDLE);
        c.in_bytes(m5::ATTR_CREATE_FLOW_MATCH_VALUE, &self.value);
        c.handle(m5::ATTR_CREATE_FLOW_MATCHER, matcher);
        if let Some(q) = self.qp {
            c.handle(m5::ATTR_CREATE_FLOW_DEST_QP, q);
        }
        if let Some(d) = self.devx {
            c.handle(m5::ATTR_CREATE_FLOW_DEST_DEVX, d);
        }
        if let Some(t) = self.tag {
            c.in_value(m5::ATTR_CREATE_FLOW_TAG, t);
        }
        if let Some(f) = self.flags {
            c.in_value(m5::ATTR_CREATE_FLOW_FLAGS, f as u64);
        }
        if let Some(a) = &self.actions {
            c.in_bytes(m5::ATTR_CREATE_FLOW_ARR_FLOW_ACTIONS, a);
        }
        if let Some(a) = &self.counters {
            c.in_bytes(m5::ATTR_CREATE_FLOW_ARR_COUNTERS_DEVX, a);
        }
        c.run(dev)?;
        Ok(c.handle_out(h))
    }
}

fn destroy_matcher(dev: &Device, h: u32) -> Result<(), Errno> {
    let mut c = Ioctl::new(object::MLX5_FLOW_MATCHER, m5::FLOW_MATCHER_DESTROY);
    c.handle(m5::ATTR_FLOW_MATCHER_DESTROY_HANDLE, h);
    c.run(dev)
}

#[test]
fn mlx5dv_matchers_and_flows() {
    let h = hca();
    let dev = open(&h);
    let q = setup(&h, &dev);
    let Some((raw, _)) = q.raw else {
        testkit::skip(testkit::Need::Root, "RAW_PACKET QPs need CAP_NET_RAW");
        return;
    };
    let steer = h.firmware().steering();
    let mask = outer(0xffff, 0xff, 0xffff);
    let mt = Matcher::new(mask.clone()).create(&dev).unwrap();
    let value = outer(0x0800, 17, 5000);
    // Matcher refusals.
    let mcases: Vec<(&str, Matcher, Errno)> = vec![
        ("FT_TYPE with FLOW_FLAGS", Matcher { ft_type: Some(0), flags: Some(0), ..Matcher::new(mask.clone()) }, Errno::EINVAL),
        ("FT_TYPE 5", Matcher { ft_type: Some(5), ..Matcher::new(mask.clone()) }, Errno::EINVAL),
        ("FDB without switchdev", Matcher { ft_type: Some(m5::FLOW_TABLE_TYPE_FDB), ..Matcher::new(mask.clone()) }, Errno::EINVAL),
        ("flow type 4", Matcher { ty: 4, ..Matcher::new(mask.clone()) }, Errno::EOPNOTSUPP),
        ("FLOW_FLAGS beyond EGRESS", Matcher { flags: Some(1), ..Matcher::new(mask.clone()) }, Errno::EINVAL),
        ("mask longer than mlx5_ib_match_params", Matcher::new(vec![0; 641]), Errno::EINVAL),
    ];
    for (what, m, want) in &mcases {
        assert_eq!(m.create(&dev), Err(*want), "{what}");
    }
    // UVERBS_ATTR_ENUM_IN's rules (uverbs_process_attr): the element's data spec, and
    // the enum's reserved byte.
    let enum_case = |elem: u8, data: &[u8], reserved: u8| {
        let mut c = Ioctl::new(object::MLX5_FLOW_MATCHER, m5::FLOW_MATCHER_CREATE);
        c.new_handle(m5::ATTR_FLOW_MATCHER_CREATE_HANDLE);
        c.in_bytes(m5::ATTR_FLOW_MATCHER_MATCH_MASK, &mask);
        let i = c.in_enum(m5::ATTR_FLOW_MATCHER_FLOW_TYPE, elem, data);
        c.attr_mut(i).elem_reserved = reserved;
        c.in_value(m5::ATTR_FLOW_MATCHER_MATCH_CRITERIA, 1u8);
        c.run(&dev)
    };
    assert_eq!(enum_case(0, &[0], 0), Err(Errno::EINVAL), "NORMAL's priority is a u16");
    assert_eq!(enum_case(0, &[0, 0, 0], 0), Err(Errno::EINVAL), "no zero-trailing for a u16");
    assert_eq!(enum_case(1, &[0, 0], 0), Err(Errno::EINVAL), "SNIFFER has no data");
    assert_eq!(enum_case(0, &[0, 0], 1), Err(Errno::EINVAL), "enum reserved byte");
    assert_eq!(enum_case(4, &[], 0), Err(Errno::EOPNOTSUPP), "no element 4");
    let sniffer = Matcher { ty: m5::FLOW_TYPE_SNIFFER, ..Matcher::new(mask.clone()) }.create(&dev).unwrap();
    let egress = Matcher { flags: Some(f::ATTR_FLAGS_EGRESS), ..Matcher::new(mask.clone()) }.create(&dev).unwrap();
    let prio16 = Matcher { prio: 16, ..Matcher::new(mask.clone()) }.create(&dev).unwrap();
    let drop_flag = Some(m5::CREATE_FLOW_FLAGS_DROP);
    let fcases: Vec<(&str, u32, DvFlow, Errno)> = vec![
        ("QP and DROP", mt, DvFlow { value: value.clone(), qp: Some(raw), flags: drop_flag, ..Default::default() }, Errno::EINVAL),
        ("DROP and DEFAULT_MISS", mt, DvFlow { value: value.clone(), flags: Some(3), ..Default::default() }, Errno::EINVAL),
        ("an RC QP", mt, DvFlow { value: value.clone(), qp: Some(q.rc), ..Default::default() }, Errno::EINVAL),
        ("DEFAULT_MISS", mt, DvFlow { value: value.clone(), flags: Some(m5::CREATE_FLOW_FLAGS_DEFAULT_MISS), ..Default::default() }, Errno::EOPNOTSUPP),
        ("a PD as flow action", mt, DvFlow { value: value.clone(), qp: Some(raw), actions: Some(0u32.to_ne_bytes().to_vec()), ..Default::default() }, Errno::EINVAL),
        ("a PD as DevX counter", mt, DvFlow { value: value.clone(), qp: Some(raw), counters: Some(0u32.to_ne_bytes().to_vec()), ..Default::default() }, Errno::EINVAL),
        // UVERBS_ATTR_IDRS_ARR's rules: whole u32 handles, 1..=1 of them.
        ("a counters array of 6 bytes", mt, DvFlow { value: value.clone(), qp: Some(raw), counters: Some(vec![0; 6]), ..Default::default() }, Errno::EINVAL),
        ("an empty counters array", mt, DvFlow { value: value.clone(), qp: Some(raw), counters: Some(vec![]), ..Default::default() }, Errno::EINVAL),
        ("two DevX counters", mt, DvFlow { value: value.clone(), qp: Some(raw), counters: Some(vec![0; 8]), ..Default::default() }, Errno::EINVAL),
        ("tag of 25 bits", mt, DvFlow { value: value.clone(), qp: Some(raw), tag: Some(1 << 24), ..Default::default() }, Errno::EINVAL),
        ("sniffer matcher", sniffer, DvFlow { value: value.clone(), qp: Some(raw), ..Default::default() }, Errno::EOPNOTSUPP),
        ("priority 16", prio16, DvFlow { value: value.clone(), qp: Some(raw), ..Default::default() }, Errno::ENOMEM),
        ("QP into NIC TX", egress, DvFlow { value: value.clone(), qp: Some(raw), ..Default::default() }, Errno::EINVAL),
        ("no NIC TX namespace", egress, DvFlow { value: value.clone(), flags: drop_flag, ..Default::default() }, Errno::EOPNOTSUPP),
        ("value outside the mask", mt, DvFlow { value: outer(0x0800, 17, 5000).into_iter().chain([1]).collect(), qp: Some(raw), ..Default::default() }, Errno::EINVAL),
    ];
    for (what, matcher, fl, want) in &fcases {
        assert_eq!(fl.create(&dev, *matcher), Err(*want), "{what}");
        assert!(nothing_installed(&h), "{what}: steering objects left");
    }
    // A flow to the QP with a tag; another port drops.
    let fq = DvFlow { value: value.clone(), qp: Some(raw), tag: Some(0x77), ..Default::default() }.create(&dev, mt).unwrap();
    let fd = DvFlow { value: outer(0x0800, 17, 5001), flags: drop_flag, ..Default::default() }.create(&dev, mt).unwrap();
    let mac = [0x02, 0, 0, 0, 0, 0x11];
    let Verdict::Deliver { dest: Dest::Tir(_), flow_tag: 0x77 } = steer.classify(0, &udp_frame(mac, [10, 0, 0, 1], 5000))
        else { panic!("{:?}", steer.classify(0, &udp_frame(mac, [10, 0, 0, 1], 5000))) };
    assert_eq!(steer.classify(0, &udp_frame(mac, [10, 0, 0, 1], 5001)), Verdict::Drop);
    assert_eq!(steer.classify(0, &udp_frame(mac, [10, 0, 0, 1], 5002)), Verdict::Miss);
    assert_eq!(steer.counts().1, 1, "one matcher, one group");
    assert_eq!(destroy_matcher(&dev, mt), Err(Errno::EBUSY), "flows use it");
    assert_eq!(qp::destroy_qp_write(&dev, raw), Err(Errno::EBUSY));
    let mut c = Ioctl::new(object::FLOW, m5::DESTROY_FLOW);
    c.handle(m5::ATTR_CREATE_FLOW_HANDLE, fq);
    c.run(&dev).unwrap();
    destroy_flow(&dev, fd).unwrap();
    assert!(nothing_installed(&h));
    destroy_matcher(&dev, mt).unwrap();
    drop(dev);
    drop(q);
}

/// An Ethernet frame: `dmac`, a fixed source, an optional 802.1Q tag (TCI), `ethertype`,
/// then `l3`.
fn eth_frame(dmac: [u8; 6], tci: Option<u16>, ethertype: u16, l3: &[u8]) -> Vec<u8> {
    let mut b = dmac.to_vec();
    b.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x22]);
    if let Some(t) = tci {
        b.extend_from_slice(&[0x81, 0x00]);
        b.extend_from_slice(&t.to_be_bytes());
    }
    b.extend_from_slice(&ethertype.to_be_bytes());
    b.extend_from_slice(l3);
    b
}

/// An IPv4 header (RFC 791, no options) with `tos` and `proto` from 10.0.0.2 to `dst`,
/// then `l4`.
fn ipv4(tos: u8, proto: u8, dst: [u8; 4], l4: &[u8]) -> Vec<u8> {
    let len = (20 + l4.len()) as u16;
    let mut b = vec![0x45, tos];
    b.extend_from_slice(&len.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 2]);
    b.extend_from_slice(&dst);
    b.extend_from_slice(l4);
    b
}

/// An IPv6 header (RFC 8200) with next header `nh` from ::2 to `dst`, then `l4`.
fn ipv6(nh: u8, dst: [u8; 16], l4: &[u8]) -> Vec<u8> {
    let mut b = vec![0x60, 0, 0, 0];
    b.extend_from_slice(&(l4.len() as u16).to_be_bytes());
    b.extend_from_slice(&[nh, 64]);
    let mut src = [0u8; 16];
    src[15] = 2;
    b.extend_from_slice(&src);
    b.extend_from_slice(&dst);
    b.extend_from_slice(l4);
    b
}

/// A UDP header (RFC 768) to `dport` with 4 payload bytes.
fn udp(dport: u16) -> Vec<u8> {
    let mut b = vec![0x30, 0x39];
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&[0, 12, 0, 0, 1, 2, 3, 4]);
    b
}

/// A TCP header (RFC 793, no options, SYN) to `dport`.
fn tcp(dport: u16) -> Vec<u8> {
    let mut b = vec![0x30, 0x39];
    b.extend_from_slice(&dport.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    b
}

#[test]
fn spec_translations_match_the_frames_they_describe() {
    let h = hca();
    let dev = open(&h);
    let q = setup(&h, &dev);
    let Some((raw, _)) = q.raw else {
        testkit::skip(testkit::Need::Root, "RAW_PACKET QPs need CAP_NET_RAW");
        return;
    };
    let steer = h.firmware().steering();
    let mac = [0x02, 0, 0, 0, 0, 0x11];
    let v4 = [10, 0, 0, 1];
    let mut v6 = [0u8; 16];
    v6[0] = 0xfd;
    v6[15] = 1;
    let hit = |frame: &[u8]| matches!(steer.classify(0, frame), Verdict::Deliver { .. });
    let tcp_port = spec(f::SPEC_TCP, &TcpUdpFilter { dst_port: 80u16.to_be(), src_port: 0 },
                        &TcpUdpFilter { dst_port: 0xffff, src_port: 0 });
    let cases: Vec<(&str, Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<Vec<u8>>)> = vec![
        ("TCP destination port", vec![tcp_port.clone()],
         vec![eth_frame(mac, None, 0x0800, &ipv4(0, 6, v4, &tcp(80)))],
         vec![eth_frame(mac, None, 0x0800, &ipv4(0, 17, v4, &udp(80))), eth_frame(mac, None, 0x0800, &ipv4(0, 6, v4, &tcp(81)))]),
        ("IPv6 destination and UDP", vec![
            spec(f::SPEC_IPV6, &Ipv6Filter { dst_ip: v6, ..Default::default() }, &Ipv6Filter { dst_ip: [0xff; 16], ..Default::default() }),
            udp_dport(53)],
         vec![eth_frame(mac, None, 0x86dd, &ipv6(17, v6, &udp(53)))],
         vec![eth_frame(mac, None, 0x86dd, &ipv6(17, [0xfd; 16], &udp(53))), eth_frame(mac, None, 0x0800, &ipv4(0, 17, v4, &udp(53)))]),
        ("IPv4 TOS (DSCP 10, ECN 0)", vec![spec(f::SPEC_IPV4, &Ipv4Filter { tos: 0x28, ..Default::default() },
                                            &Ipv4Filter { tos: 0xff, ..Default::default() })],
         vec![eth_frame(mac, None, 0x0800, &ipv4(0x28, 17, v4, &udp(1)))],
         vec![eth_frame(mac, None, 0x0800, &ipv4(0x29, 17, v4, &udp(1))), eth_frame(mac, None, 0x0800, &ipv4(0, 17, v4, &udp(1)))]),
        ("VLAN id and destination MAC", vec![spec(f::SPEC_ETH,
            &EthFilter { dst_mac: mac, vlan_tag: 100u16.to_be(), ..Default::default() },
            &EthFilter { dst_mac: [0xff; 6], vlan_tag: 0x0fffu16.to_be(), ..Default::default() })],
         vec![eth_frame(mac, Some(100), 0x0800, &ipv4(0, 17, v4, &udp(1))), eth_frame(mac, Some(0x6000 | 100), 0x0800, &ipv4(0, 17, v4, &udp(1)))],
         vec![eth_frame(mac, Some(101), 0x0800, &ipv4(0, 17, v4, &udp(1))), eth_frame(mac, None, 0x0800, &ipv4(0, 17, v4, &udp(1)))]),
        ("ethertype with an IPv4 spec", vec![
            spec(f::SPEC_ETH, &EthFilter { ether_type: 0x0800u16.to_be(), ..Default::default() }, &EthFilter { ether_type: 0xffff, ..Default::default() }),
            ipv4_dst(v4)],
         vec![eth_frame(mac, None, 0x0800, &ipv4(0, 1, v4, &[8, 0, 0, 0]))],
         vec![eth_frame(mac, None, 0x0800, &ipv4(0, 1, [10, 0, 0, 9], &[8, 0, 0, 0]))]),
    ];
    for (what, specs, yes, no) in &cases {
        let fl = Flow::new(raw, specs).run(&dev).unwrap_or_else(|e| panic!("{what}: {e}"));
        for fr in yes {
            assert!(hit(fr), "{what}: {:?} for {fr:02x?}", steer.classify(0, fr));
        }
        for fr in no {
            assert!(!hit(fr), "{what}: delivered {fr:02x?}");
        }
        destroy_flow(&dev, fl).unwrap();
        assert!(nothing_installed(&h), "{what}");
    }
    // MC_DEFAULT takes multicast destinations only; ALL_DEFAULT unicast too.
    let mc = [0x01, 0, 0x5e, 0, 0, 1];
    let frame = |d: [u8; 6]| eth_frame(d, None, 0x0800, &ipv4(0, 17, v4, &udp(1)));
    let f1 = Flow::new(raw, &[]).with(|f| f.cmd.flow_attr.ty = f::ATTR_MC_DEFAULT).run(&dev).unwrap();
    assert!(hit(&frame(mc)) && !hit(&frame(mac)));
    destroy_flow(&dev, f1).unwrap();
    let f2 = Flow::new(raw, &[]).with(|f| f.cmd.flow_attr.ty = f::ATTR_ALL_DEFAULT).run(&dev).unwrap();
    assert!(hit(&frame(mc)) && hit(&frame(mac)));
    // A bypass flow comes before the leftovers: a drop of that unicast MAC wins.
    let d = Flow::new(raw, &[spec(f::SPEC_ETH, &EthFilter { dst_mac: mac, ..Default::default() },
                                  &EthFilter { dst_mac: [0xff; 6], ..Default::default() }),
                             action(f::SPEC_ACTION_DROP, 8, 0)]).run(&dev).unwrap();
    assert_eq!(steer.classify(0, &frame(mac)), Verdict::Drop);
    destroy_flow(&dev, d).unwrap();
    destroy_flow(&dev, f2).unwrap();
    assert!(nothing_installed(&h));
    drop(dev);
    drop(q);
}
