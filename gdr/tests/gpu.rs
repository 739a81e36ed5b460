//! gdr on a real GPU: buffers, their dma-buf export as NVIDIA's driver makes it, and
//! the resolver and peer memory softhca uses, driven directly (no softhca device), so
//! that these parts are checked on their own. Without a CUDA driver every test prints
//! SKIP (the no-driver path is tested in gdr's unit tests and cli/tests/gdr_cli.rs).
//!
//! Expected values come from outside the code under test: the fdinfo the kernel prints
//! for the new dma-buf (exporter `nv_dmabuf`, `size:` the host-page range, as captured
//! on the H200 in fixtures/h200-cmd/dmabuf.txt), and bytes written through one path
//! (CUDA copies of the buffer) read back through the other (the peer memory).

use std::os::fd::AsRawFd;
use std::sync::Arc;

use cudarc::driver::sys;
use gdr::buffer::GpuBuffer;
use gdr::cuda::Gpu;
use gdr::peer::{CudaResolver, NV_EXPORTER};
use nix::errno::Errno;
use softhca::peer::{DmabufRequest, PeerMemory, PeerResolver};

fn gpu() -> Option<Gpu> {
    match Gpu::open(0) {
        Ok(g) => Some(g),
        Err(e) => {
            testkit::skip(testkit::Need::Gpu, format!("{e} (run on a node with an NVIDIA GPU and driver)"));
            None
        }
    }
}

fn fdinfo(fd: i32) -> (String, u64) {
    let t = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}")).unwrap();
    let field = |k: &str| t.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_string()).unwrap_or_default();
    (field("exp_name:"), field("size:").parse().unwrap_or(0))
}

fn resolve(req: &DmabufRequest<'_>) -> Result<(Arc<dyn PeerMemory>, u64), Errno> {
    CudaResolver.resolve(req).map(|o| o.expect("an nv_dmabuf is the resolver's"))
}

/// An export at an unaligned offset: fdinfo says nv_dmabuf of whole host pages, the
/// registry knows it, and the resolver maps it to the right device address even with
/// a zero iova; bytes written through the peer memory are read back with cuMemcpy and
/// the other way round; atomics return the old value and leave the new one.
#[test]
fn export_registry_and_peer_copies() {
    let Some(g) = gpu() else { return };
    let b = GpuBuffer::new(&g, (3 << 20) + 123).unwrap();
    assert_eq!(b.alloc_len(), (3 << 20) + (64 << 10), "rounded up to 64 KiB");
    let off = 4096 + 5;
    let e = b.export_dmabuf(off, 1 << 20).unwrap();
    let (exp, size) = fdinfo(e.fd.as_raw_fd());
    assert_eq!(exp, NV_EXPORTER);
    assert_eq!(size, e.size);
    assert_eq!((e.offset, e.size, e.iova), (5, (1 << 20) + 4096, b.device_ptr() + off as u64));
    let rec = gdr::exports::lookup(e.fd()).expect("recorded");
    assert_eq!((rec.base, rec.size, rec.ordinal), (b.device_ptr() + 4096, e.size, 0));

    let req = DmabufRequest { fd: e.fd(), exporter: NV_EXPORTER, size, offset: e.offset, length: e.len, iova: 0 };
    let (mem, addr) = resolve(&req).unwrap();
    assert_eq!(addr, b.device_ptr() + off as u64);

    // Peer write, CUDA read; then from another thread (softhca's engine), which has no
    // context current before and must have none after.
    let data: Vec<u8> = (0..(1 << 20) + 77).map(|i: u32| (i * 31 + 7) as u8).collect();
    mem.write(addr, &data[..(1 << 20) - 5]).unwrap();
    let mut back = vec![0u8; (1 << 20) - 5];
    b.copy_to_host(off, &mut back).unwrap();
    assert!(back == data[..(1 << 20) - 5], "peer write seen by cuMemcpyDtoH");
    let m2 = mem.clone();
    let t = std::thread::spawn(move || {
        let mut got = vec![0u8; 4096];
        m2.read(addr + 100, &mut got).unwrap();
        let mut cur: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: writes the calling thread's current context.
        unsafe { sys::cuCtxGetCurrent(&mut cur) }.result().unwrap();
        (got, cur.is_null())
    });
    let (got, none_current) = t.join().unwrap();
    assert!(got == data[100..4196], "peer read from another thread");
    assert!(none_current, "the peer copy left a context current on the engine thread");

    // CUDA write, peer read.
    b.copy_from_host(off + 8192, b"written by cuMemcpyHtoD").unwrap();
    let mut r = [0u8; 23];
    mem.read(addr + 8192, &mut r).unwrap();
    assert_eq!(&r, b"written by cuMemcpyHtoD");

    // Atomics: FAA returns the old value; CAS swaps only on a match.
    let w = addr + 8 * 1000 - 5; // 8-aligned: addr is 5 past an aligned base
    assert_eq!(w % 8, 0);
    b.copy_from_host((w - b.device_ptr()) as usize, &40u64.to_ne_bytes()).unwrap();
    assert_eq!(mem.atomic_u64(w, None, 2).unwrap(), 40);
    assert_eq!(mem.atomic_u64(w, Some(41), 7).unwrap(), 42, "a failed compare returns the value");
    assert_eq!(mem.atomic_u64(w, Some(42), 7).unwrap(), 42);
    let mut v = [0u8; 8];
    b.copy_to_host((w - b.device_ptr()) as usize, &mut v).unwrap();
    assert_eq!(u64::from_ne_bytes(v), 7);
}

