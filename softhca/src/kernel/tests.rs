//! Raw-byte tests of the kernel half's decoding rules: each case is one of the checks in
//! docs/notes/kernel-6.1-uverbs.md §1 (ioctl), §2 (write) and §3 (lifetimes), with the errno Linux 6.1 gives
//! (most were verified on rxe in the fact sheet's experiments, whose names the comments
//! repeat).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use zerocopy::IntoBytes;

use uverbs::sys::ids::{cq as cqi, device as dev, object, pd as pdi, qp as qpi, UVERBS_ATTR_UHW_IN, UVERBS_ATTR_UHW_OUT};
use uverbs::sys::ioctl::{RDMA_VERBS_IOCTL, UVERBS_ATTR_F_MANDATORY, UVERBS_ATTR_F_VALID_OUTPUT};
use uverbs::sys::mlx5::{AllocUcontextReqV2, CreateCq as Mlx5CreateCq, CreateQp as Mlx5CreateQp, LIB_CAP_DYN_UAR};
use uverbs::sys::verbs::{AhAttr, CreateAh, QpCap, QueryPortRespEx, RDMA_DRIVER_MLX5};
use uverbs::sys::{CmdHdr, ExCmdHdr, IoctlAttr, IoctlHdr};
use uverbs::Endpoint;

use crate::hca::Hca;
use crate::kernel::File;

const M: u16 = UVERBS_ATTR_F_MANDATORY;

/// A page-aligned page, for rings that must be 64-byte aligned.
#[repr(C, align(4096))]
struct Page([u8; 4096]);

/// A page that is never freed. The device half keeps reading (and, for a CQ's arm
/// mailbox, swapping) a ring or doorbell record until the object's destroy, and a test's
/// objects are destroyed when its `File` closes, which may be after a local page has
/// gone out of scope (locals drop in reverse order; on a panic, in any case): a freed
/// page there was a use after free in the engine thread (the SIGSEGV of parallel lib
/// runs). On a real machine the kernel's pin keeps such memory alive the same way.
fn page() -> &'static mut Page {
    Box::leak(Box::new(Page([0; 4096])))
}

fn a(id: u16, len: u16, flags: u16, data: u64) -> IoctlAttr {
    IoctlAttr { attr_id: id, len, flags, data, ..Default::default() }
}

/// Runs an ioctl with a header built from `attrs`; the attributes are written back.
fn ioctl(f: &File, object: u16, method: u16, attrs: &mut [IoctlAttr]) -> Result<(), Errno> {
    let hdr = IoctlHdr {
        length: (24 + 16 * attrs.len()) as u16,
        object_id: object,
        method_id: method,
        num_attrs: attrs.len() as u16,
        driver_id: RDMA_DRIVER_MLX5,
        ..Default::default()
    };
    ioctl_hdr(f, hdr, attrs)
}

fn ioctl_hdr(f: &File, hdr: IoctlHdr, attrs: &mut [IoctlAttr]) -> Result<(), Errno> {
    let mut buf = hdr.as_bytes().to_vec();
    for x in attrs.iter() {
        buf.extend_from_slice(x.as_bytes());
    }
    let r = f.ioctl(buf.as_mut_ptr() as u64);
    for (i, x) in attrs.iter_mut().enumerate() {
        let off = 24 + 16 * i;
        *x = zerocopy::FromBytes::read_from_bytes(&buf[off..off + 16]).unwrap();
    }
    r
}

fn write(f: &File, bytes: &[u8]) -> Result<usize, Errno> {
    f.write(bytes.as_ptr() as u64, bytes.len())
}

/// A legacy command: header with `in_words` for the whole write, then `body`.
fn legacy(command: u32, out_words: u16, body: &[u8]) -> Vec<u8> {
    let h = CmdHdr { command, in_words: ((8 + body.len()) / 4) as u16, out_words };
    let mut v = h.as_bytes().to_vec();
    v.extend_from_slice(body);
    v
}

fn ex(command: u32, in_words: u16, out_words: u16, ex: ExCmdHdr, body: &[u8]) -> Vec<u8> {
    let h = CmdHdr { command: command | 0x8000_0000, in_words, out_words };
    let mut v = h.as_bytes().to_vec();
    v.extend_from_slice(ex.as_bytes());
    v.extend_from_slice(body);
    v
}

/// A file with a dynamic-UAR mlx5 context made over ioctl.
fn ctx_file(h: &Arc<Hca>) -> File {
    let f = h.open();
    let req = AllocUcontextReqV2 { total_num_bfregs: 16, num_low_latency_bfregs: 4, max_cqe_version: 1,
                                   lib_caps: LIB_CAP_DYN_UAR | 1, ..Default::default() };
    let mut resp = [0u8; 72];
    let mut at = [a(UVERBS_ATTR_UHW_IN, 32, M, req.as_bytes().as_ptr() as u64),
                  a(UVERBS_ATTR_UHW_OUT, 72, M, resp.as_mut_ptr() as u64)];
    ioctl(&f, object::DEVICE, dev::GET_CONTEXT, &mut at).unwrap();
    assert_eq!(at[1].flags, M | UVERBS_ATTR_F_VALID_OUTPUT);
    f
}

fn alloc_pd(f: &File) -> Result<u32, Errno> {
    let mut out = [0u32; 2];
    let mut body = (out.as_mut_ptr() as u64).to_ne_bytes().to_vec();
    body.truncate(8);
    let cmd = legacy(3, 2, &body);
    write(f, &cmd)?;
    Ok(out[0])
}

#[test]
fn ioctl_header_rules_in_order() {
    let h = Hca::for_tests();
    let f = h.open();
    let mut resp = QueryPortRespEx::default();
    let attrs = [a(0, 8, M, 1), a(1, 48, M, &mut resp as *mut _ as u64)];
    let good = IoctlHdr { length: 56, object_id: 0, method_id: 2, num_attrs: 2, driver_id: 1, ..Default::default() };
    let run = |hdr: IoctlHdr| ioctl_hdr(&f, hdr, &mut attrs.clone());
    assert_eq!(f.ioctl_cmd(0xc018_1b02, 0), Err(Errno::ENOTTY), "wrong cmd number");
    assert_eq!(f.ioctl_cmd(RDMA_VERBS_IOCTL, 0), Err(Errno::EFAULT), "hdr pointer NULL");
    assert_eq!(run(IoctlHdr { length: 40, ..good }), Err(Errno::EINVAL), "length != 24+16*num_attrs");
    assert_eq!(run(IoctlHdr { length: 23, num_attrs: 0, ..good }), Err(Errno::EINVAL));
    let huge = IoctlHdr { length: (24 + 16 * 300u32) as u16, num_attrs: 300, ..good };
    assert_eq!(f.ioctl(&huge as *const _ as u64), Err(Errno::EINVAL), "length > PAGE_SIZE");
    assert_eq!(run(IoctlHdr { reserved1: 1, ..good }), Err(Errno::EPROTONOSUPPORT));
    assert_eq!(run(IoctlHdr { reserved2: 1, ..good }), Err(Errno::EPROTONOSUPPORT));
    assert_eq!(run(IoctlHdr { reserved2: 1, length: 40, ..good }), Err(Errno::EINVAL), "bad length beats reserved");
    assert_eq!(run(IoctlHdr { driver_id: 14, ..good }), Err(Errno::EINVAL), "rxe's driver id");
    assert_eq!(run(IoctlHdr { driver_id: 14, reserved1: 1, ..good }), Err(Errno::EPROTONOSUPPORT));
    assert_eq!(run(IoctlHdr { object_id: 0x77, ..good }), Err(Errno::EPROTONOSUPPORT), "unknown object");
    assert_eq!(run(IoctlHdr { method_id: 0x55, ..good }), Err(Errno::EPROTONOSUPPORT), "unknown method");
    assert_eq!(run(IoctlHdr { object_id: 0x77, driver_id: 14, ..good }), Err(Errno::EINVAL), "driver id first");
    assert_eq!(run(IoctlHdr { object_id: 7, method_id: 5, ..good }), Err(Errno::EPROTONOSUPPORT), "no REG_MR in 6.1");
    // Only the header is readable: the attribute array faults.
    let mut unmapped = [0u8; 24];
    unmapped.copy_from_slice(IoctlHdr { length: 40, num_attrs: 1, ..good }.as_bytes());
    // SAFETY: an anonymous 2-page mapping whose second page is made inaccessible.
    let m = unsafe { libc::mmap(std::ptr::null_mut(), 8192, libc::PROT_READ | libc::PROT_WRITE,
                                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0) } as *mut u8;
    // SAFETY: within the mapping made above.
    unsafe {
        libc::mprotect(m.add(4096).cast(), 4096, libc::PROT_NONE);
        std::ptr::copy_nonoverlapping(unmapped.as_ptr(), m.add(4096 - 24), 24);
    }
    // SAFETY: as above.
    assert_eq!(f.ioctl(unsafe { m.add(4096 - 24) } as u64), Err(Errno::EFAULT), "attr array unmapped");
    // SAFETY: unmapping the mapping made above.
    unsafe { libc::munmap(m.cast(), 8192) };
}

