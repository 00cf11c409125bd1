"""Benchmark `priority`: a latency-critical inference loop (infer_job.py,
open loop at 50 requests/s by default) next to a best-effort training job
(bench/train_steps.py window).

Experiments per trial (order reversed on even trials):
  infer-alone        inference alone, native                (the reference)
  train-alone        training alone, native                 (the reference)
  co-native          both, concurrently, native
  co-priority        both under gshare: GSHARE_POLICY=priority, one
                     GSHARE_DIR; inference GSHARE_PRIORITY=10, training 0
  infer-alone-gshare inference alone under gshare (priority policy): what
                     gshare alone adds to a request

Reported: inference latency p50/p99 (issue to result on the host) as ratios
to infer-alone of the same trial, and training steps/s as ratios to
train-alone. Targets, medians over trials:
  - under priority, inference p50 and p99 <= 1.05 x alone;
  - under priority, training keeps >= 0.85 x (1 - the inference's GPU
    share) of its rate alone, the share taken as requests/s x the median
    latency alone (an upper bound: the latency includes host time);
  - inference alone under gshare: p50 and p99 within +2% or +10 us of
    native alone (the larger).

Environment (see common.py): SCHED_WINDOW_S (default 20), SCHED_TRIALS
(default 5), SCHED_INFER_ARGS (e.g. "--rate 100 --batch 32"),
SCHED_TRAIN_ARGS, SCHED_GSHARE_EXTRA (e.g. "GSHARE_IDLE_MS=20"),
SCHED_PRIORITY_HIGH (default 10), SCHED_BUDGET_S.
"""

import sys

import common  # first: it puts bench/ on sys.path for benchlib
import metrics
from benchlib import stats

LATENCY_TARGET = 1.05   # p50 and p99 under priority / alone
TRAIN_KEEPS = 0.85      # of (1 - the inference's GPU share)
ALONE_RELATIVE = 0.02   # inference alone under gshare: +2% ...
ALONE_ABSOLUTE_MS = 0.010  # ... or +10 us, the larger
EXPERIMENTS = ["infer-alone", "train-alone", "co-native", "co-priority", "infer-alone-gshare"]


def jobs_of(ctx, experiment, window):
    high = str(common.env_int("SCHED_PRIORITY_HIGH", 10))
    gshare = experiment in ("co-priority", "infer-alone-gshare")
    jobs = []
    if experiment != "train-alone":
        jobs.append(("infer", ctx.infer_argv(window), {"GSHARE_PRIORITY": high} if gshare else None))
    if experiment in ("train-alone", "co-native", "co-priority"):
        jobs.append(("train", ctx.train_argv(window), {"GSHARE_PRIORITY": "0"} if gshare else None))
    return ("gshare" if gshare else "native"), jobs


def run_one(ctx, experiment, trial, window):
    mode, jobs = jobs_of(ctx, experiment, window)
    record = ctx.run_barrier(f"{experiment}-t{trial}", mode, jobs, window,
                             gshare_vars={"GSHARE_POLICY": "priority"})
    record.update(experiment=experiment, trial=trial)
    results = record["jobs"]
    if not record["ok"]:
        record["metrics"] = None
        return record
    record["metrics"] = {
        "infer": metrics.infer(results.get("infer")) if "infer" in results else None,
        "train_steps_per_s": metrics.train_rate(results.get("train"), window)
        if "train" in results else None,
    }
    missing = [job for job in results
               if (job == "infer" and record["metrics"]["infer"] is None)
               or (job == "train" and record["metrics"]["train_steps_per_s"] is None)]
    return common.require_outputs(record, missing)


def body(ctx, state):
    window = common.env_float("SCHED_WINDOW_S", 20.0)
    trials = common.env_int("SCHED_TRIALS", 5)
    state["config"] = {"window_s": window, "trials": trials,
                       "infer_args": common.env_words("SCHED_INFER_ARGS"),
                       "train_args": common.env_words("SCHED_TRAIN_ARGS"),
                       "priority_high": common.env_int("SCHED_PRIORITY_HIGH", 10)}
    for trial in range(1, trials + 1):
        order = EXPERIMENTS if trial % 2 else list(reversed(EXPERIMENTS))
        for experiment in order:
            ctx.run_or_skip(state, f"{experiment}-t{trial}", ctx.estimate(window),
                            lambda: run_one(ctx, experiment, trial, window), experiment=experiment, trial=trial)


