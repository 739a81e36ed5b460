//! Double binary tree all-reduce.
//!
//! Two binary trees span the ranks; each reduces and broadcasts half of the data,
//! pipelined in chunks: a chunk goes up (each node reduces its children's partial
//! results with its own data and sends the sum to its parent), the root finishes it,
//! and it comes back down (each node stores it and forwards it to its children).
//! Up and down run as separate lanes, so chunk `k + 1` climbs while chunk `k`
//! descends, and the two trees run at the same time.
//!
//! The trees are complementary: a rank that is an inner node (with two links of
//! traffic in each direction) in one tree is a leaf in the other, so each rank
//! forwards about the same amount in total. Construction, with positions
//! `p = 1..=n`: position `p` with `t` trailing zero bits is a leaf when `t = 0`,
//! else its children are `p - 2^(t-1)` and the first of `p + 2^(t-1)`,
//! `p + 2^(t-2)`, ... that is at most `n`; the root is the highest power of two
//! `<= n`. Leaves are the odd positions. Tree 0 puts rank `p - 1` at position `p`;
//! tree 1 mirrors it (rank `n - p`) when `n` is even, or shifts it (rank `p mod n`)
//! when `n` is odd, which turns tree 0's leaves into tree 1's inner nodes.
//!
//! Reduction order at a node: `(child0 op own) op child1`.

use crate::engine::Engine;
use crate::plan::{split, Action, Plan};
use crate::stream::{Channel, StreamList};

/// One rank's place in a tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    pub parent: Option<usize>,
    pub children: Vec<usize>,
}

/// Children of position `p` (1-based) in a tree of `n` positions.
fn children_of(p: usize, n: usize) -> Vec<usize> {
    let t = p.trailing_zeros();
    if t == 0 {
        return vec![];
    }
    let mut v = vec![p - (1 << (t - 1))];
    let mut d = 1usize << (t - 1);
    while d > 0 && p + d > n {
        d >>= 1;
    }
    if d > 0 {
        v.push(p + d);
    }
    v
}

/// The two trees: `trees[t][rank]`.
pub fn double_binary_tree(n: usize) -> [Vec<Node>; 2] {
    let rank_of = |t: usize, p: usize| -> usize {
        if t == 0 {
            p - 1
        } else if n % 2 == 0 {
            n - p
        } else {
            p % n
        }
    };
    let build = |t: usize| {
        let mut nodes = vec![Node::default(); n];
        for p in 1..=n {
            let r = rank_of(t, p);
            for c in children_of(p, n) {
                let cr = rank_of(t, c);
                nodes[r].children.push(cr);
                nodes[cr].parent = Some(r);
            }
        }
        nodes
    };
    [build(0), build(1)]
}

/// The root of a tree.
pub fn root(tree: &[Node]) -> usize {
    tree.iter().position(|x| x.parent.is_none()).unwrap_or(0)
}

/// Streams the trees use: (inputs, outputs) as (peer, channel).
pub fn streams(rank: usize, n: usize) -> (StreamList, StreamList) {
    let mut ins = vec![];
    let mut outs = vec![];
    if n < 2 {
        return (ins, outs);
    }
    for (t, tree) in double_binary_tree(n).iter().enumerate() {
        let me = &tree[rank];
        for &c in &me.children {
            ins.push((c, Channel::tree_up(t)));
            outs.push((c, Channel::tree_down(t)));
        }
        if let Some(p) = me.parent {
            ins.push((p, Channel::tree_down(t)));
            outs.push((p, Channel::tree_up(t)));
        }
    }
    (ins, outs)
}

/// The all-reduce plan over `count` elements in chunks of at most `chunk` elements.
/// Data that fits one chunk goes through tree 0 alone: splitting it would double the
/// messages without adding pipelining.
pub fn all_reduce_plan(e: &Engine, rank: usize, n: usize, count: usize, chunk: usize) -> Plan {
    let mut plan = Plan::with_lanes(4);
    if n == 1 || count == 0 {
        return plan;
    }
    let ntrees = if count <= chunk { 1 } else { 2 };
    for (t, tree) in double_binary_tree(n).iter().enumerate().take(ntrees) {
        let (up_lane, down_lane) = (2 * t, 2 * t + 1);
        let me = &tree[rank];
        let (base, half) = split(count, ntrees, t);
        let chunks = half.div_ceil(chunk.max(1)).max(1);
        let up_in: Vec<u32> = me.children.iter().map(|&c| e.in_id(c, Channel::tree_up(t))).collect();
        let down_out: Vec<u32> = me.children.iter().map(|&c| e.out_id(c, Channel::tree_down(t))).collect();
        for k in 0..chunks {
            let (o, l) = split(half, chunks, k);
            let off = base + o;
            let mut up = Action::new(l).local(off);
            for &i in &up_in {
                up = up.input(i);
            }
            match me.parent {
                None => {
                    // Root: finish the chunk and send it down.
                    let mut a = up.store(off).finalize(true);
                    for &d in &down_out {
                        a = a.output(d);
                    }
                    plan.push(up_lane, a);
                }
                Some(p) => {
                    plan.push(up_lane, up.output(e.out_id(p, Channel::tree_up(t))));
                    let mut down = Action::new(l).input(e.in_id(p, Channel::tree_down(t))).store(off);
                    for &d in &down_out {
                        down = down.output(d);
                    }
                    plan.push(down_lane, down);
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth(tree: &[Node], r: usize) -> usize {
        match tree[r].parent {
            None => 0,
            Some(p) => 1 + depth(tree, p),
        }
    }

    #[test]
    fn trees_are_spanning_binary_and_shallow() {
        for n in 1..=64 {
            for tree in double_binary_tree(n).iter() {
                assert_eq!(tree.iter().filter(|x| x.parent.is_none()).count(), 1, "n={n}: one root");
                for (r, node) in tree.iter().enumerate() {
                    assert!(node.children.len() <= 2);
                    for &c in &node.children {
                        assert_eq!(tree[c].parent, Some(r));
                    }
                    let max_depth = (usize::BITS - n.leading_zeros()) as usize;
                    assert!(depth(tree, r) <= max_depth, "n={n} rank {r} too deep");
                }
            }
        }
    }

    #[test]
    fn trees_are_complementary() {
        for n in 2..=64usize {
            let [a, b] = double_binary_tree(n);
            let both_inner = (0..n).filter(|&r| !a[r].children.is_empty() && !b[r].children.is_empty()).count();
            assert!(both_inner <= 1, "n={n}: {both_inner} ranks are inner in both trees");
        }
    }

    #[test]
    fn four_ranks() {
        let [a, b] = double_binary_tree(4);
        assert_eq!(root(&a), 3);
        assert_eq!(a[3].children, vec![1]);
        assert_eq!(a[1].children, vec![0, 2]);
        assert_eq!(root(&b), 0);
        assert_eq!(b[2].children, vec![3, 1]);
    }
}
