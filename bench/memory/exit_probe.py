"""Where a PyTorch process's exit goes: the time from its last line to its
reaping, and when the GPU's used memory drops (NVML, sampled every 5 ms),
for a job that holds GiB of cached memory at its end.

usage: exit_probe.py [--gib N] [--lib LIBGSHARE]
Prints one JSON line per variant:
  exit          plain exit, the cache held to the end
  empty_cache   torch.cuda.empty_cache() before exiting
  os_exit       os._exit(0): no interpreter finalisation
  no_memory     plain exit holding nothing
with "reaped_s" (last line to reaped), "memory_drop_s" (last line to the
GPU's used memory back within 1 GiB of before the job) and, where the
variant has it, "atexit_s" (last line to Python's atexit handlers).
"""
import argparse
import ctypes
import json
import os
import subprocess
import sys
import time

CHILD = r'''
import atexit, os, sys, time, torch
gib, variant = float(sys.argv[1]), sys.argv[2]
atexit.register(lambda: print(f"atexit {time.monotonic():.6f}", flush=True))
if variant != "no_memory":
    x = torch.empty(int(gib * 2**30), dtype=torch.uint8, device="cuda")
    x.fill_(1)
    del x
else:
    torch.zeros(1, device="cuda")
torch.cuda.synchronize()
if variant == "empty_cache":
    torch.cuda.empty_cache()
print(f"done {time.monotonic():.6f}", flush=True)
if variant == "os_exit":
    os._exit(0)
'''


class Nvml:
    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        self.lib.nvmlInit_v2()
        self.handle = ctypes.c_void_p()
        index = int(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
        self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle))

    def used(self):
        class Info(ctypes.Structure):
            _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]
        info = Info()
        self.lib.nvmlDeviceGetMemoryInfo(self.handle, ctypes.byref(info))
        return info.used


def probe(variant, gib, lib, nvml):
    env = dict(os.environ)
    if lib:
        env["LD_PRELOAD"] = lib
    base = nvml.used()
    p = subprocess.Popen([sys.executable, "-c", CHILD, str(gib), variant], env=env,
                         stdout=subprocess.PIPE, text=True)
    done = atexit = None
    for line in p.stdout:
        if line.startswith("done "):
            done = float(line.split()[1])
            break
    drop = None
    while p.poll() is None:
        if drop is None and nvml.used() < base + 2**30:
            drop = time.monotonic()
        time.sleep(0.005)
    reaped = time.monotonic()
    for line in p.stdout:
        if line.startswith("atexit "):
            atexit = float(line.split()[1])
    if drop is None:
        while nvml.used() >= base + 2**30 and time.monotonic() - reaped < 10:
            time.sleep(0.005)
        drop = time.monotonic()
    return {"variant": variant, "gib": gib, "preloaded": bool(lib),
            "reaped_s": round(reaped - done, 4), "memory_drop_s": round(drop - done, 4),
            "atexit_s": round(atexit - done, 4) if atexit else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=40)
    ap.add_argument("--lib", default="")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    nvml = Nvml()
    for _ in range(args.repeat):
        for variant in ("exit", "empty_cache", "os_exit", "no_memory"):
            for lib in ([""] + ([args.lib] if args.lib else [])):
                print(json.dumps(probe(variant, args.gib, lib, nvml)), flush=True)


if __name__ == "__main__":
    main()
