//! mlx5 DevX: PRM commands passed from userspace to the firmware through mlx5_ib's
//! driver methods (`drivers/infiniband/hw/mlx5/devx.c`), one function per method.
//!
//! Each call is laid out as libmlx5's `mlx5dv_devx_*` lays it out (same attribute
//! order, sizes and flags: every attribute mandatory, scalars inline), so a trace of
//! doorbell and of stock libmlx5 read the same. The mailboxes are opaque bytes here;
//! their PRM layouts are `prm::cmd`, and the safe API that builds them is the `devx`
//! crate.
//!
//! A firmware failure (outbox `status` != 0) comes back as `EREMOTEIO` with the outbox
//! already copied to `out`: callers decode the status and syndrome from it.
//!
//! The split into `*_call` builders and thin runners exists so that the tests can
//! compare the exact bytes of each call with what the uapi header and libmlx5 define.

use std::os::fd::OwnedFd;

use crate::ioctl::{AttrIdx, Ioctl};
use crate::sys::ids::{mlx5, object};
use crate::{Device, Result};

/// `MLX5_IB_METHOD_DEVX_OTHER`: a general command (QUERY_HCA_CAP, ALLOC_PD, ...) that
/// creates no kernel-tracked object.
pub fn general_cmd(dev: &Device, inbox: &[u8], out: &mut [u8]) -> Result<()> {
    general_cmd_call(inbox, out).run(dev)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn general_cmd_call<'a>(inbox: &'a [u8], out: &'a mut [u8]) -> Ioctl<'a> {
    let mut c = Ioctl::new(object::MLX5_DEVX, mlx5::DEVX_OTHER);
    c.in_bytes(mlx5::ATTR_DEVX_OTHER_CMD_IN, inbox);
    c.out_bytes(mlx5::ATTR_DEVX_OTHER_CMD_OUT, out);
    c
}

/// `MLX5_IB_METHOD_DEVX_QUERY_UAR`: the device's UAR page index (`uar_page` in a CQ or
/// QP context) of the context's bfreg `user_idx`.
pub fn query_uar(dev: &Device, user_idx: u32) -> Result<u32> {
    let mut dev_idx = 0u32;
    query_uar_call(user_idx, &mut dev_idx).run(dev)?;
    Ok(dev_idx)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn query_uar_call(user_idx: u32, dev_idx: &mut u32) -> Ioctl<'_> {
    let mut c = Ioctl::new(object::MLX5_DEVX, mlx5::DEVX_QUERY_UAR);
    c.in_value(mlx5::ATTR_DEVX_QUERY_UAR_USER_IDX, user_idx);
    c.out_struct(mlx5::ATTR_DEVX_QUERY_UAR_DEV_IDX, dev_idx);
    c
}

/// `MLX5_IB_METHOD_DEVX_QUERY_EQN`: the EQ number (`cqc.c_eqn`) of completion vector
/// `vector`.
pub fn query_eqn(dev: &Device, vector: u32) -> Result<u32> {
    let mut eqn = 0u32;
    query_eqn_call(vector, &mut eqn).run(dev)?;
    Ok(eqn)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn query_eqn_call(vector: u32, eqn: &mut u32) -> Ioctl<'_> {
    let mut c = Ioctl::new(object::MLX5_DEVX, mlx5::DEVX_QUERY_EQN);
    c.in_value(mlx5::ATTR_DEVX_QUERY_EQN_USER_VEC, vector);
    c.out_struct(mlx5::ATTR_DEVX_QUERY_EQN_DEV_EQN, eqn);
    c
}

/// `MLX5_IB_METHOD_DEVX_OBJ_CREATE`: a firmware object from its create inbox (CREATE_CQ,
/// CREATE_QP, CREATE_MKEY, ALLOC_PD, ...); returns the uverbs handle. The kernel keeps
/// the destroy command it derives from the inbox and runs it on DESTROY (or when the
/// context closes).
pub fn obj_create(dev: &Device, inbox: &[u8], out: &mut [u8]) -> Result<u32> {
    let (mut c, h) = obj_create_call(inbox, out);
    c.run(dev)?;
    Ok(c.handle_out(h))
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn obj_create_call<'a>(inbox: &'a [u8], out: &'a mut [u8]) -> (Ioctl<'a>, AttrIdx) {
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_CREATE);
    let h = c.new_handle(mlx5::ATTR_DEVX_OBJ_CREATE_HANDLE);
    c.in_bytes(mlx5::ATTR_DEVX_OBJ_CREATE_CMD_IN, inbox);
    c.out_bytes(mlx5::ATTR_DEVX_OBJ_CREATE_CMD_OUT, out);
    (c, h)
}

