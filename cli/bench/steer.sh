#!/usr/bin/env bash
# Steering benchmark (docs/steering.md, issue 15): frames per second from a veth through
# softhca's NIC RX steering into a RAW_PACKET QP, against the kernel's own AF_PACKET
# receive of the same frames in the same run, with 1, 100 and 10,000 exact-match rules
# installed (`ipv4.dst=A udp.dport=P --to-qp 0`, P = 9000..9000+N-1, one group), and the
# sender cycling over all N ports so every rule is hit.
#
#   cli/bench/steer.sh [-s SECONDS] [-r "1 100 10000"] [-o OUTDIR]
#
# Per rule count: a fresh `doorbell flow serve --rules` in namespace a (softhca's port on
# the veth there), `doorbell bench steer-sniff` beside it (the kernel reference), and
# `doorbell bench steer-send` in namespace b for SECONDS. Columns: frames sent per
# second; frames/s the kernel's AF_PACKET socket received; frames/s the QP received
# (through softhca's own AF_PACKET socket, its engine and the flow table); their ratio
# (QP / kernel); and QP / port (frames the QP got of those softhca's port took off the
# socket: the steering + delivery share, where a growing rule cost would show).
# Then `doorbell bench steer-classify`: the steering engine alone, ns per frame, with the
# frames hitting all N rules and only one of them.
# Needs root, ip and network namespaces: prints SKIP and exits 0 otherwise.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
secs=5 counts="1 100 10000" out=""
while getopts "s:r:o:" o; do
  case $o in
    s) secs=$OPTARG ;; r) counts=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-s seconds] [-r rule-counts] [-o outdir]" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null; then
  echo "SKIP: the steering benchmark needs root and iproute2 (network namespaces, veth, AF_PACKET)"; exit 0
fi
bin=${DOORBELL:-$root/target/release/doorbell}
[ -x "$bin" ] || (cd "$root" && cargo build --release -q -p doorbell)
out=${out:-$(mktemp -d)}
mkdir -p "$out"
raw=$out/raw.txt
: > "$raw"
tag=$$
na=sta$tag nb=stb$tag ia=sta$tag ib=stb$tag
ma=02:00:00:7a:00:01 mb=02:00:00:7a:00:02 ipa=10.122.0.1 ipb=10.122.0.2
sock=$out/flow.sock
cleanup() {
  "$bin" flow --socket "$sock" stop >/dev/null 2>&1 || true
  ip netns del "$na" 2>/dev/null || true; ip netns del "$nb" 2>/dev/null || true
}
trap cleanup EXIT
if ! ip netns add "$na" 2>/dev/null; then
  echo "SKIP: cannot create network namespaces here"; exit 0
fi
ip netns add "$nb"
ip link add "$ia" address $ma type veth peer name "$ib" address $mb
ip link set "$ia" netns "$na"; ip link set "$ib" netns "$nb"
ip -n "$na" addr add $ipa/24 dev "$ia"; ip -n "$nb" addr add $ipb/24 dev "$ib"
ip -n "$na" link set "$ia" up; ip -n "$nb" link set "$ib" up
ip -n "$na" link set lo up; ip -n "$nb" link set lo up

# A counter from `flow stats --once`: qp frames or port rx.
qp_frames() { "$bin" flow --socket "$sock" stats --once | awk '/^qp 0 /{for(i=1;i<=NF;i++) if($i=="frames"){print $(i+1); exit}}'; }
port_rx() { "$bin" flow --socket "$sock" stats --once | awk '/^port:/{print $3}'; }

echo "load before: $(uptime)" | tee -a "$raw"
rows=()
for n in $counts; do
  rules=$out/rules-$n.txt
  awk -v n="$n" -v a="$ipa" 'BEGIN{for(i=0;i<n;i++) printf "--prio 1 \x27ipv4.dst=%s udp.dport=%d\x27 --to-qp 0\n", a, 9000+i}' > "$rules"
  ip netns exec "$na" env DOORBELL_SOFTHCA_ADDR=$ipa "$bin" flow --socket "$sock" serve --port "$ia" --rq-size 16384 --rules "$rules" \
    > "$out/serve-$n.txt" 2>&1 &
  spid=$!
  for _ in $(seq 200); do grep -q READY "$out/serve-$n.txt" 2>/dev/null && break; sleep 0.1; done
  grep -q READY "$out/serve-$n.txt" || { cat "$out/serve-$n.txt"; echo "flow serve did not start" >&2; exit 1; }
  ip netns exec "$na" "$bin" bench steer-sniff --if "$ia" --dport 9000 --ports "$n" --secs "$(awk -v s="$secs" 'BEGIN{print s + 3}')" \
    > "$out/sniff-$n.txt" 2>&1 &
  kpid=$!
  for _ in $(seq 100); do grep -q READY "$out/sniff-$n.txt" 2>/dev/null && break; sleep 0.05; done
  q0=$(qp_frames) p0=$(port_rx)
  ip netns exec "$nb" "$bin" bench steer-send --if "$ib" --dst-mac $ma --src-ip $ipb --dst-ip $ipa --dport 9000 \
    --ports "$n" --secs "$secs" > "$out/send-$n.txt"
  wait $kpid
  q1=$(qp_frames) p1=$(port_rx)
  "$bin" flow --socket "$sock" stats --once | grep -E '^(qp|port)' > "$out/stats-$n.txt"
  "$bin" flow --socket "$sock" stop
  wait $spid || true
  sent=$(awk '{print $2}' "$out/send-$n.txt")
  kern=$(awk '/^received/{print $2}' "$out/sniff-$n.txt")
  { echo "== $n rules"; cat "$out/send-$n.txt" "$out/sniff-$n.txt"; echo "qp frames $q0 -> $q1, port rx $p0 -> $p1"; cat "$out/stats-$n.txt"; } >> "$raw"
  rows+=("$(awk -v n="$n" -v s="$secs" -v sent="$sent" -v k="$kern" -v q=$((q1 - q0)) -v p=$((p1 - p0)) \
    'BEGIN{printf "| %6d | %10.0f | %10.0f | %10.0f | %6.3f | %6.3f |", n, sent/s, k/s, q/s, (k>0?q/k:0), (p>0?q/p:0)}')")
done
echo "load after: $(uptime)" | tee -a "$raw"
echo
echo "| rules  | sent/s     | kernel/s   | QP/s       | QP/krn | QP/port |"
echo "|-------:|-----------:|-----------:|-----------:|-------:|--------:|"
printf '%s\n' "${rows[@]}"
echo
# The engine alone (no wire, no sockets): the lookup's own cost per frame, with the
# frames hitting every rule and then only one of them (cache footprint vs lookup).
rl=$(echo $counts | tr ' ' ',')
echo "steering engine alone (Steering::classify, one core):"
"$bin" bench steer-classify --rules "$rl" | tee -a "$raw"
"$bin" bench steer-classify --rules "$rl" --hot 1 | tail -n +3 | tee -a "$raw"
echo "(raw output: $raw)"
