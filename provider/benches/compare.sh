#!/usr/bin/env bash
# doorbell's provider side by side with rdma-core reached through C and through the Rust
# crates rdma-sys and sideway, on the same softhca (issue 19).
#
#   provider/benches/compare.sh [--quick]
#
# Columns (each its own program, each posting into a self-connected RC QP sized to hold
# every WQE and CQE, so that no measured call waits):
#   doorbell   provider::Qp::post_send / Cq::poll       bench-compare compare-doorbell
#   libmlx5    C: ibv_post_send, ibv_wr_*, ibv_poll_cq  benches/c/post_cost.c, compare/c/poll_lat.c
#   rdma-sys   the same calls through rdma-sys 0.3      compare-rdma-sys (feature rdma-sys)
#   sideway    sideway 0.4's guards and pollers         compare-sideway  (feature sideway)
# The rdma-core columns run stock libibverbs 44 + libmlx5 under libdoorbell_preload.so.
#
# Rows:
# 1. Instructions of one call of the measured function (callgrind --toggle-collect,
#    runs with N and 2N calls, the difference / N): one RDMA WRITE post of 8 B inline or
#    one 8-byte gather entry, through ibv_post_send and through ibv_wr_start ..
#    ibv_wr_complete (doorbell has one post API; its row repeats Qp::post_send), and one
#    poll that takes one CQE (all CQEs already written before the first poll).
# 2. Self-loop RDMA WRITE latency, one process: post one signaled 8 B inline WRITE and
#    poll until its CQE, timed each time (median and mean, microseconds). Not perftest's
#    two-process ping-pong (provider/benches/side-by-side.sh has that row); it shares
#    the CPU with softhca's engine thread and with whatever else runs, hence the best
#    of 3 rounds (all rounds printed).
#
# Needs cc, libibverbs-dev, valgrind, cmake (sideway's rdma-mummy-sys builds its shim
# with it) and libclang-dev (rdma-sys runs bindgen).
set -euo pipefail
cd "$(dirname "$0")/../.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
N_POST=$(( quick ? 200 : 1000 ))
N_LAT=$(( quick ? 200 : 2000 ))
ROUNDS=$(( quick ? 1 : 3 ))

need() { command -v "$1" >/dev/null || { echo "compare: $1 not found ($2)" >&2; exit 2; }; }
need cc "apt-get install gcc libibverbs-dev"
need valgrind "apt-get install valgrind"
need cmake "apt-get install cmake"

