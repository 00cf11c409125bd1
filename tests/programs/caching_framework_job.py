"""A training loop with a caching allocator, as PyTorch has, over the driver
API through ctypes: for the multi-process tests of gshare's framework-cache
handling (allocator/framework_caches.h), where no real PyTorch exists.

A module named `torch` is put in sys.modules with the calls gshare makes:
torch.cuda.is_initialized(), empty_cache(), memory_allocated() and
memory_reserved(). Like PyTorch's allocator, the job keeps freed segments
in a cache and reuses them; only empty_cache() gives them back to the
driver. Its weights come from the cache too.

usage: caching_framework_job.py ITERATIONS P_MIB E_MIB CHUNKS KERNEL_US [chunksync]
Prints "done ITERATIONS" or "error CODE at I", and exits 0 or 1. With
`chunksync` it also syncs after each activation chunk, with the chunks so
far alive, as a loop that reads a value back mid-iteration does. With EMPTY_CACHE_MS set, empty_cache()
takes that much longer, as PyTorch's does with the syncs of its frees. With
LINGER_S set, it stays up to that long after "done", busy in Python (as a
job evaluating on the CPU), its weights and cache kept: with LINGER_READY
set it creates that file once it lingers, and with LINGER_RELEASE set it
stops lingering as soon as that file exists (the test's release). With FIRST_STEP_PAUSE_S
set, the first iteration pauses that long in Python after its last chunk,
all its memory alive (a slow first forward pass). With MID_STEP_PAUSE_S
set, each chunk is followed by a launch (a layer's), and every iteration
pauses that long after a temporary of half a chunk has gone back to the
cache (a step busy on the CPU mid-way). With SETUP_SYNC set, it first syncs a few times with
only a small block cached, before its weights exist. With FRAMEWORK_POOL=1
it is PyTorch's cudaMallocAsync backend instead: blocks come from the
device's stream-ordered pool, which keeps all that is freed (release
threshold UINT64_MAX); empty_cache() trims the pool; memory_reserved() is
the pool's reserved size; an allocation failure is final. With
FRAMEWORK_SILENT=1 it has no memory_allocated() or memory_reserved(): a
cache gshare can empty but not ask. With EXIT_SLOW_S set, the
interpreter's teardown takes that much longer, its cache still held, as
PyTorch's does (an object of the main module sleeps in __del__, once
Python is finalising and runs none of its pending calls); with
EXIT_SLOW_READY set it creates that file as the sleep begins. With
EXIT_KEEP_MIB set, that much of its last iteration stays alive to the end
(as a PyTorch segment that a small live tensor keeps from empty_cache()).
With CACHE_STATS set, it ends by printing to stderr "cache misses M emptied
K mid-iteration J questions Q": the takes that went to the driver, the
empty_cache() calls that gave something back, how many of those came while
an iteration that had launched work had its blocks alive, and how often
gshare asked for its figures (memory_allocated()).
"""

import ctypes
import os
import sys
import time
import types

