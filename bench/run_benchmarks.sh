#!/usr/bin/env bash
# Runs every benchmark natively and under gshare, alternating, and writes
# OUTDIR/results.json and OUTDIR/results.md (medians, ratios, targets).
#
# usage: bench/run_benchmarks.sh OUTDIR
#
# Environment:
#   BENCH_BUILD_DIR  the CMake build directory (default: <repo>/build), with
#                     libgshare.so and bench/bench_{launch_rate,alloc_free}
#   TRIALS            trials per mode (default 9)
#   PYTHON            interpreter with PyTorch (default python3)
#   BENCH_COMMIT      the commit to record (default: the checkout's HEAD)
#   LAUNCHES, PAIRS, TRAIN_SECONDS
#                     sizes of the runs (defaults 200000, 20000, 4), to make a
#                     quick trial run shorter
#
# Each trial runs each benchmark once natively and once under
# LD_PRELOAD=libgshare.so with its own GSHARE_DIR; the order flips every
# trial (native first, then gshare first, ...) so that drift of the machine
# falls on both sides alike. alloc_free runs a third time under
# GSHARE_PAGING=on (mode "paging"): what paging costs an allocation.
# Raw output lands in OUTDIR/raw/.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: $0 OUTDIR" >&2
  exit 2
fi
outdir=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
build=${BENCH_BUILD_DIR:-$repo/build}
trials=${TRIALS:-9}
python=${PYTHON:-python3}
launches=${LAUNCHES:-200000}
pairs=${PAIRS:-20000}
train_seconds=${TRAIN_SECONDS:-4}
library=$build/libgshare.so
launch_rate=$build/bench/bench_launch_rate
alloc_free=$build/bench/bench_alloc_free

for file in "$library" "$launch_rate" "$alloc_free"; do
  if [[ ! -x $file && ! -f $file ]]; then
    echo "run_benchmarks: $file is missing; build first (cmake --build $build)" >&2
    exit 1
  fi
done
if ! device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>&1); then
  echo "run_benchmarks: no GPU (nvidia-smi: $device)" >&2
  exit 1
fi

mkdir -p "$outdir/raw"
outdir=$(cd "$outdir" && pwd)
rm -f "$outdir"/raw/* "$outdir/failures.txt"
head -n 1 <<<"$device" >"$outdir/device.txt"
"$python" -c 'import torch; print(torch.__version__)' >"$outdir/torch_version.txt" 2>/dev/null || true
# BENCH_COMMIT names the build's commit where the checkout's own history is
# not the build's (a copied working tree on a lent GPU machine).
if [[ -n "${BENCH_COMMIT:-}" ]]; then
  echo "$BENCH_COMMIT" >"$outdir/commit.txt"
else
  git -C "$repo" rev-parse HEAD >"$outdir/commit.txt" 2>/dev/null || rm -f "$outdir/commit.txt"
fi

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gshare-bench.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# run_one NAME MODE TRIAL COMMAND...: one run, stdout to raw/NAME.MODE.TRIAL.jsonl.
run_one() {
  local name=$1 mode=$2 trial=$3
  shift 3
  local stem=$outdir/raw/$name.$mode.$trial
  local started=$SECONDS status=0
  if [[ $mode == gshare || $mode == paging ]]; then
    local dir paging=off
    [[ $mode == paging ]] && paging=on
    dir=$(mktemp -d "$scratch/dir.XXXXXX")
    env -u GSHARE_MEM_LIMIT -u GSHARE_DISABLE GSHARE_DIR="$dir" GSHARE_PAGING=$paging LD_PRELOAD="$library" \
      timeout 180 "$@" >"$stem.jsonl" 2>"$stem.log" || status=$?
    # A run that left no region was not under gshare: its numbers would
    # pass for gshare's while measuring native. Stop rather than mislead.
    if [[ $status -eq 0 ]] && ! compgen -G "$dir/gshare-*" >/dev/null; then
      echo "run_benchmarks: $name left no region in $dir: gshare was not active" >&2
      cat "$stem.log" >&2
      exit 1
    fi
    rm -rf "$dir"
  else
    env -u LD_PRELOAD timeout 180 "$@" >"$stem.jsonl" 2>"$stem.log" || status=$?
  fi
  if [[ $status -ne 0 ]]; then
    echo "$name $mode trial $trial exited $status: $(tail -n 1 "$stem.log")" | tee -a "$outdir/failures.txt" >&2
    rm -f "$stem.jsonl"
  fi
  printf '  %-12s %-6s %3ds\n' "$name" "$mode" $((SECONDS - started))
}

echo "device: $(cat "$outdir/device.txt"); $trials trials per mode; output in $outdir"
for ((trial = 1; trial <= trials; trial++)); do
  if ((trial % 2)); then modes=(native gshare); else modes=(gshare native); fi
  echo "trial $trial/$trials (${modes[*]})"
  for mode in "${modes[@]}"; do
    run_one launch_rate "$mode" "$trial" "$launch_rate" --launches "$launches" --burst 1000
  done
  for mode in "${modes[@]}" paging; do
    run_one alloc_free "$mode" "$trial" "$alloc_free" --pairs "$pairs" --mib 1 --mib 64
  done
  for mode in "${modes[@]}"; do
    run_one train_steps "$mode" "$trial" "$python" "$here/train_steps.py" rate --seconds "$train_seconds" --warmup 30
  done
done

"$python" "$here/summarize.py" "$outdir"
if [[ -s $outdir/failures.txt ]]; then
  echo "run_benchmarks: some runs failed (see $outdir/failures.txt)" >&2
  exit 1
fi
