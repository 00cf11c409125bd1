"""The orchestration shared by the scheduling benchmarks (bench/sched/*.py):
environment, process groups and clean-up, the start barrier, the time
budget, progress lines and the result files.

Every part runs as `python3 bench/sched/PART.py` (bench/run_scheduling.sh
does it) and reads its configuration from the environment:

  OUT                output directory (required): PART writes
                     OUT/sched-PART.json and OUT/sched-PART.md, raw per-job
                     files under OUT/sched-raw/PART/
  SCHED_BUILD_DIR    build directory with libgshare.so and tools/ (default build/)
  SCHED_COMMIT       the commit that build was made from, named in the results
                     (default: the checkout's HEAD, and whether it has changes)
  PYTHON             interpreter for the jobs (default: this one)
  SCHED_BUDGET_S     seconds this part may spend (default 470); an experiment
                     that would not fit is skipped and reported as skipped
  SCHED_TRIALS       trials per experiment (default per part)
  SCHED_WINDOW_S     measured window of each experiment (default per part)
  SCHED_GSHARE_EXTRA extra GSHARE_*=VALUE words for every gshare process,
                     e.g. "GSHARE_IDLE_MS=20 GSHARE_LOG=info"
  SCHED_TRAIN_ARGS   extra arguments for train_steps.py window, e.g. "--batch 4096"
  SCHED_INFER_ARGS   extra arguments for infer_job.py
  SCHED_DRY_RUN=1    jobs sleep instead of using the GPU: tries the
                     orchestration anywhere; the results are not measurements
  SCHED_MPS=1        every job of the part, native and under gshare, runs as
                     a client of an MPS control daemon private to the part
                     (nvidia-cuda-mps-control; its pipe and log directories
                     in the part's scratch directory), stopped at the end

Native runs get the same command without LD_PRELOAD and without any
GSHARE_* variable; gshare runs get LD_PRELOAD=libgshare.so, a fresh private
GSHARE_DIR per experiment (under /dev/shm, or SCHED_SCRATCH) and only the
GSHARE_* variables set here.

Clean-up: every job is started with PR_SET_PDEATHSIG=SIGKILL (it dies with
this process, whatever kills it), jobs check their parent, every wait has a
deadline, and SIGTERM/SIGINT/SIGHUP end the part through the same path that
kills the jobs and writes a summary marked incomplete.
"""

import atexit
import ctypes
import datetime
import json
import os
import pathlib
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, for benchlib

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _load_libc():
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True)
    except OSError:
        return None


_LIBC = _load_libc()
_PR_SET_PDEATHSIG = 1


def _child_setup():
    """Runs in each job between fork and exec: the job gets SIGKILL when
    this process dies, so no job outlives its orchestrator."""
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)


class Interrupted(Exception):
    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


def _env_number(name, default, kind):
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    try:
        return kind(text)
    except ValueError:
        sys.exit(f"{name}={text!r} is not a number")


def env_float(name, default):
    return _env_number(name, default, float)


def env_int(name, default):
    return _env_number(name, default, int)


def env_words(name):
    return shlex.split(os.environ.get(name, ""))


def parse_gshare_extra(text):
    """'GSHARE_A=1 GSHARE_B=x' -> {'GSHARE_A': '1', 'GSHARE_B': 'x'}."""
    extra = {}
    for word in shlex.split(text or ""):
        key, sep, value = word.partition("=")
        if not sep or not key.startswith("GSHARE_"):
            sys.exit(f"SCHED_GSHARE_EXTRA: {word!r} is not GSHARE_NAME=VALUE")
        extra[key] = value
    return extra


def fmt(value, spec=".3f", missing="—"):
    return missing if value is None else format(value, spec)


def tail(path, lines=3):
    try:
        text = pathlib.Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def _run_quietly(argv, timeout=30, env=None):
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
        return done.returncode, done.stdout.strip(), done.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, "", str(error)