#[test]
fn ioctl_attribute_rules() {
    let h = Hca::for_tests();
    let f = h.open();
    // Before GET_CONTEXT.
    let mut resp = [0u8; 100];
    let r = resp.as_mut_ptr() as u64;
    let q = |attrs: &mut [IoctlAttr]| ioctl(&f, object::DEVICE, dev::QUERY_PORT, attrs);
    assert_eq!(q(&mut [a(0, 8, M, 1), a(1, 48, M, r)]), Err(Errno::EINVAL), "no context");
    assert_eq!(ioctl(&f, object::PD, pdi::DESTROY, &mut [a(0, 0, M, 0)]), Err(Errno::ENOENT), "empty table");
    assert_eq!(ioctl(&f, object::ASYNC_EVENT, 0, &mut [a(0, 0, M, 0)]), Err(Errno::EINVAL));
    drop(f);
    let f = ctx_file(&h);
    let q = |attrs: &mut [IoctlAttr]| ioctl(&f, object::DEVICE, dev::QUERY_PORT, attrs);
    assert_eq!(q(&mut [a(0, 8, M, 1), a(1, 48, M, r)]), Ok(()));
    for port in [0u64, 2, 256] {
        assert_eq!(q(&mut [a(0, 8, M, port), a(1, 48, M, r)]), Err(Errno::EINVAL), "port {port}");
    }
    assert_eq!(q(&mut [a(0, 4, M, 1), a(1, 48, M, r)]), Err(Errno::EINVAL), "CONST_IN needs 8 bytes");
    assert_eq!(q(&mut [a(0, 16, M, 1), a(1, 48, M, r)]), Err(Errno::EINVAL));
    assert_eq!(q(&mut [a(0, 8, M, 1), a(1, 47, M, r)]), Err(Errno::EINVAL));
    assert_eq!(q(&mut [a(0, 8, M, 1), a(1, 40, M, r)]), Err(Errno::EINVAL), "legacy size only");
    resp = [0xee; 100];
    let mut at = [a(0, 8, M, 1), a(1, 100, M, resp.as_mut_ptr() as u64)];
    assert_eq!(ioctl(&f, object::DEVICE, dev::QUERY_PORT, &mut at), Ok(()));
    assert_eq!(at[1].flags, M | UVERBS_ATTR_F_VALID_OUTPUT);
    assert_eq!(at[0].flags, M, "inputs are not marked");
    assert!(resp[48..].iter().all(|b| *b == 0), "zero-filled past the struct");
    let q = |attrs: &mut [IoctlAttr]| ioctl(&f, object::DEVICE, dev::QUERY_PORT, attrs);
    assert_eq!(q(&mut [a(0, 8, M, 1), a(1, 48, M, 16)]), Err(Errno::EFAULT), "bad RESP pointer");
    assert_eq!(q(&mut [a(0, 8, M, 1)]), Err(Errno::EINVAL), "missing RESP");
    assert_eq!(q(&mut [a(1, 48, M, r)]), Err(Errno::EINVAL), "missing PORT_NUM");
    assert_eq!(q(&mut [a(0, 8, M, 1), a(0, 8, M, 1), a(1, 48, M, r)]), Err(Errno::EINVAL), "duplicate");
    assert_eq!(q(&mut [a(0, 8, M, 1), a(0x99, 0, M, 0), a(1, 48, M, r)]), Err(Errno::EPROTONOSUPPORT));
    assert_eq!(q(&mut [a(0, 8, M, 1), a(0x99, 0, 0, 0), a(1, 48, M, r)]), Ok(()), "unknown optional ignored");
    assert_eq!(q(&mut [a(0, 8, M, 1), a(0x99, 0, 0x8000, 0), a(1, 48, M, r)]), Ok(()));
    assert_eq!(q(&mut [a(0, 8, 0xfffd, 1), a(1, 48, M, r)]), Ok(()), "unknown flag bits ignored");
    let mut res = a(0, 8, M, 1);
    res.elem_reserved = 1;
    assert_eq!(q(&mut [res, a(1, 48, M, r)]), Err(Errno::EINVAL), "PTR_IN reserved");
    let mut res = a(1, 48, M, r);
    res.elem_id = 1;
    assert_eq!(q(&mut [a(0, 8, M, 1), res]), Err(Errno::EINVAL), "PTR_OUT reserved");
    assert_eq!(q(&mut [a(0x99, 0, M, 0)]), Err(Errno::EPROTONOSUPPORT), "unknown mandatory beats missing");
    assert_eq!(q(&mut [a(0, 4, M, 1), a(0x99, 0, M, 0)]), Err(Errno::EINVAL), "array order");

    // GET_CONTEXT output sizes; ASYNC_EVENT_ALLOC's fd attribute.
    let mut n = 0u32;
    assert_eq!(ioctl(&f, object::DEVICE, dev::GET_CONTEXT, &mut [a(0, 2, M, &mut n as *mut u32 as u64)]),
               Err(Errno::EINVAL));
    assert_eq!(ioctl(&f, object::ASYNC_EVENT, 0, &mut [a(0, 4, M, 0)]), Err(Errno::EINVAL));
    let mut at = [a(0, 0, M, 0)];
    ioctl(&f, object::ASYNC_EVENT, 0, &mut at).unwrap();
    // SAFETY: the fd the call wrote back is ours.
    let afd = unsafe { OwnedFd::from_raw_fd(at[0].data as i32) };

    // IDR rules.
    let pd = alloc_pd(&f).unwrap();
    let d = |attrs: &mut [IoctlAttr]| ioctl(&f, object::PD, pdi::DESTROY, attrs);
    assert_eq!(d(&mut [a(0, 0, M, 1 << 33)]), Err(Errno::ENOENT), "handle above u32");
    assert_eq!(d(&mut [a(0, 0, M, u64::MAX)]), Err(Errno::EINVAL), "negative handle");
    assert_eq!(d(&mut [a(0, 4, M, pd as u64)]), Err(Errno::EINVAL), "IDR len must be 0");
    let mut res = a(0, 0, M, pd as u64);
    res.elem_id = 1;
    assert_eq!(d(&mut [res]), Err(Errno::EINVAL), "IDR reserved");

    // CQ_CREATE attribute errors, and a failed create gives its handle back. The UAR
    // page is one the device handed out (as UAR_OBJ_ALLOC would): the firmware's
    // CREATE_CQ refuses a page that is no UAR (below).
    let ring = page();
    let db = page();
    let uar = h.pages().alloc().unwrap();
    let ucmd = Mlx5CreateCq { buf_addr: ring.0.as_ptr() as u64, db_addr: db.0.as_ptr() as u64, cqe_size: 64,
                              flags: 2, uar_page_index: uar as u16, ..Default::default() };
    let mut cqe_out = 0u32;
    let mut cqn = [0u32; 2];
    let co = &mut cqe_out as *mut u32 as u64;
    let cqn_p = cqn.as_mut_ptr() as u64;
    let base = |h_len: u16, cqe_len: u16, resp_len: u16, vec: u64, flags: Option<IoctlAttr>| {
        let mut v = vec![a(cqi::ATTR_CREATE_HANDLE, h_len, M, 0), a(cqi::ATTR_CREATE_CQE, cqe_len, M, 31),
                         a(cqi::ATTR_CREATE_USER_HANDLE, 8, M, 7), a(cqi::ATTR_CREATE_COMP_VECTOR, 4, M, vec),
                         a(cqi::ATTR_CREATE_RESP_CQE, resp_len, M, co),
                         a(UVERBS_ATTR_UHW_IN, 32, M, ucmd.as_bytes().as_ptr() as u64),
                         a(UVERBS_ATTR_UHW_OUT, 8, M, cqn_p)];
        v.extend(flags);
        v
    };
    let c = |v: &mut Vec<IoctlAttr>| ioctl(&f, object::CQ, cqi::CREATE, v);
    assert_eq!(c(&mut base(4, 4, 4, 0, None)), Err(Errno::EINVAL), "HANDLE len 4");
    assert_eq!(c(&mut base(0, 8, 4, 0, None)), Err(Errno::EINVAL), "CQE is exactly a u32");
    assert_eq!(c(&mut base(0, 4, 2, 0, None)), Err(Errno::EINVAL), "RESP_CQE len 2");
    assert_eq!(c(&mut base(0, 4, 4, 77, None)), Err(Errno::EINVAL), "comp_vector 77");
    assert_eq!(c(&mut base(0, 4, 4, 0, Some(a(cqi::ATTR_CREATE_FLAGS, 4, M, 4)))), Err(Errno::EINVAL), "flag bit 2");
    assert_eq!(c(&mut base(0, 4, 4, 0, Some(a(cqi::ATTR_CREATE_COMP_CHANNEL, 0, M, 999)))), Err(Errno::EBADF));
    assert_eq!(c(&mut base(0, 4, 4, 0, Some(a(cqi::ATTR_CREATE_COMP_CHANNEL, 0, M, afd.as_raw_fd() as u64)))),
               Err(Errno::EBADF), "the async fd is not a channel");
    assert_eq!(c(&mut base(0, 4, 4, 0, Some(a(cqi::ATTR_CREATE_EVENT_FD, 0, 0, afd.as_raw_fd() as u64)))), Ok(()));
    assert_eq!(cqe_out, 31);
    let mut ok = base(0, 4, 4, 0, None);
    c(&mut ok).unwrap();
    let cq = ok[0].data as u32;
    assert_eq!(cq, pd + 2, "handles: pd, cq, cq; the failed creates gave theirs back");

    // QP_CREATE attribute errors.
    let qbuf = page();
    let qd = Mlx5CreateQp { buf_addr: qbuf.0.as_ptr() as u64, db_addr: qbuf.0.as_ptr() as u64, sq_wqe_count: 4,
                            rq_wqe_count: 4, rq_wqe_shift: 4, flags: 1 << 10, uidx: 0, bfreg_index: uar,
                            ..Default::default() };
    let cap = QpCap { max_send_wr: 1, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let mut cap24 = [0u8; 24];
    cap24[..20].copy_from_slice(cap.as_bytes());
    let (mut rcap, mut qpn, mut qresp) = ([0u8; 20], 0u32, [0u8; 40]);
    let (rcap_p, qpn_p, qresp_p) = (rcap.as_mut_ptr() as u64, &mut qpn as *mut u32 as u64, qresp.as_mut_ptr() as u64);
    let qattrs = |cap_len: u16, cap_ptr: u64, ty: u64, extra: &[IoctlAttr], skip: u16| {
        let mut v = vec![a(qpi::ATTR_CREATE_HANDLE, 0, M, 0), a(qpi::ATTR_CREATE_PD_HANDLE, 0, M, pd as u64),
                         a(qpi::ATTR_CREATE_SEND_CQ_HANDLE, 0, M, cq as u64),
                         a(qpi::ATTR_CREATE_RECV_CQ_HANDLE, 0, M, cq as u64),
                         a(qpi::ATTR_CREATE_USER_HANDLE, 8, M, 0), a(qpi::ATTR_CREATE_CAP, cap_len, M, cap_ptr),
                         a(qpi::ATTR_CREATE_TYPE, 8, M, ty),
                         a(qpi::ATTR_CREATE_RESP_CAP, 20, M, rcap_p),
                         a(qpi::ATTR_CREATE_RESP_QP_NUM, 4, M, qpn_p),
                         a(UVERBS_ATTR_UHW_IN, 56, M, qd.as_bytes().as_ptr() as u64),
                         a(UVERBS_ATTR_UHW_OUT, 40, M, qresp_p)];
        v.retain(|x| x.attr_id != skip);
        v.extend_from_slice(extra);
        v
    };
    let cp = cap24.as_ptr() as u64;
    let qc = |v: &mut Vec<IoctlAttr>| ioctl(&f, object::QP, qpi::CREATE, v);
    assert_eq!(qc(&mut qattrs(16, cp, 2, &[], 0xffff)), Err(Errno::EINVAL), "CAP shorter than the struct");
    assert_eq!(qc(&mut qattrs(20, cp, 77, &[], 0xffff)), Err(Errno::EINVAL), "type 77");
    assert_eq!(qc(&mut qattrs(20, cp, 0x10000, &[], 0xffff)), Err(Errno::EINVAL));
    assert_eq!(qc(&mut qattrs(20, cp, 2, &[a(qpi::ATTR_CREATE_FLAGS, 4, M, 1 << 31)], 0xffff)), Err(Errno::EINVAL));
    assert_eq!(qc(&mut qattrs(20, cp, 2, &[a(qpi::ATTR_CREATE_FLAGS, 4, M, 0x100)], 0xffff)), Err(Errno::EINVAL),
               "SCATTER_FCS on RC");
    assert_eq!(qc(&mut qattrs(20, cp, 2, &[], qpi::ATTR_CREATE_RECV_CQ_HANDLE)), Err(Errno::ENOENT));
    assert_eq!(qc(&mut qattrs(20, cp, 2, &[], qpi::ATTR_CREATE_PD_HANDLE)), Err(Errno::ENOENT));
    let mut wrong = qattrs(20, cp, 2, &[], 0xffff);
    wrong[1].data = cq as u64;
    assert_eq!(qc(&mut wrong), Err(Errno::EINVAL), "PD handle is a CQ");
    let mut bad_tail = cap24;
    bad_tail[20] = 1;
    assert_eq!(qc(&mut qattrs(24, bad_tail.as_ptr() as u64, 2, &[], 0xffff)), Err(Errno::EOPNOTSUPP), "non-zero tail");
    assert_eq!(qc(&mut qattrs(24, cp, 2, &[], 0xffff)), Ok(()), "zero-padded CAP");
    assert_eq!(&rcap[..], cap.as_bytes());
    assert!(h.qp(qpn).is_some());

    // Lifetime: in use, wrong type.
    assert_eq!(d(&mut [a(0, 0, M, pd as u64)]), Err(Errno::EBUSY));
    assert_eq!(d(&mut [a(0, 0, M, cq as u64)]), Err(Errno::EINVAL), "a CQ handle");
    let mut dr = [0u64; 1];
    assert_eq!(ioctl(&f, object::CQ, cqi::DESTROY, &mut [a(0, 0, M, cq as u64)]), Err(Errno::EINVAL), "no RESP");
    assert_eq!(ioctl(&f, object::CQ, cqi::DESTROY, &mut [a(0, 0, M, cq as u64), a(1, 4, M, dr.as_mut_ptr() as u64)]),
               Err(Errno::EINVAL), "RESP is exactly 8");
    assert_eq!(ioctl(&f, object::CQ, cqi::DESTROY, &mut [a(0, 0, M, cq as u64), a(1, 8, M, dr.as_mut_ptr() as u64)]),
               Err(Errno::EBUSY));
}

#[test]
fn gid_queries() {
    let h = Hca::for_tests();
    let f = ctx_file(&h);
    let mut entries = [0u8; 8 * 40];
    let mut n = 0u64;
    let e = entries.as_mut_ptr() as u64;
    let np = &mut n as *mut u64 as u64;
    let t = |esize: u64, len: u16, flags: Option<IoctlAttr>| {
        let mut v = vec![a(0, 8, M, esize), a(2, len, M, e), a(3, 8, M, np)];
        v.extend(flags);
        ioctl(&f, object::DEVICE, dev::QUERY_GID_TABLE, &mut v)
    };
    assert_eq!(t(32, 256, None), Ok(()));
    assert_eq!(t(32, 32, None), Err(Errno::EINVAL), "room for 1 entry");
    assert_eq!(t(32, 100, None), Err(Errno::EINVAL), "not a multiple");
    assert_eq!(t(0, 256, None), Err(Errno::EINVAL), "entry size 0");
    assert_eq!(t(32, 256, Some(a(1, 4, M, 1))), Err(Errno::EINVAL), "flags 1");
    assert_eq!(t(32, 256, Some(a(1, 2, M, 0))), Err(Errno::EINVAL), "flags len 2");
    assert_eq!(t(32, 256, Some(a(1, 12, M, 0))), Err(Errno::EINVAL), "flags len 12");
    assert_eq!(t(32, 256, Some(a(1, 8, M, 0))), Ok(()));
    entries = [0xee; 320];
    assert_eq!(t(40, 320, None), Ok(()), "padded entries");
    assert_eq!(n, 2, "link-local and IPv4-mapped, RoCE v2 only");
    assert!(entries[32..40].iter().all(|b| *b == 0));
    assert_eq!(entries[40 + 16], 1, "second entry's index");
    let mut one = [0u8; 32];
    let one_p = one.as_mut_ptr() as u64;
    let ge = |idx: u64, flags: Option<IoctlAttr>| {
        let mut v = vec![a(0, 8, M, 1), a(1, 8, M, idx), a(3, 32, M, one_p)];
        v.extend(flags);
        ioctl(&f, object::DEVICE, dev::QUERY_GID_ENTRY, &mut v)
    };
    assert_eq!(ge(0, None), Err(Errno::EINVAL), "FLAGS is mandatory here");
    assert_eq!(ge(0, Some(a(2, 4, M, 0))), Ok(()));
    assert_eq!(ge(0, Some(a(2, 4, M, 1))), Err(Errno::EINVAL));
    assert_eq!(ge(200, Some(a(2, 4, M, 0))), Err(Errno::ENODATA));
    assert_eq!(ge(5000, Some(a(2, 4, M, 0))), Err(Errno::EINVAL));
}

/// CREATE_AH answers like mlx5_ib on RoCE: the core response (the handle), then the
/// driver's with the destination MAC resolved from the GID, which libmlx5 copies into
/// the address vector's `rmac`.
#[test]
fn create_ah_returns_the_resolved_mac() {
    let h = Hca::for_tests();
    let f = ctx_file(&h);
    let pd = alloc_pd(&f).unwrap();
    let create = |dgid: [u8; 16], out_words: u16| -> (Result<usize, Errno>, [u8; 20]) {
        let mut out = [0xeeu8; 20];
        let attr = AhAttr { dgid, sgid_index: crate::config::IP_GID_INDEX, hop_limit: 64, is_global: 1, port_num: 1, ..Default::default() };
        let cmd = CreateAh { response: out.as_mut_ptr() as u64, user_handle: 7, pd_handle: pd, attr, ..Default::default() };
        let r = write(&f, &legacy(5, out_words, cmd.as_bytes()));
        (r, out)
    };
    // A peer's IPv4-mapped GID, and a link-local GID with a MAC inside (modified EUI-64).
    let mapped = std::net::Ipv4Addr::new(127, 9, 8, 7).to_ipv6_mapped().octets();
    let mut link_local = [0u8; 16];
    link_local[..2].copy_from_slice(&[0xfe, 0x80]);
    // MAC 00:02:c9:01:02:03 as a modified EUI-64: ff:fe in the middle, and the first
    // byte's universal/local bit flipped (0x00 -> 0x02).
    link_local[8..].copy_from_slice(&[0x02, 0x02, 0xc9, 0xff, 0xfe, 0x01, 0x02, 0x03]);
    for (gid, mac) in [(mapped, [0x00, 0x02, 0xc9, 9, 8, 7]), (link_local, [0x00, 0x02, 0xc9, 0x01, 0x02, 0x03])] {
        let (r, out) = create(gid, 5);
        assert_eq!(r, Ok(8 + 56), "{gid:02x?}");
        assert_eq!(u32::from_ne_bytes(out[4..8].try_into().unwrap()), 10, "driver response_length");
        assert_eq!(out[8..14], mac, "dmac for {gid:02x?}");
        assert!(out[14..].iter().all(|&b| b == 0xee), "nothing written past response_length");
    }
    assert_eq!(create(mapped, 3).0, Err(Errno::EINVAL), "no room for the MAC: mlx5_ib refuses");
}

#[test]
fn invoke_write_rules() {
    let h = Hca::for_tests();
    let f = ctx_file(&h);
    let iw = |attrs: &mut [IoctlAttr]| ioctl(&f, object::DEVICE, dev::INVOKE_WRITE, attrs);
    assert_eq!(iw(&mut [a(2, 8, M, 1)]), Err(Errno::ENOSPC), "rdma-core's probe");
    assert_eq!(iw(&mut [a(2, 8, M, 7)]), Err(Errno::EOPNOTSUPP), "a gap");
    assert_eq!(iw(&mut [a(2, 8, M, 200)]), Err(Errno::EOPNOTSUPP));
    assert_eq!(iw(&mut [a(2, 8, M, 21)]), Err(Errno::EOPNOTSUPP), "POLL_CQ is masked out");
    assert_eq!(iw(&mut [a(2, 8, M, 3), a(0, 2, M, 0)]), Err(Errno::EINVAL), "CORE_IN shorter than 4");
    let mut out = [0u32; 1];
    let mut pdn = [0u32; 1];
    assert_eq!(iw(&mut [a(2, 8, M, 3), a(0, 8, M, 0), a(1, 2, M, out.as_mut_ptr() as u64)]), Err(Errno::ENOSPC));
    let mut ok = [a(2, 8, M, 3), a(0, 8, M, 0), a(1, 4, M, out.as_mut_ptr() as u64),
                  a(UVERBS_ATTR_UHW_OUT, 4, M, pdn.as_mut_ptr() as u64)];
    assert_eq!(iw(&mut ok), Ok(()));
    assert_eq!(ok[2].flags, M | UVERBS_ATTR_F_VALID_OUTPUT);
    assert_eq!(ok[3].flags, M | UVERBS_ATTR_F_VALID_OUTPUT);
    assert_ne!(pdn[0], 0);
    assert_eq!(iw(&mut [a(2, 8, M, 3), a(0, 8, M, 0), a(1, 4, M, out.as_mut_ptr() as u64)]), Err(Errno::EFAULT),
               "mlx5 writes the PD number even without a buffer");
    // DEALLOC_PD in use through INVOKE_WRITE.
    let buf = vec![0u64; 512];
    let mut body = [0u8; 40];
    body[8..16].copy_from_slice(&(buf.as_ptr() as u64).to_ne_bytes());
    body[16..24].copy_from_slice(&4096u64.to_ne_bytes());
    body[24..32].copy_from_slice(&(buf.as_ptr() as u64).to_ne_bytes());
    let mut mrr = [0u32; 3];
    assert_eq!(iw(&mut [a(2, 8, M, 9), a(0, 40, M, body.as_ptr() as u64), a(1, 12, M, mrr.as_mut_ptr() as u64)]),
               Ok(()));
    assert!(h.mr_by_key(mrr[1]).is_some());
    // The same MKey index with another variant (the key's low byte) is not this MR.
    assert!(h.mr_by_key(mrr[1] ^ 0x01).is_none());
    assert!(h.mr_by_key(mrr[1] ^ 0x80).is_none());
    assert_eq!(iw(&mut [a(2, 8, M, 4), a(0, 4, M, 0)]), Err(Errno::EBUSY));
}

#[test]
fn write_header_rules() {
    let h = Hca::for_tests();
    let f = h.open();
    // Before GET_CONTEXT.
    let mut out = [0u8; 176];
    let o = (out.as_mut_ptr() as u64).to_ne_bytes();
    assert_eq!(write(&f, &legacy(1, 44, &o)), Err(Errno::EINVAL), "QUERY_DEVICE");
    assert_eq!(write(&f, &legacy(3, 1, &o)), Err(Errno::EINVAL), "ALLOC_PD");
    assert_eq!(write(&f, &legacy(4, 0, &0u32.to_ne_bytes())), Err(Errno::ENOENT), "DEALLOC_PD(0)");
    assert_eq!(write(&f, &legacy(17, 1, &o)), Err(Errno::EINVAL), "CREATE_COMP_CHANNEL");
    drop(f);
    let f = ctx_file(&h);
    assert_eq!(write(&f, &[0u8; 4]), Err(Errno::EINVAL), "count < 8");
    assert_eq!(write(&f, &legacy(7, 0, &[0; 8])), Err(Errno::EOPNOTSUPP), "QUERY_AH never existed");
    let mut bad = legacy(7, 0, &[0; 8]);
    bad[4] = 9;
    assert_eq!(write(&f, &bad), Err(Errno::EINVAL), "the stub checks in_words");
    assert_eq!(write(&f, &legacy(100, 0, &[0; 8])), Err(Errno::EOPNOTSUPP));
    let mut bad = legacy(100, 0, &[0; 8]);
    bad[4] = 9;
    assert_eq!(write(&f, &bad), Err(Errno::EOPNOTSUPP), "past the table: no size check");
    assert_eq!(write(&f, &legacy(0x100, 0, &[0; 8])), Err(Errno::EINVAL));
    assert_eq!(write(&f, &legacy(0x4000_0000, 0, &[0; 8])), Err(Errno::EINVAL));
    assert_eq!(write(&f, &legacy(21, 0, &[0; 8])), Err(Errno::EOPNOTSUPP), "POLL_CQ");
    assert_eq!(write(&f, &legacy(28, 0, &[0; 24])), Err(Errno::EOPNOTSUPP), "POST_SEND");
    assert_eq!(write(&f, &legacy(0x8000_0050, 0, &[0; 8])), Err(Errno::EOPNOTSUPP));
    let mut gap = legacy(0x8000_0008, 0, &[]);
    assert_eq!(write(&f, &gap), Err(Errno::EOPNOTSUPP), "ex gap with a consistent legacy size");
    gap[4] = 0;
    assert_eq!(write(&f, &gap), Err(Errno::EINVAL), "ex gap, legacy size rule");
    assert_eq!(write(&f, &legacy(4, 0, &[])), Err(Errno::ENOSPC), "DEALLOC_PD body too short");
    assert_eq!(write(&f, &legacy(4, 0, &[0, 0, 0, 0, 1, 0, 0, 0])), Err(Errno::EOPNOTSUPP), "trailing non-zero");
    assert_eq!(write(&f, &legacy(4, 0, &[0x39, 0x30, 0, 0, 0, 0, 0, 0])), Err(Errno::ENOENT), "trailing zero");
    // rdma-core v18/19's 16-byte DESTROY_CQ: the body is read as 16 bytes anyway, here the
    // 8 bytes after the write hold handle 0x55.
    let mut compat = CmdHdr { command: 20, in_words: 4, out_words: 2 }.as_bytes().to_vec();
    compat.extend_from_slice(&(out.as_mut_ptr() as u64).to_ne_bytes());
    compat.extend_from_slice(&[0x55, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(write(&f, &compat[..16]), Err(Errno::ENOENT), "16-byte DESTROY_CQ is fixed up");
    assert_eq!(write(&f, &legacy(1, 43, &o)), Err(Errno::ENOSPC), "QUERY_DEVICE out_words too small");
    assert_eq!(write(&f, &legacy(1, 44, &0u64.to_ne_bytes())), Err(Errno::EFAULT), "response NULL");
    let mut body = o.to_vec();
    body.extend_from_slice(&[0, 0, 0, 1]);
    assert_eq!(write(&f, &legacy(1, 44, &body)), Err(Errno::EOPNOTSUPP), "no-udata command, trailing input");
    assert_eq!(write(&f, &legacy(1, 44, &o)), Ok(16));
    assert_eq!(write(&f, &legacy(3, 2, &0u64.to_ne_bytes())), Err(Errno::EFAULT), "ALLOC_PD response NULL");
    assert_eq!(alloc_pd(&f), Ok(0), "the failed ALLOC_PD released its handle");

    // Extended header rules (EX_QUERY_DEVICE).
    let mut exout = [0u8; 304];
    let r = exout.as_mut_ptr() as u64;
    let body = [0u8; 8];
    let hdr = |resp: u64, pin: u16, pout: u16, res: u32| ExCmdHdr { response: resp, provider_in_words: pin,
                                                                   provider_out_words: pout, cmd_hdr_reserved: res };
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 0, 0, 0), &body)), Ok(32));
    assert_eq!(u32::from_ne_bytes(exout[180..184].try_into().unwrap()), 304, "response_length");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 0, 0, 1), &body)), Err(Errno::EINVAL), "reserved");
    assert_eq!(write(&f, &ex(1, 1, 0, hdr(r, 0, 0, 0), &body)), Err(Errno::EINVAL), "response without out words");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(0, 0, 0, 0), &body)), Err(Errno::EINVAL), "out words without response");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(0xffff_8000_0000_0000, 0, 0, 0), &body)), Err(Errno::EFAULT));
    assert_eq!(write(&f, &ex(1, 0, 38, hdr(r, 0, 0, 0), &[])), Ok(24), "short core input is zero-extended");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 0, 0, 0), &[])), Err(Errno::EINVAL), "in_words*8 != rest");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 0, 0, 0), &[])[..16]), Err(Errno::EINVAL), "count < 24");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 0, 0, 0), &[1, 0, 0, 0, 0, 0, 0, 0])), Err(Errno::EINVAL), "comp_mask");
    assert_eq!(write(&f, &ex(1, 1, 2, hdr(r, 0, 0, 0), &body)), Ok(32), "a short response is truncated");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 1, 0, 0), &[0; 16])), Ok(40), "zero driver input is accepted");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 1, 0, 0), &[0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0])),
               Err(Errno::EINVAL), "mlx5 refuses driver input");
    assert_eq!(write(&f, &ex(1, 1, 38, hdr(r, 0, 0, 0), &body)), Ok(32));
}

