"""Benchmark `fair`: identical PyTorch training jobs (bench/train_steps.py
window) started together, natively (concurrently, no gshare) and under
GSHARE_POLICY=fair, in the same run.

Experiments per trial (native and gshare back to back, their order flipping
every trial): 2, 4 and 8 jobs; 2, 4 and 8 jobs of steps of about 3 ms
and 4 of about 50 ms (the same MLP at a quarter and at six times its
batch); 4 of 3 ms steps joining 2 s apart (`n4join`: each process started
then, its set-up and first steps beside the others' steps; measured from
the last one's first step); 2 jobs with GSHARE_WEIGHT 3 and 1 (its
native reference is the native 2-job run of the same trial), and many small
jobs (SCHED_SMALL_JOBS, default 64, each `SCHED_SMALL_ARGS`: a narrow MLP
of a few milliseconds a step). Trial 1 also runs one job alone, natively,
for the step time.

Per experiment, over the window in which all jobs ran: each job's steps/s,
its share of the steps, Jain's index of steps/s / weight, the slowest job's
rate over the fastest's, the aggregate. Verdict (median over trials): Jain
>= 0.99 and gshare aggregate / native aggregate (paired within a trial) >=
1.0; for the small jobs, slowest / fastest >= 0.9 as well. For 3:1 the
shares should be 75/25, which a weight-normalised Jain's index >= 0.99
checks.

`host`: two such training jobs beside a third that works on the host
after each of its small steps (SCHED_SMALL_ARGS, then SCHED_HOST_MS of CPU
work, default 30: an environment step, a data pipeline on the CPU). Its
GPU sits idle then; gshare lends the token meanwhile (README, loans).
Verdict: the two training jobs' aggregate >= 1.0 of theirs natively, and
the host-bound job's steps/s >= 0.9 of its native rate beside them.

The small jobs are measured over a longer window (SCHED_SMALL_WINDOW_S,
default 30): 64 jobs taking turns of 5-10 ms (the default quantum shrinks
among many jobs) go round in 0.3-0.7 s, and a job's share over a window is
known only to about one turn in the turns it got there (30 s: about 70).

Environment (see common.py): SCHED_WINDOW_S (default 15), SCHED_TRIALS
(default 5), SCHED_TRAIN_ARGS, SCHED_SMALL_JOBS, SCHED_SMALL_ARGS (default
`--width 256 --depth 4 --batch 512`), SCHED_HOST_MS, SCHED_FAIR_CONFIGS (a
subset of n2 n4 n8 n2short n4short n8short n4join n4long w31 small
host, default all), SCHED_FAIR_MODES (a
subset of native gshare exclusive hostbound gaps pairs, default native gshare:
gshare alone gives no ratios to native; `exclusive` runs the same jobs under
gshare with GSHARE_SHARED_TURNS=off, every job's turn its own, `hostbound`
with GSHARE_SHARED_TURNS=on, turns shared among host-bound jobs only, `gaps`
with GSHARE_SHARED_TURNS=gaps (the library's default), busy jobs whose kernels
leave the GPU gaps two to a turn, and `pairs` with GSHARE_SHARED_TURNS=pairs,
any busy job two to a turn, in the same trial, the
modes' order reversed every other trial, and reports their rows beside
gshare's), SCHED_GSHARE_EXTRA, SCHED_BUDGET_S.
"""

import sys

import common  # first: it puts bench/ on sys.path for benchlib
import metrics
from benchlib import stats

