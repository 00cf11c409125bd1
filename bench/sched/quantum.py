"""Benchmark `quantum`: the 2-job fair experiment of fair.py for
GSHARE_QUANTUM_MS in {5, 10, 25, 50, 100, 200} (SCHED_QUANTA to change),
with the same two jobs natively (concurrent, no gshare) in the same trial
as the reference. Per quantum: aggregate steps/s, its ratio to native,
Jain's index, and the per-step latency p50/p99 (time between consecutive
step ends of a job, pooled over both jobs): a longer quantum costs fewer
handovers but makes a waiting job wait longer. The table is what the
default quantum should be chosen from.

Trial 1 runs native, then the quanta in increasing order; trial 2 (if the
budget allows) native, then the quanta in decreasing order, so that drift
does not line up with the quantum. Medians over the trials that ran.

Environment (see common.py): SCHED_WINDOW_S (default 15), SCHED_TRIALS
(default 2; trials that do not fit the budget are skipped, partly or
wholly), SCHED_QUANTA (default "5 10 25 50 100 200"), SCHED_TRAIN_ARGS,
SCHED_GSHARE_EXTRA, SCHED_BUDGET_S.
"""

import sys

import common  # first: it puts bench/ on sys.path for benchlib
import metrics
from benchlib import stats

DEFAULT_QUANTA = [5, 10, 25, 50, 100, 200]


def quanta():
    words = common.env_words("SCHED_QUANTA")
    if not words:
        return list(DEFAULT_QUANTA)
    try:
        values = [int(w) for w in words]
    except ValueError:
        sys.exit(f"SCHED_QUANTA={' '.join(words)!r}: whole milliseconds expected")
    if any(v < 1 for v in values):
        sys.exit("SCHED_QUANTA: each quantum must be >= 1 ms")
    return values


def run_one(ctx, quantum, trial, window):
    mode = "native" if quantum is None else "gshare"
    name = f"native-t{trial}" if quantum is None else f"q{quantum}-t{trial}"
    gshare_vars = None
    if quantum is not None:
        gshare_vars = {"GSHARE_POLICY": "fair", "GSHARE_QUANTUM_MS": str(quantum)}
    jobs = [(f"job{i}", ctx.train_argv(window), None) for i in range(2)]
    record = ctx.run_barrier(name, mode, jobs, window, gshare_vars=gshare_vars)
    record.update(quantum_ms=quantum, trial=trial)
    return common.require_metrics(record, metrics.train(record))


def body(ctx, state):
    window = common.env_float("SCHED_WINDOW_S", 15.0)
    trials = common.env_int("SCHED_TRIALS", 2)
    values = quanta()
    state["config"] = {"window_s": window, "trials": trials, "quanta_ms": values,
                       "train_args": common.env_words("SCHED_TRAIN_ARGS")}
    for trial in range(1, trials + 1):
        order = [None] + (values if trial % 2 else list(reversed(values)))
        for quantum in order:
            name = f"native-t{trial}" if quantum is None else f"q{quantum}-t{trial}"
            ctx.run_or_skip(state, name, ctx.estimate(window), lambda: run_one(ctx, quantum, trial, window),
                            quantum_ms=quantum, trial=trial)


def summarize(records, values):
    native = {r["trial"]: r["metrics"] for r in records
              if r.get("quantum_ms") is None and r.get("metrics")}
    rows = []
    native_row = {"quantum_ms": None, "label": "native (no gshare)", "trials": []}
    for trial, m in sorted(native.items()):
        native_row["trials"].append({"trial": trial, "aggregate": m["aggregate_steps_per_s"],
                                     "ratio": 1.0, "jain": m["jain"],
                                     "p50_ms": m["step_ms"]["p50"], "p99_ms": m["step_ms"]["p99"]})
    for quantum in values:
        row = {"quantum_ms": quantum, "label": f"{quantum} ms", "trials": []}
        for r in records:
            if r.get("quantum_ms") != quantum or not r.get("metrics"):
                continue
            m = r["metrics"]
            reference = native.get(r["trial"])
            row["trials"].append({
                "trial": r["trial"], "aggregate": m["aggregate_steps_per_s"],
                "ratio": stats.ratio(m["aggregate_steps_per_s"],
                                     reference["aggregate_steps_per_s"] if reference else None),
                "jain": m["jain"], "p50_ms": m["step_ms"]["p50"], "p99_ms": m["step_ms"]["p99"],
                "max_ms": m["step_ms"]["max"]})
        rows.append(row)
    for row in [native_row] + rows:
        for key in ("aggregate", "ratio", "jain", "p50_ms", "p99_ms"):
            row[key] = stats.median([t[key] for t in row["trials"]])
    measured = [row for row in rows if row["aggregate"] is not None]
    choice = {}
    if measured:
        best = max(measured, key=lambda row: row["aggregate"])
        choice["best_aggregate_quantum_ms"] = best["quantum_ms"]
        close = [row for row in measured if row["aggregate"] >= 0.99 * best["aggregate"]]
        choice["smallest_within_1pct_quantum_ms"] = min(row["quantum_ms"] for row in close)
        fair_enough = [row for row in close if row["jain"] is not None and row["jain"] >= 0.99]
        if fair_enough:
            choice["smallest_within_1pct_and_jain_099_quantum_ms"] = min(
                row["quantum_ms"] for row in fair_enough)
    return native_row, rows, choice


def render(ctx, state, complete):
    records = state["records"]
    config = state.get("config") or {}
    values = config.get("quanta_ms") or DEFAULT_QUANTA
    native_row, rows, choice = summarize(records, values)
    summary = ctx.header(complete, state["notes"])
    summary.update(torch=common.torch_version(records), config=config, native=native_row,
                   rows=rows, choice=choice, experiments=[common.lean(r) for r in records])
    lines = ctx.markdown_header("the fair quantum", summary)
    lines += [f"Two identical training jobs (`train_steps.py window {' '.join(config.get('train_args') or []) or '(defaults)'}`)"
              f" started together, measured for {config.get('window_s', '?')} s, under "
              "GSHARE_POLICY=fair with each GSHARE_QUANTUM_MS; native = the same two jobs "
              "without gshare in the same trial. Step latency: time between consecutive step "
              "ends of one job (pooled over both). Medians over trials.", "",
              "| quantum | aggregate steps/s | / native | Jain | step p50 ms | step p99 ms | trials |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in [native_row] + rows:
        lines.append(f"| {row['label']} | {common.fmt(row['aggregate'], '.1f')} | "
                     f"{common.fmt(row['ratio'])} | {common.fmt(row['jain'], '.4f')} | "
                     f"{common.fmt(row['p50_ms'], '.2f')} | {common.fmt(row['p99_ms'], '.1f')} | "
                     f"{len(row['trials'])} |")
    lines.append("")
    if choice:
        lines += [f"- highest aggregate: {choice['best_aggregate_quantum_ms']} ms",
                  f"- smallest quantum within 1% of that aggregate: "
                  f"{choice['smallest_within_1pct_quantum_ms']} ms"]
        if "smallest_within_1pct_and_jain_099_quantum_ms" in choice:
            lines.append(f"- ... that also keeps Jain ≥ 0.99: "
                         f"{choice['smallest_within_1pct_and_jain_099_quantum_ms']} ms")
        lines.append("")
    lines += common.closing_lines(ctx, records)
    return summary, "\n".join(lines)


if __name__ == "__main__":
    sys.exit(common.run_part("quantum", body, render))
