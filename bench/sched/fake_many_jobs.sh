#!/usr/bin/env bash
# Many small jobs under one policy over the fake driver (no GPU): each a
# loop of one 2 ms kernel and a sync (tests/programs/cuda_client), all
# started together; iterations, token time and grants per job over a
# common window, read from gshare-top at its two ends, and the mean time
# from a grant to the new holder's first launch (the wake) in the window.
#
# usage: bench/sched/fake_many_jobs.sh [JOBS [KERNEL_US]]
#   BUILD (default build), POLICY (default fair), WARM_S (8: start-up left
#   out), WINDOW_S (20)
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${BUILD:-$here/build}
jobs=${1:-64}
kernel_us=${2:-2000}
warm=${WARM_S:-8}
window=${WINDOW_S:-20}
run_s=$((warm + window + 10))
dir=$(mktemp -d)
trap 'pkill -P $$ 2>/dev/null; rm -rf "$dir"' EXIT
export GSHARE_DIR=$dir FAKE_CUDA_DIR=$dir FAKE_CUDA_UUID_SEED=many$$ FAKE_CUDA_MEM=80GiB
export GSHARE_POLICY=${POLICY:-fair} LD_LIBRARY_PATH=$build/fake_driver
for i in $(seq "$jobs"); do
  # The loop runs until its time is up or its stdin says more: the sleep
  # keeps stdin quiet until then.
  ( (printf 'init\ntrainfor %s 1 %s sync 0\n' "$run_s" "$kernel_us"; sleep $((run_s + 3)); printf 'exit\n') |
      LD_PRELOAD=$build/libgshare.so "$build/tests/cuda_client" --stdin >"$dir/out$i" 2>"$dir/err$i" ) &
done
sleep "$warm"
"$build/tools/gshare-top" --dir "$dir" --json >"$dir/t1.json"
sleep "$window"
"$build/tools/gshare-top" --dir "$dir" --json >"$dir/t2.json"
python3 - "$dir" <<'PY'
import json, sys
d = sys.argv[1]
first, last = (json.load(open(f"{d}/t{n}.json"))["gpus"][0] for n in (1, 2))
before = {p["pid"]: p for p in first["processes"]}
rows = sorted((p["iterations"] - before[p["pid"]]["iterations"], p["served_ms"] - before[p["pid"]]["served_ms"],
               p["granted"] - before[p["pid"]]["granted"]) for p in last["processes"] if p["pid"] in before)
iters = [r[0] for r in rows]
switches = last["switches"] - first["switches"]
cost_us = (last["switch_ns_total"] - first["switch_ns_total"]) / max(switches, 1) / 1e3
print(f"jobs {len(rows)}: iterations in the window min {iters[0]} median {iters[len(iters) // 2]} "
      f"max {iters[-1]}, slowest/fastest {iters[0] / iters[-1]:.3f}; token ms min {rows[0][1]:.0f} "
      f"max {max(r[1] for r in rows):.0f}; switches {switches}, grant to first launch {cost_us:.0f} us mean")
PY