CONFIGS = {
    "alone": {"weights": [1], "label": "1 job alone"},
    "n2": {"weights": [1, 1], "label": "2 identical jobs"},
    "n4": {"weights": [1, 1, 1, 1], "label": "4 identical jobs"},
    "n8": {"weights": [1] * 8, "label": "8 identical jobs"},
    # Steps of about 3 ms and about 50 ms: the default MLP (8.5 ms a step
    # on an H200, GPU-bound) at a quarter and at six times its batch.
    "n2short": {"weights": [1] * 2, "label": "2 jobs of short steps (batch 2048)", "args": ["--batch", "2048"]},
    "n4short": {"weights": [1] * 4, "label": "4 jobs of short steps (batch 2048)", "args": ["--batch", "2048"]},
    "n8short": {"weights": [1] * 8, "label": "8 jobs of short steps (batch 2048)", "args": ["--batch", "2048"]},
    # The same four joining one after another, each process started
    # join_every_s after the one before: their set-up and first steps run
    # beside the others' steps (start order, not a barrier). Measured from
    # the last one's first step.
    "n4join": {"weights": [1] * 4, "label": "4 jobs of short steps joining 2 s apart", "args": ["--batch", "2048"],
               "join_every_s": 2.0},
    "n4long": {"weights": [1] * 4, "label": "4 jobs of long steps (batch 49152)", "args": ["--batch", "49152"]},
    "w31": {"weights": [3, 1], "label": "2 jobs, GSHARE_WEIGHT 3:1", "native": "n2"},
    "small": {"weights": None, "label": "small jobs", "small": True},
    "host": {"weights": [1, 1, 1], "label": "2 jobs beside one working on the host", "host": True},
}
COMPARED = ("n2", "n4", "n8", "n2short", "n4short", "n8short", "n4join", "n4long", "w31", "small", "host")
HOST_TARGET = 0.9  # the host-bound job's rate under gshare over its native rate
JAIN_TARGET = 0.99
AGGREGATE_TARGET = 1.0
SPREAD_TARGET = 0.9  # the slowest small job's rate over the fastest's
SMALL_ARGS = ["--width", "256", "--depth", "4", "--batch", "512"]
# Seconds a joining job's window grows by beyond the joins themselves: a
# late process's interpreter, CUDA context and warm-up steps (9-11 s to
# ready on an H200 host), so that all jobs still step together for about
# the window.
JOIN_SETUP_S = 12.0
# How the jobs run: natively, under gshare (its defaults and
# SCHED_GSHARE_EXTRA), under gshare with every turn a job's own, with turns
# shared among host-bound jobs only, with busy jobs that leave the GPU gaps
# two to a turn, and with any busy job two to a turn.
MODES = ("native", "gshare", "exclusive", "hostbound", "gaps", "pairs")
UNDER_GSHARE = ("gshare", "exclusive", "hostbound", "gaps", "pairs")
MODE_VARS = {"gshare": {"GSHARE_POLICY": "fair"},
             "exclusive": {"GSHARE_POLICY": "fair", "GSHARE_SHARED_TURNS": "off"},
             "hostbound": {"GSHARE_POLICY": "fair", "GSHARE_SHARED_TURNS": "on"},
             "gaps": {"GSHARE_POLICY": "fair", "GSHARE_SHARED_TURNS": "gaps"},
             "pairs": {"GSHARE_POLICY": "fair", "GSHARE_SHARED_TURNS": "pairs"}}
LABEL_OF = {"gshare": "", "exclusive": ", exclusive turns", "hostbound": ", host-bound jobs' turns shared",
            "gaps": ", gappy jobs two to a turn",
            "pairs": ", two to a turn"}


def weights_of(config):
    weights = CONFIGS[config]["weights"]
    return weights if weights is not None else [1] * common.env_int("SCHED_SMALL_JOBS", 64)


def small_argv(ctx, window):
    argv = ctx.train_argv(window)
    return argv + (common.env_words("SCHED_SMALL_ARGS") or SMALL_ARGS)


def host_argv(ctx, window):
    """The host-bound job of `host`: a small step, then CPU work."""
    return small_argv(ctx, window) + ["--host-ms", str(common.env_float("SCHED_HOST_MS", 30.0))]


def join_every(config):
    return CONFIGS[config].get("join_every_s", 0.0)


