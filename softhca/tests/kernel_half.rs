//! softhca's kernel half driven through `uverbs::Device` exactly as a provider would:
//! typed commands from `uverbs::cmd` with the mlx5 driver data libmlx5 sends, on both the
//! ioctl and the write() paths, then mmap of the device pages, destroys in and out of
//! order, and close with live objects.

mod common;
use common::{hca, Buf};

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use softhca::objects::{Kind, QpState};
use softhca::config::IP_GID_INDEX;
use softhca::Hca;
use uverbs::cmd::{context, cq, mr, pd, port, qp};
use uverbs::ioctl::Ioctl;
use uverbs::sys::ids::{mlx5 as mlx5_ids, object};
use uverbs::sys::mlx5::{self as mlx5, AllocUcontextReqV2, AllocUcontextResp, CreateCq, CreateQp, CreateQpResp};
use uverbs::sys::verbs::{GID_TYPE_ROCE_V2, qp_attr, qp_state, ExModifyQp, ModifyQp, QpCap, QpDest, ACCESS_LOCAL_WRITE,
                         ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE, QPT_RC, QPT_UD};
use uverbs::Device;
use zerocopy::{FromBytes, IntoBytes};


#[test]
fn default_instance_is_shared() {
    let a = softhca::default_hca().unwrap();
    let b = softhca::default_hca().unwrap();
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(a.socket().local_addr().unwrap().ip(), a.config().addr);
    assert_eq!(a.socket().local_addr().unwrap().port(), 4791);
    assert_eq!(a.config().name, "softhca0");
}

fn open(h: &Arc<Hca>) -> Device {
    Device::from_endpoint(Box::new(h.open()), "softhca0")
}

/// libmlx5's request: 16 bfregs, 4 low latency, CQE version 1, 4K and dynamic UARs.
fn ctx_req(devx: bool, dyn_uar: bool) -> AllocUcontextReqV2 {
    AllocUcontextReqV2 {
        total_num_bfregs: 16,
        num_low_latency_bfregs: 4,
        flags: if devx { mlx5::ALLOC_UCTX_DEVX } else { 0 },
        max_cqe_version: 1,
        lib_caps: mlx5::LIB_CAP_4K_UAR | if dyn_uar { mlx5::LIB_CAP_DYN_UAR } else { 0 },
        ..Default::default()
    }
}

/// Opens the context over ioctl as libmlx5 44 does: with the DevX flag, which a device
/// with `log_max_uctx` accepts.
fn get_context(dev: &Device, dyn_uar: bool) -> AllocUcontextResp {
    let mut resp = AllocUcontextResp::default();
    let info = context::get_context_ioctl(dev, ctx_req(true, dyn_uar).as_bytes(), resp.as_mut_bytes()).unwrap();
    assert!(info.num_comp_vectors >= 1);
    assert_eq!(info.core_support, 1);
    resp
}

/// Allocates a dynamic UAR through `MLX5_IB_METHOD_UAR_OBJ_ALLOC`: (handle, mmap offset,
/// length, page id).
fn uar_alloc(dev: &Device, ty: u32) -> uverbs::Result<(u32, u64, u32, u32)> {
    let (mut off, mut len, mut page) = (0u64, 0u32, 0u32);
    let mut c = Ioctl::new(object::MLX5_UAR, mlx5_ids::UAR_OBJ_ALLOC);
    let h = c.new_handle(mlx5_ids::ATTR_UAR_OBJ_ALLOC_HANDLE);
    c.in_const(mlx5_ids::ATTR_UAR_OBJ_ALLOC_TYPE, ty as u64);
    c.out_struct(mlx5_ids::ATTR_UAR_OBJ_ALLOC_MMAP_OFFSET, &mut off);
    c.out_struct(mlx5_ids::ATTR_UAR_OBJ_ALLOC_MMAP_LENGTH, &mut len);
    c.out_struct(mlx5_ids::ATTR_UAR_OBJ_ALLOC_PAGE_ID, &mut page);
    c.run(dev)?;
    let handle = c.handle_out(h);
    Ok((handle, off, len, page))
}

fn uar_destroy(dev: &Device, handle: u32) -> uverbs::Result<()> {
    let mut c = Ioctl::new(object::MLX5_UAR, mlx5_ids::UAR_OBJ_DESTROY);
    c.handle(mlx5_ids::ATTR_UAR_OBJ_DESTROY_HANDLE, handle);
    c.run(dev)
}

/// A CQ's user memory and driver data, as libmlx5 builds them.
struct CqMem {
    ring: Buf,
    db: Buf,
    cmd: CreateCq,
}

fn cq_mem(ncqe: u32, uar_page: Option<u32>) -> CqMem {
    let ring = Buf::new((ncqe as usize * 64).max(4096));
    let db = Buf::new(4096);
    let cmd = CreateCq {
        buf_addr: ring.addr(),
        db_addr: db.addr() + 0x40,
        cqe_size: 64,
        flags: if uar_page.is_some() { mlx5::CREATE_CQ_FLAGS_UAR_PAGE_INDEX } else { 0 },
        uar_page_index: uar_page.unwrap_or(0) as u16,
        ..Default::default()
    };
    CqMem { ring, db, cmd }
}

/// A QP's user memory and driver data: 1 send WQEBB per WR, 16-byte receive WQEs.
struct QpMem {
    _buf: Buf,
    _db: Buf,
    cmd: CreateQp,
}

fn qp_mem(send_wr: u32, recv_wr: u32, uidx: u32, uar_page: Option<u32>) -> QpMem {
    let rq_cnt = if recv_wr == 0 { 0 } else { recv_wr.next_power_of_two() };
    let sq_cnt = send_wr.next_power_of_two() * 4;
    let buf = Buf::new(((rq_cnt as usize) << 4) + sq_cnt as usize * 64 + 4096);
    let db = Buf::new(4096);
    let cmd = CreateQp {
        buf_addr: buf.addr(),
        db_addr: db.addr() + 0x80,
        sq_wqe_count: sq_cnt,
        rq_wqe_count: rq_cnt,
        rq_wqe_shift: if recv_wr == 0 { 0 } else { 4 },
        flags: mlx5::QP_FLAG_SCATTER_CQE | if uar_page.is_some() { mlx5::QP_FLAG_UAR_PAGE_INDEX } else { 0 },
        uidx,
        bfreg_index: uar_page.unwrap_or(0),
        ..Default::default()
    };
    QpMem { _buf: buf, _db: db, cmd }
}

