#!/bin/bash
# nccl-tests' all_reduce_perf between two "hosts" on one machine, over NCCL's Socket
# transport and over the doorbell plugin, in the same run, alternating.
#
# Each rank is an Open MPI process in its own UTS namespace with its own host name
# (nccl-tests takes the local rank from the host name's hash: two names, so both are
# local rank 0 on the one GPU) and its own NCCL_HOSTID (NCCL's host hash); P2P, SHM and
# NVLS are off, so the ranks can only talk through a network transport.
#
# Usage: run-nccl-tests.sh BUILD_DIR PLUGIN.so [TRANSPORT...]
#   BUILD_DIR  nccl-tests' build/ (all_reduce_perf built with MPI=1)
#   TRANSPORT  socket, doorbell, doorbell-gdr, doorbell-thread (softhca's own engine
#              thread, DOORBELL_POLLED=0), doorbell-polled (NCCL's proxy thread steps
#              softhca, DOORBELL_POLLED=1; unset, the plugin picks by CPU count), doorbell-udp and doorbell-gdr-udp (softhca's
#              RoCEv2-over-UDP path, DOORBELL_WIRE=udp, instead of its same-host path);
#              default: socket doorbell socket doorbell; TRANSPORT+VAR=VALUE[+...] adds
#              variables to that run (e.g. doorbell-thread+NCCL_MIN_NCHANNELS=4)
# Environment: ARGS (all_reduce_perf's, default -b 8 -e 256M -f 2 -g 1 -n 20 -w 5),
#   OUT (logs: OUT/nccl-tests/NN-TRANSPORT.txt, the table; NN-TRANSPORT-nccl/ the
#   NCCL_DEBUG=INFO lines of each rank, NCCL_DEBUG_FILE).
set -u
build=${1:?usage: run-nccl-tests.sh BUILD_DIR PLUGIN.so [TRANSPORT...]}
plugin=$(readlink -f "${2:?plugin}")
shift 2
[ $# -gt 0 ] || set -- socket doorbell socket doorbell
args=${ARGS:--b 8 -e 256M -f 2 -g 1 -n 20 -w 5}
out=${OUT:-$PWD/nccl-runs}/nccl-tests
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
k=0
for spec in "$@"; do
    k=$((k + 1))
    t=${spec%%+*}
    extra=()
    [ "$t" != "$spec" ] && IFS=+ read -r -a extra <<< "${spec#*+}"
    tag=$(printf '%02d-%s' $k "$spec")
    dbg="$out/$tag-nccl"
    mkdir -p "$dbg"
    env=(NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_IB_DISABLE=1
         NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV NCCL_DEBUG_FILE="$dbg/%h.%p.log")
    case $t in
        socket) env+=(NCCL_NET_PLUGIN=none NCCL_NET=Socket) ;;
        doorbell|doorbell-gdr|doorbell-thread|doorbell-polled|doorbell-udp|doorbell-gdr-udp)
            env+=(NCCL_NET_PLUGIN="$plugin" NCCL_NET=doorbell DOORBELL_NCCL_DEVICES=softhca0)
            case $t in doorbell-gdr*) env+=(NCCL_NET_GDR_LEVEL=SYS NCCL_DMABUF_ENABLE=1 DOORBELL_NCCL_GDR=1) ;; esac
            [ "$t" = doorbell-thread ] && env+=(DOORBELL_POLLED=0)
            [ "$t" = doorbell-polled ] && env+=(DOORBELL_POLLED=1)
            # softhca's RoCEv2-over-UDP path instead of its same-host path (the default
            # between the two ranks: one host, one network namespace).
            case $t in *-udp) env+=(DOORBELL_WIRE=udp) ;; esac
            ;;
        *) echo "unknown transport $t"; exit 2 ;;
    esac
    env+=("${extra[@]}")
    xs=()
    for e in "${env[@]}"; do xs+=(-x "$e"); done
    echo "== $tag: ${env[*]}"
    # shellcheck disable=SC2016 # expanded by each rank's shell
    timeout 240 mpirun -np 2 --oversubscribe --bind-to none \
        --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
        "${xs[@]}" \
        unshare --uts sh -c 'r=$OMPI_COMM_WORLD_RANK; hostname "host$r" && NCCL_HOSTID="doorbell-host$r" exec "$0" "$@"' \
        "$build/all_reduce_perf" $args > "$out/$tag.txt" 2>&1
    echo "rc $? ($(date -u +%T))"
    grep -h -E "Loaded net plugin|via NET/" "$dbg"/*.log 2>/dev/null | sed 's/^[^ ]* *//' | sort -u | head -5
    grep -E "^ +[0-9]+ +[0-9]+ +(float|int)|Avg bus bandwidth|wrong" "$out/$tag.txt" | awk 'NR<=2 || /Avg|wrong/ || $1>=1048576'
done