def window_for(config, window):
    """The run's window: longer where jobs join one after another."""
    every = join_every(config)
    return window + every * (len(weights_of(config)) - 1) + JOIN_SETUP_S if every else window


def run_config(ctx, config, mode, trial, window):
    weights = weights_of(config)
    small = CONFIGS[config].get("small", False)
    host = CONFIGS[config].get("host", False)
    every = join_every(config)
    jobs = []
    under_gshare = mode in UNDER_GSHARE
    weighted = under_gshare and len(set(weights)) > 1
    for index, weight in enumerate(weights):
        job_vars = {"GSHARE_WEIGHT": str(weight)} if weighted else None
        argv = small_argv(ctx, window) if small else ctx.train_argv(window) + CONFIGS[config].get("args", [])
        if host and index == len(weights) - 1:
            argv = host_argv(ctx, window)
        jobs.append((f"job{index}", argv, job_vars))
    # Many processes start their interpreters and contexts at once.
    ready_timeout = 90.0 + 3.0 * len(weights) if len(weights) > 8 else 90.0
    late = {job: index * every for index, (job, _, _) in enumerate(jobs) if index > 0} if every else None
    record = ctx.run_barrier(f"{config}-{mode}-t{trial}", "gshare" if under_gshare else "native", jobs, window,
                             gshare_vars=MODE_VARS.get(mode), ready_timeout=ready_timeout, late=late)
    record.update(config=config, trial=trial, mode=mode)
    return common.require_metrics(record, metrics.train(record, weights if under_gshare else None,
                                                        from_last_join=bool(every)))


def body(ctx, state):
    window = common.env_float("SCHED_WINDOW_S", 15.0)
    small_window = common.env_float("SCHED_SMALL_WINDOW_S", 30.0)
    window_of = {c: small_window if CONFIGS[c].get("small") else window_for(c, window) for c in CONFIGS}
    trials = common.env_int("SCHED_TRIALS", 5)
    chosen = common.env_words("SCHED_FAIR_CONFIGS") or list(COMPARED)
    unknown = [c for c in chosen if c not in COMPARED]
    if unknown:
        raise SystemExit(f"SCHED_FAIR_CONFIGS: unknown {' '.join(unknown)}; known: {' '.join(COMPARED)}")
    state["config"] = {"window_s": window, "small_window_s": small_window, "trials": trials, "policy": "fair",
                       "train_args": common.env_words("SCHED_TRAIN_ARGS"),
                       "small_jobs": len(weights_of("small")),
                       "small_args": common.env_words("SCHED_SMALL_ARGS") or SMALL_ARGS,
                       "host_ms": common.env_float("SCHED_HOST_MS", 30.0),
                       "configs": chosen}
    # SCHED_FAIR_MODES: a subset of "native gshare exclusive hostbound gaps pairs" (gshare alone for a
    # quick look at a change; its figures are then not ratios to native).
    only = common.env_words("SCHED_FAIR_MODES") or ["native", "gshare"]
    unknown = [m for m in only if m not in MODES]
    if unknown:
        raise SystemExit(f"SCHED_FAIR_MODES: unknown {' '.join(unknown)}; known: {' '.join(MODES)}")
    state["config"]["modes"] = [m for m in MODES if m in only]
    for trial in range(1, trials + 1):
        modes = [m for m in MODES if m in only]
        if trial % 2 == 0:
            modes.reverse()
        groups = [[("alone", "native")]] if trial == 1 and "native" in only else []
        for config in chosen:
            if config == "w31":
                w31 = [("w31", m) for m in modes if m in UNDER_GSHARE]
                groups.append(w31 + ([] if "n2" in chosen else [("n2", m) for m in modes]))
            else:
                groups.append([(config, m) for m in modes])
        for group in groups:
            if not ctx.fits(ctx.estimate(window_of[group[0][0]], len(group))):
                for config, mode in group:
                    name = f"{config}-{mode}-t{trial}"
                    ctx.log(f"{name}: skipped, {ctx.remaining():.0f} s left of the budget")
                    state["records"].append(common.skipped(name, config=config, mode=mode,
                                                           trial=trial))
                ctx.checkpoint()
                continue
            for config, mode in group:
                state["records"].append(run_config(ctx, config, mode, trial, window_of[config]))
                ctx.checkpoint()


