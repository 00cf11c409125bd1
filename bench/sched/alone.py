"""Benchmark: what gshare costs a job that is alone on the GPU, measured with
two copies of the job, one native and one under gshare (its own GSHARE_DIR,
the default policy), started together and taking turns on the GPU by the
clock (benchlib/turns.py): in each turn one copy works and the other sleeps,
so each runs alone, yet both under the same slow drifts of the machine,
which runs one after the other would measure too (a native job alone on one
H200 spread 1.77-2.33 ms at p50 from run to run).

Experiments per trial (which copy goes first alternates from trial to trial):
  infer  inference (infer_job.py, open loop, default `--rate 100 --batch 8`)
         in turns of SCHED_INFER_TURN_S (default 0.5 s): latency p50 and
         p99 of each copy over its own requests
  train  training (train_steps.py window --model transformer: a 4-layer
         transformer encoder, AdamW, bf16, loss read every step) in turns of
         SCHED_TRAIN_TURN_S (default 1 s): steps per second of stepping time

Goals, on the medians over trials (the range is reported beside):
  - inference under gshare: p50 and p99 within +2% or +10 us of native
    (the larger);
  - training under gshare: >= 0.99 of native steps per second.

Environment (see common.py): SCHED_WINDOW_S (default 20), SCHED_TRIALS
(default 5), SCHED_ALONE_EXPERIMENTS (default "infer train"),
SCHED_INFER_ARGS, SCHED_ALONE_TRAIN_ARGS (replaces `--model transformer`,
e.g. "--batch 2048" for the MLP of short steps), SCHED_GSHARE_EXTRA,
SCHED_BUDGET_S.
"""

import sys

import common  # first: it puts bench/ on sys.path for benchlib
import metrics
from benchlib import stats

ALONE_RELATIVE = 0.02      # inference: +2% ...
ALONE_ABSOLUTE_MS = 0.010  # ... or +10 us, the larger
TRAIN_TARGET = 0.99
EXPERIMENTS = ["infer", "train"]
DEFAULT_INFER_ARGS = ["--rate", "100", "--batch", "8"]
DEFAULT_TRAIN_ARGS = ["--model", "transformer"]


def job_argv(ctx, experiment, window, turn):
    if experiment == "infer":
        argv = ctx.infer_argv(window)
        if not common.env_words("SCHED_INFER_ARGS"):
            argv += DEFAULT_INFER_ARGS
        return argv + ["--turn", turn, "--turn-s", str(common.env_float("SCHED_INFER_TURN_S", 0.5))]
    argv = ctx.train_argv(window) + (common.env_words("SCHED_ALONE_TRAIN_ARGS") or DEFAULT_TRAIN_ARGS)
    return argv + ["--turn", turn, "--turn-s", str(common.env_float("SCHED_TRAIN_TURN_S", 1.0))]


def run_one(ctx, experiment, trial, window):
    # Odd trials: native first; even trials: gshare first.
    native_turn, gshare_turn = ("0/2", "1/2") if trial % 2 else ("1/2", "0/2")
    jobs = [("native", job_argv(ctx, experiment, window, native_turn), common.NATIVE_JOB),
            ("gshare", job_argv(ctx, experiment, window, gshare_turn), None)]
    name = f"{experiment}-t{trial}"
    record = ctx.run_barrier(name, "gshare", jobs, window)
    record.update(experiment=experiment, trial=trial, first="native" if trial % 2 else "gshare")
    if not record["ok"]:
        record["metrics"] = None
        return record
    measure = metrics.infer if experiment == "infer" else metrics.train_spans
    record["metrics"] = {copy: measure(record["jobs"].get(copy)) for copy in ("native", "gshare")}
    log = ctx.raw / name / "gshare.log"  # the gshare copy's stderr
    if experiment == "infer" and record["metrics"]["gshare"] and log.exists():
        record["metrics"]["gshare"]["slow_requests"] = metrics.gshare_work_in_slow_requests(
            record["jobs"].get("gshare"), log.read_text(errors="replace"))
    return common.require_outputs(record, [copy for copy, m in record["metrics"].items() if m is None])


