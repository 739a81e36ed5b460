//! `uverbs-conformance`: plays the conformance table on one device and prints
//! `case <name> <errno-or-OK>` per case.
//!
//! ```text
//! uverbs-conformance --device rxe0     a kernel device, found through uverbs::discovery
//!                                      (also checks discovery against the real sysfs)
//! uverbs-conformance --softhca         softhca in-process (needs the `softhca` feature)
//! uverbs-conformance --list            the table: name, expectation, what it checks
//! uverbs-conformance --corpus-gen N     a fresh differential corpus, N mutants per base
//! ```
//! With `--corpus FILE` (and `--device` or `--softhca`) the corpus is replayed instead of
//! the table: `corpus <name> <errno-or-OK>` lines, status 1 if any answer differs from
//! the file's; `--record` prints the corpus again with this device's answers as the
//! expectations (how the tree's corpus is made: recorded on rxe in the guest).
//! Options: `--profile rxe|mlx5|mlx5-static` overrides the driver profile chosen from
//! the device's driver; `--dmabuf` plays the REG_DMABUF_MR rows that need a real
//! dma-buf (a vgem buffer, `table::dmabuf_cases`) instead of the main table. Exit status 0 when every case gave its expected result, 1 when
//! one did not, 2 on a usage error.

use std::process::ExitCode;

use conformance::{check_discovery, corpus, outcome_label, table, Mlx5Profile, Profile, RxeProfile};
use uverbs::sys::verbs::{RDMA_DRIVER_MLX5, RDMA_DRIVER_RXE};

fn usage() -> ExitCode {
    eprintln!("usage: uverbs-conformance (--device NAME | --softhca | --list) [--profile rxe|mlx5|mlx5-static] [--dmabuf]");
    ExitCode::from(2)
}

fn profile_named(name: &str) -> Option<Box<dyn Profile>> {
    match name {
        "rxe" => Some(Box::new(RxeProfile)),
        "mlx5" => Some(Box::new(Mlx5Profile::default())),
        "mlx5-static" => Some(Box::new(Mlx5Profile::static_uars())),
        _ => None,
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut device = None;
    let mut softhca = false;
    let mut profile_arg = None;
    let mut dmabuf = false;
    let mut corpus_file = None;
    let mut record = false;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--device" if i + 1 < args.len() => {
                device = Some(args[i + 1].clone());
                i += 1;
            }
            "--profile" if i + 1 < args.len() => {
                profile_arg = Some(args[i + 1].clone());
                i += 1;
            }
            "--softhca" => softhca = true,
            "--corpus" if i + 1 < args.len() => {
                corpus_file = Some(args[i + 1].clone());
                i += 1;
            }
            "--record" => record = true,
            "--corpus-gen" if i + 1 < args.len() => {
                let Ok(n) = args[i + 1].parse() else { return usage() };
                println!("# doorbell differential uverbs corpus (conformance/src/corpus.rs); expectations: Linux 6.1 rxe");
                for e in corpus::generate(0xd00b_5eed, n) {
                    println!("{}", e.line());
                }
                return ExitCode::SUCCESS;
            }
            "--dmabuf" => dmabuf = true,
            "--list" => {
                for c in table::cases() {
                    let per: Vec<String> = c.per_driver.iter().map(|(d, e)| format!("{d}: {}", e.label())).collect();
                    let per = if per.is_empty() { String::new() } else { format!(" [{}]", per.join(", ")) };
                    println!("{:40} {:16} {}{per}", c.name, c.expect.label(), c.what);
                }
                return ExitCode::SUCCESS;
            }
            _ => return usage(),
        }
        i += 1;
    }
    if device.is_some() == softhca {
        return usage();
    }
    if let Some(path) = corpus_file {
        return replay_corpus(&path, device.as_deref(), record);
    }

    let cases = match dmabuf_table(dmabuf) {
        Ok(c) => c,
        Err(msg) => {
            eprintln!("uverbs-conformance: {msg}");
            return ExitCode::from(2);
        }
    };
    let mut all_ok = true;
    let results = if let Some(name) = device {
        if !dmabuf {
            // uverbs' own discovery against this machine's sysfs and /dev.
            let d = check_discovery(&name);
            println!("case discovery {}{}", outcome_label(&d),
                     match &d { Err(conformance::Fail::Bad(why)) => format!(" ({why})"), _ => String::new() });
            all_ok &= d.is_ok();
        }
        let info = uverbs::discovery::list().into_iter().find(|d| d.name == name);
        let default_profile = match info.as_ref().map(|i| i.driver_id()) {
            Some(RDMA_DRIVER_RXE) => "rxe",
            Some(RDMA_DRIVER_MLX5) => "mlx5",
            _ => "rxe",
        };
        let Some(profile) = profile_named(profile_arg.as_deref().unwrap_or(default_profile)) else { return usage() };
        println!("# device {name} ({}), profile {}", info.map(|i| i.driver).unwrap_or_default(), profile.name());
        let open = || uverbs::discovery::open(&name);
        conformance::run_cases(&cases, &open, profile.as_ref())
    } else {
        match softhca_results(&cases, profile_arg.as_deref()) {
            Ok(r) => r,
            Err(msg) => {
                eprintln!("uverbs-conformance: {msg}");
                return ExitCode::from(2);
            }
        }
    };

    let mut bad = 0;
    for r in &results {
        println!("{r}");
        if !r.matched() {
            bad += 1;
        }
    }
    println!("# {} cases, {} as expected, {} not", results.len(), results.len() - bad, bad);
    all_ok &= bad == 0;
    if all_ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// The main table, or with `--dmabuf` the rows that need a vgem dma-buf.
