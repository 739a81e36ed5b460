//! Question 1.5 of the study notes, run: unified (managed) memory, its hints, and the page
//! faults it takes, timed.
//!
//! ```text
//! cargo run --release -p gdr --example unified_memory            # GPU 0, 256 MiB
//! cargo run --release -p gdr --example unified_memory -- 0 64    # GPU 0, 64 MiB
//! ```
//!
//! What it does, in order:
//! 1. the device attributes that say which unified-memory model the GPU has
//!    (`CONCURRENT_MANAGED_ACCESS`, `PAGEABLE_MEMORY_ACCESS`, ...);
//! 2. a GPU kernel that adds 1 to every `u32` of a buffer, written by hand in PTX and
//!    JIT-compiled by the driver (`cuModuleLoadDataEx`), so no nvcc is needed; if the
//!    driver refuses every PTX variant it falls back to `cuMemsetD32Async` as the GPU's
//!    touch, and says so;
//! 3. the page faults: on one `cuMemAllocManaged` buffer, the CPU's first touch, the GPU's
//!    touch without prefetch (GPU faults migrate each page), the GPU again (resident), the
//!    CPU after the GPU wrote (CPU faults migrate back), then `cuMemPrefetchAsync` to the
//!    GPU, the GPU's touch after it, `cuMemPrefetchAsync` to the CPU, the CPU's touch
//!    after it, each timed with its bandwidth, beside the same kernel on `cuMemAlloc`
//!    memory (no faults possible) as the reference;
//! 4. the hints: `cuMemAdvise` SET_READ_MOSTLY (a CPU read after a GPU prefetch, with and
//!    without it), SET_PREFERRED_LOCATION to the GPU and to the CPU, SET_ACCESSED_BY (the
//!    GPU then reaches CPU-resident pages through a mapping, without migrating them),
//!    each read back with `cuMemRangeGetAttribute`;
//! 5. `cuStreamAttachMemAsync` (SINGLE, then GLOBAL) on a small buffer.
//!
//! Every word is checked after each step (each GPU touch adds 1), so a step that did not
//! happen shows as a FAIL.
//!
//! Sizes are small on purpose: never more than 1 GiB and never more than a quarter of the
//! GPU's free memory (`cuMemGetInfo` first): oversubscribing managed memory can stall a
//! GPU for a long time.
//!
//! CUDA 13 signatures: `cuMemAdvise` and `cuMemPrefetchAsync` take a `CUmemLocation`
//! (the `_v2` entry points of CUDA 12.2, which CUDA 13's header calls by the plain name).
//!
//! Without a CUDA driver it prints one line and exits with status 3.

mod common;

use std::ffi::{c_void, CString};
use std::time::{Duration, Instant};

use common::{cu, device_attribute, dur, gbps, size};
use cudarc::driver::sys;
use sys::CUdevice_attribute_enum as A;
use sys::CUmem_advise_enum as Advice;
use sys::CUmem_range_attribute_enum as R;

/// `CU_DEVICE_CPU` of cuda.h: the CPU in range attributes.
const CU_DEVICE_CPU: i32 = -1;
/// `CU_DEVICE_INVALID` of cuda.h: no location / an unused slot.
const CU_DEVICE_INVALID: i32 = -2;
/// Threads a block for the kernel.
const BLOCK: u32 = 256;

/// The kernel, `add_one(u32 *buf, u64 n)`: thread `i = ctaid.x * ntid.x + tid.x` adds 1
/// to `buf[i]` if `i < n`. Hand-written PTX (what nvcc would emit for the one-line CUDA C
/// kernel); `.target` is filled in per attempt.
const PTX_BODY: &str = r#"
.address_size 64