fn rc_args(pd: u32, scq: u32, rcq: u32) -> qp::QpArgs {
    qp::QpArgs {
        pd, send_cq: scq, recv_cq: rcq, qp_type: QPT_RC, user_handle: 0x1234,
        cap: QpCap { max_send_wr: 4, max_recv_wr: 8, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 60 },
        ..Default::default()
    }
}

#[test]
fn context_over_ioctl_and_write() {
    let h = hca();
    let dev = open(&h);
    // Nothing works before the context.
    assert_eq!(port::query_port_ioctl(&dev, 1).unwrap_err(), Errno::EINVAL);
    assert_eq!(pd::alloc_pd(&dev, &mut [0; 4]).unwrap_err(), Errno::EINVAL);
    assert_eq!(pd::dealloc_pd_write(&dev, 0).unwrap_err(), Errno::ENOENT);
    assert_eq!(context::alloc_async_fd(&dev).unwrap_err(), Errno::EINVAL);
    assert_eq!(dev.mmap(4096, libc::PROT_WRITE, 0x90_0000).unwrap_err(), Errno::EINVAL);

    let r = get_context(&dev, true);
    assert_eq!(r.response_length, 72);
    assert_eq!((r.cqe_version, r.tot_bfregs, r.num_dyn_bfregs), (1, 0, 0), "dynamic UARs");
    assert_eq!((r.bf_reg_size, r.cache_line_size, r.num_ports), (512, 64, 1));
    assert_eq!((r.max_sq_desc_sz, r.max_rq_desc_sz, r.max_send_wqebb), (1024, 512, 32768));
    assert_eq!(r.comp_mask, mlx5::RESP_MASK_CORE_CLOCK_OFFSET | mlx5::RESP_MASK_DUMP_FILL_MKEY);
    assert_eq!(r.dump_fill_mkey, h.dump_fill_mkey());
    assert_eq!((r.cmds_supp_uhw, r.eth_min_inline, r.clock_info_versions), (3, 1, 1));
    assert_eq!((r.log_uar_size, r.num_uars_per_page, r.hca_core_clock_offset), (12, 1, 0));
    // A second context is refused on both paths.
    let mut again = AllocUcontextResp::default();
    assert_eq!(context::get_context_ioctl(&dev, ctx_req(false, true).as_bytes(), again.as_mut_bytes()).unwrap_err(),
               Errno::EINVAL);
    assert_eq!(context::get_context_write(&dev, ctx_req(false, true).as_bytes(), again.as_mut_bytes()).unwrap_err(),
               Errno::EINVAL);
    // The ioctl path makes no async fd; ASYNC_EVENT_ALLOC does, more than once.
    let a1 = context::alloc_async_fd(&dev).unwrap();
    let a2 = context::alloc_async_fd(&dev).unwrap();
    assert_ne!(a1.as_raw_fd(), a2.as_raw_fd());
    assert_eq!(h.live_of(Kind::AsyncEventFile), 2);
    nix::fcntl::fcntl(a1.as_raw_fd(), nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK)).unwrap();
    let mut ev = [0u8; 16];
    assert_eq!(nix::unistd::read(a1.as_raw_fd(), &mut ev).unwrap_err(), Errno::EAGAIN);

    // The write path: GET_CONTEXT returns the async fd with the core response.
    let dev2 = open(&h);
    let mut r2 = AllocUcontextResp::default();
    let (core, fd) = context::get_context_write(&dev2, ctx_req(false, false).as_bytes(), r2.as_mut_bytes()).unwrap();
    assert_eq!(core.async_fd as i32, fd.as_raw_fd());
    assert_eq!((r2.tot_bfregs, r2.num_dyn_bfregs), (16, 1024), "static UARs without DYN_UAR");
    drop(dev);
    drop(dev2);
    assert_eq!(h.live_objects(), 0);
}

#[test]
fn device_and_port_queries() {
    let h = hca();
    let dev = open(&h);
    get_context(&dev, true);
    let d = context::query_device(&dev).unwrap();
    assert_eq!((d.vendor_id, d.vendor_part_id), (0x02c9, 4119));
    assert_eq!(d.fw_ver, (16 << 32) | (35 << 16) | 1012);
    assert_eq!(d.node_guid.to_ne_bytes(), h.config().node_guid);
    assert_eq!((d.max_qp_rd_atom, d.max_qp_init_rd_atom, d.max_sge, d.max_pkeys), (16, 16, 30, 128));
    assert_eq!((d.atomic_cap, d.phys_port_cnt, d.max_cqe), (1, 1, (1 << 22) - 1));
    let mut drv = [0u8; 104];
    let x = context::query_device_ex(&dev, &mut drv).unwrap();
    assert_eq!(x.base, d);
    assert_eq!(x.response_length as usize, std::mem::size_of_val(&x));
    assert_eq!((x.hca_core_clock, x.timestamp_mask), (156_250, 0x7fff_ffff_ffff_ffff));
    let m = mlx5::QueryDeviceResp::read_from_bytes(&drv).unwrap();
    assert_eq!(m.response_length, 102);
    assert_eq!(m.flags, mlx5::QUERY_DEV_RESP_FLAGS_SCAT2CQE_DCT);

    let p = port::query_port_ioctl(&dev, 1).unwrap();
    let l = port::query_port_write(&dev, 1).unwrap();
    assert_eq!(p.legacy_resp, l);
    assert_eq!((l.state, l.max_mtu, l.active_mtu, l.link_layer, l.flags), (4, 5, 5, 2, 1));
    assert_eq!((l.gid_tbl_len, l.port_cap_flags, l.pkey_tbl_len, l.max_msg_sz), (256, 0x0401_0000, 1, 1 << 30));
    assert_eq!(port::query_port_ioctl(&dev, 2).unwrap_err(), Errno::EINVAL);
    assert_eq!(port::query_port_write(&dev, 0).unwrap_err(), Errno::EINVAL);

    let t = port::query_gid_table(&dev, 8).unwrap();
    assert_eq!(t.len(), 2, "link-local and IPv4-mapped, RoCE v2 only: {t:?}");
    let gids = h.config().gids();
    for (i, e) in t.iter().enumerate() {
        assert_eq!(e.gid_index as usize, i);
        assert_eq!((e.raw(), e.gid_type, e.port_num), (gids[i].gid, gids[i].gid_type, 1));
        assert_eq!(e.netdev_ifindex, h.config().netdev_ifindex);
        assert_eq!(port::query_gid_entry(&dev, 1, i as u32).unwrap(), *e);
    }
    assert_eq!(t[IP_GID_INDEX as usize].raw(), h.config().ip_gid());
    assert!(t.iter().all(|e| e.gid_type == GID_TYPE_ROCE_V2), "{t:?}");
    assert_eq!(port::query_gid_table(&dev, 1).unwrap_err(), Errno::EINVAL, "the table does not fit");
    assert_eq!(port::query_gid_entry(&dev, 1, 2).unwrap_err(), Errno::ENODATA);
    assert_eq!(port::query_gid_entry(&dev, 1, 256).unwrap_err(), Errno::EINVAL);
    assert_eq!(port::query_gid_entry(&dev, 2, 0).unwrap_err(), Errno::EINVAL);
}

