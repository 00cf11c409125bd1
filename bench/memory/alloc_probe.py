"""One job with known memory classes, for each allocator gshare supports.

usage: python3 alloc_probe.py --framework F --persistent-gib P --ephemeral-gib E
                              [--steps N] [--pieces K] [--linger S] [--ready FILE] [--start FILE]

It keeps P GiB alive for its whole run (persistent) and, every step,
allocates E GiB in K pieces, reading each piece's sum back as it is made
(a host sync mid-step, as a forward pass that reads a value does), then
frees them (ephemeral) and reads a sum of the persistent part (the loss
read that ends a step). Each step prints "step N value X": X depends only
on N, so a run alone and a run beside other jobs print the same values.
With --linger S it then stays S seconds with the persistent part alive, so
that gshare-top can be read at rest; FILE.resting (FILE of --ready) exists
for just that time.

Frameworks (F):
  torch             PyTorch's caching allocator (the default)
  torch-expandable  PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
                    (cuMemCreate/cuMemMap)
  torch-async       PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (a
                    stream-ordered pool)
  torch-nocache     PYTORCH_NO_CUDA_MEMORY_CACHING=1: cudaMalloc and
                    cudaFree for every tensor (plain cudaMalloc)
  cupy              CuPy's default memory pool
  jax               JAX/XLA's BFC allocator, grown on demand
                    (XLA_PYTHON_CLIENT_PREALLOCATE=false, its limit raised
                    to 95% of the GPU)
  jax-platform      XLA_PYTHON_CLIENT_ALLOCATOR=platform: allocates and
                    frees on demand
The environment variables are set here, before the framework loads.
"""

import argparse
import os
import sys
import time

GiB = 2**30
ENV = {
    "torch-expandable": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    "torch-async": {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync"},
    "torch-nocache": {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
    # BFC's limit is 75% of the GPU by default: the probe's peak needs more.
    "jax": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_MEM_FRACTION": "0.95"},
    "jax-platform": {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},
}


def torch_job(args, persistent_elems, piece_elems):
    import torch
    keep = torch.full((persistent_elems,), 1.0, device="cuda")
    yield
    for step in range(args.steps):
        pieces, value = [], 0.0
        for k in range(args.pieces):
            pieces.append(torch.full((piece_elems,), float(step + k), device="cuda"))
            value += float(pieces[-1][:1024].sum().item())
        del pieces
        yield value + float(keep[:1024].sum().item())


def cupy_job(args, persistent_elems, piece_elems):
    import cupy
    keep = cupy.full((persistent_elems,), 1.0, dtype=cupy.float32)
    yield
    for step in range(args.steps):
        pieces, value = [], 0.0
        for k in range(args.pieces):
            pieces.append(cupy.full((piece_elems,), float(step + k), dtype=cupy.float32))
            value += float(pieces[-1][:1024].sum())
        del pieces
        yield value + float(keep[:1024].sum())


def jax_job(args, persistent_elems, piece_elems):
    import jax.numpy as jnp
    keep = jnp.full((persistent_elems,), 1.0, dtype=jnp.float32).block_until_ready()
    yield
    for step in range(args.steps):
        pieces, value = [], 0.0
        for k in range(args.pieces):
            pieces.append(jnp.full((piece_elems,), float(step + k), dtype=jnp.float32))
            value += float(pieces[-1][:1024].sum())
        del pieces
        yield value + float(keep[:1024].sum())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--framework", required=True,
                   choices=["torch", "torch-expandable", "torch-async", "torch-nocache", "cupy", "jax",
                            "jax-platform"])
    p.add_argument("--persistent-gib", type=float, required=True)
    p.add_argument("--ephemeral-gib", type=float, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--pieces", type=int, default=4)
    p.add_argument("--linger", type=float, default=0)
    p.add_argument("--ready", default="")
    p.add_argument("--start", default="")
    args = p.parse_args()
    os.environ.update(ENV.get(args.framework, {}))
    persistent_elems = max(1024, int(args.persistent_gib * GiB / 4))
    piece_elems = max(1024, int(args.ephemeral_gib * GiB / 4 / args.pieces))
    job = {"cupy": cupy_job, "jax": jax_job, "jax-platform": jax_job}.get(args.framework, torch_job)
    steps = job(args, persistent_elems, piece_elems)
    next(steps)  # the persistent part is allocated
    if args.ready:
        open(args.ready, "w").close()
    while args.start and not os.path.exists(args.start):
        time.sleep(0.01)
    started = time.monotonic()
    try:
        for step in range(args.steps):
            print(f"step {step} value {next(steps):.1f}", flush=True)
        print(f"done seconds {time.monotonic() - started:.3f}", flush=True)
        # The job's frame is still alive, and with it the persistent part.
        if args.linger > 0:
            resting = (args.ready or "probe") + ".resting"
            open(resting, "w").close()
            time.sleep(args.linger)
            os.remove(resting)
    except Exception as e:  # an out-of-memory error of any framework
        text = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"OOM {type(e).__name__}: {text}", flush=True)
        sys.exit(3)


if __name__ == "__main__":
    main()
