"""gshare's memory-sharing demonstrations on a real GPU.

usage: python3 bench/memory/memory_bench.py --build BUILD --out OUT PART...
  PART  oversized   three training jobs whose peaks together exceed the GPU
                    while sum(P) + max(E) fits: each alone (reference losses
                    and times), all three natively at once (expected: out of
                    memory), all three under gshare (all finish, same
                    losses); memory over time per job from gshare-top; the
                    switching cost and the mix's throughput against running
                    the jobs one after another
        twenty      twenty small training jobs at once under gshare: all
                    progress, and gshare-top's per-process memory against
                    NVML's
        mixes       oversized PyTorch mixes of 2, 3, 4 and 6 jobs (peaks 1.3 to
                    2.4x the GPU, sum(P) + max(E) about 0.7x) under every
                    policy, --runs times each: all finish with the losses
                    of the jobs alone, and the mix's throughput against
                    running the jobs one after another (--short-steps: the
                    same peaks in steps of tens of milliseconds)
        iterations  one job alone per way of syncing (every step, every
                    layer, never): gshare-top's iteration count against
                    the steps taken
        allocators  for each allocator (alloc_probe.py: PyTorch's default,
                    expandable_segments, cudaMallocAsync, no caching (plain
                    cudaMalloc), CuPy, JAX's BFC, JAX's platform allocator):
                    one job alone under gshare (P and E as gshare-top
                    learns them, against the job's own), two jobs whose
                    peaks exceed the GPU natively and under gshare
Writes OUT/memory-PART.json (and OUT/raw/ with every job's output).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, for benchlib
from benchlib import stats  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
JOB = os.path.join(HERE, "train_job.py")
PROBE = os.path.join(HERE, "alloc_probe.py")
GiB = 2**30


def top_json(build, gshare_dir):
    try:
        out = subprocess.run([os.path.join(build, "tools", "gshare-top"), "--json", "--dir", gshare_dir],
                             capture_output=True, text=True, timeout=10).stdout
        return json.loads(out)
    except Exception:
        return None


def nvml_per_process():
    """pid -> used MiB, from nvidia-smi (NVML)."""
    out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
    used = {}
    for line in out.strip().splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            used[int(parts[0])] = int(parts[1])
    return used


def run_jobs(name, specs, args, gshare, extra_env=None, sample=None, timeout=400, script=JOB):
    """Starts every job of `specs` (lists of train_job arguments) at once
    (after all built their models), waits for all. Returns per job:
    returncode, losses, seconds from the common start, peaks; and the
    samples `sample(t)` returned every 0.25 s."""
    raw = os.path.join(args.out, "raw", name)
    # A run left here before (an output folder used again) would leave its
    # start file, which releases the jobs before they are ready, and its
    # step logs, which are appended to.
    shutil.rmtree(raw, ignore_errors=True)
    os.makedirs(raw)
    gshare_dir = os.path.join(raw, "shm")
    os.makedirs(gshare_dir, exist_ok=True)
    start_file = os.path.join(raw, "start")
    env = dict(os.environ)
    if gshare:
        env["LD_PRELOAD"] = os.path.join(args.build, "libgshare.so")
        env["GSHARE_DIR"] = gshare_dir
        env["GSHARE_LOG"] = os.environ.get("BENCH_GSHARE_LOG", "info")
    env.update(extra_env or {})
    procs = []
    for i, spec in enumerate(specs):
        ready = os.path.join(raw, f"ready{i}")
        cmd = [sys.executable, script, *spec, "--ready", ready, "--start", start_file]
        if script == JOB:
            cmd += ["--log", os.path.join(raw, f"job{i}.log")]
        out = open(os.path.join(raw, f"job{i}.out"), "w")
        err = open(os.path.join(raw, f"job{i}.err"), "w")
        procs.append((subprocess.Popen(cmd, env=env, stdout=out, stderr=err), ready, out, err))
    deadline = time.monotonic() + 120
    while not all(os.path.exists(r) or p.poll() is not None for p, r, _, _ in procs):
        if time.monotonic() > deadline:
            break
        time.sleep(0.05)
    t0 = time.monotonic()
    open(start_file, "w").close()
    samples = []
    ends = [None] * len(procs)
    next_sample = 0.0
    # Ends are seen within 10 ms (a mix of 10 s would otherwise read up to
    # 2.5% long); gshare-top is sampled every 0.25 s.
    while any(p.poll() is None for p, _, _, _ in procs) and time.monotonic() - t0 < timeout:
        for i, (p, _, _, _) in enumerate(procs):
            if ends[i] is None and p.poll() is not None:
                ends[i] = time.monotonic() - t0
        if sample and time.monotonic() - t0 >= next_sample:
            next_sample = time.monotonic() - t0 + float(os.environ.get("BENCH_SAMPLE_S", "0.25"))
            s = sample(time.monotonic() - t0, gshare_dir)
            if s is not None:
                samples.append(s)
        time.sleep(0.01)
    if os.environ.get("BENCH_SAVE_SAMPLES"):  # every view of gshare-top, for a look afterwards
        with open(os.path.join(raw, "samples.json"), "w") as f:
            json.dump(samples, f)
    results = []
    for i, (p, _, out, err) in enumerate(procs):
        if p.poll() is None:
            p.kill()
        p.wait()
        out.close()
        err.close()
        if ends[i] is None:
            ends[i] = time.monotonic() - t0
        text = open(os.path.join(raw, f"job{i}.out")).read()
        if p.returncode != 0:  # what it and gshare said, in the harness's log
            tail = open(os.path.join(raw, f"job{i}.err")).read().splitlines()[-15:]
            print(f"{name} job {i} exited {p.returncode}: {text.splitlines()[-1:]}\n  " + "\n  ".join(tail),
                  flush=True)
        losses = [line.split()[3] for line in text.splitlines() if line.startswith("step ")]
        peak = [line.split() for line in text.splitlines() if line.startswith("done peak_reserved ")]
        # Monotonic stamps of the job's steps (its log) and of its last
        # line, from the common start: a process's exit (context teardown)
        # is not its work, and varies by a quarter second.
        log = os.path.join(raw, f"job{i}.log")
        steps_t = []
        if os.path.exists(log):
            steps_t = [json.loads(line)["t"] - t0 for line in open(log) if line.strip()]
        done_t = [float(line.split()[6]) - t0 for line in text.splitlines()
                  if line.startswith("done ") and len(line.split()) >= 7]
        results.append({
            "returncode": p.returncode,
            "last_step_seconds": round(steps_t[-1], 3) if steps_t else None,
            "first_step_seconds": round(steps_t[0], 3) if steps_t else None,
            "done_seconds": round(done_t[0], 3) if done_t else None,
            "oom": "OOM" in text or "out of memory" in open(os.path.join(raw, f"job{i}.err")).read().lower(),
            "losses": losses,
            "seconds": round(ends[i], 3),
            "peak_reserved": int(peak[0][2]) if peak else None,
            "gpu_total": next((int(l.split()[1]) for l in text.splitlines() if l.startswith("gpu_total")), None),
        })
    return results, samples, t0


def calibrate(args):
    """Bytes of ephemeral memory per batch row, and the GPU's size."""
    batch = 65536
    spec = ["--seed", "99", "--steps", "2", "--batch", str(batch)]
    [r], _, _ = run_jobs("calibrate", [spec], args, gshare=False)
    if r["returncode"] != 0 or not r["peak_reserved"]:
        raise SystemExit(f"calibration failed: {r}")
    width, depth = 1024, 4
    params = depth * (width * width + width) + width * 16 + 16
    persistent = params * 4 * 4  # weights, grads, two Adam moments
    per_row = max(1, (r["peak_reserved"] - persistent)) / batch
    return per_row, r["gpu_total"]