/// `MLX5_IB_METHOD_DEVX_OBJ_DESTROY`: runs the object's derived destroy command.
pub fn obj_destroy(dev: &Device, handle: u32) -> Result<()> {
    obj_destroy_call(handle).run(dev)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn obj_destroy_call(handle: u32) -> Ioctl<'static> {
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_DESTROY);
    c.handle(mlx5::ATTR_DEVX_OBJ_DESTROY_HANDLE, handle);
    c
}

/// `MLX5_IB_METHOD_DEVX_OBJ_MODIFY`: a modify command (a QP transition, MODIFY_CQ) on
/// the object `handle`; the kernel checks that the inbox names that object.
pub fn obj_modify(dev: &Device, handle: u32, inbox: &[u8], out: &mut [u8]) -> Result<()> {
    obj_modify_call(handle, inbox, out).run(dev)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn obj_modify_call<'a>(handle: u32, inbox: &'a [u8], out: &'a mut [u8]) -> Ioctl<'a> {
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_MODIFY);
    c.handle(mlx5::ATTR_DEVX_OBJ_MODIFY_HANDLE, handle);
    c.in_bytes(mlx5::ATTR_DEVX_OBJ_MODIFY_CMD_IN, inbox);
    c.out_bytes(mlx5::ATTR_DEVX_OBJ_MODIFY_CMD_OUT, out);
    c
}

/// `MLX5_IB_METHOD_DEVX_OBJ_QUERY`: a query command (QUERY_QP, QUERY_CQ) on `handle`.
pub fn obj_query(dev: &Device, handle: u32, inbox: &[u8], out: &mut [u8]) -> Result<()> {
    obj_query_call(handle, inbox, out).run(dev)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn obj_query_call<'a>(handle: u32, inbox: &'a [u8], out: &'a mut [u8]) -> Ioctl<'a> {
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_QUERY);
    c.handle(mlx5::ATTR_DEVX_OBJ_QUERY_HANDLE, handle);
    c.in_bytes(mlx5::ATTR_DEVX_OBJ_QUERY_CMD_IN, inbox);
    c.out_bytes(mlx5::ATTR_DEVX_OBJ_QUERY_CMD_OUT, out);
    c
}

/// `MLX5_IB_METHOD_DEVX_OBJ_ASYNC_QUERY`: the query runs in the background and its
/// answer (`mlx5_ib_uapi_devx_async_cmd_hdr { wr_id }` then `out_len` outbox bytes) is
/// read from the async command fd `cmd_fd`.
pub fn obj_async_query(dev: &Device, handle: u32, inbox: &[u8], out_len: u16, wr_id: u64, cmd_fd: i32) -> Result<()> {
    obj_async_query_call(handle, inbox, out_len, wr_id, cmd_fd).run(dev)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn obj_async_query_call(handle: u32, inbox: &[u8], out_len: u16, wr_id: u64, cmd_fd: i32) -> Ioctl<'_> {
    let mut c = Ioctl::new(object::MLX5_DEVX_OBJ, mlx5::DEVX_OBJ_ASYNC_QUERY);
    c.handle(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_HANDLE, handle);
    c.in_bytes(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_CMD_IN, inbox);
    // A CONST_IN in the kernel (u16): 8 bytes inline, as `fill_attr_const_in` sends it.
    c.in_const(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_OUT_LEN, out_len as u64);
    c.in_value(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_WR_ID, wr_id);
    c.fd(mlx5::ATTR_DEVX_OBJ_QUERY_ASYNC_FD, cmd_fd);
    c
}