cuda = ctypes.CDLL("libcuda.so.1")
for name in ("cuMemAlloc_v2", "cuMemFree_v2", "cuLaunchKernel", "cuCtxSynchronize",
             "cuMemAllocAsync", "cuMemFreeAsync", "cuDeviceGetDefaultMemPool",
             "cuMemPoolSetAttribute", "cuMemPoolGetAttribute", "cuMemPoolTrimTo"):
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
        self.allocated = 0  # in live "tensors"
        self.reserved = 0   # taken from the driver
        self.misses = 0     # takes that went to the driver
        self.emptied = 0    # empty() calls that gave something back
        self.emptied_mid = 0  # of them, calls made mid-iteration (see empty_cache)
        # An iteration's blocks are alive and it has launched work: a step
        # begins, as gshare can see it, at its first launch. Before that,
        # a block taken from the cache is no driver call, and a request for
        # the cache answered as that launch waits for its turn finds the
        # job between iterations by all it shows; the framework keeps that
        # block and allocates the rest anew.
        self.in_iteration = False

    def take(self, size):
        for i, (pointer, bytes_) in enumerate(self.free):
            if bytes_ == size:
                self.allocated += size
                return self.free.pop(i)[0]
        self.misses += 1
        pointer = ctypes.c_uint64()
        result = cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size))
        if result != 0:
            # PyTorch's answer to an allocation failure: empty the cache, retry once.
            self.empty(own=True)
            result = cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(size))
            if result != 0:
                raise MemoryError(result)
        self.allocated += size
        self.reserved += size
        return pointer.value

    def give(self, pointer, size):
        self.allocated -= size
        self.free.append((pointer, size))

    def empty(self, own=False):
        if self.free and os.environ.get("EMPTY_CACHE_MS"):
            time.sleep(float(os.environ["EMPTY_CACHE_MS"]) / 1000)
        if self.free:
            self.emptied += 1
            # Asked from outside (gshare) while an iteration's blocks live:
            # PyTorch would then carve its next blocks from what survives,
            # and may no longer fit the iteration's largest.
            self.emptied_mid += not own and self.in_iteration
        for pointer, size in self.free:
            cuda.cuMemFree_v2(ctypes.c_uint64(pointer))
            self.reserved -= size
        self.free = []


class Pool:
    """The cudaMallocAsync backend: the pool is the cache."""

    RELEASE_THRESHOLD, RESERVED_MEM_CURRENT = 4, 5

    def __init__(self):
        self.pool = None
        self.allocated = 0

    def _pool(self):
        if self.pool is None:
            self.pool = ctypes.c_void_p()
            check(cuda.cuDeviceGetDefaultMemPool(ctypes.byref(self.pool), 0), "cuDeviceGetDefaultMemPool")
            keep_all = ctypes.c_uint64(2**64 - 1)
            check(cuda.cuMemPoolSetAttribute(self.pool, self.RELEASE_THRESHOLD, ctypes.byref(keep_all)),
                  "cuMemPoolSetAttribute")
        return self.pool

    @property
    def reserved(self):
        value = ctypes.c_uint64()
        check(cuda.cuMemPoolGetAttribute(self._pool(), self.RESERVED_MEM_CURRENT, ctypes.byref(value)),
              "cuMemPoolGetAttribute")
        return value.value

    def take(self, size):
        self._pool()
        pointer = ctypes.c_uint64()
        result = cuda.cuMemAllocAsync(ctypes.byref(pointer), ctypes.c_size_t(size), None)
        if result != 0:
            raise MemoryError(result)
        self.allocated += size
        return pointer.value

    def give(self, pointer, size):
        check(cuda.cuMemFreeAsync(ctypes.c_uint64(pointer), None), "cuMemFreeAsync")
        self.allocated -= size

    def empty(self):
        check(cuda.cuCtxSynchronize(), "sync")
        check(cuda.cuMemPoolTrimTo(self._pool(), ctypes.c_size_t(0)), "cuMemPoolTrimTo")


class SlowTeardown:
    """Deleted with the main module's names, while Python is finalising."""

    def __init__(self, seconds, ready):
        self.seconds, self.ready, self.sleep, self.open = seconds, ready, time.sleep, open

    def __del__(self):
        if self.ready:
            self.open(self.ready, "w").close()
        self.sleep(self.seconds)


if os.environ.get("EXIT_SLOW_S"):
    slow_teardown = SlowTeardown(float(os.environ["EXIT_SLOW_S"]), os.environ.get("EXIT_SLOW_READY"))

cache = Pool() if os.environ.get("FRAMEWORK_POOL") == "1" else Cache()
questions = 0  # memory_allocated() calls: gshare's questions


def memory_allocated(device=None):
    global questions
    questions += 1
    return cache.allocated


torch = types.ModuleType("torch")
torch.cuda = types.SimpleNamespace(is_initialized=lambda: True, empty_cache=cache.empty,
                                   memory_allocated=memory_allocated,
                                   memory_reserved=lambda device=None: cache.reserved)
if os.environ.get("FRAMEWORK_SILENT") == "1":  # an allocator that cannot be asked
    del torch.cuda.memory_allocated, torch.cuda.memory_reserved
