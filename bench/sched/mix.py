"""Benchmark `mix`: a Salus-like job mix on the real GPU under gshare's
`fifo` and `srtf`, natively (all jobs concurrently, no gshare) for
reference, next to gshare-sim's prediction for the same trace.

The trace (SCHED_MIX_TRACE, default tools/traces/salus_mix_gpu.json):
  {"quantum_ms", "slice_max_ms", "handover_ms" (optional),
   "jobs": [{"name", "arrival_s", "iteration_ms", "iterations",
             "memory_mib" (0), "estimate": "iters"|"seconds"|"none" ("iters"), ...}]}
Each job becomes synthetic_job.py: `iterations` iterations of N bf16
matmuls + one .item(), N calibrated alone beforehand per distinct
iteration_ms (cached in OUT/sched-mix-calibration.json, reused while the
GPU and matmul size match). A job's process is started SCHED_MIX_LEAD_S
(default 15) before its arrival, sets CUDA up without launching anything,
and sleeps until its arrival; at arrival it allocates memory_mib and runs.
JCT = completion - arrival. Under srtf each job gets GSHARE_EXPECTED_ITERS
(estimate "iters"), GSHARE_EXPECTED_SECONDS = iterations x iteration_ms
("seconds") or nothing ("none"); the trace's quantum_ms and slice_max_ms
become GSHARE_QUANTUM_MS and GSHARE_SLICE_MAX_MS for both policies.

If the three runs would not fit the time budget, the trace is compressed in
time: arrivals and iteration counts multiplied by one factor (iteration
times unchanged), and gshare-sim runs on that same compressed trace
(OUT/sched-mix-trace.json). SCHED_MIX_SCALE sets the factor by hand.
SCHED_MIX_MODES (default "fifo srtf native") runs a subset; results of the
other modes are taken from an earlier run into the same OUT with the same
effective trace (set SCHED_MIX_SCALE when splitting, so the traces match).
"""

import hashlib
import json
import math
import os
import pathlib
import sys
import time

import common  # first: it puts bench/ on sys.path for benchlib
from benchlib import stats

MODES = ["fifo", "srtf", "native"]
SLOWDOWN = 1.15  # expected real makespan / ideal, for the time estimate


def number_text(value):
    """A number as gshare's option parser takes it: no exponent."""
    value = float(value)
    if value.is_integer():
        return str(int(value))
    return f"{value:.6f}".rstrip("0").rstrip(".")


def load_trace(path):
    trace = json.loads(path.read_text())
    jobs = trace.get("jobs") if isinstance(trace, dict) else None
    if not jobs:
        raise SystemExit(f"{path}: no jobs")
    for index, job in enumerate(jobs):
        for field in ("arrival_s", "iteration_ms", "iterations"):
            if not isinstance(job.get(field), (int, float)) or job[field] < 0:
                raise SystemExit(f"{path}: job {index} has no valid {field}")
        if job["iteration_ms"] <= 0 or job["iterations"] < 1:
            raise SystemExit(f"{path}: job {index} does no work")
        if job.get("estimate", "iters") not in ("iters", "seconds", "none"):
            raise SystemExit(f"{path}: job {index}: estimate must be iters, seconds or none")
        job.setdefault("name", f"job{index}")
    return trace


def work_s(job):
    return job["iterations"] * job["iteration_ms"] / 1e3


def makespan(trace):
    return stats.fifo_makespan([(j["arrival_s"], work_s(j)) for j in trace["jobs"]])


def scaled(trace, factor):
    """The trace compressed in time by `factor` (arrivals and iteration
    counts; iteration times unchanged)."""
    if factor == 1.0:
        return json.loads(json.dumps(trace))
    copy = json.loads(json.dumps(trace))
    for job in copy["jobs"]:
        job["arrival_s"] = round(job["arrival_s"] * factor, 6)
        job["iterations"] = max(1, int(round(job["iterations"] * factor)))
    note = f"compressed in time by {factor} for the benchmark's time budget"
    copy["description"] = f"{copy.get('description', '')} [{note}]".strip()
    return copy


