#!/usr/bin/env python3
"""Writes the job traces of gshare-sim (tools/gshare_sim.cpp):

  salus_mix.json      a Salus-like mix of 40 DL training jobs for the simulator
  salus_mix_gpu.json  6 short jobs for a real GPU run (about 75 s under fifo)

Deterministic (fixed seed, no inputs): rerun it after changing it and commit
both files. Salus (Yu & Chowdhury, MLSys 2020) compared FIFO, SRTF and FAIR
on a trace of many training jobs of mixed models and lengths arriving over
time; these traces imitate that shape, they are not Salus's trace.
"""

import json
import math
import os
import random

SEED = 2020
JOB_COUNT = 40
MEAN_INTERARRIVAL_S = 240   # Poisson arrivals: 40 jobs over about 2.5 hours
SHORTEST_S = 60             # job lengths: a minute ...
LONGEST_S = 4 * 3600        # ... to four hours
PARETO_SHAPE = 0.8          # heavy tail: many short jobs, a few very long ones

# model: (iteration_ms, memory_mib) of one training step at a usual batch
# size on a current datacentre GPU; the relative costs of the models follow
# the usual benchmarks (VGG and ResNet-152 heavy, AlexNet and small models
# light, DeepSpeech-style speech models the slowest).
MODELS = {
    "alexnet":     (40,  1600),
    "googlenet":   (90,  3800),
    "overfeat":    (70,  3300),
    "inception3":  (140, 5600),
    "inception4":  (300, 9800),
    "resnet50":    (110, 5200),
    "resnet101":   (190, 7800),
    "resnet152":   (270, 10500),
    "vgg11":       (150, 5900),
    "vgg16":       (180, 6600),
    "vgg19":       (220, 7300),
    "seq2seq":     (60,  2700),
    "seq2seq-big": (250, 8400),
    "speech":      (750, 9200),
    "superres":    (20,  900),
    "vae":         (25,  700),
}


def bounded_pareto(rng, low, high, shape):
    """A length in [low, high] with a Pareto tail (inverse-CDF sampling)."""
    u = rng.random()
    ratio = (low / high) ** shape
    return low / (1 - u * (1 - ratio)) ** (1 / shape)


def salus_mix():
    rng = random.Random(SEED)
    names = sorted(MODELS)
    counts = {}
    jobs = []
    arrival = 0.0
    for index in range(JOB_COUNT):
        model = rng.choice(names)
        iteration_ms, memory_mib = MODELS[model]
        length_s = bounded_pareto(rng, SHORTEST_S, LONGEST_S, PARETO_SHAPE)
        counts[model] = counts.get(model, 0) + 1
        job = {
            "name": f"{model}-{counts[model]}",
            "arrival_s": round(arrival, 1),
            "iteration_ms": iteration_ms,
            "iterations": max(1, round(length_s * 1000 / iteration_ms)),
            "memory_mib": memory_mib,
        }
        # A few jobs say their length in seconds, one says nothing (srtf
        # then runs it last); a few ask for a larger share or a higher
        # priority, so that fair and priority differ from plain round-robin.
        if index % 9 == 4:
            job["estimate"] = "seconds"
        if index == 17:
            job["estimate"] = "none"
        if index % 13 == 6:
            job["weight"] = 2
        if index % 11 == 3:
            job["priority"] = 1
        jobs.append(job)
        arrival += rng.expovariate(1 / MEAN_INTERARRIVAL_S)
    return {
        "description": (
            f"Salus-like mix (make_salus_mix.py, seed {SEED}): {JOB_COUNT} DL training jobs "
            f"of {len(MODELS)} models with per-model iteration times (20-750 ms) and memory; "
            f"Poisson arrivals, mean {MEAN_INTERARRIVAL_S} s apart; lengths from a Pareto "
            f"tail (shape {PARETO_SHAPE}) between {SHORTEST_S} s and {LONGEST_S // 3600} h, "
            "so many short jobs and a few long ones. Estimates: iters unless stated."),
        "quantum_ms": 50,
        "slice_max_ms": 200,
        "handover_ms": 0.05,
        "jobs": jobs,
    }


def salus_mix_gpu():
    # A long job first, short ones behind it: under fifo they all wait for
    # it, under srtf they overtake it. About 76 s of GPU time in all.
    spec = [
        ("resnet50-long", 0.0, 50, 900, 3000),
        ("vgg16-short", 2.0, 40, 150, 2000),
        ("alexnet-short", 3.5, 20, 250, 1000),
        ("seq2seq-short", 5.0, 30, 200, 1500),
        ("inception3-mid", 7.0, 60, 150, 2500),
        ("superres-short", 9.0, 25, 200, 800),
    ]
    jobs = [{"name": n, "arrival_s": a, "iteration_ms": i, "iterations": k, "memory_mib": m}
            for n, a, i, k, m in spec]
    total_s = sum(j["iteration_ms"] * j["iterations"] for j in jobs) / 1000
    return {
        "description": (
            f"Small Salus-like mix for a real GPU run (make_salus_mix.py): 6 jobs, "
            f"iterations of 20-60 ms, {total_s:.0f} s of GPU time in all; a 45 s job "
            "arrives first and five short ones within 9 s behind it, so srtf lets "
            "them overtake it while fifo makes them wait."),
        "quantum_ms": 50,
        "slice_max_ms": 200,
        "handover_ms": 0.05,
        "jobs": jobs,
    }


def write(path, trace):
    # One job per line: readable, and diffs stay small.
    lines = ["{"]
    for key, value in trace.items():
        if key != "jobs":
            lines.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    lines.append('  "jobs": [')
    rows = [f"    {json.dumps(job)}" for job in trace["jobs"]]
    lines.append(",\n".join(rows))
    lines.append("  ]")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    write(os.path.join(here, "salus_mix.json"), salus_mix())
    write(os.path.join(here, "salus_mix_gpu.json"), salus_mix_gpu())
