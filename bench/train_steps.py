"""PyTorch training steps of an MLP, natively or under LD_PRELOAD=libgshare.so:
the training job of bench/run_benchmarks.sh (`rate`) and of the scheduling
benchmarks in bench/sched/ (`window`). One model and one step for both: SGD
on an MSE loss against fixed random targets, optionally under autocast.

rate: steps per second of fixed models, chosen to bracket real jobs:
  launch_bound   64 Linear(64, 64) + ReLU layers, batch 32: ~400 tiny kernels
                 a step, so the step rate is set by the host's cost per launch
                 (PyTorch's dispatch plus the driver call gshare hooks);
  compute_bound  4 Linear(4096, 4096) layers, batch 4096, bf16 autocast: a
                 few large GEMMs, so the step rate is set by the GPU;
  transformer    a 4-layer transformer encoder (d 1024, 16 heads, batch
                 16 x 512 tokens, bf16 autocast, AdamW) whose loss is read
                 every step: a real model's mix of kernels with a host sync
                 per step, about 10 ms a step on an H100.
  Each runs --warmup steps, then steps in chunks of 10 (with a synchronize
  after each chunk) until --seconds have passed. One JSON line per model:
  {"benchmark":"train_steps","model":NAME,"steps":N,"seconds":S,"steps_per_second":R}

window: one job of the scheduling benchmarks (fair, quantum, priority):
  --depth Linear(--width, --width) layers with ReLU between, batch --batch,
  bf16 autocast by default; `loss.item()` every step, a host
  synchronisation that gshare takes as an iteration boundary. Defaults
  (width 4096, depth 6, batch 8192) make one step about 10 ms on an H100
  alone (~0.5 ms GEMM kernels) and need about 3 GiB of GPU memory. After
  --warmup-steps it joins the start barrier (benchlib/jobutil.py), then
  steps until --window seconds after T0 and records the time each step
  ended, relative to T0: steps in any sub-window, steps per second and each
  step's latency follow from that list. Output: one JSON object
  {"kind": "train", "step_ends": [...], ...}. --host-ms adds that much
  work on the host after each step, the GPU idle for this job meanwhile
  (an environment step, a data pipeline on the CPU). --model transformer
  steps rate's transformer instead of the MLP. With --turn I/N the job
  takes turns on the GPU with N - 1 others (benchlib/turns.py): it steps
  only in its own turns of --turn-s seconds, starts no step within a guard
  of a turn's end (--turn-guard-ms; by default three warm-up steps, at
  least 20 ms) and records each step's start and end ("step_spans").
  --fake-step-ms replaces the model by a sleep (no PyTorch), to try the
  orchestration without a GPU.

usage: train_steps.py rate [--seconds S] [--warmup N] [--model NAME]... [--device cuda|cpu]
       train_steps.py window [--window S] [--width N --depth N --batch N --dtype bf16|fp16|fp32]
                             [--model mlp|transformer] [--host-ms MS]
                             [--turn I/N --turn-s S --turn-guard-ms MS]
                             [--ready-file F --start-file F] [--out FILE]
                             [--fake-step-ms MS]
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/, for benchlib
from benchlib import jobutil, stats, training  # noqa: E402
from benchlib.turns import Turns  # noqa: E402

CHUNK = 10

# rate's models: (width, depth, batch, dtype, learning rate, ReLU after the last layer)
MODELS = {
    "launch_bound": (64, 64, 32, "fp32", 1e-3, True),
    "compute_bound": (4096, 4, 4096, "bf16", 1e-3, False),
}
# rate's transformer: (d_model, heads, layers, batch, sequence length)
TRANSFORMER = (1024, 16, 4, 16, 512)


def build_step(width, depth, batch, dtype, lr, relu_after_last, device, read_loss):
    """A training step of the MLP; with `read_loss` it returns loss.item()
    (a host sync), else nothing. Returns (step, info, peak allocated MiB)."""
    import torch
    from torch import nn

    if device == "cuda" and not torch.cuda.is_available():
        raise jobutil.JobError("PyTorch sees no CUDA device")
    torch.manual_seed(0)
    model = training.mlp(width, depth, relu_after_last).to(device)
    inputs = torch.randn(batch, width, device=device)
    targets = torch.randn(batch, width, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    autocast_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[dtype]

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=autocast_dtype or torch.bfloat16,
                            enabled=autocast_dtype is not None):
            outputs = model(inputs)
        loss = nn.functional.mse_loss(outputs.float(), targets)
        loss.backward()
        optimizer.step()
        if read_loss:
            return loss.item()  # the host sync: an iteration boundary for gshare
        return None

    if device == "cuda":
        info = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
        return step, info, lambda: torch.cuda.max_memory_allocated() / 2**20
    return step, {"torch": torch.__version__, "gpu": "cpu"}, lambda: 0.0


def build_transformer_step(d_model, heads, layers, batch, sequence, device):
    """A training step of a transformer encoder with AdamW, bf16 autocast,
    returning loss.item() (a host sync every step, as real loops have)."""
    import torch
    from torch import nn

    if device == "cuda" and not torch.cuda.is_available():
        raise jobutil.JobError("PyTorch sees no CUDA device")
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model,
                                       dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(device)
    inputs = torch.randn(batch, sequence, d_model, device=device)
    targets = torch.randn(batch, sequence, d_model, device=device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=torch.bfloat16):
            outputs = model(inputs)
        loss = nn.functional.mse_loss(outputs.float(), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def rate(args):
    import torch

    synchronize = torch.cuda.synchronize if args.device == "cuda" else (lambda: None)
    for name in args.model or list(MODELS) + ["transformer"]:
        if name == "transformer":
            step = build_transformer_step(*TRANSFORMER, args.device)
        else:
            step, _, _ = build_step(*MODELS[name], args.device, read_loss=False)
        for _ in range(args.warmup):
            step()
        synchronize()
        steps = 0
        start = time.perf_counter()
        while True:
            for _ in range(CHUNK):
                step()
            steps += CHUNK
            synchronize()
            elapsed = time.perf_counter() - start
            if elapsed >= args.seconds:
                break
        print(json.dumps({"benchmark": "train_steps", "model": name, "steps": steps,
                          "seconds": round(elapsed, 6),
                          "steps_per_second": round(steps / elapsed, 3)}), flush=True)


def build_fake(args):
    def step():
        time.sleep(args.fake_step_ms / 1000.0)
        return 0.0
    return step, {"torch": None, "gpu": "fake"}, lambda: 0.0


def work_on_host(ms):
    """Keeps this thread busy on the CPU for `ms` milliseconds, launching nothing."""
    until = time.perf_counter() + ms / 1000.0
    while time.perf_counter() < until:
        pass


def build_window_step(args):
    """The window's step, its info and its peak allocated MiB."""
    if args.fake_step_ms > 0:
        return build_fake(args)
    if args.model == "transformer":
        import torch

        step = build_transformer_step(*TRANSFORMER, args.device)
        info = {"torch": torch.__version__,
                "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else "cpu"}
        if args.device == "cuda":
            return step, info, lambda: torch.cuda.max_memory_allocated() / 2**20
        return step, info, lambda: 0.0
    return build_step(args.width, args.depth, args.batch, args.dtype, 1e-4,
                      False, args.device, read_loss=True)


def step_in_turns(step, host_ms, t0, end_at, turns, watch):
    """Steps in this job's turns until `end_at`; returns [[start, end], ...]
    relative to T0."""
    spans = []
    while True:
        now = time.monotonic()
        if now >= end_at:
            return spans
        if not turns.admits(now - t0):
            jobutil.sleep_until(min(t0 + turns.next_start(now - t0), end_at))
            watch.check()
            continue
        step()
        work_on_host(host_ms)
        spans.append([now - t0, time.monotonic() - t0])


def window(args):
    watch = jobutil.ParentWatch()
    began = time.monotonic()
    step, info, peak_mib = build_window_step(args)
    built = time.monotonic()
    warmup_ms = []
    for _ in range(args.warmup_steps):
        start = time.perf_counter()
        step()
        work_on_host(args.host_ms)
        warmup_ms.append((time.perf_counter() - start) * 1e3)
    warmed = time.monotonic()
    turns = None
    if args.turn:
        guard_ms = args.turn_guard_ms
        if guard_ms <= 0:
            guard_ms = max(20.0, 3 * (stats.median(warmup_ms[len(warmup_ms) // 2:]) or 0.0))
        try:
            turns = Turns.parse(args.turn, args.turn_s, guard_ms / 1000.0)
        except ValueError as error:
            raise jobutil.JobError(str(error)) from None
    t0 = jobutil.barrier(args.ready_file, args.start_file, args.barrier_timeout, watch)
    late = time.monotonic() - t0
    end_at = t0 + args.window
    ends, spans = [], None
    if turns:
        spans = step_in_turns(step, args.host_ms, t0, end_at, turns, watch)
        ends = [end for _, end in spans]
    else:
        while True:
            step()
            work_on_host(args.host_ms)
            now = time.monotonic()
            ends.append(now - t0)
            if now >= end_at:
                break
            watch.check()
    record = {
        "kind": "train", "name": args.name, "ok": True, "pid": os.getpid(),
        **info,
        "model": {"model": args.model, "width": args.width, "depth": args.depth, "batch": args.batch,
                  "dtype": args.dtype, "fake_step_ms": args.fake_step_ms, "host_ms": args.host_ms},
        "build_s": round(built - began, 3), "warmup_steps": args.warmup_steps,
        "warmup_s": round(warmed - built, 3), "late_start_s": round(late, 6),
        "window_s": args.window, "steps": len(ends),
        "peak_allocated_mib": round(peak_mib(), 1),
        "step_ends": jobutil.rounded(ends),
    }
    if turns:
        record["turns"] = turns.describe()
        record["step_spans"] = [jobutil.rounded(span) for span in spans]
    jobutil.emit(args, record)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    device_help = "cpu only to try the script where there is no GPU"

    p = commands.add_parser("rate", help="steps/s of fixed models (run_benchmarks.sh)")
    p.add_argument("--seconds", type=float, default=4.0, help="timed duration per model")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    p.add_argument("--model", action="append", choices=sorted(MODELS) + ["transformer"],
                   help="model(s) to run (default: all)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help=device_help)

    p = commands.add_parser("window", help="one job of the scheduling benchmarks")
    jobutil.add_common_arguments(p)
    p.add_argument("--window", type=float, default=15.0, help="measured seconds after T0")
    p.add_argument("--warmup-steps", type=int, default=20)
    p.add_argument("--width", type=int, default=4096)
    p.add_argument("--depth", type=int, default=6)
    p.add_argument("--batch", type=int, default=8192)
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help=device_help)
    p.add_argument("--model", default="mlp", choices=["mlp", "transformer"],
                   help="transformer: rate's transformer (--width, --depth, --batch, --dtype unused)")
    p.add_argument("--host-ms", type=float, default=0.0,
                   help="work on the host after each step, launching nothing")
    p.add_argument("--turn", default="", help="I/N: take turn I of every N (see above)")
    p.add_argument("--turn-s", type=float, default=1.0, help="length of a turn")
    p.add_argument("--turn-guard-ms", type=float, default=0.0,
                   help="start no step this close to a turn's end (0: from the warm-up steps)")
    p.add_argument("--fake-step-ms", type=float, default=0.0,
                   help="dry run: sleep this long per step instead of training")

    args = parser.parse_args()
    jobutil.run_main(lambda: rate(args) if args.command == "rate" else window(args))


if __name__ == "__main__":
    main()
