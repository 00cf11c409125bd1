"""gshare-sim's prediction for a measured paging run (paging_bench.py
train): the trace is made from what was measured, each job's GPU time
alone (its seconds from the start over its steps), its memory (PyTorch's
peak reserved alone as P + E, the bank and model as P), the GPU's size and
the page-in rate gshare measured, and what each job's page-outs moved
(from the run's messages: less than P + E where a job gives its cache
back as it is switched out); gshare-sim --paging then predicts the
prefetch policy's makespan, set beside the measured one. With the run's
messages, also pinning: each job's first page-out pins all of its memory,
and its pinning rate is taken from those page-outs' times (less the copy at
the page-in rate), their median; and the host-memory limit the run had.

usage: compare_sim.py --run DIR --sim PATH/gshare-sim [--host-limit-gib N]
  DIR holds paging.json and raw/ (the job logs) of one paging_bench.py run.
Prints one JSON object: {"trace": ..., "runs": [{"tag", "prefetch",
"at_start", "measured_s", "predicted_s": {policy: ...}, "live_over_sim"}]},
every run in order, each simulated from where its jobs' memory was at its
start line (paged out or on the GPU: the jobs set up before it). An ended
job's memory stays on the GPU until its process is gone (the trace's
exit_ms): from its last step to the reclaim of its slot, the median.
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import tempfile

from timeline import read_steps

MIB = 1 << 20


def peak_reserved(path):
    with open(path) as f:
        for line in f:
            if line.startswith("done "):
                return int(line.split()[2])
    return None


def page_out(line):
    """A page-out message's figures: (MiB moved, ms, MiB pinned anew), the
    last all of it where the message does not say; None for another line."""
    m = re.search(r"paged out ([\d.]+) MiB in \d+ allocations in ([\d.]+) ms"
                  r"(?: \(([\d.]+) MiB of it into new host copies\))?", line)
    if not m:
        return None
    moved = float(m.group(1))
    return moved, float(m.group(2)), float(m.group(3)) if m.group(3) is not None else moved


def first_page_out_pin_gbps(raw, gbps):
    """Each job's first page-out that pinned host memory, from its
    messages: MiB copied, MiB pinned anew (all of it where the message
    does not say) and ms; the pinning rate is the bytes pinned over the
    time less the copy's. None without any."""
    rates = []
    for path in glob.glob(os.path.join(raw, "gshare-*-[0-9]*.err")):
        with open(path) as f:
            for line in f:
                figures = page_out(line)
                if not figures:
                    continue
                size, ms, pinned = figures[0] * MIB, figures[1], figures[2] * MIB
                if pinned <= 0:
                    continue  # its copies were made ahead: no pinning to time
                pin_s = ms / 1e3 - size / (gbps * 1e9)
                if pin_s > 0:
                    rates.append(pinned / pin_s / 1e9)
                break
    return statistics.median(rates) if rates else None


def paged_mib(raw, tags, job, footprint_mib):
    """What a page-out of job `job` moved, from its messages in the runs
    `tags`: the median of its page-outs of at least half its footprint (a
    job switched out at an iteration's end has given its temporaries and
    cache back; smaller ones are its exit's, or a page-out cut short), at
    most its footprint. None without any: the trace then moves P + E."""
    sizes = []
    for tag in tags:
        path = os.path.join(raw, f"{tag}-{job}.err")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            for line in f:
                figures = page_out(line)
                if figures and figures[0] >= footprint_mib / 2:
                    sizes.append(figures[0])
    return min(int(statistics.median(sizes)), footprint_mib) if sizes else None


def start_states(raw, tag, count):
    """Where each job's memory was at the run's start line (the jobs build
    their models first, and at 1.5·C some are paged out before it): from
    its messages before that, the last page-out or page-in. A job paged in
    again keeps its pinned copy. So, in effect, does one on the GPU whose
    first page-out after the line pinned less than half of what it moved:
    once jobs page, each makes its copy ahead while it runs (copies ahead),
    and this one made most of it while it set up."""
    with open(os.path.join(raw, f"{tag}.start")) as f:
        t0 = float(f.read().split()[0])
    states = []
    for k in range(count):
        state, paged_before = "resident", False
        path = os.path.join(raw, f"{tag}-{k}.err")
        if os.path.exists(path):
            with open(path) as f:
                lines = f.readlines()
            after = len(lines)  # the first line from the start line on
            for i, line in enumerate(lines):
                stamp, _, text = line.partition(" ")
                try:
                    if float(stamp) >= t0:
                        after = i
                        break
                except ValueError:
                    continue
                if " paged out " in text:
                    state, paged_before = "paged_out", True
                elif " paged in " in text or " prefetched " in text:
                    state = "resident_with_copy" if paged_before else "resident"
            if state == "resident":
                for line in lines[after:]:
                    figures = page_out(line)
                    if figures:
                        if figures[2] < figures[0] / 2:
                            state = "resident_with_copy"
                        break
        states.append(state)
    return states


