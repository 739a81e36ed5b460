#!/usr/bin/env bash
# gdr/tools/gpu-node-checks.sh BIN OUTDIR: the GPU half's checks on a GPU node, each
# command echoed with its output and exit status (docs/gdr.md quotes these logs).
# BIN holds stripped builds: doorbell, libdoorbell_preload.so, gdr-gpu (gdr's
# tests/gpu.rs), gdr-unit (gdr's unit tests), and the examples nvml_query, cuda_ipc,
# unified_memory; and BIN/stock-cuda, packed by `gdr/tools/stock-cuda-check.sh --pack`
# (stock libibverbs + libmlx5 and a C program registering CUDA memory with
# ibv_reg_dmabuf_mr under the preload shim). The machine needs no cargo. Sections:
# verify, topo, tests, examples, stock, bench (set SECTIONS to run fewer).
set -u
bin=$(cd "${1:?usage: gpu-node-checks.sh BIN OUTDIR}" && pwd)
out=${2:?usage: gpu-node-checks.sh BIN OUTDIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)
export NCCL_NVLS_ENABLE=0
run() { echo "\$ $*"; timeout 240 "$@" 2>&1; echo "[exit $?]"; echo; }
sections=${SECTIONS:-verify topo tests examples stock bench}
for s in $sections; do
  case $s in
  verify) {
    run "$bin/doorbell" gdr verify
    run "$bin/doorbell" gdr verify --gpu 0 --mem host
  } > "$out/verify.txt" ;;
  topo) {
    nvidia-smi topo -m > /tmp/smi.txt 2>&1
    "$bin/doorbell" topo -m > /tmp/db.txt 2>&1
    echo "\$ nvidia-smi topo -m"; cat /tmp/smi.txt; echo
    echo "\$ doorbell topo -m"; cat /tmp/db.txt; echo
    echo "\$ head -c \$(wc -c < smi.txt) db.txt | cmp - smi.txt"
    head -c "$(wc -c < /tmp/smi.txt)" /tmp/db.txt | cmp - /tmp/smi.txt && echo "GPU rows identical"; echo
    run env DOORBELL_SOFTHCA_PCI=0000:00:03.0 "$bin/doorbell" topo -m
    run env DOORBELL_SOFTHCA_PCI=0000:00:03.0 "$bin/doorbell" topo
  } > "$out/topo.txt" ;;
  tests) {
    run "$bin/gdr-gpu" --test-threads=1 --nocapture
    run "$bin/gdr-unit" --test-threads=1 cuda:: buffer:: peer:: pinned caps::tests::nic_probe_on_softhca
  } > "$out/tests.txt" ;;
  examples) {
    cd "$bin"
    run ./nvml_query
    run ./cuda_ipc
    run ./unified_memory
    cd "$here"
  } > "$out/examples.txt" ;;
  stock) {
    run bash "$here/gdr/tools/stock-cuda-check.sh" "$bin/stock-cuda" 0
  } > "$out/stock.txt" ;;
  bench) {
    B=$bin/doorbell
    for t in write-bw read-bw send-bw; do for sz in 1 4097 1048577 4194304; do
      run "$B" bench $t --local --check -q 2 -s $sz -n 64 --use-cuda 0 --use-cuda-dmabuf
    done; done
    run "$B" bench write-bw --local --use-cuda 0 -s 4096 -n 10
    run "$B" bench write-bw --local -s 1048576 -n 2000 --use_cuda=0 --use_cuda_dmabuf
    DOORBELL=$B run bash "$here/cli/bench/gdr.sh" -r 3 -o /tmp/gdr-bench
  } > "$out/bench.txt" ;;
  esac
done
echo "logs in $out: $(ls "$out")"
