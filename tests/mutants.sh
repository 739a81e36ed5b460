#!/usr/bin/env bash
# tests/mutants.sh [TARGET...]: cargo-mutants on the code whose bugs would lose data or
# lie to users (issue 17), one target after another. Not part of CI (it rebuilds a crate
# per mutant: hours of CPU); its last result, with a verdict for every survivor, is in
# docs/testing.md. Needs `cargo install cargo-mutants --locked` (27.1 was used).
#
# Targets (default: all, in this order):
#   prm          the hardware formats (prm/src), with prm's tests;
#   collective   the reductions (reduce.rs, dtype.rs, op.rs), with the reduction oracles
#                and the in-memory collectives;
#   softhca-ack  the AETH (ACK/NAK syndromes, credits, RNR timers) and the MR key and
#                bounds checks (objects/mr.rs, Hca::check_key), with softhca's unit tests
#                and its data-path, error and bounds tests;
#   responder    softhca's responder checks (the length, range and rights checks of
#                WRITE, READ and atomics: length_ok, check_read, recv_write, recv_atomic),
#                with the same tests as softhca-ack;
#   provider-wqe the provider's WQE builders (provider/src/wqe: send, small, inline,
#                data, ring), with provider's tests;
#   provider-wqe-size  provider/src/wqe/size.rs (the WQE size arithmetic; 87 mutants).
#
# Each mutant is tested against its own crate's tests only (-p), one at a time (-j 1),
# niced; the release profile (what CI tests) without debuginfo and with incremental
# builds (CARGO_PROFILE_RELEASE_*), so that a mutant rebuilds only what changed.
# Outputs: target/mutants/<target>/mutants.out/{outcomes.json,caught,missed,timeout,
# unviable}.txt (kept out of git).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_INCREMENTAL=true
out=target/mutants
mkdir -p "$out"

run() { # target name, then cargo-mutants arguments
  local name=$1; shift
  echo "mutants: $name ($(date -u +%H:%M:%S))"
  nice -n 19 cargo mutants --profile release -j 1 --build-timeout 300 -o "$out/$name" "$@" \
    >"$out/$name.log" 2>&1 || true   # exit 2 = some missed, 3 = some timed out
  tail -1 "$out/$name.log"
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(prm collective softhca-ack responder provider-wqe provider-wqe-size)
softhca_tests=(--cargo-arg=--lib --cargo-arg=--test=errors --cargo-arg=--test=bounds_multi_packet
  --cargo-arg=--test=data_path --cargo-arg=--test=device_edges --cargo-arg=--test=wire_scapy)
for t in "${targets[@]}"; do
  case $t in
    # bits.rs's compile-time const fns (total_bits, offset_of, str_eq) are left out: a
    # mutated loop there hangs rustc's const evaluation until the build timeout, and the
    # layouts they compute are checked against mlx5dv.h by prm's tests.
    prm) run prm -p prm --timeout 60 -E 'in (total_bits|offset_of|str_eq)$' ;;
    collective) run collective -p collective \
        -f collective/src/reduce.rs -f collective/src/dtype.rs -f collective/src/op.rs --timeout 180 \
        --cargo-arg=--lib --cargo-arg=--test=reduction_oracles --cargo-arg=--test=mem_collectives ;;
    softhca-ack) run softhca-ack -p softhca -f softhca/src/wire/aeth.rs -f softhca/src/objects/mr.rs \
        -f softhca/src/hca.rs -F 'aeth.rs|objects/mr.rs|check_key|mr_by_key' --timeout 240 "${softhca_tests[@]}" ;;
    responder) run responder -p softhca -f softhca/src/device/responder.rs \
        -F 'length_ok|check_read|recv_write|recv_atomic' --timeout 240 "${softhca_tests[@]}" ;;
    provider-wqe) run provider-wqe -p provider -f provider/src/wqe/send.rs -f provider/src/wqe/small.rs \
        -f provider/src/wqe/inline.rs -f provider/src/wqe/data.rs -f provider/src/wqe/ring.rs --timeout 120 ;;
    provider-wqe-size) run provider-wqe-size -p provider -f provider/src/wqe/size.rs --timeout 120 ;;
    *) echo "mutants: unknown target $t" >&2; exit 2 ;;
  esac
done
