//! Question 1.4 of the study notes, run: CUDA IPC between two processes on one GPU, with
//! a memory handle and an event handle.
//!
//! ```text
//! cargo run --release -p gdr --example cuda_ipc            # GPU 0, 64 MiB
//! cargo run --release -p gdr --example cuda_ipc -- 1 16    # GPU 1, 16 MiB
//! ```
//!
//! The parent allocates with `cuMemAlloc`, fills the buffer with a known pattern, and
//! exports it (`cuIpcGetMemHandle`) together with an interprocess event
//! (`cuEventCreate(CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING)`,
//! `cuIpcGetEventHandle`). It starts itself again as the child and passes both 64-byte
//! handles in hex on the command line. The child opens them (`cuIpcOpenMemHandle` with
//! `CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS`, `cuIpcOpenEventHandle`), checks every word of
//! the parent's pattern, queues the bitwise complement into the same memory on its own
//! stream, records the event behind that copy and tells the parent, without waiting for
//! the copy itself. The parent's stream waits on the event (`cuStreamWaitEvent`) before
//! copying the buffer back, so the ordering between the two processes' GPU work is the
//! event's, and the parent checks every word of the child's pattern; then the child
//! unmaps (`cuIpcCloseMemHandle`).
//!
//! Times are host clocks: an interprocess event has no timing (`cuEventElapsedTime` on
//! one fails with CUDA_ERROR_INVALID_HANDLE).
//!
//! Without a CUDA driver it prints one line and exits with status 3.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::{cu, dur, gbps, hex, size, unhex};
use cudarc::driver::sys;

/// The parent's word at index `i`: distinct in every word, so a lost, shifted or stale
/// copy shows as a mismatch.
fn pattern(i: usize) -> u32 {
    (i as u32).wrapping_mul(0x9E37_79B9) ^ 0x1BAD_B002
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let r = if args.get(1).map(String::as_str) == Some("--child") {
        common::require_cuda("cuda_ipc (child)");
        child(&args[2..])
    } else {
        common::require_cuda("cuda_ipc");
        parent(&args[1..])
    };
    if let Err(e) = r {
        println!("FAIL: {e}");
        std::process::exit(1);
    }
}

fn parse_args(args: &[String]) -> Result<(usize, usize), String> {
    let usage = "usage: cuda_ipc [GPU [MiB]]";
    let gpu = match args.first() {
        Some(s) => s.parse().map_err(|_| format!("bad GPU {s:?} ({usage})"))?,
        None => 0,
    };
    let mib: usize = match args.get(1) {
        Some(s) => s.parse().map_err(|_| format!("bad size {s:?} ({usage})"))?,
        None => 64,
    };
    if mib == 0 || mib > 1024 || args.len() > 2 {
        return Err(format!("size from 1 to 1024 MiB ({usage})"));
    }
    Ok((gpu, mib << 20))
}