.visible .entry add_one(
    .param .u64 add_one_buf,
    .param .u64 add_one_n
)
{
    .reg .pred  %p<2>;
    .reg .b32   %r<6>;
    .reg .b64   %rd<9>;

    ld.param.u64        %rd1, [add_one_buf];
    ld.param.u64        %rd2, [add_one_n];
    mov.u32             %r1, %ctaid.x;
    mov.u32             %r2, %ntid.x;
    mov.u32             %r3, %tid.x;
    mul.wide.u32        %rd3, %r1, %r2;
    cvt.u64.u32         %rd4, %r3;
    add.s64             %rd5, %rd3, %rd4;
    setp.ge.u64         %p1, %rd5, %rd2;
    @%p1 bra            DONE;
    cvta.to.global.u64  %rd6, %rd1;
    shl.b64             %rd7, %rd5, 2;
    add.s64             %rd8, %rd6, %rd7;
    ld.global.u32       %r4, [%rd8];
    add.s32             %r5, %r4, 1;
    st.global.u32       [%rd8], %r5;
DONE:
    ret;
}
"#;

/// The CPU's pattern at word `i`, before any GPU touch.
fn pattern(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ 0x5EED_0000
}

fn main() {
    common::require_cuda("unified_memory");
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: unified_memory [GPU [MiB]]";
    let ordinal: usize = match args.first().map(|s| s.parse()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => bad_args(usage),
    };
    let mib: usize = match args.get(1).map(|s| s.parse()) {
        None => 256,
        Some(Ok(n)) if (1..=1024).contains(&n) => n,
        Some(_) => bad_args(usage),
    };
    if args.len() > 2 {
        bad_args(usage);
    }
    if let Err(e) = run(ordinal, mib << 20) {
        println!("FAIL: {e}");
        std::process::exit(1);
    }
}

fn bad_args(usage: &str) -> ! {
    eprintln!("unified_memory: {usage} (MiB from 1 to 1024)");
    std::process::exit(2);
}

/// How the GPU touches a buffer: the PTX kernel (read + add 1 + write every word) or,
/// where the driver would not load it, cuMemsetD32 (write only).
enum Touch {
    Kernel(sys::CUfunction),
    Memset,
}

/// Each GPU touch's effect on the buffer's words.
#[derive(Clone, Copy)]
enum Expect {
    /// `pattern(i) + k`: the kernel ran `k` times since the CPU wrote the pattern.
    Plus(u32),
    /// Every word this value (the memset fallback).
    All(u32),
}

const MEMSET_VALUE: u32 = 0x600D_F00D;

struct Um {
    ordinal: i32,
    stream: sys::CUstream,
    touch: Touch,
    start: sys::CUevent,
    end: sys::CUevent,
}

