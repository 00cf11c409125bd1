"""PyTorch under a 4 GiB gshare quota (GSHARE_MEM_LIMIT=4GiB), with whichever
allocator PYTORCH_CUDA_ALLOC_CONF selects: the native caching allocator,
expandable segments (cuMemCreate/cuMemMap) or cudaMallocAsync (memory pools).

Checks, in order:
  (a) the quota looks like a 4 GiB GPU: torch.cuda.mem_get_info() and the
      device properties say 4 GiB total, and free <= total;
  (b) a small MLP trains, its loss falling;
  (c) a tensor that is under the quota but over what is left of it raises
      torch.OutOfMemoryError (not a crash), and training then goes on;
  (d) a 1 GiB tensor, which fits, still allocates and is usable;
  (e) gshare-top shows this pid with quota 4 GiB, used <= quota, and at
      least the memory PyTorch says its live tensors hold.

Why: frameworks size themselves from the reported capacity, and PyTorch
answers CUDA_ERROR_OUT_OF_MEMORY by emptying its cache, retrying, then
raising OutOfMemoryError, so a quota must behave like a smaller GPU.
"""

import math
import os
import time

import torch
from torch import nn

from gshare_gpu import GiB, MiB, describe_process, top_process

QUOTA = 4 * GiB
# The context-memory estimate is refreshed once a second and may lag.
USED_TOLERANCE = 64 * MiB


def make_training():
    """An MLP of ~55M parameters (~0.8 GiB with gradients and Adam state)
    fitting random targets on a fixed batch, so its loss must fall."""
    torch.manual_seed(0)
    width = 4096
    model = nn.Sequential(
        nn.Linear(1024, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, width), nn.ReLU(),
        nn.Linear(width, 64),
    ).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    inputs = torch.randn(512, 1024, device="cuda")
    targets = torch.randn(512, 64, device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    return step


def train(step, steps, label):
    losses = []
    for i in range(steps):
        losses.append(step())
        if i % 10 == 0 or i == steps - 1:
            print(f"  {label} step {i:3d}: loss {losses[-1]:.4f}")
    assert all(math.isfinite(loss) for loss in losses), f"{label}: non-finite loss {losses}"
    return losses


def main():
    assert os.environ.get("GSHARE_MEM_LIMIT") == "4GiB", (
        "run this through run_gpu_test.sh with GSHARE_MEM_LIMIT=4GiB "
        f"(got {os.environ.get('GSHARE_MEM_LIMIT')!r})")
    print(f"PYTORCH_CUDA_ALLOC_CONF={os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '(unset)')}, "
          f"allocator backend {torch.cuda.get_allocator_backend()}")

    # (a) The virtual view.
    free, total = torch.cuda.mem_get_info()
    properties = torch.cuda.get_device_properties(0)
    print(f"(a) {properties.name}: mem_get_info free {free / MiB:.1f} MiB, total "
          f"{total / MiB:.1f} MiB; device properties total_memory "
          f"{properties.total_memory / MiB:.1f} MiB")
    assert total == QUOTA, f"mem_get_info total is {total} bytes, expected the quota {QUOTA}"
    assert properties.total_memory == QUOTA, (
        f"get_device_properties(0).total_memory is {properties.total_memory} bytes, "
        f"expected the quota {QUOTA}")
    assert 0 < free <= total, f"mem_get_info free {free} is not in (0, total={total}]"

    # (b) Training.
    step = make_training()
    losses = train(step, 50, "(b)")
    assert losses[-1] < 0.8 * losses[0], (
        f"loss did not fall over 50 steps: {losses[0]:.4f} -> {losses[-1]:.4f}")

    # (c) Over what is left of the quota, though under the quota itself.
    too_big = int(3.5 * GiB)
    held = torch.cuda.memory_allocated()
    free, _ = torch.cuda.mem_get_info()
    print(f"(c) PyTorch holds {held / MiB:.1f} MiB of tensors; gshare reports "
          f"{free / MiB:.1f} MiB free; asking for {too_big / MiB:.1f} MiB")
    assert too_big > QUOTA - held, (
        f"test setup: {too_big} bytes would fit beside {held} bytes of tensors in {QUOTA}")
    try:
        oversized = torch.empty(too_big, dtype=torch.uint8, device="cuda")
        oversized.fill_(1)
        torch.cuda.synchronize()
        raise AssertionError(
            f"allocating {too_big} bytes beside {held} bytes of tensors under a {QUOTA}-byte "
            "quota succeeded; expected torch.OutOfMemoryError")
    except torch.OutOfMemoryError as error:
        print(f"(c) torch.OutOfMemoryError, as expected: {str(error).splitlines()[0]}")
    oversized = None
    more = train(step, 20, "(c) after the error")
    assert more[-1] < losses[0], (
        f"training after the error did not go on: loss {more[-1]:.4f}, "
        f"first loss {losses[0]:.4f}")

    # (d) What fits still allocates.
    fits = torch.empty(GiB, dtype=torch.uint8, device="cuda")
    fits.fill_(7)
    # min/max reduce to scalars: a sum with dtype=int64 would first make an
    # 8 GiB int64 copy of the tensor, over the quota.
    assert int(fits.min()) == 7 and int(fits.max()) == 7, (
        "the 1 GiB tensor does not hold what was written")
    print(f"(d) a 1 GiB tensor allocated and filled; PyTorch holds "
          f"{torch.cuda.memory_allocated() / MiB:.1f} MiB of tensors, reserves "
          f"{torch.cuda.memory_reserved() / MiB:.1f} MiB")

    # (e) gshare's own view, after its once-a-second refreshes.
    torch.cuda.synchronize()
    time.sleep(1.5)
    live = torch.cuda.memory_allocated()
    _, process = top_process(os.getpid())
    print(f"(e) gshare-top: {describe_process(process)}")
    assert process["quota_bytes"] == QUOTA, (
        f"gshare-top quota_bytes {process['quota_bytes']}, expected {QUOTA}")
    assert process["used_bytes"] <= QUOTA + USED_TOLERANCE, (
        f"gshare-top used_bytes {process['used_bytes']} exceeds the quota {QUOTA} "
        f"(+{USED_TOLERANCE} tolerance)")
    assert process["allocated_bytes"] >= live, (
        f"gshare counts {process['allocated_bytes']} bytes allocated, less than the "
        f"{live} bytes PyTorch's live tensors hold: some allocation path is not counted")
    del fits
    print("PASS")


if __name__ == "__main__":
    main()
