#!/usr/bin/env python3
"""Pools the rounds of several `run.sh` runs against the targets of docs/BENCHMARKS.md.

    collective/bench/pool.py DIR [DIR ...]

For every size, over all rounds of all the runs (the `-o` folders of run.sh), the ratio
of doorbell's default algorithm (the policy the run recorded in policy.txt) to that
round's Open MPI (each transport run.sh measured: vader, tcp): busbw (above 1: doorbell faster) from 1 MiB up, and Open MPI's time
over doorbell's at 8 B (above 1: doorbell faster). Prints the median, how many rounds
are at or above 1, and the quartiles.
"""
import glob
import os
import statistics
import sys


def rows(path):
    """A `doorbell allreduce` or mpi_allreduce table: size -> (out-of-place time, busbw)."""
    r = {}
    for line in open(path):
        f = line.split()
        if len(f) == 12 and not line.startswith('#') and f[0].isdigit():
            r[int(f[0])] = (float(f[4]), float(f[6]))  # out of place: time, busbw
    return r


def policy(folder):
    """The policy run.sh recorded in `folder`/policy.txt: "doubling up to 65536 B, halving
    above" -> [('doubling', 65536), ('halving', inf)]."""
    out = []
    for part in open(os.path.join(folder, 'policy.txt')).read().strip().split(', '):
        w = part.split()
        out.append((w[0], int(w[3]) if len(w) > 3 else float('inf')))
    return out


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    pooled = {}  # (transport, size) -> ratios
    for folder in sys.argv[1:]:
        pol = policy(folder)
        for mpi_file in sorted(glob.glob(os.path.join(folder, 'mpi_*_r*.txt'))):
            name = os.path.basename(mpi_file)[len('mpi_'):-len('.txt')]
            btl, k = name.rsplit('_r', 1)
            mpi = rows(mpi_file)
            ours = {}
            for s in mpi:
                algo = next(a for a, top in pol if s <= top)
                if algo not in ours:
                    ours[algo] = rows(os.path.join(folder, f'doorbell_{algo}_r{k}.txt'))
                if s not in ours[algo]:
                    continue
                t, bw = ours[algo][s]
                if s == 8:
                    pooled.setdefault((btl, s), []).append(mpi[s][0] / t)
                elif s >= 1 << 20 and mpi[s][1] > 0:
                    pooled.setdefault((btl, s), []).append(bw / mpi[s][1])
    print(f"# {len(sys.argv) - 1} runs; 8 B: Open MPI time / doorbell time; from 1 MiB: doorbell busbw / Open MPI busbw")
    for btl, s in sorted(pooled):
        v = sorted(pooled[(btl, s)])
        n = len(v)
        print(f"{btl:>6} {s:>10}  median {statistics.median(v):.2f}  at or above 1: {sum(x >= 1 for x in v)} of {n}"
              f"  quartiles {v[n // 4]:.2f} {v[(3 * n) // 4]:.2f}")


if __name__ == '__main__':
    main()
