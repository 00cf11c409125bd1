"""A training loop with a caching allocator, as PyTorch has, over the driver
API through ctypes: for the multi-process tests of gshare's framework-cache
handling (allocator/framework_caches.h), where no real PyTorch exists.

A module named `torch` is put in sys.modules with the two calls gshare
makes: torch.cuda.is_initialized() and torch.cuda.empty_cache(). Like
PyTorch's allocator, the loop keeps freed "activation" segments in a cache
and reuses them; only empty_cache() gives them back to the driver.

usage: caching_framework_job.py ITERATIONS P_MIB E_MIB CHUNKS KERNEL_US
Prints "done ITERATIONS" or "error CODE at I", and exits 0 or 1. With
EMPTY_CACHE_MS set, empty_cache() takes that much longer, as PyTorch's does
with the syncs of its frees.
"""

import ctypes
import os
import sys
import time
import types

cuda = ctypes.CDLL("libcuda.so.1")
for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuLaunchKernel", "cuCtxSynchronize"):
    getattr(cuda, name).restype = ctypes.c_int

SPIN_PTX = b"""
.version 7.0
.target sm_70
.address_size 64
.visible .entry gshare_spin(.param .u64 ns)
{
  ret;
}
"""


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed with {result}")


class Cache:
    """Freed segments, kept for reuse until empty_cache()."""

    def __init__(self):
        self.free = []

    def take(self, size):
        for i, (pointer, bytes_) in enumerate(self.free):
            if bytes_ == size:
                return self.free.pop(i)[0]
        pointer = ctypes.c_uint64()
        result = cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size))
        if result != 0:
            # PyTorch's answer to an allocation failure: empty the cache, retry once.
            self.empty()
            result = cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size))
            if result != 0:
                raise MemoryError(result)
        return pointer.value

    def give(self, pointer, size):
        self.free.append((pointer, size))

    def empty(self):
        if self.free and os.environ.get("EMPTY_CACHE_MS"):
            time.sleep(float(os.environ["EMPTY_CACHE_MS"]) / 1000)
        for pointer, _ in self.free:
            cuda.cuMemFree_v2(ctypes.c_uint64(pointer))
        self.free = []


cache = Cache()
torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_initialized=lambda: True, empty_cache=cache.empty)
sys.modules["torch"] = torch


def main():
    iterations, p_mib, e_mib, chunks, kernel_us = (int(x) for x in sys.argv[1:6])
    check(cuda.cuInit(0), "cuInit")
    device = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
    context = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(context), "cuCtxSetCurrent")
    module = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(module), SPIN_PTX), "cuModuleLoadData")
    function = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(function), module, b"gshare_spin_0"), "cuModuleGetFunction")
    ns = ctypes.c_uint64(kernel_us * 1000)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(ns), ctypes.c_void_p))
    weights = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(weights), ctypes.c_size_t(p_mib << 20)), "weights")
    chunk = (e_mib << 20) // chunks
    for i in range(iterations):
        try:
            live = [cache.take(chunk) for _ in range(chunks)]
        except MemoryError as e:
            print(f"error {e.args[0]} at {i}", flush=True)
            return 1
        for _ in range(2):
            check(cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None), "launch")
        for pointer in live:  # the backward pass frees the activations
            cache.give(pointer, chunk)
        check(cuda.cuCtxSynchronize(), "sync")  # the loss.item() of the loop
    print(f"done {iterations}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
