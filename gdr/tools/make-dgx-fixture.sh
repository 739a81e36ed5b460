#!/usr/bin/env bash
# gdr/tools/make-dgx-fixture.sh: writes the synthetic DGX-like sysfs tree that the topo
# tests read (SYSFS_PATH=DIR), default gdr/tests/fixtures/dgx. The output is committed;
# rerun this after changing it and commit both.
#
# Two NUMA nodes (CPUs 0-55,112-167 and 56-111,168-223, as a two-socket 56-core DGX H100),
# two root complexes (host bridges) on each, 8 H100 GPUs (10de:2330) and 4 ConnectX-7 NICs
# (15b3:1021, mlx5_0..3):
#
#   NUMA 0  pci0000:10  root port 10:01.0 - Broadcom PEX Gen4 switch (1000:c010, subsystem 1000:a064)
#                         upstream 11:00.0, downstream 12:00.0 - GPU0 13:00.0
#                                                     12:01.0 - NIC0 14:00.0 (mlx5_0)
#                                                     12:02.0 - second PEX Gen4 level: upstream 15:00.0,
#                                                               downstream 16:00.0 - GPU1 17:00.0
#           pci0000:30  root port 30:01.0 - PLX switch (10b5:9797) upstream 31:00.0,
#                                            downstream 32:00.0 - GPU2 33:00.0, 32:01.0 - GPU3 34:00.0
#                       root port 30:02.0 - NIC1 35:00.0 (mlx5_1)
#   NUMA 1  pci0000:90  as pci0000:10 but both switch levels PLX (10b5:9797): GPU4 93:00.0,
#                       NIC2 94:00.0 (mlx5_2), GPU5 97:00.0 behind the second level
#           pci0000:b0  as pci0000:30: GPU6 b3:00.0, GPU7 b4:00.0, NIC3 b5:00.0 (mlx5_3) on its own root port
#
# The GPU facts that NVML would give (names, compute capability, 18 NVLinks to the
# NVSwitches each) are in gdr/tests/fixtures/dgx-gpus.txt.
set -euo pipefail
out=${1:-$(cd "$(dirname "$0")/.." && pwd)/tests/fixtures/dgx}
if [ -e "$out" ] && [ ! -e "$out/GENERATED" ]; then
  echo "$out exists and was not written by this script; not touching it" >&2; exit 1
fi
rm -rf "$out"
mkdir -p "$out/bus/pci/devices" "$out/devices/system/cpu"
echo "written by gdr/tools/make-dgx-fixture.sh" > "$out/GENERATED"
cpus0=0-55,112-167
cpus1=56-111,168-223
# dev PATH CLASS VENDOR DEVICE SUBVENDOR SUBDEVICE NUMA CPUS
dev() {
  local d="$out/devices/$1"
  mkdir -p "$d"
  echo "$2" > "$d/class"; echo "$3" > "$d/vendor"; echo "$4" > "$d/device"
  echo "$5" > "$d/subsystem_vendor"; echo "$6" > "$d/subsystem_device"
  echo "$7" > "$d/numa_node"; echo "$8" > "$d/local_cpulist"
  ln -sfn "../../../devices/$1" "$out/bus/pci/devices/$(basename "$1")"
}
rootport() { dev "$1" 0x060400 0x8086 0x352a 0x8086 0x0000 "$2" "$3"; }
bcm()      { dev "$1" 0x060400 0x1000 0xc010 0x1000 0xa064 "$2" "$3"; }
plx()      { dev "$1" 0x060400 0x10b5 0x9797 0x10b5 0x9797 "$2" "$3"; }
gpu()      { dev "$1" 0x030200 0x10de 0x2330 0x10de 0x16c1 "$2" "$3"; }
nic()      { dev "$1" 0x020700 0x15b3 0x1021 0x15b3 0x0041 "$3" "$4"
             mkdir -p "$out/class/infiniband/$2"
             ln -sfn "../../../devices/$1" "$out/class/infiniband/$2/device"; }

# Complex with a two-level switch: GPU, NIC, and a GPU one level further down.
# two_level HB BUS(hex, 2 digits) SWITCHFN NICNAME NUMA CPUS
two_level() {
  local hb=$1 b=$2 sw=$3 name=$4 numa=$5 cpus=$6
  local x; x() { printf '%02x' $((0x$b + $1)); }
  local rp="pci0000:$hb/0000:$b:01.0" usp dsp
  rootport "$rp" "$numa" "$cpus"
  usp="$rp/0000:$(x 1):00.0"; $sw "$usp" "$numa" "$cpus"
  dsp="$usp/0000:$(x 2):00.0"; $sw "$dsp" "$numa" "$cpus"; gpu "$dsp/0000:$(x 3):00.0" "$numa" "$cpus"
  dsp="$usp/0000:$(x 2):01.0"; $sw "$dsp" "$numa" "$cpus"; nic "$dsp/0000:$(x 4):00.0" "$name" "$numa" "$cpus"
  dsp="$usp/0000:$(x 2):02.0"; $sw "$dsp" "$numa" "$cpus"
  local usp2="$dsp/0000:$(x 5):00.0"; $sw "$usp2" "$numa" "$cpus"
  local dsp2="$usp2/0000:$(x 6):00.0"; $sw "$dsp2" "$numa" "$cpus"; gpu "$dsp2/0000:$(x 7):00.0" "$numa" "$cpus"
}
# Complex with a switch holding two GPUs and the NIC on a second root port.
# gpus_and_nic HB BUS NICNAME NUMA CPUS
gpus_and_nic() {
  local hb=$1 b=$2 name=$3 numa=$4 cpus=$5
  local x; x() { printf '%02x' $((0x$b + $1)); }
  local rp="pci0000:$hb/0000:$b:01.0" usp dsp
  rootport "$rp" "$numa" "$cpus"
  usp="$rp/0000:$(x 1):00.0"; plx "$usp" "$numa" "$cpus"
  dsp="$usp/0000:$(x 2):00.0"; plx "$dsp" "$numa" "$cpus"; gpu "$dsp/0000:$(x 3):00.0" "$numa" "$cpus"
  dsp="$usp/0000:$(x 2):01.0"; plx "$dsp" "$numa" "$cpus"; gpu "$dsp/0000:$(x 4):00.0" "$numa" "$cpus"
  rp="pci0000:$hb/0000:$b:02.0"; rootport "$rp" "$numa" "$cpus"; nic "$rp/0000:$(x 5):00.0" "$name" "$numa" "$cpus"
}
two_level    10 10 bcm mlx5_0 0 "$cpus0"
gpus_and_nic 30 30     mlx5_1 0 "$cpus0"
two_level    90 90 plx mlx5_2 1 "$cpus1"
gpus_and_nic b0 b0     mlx5_3 1 "$cpus1"
mkdir -p "$out/devices/system/node/node0" "$out/devices/system/node/node1"
echo "$cpus0" > "$out/devices/system/node/node0/cpulist"
echo "$cpus1" > "$out/devices/system/node/node1/cpulist"
echo 0-223 > "$out/devices/system/cpu/online"
echo "wrote $(find "$out" -type f | wc -l) files, $(find "$out" -type l | wc -l) links under $out"