#[test]
fn close_releases_handles_and_pages() {
    let h = Hca::for_tests();
    {
        let f = ctx_file(&h);
        for _ in 0..5 {
            alloc_pd(&f).unwrap();
        }
        assert_eq!(f.live_handles(), 5);
    }
    assert_eq!(h.live_objects(), 0);
}

#[test]
fn query_context_and_info_handles() {
    let h = Hca::for_tests();
    let f = h.open();
    let mut uctx = [0xffu8; 80];
    let (mut ncv, mut core) = (0u32, 0u64);
    let q = |attrs: &mut [IoctlAttr]| ioctl(&f, object::DEVICE, dev::QUERY_CONTEXT, attrs);
    assert_eq!(q(&mut [a(0x1000, 72, M, uctx.as_mut_ptr() as u64)]), Err(Errno::EINVAL), "no context yet");
    drop(f);
    let f = ctx_file(&h);
    let q = |attrs: &mut [IoctlAttr]| ioctl(&f, object::DEVICE, dev::QUERY_CONTEXT, attrs);
    assert_eq!(q(&mut [a(0, 4, M, &mut ncv as *mut u32 as u64)]), Err(Errno::EINVAL), "RESP_UCTX is mandatory");
    assert_eq!(q(&mut [a(0x1000, 71, M, uctx.as_mut_ptr() as u64)]), Err(Errno::EINVAL), "shorter than the struct");
    let mut at = [a(0, 4, M, &mut ncv as *mut u32 as u64), a(1, 8, M, &mut core as *mut u64 as u64),
                  a(0x1000, 80, M, uctx.as_mut_ptr() as u64)];
    q(&mut at).unwrap();
    assert_eq!((ncv, core), (h.config().num_comp_vectors, 1));
    assert_eq!(u32::from_ne_bytes(uctx[40..44].try_into().unwrap()), 72, "response_length");
    assert_eq!(uctx[44], 1, "cqe_version");
    assert!(uctx[72..].iter().all(|b| *b == 0), "zero-filled past the struct");

    // INFO_HANDLES lists one type's handles, newest first.
    let pds: Vec<u32> = (0..3).map(|_| alloc_pd(&f).unwrap()).collect();
    let mut list = [0u32; 8];
    let mut total = 0u32;
    let l = list.as_mut_ptr() as u64;
    let t = &mut total as *mut u32 as u64;
    let info = |obj: u64, len: u16, with_total: bool| {
        let mut v = vec![a(0, 8, M, obj), a(2, len, M, l)];
        if with_total {
            v.push(a(1, 4, M, t));
        }
        ioctl(&f, object::DEVICE, dev::INFO_HANDLES, &mut v)
    };
    assert_eq!(info(object::PD as u64, 32, true), Ok(()));
    assert_eq!(total, 3);
    assert_eq!(&list[..3], &[pds[2], pds[1], pds[0]]);
    assert_eq!(info(object::PD as u64, 8, true), Ok(()), "truncated to the buffer");
    assert_eq!(total, 2);
    assert_eq!(info(object::CQ as u64, 32, true), Ok(()));
    assert_eq!(total, 0);
    assert_eq!(info(object::PD as u64, 6, true), Err(Errno::EINVAL), "not a multiple of 4");
    assert_eq!(info(0x777, 32, true), Err(Errno::ENOENT), "unknown object type");
    assert_eq!(info(object::PD as u64, 32, false), Err(Errno::ENOENT), "the kernel insists on writing the total");
}

