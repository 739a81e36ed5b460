//! End to end: `doorbell bench` between two processes (two softhca hosts), every
//! opcode with `--check` (every byte, every atomic result and immediate verified), the
//! awkward sizes (0, 1, page-1/page/page+1, 1 MiB + 1, 4 MiB), many QPs at once,
//! completion events, -D runs and a plain server/client pair. Correctness only:
//! nothing here looks at the numbers.

mod common;

use std::time::Duration;

use common::{free_port, run_ok, spawn, wait_listening};

const LIMIT: Duration = Duration::from_secs(180);
const MIB: u64 = 1 << 20;

/// `doorbell bench TEST --local --check ARGS`; returns stdout.
fn local(test: &str, args: &[&str]) -> String {
    let mut a = vec!["bench", test, "--local", "--check", "--timeout", "30"];
    a.extend_from_slice(args);
    let out = run_ok(&a, LIMIT);
    assert!(out.contains(" Data check: every size verified"), "no check verdict in:\n{out}");
    out
}

/// Iterations that keep a size quick in a debug build.
fn iters_for(size: u64) -> &'static str {
    match size {
        s if s >= MIB => "8",
        s if s >= 4096 => "64",
        _ => "200",
    }
}

fn every_size(test: &str, sizes: &[u64], extra: &[&str]) {
    for &s in sizes {
        let ss = s.to_string();
        let mut a = vec!["-s", &ss, "-n", iters_for(s)];
        a.extend_from_slice(extra);
        let out = local(test, &a);
        let row = out.lines().find(|l| l.split_whitespace().next() == Some(ss.as_str()));
        assert!(row.is_some(), "{test} -s {s}: no result row in:\n{out}");
    }
}

const SIZES: [u64; 7] = [0, 1, 4095, 4096, 4097, MIB + 1, 4 * MIB];

#[test]
fn write_every_size() {
    every_size("write-bw", &SIZES, &[]);
}

#[test]
fn write_imm_every_size() {
    every_size("write-bw", &SIZES, &["--imm"]);
}

#[test]
fn read_every_size() {
    every_size("read-bw", &SIZES, &[]);
}

#[test]
fn send_every_size() {
    every_size("send-bw", &SIZES, &[]);
}

#[test]
fn send_imm_every_size() {
    every_size("send-bw", &SIZES, &["--imm"]);
}

#[test]
fn inline_writes_and_sends() {
    // Sizes at and around the inline limit asked for.
    every_size("write-bw", &[1, 60, 61, 200], &["-I", "200"]);
    every_size("send-bw", &[1, 60, 61, 200], &["-I", "200"]);
}

#[test]
fn atomics() {
    local("atomic-bw", &["-n", "2000"]);
    local("atomic-bw", &["-n", "2000", "-A", "CMP_AND_SWAP"]);
    local("atomic-bw", &["-n", "300", "-t", "1"]);
}

#[test]
fn latency_tests() {
    every_size("write-lat", &[1, 2, 4095, 4096, 4097, MIB + 1], &[]);
    every_size("send-lat", &[0, 1, 4097, MIB + 1], &[]);
    every_size("send-lat", &[0, 4097], &["--imm"]);
    every_size("read-lat", &[0, 1, 4097, MIB + 1], &[]);
}

/// `--polled` on one of softhca's wires (`DOORBELL_WIRE`; `local` drops what cannot
/// take the same-host path, so a run that passes used it): each end's benchmark thread
/// steps its own softhca while it waits; every byte still checked.
fn polled_on(wire: &str, test: &str, sizes: &[u64], extra: &[&str]) {
    for &s in sizes {
        let ss = s.to_string();
        let mut cmd = common::command(common::bin());
        cmd.env("DOORBELL_WIRE", wire).args(["bench", test, "--local", "--check", "--timeout", "30", "--polled", "-s", &ss, "-n", iters_for(s)]);
        cmd.args(extra);
        let out = common::start(cmd).wait_ok(LIMIT).stdout;
        assert!(out.contains(" Data check: every size verified"), "{wire} {test} -s {s}: no check verdict in:\n{out}");
        assert!(out.lines().any(|l| l.split_whitespace().next() == Some(ss.as_str())), "{wire} {test} -s {s}: no result row in:\n{out}");
    }
}

#[test]
fn polled_mode_every_opcode() {
    for wire in ["udp", "local"] {
        polled_on(wire, "write-bw", &[1, 4097, MIB + 1], &[]);
        polled_on(wire, "write-bw", &[4097], &["--imm"]);
        polled_on(wire, "read-bw", &[4097], &[]);
        polled_on(wire, "send-bw", &[0, 4097], &["-q", "2"]);
        polled_on(wire, "write-lat", &[8, 4097], &[]);
        polled_on(wire, "send-lat", &[8, 4097], &[]);
        polled_on(wire, "read-lat", &[8], &[]);
        polled_on(wire, "atomic-bw", &[8], &[]);
    }
}