sys.modules["torch"] = torch


def cache_state():
    """What the framework holds, for a failure's message."""
    if isinstance(cache, Pool):
        return f"pool, allocated {cache.allocated >> 20} MiB"
    free = [size >> 20 for _, size in cache.free]
    return (f"allocated {cache.allocated >> 20} MiB, reserved {cache.reserved >> 20} MiB, "
            f"free blocks {free} MiB, misses {cache.misses}, emptied {cache.emptied}")


def main():
    iterations, p_mib, e_mib, chunks, kernel_us = (int(x) for x in sys.argv[1:6])
    chunk_sync = sys.argv[6:7] == ["chunksync"]
    mid_step_pause = float(os.environ.get("MID_STEP_PAUSE_S", "0"))
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
    if os.environ.get("SETUP_SYNC"):
        # A set-up that syncs with a small block cached before the weights
        # exist, as a model's construction does: the framework's first
        # answers show almost nothing in use.
        block = cache.take(1 << 20)
        check(cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None), "launch")
        cache.give(block, 1 << 20)
        for _ in range(3):
            check(cuda.cuCtxSynchronize(), "sync")
            time.sleep(0.02)
    try:
        cache.take(p_mib << 20)  # the weights, kept
    except MemoryError as e:
        print(f"error {e.args[0]} at weights", flush=True)
        return 1
    chunk = (e_mib << 20) // chunks
    # Over a pool, each iteration also has a small block, the loss, made
    # with the last activation chunk: the pool grows by a whole chunk for
    # it, so the framework's first answer that shows a cache comes with all
    # of the iteration's memory alive.
    small = (1 << 20) if isinstance(cache, Pool) else 0
    def launch_in_step():
        check(cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None), "launch")
        cache.in_iteration = True

    for i in range(iterations):
        live = []
        try:
            for c in range(chunks):
                live.append((cache.take(chunk), chunk))
                if small and c == chunks - 1:
                    live.append((cache.take(small), small))
                if chunk_sync or mid_step_pause:  # a forward pass's layer
                    launch_in_step()
                if chunk_sync:  # the forward pass reads a value back
                    check(cuda.cuCtxSynchronize(), "sync")
        except MemoryError as e:
            print(f"error {e.args[0]} at {i}", flush=True)
            print(f"cache at the error: {cache_state()}", file=sys.stderr, flush=True)
            return 1
        if i == 0:
            pause_until = time.monotonic() + float(os.environ.get("FIRST_STEP_PAUSE_S", "0"))
            while time.monotonic() < pause_until:
                time.sleep(0.01)
        if mid_step_pause:
            # A temporary of the step goes back to the cache, and the step
            # goes on in Python with its chunks alive.
            cache.give(cache.take(chunk // 2), chunk // 2)
            pause_until = time.monotonic() + mid_step_pause
            while time.monotonic() < pause_until:
                time.sleep(0.01)
        for _ in range(2):
            launch_in_step()
        for pointer, size in live:  # the backward pass frees the activations
            cache.give(pointer, size)
        cache.in_iteration = False
        check(cuda.cuCtxSynchronize(), "sync")  # the loss.item() of the loop
    if os.environ.get("EXIT_KEEP_MIB"):
        kept = cache.take(int(os.environ["EXIT_KEEP_MIB"]) << 20)  # noqa: F841 (alive to the end)
    print(f"done {iterations}", flush=True)
    if os.environ.get("CACHE_STATS") and isinstance(cache, Cache):
        print(f"cache misses {cache.misses} emptied {cache.emptied} mid-iteration {cache.emptied_mid} "
              f"questions {questions}", file=sys.stderr, flush=True)
    linger_until = time.monotonic() + float(os.environ.get("LINGER_S", "0"))
    ready, release = os.environ.get("LINGER_READY"), os.environ.get("LINGER_RELEASE")
    if ready and time.monotonic() < linger_until:
        open(ready, "w").close()
    while time.monotonic() < linger_until and not (release and os.path.exists(release)):
        time.sleep(0.01)
    return 0


if __name__ == "__main__":
    sys.exit(main())
