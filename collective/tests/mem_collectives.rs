//! The algorithms on the in-process transport (threads as ranks, shared-memory
//! writes with RDMA semantics): every type and operation, 1 to 8 ranks, awkward
//! counts, both placements, ring and tree forced, with small slots so that every
//! call takes many rounds and runs into flow control.

mod common;

use std::time::Duration;

use collective::{dispatch_dtype, Algo, AlgoChoice, Communicator, DataType, Element, MemFabric, ReduceOp, Tuning};
use common::*;

/// Every algorithm, forced. Doubling needs a power-of-two rank count; forced on any
/// other it runs the tree, which the tests then check once more.
const ALGOS: [Algo; 5] = [Algo::Ring, Algo::Tree, Algo::Doubling, Algo::Halving, Algo::AllToAll];

fn small_tuning(algo: Option<Algo>) -> Tuning {
    Tuning {
        slot_bytes: 256,
        nslots: 2,
        ring_slots: 2,
        ring_lanes: 2,
        ring_min_chunk_bytes: 64,
        tree_chunk_bytes: 128,
        algo: AlgoChoice { forced: algo, ..AlgoChoice::default() },
        user_buffer_min_bytes: None,
        direct: true,
    }
}

fn counts(n: usize) -> Vec<usize> {
    let mut v = vec![0, 1, n.saturating_sub(1), n + 1, 3 * n + 2, 257];
    v.sort_unstable();
    v.dedup();
    v
}

#[test]
fn every_type_and_op_on_2_to_8_ranks() {
    for n in 1..=8usize {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(120), move |r| {
            let mut c = Communicator::in_process(&fabric, r, small_tuning(None)).unwrap();
            // Through staging, then straight from the buffers at every size.
            for user in [None, Some(1)] {
                c.set_user_buffers(user);
                for algo in ALGOS {
                    c.set_algo(AlgoChoice { forced: Some(algo), ..AlgoChoice::default() });
                    for dt in DataType::ALL {
                        for op in ReduceOp::ALL {
                            for count in counts(n) {
                                dispatch_dtype!(dt, T => check_all_reduce::<T>(&mut c, op, count, algo.name()));
                            }
                        }
                    }
                }
            }
        });
    }
}

#[test]
fn large_counts_with_default_slots() {
    for n in [3usize, 4, 7] {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(120), move |r| {
            let mut c = Communicator::in_process(&fabric, r, Tuning { slot_bytes: 4096, ..Tuning::default() }).unwrap();
            for algo in ALGOS {
                c.set_algo(AlgoChoice { forced: Some(algo), ..AlgoChoice::default() });
                for count in [100_003usize, 1 << 16] {
                    check_all_reduce::<f32>(&mut c, ReduceOp::Sum, count, algo.name());
                    check_all_reduce::<i64>(&mut c, ReduceOp::Max, count, algo.name());
                }
            }
        });
    }
}