def summarize(records):
    """The rows of the result table, from the experiments' records."""
    found = {(r.get("config"), r.get("mode"), r.get("trial")): r for r in records}

    def metric(config, mode, trial):
        record = found.get((config, mode, trial))
        return record.get("metrics") if record else None

    rows = []
    for config, under in ((c, u) for c in COMPARED for u in UNDER_GSHARE):
        spec = CONFIGS[config]
        if not any(c == config and m == under for c, m, _ in found):
            continue
        if spec.get("host"):
            rows.append(host_row(config, under, spec, found, metric))
            continue
        reference = spec.get("native", config)
        weights = weights_of(config) if spec["weights"] is None else spec["weights"]
        # The small jobs' count is the one the records ran with.
        weights = next((r["metrics"]["weights"] for (c, _, _), r in found.items()
                        if c == config and r.get("metrics")), weights)
        total = sum(weights)
        per_trial = []
        for trial in sorted({t for c, m, t in found if c == config and m == under}):
            gshare = metric(config, under, trial)
            if gshare is None:
                continue
            native = metric(reference, "native", trial)
            per_trial.append({
                "trial": trial,
                "gshare_aggregate": gshare["aggregate_steps_per_s"],
                "native_aggregate": native["aggregate_steps_per_s"] if native else None,
                "ratio": stats.ratio(gshare["aggregate_steps_per_s"],
                                     native["aggregate_steps_per_s"] if native else None),
                "shares": gshare["shares"], "jain": gshare["jain"],
                "slowest_over_fastest": gshare["slowest_over_fastest"],
                "native_slowest_over_fastest": native["slowest_over_fastest"] if native else None,
                "per_second_jain_min": gshare["per_second_jain_min"],
                "native_shares": native["shares"] if native else None,
                "native_jain": native["jain"] if native else None,
                "step_ms_p99": gshare["step_ms"]["p99"],
                "turns": stats.spread(gshare.get("turns") or []),
                "in_turn_step_ms": stats.spread(gshare.get("in_turn_step_ms") or []),
            })
        jain = stats.median([t["jain"] for t in per_trial])
        ratio = stats.median([t["ratio"] for t in per_trial])
        spread = stats.median([t["slowest_over_fastest"] for t in per_trial])
        shares = None
        if per_trial and len(weights) <= 8:
            shares = [stats.median([t["shares"][j] for t in per_trial])
                      for j in range(len(weights))]
        met = {"jain": None if jain is None else jain >= JAIN_TARGET,
               "aggregate_ratio": None if ratio is None else ratio >= AGGREGATE_TARGET}
        targets = {"jain": f">= {JAIN_TARGET}", "aggregate_ratio": f">= {AGGREGATE_TARGET}"}
        if spec.get("small"):
            met["slowest_over_fastest"] = None if spread is None else spread >= SPREAD_TARGET
            targets["slowest_over_fastest"] = f">= {SPREAD_TARGET}"
        rows.append({
            "config": config, "mode": under,
            "label": (f"{len(weights)} {spec['label']}" if spec.get("small") else spec["label"]) + LABEL_OF[under],
            "weights": weights,
            "expected_shares": [w / total for w in weights],
            "slowest_over_fastest": spread,
            "slowest_over_fastest_min": min((t["slowest_over_fastest"] for t in per_trial
                                             if t["slowest_over_fastest"] is not None), default=None),
            "trials": per_trial,
            "native_aggregate": stats.median([t["native_aggregate"] for t in per_trial]),
            "gshare_aggregate": stats.median([t["gshare_aggregate"] for t in per_trial]),
            "ratio": ratio, "shares": shares, "jain": jain,
            "jain_min": min((t["jain"] for t in per_trial if t["jain"] is not None), default=None),
            "targets": targets, "met": met,
        })
    alone = [metric("alone", "native", t) for c, m, t in found if c == "alone"]
    alone = [a for a in alone if a]
    alone_row = None
    if alone:
        alone_row = {"steps_per_s": alone[0]["aggregate_steps_per_s"],
                     "step_ms_p50": alone[0]["step_ms"]["p50"],
                     "step_ms_p99": alone[0]["step_ms"]["p99"],
                     "peak_allocated_mib": alone[0]["peak_allocated_mib_max"]}
    return rows, alone_row


