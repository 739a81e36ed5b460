#!/bin/bash
# tests/vm/rxe-vm.sh: run one command inside a small QEMU guest that has the real Linux
# RDMA stack (ib_core, ib_uverbs, rdma_rxe Soft-RoCE) with one rxe device, rxe0, on a
# dummy netdev.  The guest's root filesystem is this machine's root, shared read-only
# over virtio-9p with a tmpfs overlay on top, so binaries built here run there unchanged.
#
# Usage
#   tests/vm/rxe-vm.sh --setup           install packages, fetch the kernel, build the
#                                        initramfs (once per machine, about 30 s)
#   tests/vm/rxe-vm.sh --check           exit 0 if the VM can run here, else print why
#                                        (add --boot to also boot it once)
#   tests/vm/rxe-vm.sh -- CMD [ARGS...]  run CMD as root in the guest; prints its output
#                                        and exits with its exit code
#
# What the guest looks like when CMD starts
#   - cwd and PATH as on the host (cwd falls back to / if it is not visible);
#   - /dev, /proc, /sys, /dev/shm, /tmp, /run are the guest's own (the rest of / is
#     the host's, read-only below a throw-away writable overlay);
#   - netdev rxenet0 (type dummy, up) with 10.1.1.1/24 and an IPv6 link-local address;
#   - rxe0 on rxenet0, port 1 ACTIVE, with at least its link-local GID (index 0) and the
#     IPv4-mapped RoCEv2 GID ::ffff:10.1.1.1 in its table;
#   - /dev/infiniband/uverbs0 for rxe0;
#   - /dev/dri/card0 for vgem (when the kernel has it; optional like veth), the exporter
#     of CPU-mappable dma-bufs for dma-buf MR tests.
# rdma_rxe holds UDP port 4791 on every address of this (initial) network namespace, so
# softhca instances in the guest run in one of their own:
#   unshare --net sh -c 'ip link set lo up && exec CMD...'
#
# Exit codes: CMD's own exit code; 125 if the guest never reported one (boot failure,
# timeout: the console log tail is printed); 126 if --check fails or setup is missing.
#
# Environment
#   DOORBELL_VM_DIR      cache directory (default /tmp/doorbell-vm)
#   DOORBELL_VM_KPKG     kernel package to fetch (default: what linux-image-amd64 depends on)
#   DOORBELL_VM_MEM      guest memory in MiB (default 1024)
#   DOORBELL_VM_SMP      guest CPUs (default 2)
#   DOORBELL_VM_TIMEOUT  wall-clock limit in seconds for one run (default 600)
#   DOORBELL_VM_ACCEL    tcg (default) or kvm.  TCG is the safe choice: nested KVM often
#                        fails on CI runners and cloud VMs with "emulation failure".
#   DOORBELL_VM_PASSENV  host variables to export in the guest
#                        (default: RUST_BACKTRACE RUST_LOG CARGO_TERM_COLOR)
#   DOORBELL_VM_KEEP     if set, keep the per-run directory (console log, cmd.sh)
#
# The kernel is a stock Debian linux-image .deb, downloaded (never installed) and
# unpacked into the cache; only the modules the guest needs are copied into the
# initramfs.  Nothing outside the cache directory is modified except by --setup's
# apt-get install.
set -euo pipefail

VM_DIR=${DOORBELL_VM_DIR:-/tmp/doorbell-vm}
MEM=${DOORBELL_VM_MEM:-1024}
SMP=${DOORBELL_VM_SMP:-2}
TIMEOUT=${DOORBELL_VM_TIMEOUT:-600}
ACCEL=${DOORBELL_VM_ACCEL:-tcg}
# Bump when the generated init or the module list changes: --check then asks for --setup.
LAYOUT_VERSION=2

# Host packages: QEMU and the initramfs tools, plus the RDMA user space the guest
# borrows from the host root (rdma tool from iproute2, ibv_* tools, headers, strace), and
# libdrm-dev for the DRM uapi headers gdr's vgem layout test checks against.
PACKAGES="qemu-system-x86 busybox-static cpio kmod xz-utils zstd iproute2 rdma-core
  ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev rdmacm-utils perftest strace
  libdrm-dev"
# Modules loaded in the guest; their dependencies are added from modules.dep.  vgem (DRM's
# virtual GEM driver, with drm and drm_shmem_helper) exports CPU-mappable dma-bufs: the
# guest has no udmabuf and no dma-buf heaps, so it is the source of dma-buf MRs in tests.
MODULES="virtio_pci 9pnet_virtio 9p overlay crc32_generic ib_uverbs rdma_rxe rdma_ucm ib_umad dummy veth vgem"
# Of those, the ones whose absence is fatal.
REQUIRED_MODULES="virtio_pci 9pnet_virtio 9p overlay ib_uverbs rdma_rxe dummy"

