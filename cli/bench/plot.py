#!/usr/bin/env python3
"""Sweeps of `doorbell bench` and their plots (docs/BENCHMARKS.md).

  cli/bench/plot.py sweep [--bin B] [--rounds R] [--min 1] [--max 4194304] -o RAW
      Runs `B bench write-bw --local -s SIZE -n N --vs-memcpy` for every power of two
      from --min to --max bytes, --rounds times (sizes in increasing order within a
      round), and writes every command and its complete output to RAW, with `uptime`
      before and after each round. N shrinks with the size so that a run moves about
      1 GiB (at least 1000, at most 200000 iterations). --vs-memcpy makes each run
      measure its own reference: a single-core memcpy of 64 MiB right before and right
      after the RDMA run, in the same process.

  cli/bench/plot.py write-bw RAW [-o docs/plots/write-bw-sweep]
      Reads a sweep's RAW output; draws write-bw (median over the rounds, lowest to
      highest shaded) and its same-run memcpy reference against the message size, and
      the ratio write-bw / memcpy on a second axis with the 0.10 target. Writes
      OUT.svg and OUT.png.

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
    with open(a.output, "w") as out:
        for r in range(1, a.rounds + 1):
            out.write(f"# round {r} start: {uptime()}\n")
            for size in sizes:
                cmd = [b, "bench", "write-bw", "--local", "-s", str(size), "-n", str(iters_for(size)), "--vs-memcpy"]
                shown = "doorbell " + " ".join(cmd[1:])
                print(f"== round {r}: {shown}", file=sys.stderr)
                p = subprocess.run(cmd, capture_output=True, text=True)
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
    """{size: [(write_bw, memcpy, ratio), ...]} from RAW, one tuple per run."""
    runs = {}
    for line in open(path):
        m = RATIO.search(line)
        if m:
            ratio, size, bw, mc = float(m[1]), int(m[2]), float(m[3]), float(m[4])
            runs.setdefault(size, []).append((bw, mc, ratio))
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

    runs = parse_sweep(a.raw)
    sizes = sorted(runs)
    med = lambda i, s: statistics.median(r[i] for r in runs[s])
    lo = lambda i, s: min(r[i] for r in runs[s])
    hi = lambda i, s: max(r[i] for r in runs[s])
    rounds = max(len(v) for v in runs.values())

    fig, ax = plt.subplots(figsize=(9, 5.2))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.fill_between(sizes, [lo(0, s) for s in sizes], [hi(0, s) for s in sizes], color="tab:blue", alpha=0.15, lw=0)
    ax.plot(sizes, [med(0, s) for s in sizes], "o-", color="tab:blue", label="doorbell write-bw (BW average)")
    ax.fill_between(sizes, [lo(1, s) for s in sizes], [hi(1, s) for s in sizes], color="tab:gray", alpha=0.15, lw=0)
    ax.plot(sizes, [med(1, s) for s in sizes], "s--", color="tab:gray", label="single-core memcpy of 64 MiB, same run")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("MB/sec (2^20 B/s), log scale")
    ticks = [s for s in sizes if sizes.index(s) % 2 == 0] if len(sizes) > 12 else sizes
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(s) for s in ticks], rotation=45, ha="right")
    ax.grid(True, which="major", alpha=0.3)

    ax2 = ax.twinx()
    ax2.plot(sizes, [med(2, s) for s in sizes], "^-", color="tab:red", label="ratio write-bw / memcpy (right axis)")
    ax2.axhline(0.10, color="tab:red", ls=":", lw=1.2, label="target: ratio >= 0.10 (the table: at 64 KiB)")
    ax2.set_ylabel("ratio write-bw / memcpy", color="tab:red")
    ax2.tick_params(axis="y", colors="tab:red")
    ax2.set_ylim(0, max(0.2, 1.1 * max(hi(2, s) for s in sizes)))

    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, fontsize=9)
    title = a.title or "RDMA WRITE over softhca (--local, 1 RC QP) against memcpy in the same run"
    ax.set_title(f"{title}\nmedians of {rounds} rounds, lowest to highest shaded", fontsize=10)
    save(fig, a.output)

    print(f"{'bytes':>9} {'write-bw':>10} {'memcpy':>10} {'ratio':>7}  (medians, MB/sec)")
    for s in sizes:
        print(f"{s:>9} {med(0, s):>10.2f} {med(1, s):>10.2f} {med(2, s):>7.3f}")


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
    s.add_argument("-o", "--output", required=True)
    s.set_defaults(f=cmd_sweep)
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
