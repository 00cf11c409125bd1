"""A synthetic training job of the mix benchmark: `iterations` iterations of
about `iteration_ms` each, an iteration being N back-to-back bf16 matmuls of
--size x --size (4096: ~0.25 ms each on an H100) and one `.item()` (a host
sync: gshare's iteration boundary). N per iteration time is found alone,
beforehand, by the `calibrate` command.

  synthetic_job.py calibrate --iteration-ms MS [--iteration-ms MS ...] --out FILE
      Measures one matmul, then adjusts N for each target until an iteration
      takes the target within 2% (median of 7). Output: {"matmul_ms",
      "targets": {"<ms>": {"matmuls": N, "measured_ms": M}}, "gpu", "torch"}.

  synthetic_job.py run --t0 T --arrival S --iterations I --matmuls N
                       [--memory-mib M] [--deadline D] --out FILE
      Starts CUDA without launching a kernel (context, cuBLAS handle, inputs
      copied from the host), sleeps until T0 + S (monotonic seconds), then
      allocates M MiB (the job's footprint in the trace) and runs its
      iterations. Output: {"arrival_s", "start_s", "end_s", "jct_s", ...}
      with times relative to T0; JCT = end - (T0 + arrival).

--fake (either command): sleep instead of using the GPU, to try the
orchestration on a machine without one.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, for benchlib
from benchlib import jobutil, stats  # noqa: E402


class Gpu:
    def __init__(self, size, device="cuda"):
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            raise jobutil.JobError("PyTorch sees no CUDA device")
        self.torch = torch
        self.device = device
        # Inputs made on the host and copied: no kernel is launched before
        # the job's arrival, so under gshare it is not yet an active job.
        self.a = torch.randn(size, size, dtype=torch.bfloat16).to(device)
        self.b = torch.randn(size, size, dtype=torch.bfloat16).to(device)
        self.c = torch.empty(size, size, dtype=torch.bfloat16, device=device)
        gpu = "cpu"
        if device == "cuda":
            torch.cuda.current_blas_handle()
            gpu = torch.cuda.get_device_name(0)
        self.info = {"torch": torch.__version__, "gpu": gpu}
        self.held = None

    def iteration(self, matmuls):
        mm = self.torch.mm
        for _ in range(matmuls):
            mm(self.a, self.b, out=self.c)
        return self.c[0, 0].item()  # the host sync ending the iteration

    def hold(self, mib):
        """Allocates `mib` MiB; False if the GPU (or gshare) refuses."""
        if mib <= 0:
            return True
        try:
            self.held = self.torch.empty(int(mib) << 20, dtype=self.torch.uint8,
                                         device=self.device)
            return True
        except self.torch.cuda.OutOfMemoryError:
            return False


class Fake:
    def __init__(self, iteration_ms):
        self.iteration_ms = iteration_ms
        self.info = {"torch": None, "gpu": "fake"}

    def iteration(self, matmuls):
        time.sleep(self.iteration_ms / 1000.0)
        return 0.0

    def hold(self, mib):
        return True


def timed(gpu, matmuls, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        gpu.iteration(matmuls)
        times.append(time.perf_counter() - start)
    return stats.median(times)


def calibrate(args):
    targets = sorted(set(args.iteration_ms))
    if args.fake:
        result = {"matmul_ms": None, "fake": True, "gpu": "fake", "torch": None, "size": args.size,
                  "targets": {str(t): {"matmuls": 1, "measured_ms": t} for t in targets}}
        jobutil.emit(args, result)
        return
    gpu = Gpu(args.size, args.device)
    for _ in range(3):
        gpu.iteration(20)
    per_matmul = timed(gpu, 200, 3) / 200
    result = {"matmul_ms": per_matmul * 1e3, "size": args.size, **gpu.info, "targets": {}}
    for target in targets:
        matmuls = max(1, round(target / 1e3 / per_matmul))
        measured = None
        for _ in range(5):
            measured = timed(gpu, matmuls, 7)
            if abs(measured * 1e3 - target) <= 0.02 * target:
                break
            matmuls = max(1, round(matmuls * target / (measured * 1e3)))
        measured = timed(gpu, matmuls, 7)
        result["targets"][str(target)] = {"matmuls": matmuls, "measured_ms": measured * 1e3}
        print(f"calibrate: {target} ms -> {matmuls} matmuls ({measured * 1e3:.2f} ms)", flush=True)
    jobutil.emit(args, result)


def run(args):
    watch = jobutil.ParentWatch()
    began = time.monotonic()
    gpu = Fake(args.iteration_ms) if args.fake else Gpu(args.size, args.device)
    ready = time.monotonic()
    jobutil.touch(args.ready_file)
    arrival = args.t0 + args.arrival
    while time.monotonic() < arrival - 0.05:
        watch.check()
        time.sleep(min(0.05, max(arrival - 0.05 - time.monotonic(), 0)))
    jobutil.sleep_until(arrival)
    late = time.monotonic() - arrival
    memory_ok = gpu.hold(args.memory_mib)
    started = time.monotonic()
    ends = []
    for _ in range(args.iterations):
        gpu.iteration(args.matmuls)
        now = time.monotonic()
        ends.append(now - args.t0)
        if args.deadline and now > args.deadline:
            raise jobutil.JobError(f"past its deadline after {len(ends)} of {args.iterations} iterations")
        watch.check()
    finished = time.monotonic()
    record = {
        "kind": "synthetic", "name": args.name, "ok": True, "pid": os.getpid(), **gpu.info,
        "arrival_s": args.arrival, "iterations": args.iterations, "matmuls": args.matmuls,
        "size": args.size, "memory_mib": args.memory_mib, "memory_ok": memory_ok,
        "startup_s": round(ready - began, 3),
        "late_s": round(late, 6), "start_s": round(started - args.t0, 6),
        "end_s": round(finished - args.t0, 6), "jct_s": round(finished - arrival, 6),
        "iteration_ends": jobutil.rounded(ends, 4),
    }
    jobutil.emit(args, record)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    cal = commands.add_parser("calibrate", help="find matmuls per iteration time")
    cal.add_argument("--iteration-ms", type=float, action="append", required=True)
    cal.add_argument("--size", type=int, default=4096)
    cal.add_argument("--out")
    cal.add_argument("--fake", action="store_true")
    cal.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    go = commands.add_parser("run", help="run one job of the mix")
    go.add_argument("--name", default="job")
    go.add_argument("--out")
    go.add_argument("--ready-file")
    go.add_argument("--t0", type=float, required=True, help="experiment start, monotonic s")
    go.add_argument("--arrival", type=float, required=True, help="seconds after T0")
    go.add_argument("--iterations", type=int, required=True)
    go.add_argument("--matmuls", type=int, required=True, help="matmuls per iteration")
    go.add_argument("--size", type=int, default=4096)
    go.add_argument("--memory-mib", type=float, default=0)
    go.add_argument("--deadline", type=float, default=0, help="monotonic s; give up after it")
    go.add_argument("--fake", action="store_true")
    go.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    go.add_argument("--iteration-ms", type=float, default=10.0, help="with --fake only")
    args = parser.parse_args()
    jobutil.run_main(lambda: calibrate(args) if args.command == "calibrate" else run(args))


if __name__ == "__main__":
    main()
