//! The raw ABI NCCL loads a net plugin by: the function tables `ncclNet_v8_t`,
//! `ncclNet_v9_t`, `ncclNet_v10_t`, the device properties they fill, and the constants
//! they use. Layouts follow NCCL 2.28's `src/include/plugin/net/net_v{8,9,10}.h` (and
//! `nccl_net.h`, `nccl_common.h`, `nccl_device/net_device.h`) field for field; the
//! `layout` tests pin every size and offset, derived by hand from the declared types
//! on x86-64 (LP64: pointers, `size_t` and `uint64_t` 8 bytes, `int`, `float` and C
//! enums 4).
//!
//! Nothing here is safe to call: the tables are filled with `extern "C"` functions
//! from [`crate::api`].

#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_ulong, c_void};

/// `ncclResult_t`.
pub type ncclResult_t = c_int;
pub const NCCL_SUCCESS: ncclResult_t = 0;
pub const NCCL_SYSTEM_ERROR: ncclResult_t = 2;
pub const NCCL_INTERNAL_ERROR: ncclResult_t = 3;
pub const NCCL_INVALID_ARGUMENT: ncclResult_t = 4;
pub const NCCL_INVALID_USAGE: ncclResult_t = 5;
pub const NCCL_REMOTE_ERROR: ncclResult_t = 6;

/// `ncclDebugLogLevel`.
pub const NCCL_LOG_WARN: c_int = 2;
pub const NCCL_LOG_INFO: c_int = 3;
pub const NCCL_LOG_TRACE: c_int = 5;
/// `ncclDebugLogSubSys` bits.
pub const NCCL_INIT: c_ulong = 0x1;
pub const NCCL_NET: c_ulong = 0x10;

/// `ncclDebugLogger_t`: level, subsystem flags, file (or function), line, printf format.
pub type ncclDebugLogger_t = Option<unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...)>;
/// `ncclProfilerCallback_t` (kept, never called: the plugin defines no profiler events).
pub type ncclProfilerCallback_t = Option<unsafe extern "C" fn(*mut *mut c_void, c_int, *mut c_void, i64, *mut c_void) -> ncclResult_t>;

/// Buffer kinds in `ptrSupport` and `regMr`'s `type`.
pub const NCCL_PTR_HOST: c_int = 0x1;
pub const NCCL_PTR_CUDA: c_int = 0x2;
pub const NCCL_PTR_DMABUF: c_int = 0x4;
/// The most bytes a connection handle may take.
pub const NCCL_NET_HANDLE_MAXSIZE: usize = 128;
/// Requests NCCL keeps in flight per comm (at most).
pub const NCCL_NET_MAX_REQUESTS: usize = 32;
/// Physical devices behind one virtual NIC.
pub const NCCL_NET_MAX_DEVS_PER_NIC: usize = 4;
/// `MAX_NET_SIZE` (1 GiB) and `MAX_COLLNET_SIZE` (512 MiB): what NCCL assumes of a v8
/// plugin, and what this one reports in v9/v10.
pub const MAX_NET_SIZE: usize = 1 << 30;
pub const MAX_COLLNET_SIZE: usize = 1 << 29;
/// `ncclNetDeviceType`: host-driven (the proxy thread calls isend/irecv/test).
pub const NCCL_NET_DEVICE_HOST: c_int = 0;
/// `NCCL_NET_DEVICE_INVALID_VERSION`.
pub const NCCL_NET_DEVICE_INVALID_VERSION: c_int = 0;

/// `ncclNetDeviceHandle_v7_t` .. `_v10_t` (one typedef chain): device offload, unused
/// by a host plugin, declared for the pointer types.
#[repr(C)]
#[derive(Debug)]
pub struct ncclNetDeviceHandle_v8_t {
    pub netDeviceType: c_int,
    pub netDeviceVersion: c_int,
    pub handle: *mut c_void,
    pub size: usize,
    pub needsProxyProgress: c_int,
}

/// `ncclNetProperties_v8_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v8_t {
    pub name: *mut c_char,
    pub pciPath: *mut c_char,
    pub guid: u64,
    pub ptrSupport: c_int,
    pub regIsGlobal: c_int,
    pub speed: c_int,
    pub port: c_int,
    pub latency: f32,
    pub maxComms: c_int,
    pub maxRecvs: c_int,
    pub netDeviceType: c_int,
    pub netDeviceVersion: c_int,
}

/// `ncclNetVDeviceProps_v9_t` (and `_v10_t`, the same).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetVDeviceProps_v9_t {
    pub ndevs: c_int,
    pub devs: [c_int; NCCL_NET_MAX_DEVS_PER_NIC],
}