def host_row(config, under, spec, found, metric):
    """`host`'s row: the training jobs' aggregate and the host-bound job's
    rate (the last job), each under gshare (`under`: its mode) over
    natively, per trial."""
    per_trial = []
    for trial in sorted({t for c, m, t in found if c == config and m == under}):
        gshare, native = metric(config, under, trial), metric(config, "native", trial)
        if gshare is None:
            continue
        training = sum(gshare["steps_per_s"][:-1])
        native_training = sum(native["steps_per_s"][:-1]) if native else None
        per_trial.append({
            "trial": trial, "gshare_training": training, "native_training": native_training,
            "training_ratio": stats.ratio(training, native_training),
            "gshare_host": gshare["steps_per_s"][-1],
            "native_host": native["steps_per_s"][-1] if native else None,
            "host_ratio": stats.ratio(gshare["steps_per_s"][-1], native["steps_per_s"][-1] if native else None),
        })
    training_ratio = stats.median([t["training_ratio"] for t in per_trial])
    host_ratio = stats.median([t["host_ratio"] for t in per_trial])
    return {
        "config": config, "mode": under, "label": spec["label"] + LABEL_OF[under], "host": True, "trials": per_trial,
        "training_ratio": training_ratio, "host_ratio": host_ratio,
        "training_ratio_min": min((t["training_ratio"] for t in per_trial if t["training_ratio"] is not None),
                                  default=None),
        "host_ratio_min": min((t["host_ratio"] for t in per_trial if t["host_ratio"] is not None), default=None),
        "targets": {"training_ratio": f">= {AGGREGATE_TARGET}", "host_ratio": f">= {HOST_TARGET}"},
        "met": {"training_ratio": None if training_ratio is None else training_ratio >= AGGREGATE_TARGET,
                "host_ratio": None if host_ratio is None else host_ratio >= HOST_TARGET},
    }


def turns_text(trial):
    turns, step = trial.get("turns"), trial.get("in_turn_step_ms")
    if not turns or not step or None in (turns[0], step[0]):
        return ""
    return (f"; turns {turns[0]}–{turns[1]}, step in a turn {step[0]:.2f}–{step[1]:.2f} ms "
            f"(fastest ÷ slowest {step[0] / step[1]:.3f})")