fn run(ordinal: usize, want: usize) -> Result<(), String> {
    println!("# unified_memory: managed memory, prefetch, advice and page faults (question 1.5)");
    let gpu = gdr::cuda::Gpu::open(ordinal).map_err(|e| e.to_string())?;
    gpu.bind().map_err(|e| e.to_string())?;
    let dev = gpu.cu_device();
    let cc = (
        device_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
        device_attribute(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
    );
    println!(
        "GPU {ordinal}: {} ({}), compute capability {}.{}",
        gpu.name().unwrap_or_default(),
        gpu.pci_bus_id().unwrap_or_default(),
        cc.0,
        cc.1
    );

    println!("\n## 1. device attributes (cuDeviceGetAttribute)");
    let attrs = [
        (
            A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
            "MANAGED_MEMORY",
            "cuMemAllocManaged works",
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
            "CONCURRENT_MANAGED_ACCESS",
            "CPU and GPU may touch managed memory at the same time; pages migrate on fault",
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
            "PAGEABLE_MEMORY_ACCESS",
            "the GPU may touch plain malloc'd memory (HMM or ATS)",
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES,
            "PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES",
            "...through the CPU's page tables (ATS, e.g. Grace Hopper)",
        ),
        (
            A::CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST,
            "DIRECT_MANAGED_MEM_ACCESS_FROM_HOST",
            "the CPU reaches GPU-resident managed pages without migrating them",
        ),
    ];
    let mut managed = 0;
    let mut concurrent = 0;
    for (attr, name, what) in attrs {
        let v = device_attribute(dev, attr);
        match &v {
            Ok(v) => println!("CU_DEVICE_ATTRIBUTE_{name:<46} {v}   ({what})"),
            Err(e) => println!("CU_DEVICE_ATTRIBUTE_{name:<46} {e}"),
        }
        match attr {
            A::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY => managed = v.unwrap_or(0),
            A::CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS => concurrent = v.unwrap_or(0),
            _ => {}
        }
    }
    if managed == 0 {
        return Err(
            "the GPU has no managed memory (CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 0)".into(),
        );
    }
    for sym in [
        "cuMemAdvise_v2",
        "cuMemPrefetchAsync_v2",
        "cuEventElapsedTime_v2",
    ] {
        if !common::has_cuda_symbol(sym) {
            return Err(format!(
                "libcuda has no {sym} (a driver older than CUDA 12.2)"
            ));
        }
    }

    let (free, total) = common::mem_info()?;
    // A quarter of free memory at most (the device buffer of the same size is the
    // reference), whole 2 MiB pages, never above 1 GiB.
    let bytes = want.min(1 << 30).min(free / 4) & !((2 << 20) - 1);
    println!(
        "cuMemGetInfo: {} free of {}; buffer {} (asked {}; at most 1 GiB and free/4)",
        size(free & !((1 << 20) - 1)),
        size(total & !((1 << 20) - 1)),
        size(bytes),
        size(want)
    );
    if bytes < 2 << 20 {
        return Err(format!("too little free GPU memory ({} free)", size(free)));
    }

    println!("\n## 2. the GPU's touch");
    let touch = load_kernel(cc)?;
    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: writes one stream handle; a context is current.
    cu("cuStreamCreate", unsafe {
        sys::cuStreamCreate(
            &mut stream,
            sys::CUstream_flags_enum::CU_STREAM_NON_BLOCKING as u32,
        )
    })?;
    let (mut start, mut end): (sys::CUevent, sys::CUevent) =
        (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: each writes one event handle.
    cu("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut start, 0)
    })?;
    // SAFETY: as above.
    cu("cuEventCreate", unsafe { sys::cuEventCreate(&mut end, 0) })?;
    let um = Um {
        ordinal: ordinal as i32,
        stream,
        touch,
        start,
        end,
    };

    let r = faults(&um, bytes, concurrent)
        .and_then(|()| advice(&um, bytes))
        .and_then(|()| attach(&um));

    // SAFETY: handles created above, unused after this.
    unsafe {
        sys::cuEventDestroy_v2(um.start);
        sys::cuEventDestroy_v2(um.end);
        sys::cuStreamDestroy_v2(um.stream);
    }
    r?;
    println!("\nPASS");
    Ok(())
}

/// Loads the PTX kernel, trying `.target`s from the oldest (the driver JIT-compiles any
/// older target for the GPU it runs on) to the GPU's own; prints each refusal with the
/// JIT's log. Falls back to cuMemsetD32 if none loads.
fn load_kernel(cc: (i32, i32)) -> Result<Touch, String> {
    let own = format!("sm_{}{}", cc.0, cc.1);
    let mut attempts = vec![("8.0", "sm_52".to_string()), ("8.0", "sm_75".to_string())];
    // PTX ISA 8.0 (CUDA 12.0) knows targets up to sm_90.
    if (cc.0, cc.1) <= (9, 0) && !attempts.iter().any(|(_, t)| *t == own) {
        attempts.push(("8.0", own));
    }
    for (ver, target) in attempts {
        let ptx = CString::new(format!(".version {ver}\n.target {target}{PTX_BODY}"))
            .expect("no NUL in PTX");
        let mut log = vec![0u8; 8192];
        let mut opts = [
            sys::CUjit_option_enum::CU_JIT_ERROR_LOG_BUFFER,
            sys::CUjit_option_enum::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
        ];
        // The JIT's option values are pointer-sized slots: a buffer address, and a size
        // passed as the slot's integer value.
        let mut vals = [log.as_mut_ptr() as *mut c_void, log.len() as *mut c_void];
        let mut module: sys::CUmodule = std::ptr::null_mut();
        let t = Instant::now();
        // SAFETY: `ptx` is NUL-terminated PTX text; two options with their values, the
        // log buffer `log.len()` bytes long and alive for the call.
        let r = unsafe {
            sys::cuModuleLoadDataEx(
                &mut module,
                ptx.as_ptr().cast(),
                opts.len() as u32,
                opts.as_mut_ptr(),
                vals.as_mut_ptr(),
            )
        };
        let el = t.elapsed();
        if r != sys::CUresult::CUDA_SUCCESS {
            let n = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            println!(
                "cuModuleLoadDataEx(PTX .version {ver} .target {target}): {}: {}",
                common::cu_error_name(r),
                String::from_utf8_lossy(&log[..n])
                    .trim()
                    .replace('\n', " | ")
            );
            continue;
        }
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        cu("cuModuleGetFunction", unsafe {
            sys::cuModuleGetFunction(&mut f, module, c"add_one".as_ptr())
        })?;
        println!(
            "kernel add_one (hand-written PTX, .version {ver} .target {target}) JIT-compiled and loaded by cuModuleLoadDataEx in {}",
            dur(el)
        );
        println!("GPU touch = add_one: every thread reads one u32, adds 1, writes it back");
        return Ok(Touch::Kernel(f));
    }
    println!("the driver loaded no PTX variant: GPU touch = cuMemsetD32Async (writes only)");
    Ok(Touch::Memset)
}

impl Um {
    /// The GPU touches `words` u32 at `ptr` on the stream; returns the time between
    /// events recorded around it.
    fn gpu_touch(&self, ptr: sys::CUdeviceptr, words: usize) -> Result<Duration, String> {
        // SAFETY: valid event and stream.
        cu("cuEventRecord", unsafe {
            sys::cuEventRecord(self.start, self.stream)
        })?;
        match self.touch {
            Touch::Kernel(f) => {
                let mut buf = ptr;
                let mut n = words as u64;
                let mut params = [
                    &mut buf as *mut u64 as *mut c_void,
                    &mut n as *mut u64 as *mut c_void,
                ];
                let grid = words.div_ceil(BLOCK as usize) as u32;
                // SAFETY: `add_one(u64 buf, u64 n)` takes two 8-byte parameters, passed
                // as pointers to them; `ptr` addresses `words` u32 valid on this GPU.
                cu("cuLaunchKernel", unsafe {
                    sys::cuLaunchKernel(
                        f,
                        grid,
                        1,
                        1,
                        BLOCK,
                        1,
                        1,
                        0,
                        self.stream,
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                })?;
            }
            Touch::Memset => {
                // SAFETY: `ptr` addresses `words` u32.
                cu("cuMemsetD32Async", unsafe {
                    sys::cuMemsetD32Async(ptr, MEMSET_VALUE, words, self.stream)
                })?;
            }
        }
        self.timed_end()
    }

    /// Records the end event, waits for it, returns the time since the start event.
    fn timed_end(&self) -> Result<Duration, String> {
        // SAFETY: valid event and stream.
        cu("cuEventRecord", unsafe {
            sys::cuEventRecord(self.end, self.stream)
        })?;
        // SAFETY: a valid event.
        cu("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.end)
        })?;
        let mut ms = 0f32;
        // SAFETY: writes one float; both events were created with timing and recorded.
        cu("cuEventElapsedTime", unsafe {
            sys::cuEventElapsedTime_v2(&mut ms, self.start, self.end)
        })?;
        Ok(Duration::from_secs_f64(ms as f64 / 1e3))
    }

    /// What a GPU touch leaves after `expect`.
    fn after_touch(&self, expect: Expect) -> Expect {
        match (&self.touch, expect) {
            (Touch::Kernel(_), Expect::Plus(k)) => Expect::Plus(k + 1),
            (Touch::Kernel(_), Expect::All(v)) => Expect::All(v + 1),
            (Touch::Memset, _) => Expect::All(MEMSET_VALUE),
        }
    }

    /// `cuMemPrefetchAsync` (CUDA 13: a CUmemLocation) to this GPU or to the CPU,
    /// timed by events.
    fn prefetch(
        &self,
        ptr: sys::CUdeviceptr,
        bytes: usize,
        to_gpu: bool,
    ) -> Result<Duration, String> {
        // SAFETY: valid event and stream.
        cu("cuEventRecord", unsafe {
            sys::cuEventRecord(self.start, self.stream)
        })?;
        // SAFETY: `ptr..ptr+bytes` is a managed range; flags must be 0.
        cu("cuMemPrefetchAsync", unsafe {
            sys::cuMemPrefetchAsync_v2(ptr, bytes, self.location(to_gpu), 0, self.stream)
        })?;
        self.timed_end()
    }

    fn location(&self, gpu: bool) -> sys::CUmemLocation {
        if gpu {
            sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: self.ordinal,
            }
        } else {
            // The id is ignored for the host.
            sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
                id: 0,
            }
        }
    }

    /// `cuMemAdvise` (CUDA 13: a CUmemLocation).
    fn advise(
        &self,
        ptr: sys::CUdeviceptr,
        bytes: usize,
        advice: Advice,
        gpu: bool,
    ) -> Result<(), String> {
        // SAFETY: `ptr..ptr+bytes` is a managed range and the location is valid.
        cu(&format!("cuMemAdvise({advice:?})"), unsafe {
            sys::cuMemAdvise_v2(ptr, bytes, advice, self.location(gpu))
        })
    }
}

