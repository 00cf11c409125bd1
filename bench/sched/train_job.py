"""One PyTorch training job of the scheduling benchmarks (fair, quantum,
priority): an MLP of --depth Linear(--width, --width) layers with ReLU,
batch --batch, bf16 autocast by default, SGD; `loss.item()` every step, a
host synchronisation that gshare takes as an iteration boundary.

Defaults (width 4096, depth 6, batch 8192, bf16) make one step about 10 ms
on an H100 alone (~0.5 ms GEMM kernels) and need about 3 GiB of GPU memory.

After --warmup-steps it joins the start barrier (jobutil.py), then steps
until --window seconds after T0 and records the time each step ended,
relative to T0: steps in any sub-window, steps per second and each step's
latency follow from that list.

usage: train_job.py [--window S] [--width N --depth N --batch N --dtype bf16|fp16|fp32]
                    [--ready-file F --start-file F] [--out FILE] [--fake-step-ms MS]
Output: one JSON object {"kind": "train", "step_ends": [...], ...}.
--fake-step-ms replaces the model by a sleep (no PyTorch): only for trying
the orchestration on a machine without a GPU.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, for benchlib
from benchlib import jobutil  # noqa: E402


def build_step(args):
    import torch
    from torch import nn

    device = args.device
    if device == "cuda" and not torch.cuda.is_available():
        raise jobutil.JobError("PyTorch sees no CUDA device")
    torch.manual_seed(0)
    layers = []
    for index in range(args.depth):
        layers.append(nn.Linear(args.width, args.width))
        if index + 1 < args.depth:
            layers.append(nn.ReLU())
    model = nn.Sequential(*layers).to(device)
    inputs = torch.randn(args.batch, args.width, device=device)
    targets = torch.randn(args.batch, args.width, device=device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": None}[args.dtype]

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            outputs = model(inputs)
        loss = nn.functional.mse_loss(outputs.float(), targets)
        loss.backward()
        optimizer.step()
        return loss.item()  # the host sync: an iteration boundary for gshare

    if device == "cuda":
        info = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
        return step, info, lambda: torch.cuda.max_memory_allocated() / 2**20
    return step, {"torch": torch.__version__, "gpu": "cpu"}, lambda: 0.0


def build_fake(args):
    def step():
        time.sleep(args.fake_step_ms / 1000.0)
        return 0.0
    return step, {"torch": None, "gpu": "fake"}, lambda: 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    jobutil.add_common_arguments(parser)
    parser.add_argument("--window", type=float, default=15.0, help="measured seconds after T0")
    parser.add_argument("--warmup-steps", type=int, default=20)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--dtype", default="bf16", choices=["bf16", "fp16", "fp32"])
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu only to try the script where there is no GPU")
    parser.add_argument("--fake-step-ms", type=float, default=0.0,
                        help="dry run: sleep this long per step instead of training")
    args = parser.parse_args()

    def body():
        watch = jobutil.ParentWatch()
        began = time.monotonic()
        step, info, peak_mib = build_fake(args) if args.fake_step_ms > 0 else build_step(args)
        built = time.monotonic()
        for _ in range(args.warmup_steps):
            step()
        warmed = time.monotonic()
        t0 = jobutil.barrier(args.ready_file, args.start_file, args.barrier_timeout, watch)
        late = time.monotonic() - t0
        end_at = t0 + args.window
        ends = []
        while True:
            step()
            now = time.monotonic()
            ends.append(now - t0)
            if now >= end_at:
                break
            watch.check()
        record = {
            "kind": "train", "name": args.name, "ok": True, "pid": os.getpid(),
            **info,
            "model": {"width": args.width, "depth": args.depth, "batch": args.batch,
                      "dtype": args.dtype, "fake_step_ms": args.fake_step_ms},
            "build_s": round(built - began, 3), "warmup_steps": args.warmup_steps,
            "warmup_s": round(warmed - built, 3), "late_start_s": round(late, 6),
            "window_s": args.window, "steps": len(ends),
            "peak_allocated_mib": round(peak_mib(), 1),
            "step_ends": jobutil.rounded(ends),
        }
        jobutil.emit(args, record)

    jobutil.run_main(body)


if __name__ == "__main__":
    main()
