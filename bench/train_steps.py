"""PyTorch training steps per second, natively or under LD_PRELOAD=libgshare.so.

Two models, chosen to bracket real jobs:
  launch_bound   64 Linear(64, 64) + ReLU layers, batch 32: ~400 tiny kernels
                 a step, so the step rate is set by the host's cost per launch
                 (PyTorch's dispatch plus the driver call gshare hooks);
  compute_bound  4 Linear(4096, 4096) layers, batch 4096, bf16 autocast: a
                 few large GEMMs, so the step rate is set by the GPU.
Each runs a fixed number of warmup steps, then steps in chunks of 10 (with a
synchronize after each chunk) until --seconds have passed.

usage: train_steps.py [--seconds S] [--warmup N] [--model NAME]... [--device cuda|cpu]
Prints one JSON line per model:
  {"benchmark":"train_steps","model":NAME,"steps":N,"seconds":S,"steps_per_second":R}
"""

import argparse
import json
import time

import torch
from torch import nn

CHUNK = 10


def launch_bound(device):
    layers = []
    for _ in range(64):
        layers += [nn.Linear(64, 64), nn.ReLU()]
    return nn.Sequential(*layers).to(device), torch.randn(32, 64, device=device), None


def compute_bound(device):
    model = nn.Sequential(nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 4096), nn.ReLU(), nn.Linear(4096, 4096)).to(device)
    return model, torch.randn(4096, 4096, device=device), torch.bfloat16


MODELS = {"launch_bound": launch_bound, "compute_bound": compute_bound}


def make_step(name, device):
    torch.manual_seed(0)
    model, inputs, autocast_dtype = MODELS[name](device)
    with torch.no_grad():
        targets = torch.randn_like(model(inputs))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device, dtype=autocast_dtype or torch.bfloat16,
                            enabled=autocast_dtype is not None):
            loss = nn.functional.mse_loss(model(inputs).float(), targets)
        loss.backward()
        optimizer.step()

    return step


def measure(name, device, seconds, warmup):
    synchronize = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    step = make_step(name, device)
    for _ in range(warmup):
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
        if elapsed >= seconds:
            break
    return {"benchmark": "train_steps", "model": name, "steps": steps,
            "seconds": round(elapsed, 6), "steps_per_second": round(steps / elapsed, 3)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="timed duration per model")
    parser.add_argument("--warmup", type=int, default=30, help="untimed steps first")
    parser.add_argument("--model", action="append", choices=sorted(MODELS),
                        help="model(s) to run (default: all)")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"],
                        help="cpu only to try the script where there is no GPU")
    args = parser.parse_args()
    for name in args.model or list(MODELS):
        print(json.dumps(measure(name, args.device, args.seconds, args.warmup)), flush=True)


if __name__ == "__main__":
    main()