def body(ctx, state):
    window = common.env_float("SCHED_WINDOW_S", 20.0)
    trials = common.env_int("SCHED_TRIALS", 5)
    chosen = common.env_words("SCHED_ALONE_EXPERIMENTS") or EXPERIMENTS
    unknown = sorted(set(chosen) - set(EXPERIMENTS))
    if unknown:
        raise SystemExit(f"SCHED_ALONE_EXPERIMENTS: unknown {' '.join(unknown)}; known: {' '.join(EXPERIMENTS)}")
    state["config"] = {"window_s": window, "trials": trials,
                       "infer_args": common.env_words("SCHED_INFER_ARGS") or DEFAULT_INFER_ARGS,
                       "train_args": common.env_words("SCHED_ALONE_TRAIN_ARGS") or DEFAULT_TRAIN_ARGS,
                       "infer_turn_s": common.env_float("SCHED_INFER_TURN_S", 0.5),
                       "train_turn_s": common.env_float("SCHED_TRAIN_TURN_S", 1.0)}
    for trial in range(1, trials + 1):
        for experiment in [e for e in EXPERIMENTS if e in chosen]:
            ctx.run_or_skip(state, f"{experiment}-t{trial}", ctx.estimate(window),
                            lambda: run_one(ctx, experiment, trial, window), experiment=experiment, trial=trial)


def infer_entry(m):
    native, gshare = m["native"]["latency_ms"], m["gshare"]["latency_ms"]
    entry = {"requests": [m["native"]["requests"], m["gshare"]["requests"]],
             "slow_requests": m["gshare"].get("slow_requests")}
    for q in ("p50", "p99"):
        entry[f"native_{q}_ms"], entry[f"gshare_{q}_ms"] = native[q], gshare[q]
        entry[f"{q}_ratio"] = stats.ratio(gshare[q], native[q])
        entry[f"{q}_added_us"] = 1e3 * (gshare[q] - native[q])
    return entry


def train_entry(m):
    return {"native_steps_per_s": m["native"]["steps_per_s"], "gshare_steps_per_s": m["gshare"]["steps_per_s"],
            "steps": [m["native"]["steps"], m["gshare"]["steps"]],
            "ratio": stats.ratio(m["gshare"]["steps_per_s"], m["native"]["steps_per_s"])}


def summarize(records):
    """Per experiment: its trials' entries, and the median and range of
    each figure; and whether the goals are met on the medians."""
    rows = {}
    for experiment, entry_of in (("infer", infer_entry), ("train", train_entry)):
        trials = [dict(entry_of(r["metrics"]), trial=r["trial"], first=r.get("first"))
                  for r in records if r.get("experiment") == experiment and r.get("metrics")]
        row = {"trials": trials}
        for key in (trials[0] if trials else {}):
            if key in ("trial", "first", "requests", "steps", "slow_requests"):
                continue
            values = [t[key] for t in trials]
            row[key] = stats.median(values)
            row[key + "_range"] = stats.spread(values)
        rows[experiment] = row

    def within(q):
        row = rows["infer"]
        added, base = row.get(f"{q}_added_us"), row.get(f"native_{q}_ms")
        if added is None or base is None:
            return None
        return added <= 1e3 * max(ALONE_RELATIVE * base, ALONE_ABSOLUTE_MS)

    ratio = rows["train"].get("ratio")
    met = {"infer_p50": within("p50"), "infer_p99": within("p99"),
           "train": None if ratio is None else ratio >= TRAIN_TARGET}
    return rows, met


def slow_text(slow):
    """The gshare copy's slowest 1% against gshare's debug lines (with
    SCHED_GSHARE_EXTRA=GSHARE_LOG=debug)."""
    if not slow:
        return ""
    text = f"; {slow['with_gshare_line']} of its {slow['slow']} slowest 1% ran beside a line of gshare's debug log"
    return text + (": " + "; ".join(slow["lines"]) if slow["lines"] else "")


