"""What every job process of the scheduling benchmarks shares: the start
barrier, sleeping to a deadline, watching the parent, writing results.

Times are time.monotonic() seconds: CLOCK_MONOTONIC is one clock for every
process on the machine, so a start time written by the orchestrator means
the same instant to every job (and to handover_probe, which reads the same
clock with clock_gettime).

Protocol: a job builds its model and warms up, then creates its ready file;
the orchestrator, once every job is ready, writes the start file (atomically)
holding T0, a moment about a second ahead; each job sleeps until T0 and runs
its measured window from there.
"""

import json
import os
import sys
import time


class JobError(RuntimeError):
    pass


def touch(path):
    """Creates `path` atomically (write a temporary file, then rename)."""
    if not path:
        return
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as f:
        f.write(f"{os.getpid()}\n")
    os.replace(temporary, path)


def write_json(path, record):
    """Writes `record` as JSON to `path` atomically."""
    temporary = f"{path}.tmp{os.getpid()}"
    with open(temporary, "w") as f:
        json.dump(record, f)
        f.write("\n")
    os.replace(temporary, path)


def sleep_until(deadline):
    """Sleeps until time.monotonic() >= deadline: coarse sleeps, then a spin
    over the last two milliseconds (time.sleep overshoots by ~0.1 ms)."""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        if left > 0.002:
            time.sleep(left - 0.0015)


class ParentWatch:
    """Exits the job if the orchestrator that started it has gone (it also
    sets PR_SET_PDEATHSIG; this is the second line of defence)."""

    def __init__(self):
        self.parent = os.getppid()

    def check(self):
        if os.getppid() != self.parent:
            print("job: the orchestrator has gone; exiting", file=sys.stderr, flush=True)
            os._exit(3)


def wait_for_start(start_file, timeout, watch=None):
    """Waits for the start file, returns the T0 it holds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(start_file) as f:
                text = f.read().strip()
            if text:
                return float(text.split()[0])
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            raise JobError(f"no start signal ({start_file}) within {timeout:.0f} s")
        if watch is not None:
            watch.check()
        time.sleep(0.002)


def barrier(ready_file, start_file, timeout, watch=None):
    """Says ready, waits for T0, sleeps until it; returns T0. Without a start
    file (a job run by hand) T0 is now."""
    touch(ready_file)
    if not start_file:
        return time.monotonic()
    t0 = wait_for_start(start_file, timeout, watch)
    sleep_until(t0)
    return t0


def add_common_arguments(parser):
    parser.add_argument("--name", default="job", help="label in the output")
    parser.add_argument("--out", help="write the result JSON here (default: stdout)")
    parser.add_argument("--ready-file", help="create this file once warmed up")
    parser.add_argument("--start-file", help="then wait for this file; it holds T0 (monotonic s)")
    parser.add_argument("--barrier-timeout", type=float, default=300.0,
                        help="give up waiting for the start file after this many seconds")


def emit(args, record):
    if args.out:
        write_json(args.out, record)
    else:
        print(json.dumps(record), flush=True)


def run_main(body):
    """Runs body() and turns a failure into a one-line message and exit 1."""
    try:
        body()
    except JobError as error:
        print(f"job: {error}", file=sys.stderr, flush=True)
        sys.exit(1)


def rounded(values, digits=6):
    return [round(v, digits) for v in values]