log() { echo "rxe-vm: $*" >&2; }
die() { log "$*"; exit 126; }

# ------------------------------------------------------------------------------ setup

kernel_package() {
  if [ -n "${DOORBELL_VM_KPKG:-}" ]; then echo "$DOORBELL_VM_KPKG"; return; fi
  apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }'
}

# Unpacks the kernel .deb into $VM_DIR/kroot (skipped when that version is there).
fetch_kernel() {
  local pkg=$1 kver=${1#linux-image-}
  if [ -f "$VM_DIR/kroot/boot/vmlinuz-$kver" ]; then return; fi
  local dl; dl=$(mktemp -d "$VM_DIR/dl.XXXXXX"); chmod 755 "$dl"   # apt downloads as _apt
  (cd "$dl" && apt-get download -qq "$pkg") || die "apt-get download $pkg failed"
  rm -rf "$VM_DIR/kroot.new"
  dpkg-deb -x "$dl"/linux-image-*.deb "$VM_DIR/kroot.new"
  rm -rf "$dl" "$VM_DIR/kroot"
  mv "$VM_DIR/kroot.new" "$VM_DIR/kroot"
}

# The uncompressed ELF kernel boots through its PVH entry point, which saves the
# in-guest decompression (several seconds under TCG). Falls back to the bzImage.
extract_vmlinux() {
  local bz=$1 out=$2 off
  rm -f "$out"
  off=$(LC_ALL=C grep -obUaP -m1 '\xfd7zXZ\x00' "$bz" | head -1 | cut -d: -f1 || true)
  if [ -n "$off" ]; then
    { tail -c +$((off + 1)) "$bz" | xz -dc --single-stream > "$out"; } 2>/dev/null || true
  else
    off=$(LC_ALL=C grep -obUaP -m1 '\x28\xb5\x2f\xfd' "$bz" | head -1 | cut -d: -f1 || true)
    [ -z "$off" ] || { tail -c +$((off + 1)) "$bz" | zstd -dcq > "$out"; } 2>/dev/null || true
  fi
  if [ "$(head -c 4 "$out" 2>/dev/null | od -An -tx1 | tr -d ' ')" != 7f454c46 ]; then
    log "note: could not extract an ELF vmlinux; booting the compressed bzImage"
    cp "$bz" "$out"
  fi
}

# The guest's /init: mount the host root, load the RDMA modules, build the rxe device,
# then run the command written by the host into the per-run directory.
write_init() {
  cat > "$1" <<'EOF'
#!/bin/busybox sh
# doorbell rxe VM init (generated by tests/vm/rxe-vm.sh)
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
OUT=
for a in $(cat /proc/cmdline); do
  case $a in doorbellvm.out=*) OUT=${a#doorbellvm.out=} ;; esac
done
fail() { echo "DOORBELL-VM-INIT-FAIL: $*"; dmesg | tail -20; poweroff -f; }

# host root, read-only, under a tmpfs overlay
for m in virtio_pci 9pnet_virtio 9p overlay; do modprobe $m || fail "modprobe $m"; done
P9="trans=virtio,version=9p2000.L,msize=262144"
mount -t 9p -o $P9,ro hostroot /host || fail "mount host root"
mount -t tmpfs -o mode=0755 rw /rw
mkdir -p /rw/upper /rw/work
mount -t overlay -o lowerdir=/host,upperdir=/rw/upper,workdir=/rw/work root /newroot || fail "mount overlay"
R=/newroot
mount -t proc proc $R/proc
mount -t sysfs sys $R/sys
mount -t devtmpfs dev $R/dev
mkdir -p $R/dev/pts $R/dev/shm
mount -t devpts devpts $R/dev/pts
mount -t tmpfs shm $R/dev/shm
mount -t tmpfs -o mode=0755 run $R/run
[ -n "$OUT" ] || fail "no doorbellvm.out= on the kernel command line"
mkdir -p $R$OUT 2>/dev/null
mount -t 9p -o $P9,rw runout $R$OUT || fail "mount run directory"

# RDMA stack
for m in crc32_generic ib_umad rdma_ucm veth vgem; do modprobe $m 2>/dev/null; done
for m in ib_uverbs rdma_rxe dummy; do modprobe $m || fail "modprobe $m"; done
in_root() { chroot $R "$@"; }
echo 0 > /proc/sys/net/ipv6/conf/default/accept_dad   # link-local address (and GID) at once
in_root ip link set lo up
in_root ip link add rxenet0 type dummy || fail "ip link add rxenet0"
in_root ip link set rxenet0 up || fail "ip link set rxenet0 up"
in_root ip addr add 10.1.1.1/24 dev rxenet0 || fail "ip addr add"
in_root rdma link add rxe0 type rxe netdev rxenet0 || fail "rdma link add rxe0"
# wait (up to 10 s) for the link-local GID and the IPv4-mapped GID
G=/sys/class/infiniband/rxe0/ports/1/gids
i=0
while [ $i -lt 100 ]; do
  if grep -q '^fe80' $G/0 2>/dev/null && cat $G/* 2>/dev/null | grep -q '0000:0000:0000:0000:0000:ffff:0a01:0101'; then break; fi
  sleep 0.1; i=$((i + 1))
done
[ $i -lt 100 ] || fail "rxe0 GIDs did not appear"

in_root /bin/bash $OUT/cmd.sh >> $R$OUT/output 2>&1 < /dev/null
echo $? > $R$OUT/rc
sync
poweroff -f
EOF
  chmod 755 "$1"
}

setup() {
  if [ "$(id -u)" != 0 ]; then die "--setup needs root (apt-get install)"; fi
  log "installing packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $PACKAGES > /dev/null
  mkdir -p "$VM_DIR"
  local pkg; pkg=$(kernel_package)
  [ -n "$pkg" ] || die "no kernel package found (set DOORBELL_VM_KPKG)"
  local kver=${pkg#linux-image-}
  log "kernel $pkg"
  fetch_kernel "$pkg"
  local kmod="$VM_DIR/kroot/lib/modules/$kver"
  depmod -b "$VM_DIR/kroot" "$kver"

  # initramfs: busybox, the module closure, /init
  local ir; ir=$(mktemp -d "$VM_DIR/initramfs.XXXXXX")
  mkdir -p "$ir"/{bin,dev,proc,sys,host,rw,newroot,tmp} "$ir/lib/modules/$kver"
  cp "$(command -v busybox)" "$ir/bin/busybox"
  local files="" m dep
  for m in $MODULES; do
    dep=$(grep -E "/$m\.ko(\.(xz|zst|gz))?:" "$kmod/modules.dep" || true)
    if [ -z "$dep" ]; then
      case " $REQUIRED_MODULES " in *" $m "*) die "module $m is not in kernel $kver" ;; esac
      log "note: optional module $m is not in kernel $kver"; continue
    fi
    files="$files ${dep%%:*} ${dep#*:}"
  done
  local f dst
  for f in $(printf '%s\n' $files | sort -u); do
    dst="$ir/lib/modules/$kver/$f"
    mkdir -p "$(dirname "$dst")"
    cp "$kmod/$f" "$dst"
    case $f in
      *.xz) xz -d "$dst" ;;
      *.zst) zstd -q --rm -d "$dst" ;;
      *.gz) gzip -d "$dst" ;;
    esac
  done
  cp "$kmod"/modules.order "$kmod"/modules.builtin* "$ir/lib/modules/$kver/" 2>/dev/null || true
  depmod -b "$ir" "$kver"
  write_init "$ir/init"
  (cd "$ir" && find . | cpio -o -H newc --quiet | gzip -1) > "$VM_DIR/initramfs.cpio.gz.new"
  rm -rf "$ir"
  extract_vmlinux "$VM_DIR/kroot/boot/vmlinuz-$kver" "$VM_DIR/vmlinux.new"
  mv "$VM_DIR/vmlinux.new" "$VM_DIR/vmlinux"
  mv "$VM_DIR/initramfs.cpio.gz.new" "$VM_DIR/initramfs.cpio.gz"
  echo "layout=$LAYOUT_VERSION kernel=$kver" > "$VM_DIR/stamp"
  log "setup done in $VM_DIR (kernel $kver)"
}

# ------------------------------------------------------------------------------ check

# Prints the first reason the VM cannot run here; returns 0 when it can.
why_not() {
  command -v qemu-system-x86_64 > /dev/null || { echo "qemu-system-x86_64 not installed"; return 1; }
  command -v timeout > /dev/null || { echo "coreutils timeout missing"; return 1; }
  [ -d "$VM_DIR" ] || { echo "$VM_DIR does not exist (not set up)"; return 1; }
  [ -f "$VM_DIR/stamp" ] || { echo "$VM_DIR/stamp missing (setup incomplete)"; return 1; }
  grep -q "^layout=$LAYOUT_VERSION " "$VM_DIR/stamp" || { echo "cache built by another version of this script"; return 1; }
  [ -s "$VM_DIR/vmlinux" ] || { echo "$VM_DIR/vmlinux missing"; return 1; }
  [ -s "$VM_DIR/initramfs.cpio.gz" ] || { echo "$VM_DIR/initramfs.cpio.gz missing"; return 1; }
  [ -w "$VM_DIR" ] || { echo "$VM_DIR is not writable"; return 1; }
  command -v rdma > /dev/null || [ -x /usr/sbin/rdma ] || [ -x /sbin/rdma ] || { echo "rdma tool (iproute2) missing on the host root"; return 1; }
  qemu-system-x86_64 -device help 2>/dev/null | grep -q virtio-9p || { echo "this QEMU has no virtio-9p (virtfs) support"; return 1; }
  if [ "$ACCEL" = kvm ] && [ ! -w /dev/kvm ]; then echo "DOORBELL_VM_ACCEL=kvm but /dev/kvm is not usable"; return 1; fi
  return 0
}

check() {
  local reason
  if ! reason=$(why_not); then
    echo "rxe-vm: unavailable: $reason (run tests/vm/rxe-vm.sh --setup)"
    return 126
  fi
  if [ "${1:-}" = --boot ]; then
    local out
    if ! out=$(run_guest sh -c 'test -e /dev/infiniband/uverbs0 && echo booted' 2>&1) || [ "${out##*$'\n'}" != booted ]; then
      echo "rxe-vm: unavailable: the guest did not boot: ${out: -300}"
      return 126
    fi
  fi
  echo "rxe-vm: ok ($(sed 's/.*kernel=//' "$VM_DIR/stamp"), accel $ACCEL, cache $VM_DIR)"
  return 0
}

# ------------------------------------------------------------------------------ run

run_guest() {
  local reason
  reason=$(why_not) || die "unavailable: $reason (run tests/vm/rxe-vm.sh --setup)"
  local run; run=$(mktemp -d "$VM_DIR/run.XXXXXX")
  local v
  {
    printf 'cd %q 2>/dev/null || cd /\n' "$PWD"
    printf 'export PATH=%q HOME=/root\n' "$PATH:/usr/sbin:/sbin"
    for v in ${DOORBELL_VM_PASSENV:-RUST_BACKTRACE RUST_LOG CARGO_TERM_COLOR}; do
      if [ -n "${!v:-}" ]; then printf 'export %s=%q\n' "$v" "${!v}"; fi
    done
    printf '%q ' "$@"
    echo
  } > "$run/cmd.sh"
  : > "$run/output"

  local accel=(-accel tcg,thread=multi -cpu max)
  [ "$ACCEL" = kvm ] && accel=(-enable-kvm -cpu host)
  timeout "$TIMEOUT" qemu-system-x86_64 "${accel[@]}" -m "$MEM" -smp "$SMP" \
    -nodefaults -no-user-config -display none -no-reboot -serial stdio \
    -kernel "$VM_DIR/vmlinux" -initrd "$VM_DIR/initramfs.cpio.gz" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1 doorbellvm.out=$run" \
    -virtfs local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap \
    -virtfs local,path="$run",mount_tag=runout,security_model=none \
    > "$run/console.log" 2>&1 &
  local qemu=$!
  # stopping this script stops the guest (timeout passes the signal on to QEMU)
  trap 'kill -TERM "$qemu" 2>/dev/null; wait "$qemu" 2>/dev/null; rm -rf "$run"; exit 130' INT TERM
  # the guest appends to $run/output over 9p: follow it live until QEMU exits
  tail -n +1 -f --pid=$qemu "$run/output" &
  local tailer=$!
  wait $qemu || true
  wait $tailer || true
  trap - INT TERM

  if [ ! -s "$run/rc" ]; then
    log "the guest did not report an exit code (timeout ${TIMEOUT}s?); console log tail:"
    tail -40 "$run/console.log" >&2
    log "run directory kept: $run"
    return 125
  fi
  local rc; rc=$(cat "$run/rc")
  if [ -n "${DOORBELL_VM_KEEP:-}" ]; then log "run directory kept: $run"; else rm -rf "$run"; fi
  return "$rc"
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

case "${1:-}" in
  --setup) setup ;;
  --check) shift; check "${1:-}" ;;
  --) shift; [ $# -gt 0 ] || { usage >&2; exit 2; }; run_guest "$@" ;;
  -h|--help|"") usage ;;
  -*) usage >&2; exit 2 ;;
  *) run_guest "$@" ;;
esac
