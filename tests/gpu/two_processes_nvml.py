"""Two PyTorch processes on one GPU: gshare's per-process memory matches NVML.

The parent starts two children under the preload (same GSHARE_DIR), which
hold different amounts of tensors (3 GiB and 5 GiB), run cuBLAS matmuls,
and then wait. After 3 s, and again each second for up to 12 s (gshare
refreshes each process's driver context memory from NVML once a second
while it changes, every 8 s once it is stable), the parent compares, for each child,
gshare-top's used_bytes with NVML's usedGpuMemory for that pid: they must
agree within 2%. used_bytes = what gshare saw allocated + its estimate of
the driver's per-context memory (CUDA context, cuBLAS, module images), so
this checks that both the ledger and the estimate are right, per process,
with another process beside it.

The parent itself never touches CUDA; it reads NVML through ctypes, as
pynvml may not be installed.
"""

import ctypes
import os
import subprocess
import sys
import time

from gshare_gpu import GiB, MiB, describe_process, top_process, top_snapshot

CHILD_GIB = (3, 5)
TOLERANCE = 0.02
NVML_VALUE_NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF


def child(gib):
    """Hold `gib` GiB of tensors, use cuBLAS, report, then wait for stdin to close."""
    import torch

    held = [torch.ones(GiB // 4, device="cuda") for _ in range(gib)]  # 1 GiB each
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    for _ in range(20):
        a = torch.tanh(a @ b)
    torch.cuda.synchronize()
    assert all(float(t[-1]) == 1.0 for t in held) and bool(torch.isfinite(a).all())
    print(f"READY {os.getpid()} {torch.cuda.memory_reserved()}", flush=True)
    sys.stdin.read()


class ProcessInfo(ctypes.Structure):
    """nvmlProcessInfo_t, as nvmlDeviceGetComputeRunningProcesses_v3 fills it."""
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


def nvml_used_by_pid(gpu_uuid):
    """{pid: usedGpuMemory} of the compute processes NVML lists on the GPU."""
    nvml = ctypes.CDLL("libnvidia-ml.so.1")

    def check(result, call):
        assert result == 0, f"{call} returned NVML error {result}"

    check(nvml.nvmlInit_v2(), "nvmlInit_v2")
    try:
        device = ctypes.c_void_p()
        if gpu_uuid.startswith("GPU-"):
            check(nvml.nvmlDeviceGetHandleByUUID(gpu_uuid.encode(), ctypes.byref(device)),
                  f"nvmlDeviceGetHandleByUUID({gpu_uuid})")
        else:
            check(nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)),
                  "nvmlDeviceGetHandleByIndex_v2(0)")
        infos = (ProcessInfo * 256)()
        count = ctypes.c_uint(len(infos))
        check(nvml.nvmlDeviceGetComputeRunningProcesses_v3(device, ctypes.byref(count), infos),
              "nvmlDeviceGetComputeRunningProcesses_v3")
        return {infos[i].pid: infos[i].usedGpuMemory for i in range(count.value)}
    finally:
        nvml.nvmlShutdown()


def start_children():
    """One child per size, under the preload this process was given."""
    return [(gib, subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", str(gib)],
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
            for gib in CHILD_GIB]


def wait_until_ready(children):
    for gib, process in children:
        line = process.stdout.readline()
        if not line.startswith("READY"):
            raise AssertionError(f"the {gib} GiB child (pid {process.pid}) did not get ready: "
                                 f"printed {line!r}, exit status {process.poll()}")
        print(f"child pid {process.pid} holds {gib} GiB of tensors; PyTorch reserves "
              f"{int(line.split()[2]) / MiB:.1f} MiB")


def compare(children):
    """(failures, report lines) of gshare's per-process figures against NVML's."""
    snapshot = top_snapshot()
    gpu, _ = top_process(children[0][1].pid, snapshot)
    nvml_used = nvml_used_by_pid(gpu["uuid"])
    pids = [process.pid for _, process in children]
    if not any(pid in nvml_used for pid in pids):
        print(f"SKIPPED: NVML lists pids {sorted(nvml_used)} but not the children {pids} "
              "(another PID namespace?), so per-process figures cannot be compared")
        sys.exit(77)
    failures, lines = [], []
    for gib, process in children:
        _, entry = top_process(process.pid, snapshot)
        ours = entry["used_bytes"]
        theirs = nvml_used.get(process.pid)
        lines.append(f"{gib} GiB child: {describe_process(entry)}")
        if theirs is None or theirs == NVML_VALUE_NOT_AVAILABLE:
            failures.append(f"NVML has no usedGpuMemory for pid {process.pid}")
            continue
        difference = (ours - theirs) / theirs
        lines.append(f"  gshare used {ours / MiB:.1f} MiB, NVML usedGpuMemory {theirs / MiB:.1f} MiB: "
                     f"{difference * 100:+.2f}%")
        if abs(difference) > TOLERANCE:
            failures.append(f"pid {process.pid}: gshare used_bytes {ours} vs NVML "
                            f"usedGpuMemory {theirs} differ by {difference * 100:+.2f}% "
                            f"(more than {TOLERANCE * 100:.0f}%)")
        if entry["allocated_bytes"] < gib * GiB:
            failures.append(f"pid {process.pid}: gshare counts {entry['allocated_bytes']} bytes "
                            f"allocated, less than its {gib * GiB} bytes of tensors")
    return failures, lines


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        return child(int(sys.argv[2]))
    assert "libgshare" in os.environ.get("LD_PRELOAD", ""), (
        "run this through run_gpu_test.sh: the children must run under the preload")

    children = start_children()
    try:
        wait_until_ready(children)
        # gshare refreshes each process's context memory once a second while
        # it changes, backing off to every 8 s once it is stable: a kernel
        # image loaded lazily after a quiet spell shows within 8 s.
        deadline = time.monotonic() + 12
        time.sleep(3)
        while True:
            failures, lines = compare(children)
            if not failures or time.monotonic() > deadline:
                break
            time.sleep(1)
        print("\n".join(lines))
        assert not failures, "; ".join(failures)
    finally:
        for _, process in children:
            process.stdin.close()
        for _, process in children:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
    for gib, process in children:
        assert process.returncode == 0, f"the {gib} GiB child exited with {process.returncode}"
    print("PASS")


if __name__ == "__main__":
    main()
