"""Paging to host memory on a real GPU (GSHARE_PAGING=on): the figures of
the paging demonstrations, each against a baseline measured in the same run.

  copies    pinned host<->device copy rate with PyTorch (4 GiB, 3 times each
            way), and how fast PyTorch pins host memory: the ceiling a
            page-in is held against.
  train     a mix of --jobs training jobs (bench/memory/train_job.py), each
            holding a frozen bank of --bank-frac of the GPU besides its MLP
            and Adam state, so that their persistent memory together is
            about jobs x bank-frac of the GPU. First each job alone,
            natively, one after another: the ideal (enough memory, no
            copies) and the reference losses. Then all together under
            gshare with paging, once with GSHARE_PREFETCH=on and once off.
            Per run: the makespan from a common start, the losses against
            alone, and from gshare-top (sampled every second) each job's
            page-ins, prefetches, page-in rate and switch costs, and
            from the step logs the stall at each switch between jobs
            (switch_stalls), and prefetch's share of the stall at switches
            to a job paged in (prefetch_hides: the mean with prefetch on
            against off; jobs long enough for several turns each, --steps,
            switch between live jobs). Within each run, hidden_share: the
            share of the page-in time of switches past a job's first step
            that did not stall the GPU.
  infer     --models inference "models" (--weights-frac of the GPU each, in
            weight matrices of 1 GiB) serving requests in turn: request r
            goes to model r mod N, one at a time, --requests in all; each
            request runs every weight matrix once. Latency from request to
            result, natively (one model at a time, so that they fit) and
            under gshare with paging (all models live).

usage: paging_bench.py --build DIR --out DIR [--jobs N] [--bank-frac F]
                       [--steps N] [--models N] [--weights-frac F]
                       [--requests N] [--timeout S] [--alone-from DIR] parts...
Writes paging.json (every figure) under --out. With "copies" before
"train", each train run also has page_in_to_pinned: its median page-in rate
over the pinned copy rate of the same run.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.dirname(HERE)
sys.path.insert(0, BENCH)
from benchlib import stats  # noqa: E402

TRAIN = os.path.join(BENCH, "memory", "train_job.py")
INFER = os.path.join(HERE, "infer_model.py")


def gpu_total_bytes():
    """The GPU's memory, from nvidia-smi: no CUDA context in this process."""
    text = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits", "-i", "0"],
                          capture_output=True, text=True).stdout
    return int(text.split()[0]) << 20


def measure_copies():
    """In a child process (its CUDA context must not stay): the pinned
    copy rate each way (GB/s, 1e9 bytes), and the pinning rate."""
    text = subprocess.run([sys.executable, __file__, "--copies-child"], capture_output=True, text=True).stdout
    return json.loads(text.strip().splitlines()[-1])


def copies_child():
    import torch
    size = 4 << 30
    t = time.monotonic()
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    pin_s = time.monotonic() - t
    dev = torch.empty(size, dtype=torch.uint8, device="cuda")
    host.fill_(1)
    rates = {"h2d": [], "d2h": []}
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.monotonic()
        dev.copy_(host, non_blocking=True)
        torch.cuda.synchronize()
        rates["h2d"].append(size / (time.monotonic() - t) / 1e9)
        t = time.monotonic()
        host.copy_(dev, non_blocking=True)
        torch.cuda.synchronize()
        rates["d2h"].append(size / (time.monotonic() - t) / 1e9)
    print(json.dumps({"h2d_gbps": max(rates["h2d"]), "d2h_gbps": max(rates["d2h"]),
                      "pin_gbps": size / pin_s / 1e9, "runs": rates}))


class TopSampler:
    """gshare-top --json every second; keeps each pid's latest process row."""

    def __init__(self, top, gshare_dir):
        self.top, self.dir = top, gshare_dir
        self.rows, self.stop = {}, threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        while not self.stop.is_set():
            try:
                text = subprocess.run([self.top, "--json", "--dir", self.dir], capture_output=True,
                                      text=True, timeout=10).stdout
                for gpu in json.loads(text).get("gpus", []):
                    for p in gpu.get("processes", []):
                        self.rows[p["pid"]] = p
            except (subprocess.SubprocessError, ValueError, KeyError):
                pass
            self.stop.wait(1.0)

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=15)
        return self.rows


def stamp_lines(stream, path):
    """Copies a job's stderr to `path`, each line prefixed with the monotonic
    time it arrived (the clock the jobs' step logs use): gshare's messages
    carry no time of their own, and timeline.py lines them up with steps."""
    with open(path, "w") as f:
        for line in iter(stream.readline, b""):
            f.write(f"{time.monotonic():.6f} {line.decode(errors='replace')}")
            f.flush()


