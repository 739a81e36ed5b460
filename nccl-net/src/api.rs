//! The plugin's C entry points, one set shared by the v8, v9 and v10 tables (which
//! differ only in a few signatures: the v8 sizes are `int`, v10 adds a profiler
//! callback to init, a comm config to connect and profiler handles to isend/irecv).
//!
//! Every pointer NCCL passes back (comms, memory handles, requests, a connect's stage)
//! is checked against [`crate::live`] first: a wrong one gets `ncclInvalidArgument`
//! and a log line, never a dereference.
//!
//! # Safety
//!
//! Every `unsafe extern "C"` function here has the contract of its `ncclNet_v10_t`
//! member (net_v10.h): out-pointers writable, arrays of the stated length, buffers
//! registered with regMr kept allocated until deregMr. Those are NCCL's promises; the
//! functions check what can be checked (NULLs, counts, every object pointer) and
//! document nothing further per function.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_int, c_void};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use provider::Access;

use crate::comm::{Fail, RecvBuf, RecvComm, SendComm, MAX_RECVS};
use crate::conn::{self, Connecting, ListenComm, CONNECTING, STAGE_OFFSET};
use crate::device;
use crate::live::Live;
use crate::mr::{MrHandle, NcclBuffer, Registration};
use crate::sys::*;

/// A request NCCL tests.
pub enum Req {
    Send(Arc<(usize, SendComm)>, u64),
    Recv(Arc<(usize, RecvComm)>, u32),
}

pub static LISTENS: Live<ListenComm> = Live::new();
pub static SENDS: Live<(usize, SendComm)> = Live::new();
pub static RECVS: Live<(usize, RecvComm)> = Live::new();
pub static MRS: Live<MrHandle> = Live::new();
pub static REQS: Live<Req> = Live::new();

fn invalid(why: String) -> ncclResult_t {
    crate::warn!("{why}");
    NCCL_INVALID_ARGUMENT
}

fn code(r: Result<(), Fail>) -> ncclResult_t {
    match r {
        Ok(()) => NCCL_SUCCESS,
        Err(Fail(c)) => c,
    }
}

