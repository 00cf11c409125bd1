"""A deterministic PyTorch training job for the memory-sharing benchmarks.

Its memory has the two classes gshare tells apart:
  persistent  an MLP of `--depth` Linear(width, width) layers with Adam, and
              a frozen "memory bank" of `--bank-gib` GiB read every step
  ephemeral   activations of a batch of `--batch` rows: they grow with the
              batch, are freed after the step, and stay in PyTorch's cache

Every step prints "step N loss X" with X to 6 decimals; the data of step N
depend only on (seed, N), and deterministic algorithms are on, so the same
job prints the same losses alone, co-located or under gshare. With --log,
each step also appends {"t", "step", "reserved", "allocated"} (monotonic
seconds, PyTorch's reserved and allocated bytes) to a JSON-lines file.
"""

import argparse
import json
import os
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/
from benchlib import training  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seconds", type=float, default=0, help="stop after this long instead (0: steps)")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=65536)
    p.add_argument("--bank-gib", type=float, default=0.0)
    p.add_argument("--bank-in-place", action="store_true",
                   help="fill the bank in place (no temporary of its size, which PyTorch would "
                        "keep cached: a second bank's worth of free memory)")
    p.add_argument("--scratch-gib", type=float, default=0.0,
                   help="per step, a buffer of this many GiB written once and freed with the "
                        "activations: a large ephemeral peak for a short step")
    p.add_argument("--log", default="")
    p.add_argument("--ready", default="", help="file created once the model is built")
    p.add_argument("--start", default="", help="wait for this file before the first step")
    p.add_argument("--sync", choices=["step", "piece", "never"], default="step",
                   help="read the loss back every step, also after every layer's forward, "
                        "or only once all steps are done")
    p.add_argument("--linger", type=float, default=0, help="seconds to stay after the steps")
    args = p.parse_args()

    torch.use_deterministic_algorithms(True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    torch.manual_seed(args.seed)
    model = training.mlp(args.width, args.depth, relu_after_last=True, out_features=16).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    bank_rows = int(args.bank_gib * 2**30 / (4 * args.width))
    if args.bank_in_place:
        bank = torch.empty(max(bank_rows, 1), args.width, device=device).normal_(0.0, 0.01)
    else:
        bank = torch.randn(max(bank_rows, 1), args.width, device=device) * 0.01
    if args.ready:
        open(args.ready, "w").close()
    while args.start and not os.path.exists(args.start):
        time.sleep(0.01)
    print(f"gpu_total {torch.cuda.mem_get_info()[1]}", flush=True)
    log = open(args.log, "a") if args.log else None
    generator = torch.Generator(device=device)
    started = time.monotonic()
    pending = []  # --sync never: the losses, read back at the end
    steps = args.steps if args.seconds <= 0 else 1 << 40
    for step in range(steps):
        if args.seconds > 0 and time.monotonic() - started >= args.seconds:
            break
        generator.manual_seed(args.seed * 100003 + step)
        x = torch.randn(args.batch, args.width, device=device, generator=generator)
        y = torch.randint(0, 16, (args.batch,), device=device, generator=generator)
        rows = torch.randint(0, bank.shape[0], (args.batch,), device=device, generator=generator)
        x = x + bank.index_select(0, rows)
        scratch = None
        if args.scratch_gib > 0:
            scratch = torch.empty(int(args.scratch_gib * 2**30), dtype=torch.uint8, device=device)
            scratch.fill_(step & 0xFF)
        if args.sync == "piece":
            out = x
            for layer in model:
                out = layer(out)
                if isinstance(layer, torch.nn.Linear):
                    out[0, 0].item()
        else:
            out = model(x)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        del x, y, rows, out, scratch
        if args.sync == "never":
            pending.append(loss.detach())
            continue
        value = loss.item()
        print(f"step {step} loss {value:.6f}", flush=True)
        if log:
            log.write(json.dumps({"t": time.monotonic(), "step": step,
                                  "reserved": torch.cuda.memory_reserved(),
                                  "allocated": torch.cuda.memory_allocated()}) + "\n")
            log.flush()
    for step, loss in enumerate(pending):
        print(f"step {step} loss {loss.item():.6f}", flush=True)
    time.sleep(args.linger)
    print(f"done peak_reserved {torch.cuda.max_memory_reserved()} "
          f"peak_allocated {torch.cuda.max_memory_allocated()} t {time.monotonic():.6f}", flush=True)


if __name__ == "__main__":
    try:
        main()
    except torch.cuda.OutOfMemoryError as e:
        print(f"OOM {str(e).splitlines()[0]}", flush=True)
        sys.exit(3)
