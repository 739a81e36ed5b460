#!/usr/bin/env bash
# GPU memory against host memory on the same softhca (issue 20, docs/gdr.md): write-bw and
# read-bw at 64 KiB, 1 MiB and 4 MiB, each run once with host buffers and once with GPU
# buffers behind dma-buf MRs (--use-cuda G --use-cuda-dmabuf), both ends in one command
# (--local, so both ends' buffers are on GPU G). Every GPU run also measures cudaMemcpy
# H2D and D2H at its size (pinned host memory, as many copies as RDMA iterations). The
# table shows the median over the rounds of each bandwidth and the ratios GPU/host,
# GPU/H2D and GPU/D2H, then the issue's target: GPU write-bw at 1 MiB at least 0.5 x
# host write-bw.
#
#   cli/bench/gdr.sh [-g GPU] [-t "write-bw read-bw"] [-s "65536 1048576 4194304"]
#                    [-n ITERS] [-r ROUNDS] [-o OUTDIR] [-- EXTRA BENCH ARGS]
#
# -n sets the iterations of every size; by default they shrink with the size so that a
# run moves 0.3 to 2 GiB (5000 at 64 KiB, 2000 at 1 MiB, 500 at 4 MiB). Host and GPU
# runs alternate within a round, so a slow period of the machine falls on both.
# Every run's full output is kept in OUTDIR (a temporary directory by default).
#
# DOORBELL names the binary (default: target/release/doorbell of this checkout, built
# if missing and cargo is there). The status is 0 when every run succeeded, whether or
# not the target is met (the last line says which).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
gpu=0 tests="write-bw read-bw" sizes="65536 1048576 4194304" iters="" rounds=3 out=""
while getopts "g:t:s:n:r:o:" o; do
  case $o in
    g) gpu=$OPTARG ;; t) tests=$OPTARG ;; s) sizes=$OPTARG ;; n) iters=$OPTARG ;; r) rounds=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-g gpu] [-t tests] [-s sizes] [-n iters] [-r rounds] [-o outdir] [-- bench args]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
extra=("$@")
bin=${DOORBELL:-$root/target/release/doorbell}
if [[ ! -x $bin ]]; then
  (cd "$root" && cargo build --release -q -p doorbell)
fi
out=${out:-$(mktemp -d)}
mkdir -p "$out"

iters_for() {
  if [[ -n $iters ]]; then echo "$iters"
  elif (( $1 >= 4194304 )); then echo 500
  elif (( $1 >= 1048576 )); then echo 2000
  else echo 5000; fi
}

# run TEST SIZE MEM ROUND: one --local run; its output goes to OUTDIR/TEST_SIZE_MEM_rROUND.txt.
run() {
  local t=$1 s=$2 mem=$3 r=$4 f="$out/${1}_${2}_${3}_r${4}.txt"
  local args=(bench "$t" --local -s "$s" -n "$(iters_for "$s")")
  [[ $mem == gpu ]] && args+=(--use-cuda "$gpu" --use-cuda-dmabuf)
  echo "== round $r: doorbell ${args[*]} ${extra[*]}" >&2
  if ! "$bin" "${args[@]}" "${extra[@]}" > "$f" 2> "$f.err"; then
    echo "FAILED: doorbell ${args[*]} ${extra[*]} (output in $f, $f.err):" >&2
    cat "$f.err" >&2
    exit 1
  fi
}

# The BW average of SIZE in perftest's table of FILE (its rows have 5 fields; the
# reference's rows have 6).
bw_of() { awk -v s="$2" '$1 == s && NF == 5 { print $4; exit }' "$1"; }
# H2D (field 3) or D2H (field 5) of SIZE in the cudaMemcpy reference of FILE.
ref_of() { awk -v s="$2" -v c="$3" '/cudaMemcpy reference:/ { on = 1 } on && $1 == s && NF == 6 { print $c; exit }' "$1"; }
# The median of the numbers on stdin.
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.3f", a / b; else print "-" }'; }

echo "# $(date -u +%FT%TZ) $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds, GPU $gpu, extra args: ${extra[*]:-none}" | tee "$out/env.txt"
for r in $(seq 1 "$rounds"); do
  for t in $tests; do
    for s in $sizes; do
      # Alternate which memory goes first, round by round.
      if (( r % 2 )); then run "$t" "$s" host "$r"; run "$t" "$s" gpu "$r"
      else run "$t" "$s" gpu "$r"; run "$t" "$s" host "$r"; fi
    done
  done
done

gpu_line=$(sed -n 's/^ GPU memory *: //p' "$out"/*_gpu_r1.txt | head -1)
echo "# GPU memory: ${gpu_line:-?}; medians over $rounds rounds, MB/sec (2^20 bytes/s)"
fmt="%-9s %9s %10s %10s %9s %10s %8s %10s %8s\n"
printf "$fmt" test bytes host GPU GPU/host H2D GPU/H2D D2H GPU/D2H
target=""
for t in $tests; do
  for s in $sizes; do
    host=$(for r in $(seq 1 "$rounds"); do bw_of "$out/${t}_${s}_host_r$r.txt" "$s"; done | median)
    dev=$(for r in $(seq 1 "$rounds"); do bw_of "$out/${t}_${s}_gpu_r$r.txt" "$s"; done | median)
    h2d=$(for r in $(seq 1 "$rounds"); do ref_of "$out/${t}_${s}_gpu_r$r.txt" "$s" 3; done | median)
    d2h=$(for r in $(seq 1 "$rounds"); do ref_of "$out/${t}_${s}_gpu_r$r.txt" "$s" 5; done | median)
    printf "$fmt" "$t" "$s" "$host" "$dev" "$(ratio "$dev" "$host")" "$h2d" "$(ratio "$dev" "$h2d")" "$d2h" "$(ratio "$dev" "$d2h")"
    if [[ $t == write-bw && $s == 1048576 ]]; then
      target=$(awk -v a="$dev" -v b="$host" 'BEGIN { r = (b > 0) ? a / b : 0; printf "%.3f x host (%s)", r, (r >= 0.5) ? "met" : "missed" }')
    fi
  done
done
[[ -n $target ]] && echo "# target: GPU write-bw at 1 MiB >= 0.5 x host write-bw: $target"
echo "# outputs: $out"
