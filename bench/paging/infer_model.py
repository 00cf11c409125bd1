"""One inference "model" of the paging benchmark: --weights-gib of fp16
weight matrices (1 GiB each, 16384 x 32768), built once; a request
multiplies one input row by every matrix and reads the sum back
(`.item()`), so it touches all of the model's weights.

Requests are numbered 0..--requests-1 across --models models; model m
serves those with r mod models == m.
  --all       every model is live: once all are built (files ready-M
              under --turns), request r is issued when request r-1's answer
              exists (a file r-1.done), so the models take turns, one
              request at a time.
  --only-own  this model alone: its own requests back to back (the native
              baseline, where the models could not all fit together).
Each answer prints "request R model M LATENCY_MS" (issue to result).
"""

import argparse
import os
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", type=int, required=True)
    ap.add_argument("--models", type=int, required=True)
    ap.add_argument("--weights-gib", type=float, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--turns", required=True)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--all", action="store_true")
    mode.add_argument("--only-own", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(args.model)
    count = max(1, int(round(args.weights_gib)))
    weights = [torch.randn(16384, 32768, dtype=torch.float16, device="cuda") * 0.01 for _ in range(count)]
    x = torch.randn(1, 16384, dtype=torch.float16, device="cuda")
    torch.cuda.synchronize()

    def serve():
        total = torch.zeros((), dtype=torch.float32, device="cuda")
        for w in weights:
            total += (x @ w).float().sum()
        return total.item()

    # Requests start once every model is built.
    open(os.path.join(args.turns, f"ready-{args.model}"), "w").close()
    while args.all and not all(os.path.exists(os.path.join(args.turns, f"ready-{m}")) for m in range(args.models)):
        time.sleep(0.01)
    mine = [r for r in range(args.requests) if r % args.models == args.model]
    for r in mine:
        if args.all and r > 0:
            previous = os.path.join(args.turns, f"{r - 1}.done")
            while not os.path.exists(previous):
                time.sleep(0.001)
        issued = time.monotonic()
        value = serve()
        latency_ms = (time.monotonic() - issued) * 1e3
        open(os.path.join(args.turns, f"{r}.done"), "w").close()
        print(f"request {r} model {args.model} {latency_ms:.3f} value {value:.4f}", flush=True)


if __name__ == "__main__":
    main()