def render(ctx, state, complete):
    records = state["records"]
    config = state.get("config") or {}
    rows, met = summarize(records)
    summary = ctx.header(complete, state["notes"])
    summary.update(torch=common.torch_version(records), config=config, rows=rows, met=met,
                   targets={"infer": f"p50 and p99 +{ALONE_RELATIVE:.0%} or "
                                     f"+{ALONE_ABSOLUTE_MS * 1e3:.0f} us of native",
                            "train": f">= {TRAIN_TARGET} of native"},
                   experiments=[common.lean(r) for r in records])
    lines = ctx.markdown_header("a job alone, native and under gshare taking turns", summary)
    lines += [f"Each trial runs a native copy and a gshare copy of the job together, taking turns "
              f"by the clock (inference {config.get('infer_turn_s', '?')} s, training "
              f"{config.get('train_turn_s', '?')} s turns) over {config.get('window_s', '?')} s: "
              f"each alone on the GPU in its turns. Inference: `infer_job.py "
              f"{' '.join(config.get('infer_args') or [])}`; training: `train_steps.py window "
              f"{' '.join(config.get('train_args') or [])}`. Medians over trials [range].", ""]

    def cell(row, key, spec):
        value, (low, high) = row.get(key), row.get(key + "_range", (None, None))
        if value is None:
            return "—"
        return f"{format(value, spec)} [{format(low, spec)}–{format(high, spec)}]"

    infer, train = rows["infer"], rows["train"]
    lines += ["| inference | native ms | gshare ms | gshare ÷ native | added µs |",
              "| --- | --- | --- | --- | --- |"]
    for q in ("p50", "p99"):
        lines.append(f"| {q} | {cell(infer, f'native_{q}_ms', '.3f')} | {cell(infer, f'gshare_{q}_ms', '.3f')} | "
                     f"{cell(infer, f'{q}_ratio', '.3f')} | {cell(infer, f'{q}_added_us', '+.0f')} |")
    lines += ["", "| training | native steps/s | gshare steps/s | gshare ÷ native |", "| --- | --- | --- | --- |",
              f"| steps/s | {cell(train, 'native_steps_per_s', '.2f')} | {cell(train, 'gshare_steps_per_s', '.2f')} | "
              f"{cell(train, 'ratio', '.4f')} |", "", "Per trial:", ""]
    for t in infer.get("trials", []):
        lines.append(f"- inference, trial {t['trial']} ({t['first']} first): p50 {t['native_p50_ms']:.3f} → "
                     f"{t['gshare_p50_ms']:.3f} ms ({t['p50_ratio']:.3f}), p99 {t['native_p99_ms']:.3f} → "
                     f"{t['gshare_p99_ms']:.3f} ms ({t['p99_ratio']:.3f}); requests {t['requests'][0]}, "
                     f"{t['requests'][1]}" + slow_text(t.get("slow_requests")))
    for t in train.get("trials", []):
        lines.append(f"- training, trial {t['trial']} ({t['first']} first): {t['native_steps_per_s']:.2f} → "
                     f"{t['gshare_steps_per_s']:.2f} steps/s ({t['ratio']:.4f}); steps {t['steps'][0]}, "
                     f"{t['steps'][1]}")

    lines += ["", f"- inference p50 and p99 within +{ALONE_RELATIVE:.0%} or +{ALONE_ABSOLUTE_MS * 1e3:.0f} µs "
                  f"of native: {common.verdict(met['infer_p50'])}, {common.verdict(met['infer_p99'])}",
              f"- training ≥ {TRAIN_TARGET} of native: {common.verdict(met['train'])}", ""]
    lines += common.closing_lines(ctx, records)
    return summary, "\n".join(lines)


if __name__ == "__main__":
    sys.exit(common.run_part("alone", body, render))