#[test]
fn many_qps() {
    for t in ["write-bw", "read-bw", "send-bw", "atomic-bw"] {
        local(t, &["-q", "8", "-s", "4097", "-n", "100"]);
    }
    local("write-bw", &["-q", "8", "-s", "3000", "-n", "100", "--imm"]);
}

#[test]
fn completion_events() {
    local("write-bw", &["-e", "-s", "4096", "-n", "200"]);
    local("send-bw", &["-e", "-s", "4096", "-n", "200", "-q", "2"]);
    local("send-lat", &["-e", "-s", "64", "-n", "100"]);
    local("read-lat", &["-e", "-s", "64", "-n", "100"]);
}

#[test]
fn timed_runs() {
    for t in ["write-bw", "send-bw", "write-lat", "send-lat", "read-lat"] {
        local(t, &["-D", "1", "-s", "1000"]);
    }
    local("write-bw", &["-D", "1", "-s", "1000", "--imm", "-q", "2"]);
}

#[test]
fn all_sizes_in_one_run() {
    let out = local("write-bw", &["-a", "-n", "4"]);
    for s in [2u64, 4096, 8 * MIB] {
        assert!(out.lines().any(|l| l.split_whitespace().next() == Some(&s.to_string())), "no row for {s}:\n{out}");
    }
}