def top_sample(build):
    def sample(t, gshare_dir):
        top = top_json(build, gshare_dir)
        if not top or not top.get("gpus"):
            return None
        gpu = top["gpus"][0]
        return {"t": round(t, 3), "safety_bytes": gpu.get("safety_bytes"),
                "reserved_bytes": gpu.get("reserved_bytes"), "handovers": gpu.get("handovers"),
                "switches": gpu.get("switches"), "switch_ns_total": gpu.get("switch_ns_total"),
                "switch_ns_max": gpu.get("switch_ns_max"),
                "lanes": gpu.get("lanes"),
                "processes": [{k: p.get(k) for k in ("pid", "command", "used_bytes", "reserved_bytes",
                                                     "persistent_bytes", "ephemeral_bytes",
                                                     "memory_provisional", "lane", "admission",
                                                     "released_bytes", "state", "iterations",
                                                     "iteration_ms", "iteration_source",
                                                     "classified_iterations", "denied", "holds_token",
                                                     "job_state", "admission_bytes", "blocked_by_pid",
                                                     "switch_cost_ns", "switches", "launches")}
                              for p in gpu["processes"]]}
    return sample


def oversized(args):
    per_row, total = calibrate(args)
    # Each job: P about 8% of the GPU (a frozen bank, the model, the
    # context), E about 36%: three peaks make ~1.3x the GPU, while
    # sum(P) + max(E) is ~0.65x.
    bank_gib = 0.06 * total / GiB
    batch = int(0.36 * total / per_row) // 1024 * 1024
    specs = [["--seed", str(s), "--steps", str(args.steps), "--batch", str(batch),
              "--bank-gib", f"{bank_gib:.2f}"] for s in (1, 2, 3)]
    alone = []
    for i, spec in enumerate(specs):
        [r], _, _ = run_jobs(f"oversized-alone{i}", [spec], args, gshare=False)
        alone.append(r)
    native, _, _ = run_jobs("oversized-native", specs, args, gshare=False, timeout=200)
    shared, samples, _ = run_jobs("oversized-gshare", specs, args, gshare=True,
                                  sample=top_sample(args.build), timeout=150)
    handovers = max((s["handovers"] or 0) for s in samples) if samples else None
    last = samples[-1] if samples else {}
    switches = last.get("switches") or 0
    sequential = sum(r["seconds"] for r in alone)
    mix = max(r["seconds"] for r in shared)
    record = {
        "gpu_total_bytes": total, "batch": batch, "bank_gib": round(bank_gib, 2),
        "ephemeral_bytes_per_row": round(per_row, 1), "steps": args.steps,
        "alone": alone, "native_together": native, "gshare_together": shared,
        "native_any_oom": any(r["oom"] for r in native),
        "gshare_all_finished": all(r["returncode"] == 0 and len(r["losses"]) == args.steps for r in shared),
        "losses_identical": all(shared[i]["losses"] == alone[i]["losses"] for i in range(3)),
        "sequential_seconds": round(sequential, 3), "mix_seconds": round(mix, 3),
        "mix_throughput_vs_sequential": round(sequential / mix, 4) if mix else None,
        "handovers": handovers,
        "seconds_per_handover_overhead": round((mix - sequential) / handovers, 4) if handovers else None,
        # gshare's own measure: grant to the new holder's first launch,
        # the cache given back by the job before included.
        "switches": switches,
        "switch_ms_mean": round(last["switch_ns_total"] / switches / 1e6, 3) if switches else None,
        "switch_ms_max": round(last["switch_ns_max"] / 1e6, 3) if switches else None,
        "samples": samples,
    }
    return record


