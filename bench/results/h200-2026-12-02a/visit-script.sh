#!/usr/bin/env bash
# One device visit. usage: PARTS="c4 c64 c16 tests launch" bash .gpu/v15.sh
# Knobs: ST trials, M modes for fair, X extra gshare vars, BUD budget s.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
B=${KIT:-$repo/.gpu/build}
O=${OUT:?}
t0=$(date +%s)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$O/device.txt" 2>&1
export SCHED_BUILD_DIR=$B SCHED_COMMIT=${KITC:-$(cat .gpu/commit)}
[[ -n ${X:-} ]] && export SCHED_GSHARE_EXTRA="$X"
fair() { # name configs trials modes
  SCHED_FAIR_CONFIGS=$2 SCHED_TRIALS=$3 SCHED_FAIR_MODES="$4" SCHED_BUDGET_S=${BUD:-520} \
    OUT=$O/$1 bash bench/run_scheduling.sh fair > "$O/$1.log" 2>&1
  echo "$1 rc $? at $(( $(date +%s) - t0 )) s" >> "$O/summary.txt"
}
for p in ${PARTS:?}; do
  case $p in
    c4) fair c4 n4short "${ST:-5}" "${M:-native gshare shared}" ;;
    c64) fair c64 small "${ST:-2}" "${M:-native shared}" ;;
    c_hw) fair c_hw "host w31" "${ST:-2}" "${M:-native gshare exclusive}" ;;
    c16) fair c16 small "${ST:-2}" "${M:-native gshare shared}" ;;
    cn2) fair cn2 n2 "${ST:-2}" "${M:-native gshare pairs}" ;;
    cx) fair cx "${CX:?}" "${ST:-2}" "${M:-native gshare}" ;;
    tests)
      mkdir -p "$O/tests"
      run1() { local n=$1; shift; timeout 300 bash tests/gpu/run_gpu_test.sh "$B/libgshare.so" "$B/tools/gshare-top" "$@" > "$O/tests/$n.log" 2>&1; echo "rc $n $?" >> "$O/tests/summary.txt"; }
      run1 torch_native GSHARE_MEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF= tests/gpu/torch_quota.py
      run1 torch_expandable GSHARE_MEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True tests/gpu/torch_quota.py
      run1 torch_async GSHARE_MEM_LIMIT=4GiB PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync tests/gpu/torch_quota.py
      run1 triton tests/gpu/triton_kernel.py
      run1 graph tests/gpu/cuda_graph.py
      run1 nvml GSHARE_MEM_LIMIT= tests/gpu/two_processes_nvml.py
      run1 torch_ipc_paged GSHARE_PAGING=on tests/gpu/torch_ipc.py
      run1 torch_ipc_plain tests/gpu/torch_ipc.py
      echo "tests done at $(( $(date +%s) - t0 )) s" >> "$O/summary.txt" ;;
    launch)
      mkdir -p "$O/launch"
      for i in 1 2 3 4 5; do
        LD_PRELOAD=$B/libgshare.so GSHARE_DIR=$(mktemp -d) "$B/bench/bench_launch_rate" --launches 100000 --burst 1000 > "$O/launch/lr.gshare.$i" 2>&1
        "$B/bench/bench_launch_rate" --launches 100000 --burst 1000 > "$O/launch/lr.native.$i" 2>&1
      done
      echo "launch done at $(( $(date +%s) - t0 )) s" >> "$O/summary.txt" ;;
  esac
done
cd "$O" && tar czf all.tgz --exclude=all.tgz . 2>/dev/null
cat "$O/summary.txt"