#[test]
fn objects_lifetimes_and_qp_state_machine() {
    let h = hca();
    let dev = open(&h);
    get_context(&dev, true);
    let async_fd = context::alloc_async_fd(&dev).unwrap();
    let (_uar, _off, _len, nc_page) = uar_alloc(&dev, mlx5_ids::UAR_ALLOC_TYPE_NC).unwrap();

    let mut pdn = [0u8; 4];
    let pd0 = pd::alloc_pd(&dev, &mut pdn).unwrap();
    assert_ne!(u32::from_ne_bytes(pdn), 0);
    let mem = Buf::new(1 << 16);
    let access = ACCESS_LOCAL_WRITE | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;
    let m0 = mr::reg_mr(&dev, pd0, mem.addr(), 1 << 16, mem.addr(), access).unwrap();
    assert_eq!(m0.lkey, m0.rkey);
    let hmr = h.mr_by_key(m0.lkey).unwrap();
    assert_eq!((hmr.span.addr, hmr.span.length, hmr.span.iova, hmr.span.access), (mem.addr(), 1 << 16, mem.addr(), access));
    assert_eq!(mr::reg_mr(&dev, pd0, mem.addr(), 4096, mem.addr() + 1, 0).unwrap_err(), Errno::EINVAL);
    assert_eq!(mr::reg_mr(&dev, pd0, 0x1000, 4096, 0x1000, 0).unwrap_err(), Errno::EFAULT);
    assert_eq!(mr::reg_mr(&dev, pd0, mem.addr(), 4096, mem.addr(), ACCESS_REMOTE_WRITE).unwrap_err(), Errno::EINVAL);

    let chan = cq::create_comp_channel(&dev).unwrap();
    // CQ over ioctl with a channel and the NC UAR, CQ over write without.
    let c1 = cq_mem(16, Some(nc_page));
    let mut cqn1 = [0u8; 8];
    let a1 = cq::CqArgs { cqe: 15, user_handle: 0xc0, comp_channel: Some(chan.as_raw_fd()),
                          event_fd: Some(async_fd.as_raw_fd()), ..Default::default() };
    let (cq1, n1) = cq::create_cq_ioctl(&dev, &a1, c1.cmd.as_bytes(), &mut cqn1).unwrap();
    assert_eq!(n1, 15);
    let hcq1 = h.cq(u32::from_ne_bytes(cqn1[..4].try_into().unwrap())).unwrap();
    assert_eq!((hcq1.entries, hcq1.buf_addr, hcq1.db_addr, hcq1.uar_page, hcq1.user_handle),
               (16, c1.ring.addr(), c1.db.addr() + 0x40, nc_page, 0xc0));
    assert!(hcq1.comp_channel.is_some());
    let c2 = cq_mem(128, Some(nc_page));
    let mut cqn2 = [0u8; 8];
    let r2 = cq::create_cq_write(&dev, &cq::CqArgs { cqe: 100, ..Default::default() }, c2.cmd.as_bytes(), &mut cqn2).unwrap();
    assert_eq!(r2.cqe, 127);
    assert_eq!(h.cq(u32::from_ne_bytes(cqn2[..4].try_into().unwrap())).unwrap().entries, 128);
    // Bad CQ requests: comp vector, channel fd, driver data.
    let bad = cq::CqArgs { cqe: 1, comp_vector: 1000, ..Default::default() };
    assert_eq!(cq::create_cq_write(&dev, &bad, c2.cmd.as_bytes(), &mut [0; 8]).unwrap_err(), Errno::EINVAL);
    let bad = cq::CqArgs { cqe: 1, comp_channel: Some(async_fd.as_raw_fd()), ..Default::default() };
    assert_eq!(cq::create_cq_write(&dev, &bad, c2.cmd.as_bytes(), &mut [0; 8]).unwrap_err(), Errno::EBADF);
    let mut no_uar = c2.cmd;
    no_uar.flags = 0;
    assert_eq!(cq::create_cq_write(&dev, &cq::CqArgs { cqe: 1, ..Default::default() }, no_uar.as_bytes(), &mut [0; 8])
               .unwrap_err(), Errno::EINVAL, "a dynamic-UAR context must name the UAR");

    // QPs over ioctl, write and extended write.
    let q1m = qp_mem(4, 8, 0, Some(nc_page));
    let mut q1resp = CreateQpResp::default();
    let mut a = rc_args(pd0, cq1, r2.cq_handle);
    a.event_fd = Some(async_fd.as_raw_fd());
    let q1 = qp::create_qp_ioctl(&dev, &a, q1m.cmd.as_bytes(), q1resp.as_mut_bytes()).unwrap();
    assert_eq!(q1.cap, a.cap, "the core echoes the capabilities");
    assert_eq!(q1resp.bfreg_index, 1 << 31);
    let hq1 = h.qp(q1.qpn).unwrap();
    assert_eq!((hq1.rq_wqe_count, hq1.rq_wqe_shift, hq1.sq_wqe_count, hq1.sq_offset), (8, 4, 16, 8 << 4));
    assert_eq!((hq1.uidx, hq1.uar_page, hq1.db_addr), (0, nc_page, q1m.cmd.db_addr));
    let q2m = qp_mem(1, 0, 1, Some(nc_page));
    let mut a2 = rc_args(pd0, cq1, cq1);
    a2.cap.max_recv_wr = 0;
    let q2 = qp::create_qp_write(&dev, &a2, q2m.cmd.as_bytes(), &mut [0; 40]).unwrap();
    assert_eq!((q2.cap.max_recv_wr, q2.cap.max_recv_sge), (0, 0));
    let q3m = qp_mem(2, 2, 2, Some(nc_page));
    let mut a3 = rc_args(pd0, cq1, cq1);
    a3.qp_type = QPT_UD;
    let q3 = qp::create_qp_ex(&dev, &a3, q3m.cmd.as_bytes(), &mut [0; 40]).unwrap();
    assert!(q1.qpn != q2.qpn && q2.qpn != q3.qpn);
    let mut baduidx = q3m.cmd;
    baduidx.uidx = 0xff_ffff;
    assert_eq!(qp::create_qp_ex(&dev, &a3, baduidx.as_bytes(), &mut [0; 40]).unwrap_err(), Errno::EINVAL);

    // RESET -> INIT -> RTR -> RTS, reading back every attribute.
    let base = |mask: u32| ModifyQp { qp_handle: q1.handle, attr_mask: mask, ..Default::default() };
    let mut m = base(qp_attr::STATE | qp_attr::PKEY_INDEX | qp_attr::PORT | qp_attr::ACCESS_FLAGS);
    m.qp_state = qp_state::INIT;
    m.port_num = 1;
    m.qp_access_flags = ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC;
    let mut missing = m;
    missing.attr_mask &= !qp_attr::PKEY_INDEX;
    assert_eq!(qp::modify_qp(&dev, &missing).unwrap_err(), Errno::EINVAL);
    qp::modify_qp(&dev, &m).unwrap();
    let r = qp::query_qp(&dev, q1.handle, 0).unwrap();
    assert_eq!((r.qp_state, r.port_num, r.dest.port_num, r.dest.is_global), (qp_state::INIT, 1, 1, 1));
    assert_eq!(r.qp_access_flags, ACCESS_REMOTE_WRITE, "read/atomic wait for max_dest_rd_atomic, as mlx5");
    assert_eq!((r.max_recv_wr, r.max_recv_sge, r.max_send_wr, r.max_inline_data), (8, 1, 0, 0));

    let dgid = h.config().ip_gid();
    let mut m = base(qp_attr::STATE | qp_attr::AV | qp_attr::PATH_MTU | qp_attr::DEST_QPN | qp_attr::RQ_PSN
                     | qp_attr::MAX_DEST_RD_ATOMIC | qp_attr::MIN_RNR_TIMER);
    m.qp_state = qp_state::RTR;
    m.path_mtu = 3;
    m.dest_qp_num = q2.qpn;
    m.rq_psn = 0x1ab_cdef;
    m.max_dest_rd_atomic = 3;
    m.min_rnr_timer = 12;
    m.dest = QpDest { dgid, flow_label: 0x12345, sgid_index: IP_GID_INDEX, hop_limit: 64, traffic_class: 8, is_global: 1,
                      port_num: 1, ..Default::default() };
    let mut empty_gid = m;
    empty_gid.dest.sgid_index = 7;
    assert_eq!(qp::modify_qp(&dev, &empty_gid).unwrap_err(), Errno::ENODATA);
    let mut no_grh = m;
    no_grh.dest.is_global = 0;
    assert_eq!(qp::modify_qp(&dev, &no_grh).unwrap_err(), Errno::EINVAL);
    let mut big = m;
    big.max_dest_rd_atomic = 17;
    assert_eq!(qp::modify_qp(&dev, &big).unwrap_err(), Errno::EINVAL);
    qp::modify_qp(&dev, &m).unwrap();
    let r = qp::query_qp(&dev, q1.handle, 0).unwrap();
    assert_eq!((r.qp_state, r.path_mtu, r.dest_qp_num, r.rq_psn), (qp_state::RTR, 3, q2.qpn, 0xab_cdef));
    assert_eq!((r.max_dest_rd_atomic, r.min_rnr_timer), (4, 12), "rounded up to a power of two");
    assert_eq!(r.qp_access_flags, ACCESS_REMOTE_WRITE | ACCESS_REMOTE_READ | ACCESS_REMOTE_ATOMIC);
    assert_eq!((r.dest.dgid, r.dest.flow_label, r.dest.sgid_index, r.dest.hop_limit, r.dest.traffic_class),
               (dgid, 0x12345, IP_GID_INDEX, 64, 8));

    let mut m = base(qp_attr::STATE | qp_attr::TIMEOUT | qp_attr::RETRY_CNT | qp_attr::RNR_RETRY
                     | qp_attr::SQ_PSN | qp_attr::MAX_QP_RD_ATOMIC);
    m.qp_state = qp_state::RTS;
    m.timeout = 14;
    m.retry_cnt = 7;
    m.rnr_retry = 9;
    m.sq_psn = 0xffff_fffe;
    m.max_rd_atomic = 1;
    qp::modify_qp(&dev, &m).unwrap();
    let r = qp::query_qp(&dev, q1.handle, 0).unwrap();
    assert_eq!((r.qp_state, r.timeout, r.retry_cnt, r.rnr_retry, r.sq_psn, r.max_rd_atomic),
               (qp_state::RTS, 14, 7, 1, 0xff_fffe, 1));
    assert_eq!(hq1.state(), QpState::Rts);
    assert_eq!(hq1.attrs().av.dgid, dgid);
    // mlx5 has no firmware command for RTS->SQD; RTS->RTR is not a transition at all.
    let mut sqd = base(qp_attr::STATE);
    sqd.qp_state = qp_state::SQD;
    assert_eq!(qp::modify_qp(&dev, &sqd).unwrap_err(), Errno::EINVAL);
    let mut back = base(qp_attr::STATE);
    back.qp_state = qp_state::RTR;
    assert_eq!(qp::modify_qp(&dev, &back).unwrap_err(), Errno::EINVAL);
    // Extended modify: RTS->RTS with CUR_STATE, response {0, 8}.
    let mut ex = ExModifyQp { base: base(qp_attr::STATE | qp_attr::CUR_STATE | qp_attr::MIN_RNR_TIMER), ..Default::default() };
    ex.base.qp_state = qp_state::RTS;
    ex.base.cur_qp_state = qp_state::RTS;
    ex.base.min_rnr_timer = 40;
    let er = qp::modify_qp_ex(&dev, &ex, &[], &mut []).unwrap();
    assert_eq!((er.comp_mask, er.response_length), (0, 8));
    assert_eq!(qp::query_qp(&dev, q1.handle, 0).unwrap().min_rnr_timer, 40 & 0x1f);

    // Destroys out of order are refused while in use.
    assert_eq!(pd::dealloc_pd_write(&dev, pd0).unwrap_err(), Errno::EBUSY);
    assert_eq!(cq::destroy_cq_ioctl(&dev, cq1).unwrap_err(), Errno::EBUSY);
    assert_eq!(pd::destroy_pd_ioctl(&dev, cq1).unwrap_err(), Errno::EINVAL, "a CQ handle is not a PD");
    assert_eq!(qp::destroy_qp_ioctl(&dev, q1.handle).unwrap(), 0);
    assert_eq!(qp::destroy_qp_ioctl(&dev, q1.handle).unwrap_err(), Errno::ENOENT);
    assert!(h.qp(q1.qpn).is_none());
    assert_eq!(qp::destroy_qp_write(&dev, q2.handle).unwrap(), 0);
    assert_eq!(qp::destroy_qp_write(&dev, q3.handle).unwrap(), 0);
    assert_eq!(cq::destroy_cq_ioctl(&dev, cq1).unwrap(), uverbs::sys::verbs::DestroyCqResp::default());
    assert_eq!(cq::destroy_cq_write(&dev, r2.cq_handle).unwrap(), Default::default());
    assert_eq!(pd::dealloc_pd_write(&dev, pd0).unwrap_err(), Errno::EBUSY, "the MR still uses it");
    mr::destroy_mr_ioctl(&dev, m0.mr_handle).unwrap();
    assert!(h.mr_by_key(m0.lkey).is_none());
    assert_eq!(mr::dereg_mr_write(&dev, m0.mr_handle).unwrap_err(), Errno::ENOENT);
    pd::destroy_pd_ioctl(&dev, pd0).unwrap();
    // Freed handles are reused lowest first.
    assert_eq!(pd::alloc_pd(&dev, &mut pdn).unwrap(), pd0);
    drop(dev);
    drop(chan);
    // The test's own references keep objects alive, as they would the device half's.
    assert!(h.live_objects() > 0);
    drop((hq1, hcq1, hmr));
    assert_eq!(h.live_objects(), 0, "{:?}", h.live());
}

