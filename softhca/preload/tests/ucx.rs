//! UCX, unmodified (Debian's ucx-utils and libucx0), on softhca through the preload.
//!
//! UCX identifies a ConnectX from sysfs (vendor 0x15b3, the PCI device id), opens it with
//! libmlx5's direct verbs (`mlx5dv_init_obj` on verbs QPs, CQs and SRQs: its DevX paths
//! find DevX event channels refused and fall back), and then drives the mlx5 queues
//! itself, writing WQEs and ringing the doorbell as doorbell's provider does. So these
//! tests check softhca against a second, independent mlx5 driver: what `ucx_info -d`
//! offers on it (the expected transport names are UCX's: rc_verbs, rc_mlx5, ud_verbs,
//! ud_mlx5), and that `ucx_perftest` moves data over each of them between two processes
//! with no environment workaround (no UCX_MEM_MMAP_HOOK_MODE, no UCX_UD_ETH_DGID_CHECK).
//! Without UCX installed the tests print SKIP (`apt-get install ucx-utils libucx0`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

mod common;

use common::{run_pair, stock};

fn ucx(name: &str) -> Option<PathBuf> {
    common::tool_in(name, "ucx-utils libucx0")
}

/// The transports `ucx_info -d` lists for softhca0's port 1.
fn transports(out: &str) -> Vec<String> {
    let mut v = Vec::new();
    let mut tl = None;
    for line in out.lines() {
        let l = line.trim_start_matches('#').trim();
        if let Some(t) = l.strip_prefix("Transport: ") {
            tl = Some(t.to_string());
        } else if let Some(d) = l.strip_prefix("Device: ") {
            if d == "softhca0:1" {
                if let Some(t) = tl.take() {
                    v.push(t);
                }
            }
        }
    }
    v
}

#[test]
fn ucx_info_offers_the_verbs_and_mlx5_transports() {
    let Some(info) = ucx("ucx_info") else { return };
    let out = stock(&info, &["-d"]).output().expect("run ucx_info");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "ucx_info -d: {:?}\n{text}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let tls = transports(&text);
    for want in ["rc_verbs", "rc_mlx5", "ud_verbs", "ud_mlx5"] {
        assert!(tls.iter().any(|t| t == want), "{want} on softhca0:1 (got {tls:?}):\n{text}");
    }
}

/// One `ucx_perftest` test between a server and a client process over transport `tl`:
/// both exit 0 and the client prints its final table row. RC needs a connectionless
/// transport beside it to exchange its connection (UCX's wireup "auxiliary transport"):
/// ud_mlx5 there; UCX puts the data on the RC lanes when both are offered.
fn perftest(tl: &str, test: &str, extra: &[&str]) {
    let tls = if tl.starts_with("rc") { format!("{tl},ud_mlx5,self") } else { format!("{tl},self") };
    let Some(pt) = ucx("ucx_perftest") else { return };
    let port = common::free_port();
    let ps = port.to_string();
    let with_env = |mut c: Command| {
        c.env("UCX_TLS", &tls).env("UCX_NET_DEVICES", "softhca0:1").env_remove("UCX_MEM_MMAP_HOOK_MODE");
        c
    };
    let server = with_env(stock(&pt, &["-p", &ps]));
    let mut args = vec!["127.0.0.1", "-p", &ps, "-t", test];
    args.extend_from_slice(extra);
    let client = with_env(stock(&pt, &args));
    let pair = run_pair((server, format!("ucx_perftest server ({tl})")), (client, format!("ucx_perftest -t {test} ({tl})")), port,
                        Duration::from_secs(90));
    pair.assert_ok();
    // The summary row: "Final:" then iterations and the figures.
    assert!(pair.client.stdout.lines().any(|l| l.contains("Final:")), "no Final row over {tl}:\n{}", pair.report());
}

#[test]
fn ucx_perftest_tag_lat_rc_mlx5() {
    perftest("rc_mlx5", "tag_lat", &["-n", "2000"]);
}

#[test]
fn ucx_perftest_tag_bw_rc_mlx5() {
    perftest("rc_mlx5", "tag_bw", &["-n", "2000", "-s", "65536"]);
}

#[test]
fn ucx_perftest_put_lat_rc_mlx5() {
    perftest("rc_mlx5", "ucp_put_lat", &["-n", "2000"]);
}

#[test]
fn ucx_perftest_tag_lat_ud_mlx5() {
    perftest("ud_mlx5", "tag_lat", &["-n", "2000"]);
}

#[test]
fn ucx_perftest_tag_bw_ud_mlx5() {
    perftest("ud_mlx5", "tag_bw", &["-n", "2000", "-s", "65536"]);
}

#[test]
fn ucx_perftest_put_lat_ud_mlx5() {
    perftest("ud_mlx5", "ucp_put_lat", &["-n", "2000"]);
}

/// Open MPI's UCX point-to-point layer (`--mca pml ucx`, no BTL but self) over softhca's
/// rc_mlx5 and ud_mlx5: an MPI_Allreduce check (collective/bench/mpi_allreduce.c, each
/// element checked against the sum every rank can compute) with 2 and 4 ranks; every row
/// must have 0 wrong elements.
#[test]
fn open_mpi_pml_ucx_allreduce_2_and_4_ranks() {
    let (Some(mpicc), Some(mpirun)) = (common::tool_in("mpicc", "libopenmpi-dev"), common::tool_in("mpirun", "openmpi-bin")) else { return };
    if ucx("ucx_info").is_none() {
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../collective/bench/mpi_allreduce.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi_allreduce");
    let out = Command::new(&mpicc).args(["-O2", "-o"]).arg(&exe).arg(&src).output().expect("run mpicc");
    assert!(out.status.success(), "mpicc: {}", String::from_utf8_lossy(&out.stderr));
    for n in ["2", "4"] {
        let mut c = stock(&mpirun, &["--oversubscribe", "-np", n, "--mca", "pml", "ucx", "--mca", "btl", "self",
                                     "-x", "UCX_NET_DEVICES=softhca0:1", "-x", "UCX_TLS=rc_mlx5,ud_mlx5,self"]);
        c.arg(&exe).args(["-b", "8", "-e", "256K", "-f", "8", "-n", "3", "-w", "1"])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        let done = common::spawn(c, format!("mpirun -np {n} --mca pml ucx")).wait_until(std::time::Instant::now() + Duration::from_secs(120));
        assert!(done.ok(), "{}", done.report());
        let rows: Vec<Vec<&str>> = done.stdout.lines().map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|f| f.len() == 12 && f[0].parse::<u64>().is_ok()).collect();
        assert_eq!(rows.len(), 6, "one row per size, 8 B to 256 KiB:\n{}", done.stdout);
        for f in rows {
            assert_eq!((f[7], f[11]), ("0", "0"), "{n} ranks, {} B: wrong elements\n{}", f[0], done.stdout);
        }
    }
}