def summarize(records):
    found = {(r.get("experiment"), r.get("trial")): r.get("metrics")
             for r in records if r.get("metrics")}
    trials = sorted({t for _, t in found})
    rows = []
    for experiment in EXPERIMENTS:
        row = {"experiment": experiment, "trials": []}
        for trial in trials:
            m = found.get((experiment, trial))
            if not m:
                continue
            alone_infer = (found.get(("infer-alone", trial)) or {}).get("infer")
            alone_train = (found.get(("train-alone", trial)) or {}).get("train_steps_per_s")
            entry = {"trial": trial}
            if m.get("infer"):
                lat = m["infer"]["latency_ms"]
                entry.update(p50_ms=lat["p50"], p99_ms=lat["p99"], max_ms=lat["max"],
                             from_due_p99_ms=m["infer"]["from_due_ms"]["p99"],
                             late_requests=m["infer"]["late_requests"],
                             requests=m["infer"]["requests"])
                if alone_infer:
                    entry["p50_ratio"] = stats.ratio(lat["p50"], alone_infer["latency_ms"]["p50"])
                    entry["p99_ratio"] = stats.ratio(lat["p99"], alone_infer["latency_ms"]["p99"])
                    entry["p50_added_ms"] = lat["p50"] - alone_infer["latency_ms"]["p50"]
                    entry["p99_added_ms"] = lat["p99"] - alone_infer["latency_ms"]["p99"]
                if experiment == "infer-alone" and m["infer"].get("window_s"):
                    rate = m["infer"]["requests"] / m["infer"]["window_s"]
                    entry["gpu_share"] = min(1.0, rate * lat["p50"] / 1e3)
            if m.get("train_steps_per_s") is not None:
                entry["train_steps_per_s"] = m["train_steps_per_s"]
                entry["train_ratio"] = stats.ratio(m["train_steps_per_s"], alone_train)
                share = (found.get(("infer-alone", trial)) or {}).get("infer") or {}
                if share.get("window_s") and entry["train_ratio"] is not None:
                    busy = min(1.0, share["requests"] / share["window_s"] * share["latency_ms"]["p50"] / 1e3)
                    entry["train_goal"] = TRAIN_KEEPS * (1.0 - busy)
            row["trials"].append(entry)
        for key in ("p50_ms", "p99_ms", "from_due_p99_ms", "p50_ratio", "p99_ratio", "p50_added_ms",
                    "p99_added_ms", "gpu_share", "train_steps_per_s", "train_ratio", "train_goal"):
            row[key] = stats.median([t.get(key) for t in row["trials"]])
        rows.append(row)
    by_name = {row["experiment"]: row for row in rows}
    co, alone = by_name["co-priority"], by_name["infer-alone-gshare"]

    def at_most(value, limit):
        return None if value is None or limit is None else value <= limit

    def within_alone(q):
        base = by_name["infer-alone"][f"{q}_ms"]
        added = alone[f"{q}_added_ms"]
        return at_most(added, None if base is None else max(ALONE_RELATIVE * base, ALONE_ABSOLUTE_MS))

    met = {
        "p50_ratio": at_most(co["p50_ratio"], LATENCY_TARGET),
        "p99_ratio": at_most(co["p99_ratio"], LATENCY_TARGET),
        "train_ratio": None if co["train_ratio"] is None or co["train_goal"] is None
        else co["train_ratio"] >= co["train_goal"],
        "alone_p50": within_alone("p50"),
        "alone_p99": within_alone("p99"),
    }
    return rows, met


LABELS = {
    "infer-alone": "inference alone, native",
    "train-alone": "training alone, native",
    "co-native": "both, native (co-located)",
    "co-priority": "both, gshare priority (inference 10, training 0)",
    "infer-alone-gshare": "inference alone, under gshare",
}