def start_jobs(commands, env, out_dir, tag):
    procs = []
    for i, cmd in enumerate(commands):
        out = open(os.path.join(out_dir, f"{tag}-{i}.out"), "w")
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.PIPE, start_new_session=True)
        proc.stamper = threading.Thread(target=stamp_lines,
                                        args=(proc.stderr, os.path.join(out_dir, f"{tag}-{i}.err")),
                                        daemon=True)
        proc.stamper.start()
        procs.append(proc)
    return procs


def wait_all(procs, deadline):
    for p in procs:
        try:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    timed_out = [p.pid for p in procs if p.poll() is None]
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        p.stamper.join(timeout=5)
    return timed_out


def wait_files(paths, procs, deadline):
    while time.monotonic() < deadline:
        if all(os.path.exists(p) for p in paths):
            return True
        if any(p.poll() is not None for p in procs):
            return False
        time.sleep(0.05)
    return False


def fresh_dir(tag):
    """A GSHARE_DIR of its own for one run: no region left by an earlier one."""
    import tempfile
    return tempfile.mkdtemp(prefix=f"gshare-paging-{tag}-")


def parse_train(path):
    losses, done_t = [], None
    with open(path) as f:
        for line in f:
            parts = line.split()
            if line.startswith("step "):
                losses.append(parts[3])
            elif line.startswith("done "):
                done_t = float(parts[parts.index("t") + 1])
    return losses, done_t


def switch_stalls(out_dir, tag, count, first_steps):
    """The GPU time lost where one job's steps give way to another's, from
    the jobs' step logs. A job's steps, between switches, come one step time
    apart; at a switch the gap from the outgoing job's last step to the
    incoming job's step is that step plus the stall: the hand-over, the
    page-in that was not hidden, the page-out that made room for it. One
    step time is the incoming job's median gap between its own consecutive
    steps, or, for its first step, its first step alone (`first_steps`, a
    job's warm-up included). `paged` switches are those whose incoming job
    was paged in (or prefetched) since its previous step: prefetch's share
    of the stall is read on them. The rest are `resident`; those that
    follow a job's last step (its exit is in the stall) are also counted
    apart as `after_end`, and paged switches to a job's first step (its
    set-up, paged out while it waited to be admitted, in the stall) as
    `first_turn`. For the paged switches past a job's first step,
    `hidden_share` is the share of their page-in time (the copies, from the
    jobs' messages) that did not stall the GPU: 1 - stalls / page-ins."""
    steps, own, page_ins = [], {}, {}
    for k in range(count):
        path = os.path.join(out_dir, f"{tag}-{k}.steps")
        if not os.path.exists(path):
            continue
        with open(path) as f:
            times = [json.loads(line)["t"] for line in f if line.strip()]
        steps += [(t, k, n, len(times)) for n, t in enumerate(times)]
        err = os.path.join(out_dir, f"{tag}-{k}.err")
        if os.path.exists(err):
            with open(err) as f:
                page_ins[k] = [(float(line.split(" ", 1)[0]), copy_ms(line)) for line in f
                               if " paged in " in line or " prefetched " in line]
    steps.sort()
    last = {}
    for (t1, k1, _, _), (t2, k2, _, _) in zip(steps, steps[1:]):
        if k1 == k2:
            own.setdefault(k1, []).append(t2 - t1)
    stalls = {"paged": [], "resident": [], "after_end": [], "first_turn": []}
    later_stall = later_copy = 0.0
    for (t1, k1, n1, total1), (t2, k2, n2, _) in zip(steps, steps[1:]):
        previous = last.get(k2)
        last[k2] = t2
        if k1 == k2:
            continue
        step = first_steps.get(k2) if n2 == 0 else (stats.median(own[k2]) if k2 in own else None)
        if step is None:
            continue
        stall = max(0.0, (t2 - t1) - step) * 1e3
        since = previous if previous is not None else float("-inf")
        copies = [ms for t, ms in page_ins.get(k2, []) if since < t <= t2]
        if copies:
            stalls["paged"].append(stall)
            if n2 == 0:
                stalls["first_turn"].append(stall)
            else:
                later_stall += stall
                later_copy += sum(copies)
        else:
            stalls["resident"].append(stall)
        if n1 == total1 - 1:
            stalls["after_end"].append(stall)
    out = {kind: {"count": len(v), "mean_ms": sum(v) / len(v) if v else None,
                  "median_ms": stats.median(v) if v else None, "all_ms": [round(x, 1) for x in v]}
           for kind, v in stalls.items()}
    out["hidden_share"] = 1 - later_stall / later_copy if later_copy else None
    return out


