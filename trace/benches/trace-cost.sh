#!/usr/bin/env bash
# What the trace points cost with tracing off: the doorbell build as shipped (trace
# points compiled in, DOORBELL_TRACE_DIR unset) against one built with the
# `no-trace-points` feature (tracing's static max_level_info: every trace!/debug!
# compiled out), in the same run, on the same machine.
#
#   trace/benches/trace-cost.sh [ROUNDS] [ITERATIONS]     (default 6 rounds of 20000)
#
# 1. Instructions per RDMA WRITE post (8-byte inline), counted by callgrind inside
#    `doorbell_post_write` of cli/examples/trace_post_cost.rs (which sets up tracing as
#    the doorbell binary does), from runs with N and 2N posts: (I(2N) - I(N)) / N. Also
#    with tracing on (DOORBELL_TRACE_DIR set), for scale.
# 2. `doorbell bench write-lat --local -s 8 -n ITERATIONS` one-way latency, the two
#    builds alternating for ROUNDS rounds: the median and the minimum of t_typical.
#
# Prints a markdown table (docs/runs/trace-cost.md holds a run). Needs valgrind. Leaves
# target/release with the default build.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-6}
ITERS=${2:-20000}
N_POST=1000
command -v valgrind >/dev/null || { echo "trace-cost: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
target="${CARGO_TARGET_DIR:-target}"
work=$(mktemp -d "${TMPDIR:-/tmp}/trace-cost.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The feature build first, so that target/release ends with the default one.
for v in off on; do
  feat=(); [ $v = off ] && feat=(--features no-trace-points)
  echo "building ($v: ${feat[*]:-default}) ..." >&2
  cargo build --release -q -p doorbell --bin doorbell --example trace_post_cost "${feat[@]}"
  mkdir -p "$work/$v"
  cp "$target/release/doorbell" "$target/release/examples/trace_post_cost" "$work/$v/"
done
rev=$(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo "+changes")

# softhca's doorbell trap makes a doorbell store wait for the engine thread, which
# valgrind never runs meanwhile (provider/benches/side-by-side.sh does the same).
export DOORBELL_DOORBELL_TRAP=0
unset DOORBELL_TRACE_DIR RUST_LOG
instr() { # BINARY [ENV...]
  local exe=$1; shift
  local n
  for n in $N_POST $((2 * N_POST)); do
    env "$@" valgrind --tool=callgrind --collect-atstart=no --toggle-collect=doorbell_post_write \
      --callgrind-out-file="$work/cg.$n" "$exe" "$n" >"$work/out" 2>&1 || { cat "$work/out" >&2; exit 1; }
  done
  echo $(( ($(awk '/^summary:/ {print $2}' "$work/cg.$((2 * N_POST))") - $(awk '/^summary:/ {print $2}' "$work/cg.$N_POST")) / N_POST ))
}
echo "counting instructions (callgrind) ..." >&2
i_off=$(instr "$work/off/trace_post_cost")
i_on=$(instr "$work/on/trace_post_cost")
mkdir -p "$work/rec"
i_rec=$(instr "$work/on/trace_post_cost" DOORBELL_TRACE_DIR="$work/rec")
unset DOORBELL_DOORBELL_TRAP

# t_min and t_typical of one write-lat run.
lat() { # BINARY
  "$1" bench write-lat --local -s 8 -n "$ITERS" 2>/dev/null \
    | awk '/t_typical/ { getline; print $3, $5; exit }'
}
echo "write-lat, $ROUNDS rounds of $ITERS iterations, alternating ..." >&2
: > "$work/lat.off"; : > "$work/lat.on"
for r in $(seq 1 "$ROUNDS"); do
  for v in off on; do lat "$work/$v/doorbell" >> "$work/lat.$v"; done
done
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.2f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
stats() { # FILE -> "median-typical min-typical min-tmin all-typicals"
  echo "$(cut -d' ' -f2 "$1" | median) $(cut -d' ' -f2 "$1" | sort -g | head -1) $(cut -d' ' -f1 "$1" | sort -g | head -1) $(cut -d' ' -f2 "$1" | paste -sd' ')"
}
read -r m_off lo_off tmin_off all_off <<<"$(stats "$work/lat.off")" || true
read -r m_on lo_on tmin_on all_on <<<"$(stats "$work/lat.on")" || true
cat <<EOT

\`trace/benches/trace-cost.sh $ROUNDS $ITERS\` at $rev, $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -m), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)

| build | instructions per post (8 B inline WRITE) | write-lat t_typical median [us] | lowest t_typical [us] | lowest t_min [us] |
|:--|--:|--:|--:|--:|
| trace points compiled out (\`--features no-trace-points\`) | $i_off | $m_off | $lo_off | $tmin_off |
| as shipped, tracing off (\`DOORBELL_TRACE_DIR\` unset) | $i_on | $m_on | $lo_on | $tmin_on |
| as shipped, tracing on (\`DOORBELL_TRACE_DIR\` set), for scale | $i_rec | | | |

t_typical of each round: compiled out: $all_off; tracing off: $all_on.
EOT