/// Random floats: not exact, so compare against the exact (f64) sum within the
/// bound for any summation order of n terms, |err| <= (n-1) u sum|x| / (1 - (n-1) u),
/// and require every rank to hold the very same bits.
#[allow(clippy::needless_range_loop)]
fn rounding_within_bound<T: Element>(u: f64) {
    let n = 6;
    let count = 999;
    let fabric = MemFabric::new(n);
    let gen = |r: usize, i: usize| {
        // A fixed pseudo-random value in [-1, 1), exactly representable in T.
        let x = ((r as u64 * 0x9e37_79b9 + i as u64 * 0x85eb_ca6b) % 2001) as f64 / 1000.0 - 1.0;
        T::from_f64(x).to_f64()
    };
    let results = on_threads(n, Duration::from_secs(60), move |r| {
        let mut out = vec![];
        let mut c = Communicator::in_process(&fabric, r, small_tuning(None)).unwrap();
        for algo in ALGOS {
            c.set_algo(AlgoChoice { forced: Some(algo), ..AlgoChoice::default() });
            let send: Vec<T> = (0..count).map(|i| T::from_f64(gen(r, i))).collect();
            let mut recv = vec![T::default(); count];
            c.all_reduce(&send, &mut recv, ReduceOp::Sum).unwrap();
            out.push(recv);
        }
        out
    });
    let k = (n - 1) as f64;
    let gamma = k * u / (1.0 - k * u);
    for a in 0..ALGOS.len() {
        for i in 0..count {
            let exact: f64 = (0..n).map(|r| gen(r, i)).sum();
            let mag: f64 = (0..n).map(|r| gen(r, i).abs()).sum();
            let got = results[0][a][i].to_f64();
            // The final rounding to T adds at most u |result|.
            assert!((got - exact).abs() <= gamma * mag + u * exact.abs() + 1e-300, "{:?} algo {a} [{i}]: {got} vs {exact}", T::DTYPE);
            for r in 1..n {
                assert!(results[r][a][i] == results[0][a][i], "rank {r} differs from rank 0 at [{i}]");
            }
        }
    }
}

#[test]
#[allow(clippy::needless_range_loop)]
fn float_rounding_within_the_order_bound() {
    rounding_within_bound::<f32>(f32::EPSILON as f64 / 2.0);
    rounding_within_bound::<f64>(f64::EPSILON / 2.0);
    rounding_within_bound::<collective::half::f16>(2f64.powi(-11));
    rounding_within_bound::<collective::half::bf16>(2f64.powi(-8));
}

#[test]
fn reduce_scatter_all_gather_broadcast_barrier() {
    for n in [1usize, 2, 3, 5, 6, 8] {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(60), move |r| {
            let mut c = Communicator::in_process(&fabric, r, small_tuning(None)).unwrap();
            // Through staging, then from the buffers and with placement at every size.
            for (count, user) in [0usize, 1, 5, 97].into_iter().flat_map(|k| [(k, None), (k, Some(1))]) {
                c.set_user_buffers(user);
                // reduce-scatter: block b of rank r's send is data(op, r)[b*count..].
                for op in ReduceOp::ALL {
                    let send = data::<i32>(op, r, n * count);
                    let mut recv = vec![0i32; count];
                    c.reduce_scatter(&send, &mut recv, op).unwrap();
                    let want = reference::<i32>(op, n, n * count);
                    assert_eq!(recv, want[r * count..(r + 1) * count], "reduce_scatter n={n} count={count} {op}");
                }
                // all-gather.
                let send: Vec<u64> = (0..count).map(|i| (r * 1000 + i) as u64).collect();
                let mut recv = vec![0u64; n * count];
                c.all_gather(&send, &mut recv).unwrap();
                let want: Vec<u64> = (0..n).flat_map(|q| (0..count).map(move |i| (q * 1000 + i) as u64)).collect();
                assert_eq!(recv, want, "all_gather n={n} count={count}");
                // broadcast from every root.
                for root in 0..n {
                    let mut buf: Vec<f64> = (0..count).map(|i| if r == root { (root * 10 + i) as f64 } else { -1.0 }).collect();
                    c.broadcast(&mut buf, root).unwrap();
                    let want: Vec<f64> = (0..count).map(|i| (root * 10 + i) as f64).collect();
                    assert_eq!(buf, want, "broadcast n={n} count={count} root={root}");
                }
                c.barrier().unwrap();
            }
        });
    }
}

#[test]
fn bad_arguments_are_errors() {
    let fabric = MemFabric::new(2);
    on_threads(2, Duration::from_secs(30), move |r| {
        let mut c = Communicator::in_process(&fabric, r, Tuning::default()).unwrap();
        assert!(c.all_reduce(&[1f32; 3], &mut [0f32; 2], ReduceOp::Sum).is_err());
        assert!(c.reduce_scatter(&[1f32; 3], &mut [0f32; 2], ReduceOp::Sum).is_err());
        assert!(c.all_gather(&[1f32; 3], &mut [0f32; 2]).is_err());
        assert!(c.broadcast(&mut [1f32; 3], 2).is_err());
        // Still usable afterwards.
        let mut x = [r as f32];
        c.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
        assert_eq!(x, [1.0]);
    });
}

