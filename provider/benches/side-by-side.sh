#!/usr/bin/env bash
# doorbell's provider side by side with rdma-core's libmlx5, on the same softhca.
#
#   provider/benches/side-by-side.sh [--quick]
#
# 1. Instructions per RDMA WRITE post (8-byte inline, and one 8-byte gather entry),
#    counted by callgrind inside one measured function per variant:
#      doorbell   Qp::post_send                          provider/examples/post_cost.rs
#      libmlx5    ibv_post_send                          provider/benches/c/post_cost.c
#      libmlx5    ibv_wr_start .. ibv_wr_complete        (same program)
#    Each variant runs twice, with N and 2N posts (`--toggle-collect=FUNCTION`); the
#    difference divided by N is the cost of one post, free of first-call effects. Both
#    programs post into a self-connected RC QP whose send queue holds every WQE, so the
#    measured calls never wait; everything a post does up to and including the doorbell
#    (doorbell record, sfence, BlueFlame copy, sfence) is counted.
# 2. RDMA WRITE latency and bandwidth between two processes, each its own softhca host:
#    `doorbell bench write-lat|write-bw` against perftest's ib_write_lat|ib_write_bw
#    (libibverbs + libmlx5 under libdoorbell_preload.so), same sizes and iterations,
#    run one after the other.
#
# Prints a markdown table (copied into docs/BENCHMARKS.md). Needs cc, libibverbs-dev,
# ibverbs-providers, valgrind and perftest. Run it on an otherwise idle machine: the
# latency rows share the CPU with whatever else runs (softhca's engines poll).
set -euo pipefail
cd "$(dirname "$0")/../.."

quick=0
[[ "${1:-}" == "--quick" ]] && quick=1
N_POST=1000
N_LAT=$(( quick ? 200 : 1000 ))
N_BW=$(( quick ? 1000 : 5000 ))
BW_SIZE=65536

need() { command -v "$1" >/dev/null || { echo "side-by-side: $1 not found ($2)" >&2; exit 2; }; }
need cc "apt-get install gcc libibverbs-dev"
need valgrind "apt-get install valgrind"
need ib_write_lat "apt-get install perftest"
need ib_write_bw "apt-get install perftest"

target="${CARGO_TARGET_DIR:-target}"
echo "building (release) ..." >&2
cargo build --release -q -p doorbell -p softhca-preload
cargo build --release -q -p provider --example post_cost
doorbell="$target/release/doorbell"
preload="$target/release/libdoorbell_preload.so"
rust_post="$target/release/examples/post_cost"
work=$(mktemp -d "${TMPDIR:-/tmp}/side-by-side.XXXXXX")
trap 'rm -rf "$work"' EXIT
cc -O2 -Wall -o "$work/post_cost" provider/benches/c/post_cost.c -libverbs -lmlx5

# softhca's doorbell trap (userfaultfd write-protection of idle UAR pages) makes a
# doorbell store wait for the engine thread, which valgrind (one thread at a time)
# never runs meanwhile: the instruction counts are taken with it off, for both.
export DOORBELL_DOORBELL_TRAP=0

# Instructions of one call of FUNCTION in `CMD VARIANT N`, from runs with N and 2N.
instr() {
  local fn=$1; shift
  local a b
  for n in $N_POST $((2 * N_POST)); do
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect="$fn" \
      --callgrind-out-file="$work/cg.$fn.$n" "$@" "$n" >"$work/out" 2>&1 \
      || { cat "$work/out" >&2; exit 1; }
  done
  a=$(awk '/^summary:/ {print $2}' "$work/cg.$fn.$N_POST")
  b=$(awk '/^summary:/ {print $2}' "$work/cg.$fn.$((2 * N_POST))")
  echo $(( (b - a) / N_POST ))
}

echo "counting instructions (callgrind) ..." >&2
db_inline=$(instr doorbell_post_write "$rust_post" inline)
db_sge=$(instr doorbell_post_write "$rust_post" sge)
mlx_inline=$(LD_PRELOAD="$preload" instr post_send_inline "$work/post_cost" post_send_inline)
mlx_sge=$(LD_PRELOAD="$preload" instr post_send_sge "$work/post_cost" post_send_sge)
wr_inline=$(LD_PRELOAD="$preload" instr wr_inline "$work/post_cost" wr_inline)
wr_sge=$(LD_PRELOAD="$preload" instr wr_sge "$work/post_cost" wr_sge)
unset DOORBELL_DOORBELL_TRAP