/// Allocates `bytes` of managed memory, attached globally.
fn alloc_managed(
    bytes: usize,
    flags: sys::CUmemAttach_flags_enum,
) -> Result<sys::CUdeviceptr, String> {
    let mut p: sys::CUdeviceptr = 0;
    // SAFETY: writes one pointer; the size was checked against free memory.
    cu("cuMemAllocManaged", unsafe {
        sys::cuMemAllocManaged(&mut p, bytes, flags as u32)
    })?;
    Ok(p)
}

/// The managed buffer as a CPU slice.
///
/// # Safety
/// `ptr` is a live managed allocation of `words` u32 and no GPU work on it is running
/// (or the device has concurrent managed access and the caller has synchronised the
/// streams that touch it).
unsafe fn host_view<'a>(ptr: sys::CUdeviceptr, words: usize) -> &'a mut [u32] {
    // SAFETY: the caller's contract; managed memory is valid at the same address on the CPU.
    unsafe { std::slice::from_raw_parts_mut(ptr as usize as *mut u32, words) }
}

/// The CPU writes the pattern into every word; returns the time.
fn cpu_write(ptr: sys::CUdeviceptr, words: usize) -> Duration {
    // SAFETY: called between GPU steps, each of which ends synchronised.
    let v = unsafe { host_view(ptr, words) };
    let t = Instant::now();
    for (i, w) in v.iter_mut().enumerate() {
        *w = pattern(i);
    }
    std::hint::black_box(&v);
    t.elapsed()
}