def stop_processes(processes):
    """SIGTERM every live process, give them 3 s together, then SIGKILL."""
    alive = [p for p in list(processes) if p.poll() is None]
    for p in alive:
        try:
            p.terminate()
        except OSError:
            pass
    give_up = time.monotonic() + 3
    for p in alive:
        try:
            p.wait(timeout=max(0.0, give_up - time.monotonic()))
        except subprocess.TimeoutExpired:
            try:
                p.kill()
                p.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass


def require_metrics(record, computed):
    """Stores a part's metrics; a run that gave none failed, whatever its jobs said."""
    record["metrics"] = computed
    if record["ok"] and computed is None:
        record["ok"] = False
        record["errors"].append("no usable step times in the job outputs")
    return record


def require_outputs(record, missing):
    """Marks a run failed whose jobs `missing` gave no usable output."""
    if record["ok"] and missing:
        record["ok"] = False
        record["errors"].append(f"no usable output from {', '.join(missing)}")
    return record


def scratch_parent():
    """Where barrier files and the experiments' private GSHARE_DIRs go:
    SCHED_SCRATCH, else /dev/shm (tmpfs, like gshare's default directory:
    no disk writeback under the region's pages), else the usual temp dir."""
    chosen = os.environ.get("SCHED_SCRATCH")
    if chosen:
        return chosen
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK | os.X_OK):
        return "/dev/shm"
    return None


class MpsDaemon:
    """An MPS control daemon of this part's own: its pipe and log
    directories are private, so it neither joins nor disturbs a daemon the
    machine may run, and every job started afterwards (the variables are
    exported to this process's environment) becomes its client."""

    def __init__(self, scratch):
        self.env = {"CUDA_MPS_PIPE_DIRECTORY": str(scratch / "mps-pipe"),
                    "CUDA_MPS_LOG_DIRECTORY": str(scratch / "mps-log")}
        for path in self.env.values():
            os.makedirs(path, exist_ok=True)
        control = shutil.which("nvidia-cuda-mps-control")
        if control is None:
            sys.exit("SCHED_MPS=1: nvidia-cuda-mps-control is not on PATH")
        self.control = control
        code, stdout, stderr = _run_quietly([control, "-d"], env={**os.environ, **self.env})
        if code != 0:
            sys.exit(f"SCHED_MPS=1: {control} -d failed ({code}): {stderr or stdout}")
        os.environ.update(self.env)
        # A client's CUDA_VISIBLE_DEVICES counts among the devices the server
        # sees, which are the daemon's: the part's GPU 3 is the clients' 0.
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        self.visible = visible
        if visible:
            count = len([d for d in visible.split(",") if d.strip()])
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(count))

    def stop(self):
        """Asks the daemon to quit (it stops its server once the clients,
        already killed, are gone); bounded by the quiet runner's timeout."""
        try:
            subprocess.run([self.control], input="quit\n", text=True, capture_output=True,
                           timeout=20, env={**os.environ, **self.env})
        except (OSError, subprocess.TimeoutExpired):
            pass
        for key in self.env:
            os.environ.pop(key, None)
        if self.visible is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = self.visible

    def server_log(self, lines=5):
        return tail(pathlib.Path(self.env["CUDA_MPS_LOG_DIRECTORY"]) / "server.log", lines)