# A free TCP port.
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# Waits until something listens on TCP port $1 (without connecting to it).
wait_listen() {
  local hex; hex=$(printf ':%04X' "$1")
  for _ in $(seq 1 300); do
    awk -v h="$hex" 'NR>1 && $2 ~ h"$" && $4=="0A" {f=1} END {exit !f}' /proc/net/tcp /proc/net/tcp6 && return 0
    sleep 0.05
  done
  echo "side-by-side: nothing listens on port $1" >&2; return 1
}
# Runs server and client of one test: `pair NAME CMD...` (the client gets 127.0.0.1
# appended); prints the client's output.
pair() {
  local name=$1; shift
  local p; p=$(port)
  "$@" -p "$p" >"$work/$name.server" 2>&1 &
  local spid=$!
  wait_listen "$p"
  timeout 600 "$@" -p "$p" 127.0.0.1 >"$work/$name.client" 2>&1 || { cat "$work/$name.client" "$work/$name.server" >&2; kill "$spid" 2>/dev/null; exit 1; }
  wait "$spid" || { cat "$work/$name.server" >&2; exit 1; }
  cat "$work/$name.client"
}
# Field $2 (1-based) of the row under the result header starting with $1.
row() { awk -v h="$1" -v f="$2" 'found {print $f; exit} index($0, h) {found=1}'; }
LAT_H="#bytes #iterations"
BW_H="#bytes     #iterations"

echo "RDMA WRITE latency, $N_LAT iterations of 2 B ..." >&2
lat_db=$(pair lat_db "$doorbell" bench write-lat -n "$N_LAT" -s 2)
lat_pt=$(pair lat_pt env LD_PRELOAD="$preload" ib_write_lat -d softhca0 -n "$N_LAT" -s 2)
echo "RDMA WRITE bandwidth, $N_BW iterations of $BW_SIZE B ..." >&2
bw_db=$(pair bw_db "$doorbell" bench write-bw -n "$N_BW" -s "$BW_SIZE")
bw_pt=$(pair bw_pt env LD_PRELOAD="$preload" ib_write_bw -d softhca0 -n "$N_BW" -s "$BW_SIZE")

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
cat <<EOF

Side by side on softhca ($(uname -m), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)); \`$0${1:+ $1}\`

| measure | doorbell | libmlx5 ibv_post_send | libmlx5 ibv_wr_* | doorbell / ibv_post_send |
|:--|--:|--:|--:|--:|
| instructions per RDMA WRITE post, 8 B inline | $db_inline | $mlx_inline | $wr_inline | $(ratio "$db_inline" "$mlx_inline") |
| instructions per RDMA WRITE post, 1 SGE | $db_sge | $mlx_sge | $wr_sge | $(ratio "$db_sge" "$mlx_sge") |

| measure | doorbell bench | perftest | doorbell / perftest |
|:--|--:|--:|--:|
| write-lat / ib_write_lat, 2 B, t_typical [usec] | $(row "$LAT_H" 5 <<<"$lat_db") | $(row "$LAT_H" 5 <<<"$lat_pt") | $(ratio "$(row "$LAT_H" 5 <<<"$lat_db")" "$(row "$LAT_H" 5 <<<"$lat_pt")") |
| write-lat / ib_write_lat, 2 B, t_avg [usec] | $(row "$LAT_H" 6 <<<"$lat_db") | $(row "$LAT_H" 6 <<<"$lat_pt") | $(ratio "$(row "$LAT_H" 6 <<<"$lat_db")" "$(row "$LAT_H" 6 <<<"$lat_pt")") |
| write-bw / ib_write_bw, $BW_SIZE B, BW average [MB/sec] | $(row "$BW_H" 4 <<<"$bw_db") | $(row "$BW_H" 4 <<<"$bw_pt") | $(ratio "$(row "$BW_H" 4 <<<"$bw_db")" "$(row "$BW_H" 4 <<<"$bw_pt")") |
EOF