def copy_ms(line):
    """The copy time of a "paged in"/"prefetched" message: "... in 1043.7 ms, after ..." """
    try:
        return float(line.split(" MiB in ", 1)[1].split(" ms", 1)[0])
    except (IndexError, ValueError):
        return 0.0


def first_step_alone(out_dir, tag):
    """A job's first step alone, from its start to that step (its warm-up
    in it), or None."""
    try:
        with open(os.path.join(out_dir, f"{tag}.start")) as f:
            t0 = float(f.read().split()[0])
        with open(os.path.join(out_dir, f"{tag}-0.steps")) as f:
            return json.loads(f.readline())["t"] - t0
    except (OSError, ValueError, KeyError, IndexError):
        return None


def env_with(preload, extra):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(extra)
    return env


def train_run(args, jobs, tag, preload=None, extra=None, only=None):
    """One run of the training mix (or of job `only` alone). Returns its figures."""
    out_dir = os.path.join(args.out, "raw")
    os.makedirs(out_dir, exist_ok=True)
    ids = [only] if only is not None else list(range(jobs))
    ready = [os.path.join(out_dir, f"{tag}-{i}.ready") for i in ids]
    start = os.path.join(out_dir, f"{tag}.start")
    for p in ready + [start]:
        if os.path.exists(p):
            os.remove(p)
    commands = [[sys.executable, TRAIN, "--seed", str(i + 1), "--steps", str(args.steps),
                 "--width", "4096", "--depth", "8", "--batch", "16384",
                 "--bank-gib", f"{args.bank_gib:.2f}", "--bank-in-place", "--ready", r, "--start", start,
                 "--log", os.path.join(out_dir, f"{tag}-{k}.steps")]
                for k, (i, r) in enumerate(zip(ids, ready))]
    gshare_dir = fresh_dir(tag)
    env = env_with(preload, dict(extra or {}, GSHARE_DIR=gshare_dir))
    procs = start_jobs(commands, env, out_dir, tag)
    sampler = TopSampler(args.top, gshare_dir) if preload else None
    deadline = time.monotonic() + args.timeout
    built = wait_files(ready, procs, deadline)
    for k in range(len(ids)):
        steps_log = os.path.join(out_dir, f"{tag}-{k}.steps")
        if os.path.exists(steps_log):
            os.remove(steps_log)
    t0 = time.monotonic()
    with open(start, "w") as f:
        f.write(f"{t0:.6f}\n")
    timed_out = wait_all(procs, deadline)
    rows = sampler.finish() if sampler else {}
    result = {"tag": tag, "built": built, "timed_out": len(timed_out), "jobs": []}
    ends = []
    for k, i in enumerate(ids):
        losses, done_t = parse_train(os.path.join(out_dir, f"{tag}-{k}.out"))
        row = rows.get(procs[k].pid, {})
        job = {"job": i, "steps": len(losses), "losses": losses, "rc": procs[k].returncode,
               "seconds": (done_t - t0) if done_t else None}
        for key in ("page_outs", "page_ins", "prefetches", "page_in_gbps", "paging_ms", "page_in_wait_ms",
                    "switches", "switch_ns", "switch_cost_ns", "host_paging_bytes", "persistent_bytes"):
            if key in row:
                job[key] = row[key]
        result["jobs"].append(job)
        if done_t:
            ends.append(done_t - t0)
    result["makespan_s"] = max(ends) if len(ends) == len(ids) else None
    if only is None:
        firsts = {i: first_step_alone(out_dir, f"alone{i}") for i in ids}
        result["switch_stalls"] = switch_stalls(out_dir, tag, len(ids), {i: t for i, t in firsts.items() if t})
    return result


