#!/usr/bin/env bash
# gdr/tools/stock-cuda-check.sh: stock libibverbs' ibv_reg_dmabuf_mr on CUDA memory,
# through libdoorbell_preload.so, on a GPU machine that has no rdma-core at all.
#
#   stock-cuda-check.sh --pack DIR          (here, with cargo, cc and rdma-core)
#   stock-cuda-check.sh [--hide-system] DIR [GPU]   (there, or here to prove DIR suffices)
#
# --pack builds softhca/preload/tests/c/cuda_dmabuf_write.c and libdoorbell_preload.so
# and copies into DIR, stripped, the program, the shim, and the rdma-core libraries the
# program runs on: what `ldd` resolves for it and for the mlx5 provider, minus glibc,
# into DIR/lib, and the provider itself as DIR/lib/libmlx5-rdmav34.so (a plain copy of
# libmlx5.so.1, no symlinks; nothing needs libmlx5.so.1 under its own name: the program
# links only libibverbs, and the provider, once loaded by path, answers to its SONAME).
#
# The run mode sets the environment that makes the stock libibverbs use only DIR:
#   LD_LIBRARY_PATH=DIR/lib   libibverbs.so.1 and libnl from DIR (searched before the
#                             system's directories; there are none of them on the GPU
#                             machine anyway)
#   RDMAV_DRIVERS=DIR/lib/libmlx5
#                             libibverbs' load_drivers() (rdma-core libibverbs/
#                             dynamic_driver.c) dlopens a name starting with '/' as
#                             NAME + "-rdmav34.so", Debian 12's provider suffix, with no
#                             search. Its config directory, /etc/libibverbs.d, is fixed at
#                             build time (no variable moves it): where it is missing
#                             libibverbs prints a warning and goes on with RDMAV_DRIVERS.
#   LD_PRELOAD=DIR/libdoorbell_preload.so
#                             the shim: softhca0 (sysfs tree under SYSFS_PATH, which it
#                             sets itself, /dev/infiniband/uverbs0, the kernel calls), and
#                             gdr's CUDA resolver for NVIDIA dma-bufs.
# The program loads libcuda.so.1 itself (the machine's driver); it prints USING lines
# naming the libibverbs and provider it runs on, one CHECK line per step, and exits 0
# when all pass, 77 without libcuda (SKIP), 2 on a setup failure, 1 on a failed check.
#
# --hide-system (root; util-linux unshare) first hides this machine's own rdma-core in
# a private mount namespace: an empty directory over /etc/libibverbs.d and the provider
# directory, /dev/null over every libibverbs, libmlx5 and libnl file in the library
# directories. A run that still works there used nothing but DIR.
set -u

die() { echo "stock-cuda-check: $*" >&2; exit 2; }
here=$(cd "$(dirname "$0")/../.." && pwd)
multiarch=/usr/lib/x86_64-linux-gnu

