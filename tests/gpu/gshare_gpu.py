"""Helpers shared by the GPU tests: reading gshare-top's JSON snapshot.

The tests run under LD_PRELOAD=libgshare.so with a private GSHARE_DIR and
$TEST_GSHARE_TOP naming the gshare-top binary (run_gpu_test.sh sets all three).
"""

import json
import os
import subprocess

GiB = 1 << 30
MiB = 1 << 20


def environment_without_preload():
    """The environment for helper programs: gshare-top reads the regions and
    must not itself be a gshare process."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    return env


def top_snapshot():
    """gshare-top --json over this test's GSHARE_DIR, parsed."""
    command = [os.environ["TEST_GSHARE_TOP"], "--json", "--dir", os.environ["GSHARE_DIR"]]
    result = subprocess.run(command, capture_output=True, text=True,
                            env=environment_without_preload(), timeout=30)
    assert result.returncode == 0, (
        f"{' '.join(command)} exited {result.returncode}: {result.stderr.strip()}")
    return json.loads(result.stdout)


def top_process(pid, snapshot=None):
    """(gpu, process) entries of gshare-top for `pid`; fails if absent."""
    snapshot = snapshot if snapshot is not None else top_snapshot()
    for gpu in snapshot.get("gpus", []):
        for process in gpu.get("processes", []):
            if process["pid"] == pid:
                return gpu, process
    raise AssertionError(
        f"pid {pid} is not in gshare-top's snapshot of {os.environ['GSHARE_DIR']} "
        f"(is the preload active?):\n{json.dumps(snapshot, indent=1)}")


def launches(pid):
    """gshare's cumulative launch count for `pid` (kernels + graphs)."""
    return top_process(pid)[1]["launches"]


def describe_process(process):
    """One line of the memory figures gshare keeps for a process."""
    return (f"pid {process['pid']}: used {process['used_bytes'] / MiB:.1f} MiB = "
            f"allocated {process['allocated_bytes'] / MiB:.1f} MiB + "
            f"context {process['context_bytes'] / MiB:.1f} MiB; "
            f"quota {process['quota_bytes'] / MiB:.1f} MiB; launches {process['launches']}")
