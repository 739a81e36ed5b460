//! Shared helpers: run a function on every rank of a group (threads), with a
//! deadline so a hang fails the test instead of blocking it; exact test data and
//! references.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use collective::{Communicator, Element, ReduceOp};

/// Runs `f(rank)` on `n` threads; panics if any panics or if they are not all done
/// within `limit`.
pub fn on_threads<R: Send + 'static>(n: usize, limit: Duration, f: impl Fn(usize) -> R + Send + Sync + 'static) -> Vec<R> {
    let f = Arc::new(f);
    let hs: Vec<_> = (0..n)
        .map(|r| {
            let f = f.clone();
            std::thread::Builder::new().name(format!("rank{r}")).spawn(move || f(r)).unwrap()
        })
        .collect();
    let deadline = Instant::now() + limit;
    while hs.iter().any(|h| !h.is_finished()) {
        if Instant::now() > deadline {
            let stuck: Vec<usize> = hs.iter().enumerate().filter(|(_, h)| !h.is_finished()).map(|(i, _)| i).collect();
            panic!("ranks {stuck:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    hs.into_iter().map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e))).collect()
}

/// Exact test data: every partial result of these values is representable in every
/// type (sums of at most 8 values in 1..=4; products of 1s and 2s), so any reduction
/// order gives the same bits.
pub fn value(op: ReduceOp, rank: usize, i: usize) -> f64 {
    match op {
        ReduceOp::Prod => 1.0 + ((rank * 5 + i) % 3 == 0) as u8 as f64,
        _ => 1.0 + ((rank * 7 + i * 3) % 4) as f64,
    }
}

pub fn data<T: Element>(op: ReduceOp, rank: usize, count: usize) -> Vec<T> {
    (0..count).map(|i| T::from_f64(value(op, rank, i))).collect()
}

/// The reduction of everyone's data, in rank order, finished as the op says.
pub fn reference<T: Element>(op: ReduceOp, n: usize, count: usize) -> Vec<T> {
    (0..count)
        .map(|i| {
            let mut acc = T::from_f64(value(op, 0, i));
            for r in 1..n {
                acc = T::combine(acc, T::from_f64(value(op, r, i)), op);
            }
            if op == ReduceOp::Avg {
                acc = T::div_n(acc, n);
            }
            acc
        })
        .collect()
}

/// First mismatch, for messages.
pub fn first_diff<T: Element>(got: &[T], want: &[T]) -> Option<(usize, T, T)> {
    got.iter().zip(want).enumerate().find(|(_, (g, w))| g != w).map(|(i, (g, w))| (i, *g, *w))
}

/// Checks one all-reduce in both placements.
pub fn check_all_reduce<T: Element>(c: &mut Communicator, op: ReduceOp, count: usize, what: &str) {
    let n = c.size();
    let r = c.rank();
    let want = reference::<T>(op, n, count);
    let send = data::<T>(op, r, count);
    let mut recv = vec![T::default(); count];
    c.all_reduce(&send, &mut recv, op).unwrap_or_else(|e| panic!("{what}: rank {r}: {e}"));
    if let Some((i, g, w)) = first_diff(&recv, &want) {
        panic!("{what} {:?} {op} count={count} n={n} rank {r}: out-of-place [{i}] = {g:?}, want {w:?}", T::DTYPE);
    }
    assert_eq!(send, data::<T>(op, r, count), "{what}: send buffer modified");
    let mut buf = data::<T>(op, r, count);
    c.all_reduce_in_place(&mut buf, op).unwrap_or_else(|e| panic!("{what}: rank {r}: {e}"));
    if let Some((i, g, w)) = first_diff(&buf, &want) {
        panic!("{what} {:?} {op} count={count} n={n} rank {r}: in-place [{i}] = {g:?}, want {w:?}", T::DTYPE);
    }
}