/// Keeps this library mapped for the life of the process: NCCL dlcloses a net plugin
/// when its last communicator is destroyed, while softhca's device thread (started
/// by the first open) still runs code from it.
fn pin_library() {
    // SAFETY: Dl_info is plain C data (pointers and a name): all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address of one of our functions and fills `info`.
    let ok = unsafe { libc::dladdr(pin_library as *const c_void, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return;
    }
    // SAFETY: RTLD_NOLOAD returns the already loaded library (taking a reference that
    // is never dropped); RTLD_NODELETE keeps it mapped past every dlclose.
    unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
}

pub unsafe extern "C" fn init(logger: ncclDebugLogger_t) -> ncclResult_t {
    crate::log::set_logger(logger);
    crate::log::ToNccl::install();
    pin_library();
    let devs = device::all();
    if devs.is_empty() {
        // init succeeds and devices() answers 0, rather than init failing: NCCL skips
        // a plugin with no device either way ("Failed to initialize NET plugin"), but
        // NCCL 2.28.9 calls the plugin's finalize on that path, and its v10
        // compatibility layer only fills finalize in after a successful v10 init: a
        // failing init makes NCCL call a NULL finalize (the rank's SIGSEGV in
        // docs/nccl.md). With a successful init the layer's finalize exists, NCCL
        // disables the plugin and falls back to its own transports.
        crate::warn!(
            "no usable device (softhca did not open and no /dev/infiniband device opened{}): the doorbell plugin offers 0 devices, NCCL uses its other transports",
            std::env::var(device::DEVICES_ENV).map(|v| format!("; {}={v}", device::DEVICES_ENV)).unwrap_or_default()
        );
        return NCCL_SUCCESS;
    }
    crate::info!("initialized: {} device(s): {}", devs.len(),
                 devs.iter().map(|d| d.name.to_string_lossy().into_owned()).collect::<Vec<_>>().join(", "));
    NCCL_SUCCESS
}

pub unsafe extern "C" fn init_v10(logger: ncclDebugLogger_t, _prof: ncclProfilerCallback_t) -> ncclResult_t {
    // SAFETY: forwarded.
    unsafe { init(logger) }
}

/// The context v11's init hands NCCL for a comm when there are devices: the plugin
/// keeps no per-comm state (one softhca, no traffic classes), so every comm gets the
/// address of this static, which finalize leaves alone.
static COMM_CONTEXT: u8 = 0;

/// v11's init, called once per communicator (v10's compatibility layer in NCCL called
/// init once per process). With no device the context is NULL: NCCL 2.28.9 then calls
/// finalize on it and, when its IB transport's init fails next (NCCL_IB_DISABLE, no
/// libibverbs), IB's finalize frees the same `comm->netContext`, which must not be a
/// pointer anyone freed (v10's layer frees its own allocation there: a double free).
pub unsafe extern "C" fn init_v11(ctx: *mut *mut c_void, _comm_id: u64, _config: *mut ncclNetCommConfig_v11_t, logger: ncclDebugLogger_t,
                                  _prof: ncclProfilerCallback_t) -> ncclResult_t {
    if ctx.is_null() {
        return invalid("init: NULL context".into());
    }
    // SAFETY: forwarded.
    let rc = unsafe { init(logger) };
    let c = if rc == NCCL_SUCCESS && !device::all().is_empty() { &COMM_CONTEXT as *const u8 as *mut c_void } else { std::ptr::null_mut() };
    // SAFETY: NCCL passes a writable pointer (checked non-null).
    unsafe { *ctx = c };
    rc
}

/// v11's finalize: nothing is held per comm (the devices stay open for the process, as
/// softhca's engine does).
pub unsafe extern "C" fn finalize_v11(_ctx: *mut c_void) -> ncclResult_t {
    NCCL_SUCCESS
}

pub unsafe extern "C" fn devices(ndev: *mut c_int) -> ncclResult_t {
    if ndev.is_null() {
        return invalid("devices: NULL ndev".into());
    }
    // SAFETY: NCCL passes a writable int.
    unsafe { *ndev = device::all().len() as c_int };
    NCCL_SUCCESS
}

/// The v9/v10 properties of device `dev`.
pub fn properties(dev: c_int) -> Result<ncclNetProperties_v10_t, ncclResult_t> {
    let Some(d) = device::get(dev) else { return Err(invalid(format!("getProperties of device {dev}: there are {}", device::all().len()))) };
    let mut devs = [0; NCCL_NET_MAX_DEVS_PER_NIC];
    devs[0] = dev;
    Ok(ncclNetProperties_v10_t {
        name: d.name.as_ptr() as *mut _,
        pciPath: d.pci_path.as_ref().map_or(std::ptr::null_mut(), |p| p.as_ptr() as *mut _),
        guid: d.guid,
        ptrSupport: d.ptr_support,
        regIsGlobal: 0,
        forceFlush: 0,
        speed: d.speed,
        port: device::PORT as c_int,
        latency: 0.0,
        maxComms: d.max_qp.max(1),
        maxRecvs: MAX_RECVS as c_int,
        netDeviceType: NCCL_NET_DEVICE_HOST,
        netDeviceVersion: NCCL_NET_DEVICE_INVALID_VERSION,
        vProps: ncclNetVDeviceProps_v10_t { ndevs: 1, devs },
        maxP2pBytes: MAX_NET_SIZE,
        maxCollBytes: MAX_COLLNET_SIZE,
    })
}

pub unsafe extern "C" fn get_properties(dev: c_int, props: *mut ncclNetProperties_v10_t) -> ncclResult_t {
    if props.is_null() {
        return invalid("getProperties: NULL props".into());
    }
    match properties(dev) {
        // SAFETY: NCCL passes a writable struct of this version.
        Ok(p) => unsafe { props.write(p) },
        Err(c) => return c,
    }
    NCCL_SUCCESS
}

pub unsafe extern "C" fn get_properties_v11(dev: c_int, props: *mut ncclNetProperties_v11_t) -> ncclResult_t {
    if props.is_null() {
        return invalid("getProperties: NULL props".into());
    }
    match properties(dev) {
        // SAFETY: NCCL passes a writable v11 struct.
        Ok(p) => unsafe {
            props.write(ncclNetProperties_v11_t {
                name: p.name,
                pciPath: p.pciPath,
                guid: p.guid,
                ptrSupport: p.ptrSupport,
                regIsGlobal: p.regIsGlobal,
                forceFlush: p.forceFlush,
                speed: p.speed,
                port: p.port,
                latency: p.latency,
                maxComms: p.maxComms,
                maxRecvs: p.maxRecvs,
                netDeviceType: p.netDeviceType,
                netDeviceVersion: p.netDeviceVersion,
                vProps: p.vProps,
                maxP2pBytes: p.maxP2pBytes,
                maxCollBytes: p.maxCollBytes,
                // No multi-request support: what NCCL's compatibility layers report
                // for every older table.
                maxMultiRequestSize: 1,
            })
        },
        Err(c) => return c,
    }
    NCCL_SUCCESS
}

pub unsafe extern "C" fn get_properties_v8(dev: c_int, props: *mut ncclNetProperties_v8_t) -> ncclResult_t {
    if props.is_null() {
        return invalid("getProperties: NULL props".into());
    }
    match properties(dev) {
        // SAFETY: NCCL passes a writable v8 struct.
        Ok(p) => unsafe {
            props.write(ncclNetProperties_v8_t {
                name: p.name,
                pciPath: p.pciPath,
                guid: p.guid,
                ptrSupport: p.ptrSupport,
                regIsGlobal: p.regIsGlobal,
                speed: p.speed,
                port: p.port,
                latency: p.latency,
                maxComms: p.maxComms,
                maxRecvs: p.maxRecvs,
                netDeviceType: p.netDeviceType,
                netDeviceVersion: p.netDeviceVersion,
            })
        },
        Err(c) => return c,
    }
    NCCL_SUCCESS
}

fn handle_bytes<'a>(handle: *mut c_void) -> Option<&'a mut [u8; NCCL_NET_HANDLE_MAXSIZE]> {
    // SAFETY: NCCL's handles are NCCL_NET_HANDLE_MAXSIZE writable bytes.
    (!handle.is_null()).then(|| unsafe { &mut *(handle as *mut [u8; NCCL_NET_HANDLE_MAXSIZE]) })
}

pub unsafe extern "C" fn listen(dev: c_int, handle: *mut c_void, listen_comm: *mut *mut c_void) -> ncclResult_t {
    let (Some(h), false) = (handle_bytes(handle), listen_comm.is_null()) else { return invalid("listen: NULL handle or comm".into()) };
    let Some(d) = device::get(dev) else { return invalid(format!("listen on device {dev}: there are {}", device::all().len())) };
    match conn::listen(dev as usize, d, h) {
        // SAFETY: checked non-null above.
        Ok(l) => unsafe { *listen_comm = LISTENS.insert(l) },
        Err(Fail(c)) => return c,
    }
    NCCL_SUCCESS
}

pub unsafe extern "C" fn connect(dev: c_int, handle: *mut c_void, send_comm: *mut *mut c_void, _dev_comm: *mut *mut ncclNetDeviceHandle_v8_t) -> ncclResult_t {
    let (Some(h), false) = (handle_bytes(handle), send_comm.is_null()) else { return invalid("connect: NULL handle or comm".into()) };
    // SAFETY: checked non-null.
    unsafe { *send_comm = std::ptr::null_mut() };
    let Some(d) = device::get(dev) else { return invalid(format!("connect on device {dev}: there are {}", device::all().len())) };
    let stage = u64::from_le_bytes(h[STAGE_OFFSET..STAGE_OFFSET + 8].try_into().unwrap()) as usize as *mut c_void;
    let c: Arc<Connecting> = if stage.is_null() {
        let addr = match conn::handle_addr(h) {
            Ok(a) => a,
            Err(Fail(c)) => return c,
        };
        let c = match conn::start_connect(addr) {
            Ok(c) => c,
            Err(Fail(c)) => return c,
        };
        let p = CONNECTING.insert(c);
        h[STAGE_OFFSET..STAGE_OFFSET + 8].copy_from_slice(&(p as u64).to_le_bytes());
        CONNECTING.get(p).unwrap()
    } else {
        match CONNECTING.get(stage) {
            Some(c) => c,
            None => return invalid(format!("connect: the handle names a connection in progress ({stage:p}) that does not exist")),
        }
    };
    let done = |h: &mut [u8; NCCL_NET_HANDLE_MAXSIZE]| {
        let p = u64::from_le_bytes(h[STAGE_OFFSET..STAGE_OFFSET + 8].try_into().unwrap()) as usize as *mut c_void;
        CONNECTING.remove(p);
        h[STAGE_OFFSET..STAGE_OFFSET + 8].fill(0);
    };
    match c.step(d) {
        Ok(Some(comm)) => {
            done(h);
            // SAFETY: checked non-null.
            unsafe { *send_comm = SENDS.insert((dev as usize, comm)) };
            NCCL_SUCCESS
        }
        Ok(None) => NCCL_SUCCESS,
        Err(Fail(code)) => {
            done(h);
            code
        }
    }
}

pub unsafe extern "C" fn listen_v11(_ctx: *mut c_void, dev: c_int, handle: *mut c_void, listen_comm: *mut *mut c_void) -> ncclResult_t {
    // SAFETY: forwarded.
    unsafe { listen(dev, handle, listen_comm) }
}

pub unsafe extern "C" fn connect_v11(_ctx: *mut c_void, dev: c_int, handle: *mut c_void, send_comm: *mut *mut c_void,
                                     dev_comm: *mut *mut ncclNetDeviceHandle_v8_t) -> ncclResult_t {
    // SAFETY: forwarded.
    unsafe { connect(dev, handle, send_comm, dev_comm) }
}

pub unsafe extern "C" fn connect_v10(dev: c_int, _config: *mut ncclNetCommConfig_v10_t, handle: *mut c_void, send_comm: *mut *mut c_void,
                                     dev_comm: *mut *mut ncclNetDeviceHandle_v8_t) -> ncclResult_t {
    // SAFETY: forwarded (the traffic class is not used: softhca has one queue).
    unsafe { connect(dev, handle, send_comm, dev_comm) }
}

pub unsafe extern "C" fn accept(listen_comm: *mut c_void, recv_comm: *mut *mut c_void, _dev_comm: *mut *mut ncclNetDeviceHandle_v8_t) -> ncclResult_t {
    if recv_comm.is_null() {
        return invalid("accept: NULL comm".into());
    }
    // SAFETY: checked non-null.
    unsafe { *recv_comm = std::ptr::null_mut() };
    let Some(l) = LISTENS.get(listen_comm) else { return invalid(format!("accept on {listen_comm:p}, which is no listen comm")) };
    let d = device::get(l.dev as c_int).unwrap();
    match l.accept(d) {
        // SAFETY: checked non-null.
        Ok(Some(c)) => unsafe { *recv_comm = RECVS.insert((l.dev, c)) },
        Ok(None) => {}
        Err(Fail(c)) => return c,
    }
    NCCL_SUCCESS
}

/// The device of a send or receive comm.
fn comm_dev(comm: *mut c_void) -> Option<usize> {
    SENDS.get(comm).map(|c| c.0).or_else(|| RECVS.get(comm).map(|c| c.0))
}

const MR_ACCESS: Access = Access::LOCAL_WRITE.union(Access::REMOTE_WRITE).union(Access::REMOTE_READ);

pub unsafe extern "C" fn reg_mr(comm: *mut c_void, data: *mut c_void, size: usize, ty: c_int, mhandle: *mut *mut c_void) -> ncclResult_t {
    if mhandle.is_null() {
        return invalid("regMr: NULL mhandle".into());
    }
    let Some(devi) = comm_dev(comm) else { return invalid(format!("regMr on {comm:p}, which is no comm of this plugin")) };
    let d = device::get(devi as c_int).unwrap();
    if ty & (NCCL_PTR_HOST | NCCL_PTR_CUDA) == 0 {
        return invalid(format!("regMr of type {ty:#x}"));
    }
    // SAFETY: NCCL keeps the buffer allocated until deregMr (the plugin contract), and
    // the handle made from it owns it until then.
    let buf = unsafe { NcclBuffer::new(data as u64, size) };
    let r = if ty & NCCL_PTR_CUDA != 0 {
        d.pd.reg_device(buf, MR_ACCESS).map(Registration::Device).map_err(|e| e.error)
    } else {
        d.pd.reg_owned(buf, MR_ACCESS).map(Registration::Host).map_err(|e| e.error)
    };
    match r {
        Ok(reg) => {
            // SAFETY: checked non-null.
            unsafe { *mhandle = MRS.insert(MrHandle { reg, dev: devi }) };
            NCCL_SUCCESS
        }
        Err(e) => {
            let hint = if ty & NCCL_PTR_CUDA != 0 { " (GPU memory is registered through regMrDmaBuf: leave NCCL_DMABUF_ENABLE on)" } else { "" };
            crate::warn!("regMr of {size} bytes at {data:p} (type {ty:#x}) on {}: {e}{hint}", d.name.to_string_lossy());
            NCCL_SYSTEM_ERROR
        }
    }
}

pub unsafe extern "C" fn reg_mr_dmabuf(comm: *mut c_void, data: *mut c_void, size: usize, ty: c_int, offset: u64, fd: c_int,
                                       mhandle: *mut *mut c_void) -> ncclResult_t {
    if mhandle.is_null() {
        return invalid("regMrDmaBuf: NULL mhandle".into());
    }
    if fd < 0 {
        // SAFETY: forwarded: NCCL may call regMrDmaBuf with fd -1 for host memory.
        return unsafe { reg_mr(comm, data, size, ty, mhandle) };
    }
    let Some(devi) = comm_dev(comm) else { return invalid(format!("regMrDmaBuf on {comm:p}, which is no comm of this plugin")) };
    let d = device::get(devi as c_int).unwrap();
    // SAFETY: NCCL's fd is open for the duration of the call; the registration takes its
    // own reference on the dma-buf.
    let bfd = unsafe { BorrowedFd::borrow_raw(fd) };
    match d.pd.reg_dmabuf_mr(bfd, offset, size, data as u64, MR_ACCESS) {
        Ok(mr) => {
            // SAFETY: checked non-null.
            unsafe { *mhandle = MRS.insert(MrHandle { reg: Registration::DmaBuf(mr), dev: devi }) };
            NCCL_SUCCESS
        }
        Err(e) => {
            crate::warn!("regMrDmaBuf of {size} bytes at {data:p} (fd {fd}, offset {offset}) on {}: {e}", d.name.to_string_lossy());
            NCCL_SYSTEM_ERROR
        }
    }
}

pub unsafe extern "C" fn dereg_mr(comm: *mut c_void, mhandle: *mut c_void) -> ncclResult_t {
    if comm_dev(comm).is_none() {
        return invalid(format!("deregMr on {comm:p}, which is no comm of this plugin"));
    }
    match MRS.remove(mhandle) {
        Some(_) => NCCL_SUCCESS,
        None => invalid(format!("deregMr of {mhandle:p}, which is no memory handle of this plugin")),
    }
}

/// A memory handle argument: `Ok(None)` for NULL, an error for an unknown one.
fn mh_arg(p: *mut c_void, dev: usize, what: &str) -> Result<Option<Arc<MrHandle>>, ncclResult_t> {
    if p.is_null() {
        return Ok(None);
    }
    match MRS.get(p) {
        Some(m) if m.dev == dev => Ok(Some(m)),
        Some(_) => Err(invalid(format!("{what}: memory handle {p:p} belongs to another device"))),
        None => Err(invalid(format!("{what}: {p:p} is no memory handle of this plugin"))),
    }
}

pub unsafe extern "C" fn isend_v9(comm: *mut c_void, data: *mut c_void, size: usize, tag: c_int, mhandle: *mut c_void,
                                  request: *mut *mut c_void) -> ncclResult_t {
    if request.is_null() {
        return invalid("isend: NULL request".into());
    }
    // SAFETY: checked non-null.
    unsafe { *request = std::ptr::null_mut() };
    let Some(c) = SENDS.get(comm) else { return invalid(format!("isend on {comm:p}, which is no send comm of this plugin")) };
    let mh = match mh_arg(mhandle, c.0, "isend") {
        Ok(m) => m,
        Err(code) => return code,
    };
    match c.1.isend(data as u64, size, tag, mh.as_deref()) {
        Ok(Some(id)) => {
            // The request keeps the comm alive (NCCL may close it first).
            let req = Req::Send(c.clone(), id);
            // SAFETY: checked non-null.
            unsafe { *request = REQS.insert(req) };
            NCCL_SUCCESS
        }
        Ok(None) => NCCL_SUCCESS,
        Err(Fail(code)) => code,
    }
}

pub unsafe extern "C" fn isend_v10(comm: *mut c_void, data: *mut c_void, size: usize, tag: c_int, mhandle: *mut c_void, _ph: *mut c_void,
                                   request: *mut *mut c_void) -> ncclResult_t {
    // SAFETY: forwarded.
    unsafe { isend_v9(comm, data, size, tag, mhandle, request) }
}

pub unsafe extern "C" fn isend_v8(comm: *mut c_void, data: *mut c_void, size: c_int, tag: c_int, mhandle: *mut c_void,
                                  request: *mut *mut c_void) -> ncclResult_t {
    if size < 0 {
        return invalid(format!("isend of {size} bytes"));
    }
    // SAFETY: forwarded.
    unsafe { isend_v9(comm, data, size as usize, tag, mhandle, request) }
}

/// irecv for every version (`size_at` reads the i-th size).
///
/// # Safety
/// NCCL's argument arrays hold `n` entries.
unsafe fn irecv_common(comm: *mut c_void, n: c_int, data: *mut *mut c_void, size_at: &dyn Fn(usize) -> Result<usize, ncclResult_t>, tags: *mut c_int,
                       mhandles: *mut *mut c_void, request: *mut *mut c_void) -> ncclResult_t {
    if request.is_null() {
        return invalid("irecv: NULL request".into());
    }
    // SAFETY: checked non-null. (On v10 NCCL may have stored its "optional completion"
    // marker here; a request is always returned, which NCCL accepts.)
    unsafe { *request = std::ptr::null_mut() };
    let Some(c) = RECVS.get(comm) else { return invalid(format!("irecv on {comm:p}, which is no receive comm of this plugin")) };
    if n < 1 || n as usize > MAX_RECVS || data.is_null() || tags.is_null() || mhandles.is_null() {
        return invalid(format!("irecv of {n} buffers (1 to {MAX_RECVS}, with data, sizes, tags and handles)"));
    }
    let n = n as usize;
    let mut mhs = Vec::with_capacity(n);
    let mut bufs = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: NCCL passes arrays of n entries.
        let (d, t, m) = unsafe { (*data.add(i), *tags.add(i), *mhandles.add(i)) };
        let size = match size_at(i) {
            Ok(s) => s,
            Err(c) => return c,
        };
        match mh_arg(m, c.0, "irecv") {
            Ok(mh) => mhs.push(mh),
            Err(code) => return code,
        }
        bufs.push((d as u64, size, t));
    }
    let rb: Vec<RecvBuf<'_>> = bufs.iter().zip(&mhs).map(|(&(data, size, tag), mh)| RecvBuf { data, size, tag, mh: mh.as_deref() }).collect();
    match c.1.irecv(&rb) {
        Ok(Some(seq)) => {
            // SAFETY: checked non-null.
            unsafe { *request = REQS.insert(Req::Recv(c.clone(), seq)) };
            NCCL_SUCCESS
        }
        Ok(None) => NCCL_SUCCESS,
        Err(Fail(code)) => code,
    }
}

