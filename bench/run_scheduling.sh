#!/usr/bin/env bash
# gshare's scheduling benchmarks on a real GPU, each against the same jobs
# run natively (concurrently, no gshare) in the same run. See
# bench/sched/README.md for what each part measures.
#
# usage: OUT=DIR bash bench/run_scheduling.sh PART
#   PART: alone | fair | quantum | priority | handover | mix | all
#
# Each PART writes OUT/sched-PART.json and OUT/sched-PART.md (and raw
# per-job files under OUT/sched-raw/PART/). A PART keeps its experiments
# within SCHED_BUDGET_S seconds, skipping what would not fit; by default
# 480 s less what this script spent before starting the part's python
# (checks, building the probe), so that one PART ends within about 9
# minutes whatever happens (typically 2.5-6 minutes). `all` runs every
# part in turn, each with its own budget.
#
# Environment (all optional but OUT):
#   OUT              output directory (created if missing)
#   SCHED_BUILD_DIR  build directory with libgshare.so, tools/gshare-top,
#                    tools/gshare-sim (default: <repo>/build)
#   PYTHON           interpreter with PyTorch for the jobs (default python3)
#   NVCC             nvcc for the handover probe (default: nvcc in PATH,
#                    else /usr/local/cuda/bin/nvcc)
#   SCHED_BUDGET_S   seconds of experiments per part (default: see above)
#   SCHED_MPS=1      every job runs as a client of an MPS daemon of the
#                    part's own (bench/sched/common.py)
#   SCHED_DRY_RUN=1  jobs sleep instead of using the GPU (no GPU, PyTorch,
#                    nvcc needed): tries the scripts; measures nothing
#   and the SCHED_* variables of bench/sched/common.py and of each part.
set -euo pipefail

usage() {
  echo "usage: OUT=DIR bash $0 alone|fair|quantum|priority|handover|mix|all" >&2
}

if [[ $# -ne 1 ]]; then
  usage
  exit 2
fi
part=$1
case $part in
  alone | fair | quantum | priority | handover | mix | all) ;;
  *)
    usage
    exit 2
    ;;
esac
if [[ -z ${OUT:-} ]]; then
  echo "run_scheduling: set OUT to an output directory" >&2
  usage
  exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
sched=$here/sched
build=${SCHED_BUILD_DIR:-$repo/build}
python=${PYTHON:-python3}
dry=${SCHED_DRY_RUN:-0}
user_budget=${SCHED_BUDGET_S:-}

say() {
  printf '[%(%H:%M:%S)T] run_scheduling: %s\n' -1 "$*"
}

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")
export OUT SCHED_BUILD_DIR=$build PYTHON=$python

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gshare-sched-run.XXXXXX")
child=""

# On any exit: end the running part's whole process group (the part's
# python and every job it started), then remove the scratch directory.
cleanup() {
  local status=$?
  trap - EXIT INT TERM HUP
  if [[ -n $child ]]; then
    kill -TERM -- "-$child" 2>/dev/null || true
    for _ in $(seq 50); do
      kill -0 -- "-$child" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$child" 2>/dev/null || true
  fi
  rm -rf "$scratch"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# Job control: each background job gets a process group of its own, so the
# part's python and its jobs can be killed together, and only them.
set -m

# run_group COMMAND...: runs COMMAND in its own process group and waits;
# returns its status. Whatever the group leaves behind is killed.
run_group() {
  local status=0
  "$@" &
  child=$!
  wait "$child" || status=$?
  kill -KILL -- "-$child" 2>/dev/null || true
  child=""
  return "$status"
}

# -- checks ------------------------------------------------------------
if [[ $dry != 1 ]]; then
  if [[ ! -f $build/libgshare.so ]]; then
    echo "run_scheduling: $build/libgshare.so is missing; build first (cmake --build $build)" >&2
    exit 1
  fi
  if ! device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1); then
    echo "run_scheduling: no GPU (nvidia-smi: $device)" >&2
    exit 1
  fi
  say "device: $(head -n 1 <<<"$device")"
  if [[ $part != handover ]]; then
    if ! run_group timeout 60 "$python" -c \
      'import torch, sys; print(torch.__version__); sys.exit(0 if torch.cuda.is_available() else 3)' \
      >"$scratch/torch.txt" 2>&1; then
      echo "run_scheduling: $python has no PyTorch with CUDA: $(tail -n 1 "$scratch/torch.txt")" >&2
      exit 1
    fi
    say "PyTorch $(tail -n 1 "$scratch/torch.txt")"
  fi
fi

# -- the handover probe ------------------------------------------------
probe=$scratch/handover_probe
build_probe() {
  if [[ $dry == 1 ]]; then
    return 0
  fi
  local nvcc=${NVCC:-}
  if [[ -z $nvcc ]]; then
    nvcc=$(command -v nvcc || true)
    [[ -n $nvcc ]] || nvcc=/usr/local/cuda/bin/nvcc
  fi
  local log=$OUT/sched-handover-nvcc.log
  say "building handover_probe with $nvcc"
  if run_group timeout 120 "$nvcc" -O2 -arch=native -o "$probe" "$sched/handover_probe.cu" >"$log" 2>&1; then
    return 0
  fi
  say "nvcc -arch=native failed ($(tail -n 1 "$log")); trying -arch=sm_90"
  if run_group timeout 120 "$nvcc" -O2 -arch=sm_90 -o "$probe" "$sched/handover_probe.cu" >>"$log" 2>&1; then
    return 0
  fi
  echo "run_scheduling: cannot build handover_probe (see $log)" >&2
  return 1
}

# budget CLOCK: the part's budget, its clock having started at CLOCK ($SECONDS).
budget() {
  if [[ -n $user_budget ]]; then
    echo "$user_budget"
  else
    local left=$((480 - (SECONDS - $1)))
    echo $((left < 30 ? 30 : left))
  fi
}

# run_part PART CLOCK: one part, whose time counts from CLOCK ($SECONDS);
# its python writes OUT/sched-PART.{json,md}.
run_part() {
  local name=$1 clock=$2 started=$SECONDS status=0
  say "part $name: starting"
  case $name in
    handover)
      if build_probe; then
        run_group env "SCHED_BUDGET_S=$(budget "$clock")" \
          "$python" "$sched/handover.py" --probe "$probe" || status=$?
      else
        # Still write the part's summary, saying why nothing ran.
        run_group "$python" "$sched/handover.py" --build-failed "$OUT/sched-handover-nvcc.log" || true
        status=1
      fi
      ;;
    *)
      run_group env "SCHED_BUDGET_S=$(budget "$clock")" "$python" "$sched/$name.py" || status=$?
      ;;
  esac
  say "part $name: finished with status $status after $((SECONDS - started)) s"
  return "$status"
}

if [[ $part == all ]]; then
  failed=()
  for name in alone fair quantum priority handover mix; do
    run_part "$name" "$SECONDS" || failed+=("$name")
  done
  if ((${#failed[@]})); then
    say "parts that failed: ${failed[*]} (see $OUT/sched-*.md)"
    exit 1
  fi
  say "all parts done; results in $OUT/sched-*.md"
else
  run_part "$part" 0
fi
