"""Where a paging run's time went: one run of paging_bench.py's training mix
read back from its raw files (the jobs' step logs and their stderr, each line
stamped with the monotonic time it arrived).

The jobs' compute is serial on one GPU, so step completions, all jobs
together, come one step time apart while the GPU computes. A longer gap is
a stall: the time beyond one step is counted as lost, and the gshare
messages that arrived during it are printed beside it.

usage: timeline.py RAW_DIR TAG [--step-ms MS] [--top N]
  RAW_DIR  paging_bench.py's --out folder's raw/
  TAG      the run's tag, e.g. gshare-prefetch-on
  --step-ms  one step alone (default: the median of the run's own steps)
"""

import argparse
import glob
import json
import os
import re
import statistics


def read_steps(path):
    with open(path) as f:
        return [json.loads(line)["t"] for line in f if line.strip()]


def read_messages(path):
    out = []
    with open(path) as f:
        for line in f:
            t, _, text = line.partition(" ")
            try:
                out.append((float(t), text.rstrip()))
            except ValueError:
                pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("tag")
    ap.add_argument("--step-ms", type=float, default=0)
    ap.add_argument("--top", type=int, default=15)
    args = ap.parse_args()
    with open(os.path.join(args.raw, f"{args.tag}.start")) as f:
        t0 = float(f.read().split()[0])
    prefix = os.path.join(args.raw, f"{args.tag}-")
    jobs = sorted(int(p[len(prefix):-len(".steps")]) for p in glob.glob(prefix + "*.steps")
                  if re.fullmatch(r"\d+", p[len(prefix):-len(".steps")]))
    completions, messages, gaps_within = [], [], []
    for k in jobs:
        steps = read_steps(os.path.join(args.raw, f"{args.tag}-{k}.steps"))
        completions += [(t, k) for t in steps]
        gaps_within += [b - a for a, b in zip(steps, steps[1:])]
        err = os.path.join(args.raw, f"{args.tag}-{k}.err")
        if os.path.exists(err):
            messages += [(t, k, text) for t, text in read_messages(err)]
    completions.sort()
    messages.sort()
    step = args.step_ms / 1e3 if args.step_ms else statistics.median(gaps_within)
    makespan = completions[-1][0] - t0
    print(f"{args.tag}: {len(jobs)} jobs, {len(completions)} steps, makespan {makespan:.2f} s, "
          f"one step {step * 1e3:.0f} ms: compute about {len(completions) * step:.2f} s")
    stalls = []
    previous = t0
    for t, k in completions:
        gap = t - previous
        if gap > 1.5 * step:
            stalls.append((gap - step, previous, t, k))
        previous = t
    lost = sum(s[0] for s in stalls)
    print(f"stalls (gaps over 1.5 steps between completions): {len(stalls)}, {lost:.2f} s lost")
    for lost_s, a, b, k in sorted(stalls, reverse=True)[:args.top]:
        print(f"  {a - t0:7.2f} .. {b - t0:7.2f} s  lost {lost_s:5.2f} s, ended by job {k}")
        for t, j, text in messages:
            if a - 0.05 <= t <= b:
                print(f"      {t - t0:7.2f} [{j}] {text[:150]}")
    print("all messages:")
    for t, j, text in messages:
        print(f"  {t - t0:7.2f} [{j}] {text[:160]}")


if __name__ == "__main__":
    main()
