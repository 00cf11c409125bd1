#!/usr/bin/env python3
"""gshare under a real single-node Slurm: the SPANK plugin's options reach
the jobs, and two batch jobs share one fake GPU with their own quotas.

usage: slurm_jobs_test.py PLUGIN LIBGSHARE GSHARE_TOP CUDA_CLIENT FAKE_DRIVER_DIR

It starts its own munged (its own key and socket), slurmctld and slurmd on
this host, all in foreground as its children, with a generated slurm.conf
whose every file (state, spool, logs, plugstack.conf, gres.conf) lies in a
fresh temporary directory, on free ports, so it touches no system Slurm and
a second run starts from nothing. The node has gres/shard over a GPU whose
device file is /dev/null (the fake GPU has none; Slurm only needs a file to
count): the jobs ask for --gres=shard:1 as users would.

Checked:
  - a bad --gpu-mem, --gpu-policy or --gpu-weight makes sbatch (and srun)
    fail with the plugin's message, and nothing is queued;
  - a job without --gpu-* options gets no preload, unless plugstack.conf
    says all=1;
  - srun --gpu-mem sets GSHARE_MEM_LIMIT in the step;
  - two sbatch jobs with different --gpu-mem run at once on one region:
    each sees its quota as the GPU's total (cuMemGetInfo) and is refused an
    allocation over it (CUDA_ERROR_OUT_OF_MEMORY), their LD_PRELOAD holds
    libgshare.so once, and gshare-top --json shows both with their quotas;
  - scancel of one: gshare-top's reserved bytes for the GPU drop by what
    that job held within 1 s of scancel's return.

Exit 77 (skipped) when not root or when Slurm's daemons or munged are not
installed. Every wait is bounded; a failure prints the Slurm logs, squeue,
the jobs' output and gshare-top's JSON. The daemons are stopped, and any
process still using the temporary directory is killed, on every exit.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
DAEMON_START_S = 30
JOB_START_S = 30
RECLAIM_S = 1.0
GiB = 1 << 30
CUDA_ERROR_OUT_OF_MEMORY = 2


class Failure(Exception):
    pass


def skip(reason):
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, seconds, probe, interval=0.1):
    """Polls probe() until it returns something true, at most `seconds`."""
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise Failure(f"{what}: not within {seconds} s")
        time.sleep(interval)


class Cluster:
    def __init__(self, plugin, library, top, client, fake_driver_dir):
        self.plugin, self.library, self.top = plugin, library, top
        self.client, self.fake_driver_dir = client, fake_driver_dir
        # /tmp, mode 0755: munged wants its socket's directory searchable by all.
        self.work = tempfile.mkdtemp(prefix="gshare-slurm-")
        os.chmod(self.work, 0o755)
        self.regions = os.path.join(self.work, "regions")
        self.daemons = {}  # name -> Popen
        self.env = dict(os.environ, SLURM_CONF=self.path("slurm.conf"))
        for name in ("SLURM_JOB_ID", "SLURM_JOBID", "LD_PRELOAD"):
            self.env.pop(name, None)
        # The preload refuses a GSHARE_* variable it does not know; keep the
        # caller's own out of the jobs.
        for name in [n for n in self.env if n.startswith("GSHARE_")]:
            del self.env[name]

    def path(self, *parts):
        return os.path.join(self.work, *parts)

    # -- set-up ------------------------------------------------------------
    def write_config(self):
        host = socket.gethostname().split(".")[0]
        node = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, check=True)
        # "NodeName=vm CPUs=2 Boards=1 ... RealMemory=24105": this machine as it is.
        hardware = node.stdout.splitlines()[0].split(" ", 1)[1]
        for d in ("state", "spool", "munge", "fakegpu", "regions"):
            os.makedirs(self.path(d))
        os.chmod(self.path("munge"), 0o755)
        slurm_port, slurmd_port = free_port(), free_port()
        with open(self.path("slurm.conf"), "w") as f:
            f.write(f"""ClusterName=gsharetest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={slurm_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.path("munge", "socket")}