/// libmlx5's page-size bitmap for a plain `mlx5dv_devx_umem_reg`: every page size from
/// the adapter's 4 KiB up (`~(MLX5_ADAPTER_PAGE_SIZE - 1)`), which leaves the kernel
/// free to pick the largest that maps the buffer.
pub const UMEM_PGSZ_ANY: u64 = !0xfff;

/// What `MLX5_IB_METHOD_DEVX_UMEM_REG` registers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UmemArgs {
    pub addr: u64,
    pub len: u64,
    /// `ib_access_flags` (LOCAL_WRITE, REMOTE_WRITE, REMOTE_READ are what the kernel accepts).
    pub access: u32,
    /// Page sizes the objects built on the UMEM can use (see [`UMEM_PGSZ_ANY`]).
    pub pgsz_bitmap: u64,
}

/// `MLX5_IB_METHOD_DEVX_UMEM_REG`: pins user memory as a UMEM; returns (uverbs handle,
/// firmware UMEM id for `*_umem_id` fields).
pub fn umem_reg(dev: &Device, a: &UmemArgs) -> Result<(u32, u32)> {
    let mut id = 0u32;
    let (mut c, h) = umem_reg_call(a, &mut id);
    c.run(dev)?;
    let handle = c.handle_out(h);
    Ok((handle, id))
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn umem_reg_call<'a>(a: &UmemArgs, id: &'a mut u32) -> (Ioctl<'a>, AttrIdx) {
    // libmlx5 44's order (seen in a DOORBELL_PRELOAD_TRACE of mlx5dv_devx_umem_reg):
    // the new handle last, the page-size bitmap optional (kernels before 5.13 lack it).
    let mut c = Ioctl::new(object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_REG);
    c.in_value(mlx5::ATTR_DEVX_UMEM_REG_ADDR, a.addr);
    c.in_value(mlx5::ATTR_DEVX_UMEM_REG_LEN, a.len);
    c.in_value(mlx5::ATTR_DEVX_UMEM_REG_ACCESS, a.access);
    let p = c.in_const(mlx5::ATTR_DEVX_UMEM_REG_PGSZ_BITMAP, a.pgsz_bitmap);
    c.optional(p);
    c.out_struct(mlx5::ATTR_DEVX_UMEM_REG_OUT_ID, id);
    let h = c.new_handle(mlx5::ATTR_DEVX_UMEM_REG_HANDLE);
    (c, h)
}

/// `MLX5_IB_METHOD_DEVX_UMEM_DEREG`: `EBUSY` while an object still uses the UMEM.
pub fn umem_dereg(dev: &Device, handle: u32) -> Result<()> {
    umem_dereg_call(handle).run(dev)
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn umem_dereg_call(handle: u32) -> Ioctl<'static> {
    let mut c = Ioctl::new(object::MLX5_DEVX_UMEM, mlx5::DEVX_UMEM_DEREG);
    c.handle(mlx5::ATTR_DEVX_UMEM_DEREG_HANDLE, handle);
    c
}

/// `MLX5_IB_METHOD_DEVX_ASYNC_CMD_FD_ALLOC`: the fd asynchronous queries answer on.
pub fn async_cmd_fd_alloc(dev: &Device) -> Result<OwnedFd> {
    let (mut c, i) = async_cmd_fd_alloc_call();
    c.run(dev)?;
    super::owned_fd(c.fd_out(i))
}

#[doc(hidden)]
/// The call built but not run: tests compare its bytes with libmlx5's.
pub fn async_cmd_fd_alloc_call() -> (Ioctl<'static>, AttrIdx) {
    let mut c = Ioctl::new(object::MLX5_DEVX_ASYNC_CMD_FD, mlx5::DEVX_ASYNC_CMD_FD_ALLOC);
    let i = c.new_fd(mlx5::ATTR_DEVX_ASYNC_CMD_FD_ALLOC_HANDLE);
    (c, i)
}

