//! Every reduction op on every type checked against references from outside the crate:
//!
//! - a hand oracle: exact values computed here in i128 / f64 from the definition of each
//!   op (no `Element::combine`, `div_n` or `reduce`), wrapped to the type's width the way
//!   two's complement does (products of unsigned bytes overflow), and for avg on floats
//!   the exact quotient rounded once to the type (the crate divides in the type; IEEE
//!   division is correctly rounded, so that is the same value, and for f16/bf16, computed
//!   through f32, double rounding is innocuous: 24 >= 2 * 11 + 2);
//! - Open MPI's MPI_Allreduce on the same inputs (tests/c/mpi_oracle.c builds them from
//!   its own copy of the formulas), for every type MPI has (not f16/bf16): bit for bit.
//!
//! Inputs are signed where the type is (max and min then also check signedness) and
//! differ between ranks at almost every index (so max and min differ), with every
//! algorithm forced on 3 and 5 ranks (non-powers of two: the tree and the fallbacks).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use collective::{dispatch_dtype, Algo, AlgoChoice, Communicator, DataType, Element, MemFabric, ReduceOp, Tuning};
use common::on_threads;

const COUNT: usize = 61;
const ALGOS: [Algo; 5] = [Algo::Ring, Algo::Tree, Algo::Doubling, Algo::Halving, Algo::AllToAll];

fn is_unsigned(dt: DataType) -> bool {
    matches!(dt, DataType::Uint8 | DataType::Uint32 | DataType::Uint64)
}

fn is_int(dt: DataType) -> bool {
    !dt.is_float()
}

/// Rank `r`'s input at index `i`, exactly (the same formulas as mpi_oracle.c).
fn input(dt: DataType, op: ReduceOp, r: usize, i: usize) -> i128 {
    if op == ReduceOp::Prod {
        let k = (r * 5 + i + r * i) % 3;
        return if is_unsigned(dt) { [1, 2, 3][k] } else { [-1, 1, 2][k] };
    }
    let v = ((r * 7 + i * 5 + r * i) % 9) as i128;
    if is_unsigned(dt) { v } else { v - 4 }
}

/// `v` reduced modulo 2^bits into the type's range (two's complement wrap-around).
fn wrap(dt: DataType, v: i128) -> i128 {
    let bits = 8 * dt.size() as u32;
    let m = v.rem_euclid(1i128 << bits);
    if !is_unsigned(dt) && m >= 1i128 << (bits - 1) { m - (1i128 << bits) } else { m }
}

/// The expected result at index `i` on `n` ranks, as an f64 (exact for every value here).
fn expected<T: Element>(op: ReduceOp, n: usize, i: usize) -> f64 {
    let dt = T::DTYPE;
    let xs: Vec<i128> = (0..n).map(|r| input(dt, op, r, i)).collect();
    let sum: i128 = xs.iter().sum();
    let exact = match op {
        ReduceOp::Sum => sum,
        ReduceOp::Prod => xs.iter().product(),
        ReduceOp::Max => *xs.iter().max().unwrap(),
        ReduceOp::Min => *xs.iter().min().unwrap(),
        ReduceOp::Avg if is_int(dt) => sum / n as i128, // truncates toward zero, as C does
        ReduceOp::Avg => return T::from_f64(sum as f64 / n as f64).to_f64(),
    };
    if is_int(dt) { wrap(dt, exact) as f64 } else { exact as f64 }
}

fn tuning(algo: Algo) -> Tuning {
    // Small slots and chunks: 61 elements take several rounds on every algorithm.
    Tuning {
        slot_bytes: 128,
        nslots: 2,
        ring_slots: 2,
        ring_lanes: 2,
        ring_min_chunk_bytes: 32,
        tree_chunk_bytes: 64,
        algo: AlgoChoice { forced: Some(algo), ..AlgoChoice::default() },
        user_buffer_min_bytes: None,
        direct: true,
    }
}

/// One all-reduce's result: type, op, the values as f64 and each element's bytes.
type Outcome = (DataType, ReduceOp, Vec<f64>, Vec<Vec<u8>>);

/// What the crate's all-reduce gives for (type, op), as f64 and as the raw bits of
/// each element (little-endian bytes), on rank 0 of `n` (every rank is checked equal).
fn run_all(n: usize, algo: Algo) -> Vec<Outcome> {
    let fabric = MemFabric::new(n);
    let per_rank = on_threads(n, Duration::from_secs(120), move |r| {
        let mut c = Communicator::in_process(&fabric, r, tuning(algo)).unwrap();
        let mut out = Vec::new();
        for dt in DataType::ALL {
            for op in ReduceOp::ALL {
                let (vals, bytes) = dispatch_dtype!(dt, T => {
                    let send: Vec<T> = (0..COUNT).map(|i| T::from_f64(input(dt, op, r, i) as f64)).collect();
                    let mut recv = vec![T::default(); COUNT];
                    c.all_reduce(&send, &mut recv, op).unwrap_or_else(|e| panic!("{dt} {op} rank {r}: {e}"));
                    let bytes: Vec<Vec<u8>> = recv.iter().map(collective_bytes).collect();
                    (recv.iter().map(|x| x.to_f64()).collect::<Vec<f64>>(), bytes)
                });
                out.push((dt, op, vals, bytes));
            }
        }
        out
    });
    for (r, got) in per_rank.iter().enumerate().skip(1) {
        for (a, b) in got.iter().zip(&per_rank[0]) {
            assert_eq!(a.3, b.3, "{} {} on {algo:?}, n={n}: rank {r} differs from rank 0", a.0, a.1);
        }
    }
    per_rank.into_iter().next().unwrap()
}