#[test]
fn mmap_of_uar_and_clock_pages() {
    let h = hca();
    let dev = open(&h);
    get_context(&dev, true);
    let (uh, off, len, page) = uar_alloc(&dev, mlx5_ids::UAR_ALLOC_TYPE_BF).unwrap();
    assert_eq!((off, len), (0x90_0000, 4096), "the first dynamic entry is command 9, index 0");
    let m = dev.mmap(4096, libc::PROT_WRITE, off).unwrap();
    // A BlueFlame write of the provider lands in the HCA's page.
    // SAFETY: `m` is a live one-page mapping of the UAR.
    unsafe { std::ptr::write_volatile(m.as_ptr().add(0x800).cast::<u64>(), 0x0a00_0000_0001_2345u64.to_be()) };
    assert_eq!(u64::from_be(h.pages().read_u64(page, 0x800)), 0x0a00_0000_0001_2345);
    h.pages().write_u64(page, 0x20, 99);
    // SAFETY: as above; the page is also readable.
    assert_eq!(unsafe { std::ptr::read_volatile(m.as_ptr().add(0x20).cast::<u64>()) }, 99);
    assert_eq!(dev.mmap(8192, libc::PROT_WRITE, off).unwrap_err(), Errno::EINVAL, "one page only");
    assert_eq!(dev.mmap(4096, libc::PROT_WRITE, 0x90_1000).unwrap_err(), Errno::EINVAL, "no such entry");
    assert_eq!(dev.mmap(4096, libc::PROT_WRITE, 0).unwrap_err(), Errno::EINVAL, "no static UARs with DYN_UAR");
    // The clock pages are read-only.
    let clock_off = mlx5::mmap_pgoff(mlx5::MMAP_CORE_CLOCK, 0) * 4096;
    let info_off = mlx5::mmap_pgoff(mlx5::MMAP_CLOCK_INFO, 0) * 4096;
    assert_eq!(dev.mmap(4096, libc::PROT_READ | libc::PROT_WRITE, clock_off).unwrap_err(), Errno::EPERM);
    let c = dev.mmap(4096, libc::PROT_READ, clock_off).unwrap();
    // SAFETY: a live read-only mapping of the clock page.
    let hi = u32::from_be(unsafe { std::ptr::read_volatile(c.as_ptr().cast::<u32>()) });
    assert!(hi > 0, "the timer runs since the epoch");
    let i = dev.mmap(4096, libc::PROT_READ, info_off).unwrap();
    // SAFETY: a live mapping of the clock info page, which holds a ClockInfo at offset 0.
    let info = unsafe { std::ptr::read_volatile(i.as_ptr().cast::<mlx5::ClockInfo>()) };
    assert_eq!((info.shift, info.mask), (23, (1 << 41) - 1));
    assert_eq!(dev.mmap(4096, libc::PROT_READ, mlx5::mmap_pgoff(mlx5::MMAP_CLOCK_INFO, 1) * 4096).unwrap_err(),
               Errno::EOPNOTSUPP);
    assert_eq!(dev.mmap(4096, libc::PROT_READ, mlx5::mmap_pgoff(1, 0) * 4096).unwrap_err(), Errno::ENOSYS);
    uar_destroy(&dev, uh).unwrap();
    assert_eq!(uar_destroy(&dev, uh).unwrap_err(), Errno::ENOENT);
    drop((m, c, i));

    // A context with static UARs maps them by index.
    let dev2 = open(&h);
    let mut r = AllocUcontextResp::default();
    context::get_context_ioctl(&dev2, ctx_req(false, false).as_bytes(), r.as_mut_bytes()).unwrap();
    assert_eq!(r.tot_bfregs, 16);
    let maps: Vec<_> = (0..8).map(|i| dev2.mmap(4096, libc::PROT_WRITE, i * 4096).unwrap()).collect();
    assert_eq!(dev2.mmap(4096, libc::PROT_WRITE, 8 * 4096).unwrap_err(), Errno::EINVAL);
    assert_eq!(uar_alloc(&dev2, 5).unwrap_err(), Errno::EOPNOTSUPP);
    // QPs there get a bfreg from the driver: the low-latency ones first.
    let async_fd = context::alloc_async_fd(&dev2).unwrap();
    let pdh = pd::alloc_pd(&dev2, &mut [0; 4]).unwrap();
    let cqm = cq_mem(4, None);
    let (cqh, _) = cq::create_cq_ioctl(&dev2, &cq::CqArgs { cqe: 3, ..Default::default() }, cqm.cmd.as_bytes(), &mut [0; 8]).unwrap();
    let qm = qp_mem(1, 1, 0, None);
    let mut resp = CreateQpResp::default();
    let mut a = rc_args(pdh, cqh, cqh);
    a.event_fd = Some(async_fd.as_raw_fd());
    let q = qp::create_qp_ioctl(&dev2, &a, qm.cmd.as_bytes(), resp.as_mut_bytes()).unwrap();
    assert_eq!(resp.bfreg_index, 24, "bfreg 12 in libmlx5's numbering (4 per UAR)");
    // bfreg 12 lives in static page 12 / 2 = 6: what the application writes through its
    // mapping of that page is what the HCA sees on the QP's UAR page.
    // SAFETY: `maps[6]` is a live one-page mapping.
    unsafe { std::ptr::write_volatile(maps[6].as_ptr().add(0x800).cast::<u64>(), 0x77) };
    assert_eq!(h.pages().read_u64(h.qp(q.qpn).unwrap().uar_page, 0x800), 0x77);
    drop(maps);
    drop(dev2);
    drop(dev);
    assert_eq!(h.live_objects(), 0, "{:?}", h.live());
    assert_eq!(h.pages().in_use(), 0);
}