def reused_alone(args, jobs):
    """The jobs alone from another run of the same mix (--alone-from DIR,
    an --out of this script), when there is no time to run them again: its
    figures, and its raw files (each job's first step alone, for the
    stalls), copied into this run's raw folder. Same mix or an error."""
    with open(os.path.join(args.alone_from, "paging.json")) as f:
        earlier = json.load(f)["train"]
    if earlier["jobs"] != jobs or earlier["steps"] != args.steps or abs(earlier["bank_gib"] - args.bank_gib) > 0.01:
        sys.exit(f"--alone-from {args.alone_from}: another mix (jobs {earlier['jobs']}, steps {earlier['steps']}, "
                 f"bank {earlier['bank_gib']:.2f} GiB)")
    raw = os.path.join(args.out, "raw")
    os.makedirs(raw, exist_ok=True)
    for name in os.listdir(os.path.join(args.alone_from, "raw")):
        if name.startswith("alone"):
            shutil.copy(os.path.join(args.alone_from, "raw", name), raw)
    alone = earlier["alone"]
    for i, run in enumerate(alone):  # paging.json keeps no losses: read back from the job's output
        run["jobs"][0]["losses"] = parse_train(os.path.join(raw, f"alone{i}-0.out"))[0]
    return alone


def part_train(args, report):
    total = gpu_total_bytes()
    args.bank_gib = args.bank_frac * total / 2**30
    jobs = args.jobs
    if args.alone_from:
        alone = reused_alone(args, jobs)
    else:
        alone = [train_run(args, jobs, f"alone{i}", only=i) for i in range(jobs)]
    ideal = sum(r["jobs"][0]["seconds"] or 0 for r in alone)
    reference = [r["jobs"][0]["losses"] for r in alone]
    report["train"] = {"jobs": jobs, "bank_gib": args.bank_gib, "steps": args.steps,
                       "gpu_bytes": total, "alone": alone, "ideal_s": ideal, "runs": []}
    if args.alone_from:
        report["train"]["alone_from"] = os.path.abspath(args.alone_from)
    limit = os.environ.get("BENCH_HOST_MEM_LIMIT", "100GiB")
    tags = set()
    for entry in args.prefetch.split(","):
        # "on" or "off", then optional ":NAME=VALUE" settings of this run only.
        prefetch, *settings = entry.split(":")
        extra = {"GSHARE_PAGING": "on", "GSHARE_PREFETCH": prefetch, "GSHARE_HOST_MEM_LIMIT": limit,
                 "GSHARE_LOG": "info", "GSHARE_ADMIT_TIMEOUT_S": str(int(args.timeout))}
        extra.update(setting.split("=", 1) for setting in settings)
        # lib=NAME: this run preloads NAME/libgshare.so (another build, the
        # same mix and ideal), tagged by the folder's name.
        lib = extra.pop("lib", None)
        preload = os.path.join(lib, "libgshare.so") if lib else args.lib
        settings = [x if not x.startswith("lib=") else "lib=" + os.path.basename(os.path.normpath(lib))
                    for x in settings]
        tag = "-".join([f"gshare-prefetch-{prefetch}"] + [x.replace("=", "") for x in settings])
        # A run repeated in the list ("on,off,on,off": alternating trials)
        # keeps its own raw files.
        base, n = tag, 1
        while tag.lower() in tags:
            n += 1
            tag = f"{base}-run{n}"
        tags.add(tag.lower())
        run = train_run(args, jobs, tag.lower(), preload=preload, extra=extra)
        run["prefetch"] = prefetch
        run["settings"] = settings
        run["losses_identical"] = all(j["losses"] == reference[j["job"]] for j in run["jobs"])
        run["ratio_to_ideal"] = ideal / run["makespan_s"] if run["makespan_s"] else None
        page_in = [j["page_in_gbps"] for j in run["jobs"] if j.get("page_in_gbps")]
        run["page_in_gbps_median"] = stats.median(page_in) if page_in else None
        # Against the pinned copy rate of this same run ("copies" part).
        pinned = report.get("copies", {}).get("h2d_gbps")
        run["page_in_to_pinned"] = (run["page_in_gbps_median"] / pinned
                                    if pinned and run["page_in_gbps_median"] else None)
        switches = sum(j.get("switches", 0) for j in run["jobs"])
        run["switch_ms_mean"] = (sum(j.get("switch_ns", 0) for j in run["jobs"]) / switches / 1e6
                                 if switches else None)
        for j in run["jobs"]:
            del j["losses"]
        report["train"]["runs"].append(run)
        write(args, report)
    for r in alone:
        for j in r["jobs"]:
            del j["losses"]
    # Prefetch's share of the stall per switch to a job paged in: the mean
    # stall of every such switch with prefetch on against with it off.
    paged = {mode: [x for r in report["train"]["runs"] if r["prefetch"] == mode
                    for x in r["switch_stalls"]["paged"]["all_ms"]] for mode in ("on", "off")}
    if paged["on"] and paged["off"] and sum(paged["off"]) > 0:
        on, off = sum(paged["on"]) / len(paged["on"]), sum(paged["off"]) / len(paged["off"])
        report["train"]["paged_switch_stall_ms"] = {"on": on, "off": off, "switches_on": len(paged["on"]),
                                                    "switches_off": len(paged["off"])}
        report["train"]["prefetch_hides"] = 1 - on / off
    write(args, report)