#[test]
fn server_and_client_processes() {
    let port = free_port().to_string();
    let server = spawn(&["bench", "send-bw", "-p", &port, "--timeout", "30"]);
    wait_listening(port.parse().unwrap(), Duration::from_secs(30));
    let client = run_ok(&["bench", "send-bw", "127.0.0.1", "-p", &port, "-s", "4097", "-n", "100", "-q", "2", "--check", "--timeout", "30"], LIMIT);
    let server = server.wait_ok(Duration::from_secs(30)).stdout;
    for out in [&client, &server] {
        assert!(out.contains("Send BW Test"), "{out}");
        assert!(out.contains(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"), "{out}");
        assert!(out.contains(" local address: LID 0000 QPN 0x"), "{out}");
        assert!(out.lines().any(|l| l.starts_with(" 4097 ")), "{out}");
        assert!(out.contains(" Data check: every size verified"), "{out}");
    }
    assert_eq!(client.matches(" remote address:").count(), 2);
}

#[test]
fn mismatched_tests_fail_cleanly() {
    let port = free_port().to_string();
    let server = spawn(&["bench", "read-bw", "-p", &port, "--timeout", "10"]);
    wait_listening(port.parse().unwrap(), Duration::from_secs(30));
    let client = spawn(&["bench", "write-bw", "127.0.0.1", "-p", &port, "--timeout", "10"]).wait(LIMIT);
    assert!(!client.status.success());
    assert!(client.stderr.contains("the client runs write-bw, this server read-bw"), "{}", client.stderr);
    assert!(!server.wait(Duration::from_secs(30)).status.success());
}

#[test]
fn latency_table_layout() {
    let out = local("send-lat", &["-s", "8", "-n", "50"]);
    assert!(out.contains(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"), "{out}");
    let row = out.lines().find(|l| l.starts_with(" 8 ")).expect("row");
    assert_eq!(row.split_whitespace().count(), 9, "{row}");
}

/// Why GPU tests cannot run here, if they cannot: no CUDA driver, or no GPU.
fn no_gpu() -> Option<String> {
    match gdr::cuda::probe() {
        Err(e) => Some(e.to_string()),
        Ok(()) if gdr::cuda::device_count() == 0 => Some("the CUDA driver sees no GPU".into()),
        Ok(()) => None,
    }
}

/// `--use-cuda` on a machine without a CUDA driver (every CI machine; or one whose
/// cuInit fails): one line on stderr, nothing on stdout, exit status 3 (the issue's
/// "distinct exit status", the one `doorbell gdr verify` gives), whichever spelling,
/// test and end, before any process is started or device opened.
#[test]
fn cuda_without_driver_exits_3() {
    let why = match gdr::cuda::probe() {
        Err(e) => e.to_string(),
        Ok(()) => return testkit::skip(testkit::Need::NoGpu, "this machine has a usable CUDA driver (gpu_memory_runs covers it)"),
    };
    let port = free_port().to_string();
    let runs: [&[&str]; 6] = [
        &["bench", "write-bw", "--local", "--use-cuda", "0", "--use-cuda-dmabuf", "-s", "4096"],
        &["bench", "write-bw", "--local", "--use_cuda_bus_id=0000:00:06.0", "--use_cuda_dmabuf"],
        &["bench", "read-bw", "--local", "--use_cuda=0", "--use_cuda_dmabuf"],
        &["bench", "send-bw", "--local", "--use-cuda", "1"],
        &["bench", "write-bw", "-p", &port, "--use-cuda", "0"],
        &["bench", "write-bw", "127.0.0.1", "-p", &port, "--use-cuda", "0", "--use-cuda-dmabuf"],
    ];
    for args in runs {
        let d = spawn(args).wait(Duration::from_secs(30));
        assert_eq!(d.status.code(), Some(3), "{args:?}: {}\n{}", d.status, d.stderr);
        let lines: Vec<&str> = d.stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?}: {}", d.stderr);
        assert!(lines[0].starts_with("doorbell: --use-cuda") && lines[0].contains("CUDA is not usable here"), "{args:?}: {}", lines[0]);
        assert!(lines[0].ends_with(&why), "{args:?}: {} (the probe says {why:?})", lines[0]);
        assert!(d.stdout.is_empty(), "{args:?}: {}", d.stdout);
    }
}

/// Flag combinations that cannot work are refused (status 1, a clear line) on any
/// machine, driver or not: the dma-buf flag without the CUDA one (perftest: "CUDA
/// DMA-BUF cannot be used without CUDA"), and the tests whose CPU reads the buffer.
#[test]
fn cuda_flag_errors() {
    let cases: [(&[&str], &str); 3] = [
        (&["bench", "write-bw", "--local", "--use-cuda-dmabuf"], "--use-cuda-dmabuf needs --use-cuda"),
        (&["bench", "write-lat", "--local", "--use-cuda", "0"], "--use-cuda is for write-bw, read-bw and send-bw"),
        (&["bench", "atomic-bw", "--local", "--use_cuda=0", "--use_cuda_dmabuf"], "--use-cuda is for write-bw, read-bw and send-bw"),
    ];
    for (args, want) in cases {
        let d = spawn(args).wait(Duration::from_secs(30));
        assert_eq!(d.status.code(), Some(1), "{args:?}: {}", d.stderr);
        assert!(d.stderr.contains(want), "{args:?}: {}", d.stderr);
    }
}

/// On a GPU machine: write-bw, read-bw and send-bw with both ends' buffers in GPU 0's
/// memory behind dma-buf MRs, every byte checked (patterns staged in and read back with
/// CUDA copies), at sizes that cross pages and softhca's 1 MiB peer segments, with
/// several QPs; each run prints the GPU in its header and a cudaMemcpy reference row
/// per size. Without --use-cuda-dmabuf softhca refuses (it cannot pin GPU memory).
#[test]
fn gpu_memory_runs() {
    if let Some(why) = no_gpu() {
        return testkit::skip(testkit::Need::Gpu, format!("{why} (run on a machine with an NVIDIA GPU: see docs/gdr.md)"));
    }
    let gpu = ["--use-cuda", "0", "--use-cuda-dmabuf"];
    for t in ["write-bw", "read-bw", "send-bw"] {
        for s in [1u64, 4097, MIB + 1, 4 * MIB] {
            let ss = s.to_string();
            let mut a = vec!["-s", &ss, "-n", iters_for(s), "-q", "2"];
            a.extend_from_slice(&gpu);
            let out = local(t, &a);
            assert!(out.contains(" GPU memory      : GPU 0 ("), "{out}");
            let reference = out.split(" cudaMemcpy reference: ").nth(1).unwrap_or_else(|| panic!("no reference in:\n{out}"));
            let row = reference.lines().find(|l| l.split_whitespace().next() == Some(ss.as_str()));
            let cols: Vec<&str> = row.unwrap_or_else(|| panic!("no reference row for {s}:\n{out}")).split_whitespace().collect();
            assert_eq!(cols.len(), 6, "{cols:?}");
            for c in [&cols[2], &cols[4]] {
                assert!(c.parse::<f64>().unwrap() > 0.0, "{cols:?}");
            }
        }
    }
    local("write-bw", &["-s", "65536", "-n", "64", "--imm", "--use-cuda", "0", "--use-cuda-dmabuf"]);
    let d = spawn(&["bench", "write-bw", "--local", "--use-cuda", "0", "-s", "4096", "-n", "10"]).wait(LIMIT);
    assert!(!d.status.success());
    assert!(d.stderr.contains("add --use-cuda-dmabuf"), "{}", d.stderr);
}
