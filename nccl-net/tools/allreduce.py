"""torch.distributed all_reduce over NCCL, checked: one rank per torchrun node.

Each rank fills its tensor with ((i % 7) + rank + 1); after a SUM all_reduce over
WORLD ranks every element must be WORLD * (i % 7) + WORLD * (WORLD + 1) / 2, exact in
every dtype used here (small integers). Prints one line per (dtype, size) with the
time of the timed iterations, and "ALLREDUCE PASS" or "ALLREDUCE FAIL" at the end;
the exit status is 0 only on PASS.

Environment: SIZES (comma-separated byte counts, default 8 B to 64 MiB), DTYPES
(default float32,float16,bfloat16,int32), ITERS (timed iterations, default 5),
LOOP_SECONDS (then all-reduce 64 MiB in a loop that long: the kill test). The
tensors are CUDA tensors (NCCL needs them); whether the net plugin then moves host
staging buffers or GPU memory is NCCL's GDR decision (NCCL_NET_GDR_LEVEL).
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    # Every rank on the machine's one GPU (NCCL_HOSTID makes them look like two hosts).
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    sizes = [int(s) for s in os.environ.get("SIZES", "8,1024,65536,1048576,8388608,67108864").split(",")]
    dtypes = os.environ.get("DTYPES", "float32,float16,bfloat16,int32").split(",")
    iters = int(os.environ.get("ITERS", "5"))
    ok = True
    for name in dtypes:
        dt = getattr(torch, name)
        esize = torch.tensor([], dtype=dt).element_size()
        for nbytes in sizes:
            n = max(1, nbytes // esize)
            base = (torch.arange(n, device=dev, dtype=torch.int64) % 7)
            want = (base * world + world * (world + 1) // 2).to(dt)
            x = (base + rank + 1).to(dt)
            dist.all_reduce(x)
            torch.cuda.synchronize()
            good = bool(torch.equal(x, want))
            ok &= good
            # Timed iterations (their results are not checked: sums keep growing).
            y = torch.ones(n, device=dev, dtype=dt)
            dist.barrier()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                dist.all_reduce(y)
            torch.cuda.synchronize()
            us = (time.perf_counter() - t0) / iters * 1e6
            if rank == 0:
                print(f"all_reduce {name:9s} {n * esize:>10d} B  {us:10.1f} us  {'ok' if good else 'WRONG'}", flush=True)
    loop = float(os.environ.get("LOOP_SECONDS", "0"))
    if loop > 0:
        # For the kill test: all-reduce 64 MiB until the time is up (or the peer dies,
        # which must end this process with NCCL's error in bounded time).
        z = torch.ones(16 << 20, device=dev, dtype=torch.float32)
        end = time.time() + loop
        k = 0
        while time.time() < end:
            dist.all_reduce(z)
            torch.cuda.synchronize()
            z.fill_(1.0)
            k += 1
            if k % 20 == 0:
                print(f"rank {rank}: loop {k} at {time.time():.3f}", flush=True)
    flags = torch.tensor([0 if ok else 1], device=dev, dtype=torch.int32)
    dist.all_reduce(flags)
    verdict = "PASS" if flags.item() == 0 else "FAIL"
    print(f"rank {rank}: ALLREDUCE {verdict}", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()
