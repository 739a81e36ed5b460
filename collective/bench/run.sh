#!/usr/bin/env bash
# The collective benchmark of docs/BENCHMARKS.md: 4 ranks on this machine, doorbell's
# ring, tree and recursive doubling all-reduce (float sum, softhca over 127.0.0.N)
# against Open MPI's MPI_Allreduce over TCP loopback, measured in the same run, and a
# merged table of busbw ratios and the crossovers.
#
#   collective/bench/run.sh [-b 8] [-e 64M] [-n 10] [-w 2] [-o OUTDIR]
#
# Needs openmpi-bin and libopenmpi-dev (mpicc, mpirun) and a release build of doorbell
# (built here if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
minb=8 maxb=64M iters=10 warmup=2 out=""
while getopts "b:e:n:w:o:" o; do
  case $o in
    b) minb=$OPTARG ;; e) maxb=$OPTARG ;; n) iters=$OPTARG ;; w) warmup=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-b min] [-e max] [-n iters] [-w warmup] [-o outdir]" >&2; exit 2 ;;
  esac
done
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release/doorbell
(cd "$root" && cargo build --release -q -p doorbell)
out=${out:-$(mktemp -d)}
mkdir -p "$out"
mpicc -O2 -o "$out/mpi_allreduce" "$root/collective/bench/mpi_allreduce.c"

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/env.txt"
for algo in ring tree doubling; do
  echo "== doorbell $algo" >&2
  "$bin" allreduce --count 0 --algo "$algo" -b "$minb" -e "$maxb" -n "$iters" -w "$warmup" | tee "$out/doorbell_$algo.txt"
done
echo "== Open MPI" >&2
mpirun --allow-run-as-root --oversubscribe -np 4 --mca btl tcp,self \
  "$out/mpi_allreduce" -b "$minb" -e "$maxb" -n "$iters" -w "$warmup" | tee "$out/mpi.txt"

python3 - "$out" <<'PY'
import sys, os
out = sys.argv[1]
def rows(name):
    r = {}
    for line in open(os.path.join(out, name)):
        f = line.split()
        if len(f) == 12 and not line.startswith('#') and f[0].isdigit():
            # size -> (out-of-place time, busbw), in-place ignored (same shape)
            r[int(f[0])] = (float(f[4]), float(f[6]))
    return r
algos = ['ring', 'tree', 'doubling']
res = {a: rows(f'doorbell_{a}.txt') for a in algos}
mpi = rows('mpi.txt')
print("\n| size | ring us | tree us | doubling us | Open MPI us | ring busbw | tree busbw | doubling busbw | MPI busbw | best/MPI time | best/MPI busbw | best algo |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:--|")
cross = {}
sizes = set(mpi)
for a in algos:
    sizes &= set(res[a])
for s in sorted(sizes):
    t = {a: res[a][s][0] for a in algos}
    b = {a: res[a][s][1] for a in algos}
    (mt, mb) = mpi[s]
    best = min(algos, key=lambda a: t[a])
    for x in algos:
        for y in algos:
            if x != y and t[x] <= t[y] and (x, y) not in cross:
                cross[(x, y)] = s
    bb = b[best]
    ratio = f"{bb / mb:.2f}" if mb > 0 else "-"
    print(f"| {s} | {t['ring']:.1f} | {t['tree']:.1f} | {t['doubling']:.1f} | {mt:.1f} | {b['ring']:.3f} | {b['tree']:.3f} | {b['doubling']:.3f} | {mb:.3f} | {t[best] / mt:.2f} | {ratio} | {best} |")
print()
for x, y in [('tree', 'doubling'), ('ring', 'tree'), ('ring', 'doubling')]:
    print(f"{x} at least as fast as {y} first at: {cross.get((x, y))} B")
PY
