"""A Triton kernel under gshare: it runs correctly and its launches are counted.

Triton's launcher does not go through cudart: it dlopens libcuda.so.1 and
finds cuLaunchKernelEx with dlsym. gshare must catch that path (its dlsym
hook), or Triton kernels would escape the launch count, and later the
launch gate. The kernel must live in a real .py file: Triton reads the
source of @triton.jit functions, which `python -c` does not have.
"""

import os

import torch
import triton
import triton.language as tl

from gshare_gpu import launches

LAUNCHES = 200


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def main():
    n = 1_000_003  # not a multiple of the block: the mask matters
    x = torch.rand(n, device="cuda")
    y = torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)

    # The first call compiles; the counted calls below only launch.
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y), "Triton's vector add differs from torch's"
    print(f"Triton {triton.__version__}: vector add of {n} floats matches torch")

    out.zero_()
    torch.cuda.synchronize()
    pid = os.getpid()
    before = launches(pid)
    for _ in range(LAUNCHES):
        add_kernel[grid](x, y, out, n, BLOCK_SIZE=1024)
    torch.cuda.synchronize()
    after = launches(pid)
    print(f"gshare counted {after - before} launches over {LAUNCHES} Triton launches "
          f"({before} -> {after})")
    assert torch.equal(out, x + y), "after the counted launches, the result differs from torch's"
    assert after - before >= LAUNCHES, (
        f"gshare counted {after - before} launches for {LAUNCHES} Triton launches: "
        "Triton's cuLaunchKernelEx (found by dlsym) is not intercepted")
    print("PASS")


if __name__ == "__main__":
    main()
