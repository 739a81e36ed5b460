#!/usr/bin/env bash
# The collective benchmark of docs/BENCHMARKS.md: 4 ranks (-p) on this machine, doorbell's
# ring, tree, recursive doubling, halving-doubling and all-to-all all-reduce (float sum, softhca between
# processes of this host: its same-host path unless DOORBELL_WIRE=udp) against Open MPI's
# MPI_Allreduce over its shared-memory transport (`--mca btl vader,self`: CMA single copy
# for large messages, shared-memory queues for small ones) and over TCP loopback
# (`--mca btl tcp,self`), and a merged table of busbw ratios and the crossovers.
#
#   collective/bench/run.sh [-b 8] [-e 64M] [-n 10] [-w 2] [-N 1000] [-r 3] [-p 4] [-I] [-U] [-o OUTDIR]
#
# Sizes up to 64 KiB run with -N iterations (and -N/10 warm-up calls) instead of -n:
# a call there takes tens of microseconds, and 10 or 20 of them are a sample too small
# to compare on a machine whose scheduling hiccups last longer than that.
#
# The machine is shared and its speed drifts by up to 2x within minutes, so the
# programs run in rounds (ring, tree, doubling, halving, alltoall, Open MPI; -r rounds), each round's
# doorbell numbers are compared with that round's Open MPI numbers, and the table shows
# medians over the rounds: the median time of each program, and the median (with the
# lowest and highest) of the per-round ratios best doorbell time / Open MPI time (below 1:
# doorbell faster) and best doorbell busbw / Open MPI busbw (above 1: doorbell faster;
# "-" where Open MPI's busbw prints as 0.000); "default" is the same busbw ratio for the
# algorithm doorbell picks at that size when nobody forces one.
#
# -U adds Open MPI over UCX on the same softhca (`doorbell softhca -- mpirun --mca pml ucx
# --mca btl self`, UCX_TLS=rc_mlx5,ud_mlx5,self): the comparison of what doorbell's own
# all-reduce does with the same device underneath.
#
# -p sets the number of ranks (4 by default; 2 shows the transports without two ranks
# per CPU).
#
# -I interleaves the sizes above 64 KiB: each size is a launch of its own, and the
# programs measure it one after the other (in an order that rotates with the round)
# before the next size, so a slow period of the machine, which lasts minutes, falls on
# all the programs of a size rather than on one program's whole sweep.
#
# Needs openmpi-bin and libopenmpi-dev (mpicc, mpirun) and a release build of doorbell
# (built here if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
minb=8 maxb=64M iters=10 warmup=2 small_iters=1000 rounds=3 nranks=4 out="" interleave=0 ucx=0
while getopts "b:e:n:w:N:r:p:o:IU" o; do
  case $o in
    b) minb=$OPTARG ;; e) maxb=$OPTARG ;; n) iters=$OPTARG ;; w) warmup=$OPTARG ;; N) small_iters=$OPTARG ;; r) rounds=$OPTARG ;; p) nranks=$OPTARG ;; o) out=$OPTARG ;;
    I) interleave=1 ;;
    U) ucx=1 ;;
    *) echo "usage: $0 [-b min] [-e max] [-n iters] [-w warmup] [-N small-size iters] [-r rounds] [-p ranks] [-I] [-U] [-o outdir]" >&2; exit 2 ;;
  esac
done
target=${CARGO_TARGET_DIR:-$root/target}
bin=$target/release/doorbell
(cd "$root" && cargo build --release -q -p doorbell)
out=${out:-$(mktemp -d)}
mkdir -p "$out"
mpicc -O2 -o "$out/mpi_allreduce" "$root/collective/bench/mpi_allreduce.c"

# The small sizes (up to 64 KiB) run with -N iterations, the rest with -n; every launch
# of a program in a round appends its table to that program's file for the round.
split=65536
lo=$(numfmt --from=iec "$minb") hi=$(numfmt --from=iec "$maxb")
progs=(ring tree doubling halving alltoall mpi_vader mpi_tcp)
ndb=5 # doorbell's programs: the first ndb of progs
btls=(vader tcp)
if (( ucx )); then progs+=(mpi_ucx); btls+=(ucx); fi
# launch PROGRAM ROUND ARGS...: one run of PROGRAM, its table appended to its file.
launch() {
  local p=$1 r=$2
  shift 2
  if [[ $p == mpi_ucx ]]; then
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$bin" softhca -- mpirun --allow-run-as-root --oversubscribe -np "$nranks" \
      --mca pml ucx --mca btl self -x UCX_NET_DEVICES=softhca0:1 -x UCX_TLS=rc_mlx5,ud_mlx5,self \
      "$out/mpi_allreduce" "$@" >> "$out/${p}_r$r.txt"
  elif [[ $p == mpi_* ]]; then
    mpirun --allow-run-as-root --oversubscribe -np "$nranks" --mca btl "${p#mpi_},self" "$out/mpi_allreduce" "$@" >> "$out/${p}_r$r.txt"
  else
    "$bin" allreduce --nranks "$nranks" --count 0 --algo "$p" "$@" >> "$out/doorbell_${p}_r$r.txt"
  fi
}
small() { (( lo <= split )) && launch "$1" "$2" -b "$lo" -e $(( hi < split ? hi : split )) -n "$small_iters" -w $(( small_iters / 10 )) || true; }
big_lo=$(( lo > split ? lo : 2 * split ))