def exit_seconds(raw, tags, count):
    """How long an ended job's memory stayed on the GPU: from its last step
    to the first message of another job that its slot was reclaimed (its
    process gone), over the runs' jobs, the median; 0 without any."""
    gaps = []
    for tag in tags:
        reclaims = []
        for k in range(count):
            path = os.path.join(raw, f"{tag}-{k}.err")
            if os.path.exists(path):
                with open(path) as f:
                    reclaims += [float(line.split(" ", 1)[0]) for line in f if "reclaimed" in line]
        for k in range(count):
            path = os.path.join(raw, f"{tag}-{k}.steps")
            if not os.path.exists(path):
                continue
            steps = read_steps(path)
            after = [t - steps[-1] for t in reclaims if steps and 0 < t - steps[-1] < 10]
            if after:
                gaps.append(min(after))
    return statistics.median(gaps) if gaps else 0.0


def simulate(sim, trace, gbps, pin, host_limit_gib):
    """gshare-sim --paging on `trace`: {policy: {no_prefetch_s, prefetch_s}}."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(trace, f)
        path = f.name
    command = [sim, "--paging", f"{gbps:.2f}"]
    if pin:
        command += ["--pin", f"{pin:.2f}", "--host-limit-mib", str(int(host_limit_gib * 1024))]
    result = subprocess.run(command + [path], capture_output=True, text=True)
    os.unlink(path)
    if result.returncode != 0:
        raise SystemExit(f"gshare-sim failed: {result.stderr.strip()}")
    predicted = {}
    for line in result.stdout.splitlines():
        m = re.match(r"\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
        if m:
            predicted[m.group(1)] = {"no_prefetch_s": float(m.group(2)), "prefetch_s": float(m.group(3))}
    return predicted


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--host-limit-gib", type=float, default=100, help="the run's GSHARE_HOST_MEM_LIMIT")
    args = ap.parse_args()
    report = json.load(open(os.path.join(args.run, "paging.json")))
    train = report["train"]
    raw = os.path.join(args.run, "raw")
    rate = [r["page_in_gbps_median"] for r in train["runs"] if r.get("page_in_gbps_median")]
    gbps = max(rate) if rate else report["copies"]["h2d_gbps"]
    jobs = []
    for i, alone in enumerate(train["alone"]):
        seconds = alone["jobs"][0]["seconds"]
        peak = peak_reserved(os.path.join(raw, f"alone{i}-0.out"))
        persistent = None
        for run in train["runs"]:
            p = [j.get("persistent_bytes") for j in run["jobs"] if j["job"] == i and j.get("persistent_bytes")]
            if p:
                persistent = max(persistent or 0, p[0])
        if persistent is None:
            persistent = int(train["bank_gib"] * (1 << 30))
        footprint = max(peak or 0, persistent)
        jobs.append({"name": f"job{i}", "arrival_s": 0, "iteration_ms": seconds * 1e3 / train["steps"],
                     "iterations": train["steps"], "persistent_mib": persistent // MIB,
                     "ephemeral_mib": (footprint - persistent) // MIB})
    trace = {"description": "measured paging run", "quantum_ms": 20, "slice_max_ms": 200, "handover_ms": 0.05,
             "capacity_mib": train["gpu_bytes"] // MIB, "jobs": jobs}
    for i, job in enumerate(jobs):
        moved = paged_mib(raw, [r["tag"] for r in train["runs"]], i, job["persistent_mib"] + job["ephemeral_mib"])
        if moved:
            job["paged_mib"] = moved
    trace["exit_ms"] = round(exit_seconds(raw, [r["tag"] for r in train["runs"]], len(jobs)) * 1e3, 1)
    pin = first_page_out_pin_gbps(raw, gbps)
    out = {"trace": trace, "page_in_gbps": gbps, "pin_gbps": pin, "host_limit_gib": args.host_limit_gib,
           "runs": []}
    # Every run in order (a list may repeat them: on,off,on,off), each
    # simulated from where its jobs' memory was at its start line.
    for run in train["runs"]:
        if not run.get("makespan_s"):
            continue
        states = start_states(raw, run["tag"], len(jobs))
        run_trace = dict(trace, jobs=[dict(j, at_start=s) for j, s in zip(jobs, states)])
        predicted = simulate(args.sim, run_trace, gbps, pin, args.host_limit_gib)
        simulated = predicted["prefetch"]["prefetch_s" if run["prefetch"] == "on" else "no_prefetch_s"]
        out["runs"].append({"tag": run["tag"], "prefetch": run["prefetch"], "at_start": states,
                            "measured_s": run["makespan_s"], "predicted_s": predicted,
                            "live_over_sim": run["makespan_s"] / simulated})
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