fn parent(args: &[String]) -> Result<(), String> {
    let (ordinal, bytes) = match parse_args(args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("cuda_ipc: {e}");
            std::process::exit(2);
        }
    };
    let words = bytes / 4;
    println!("# cuda_ipc: CUDA IPC memory and event handles between two processes (question 1.4)");
    let gpu = gdr::cuda::Gpu::open(ordinal).map_err(|e| e.to_string())?;
    gpu.bind().map_err(|e| e.to_string())?;
    println!(
        "parent pid {}: GPU {ordinal} {} ({}), primary context, buffer {}",
        std::process::id(),
        gpu.name().unwrap_or_default(),
        gpu.pci_bus_id().unwrap_or_default(),
        size(bytes)
    );

    let t = Instant::now();
    let mut dptr: sys::CUdeviceptr = 0;
    // SAFETY: writes one device pointer; a context is current.
    cu("cuMemAlloc", unsafe {
        sys::cuMemAlloc_v2(&mut dptr, bytes)
    })?;
    println!(
        "1. cuMemAlloc({}) = {dptr:#x}   {}",
        size(bytes),
        dur(t.elapsed())
    );

    let host: Vec<u32> = (0..words).map(pattern).collect();
    let t = Instant::now();
    // SAFETY: `host` holds `bytes` bytes; `dptr` is an allocation of `bytes` bytes.
    cu("cuMemcpyHtoD", unsafe {
        sys::cuMemcpyHtoD_v2(dptr, host.as_ptr().cast(), bytes)
    })?;
    let el = t.elapsed();
    println!(
        "2. cuMemcpyHtoD: parent's pattern written   {}  {}",
        dur(el),
        gbps(bytes, el)
    );

    let mut mem_handle = sys::CUipcMemHandle_st { reserved: [0; 64] };
    let t = Instant::now();
    // SAFETY: writes a 64-byte handle; `dptr` is the base of a cuMemAlloc allocation.
    cu("cuIpcGetMemHandle", unsafe {
        sys::cuIpcGetMemHandle(&mut mem_handle, dptr)
    })?;
    let mem_hex = hex(&mem_handle.reserved.map(|c| c as u8));
    println!(
        "3. cuIpcGetMemHandle   {}\n   memory handle: {mem_hex}",
        dur(t.elapsed())
    );
    println!(
        "   {}",
        look_inside(&mem_handle.reserved.map(|c| c as u8), bytes)
    );

    let mut event: sys::CUevent = std::ptr::null_mut();
    let flags = sys::CUevent_flags_enum::CU_EVENT_INTERPROCESS as u32
        | sys::CUevent_flags_enum::CU_EVENT_DISABLE_TIMING as u32;
    // SAFETY: writes one event handle; interprocess events must disable timing, as here.
    cu("cuEventCreate", unsafe {
        sys::cuEventCreate(&mut event, flags)
    })?;
    let mut ev_handle = sys::CUipcEventHandle_st { reserved: [0; 64] };
    let t = Instant::now();
    // SAFETY: writes a 64-byte handle for an event created with CU_EVENT_INTERPROCESS.
    cu("cuIpcGetEventHandle", unsafe {
        sys::cuIpcGetEventHandle(&mut ev_handle, event)
    })?;
    let ev_hex = hex(&ev_handle.reserved.map(|c| c as u8));
    println!(
        "4. cuEventCreate(CU_EVENT_INTERPROCESS|CU_EVENT_DISABLE_TIMING), cuIpcGetEventHandle   {}\n   event handle:  {ev_hex}",
        dur(t.elapsed())
    );
    println!(
        "   {}",
        look_inside(&ev_handle.reserved.map(|c| c as u8), bytes)
    );

    // The timing flag is off: the driver says so if asked for a time.
    if common::has_cuda_symbol("cuEventElapsedTime_v2") {
        let mut ms = 0f32;
        // SAFETY: writes one float; both events are valid (the same event twice).
        let r = unsafe { sys::cuEventElapsedTime_v2(&mut ms, event, event) };
        println!(
            "   (cuEventElapsedTime on it: {}; times below are host clocks)",
            common::cu_error_name(r)
        );
    }

    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let t_spawn = Instant::now();
    let mut kid = Command::new(exe)
        .args([
            "--child",
            &mem_hex,
            &ev_hex,
            &ordinal.to_string(),
            &bytes.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("spawning the child: {e}"))?;
    println!(
        "5. child pid {} started with both handles in argv (hex)",
        kid.id()
    );
    let mut kid_out = BufReader::new(kid.stdout.take().expect("piped"));
    let mut kid_in = kid.stdin.take().expect("piped");
    let mut recorded = false;
    let mut line = String::new();
    loop {
        line.clear();
        match kid_out.read_line(&mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let l = line.trim_end();
        if l == "RECORDED" {
            recorded = true;
            break;
        }
        println!("   [child] {l}");
    }
    if !recorded {
        let st = kid
            .wait()
            .map_err(|e| format!("waiting for the child: {e}"))?;
        return Err(format!("the child ended before recording the event ({st})"));
    }
    println!(
        "6. child says: event recorded behind its copy   {} after spawn",
        dur(t_spawn.elapsed())
    );

    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: writes one stream handle; a context is current.
    cu("cuStreamCreate", unsafe {
        sys::cuStreamCreate(
            &mut stream,
            sys::CUstream_flags_enum::CU_STREAM_NON_BLOCKING as u32,
        )
    })?;
    let mut back = vec![0u32; words];
    let t = Instant::now();
    // SAFETY: both handles are valid; flags must be 0.
    cu("cuStreamWaitEvent", unsafe {
        sys::cuStreamWaitEvent(stream, event, 0)
    })?;
    // SAFETY: `back` holds `bytes` bytes and outlives the synchronisation below.
    cu("cuMemcpyDtoHAsync", unsafe {
        sys::cuMemcpyDtoHAsync_v2(back.as_mut_ptr().cast(), dptr, bytes, stream)
    })?;
    // SAFETY: a valid stream.
    cu("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(stream)
    })?;
    let el = t.elapsed();
    println!(
        "7. cuStreamWaitEvent(child's event) + cuMemcpyDtoHAsync + cuStreamSynchronize   {}  {}",
        dur(el),
        gbps(bytes, el)
    );
    let t = Instant::now();
    // SAFETY: a valid event.
    cu("cuEventSynchronize", unsafe {
        sys::cuEventSynchronize(event)
    })?;
    // SAFETY: a valid event.
    let q = unsafe { sys::cuEventQuery(event) };
    println!(
        "   cuEventSynchronize returns in {} (already complete); cuEventQuery = {}",
        dur(t.elapsed()),
        common::cu_error_name(q)
    );

    let bad: Vec<usize> = (0..words).filter(|&i| back[i] != !pattern(i)).collect();
    let verdict = if bad.is_empty() {
        println!("8. PASS: all {words} words are the child's pattern (!parent's)");
        Ok(())
    } else {
        let i = bad[0];
        println!(
            "8. FAIL: {} of {words} words are not the child's pattern; first at word {i}: {:#010x}, expected {:#010x}",
            bad.len(),
            back[i],
            !pattern(i)
        );
        Err("the parent did not read the child's bytes".to_string())
    };

    writeln!(kid_in, "close").map_err(|e| format!("telling the child to close: {e}"))?;
    drop(kid_in);
    for l in kid_out.lines() {
        let l = l.map_err(|e| format!("reading the child: {e}"))?;
        println!("   [child] {l}");
    }
    let st = kid
        .wait()
        .map_err(|e| format!("waiting for the child: {e}"))?;
    println!("9. child exited: {st}");

    // SAFETY: handles created above; nothing uses them after this.
    cu("cuStreamDestroy", unsafe {
        sys::cuStreamDestroy_v2(stream)
    })?;
    // SAFETY: as above.
    cu("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(event) })?;
    // SAFETY: as above; the child has unmapped its view.
    cu("cuMemFree", unsafe { sys::cuMemFree_v2(dptr) })?;
    println!("10. cuEventDestroy, cuMemFree");
    verdict?;
    if !st.success() {
        return Err(format!("the child failed ({st})"));
    }
    println!("PASS");
    Ok(())
}

/// What of this process a handle visibly carries: the handles are opaque (64 bytes,
/// undocumented), so this only reports where this process's pid and the allocation's
/// size appear as little-endian integers, which says what the driver needs to find the
/// exporter's object.
fn look_inside(h: &[u8; 64], bytes: usize) -> String {
    let find = |needle: &[u8]| -> Vec<usize> {
        (0..=h.len() - needle.len())
            .filter(|&o| &h[o..o + needle.len()] == needle)
            .collect()
    };
    let pid = std::process::id();
    let mut seen = Vec::new();
    for (what, at) in [
        (format!("pid {pid} (u32)"), find(&pid.to_le_bytes())),
        (
            format!("size {bytes} (u64)"),
            find(&(bytes as u64).to_le_bytes()),
        ),
    ] {
        if !at.is_empty() {
            seen.push(format!("{what} at byte {at:?}"));
        }
    }
    let zeros = h.iter().filter(|&&b| b == 0).count();
    if seen.is_empty() {
        format!("(neither this pid nor the size appears in it as a little-endian integer; {zeros} of 64 bytes are zero)")
    } else {
        format!("(in it: {}; {zeros} of 64 bytes are zero)", seen.join(", "))
    }
}

/// The second process: open both handles, check the parent's bytes, write the complement,
/// record the event, and unmap when the parent says "close". Its lines go to the parent,
/// which prints them.
fn child(args: &[String]) -> Result<(), String> {
    let [mem_hex, ev_hex, ordinal, bytes] = args else {
        eprintln!("cuda_ipc (child): usage: cuda_ipc --child MEMHANDLE EVENTHANDLE GPU BYTES");
        std::process::exit(2);
    };
    let to_handle = |s: &str| -> Result<[std::ffi::c_char; 64], String> {
        let v = unhex(s)?;
        let a: [u8; 64] = v
            .try_into()
            .map_err(|v: Vec<u8>| format!("handle of {} bytes, not 64", v.len()))?;
        Ok(a.map(|b| b as std::ffi::c_char))
    };
    let mem_handle = sys::CUipcMemHandle_st {
        reserved: to_handle(mem_hex)?,
    };
    let ev_handle = sys::CUipcEventHandle_st {
        reserved: to_handle(ev_hex)?,
    };
    let ordinal: usize = ordinal
        .parse()
        .map_err(|_| format!("bad GPU {ordinal:?}"))?;
    let bytes: usize = bytes.parse().map_err(|_| format!("bad size {bytes:?}"))?;
    let words = bytes / 4;
    let out = |s: String| {
        println!("{s}");
        let _ = std::io::stdout().flush();
    };

    let gpu = gdr::cuda::Gpu::open(ordinal).map_err(|e| e.to_string())?;
    gpu.bind().map_err(|e| e.to_string())?;
    out(format!(
        "pid {}: GPU {ordinal}, its own primary context",
        std::process::id()
    ));

    let mut dptr: sys::CUdeviceptr = 0;
    let t = Instant::now();
    // SAFETY: writes one device pointer; the handle came from cuIpcGetMemHandle in the
    // parent, which keeps the allocation until this process has closed it.
    cu("cuIpcOpenMemHandle", unsafe {
        sys::cuIpcOpenMemHandle_v2(
            &mut dptr,
            mem_handle,
            sys::CUipcMem_flags_enum::CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS as u32,
        )
    })?;
    out(format!(
        "cuIpcOpenMemHandle(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) = {dptr:#x}   {}",
        dur(t.elapsed())
    ));
    let mut event: sys::CUevent = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: writes one event handle; the handle came from cuIpcGetEventHandle.
    cu("cuIpcOpenEventHandle", unsafe {
        sys::cuIpcOpenEventHandle(&mut event, ev_handle)
    })?;
    out(format!("cuIpcOpenEventHandle   {}", dur(t.elapsed())));

    let mut seen = vec![0u32; words];
    let t = Instant::now();
    // SAFETY: `seen` holds `bytes` bytes; the mapping is `bytes` long (the parent's size).
    cu("cuMemcpyDtoH", unsafe {
        sys::cuMemcpyDtoH_v2(seen.as_mut_ptr().cast(), dptr, bytes)
    })?;
    let el = t.elapsed();
    let bad = (0..words).filter(|&i| seen[i] != pattern(i)).count();
    if bad != 0 {
        out(format!(
            "FAIL: {bad} of {words} words are not the parent's pattern"
        ));
        return Err("the child did not read the parent's bytes".into());
    }
    out(format!(
        "cuMemcpyDtoH through the IPC mapping: all {words} words are the parent's pattern   {}  {}",
        dur(el),
        gbps(bytes, el)
    ));

    let mut stream: sys::CUstream = std::ptr::null_mut();
    // SAFETY: writes one stream handle; a context is current.
    cu("cuStreamCreate", unsafe {
        sys::cuStreamCreate(
            &mut stream,
            sys::CUstream_flags_enum::CU_STREAM_NON_BLOCKING as u32,
        )
    })?;
    let new: Vec<u32> = (0..words).map(|i| !pattern(i)).collect();
    let t = Instant::now();
    // SAFETY: `new` holds `bytes` bytes and lives until the stream is synchronised below.
    cu("cuMemcpyHtoDAsync", unsafe {
        sys::cuMemcpyHtoDAsync_v2(dptr, new.as_ptr().cast(), bytes, stream)
    })?;
    // SAFETY: an event opened from an IPC handle, on a stream of the current context.
    cu("cuEventRecord", unsafe {
        sys::cuEventRecord(event, stream)
    })?;
    out(format!(
        "cuMemcpyHtoDAsync(!pattern) + cuEventRecord queued, not waited for   {}",
        dur(t.elapsed())
    ));
    out("RECORDED".into());

    let mut cmd = String::new();
    std::io::stdin()
        .read_line(&mut cmd)
        .map_err(|e| format!("reading the parent: {e}"))?;
    // SAFETY: a valid stream; `new` is still alive.
    cu("cuStreamSynchronize", unsafe {
        sys::cuStreamSynchronize(stream)
    })?;
    drop(new);
    let t = Instant::now();
    // SAFETY: `dptr` came from cuIpcOpenMemHandle and nothing uses it after this.
    cu("cuIpcCloseMemHandle", unsafe {
        sys::cuIpcCloseMemHandle(dptr)
    })?;
    out(format!("cuIpcCloseMemHandle   {}", dur(t.elapsed())));
    // SAFETY: handles of this process, unused after this.
    cu("cuEventDestroy", unsafe { sys::cuEventDestroy_v2(event) })?;
    // SAFETY: as above.
    cu("cuStreamDestroy", unsafe {
        sys::cuStreamDestroy_v2(stream)
    })?;
    Ok(())
}