/// `ncclNetProperties_v9_t`; `ncclNetProperties_v10_t` declares the same fields.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v9_t {
    pub name: *mut c_char,
    pub pciPath: *mut c_char,
    pub guid: u64,
    pub ptrSupport: c_int,
    pub regIsGlobal: c_int,
    pub forceFlush: c_int,
    pub speed: c_int,
    pub port: c_int,
    pub latency: f32,
    pub maxComms: c_int,
    pub maxRecvs: c_int,
    pub netDeviceType: c_int,
    pub netDeviceVersion: c_int,
    pub vProps: ncclNetVDeviceProps_v9_t,
    pub maxP2pBytes: usize,
    pub maxCollBytes: usize,
}

pub type ncclNetProperties_v10_t = ncclNetProperties_v9_t;
pub type ncclNetVDeviceProps_v10_t = ncclNetVDeviceProps_v9_t;

/// `ncclNetCommConfig_v10_t`: the traffic class NCCL asks for (`-1`: undefined).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetCommConfig_v10_t {
    pub trafficClass: c_int,
}

/// `ncclNetProperties_v11_t`: v10's fields, then `maxMultiRequestSize`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v11_t {
    pub name: *mut c_char,
    pub pciPath: *mut c_char,
    pub guid: u64,
    pub ptrSupport: c_int,
    pub regIsGlobal: c_int,
    pub forceFlush: c_int,
    pub speed: c_int,
    pub port: c_int,
    pub latency: f32,
    pub maxComms: c_int,
    pub maxRecvs: c_int,
    pub netDeviceType: c_int,
    pub netDeviceVersion: c_int,
    pub vProps: ncclNetVDeviceProps_v10_t,
    pub maxP2pBytes: usize,
    pub maxCollBytes: usize,
    pub maxMultiRequestSize: c_int,
}

pub type ncclNetCommConfig_v11_t = ncclNetCommConfig_v10_t;

type DevHandle = *mut *mut ncclNetDeviceHandle_v8_t;

/// `ncclNet_v8_t`: sizes are `int`.
#[repr(C)]
pub struct ncclNet_v8_t {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(ncclDebugLogger_t) -> ncclResult_t,
    pub devices: unsafe extern "C" fn(*mut c_int) -> ncclResult_t,
    pub getProperties: unsafe extern "C" fn(c_int, *mut ncclNetProperties_v8_t) -> ncclResult_t,
    pub listen: unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub connect: unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub accept: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub regMr: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut *mut c_void) -> ncclResult_t,
    pub regMrDmaBuf: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, u64, c_int, *mut *mut c_void) -> ncclResult_t,
    pub deregMr: unsafe extern "C" fn(*mut c_void, *mut c_void) -> ncclResult_t,
    pub isend: unsafe extern "C" fn(*mut c_void, *mut c_void, c_int, c_int, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub irecv: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut c_int, *mut c_int, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub iflush: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut c_int, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub test: unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int) -> ncclResult_t,
    pub closeSend: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeRecv: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeListen: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub getDeviceMr: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> ncclResult_t>,
    pub irecvConsumed: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> ncclResult_t>,
}

/// `ncclNet_v9_t`: sizes become `size_t` (except iflush's), and makeVDevice is added.
#[repr(C)]
pub struct ncclNet_v9_t {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(ncclDebugLogger_t) -> ncclResult_t,
    pub devices: unsafe extern "C" fn(*mut c_int) -> ncclResult_t,
    pub getProperties: unsafe extern "C" fn(c_int, *mut ncclNetProperties_v9_t) -> ncclResult_t,
    pub listen: unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub connect: unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub accept: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub regMr: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut *mut c_void) -> ncclResult_t,
    pub regMrDmaBuf: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, u64, c_int, *mut *mut c_void) -> ncclResult_t,
    pub deregMr: unsafe extern "C" fn(*mut c_void, *mut c_void) -> ncclResult_t,
    pub isend: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub irecv: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut usize, *mut c_int, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub iflush: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut c_int, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub test: unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int) -> ncclResult_t,
    pub closeSend: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeRecv: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeListen: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub getDeviceMr: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> ncclResult_t>,
    pub irecvConsumed: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> ncclResult_t>,
    pub makeVDevice: Option<unsafe extern "C" fn(*mut c_int, *mut ncclNetVDeviceProps_v9_t) -> ncclResult_t>,
}