def trace_hash(trace):
    return hashlib.sha256(json.dumps(trace, sort_keys=True).encode()).hexdigest()[:16]


def choose_scale(trace, modes, lead, calibration_s, available_s):
    """1.0 if the runs fit `available_s`, else the largest factor (two
    decimals) that fits; None if even a tenth would not."""
    fixed = calibration_s + len(modes) * (lead + 15)
    variable = len(modes) * SLOWDOWN * makespan(trace)
    if fixed + variable <= available_s:
        return 1.0
    factor = math.floor(100 * (available_s - fixed) / variable) / 100 if variable > 0 else 1.0
    return factor if factor >= 0.1 else None


# -- calibration ---------------------------------------------------------


def cached_calibration(ctx, targets, size):
    """The cached entries that still hold (same GPU and driver, same matmul
    size) and the targets still to calibrate."""
    path = ctx.out / "sched-mix-calibration.json"
    cached = {}
    if path.exists():
        try:
            cached = json.loads(path.read_text())
        except ValueError:
            cached = {}
    valid = (isinstance(cached, dict) and cached.get("device") == ctx.device
             and cached.get("size") == size and bool(cached.get("fake")) == ctx.dry_run)
    known = cached.get("targets", {}) if valid else {}
    return path, known, [t for t in targets if str(float(t)) not in known]


def calibrate(ctx, targets, size):
    path, known, missing = cached_calibration(ctx, targets, size)
    if not missing:
        ctx.log(f"calibration: all {len(targets)} iteration times from {path.name}")
        return known, None
    ctx.log(f"calibration: {len(missing)} iteration time(s) alone, natively: "
            f"{', '.join(f'{t:g} ms' for t in missing)}")
    argv = [ctx.python, str(common.HERE / "synthetic_job.py"), "calibrate", "--size", str(size)]
    for target in missing:
        argv += ["--iteration-ms", str(float(target))]
    with ctx.experiment("calibration", "native") as exp:
        argv += ["--out", str(exp.out_file("calibrate"))] + (["--fake"] if ctx.dry_run else [])
        exp.spawn("calibrate", argv)
        exp.wait_exit(time.monotonic() + 120 + 15 * len(missing))
        record = exp.record()
    result = record["jobs"].get("calibrate")
    if not record["ok"] or not result:
        return None, record
    merged = dict(known)
    for key, value in result["targets"].items():
        merged[str(float(key))] = value
    cache = {"device": ctx.device, "size": size, "fake": ctx.dry_run,
             "gpu": result.get("gpu"), "torch": result.get("torch"),
             "matmul_ms": result.get("matmul_ms"), "targets": merged}
    path.write_text(json.dumps(cache, indent=2) + "\n")
    for target in missing:
        entry = merged.get(str(float(target)))
        ctx.log(f"calibration: {target:g} ms -> {entry['matmuls']} matmuls "
                f"({entry['measured_ms']:.2f} ms measured)")
    return merged, record


# -- gshare-sim ------------------------------------------------------------


def find_average_jct(document, policy):
    """gshare-sim's average JCT of `policy`, wherever it is: policies.P.
    summary.average_jct_s in the current format; searched for otherwise."""
    try:
        return float(document["policies"][policy]["summary"]["average_jct_s"])
    except (KeyError, TypeError, ValueError):
        pass

    def walk(node, inside):
        if isinstance(node, dict):
            for key, value in node.items():
                now = inside or key == policy
                if now and isinstance(value, (int, float)) and "jct" in key.lower() and (
                        "av" in key.lower() or "mean" in key.lower()):
                    return float(value)
                found = walk(value, now)
                if found is not None:
                    return found
        elif isinstance(node, list):
            for value in node:
                found = walk(value, inside)
                if found is not None:
                    return found
        return None

    return walk(document, False)


