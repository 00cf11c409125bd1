"""From one experiment's job results (train_steps.py window, infer_job.py output) to
its metrics. Pure code over the records, so test_parts.py checks it."""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, for benchlib
from benchlib import stats  # noqa: E402


def _train_results(record):
    jobs = (record or {}).get("jobs") or {}
    if not record or not record.get("ok") or not jobs:
        return None, None
    names = sorted(jobs, key=lambda n: (len(n), n))  # job0, job1, ..., job10
    results = [jobs[n] for n in names]
    if any(not isinstance(r, dict) or r.get("kind") != "train" or not r.get("step_ends")
           for r in results):
        return None, None
    return names, results


def train(record, weights=None, from_last_join=False):
    """Throughput of each training job over the window in which all of them
    ran: from T0 to the earliest last step end (each job steps until the
    window is over, so every job was running throughout); with
    `from_last_join` (jobs that joined one after another), from the first
    step end of the job that joined last. Shares of the steps, Jain's index
    of throughput / weight, per-second Jain's index, and step latencies
    (time between consecutive step ends, the first from the window's start)
    pooled over the jobs, in ms. None if the experiment failed."""
    names, results = _train_results(record)
    if names is None:
        return None
    weights = list(weights or [1] * len(names))
    if len(weights) != len(names):
        raise ValueError(f"{len(weights)} weights for {len(names)} jobs")
    ends = [r["step_ends"] for r in results]
    start = max(e[0] for e in ends) if from_last_join else 0.0
    end = min(e[-1] for e in ends)
    window = end - start
    if window <= 0:
        return None
    steps = [stats.count_in_window(e, start, end) for e in ends]
    rates = [s / window for s in steps]
    per_second = [stats.per_second_counts(e, start, end) for e in ends]
    seconds = min(len(p) for p in per_second)
    per_second_jain = [stats.jain([per_second[j][k] / weights[j] for j in range(len(names))])
                       for k in range(seconds)]
    per_second_jain = [j for j in per_second_jain if j is not None]
    latencies = [gap for e in ends for gap in stats.intervals_between(e, start, end)]
    # Under time-slicing each job's steps come in turns: how many turns it
    # had, and how long its steps took inside them (the host's speed for
    # that process, which equal turn time cannot even out).
    turns = [stats.runs(e, start, end) for e in ends]
    in_turn = [stats.mean([b - a for run in job for a, b in zip(run, run[1:])]) for job in turns]
    return {
        "jobs": names, "weights": weights, "window_s": window, "window_from_s": start, "steps": steps,
        "steps_per_s": rates, "aggregate_steps_per_s": sum(rates),
        "shares": stats.shares(steps),
        "jain": stats.jain([r / w for r, w in zip(rates, weights)]),
        # The least-served job against the best-served, per unit of weight:
        # one starved job hides in Jain's index of many.
        "slowest_over_fastest": (min(r / w for r, w in zip(rates, weights)) /
                                 max(r / w for r, w in zip(rates, weights)))
        if max(rates) > 0 else None,
        "per_second_steps": per_second,
        "per_second_jain_min": min(per_second_jain) if per_second_jain else None,
        "step_ms": stats.distribution(latencies, 1e3),
        "turns": [len(job) for job in turns],
        "in_turn_step_ms": [None if m is None else 1e3 * m for m in in_turn],
        "late_start_s_max": max(r.get("late_start_s", 0.0) for r in results),
        "peak_allocated_mib_max": max(r.get("peak_allocated_mib", 0.0) for r in results),
    }


def train_rate(result, window):
    """Steps per second of one training job over [T0, T0 + window]."""
    if not isinstance(result, dict) or result.get("kind") != "train" or window <= 0:
        return None
    return stats.count_in_window(result.get("step_ends") or [], 0.0, window) / window


def infer(result):
    """Latency of each request, issue to result on the host, in ms; also
    from its due time (includes waiting behind a slow previous request),
    and how many were issued over 1 ms late."""
    if not isinstance(result, dict) or result.get("kind") != "infer" or not result.get("requests"):
        return None
    requests = result["requests"]
    return {
        "requests": len(requests), "planned": result.get("planned"), "window_s": result.get("window_s"),
        "truncated": result.get("truncated", False),
        "latency_ms": stats.distribution([done - issued for _, issued, done in requests], 1e3),
        "from_due_ms": stats.distribution([done - due for due, _, done in requests], 1e3),
        "late_requests": sum(1 for due, issued, _ in requests if issued - due > 1e-3),
    }


def train_spans(result):
    """Steps per second of a job that stepped in turns (train_steps.py
    window --turn): its steps over the time they took, start to end, so
    the time between its turns does not count. None without spans."""
    if not isinstance(result, dict) or result.get("kind") != "train" or not result.get("step_spans"):
        return None
    spans = result["step_spans"]
    stepping = sum(end - start for start, end in spans)
    if stepping <= 0:
        return None
    return {"steps": len(spans), "stepping_s": stepping, "steps_per_s": len(spans) / stepping,
            "step_ms": stats.distribution([end - start for start, end in spans], 1e3)}


DEBUG_LINE = re.compile(r"gshare: (\d+\.\d+) (.*)")


def gshare_work_in_slow_requests(result, log_text, q=0.99, lead_s=0.001):
    """Which of an inference job's slowest requests (at or above its q
    quantile of latency) had a line of gshare's debug log (GSHARE_LOG=debug,
    stamped on the monotonic clock) written while they ran, or in the
    `lead_s` before: evidence for or against gshare's own work (a question
    to the framework, to NVML, a handover) as the cause of slow requests.
    None without the job's start on that clock or without stamped lines."""
    if not isinstance(result, dict) or result.get("t0_monotonic") is None or not result.get("requests"):
        return None
    t0 = result["t0_monotonic"]
    stamped = [(float(m.group(1)) - t0, m.group(2)) for m in map(DEBUG_LINE.match, log_text.splitlines()) if m]
    if not stamped:
        return None
    requests = result["requests"]
    bar = stats.percentile([done - issued for _, issued, done in requests], 100 * q)
    slow = [(issued, done) for _, issued, done in requests if done - issued >= bar]
    hits = [(issued, text) for issued, done in slow for at, text in stamped if issued - lead_s <= at <= done]
    return {"slow": len(slow), "with_gshare_line": len({issued for issued, _ in hits}),
            "lines": [f"{issued:.3f} s: {text}" for issued, text in hits[:10]]}