/// Ranks that disagree on a channel's slot count (`DOORBELL_RING_SLOTS` set on one
/// only) would write past each other's staging: setup refuses, naming the geometry.
#[test]
fn ranks_with_different_slot_counts_refuse_to_connect() {
    let fabric = MemFabric::new(2);
    let errs = on_threads(2, Duration::from_secs(30), move |r| {
        let t = Tuning { ring_slots: 2 + r, ..Tuning::default() };
        Communicator::in_process(&fabric, r, t).err().map(|e| e.to_string())
    });
    for (r, e) in errs.iter().enumerate() {
        let e = e.as_deref().unwrap_or_else(|| panic!("rank {r} connected"));
        assert!(e.contains("slot geometry") && e.contains("channel 0"), "rank {r}: {e}");
    }
}

/// Halving-doubling where it runs (4 and 8 ranks, four slots on its channels: the
/// tuning above has two, where it falls back to the ring), with blocks of a few
/// elements so that calls take many rounds.
///
/// Direct all-gather (the gathered blocks written straight into the receivers'
/// buffers): the even ranks take direct writes and the odd ones do not, so both
/// receive paths run, with and without user buffers on the sending side; in place
/// nobody announces a buffer, so nothing goes direct.
#[test]
fn halving_on_4_and_8_ranks() {
    for n in [4usize, 8] {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(120), move |r| {
            let t = Tuning { nslots: 4, ..small_tuning(Some(Algo::Halving)) };
            let mut c = Communicator::in_process(&fabric, r, t).unwrap();
            assert_eq!(c.algo_for(1 << 20), Algo::Halving);
            c.set_direct(r % 2 == 0);
            for user in [None, Some(1)] {
                c.set_user_buffers(user);
                for dt in DataType::ALL {
                    for op in ReduceOp::ALL {
                        for count in counts(n).into_iter().chain([8 * 64 * n + 5]) {
                            dispatch_dtype!(dt, T => check_all_reduce::<T>(&mut c, op, count, "halving"));
                        }
                    }
                }
            }
            let (sent, received) = c.direct_messages();
            if r % 2 == 0 {
                assert!(received > 0, "rank {r} takes direct writes");
            } else {
                assert_eq!(received, 0, "rank {r} said no");
            }
            // Every rank has an even all-gather partner: rank ^ 2 for the even ranks,
            // rank ^ 1 for the odd ones.
            assert!(sent > 0, "rank {r} sent direct");
            let before = c.direct_messages();
            let mut buf = vec![1.5f32; 8 * 64 * n];
            c.all_reduce_in_place(&mut buf, ReduceOp::Sum).unwrap();
            assert!(buf.iter().all(|&x| x == 1.5 * n as f32));
            assert_eq!(c.direct_messages(), before, "in place: nothing direct");
        });
    }
    // Two slots: eight ranks would send four messages a step before the partner takes
    // one, so they run the ring.
    let fabric = MemFabric::new(8);
    on_threads(8, Duration::from_secs(60), move |r| {
        let c = Communicator::in_process(&fabric, r, small_tuning(Some(Algo::Halving))).unwrap();
        assert_eq!(c.algo_for(1 << 20), Algo::Ring);
    });
}