fn collective_bytes<T: Element>(x: &T) -> Vec<u8> {
    collective::dtype::as_bytes(std::slice::from_ref(x)).to_vec()
}

#[test]
fn every_op_and_type_matches_the_hand_oracle() {
    for n in [3usize, 5] {
        for algo in ALGOS {
            for (dt, op, got, _) in run_all(n, algo) {
                let want: Vec<f64> = dispatch_dtype!(dt, T => (0..COUNT).map(|i| expected::<T>(op, n, i)).collect());
                let bad: Vec<String> = (0..COUNT).filter(|&i| got[i] != want[i])
                    .map(|i| format!("[{i}] = {}, want {}", got[i], want[i])).collect();
                assert!(bad.is_empty(), "{dt} {op} on {algo:?}, {n} ranks: {}", bad.join(", "));
            }
        }
    }
}

/// Builds tests/c/mpi_oracle.c; None after a skip when Open MPI is absent.
fn mpi_oracle() -> Option<std::path::PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/mpi_oracle.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi_oracle");
    match Command::new("mpicc").args(["-O1", "-Wall", "-o"]).arg(&exe).arg(&src).output() {
        Err(e) => {
            testkit::skip(testkit::Need::Tool, format!("cannot run mpicc ({e}) (apt-get install libopenmpi-dev openmpi-bin)"));
            None
        }
        Ok(o) => {
            assert!(o.status.success(), "mpicc {}:\n{}", src.display(), String::from_utf8_lossy(&o.stderr));
            Some(exe)
        }
    }
}

/// Rank 0's lines of mpi_oracle on `n` ranks: (type name, op name) -> the values' bits
/// as the program prints them (integers in decimal, floats as hex bit patterns).
fn mpi_results(exe: &Path, n: usize) -> Vec<(String, String, Vec<String>)> {
    let out = Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "--mca", "btl", "self,tcp", "-np", &n.to_string()])
        .arg(exe).arg(COUNT.to_string())
        .env_remove("OMPI_COMM_WORLD_RANK")
        .output().expect("run mpirun");
    assert!(out.status.success(), "mpirun -np {n} mpi_oracle: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(|l| {
        let mut w = l.split_whitespace().map(str::to_string);
        let (t, o) = (w.next().unwrap(), w.next().unwrap());
        (t, o, w.collect())
    }).collect()
}

/// How mpi_oracle prints one element of `dt` from its little-endian bytes.
fn as_mpi_prints(dt: DataType, b: &[u8]) -> String {
    let mut w = [0u8; 8];
    w[..b.len()].copy_from_slice(b);
    let u = u64::from_le_bytes(w);
    match dt {
        DataType::Int8 => (u as u8 as i8).to_string(),
        DataType::Int32 => (u as u32 as i32).to_string(),
        DataType::Int64 => (u as i64).to_string(),
        DataType::Uint8 | DataType::Uint32 | DataType::Uint64 => u.to_string(),
        DataType::Float32 => format!("{:08x}", u as u32),
        DataType::Float64 => format!("{u:016x}"),
        DataType::Float16 | DataType::Bfloat16 => unreachable!("not an MPI type"),
    }
}

fn mpi_name(dt: DataType) -> Option<&'static str> {
    Some(match dt {
        DataType::Int8 => "int8",
        DataType::Uint8 => "uint8",
        DataType::Int32 => "int32",
        DataType::Uint32 => "uint32",
        DataType::Int64 => "int64",
        DataType::Uint64 => "uint64",
        DataType::Float32 => "float",
        DataType::Float64 => "double",
        DataType::Float16 | DataType::Bfloat16 => return None,
    })
}

#[test]
fn every_op_and_type_matches_open_mpi() {
    let Some(exe) = mpi_oracle() else { return };
    for n in [3usize, 5] {
        let mpi = mpi_results(&exe, n);
        assert_eq!(mpi.len(), 8 * 5, "one line per MPI type and op: {mpi:?}");
        for algo in ALGOS {
            let mut compared = 0;
            for (dt, op, _, bytes) in run_all(n, algo) {
                let Some(name) = mpi_name(dt) else { continue };
                let (_, _, want) = mpi.iter().find(|(t, o, _)| t == name && o == op.name())
                    .unwrap_or_else(|| panic!("mpi_oracle printed no {name} {op}"));
                let got: Vec<String> = bytes.iter().map(|b| as_mpi_prints(dt, b)).collect();
                assert_eq!(&got, want, "{dt} {op} on {algo:?}, {n} ranks: doorbell (left) vs MPI_Allreduce (right)");
                compared += 1;
            }
            assert_eq!(compared, 8 * 5);
        }
    }
}