#[test]
fn dmabuf_registration_errors() {
    let h = hca();
    let dev = open(&h);
    get_context(&dev, true);
    let p = pd::alloc_pd(&dev, &mut [0; 4]).unwrap();
    assert_eq!(mr::reg_dmabuf_mr(&dev, p, 0, 4096, 0, 999_999, ACCESS_LOCAL_WRITE).unwrap_err(), Errno::EBADF);
    let memfd: OwnedFd = nix::sys::memfd::memfd_create(c"plain", nix::sys::memfd::MemFdCreateFlag::empty()).unwrap();
    assert_eq!(mr::reg_dmabuf_mr(&dev, p, 0, 4096, 0, memfd.as_raw_fd(), ACCESS_LOCAL_WRITE).unwrap_err(), Errno::EINVAL);
    assert_eq!(mr::reg_dmabuf_mr(&dev, p, 0, 4096, 1, memfd.as_raw_fd(), 0).unwrap_err(), Errno::EINVAL, "page offsets differ");
    assert_eq!(mr::reg_dmabuf_mr(&dev, p + 7, 0, 4096, 0, memfd.as_raw_fd(), 0).unwrap_err(), Errno::ENOENT);
    assert_eq!(mr::reg_dmabuf_mr(&dev, p, 0, 4096, 0, memfd.as_raw_fd(), ACCESS_REMOTE_WRITE).unwrap_err(), Errno::EINVAL);
    // The success path needs a real dma-buf: no machine here has udmabuf, so it runs in
    // the rxe guest with vgem buffers (gdr/tests/vgem_dmabuf.rs: every operation on a
    // dma-buf MR; conformance's dmabuf rows: the registration rules against the kernel),
    // and here through a memfd taken as a dma-buf (tests/peer_memory.rs).
}