#[test]
fn static_uar_context_errors() {
    let h = Hca::for_tests();
    let f = h.open();
    let mut resp = [0u8; 72];
    let rp = resp.as_mut_ptr() as u64;
    let go_on = |f: &crate::File, req: &[u8]| {
        let mut at = [a(UVERBS_ATTR_UHW_IN, req.len() as u16, M, if req.len() > 8 {
                           req.as_ptr() as u64
                       } else {
                           let mut w = [0u8; 8];
                           w[..req.len()].copy_from_slice(req);
                           u64::from_ne_bytes(w)
                       }),
                      a(UVERBS_ATTR_UHW_OUT, 72, M, rp)];
        ioctl(f, object::DEVICE, dev::GET_CONTEXT, &mut at)
    };
    let go = |req: &[u8]| go_on(&f, req);
    let req = |total: u32, low: u32, flags: u32, comp: u32, caps: u64| AllocUcontextReqV2 {
        total_num_bfregs: total, num_low_latency_bfregs: low, flags, comp_mask: comp, max_cqe_version: 1,
        lib_caps: caps, ..Default::default()
    };
    assert_eq!(go(&req(16, 4, 0, 0, 0).as_bytes()[..12]), Err(Errno::EINVAL), "12 bytes is neither v1 nor v2");
    assert_eq!(go(req(16, 4, 2, 0, 0).as_bytes()), Err(Errno::EOPNOTSUPP), "unknown flag");
    assert_eq!(go(req(16, 4, 0, 1, 0).as_bytes()), Err(Errno::EOPNOTSUPP), "comp_mask");
    assert_eq!(go(req(16, 16, 0, 0, 0).as_bytes()), Err(Errno::EINVAL), "too many low-latency bfregs");
    assert_eq!(go(req(0, 0, 0, 0, 0).as_bytes()), Err(Errno::EINVAL), "no bfregs without DYN_UAR");
    assert_eq!(go(req(1000, 4, 0, 0, 0).as_bytes()), Err(Errno::ENOMEM), "more than 512 bfregs");
    assert_eq!(h.pages().in_use(), 0, "failed contexts keep no pages");
    // The 8-byte v1 request: CQE version 0, static UARs.
    assert_eq!(go(&req(4, 1, 0, 0, 0).as_bytes()[..8]), Ok(()));
    assert_eq!(resp[44], 0, "v1 requests get CQE version 0");
    assert_eq!(u32::from_ne_bytes(resp[8..12].try_into().unwrap()), 4, "tot_bfregs");
    assert_eq!(h.pages().in_use(), 2);
    drop(f);
    assert_eq!(h.pages().in_use(), 0);
    // The DevX flag: a firmware user context, gone again at close.
    let f2 = h.open();
    assert_eq!(go_on(&f2, req(16, 4, 1, 0, 0).as_bytes()), Ok(()), "DevX");
    assert_eq!(h.firmware().counts().uctx, 1);
    drop(f2);
    assert_eq!(h.firmware().counts().uctx, 0, "close destroys the user context");
}