/// The CPU reads every word and counts those that are not `expect`; returns the time and
/// the count.
fn cpu_check(ptr: sys::CUdeviceptr, words: usize, expect: Expect) -> (Duration, usize) {
    // SAFETY: called between GPU steps, each of which ends synchronised.
    let v = unsafe { host_view(ptr, words) };
    let t = Instant::now();
    let bad = match expect {
        Expect::Plus(k) => v
            .iter()
            .enumerate()
            .filter(|(i, &w)| w != pattern(*i).wrapping_add(k))
            .count(),
        Expect::All(x) => v.iter().filter(|&&w| w != x).count(),
    };
    (t.elapsed(), std::hint::black_box(bad))
}

/// Prints one timed step: what, time, bandwidth over the buffer's bytes.
fn step(what: &str, d: Duration, bytes: usize) {
    println!("{what:<64} {:>10}  {:>11}", dur(d), gbps(bytes, d));
}

fn checked(what: &str, bad: usize, words: usize) -> Result<(), String> {
    if bad == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {bad} of {words} words wrong"))
    }
}

/// Part 3: where the pages are, and what each first touch costs.
fn faults(um: &Um, bytes: usize, concurrent: i32) -> Result<(), String> {
    let words = bytes / 4;
    println!("\n## 3. page faults and prefetch, {}", size(bytes));
    println!("(times: CUDA events for GPU work, host clock for CPU loops; GB/s = buffer size / time, though a kernel touch reads and writes each word)");
    if concurrent == 0 {
        println!("(CONCURRENT_MANAGED_ACCESS = 0: pages move at kernel launch, not on fault; the numbers below show that model)");
    }

    // Reference: the same touch on cuMemAlloc memory, which never faults.
    let mut d: sys::CUdeviceptr = 0;
    // SAFETY: writes one pointer; the size was checked against free memory.
    cu("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut d, bytes) })?;
    um.gpu_touch(d, words)?; // the first launch pays for loading the kernel
    let t = um.gpu_touch(d, words)?;
    step("reference: GPU touch of cuMemAlloc memory", t, bytes);
    // SAFETY: allocated above, nothing in flight (gpu_touch synchronises).
    cu("cuMemFree", unsafe { sys::cuMemFree_v2(d) })?;

    let m = alloc_managed(bytes, sys::CUmemAttach_flags_enum::CU_MEM_ATTACH_GLOBAL)?;
    println!(
        "cuMemAllocManaged({}, CU_MEM_ATTACH_GLOBAL) = {m:#x}",
        size(bytes)
    );
    show_range("after cuMemAllocManaged", m, bytes);

    step(
        "CPU first touch: write (CPU faults allocate pages on the CPU)",
        cpu_write(m, words),
        bytes,
    );
    step(
        "CPU write again (resident, no faults)",
        cpu_write(m, words),
        bytes,
    );
    let mut expect = Expect::Plus(0);

    let t = um.gpu_touch(m, words)?;
    expect = um.after_touch(expect);
    step(
        "GPU touch, no prefetch (GPU faults migrate CPU -> GPU)",
        t,
        bytes,
    );
    let t = um.gpu_touch(m, words)?;
    expect = um.after_touch(expect);
    step("GPU touch again (resident on the GPU)", t, bytes);

    let (t, bad) = cpu_check(m, words, expect);
    step(
        "CPU read after the GPU wrote (CPU faults migrate GPU -> CPU)",
        t,
        bytes,
    );
    checked("CPU read after GPU", bad, words)?;
    let (t, bad) = cpu_check(m, words, expect);
    step("CPU read again (resident on the CPU)", t, bytes);
    checked("CPU read again", bad, words)?;

    let t = um.prefetch(m, bytes, true)?;
    step("cuMemPrefetchAsync -> GPU (migration, no faults)", t, bytes);
    show_range("after prefetch to the GPU", m, bytes);
    let t = um.gpu_touch(m, words)?;
    expect = um.after_touch(expect);
    step("GPU touch after prefetch", t, bytes);

    let t = um.prefetch(m, bytes, false)?;
    step("cuMemPrefetchAsync -> CPU", t, bytes);
    show_range("after prefetch to the CPU", m, bytes);
    let (t, bad) = cpu_check(m, words, expect);
    step("CPU read after prefetch to the CPU", t, bytes);
    checked("CPU read after prefetch", bad, words)?;

    // SAFETY: nothing in flight on `m`.
    cu("cuMemFree", unsafe { sys::cuMemFree_v2(m) })?;
    Ok(())
}

/// Part 4: the hints, each read back, and what two of them change.
fn advice(um: &Um, bytes: usize) -> Result<(), String> {
    let words = bytes / 4;
    println!(
        "\n## 4. cuMemAdvise and cuMemRangeGetAttribute, {}",
        size(bytes)
    );
    let m = alloc_managed(bytes, sys::CUmemAttach_flags_enum::CU_MEM_ATTACH_GLOBAL)?;
    cpu_write(m, words);
    let mut expect = Expect::Plus(0);

    // READ_MOSTLY: a prefetch to the GPU makes a read-only copy there and leaves the CPU's
    // copy valid, so the CPU's read does not fault. Without it, the prefetch moves the
    // pages and the CPU's read faults them back.
    let t = um.prefetch(m, bytes, true)?;
    step("without READ_MOSTLY: prefetch -> GPU", t, bytes);
    let (t, bad) = cpu_check(m, words, expect);
    step("  then CPU read (faults: the pages moved)", t, bytes);
    checked("CPU read", bad, words)?;
    um.advise(m, bytes, Advice::CU_MEM_ADVISE_SET_READ_MOSTLY, true)?;
    println!("cuMemAdvise(SET_READ_MOSTLY)");
    show_range("after SET_READ_MOSTLY", m, bytes);
    let t = um.prefetch(m, bytes, true)?;
    step(
        "with READ_MOSTLY: prefetch -> GPU (duplicates the pages)",
        t,
        bytes,
    );
    let (t, bad) = cpu_check(m, words, expect);
    step("  then CPU read (the CPU's copy is still valid)", t, bytes);
    checked("CPU read", bad, words)?;
    let t = um.gpu_touch(m, words)?;
    expect = um.after_touch(expect);
    step(
        "  GPU write to read-mostly pages (collapses the copies)",
        t,
        bytes,
    );
    let (t, bad) = cpu_check(m, words, expect);
    step("  then CPU read", t, bytes);
    checked("CPU read after GPU write", bad, words)?;
    um.advise(m, bytes, Advice::CU_MEM_ADVISE_UNSET_READ_MOSTLY, true)?;
    println!("cuMemAdvise(UNSET_READ_MOSTLY)");

    um.advise(m, bytes, Advice::CU_MEM_ADVISE_SET_PREFERRED_LOCATION, true)?;
    println!("cuMemAdvise(SET_PREFERRED_LOCATION, GPU {})", um.ordinal);
    show_range("after SET_PREFERRED_LOCATION GPU", m, bytes);

    // Preferred on the CPU and accessed by the GPU: the GPU's touch goes to the CPU's
    // pages through a mapping over PCIe and the pages stay where they are.
    um.advise(
        m,
        bytes,
        Advice::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
        false,
    )?;
    println!("cuMemAdvise(SET_PREFERRED_LOCATION, CPU)");
    um.advise(m, bytes, Advice::CU_MEM_ADVISE_SET_ACCESSED_BY, true)?;
    println!("cuMemAdvise(SET_ACCESSED_BY, GPU {})", um.ordinal);
    show_range(
        "after SET_PREFERRED_LOCATION CPU + SET_ACCESSED_BY GPU",
        m,
        bytes,
    );
    let t = um.prefetch(m, bytes, false)?;
    step("prefetch -> CPU", t, bytes);
    let t = um.gpu_touch(m, words)?;
    expect = um.after_touch(expect);
    step(
        "GPU touch of CPU-resident pages through the mapping",
        t,
        bytes,
    );
    let (t, bad) = cpu_check(m, words, expect);
    step(
        "  then CPU read (pages never left the CPU: no faults)",
        t,
        bytes,
    );
    checked("CPU read", bad, words)?;

    um.advise(m, bytes, Advice::CU_MEM_ADVISE_UNSET_ACCESSED_BY, true)?;
    um.advise(
        m,
        bytes,
        Advice::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
        true,
    )?;
    println!("cuMemAdvise(UNSET_ACCESSED_BY), cuMemAdvise(UNSET_PREFERRED_LOCATION)");
    show_range("after the UNSETs", m, bytes);
    // SAFETY: nothing in flight on `m`.
    cu("cuMemFree", unsafe { sys::cuMemFree_v2(m) })?;
    Ok(())
}

/// Part 5: `cuStreamAttachMemAsync` on a small buffer allocated host-attached.
fn attach(um: &Um) -> Result<(), String> {
    let bytes = 2 << 20;
    let words = bytes / 4;
    println!("\n## 5. cuStreamAttachMemAsync, {}", size(bytes));
    let m = alloc_managed(bytes, sys::CUmemAttach_flags_enum::CU_MEM_ATTACH_HOST)?;
    println!(
        "cuMemAllocManaged({}, CU_MEM_ATTACH_HOST) = {m:#x}",
        size(bytes)
    );
    cpu_write(m, words);
    let mut expect = Expect::Plus(0);
    for (flag, what) in [
        (
            sys::CUmemAttach_flags_enum::CU_MEM_ATTACH_SINGLE,
            "SINGLE: only this stream's work touches it",
        ),
        (
            sys::CUmemAttach_flags_enum::CU_MEM_ATTACH_GLOBAL,
            "GLOBAL: any stream",
        ),
    ] {
        // SAFETY: `m` is the base of a managed allocation; length 0 = the whole allocation.
        cu("cuStreamAttachMemAsync", unsafe {
            sys::cuStreamAttachMemAsync(um.stream, m, 0, flag as u32)
        })?;
        let t = um.gpu_touch(m, words)?;
        expect = um.after_touch(expect);
        println!(
            "cuStreamAttachMemAsync({flag:?}) ({what}): GPU touch on the stream {}",
            dur(t)
        );
        let (_, bad) = cpu_check(m, words, expect);
        checked("CPU read after attached GPU touch", bad, words)?;
    }
    // SAFETY: as above.
    cu("cuStreamAttachMemAsync", unsafe {
        sys::cuStreamAttachMemAsync(
            um.stream,
            m,
            0,
            sys::CUmemAttach_flags_enum::CU_MEM_ATTACH_HOST as u32,
        )
    })?;
    // SAFETY: a valid stream.
    cu("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(um.stream)
    })?;
    println!("cuStreamAttachMemAsync(CU_MEM_ATTACH_HOST): the CPU may touch it while streams run, on any device");
    let (_, bad) = cpu_check(m, words, expect);
    checked("CPU read", bad, words)?;
    println!("every word checked after each touch");
    // SAFETY: nothing in flight on `m`.
    cu("cuMemFree", unsafe { sys::cuMemFree_v2(m) })?;
    Ok(())
}