target="${CARGO_TARGET_DIR:-target}"
echo "building (release) ..." >&2
cargo build --release -q -p softhca-preload
cargo build --release -q -p bench-compare --features rdma-sys,sideway
preload="$target/release/libdoorbell_preload.so"
db="$target/release/compare-doorbell"
rs="$target/release/compare-rdma-sys"
sw="$target/release/compare-sideway"
work=$(mktemp -d "${TMPDIR:-/tmp}/compare.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -o "$work/post_cost" provider/benches/c/post_cost.c -libverbs -lmlx5
cc -O2 -Wall -o "$work/poll_lat" provider/compare/c/poll_lat.c -libverbs

# softhca's doorbell trap makes a doorbell store wait for the engine thread, which
# valgrind (one thread at a time) never runs meanwhile: counts are taken with it off.
export DOORBELL_DOORBELL_TRAP=0

# Instructions of one call of FUNCTION in `CMD... VARIANT N`, from runs with N and 2N.
instr() {
  local fn=$1; shift
  local a b
  for n in $N_POST $((2 * N_POST)); do
    # A poll run that met an empty CQ (it prints "poll misses: M") counted empty polls
    # too: it is repeated, three times at most.
    for try in 1 2 3; do
      valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$fn" \
        --callgrind-out-file="$work/cg.$fn.$n" "$@" "$n" >"$work/out" 2>&1 \
        || { cat "$work/out" >&2; exit 1; }
      grep -q ': ok$' "$work/out" || { cat "$work/out" >&2; exit 1; }
      grep -q '^poll misses: [1-9]' "$work/out" || break
      echo "compare: $fn $n: $(grep '^poll misses' "$work/out"), again" >&2
      [[ $try == 3 ]] && { echo "compare: $fn: empty polls in 3 runs" >&2; exit 1; }
    done
  done
  a=$(awk '/^summary:/ {print $2}' "$work/cg.$fn.$N_POST")
  b=$(awk '/^summary:/ {print $2}' "$work/cg.$fn.$((2 * N_POST))")
  echo $(( (b - a) / N_POST ))
}

echo "counting instructions (callgrind) ..." >&2
declare -A I
for v in inline sge; do
  I[db_$v]=$(instr cmp_post "$db" $v)
  I[c_$v]=$(LD_PRELOAD="$preload" instr post_send_$v "$work/post_cost" post_send_$v)
  I[rs_$v]=$(LD_PRELOAD="$preload" instr cmp_post "$rs" $v)
  I[sw_$v]=$(LD_PRELOAD="$preload" instr cmp_post "$sw" $v)
  I[c_wr_$v]=$(LD_PRELOAD="$preload" instr wr_$v "$work/post_cost" wr_$v)
  I[rs_wr_$v]=$(LD_PRELOAD="$preload" instr cmp_wr "$rs" wr-$v)
  I[sw_wr_$v]=$(LD_PRELOAD="$preload" instr cmp_wr "$sw" wr-$v)
done
I[db_poll]=$(instr cmp_poll "$db" poll)
I[c_poll]=$(LD_PRELOAD="$preload" instr poll_one "$work/poll_lat" poll)
I[rs_poll]=$(LD_PRELOAD="$preload" instr cmp_poll "$rs" poll)
I[sw_poll]=$(LD_PRELOAD="$preload" instr cmp_poll "$sw" poll)
unset DOORBELL_DOORBELL_TRAP

# The latency rows swing with the host's load (a poller that has started yielding waits
# for a scheduler turn): the four programs run in turn, ROUNDS times, and each column
# keeps its round with the lowest t_typical; every round's t_typical is printed below
# the table.
echo "self-loop write latency, $N_LAT iterations each, $ROUNDS rounds ..." >&2
lat() { "$@" "$N_LAT" | awk '/^lat:/ {print $3, $5}'; }
declare -A L_t L_a L_all
for r in $(seq 1 "$ROUNDS"); do
  for k in db c rs sw; do
    case $k in
      db) out=$(lat "$db" lat) ;;
      c) out=$(LD_PRELOAD="$preload" lat "$work/poll_lat" lat) ;;
      rs) out=$(LD_PRELOAD="$preload" lat "$rs" lat) ;;
      sw) out=$(LD_PRELOAD="$preload" lat "$sw" lat) ;;
    esac
    read -r t a <<<"$out"
    L_all[$k]="${L_all[$k]:-}${L_all[$k]:+ }$t"
    if [[ -z "${L_t[$k]:-}" ]] || awk -v x="$t" -v y="${L_t[$k]}" 'BEGIN {exit !(x < y)}'; then
      L_t[$k]=$t; L_a[$k]=$a
    fi
  done
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
# row LABEL DOORBELL C RDMA-SYS SIDEWAY
row() { echo "| $1 | $2 | $3 | $4 | $5 | $(ratio "$2" "$3") | $(ratio "$2" "$4") | $(ratio "$2" "$5") |"; }
cat <<EOF2

Side by side on softhca ($(uname -m), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)), $(date -u '+%Y-%m-%d %H:%M UTC'); \`$0${1:+ $1}\`

| measure | doorbell | libmlx5 (C) | rdma-sys | sideway | doorbell / C | doorbell / rdma-sys | doorbell / sideway |
|:--|--:|--:|--:|--:|--:|--:|--:|
$(row "instructions per RDMA WRITE post, 8 B inline, ibv_post_send" "${I[db_inline]}" "${I[c_inline]}" "${I[rs_inline]}" "${I[sw_inline]}")
$(row "instructions per RDMA WRITE post, 1 SGE, ibv_post_send" "${I[db_sge]}" "${I[c_sge]}" "${I[rs_sge]}" "${I[sw_sge]}")
$(row "instructions per RDMA WRITE post, 8 B inline, ibv_wr_*" "${I[db_inline]}" "${I[c_wr_inline]}" "${I[rs_wr_inline]}" "${I[sw_wr_inline]}")
$(row "instructions per RDMA WRITE post, 1 SGE, ibv_wr_*" "${I[db_sge]}" "${I[c_wr_sge]}" "${I[rs_wr_sge]}" "${I[sw_wr_sge]}")
$(row "instructions per poll of one CQE (ibv_poll_cq, 1 entry)" "${I[db_poll]}" "${I[c_poll]}" "${I[rs_poll]}" "${I[sw_poll]}")
$(row "self-loop write latency, 8 B inline, t_typical [usec]" "${L_t[db]}" "${L_t[c]}" "${L_t[rs]}" "${L_t[sw]}")
$(row "self-loop write latency, 8 B inline, t_avg [usec] (same round)" "${L_a[db]}" "${L_a[c]}" "${L_a[rs]}" "${L_a[sw]}")

doorbell's ibv_wr_* rows repeat its one post API (Qp::post_send). N = $N_POST and $((2 * N_POST)) posts/polls per callgrind run.
Latency: $N_LAT iterations a round, the round with the lowest t_typical of $ROUNDS; every round's t_typical [usec]: doorbell ${L_all[db]}; C ${L_all[c]}; rdma-sys ${L_all[rs]}; sideway ${L_all[sw]}.
EOF2