/// A legacy CREATE_SRQ (write 32) with mlx5's driver data: the core response and the
/// driver's after it in `out`.
/// OPEN_XRCD (write 37) with `fd` and `oflags`: the new handle.
fn open_xrcd(f: &File, fd: i32, oflags: i32) -> Result<u32, Errno> {
    let mut r = [0u32; 1];
    let cmd = uverbs::sys::verbs::OpenXrcd { response: r.as_mut_ptr() as u64, fd: fd as u32, oflags: oflags as u32 };
    write(f, &legacy(37, 1, cmd.as_bytes())).map(|_| r[0])
}

fn close_xrcd(f: &File, handle: u32) -> Result<usize, Errno> {
    write(f, &legacy(38, 0, uverbs::sys::verbs::CloseXrcd { xrcd_handle: handle }.as_bytes()))
}

/// `ib_uverbs_open_xrcd`'s errnos (drivers/infiniband/core/uverbs_cmd.c): EBADF for an
/// fd that is not open, EAGAIN for a file without a domain and no O_CREAT, EINVAL for
/// one with a domain and O_EXCL; the same file's inode gives the same domain to every
/// opener (one firmware XRCD), which goes with its last close; fd -1 gives a private one.
#[test]
fn xrcd_open_share_and_errnos() {
    let h = Hca::for_tests();
    let f = ctx_file(&h);
    let g = ctx_file(&h);
    let file = tempfile_in_tmp();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
    assert_eq!(open_xrcd(&f, 1 << 20, libc::O_CREAT), Err(Errno::EBADF), "no such fd");
    assert_eq!(open_xrcd(&f, fd, 0), Err(Errno::EAGAIN), "no domain yet, no O_CREAT");
    let x1 = open_xrcd(&f, fd, libc::O_CREAT).unwrap();
    assert_eq!(h.firmware().counts().xrcd, 1);
    assert_eq!(open_xrcd(&g, fd, libc::O_CREAT | libc::O_EXCL), Err(Errno::EINVAL), "exists, O_EXCL");
    let x2 = open_xrcd(&g, fd, 0).unwrap();
    assert_eq!(h.firmware().counts().xrcd, 1, "the second opener shares the domain");
    let private = open_xrcd(&f, -1, 0).unwrap();
    assert_eq!(h.firmware().counts().xrcd, 2, "fd -1: a domain of its own");
    assert_eq!(close_xrcd(&f, x1), Ok(8 + 4), "the command's length");
    assert_eq!(close_xrcd(&f, x1), Err(Errno::ENOENT), "gone");
    assert_eq!(h.firmware().counts().xrcd, 2, "g still holds the shared one");
    drop(g);
    assert_eq!(h.firmware().counts().xrcd, 1, "the last opener's close deallocates it");
    assert_eq!(open_xrcd(&f, fd, 0), Err(Errno::EAGAIN), "and takes it out of the table");
    assert_eq!(close_xrcd(&f, private), Ok(8 + 4));
    assert_eq!(h.firmware().counts().xrcd, 0);
    let _ = x2;
}

