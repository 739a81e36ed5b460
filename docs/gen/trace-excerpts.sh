#!/bin/bash
# docs/gen/trace-excerpts.sh: regenerates the trace excerpts of docs/trace-driver-path.md
# (the blocks between `<!-- excerpt NAME -->` and `<!-- /excerpt -->`) and its picture
# docs/plots/trace-driver-path.svg from fresh `doorbell trace` runs:
#   A  doorbell bench write-lat --local -s 8 -n 1          (doorbell's own provider)
#   B  a stock ibv_rc_pingpong pair on softhca0 (preload)  (libibverbs + libmlx5)
#   C  the same pair on rxe0 in the QEMU guest, --passthrough (the real Linux kernel)
#   D  doorbell allreduce --nranks 2                        (the collective's verbs)
#
# Usage: docs/gen/trace-excerpts.sh [--check] [--no-vm]
#   --check  regenerate into a temporary directory and compare with the doc, ignoring
#            values (numbers: pids, times, addresses, PSNs; true/false) that change from
#            run to run: exits 1 and
#            prints a diff when an excerpt's lines, event names, fields or targets no
#            longer match what the code records. cli/tests/trace.rs runs this.
#   --no-vm  leave out run C (its excerpt is then neither rewritten nor checked).
# Environment: DOORBELL (default target/release/doorbell), PRELOAD (default
# target/release/libdoorbell_preload.so), IBV_RC_PINGPONG (default from PATH), PORT (the
# pair's TCP port, default 18611).
set -euo pipefail
cd "$(dirname "$0")/../.."
CHECK=0 VM=1
for a in "$@"; do
  case $a in
    --check) CHECK=1 ;;
    --no-vm) VM=0 ;;
    *) echo "usage: $0 [--check] [--no-vm]" >&2; exit 2 ;;
  esac
done
for f in "${DOORBELL:-target/release/doorbell}" "${PRELOAD:-target/release/libdoorbell_preload.so}"; do
  [ -f "$f" ] || { echo "trace-excerpts: $f missing (cargo build --release -p doorbell -p softhca-preload)" >&2; exit 2; }
done
DOORBELL=$(realpath "${DOORBELL:-target/release/doorbell}")
PRELOAD=$(realpath "${PRELOAD:-target/release/libdoorbell_preload.so}")
PP=${IBV_RC_PINGPONG:-$(command -v ibv_rc_pingpong || true)}
[ -n "$PP" ] || { echo "trace-excerpts: ibv_rc_pingpong missing (apt-get install ibverbs-utils)" >&2; exit 2; }
PORT=${PORT:-18611}
DOC=docs/trace-driver-path.md
SVG=docs/plots/trace-driver-path.svg
# Inside the repository: the guest sees it (not the host's /tmp).
mkdir -p target
T=$(mktemp -d "$PWD/target/trace-excerpts.XXXXXX")
trap 'rm -rf "$T"' EXIT
[ $CHECK = 1 ] && SVG=$T/picture.svg

# The stock pair: the server, then (once it listens, /proc/net/tcp state 0A) the client.
pair() { # DEVICE PORT SERVER-ADDRESS
  printf '%s -d %s -g 1 -n 1 -p %s & while ! grep -qi ":%04X [0-9A-F:]* 0A" /proc/net/tcp /proc/net/tcp6; do sleep 0.05; done; %s -d %s -g 1 -n 1 -p %s %s && wait' \
    "$PP" "$1" "$2" "$2" "$PP" "$1" "$2" "$3"
}

"$DOORBELL" trace -o "$T/a.json" --text -- "$DOORBELL" bench write-lat --local -s 8 -n 1 > "$T/a.txt" 2> "$T/a.err"
"$DOORBELL" trace -o "$T/b.json" --text --svg "$SVG" --preload "$PRELOAD" -- sh -c "$(pair softhca0 "$PORT" 127.0.0.1)" > "$T/b.txt" 2> "$T/b.err"
"$DOORBELL" trace -o "$T/d.json" --text -- "$DOORBELL" allreduce --nranks 2 --count 1024 --no-table > "$T/d.txt" 2> "$T/d.err"
if [ $VM = 1 ]; then
  tests/vm/rxe-vm.sh -- sh -c '"$1" trace --passthrough --preload "$2" -o /tmp/c.json --text -- sh -c "$3"' \
    sh "$DOORBELL" "$PRELOAD" "$(pair rxe0 "$PORT" 10.1.1.1)" > "$T/c.txt" 2> "$T/c.err"
fi

