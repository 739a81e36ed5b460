#!/usr/bin/env bash
# tests/stress.sh [RUNS] [TEST...]: runs the timing-sensitive softhca tests RUNS times
# (default 100) in a row while two busy loops compete for the CPUs, and reports how many
# runs failed. Not part of CI (it loads the machine on purpose); its last result is in
# docs/testing.md. TEST names softhca integration tests (default: errors data_path
# doorbell_trap: ACK timeouts, RNR retries, completion events, the doorbell trap).
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-100}
shift || true
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=(errors data_path doorbell_trap)
args=()
for t in "${tests[@]}"; do args+=(--test "$t"); done
bins=$(cargo test --release -p softhca "${args[@]}" --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))/\1/p')
[ -n "$bins" ] || { echo "stress: no test binaries built" >&2; exit 2; }

busy=()
for _ in 1 2; do (while :; do :; done) & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT

fails=0
log=$(mktemp)
start=$(date +%s)
for i in $(seq 1 "$runs"); do
  for b in $bins; do
    if ! "$b" -q >"$log" 2>&1; then
      fails=$((fails + 1))
      echo "stress: run $i: $(basename "$b") failed:"
      grep -E "panicked|FAILED|left|right" "$log" | head -8
    fi
  done
done
echo "stress: $runs runs of ${tests[*]} under 2 busy loops on $(nproc) CPUs: $fails failed ($(( $(date +%s) - start )) s)"
rm -f "$log"
[ "$fails" -eq 0 ]