pub unsafe extern "C" fn irecv_v9(comm: *mut c_void, n: c_int, data: *mut *mut c_void, sizes: *mut usize, tags: *mut c_int,
                                  mhandles: *mut *mut c_void, request: *mut *mut c_void) -> ncclResult_t {
    if sizes.is_null() {
        return invalid("irecv: NULL sizes".into());
    }
    // SAFETY: NCCL passes n sizes (irecv_common checks n before reading any).
    let at = |i: usize| Ok(unsafe { *sizes.add(i) });
    // SAFETY: forwarded.
    unsafe { irecv_common(comm, n, data, &at, tags, mhandles, request) }
}

pub unsafe extern "C" fn irecv_v10(comm: *mut c_void, n: c_int, data: *mut *mut c_void, sizes: *mut usize, tags: *mut c_int,
                                   mhandles: *mut *mut c_void, _ph: *mut *mut c_void, request: *mut *mut c_void) -> ncclResult_t {
    // SAFETY: forwarded.
    unsafe { irecv_v9(comm, n, data, sizes, tags, mhandles, request) }
}

pub unsafe extern "C" fn irecv_v8(comm: *mut c_void, n: c_int, data: *mut *mut c_void, sizes: *mut c_int, tags: *mut c_int,
                                  mhandles: *mut *mut c_void, request: *mut *mut c_void) -> ncclResult_t {
    if sizes.is_null() {
        return invalid("irecv: NULL sizes".into());
    }
    let at = |i: usize| {
        // SAFETY: NCCL passes n sizes.
        let s = unsafe { *sizes.add(i) };
        usize::try_from(s).map_err(|_| invalid(format!("irecv of {s} bytes")))
    };
    // SAFETY: forwarded.
    unsafe { irecv_common(comm, n, data, &at, tags, mhandles, request) }
}

