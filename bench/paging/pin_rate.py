"""How fast host memory can be pinned for page-outs, by four ways, through
the driver API (ctypes on libcuda, no framework):

  host_alloc            one cuMemHostAlloc of --gib GiB (what the pager does)
  host_alloc_parallel   the same bytes as --threads cuMemHostAlloc calls
                        made at once from as many threads
  register_populated    mmap, MAP_POPULATE, then cuMemHostRegister
  register_hugepages    mmap, madvise(MADV_HUGEPAGE), touched page by page
                        from --threads threads, then cuMemHostRegister

Each: the seconds to pinned memory (populating included) and GB/s (1e9
bytes); the host-to-device copy rate from that memory is printed beside.
usage: pin_rate.py [--gib N] [--threads N]. One JSON object on stdout.
"""

import argparse
import ctypes
import json
import mmap
import threading
import time

MADV_HUGEPAGE = 14
PROT_RW = mmap.PROT_READ | mmap.PROT_WRITE
MAP_PRIVATE_ANON = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
MAP_POPULATE = 0x8000


def in_threads(work, count):
    """work(i) for i in 0..count-1, each on a thread of its own, all at once."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def check(result, what):
    if result != 0:
        raise RuntimeError(f"{what} failed: CUresult {result}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=8)
    ap.add_argument("--threads", type=int, default=8)
    args = ap.parse_args()
    size = int(args.gib * (1 << 30))
    cuda = ctypes.CDLL("libcuda.so.1")
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    cuda.cuMemHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
    cuda.cuMemFreeHost.argtypes = [ctypes.c_void_p]
    cuda.cuMemHostRegister_v2.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
    cuda.cuMemHostUnregister.argtypes = [ctypes.c_void_p]
    cuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
    cuda.cuMemcpyHtoD_v2.argtypes = [ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t]
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
    check(cuda.cuCtxSetCurrent(ctx), "set current")
    device_buffer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(device_buffer), size), "cuMemAlloc")

    def copy_rate(pointer):
        best = 0.0
        for _ in range(2):
            t = time.monotonic()
            check(cuda.cuMemcpyHtoD_v2(device_buffer.value, pointer, size), "copy")
            best = max(best, size / (time.monotonic() - t) / 1e9)
        return best

    results = {"gib": args.gib, "threads": args.threads}

    t = time.monotonic()
    p = ctypes.c_void_p()
    check(cuda.cuMemHostAlloc(ctypes.byref(p), size, 0), "cuMemHostAlloc")
    took = time.monotonic() - t
    results["host_alloc"] = {"s": took, "gbps": size / took / 1e9, "copy_gbps": copy_rate(p.value)}
    check(cuda.cuMemFreeHost(p), "free")

    chunk = size // args.threads
    pointers = [ctypes.c_void_p() for _ in range(args.threads)]
    errors = []

    def alloc(i):
        check(cuda.cuCtxSetCurrent(ctx), "set current")
        r = cuda.cuMemHostAlloc(ctypes.byref(pointers[i]), chunk, 0)
        if r:
            errors.append(r)

    t = time.monotonic()
    in_threads(alloc, args.threads)
    took = time.monotonic() - t
    results["host_alloc_parallel"] = {"s": took, "gbps": chunk * args.threads / took / 1e9, "errors": errors}
    for q in pointers:
        if q.value:
            cuda.cuMemFreeHost(q)

    def register_way(name, started, addr):
        """Registers memory mapped and populated since `started`; records, then frees it."""
        populated = time.monotonic() - started
        check(cuda.cuMemHostRegister_v2(addr, size, 0), "register")
        took = time.monotonic() - started
        results[name] = {"s": took, "populate_s": populated, "gbps": size / took / 1e9,
                         "copy_gbps": copy_rate(addr)}
        cuda.cuMemHostUnregister(addr)
        libc.munmap(addr, size)

    t = time.monotonic()
    register_way("register_populated", t, libc.mmap(None, size, PROT_RW, MAP_PRIVATE_ANON | MAP_POPULATE, -1, 0))

    t = time.monotonic()
    addr = libc.mmap(None, size, PROT_RW, MAP_PRIVATE_ANON, -1, 0)
    libc.madvise(addr, size, MADV_HUGEPAGE)
    in_threads(lambda i: ctypes.memset(addr + i * chunk, 0, chunk), args.threads)
    register_way("register_hugepages", t, addr)
    try:
        results["thp"] = open("/sys/kernel/mm/transparent_hugepage/enabled").read().strip()
    except OSError:
        pass
    print(json.dumps(results))


if __name__ == "__main__":
    main()
