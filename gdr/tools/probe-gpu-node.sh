#!/usr/bin/env bash
# gdr/tools/probe-gpu-node.sh OUTDIR: what a GPU node offers GPUDirect RDMA, recorded
# as raw command output (the facts docs/gdr.md and the topo fixtures are built from).
set -u
out=${1:?usage: probe-gpu-node.sh OUTDIR}
mkdir -p "$out"
run() { echo "\$ $*"; "$@" 2>&1; echo "[exit $?]"; echo; }
{
  run uname -a
  run nvidia-smi
  run nvidia-smi topo -m
  run nvidia-smi topo -p2p r
  run nvidia-smi nvlink -s
  run nvidia-smi -q -d PCI,CLOCK,MEMORY
  run ls -l /sys/module/nvidia_peermem /sys/kernel/mm/memory_peers
  run ls /dev/infiniband /sys/class/infiniband
  run sh -c 'ldconfig -p | grep -E "libcuda|libnvidia-ml|libnccl|libcudart"'
  run cat /proc/driver/nvidia/version
  run python3 -c 'import torch; print(torch.__version__, torch.cuda.nccl.version())'
} > "$out/probe.txt"
# dma-buf export of cuMemAlloc memory, exactly as perftest does it; what fdinfo says.
python3 - > "$out/dmabuf.txt" 2>&1 <<'PY'
import ctypes, os
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    print(what, "->", r)
    return r
ck(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
for name, attr in (("DMA_BUF_SUPPORTED", 124), ("GPU_DIRECT_RDMA_SUPPORTED", 116),
                   ("GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS", 117), ("GPU_DIRECT_RDMA_WRITES_ORDERING", 118)):
    v = ctypes.c_int(-1); r = cu.cuDeviceGetAttribute(ctypes.byref(v), attr, dev); print(name, attr, "r", r, "=", v.value)
ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
p = ctypes.c_uint64(); ck(cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(1 << 21)), "cuMemAlloc 2 MiB"); print(hex(p.value))
fd = ctypes.c_int(-1)
ck(cu.cuMemGetHandleForAddressRange(ctypes.byref(fd), ctypes.c_uint64(p.value), ctypes.c_size_t(1 << 21), 1, ctypes.c_ulonglong(0)), "cuMemGetHandleForAddressRange(DMA_BUF_FD)")
print("fd", fd.value)
if fd.value >= 0:
    print(open(f"/proc/self/fdinfo/{fd.value}").read())
    print("fstat", os.fstat(fd.value))
    print("readlink", os.readlink(f"/proc/self/fd/{fd.value}"))
    import mmap
    try:
        m = mmap.mmap(fd.value, 1 << 21); print("mmap ok")
    except OSError as e:
        print("mmap fails:", e.errno, e)
    fd2 = ctypes.c_int(-1)
    cu.cuMemGetHandleForAddressRange(ctypes.byref(fd2), ctypes.c_uint64(p.value), ctypes.c_size_t(1 << 21), 1, ctypes.c_ulonglong(0))
    print("second export fd", fd2.value, "ino", os.fstat(fd2.value).st_ino, "vs", os.fstat(fd.value).st_ino)
# a non-64K aligned range
q = ctypes.c_uint64(p.value + 4096)
fd3 = ctypes.c_int(-1); r = cu.cuMemGetHandleForAddressRange(ctypes.byref(fd3), q, ctypes.c_size_t(8192), 1, ctypes.c_ulonglong(0)); print("export at +4096 len 8192 ->", r, fd3.value)
PY
echo "probe written to $out"