def render(ctx, state, complete):
    records = state["records"]
    rows, alone = summarize(records)
    summary = ctx.header(complete, state["notes"])
    summary.update(torch=common.torch_version(records), config=state.get("config"),
                   alone=alone, rows=rows, experiments=[common.lean(r) for r in records])
    lines = ctx.markdown_header("fair sharing of identical training jobs", summary)
    config = state.get("config") or {}
    lines += [f"Each job: `train_steps.py window {' '.join(config.get('train_args') or []) or '(defaults)'}` "
              f"(MLP, loss.item() every step), all started together at T0 and measured for "
              f"{config.get('window_s', '?')} s (the small jobs {config.get('small_window_s', '?')} s, "
              f"each `{' '.join(config.get('small_args') or [])}`); native = the same jobs concurrently without "
              f"gshare, in the same trial. Medians over trials.", ""]
    if alone:
        lines += [f"One job alone, native: {alone['steps_per_s']:.1f} steps/s, step "
                  f"p50 {alone['step_ms_p50']:.2f} ms, p99 {alone['step_ms_p99']:.2f} ms, "
                  f"peak {alone['peak_allocated_mib']:.0f} MiB allocated by PyTorch.", ""]
    lines += ["| jobs | native aggregate steps/s | gshare aggregate steps/s | gshare / native "
              "(≥ 1.0) | shares under gshare (expected) | Jain (≥ 0.99), min | slowest / fastest "
              "(small jobs ≥ 0.9), min | met? |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    host_rows = [row for row in rows if row.get("host")]
    rows = [row for row in rows if not row.get("host")]
    for row in rows:
        shares = "—" if row["shares"] is None else "/".join(
            f"{100 * s:.1f}" if s is not None else "—" for s in row["shares"])
        expected = "/".join(f"{100 * s:.0f}" for s in row["expected_shares"]) if row["shares"] else "—"
        met = list(row["met"].values())
        verdict = common.verdict(*met)
        lines.append(f"| {row['label']} | {common.fmt(row['native_aggregate'], '.1f')} | "
                     f"{common.fmt(row['gshare_aggregate'], '.1f')} | {common.fmt(row['ratio'])} | "
                     f"{shares} % ({expected}) | {common.fmt(row['jain'], '.4f')}, "
                     f"{common.fmt(row['jain_min'], '.4f')} | {common.fmt(row['slowest_over_fastest'])}, "
                     f"{common.fmt(row['slowest_over_fastest_min'])} | {verdict} |")
    lines += ["", "Per trial (gshare aggregate / native aggregate, Jain, lowest Jain of a single "
              "second, slowest / fastest under gshare and natively, step p99 under gshare; under "
              "gshare the least and most turns a job had, and the range of the jobs' mean step "
              "inside their turns, their own speed that equal turn time cannot even out):", ""]
    for row in rows:
        for t in row["trials"]:
            lines.append(f"- {row['label']}, trial {t['trial']}: {common.fmt(t['gshare_aggregate'], '.1f')}"
                         f" / {common.fmt(t['native_aggregate'], '.1f')} = {common.fmt(t['ratio'])}; "
                         f"Jain {common.fmt(t['jain'], '.4f')}, per second ≥ "
                         f"{common.fmt(t['per_second_jain_min'], '.3f')}; slowest / fastest "
                         f"{common.fmt(t['slowest_over_fastest'])} (native "
                         f"{common.fmt(t['native_slowest_over_fastest'])}); step p99 "
                         f"{common.fmt(t['step_ms_p99'], '.1f')} ms; native shares "
                         + ("—" if not t["native_shares"] or len(t["native_shares"]) > 8 else
                            "/".join(f"{100 * s:.1f}" for s in t["native_shares"] if s is not None))
                         + turns_text(t))
    lines.append("")
    for row in host_rows:
        met = list(row["met"].values())
        verdict = common.verdict(*met)
        lines += [f"{row['label']} (it works {config.get('host_ms', '?')} ms on the host after each "
                  f"step), under gshare over natively, median and least over trials: the two training "
                  f"jobs' aggregate {common.fmt(row['training_ratio'])}, {common.fmt(row['training_ratio_min'])} "
                  f"(≥ {AGGREGATE_TARGET}); the host-bound job's steps/s {common.fmt(row['host_ratio'])}, "
                  f"{common.fmt(row['host_ratio_min'])} (≥ {HOST_TARGET}); met: {verdict}.", ""]
        for t in row["trials"]:
            lines.append(f"- trial {t['trial']}: training {common.fmt(t['gshare_training'], '.1f')} / "
                         f"{common.fmt(t['native_training'], '.1f')} steps/s; host-bound "
                         f"{common.fmt(t['gshare_host'], '.1f')} / {common.fmt(t['native_host'], '.1f')}")
        lines.append("")
    lines += common.closing_lines(ctx, records)
    return summary, "\n".join(lines)


if __name__ == "__main__":
    sys.exit(common.run_part("fair", body, render))