StateSaveLocation={self.path("state")}
SlurmdSpoolDir={self.path("spool")}
SlurmctldPidFile={self.path("slurmctld.pid")}
SlurmdPidFile={self.path("slurmd.pid")}
SlurmctldLogFile={self.path("slurmctld.log")}
SlurmdLogFile={self.path("slurmd.log")}
PlugStackConfig={self.path("plugstack.conf")}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
KillWait=5
GresTypes=gpu,shard
NodeName={host} NodeAddr=127.0.0.1 {hardware} Gres=gpu:1,shard:4 State=UNKNOWN
PartitionName=gshare Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
""")
        # The fake GPU has no device file; /dev/null lets Slurm count it.
        with open(self.path("gres.conf"), "w") as f:
            f.write("AutoDetect=off\nName=gpu File=/dev/null\nName=shard Count=4\n")
        self.write_plugstack(all_jobs=False)
        with open(self.path("munge", "key"), "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(self.path("munge", "key"), 0o600)

    def write_plugstack(self, all_jobs):
        with open(self.path("plugstack.conf"), "w") as f:
            f.write(f"required {self.plugin} dir={self.regions} lib={self.library}"
                    f"{' all=1' if all_jobs else ''}\n")

    def start_daemon(self, name, argv):
        log = open(self.path(f"{name}.out"), "w")
        self.daemons[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, env=self.env,
                                              cwd=self.work)

    def start(self):
        self.write_config()
        munge = self.path("munge")
        self.start_daemon("munged", [
            "munged", "--foreground", f"--socket={munge}/socket", f"--key-file={munge}/key",
            f"--pid-file={munge}/pid", f"--log-file={munge}/log", f"--seed-file={munge}/seed"])
        wait_for("munged's socket", DAEMON_START_S,
                 lambda: self.check_alive() and os.path.exists(f"{munge}/socket"))
        conf = self.path("slurm.conf")
        self.start_daemon("slurmctld", ["slurmctld", "-D", "-f", conf])
        self.start_daemon("slurmd", ["slurmd", "-D", "-f", conf])
        wait_for("the node idle in sinfo", DAEMON_START_S,
                 lambda: self.check_alive() and
                 self.run(["sinfo", "-h", "-o", "%T"], check=False).stdout.strip() == "idle",
                 interval=0.25)

    def check_alive(self):
        for name, daemon in self.daemons.items():
            if daemon.poll() is not None:
                raise Failure(f"{name} exited with {daemon.returncode}")
        return True

    # -- running -----------------------------------------------------------
    def run(self, argv, check=True, env=None, timeout=30):
        result = subprocess.run(argv, capture_output=True, text=True, env=env or self.env,
                                cwd=self.work, timeout=timeout)
        if check and result.returncode != 0:
            raise Failure(f"{' '.join(argv)} exited with {result.returncode}: "
                          f"{result.stderr.strip()}")
        return result

    def queued(self):
        return self.run(["squeue", "-h", "-o", "%i %T"]).stdout.split("\n")[:-1]

    def job_script(self, name, over, hold, directives=""):
        """A batch job: the client over the fake GPU (which a real job would
        not need) reports its environment and memory, is refused `over`,
        holds `hold` and sleeps until cancelled. `directives`: #SBATCH lines."""
        script = self.path(f"{name}.sh")
        with open(script, "w") as f:
            f.write(f"""#!/bin/bash
{directives}export LD_LIBRARY_PATH={self.fake_driver_dir}
export FAKE_CUDA_DIR={self.path("fakegpu")} FAKE_CUDA_UUID_SEED=slurm-{os.getpid()} FAKE_CUDA_MEM=8GiB
echo "env LD_PRELOAD=${{LD_PRELOAD-unset}} GSHARE_DIR=${{GSHARE_DIR-unset}} GSHARE_MEM_LIMIT=${{GSHARE_MEM_LIMIT-unset}} GSHARE_WEIGHT=${{GSHARE_WEIGHT-unset}}"
exec {self.client} init meminfo "alloc {over} over" "alloc {hold} held" pid "sleep 120"
""")
        return script

    def submit(self, argv, env=None):
        result = self.run(["sbatch", "--parsable"] + argv, env=env)
        return result.stdout.strip().split(";")[0]

    def output(self, job):
        try:
            with open(self.path(f"job-{job}.out")) as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def top_json(self):
        result = self.run([self.top, "--json", "--dir", self.regions])
        return json.loads(result.stdout)

    # -- ending ------------------------------------------------------------
    def dump(self):
        print("==== state at the failure", flush=True)
        for name in ("slurmctld.log", "slurmd.log", os.path.join("munge", "log"), "slurmctld.out",
                     "slurmd.out", "munged.out"):
            if name.endswith(".out") and os.path.exists(self.path(name[:-4] + ".log")):
                continue  # the same lines as the log
            try:
                with open(self.path(name)) as f:
                    lines = f.readlines()
                print(f"---- {name} (last 60 lines)")
                print("".join(lines[-60:]), end="")
            except OSError:
                pass
        for argv in (["squeue", "-a", "-o", "%i %j %T %r %b"],
                     [self.top, "--json", "--dir", self.regions]):
            try:
                result = self.run(argv, check=False, timeout=10)
                print(f"---- {' '.join(argv)}\n{result.stdout}{result.stderr}", end="")
            except Exception as e:  # the dump must go on
                print(f"---- {' '.join(argv)}: {e}")
        for name in sorted(os.listdir(self.work)):
            if name.startswith("job-"):
                print(f"---- {name}\n{self.output(name[4:-4])}", end="")
        sys.stdout.flush()

    def stop(self):
        if "slurmctld" in self.daemons and self.daemons["slurmctld"].poll() is None:
            try:
                jobs = [line.split()[0] for line in self.queued()]
                if jobs:
                    self.run(["scancel", "--full"] + jobs, check=False, timeout=10)
                    wait_for("cancelled jobs gone", 15, lambda: not self.queued(), interval=0.2)
            except Exception as e:
                print(f"cleanup: cancelling the jobs: {e}")
        for name in ("slurmd", "slurmctld", "munged"):
            daemon = self.daemons.get(name)
            if daemon is None or daemon.poll() is not None:
                continue
            daemon.terminate()
            try:
                daemon.wait(10)
            except subprocess.TimeoutExpired:
                print(f"cleanup: {name} ignored SIGTERM for 10 s; killing it")
                daemon.kill()
                daemon.wait()
        self.kill_leftovers()
        shutil.rmtree(self.work, ignore_errors=True)

    def kill_leftovers(self):
        """Kills what still uses the temporary directory (a job step or
        slurmstepd that outlived slurmd): only processes this test started
        can name it."""
        me = os.getpid()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == me:
                continue
            pid = int(entry)
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    uses = self.work.encode() in f.read()
                links = [os.readlink(f"/proc/{pid}/cwd")]
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    try:
                        links.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
                    except OSError:
                        pass
                uses = uses or any(link.startswith(self.work) for link in links)
                if uses:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        command = f.read().replace(b"\0", b" ").decode(errors="replace")
                    print(f"cleanup: killing leftover process {pid}: {command}")
                    os.kill(pid, signal.SIGKILL)
            except (OSError, ProcessLookupError):
                pass