/// A file of its own in the temporary directory (removed at once: the open fd keeps the inode).
fn tempfile_in_tmp() -> std::fs::File {
    let p = std::env::temp_dir().join(format!("softhca-xrcd-{}-{:?}", std::process::id(), std::thread::current().id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&p).unwrap();
    let _ = std::fs::remove_file(&p);
    file
}

fn create_srq(f: &File, pd: u32, max_wr: u32, max_sge: u32, ucmd: &uverbs::sys::mlx5::CreateSrq,
              out: &mut [u32; 6]) -> Result<usize, Errno> {
    let core = uverbs::sys::verbs::CreateSrq { response: out.as_mut_ptr() as u64, user_handle: 0x55, pd_handle: pd,
                                               max_wr, max_sge, srq_limit: 0 };
    let mut body = core.as_bytes().to_vec();
    body.extend_from_slice(ucmd.as_bytes());
    write(f, &legacy(32, 6, &body))
}

/// The SRQ commands' errnos as the core and mlx5_ib give them (uverbs_cmd.c: a handle
/// that does not resolve gives the lookup's errno, ENOENT when missing and EINVAL for
/// another type, as the reference kernel propagates it; mlx5_ib_create_srq: max_wr
/// >= 1 << log_max_srq_sz or max_sge > max_wqe_sz_rq / 16 is EINVAL, max_wr becomes
/// roundup_pow_of_two(max_wr + 1) - 1; create_srq_user: reserved driver fields are EINVAL;
/// mlx5_ib_modify_srq: a resize or a limit >= the WQE count is EINVAL;
/// ib_destroy_srq_user: EBUSY while a QP uses the SRQ).
#[test]
fn srq_commands_and_errnos() {
    use uverbs::sys::mlx5::CreateSrq as Mlx5CreateSrq;
    use uverbs::sys::verbs::{ModifySrq, QuerySrq};
    let h = Hca::for_tests();
    let f = ctx_file(&h);
    let pd = alloc_pd(&f).unwrap();
    let buf = page();
    let db = page();
    let ucmd = Mlx5CreateSrq { buf_addr: buf.0.as_ptr() as u64, db_addr: db.0.as_ptr() as u64, ..Default::default() };
    let mut out = [0u32; 6];
    assert_eq!(create_srq(&f, pd, 1 << 15, 1, &ucmd, &mut out), Err(Errno::EINVAL), "max_wr = max_srq_recv_wr");
    assert_eq!(create_srq(&f, pd, 16, 33, &ucmd, &mut out), Err(Errno::EINVAL), "max_sge > 512 / 16");
    assert_eq!(create_srq(&f, pd + 7, 16, 1, &ucmd, &mut out), Err(Errno::ENOENT), "no such PD");
    assert_eq!(create_srq(&f, pd, 16, 1, &Mlx5CreateSrq { reserved0: 1, ..ucmd }, &mut out), Err(Errno::EINVAL));
    assert_eq!(create_srq(&f, pd, 16, 1, &Mlx5CreateSrq { reserved1: 1, ..ucmd }, &mut out), Err(Errno::EINVAL));
    assert_eq!(create_srq(&f, pd, 31, 1, &Mlx5CreateSrq { buf_addr: 0, ..ucmd }, &mut out), Err(Errno::EFAULT),
               "ib_umem_get of an unmapped buffer");
    // 32 WQEs of 32 bytes fill the page.
    assert_eq!(create_srq(&f, pd, 31, 1, &ucmd, &mut out), Ok(8 + 32 + 32));
    let (srq, max_wr, max_sge, srqn, drv_srqn) = (out[0], out[1], out[2], out[3], out[4]);
    assert_eq!((srq, max_wr, max_sge, srqn), (pd + 1, 31, 1, 0), "handle, max_wr, max_sge, srqn (XRC only)");
    assert_ne!(drv_srqn, 0, "mlx5_ib_create_srq_resp.srqn");
    assert_eq!(h.firmware().counts().srq, 1);

    let query = |handle: u32| {
        let mut r = [0u32; 4];
        let q = QuerySrq { response: r.as_mut_ptr() as u64, srq_handle: handle, reserved: 0 };
        write(&f, &legacy(34, 4, q.as_bytes())).map(|_| r)
    };
    let modify = |mask: u32, max_wr: u32, limit: u32| {
        let m = ModifySrq { srq_handle: srq, attr_mask: mask, max_wr, srq_limit: limit };
        write(&f, &legacy(33, 0, m.as_bytes()))
    };
    assert_eq!(query(srq), Ok([31, 1, 0, 0]));
    assert_eq!(query(srq + 5), Err(Errno::ENOENT), "no such SRQ");
    assert_eq!(query(pd), Err(Errno::EINVAL), "a PD handle");
    assert_eq!(modify(1, 64, 0), Err(Errno::EINVAL), "IB_SRQ_MAX_WR: no resize");
    assert_eq!(modify(2, 0, 32), Err(Errno::EINVAL), "limit = WQE count");
    assert_eq!(modify(2, 0, 31), Ok(24));
    assert_eq!(query(srq), Ok([31, 1, 31, 0]), "the armed limit reads back");
    assert_eq!(modify(0, 0, 0), Ok(24), "empty mask");

    // A QP on the SRQ: no RQ of its own; the SRQ is busy until the QP goes.
    let ring = page();
    let cdb = page();
    let uar = h.pages().alloc().unwrap();
    let cq_cmd = Mlx5CreateCq { buf_addr: ring.0.as_ptr() as u64, db_addr: cdb.0.as_ptr() as u64, cqe_size: 64,
                                flags: 2, uar_page_index: uar as u16, ..Default::default() };
    let (mut cqe_out, mut cqn) = (0u32, [0u32; 2]);
    let mut ca = [a(cqi::ATTR_CREATE_HANDLE, 0, M, 0), a(cqi::ATTR_CREATE_CQE, 4, M, 31),
                  a(cqi::ATTR_CREATE_USER_HANDLE, 8, M, 7), a(cqi::ATTR_CREATE_COMP_VECTOR, 4, M, 0),
                  a(cqi::ATTR_CREATE_RESP_CQE, 4, M, &mut cqe_out as *mut u32 as u64),
                  a(UVERBS_ATTR_UHW_IN, 32, M, cq_cmd.as_bytes().as_ptr() as u64),
                  a(UVERBS_ATTR_UHW_OUT, 8, M, cqn.as_mut_ptr() as u64)];
    ioctl(&f, object::CQ, cqi::CREATE, &mut ca).unwrap();
    let cq = ca[0].data as u32;
    let qbuf = page();
    let qd = Mlx5CreateQp { buf_addr: qbuf.0.as_ptr() as u64, db_addr: qbuf.0.as_ptr() as u64, sq_wqe_count: 4,
                            flags: 1 << 10, uidx: 0, bfreg_index: uar, ..Default::default() };
    let cap = QpCap { max_send_wr: 1, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let (mut rcap, mut qpn, mut qresp) = ([0u8; 20], 0u32, [0u8; 40]);
    let qattrs = |srq_handle: u32, rcap: &mut [u8; 20], qpn: &mut u32, qresp: &mut [u8; 40]| {
        vec![a(qpi::ATTR_CREATE_HANDLE, 0, M, 0), a(qpi::ATTR_CREATE_PD_HANDLE, 0, M, pd as u64),
             a(qpi::ATTR_CREATE_SEND_CQ_HANDLE, 0, M, cq as u64), a(qpi::ATTR_CREATE_RECV_CQ_HANDLE, 0, M, cq as u64),
             a(qpi::ATTR_CREATE_SRQ_HANDLE, 0, M, srq_handle as u64),
             a(qpi::ATTR_CREATE_USER_HANDLE, 8, M, 0), a(qpi::ATTR_CREATE_CAP, 20, M, cap.as_bytes().as_ptr() as u64),
             a(qpi::ATTR_CREATE_TYPE, 8, M, 2), a(qpi::ATTR_CREATE_RESP_CAP, 20, M, rcap.as_mut_ptr() as u64),
             a(qpi::ATTR_CREATE_RESP_QP_NUM, 4, M, qpn as *mut u32 as u64),
             a(UVERBS_ATTR_UHW_IN, 56, M, qd.as_bytes().as_ptr() as u64),
             a(UVERBS_ATTR_UHW_OUT, 40, M, qresp.as_mut_ptr() as u64)]
    };
    let mut qa = qattrs(cq, &mut rcap, &mut qpn, &mut qresp);
    assert_eq!(ioctl(&f, object::QP, qpi::CREATE, &mut qa), Err(Errno::EINVAL), "SRQ handle is a CQ");
    let mut qa = qattrs(srq, &mut rcap, &mut qpn, &mut qresp);
    ioctl(&f, object::QP, qpi::CREATE, &mut qa).unwrap();
    let qp = qa[0].data as u32;
    let got: QpCap = zerocopy::FromBytes::read_from_bytes(&rcap[..]).unwrap();
    assert_eq!((got.max_recv_wr, got.max_recv_sge), (0, 0), "set_rq_size without an RQ");
    let q = h.qp(qpn).unwrap();
    assert_eq!((q.rq_wqe_count, q.srq.as_ref().map(|s| s.srqn)), (0, Some(drv_srqn)));
    drop(q);

    let destroy = |handle: u32| {
        let mut r = [0u32; 1];
        let d = uverbs::sys::verbs::DestroySrq { response: r.as_mut_ptr() as u64, srq_handle: handle, reserved: 0 };
        write(&f, &legacy(35, 1, d.as_bytes())).map(|_| r[0])
    };
    assert_eq!(destroy(srq), Err(Errno::EBUSY), "a QP is attached");
    let mut dr = [0u32; 1];
    assert_eq!(ioctl(&f, object::SRQ, uverbs::sys::ids::destroy::SRQ_DESTROY,
                     &mut [a(0, 0, M, srq as u64), a(1, 4, M, dr.as_mut_ptr() as u64)]),
               Err(Errno::EBUSY), "SRQ_DESTROY too");
    ioctl(&f, object::QP, qpi::DESTROY, &mut [a(0, 0, M, qp as u64), a(1, 4, M, dr.as_mut_ptr() as u64)]).unwrap();
    assert_eq!(destroy(pd), Err(Errno::EINVAL), "a PD handle");
    assert_eq!(destroy(srq), Ok(0), "no events reported");
    assert_eq!(destroy(srq), Err(Errno::ENOENT), "gone");
    assert_eq!(h.firmware().counts().srq, 0);

    // UVERBS_METHOD_SRQ_CREATE, what libibverbs tries first.
    use uverbs::sys::ids::srq as si;
    let (mut wr, mut sge, mut drv) = (0u32, 0u32, [0u32; 2]);
    let sattrs = |ty: u64, max_wr: u64, wr: &mut u32, sge: &mut u32, drv: &mut [u32; 2]| {
        vec![a(si::ATTR_CREATE_HANDLE, 0, M, 0), a(si::ATTR_CREATE_PD_HANDLE, 0, M, pd as u64),
             a(si::ATTR_CREATE_TYPE, 8, M, ty), a(si::ATTR_CREATE_USER_HANDLE, 8, M, 9),
             a(si::ATTR_CREATE_MAX_WR, 4, M, max_wr), a(si::ATTR_CREATE_MAX_SGE, 4, M, 1),
             a(si::ATTR_CREATE_LIMIT, 4, M, 0), a(si::ATTR_CREATE_RESP_MAX_WR, 4, M, wr as *mut u32 as u64),
             a(si::ATTR_CREATE_RESP_MAX_SGE, 4, M, sge as *mut u32 as u64),
             a(UVERBS_ATTR_UHW_IN, 32, M, ucmd.as_bytes().as_ptr() as u64),
             a(UVERBS_ATTR_UHW_OUT, 8, M, drv.as_mut_ptr() as u64)]
    };
    let sc = |v: &mut Vec<IoctlAttr>| ioctl(&f, object::SRQ, si::CREATE, v);
    assert_eq!(sc(&mut sattrs(1, 15, &mut wr, &mut sge, &mut drv)), Err(Errno::ENOENT), "XRC without a CQ");
    assert_eq!(sc(&mut sattrs(3, 15, &mut wr, &mut sge, &mut drv)), Err(Errno::EINVAL), "no SRQ type 3");
    assert_eq!(sc(&mut sattrs(0, 1 << 15, &mut wr, &mut sge, &mut drv)), Err(Errno::EINVAL), "max_wr");
    let mut ok = sattrs(0, 15, &mut wr, &mut sge, &mut drv);
    assert_eq!(sc(&mut ok), Ok(()));
    assert_eq!((wr, sge), (15, 1));
    assert_ne!(drv[0], 0, "driver srqn");
    assert_eq!(query(ok[0].data as u32), Ok([15, 1, 0, 0]));
    assert_eq!(h.firmware().counts().srq, 1);

    // CREATE_XSRQ (write 39): __uverbs_create_xsrq's lookups, then mlx5_ib's type check.
    let xsrq = |ty: u32, cq_handle: u32, out: &mut [u32; 6]| {
        let core = uverbs::sys::verbs::CreateXsrq { response: out.as_mut_ptr() as u64, srq_type: ty, pd_handle: pd,
                                                    max_wr: 7, max_sge: 2, cq_handle, xrcd_handle: 0,
                                                    ..Default::default() };
        let mut body = core.as_bytes().to_vec();
        body.extend_from_slice(ucmd.as_bytes());
        write(&f, &legacy(39, 6, &body))
    };
    assert_eq!(xsrq(1, cq, &mut out), Err(Errno::EINVAL), "XRC: no XRC domain exists");
    assert_eq!(xsrq(2, pd, &mut out), Err(Errno::EINVAL), "TM: the CQ handle is a PD");
    assert_eq!(xsrq(2, cq, &mut out), Err(Errno::EINVAL), "TM: no tag matching list");
    assert_eq!(xsrq(7, cq, &mut out), Err(Errno::EOPNOTSUPP), "type 7: mlx5_ib_create_srq");
    assert_eq!(xsrq(0, 0, &mut out), Ok(8 + 48 + 32));
    assert_eq!((out[1], out[2], out[3]), (7, 2, 0), "max_wr roundup(8) - 1, max_sge, no srqn for basic");
    assert_eq!(h.firmware().counts().srq, 2);
    // An XRC SRQ: CREATE_XRC_SRQ in the firmware; the answer names the SRQ number (the
    // sender's XRC segment needs it); the domain's handle cannot close while it lives.
    let xrcd = open_xrcd(&f, -1, 0).unwrap();
    let xrc = |xrcd_handle: u32, cq_handle: u32, out: &mut [u32; 6]| {
        let core = uverbs::sys::verbs::CreateXsrq { response: out.as_mut_ptr() as u64, srq_type: 1, pd_handle: pd,
                                                    max_wr: 7, max_sge: 1, cq_handle, xrcd_handle,
                                                    ..Default::default() };
        let mut body = core.as_bytes().to_vec();
        body.extend_from_slice(ucmd.as_bytes());
        write(&f, &legacy(39, 6, &body))
    };
    assert_eq!(xrc(xrcd + 9, cq, &mut out), Err(Errno::EINVAL), "no such XRC domain: __uverbs_create_xsrq's EINVAL");
    assert_eq!(xrc(xrcd, cq + 9, &mut out), Err(Errno::ENOENT), "no such CQ: the lookup's errno");
    assert_eq!(xrc(xrcd, cq, &mut out), Ok(8 + 48 + 32));
    let (xsrq_h, xsrqn) = (out[0], out[3]);
    assert_ne!(xsrqn, 0, "an XRC SRQ's number is in the answer");
    assert_eq!(h.firmware().counts().srq, 3);
    assert_eq!(h.firmware().srq(xsrqn).and_then(|s| s.xrc).map(|x| x.xrcd != 0), Some(true));
    assert_eq!(close_xrcd(&f, xrcd), Err(Errno::EBUSY), "an SRQ was made through the handle");
    assert_eq!(destroy(xsrq_h), Ok(0));
    assert_eq!(h.firmware().counts().srq, 2, "DESTROY_XRC_SRQ");
    assert_eq!(close_xrcd(&f, xrcd), Ok(8 + 4));
    // close(): the SRQs go with the file, and nothing keeps one alive.
    drop(f);
    assert_eq!(h.firmware().counts().srq, 0);
    assert_eq!(h.live().get(crate::objects::Kind::Srq), 0);
    assert_eq!(h.live().get(crate::objects::Kind::Cq), 0, "every CQ gone with the file (an XRC SRQ held one)");
}