#[test]
fn close_with_live_objects_destroys_everything() {
    let h = hca();
    let before = h.live_objects();
    {
        let dev = open(&h);
        get_context(&dev, true);
        let async_fd = context::alloc_async_fd(&dev).unwrap();
        let (_, off, _, page) = uar_alloc(&dev, mlx5_ids::UAR_ALLOC_TYPE_NC).unwrap();
        let _map = dev.mmap(4096, libc::PROT_WRITE, off).unwrap();
        let chan = cq::create_comp_channel(&dev).unwrap();
        let mut keep = Vec::new();
        for i in 0..3u32 {
            let pdh = pd::alloc_pd(&dev, &mut [0; 4]).unwrap();
            let mem = Buf::new(8192);
            mr::reg_mr(&dev, pdh, mem.addr(), 8192, mem.addr(), ACCESS_LOCAL_WRITE).unwrap();
            let c = cq_mem(8, Some(page));
            let a = cq::CqArgs { cqe: 7, comp_channel: Some(chan.as_raw_fd()), ..Default::default() };
            let (cqh, _) = cq::create_cq_ioctl(&dev, &a, c.cmd.as_bytes(), &mut [0; 8]).unwrap();
            let q = qp_mem(2, 2, i, Some(page));
            let mut qa = rc_args(pdh, cqh, cqh);
            qa.event_fd = Some(async_fd.as_raw_fd());
            qp::create_qp_ioctl(&dev, &qa, q.cmd.as_bytes(), &mut [0; 40]).unwrap();
            keep.push((mem, c, q));
        }
        assert_eq!(h.qps().len(), 3);
        assert_eq!(h.cqs().len(), 3);
        assert!(h.live_objects() > before);
        drop(dev);
        assert!(h.qps().is_empty() && h.cqs().is_empty());
        // The application's channel fd outlives the uverbs file and then reads EOF.
        let mut b = [0u8; 8];
        assert_eq!(nix::unistd::read(chan.as_raw_fd(), &mut b), Ok(0));
    }
    assert_eq!(h.live_objects(), 0, "{:?}", h.live());
    assert_eq!(h.pages().in_use(), 0);
}

