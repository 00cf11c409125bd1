#!/usr/bin/env bash
# Runs one GPU test script under the preload, or skips it (exit 77) where
# there is no usable GPU, so `ctest` passes on machines without one.
#
# usage: run_gpu_test.sh LIBGSHARE GSHARE_TOP_PATH [VAR=VALUE]... SCRIPT [ARG]...
#
#   LIBGSHARE       path of libgshare.so, preloaded into the script
#   GSHARE_TOP_PATH path of gshare-top, exported as $TEST_GSHARE_TOP for the
#                   script (not a GSHARE_* name: the preload refuses to start
#                   when the environment holds a GSHARE_* variable it does
#                   not know)
#   VAR=VALUE       set in the script's environment; VAR= (empty) unsets VAR
#   SCRIPT          a Python script, run with PYTHONUNBUFFERED=1
#
# Each run gets its own GSHARE_DIR (regions of this test only), removed at
# the end. GPU_TEST_PYTHON picks the interpreter (default python3).
set -u

if [[ $# -lt 3 ]]; then
  echo "usage: $0 LIBGSHARE GSHARE_TOP_PATH [VAR=VALUE]... SCRIPT [ARG]..." >&2
  exit 2
fi
library=$1
top=$2
shift 2

settings=()
while [[ $# -gt 0 && $1 =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; do
  settings+=("$1")
  shift
done
if [[ $# -lt 1 ]]; then
  echo "run_gpu_test.sh: no script given" >&2
  exit 2
fi
script=$1
shift
python=${GPU_TEST_PYTHON:-python3}

# TEST_SKIP_REASON_FILE (set by CMake): where the reason goes for ctest to
# print after its summary (tests/gpu/print_skip_reasons.cmake); a skipped
# test's own output shows only under ctest -V.
reason_file=${TEST_SKIP_REASON_FILE:-}
unset TEST_SKIP_REASON_FILE
record_skip() {
  [[ -n $reason_file ]] || return 0
  mkdir -p "$(dirname "$reason_file")" && printf '%s\n' "$1" >"$reason_file"
}
[[ -z $reason_file ]] || rm -f "$reason_file"

skip() {
  echo "SKIPPED: no GPU here ($1); GPU tests run on a machine with an NVIDIA GPU"
  record_skip "no GPU here ($1)"
  exit 77
}

# Missing build outputs are a broken build, not a missing GPU: fail.
for file in "$library" "$top" "$script"; do
  if [[ ! -e $file ]]; then
    echo "FAIL: $file does not exist (build the project first)" >&2
    exit 1
  fi
done

if ! command -v nvidia-smi >/dev/null 2>&1; then
  skip "nvidia-smi not found"
fi
if ! gpus=$(nvidia-smi -L 2>&1) || [[ -z $gpus ]]; then
  skip "nvidia-smi -L failed: $(head -n 1 <<<"$gpus")"
fi
# Checked without the preload: this asks whether the machine can run the
# test at all, not whether gshare works.
torch_check='
import sys
try:
    import torch
except Exception as error:
    print(f"PyTorch cannot be imported: {type(error).__name__}: {error}")
    sys.exit(1)
if not torch.cuda.is_available():
    print("torch.cuda.is_available() is False")
    sys.exit(1)
'
if ! reason=$(env -u LD_PRELOAD "$python" -c "$torch_check" 2>&1); then
  skip "$(tail -n 1 <<<"$reason")"
fi

test_dir=$(mktemp -d "${TMPDIR:-/tmp}/gshare-gpu-test.XXXXXX") || exit 1
trap 'rm -rf "$test_dir"' EXIT

for setting in "${settings[@]}"; do
  name=${setting%%=*}
  value=${setting#*=}
  if [[ -z $value ]]; then
    unset "$name"
  else
    export "$name=$value"
  fi
done

export GSHARE_DIR=$test_dir
export TEST_GSHARE_TOP=$top
export PYTHONUNBUFFERED=1
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
echo "$(head -n 1 <<<"$gpus"); GSHARE_DIR=$test_dir; ${settings[*]:-no extra settings}"
LD_PRELOAD=$library "$python" "$script" "$@" 2>&1 | tee "$test_dir/output"
status=${PIPESTATUS[0]}
if [[ $status -eq 77 ]]; then
  echo "(the script skipped itself)"
  record_skip "the script skipped itself: $(grep -v '^$' "$test_dir/output" | tail -n 1)"
fi
exit "$status"
