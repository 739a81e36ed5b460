#!/bin/bash
# Two torchrun "nodes" on one machine (one GPU is enough), each made its own host for
# NCCL (NCCL_HOSTID differs per rank; no P2P, SHM or NVLS between them), running
# allreduce.py over one of three network paths:
#   doorbell      NCCL_NET_PLUGIN=<this plugin>, NCCL_NET=doorbell (fail rather than
#                 fall back), host staging buffers (NCCL's default GDR decision for a
#                 NIC attached to the CPU)
#   doorbell-gdr  the same with NCCL_NET_GDR_LEVEL=SYS: GPU memory registered through
#                 regMrDmaBuf (softhca reaches it through gdr's resolver)
#   socket        NCCL's own Socket transport, for comparison
# Usage: run-allreduce.sh MODE [PLUGIN.so] ; logs in ${OUT:-./nccl-runs}/MODE/rank{0,1}.log
# Needs python3 with torch (torchrun) and a GPU; no cargo.
set -u
mode=${1:?usage: run-allreduce.sh doorbell|doorbell-gdr|socket [libnccl-net-doorbell.so]}
here=$(cd "$(dirname "$0")" && pwd)
plugin=${2:-}
if [ -z "$plugin" ]; then
    for p in "$here/libnccl-net-doorbell.so" "$here/../../target/release/libnccl-net-doorbell.so" "$PWD/libnccl-net-doorbell.so"; do
        [ -f "$p" ] && plugin=$p && break
    done
fi
out=${OUT:-$PWD/nccl-runs}/$mode
mkdir -p "$out"
common=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-INFO}
        NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,ENV} NCCL_IB_DISABLE=1)
case $mode in
    doorbell|doorbell-gdr)
        [ -n "$plugin" ] && [ -f "$plugin" ] || { echo "no libnccl-net-doorbell.so (give its path)"; exit 2; }
        plugin=$(readlink -f "$plugin")
        # NCCL_NET_PLUGIN may be a path: NCCL dlopens a name with a '/' as it is.
        common+=(NCCL_NET_PLUGIN="$plugin" NCCL_NET=doorbell DOORBELL_NCCL_DEVICES=${DOORBELL_NCCL_DEVICES:-softhca0})
        [ "$mode" = doorbell-gdr ] && common+=(NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=1)
        ;;
    socket) common+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket) ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
port=${MASTER_PORT:-$((29500 + RANDOM % 1000))}
pids=()
for r in 0 1; do
    env "${common[@]}" NCCL_HOSTID=doorbell-host$r \
        torchrun --nnodes=2 --nproc_per_node=1 --node_rank=$r --master_addr=127.0.0.1 --master_port=$port \
        "$here/allreduce.py" > "$out/rank$r.log" 2>&1 &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "== $mode (logs in $out)"
grep -h -E "NET/Plugin|Initialized NET plugin|Using network|via NET/|NET/doorbell|GPU Direct RDMA" "$out/rank0.log" | sort -u | head -20
grep -h -E "^all_reduce|ALLREDUCE" "$out"/rank*.log
exit $rc
