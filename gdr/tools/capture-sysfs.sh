#!/usr/bin/env bash
# gdr/tools/capture-sysfs.sh: copy the part of a machine's sysfs that `doorbell topo` reads
# into DIR, as a tree that SYSFS_PATH=DIR can point at (fixtures for the topo tests).
#
# Usage: gdr/tools/capture-sysfs.sh DIR
#
# What is copied, and why (NCCL's topology code reads the same files):
#   - every PCI device's directory under devices/ (the real path, so the chain of
#     bridges up to the root complex survives), with the attributes NCCL and nvidia-smi
#     read: class vendor device subsystem_vendor subsystem_device numa_node local_cpulist
#     max_link_speed max_link_width current_link_speed current_link_width;
#   - bus/pci/devices/* as symlinks into that tree, like the real ones;
#   - class/infiniband/*/device and class/net/*/device links;
#   - devices/system/node/node*/cpulist and devices/system/cpu/online.
set -euo pipefail
out=${1:?usage: capture-sysfs.sh DIR}
mkdir -p "$out"
attrs="class vendor device subsystem_vendor subsystem_device numa_node local_cpulist max_link_speed max_link_width current_link_speed current_link_width"
copy_attrs() { # $1 = real sysfs dir of a PCI device
  local d=$1 rel=${1#/sys/} a
  mkdir -p "$out/$rel"
  for a in $attrs; do [ -r "$d/$a" ] && cat "$d/$a" > "$out/$rel/$a" 2>/dev/null || true; done
}
mkdir -p "$out/bus/pci/devices"
for l in /sys/bus/pci/devices/*; do
  real=$(readlink -f "$l")
  # the device and every bridge above it
  p=$real
  while [ "$p" != /sys/devices ] && [ "$p" != / ]; do
    [ -e "$p/vendor" ] && copy_attrs "$p"
    [ -d "$out/${p#/sys/}" ] || mkdir -p "$out/${p#/sys/}"
    p=$(dirname "$p")
  done
  ln -sfn "../../../${real#/sys/}" "$out/bus/pci/devices/$(basename "$l")"
done
for cls in infiniband net; do
  [ -d /sys/class/$cls ] || continue
  for c in /sys/class/$cls/*; do
    [ -e "$c/device" ] || continue
    mkdir -p "$out/class/$cls/$(basename "$c")"
    ln -sfn "../../../$(readlink -f "$c/device" | sed 's|^/sys/||')" "$out/class/$cls/$(basename "$c")/device"
  done
done
for n in /sys/devices/system/node/node*; do
  [ -d "$n" ] || continue
  mkdir -p "$out/devices/system/node/$(basename "$n")"
  cat "$n/cpulist" > "$out/devices/system/node/$(basename "$n")/cpulist"
done
mkdir -p "$out/devices/system/cpu"
cat /sys/devices/system/cpu/online > "$out/devices/system/cpu/online"
echo "captured $(find "$out" -type f | wc -l) files under $out"
