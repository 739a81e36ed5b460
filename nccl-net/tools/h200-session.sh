#!/bin/bash
# The GPU machine's runs for docs/nccl.md, as one batch: each STEP bounded by a timeout,
# its output appended to $OUT/summary.txt, every log tarred into $OUT/logs.tgz after
# each step (the device tool brings back a few files only).
#
# Usage: h200-session.sh CARRY STEP...   (CARRY: the folder holding
#   libnccl-net-doorbell.so, nccl-tests/ (source) and tools/ (this folder's copy))
# Steps: info, build (nccl-tests, in the background), ddp, ddp-gdr, sweep, sweep-gdr[N],
#   nccltests[:T,T...] (transports of run-nccl-tests.sh), nodevice, kill, mps:T,T...
#   (nccl-tests under CUDA MPS, if the machine has it).
set -u
carry=$(readlink -f "${1:?usage: h200-session.sh CARRY STEP...}")
shift
tools=$carry/tools
plugin=$carry/libnccl-net-doorbell.so
w=${W:-/tmp/h200}
o=${OUT:-$w/out}
mkdir -p "$w" "$o"
export OUT=$w PYTHONUNBUFFERED=1
sum=$o/summary.txt
build_pid=""
pack() { tar czf "$o/logs.tgz" -C "$w" --exclude=out --exclude=nccl-tests-src . 2>/dev/null; }
say() { echo "$*" | tee -a "$sum"; }
nccltests_built() {
    [ -n "$build_pid" ] && { wait "$build_pid"; build_pid=""; }
    [ -x "$w/nccl-tests-src/build/all_reduce_perf" ]
}
for step in "$@"; do
    say "#### $step $(date -u +%T)"
    case $step in
        info)
            { nvidia-smi -L; nvidia-smi --query-gpu=driver_version,compute_mode --format=csv,noheader
              python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
              ls /usr/lib/x86_64-linux-gnu/libnccl.so* /usr/include/nccl.h 2>&1 | head -3
              mpirun --version 2>&1 | head -1; nproc; uname -r
              command -v nvidia-cuda-mps-control || echo "no nvidia-cuda-mps-control"
              ls /usr/local/nvidia/bin 2>/dev/null | tr '\n' ' '; echo
            } 2>&1 | tee -a "$sum" ;;
        build)
            rm -rf "$w/nccl-tests-src"; cp -r "$carry/nccl-tests" "$w/nccl-tests-src"
            ( cd "$w/nccl-tests-src" && t0=$(date +%s) &&
              make -j16 src.build MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NCCL_HOME=/usr \
                  NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" > "$w/nccl-tests-build.log" 2>&1
              echo "nccl-tests build rc $? in $(( $(date +%s) - t0 )) s" >> "$w/nccl-tests-build.log" ) &
            build_pid=$! ;;
        ddp|ddp-gdr)
            mode=doorbell; [ "$step" = ddp-gdr ] && mode=doorbell-gdr
            SCRIPT=ddp_train.py LABEL=$step timeout 200 bash "$tools/run-allreduce.sh" $mode "$plugin" 2>&1 | tee -a "$sum" ;;
        sweep|sweep-gdr*|sweep-socket)
            mode=doorbell; [ "${step#sweep-gdr}" != "$step" ] && mode=doorbell-gdr; [ "$step" = sweep-socket ] && mode=socket
            HANG_DUMP_AFTER=${HANG_DUMP_AFTER:-60} LABEL=$step timeout 200 bash "$tools/run-allreduce.sh" $mode "$plugin" 2>&1 | tee -a "$sum" ;;
        nodevice)
            OPS=all_reduce SIZES=8,1048576 DTYPES=float32 timeout 120 bash "$tools/run-allreduce.sh" nodevice "$plugin" 2>&1 | tee -a "$sum"
            grep -h -E "Loaded net plugin|no usable device|Failed to initialize|Using network|via NET/|Segmentation|SIGSEGV|signal|double free|CHECK" "$w/nodevice/rank0.log" | sort -u | tee -a "$sum" ;;
        kill)
            KILL_AFTER=${KILL_AFTER:-18} KILL_GRACE=${KILL_GRACE:-40} timeout 200 bash "$tools/run-allreduce.sh" kill "$plugin" 2>&1 | tee -a "$sum" ;;
        nccltests*)
            ts=${step#nccltests}; ts=${ts#:}
            nccltests_built || { say "nccl-tests not built"; tail -20 "$w/nccl-tests-build.log" | tee -a "$sum"; continue; }
            tail -1 "$w/nccl-tests-build.log" | tee -a "$sum"
            # shellcheck disable=SC2086 # a list of words
            timeout 540 bash "$tools/run-nccl-tests.sh" "$w/nccl-tests-src/build" "$plugin" ${ts//,/ } 2>&1 | tee -a "$sum" ;;
        mps:*)
            ts=${step#mps:}
            command -v nvidia-cuda-mps-control >/dev/null || { say "no MPS here"; continue; }
            nccltests_built || { say "nccl-tests not built"; continue; }
            export CUDA_MPS_PIPE_DIRECTORY=$w/mps-pipe CUDA_MPS_LOG_DIRECTORY=$w/mps-log
            mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
            nvidia-cuda-mps-control -d && say "MPS daemon started"
            OUT=$w/mps timeout 300 bash "$tools/run-nccl-tests.sh" "$w/nccl-tests-src/build" "$plugin" ${ts//,/ } 2>&1 | tee -a "$sum"
            echo quit | timeout 20 nvidia-cuda-mps-control; say "MPS daemon stopped"
            unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY ;;
        *) say "unknown step $step" ;;
    esac
    pack
done
say "#### done $(date -u +%T)"
pack