fn dmabuf_table(dmabuf: bool) -> Result<Vec<conformance::Case>, String> {
    if !dmabuf {
        return Ok(table::cases());
    }
    #[cfg(feature = "vgem")]
    return Ok(table::dmabuf_cases());
    #[cfg(not(feature = "vgem"))]
    Err("--dmabuf: built without the `vgem` feature (cargo build -p conformance --features vgem)".into())
}

#[cfg(feature = "softhca")]
fn softhca_results(cases: &[conformance::Case], profile: Option<&str>) -> Result<Vec<conformance::CaseResult>, String> {
    let profile = profile_named(profile.unwrap_or("mlx5")).ok_or("unknown profile")?;
    println!("# device softhca0 (in-process), profile {}", profile.name());
    conformance::softhca_target::run_cases_on_softhca(cases, profile.as_ref()).map_err(|e| format!("softhca: {e}"))
}

#[cfg(not(feature = "softhca"))]
fn softhca_results(_cases: &[conformance::Case], _profile: Option<&str>) -> Result<Vec<conformance::CaseResult>, String> {
    Err("built without the `softhca` feature (cargo build -p conformance --features softhca)".into())
}

/// `--corpus FILE`: replays the corpus on the device (a kernel device by name, or softhca
/// in-process) and prints one line per entry.
fn replay_corpus(path: &str, device: Option<&str>, record: bool) -> ExitCode {
    let entries = match std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}")).and_then(|t| corpus::parse(&t)) {
        Ok(e) => e,
        Err(msg) => {
            eprintln!("uverbs-conformance: {msg}");
            return ExitCode::from(2);
        }
    };
    let got = match device {
        Some(name) => {
            let open = || uverbs::discovery::open(name);
            corpus::replay(&entries, &open)
        }
        None => match softhca_corpus(&entries) {
            Ok(g) => g,
            Err(msg) => {
                eprintln!("uverbs-conformance: {msg}");
                return ExitCode::from(2);
            }
        },
    };
    let mut bad = 0;
    for (e, (_, label)) in entries.iter().zip(&got) {
        if record {
            println!("{}", corpus::Entry { expect: label.clone(), ..e.clone() }.line());
            continue;
        }
        let mismatch = *label != e.expect;
        bad += mismatch as usize;
        println!("corpus {} {label}{}", e.name, if mismatch { format!("   # MISMATCH: expected {}", e.expect) } else { String::new() });
    }
    if record {
        return ExitCode::SUCCESS;
    }
    println!("# {} corpus entries, {} as expected, {bad} not", entries.len(), entries.len() - bad);
    if bad == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

#[cfg(feature = "softhca")]
fn softhca_corpus(entries: &[corpus::Entry]) -> Result<Vec<(String, String)>, String> {
    let hca = softhca::default_hca().map_err(|e| format!("softhca: {e}"))?;
    let open = || -> uverbs::Result<uverbs::Device> { Ok(uverbs::Device::from_endpoint(Box::new(hca.open()), "softhca0")) };
    Ok(corpus::replay(entries, &open))
}

#[cfg(not(feature = "softhca"))]
fn softhca_corpus(_entries: &[corpus::Entry]) -> Result<Vec<(String, String)>, String> {
    Err("built without the `softhca` feature (cargo build -p conformance --features softhca)".into())
}
