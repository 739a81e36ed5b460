#!/usr/bin/env python3
"""Sweeps of `doorbell bench` and their plots (docs/BENCHMARKS.md).

  cli/bench/plot.py sweep [--bin B] [--rounds R] [--min 1] [--max 4194304]
                         [--wires udp,local,udp-polled,local-polled] -o RAW
      Runs `DOORBELL_WIRE=W B bench write-bw --local -s SIZE -n N --vs-memcpy` for every
      wire W (softhca's RoCEv2-over-UDP path and its same-host path; W-polled adds
      --polled: the benchmark threads step softhca themselves) and every power of
      two from --min to --max bytes, --rounds times (sizes in increasing order within a
      round, the wires one after the other at each size), and writes every command and
      its complete output to RAW, with `uptime` before and after each round. N shrinks with the size so that a run moves about
      1 GiB (at least 1000, at most 200000 iterations). --vs-memcpy makes each run
      measure its own reference: a single-core memcpy of 64 MiB right before and right
      after the RDMA run, in the same process.

  cli/bench/plot.py write-bw RAW [-o docs/plots/write-bw-sweep]
      Reads a sweep's RAW output; draws write-bw of each wire (median over the rounds,
      lowest to highest shaded) and the same-run memcpy reference against the message
      size, and the ratios write-bw / memcpy on a second axis with the target (0.8, the
      same-host path's). Writes OUT.svg and OUT.png.

  cli/bench/plot.py allreduce DIR [DIR ...] [-o docs/plots/allreduce-sweep]
      Reads collective/bench/run.sh output folders and draws busbw against size: doorbell
      (the algorithm it picks by itself), Open MPI over vader (shared memory) and over
      tcp, medians over every round of every folder. Writes OUT.svg and OUT.png.

  cli/bench/plot.py gdr RAW [-o docs/plots/gdr-h200]
      Reads the "# GPU memory:" table that cli/bench/gdr.sh prints (for instance
      docs/runs/h200/bench.txt) and draws host memory, GPU memory (dma-buf MR) and
      cudaMemcpy H2D/D2H bandwidth per test and size, with GPU/host above each group.
      Writes OUT.svg and OUT.png.

Needs python3 and matplotlib (`python3 -m pip install matplotlib`); `sweep` needs only
python3. Units as doorbell prints them: MB/sec = 2^20 bytes/s.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def iters_for(size):
    return max(1000, min(200000, (1 << 30) // size))


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def cmd_sweep(a):
    b = a.bin or os.path.join(ROOT, "target", "release", "doorbell")
    sizes = []
    s = a.min
    while s <= a.max:
        sizes.append(s)
        s *= 2
    wires = a.wires.split(",")
    with open(a.output, "w") as out:
        for r in range(1, a.rounds + 1):
            out.write(f"# round {r} start: {uptime()}\n")
            for size in sizes:
                for v in wires:
                    w, polled = (v[: -len("-polled")], True) if v.endswith("-polled") else (v, False)
                    cmd = [b, "bench", "write-bw", "--local", "-s", str(size), "-n", str(iters_for(size)), "--vs-memcpy"]
                    if polled:
                        cmd.append("--polled")
                    shown = f"DOORBELL_WIRE={w} doorbell " + " ".join(cmd[1:])
                    print(f"== round {r}: {shown}", file=sys.stderr)
                    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "DOORBELL_WIRE": w})
                    out.write(f"$ {shown}\n{p.stdout}{p.stderr}[exit {p.returncode}]\n\n")
                    out.flush()
                    if p.returncode != 0:
                        sys.exit(f"FAILED: {shown}:\n{p.stderr}")
            out.write(f"# round {r} end: {uptime()}\n")


# " 65536      20000            2390.07            782.39               0.012518"
BW_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")
# " ratio vs memcpy: 0.4158  (65536 B: write-bw 782.39 MB/sec, single-core memcpy of 64 MiB 1881.60 MB/sec = ..."
RATIO = re.compile(r"ratio vs memcpy: ([\d.]+)\s+\((\d+) B: write-bw ([\d.]+) MB/sec, single-core memcpy of \d+ MiB ([\d.]+) MB/sec")


def parse_sweep(path):
    """{wire: {size: [(write_bw, memcpy, ratio), ...]}} from RAW, one tuple per run (a
    sweep from before the same-host path has no DOORBELL_WIRE= prefix: wire "udp")."""
    runs = {}
    wire = "udp"
    for line in open(path):
        if line.startswith("$ "):
            m = re.match(r"\$ DOORBELL_WIRE=(\w+) ", line)
            wire = (m[1] if m else "udp") + ("-polled" if " --polled" in line else "")
        m = RATIO.search(line)
        if m:
            ratio, size, bw, mc = float(m[1]), int(m[2]), float(m[3]), float(m[4])
            runs.setdefault(wire, {}).setdefault(size, []).append((bw, mc, ratio))
    if not runs:
        sys.exit(f"{path}: no 'ratio vs memcpy' lines (was it run with --vs-memcpy?)")
    return runs


def size_label(b):
    for unit, n in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= n and b % n == 0:
            return f"{b // n} {unit}"
    return f"{b} B"


def save(fig, out):
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    for ext in ("svg", "png"):
        fig.savefig(f"{out}.{ext}", dpi=110, bbox_inches="tight", metadata={"Date": None} if ext == "svg" else None)
    print(f"wrote {out}.svg and {out}.png")


def cmd_write_bw(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_wire = parse_sweep(a.raw)
    names = {"udp": "RoCEv2 over UDP", "local": "same-host path", "auto": "same-host path (auto)",
             "udp-polled": "RoCEv2 over UDP, --polled", "local-polled": "same-host path, --polled"}
    colors = {"udp": "tab:blue", "local": "tab:green", "auto": "tab:green", "udp-polled": "tab:cyan", "local-polled": "tab:olive"}
    fig, ax = plt.subplots(figsize=(9, 5.2))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax2 = ax.twinx()
    rounds = 0
    sizes = []
    for w, runs in by_wire.items():
        sizes = sorted(runs)
        med = lambda i, s: statistics.median(r[i] for r in runs[s])
        lo = lambda i, s: min(r[i] for r in runs[s])
        hi = lambda i, s: max(r[i] for r in runs[s])
        rounds = max(rounds, max(len(v) for v in runs.values()))
        c = colors.get(w, "tab:purple")
        ax.fill_between(sizes, [lo(0, s) for s in sizes], [hi(0, s) for s in sizes], color=c, alpha=0.15, lw=0)
        ax.plot(sizes, [med(0, s) for s in sizes], "o-", color=c, label=f"doorbell write-bw, {names.get(w, w)}")
        ax2.plot(sizes, [med(2, s) for s in sizes], "^:", color=c, label=f"ratio to memcpy, {names.get(w, w)} (right axis)")
    allruns = [r for runs in by_wire.values() for v in runs.values() for r in v]
    mc = {s: statistics.median(r[1] for runs in by_wire.values() for r in runs.get(s, [])) for s in sizes}
    ax.plot(sizes, [mc[s] for s in sizes], "s--", color="tab:gray", label="single-core memcpy of 64 MiB, same runs")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("MB/sec (2^20 B/s), log scale")
    ticks = [s for s in sizes if sizes.index(s) % 2 == 0] if len(sizes) > 12 else sizes
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(s) for s in ticks], rotation=45, ha="right")
    ax.grid(True, which="major", alpha=0.3)
    ax2.axhline(0.8, color="tab:red", ls=":", lw=1.2, label="target: same-host ratio >= 0.8 (64 KiB and 4 MiB)")
    ax2.set_ylabel("ratio write-bw / memcpy")
    ax2.set_ylim(0, max(1.0, 1.1 * max(r[2] for r in allruns)))
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=9)
    title = a.title or "RDMA WRITE over softhca (--local, 1 RC QP), both wires, against memcpy in the same run"
    ax.set_title(f"{title}\nmedians of {rounds} rounds, lowest to highest shaded", fontsize=10)
    save(fig, a.output)

    print(f"{'wire':>6} {'bytes':>9} {'write-bw':>10} {'memcpy':>10} {'ratio':>7}  (medians, MB/sec)")
    for w, runs in by_wire.items():
        for s in sorted(runs):
            m = lambda i: statistics.median(r[i] for r in runs[s])
            print(f"{w:>6} {s:>9} {m(0):>10.2f} {m(1):>10.2f} {m(2):>7.3f}")


def cmd_allreduce(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sys.path.insert(0, os.path.join(ROOT, "collective", "bench"))
    sys.dont_write_bytecode = True
    import glob
    import pool

    series = {}  # label -> size -> [busbw]
    for folder in a.dirs:
        pol = pool.policy(folder)
        for f in sorted(glob.glob(os.path.join(folder, "mpi_*_r*.txt"))):
            btl, k = os.path.basename(f)[len("mpi_"):-len(".txt")].rsplit("_r", 1)
            for s, (_, bw) in pool.rows(f).items():
                series.setdefault(f"Open MPI, btl {btl}", {}).setdefault(s, []).append(bw)
            ours = {}
            for s in pool.rows(f):
                algo = next(x for x, top in pol if s <= top)
                if algo not in ours:
                    ours[algo] = pool.rows(os.path.join(folder, f"doorbell_{algo}_r{k}.txt"))
                if s in ours[algo] and btl == "vader":
                    series.setdefault("doorbell (its own choice of algorithm)", {}).setdefault(s, []).append(ours[algo][s][1])
    fig, ax = plt.subplots(figsize=(9, 5.2))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    styles = {"doorbell": ("o-", "tab:green"), "Open MPI, btl vader": ("s--", "tab:orange"), "Open MPI, btl tcp": ("^:", "tab:blue")}
    for label, pts in series.items():
        sizes = sorted(s for s in pts if s >= a.min and statistics.median(pts[s]) > 0)
        mk, c = next((v for k, v in styles.items() if label.startswith(k)), ("x-", "tab:purple"))
        ax.plot(sizes, [statistics.median(pts[s]) for s in sizes], mk, color=c, label=label)
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s, as nccl-tests computes it), log scale")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9)
    ax.set_title(a.title or "all-reduce, 4 ranks on this host, float sum: busbw against size (medians over the rounds)", fontsize=10)
    save(fig, a.output)


def parse_gdr(path):
    rows, head = [], None
    lines = open(path).read().splitlines()
    for i, line in enumerate(lines):
        if line.startswith("# GPU memory:"):
            head = line
            rows = []
            for l in lines[i + 2:]:
                f = l.split()
                if len(f) != 9 or not f[1].isdigit():
                    break
                rows.append({"test": f[0], "bytes": int(f[1]), "host": float(f[2]), "gpu": float(f[3]),
                             "gpu/host": float(f[4]), "h2d": float(f[5]), "d2h": float(f[7])})
    if not rows:
        sys.exit(f"{path}: no '# GPU memory:' table (the one cli/bench/gdr.sh prints)")
    return head, rows


def cmd_gdr(a):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    head, rows = parse_gdr(a.raw)
    tests = list(dict.fromkeys(r["test"] for r in rows))
    fig, axes = plt.subplots(1, len(tests), figsize=(5.2 * len(tests), 5), sharey=True, squeeze=False)
    bars = (("host", "host memory", "tab:gray"), ("gpu", "GPU memory (dma-buf MR)", "tab:green"),
            ("h2d", "cudaMemcpy H2D (pinned)", "tab:blue"), ("d2h", "cudaMemcpy D2H (pinned)", "tab:purple"))
    w = 0.2
    for ax, t in zip(axes[0], tests):
        rs = [r for r in rows if r["test"] == t]
        for k, (key, label, color) in enumerate(bars):
            xs = [i + (k - 1.5) * w for i in range(len(rs))]
            ax.bar(xs, [r[key] for r in rs], w, label=label, color=color)
        for i, r in enumerate(rs):
            top = max(r["host"], r["gpu"])
            ax.annotate(f"GPU/host\n{r['gpu/host']:.3f}", (i - w, top), textcoords="offset points", xytext=(0, 4),
                        ha="center", fontsize=8)
            ax.annotate(f"GPU/H2D\n{r['gpu'] / r['h2d']:.3f}", (i + w, max(r["h2d"], r["d2h"])),
                        textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylim(1000, 2.5 * max(max(r["h2d"], r["d2h"]) for r in rows))
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xticks(range(len(rs)))
        ax.set_xticklabels([size_label(r["bytes"]) for r in rs])
        ax.set_title(f"{t}, --local (both ends on the GPU)", fontsize=10)
        ax.set_xlabel("message size")
        ax.grid(True, axis="y", which="major", alpha=0.3)
    axes[0][0].set_ylabel("MB/sec (2^20 B/s), log scale")
    h, l = axes[0][0].get_legend_handles_labels()
    fig.legend(h, l, loc="lower center", ncol=len(bars), fontsize=9, bbox_to_anchor=(0.5, -0.06))
    gpu = head.split(":", 1)[1].split(";")[0].strip() if head else "GPU"
    fig.suptitle(a.title or f"softhca on {gpu}: host vs GPU memory vs cudaMemcpy\n"
                 "(medians of the rounds of cli/bench/gdr.sh; GPU/H2D = GPU memory over cudaMemcpy H2D)",
                 fontsize=10, y=1.04)
    save(fig, a.output)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sweep", help="run the write-bw sweep, raw output to a file")
    s.add_argument("--bin", help="the doorbell binary (default: target/release/doorbell of this checkout)")
    s.add_argument("--rounds", type=int, default=3)
    s.add_argument("--min", type=int, default=1)
    s.add_argument("--max", type=int, default=4 << 20)
    s.add_argument("--wires", default="udp,local,udp-polled,local-polled",
                   help="DOORBELL_WIRE values to sweep, comma-separated (W-polled: with --polled)")
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(f=cmd_sweep)
    r = sub.add_parser("allreduce", help="plot collective/bench/run.sh output folders")
    r.add_argument("dirs", nargs="+")
    r.add_argument("--min", type=int, default=1024)
    r.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "plots", "allreduce-sweep"))
    r.add_argument("--title")
    r.set_defaults(f=cmd_allreduce)
    w = sub.add_parser("write-bw", help="plot a write-bw sweep")
    w.add_argument("raw")
    w.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "plots", "write-bw-sweep"))
    w.add_argument("--title")
    w.set_defaults(f=cmd_write_bw)
    g = sub.add_parser("gdr", help="plot the GPU memory table of cli/bench/gdr.sh")
    g.add_argument("raw")
    g.add_argument("-o", "--output", default=os.path.join(ROOT, "docs", "plots", "gdr-h200"))
    g.add_argument("--title")
    g.set_defaults(f=cmd_gdr)
    a = p.parse_args()
    a.f(a)


if __name__ == "__main__":
    main()