pack() {
  local dir=$1
  command -v cc >/dev/null || die "cc missing (apt-get install gcc)"
  [ -f /usr/include/infiniband/verbs.h ] || die "verbs.h missing (apt-get install libibverbs-dev)"
  local provider=$multiarch/libibverbs/libmlx5-rdmav34.so
  [ -e "$provider" ] || die "$provider missing (apt-get install ibverbs-providers)"
  (cd "$here" && cargo build --release -q -p softhca-preload) || die "cargo build -p softhca-preload failed"
  local shim=${CARGO_TARGET_DIR:-$here/target}/release/libdoorbell_preload.so
  [ -f "$shim" ] || die "$shim missing after the build"
  rm -rf "$dir" && mkdir -p "$dir/lib" || die "cannot make $dir"
  cc -Wall -Wextra -Werror -O2 -o "$dir/cuda_dmabuf_write" \
    "$here/softhca/preload/tests/c/cuda_dmabuf_write.c" -libverbs || die "cc failed"
  cp "$shim" "$dir/libdoorbell_preload.so"
  cp "$(readlink -f "$provider")" "$dir/lib/libmlx5-rdmav34.so"
  # Every library the program and the provider need, except glibc's own (the GPU
  # machine's newer glibc runs what is built against this one).
  local lib name
  for lib in $( { ldd "$dir/cuda_dmabuf_write"; ldd "$provider"; } | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u); do
    name=$(basename "$lib")
    case $name in
      libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*|libmlx5.so.*) continue ;;
    esac
    cp "$(readlink -f "$lib")" "$dir/lib/$name"
  done
  strip --strip-unneeded "$dir/cuda_dmabuf_write" "$dir/libdoorbell_preload.so" "$dir"/lib/*
  chmod 0755 "$dir/cuda_dmabuf_write"
  (cd "$dir" && ls -l . lib)
  echo "packed $(du -sh "$dir" | cut -f1) in $dir"
}

hide_system() {
  local empty f
  empty=$(mktemp -d)
  for d in /etc/libibverbs.d $multiarch/libibverbs; do
    [ -d "$d" ] && { mount --bind "$empty" "$d" || die "mount over $d failed"; }
  done
  # /lib is /usr/lib on a merged-/usr system: each real file once.
  for f in $(readlink -f /lib/x86_64-linux-gnu/lib{ibverbs,mlx5,nl-3,nl-route-3}.so* \
                         $multiarch/lib{ibverbs,mlx5,nl-3,nl-route-3}.so* 2>/dev/null | sort -u); do
    [ -f "$f" ] && { mount --bind /dev/null "$f" || die "mount over $f failed"; }
  done
  echo "hidden: /etc/libibverbs.d ($(ls /etc/libibverbs.d | wc -l) entries now), $multiarch/libibverbs, system libibverbs/libmlx5/libnl"
}

run() {
  local dir gpu=${2:-0}
  dir=$(cd "$1" && pwd) || die "no directory $1"
  for f in cuda_dmabuf_write libdoorbell_preload.so lib/libibverbs.so.1 lib/libmlx5-rdmav34.so; do
    [ -f "$dir/$f" ] || die "$dir/$f missing (make the directory with --pack)"
  done
  # A copy that lost its modes (carried as plain files) still runs.
  [ -x "$dir/cuda_dmabuf_write" ] || chmod +x "$dir/cuda_dmabuf_write" || die "$dir/cuda_dmabuf_write is not executable"
  local env=(LD_LIBRARY_PATH="$dir/lib" RDMAV_DRIVERS="$dir/lib/libmlx5" LD_PRELOAD="$dir/libdoorbell_preload.so")
  echo "\$ env ${env[*]} $dir/cuda_dmabuf_write $gpu"
  env -u IBV_DRIVERS -u DOORBELL_PRELOAD_NO_IOCTL -u DOORBELL_PRELOAD_STATIC_UARS "${env[@]}" \
    timeout 180 "$dir/cuda_dmabuf_write" "$gpu" 2>&1
  local rc=$?
  echo "[exit $rc]"
  if [ $rc != 0 ] && [ $rc != 77 ]; then
    # One device run must be enough to see why: the same run again with the shim's,
    # softhca's and gdr's logs (DOORBELL_PRELOAD_TRACE is a tracing filter), the end.
    echo "--- again with DOORBELL_PRELOAD_TRACE=info,doorbell_preload=debug,softhca=debug,gdr=debug (last 150 lines)"
    env -u IBV_DRIVERS -u DOORBELL_PRELOAD_NO_IOCTL -u DOORBELL_PRELOAD_STATIC_UARS "${env[@]}" \
      DOORBELL_PRELOAD_TRACE=info,doorbell_preload=debug,softhca=debug,gdr=debug \
      timeout 180 "$dir/cuda_dmabuf_write" "$gpu" 2>&1 | tail -150
  fi
  return $rc
}

case ${1:-} in
  --pack) pack "${2:?usage: stock-cuda-check.sh --pack DIR}" ;;
  --hide-system)
    shift
    [ $# -ge 1 ] || die "usage: stock-cuda-check.sh --hide-system DIR [GPU]"
    if [ -z "${STOCK_CUDA_HIDDEN:-}" ]; then
      exec env STOCK_CUDA_HIDDEN=1 unshare --mount --propagation private bash "$0" --hide-system "$@"
    fi
    hide_system
    run "$@" ;;
  ''|-h|--help) sed -n '2,6p' "$0"; exit 2 ;;
  *) run "$@" ;;
esac
