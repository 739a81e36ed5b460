"""PyTorch DDP training over NCCL, one rank per torchrun node, checked at the end.

A small CNN (two conv layers, batch norm left out so that no buffer needs syncing)
learns a synthetic 10-class task: 32x32 RGB images drawn once from a fixed seed, each
labelled by a fixed random "teacher" CNN, so the labels are learnable and the loss
must fall. Every rank builds the same data set from the same seed and trains on its own
strided shard (as DistributedSampler would give it); DDP all-reduces the gradients
(NCCL, bucketed, during backward), so after every step the ranks' parameters must be
bit-identical. The loss, averaged over the ranks, is printed every LOG_EVERY steps; at
the end every rank all_gathers every other rank's flattened parameters and compares
them with torch.equal, and prints a SHA-256 of its own parameter bytes.

Prints "DDP PASS" when the parameters are bit-identical and the mean loss of the last
LOG_EVERY steps is below half the first's; the exit status is 0 only then.

Environment: STEPS (default 300), BATCH (per rank, default 64), LOG_EVERY (default 25),
SEED (default 1234), LR (default 0.05).
"""
import hashlib
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def dataset(seed, n, dev):
    g = torch.Generator(device="cpu").manual_seed(seed)
    x = torch.randn(n, 3, 32, 32, generator=g)
    teacher = Net()
    with torch.no_grad():
        for p in teacher.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.2)
        y = teacher(x).argmax(1)
    return x.to(dev), y.to(dev)


def main():
    dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world = dist.get_rank(), dist.get_world_size()
    steps = int(os.environ.get("STEPS", "300"))
    batch = int(os.environ.get("BATCH", "64"))
    every = int(os.environ.get("LOG_EVERY", "25"))
    seed = int(os.environ.get("SEED", "1234"))
    lr = float(os.environ.get("LR", "0.05"))

    x, y = dataset(seed, 8192, dev)
    mine = torch.arange(rank, x.shape[0], world, device=dev)  # this rank's shard
    # Different initial weights per rank on purpose: DDP's constructor broadcasts rank
    # 0's, so identical parameters at the end also show that broadcast went through.
    torch.manual_seed(seed + 1 + rank)
    model = DDP(Net().to(dev), device_ids=[dev.index])
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    g = torch.Generator(device="cpu").manual_seed(seed + 100 + rank)

    window, first, last = [], None, None
    t0 = time.perf_counter()
    for step in range(1, steps + 1):
        idx = mine[torch.randint(0, mine.numel(), (batch,), generator=g).to(dev)]
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradient buckets here
        opt.step()
        window.append(loss.detach())
        if step % every == 0:
            mean = torch.stack(window).mean()
            dist.all_reduce(mean)
            mean = mean.item() / world
            window = []
            first = mean if first is None else first
            last = mean
            if rank == 0:
                print(f"step {step:4d}  loss {mean:.4f}  ({time.perf_counter() - t0:.1f} s)", flush=True)
    torch.cuda.synchronize()
    secs = time.perf_counter() - t0

    flat = torch.cat([p.detach().reshape(-1) for p in model.module.parameters()])
    digest = hashlib.sha256(flat.cpu().numpy().tobytes()).hexdigest()
    everyone = torch.empty(world * flat.numel(), device=dev, dtype=flat.dtype)
    dist.all_gather_into_tensor(everyone, flat)
    same = all(torch.equal(everyone[r * flat.numel():(r + 1) * flat.numel()], flat) for r in range(world))
    print(f"rank {rank}: {flat.numel()} parameters, sha256 {digest}, bit-identical to every rank's: {same}", flush=True)
    flags = torch.tensor([0 if same else 1], device=dev, dtype=torch.int32)
    dist.all_reduce(flags)
    falling = first is not None and last < first / 2
    verdict = "PASS" if flags.item() == 0 and falling else "FAIL"
    if rank == 0:
        print(f"DDP {verdict}: {steps} steps of {batch} per rank in {secs:.1f} s, loss {first:.4f} -> {last:.4f}, "
              f"parameters identical on {world - flags.item()} of {world} ranks", flush=True)
    dist.destroy_process_group()
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()