#[cfg(test)]
mod tests {
    //! Golden bytes: every number below is read from the installed
    //! `rdma/mlx5_user_ioctl_cmds.h` / `rdma/ib_user_ioctl_cmds.h` (the enum position
    //! of each id) and from how rdma-core's `cmd_ioctl.h` fills attributes (every one
    //! MANDATORY = 1; `fill_attr_in_uint32/64` inline with len 4/8; objects and fds
    //! with len 0 and the handle in `data`), not from this crate's constants.

    use super::*;

    /// The header's (length, object_id, method_id, num_attrs).
    type Hdr = (u16, u16, u16, u16);
    /// One attribute's (attr_id, len, flags, elem_id).
    type Attr = (u16, u16, u16, u8);

    /// The header and each attribute of a built call.
    fn shape(c: &Ioctl<'_>) -> (Hdr, Vec<Attr>) {
        let b = c.as_bytes();
        let u16_at = |o: usize| u16::from_ne_bytes([b[o], b[o + 1]]);
        let hdr = (u16_at(0), u16_at(2), u16_at(4), u16_at(6));
        let attrs = (0..hdr.3 as usize)
            .map(|i| {
                let o = 24 + 16 * i;
                (u16_at(o), u16_at(o + 2), u16_at(o + 4), b[o + 6])
            })
            .collect();
        (hdr, attrs)
    }

    fn data(c: &Ioctl<'_>, i: usize) -> u64 {
        let b = c.as_bytes();
        let o = 24 + 16 * i + 8;
        u64::from_ne_bytes(b[o..o + 8].try_into().unwrap())
    }

    #[test]
    fn general_cmd_is_devx_other_with_in_and_out_pointers() {
        let inbox = [0u8; 16];
        let mut out = [0u8; 4112];
        let c = general_cmd_call(&inbox, &mut out);
        let (hdr, attrs) = shape(&c);
        // MLX5_IB_OBJECT_DEVX 0x1000, MLX5_IB_METHOD_DEVX_OTHER 0x1000
        assert_eq!(hdr, (24 + 32, 0x1000, 0x1000, 2));
        // CMD_IN 0x1000 (16 bytes: a pointer), CMD_OUT 0x1001
        assert_eq!(attrs, vec![(0x1000, 16, 1, 0), (0x1001, 4112, 1, 0)]);
        assert_eq!(data(&c, 0), inbox.as_ptr() as u64);
        assert_eq!(data(&c, 1), out.as_ptr() as u64);
    }

    #[test]
    fn query_uar_and_eqn() {
        let mut v = 0u32;
        let c = query_uar_call(7, &mut v);
        let (hdr, attrs) = shape(&c);
        // METHOD_DEVX_QUERY_UAR 0x1001: USER_IDX 0x1000 (u32 inline), DEV_IDX 0x1001 (u32 out)
        assert_eq!(hdr, (56, 0x1000, 0x1001, 2));
        assert_eq!(attrs, vec![(0x1000, 4, 1, 0), (0x1001, 4, 1, 0)]);
        assert_eq!(data(&c, 0), 7);
        let p = &v as *const u32 as u64;
        let c = query_eqn_call(3, &mut v);
        let (hdr, attrs) = shape(&c);
        // METHOD_DEVX_QUERY_EQN 0x1002: USER_VEC 0x1000, DEV_EQN 0x1001
        assert_eq!(hdr, (56, 0x1000, 0x1002, 2));
        assert_eq!(attrs, vec![(0x1000, 4, 1, 0), (0x1001, 4, 1, 0)]);
        assert_eq!((data(&c, 0), data(&c, 1)), (3, p));
    }

