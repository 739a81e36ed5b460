#!/bin/bash
# Two torchrun "nodes" on one machine (one GPU is enough), each made its own host for
# NCCL (NCCL_HOSTID differs per rank; no P2P, SHM or NVLS between them), running
# ${SCRIPT:-allreduce.py} (allreduce.py: the checked collectives; ddp_train.py: DDP
# training with the parameter check) over one of these network paths:
#   doorbell      NCCL_NET_PLUGIN=<this plugin>, NCCL_NET=doorbell (fail rather than
#                 fall back), host staging buffers (NCCL's default GDR decision for a
#                 NIC attached to the CPU)
#   doorbell-gdr  the same with NCCL_NET_GDR_LEVEL=SYS: GPU memory registered through
#                 regMrDmaBuf (softhca reaches it through gdr's resolver); allreduce.py
#                 hangs this way at its first collective (docs/nccl.md: softhca's CUDA
#                 copies on NCCL's proxy thread against PyTorch's cuLaunchKernel)
#   socket        NCCL's own Socket transport, for comparison
#   nodevice      the plugin offered no device (DOORBELL_NCCL_DEVICES=none): its init
#                 fails with one warning and NCCL falls back (to NET/Socket here)
#   kill          doorbell, both ranks looping 64 MiB all-reduces; rank 1 is killed
#                 (SIGKILL) after ${KILL_AFTER:-20} s; prints how long it took until
#                 rank 0's log showed NCCL's error (PyTorch's watchdog reads it with
#                 ncclCommGetAsyncError), and ends rank 0 if it has not exited
#                 ${KILL_GRACE:-60} s after that
# Usage: [SCRIPT=ddp_train.py] run-allreduce.sh MODE [PLUGIN.so]
# Logs in ${OUT:-./nccl-runs}/${LABEL:-MODE}/rank{0,1}.log
# Needs python3 with torch (torchrun) and a GPU; no cargo.
set -u
mode=${1:?usage: run-allreduce.sh doorbell|doorbell-gdr|socket|nodevice|kill [libnccl-net-doorbell.so]}
here=$(cd "$(dirname "$0")" && pwd)
plugin=${2:-}
if [ -z "$plugin" ]; then
    for p in "$here/libnccl-net-doorbell.so" "$here/../../target/release/libnccl-net-doorbell.so" "$PWD/libnccl-net-doorbell.so"; do
        [ -f "$p" ] && plugin=$p && break
    done
fi
script=${SCRIPT:-allreduce.py}
out=${OUT:-$PWD/nccl-runs}/${LABEL:-$mode}
mkdir -p "$out"
common=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-INFO}
        NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,ENV} NCCL_IB_DISABLE=1)
case $mode in
    doorbell|doorbell-gdr|kill|nodevice)
        [ -n "$plugin" ] && [ -f "$plugin" ] || { echo "no libnccl-net-doorbell.so (give its path)"; exit 2; }
        plugin=$(readlink -f "$plugin")
        # NCCL_NET_PLUGIN may be a path: NCCL dlopens a name with a '/' as it is.
        common+=(NCCL_NET_PLUGIN="$plugin")
        case $mode in
            # No device: NCCL_NET left unset, so that NCCL may fall back.
            nodevice) common+=(DOORBELL_NCCL_DEVICES=none-such) ;;
            *) common+=(NCCL_NET=doorbell DOORBELL_NCCL_DEVICES=${DOORBELL_NCCL_DEVICES:-softhca0}) ;;
        esac
        [ "$mode" = doorbell-gdr ] && common+=(NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=1 DOORBELL_NCCL_GDR=1)
        # The survivor tears itself down when NCCL reports the error (torch's watchdog).
        [ "$mode" = kill ] && common+=(LOOP_SECONDS=300 OPS=all_reduce SIZES=1024 DTYPES=float32 TORCH_NCCL_ASYNC_ERROR_HANDLING=3)
        ;;
    socket) common+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket) ;;
    *) echo "unknown mode $mode"; exit 2 ;;
esac
port=${MASTER_PORT:-$((29500 + RANDOM % 1000))}
pids=()
for r in 0 1; do
    env "${common[@]}" NCCL_HOSTID=doorbell-host$r \
        torchrun --nnodes=2 --nproc_per_node=1 --node_rank=$r --master_addr=127.0.0.1 --master_port=$port \
        "$here/$script" > "$out/rank$r.log" 2>&1 &
    pids+=($!)
done
rc=0
# HANG_DUMP_AFTER=N: if a rank is still running N s from now, write every thread's
# stack of both ranks' workers (cuda-gdb, which the GPU machine has) to rankR.stacks.
if [ -n "${HANG_DUMP_AFTER:-}" ] && command -v cuda-gdb >/dev/null; then
    (
        sleep "$HANG_DUMP_AFTER"
        for r in 0 1; do
            w=$(pgrep -P "${pids[$r]}" -f "$script" | head -1)
            [ -n "$w" ] || continue
            echo "rank $r (pid $w) still running after $HANG_DUMP_AFTER s: stacks in $out/rank$r.stacks"
            timeout 90 cuda-gdb -p "$w" -batch -ex "set pagination off" -ex "info threads" -ex "thread apply all bt 25" > "$out/rank$r.stacks" 2>&1
        done
    ) &
fi
if [ "$mode" = kill ]; then
    sleep "${KILL_AFTER:-20}"
    # torchrun's worker of rank 1: the child of that torchrun running the script.
    victim=$(pgrep -P "${pids[1]}" -f "$script" | head -1)
    t0=$(date +%s.%N)
    kill -9 "$victim" && echo "killed rank 1 (pid $victim) at $t0"
    # Rank 0's NCCL error: the plugin's failed request, then PyTorch's watchdog
    # reporting what ncclCommGetAsyncError returned.
    seen=""
    for _ in $(seq 1200); do
        if grep -q -E "ncclRemoteError|async exception|NCCL error" "$out/rank0.log"; then
            seen=$(date +%s.%N); break
        fi
        sleep 0.1
    done
    if [ -n "$seen" ]; then
        echo "rank 0 logged NCCL's error $(python3 -c "print(round($seen - $t0, 3))") s after the kill"
    else
        echo "rank 0 logged no NCCL error within 120 s of the kill"
    fi
    for _ in $(seq $((${KILL_GRACE:-60} * 10))); do
        kill -0 "${pids[0]}" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "${pids[0]}" 2>/dev/null; then
        echo "rank 0 still running $(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s after the kill: ended (SIGKILL to its torchrun and worker)"
        pkill -9 -P "${pids[0]}"; kill -9 "${pids[0]}"
    fi
    wait "${pids[0]}"; rc0=$?
    t1=$(date +%s.%N)
    echo "rank 0 exited with $rc0 after $(python3 -c "print(round($t1 - $t0, 3))") s"
    wait "${pids[1]}" 2>/dev/null
    grep -h -E "NET/doorbell|NCCL error|Watchdog|failed|Error" "$out/rank0.log" | head -15
    exit 0
fi
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "== $mode (logs in $out)"
grep -h -E "NET/Plugin|Initialized NET plugin|Using network|via NET/|NET/doorbell|GPU Direct RDMA" "$out/rank0.log" | sort -u | head -20
grep -h -E "^(all_reduce|all_gather|reduce_scatter|broadcast) |CHECK|^step |DDP |bit-identical" "$out"/rank*.log
exit $rc