def render(ctx, state, complete):
    records = state["records"]
    config = state.get("config") or {}
    rows, met = summarize(records)
    summary = ctx.header(complete, state["notes"])
    summary.update(torch=common.torch_version(records), config=config, rows=rows, met=met,
                   targets={"p50_ratio": f"<= {LATENCY_TARGET}", "p99_ratio": f"<= {LATENCY_TARGET}",
                            "train_ratio": f">= {TRAIN_KEEPS} x (1 - inference GPU share)",
                            "alone_p50": f"+{ALONE_RELATIVE:.0%} or +{ALONE_ABSOLUTE_MS * 1e3:.0f} us",
                            "alone_p99": f"+{ALONE_RELATIVE:.0%} or +{ALONE_ABSOLUTE_MS * 1e3:.0f} us"},
                   experiments=[common.lean(r) for r in records])
    lines = ctx.markdown_header("priority: latency-critical inference next to training", summary)
    infer_args = " ".join(config.get("infer_args") or []) or "(defaults)"
    train_args = " ".join(config.get("train_args") or []) or "(defaults)"
    lines += [f"Inference: `infer_job.py {infer_args}` (open loop, forward + .item() per request; "
              f"latency = issue to result on the host); training: `train_steps.py window {train_args}`; "
              f"{config.get('window_s', '?')} s windows started together. Ratios are to the "
              f"native alone runs of the same trial; medians over trials.", "",
              "| setting | inference p50 ms | p99 ms | p50 / alone | p99 / alone | "
              "p50, p99 added µs | p99 from due ms | training steps/s | training / alone (goal) |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        added = "—" if row["p50_added_ms"] is None else (
            f"{1e3 * row['p50_added_ms']:+.0f}, {1e3 * row['p99_added_ms']:+.0f}")
        goal = "" if row["train_goal"] is None else f" ({row['train_goal']:.2f})"
        lines.append(f"| {LABELS[row['experiment']]} | {common.fmt(row['p50_ms'], '.3f')} | "
                     f"{common.fmt(row['p99_ms'], '.3f')} | {common.fmt(row['p50_ratio'], '.3f')} | "
                     f"{common.fmt(row['p99_ratio'], '.3f')} | {added} | "
                     f"{common.fmt(row['from_due_p99_ms'], '.3f')} | "
                     f"{common.fmt(row['train_steps_per_s'], '.1f')} | "
                     f"{common.fmt(row['train_ratio'], '.2f')}{goal} |")
    lines += ["", "Per trial, inference p50 / p99 against alone (under priority; alone under gshare):", ""]
    by_name = {row["experiment"]: row for row in rows}
    for name in ("co-priority", "infer-alone-gshare"):
        for t in by_name[name]["trials"]:
            lines.append(f"- {LABELS[name]}, trial {t['trial']}: p50 {common.fmt(t.get('p50_ratio'), '.3f')}, "
                         f"p99 {common.fmt(t.get('p99_ratio'), '.3f')}"
                         + ("" if t.get("train_ratio") is None else
                            f"; training {common.fmt(t.get('train_ratio'), '.2f')}"))

    lines += ["", f"- under priority, inference p50 / alone ≤ {LATENCY_TARGET}: {common.verdict(met['p50_ratio'])}",
              f"- under priority, inference p99 / alone ≤ {LATENCY_TARGET}: {common.verdict(met['p99_ratio'])}",
              f"- under priority, training ≥ {TRAIN_KEEPS} × (1 − the inference's GPU share) of alone: "
              f"{common.verdict(met['train_ratio'])}",
              f"- inference alone under gshare, p50 and p99 within +{ALONE_RELATIVE:.0%} or "
              f"+{ALONE_ABSOLUTE_MS * 1e3:.0f} µs of native: {common.verdict(met['alone_p50'])}, "
              f"{common.verdict(met['alone_p99'])}",
              "- \"p99 from due\" counts from when a request was due (50/s), so it includes "
              "waiting behind a slow earlier request.", ""]
    lines += common.closing_lines(ctx, records)
    return summary, "\n".join(lines)


if __name__ == "__main__":
    sys.exit(common.run_part("priority", body, render))
