"""CUDA tensors shared between PyTorch processes while gshare may page them.

Under GSHARE_PAGING=on, cuMemAlloc's large allocations are gshare's own
(reserved address space and physical memory it maps), which the driver's
cuIpcGetMemHandle cannot export; gshare exports them itself
(allocator/memory_export.h). torch.multiprocessing shares a CUDA tensor
through cudaIpcGetMemHandle / cudaIpcOpenMemHandle, so this runs what a
program that hands tensors to worker processes does:
  - the parent sends a 256 MiB tensor to a spawned child (under the
    preload too); the child checks every element, adds 1 in place and
    sends back a tensor of its own;
  - the parent sees the child's writes in its tensor, and the child's
    tensor's values.
Each direction is one export and one import of movable memory.
"""

import sys

import torch
import torch.multiprocessing as mp

ELEMENTS = 64 * 1024 * 1024  # 256 MiB of float32: one movable segment


def child(inbox, outbox):
    x = inbox.get()
    expected = torch.arange(ELEMENTS, device="cuda", dtype=torch.float32)
    ok = bool(torch.equal(x, expected))
    x.add_(1)
    torch.cuda.synchronize()
    y = torch.full((ELEMENTS // 2,), 7.0, device="cuda")
    outbox.put((ok, y))
    inbox.get()  # the parent is done with y


def main():
    mp.set_start_method("spawn")
    inbox, outbox = mp.Queue(), mp.Queue()
    worker = mp.Process(target=child, args=(inbox, outbox))
    worker.start()
    x = torch.arange(ELEMENTS, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    inbox.put(x)
    ok, y = outbox.get(timeout=120)
    y_ok = bool((y == 7.0).all()) and y.numel() == ELEMENTS // 2
    del y
    inbox.put(None)
    worker.join(timeout=60)
    x_ok = bool(torch.equal(x, torch.arange(ELEMENTS, device="cuda", dtype=torch.float32) + 1))
    print(f"child read the parent's tensor: {ok}; parent sees the child's writes: {x_ok}; "
          f"parent reads the child's tensor: {y_ok}; child exit code {worker.exitcode}")
    if not (ok and x_ok and y_ok and worker.exitcode == 0):
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