/// The all-to-all where it runs (4 and 8 ranks; two slots per stream are enough), with
/// blocks of a few elements so that calls take many rounds (and each stream holds a
/// round's finished block and the next round's contribution at once). As in the
/// halving-doubling test, the even ranks take direct writes and the odd ones do not; in
/// place nothing goes direct. Counts below the rank count leave blocks empty (no message
/// either way); other rank counts fall back as a forced halving-doubling does.
#[test]
fn alltoall_on_4_and_8_ranks() {
    for n in [4usize, 8] {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(120), move |r| {
            let mut c = Communicator::in_process(&fabric, r, small_tuning(Some(Algo::AllToAll))).unwrap();
            assert_eq!(c.algo_for(1 << 20), Algo::AllToAll);
            c.set_direct(r % 2 == 0);
            for user in [None, Some(1)] {
                c.set_user_buffers(user);
                for dt in DataType::ALL {
                    for op in ReduceOp::ALL {
                        for count in counts(n).into_iter().chain([2, 8 * 64 * n + 5]) {
                            dispatch_dtype!(dt, T => check_all_reduce::<T>(&mut c, op, count, "alltoall"));
                        }
                    }
                }
            }
            let (sent, received) = c.direct_messages();
            if r % 2 == 0 {
                assert!(received > 0, "rank {r} takes direct writes");
            } else {
                assert_eq!(received, 0, "rank {r} said no");
            }
            assert!(sent > 0, "rank {r} sent direct (to the even ranks)");
            let before = c.direct_messages();
            let mut buf = vec![1.5f32; 8 * 64 * n];
            c.all_reduce_in_place(&mut buf, ReduceOp::Sum).unwrap();
            assert!(buf.iter().all(|&x| x == 1.5 * n as f32));
            assert_eq!(c.direct_messages(), before, "in place: nothing direct");
        });
    }
    for (n, want) in [(6usize, Algo::Ring), (16, Algo::Ring), (2, Algo::Ring)] {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(60), move |r| {
            let c = Communicator::in_process(&fabric, r, small_tuning(Some(Algo::AllToAll))).unwrap();
            assert_eq!(c.algo_for(1 << 20), want, "{n} ranks");
        });
    }
}

/// Recursive doubling sends no threshold credits: a consumed message's credit rides on
/// the paired stream's next message, in this call or the next doubling call, and the
/// idle flush returns it to a sender stuck without one. With two slots per stream that
/// must hold across calls of one chunk (one message per stream and call: every credit
/// rides into the next call), calls of many chunks (more messages per call than slots),
/// calls of other algorithms on other streams in between (the credits wait), and a rank
/// that arrives late (its partners find no credit and must be freed by the flush).
#[test]
fn doubling_credits_ride_across_calls_and_algorithms() {
    for n in [2usize, 4, 8] {
        let fabric = MemFabric::new(n);
        on_threads(n, Duration::from_secs(120), move |r| {
            let mut c = Communicator::in_process(&fabric, r, small_tuning(Some(Algo::Doubling))).unwrap();
            for i in 0..300usize {
                // 1 element (one message per stream), 5 chunks of 64 floats, 1 again.
                let count = [1usize, 5 * 64, 1][i % 3];
                if i % 50 == 7 && r == n - 1 {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if i % 25 == 0 {
                    c.set_algo(AlgoChoice { forced: Some(Algo::Ring), ..AlgoChoice::default() });
                    check_all_reduce::<f32>(&mut c, ReduceOp::Sum, 3 * n + 2, "ring between doubling calls");
                    c.barrier().unwrap();
                    c.set_algo(AlgoChoice { forced: Some(Algo::Doubling), ..AlgoChoice::default() });
                }
                if i % 2 == 0 {
                    check_all_reduce::<i32>(&mut c, ReduceOp::Sum, count, "doubling");
                } else {
                    let want = reference::<u64>(ReduceOp::Max, n, count);
                    let mut buf = data::<u64>(ReduceOp::Max, r, count);
                    c.all_reduce_in_place(&mut buf, ReduceOp::Max).unwrap();
                    assert_eq!(buf, want, "doubling in place, call {i}, {n} ranks");
                }
            }
        });
    }
}
