//! # nccl-net: NCCL over doorbell
//!
//! `libnccl-net-doorbell.so`, an NCCL net plugin (`NCCL_NET_PLUGIN=doorbell`) that
//! carries NCCL's inter-node traffic over doorbell's provider: RC QPs on softhca or
//! a kernel RDMA device, as NCCL's own IB transport uses verbs. It exports the v11,
//! v10, v9 and v8 tables (NCCL 2.28 looks for v11 first and uses it as it is; older
//! tables go through its compatibility layers).
//!
//! Where things are:
//! - [`sys`]: the ABI (tables, properties, constants), with layout tests;
//! - [`api`]: the C entry points; [`live`]: which pointers handed to NCCL are valid;
//! - [`device`]: the devices and their properties;
//! - [`conn`]: listen/connect/accept over TCP, non-blocking; [`link`]: one QP;
//! - [`comm`]: isend/irecv/test (a receive FIFO, RDMA WRITE WITH IMM);
//! - [`mr`]: memory handles; [`log`]: NCCL's logger.

#![allow(non_upper_case_globals)]

pub mod api;
pub mod comm;
pub mod conn;
pub mod device;
pub mod link;
pub mod live;
pub mod log;
pub mod mr;
pub mod sys;

use sys::{ncclNet_v10_t, ncclNet_v11_t, ncclNet_v8_t, ncclNet_v9_t};

/// The name NCCL prints ("via NET/doorbell/0").
pub const NAME: &std::ffi::CStr = c"doorbell";

/// The v11 table (NCCL 2.28 uses this one: its newest, no compatibility layer between).
#[no_mangle]
pub static ncclNetPlugin_v11: ncclNet_v11_t = ncclNet_v11_t {
    name: NAME.as_ptr(),
    init: api::init_v11,
    devices: api::devices,
    getProperties: api::get_properties_v11,
    listen: api::listen_v11,
    connect: api::connect_v11,
    accept: api::accept,
    regMr: api::reg_mr,
    regMrDmaBuf: api::reg_mr_dmabuf,
    deregMr: api::dereg_mr,
    isend: api::isend_v10,
    irecv: api::irecv_v10,
    iflush: api::iflush,
    test: api::test,
    closeSend: api::close_send,
    closeRecv: api::close_recv,
    closeListen: api::close_listen,
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
    finalize: api::finalize_v11,
    setNetAttr: None,
};

/// The v10 table (for NCCL releases whose newest table is v10).
#[no_mangle]
pub static ncclNetPlugin_v10: ncclNet_v10_t = ncclNet_v10_t {
    name: NAME.as_ptr(),
    init: api::init_v10,
    devices: api::devices,
    getProperties: api::get_properties,
    listen: api::listen,
    connect: api::connect_v10,
    accept: api::accept,
    regMr: api::reg_mr,
    regMrDmaBuf: api::reg_mr_dmabuf,
    deregMr: api::dereg_mr,
    isend: api::isend_v10,
    irecv: api::irecv_v10,
    iflush: api::iflush,
    test: api::test,
    closeSend: api::close_send,
    closeRecv: api::close_recv,
    closeListen: api::close_listen,
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
};

/// The v9 table.
#[no_mangle]
pub static ncclNetPlugin_v9: ncclNet_v9_t = ncclNet_v9_t {
    name: NAME.as_ptr(),
    init: api::init,
    devices: api::devices,
    getProperties: api::get_properties,
    listen: api::listen,
    connect: api::connect,
    accept: api::accept,
    regMr: api::reg_mr,
    regMrDmaBuf: api::reg_mr_dmabuf,
    deregMr: api::dereg_mr,
    isend: api::isend_v9,
    irecv: api::irecv_v9,
    iflush: api::iflush,
    test: api::test,
    closeSend: api::close_send,
    closeRecv: api::close_recv,
    closeListen: api::close_listen,
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
};

/// The v8 table.
#[no_mangle]
pub static ncclNetPlugin_v8: ncclNet_v8_t = ncclNet_v8_t {
    name: NAME.as_ptr(),
    init: api::init,
    devices: api::devices,
    getProperties: api::get_properties_v8,
    listen: api::listen,
    connect: api::connect,
    accept: api::accept,
    regMr: api::reg_mr,
    regMrDmaBuf: api::reg_mr_dmabuf,
    deregMr: api::dereg_mr,
    isend: api::isend_v8,
    irecv: api::irecv_v8,
    iflush: api::iflush,
    test: api::test,
    closeSend: api::close_send,
    closeRecv: api::close_recv,
    closeListen: api::close_listen,
    getDeviceMr: None,
    irecvConsumed: None,
};