def twenty(args):
    spec_of = lambda s: ["--seed", str(s), "--seconds", str(args.seconds), "--width", "512",
                         "--depth", "4", "--batch", "8192", "--bank-gib", "0.25"]
    specs = [spec_of(s) for s in range(20)]
    comparisons = []

    def sample(t, gshare_dir):
        top = top_json(args.build, gshare_dir)
        nvml = nvml_per_process()
        if not top or not top.get("gpus"):
            return None
        rows = []
        for p in top["gpus"][0]["processes"]:
            if p["pid"] in nvml:
                rows.append({"pid": p["pid"], "gshare_used": p["used_bytes"],
                             "nvml_used": nvml[p["pid"]] * 2**20, "state": p.get("state"),
                             "iterations": p.get("iterations"), "P": p.get("persistent_bytes"),
                             "E": p.get("ephemeral_bytes")})
        comparisons.append({"t": round(t, 2), "rows": rows})
        return None

    results, _, _ = run_jobs("twenty", specs, args, gshare=True, sample=sample, timeout=args.seconds + 120)
    errors = [abs(r["gshare_used"] - r["nvml_used"]) / r["nvml_used"]
              for c in comparisons[len(comparisons) // 3:] for r in c["rows"] if r["nvml_used"]]
    return {
        "jobs": 20, "seconds": args.seconds,
        "steps": [len(r["losses"]) for r in results],
        "all_progressed": all(len(r["losses"]) > 0 for r in results),
        "returncodes": [r["returncode"] for r in results],
        "accounting_samples": len(errors),
        "accounting_max_relative_error": round(max(errors), 5) if errors else None,
        "accounting_median_relative_error": round(stats.median(errors), 5) if errors else None,
        "comparisons": comparisons,
    }


POLICIES = ["fifo", "fair", "srtf", "priority", "pack"]
# Jobs a mix, and each job's peak as a share of the GPU: the peaks sum to
# 1.3, 1.8, 2.0 and 2.4x the GPU; with P about 5% each, sum(P) + max(E)
# stays near 0.7x.
MIXES = [(2, 0.65), (3, 0.60), (4, 0.50), (6, 0.40)]


def mixes(args):
    per_row, total = calibrate(args)
    bank_gib = 0.03 * total / GiB
    record = {"gpu_total_bytes": total, "ephemeral_bytes_per_row": round(per_row, 1),
              "steps": args.steps, "runs": args.runs, "mixes": []}
    policies = args.policies or POLICIES
    for count, peak in MIXES:
        if args.jobs and count not in args.jobs:
            continue
        batch = int((peak - 0.05) * total / per_row) // 1024 * 1024
        scratch = []
        if args.short_steps:
            # The same peak from a small batch and a scratch buffer: a step
            # of tens of milliseconds instead of about a second.
            batch = min(batch, 16384)
            scratch_gib = max(0.0, (peak - 0.05) * total - batch * per_row) / GiB
            scratch = ["--scratch-gib", f"{scratch_gib:.2f}"]
        specs = [["--seed", str(s), "--steps", str(args.steps), "--batch", str(batch),
                  "--bank-gib", f"{bank_gib:.2f}", *scratch] for s in range(1, count + 1)]
        def one_after_another(run):
            alone = []
            for i, spec in enumerate(specs):
                [r], _, _ = run_jobs(f"mix{count}-alone{i}-{run}", [spec], args, gshare=False)
                alone.append(r)
            return (alone, sum(r["seconds"] for r in alone),
                    sum(r["last_step_seconds"] or r["seconds"] for r in alone))
        alone, sequential, sequential_work = one_after_another(0)
        mix = {"jobs": count, "peak_share": peak, "batch": batch, "scratch_args": scratch,
               "sequential_seconds": round(sequential, 3),
               "sequential_work_seconds": round(sequential_work, 3),
               "sequential_seconds_by_round": [round(sequential, 3)],
               "alone_exit_seconds": [round(r["seconds"] - (r["last_step_seconds"] or r["seconds"]), 3)
                                      for r in alone],
               "alone_step_ms": [round(1000 * r["seconds"] / max(1, len(r["losses"])), 1) for r in alone],
               "runs": []}
        record["mixes"].append(mix)
        # Runs alternate between the policies, so that a drift of the GPU
        # (clocks, heat) spreads over all of them.
        for run in range(args.runs):
            if run > 0 and not args.one_baseline:
                # One after another again before each round: a ratio is
                # taken against the baseline next to it, so that the
                # baseline's own run-to-run noise spreads over the rounds
                # instead of moving every ratio of the invocation.
                _, sequential, sequential_work = one_after_another(run)
                mix["sequential_seconds_by_round"].append(round(sequential, 3))
            for policy in policies:
                shared, samples, _ = run_jobs(f"mix{count}-{policy}-{run}", specs, args, gshare=True,
                                              extra_env={"GSHARE_POLICY": policy},
                                              sample=top_sample(args.build), timeout=args.mix_timeout)
                seconds = max(r["seconds"] for r in shared)
                work = max(r["last_step_seconds"] or r["seconds"] for r in shared)
                finished = all(r["returncode"] == 0 and len(r["losses"]) == args.steps for r in shared)
                last = samples[-1] if samples else {}
                iterations = {}
                for sample in samples:
                    for p in sample.get("processes", []):
                        iterations[p["pid"]] = p.get("iterations")
                mix["runs"].append({
                    "policy": policy, "run": run, "finished": finished,
                    "losses_identical": all(shared[i]["losses"] == alone[i]["losses"] for i in range(count)),
                    "seconds": round(seconds, 3),
                    "sequential_seconds": round(sequential, 3),
                    "throughput_vs_sequential": round(sequential / seconds, 4) if seconds else None,
                    # The same by the jobs' last steps, process exits left out.
                    "work_seconds": round(work, 3),
                    "work_throughput_vs_sequential": round(sequential_work / work, 4) if work else None,
                    "job_seconds": [[r["first_step_seconds"], r["last_step_seconds"], r["done_seconds"],
                                     r["seconds"]] for r in shared],
                    "switches": last.get("switches"),
                    "switch_ms_mean": round(last["switch_ns_total"] / last["switches"] / 1e6, 3)
                    if last.get("switches") else None,
                    "switch_ms_max": round(last["switch_ns_max"] / 1e6, 3) if last.get("switches") else None,
                    "iterations_seen_last": sorted(v for v in iterations.values() if v is not None),
                    "returncodes": [r["returncode"] for r in shared],
                    "timed_out_state": samples[-1] if not finished and samples else None,
                })
                print(f"mix {count} {policy} run {run}: finished {finished} "
                      f"{mix['runs'][-1]['throughput_vs_sequential']}x "
                      f"work {mix['runs'][-1]['work_throughput_vs_sequential']}x "
                      f"switches {mix['runs'][-1]['switches']} mean {mix['runs'][-1]['switch_ms_mean']} ms",
                      flush=True)
                with open(os.path.join(args.out, "memory-mixes.json"), "w") as f:
                    json.dump(record, f, indent=1)  # so far: a run cut short keeps what it did
    return record


def iterations(args):
    """One job alone under gshare per way of syncing: the iterations
    gshare-top counts against the steps the job took."""
    rows = []
    for sync in ("step", "piece", "never"):
        spec = ["--seed", "7", "--steps", "100", "--batch", "65536", "--width", "1024",
                "--sync", sync, "--linger", "1.5"]

        def sample(t, gshare_dir):
            top = top_json(args.build, gshare_dir)
            for p in (top or {}).get("gpus", [{}])[0].get("processes", []):
                sample.last = {k: p.get(k) for k in ("iterations", "iteration_source", "iteration_launches",
                                              "iteration_ms", "syncs", "launches", "classified_iterations")}
            return None

        sample.last = {}
        [r], _, _ = run_jobs(f"iterations-{sync}", [spec], args, gshare=True, sample=sample, timeout=120,
                             extra_env={"GSHARE_LOG": "debug"})
        rows.append({"sync": sync, "steps": len(r["losses"]), "returncode": r["returncode"],
                     "seconds": r["seconds"], "top_at_rest": sample.last})
        print("iterations", json.dumps(rows[-1]), flush=True)
    return {"rows": rows}


FRAMEWORKS = ["torch", "torch-expandable", "torch-async", "torch-nocache", "cupy", "jax", "jax-platform"]


def gpu_total_bytes():
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout
    return int(out.strip().splitlines()[0]) * 2**20


def allocators(args):
    total = gpu_total_bytes()
    # Two jobs: P 8% and E 55% of the GPU each. Their peaks make 1.26x the
    # GPU; sum(P) + max(E) is 0.71x.
    p_gib, e_gib = round(0.08 * total / GiB, 2), round(0.55 * total / GiB, 2)
    env = {"GSHARE_ADMIT_TIMEOUT_S": "90"}
    rows = []
    for fw in (args.frameworks or FRAMEWORKS):
        spec = ["--framework", fw, "--persistent-gib", str(p_gib), "--ephemeral-gib", str(e_gib),
                "--steps", str(args.steps)]
        seen = {}

        def sample(t, gshare_dir):
            # Only while the job rests after its steps (alloc_probe.py --linger).
            if not os.path.exists(os.path.join(args.out, "raw", f"alloc-{fw}-alone", "ready0.resting")):
                return None
            top = top_json(args.build, gshare_dir)
            for p in (top or {}).get("gpus", [{}])[0].get("processes", []):
                seen[p["pid"]] = {k: p.get(k) for k in ("persistent_bytes", "ephemeral_bytes", "context_bytes",
                                                        "memory_provisional", "classified_iterations",
                                                        "used_bytes", "reserved_bytes", "lane",
                                                        "released_bytes")}
            return None

        # Alone it lingers 2 s after its last step, so gshare-top is read at rest.
        [alone], _, _ = run_jobs(f"alloc-{fw}-alone", [spec + ["--linger", "2"]], args, gshare=True,
                                 extra_env=env, sample=sample, timeout=60, script=PROBE)
        # The job's own process: the one holding the most (a framework may
        # start helpers that touch the GPU too).
        learned = max(seen.values(), key=lambda p: p.get("reserved_bytes") or 0) if seen else {}
        pair_top, pair_trace = [], []

        def pair_sample(t, gshare_dir):
            top = top_json(args.build, gshare_dir)
            if top and top.get("gpus"):
                g = top["gpus"][0]
                pair_top.append({k: g.get(k) for k in ("handovers", "switches", "switch_ns_total",
                                                       "switch_ns_max", "reserved_bytes", "safety_bytes")})
                # Each job's figures over time: kept where the pair fails, to see why.
                pair_trace.append({"t": round(t, 2), "safety_bytes": g.get("safety_bytes"),
                                   "holder_pid": g.get("holder_pid"), "processes": [
                    {k: p.get(k) for k in ("pid", "persistent_bytes", "ephemeral_bytes", "reserved_bytes",
                                           "lane", "classified_iterations", "iterations", "admission")}
                    for p in g.get("processes", [])]})
            return None

        shared, _, _ = run_jobs(f"alloc-{fw}-gshare", [spec, spec], args, gshare=True, extra_env=env,
                                sample=pair_sample, timeout=100, script=PROBE)
        native, _, _ = run_jobs(f"alloc-{fw}-native", [spec, spec], args, gshare=False, timeout=60,
                                script=PROBE)
        context = learned.get("context_bytes") or 0
        p_learned = (learned.get("persistent_bytes") or 0) - context if learned else None
        last = pair_top[-1] if pair_top else {}
        rows.append({
            "framework": fw, "persistent_gib": p_gib, "ephemeral_gib": e_gib,
            "alone_ok": alone["returncode"] == 0 and len(alone["losses"]) == args.steps,
            "alone_seconds": round(alone["seconds"] - 2, 3),
            "learned": learned,
            "P_learned_gib": round(p_learned / GiB, 3) if p_learned is not None else None,
            "E_learned_gib": round((learned.get("ephemeral_bytes") or 0) / GiB, 3) if learned else None,
            "gshare_pair_finished": all(r["returncode"] == 0 and len(r["losses"]) == args.steps for r in shared),
            "gshare_pair_values_identical": all(r["losses"] == alone["losses"] for r in shared),
            "gshare_pair_seconds": max(r["seconds"] for r in shared),
            "gshare_pair_oom": [r["oom"] for r in shared],
            "gshare_pair_top": last,
            "native_pair_oom": [r["oom"] for r in native],
            "gshare_pair_trace": pair_trace if not all(r["returncode"] == 0 for r in shared) else None,
            "native_pair_seconds": max(r["seconds"] for r in native),
        })
        print(fw, json.dumps({k: v for k, v in rows[-1].items() if k not in ("learned", "gshare_pair_trace")}), flush=True)
    return {"gpu_total_bytes": total, "steps": args.steps, "rows": rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--seconds", type=float, default=25)
    ap.add_argument("--frameworks", nargs="*", default=None, help="allocators: a subset of " + " ".join(FRAMEWORKS))
    ap.add_argument("--runs", type=int, default=5, help="mixes: runs per mix and policy")
    ap.add_argument("--policies", nargs="*", default=None, help="mixes: a subset of " + " ".join(POLICIES))
    ap.add_argument("--jobs", nargs="*", type=int, default=None, help="mixes: only mixes of these job counts")
    ap.add_argument("--one-baseline", action="store_true",
                    help="mixes: run the jobs one after another only once, not before every round")
    ap.add_argument("--mix-timeout", type=float, default=120, help="mixes: seconds a run may take")
    ap.add_argument("--short-steps", action="store_true",
                    help="mixes: each job's peak mostly from a per-step scratch buffer beside a small "
                         "batch, for steps of tens of milliseconds")
    ap.add_argument("parts", nargs="+", choices=["oversized", "twenty", "allocators", "mixes", "iterations"])
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for part in args.parts:
        record = {"oversized": oversized, "twenty": twenty, "allocators": allocators, "mixes": mixes,
                  "iterations": iterations}[part](args)
        with open(os.path.join(args.out, f"memory-{part}.json"), "w") as f:
            json.dump(record, f, indent=1)
        summary = {k: v for k, v in record.items() if k not in ("samples", "comparisons", "alone",
                                                               "native_together", "gshare_together", "rows",
                                                               "mixes")}
        print(part, json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
