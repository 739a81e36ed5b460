#!/usr/bin/env bash
# softhca's same-host path against its RoCEv2-over-UDP path and single-core memcpy, in the
# same run (docs/BENCHMARKS.md, the same-host rows): write-bw at 64 KiB and 4 MiB with
# --vs-memcpy (each run measures its own memcpy of 64 MiB before and after), and
# write-lat 8 B, every command once per wire (DOORBELL_WIRE=udp, then local) and per
# mode (the device's own thread, then --polled: the benchmark thread steps the device,
# as doorbell's collective and NCCL plugin do) in each round, so a slow minute of the
# machine falls on every variant. Then a table of medians per mode: write-bw / memcpy
# per wire and size, and the same-host write-lat over the UDP one, with the targets
# (>= 0.8; <= 0.5).
#
#   cli/bench/samehost.sh [-r ROUNDS] [-o OUTDIR]
#
# Every command's complete output goes to OUTDIR/raw.txt (a temporary folder by default),
# with `uptime` before each round. DOORBELL names the binary (default: this checkout's
# target/release/doorbell, built if missing).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=3 out=""
while getopts "r:o:" o; do
  case $o in
    r) rounds=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-r rounds] [-o outdir]" >&2; exit 2 ;;
  esac
done
bin=${DOORBELL:-$root/target/release/doorbell}
[ -x "$bin" ] || (cd "$root" && cargo build --release -q -p doorbell)
out=${out:-$(mktemp -d)}
mkdir -p "$out"
raw=$out/raw.txt
: > "$raw"
run() { # WIRE ARGS...
  local w=$1
  shift
  echo "\$ DOORBELL_WIRE=$w doorbell $*" >> "$raw"
  DOORBELL_WIRE=$w timeout 300 "$bin" "$@" >> "$raw" 2>&1 || echo "[exit $?]" >> "$raw"
  echo >> "$raw"
}
for r in $(seq 1 "$rounds"); do
  echo "# round $r: $(uptime)" | tee -a "$raw" >&2
  for m in "" --polled; do
    # shellcheck disable=SC2086 # $m: no word or one
    for w in udp local; do run "$w" bench write-bw --local -s 65536 -n 50000 --vs-memcpy $m; done
    # shellcheck disable=SC2086
    for w in udp local; do run "$w" bench write-bw --local -s 4194304 -n 1000 --vs-memcpy $m; done
    # shellcheck disable=SC2086
    for w in udp local; do run "$w" bench write-lat --local -s 8 -n 10000 $m; done
  done
done
echo "# end: $(uptime)" >> "$raw"
python3 - "$raw" <<'PY'
import re, statistics as st, sys
bw, lat = {}, {}
wire = None
for line in open(sys.argv[1]):
    m = re.match(r"\$ DOORBELL_WIRE=(\w+) doorbell bench (\S+)", line)
    if m:
        wire, test = m[1], m[2]
        mode = "polled" if "--polled" in line else "thread"
        continue
    m = re.search(r"ratio vs memcpy: ([\d.]+)\s+\((\d+) B: write-bw ([\d.]+) MB/sec, single-core memcpy of \d+ MiB ([\d.]+)", line)
    if m:
        bw.setdefault((mode, wire, int(m[2])), []).append((float(m[1]), float(m[3]), float(m[4])))
        continue
    # perftest's latency row: bytes iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
    f = line.split()
    if wire and test == "write-lat" and len(f) >= 7 and f[0] == "8" and f[1].isdigit():
        lat.setdefault((mode, wire), []).append(float(f[4]))
print("| mode | figure | udp | same-host | target |\n|:--|:--|--:|--:|:--|")
for mode in ("thread", "polled"):
    for size in (65536, 4194304):
        k = lambda w: (mode, w, size)
        cell = lambda w: (f"{st.median(r[0] for r in bw[k(w)]):.2f} ({st.median(r[1] for r in bw[k(w)]):.0f} / "
                          f"{st.median(r[2] for r in bw[k(w)]):.0f} MB/s)") if k(w) in bw else "-"
        print(f"| {mode} | write-bw {size >> 10} KiB / memcpy | {cell('udp')} | {cell('local')} | same-host >= 0.8 |")
    if (mode, "udp") in lat and (mode, "local") in lat:
        u, l = st.median(lat[(mode, "udp")]), st.median(lat[(mode, "local")])
        print(f"| {mode} | write-lat 8 B, t_typical us | {u:.2f} | {l:.2f} (ratio {l / u:.2f}) | same-host / udp <= 0.5 |")
if ("thread", "udp") in lat and ("polled", "local") in lat:
    u, l = st.median(lat[("thread", "udp")]), st.median(lat[("polled", "local")])
    print(f"| polled same-host / thread udp | write-lat 8 B, t_typical us | {u:.2f} | {l:.2f} (ratio {l / u:.2f}) | <= 0.5 |")
PY
echo "raw output: $raw" >&2
