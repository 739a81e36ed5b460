"""torch.distributed collectives over NCCL, checked: one rank per torchrun node.

OPS (default all_reduce,all_gather,reduce_scatter,broadcast), each over DTYPES and
SIZES. Every input element is a small integer, ((j % 7) + rank + 1) at index j, so that
the expected output, written out below per collective, is exact in every dtype used
here (float16 and bfloat16 hold the integers up to 256 exactly):

    all_reduce (SUM)        out[j] = W * (j % 7) + W (W + 1) / 2
    all_gather              out[r * n + i] = (i % 7) + r + 1        (rank r's input)
    reduce_scatter (SUM)    out[i] on rank q = W * ((q * n + i) % 7) + W (W + 1) / 2
    broadcast (from src)    out[j] = (j % 7) + src + 1

where W is the world size, n a rank's share. A size is the bytes of the whole buffer:
the all-reduced or broadcast tensor, all_gather's output, reduce_scatter's input (so
all_gather and reduce_scatter move the same bytes as an all_reduce of that size).
broadcast's root alternates between the ranks from one size to the next.

Prints one line per (op, dtype, size) with the time of the timed iterations (not
checked: their inputs are whatever the previous iteration left), and "CHECK PASS" or
"CHECK FAIL" at the end; the exit status is 0 only on PASS. Rank 0 prints; a wrong
element on any rank fails both (the flags are all-reduced).

Environment: OPS, SIZES (comma-separated byte counts, default 8 B to 256 MiB), DTYPES
(default float32,float16,bfloat16,int32), ITERS (timed iterations, default 3),
LOOP_SECONDS (then all-reduce 64 MiB in a loop that long: the kill test). The tensors
are CUDA tensors (NCCL needs them); whether the net plugin then moves host staging
buffers or GPU memory is NCCL's GDR decision (NCCL_NET_GDR_LEVEL).
"""
import os
import sys
import time

import torch
import torch.distributed as dist


def pattern(n, offset, shift, dev, dt):
    """((offset + i) % 7) + shift for i < n, as dtype dt."""
    return ((torch.arange(n, device=dev, dtype=torch.int64) + offset) % 7 + shift).to(dt)


def run_op(op, n, rank, world, dev, dt, src):
    """Runs one checked collective of n elements in all; returns (ok, timed_fn)."""
    tri = world * (world + 1) // 2
    if op == "all_reduce":
        x = pattern(n, 0, rank + 1, dev, dt)
        want = (pattern(n, 0, 0, dev, torch.int64) * world + tri).to(dt)
        dist.all_reduce(x)
        got = x
        y = torch.ones(n, device=dev, dtype=dt)
        timed = lambda: dist.all_reduce(y)
    elif op == "all_gather":
        per = n // world
        x = pattern(per, 0, rank + 1, dev, dt)
        got = torch.empty(per * world, device=dev, dtype=dt)
        want = torch.cat([pattern(per, 0, r + 1, dev, dt) for r in range(world)])
        dist.all_gather_into_tensor(got, x)
        timed = lambda: dist.all_gather_into_tensor(got, x)
    elif op == "reduce_scatter":
        per = n // world
        x = pattern(per * world, 0, rank + 1, dev, dt)
        got = torch.empty(per, device=dev, dtype=dt)
        want = (pattern(per, rank * per, 0, dev, torch.int64) * world + tri).to(dt)
        dist.reduce_scatter_tensor(got, x)
        timed = lambda: dist.reduce_scatter_tensor(got, x)
    elif op == "broadcast":
        got = pattern(n, 0, rank + 1, dev, dt)
        want = pattern(n, 0, src + 1, dev, dt)
        dist.broadcast(got, src)
        timed = lambda: dist.broadcast(got, src)
    else:
        raise SystemExit(f"unknown op {op}")
    torch.cuda.synchronize()
    return bool(torch.equal(got, want)), timed


def main():
    # Every rank on the machine's one GPU (NCCL_HOSTID makes them look like two hosts).
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    ops = os.environ.get("OPS", "all_reduce,all_gather,reduce_scatter,broadcast").split(",")
    sizes = [int(s) for s in os.environ.get("SIZES", "8,1024,65536,1048576,8388608,67108864,268435456").split(",")]
    dtypes = os.environ.get("DTYPES", "float32,float16,bfloat16,int32").split(",")
    iters = int(os.environ.get("ITERS", "3"))
    ok = True
    checked = 0
    for op in ops:
        for name in dtypes:
            dt = getattr(torch, name)
            esize = torch.tensor([], dtype=dt).element_size()
            for k, nbytes in enumerate(sizes):
                # At least one element per rank; a multiple of the world size.
                n = max(world, nbytes // esize // world * world)
                good, timed = run_op(op, n, rank, world, dev, dt, k % world)
                ok &= good
                checked += 1
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(iters):
                    timed()
                torch.cuda.synchronize()
                us = (time.perf_counter() - t0) / max(iters, 1) * 1e6
                if rank == 0:
                    print(f"{op:14s} {name:9s} {n * esize:>10d} B  {us:10.1f} us  {'ok' if good else 'WRONG'}", flush=True)
                elif not good:
                    print(f"rank {rank}: {op} {name} {n * esize} B WRONG", flush=True)
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
    print(f"rank {rank}: CHECK {verdict} ({checked} collectives checked on this rank, {flags.item()} rank(s) saw a wrong element)", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()