/// `ncclNet_v10_t`: init takes the profiler callback, connect the comm config, and
/// isend/irecv a profiler handle per request.
#[repr(C)]
pub struct ncclNet_v10_t {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(ncclDebugLogger_t, ncclProfilerCallback_t) -> ncclResult_t,
    pub devices: unsafe extern "C" fn(*mut c_int) -> ncclResult_t,
    pub getProperties: unsafe extern "C" fn(c_int, *mut ncclNetProperties_v10_t) -> ncclResult_t,
    pub listen: unsafe extern "C" fn(c_int, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub connect: unsafe extern "C" fn(c_int, *mut ncclNetCommConfig_v10_t, *mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub accept: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub regMr: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut *mut c_void) -> ncclResult_t,
    pub regMrDmaBuf: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, u64, c_int, *mut *mut c_void) -> ncclResult_t,
    pub deregMr: unsafe extern "C" fn(*mut c_void, *mut c_void) -> ncclResult_t,
    pub isend: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut c_void, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub irecv: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut usize, *mut c_int, *mut *mut c_void, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub iflush: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut c_int, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub test: unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int) -> ncclResult_t,
    pub closeSend: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeRecv: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeListen: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub getDeviceMr: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> ncclResult_t>,
    pub irecvConsumed: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> ncclResult_t>,
    pub makeVDevice: Option<unsafe extern "C" fn(*mut c_int, *mut ncclNetVDeviceProps_v10_t) -> ncclResult_t>,
}

/// `ncclNet_v11_t`: init is called once per communicator and returns a context, which
/// listen, connect, finalize and setNetAttr take; the traffic class moves from connect
/// to init.
#[repr(C)]
pub struct ncclNet_v11_t {
    pub name: *const c_char,
    pub init: unsafe extern "C" fn(*mut *mut c_void, u64, *mut ncclNetCommConfig_v11_t, ncclDebugLogger_t, ncclProfilerCallback_t) -> ncclResult_t,
    pub devices: unsafe extern "C" fn(*mut c_int) -> ncclResult_t,
    pub getProperties: unsafe extern "C" fn(c_int, *mut ncclNetProperties_v11_t) -> ncclResult_t,
    pub listen: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub connect: unsafe extern "C" fn(*mut c_void, c_int, *mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub accept: unsafe extern "C" fn(*mut c_void, *mut *mut c_void, DevHandle) -> ncclResult_t,
    pub regMr: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut *mut c_void) -> ncclResult_t,
    pub regMrDmaBuf: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, u64, c_int, *mut *mut c_void) -> ncclResult_t,
    pub deregMr: unsafe extern "C" fn(*mut c_void, *mut c_void) -> ncclResult_t,
    pub isend: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, c_int, *mut c_void, *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub irecv: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut usize, *mut c_int, *mut *mut c_void, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub iflush: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void, *mut c_int, *mut *mut c_void, *mut *mut c_void) -> ncclResult_t,
    pub test: unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int) -> ncclResult_t,
    pub closeSend: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeRecv: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub closeListen: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    pub getDeviceMr: Option<unsafe extern "C" fn(*mut c_void, *mut c_void, *mut *mut c_void) -> ncclResult_t>,
    pub irecvConsumed: Option<unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> ncclResult_t>,
    pub makeVDevice: Option<unsafe extern "C" fn(*mut c_int, *mut ncclNetVDeviceProps_v10_t) -> ncclResult_t>,
    pub finalize: unsafe extern "C" fn(*mut c_void) -> ncclResult_t,
    /// `ncclNetAttr_v11_t*`, never read here (NCCL checks for NULL before calling).
    pub setNetAttr: Option<unsafe extern "C" fn(*mut c_void, *mut c_void) -> ncclResult_t>,
}

// SAFETY: the tables are immutable statics; `name` points at a 'static C string and
// the rest are functions, all of which may be read from any thread.
unsafe impl Sync for ncclNet_v8_t {}
// SAFETY: as above.
unsafe impl Sync for ncclNet_v9_t {}
// SAFETY: as above.
unsafe impl Sync for ncclNet_v10_t {}
// SAFETY: as above.
unsafe impl Sync for ncclNet_v11_t {}

#[cfg(test)]
mod layout {
    //! Expected values derived by hand from the header declarations (x86-64 LP64 ABI:
    //! each field at the next multiple of its alignment, the struct padded to its
    //! largest alignment). A test that fails means a field was dropped, added or
    //! reordered against NCCL's header.
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn properties_v8() {
        // name 0, pciPath 8 (pointers); guid 16 (uint64_t); then eleven 4-byte fields
        // (ptrSupport, regIsGlobal, speed, port, latency (float), maxComms, maxRecvs,
        // netDeviceType (enum), netDeviceVersion) from 24 on: 24..60, padded to 64.
        type P = ncclNetProperties_v8_t;
        assert_eq!(offset_of!(P, guid), 16);
        assert_eq!(offset_of!(P, ptrSupport), 24);
        assert_eq!(offset_of!(P, regIsGlobal), 28);
        assert_eq!(offset_of!(P, speed), 32);
        assert_eq!(offset_of!(P, port), 36);
        assert_eq!(offset_of!(P, latency), 40);
        assert_eq!(offset_of!(P, maxComms), 44);
        assert_eq!(offset_of!(P, maxRecvs), 48);
        assert_eq!(offset_of!(P, netDeviceType), 52);
        assert_eq!(offset_of!(P, netDeviceVersion), 56);
        assert_eq!(size_of::<P>(), 64);
    }