/// One `i32` range attribute, or the error as text.
fn range_i32(ptr: sys::CUdeviceptr, bytes: usize, attr: R) -> Result<i32, String> {
    let mut v = 0i32;
    // SAFETY: writes 4 bytes, the size passed; `ptr..ptr+bytes` is managed.
    cu("cuMemRangeGetAttribute", unsafe {
        sys::cuMemRangeGetAttribute((&mut v as *mut i32).cast(), 4, attr, ptr, bytes)
    })?;
    Ok(v)
}

/// A location as range attributes give it: a device ordinal, CU_DEVICE_CPU or
/// CU_DEVICE_INVALID.
fn loc(v: i32) -> String {
    match v {
        CU_DEVICE_CPU => "CPU".into(),
        CU_DEVICE_INVALID => "none".into(),
        n => format!("GPU {n}"),
    }
}

fn loc_type(v: i32) -> &'static str {
    match v {
        0 => "INVALID",
        1 => "DEVICE",
        2 => "HOST",
        3 => "HOST_NUMA",
        4 => "HOST_NUMA_CURRENT",
        _ => "?",
    }
}

/// Every range attribute of `ptr..ptr+bytes` on one line.
fn show_range(when: &str, ptr: sys::CUdeviceptr, bytes: usize) {
    let one = |attr: R, f: &dyn Fn(i32) -> String| match range_i32(ptr, bytes, attr) {
        Ok(v) => f(v),
        Err(e) => e,
    };
    let read_mostly = one(R::CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, &|v| v.to_string());
    let preferred = one(R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION, &loc);
    let pref_type = one(R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE, &|v| {
        loc_type(v).into()
    });
    let pref_id = one(R::CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID, &|v| {
        v.to_string()
    });
    let last = one(R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION, &loc);
    let last_type = one(
        R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE,
        &|v| loc_type(v).into(),
    );
    let last_id = one(R::CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID, &|v| {
        v.to_string()
    });
    // ACCESSED_BY: an array of ordinals, unused slots CU_DEVICE_INVALID.
    let mut slots = [0i32; 8];
    // SAFETY: writes up to 32 bytes, the size passed.
    let accessed = match cu("cuMemRangeGetAttribute", unsafe {
        sys::cuMemRangeGetAttribute(
            slots.as_mut_ptr().cast(),
            std::mem::size_of_val(&slots),
            R::CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY,
            ptr,
            bytes,
        )
    }) {
        Ok(()) => {
            let v: Vec<String> = slots
                .iter()
                .filter(|&&s| s != CU_DEVICE_INVALID)
                .map(|&s| loc(s))
                .collect();
            format!("[{}]", v.join(", "))
        }
        Err(e) => e,
    };
    println!("  cuMemRangeGetAttribute {when}:");
    println!(
        "    READ_MOSTLY={read_mostly} PREFERRED_LOCATION={preferred} ({pref_type} {pref_id}) LAST_PREFETCH_LOCATION={last} ({last_type} {last_id}) ACCESSED_BY={accessed}"
    );
}