    #[test]
    fn obj_methods() {
        let inbox = [0u8; 0x40];
        let mut out = [0u8; 0x10];
        let (c, _) = obj_create_call(&inbox, &mut out);
        let (hdr, attrs) = shape(&c);
        // MLX5_IB_OBJECT_DEVX_OBJ 0x1001, CREATE 0x1000: HANDLE 0x1000 (new idr), CMD_IN, CMD_OUT
        assert_eq!(hdr, (24 + 48, 0x1001, 0x1000, 3));
        assert_eq!(attrs, vec![(0x1000, 0, 1, 0), (0x1001, 0x40, 1, 0), (0x1002, 0x10, 1, 0)]);

        let c = obj_destroy_call(42);
        let (hdr, attrs) = shape(&c);
        assert_eq!(hdr, (40, 0x1001, 0x1001, 1));
        assert_eq!(attrs, vec![(0x1000, 0, 1, 0)]);
        assert_eq!(data(&c, 0), 42);

        for (method, c) in [(0x1002, obj_modify_call(5, &inbox, &mut out)), (0x1003, obj_query_call(5, &inbox, &mut [0u8; 0x10]))] {
            let (hdr, attrs) = shape(&c);
            assert_eq!(hdr, (72, 0x1001, method, 3));
            assert_eq!(attrs, vec![(0x1000, 0, 1, 0), (0x1001, 0x40, 1, 0), (0x1002, 0x10, 1, 0)]);
            assert_eq!(data(&c, 0), 5);
        }

        let c = obj_async_query_call(5, &inbox, 0x100, 0xdead_beef_0000_0001, 9);
        let (hdr, attrs) = shape(&c);
        // ASYNC_QUERY 0x1004: HANDLE 0x1000, CMD_IN 0x1001, OUT_LEN 0x1004 (CONST_IN: 8 inline), WR_ID 0x1003 (u64), FD 0x1002
        assert_eq!(hdr, (24 + 80, 0x1001, 0x1004, 5));
        assert_eq!(attrs, vec![(0x1000, 0, 1, 0), (0x1001, 0x40, 1, 0), (0x1004, 8, 1, 0), (0x1003, 8, 1, 0), (0x1002, 0, 1, 0)]);
        assert_eq!((data(&c, 2), data(&c, 3), data(&c, 4)), (0x100, 0xdead_beef_0000_0001, 9));
    }

    #[test]
    fn umem_reg_as_libmlx5_sends_it() {
        let mut id = 0u32;
        let a = UmemArgs { addr: 0x7f00_1234_5000, len: 0x3000, access: 1 | 2 | 4, pgsz_bitmap: UMEM_PGSZ_ANY };
        let (c, _) = umem_reg_call(&a, &mut id);
        let (hdr, attrs) = shape(&c);
        // MLX5_IB_OBJECT_DEVX_UMEM 0x1002, UMEM_REG 0x1000: ADDR 0x1001 (u64), LEN 0x1002
        // (u64), ACCESS 0x1003 (u32), PGSZ_BITMAP 0x1005 (u64 const, optional), OUT_ID
        // 0x1004 (u32 out), HANDLE 0x1000 (new) -- libmlx5 44's order in a trace
        assert_eq!(hdr, (24 + 96, 0x1002, 0x1000, 6));
        assert_eq!(attrs, vec![(0x1001, 8, 1, 0), (0x1002, 8, 1, 0), (0x1003, 4, 1, 0),
                               (0x1005, 8, 0, 0), (0x1004, 4, 1, 0), (0x1000, 0, 1, 0)]);
        assert_eq!((data(&c, 0), data(&c, 1), data(&c, 2)), (0x7f00_1234_5000, 0x3000, 7));
        // libmlx5: UINT64_MAX & ~(MLX5_ADAPTER_PAGE_SIZE - 1), adapter page 4096
        assert_eq!(data(&c, 3), 0xffff_ffff_ffff_f000);
        assert_eq!(data(&c, 4), &id as *const u32 as u64);

        let c = umem_dereg_call(3);
        let (hdr, attrs) = shape(&c);
        assert_eq!(hdr, (40, 0x1002, 0x1001, 1));
        assert_eq!(attrs, vec![(0x1000, 0, 1, 0)]);
    }

    #[test]
    fn async_cmd_fd_alloc_object() {
        let (c, _) = async_cmd_fd_alloc_call();
        let (hdr, attrs) = shape(&c);
        // MLX5_IB_OBJECT_DEVX_ASYNC_CMD_FD 0x1004 (after FLOW_MATCHER 0x1003), ALLOC 0x1000
        assert_eq!(hdr, (40, 0x1004, 0x1000, 1));
        assert_eq!(attrs, vec![(0x1000, 0, 1, 0)]);
    }
}