def run_sim(ctx, trace_path):
    sim = ctx.build / "tools" / "gshare-sim"
    result = {"binary": str(sim), "ok": False}
    if not sim.exists():
        result["error"] = f"{sim} is missing (build it: cmake --build {ctx.build})"
        return result
    code, stdout, stderr = common._run_quietly([str(sim), "--json", str(trace_path)], timeout=120)
    (ctx.raw / "sim.json").write_text(stdout + "\n")
    if code != 0:
        result["error"] = f"exit {code}: {stderr[-500:]}"
        return result
    try:
        document = json.loads(stdout)
    except ValueError as error:
        result["error"] = f"not JSON ({error}): {stdout[:300]}"
        return result
    result["ok"] = True
    ratios = document.get("ratios") if isinstance(document, dict) else None
    result["ratios"] = ratios
    result["srtf_to_fifo"] = ratios.get("srtf_to_fifo") if isinstance(ratios, dict) else None
    result["average_jct_s"] = {p: find_average_jct(document, p) for p in ("fifo", "srtf")}
    if result["srtf_to_fifo"] is None:
        fifo, srtf = result["average_jct_s"]["fifo"], result["average_jct_s"]["srtf"]
        result["srtf_to_fifo"] = stats.ratio(srtf, fifo)
        result["note"] = ("no ratios.srtf_to_fifo in gshare-sim's output; computed from its "
                          "average JCTs" if result["srtf_to_fifo"] is not None else
                          "no ratios.srtf_to_fifo and no average JCTs found in gshare-sim's "
                          "output: see sched-raw/mix/sim.json")
        ctx.log(f"gshare-sim: {result['note']}; top-level keys: "
                f"{list(document) if isinstance(document, dict) else type(document).__name__}")
    return result


# -- one mode ----------------------------------------------------------------


def job_vars(mode, job):
    if mode != "srtf":
        return None
    estimate = job.get("estimate", "iters")
    if estimate == "iters":
        return {"GSHARE_EXPECTED_ITERS": str(int(job["iterations"]))}
    if estimate == "seconds":
        return {"GSHARE_EXPECTED_SECONDS": number_text(work_s(job))}
    return None


def run_mode(ctx, mode, trace, calibration, lead, size):
    name = f"mix-{mode}"
    gshare_vars = None
    if mode != "native":
        gshare_vars = {"GSHARE_POLICY": mode}
        if trace.get("quantum_ms") is not None:
            gshare_vars["GSHARE_QUANTUM_MS"] = number_text(trace["quantum_ms"])
        if trace.get("slice_max_ms") is not None:
            gshare_vars["GSHARE_SLICE_MAX_MS"] = number_text(trace["slice_max_ms"])
    jobs = [(f"j{i:02d}", job) for i, job in enumerate(trace["jobs"])]
    expected = makespan(trace)
    ctx.log(f"{name}: {len(jobs)} jobs, ~{expected:.0f} s of work in sequence, "
            f"first processes start {lead:g} s ahead")
    with ctx.experiment(name, "native" if mode == "native" else "gshare", gshare_vars) as exp:
        t0 = time.monotonic() + lead
        # Real makespans come within ~10% of the ideal one; a mode still
        # running well past it has a stuck job (reported, with a snapshot).
        deadline = ctx.bounded(t0 + 1.5 * expected + 30)
        pending = sorted(jobs, key=lambda item: item[1]["arrival_s"])
        finished = set()
        next_report = time.monotonic() + 15
        while True:
            now = time.monotonic()
            while pending and t0 + pending[0][1]["arrival_s"] - lead <= now:
                key, job = pending.pop(0)
                entry = calibration[str(float(job["iteration_ms"]))]
                argv = [ctx.python, str(common.HERE / "synthetic_job.py"), "run",
                        "--name", key, "--out", str(exp.out_file(key)),
                        "--t0", f"{t0:.6f}", "--arrival", repr(float(job["arrival_s"])),
                        "--iterations", str(int(job["iterations"])),
                        "--matmuls", str(int(entry["matmuls"])), "--size", str(size),
                        "--memory-mib", str(job.get("memory_mib", 0) or 0),
                        "--deadline", f"{deadline:.6f}"]
                if ctx.dry_run:
                    argv += ["--fake", "--iteration-ms", str(float(job["iteration_ms"]))]
                exp.spawn(key, argv, job_vars(mode, job))
            for key, process in exp.procs.items():
                if key not in finished and process.poll() is not None:
                    finished.add(key)
                    code = process.returncode
                    if code != 0:
                        exp.fail(f"{key} ({dict(jobs)[key]['name']}) exited ({code}): "
                                 f"{common.tail(exp.log_file(key))}")
                    else:
                        ctx.log(f"{name}: {dict(jobs)[key]['name']} done at "
                                f"{time.monotonic() - t0:.1f} s")
            if not pending and len(finished) == len(jobs):
                break
            if now > deadline:
                running = [k for k in exp.procs if k not in finished]
                exp.snapshot("timeout")
                exp.fail(f"timed out at {now - t0:.0f} s: {', '.join(running)} still running")
                exp.kill_all()
                break
            if now >= next_report:
                ctx.log(f"{name}: {now - t0:+.0f} s, {len(finished)}/{len(jobs)} done, "
                        f"{len(exp.procs) - len(finished)} running")
                exp.snapshot(f"at{int(exp.wall()):03d}s")
                next_report = now + 15
            time.sleep(0.05)
        exp.check_region()
        record = exp.record()
    record.update(mode=mode)
    results = []
    for key, job in jobs:
        result = record["jobs"].get(key)
        results.append({"key": key, "name": job["name"], "arrival_s": job["arrival_s"],
                        "work_s": work_s(job),
                        "jct_s": result.get("jct_s") if result else None,
                        "start_s": result.get("start_s") if result else None,
                        "end_s": result.get("end_s") if result else None,
                        "late_s": result.get("late_s") if result else None,
                        "memory_ok": result.get("memory_ok") if result else None})
    record["results"] = results
    record["metrics"] = mode_metrics(results)
    return record