# The algorithm doorbell picks by itself at each size, as it states it ("doubling up to
# 65536 B, halving above"), for the table's "default" column.
"$bin" allreduce --nranks "$nranks" --count 0 -b 8 -e 8 -n 1 -w 0 | sed -n 's/.*algo auto (\(.*\)), transport.*/\1/p' > "$out/policy.txt"
echo "# $(date -u +%FT%TZ) $nranks ranks, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds$( (( interleave )) && echo ", sizes interleaved")" | tee "$out/env.txt"
for r in $(seq 1 "$rounds"); do
  for b in "${btls[@]}"; do : > "$out/mpi_${b}_r$r.txt"; done
  for p in "${progs[@]:0:ndb}"; do : > "$out/doorbell_${p}_r$r.txt"; done
done
for r in $(seq 1 "$rounds"); do
  for p in "${progs[@]}"; do
    echo "== round $r: $p" >&2
    small "$p" "$r"
    if (( ! interleave && hi > split )); then
      launch "$p" "$r" -b "$big_lo" -e "$hi" -n "$iters" -w "$warmup"
    fi
  done
done
if (( interleave && hi > split )); then
  for (( s = big_lo; s <= hi; s *= 2 )); do
    echo "== $s B" >&2
    for r in $(seq 1 "$rounds"); do
      for (( k = 0; k < ${#progs[@]}; k++ )); do
        launch "${progs[(k + r) % ${#progs[@]}]}" "$r" -b "$s" -e "$s" -n "$iters" -w "$warmup"
      done
    done
  done
fi
echo "# end $(date -u +%FT%TZ) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/env.txt"

python3 - "$out" "$rounds" "$root/collective/bench" <<'PY'
import sys, os, statistics as st
out, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import pool  # the table parser and the policy reader, shared with pool.py
rows = lambda name: pool.rows(os.path.join(out, name))
algos = ['ring', 'tree', 'doubling', 'halving', 'alltoall']
btls = [b for b in ['vader', 'tcp', 'ucx'] if os.path.exists(os.path.join(out, f'mpi_{b}_r1.txt'))]
runs = [({a: rows(f'doorbell_{a}_r{k}.txt') for a in algos}, {b: rows(f'mpi_{b}_r{k}.txt') for b in btls}) for k in range(1, rounds + 1)]
policy = pool.policy(out)
default = lambda s: next(a for a, top in policy if s <= top)
sizes = set.intersection(*[set.intersection(*[set(m[b]) for b in btls]) & set.intersection(*[set(d[a]) for a in algos]) for d, m in runs])
print(f"\nDefault: {', '.join(f'{a} up to {t} B' if t != float('inf') else f'{a} above' for a, t in policy)}")
print(f"\n| size | ring us | tree us | doubling us | halving us | alltoall us | {' | '.join(f'Open MPI {b} us' for b in btls)} | best algo | best/vader time | {' | '.join(f'default/{b} busbw' for b in btls)} | default algo |")
print("|---:|---:|---:|---:|---:|---:|" + "---:|" * len(btls) + ":--|:--|" + ":--|" * len(btls) + ":--|")
cross = {}
for s in sorted(sizes):
    t = {a: st.median(d[a][s][0] for d, _ in runs) for a in algos}
    mt = {b: st.median(m[b][s][0] for _, m in runs) for b in btls}
    best = min(algos, key=lambda a: t[a])
    for x in algos:
        for y in algos:
            if x != y and t[x] <= t[y] and (x, y) not in cross:
                cross[(x, y)] = s
    # Per round: doorbell's results of that round against that round's Open MPI.
    times = [min(d[a][s][0] for a in algos) / m['vader'][s][0] for d, m in runs]
    dflt = {b: [d[default(s)][s][1] / m[b][s][1] for d, m in runs if m[b][s][1] > 0] for b in btls}
    fmt = lambda v: f"{st.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "-"
    print(f"| {s} | {' | '.join(f'{t[a]:.1f}' for a in algos)} | {' | '.join(f'{mt[b]:.1f}' for b in btls)} | {best} | {fmt(times)} | {' | '.join(fmt(dflt[b]) for b in btls)} | {default(s)} |")
print()
for x, y in [('tree', 'doubling'), ('ring', 'tree'), ('ring', 'doubling'), ('halving', 'doubling'), ('ring', 'halving'), ('alltoall', 'halving')]:
    print(f"{x} at least as fast as {y} (median times) first at: {cross.get((x, y))} B")
PY
