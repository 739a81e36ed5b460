//! The collectives over the real RDMA path: RC QPs on the embedded softhca (ranks
//! are threads of this process sharing one softhca instance, so every message is a
//! RoCEv2 exchange through its UDP port and back), bootstrapped over TCP like
//! separate processes. Process-level runs (separate instances, launchers, network
//! namespaces, a killed rank) are in cli/tests.

mod common;

use std::time::Duration;

use collective::{dispatch_dtype, Algo, AlgoChoice, Communicator, DataType, InitOpts, ReduceOp, Tuning};
use common::*;

// The stock-tool tests' helpers, for their free-port picker (never the same port twice
// in this process: the tests run in parallel).
#[path = "../../softhca/preload/tests/common/mod.rs"]
mod stock;
use stock::free_port;

/// Every algorithm; all-to-all applies to 4 and 8 ranks (others fall back to
/// halving-doubling or the ring, which the forced runs then check too).
const ALGOS: [Algo; 5] = [Algo::Ring, Algo::Tree, Algo::Doubling, Algo::Halving, Algo::AllToAll];

/// Small slots, and every call sent straight from the buffers (see `staged`).
fn tuning(slot_bytes: usize) -> Tuning {
    Tuning {
        slot_bytes,
        nslots: 3,
        // Not the tree's: each stream lays out its own slots.
        ring_slots: 2,
        ring_lanes: 2,
        ring_min_chunk_bytes: 64,
        tree_chunk_bytes: slot_bytes / 2,
        algo: AlgoChoice::default(),
        user_buffer_min_bytes: Some(1),
        direct: true,
    }
}

fn comm(rank: usize, size: usize, port: u16, t: Tuning) -> Communicator {
    Communicator::init(InitOpts {
        rank,
        size,
        local_rank: rank,
        // Ranks are threads of this test process: no pinning.
        local_size: None,
        bind: collective::affinity::Bind::None,
        master_addr: "127.0.0.1".into(),
        master_port: port,
        device: None,
        timeout: Duration::from_secs(30),
        tuning: t,
    })
    .unwrap_or_else(|e| panic!("rank {rank}: init: {e}"))
}

#[test]
fn every_type_and_op_on_four_ranks() {
    let n = 4;
    let port = free_port();
    on_threads(n, Duration::from_secs(240), move |r| {
        let mut c = comm(r, n, port, tuning(1024));
        assert!(c.transport().starts_with("rdma"), "{}", c.transport());
        for algo in ALGOS {
            c.set_algo(AlgoChoice { forced: Some(algo), ..AlgoChoice::default() });
            for dt in DataType::ALL {
                for op in ReduceOp::ALL {
                    for count in [0usize, 3, 517] {
                        dispatch_dtype!(dt, T => check_all_reduce::<T>(&mut c, op, count, algo.name()));
                    }
                }
            }
        }
        // Halving-doubling's all-gather went straight into the receive buffers
        // (crate::direct) over the real RDMA path.
        let (sent, received) = c.direct_messages();
        assert!(sent > 0 && received > 0, "rank {r}: direct {sent} sent, {received} received");
    });
}

#[test]
fn two_to_eight_ranks_awkward_counts() {
    for n in 2..=8usize {
        let port = free_port();
        on_threads(n, Duration::from_secs(240), move |r| {
            // Through the staging slots only: every call in the other tests here goes
            // straight from the application's buffers.
            let staged = Tuning { user_buffer_min_bytes: None, ..tuning(512) };
            let mut c = comm(r, n, port, staged);
            for algo in ALGOS {
                c.set_algo(AlgoChoice { forced: Some(algo), ..AlgoChoice::default() });
                for count in [0usize, 1, n - 1, n + 1, 1001] {
                    check_all_reduce::<f32>(&mut c, ReduceOp::Sum, count, algo.name());
                    check_all_reduce::<i32>(&mut c, ReduceOp::Max, count, algo.name());
                    check_all_reduce::<collective::half::bf16>(&mut c, ReduceOp::Avg, count, algo.name());
                }
            }
            // The other collectives once each.
            let count = 2 * n + 1;
            let send: Vec<u32> = (0..n * count).map(|i| (i + r) as u32).collect();
            let mut recv = vec![0u32; count];
            c.reduce_scatter(&send, &mut recv, ReduceOp::Sum).unwrap();
            let want: Vec<u32> = (0..count).map(|i| (0..n).map(|q| (r * count + i + q) as u32).sum()).collect();
            assert_eq!(recv, want, "reduce_scatter n={n}");
            let mut all = vec![0u32; n * count];
            c.all_gather(&recv, &mut all).unwrap();
            for q in 0..n {
                let w: Vec<u32> = (0..count).map(|i| (0..n).map(|p| (q * count + i + p) as u32).sum()).collect();
                assert_eq!(all[q * count..(q + 1) * count], w[..], "all_gather n={n} block {q}");
            }
            let mut b: Vec<i64> = if r == n - 1 { (0..count as i64).collect() } else { vec![0; count] };
            c.broadcast(&mut b, n - 1).unwrap();
            assert_eq!(b, (0..count as i64).collect::<Vec<_>>(), "broadcast n={n}");
            c.barrier().unwrap();
        });
    }
}

#[test]
fn large_message_default_tuning() {
    let n = 3;
    let port = free_port();
    on_threads(n, Duration::from_secs(240), move |r| {
        let mut c = comm(r, n, port, Tuning::default());
        for algo in ALGOS {
            c.set_algo(AlgoChoice { forced: Some(algo), ..AlgoChoice::default() });
            check_all_reduce::<f32>(&mut c, ReduceOp::Sum, (1 << 20) + 3, algo.name());
        }
    });
}