#[test]
fn completion_channel_delivers_records() {
    let h = hca();
    let dev = open(&h);
    get_context(&dev, true);
    let chan = cq::create_comp_channel(&dev).unwrap();
    let (_, _, _, page) = uar_alloc(&dev, mlx5_ids::UAR_ALLOC_TYPE_NC).unwrap();
    let c = cq_mem(2, Some(page));
    let mut cqn = [0u8; 8];
    let a = cq::CqArgs { cqe: 1, user_handle: 0xfeed, comp_channel: Some(chan.as_raw_fd()), ..Default::default() };
    cq::create_cq_ioctl(&dev, &a, c.cmd.as_bytes(), &mut cqn).unwrap();
    let hcq = h.cq(u32::from_ne_bytes(cqn[..4].try_into().unwrap())).unwrap();
    assert!(hcq.comp_channel.as_ref().unwrap().notify(hcq.user_handle));
    let mut rec = [0u8; 8];
    assert_eq!(nix::unistd::read(chan.as_raw_fd(), &mut rec), Ok(8));
    assert_eq!(u64::from_ne_bytes(rec), 0xfeed);
    // The application's end is read-only.
    assert!(nix::unistd::write(&chan, &[0u8; 8]).is_err());
}

#[test]
fn modify_qp_rules() {
    let h = hca();
    let dev = open(&h);
    get_context(&dev, true);
    let (_, _, _, page) = uar_alloc(&dev, mlx5_ids::UAR_ALLOC_TYPE_NC).unwrap();
    let p = pd::alloc_pd(&dev, &mut [0; 4]).unwrap();
    let c = cq_mem(4, Some(page));
    let (cqh, _) = cq::create_cq_ioctl(&dev, &cq::CqArgs { cqe: 3, ..Default::default() }, c.cmd.as_bytes(), &mut [0; 8]).unwrap();
    let qm = qp_mem(1, 1, 0, Some(page));
    let q = qp::create_qp_write(&dev, &rc_args(p, cqh, cqh), qm.cmd.as_bytes(), &mut [0; 40]).unwrap();
    let um = qp_mem(1, 1, 1, Some(page));
    let mut ua = rc_args(p, cqh, cqh);
    ua.qp_type = QPT_UD;
    let ud = qp::create_qp_write(&dev, &ua, um.cmd.as_bytes(), &mut [0; 40]).unwrap();
    let m = |mask: u32, f: &dyn Fn(&mut ModifyQp)| {
        let mut c = ModifyQp { qp_handle: q.handle, attr_mask: mask, ..Default::default() };
        f(&mut c);
        qp::modify_qp(&dev, &c)
    };
    use qp_attr::*;
    let init = STATE | PKEY_INDEX | PORT | ACCESS_FLAGS;
    let to_init = |c: &mut ModifyQp| { c.qp_state = qp_state::INIT; c.port_num = 1; };
    assert_eq!(m(init, &|c| { to_init(c); c.port_num = 2 }), Err(Errno::EINVAL), "port 2");
    assert_eq!(m(init, &|c| { to_init(c); c.port_num = 0 }), Err(Errno::EINVAL), "port 0");
    assert_eq!(m(init | QKEY, &to_init), Err(Errno::EINVAL), "QKEY is not an RC attribute");
    assert_eq!(m(init, &|c| { to_init(c); c.pkey_index = 128 }), Err(Errno::EINVAL), "mlx5's P_Key table");
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::RTR), Err(Errno::EINVAL), "RESET->RTR");
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::ERR), Err(Errno::EINVAL), "RESET->ERR");
    assert_eq!(m(STATE, &|c| c.qp_state = 8), Err(Errno::EINVAL), "state 8");
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::RESET), Ok(()));
    assert_eq!(m(0, &|_| ()), Ok(()), "empty mask in RESET");
    assert_eq!(m(1 << 21, &|_| ()), Err(Errno::EOPNOTSUPP), "beyond the standard bits");
    assert_eq!(m(RATE_LIMIT, &|_| ()), Err(Errno::EOPNOTSUPP), "RATE_LIMIT needs EX_MODIFY_QP");
    let bad = ModifyQp { qp_handle: 999, attr_mask: STATE, ..Default::default() };
    assert_eq!(qp::modify_qp(&dev, &bad), Err(Errno::ENOENT));
    // The legacy command carries no driver data: zeros after the struct are fine.
    let c0 = ModifyQp { qp_handle: q.handle, ..Default::default() };
    let mut bytes = c0.as_bytes().to_vec();
    bytes.extend_from_slice(&[0; 8]);
    uverbs::write::WriteCmd::new(26, &bytes, &mut []).run_legacy(&dev).unwrap();
    bytes[115] = 1;
    assert_eq!(uverbs::write::WriteCmd::new(26, &bytes, &mut []).run_legacy(&dev), Err(Errno::EOPNOTSUPP));
    m(init, &|c| { to_init(c); c.pkey_index = 5; c.qp_access_flags = 1 << 20 }).unwrap();
    assert_eq!(m(ACCESS_FLAGS, &|c| c.qp_access_flags = ACCESS_REMOTE_WRITE), Ok(()), "implicit INIT->INIT");
    assert_eq!(m(STATE | CUR_STATE, &|c| { c.qp_state = qp_state::INIT; c.cur_qp_state = qp_state::INIT }),
               Err(Errno::EINVAL), "CUR_STATE from INIT");
    let rtr = STATE | AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    let gid = h.config().ip_gid();
    let to_rtr = move |c: &mut ModifyQp| {
        c.qp_state = qp_state::RTR;
        c.path_mtu = 5;
        c.max_dest_rd_atomic = 1;
        c.dest = QpDest { dgid: gid, sgid_index: IP_GID_INDEX, hop_limit: 1, is_global: 1, port_num: 1, ..Default::default() };
    };
    assert_eq!(m(rtr & !MIN_RNR_TIMER, &to_rtr), Err(Errno::EINVAL), "missing MIN_RNR_TIMER");
    assert_eq!(m(rtr | PORT, &|c| { to_rtr(c); c.port_num = 1 }), Err(Errno::EINVAL), "PORT in INIT->RTR");
    assert_eq!(m(rtr, &|c| { to_rtr(c); c.dest.port_num = 2 }), Err(Errno::EINVAL), "dest port 2");
    assert_eq!(m(rtr, &|c| { to_rtr(c); c.path_mtu = 6 }), Err(Errno::EINVAL), "MTU 6");
    assert_eq!(m(rtr, &|c| { to_rtr(c); c.path_mtu = 0 }), Err(Errno::EINVAL), "mlx5 refuses MTU 0");
    assert_eq!(m(rtr, &|c| { to_rtr(c); c.max_dest_rd_atomic = 200 }), Err(Errno::EINVAL));
    assert_eq!(m(rtr, &|c| { to_rtr(c); c.dest.sgid_index = 255 }), Err(Errno::ENODATA), "empty GID row");
    assert_eq!(m(rtr, &|c| { to_rtr(c); c.dest.static_rate = 1 }), Err(Errno::EINVAL), "rate 1 does not exist");
    assert_eq!(m(rtr | ALT_PATH, &to_rtr), Err(Errno::EINVAL), "no alternate path on RoCE");
    assert_eq!(m(STATE | CUR_STATE | SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
                 &|c| { c.qp_state = qp_state::RTS; c.cur_qp_state = qp_state::RTR }),
               Err(Errno::EINVAL), "the QP is in INIT, not RTR: the firmware refuses");
    assert_eq!(h.qp(q.qpn).unwrap().state(), QpState::Init);
    m(rtr, &to_rtr).unwrap();
    let rts = STATE | TIMEOUT | RETRY_CNT | RNR_RETRY | SQ_PSN | MAX_QP_RD_ATOMIC;
    assert_eq!(m(rts & !SQ_PSN, &|c| c.qp_state = qp_state::RTS), Err(Errno::EINVAL));
    assert_eq!(m(rts, &|c| { c.qp_state = qp_state::RTS; c.max_rd_atomic = 17 }), Err(Errno::EINVAL));
    m(rts, &|c| { c.qp_state = qp_state::RTS; c.timeout = 32; c.max_rd_atomic = 16 }).unwrap();
    let r = qp::query_qp(&dev, q.handle, 0xffff_ffff).unwrap();
    assert_eq!((r.timeout, r.max_rd_atomic, r.path_mtu), (0, 16, 5), "5-bit timeout field");
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::SQE), Err(Errno::EINVAL));
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::ERR), Ok(()));
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::ERR), Ok(()));
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::INIT), Err(Errno::EINVAL), "ERR->INIT");
    assert_eq!(m(STATE, &|c| c.qp_state = qp_state::RESET), Ok(()));

    // UD: QKEY at INIT, nothing at RTR, SQ_PSN at RTS; the MTU is always 4096.
    let u = |mask: u32, f: &dyn Fn(&mut ModifyQp)| {
        let mut c = ModifyQp { qp_handle: ud.handle, attr_mask: mask, ..Default::default() };
        f(&mut c);
        qp::modify_qp(&dev, &c)
    };
    let ud_init = STATE | PKEY_INDEX | PORT | QKEY;
    assert_eq!(u(ud_init & !QKEY, &|c| { c.qp_state = qp_state::INIT; c.port_num = 1 }), Err(Errno::EINVAL));
    let privileged = u(ud_init, &|c| { c.qp_state = qp_state::INIT; c.port_num = 1; c.qkey = 0x8000_0000 });
    assert_eq!(privileged, if h.cap_net_raw() { Ok(()) } else { Err(Errno::EPERM) });
    if privileged.is_err() {
        u(ud_init, &|c| { c.qp_state = qp_state::INIT; c.port_num = 1; c.qkey = 0x1111 }).unwrap();
    }
    u(STATE, &|c| c.qp_state = qp_state::RTR).unwrap();
    assert_eq!(u(STATE, &|c| c.qp_state = qp_state::RTS), Err(Errno::EINVAL), "UD RTS needs SQ_PSN");
    u(STATE | SQ_PSN, &|c| { c.qp_state = qp_state::RTS; c.sq_psn = 7 }).unwrap();
    let r = qp::query_qp(&dev, ud.handle, 0).unwrap();
    assert_eq!((r.qp_state, r.path_mtu, r.sq_psn, r.dest.port_num), (qp_state::RTS, 5, 7, 0));
    let mut ex = ExModifyQp::default();
    ex.base.qp_handle = ud.handle;
    ex.base.attr_mask = 1 << 26;
    assert_eq!(qp::modify_qp_ex(&dev, &ex, &[], &mut []).unwrap_err(), Errno::EOPNOTSUPP);
    ex.base.attr_mask = STATE | RATE_LIMIT;
    ex.base.qp_state = qp_state::RTS;
    assert_eq!(qp::modify_qp_ex(&dev, &ex, &[], &mut []).unwrap_err(), Errno::EINVAL, "RATE_LIMIT is for raw QPs");
    // mlx5 driver data of EX_MODIFY_QP: at least 12 bytes, known fields zero.
    ex.base.attr_mask = STATE;
    assert_eq!(qp::modify_qp_ex(&dev, &ex, &[0; 8], &mut []).unwrap_err(), Errno::EINVAL);
    assert_eq!(qp::modify_qp_ex(&dev, &ex, &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], &mut []).unwrap_err(),
               Errno::EOPNOTSUPP);
    qp::modify_qp_ex(&dev, &ex, &[0; 16], &mut []).unwrap();
}