def check_bad_options(cluster):
    """A bad value stops the submission with the plugin's message; a held
    job that got through would stay in the queue."""
    before = cluster.queued()
    cases = [
        (["sbatch", "--hold", "--gpu-mem=lots", "--wrap", "sleep 1"],
         "gshare: --gpu-mem=lots is not valid; accepted: a byte count"),
        (["sbatch", "--hold", "--gpu-policy=nope", "--wrap", "sleep 1"],
         "gshare: --gpu-policy=nope is not valid; accepted: fifo, fair, srtf, priority, pack or "
         "prefetch"),
        (["sbatch", "--hold", "--gpu-weight=0", "--wrap", "sleep 1"],
         "gshare: --gpu-weight=0 is not valid; accepted: an integer from 1 to 1000"),
        (["sbatch", "--hold", "--gpu-weight=x", "--wrap", "sleep 1"],
         "gshare: --gpu-weight=x is not valid"),
        (["srun", "--gpu-priority=high", "true"],
         "gshare: --gpu-priority=high is not valid; accepted: an integer from -1000 to 1000"),
    ]
    for argv, message in cases:
        result = cluster.run(argv, check=False)
        if result.returncode == 0 or message not in result.stderr:
            raise Failure(f"{' '.join(argv)}: wanted a failure with {message!r}; got exit "
                          f"{result.returncode}, stdout {result.stdout!r}, stderr "
                          f"{result.stderr!r}")
        print(f"refused as expected: {' '.join(argv)}\n  " +
              "\n  ".join(result.stderr.strip().splitlines()))
    if cluster.queued() != before:
        raise Failure(f"a refused submission was queued: {cluster.queued()}")