class Context:
    """One part's run: configuration, output paths, live children, budget."""

    def __init__(self, part, clean_raw=True):
        self.part = part
        self.started = time.monotonic()
        self.started_wall = datetime.datetime.now(datetime.timezone.utc)
        out = os.environ.get("OUT", "").strip()
        if not out:
            sys.exit("OUT is not set: export OUT=<output directory>")
        self.out = pathlib.Path(out).resolve()
        self.raw = self.out / "sched-raw" / part
        if clean_raw and self.raw.exists():
            shutil.rmtree(self.raw)
        self.raw.mkdir(parents=True, exist_ok=True)
        self.build = pathlib.Path(os.environ.get("SCHED_BUILD_DIR") or REPO / "build").resolve()
        self.library = self.build / "libgshare.so"
        self.gshare_top = self.build / "tools" / "gshare-top"
        self.python = os.environ.get("PYTHON") or sys.executable
        self.dry_run = os.environ.get("SCHED_DRY_RUN", "0") == "1"
        self.budget_s = env_float("SCHED_BUDGET_S", 470.0)
        # Past the budget, waits are cut here whatever they wait for.
        self.hard_deadline = self.started + self.budget_s + env_float("SCHED_GRACE_S", 40.0)
        self.gshare_extra = parse_gshare_extra(os.environ.get("SCHED_GSHARE_EXTRA", ""))
        # Start-up plus tear-down of an experiment beyond its window; learnt
        # from each experiment run (the largest seen).
        self.overhead_s = env_float("SCHED_STARTUP_S", 25.0)
        self.scratch = pathlib.Path(tempfile.mkdtemp(prefix=f"gshare-sched-{part}.",
                                                     dir=scratch_parent()))
        self.children = set()
        self.render = None
        self.state = None
        self._interrupted = False
        self.mps = None
        if os.environ.get("SCHED_MPS", "0") == "1" and not self.dry_run:
            self.mps = MpsDaemon(self.scratch)
        if not self.dry_run and not self.library.exists():
            sys.exit(f"{self.library} is missing: build first (cmake --build {self.build})")
        self.device = self._device()
        self.commit = self._commit()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_signal)
        atexit.register(self.kill_children)
        self.log(f"device: {self.device}; budget {self.budget_s:.0f} s; raw files in {self.raw}"
                 + ("; DRY RUN (jobs sleep, nothing is measured)" if self.dry_run else "")
                 + ("; every job an MPS client" if self.mps is not None else ""))

    # -- bookkeeping ------------------------------------------------------

    def _on_signal(self, signum, frame):
        if self._interrupted:
            return
        self._interrupted = True
        raise Interrupted(signum)

    def _device(self):
        code, stdout, stderr = _run_quietly(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
        line = stdout.splitlines()[0].strip() if code == 0 and stdout else None
        if self.dry_run:
            return f"dry run, no GPU used ({line or 'nvidia-smi: ' + (stderr or 'unavailable')})"
        return line or f"unknown (nvidia-smi: {stderr or 'no output'})"

    def _commit(self):
        if os.environ.get("SCHED_COMMIT"):
            return os.environ["SCHED_COMMIT"] + " (the library's, as given)"
        code, head, _ = _run_quietly(["git", "-C", str(REPO), "rev-parse", "HEAD"])
        if code != 0 or not head:
            return None
        code, changes, _ = _run_quietly(
            ["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"])
        _, benchmarks, _ = _run_quietly(
            ["git", "-C", str(REPO), "status", "--porcelain", "--",
             str(HERE), str(HERE.parent / "run_scheduling.sh")])
        if code == 0 and changes:
            head += " + uncommitted changes"
        elif benchmarks:
            head += " + uncommitted benchmark files"
        return head

    def elapsed(self):
        return time.monotonic() - self.started

    def log(self, message):
        now = datetime.datetime.now().strftime("%H:%M:%S")
        print(f"[{now} +{self.elapsed():5.0f}s] {self.part}: {message}", flush=True)

    def remaining(self):
        return self.budget_s - self.elapsed()

    def fits(self, estimate_s):
        return estimate_s <= self.remaining()

    def estimate(self, window_s, count=1):
        return count * (window_s + self.overhead_s)

    def learn_overhead(self, wall_s, window_s):
        if wall_s is not None and wall_s > window_s:
            self.overhead_s = max(self.overhead_s if self._learnt else 0.0, wall_s - window_s)
            self._learnt = True

    _learnt = False

    def bounded(self, deadline):
        return min(deadline, self.hard_deadline)

    def kill_children(self):
        stop_processes(self.children)
        self.children = {p for p in self.children if p.poll() is None}

    def cleanup(self):
        self.kill_children()
        if self.mps is not None:
            self.mps.stop()
            self.mps = None
        shutil.rmtree(self.scratch, ignore_errors=True)

    # -- job command lines --------------------------------------------------

    def train_argv(self, window_s):
        argv = [self.python, str(HERE.parent / "train_steps.py"), "window", "--window", str(window_s)]
        argv += env_words("SCHED_TRAIN_ARGS")
        if self.dry_run:
            argv += ["--fake-step-ms", "10", "--warmup-steps", "2"]
        return argv

    def infer_argv(self, window_s):
        argv = [self.python, str(HERE / "infer_job.py"), "--window", str(window_s)]
        argv += env_words("SCHED_INFER_ARGS")
        if self.dry_run:
            argv += ["--fake-ms", "0.5", "--warmup-requests", "2"]
        return argv

    # -- experiments ------------------------------------------------------

    def experiment(self, name, mode, gshare_vars=None):
        return Experiment(self, name, mode, gshare_vars)

    def run_barrier(self, name, mode, jobs, window_s, gshare_vars=None, loader=None,
                    ready_timeout=90.0, exit_grace=60.0, late=None):
        """Starts `jobs` (list of (job name, argv, per-job GSHARE_* dict)),
        waits until all are ready, starts them together at T0 and waits for
        them to finish. Each argv gets --name, --out, --ready-file and
        --start-file appended. `late` maps some jobs to seconds after T0:
        those start only then (their process too, so their set-up and first
        steps run beside the others' steps) and step as soon as warmed up.
        Returns the experiment's record; its "jobs" maps job name to what
        `loader` read from the job's --out file (JSON by default; None for
        a job that failed)."""
        late = late or {}
        self.log(f"{name}: starting {len(jobs)} job(s) ({mode})"
                 + (f", {len(late)} of them late" if late else ""))
        with self.experiment(name, mode, gshare_vars) as exp:
            def argv_of(job, argv):
                return argv + ["--name", job, "--out", str(exp.out_file(job)),
                               "--ready-file", str(exp.ready_file(job)), "--start-file", str(exp.start_file)]
            for job, argv, job_vars in jobs:
                if job not in late:
                    exp.spawn(job, argv_of(job, argv), job_vars)
            if exp.wait_ready([job for job, _, _ in jobs if job not in late], ready_timeout):
                t0 = exp.start()
                self.log(f"{name}: all ready after {exp.wall():.1f} s; "
                         f"running {window_s:g} s from T0")
                spawns = [(t0 + late[job], job, argv_of(job, argv), job_vars)
                          for job, argv, job_vars in jobs if job in late]
                # gshare's view at the barrier, early in the window (who got
                # a first turn), and mid-window.
                exp.wait_exit(t0 + window_s + exit_grace,
                              snapshots={"barrier": t0 - 0.2, "early": t0 + min(3.0, window_s / 4),
                                         "mid": t0 + window_s / 2}, spawns=spawns)
                exp.check_region()
            record = exp.record(loader)
        if record["ok"]:
            self.learn_overhead(record["wall_s"], window_s)
        self.log(f"{name}: {'ok' if record['ok'] else 'FAILED: ' + '; '.join(record['errors'])}"
                 f" ({record['wall_s']:.1f} s)")
        return record

    def run_or_skip(self, state, name, estimate_s, run, **fields):
        """Appends run()'s record to the state if `estimate_s` seconds still
        fit the budget, else a record of `name` skipped (with `fields`);
        then saves the results so far."""
        if self.fits(estimate_s):
            state["records"].append(run())
        else:
            self.log(f"{name}: skipped, {self.remaining():.0f} s left of the budget")
            state["records"].append(skipped(name, **fields))
        self.checkpoint()

    def checkpoint(self):
        """Rewrites the result files from the state so far (marked
        incomplete), so a part killed midway still leaves its results."""
        if self.render is not None and self.state is not None:
            self.save(*self.render(self, self.state, False))

    # -- results ----------------------------------------------------------

    def header(self, complete, notes=()):
        return {
            "part": self.part, "device": self.device, "commit": self.commit,
            "date": self.started_wall.isoformat(timespec="seconds"),
            "elapsed_s": round(self.elapsed(), 1), "budget_s": self.budget_s,
            "dry_run": self.dry_run, "complete": complete,
            "gshare_extra": self.gshare_extra, "notes": list(notes),
            "mps": self.mps is not None,
        }

    def markdown_header(self, title, summary):
        lines = [f"# gshare scheduling: {title}", "",
                 f"- device: {summary['device']}",
                 f"- PyTorch: {summary.get('torch') or 'unknown'}",
                 f"- commit: {summary['commit'] or 'unknown'}",
                 f"- date: {summary['date']}, {summary['elapsed_s']:.0f} s"]
        if summary["gshare_extra"]:
            lines.append(f"- extra gshare variables: {summary['gshare_extra']}")
        if summary.get("mps"):
            lines.append("- **MPS**: every job, native and under gshare, ran as a client of "
                         "an MPS control daemon of the part's own")
        if summary["dry_run"]:
            lines.append("- **DRY RUN: the jobs slept instead of using a GPU; "
                         "these numbers measure nothing**")
        if not summary["complete"]:
            lines.append("- **incomplete: the part stopped before its end**")
        for note in summary["notes"]:
            lines.append(f"- note: {note}")
        lines.append("")
        return lines

    def save(self, summary, markdown):
        for suffix, text in (("json", json.dumps(summary, indent=2) + "\n"), ("md", markdown)):
            path = self.out / f"sched-{self.part}.{suffix}"
            temporary = path.with_name(path.name + ".tmp")
            temporary.write_text(text)
            os.replace(temporary, path)


# A job's GSHARE_* variables that make it run natively in an experiment
# under gshare: the alone part runs one copy of a job each way at once.
NATIVE_JOB = object()


class Experiment:
    """One experiment: its jobs (native or under gshare), its private
    GSHARE_DIR and barrier files, its raw output directory."""

    def __init__(self, ctx, name, mode, gshare_vars=None):
        if mode not in ("native", "gshare"):
            raise ValueError(f"mode {mode!r}")
        self.ctx, self.name, self.mode = ctx, name, mode
        self.dir = ctx.raw / name
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.sync = pathlib.Path(tempfile.mkdtemp(prefix=f"{name}.", dir=ctx.scratch))
        self.gshare_dir = None
        if mode == "gshare":
            self.gshare_dir = self.sync / "gshare"
            self.gshare_dir.mkdir(mode=0o700)
        self.vars = dict(gshare_vars or {})
        self.procs = {}
        self.logs = {}
        self.job_vars = {}
        self.errors = []
        self.t0 = None
        self.started = time.monotonic()
        self.finished = None
        self.snapshots_taken = set()
        self.start_file = self.sync / "start"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def wall(self):
        return (self.finished or time.monotonic()) - self.started

    def out_file(self, job):
        return self.dir / f"{job}.out"

    def log_file(self, job):
        return self.dir / f"{job}.log"

    def ready_file(self, job):
        return self.sync / f"{job}.ready"

    def env(self, job_vars):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GSHARE_") and k != "LD_PRELOAD"}
        env["PYTHONUNBUFFERED"] = "1"
        if self.mode == "gshare" and job_vars is not NATIVE_JOB:
            if self.ctx.library.exists():
                env["LD_PRELOAD"] = str(self.ctx.library)
            env["GSHARE_DIR"] = str(self.gshare_dir)
            env.update(self.ctx.gshare_extra)
            env.update(self.vars)
            env.update(job_vars or {})
        return env

    def fail(self, message):
        self.errors.append(message)

    def spawn(self, job, argv, job_vars=None):
        if job in self.procs:
            raise ValueError(f"job {job} started twice")
        env = self.env(job_vars)
        gshare_env = {k: v for k, v in env.items() if k.startswith("GSHARE_")}
        self.job_vars[job] = gshare_env
        log = open(self.log_file(job), "w")
        mode = "native" if job_vars is NATIVE_JOB else self.mode
        log.write(f"# {' '.join(shlex.quote(a) for a in argv)}\n# {mode} {gshare_env}\n")
        log.flush()
        self.logs[job] = log
        process = subprocess.Popen(argv, cwd=str(REPO), env=env, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT,
                                   preexec_fn=_child_setup, close_fds=True)
        self.procs[job] = process
        self.ctx.children.add(process)
        return process

    def exited_badly(self, jobs):
        for job in jobs:
            code = self.procs[job].poll()
            if code is not None and code != 0:
                return job, code
        return None

    def wait_ready(self, jobs, timeout):
        deadline = self.ctx.bounded(time.monotonic() + timeout)
        while True:
            missing = [job for job in jobs if not self.ready_file(job).exists()]
            if not missing:
                return True
            for job in missing:
                code = self.procs[job].poll()
                if code is not None:
                    self.fail(f"{job} exited ({code}) before it was ready: "
                              f"{tail(self.log_file(job))}")
                    return False
            if time.monotonic() > deadline:
                self.fail(f"{', '.join(missing)} not ready within {timeout:.0f} s")
                return False
            time.sleep(0.05)

    def start(self, lead_s=1.0):
        """Writes T0 (lead_s from now) into the start file, atomically."""
        self.t0 = time.monotonic() + lead_s
        temporary = self.sync / "start.tmp"
        temporary.write_text(f"{self.t0:.9f}\n")
        os.replace(temporary, self.start_file)
        return self.t0

    def wait_exit(self, deadline, snapshots=None, spawns=None):
        """Waits for every job to exit, taking gshare-top snapshots at
        `snapshots` (label: monotonic time) and starting the jobs of
        `spawns` ((monotonic time, job, argv, job_vars) each) on the way."""
        deadline = self.ctx.bounded(deadline)
        pending = sorted(spawns or [], key=lambda spawn: spawn[0])
        while True:
            while pending and time.monotonic() >= pending[0][0]:
                _, job, argv, job_vars = pending.pop(0)
                self.spawn(job, argv, job_vars)
            running = [job for job, p in self.procs.items() if p.poll() is None]
            if not running and not pending:
                break
            bad = self.exited_badly(self.procs)
            if bad and not any(e.startswith(bad[0] + " ") for e in self.errors):
                # One job failing leaves the others waiting on it (the
                # barrier, the GPU): stop them all.
                self.fail(f"{bad[0]} exited ({bad[1]}): {tail(self.log_file(bad[0]))}")
                self.kill_all()
                break
            if time.monotonic() > deadline:
                self.snapshot("timeout")  # what gshare's region said of the stuck jobs
                self.fail(f"timed out: {', '.join(running)} still running; killed")
                self.kill_all()
                break
            for label, at in (snapshots or {}).items():
                if label not in self.snapshots_taken and time.monotonic() >= at:
                    self.snapshots_taken.add(label)
                    self.snapshot(label)
            time.sleep(0.05)
        for job, process in self.procs.items():
            code = process.poll()
            if code not in (0, None) and not any(e.startswith(job + " ") for e in self.errors):
                if code < 0 and self.errors:
                    continue  # killed by us after another failure
                self.fail(f"{job} exited ({code}): {tail(self.log_file(job))}")

    def snapshot(self, label):
        """One gshare-top --json frame into gshare-top-LABEL.json of the raw
        record (at the barrier, early and mid-window; at a timeout, to show
        what the stuck jobs were doing)."""
        if self.mode != "gshare" or self.ctx.dry_run or not self.ctx.gshare_top.exists():
            return
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GSHARE_") and k != "LD_PRELOAD"}
        code, stdout, stderr = _run_quietly(
            [str(self.ctx.gshare_top), "--json", "--dir", str(self.gshare_dir)], timeout=5, env=env)
        (self.dir / f"gshare-top-{label}.json").write_text(
            stdout + "\n" if code == 0 else f"# exit {code}: {stderr}\n{stdout}\n")

    def check_region(self):
        """A gshare run that left no region in its GSHARE_DIR was not under
        gshare: its numbers would pass for gshare's while measuring native."""
        if self.mode != "gshare" or self.ctx.dry_run or self.errors:
            return
        if not any(self.gshare_dir.glob("gshare-*")):
            self.fail(f"no gshare region in {self.gshare_dir}: gshare was not active")

    def kill_all(self):
        stop_processes(self.procs.values())

    def record(self, loader=None):
        self.finished = self.finished or time.monotonic()
        loader = loader or load_json
        jobs = {}
        for job in self.procs:
            path = self.out_file(job)
            result = None
            if path.exists():
                try:
                    result = loader(path)
                except (OSError, ValueError) as error:
                    self.fail(f"{job}: unreadable output {path.name}: {error}")
            elif not self.errors:
                self.fail(f"{job} wrote no output ({tail(self.log_file(job))})")
            jobs[job] = result
        return {"name": self.name, "mode": self.mode, "ok": not self.errors,
                "errors": list(self.errors), "wall_s": round(self.wall(), 2),
                "gshare_env": self.job_vars if self.mode == "gshare" else None,
                "jobs": jobs}

    def close(self):
        self.kill_all()
        self.finished = self.finished or time.monotonic()
        for process in self.procs.values():
            self.ctx.children.discard(process)
        for log in self.logs.values():
            log.close()
        shutil.rmtree(self.sync, ignore_errors=True)


def torch_version(records):
    """The PyTorch version any job of these records reported."""
    for record in records:
        for result in (record.get("jobs") or {}).values():
            if isinstance(result, dict) and result.get("torch"):
                return result["torch"]
    return None


def lean(record):
    """A record without its jobs' raw output (that stays in sched-raw/)."""
    return {k: v for k, v in record.items() if k != "jobs"}


def failures_markdown(records):
    """Lines naming each failed and each skipped experiment."""
    lines = []
    for record in records:
        if record.get("ok") is False:
            lines.append(f"- **{record['name']} failed**: {'; '.join(record['errors'])}")
        elif record.get("skipped"):
            lines.append(f"- {record['name']} skipped: {record['skipped']}")
    if lines:
        lines = ["## Failed or skipped", ""] + lines + [""]
    return lines


def closing_lines(ctx, records, raw="job outputs and logs"):
    """The end of every part's markdown: what failed or was skipped, and
    where the raw files are."""
    return failures_markdown(records) + [f"Raw {raw}: {ctx.raw}/", ""]


def verdict(*flags):
    """A goal's cell: yes when every flag holds, no when one fails, no data
    when one is unknown (None)."""
    if any(flag is None for flag in flags):
        return "no data"
    return "yes" if all(flags) else "**no**"


def load_json(path):
    return json.loads(pathlib.Path(path).read_text())


def skipped(name, reason="not enough time left in the budget", **fields):
    return {"name": name, "ok": None, "skipped": reason, "errors": [], **fields}


def run_part(part, body, render, clean_raw=True):
    """Runs one part: body(ctx, state) runs the experiments, appending to
    state["records"]; render(ctx, state, complete) -> (summary, markdown).
    Exit status: 0 when every experiment that ran succeeded (targets met
    or not), 1 when one failed or the part broke, 128+N on signal N."""
    ctx = Context(part, clean_raw=clean_raw)
    state = {"records": [], "notes": []}
    ctx.render, ctx.state = render, state
    status, complete = 0, False
    try:
        body(ctx, state)
        complete = True
    except Interrupted as stop:
        state["notes"].append(f"stopped by signal {stop.signum}; results are partial")
        status = 128 + stop.signum
    except SystemExit as stop:
        state["notes"].append(f"stopped: {stop}")
        status = stop.code if isinstance(stop.code, int) else 1
    except Exception:  # report, then still write what was measured
        text = traceback.format_exc()
        print(text, file=sys.stderr, flush=True)
        state["notes"].append("the part broke: " + text.strip().splitlines()[-1])
        status = 1
    finally:
        ctx.kill_children()
    try:
        summary, markdown = render(ctx, state, complete)
        ctx.save(summary, markdown)
        print(markdown, flush=True)
    except Exception:
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        status = status or 1
    failed = [r["name"] for r in state["records"] if r.get("ok") is False]
    if failed:
        ctx.log(f"failed experiments: {', '.join(failed)}")
        status = status or 1
    ctx.log(f"wrote {ctx.out}/sched-{part}.json and .md ({ctx.elapsed():.0f} s)")
    ctx.cleanup()
    return status