def mode_metrics(results):
    jcts = [r["jct_s"] for r in results if r["jct_s"] is not None]
    complete = len(jcts) == len(results)
    ends = [r["end_s"] for r in results if r["end_s"] is not None]
    return {"jobs": len(results), "completed": len(jcts),
            "average_jct_s": stats.mean(jcts) if complete else None,
            "median_jct_s": stats.median(jcts) if complete else None,
            "makespan_s": max(ends) if complete and ends else None,
            "late_starts": sum(1 for r in results if (r["late_s"] or 0) > 0.5),
            "memory_refused": sum(1 for r in results if r["memory_ok"] is False)}


# -- the part ----------------------------------------------------------------


def body(ctx, state):
    path = pathlib.Path(os.environ.get("SCHED_MIX_TRACE")
                        or common.REPO / "tools" / "traces" / "salus_mix_gpu.json")
    if not path.exists():
        raise SystemExit(f"the trace {path} is missing")
    modes = common.env_words("SCHED_MIX_MODES") or list(MODES)
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise SystemExit(f"SCHED_MIX_MODES: unknown {bad}; use {MODES}")
    lead = common.env_float("SCHED_MIX_LEAD_S", 15.0)
    size = common.env_int("SCHED_MIX_MATMUL", 4096)
    original = load_trace(path)
    targets = sorted({float(j["iteration_ms"]) for j in original["jobs"]})
    missing = cached_calibration(ctx, targets, size)[2]
    calibration_s = (30 + 4 * len(missing)) if missing else 0
    if os.environ.get("SCHED_MIX_SCALE"):
        factor = common.env_float("SCHED_MIX_SCALE", 1.0)
        if not 0 < factor <= 1:
            raise SystemExit("SCHED_MIX_SCALE must be in (0, 1]")
    else:
        factor = choose_scale(original, modes, lead, calibration_s, ctx.remaining())
        if factor is None:
            raise SystemExit(f"the trace needs ~{makespan(original):.0f} s per mode: too long for "
                             f"the budget even compressed; run modes separately "
                             f"(SCHED_MIX_MODES, SCHED_MIX_SCALE) or raise SCHED_BUDGET_S")
    trace = scaled(original, factor)
    digest = trace_hash(trace)
    trace_path = ctx.out / "sched-mix-trace.json"
    trace_path.write_text(json.dumps(trace, indent=2) + "\n")
    state["config"] = {"trace": str(path), "effective_trace": str(trace_path), "scale": factor,
                       "trace_hash": digest, "modes": modes, "lead_s": lead, "matmul": size,
                       "jobs": len(trace["jobs"]), "fifo_makespan_s": makespan(trace)}
    if factor != 1.0:
        state["notes"].append(f"trace compressed in time by {factor} (arrivals and iteration "
                              f"counts) to fit the budget; gshare-sim ran on the same")
    ctx.log(f"trace {path.name}: {len(trace['jobs'])} jobs, scale {factor}, "
            f"~{makespan(trace):.0f} s per mode")

    state["sim"] = run_sim(ctx, trace_path)
    ctx.log(f"gshare-sim: srtf/fifo = {common.fmt(state['sim'].get('srtf_to_fifo'))}"
            + ("" if state["sim"]["ok"] else f" ({state['sim'].get('error')})"))
    ctx.checkpoint()

    calibration, failed = calibrate(ctx, targets, size)
    if calibration is None:
        failed.update(name="calibration", mode="calibration")
        state["records"].append(failed)
        raise SystemExit("calibration failed: " + "; ".join(failed["errors"]))
    state["calibration"] = {k: calibration[str(float(k))] for k in targets}
    ctx.checkpoint()

    for mode in modes:
        estimate = lead + SLOWDOWN * makespan(trace) + 15
        if not ctx.fits(estimate):
            ctx.log(f"mix-{mode}: skipped, needs ~{estimate:.0f} s, {ctx.remaining():.0f} s left")
            state["records"].append(common.skipped(f"mix-{mode}", mode=mode))
            ctx.checkpoint()
            continue
        record = run_mode(ctx, mode, trace, calibration, lead, size)
        record["trace_hash"] = digest
        record["date"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        state["records"].append(record)
        (ctx.raw / f"mode-{mode}.json").write_text(json.dumps(common.lean(record), indent=2) + "\n")
        ctx.log(f"mix-{mode}: average JCT {common.fmt(record['metrics']['average_jct_s'], '.2f')} s"
                f", makespan {common.fmt(record['metrics']['makespan_s'], '.1f')} s")
        ctx.checkpoint()


def earlier_modes(ctx, state):
    """Mode results of an earlier run with the same effective trace, for the
    modes this run did not run (or skipped)."""
    digest = (state.get("config") or {}).get("trace_hash")
    ran = {r.get("mode") for r in state["records"] if r.get("ok") and r.get("metrics")}
    earlier = {}
    for mode in MODES:
        path = ctx.raw / f"mode-{mode}.json"
        if mode in ran or not digest or not path.exists():
            continue
        try:
            record = json.loads(path.read_text())
        except ValueError:
            continue
        if record.get("trace_hash") == digest and record.get("ok") and record.get("metrics"):
            earlier[mode] = record
    return earlier


def render(ctx, state, complete):
    records = state["records"]
    config = state.get("config") or {}
    # Only runs that succeeded: a failed one (a job failed, or gshare was
    # not active) keeps its partial results in the JSON, not in the table.
    by_mode = {r["mode"]: r for r in records
               if r.get("mode") in MODES and r.get("ok") and r.get("metrics")}
    earlier = earlier_modes(ctx, state)
    for mode, record in earlier.items():
        by_mode.setdefault(mode, record)
    sim = state.get("sim") or {}
    jct = {m: by_mode[m]["metrics"]["average_jct_s"] if m in by_mode else None for m in MODES}
    measured_ratio = stats.ratio(jct["srtf"], jct["fifo"])
    summary = ctx.header(complete, state["notes"])
    summary.update(torch=common.torch_version(records), config=config,
                   calibration=state.get("calibration"), sim=sim,
                   average_jct_s=jct, srtf_to_fifo=measured_ratio,
                   native_to_fifo=stats.ratio(jct["native"], jct["fifo"]),
                   predicted_srtf_to_fifo=sim.get("srtf_to_fifo"),
                   earlier_runs={m: r.get("date") for m, r in earlier.items()},
                   modes={m: common.lean(r) for m, r in by_mode.items()},
                   experiments=[common.lean(r) for r in records])
    lines = ctx.markdown_header("Salus-like job mix, fifo vs srtf", summary)
    lines += [f"Trace: {config.get('trace', '?')} ({config.get('jobs', '?')} jobs, scale "
              f"{config.get('scale', '?')}; the run's copy: sched-mix-trace.json). Each job: "
              f"synthetic_job.py, iterations of bf16 {config.get('matmul', '?')}² matmuls "
              f"calibrated alone to the trace's iteration_ms, one .item() per iteration, "
              f"started at its arrival; JCT = completion − arrival.", ""]
    lines += ["| | average JCT s | median JCT s | makespan s | jobs done | real / fifo | "
              "gshare-sim average JCT s |", "| --- | --- | --- | --- | --- | --- | --- |"]
    sim_jct = sim.get("average_jct_s") or {}
    for mode in MODES:
        m = by_mode[mode]["metrics"] if mode in by_mode else None
        label = {"fifo": "gshare fifo", "srtf": "gshare srtf", "native": "native, concurrent"}[mode]
        if mode in earlier:
            label += f" (earlier run, {earlier[mode].get('date')})"
        lines.append(f"| {label} | {common.fmt(m and m['average_jct_s'], '.2f')} | "
                     f"{common.fmt(m and m['median_jct_s'], '.2f')} | "
                     f"{common.fmt(m and m['makespan_s'], '.1f')} | "
                     f"{(str(m['completed']) + '/' + str(m['jobs'])) if m else '—'} | "
                     f"{common.fmt(stats.ratio(jct[mode], jct['fifo']))} | "
                     f"{common.fmt(sim_jct.get(mode), '.2f')} |")
    lines += ["", f"- srtf / fifo average JCT, measured: **{common.fmt(measured_ratio)}**; "
              f"gshare-sim predicts {common.fmt(sim.get('srtf_to_fifo'))}"
              + ("" if sim.get("ok") else f" (gshare-sim: {sim.get('error', 'not run')})")]
    if sim.get("note"):
        lines.append(f"- {sim['note']}")
    lines.append("")
    if by_mode:
        lines += ["Per job, JCT in s (arrival, GPU work alone):", "",
                  "| job | arrival s | work s | " + " | ".join(m for m in MODES if m in by_mode)
                  + " |", "| --- | --- | --- | " + " | ".join("---" for m in MODES if m in by_mode)
                  + " |"]
        first = next(iter(by_mode.values()))["results"]
        for index, job in enumerate(first):
            cells = []
            for mode in MODES:
                if mode in by_mode:
                    result = by_mode[mode]["results"][index]
                    cell = common.fmt(result["jct_s"], ".2f")
                    if (result.get("late_s") or 0) > 0.5:
                        cell += f" (started {result['late_s']:.1f} s late)"
                    if result.get("memory_ok") is False:
                        cell += " (memory refused)"
                    cells.append(cell)
            lines.append(f"| {job['name']} | {job['arrival_s']:g} | {job['work_s']:.1f} | "
                         + " | ".join(cells) + " |")
        lines.append("")
    calibration = state.get("calibration") or {}
    if calibration:
        lines.append("Calibration (alone, native): " + ", ".join(
            f"{float(t):g} ms = {v['matmuls']} matmuls ({v['measured_ms']:.2f} ms)"
            for t, v in sorted(calibration.items(), key=lambda kv: float(kv[0]))))
        lines.append("")
    lines += common.closing_lines(ctx, records)
    return summary, "\n".join(lines)


if __name__ == "__main__":
    sys.exit(common.run_part("mix", body, render, clean_raw=False))
