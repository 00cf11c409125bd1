"""gshare-sim's prediction for a measured paging run (paging_bench.py
train): the trace is made from what was measured, each job's GPU time
alone (its seconds from the start over its steps), its memory (PyTorch's
peak reserved alone as P + E, the bank and model as P), the GPU's size and
the page-in rate gshare measured; gshare-sim --paging then predicts the
prefetch policy's makespan, set beside the measured one. With the run's
messages, also pinning: each job's first page-out pins all of its memory,
and its pinning rate is taken from those page-outs' times (less the copy at
the page-in rate), their median; and the host-memory limit the run had.

usage: compare_sim.py --run DIR --sim PATH/gshare-sim [--host-limit-gib N]
  DIR holds paging.json and raw/ (the job logs) of one paging_bench.py run.
Prints one JSON object: {"trace": ..., "predicted_s": {...}, "measured_s":
{"on": [...], "off": [...]}, ...}, every run of each kind in order.
"""

import argparse
import glob
import json
import os
import re
import statistics
import subprocess
import tempfile

MIB = 1 << 20


def peak_reserved(path):
    with open(path) as f:
        for line in f:
            if line.startswith("done "):
                return int(line.split()[2])
    return None


def first_page_out_pin_gbps(raw, gbps):
    """Each job's first page-out that pinned host memory, from its
    messages: MiB copied, MiB pinned anew (all of it where the message
    does not say) and ms; the pinning rate is the bytes pinned over the
    time less the copy's. None without any."""
    rates = []
    for path in glob.glob(os.path.join(raw, "gshare-*-[0-9]*.err")):
        with open(path) as f:
            for line in f:
                m = re.search(r"paged out ([\d.]+) MiB in \d+ allocations in ([\d.]+) ms"
                              r"(?: \(([\d.]+) MiB of it into new host copies\))?", line)
                if not m:
                    continue
                size = float(m.group(1)) * MIB
                pinned = float(m.group(3)) * MIB if m.group(3) is not None else size
                if pinned <= 0:
                    continue  # its copies were made ahead: no pinning to time
                pin_s = float(m.group(2)) / 1e3 - size / (gbps * 1e9)
                if pin_s > 0:
                    rates.append(pinned / pin_s / 1e9)
                break
    return statistics.median(rates) if rates else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True)
    ap.add_argument("--sim", required=True)
    ap.add_argument("--host-limit-gib", type=float, default=100, help="the run's GSHARE_HOST_MEM_LIMIT")
    args = ap.parse_args()
    report = json.load(open(os.path.join(args.run, "paging.json")))
    train = report["train"]
    rate = [r["page_in_gbps_median"] for r in train["runs"] if r.get("page_in_gbps_median")]
    gbps = max(rate) if rate else report["copies"]["h2d_gbps"]
    jobs = []
    for i, alone in enumerate(train["alone"]):
        seconds = alone["jobs"][0]["seconds"]
        peak = peak_reserved(os.path.join(args.run, "raw", f"alone{i}-0.out"))
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
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(trace, f)
        path = f.name
    pin = first_page_out_pin_gbps(os.path.join(args.run, "raw"), gbps)
    command = [args.sim, "--paging", f"{gbps:.2f}"]
    if pin:
        command += ["--pin", f"{pin:.2f}", "--host-limit-mib", str(int(args.host_limit_gib * 1024))]
    text = subprocess.run(command + [path], capture_output=True, text=True).stdout
    os.unlink(path)
    predicted = {}
    for line in text.splitlines():
        m = re.match(r"\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", line)
        if m:
            predicted[m.group(1)] = {"no_prefetch_s": float(m.group(2)), "prefetch_s": float(m.group(3))}
    # Every run of each kind, in order (a list may repeat them: on,off,on,off).
    measured = {}
    for run in train["runs"]:
        if run.get("makespan_s"):
            measured.setdefault(run["prefetch"], []).append(run["makespan_s"])
    out = {"trace": trace, "page_in_gbps": gbps, "pin_gbps": pin, "host_limit_gib": args.host_limit_gib,
           "predicted_s": predicted, "measured_s": measured}
    policy = predicted.get("prefetch")
    if policy:
        for kind, simulated in (("on", policy["prefetch_s"]), ("off", policy["no_prefetch_s"])):
            if measured.get(kind):
                out[f"live_over_sim_prefetch_{kind}"] = [m / simulated for m in measured[kind]]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