    #[test]
    fn properties_v9_v10() {
        // As v8 with forceFlush after regIsGlobal (so speed .. netDeviceVersion move
        // up by 4: 36 .. 60); vProps { int ndevs; int devs[4]; } is 20 bytes at 64;
        // maxP2pBytes (size_t) at the next multiple of 8 after 84: 88; maxCollBytes 96;
        // size 104.
        type P = ncclNetProperties_v10_t;
        assert_eq!(offset_of!(P, forceFlush), 32);
        assert_eq!(offset_of!(P, speed), 36);
        assert_eq!(offset_of!(P, port), 40);
        assert_eq!(offset_of!(P, latency), 44);
        assert_eq!(offset_of!(P, maxComms), 48);
        assert_eq!(offset_of!(P, maxRecvs), 52);
        assert_eq!(offset_of!(P, netDeviceType), 56);
        assert_eq!(offset_of!(P, netDeviceVersion), 60);
        assert_eq!(offset_of!(P, vProps), 64);
        assert_eq!(size_of::<ncclNetVDeviceProps_v10_t>(), 20);
        assert_eq!(offset_of!(P, maxP2pBytes), 88);
        assert_eq!(offset_of!(P, maxCollBytes), 96);
        assert_eq!(size_of::<P>(), 104);
    }

    #[test]
    fn properties_v11() {
        // v10's layout (104 bytes), then maxMultiRequestSize (int) at 104, padded to
        // the struct's 8-byte alignment: 112.
        type P = ncclNetProperties_v11_t;
        assert_eq!(offset_of!(P, vProps), 64);
        assert_eq!(offset_of!(P, maxCollBytes), 96);
        assert_eq!(offset_of!(P, maxMultiRequestSize), 104);
        assert_eq!(size_of::<P>(), 112);
    }

    #[test]
    fn device_handle() {
        // two ints (0, 4), a pointer (8), a size_t (16), an int (24), padded to 32.
        type H = ncclNetDeviceHandle_v8_t;
        assert_eq!(offset_of!(H, handle), 8);
        assert_eq!(offset_of!(H, size), 16);
        assert_eq!(offset_of!(H, needsProxyProgress), 24);
        assert_eq!(size_of::<H>(), 32);
    }

    #[test]
    fn tables() {
        // Every member is a pointer (name, then functions), 8 bytes each, in header
        // order. v8: name + 18 functions (init .. irecvConsumed) = 19 slots; v9 and
        // v10 add makeVDevice: 20 slots.
        assert_eq!(size_of::<ncclNet_v8_t>(), 19 * 8);
        assert_eq!(offset_of!(ncclNet_v8_t, isend), 10 * 8);
        assert_eq!(offset_of!(ncclNet_v8_t, test), 13 * 8);
        assert_eq!(offset_of!(ncclNet_v8_t, irecvConsumed), 18 * 8);
        assert_eq!(size_of::<ncclNet_v9_t>(), 20 * 8);
        assert_eq!(offset_of!(ncclNet_v9_t, makeVDevice), 19 * 8);
        assert_eq!(size_of::<ncclNet_v10_t>(), 20 * 8);
        assert_eq!(offset_of!(ncclNet_v10_t, regMrDmaBuf), 8 * 8);
        assert_eq!(offset_of!(ncclNet_v10_t, closeListen), 16 * 8);
        assert_eq!(size_of::<ncclNetCommConfig_v10_t>(), 4);
        // v11: v10's 20 slots, then finalize and setNetAttr: 22; listen and connect
        // gain the context argument but keep their slots.
        assert_eq!(size_of::<ncclNet_v11_t>(), 22 * 8);
        assert_eq!(offset_of!(ncclNet_v11_t, listen), 4 * 8);
        assert_eq!(offset_of!(ncclNet_v11_t, isend), 10 * 8);
        assert_eq!(offset_of!(ncclNet_v11_t, makeVDevice), 19 * 8);
        assert_eq!(offset_of!(ncclNet_v11_t, finalize), 20 * 8);
        assert_eq!(offset_of!(ncclNet_v11_t, setNetAttr), 21 * 8);
    }
}
