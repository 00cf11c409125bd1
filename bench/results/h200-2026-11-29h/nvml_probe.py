"""Probe NVML per-process utilization: sample period, latency, meaning under
time slicing and under gshare's turns. Writes JSON lines to stdout."""
import ctypes, json, os, subprocess, sys, threading, time

WORK = r'''
import sys, time, torch
kind, seconds = sys.argv[1], float(sys.argv[2])
if kind == "busy":
    w, d, b = 4096, 6, 2048
else:
    w, d, b = 256, 4, 512
layers = []
for _ in range(d):
    layers += [torch.nn.Linear(w, w), torch.nn.ReLU()]
m = torch.nn.Sequential(*layers).cuda()
opt = torch.optim.SGD(m.parameters(), lr=1e-4)
x = torch.randn(b, w, device="cuda"); y = torch.randn(b, w, device="cuda")
def step():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = torch.nn.functional.mse_loss(m(x).float(), y)
    opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); return loss.item()
for _ in range(20): step()
t0 = time.monotonic(); n = 0
while time.monotonic() - t0 < seconds:
    step(); n += 1
print(f"WORKER pid={__import__('os').getpid()} kind={kind} steps={n} rate={n/seconds:.1f}", flush=True)
'''

class Sample(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_uint), ("timeStamp", ctypes.c_ulonglong), ("smUtil", ctypes.c_uint),
                ("memUtil", ctypes.c_uint), ("encUtil", ctypes.c_uint), ("decUtil", ctypes.c_uint)]

nv = ctypes.CDLL("libnvidia-ml.so.1")
assert nv.nvmlInit_v2() == 0
dev = ctypes.c_void_p()
assert nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(dev)) == 0

def query(last):
    count = ctypes.c_uint(0)
    r = nv.nvmlDeviceGetProcessUtilization(dev, None, ctypes.byref(count), ctypes.c_ulonglong(last))
    if r not in (0, 7):
        return r, []
    n = max(count.value, 1) + 8
    arr = (Sample * n)()
    count = ctypes.c_uint(n)
    r = nv.nvmlDeviceGetProcessUtilization(dev, arr, ctypes.byref(count), ctypes.c_ulonglong(last))
    return r, [(s.pid, s.timeStamp, s.smUtil, s.memUtil) for s in arr[: count.value]] if r == 0 else []

def scenario(name, kinds, env, seconds=8.0):
    procs = []
    for k in kinds:
        procs.append(subprocess.Popen([sys.executable, "-c", WORK, k, str(seconds)], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    pids = {p.pid: k for p, k in zip(procs, kinds)}
    polls = []
    last = 0
    t_start = time.time()
    while any(p.poll() is None for p in procs):
        t = time.time()
        t0 = time.perf_counter()
        r, s = query(last)
        dt = time.perf_counter() - t0
        if s:
            last = max(last, max(x[1] for x in s))
        polls.append({"t": t - t_start, "r": r, "us": dt * 1e6, "s": s})
        time.sleep(0.02)
    outs = [p.communicate()[0] for p in procs]
    # summary per pid
    per = {}
    for p in polls:
        for pid, ts, sm, mem in p["s"]:
            per.setdefault(pid, []).append((ts, sm))
    summ = {}
    for pid, xs in per.items():
        xs.sort()
        tss = [x[0] for x in xs]
        gaps = [b - a for a, b in zip(tss, tss[1:])]
        gaps.sort()
        steady = [sm for ts, sm in xs[len(xs)//4:]]  # skip warm-up quarter
        summ[str(pid)] = {"kind": pids.get(pid, "?"), "n": len(xs), "gap_med_us": gaps[len(gaps)//2] if gaps else None,
                          "sm_mean": sum(steady)/len(steady) if steady else None,
                          "sm_series": [sm for ts, sm in xs][-60:]}
    print(json.dumps({"scenario": name, "polls": len(polls), "query_us_med": sorted(p["us"] for p in polls)[len(polls)//2],
                      "nonempty_polls": sum(1 for p in polls if p["s"]), "per_pid": summ,
                      "workers": [o.strip().splitlines()[-1] if o.strip() else "" for o in outs]}), flush=True)

lib = sys.argv[1]
native = dict(os.environ)
gs = dict(os.environ, LD_PRELOAD=lib, GSHARE_POLICY="fair")
r, s = query(0)
print(json.dumps({"initial": r, "n": len(s)}), flush=True)
scenario("busy1-native", ["busy"], native)
scenario("small1-native", ["small"], native)
scenario("busy4-native", ["busy"] * 4, native)
scenario("busy4-gshare", ["busy"] * 4, gs)
scenario("small4-native", ["small"] * 4, native)
scenario("small4-gshare", ["small"] * 4, gs)
scenario("mix2+2-gshare", ["busy", "busy", "small", "small"], gs)
scenario("mix2+2-native", ["busy", "busy", "small", "small"], native)
