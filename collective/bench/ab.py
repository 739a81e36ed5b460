#!/usr/bin/env python3
"""Interleaved A/B comparison of two doorbell all-reduce configurations.

    collective/bench/ab.py PAIRS [doorbell allreduce flags] -- [A: VAR=value ...] -- [B: VAR=value ...]

Runs `doorbell allreduce --count 0 FLAGS` PAIRS times under each environment, A then B
in even pairs and B then A in odd ones, and prints per size the median out-of-place
time of each and the median (lowest, highest) of the per-pair ratios B/A (below 1: B is
faster). The machines this project runs on change speed for minutes at a time, so
comparing two separate sweeps compares two periods; a pair's two launches run seconds
apart, and the ratio within a pair is what carries over.

`BIN` (and `BINB` for B) name the doorbell binary, by default
$CARGO_TARGET_DIR/release/doorbell or target/release/doorbell; two binaries compare two
builds. An environment side may be empty or `X=1` (nothing changed).

Example (docs/benchmarks-history.md, "Two slots per ring lane"):

    collective/bench/ab.py 10 --algo ring -b 1M -e 64M -n 10 -w 2 -- DOORBELL_RING_SLOTS=4 --
"""
import os
import statistics
import subprocess
import sys


def split(argv):
    if len(argv) < 2 or argv.count("--") != 2:
        sys.exit(__doc__)
    pairs = int(argv[0])
    rest = argv[1:]
    i = rest.index("--")
    j = rest.index("--", i + 1)
    return pairs, rest[:i], rest[i + 1:j], rest[j + 1:]


def run(binary, flags, assignments):
    env = dict(os.environ)
    for kv in assignments:
        k, _, v = kv.partition("=")
        env[k] = v
    proc = subprocess.run([binary, "allreduce", "--count", "0", *flags], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{binary} {' '.join(assignments)}: exit {proc.returncode}\n{proc.stderr}")
    out = proc.stdout
    times = {}
    for line in out.splitlines():
        f = line.split()
        # size count type redop time algbw busbw #wrong (out of place), then in place
        if len(f) >= 12 and f[0].isdigit():
            # "N/A" under -c 0 (results not checked).
            if f[7] not in ("0", "N/A") or f[11] not in ("0", "N/A"):
                sys.exit(f"wrong results: {line}")
            times[int(f[0])] = float(f[4])
    if not times:
        sys.exit(f"no table from {binary}:\n{out}")
    return times


def main():
    pairs, flags, env_a, env_b = split(sys.argv[1:])
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(root, "target"))
    bin_a = os.environ.get("BIN", os.path.join(target, "release", "doorbell"))
    bin_b = os.environ.get("BINB", bin_a)
    ta, tb, ratio = {}, {}, {}
    for p in range(pairs):
        res = {}
        for side in ("ab" if p % 2 == 0 else "ba"):
            res[side] = run(bin_a if side == "a" else bin_b, flags, env_a if side == "a" else env_b)
        for size, a in res["a"].items():
            b = res["b"].get(size)
            if b is not None:
                ta.setdefault(size, []).append(a)
                tb.setdefault(size, []).append(b)
                ratio.setdefault(size, []).append(b / a)
    print(f"# {pairs} pairs; A: {' '.join(env_a) or '-'}; B: {' '.join(env_b) or '-'}")
    print(f"# {'size':>10} {'A us':>10} {'B us':>10}  B/A median (lowest-highest)")
    for size in sorted(ratio):
        r = ratio[size]
        print(f"  {size:>10} {statistics.median(ta[size]):10.1f} {statistics.median(tb[size]):10.1f}"
              f"  {statistics.median(r):.3f} ({min(r):.2f}-{max(r):.2f})")


if __name__ == "__main__":
    main()
