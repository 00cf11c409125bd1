"""Plots memory over time per job from memory-oversized.json (gshare-top
samples taken every 0.25 s during the shared run).

usage: python3 bench/memory/plot_memory.py memory-oversized.json out.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    record = json.load(open(sys.argv[1]))
    samples = record["samples"]
    total = record["gpu_total_bytes"] / 2**30
    pids = sorted({p["pid"] for s in samples for p in s["processes"]})
    fig, ax = plt.subplots(figsize=(9, 4.5), dpi=110)
    times = [s["t"] for s in samples]
    stacks = []
    for pid in pids:
        series = []
        for s in samples:
            row = next((p for p in s["processes"] if p["pid"] == pid), None)
            series.append((row["used_bytes"] if row else 0) / 2**30)
        stacks.append(series)
    labels = [f"job {i + 1} (pid {pid})" for i, pid in enumerate(pids)]
    ax.stackplot(times, *stacks, labels=labels, alpha=0.8)
    ax.axhline(total, color="black", linestyle="--", linewidth=1, label=f"GPU memory {total:.0f} GiB")
    safety = [(s["safety_bytes"] or 0) / 2**30 for s in samples]
    ax.plot(times, safety, color="red", linewidth=1, label="ΣP + Σ lanes max E")
    peaks = sum((r["peak_reserved"] or 0) for r in record["alone"]) / 2**30
    ax.set_title(f"Three jobs whose peaks sum to {peaks:.0f} GiB, on a {total:.0f} GiB GPU, under gshare")
    ax.set_xlabel("seconds")
    ax.set_ylabel("GiB held (allocations + context)")
    ax.set_ylim(0, total * 1.1)
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[2])


if __name__ == "__main__":
    main()