def check_plain_job_and_srun(cluster):
    # No --gpu-* option and no all=1: the job runs as it would without gshare.
    plain = cluster.submit(["-o", cluster.path("job-%j.out"), "--wrap",
                            'echo "LD_PRELOAD=${LD_PRELOAD-unset}"'])
    wait_for(f"job {plain}'s output", JOB_START_S,
             lambda: "LD_PRELOAD=" in cluster.output(plain), interval=0.2)
    if cluster.output(plain).strip() != "LD_PRELOAD=unset":
        raise Failure(f"a job without --gpu-* options got {cluster.output(plain).strip()!r}")
    # srun (local context): the option reaches the step's environment.
    step = cluster.run(["srun", "--gpu-mem=1.5GiB", "--gpu-policy=priority", "--gpu-priority=-5",
                        "bash", "-c", 'echo "$GSHARE_MEM_LIMIT $GSHARE_POLICY $GSHARE_PRIORITY '
                        '$LD_PRELOAD $GSHARE_DIR"'])
    want = f"1.5GiB priority -5 {cluster.library} {cluster.regions}"
    if step.stdout.strip() != want:
        raise Failure(f"srun step printed {step.stdout.strip()!r}, wanted {want!r}")
    print(f"srun step's environment: {want}")


def main():
    if len(sys.argv) != 6:
        print(__doc__.splitlines()[3], file=sys.stderr)
        return 2
    plugin, library, top, client, fake_driver_dir = map(os.path.abspath, sys.argv[1:])
    for path in (plugin, library, top, client, fake_driver_dir):
        if not os.path.exists(path):
            print(f"FAIL: {path} does not exist (build the project first)")
            return 1
    if os.geteuid() != 0:
        skip("needs root (it starts slurmctld, slurmd and munged as root, as a node does)")
    for program in ("slurmctld", "slurmd", "munged", "sbatch", "srun", "squeue", "scancel"):
        if shutil.which(program) is None:
            skip(f"{program} not installed (Debian: slurmctld slurmd slurm-client munge)")

    cluster = Cluster(plugin, library, top, client, fake_driver_dir)
    try:
        started = time.monotonic()
        cluster.start()
        print(f"slurmctld and slurmd up in {time.monotonic() - started:.1f} s ({cluster.work})")
        check_bad_options(cluster)
        check_plain_job_and_srun(cluster)

        # Two jobs on one GPU: A with 3 GiB, weight 3 from an #SBATCH line,
        # and an LD_PRELOAD that already names the library; B with a quarter
        # of the 8 GiB GPU.
        quotas = {"A": 3 * GiB, "B": 2 * GiB}
        out = ["-o", cluster.path("job-%j.out"), "--gres=shard:1"]
        env_a = dict(cluster.env, LD_PRELOAD=library)
        job_a = cluster.submit(out + ["--gpu-mem=3GiB", cluster.job_script(
            "A", "3200M", "1G", directives="#SBATCH --gpu-weight=3\n")], env=env_a)
        job_b = cluster.submit(out + ["--gpu-mem=25%", cluster.job_script("B", "2100M", "512M")])
        jobs = {"A": job_a, "B": job_b}
        pids = {}
        for name, job in jobs.items():
            text = wait_for(f"job {name} ({job}) holding its memory", JOB_START_S,
                            lambda: (lambda t: t if "\npid " in t else None)(cluster.output(job)),
                            interval=0.2)
            lines = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
            print(f"job {name} ({job}):\n  " + "\n  ".join(text.splitlines()))
            env = dict(word.split("=", 1) for word in lines["env"].split())
            if env["LD_PRELOAD"] != library or env["GSHARE_DIR"] != cluster.regions:
                raise Failure(f"job {name}'s environment: {lines['env']}")
            total = int(lines["meminfo"].split()[1])
            if total != quotas[name]:
                raise Failure(f"job {name} sees a GPU of {total} bytes, wanted its quota "
                              f"{quotas[name]}")
            if f"alloc err {CUDA_ERROR_OUT_OF_MEMORY}" not in text or "alloc ok held" not in text:
                raise Failure(f"job {name}: wanted the allocation over its quota refused with "
                              f"CUDA_ERROR_OUT_OF_MEMORY and the one under it made")
            pids[name] = int(lines["pid"])
        if "GSHARE_WEIGHT=3" not in cluster.output(job_a):
            raise Failure("job A's #SBATCH --gpu-weight=3 did not reach it")

        # Both in gshare-top, on one GPU, with their quotas.
        view = cluster.top_json()
        if len(view["gpus"]) != 1:
            raise Failure(f"wanted one GPU region, got {len(view['gpus'])}")
        gpu = view["gpus"][0]
        shown = {p["pid"]: p for p in gpu["processes"]}
        for name, pid in pids.items():
            if pid not in shown or shown[pid]["quota_bytes"] != quotas[name]:
                raise Failure(f"gshare-top does not show job {name} (pid {pid}) with quota "
                              f"{quotas[name]}: {shown.get(pid)}")
        print(f"gshare-top: GPU {gpu['uuid']} reserved {gpu['reserved_bytes']}, " + ", ".join(
            f"{name} pid {pid} quota {shown[pid]['quota_bytes']} reserved "
            f"{shown[pid]['reserved_bytes']}" for name, pid in pids.items()))

        # scancel of A: its memory is back within a second.
        held_by_a = shown[pids["A"]]["reserved_bytes"]
        want = gpu["reserved_bytes"] - held_by_a
        if held_by_a < GiB:
            raise Failure(f"job A reserves {held_by_a} bytes, less than the 1 GiB it holds")
        cluster.run(["scancel", job_a])
        cancelled = time.monotonic()
        while True:
            gpu = cluster.top_json()["gpus"][0]
            seen = time.monotonic() - cancelled
            if gpu["reserved_bytes"] <= want:
                break
            if seen > RECLAIM_S:
                raise Failure(f"{seen:.2f} s after scancel the GPU still reserves "
                              f"{gpu['reserved_bytes']} bytes, wanted at most {want}")
        print(f"scancel of job A: reserved {gpu['reserved_bytes']} bytes (A held {held_by_a}) "
              f"seen {seen:.2f} s after scancel returned")
        if [p["pid"] for p in gpu["processes"]] != [pids["B"]]:
            raise Failure(f"after scancel of A, gshare-top shows {gpu['processes']}")

        # all=1: every job gets the preload (slurmstepd reads plugstack.conf
        # at each step's start).
        cluster.write_plugstack(all_jobs=True)
        plain = cluster.submit(["-o", cluster.path("job-%j.out"), "--wrap",
                                'echo "LD_PRELOAD=${LD_PRELOAD-unset} GSHARE_MEM_LIMIT='
                                '${GSHARE_MEM_LIMIT-unset}"'])
        wait_for(f"job {plain}'s output", JOB_START_S,
                 lambda: "LD_PRELOAD=" in cluster.output(plain), interval=0.2)
        if cluster.output(plain).strip() != f"LD_PRELOAD={library} GSHARE_MEM_LIMIT=unset":
            raise Failure(f"with all=1 a job without options got {cluster.output(plain)!r}")
        print(f"with all=1, a job without options: {cluster.output(plain).strip()}")
        print("PASS")
        return 0
    except (Failure, subprocess.SubprocessError, OSError, KeyError, ValueError) as e:
        print(f"FAIL: {type(e).__name__}: {e}", flush=True)
        cluster.dump()
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