def part_infer(args, report):
    total = gpu_total_bytes()
    weights_gib = args.weights_frac * total / 2**30
    out_dir = os.path.join(args.out, "raw")
    os.makedirs(out_dir, exist_ok=True)
    report["infer"] = {"models": args.models, "weights_gib": weights_gib, "requests": args.requests,
                       "runs": []}

    def run(tag, preload, extra, models_at_once):
        lat = []
        gshare_dir = fresh_dir(tag)
        env = env_with(preload, dict(extra, GSHARE_DIR=gshare_dir))
        # Each model process serves the requests whose number names it:
        # request r waits for request r-1's answer (files in turn).
        turn_dir = os.path.join(out_dir, tag + "-turns")
        os.makedirs(turn_dir, exist_ok=True)
        for f in os.listdir(turn_dir):
            os.remove(os.path.join(turn_dir, f))
        groups = [list(range(args.models))] if models_at_once else [[m] for m in range(args.models)]
        sampler = TopSampler(args.top, gshare_dir) if preload else None
        for group in groups:
            cmds = [[sys.executable, INFER, "--model", str(m), "--models", str(args.models),
                     "--weights-gib", f"{weights_gib:.2f}", "--requests", str(args.requests),
                     "--turns", turn_dir, "--only-own" if not models_at_once else "--all"]
                    for m in group]
            procs = start_jobs(cmds, env, out_dir, f"{tag}-g{group[0]}")
            wait_all(procs, time.monotonic() + args.timeout)
            for k, m in enumerate(group):
                with open(os.path.join(out_dir, f"{tag}-g{group[0]}-{k}.out")) as f:
                    for line in f:
                        if line.startswith("request "):
                            lat.append(float(line.split()[4]))
        rows = sampler.finish() if sampler else {}
        return {"tag": tag, "latency_ms": stats.distribution(lat) if lat else None, "answered": len(lat),
                "page_ins": sum(r.get("page_ins", 0) for r in rows.values()),
                "prefetches": sum(r.get("prefetches", 0) for r in rows.values()),
                "page_in_gbps": [r.get("page_in_gbps") for r in rows.values()]}

    limit = os.environ.get("BENCH_HOST_MEM_LIMIT", "100GiB")
    report["infer"]["runs"].append(run("infer-native-one-at-a-time", None, {}, False))
    report["infer"]["runs"].append(run("infer-gshare-paging", args.lib,
                                       {"GSHARE_PAGING": "on", "GSHARE_HOST_MEM_LIMIT": limit,
                                        "GSHARE_LOG": "info"}, True))
    write(args, report)


def write(args, report):
    with open(os.path.join(args.out, "paging.json"), "w") as f:
        json.dump(report, f, indent=1)


def main():
    if sys.argv[1:] == ["--copies-child"]:
        copies_child()
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="folder with libgshare.so and tools/gshare-top")
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--bank-frac", type=float, default=0.35)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--models", type=int, default=6)
    ap.add_argument("--weights-frac", type=float, default=0.25)
    ap.add_argument("--requests", type=int, default=30)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--prefetch", default="on,off",
                    help="train: the runs under gshare, in order, comma-separated: GSHARE_PREFETCH "
                         "on or off, each optionally with :NAME=VALUE settings of its own "
                         "(on:GSHARE_SLICE_MAX_MS=20000), or lib=DIR for another build's "
                         "libgshare.so; repeat entries for alternating trials (on,off,on,off)")
    ap.add_argument("--alone-from", metavar="DIR",
                    help="train: take the jobs alone (the ideal) from another --out of the same mix "
                         "instead of running them again")
    ap.add_argument("parts", nargs="+", choices=["copies", "train", "infer"])
    args = ap.parse_args()
    args.lib = os.path.join(args.build, "libgshare.so")
    args.top = os.path.join(args.build, "tools", "gshare-top")
    os.makedirs(args.out, exist_ok=True)
    report = {"device": subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip()}
    if "copies" in args.parts:
        report["copies"] = measure_copies()
        write(args, report)
    if "train" in args.parts:
        part_train(args, report)
    if "infer" in args.parts:
        part_infer(args, report)
    write(args, report)
    print(json.dumps(report, indent=1)[:20000])


if __name__ == "__main__":
    main()