/// A dma-buf gdr did not export (made here directly, as perftest does): the iova
/// convention is checked against the allocation; an iova outside it, or not a device
/// address at all, is refused with EOPNOTSUPP.
#[test]
fn iova_convention_for_foreign_exports() {
    let Some(g) = gpu() else { return };
    let b = GpuBuffer::new(&g, 1 << 20).unwrap();
    g.bind().unwrap();
    let mut fd: i32 = -1;
    // SAFETY: DMA_BUF_FD writes an int; the range is the buffer's first 64 KiB (aligned).
    unsafe {
        sys::cuMemGetHandleForAddressRange(
            (&mut fd as *mut i32).cast(),
            b.device_ptr(),
            64 << 10,
            sys::CUmemRangeHandleType::CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD,
            0,
        )
    }
    .result()
    .unwrap();
    // SAFETY: the driver made this fd for us.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    use std::os::fd::AsFd;
    assert!(gdr::exports::lookup(fd.as_fd()).is_none(), "not exported through gdr");
    let req = |iova| DmabufRequest { fd: fd.as_fd(), exporter: NV_EXPORTER, size: 64 << 10, offset: 0, length: 64 << 10, iova };
    let (mem, addr) = resolve(&req(b.device_ptr())).unwrap();
    assert_eq!(addr, b.device_ptr());
    mem.write(addr + 1, b"perftest").unwrap();
    let mut r = [0u8; 8];
    b.copy_to_host(1, &mut r).unwrap();
    assert_eq!(&r, b"perftest");
    assert_eq!(resolve(&req(b.device_ptr() + (1 << 20) - 4096)).err(), Some(Errno::EOPNOTSUPP), "runs past the allocation");
    assert_eq!(resolve(&req(0x1000)).err(), Some(Errno::EOPNOTSUPP), "not a device address");
}

/// Exports are forgotten with their buffer: a later lookup of the fd finds nothing
/// (the resolver would not hand out freed memory through the registry).
#[test]
fn exports_die_with_the_buffer() {
    let Some(g) = gpu() else { return };
    let b = GpuBuffer::new(&g, 4096).unwrap();
    let e = b.export_dmabuf(0, 4096).unwrap();
    assert!(gdr::exports::lookup(e.fd()).is_some());
    drop(b);
    assert!(gdr::exports::lookup(e.fd()).is_none());
}