# The lines of the Nth (1-based) thread section whose header matches RE.
section() { # FILE RE N
  awk -v re="$2" -v want="$3" '/^== /{ on = 0; if ($0 ~ re && ++n == want) on = 1 } on' "$1"
}
# Lines from the first matching FROM up to the first matching TO (both kept).
# (awk reads to the end: an early exit would break the pipe of `set -o pipefail`.)
span() { awk -v from="$1" -v to="$2" '!on && !done && $0 ~ from { on = 1 } on { print } on && $0 ~ to { on = 0; done = 1 }'; }
# The first N lines (the same; head would exit early).
first() { awk -v n="$1" 'NR <= n'; }
# Leave out the engine's wake/sleep bookkeeping and the same-host link set-up.
quiet() { grep -Ev '\[softhca::(engine|link)\]|^source-port'; }

E=$T/excerpts; mkdir -p "$E"
section "$T/b.txt" 'ibv_rc_pingpong.*thread-' 1 | quiet | span 'softhca instance up' 'ASYNC_EVENT.ALLOC' > "$E/stock-open"
section "$T/b.txt" 'ibv_rc_pingpong.*thread-' 1 | quiet | span '^cq created' '-> RTS. driver' > "$E/stock-qp"
section "$T/b.txt" 'ibv_rc_pingpong.*127\.0\.0\.1\).*shca-' 1 | grep -E '^(sq doorbell|wqe|tx .*RcSendFirst)' | first 3 > "$E/stock-post"
section "$T/a.txt" 'thread [0-9]+ main$' 1 | span '^provider::open' '^-> write EX_QUERY_DEVICE' > "$E/own-open"
section "$T/a.txt" 'thread [0-9]+ main$' 1 | span '^provider::create_qp' '^-> modify from=Reset' > "$E/own-qp"
{ section "$T/a.txt" 'thread [0-9]+ main$' 1 | grep -E '\[provider::(post|doorbell)\]' | first 2
  section "$T/a.txt" 'thread [0-9]+ shca-' 1 | grep -E '^(sq doorbell|wqe) ' | first 2; } > "$E/own-post"
section "$T/d.txt" 'thread [0-9]+ main$' 1 | grep -E '\[provider::post\]' | first 2 > "$E/collective-post"
if [ $VM = 1 ]; then
  section "$T/c.txt" 'ibv_rc_pingpong.*thread-' 1 | span '^open /dev/infiniband' 'POST_SEND' > "$E/rxe"
fi
for f in "$E"/*; do
  [ -s "$f" ] || { echo "trace-excerpts: excerpt $(basename "$f") came out empty; see $T" >&2; trap - EXIT; exit 1; }
done

python3 - "$DOC" "$E" "$CHECK" <<'PY'
import os, re, sys, difflib
doc, exdir, check = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
text = open(doc).read()
block = re.compile(r"(<!-- excerpt (\S+) -->\n```text\n)(.*?)(```\n<!-- /excerpt -->)", re.S)
def norm(s):
    # What may change between runs: numbers (decimal or hex), times and durations, and
    # flags that depend on timing (softhca asks for an ACK sooner when it is loaded).
    s = re.sub(r"=(true|false)\b", "=B", s)
    s = re.sub(r"@[0-9.]+ (ns|us|ms|s)\b", "@T", s)
    s = re.sub(r"\([0-9.]+ (ns|us|ms|s)\)", "(D)", s)
    s = re.sub(r"0x[0-9a-f]+|[0-9a-f]*[0-9][0-9a-f]*", "N", s)
    return s
bad = 0
seen = set()
def fill(m):
    global bad
    name = m.group(2)
    path = os.path.join(exdir, name)
    if not os.path.exists(path):
        return m.group(0)          # --no-vm: run C's excerpt stays as it is
    seen.add(name)
    new = open(path).read()
    if check and norm(new) != norm(m.group(3)):
        bad += 1
        sys.stderr.write(f"excerpt {name} no longer matches:\n")
        sys.stderr.writelines(difflib.unified_diff(norm(m.group(3)).splitlines(True), norm(new).splitlines(True), "doc", "now"))
    return m.group(1) + new + m.group(4)
out = block.sub(fill, text)
missing = set(os.listdir(exdir)) - seen
if missing:
    sys.stderr.write(f"excerpts with no block in {doc}: {sorted(missing)}\n"); bad += 1
if check:
    sys.exit(1 if bad else 0)
open(doc, "w").write(out)
PY
[ $CHECK = 1 ] && { grep -q '<circle' "$SVG" || { echo "trace-excerpts: no picture drawn" >&2; exit 1; }; }
echo "trace-excerpts: ok ($(ls "$E" | wc -l) excerpts$([ $CHECK = 1 ] && echo ', checked'))"