pub unsafe extern "C" fn iflush(comm: *mut c_void, _n: c_int, _data: *mut *mut c_void, _sizes: *mut c_int, _mh: *mut *mut c_void,
                                request: *mut *mut c_void) -> ncclResult_t {
    if request.is_null() {
        return invalid("iflush: NULL request".into());
    }
    // Nothing to flush (no request: done at once): host memory needs none, and softhca
    // writes a peer's data into GPU memory before it delivers the completion.
    // SAFETY: checked non-null.
    unsafe { *request = std::ptr::null_mut() };
    if RECVS.get(comm).is_none() {
        return invalid(format!("iflush on {comm:p}, which is no receive comm of this plugin"));
    }
    NCCL_SUCCESS
}

pub unsafe extern "C" fn test(request: *mut c_void, done: *mut c_int, sizes: *mut c_int) -> ncclResult_t {
    if done.is_null() {
        return invalid("test: NULL done".into());
    }
    // SAFETY: checked non-null.
    unsafe { *done = 0 };
    let Some(r) = REQS.get(request) else { return invalid(format!("test of {request:p}, which is no request of this plugin")) };
    let r2 = match &*r {
        Req::Send(c, id) => c.1.test(*id).map(|o| o.map(|s| ([s, 0, 0, 0, 0, 0, 0, 0], 1usize))),
        Req::Recv(c, seq) => c.1.test(*seq),
    };
    match r2 {
        Ok(Some((sz, n))) => {
            REQS.remove(request);
            // SAFETY: checked non-null; NCCL's sizes array has room for every buffer of
            // the request (NCCL_PROXY_MAX_SUBS >= maxRecvs).
            unsafe {
                *done = 1;
                if !sizes.is_null() {
                    for (i, s) in sz.iter().enumerate().take(n) {
                        *sizes.add(i) = (*s).min(c_int::MAX as usize) as c_int;
                    }
                }
            }
            NCCL_SUCCESS
        }
        Ok(None) => NCCL_SUCCESS,
        Err(Fail(c)) => c,
    }
}

pub unsafe extern "C" fn close_send(comm: *mut c_void) -> ncclResult_t {
    code(SENDS.remove(comm).map(|_| ()).ok_or_else(|| Fail(invalid(format!("closeSend of {comm:p}, which is no send comm")))))
}

pub unsafe extern "C" fn close_recv(comm: *mut c_void) -> ncclResult_t {
    code(RECVS.remove(comm).map(|_| ()).ok_or_else(|| Fail(invalid(format!("closeRecv of {comm:p}, which is no receive comm")))))
}

pub unsafe extern "C" fn close_listen(comm: *mut c_void) -> ncclResult_t {
    code(LISTENS.remove(comm).map(|_| ()).ok_or_else(|| Fail(invalid(format!("closeListen of {comm:p}, which is no listen comm")))))
}
